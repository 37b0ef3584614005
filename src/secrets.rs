//! Secrets in the process environment. At start-up, before any other thread exists, every
//! variable whose name marks it a secret (Hermes' rule: the name contains KEY, TOKEN,
//! SECRET, PASSWORD, CREDENTIAL or AUTH) is copied into this module and wiped from the
//! process: its value is overwritten where the kernel shows it (`/proc/<pid>/environ`
//! reads the original environment block, which `unsetenv` alone leaves intact) and the
//! variable is removed. Together with the process being non-dumpable this keeps tokens
//! away from the commands the agent runs, even when the gateway runs as root (where
//! non-dumpable does not stop a child). Configuration reads the copy.
//!
//! It also owns [`scrub`], the one filter every text leaving the daemon passes through
//! (log lines, chat messages, tool output shown to the model): it blanks the values of
//! known secrets (the variables above, `.env` secrets, the configured keys; see
//! [`remember`]), credentials in URLs (`scheme://user:pass@`) and strings shaped like
//! well-known API keys and tokens.

use std::borrow::Cow;
use std::ffi::CString;
use std::sync::{LazyLock, OnceLock, RwLock};

use regex::Regex;

static TAKEN: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Secret values [`scrub`] blanks, longest first (so a secret containing another is
/// blanked whole).
static KNOWN: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Shorter values are not blanked wherever they appear: a four-letter password would
/// blank ordinary words.
const MIN_SECRET_LEN: usize = 8;

/// What stands in for a blanked secret.
pub const REDACTED: &str = "[REDACTED]";

/// `scheme://user:pass@` (or `scheme://token@`): the credentials of a URL.
static URL_CREDENTIALS: LazyLock<Regex> = LazyLock::new(|| {
    // Up to the last `@` before the path: a password may hold an unencoded `@`.
    Regex::new(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#'\x22<>]*@").expect("valid regex")
});

/// Strings shaped like the API keys and tokens of well-known services.
static KEY_SHAPES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\b(?:",
        r"sk-[A-Za-z0-9_-]{16,}", // OpenAI, Anthropic, OpenRouter, DeepSeek…
        r"|xox[abposr]-[A-Za-z0-9-]{10,}", // Slack tokens
        r"|xapp-[A-Za-z0-9-]{10,}", // Slack app-level token
        r"|gh[pousr]_[A-Za-z0-9]{30,}", // GitHub
        r"|github_pat_[A-Za-z0-9_]{30,}",
        r"|AKIA[0-9A-Z]{16}",                     // AWS access key id
        r"|AIza[0-9A-Za-z_-]{35}",                // Google API key
        r"|EAA[A-Za-z0-9]{40,}",                  // Meta (WhatsApp) access token
        r"|hf_[A-Za-z0-9]{30,}",                  // Hugging Face
        r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}", // Stripe
        r"|glpat-[A-Za-z0-9_-]{20,}",             // GitLab
        r"|eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}", // a JWT
        r"|hooks\.slack\.com/services/[A-Za-z0-9/]{20,}", // Slack incoming webhook
        r"|M[TNQ][A-Za-z0-9_-]{21,}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}", // Discord bot token
        r"|aW50ZXJhY3Rpb246[A-Za-z0-9_-]{20,}",   // Discord interaction token ("interaction:…")
        r")",
        // An Authorization header's token (after a word boundary of its own).
        r"|(?i:bearer)\s+[A-Za-z0-9._~+/-]{16,}=*",
        // A Telegram bot token, also inside a URL path (`/bot<token>/`).
        r"|\d{6,12}:[A-Za-z0-9_-]{30,}",
    ))
    .expect("valid regex")
});

const MARKERS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"];

/// Variables whose names carry no marker but whose values hold one: a database URL has
/// its password in it.
const SECRET_BY_NAME: &[&str] = &["HERMES_STORE_URL", "DATABASE_URL"];

/// Whether a variable's name marks it as a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_BY_NAME.contains(&upper.as_str()) || MARKERS.iter().any(|m| upper.contains(m))
}

/// Whether a variable's value is a secret to blank wherever it appears: the name has a
/// marker as one of its `_`-separated words (or ending one, or in the plural: `APIKEY`,
/// `TOKENS`), and does not name something about a secret rather than the secret itself
/// (`GIT_AUTHOR_NAME`, `SSH_AUTH_SOCK`, `*_FILE`, `*_PATH`). Stricter than
/// [`is_secret_name`], which decides what children never see.
pub fn holds_secret_value(name: &str) -> bool {
    const ABOUT: &[&str] = &[
        "NAME", "EMAIL", "USER", "USERNAME", "SOCK", "FILE", "PATH", "DIR", "URL", "HOST", "PORT",
        "TYPE", "MODE", "ID",
    ];
    let upper = name.to_ascii_uppercase();
    if SECRET_BY_NAME.contains(&upper.as_str()) {
        return true;
    }
    let words: Vec<&str> = upper.split('_').filter(|w| !w.is_empty()).collect();
    if words.last().is_some_and(|last| ABOUT.contains(last)) {
        return false;
    }
    words.iter().any(|word| {
        MARKERS
            .iter()
            .any(|m| word.ends_with(m) || word.strip_prefix(m).is_some_and(|rest| rest == "S"))
    })
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
    remember(
        taken
            .iter()
            .filter(|(name, _)| holds_secret_value(name))
            .map(|(_, value)| value.clone()),
    );
    let _ = TAKEN.set(taken);
}

/// Add secret values for [`scrub`] to blank (the configuration's keys and tokens).
pub fn remember(values: impl IntoIterator<Item = String>) {
    let mut known = KNOWN.write().unwrap_or_else(|e| e.into_inner());
    for value in values {
        let value = value.trim().to_owned();
        if value.chars().count() >= MIN_SECRET_LEN && !known.contains(&value) {
            known.push(value);
        }
    }
    known.sort_by_key(|v| std::cmp::Reverse(v.len()));
}

/// `text` with known secret values, URL credentials and key-shaped strings blanked.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    {
        let known = KNOWN.read().unwrap_or_else(|e| e.into_inner());
        for secret in known.iter() {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
    }
    if let Cow::Owned(s) = URL_CREDENTIALS.replace_all(&out, "${1}***@") {
        out = Cow::Owned(s);
    }
    if let Cow::Owned(s) = KEY_SHAPES.replace_all(&out, REDACTED) {
        out = Cow::Owned(s);
    }
    out
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

    #[test]
    fn only_names_of_secret_values_have_their_values_blanked() {
        for name in [
            "TELEGRAM_BOT_TOKEN",
            "OPENAI_API_KEY",
            "OPENROUTER_APIKEY",
            "SLACK_SIGNING_SECRET",
            "DB_PASSWORD",
            "BASIC_AUTH",
            "HF_TOKENS",
            "api_key",
            "token",
        ] {
            assert!(holds_secret_value(name), "{name}");
        }
        for name in [
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "SSH_AUTH_SOCK",
            "XAUTHORITY",
            "GOOGLE_APPLICATION_CREDENTIALS_FILE",
            "KEYBOARD_LAYOUT",
            "PATH",
            "TOKEN_URL",
        ] {
            assert!(!holds_secret_value(name), "{name}");
        }
    }

    #[test]
    fn scrub_blanks_known_values_url_credentials_and_key_shapes() {
        remember(["correct-horse-battery".to_owned(), "short".to_owned()]);
        let cases = [
            (
                "password is correct-horse-battery.",
                "password is [REDACTED].",
            ),
            ("a short word stays", "a short word stays"),
            (
                "cannot reach https://alice:s3cret@llm.example.com/v1: refused",
                "cannot reach https://***@llm.example.com/v1: refused",
            ),
            (
                "git clone https://ghtoken@github.com/x/y",
                "git clone https://***@github.com/x/y",
            ),
            (
                "mail me at alice@example.com",
                "mail me at alice@example.com",
            ),
            (
                "Incorrect API key provided: sk-proj-abcdefghijklmnop1234",
                "Incorrect API key provided: [REDACTED]",
            ),
            (
                "url .../bot123456789:AAHk2Xy_abcdefghijklmnopqrstuvwxyz012/getMe",
                "url .../bot[REDACTED]/getMe",
            ),
            ("token=xoxb-1234-5678-abcdefghij", "token=[REDACTED]"),
            (
                "\"token\":\"aW50ZXJhY3Rpb246MTMwMDAwMDAwMDAwMDAwMDAwMDpzZWNyZXQ\"",
                "\"token\":\"[REDACTED]\"",
            ),
            (
                "https://u:p@ss@db.example.com/x",
                "https://***@db.example.com/x",
            ),
            (
                "-H 'Authorization: Bearer abcdef0123456789abcdef'",
                "-H 'Authorization: [REDACTED]'",
            ),
            (
                "STRIPE=sk_live_4eC39HqLyjWDarjtT1zdp7dc",
                "STRIPE=[REDACTED]",
            ),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "jwt [REDACTED]",
            ),
            (
                "nothing secret here: 12:30 and sk-short",
                "nothing secret here: 12:30 and sk-short",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(scrub(input), expected, "{input}");
        }
        assert!(matches!(scrub("plain text"), Cow::Borrowed(_)));
    }
}
