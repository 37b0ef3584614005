//! Opening what the file tools were allowed to touch, and nothing else. A path is checked
//! with its links followed ([`super::Files::checked`]); between that check and the daemon's
//! open (an approval can wait minutes) a confined command can swap a directory on the way
//! for a link to the gateway's home, and the daemon, which is not confined, would follow
//! it. So the resolved path (which has no link in it) is opened with no link allowed
//! anywhere on it (`openat2` with `RESOLVE_NO_SYMLINKS`): a link planted since makes the
//! open fail, and nothing is read or written.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Open `resolved` for reading.
pub fn for_reading(resolved: &Path) -> io::Result<File> {
    open(resolved, libc::O_RDONLY, 0)
}

/// The whole of `resolved`.
pub fn read(resolved: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    for_reading(resolved)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Write `bytes` to `resolved` (made, or replaced), making the directories it needs.
pub fn write(resolved: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = resolved.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = open(
        resolved,
        libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        0o666,
    )?;
    file.write_all(bytes)
}

fn open(resolved: &Path, flags: libc::c_int, mode: libc::mode_t) -> io::Result<File> {
    let error = match crate::nofollow::open(resolved, flags, mode) {
        Ok(fd) => return Ok(File::from(fd)),
        Err(error) => error,
    };
    match error.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::EXDEV) => Err(io::Error::other(format!(
            "{} has a link on its way that was not there when it was checked; nothing was done",
            resolved.display()
        ))),
        // Before Linux 5.6: the last part not followed, and where the file really is
        // checked once it is open (truncated only then).
        Some(libc::ENOSYS) => open_and_verify(resolved, flags, mode),
        _ => Err(error),
    }
}

fn open_and_verify(resolved: &Path, flags: libc::c_int, mode: libc::mode_t) -> io::Result<File> {
    let path = CString::new(resolved.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("a path with a NUL byte"))?;
    let untruncated = flags & !libc::O_TRUNC;
    // SAFETY: open(2) with a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            untruncated | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned by the kernel.
    let file = unsafe { File::from_raw_fd(fd) };
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    if opened != resolved {
        return Err(io::Error::other(format!(
            "{} is somewhere else than when it was checked; nothing was done",
            resolved.display()
        )));
    }
    if flags & libc::O_TRUNC != 0 {
        file.set_len(0)?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_planted_on_the_way_after_the_check_stops_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::create_dir(&secret).unwrap();
        std::fs::write(secret.join("config.yaml"), "approvals: manual").unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let checked = work.join("config.yaml");
        write(&checked, b"first").unwrap();
        assert_eq!(read(&checked).unwrap(), b"first");

        // After the check, `work` becomes a link to the secret place.
        std::fs::rename(&work, dir.path().join("work-old")).unwrap();
        std::os::unix::fs::symlink(&secret, &work).unwrap();
        let err = write(&checked, b"approvals: off").unwrap_err();
        assert!(err.to_string().contains("nothing was done"), "{err}");
        assert!(read(&checked).is_err());
        assert_eq!(
            std::fs::read_to_string(secret.join("config.yaml")).unwrap(),
            "approvals: manual"
        );
    }
}
