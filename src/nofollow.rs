//! Opening a path with no link allowed anywhere on it (`openat2` with
//! `RESOLVE_NO_SYMLINKS`): for the daemon's own work in places a confined command can
//! change, where a link planted there must not take the daemon somewhere else (the file
//! tools, the jail's holder taking what it hands back).

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Open `path` with `flags` (and `mode` for a file made), following no link; `Err` with
/// `ELOOP` when there is one on the way, `ENOSYS` before Linux 5.6.
pub fn open(path: &Path, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("a path with a NUL byte"))?;
    // SAFETY: a zeroed `open_how` is valid; its fields are set below.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = u64::from(mode);
    how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2(2) with a NUL-terminated path and a filled `open_how` of its size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
