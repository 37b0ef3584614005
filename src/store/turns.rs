//! The end of a turn, committed as one transaction: the turn's messages join the session,
//! the reply joins the outbox, and the inbox rows it answered reach their end state. A crash
//! before the commit leaves the inbox rows open, so the turn runs again after a restart; a
//! crash after it leaves the reply in the outbox, so it is sent after a restart.

use hermes_adapter::ChatRef;

use super::inbox::{InboxState, finish_in};
use super::outbox::{NewOutboxRow, enqueue_in};
use super::sessions::{StoredMessage, append_in};
use super::{Store, StoreError};

/// Everything a finished turn writes.
#[derive(Debug, Clone)]
pub struct TurnRecord {
    /// Where the messages go (`None`: do not keep them, e.g. after `/new`).
    pub session_id: Option<String>,
    pub messages: Vec<StoredMessage>,
    pub outbox: Vec<NewOutboxRow>,
    pub inbox_ids: Vec<i64>,
    pub state: InboxState,
    pub outcome: String,
    /// The chat of the events it answers, when the caller knows it (a session's turn): on
    /// a store several nodes share, its share of the work fences the write without
    /// reading the events' chats back ([`TurnRecord::in_chat`]).
    pub chat: Option<ChatRef>,
}

impl TurnRecord {
    /// A record that only ends inbox rows, optionally with messages to send (commands,
    /// refusals, stops): no conversation messages.
    pub fn outcome(
        inbox_ids: Vec<i64>,
        state: InboxState,
        outcome: &str,
        outbox: Vec<NewOutboxRow>,
    ) -> Self {
        TurnRecord {
            session_id: None,
            messages: Vec::new(),
            outbox,
            inbox_ids,
            state,
            outcome: outcome.to_owned(),
            chat: None,
        }
    }

    /// Say that every event it answers is of `chat`.
    pub fn in_chat(mut self, chat: &ChatRef) -> Self {
        self.chat = Some(chat.clone());
        self
    }
}

impl Store {
    pub async fn finish_turn(&self, record: TurnRecord) -> Result<Vec<i64>, StoreError> {
        let fence = self.fence();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            if fence.is_some() {
                // Written under the shares of the chats it answers; a record that answers
                // no event (a notice) under those of the chats it writes to.
                let mut chats = match &record.chat {
                    Some(chat) => vec![chat.clone()],
                    None => super::inbox::chats_in(&tx, &record.inbox_ids)?,
                };
                if record.inbox_ids.is_empty() {
                    chats.extend(record.outbox.iter().map(|row| row.chat.clone()));
                }
                super::leases::check_fences(&tx, &fence, &chats)?;
            }
            if let Some(session_id) = &record.session_id
                && !record.messages.is_empty()
            {
                append_in(&tx, session_id, &record.messages)?;
            }
            let ids = enqueue_in(&tx, &record.outbox)?;
            finish_in(&tx, &record.inbox_ids, record.state, &record.outcome)?;
            tx.commit()?;
            Ok(ids)
        })
        .await
    }
}
