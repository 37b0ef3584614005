//! Logging to the systemd journal when the daemon runs under systemd (`JOURNAL_STREAM` is
//! set): each event goes to journald's native socket as one datagram with `MESSAGE`,
//! `PRIORITY`, `SYSLOG_IDENTIFIER`, `TARGET` and the event's own fields as journal fields
//! (`platform=…` becomes `PLATFORM=…`, so `journalctl PLATFORM=telegram` works). Every value
//! passes [`crate::secrets::scrub`] first, as stderr lines do. An entry the journal does not
//! take is written to stderr instead, so nothing is lost.

use std::fmt::Write as _;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

use crate::secrets::scrub;

/// journald's socket for native entries.
const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// Whether systemd connected stderr to the journal.
pub fn wanted() -> bool {
    std::env::var_os("JOURNAL_STREAM").is_some()
}

/// The layer that writes to the journal.
pub struct JournalLayer {
    socket: UnixDatagram,
    path: PathBuf,
}

impl JournalLayer {
    /// Connect to journald (`HERMES_JOURNAL_SOCKET` names another socket, for containers
    /// and tests); `None` when there is none.
    pub fn new() -> Option<JournalLayer> {
        let path = std::env::var_os("HERMES_JOURNAL_SOCKET")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(JOURNAL_SOCKET));
        if !path.exists() {
            return None;
        }
        let socket = UnixDatagram::unbound().ok()?;
        // A journal that falls behind must never stall the daemon: what it cannot take
        // now goes to stderr (which systemd also sends to the journal).
        socket.set_nonblocking(true).ok()?;
        Some(JournalLayer { socket, path })
    }
}

/// An event's message and fields.
#[derive(Default)]
struct Fields {
    message: String,
    fields: Vec<(String, String)>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        self.record(field, text);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field, value.to_owned());
    }
}

impl Fields {
    fn record(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.fields.push((field.name().to_owned(), value));
        }
    }
}

impl<S: Subscriber> Layer<S> for JournalLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let entry = entry(*meta.level(), meta.target(), &fields);
        if self.socket.send_to(&entry, &self.path).is_err() {
            // Too big for a datagram, journald busy or gone: the line goes to stderr.
            let mut line = format!("{} {}: {}", meta.level(), meta.target(), fields.message);
            for (name, value) in &fields.fields {
                let _ = write!(line, " {name}={value}");
            }
            eprintln!("{}", scrub(&line));
        }
    }
}

/// One journal entry in the native protocol, every value scrubbed.
fn entry(level: Level, target: &str, fields: &Fields) -> Vec<u8> {
    let priority = match level {
        Level::ERROR => "3",
        Level::WARN => "4",
        Level::INFO => "6",
        Level::DEBUG | Level::TRACE => "7",
    };
    // The message as a person reads it in `journalctl`: the text, then the fields.
    let mut message = fields.message.clone();
    for (name, value) in &fields.fields {
        let _ = write!(message, " {name}={value}");
    }
    let mut out = Vec::with_capacity(message.len() + 128);
    put(&mut out, "MESSAGE", &scrub(&message));
    put(&mut out, "PRIORITY", priority);
    put(&mut out, "SYSLOG_IDENTIFIER", "hermes-gateway");
    put(&mut out, "TARGET", target);
    for (name, value) in &fields.fields {
        if let Some(key) = journal_key(name) {
            put(&mut out, &key, &scrub(value));
        }
    }
    out
}

/// A field name as a journal key: upper-case letters, digits and `_`, not starting with
/// `_` (those are journald's own) and not one of the keys set above.
fn journal_key(name: &str) -> Option<String> {
    let key: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    let key = key.trim_start_matches('_').to_owned();
    let taken = ["MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "TARGET"];
    (!key.is_empty()
        && !key.starts_with(|c: char| c.is_ascii_digit())
        && !taken.contains(&key.as_str()))
    .then_some(key)
}

/// `KEY=value\n`, or for a value with a line break `KEY\n<length, u64 LE><value>\n`.
fn put(out: &mut Vec<u8>, key: &str, value: &str) {
    out.extend_from_slice(key.as_bytes());
    if value.contains('\n') {
        out.push(b'\n');
        out.extend_from_slice(&(value.len() as u64).to_le_bytes());
    } else {
        out.push(b'=');
    }
    out.extend_from_slice(value.as_bytes());
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_follow_the_native_protocol() {
        let fields = Fields {
            message: "two\nlines".into(),
            fields: vec![
                ("platform".into(), "telegram".into()),
                ("_private".into(), "x".into()),
                ("retry-in".into(), "1s".into()),
            ],
        };
        let entry = entry(Level::WARN, "hermes_gateway::router", &fields);
        let text = String::from_utf8_lossy(&entry);
        assert!(
            text.starts_with("MESSAGE\n"),
            "a multi-line value is length-prefixed"
        );
        let len = u64::from_le_bytes(entry[8..16].try_into().unwrap()) as usize;
        assert_eq!(
            &entry[16..16 + len],
            "two\nlines platform=telegram _private=x retry-in=1s".as_bytes()
        );
        assert!(text.contains("\nPRIORITY=4\n"));
        assert!(text.contains("\nPLATFORM=telegram\n"));
        assert!(
            text.contains("\nPRIVATE=x\n"),
            "journald's own `_` keys are not forged"
        );
        assert!(text.contains("\nRETRY_IN=1s\n"));
        assert_eq!(journal_key("message"), None);
        assert_eq!(journal_key("9lives"), None);
    }
}
