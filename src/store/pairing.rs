//! DM pairing: an unknown person who writes to the bot gets a one-time code; the owner
//! approves it from the command line (`hermes-gateway pairing approve telegram CODE`).
//! Codes expire after an hour, at most three wait per platform, and five wrong codes lock
//! approvals for the platform for an hour (the Hermes rules).

use rand::Rng;
use rusqlite::params;

use super::db::{Db, Optional};

use super::{Store, StoreError, now_ms};

const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
const CODE_LEN: usize = 8;
const CODE_TTL_MS: i64 = 60 * 60 * 1000;
const REMIND_EVERY_MS: i64 = 10 * 60 * 1000;
const MAX_PENDING_PER_PLATFORM: i64 = 3;
const MAX_FAILURES: i64 = 5;
const LOCKOUT_MS: i64 = 60 * 60 * 1000;

/// What to tell an unknown person who wrote to the bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairingRequestOutcome {
    /// A fresh code was issued.
    Issued(String),
    /// They already have a code; remind them of it.
    Remind(String),
    /// They already have a code and were reminded recently: stay quiet.
    AlreadyReminded,
    /// Too many codes are waiting on this platform.
    TooMany,
}

/// A pending request, for `pairing list`.
#[derive(Debug, Clone)]
pub struct PairingRequest {
    pub platform: String,
    pub code: String,
    pub user_id: String,
    pub user_name: String,
    pub expires_at: i64,
}

/// The person a code belonged to, once approved.
#[derive(Debug, Clone)]
pub struct PairingApproval {
    pub user_id: String,
    pub user_name: String,
    pub chat_id: String,
}

/// Why an approval failed.
#[derive(Debug, thiserror::Error)]
pub enum PairingError {
    #[error("no pending pairing request with code {0} (codes expire after one hour)")]
    UnknownCode(String),
    #[error("too many wrong codes for {0}; approvals are locked for an hour")]
    LockedOut(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Store {
    /// An unknown person wrote to the bot in a DM: issue or recall their code.
    pub async fn pairing_request(
        &self,
        platform: &str,
        user_id: &str,
        user_name: &str,
        chat_id: &str,
    ) -> Result<PairingRequestOutcome, StoreError> {
        let (platform, user_id, user_name, chat_id) = (
            platform.to_owned(),
            user_id.to_owned(),
            user_name.to_owned(),
            chat_id.to_owned(),
        );
        self.call(move |conn| {
            let now = now_ms();
            let tx = conn.transaction()?;
            tx.prepare_cached("DELETE FROM pairing_requests WHERE expires_at <= ?1")?
.execute( [now])?;
            let existing: Option<(String, i64)> = tx
                .prepare_cached("SELECT code, reminded_at FROM pairing_requests WHERE platform = ?1 AND user_id = ?2")?
.query_row(
                    params![platform, user_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let outcome = if let Some((code, reminded_at)) = existing {
                if now - reminded_at >= REMIND_EVERY_MS {
                    tx.prepare_cached("UPDATE pairing_requests SET reminded_at = ?1 WHERE platform = ?2 AND code = ?3")?
.execute(
                        params![now, platform, code],
                    )?;
                    PairingRequestOutcome::Remind(code)
                } else {
                    PairingRequestOutcome::AlreadyReminded
                }
            } else {
                let pending: i64 = tx.prepare_cached("SELECT count(*) FROM pairing_requests WHERE platform = ?1")?
.query_row(
                    [&platform],
                    |r| r.get(0),
                )?;
                if pending >= MAX_PENDING_PER_PLATFORM {
                    PairingRequestOutcome::TooMany
                } else {
                    let code = new_code();
                    tx.prepare_cached("INSERT INTO pairing_requests (platform, code, user_id, user_name, chat_id,
                            created_at, expires_at, reminded_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?6)")?
.execute(
                        params![platform, code, user_id, user_name, chat_id, now, now + CODE_TTL_MS],
                    )?;
                    PairingRequestOutcome::Issued(code)
                }
            };
            tx.commit()?;
            Ok(outcome)
        })
        .await
    }

    /// Whether this person was paired by the owner: a row the gateway signed (one that
    /// does not verify pairs nobody and is reported).
    pub async fn pairing_is_approved(
        &self,
        platform: &str,
        user_id: &str,
    ) -> Result<bool, StoreError> {
        let (platform, user_id) = (platform.to_owned(), user_id.to_owned());
        let signer = self.key.clone();
        self.call(move |conn| {
            let found: Option<(String, i64, String)> = conn
                .prepare_cached("SELECT user_name, approved_at, mac FROM paired_users WHERE platform = ?1 AND user_id = ?2")?
                .query_row(params![platform, user_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?;
            let Some((name, at, mac)) = found else {
                return Ok(false);
            };
            if !signer.verifies(PAIRED, &paired_fields(&platform, &user_id, &name, at), &mac) {
                tracing::error!(
                    %platform,
                    %user_id,
                    "a paired person in the database was not written by the gateway (its signature does not verify): they are not let in; remove the row with `hermes-gateway pairing revoke`"
                );
                return Ok(false);
            }
            Ok(true)
        })
        .await
    }

    /// The owner approves a code.
    pub async fn pairing_approve(
        &self,
        platform: &str,
        code: &str,
    ) -> Result<PairingApproval, PairingError> {
        let (platform, code) = (platform.to_owned(), code.trim().to_ascii_uppercase());
        let signer = self.key.clone();
        self.call(move |conn| {
                let now = now_ms();
                let tx = conn.transaction()?;
                let failures: i64 = tx.prepare_cached("SELECT count(*) FROM pairing_failures WHERE platform = ?1 AND at > ?2")?
.query_row(
                    params![platform, now - LOCKOUT_MS],
                    |r| r.get(0),
                )?;
                if failures >= MAX_FAILURES {
                    return Ok(Err(PairingError::LockedOut(platform)));
                }
                let found: Option<PairingApproval> = tx
                    .prepare_cached("SELECT user_id, user_name, chat_id FROM pairing_requests
                         WHERE platform = ?1 AND code = ?2 AND expires_at > ?3")?
.query_row(
                        params![platform, code, now],
                        |r| Ok(PairingApproval { user_id: r.get(0)?, user_name: r.get(1)?, chat_id: r.get(2)? }),
                    )
                    .optional()?;
                let outcome = match found {
                    Some(approval) => {
                        let fields = paired_fields(&platform, &approval.user_id, &approval.user_name, now);
                        let mac = signer.sign(PAIRED, &fields);
                        tx.prepare_cached("INSERT INTO paired_users (platform, user_id, user_name, approved_at, mac)
                             VALUES (?1, ?2, ?3, ?4, ?5)
                             ON CONFLICT (platform, user_id) DO UPDATE SET user_name = excluded.user_name,
                                approved_at = excluded.approved_at, mac = excluded.mac")?
.execute(
                            params![platform, approval.user_id, approval.user_name, now, mac],
                        )?;
                        tx.prepare_cached("DELETE FROM pairing_requests WHERE platform = ?1 AND user_id = ?2")?
.execute(
                            params![platform, approval.user_id],
                        )?;
                        Ok(approval)
                    }
                    None => {
                        tx.prepare_cached("INSERT INTO pairing_failures (platform, at) VALUES (?1, ?2)")?
.execute(
                            params![platform, now],
                        )?;
                        Err(PairingError::UnknownCode(code))
                    }
                };
                tx.commit()?;
                Ok(outcome)
            })
            .await?
    }

    /// Remove a paired person; returns whether they were paired.
    pub async fn pairing_revoke(&self, platform: &str, user_id: &str) -> Result<bool, StoreError> {
        let (platform, user_id) = (platform.to_owned(), user_id.to_owned());
        self.call(move |conn| {
            Ok(conn
                .prepare_cached("DELETE FROM paired_users WHERE platform = ?1 AND user_id = ?2")?
                .execute(params![platform, user_id])?
                > 0)
        })
        .await
    }

    /// Pending requests and paired people: `(pending, [(platform, user_id, user_name,
    /// signed)])`; `signed` is false for a row the gateway did not write.
    #[allow(clippy::type_complexity)]
    pub async fn pairing_list(
        &self,
    ) -> Result<(Vec<PairingRequest>, Vec<(String, String, String, bool)>), StoreError> {
        let signer = self.key.clone();
        self.call(move |conn| {
            let now = now_ms();
            let mut stmt = conn.prepare_cached(
                "SELECT platform, code, user_id, user_name, expires_at FROM pairing_requests
                 WHERE expires_at > ?1 ORDER BY created_at",
            )?;
            let pending = stmt
                .query_map([now], |r| {
                    Ok(PairingRequest {
                        platform: r.get(0)?,
                        code: r.get(1)?,
                        user_id: r.get(2)?,
                        user_name: r.get(3)?,
                        expires_at: r.get(4)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            let mut stmt = conn.prepare_cached(
                "SELECT platform, user_id, user_name, approved_at, mac FROM paired_users ORDER BY approved_at",
            )?;
            let approved = stmt
                .query_map(params![], |r| {
                    let (platform, user_id, name): (String, String, String) =
                        (r.get(0)?, r.get(1)?, r.get(2)?);
                    let fields = paired_fields(&platform, &user_id, &name, r.get(3)?);
                    let signed = signer.verifies(PAIRED, &fields, &r.get::<_, String>(4)?);
                    Ok((platform, user_id, name, signed))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok((pending, approved))
        })
        .await
    }
}

/// The paired people's table, as its rows are signed.
const PAIRED: &str = "paired_users";

/// The fields of a paired person's row that its MAC covers.
fn paired_fields(platform: &str, user_id: &str, name: &str, at: i64) -> [String; 4] {
    [platform.into(), user_id.into(), name.into(), at.to_string()]
}

/// Sign every paired person's row (the upgrade that added the MACs).
pub(super) fn sign_existing(
    tx: &Db,
    key: &crate::state_key::StateKey,
) -> Result<usize, StoreError> {
    let rows: Vec<(String, String, String, i64)> = tx
        .prepare("SELECT platform, user_id, user_name, approved_at FROM paired_users")?
        .query_map(params![], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?
        .collect::<Result<_, _>>()?;
    let count = rows.len();
    for (platform, user_id, name, at) in rows {
        let mac = key.sign(PAIRED, &paired_fields(&platform, &user_id, &name, at));
        tx.execute(
            "UPDATE paired_users SET mac = ?1 WHERE platform = ?2 AND user_id = ?3",
            params![mac, platform, user_id],
        )?;
    }
    Ok(count)
}

fn new_code() -> String {
    let mut rng = rand::rng();
    (0..CODE_LEN)
        .map(|_| CODE_ALPHABET[rng.random_range(0..CODE_ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store where Eve, a stranger, asked to pair on Telegram: her code.
    async fn eve_asks(store: Store) -> (Store, String) {
        let outcome = store.pairing_request("telegram", "9", "Eve", "9").await;
        match outcome.unwrap() {
            PairingRequestOutcome::Issued(code) => (store, code),
            other => panic!("expected a code, got {other:?}"),
        }
    }

    async fn a_paired_person_the_gateway_did_not_write_is_not_let_in(store: Store) {
        let (store, code) = eve_asks(store).await;
        store.pairing_approve("telegram", &code).await.unwrap();
        store
            .call(|conn| {
                conn.execute_batch(
                    "INSERT INTO paired_users (platform, user_id, user_name, approved_at)
                     VALUES ('telegram', '666', 'Mallory', 0);
                     INSERT INTO paired_users (platform, user_id, user_name, approved_at, mac)
                     SELECT platform, '667', user_name, approved_at, mac FROM paired_users WHERE user_id = '9';",
                )?;
                Ok(())
            })
            .await
            .unwrap();
        assert!(store.pairing_is_approved("telegram", "9").await.unwrap());
        assert!(!store.pairing_is_approved("telegram", "666").await.unwrap());
        assert!(!store.pairing_is_approved("telegram", "667").await.unwrap());
        let (_, paired) = store.pairing_list().await.unwrap();
        let mut signed: Vec<(&str, bool)> = paired.iter().map(|p| (p.1.as_str(), p.3)).collect();
        signed.sort();
        assert_eq!(signed, [("666", false), ("667", false), ("9", true)]);
    }

    async fn a_code_pairs_its_person_once_and_wrong_codes_lock_out(store: Store) {
        let (store, code) = eve_asks(store).await;
        assert_eq!(code.len(), 8);
        assert!(code.bytes().all(|b| CODE_ALPHABET.contains(&b)));
        assert_eq!(
            store
                .pairing_request("telegram", "9", "Eve", "9")
                .await
                .unwrap(),
            PairingRequestOutcome::AlreadyReminded
        );
        assert!(!store.pairing_is_approved("telegram", "9").await.unwrap());
        let approval = store
            .pairing_approve("telegram", &code.to_lowercase())
            .await
            .unwrap();
        assert_eq!(approval.user_id, "9");
        assert!(store.pairing_is_approved("telegram", "9").await.unwrap());
        assert!(matches!(
            store.pairing_approve("telegram", &code).await,
            Err(PairingError::UnknownCode(_))
        ));
        for _ in 0..4 {
            let _ = store.pairing_approve("telegram", "WRONG").await;
        }
        assert!(matches!(
            store.pairing_approve("telegram", "WRONG").await,
            Err(PairingError::LockedOut(_))
        ));
        assert!(store.pairing_revoke("telegram", "9").await.unwrap());
    }

    async fn an_expired_code_pairs_nobody_and_the_person_gets_a_new_one(store: Store) {
        let (store, code) = eve_asks(store).await;
        // The code's hour is over.
        store
            .call(|conn| {
                let back = CODE_TTL_MS + 1_000;
                conn.execute(
                    "UPDATE pairing_requests SET expires_at = expires_at - ?1,
                     created_at = created_at - ?1, reminded_at = reminded_at - ?1",
                    [back],
                )?;
                Ok(())
            })
            .await
            .unwrap();
        assert!(matches!(
            store.pairing_approve("telegram", &code).await,
            Err(PairingError::UnknownCode(_))
        ));
        assert!(!store.pairing_is_approved("telegram", "9").await.unwrap());
        let again = store.pairing_request("telegram", "9", "Eve", "9").await;
        assert!(matches!(again.unwrap(), PairingRequestOutcome::Issued(new) if new != code));
    }

    async fn at_most_three_codes_wait_per_platform(store: Store) {
        for user in ["1", "2", "3"] {
            assert!(matches!(
                store
                    .pairing_request("telegram", user, "x", user)
                    .await
                    .unwrap(),
                PairingRequestOutcome::Issued(_)
            ));
        }
        assert_eq!(
            store
                .pairing_request("telegram", "4", "x", "4")
                .await
                .unwrap(),
            PairingRequestOutcome::TooMany
        );
        assert_eq!(store.pairing_list().await.unwrap().0.len(), 3);
    }

    crate::store::on_both_engines!(
        at_most_three_codes_wait_per_platform,
        a_paired_person_the_gateway_did_not_write_is_not_let_in,
        a_code_pairs_its_person_once_and_wrong_codes_lock_out,
        an_expired_code_pairs_nobody_and_the_person_gets_a_new_one,
    );
}
