//! Secrets in the process environment. At start-up, before any other thread exists, every
//! variable whose name marks it a secret (Hermes' rule: the name contains KEY, TOKEN,
//! SECRET, PASSWORD, CREDENTIAL or AUTH) is copied into this module and wiped from the
//! process: its value is overwritten where the kernel shows it (`/proc/<pid>/environ`
//! reads the original environment block, which `unsetenv` alone leaves intact) and the
//! variable is removed. Together with the process being non-dumpable this keeps tokens
//! away from the commands the agent runs, even when the gateway runs as root (where
//! non-dumpable does not stop a child). Configuration reads the copy.

use std::ffi::CString;
use std::sync::OnceLock;

static TAKEN: OnceLock<Vec<(String, String)>> = OnceLock::new();

const MARKERS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"];

/// Whether a variable's name marks it as a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    MARKERS.iter().any(|m| upper.contains(m))
}

/// Move the secret variables out of the process environment.
///
/// # Safety
///
/// Must be called before any other thread is started: it changes the environment and
/// writes into the memory `environ` points at.
pub unsafe fn take_from_environment() {
    let mut taken = Vec::new();
    for (name, value) in std::env::vars_os() {
        let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else {
            continue;
        };
        if !is_secret_name(name) {
            continue;
        }
        taken.push((name.to_owned(), value.to_owned()));
        if let Ok(c_name) = CString::new(name) {
            // SAFETY: single-threaded (the caller's promise); getenv returns a pointer to
            // the value's NUL-terminated bytes, which we overwrite within their length.
            unsafe {
                let value_ptr = nix::libc::getenv(c_name.as_ptr());
                if !value_ptr.is_null() {
                    let len = nix::libc::strlen(value_ptr);
                    std::ptr::write_bytes(value_ptr, b'*', len);
                }
                std::env::remove_var(name);
            }
        }
    }
    let _ = TAKEN.set(taken);
}

/// The secrets taken from the environment at start-up.
pub fn taken() -> &'static [(String, String)] {
    TAKEN.get().map(Vec::as_slice).unwrap_or_default()
}

/// The process environment as it was at start-up: what is left of it, and the secrets.
pub fn environment() -> impl Iterator<Item = (String, String)> {
    std::env::vars().chain(taken().iter().cloned())
}

/// A secret taken at start-up, by name.
pub fn get(name: &str) -> Option<&'static str> {
    taken()
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_follow_the_hermes_rule() {
        for name in [
            "TELEGRAM_BOT_TOKEN",
            "OPENAI_API_KEY",
            "SLACK_SIGNING_SECRET",
            "DB_PASSWORD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "BASIC_AUTH",
            "anthropic_token",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["HOME", "PATH", "LANG", "HERMES_HOME", "TERM"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }
}
