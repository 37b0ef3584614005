//! The login token's file, `$HERMES_HOME/web-token` (0600): made once by the daemon at its
//! start, read by the web chat's settings, printed as a URL by `hermes-gateway web-url`,
//! replaced by `web-url --rotate` (which logs every browser out).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::auth::{is_token, new_token};

/// Where the token is kept in the home.
pub fn path(home: &Path) -> PathBuf {
    home.join("web-token")
}

/// The token in `home`, if there is one of the right shape; an error names a file that is
/// there but not a token (edited by hand: it is not trusted, and not silently replaced).
pub fn read(home: &Path) -> io::Result<Option<String>> {
    let path = path(home);
    match fs::read_to_string(&path) {
        Ok(text) if is_token(&text) => Ok(Some(text.trim().to_owned())),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is not a login token the gateway made; `hermes-gateway web-url --rotate` makes a new one",
                path.display()
            ),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The token in `home`, made (0600) if there is none yet: written whole beside, then linked
/// into place, which fails if another process made one first (so nobody ever reads a
/// half-written token, and the first one made is the token).
pub fn ensure(home: &Path) -> io::Result<String> {
    if let Some(token) = read(home)? {
        return Ok(token);
    }
    let token = new_token();
    let beside = home.join(format!(".web-token.{:016x}", rand::random::<u64>()));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&beside)?;
    let linked = file
        .write_all(token.as_bytes())
        .and_then(|_| file.sync_all())
        .and_then(|_| fs::hard_link(&beside, path(home)));
    let _ = fs::remove_file(&beside);
    match linked {
        Ok(()) => Ok(token),
        // Another process made it between our read and our link: theirs is the token.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => read(home)?.ok_or(e),
        Err(e) => Err(e),
    }
}

/// Replace the token with a new one (written beside it, then renamed over it, so a crash
/// leaves the old or the new, never half of one).
pub fn rotate(home: &Path) -> io::Result<String> {
    let token = new_token();
    let beside = home.join(".web-token.new");
    let _ = fs::remove_file(&beside);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&beside)?;
    file.write_all(token.as_bytes())?;
    file.sync_all()?;
    fs::rename(&beside, path(home))?;
    Ok(token)
}

/// The address that logs a browser in: the token rides in the fragment, which browsers
/// never send in a request (no access log, proxy or `Referer` sees it).
pub fn login_url(base: &str, token: &str) -> String {
    format!("{}/#token={token}", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_token_is_made_once_private_and_kept_and_a_hand_edited_one_is_refused() {
        let home = tempfile::tempdir().unwrap();
        assert_eq!(read(home.path()).unwrap(), None);
        let token = ensure(home.path()).unwrap();
        assert_eq!(ensure(home.path()).unwrap(), token, "kept across starts");
        let mode = fs::metadata(path(home.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let rotated = rotate(home.path()).unwrap();
        assert_ne!(rotated, token);
        assert_eq!(read(home.path()).unwrap(), Some(rotated));
        fs::write(path(home.path()), "replace-me").unwrap();
        assert!(ensure(home.path()).is_err(), "not trusted, not replaced");
        assert_eq!(
            login_url("http://127.0.0.1:8090/", "abc"),
            "http://127.0.0.1:8090/#token=abc"
        );
    }
}
