//! The key that signs the gateway's standing decisions: a row of the approval allowlist or
//! of the paired users carries an HMAC-SHA256 of its contents under a key kept in the
//! gateway's home (`state.key`, 0600, hidden from the agent's commands like the rest of the
//! home). Only the daemon and the operator's CLI, which read the key, can write a row that
//! verifies, so a row put into `gateway.db` by anything else (a command when confinement
//! is off or broken) is refused and reported instead of granting anything: the second line
//! of defence behind the confinement (invariant 14).

use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use ring::hmac;

/// The key's file in the home.
pub const FILE: &str = "state.key";
/// The key's length in bytes.
const KEY_BYTES: usize = 32;

/// The signing key.
#[derive(Clone)]
pub struct StateKey(hmac::Key);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(…)")
    }
}

impl StateKey {
    /// The home's key, made (random, 0600) on first use; and whether it was made now.
    pub fn load_or_create(home: &Path) -> io::Result<(StateKey, bool)> {
        let path = home.join(FILE);
        match std::fs::File::open(&path) {
            Ok(mut file) => {
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)?;
                if bytes.len() != KEY_BYTES {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{} holds {} bytes, not a key of {KEY_BYTES}; remove it to make a new one (standing approvals and pairings must then be given again)",
                            path.display(),
                            bytes.len()
                        ),
                    ));
                }
                Ok((StateKey::from_bytes(&bytes), false))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let bytes: [u8; KEY_BYTES] = rand::random();
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)?;
                file.write_all(&bytes)?;
                file.sync_all()?;
                Ok((StateKey::from_bytes(&bytes), true))
            }
            Err(e) => Err(e),
        }
    }

    /// A key from its bytes (tests, and a key read from its file).
    pub fn from_bytes(bytes: &[u8]) -> StateKey {
        StateKey(hmac::Key::new(hmac::HMAC_SHA256, bytes))
    }

    /// The MAC of a row: the table's name and each field, each prefixed with its length
    /// so no two rows read the same; hex.
    pub fn sign(&self, table: &str, fields: &[impl AsRef<str>]) -> String {
        let tag = hmac::sign(&self.0, &message(table, fields));
        tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Whether `mac` is the row's MAC (compared in constant time).
    pub fn verifies(&self, table: &str, fields: &[impl AsRef<str>], mac: &str) -> bool {
        let Some(bytes) = from_hex(mac) else {
            return false;
        };
        hmac::verify(&self.0, &message(table, fields), &bytes).is_ok()
    }
}

fn message(table: &str, fields: &[impl AsRef<str>]) -> Vec<u8> {
    let mut message = Vec::new();
    for part in std::iter::once(table).chain(fields.iter().map(AsRef::as_ref)) {
        message.extend_from_slice(&(part.len() as u64).to_be_bytes());
        message.extend_from_slice(part.as_bytes());
    }
    message
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_verifies_only_with_its_own_fields_and_key() {
        let key = StateKey::from_bytes(&[7; KEY_BYTES]);
        let mac = key.sign("paired_users", &["telegram", "42", "Alice"]);
        assert!(key.verifies("paired_users", &["telegram", "42", "Alice"], &mac));
        assert!(!key.verifies("paired_users", &["telegram", "43", "Alice"], &mac));
        // Fields cannot be shifted from one to the next.
        assert!(!key.verifies("paired_users", &["telegram4", "2", "Alice"], &mac));
        assert!(!key.verifies("approval_allowlist", &["telegram", "42", "Alice"], &mac));
        let other = StateKey::from_bytes(&[8; KEY_BYTES]);
        assert!(!other.verifies("paired_users", &["telegram", "42", "Alice"], &mac));
        assert!(!key.verifies("paired_users", &["telegram", "42", "Alice"], "zz"));
        assert!(!key.verifies("paired_users", &["telegram", "42", "Alice"], ""));
    }

    #[test]
    fn the_key_is_made_private_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let (first, made) = StateKey::load_or_create(dir.path()).unwrap();
        assert!(made);
        let mac = first.sign("t", &["x"]);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let (again, made) = StateKey::load_or_create(dir.path()).unwrap();
        assert!(!made && again.verifies("t", &["x"], &mac));
        std::fs::write(dir.path().join(FILE), "short").unwrap();
        let err = StateKey::load_or_create(dir.path()).unwrap_err();
        assert!(err.to_string().contains("remove it"), "{err}");
    }
}
