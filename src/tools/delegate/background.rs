//! Delegations that went on in the background. Each is listed (so `/stop` finds it at
//! once) and recorded in the store before the model hears it was dispatched; when its
//! children are done their results go into the inbox as a wake-up of the conversation
//! (`gateway:delegation:<id>`, so a report recorded twice is one turn), and only then is
//! the record closed. `/stop` and `/new` cancel the session's delegations and record that;
//! a shutdown that cuts one leaves it recorded, and the next start runs it again
//! ([`resume`]) up to [`MAX_RUNS`] times. The children run on this module's task tracker,
//! so a shutdown waits for them to stop what they started.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use hermes_adapter::{ChatRef, Inbound, InboundKind, InboundSink, Wakeup};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Batch, Task, run_batch};
use crate::config::DelegationConfig;
use crate::store::{RecordedDelegation, Store};
use crate::tools::ToolContext;
use crate::tools::output::items;

/// How often a report the inbox would not take is tried before it is left for the next
/// start.
const REPORT_ATTEMPTS: u32 = 5;
/// How many times one delegation is run (the first time and after restarts that cut it).
pub const MAX_RUNS: i64 = 3;

pub struct Delegations {
    store: Store,
    /// The daemon's: cancelled at shutdown (every delegation's token is a child of it).
    root: CancellationToken,
    /// Running in the background: id → (session key, token).
    running: Mutex<HashMap<String, (String, CancellationToken)>>,
    /// Where reports are recorded (set once the daemon's sink exists).
    sink: OnceLock<Arc<dyn InboundSink>>,
    /// The children and the reporters.
    tasks: TaskTracker,
}

impl Delegations {
    pub fn new(store: Store, root: CancellationToken) -> Arc<Self> {
        Arc::new(Delegations {
            store,
            root,
            running: Mutex::new(HashMap::new()),
            sink: OnceLock::new(),
            tasks: TaskTracker::new(),
        })
    }

    /// A token for a new delegation's children.
    pub fn token(&self) -> CancellationToken {
        self.root.child_token()
    }

    /// Run `work` (a batch of children) on the tracker.
    pub fn spawn<F>(&self, work: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(work)
    }

    /// Reports go to `sink` from now on.
    pub fn attach(&self, sink: Arc<dyn InboundSink>) {
        let _ = self.sink.set(sink);
    }

    /// Cancel session `session_key`'s delegations (`/stop`, `/new`), recorded as stopped so
    /// a restart does not run them again; how many there were.
    pub fn cancel_session(&self, session_key: &str) -> usize {
        let stopped: Vec<String> = {
            let mut running = self.running.lock().expect("delegations lock");
            let ids: Vec<String> = running
                .iter()
                .filter(|(_, (key, _))| key == session_key)
                .map(|(id, _)| id.clone())
                .collect();
            for id in &ids {
                if let Some((_, token)) = running.remove(id) {
                    token.cancel();
                }
            }
            ids
        };
        for id in &stopped {
            let store = self.store.clone();
            let id = id.clone();
            self.tasks.spawn(async move {
                if let Err(e) = store.delegation_ended(&id, "stopped").await {
                    tracing::warn!(delegation = %id, error = %e, "delegate: could not record the stop");
                }
            });
        }
        stopped.len()
    }

    /// How many delegations run in the background (for `/status`).
    pub fn running_in(&self, session_key: &str) -> usize {
        let running = self.running.lock().expect("delegations lock");
        running
            .values()
            .filter(|(key, _)| key == session_key)
            .count()
    }

    /// Wait (at most `grace`) for the children to stop what they started (shutdown).
    pub async fn wind_down(&self, grace: Duration) {
        self.tasks.close();
        if tokio::time::timeout(grace, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("delegate: sub-agents still stopping at shutdown");
        }
    }

    /// Take over `batch`, running under `cancel`: listed at once, recorded (its first
    /// run), reported when done. `run`: how many runs it has had before this one.
    pub async fn adopt(
        self: &Arc<Self>,
        record: RecordedDelegation,
        cancel: CancellationToken,
        batch: JoinHandle<Batch>,
        run: i64,
    ) {
        self.running.lock().expect("delegations lock").insert(
            record.id.clone(),
            (record.session_key.clone(), cancel.clone()),
        );
        if run == 0
            && let Err(e) = self.store.delegation_started(record.clone()).await
        {
            tracing::error!(delegation = %record.id, error = %e, "delegate: could not record a background delegation; a restart would lose it");
        }
        let this = self.clone();
        self.tasks.spawn(async move {
            let done = batch.await;
            let listed = this
                .running
                .lock()
                .expect("delegations lock")
                .remove(&record.id)
                .is_some();
            this.finish(record, listed, done, run > 0).await;
        });
    }

    /// `listed`: still listed when it ended (not stopped by `/stop` or `/new`).
    async fn finish(
        &self,
        record: RecordedDelegation,
        listed: bool,
        done: Result<Batch, tokio::task::JoinError>,
        again: bool,
    ) {
        let text = match done {
            Err(e) => {
                tracing::error!(delegation = %record.id, error = %e, "delegate: the sub-agents failed");
                format!(
                    "[The background delegation {} failed: the sub-agents stopped unexpectedly ({e}). \
                     Tell the person; they can ask again.]",
                    record.id
                )
            }
            Ok(batch) => {
                // Counted for the conversation that delegated (a nested delegation's
                // parent is a sub-agent: its tokens go to the top session).
                let session = record.session_id.split('/').next().unwrap_or_default();
                for (model, usage) in batch.usage.0 {
                    if let Err(e) = self.store.usage_add(session.to_owned(), model, usage).await {
                        tracing::warn!(error = %e, "delegate: could not record the sub-agents' token usage");
                    }
                }
                if !listed {
                    tracing::info!(delegation = %record.id, "delegate: stopped in its conversation");
                    return;
                }
                let cut = items(&batch.report["results"]).any(|r| r["status"] == "interrupted");
                if cut && self.root.is_cancelled() {
                    // Shutdown: still recorded as running, so the next start runs it again.
                    tracing::info!(delegation = %record.id, "delegate: cut by the shutdown; it runs again at the next start");
                    return;
                }
                report_text(&record.id, &batch.report, again)
            }
        };
        self.report(&record, text).await;
    }

    /// Bring `text` into the delegation's conversation, then close its record.
    async fn report(&self, record: &RecordedDelegation, text: String) {
        let event = Inbound {
            event_id: format!("gateway:delegation:{}", record.id),
            chat: record.chat.clone(),
            author: record.author.clone(),
            kind: InboundKind::Wakeup(Wakeup {
                session_key: record.session_key.clone(),
                text,
            }),
        };
        for attempt in 1..=REPORT_ATTEMPTS {
            let Some(sink) = self.sink.get() else {
                tracing::error!(delegation = %record.id, "delegate: nowhere to report yet");
                return;
            };
            match sink.accept(event.clone()).await {
                Ok(_) => {
                    if let Err(e) = self.store.delegation_ended(&record.id, "reported").await {
                        // The report is in the inbox; a start that finds this one running
                        // sees that and does not run it again.
                        tracing::warn!(delegation = %record.id, error = %e, "delegate: could not close the record");
                    }
                    tracing::info!(delegation = %record.id, "delegate: results reported into the conversation");
                    return;
                }
                Err(e) => {
                    tracing::error!(delegation = %record.id, attempt, error = %e, "delegate: could not record the results");
                    tokio::time::sleep(Duration::from_secs(2 * u64::from(attempt))).await;
                }
            }
        }
        tracing::error!(delegation = %record.id, "delegate: the results could not be recorded; the next start runs it again");
    }
}

/// The wake-up that brings a delegation's results into its conversation.
fn report_text(id: &str, report: &Value, again: bool) -> String {
    let count = report["results"].as_array().map_or(0, Vec::len);
    let again = if again {
        " (it was run again from the start because the gateway restarted while it ran)"
    } else {
        ""
    };
    format!(
        "[The background delegation {id} has finished: {count} task(s){again}. Its results follow as JSON; \
         tell the person what came of it.]\n\n{report}"
    )
}

/// At start, or when this node takes shares of the work over: run again the delegations a
/// stopped daemon left running in the chats `mine` says (those whose report is already in
/// the inbox are only closed; one cut [`MAX_RUNS`] times is given up, and its conversation
/// told).
pub async fn resume(
    delegations: &Arc<Delegations>,
    agent: Weak<dyn super::SubAgents>,
    config: DelegationConfig,
    mine: &(dyn Fn(&ChatRef) -> bool + Send + Sync),
) {
    let store = &delegations.store;
    let records = match store.delegations_running().await {
        Ok(records) => records,
        Err(e) => {
            tracing::error!(error = %e, "delegate: cannot read the delegations left running");
            return;
        }
    };
    // With other nodes on the store, those of other nodes' chats are theirs (running
    // there, or run again by the node that takes their chat's share over).
    for record in records.into_iter().filter(|r| mine(&r.chat)) {
        let event_id = format!("gateway:delegation:{}", record.id);
        if let Ok(Some(_)) = store.inbox_state(&event_id).await {
            let _ = store.delegation_ended(&record.id, "reported").await;
            continue;
        }
        let tasks: Result<Vec<Task>, _> = serde_json::from_value(record.tasks.clone());
        let runs = store
            .delegation_run_again(&record.id)
            .await
            .unwrap_or(i64::MAX);
        let Ok(tasks) = tasks.map_err(|e| {
            tracing::error!(delegation = %record.id, error = %e, "delegate: the tasks cannot be read");
        }) else {
            let _ = store.delegation_ended(&record.id, "failed").await;
            continue;
        };
        if runs > MAX_RUNS {
            tracing::error!(delegation = %record.id, runs, "delegate: cut by restarts too often; given up");
            let text = format!(
                "[The background delegation {} was given up: restarts of the gateway cut it {} times. \
                 Tell the person; they can ask again.]",
                record.id,
                runs - 1
            );
            delegations.report(&record, text).await;
            let _ = store.delegation_ended(&record.id, "failed").await;
            continue;
        }
        let Some(agent) = agent.upgrade() else { return };
        tracing::info!(delegation = %record.id, tasks = tasks.len(), "delegate: running again a delegation the last run left unfinished");
        let cancel = delegations.token();
        let parent = ToolContext::person_turn(
            record.session_key.clone(),
            format!("{}/{}", record.session_id, record.id),
            record.chat.clone(),
            record.author.clone(),
            cancel.clone(),
        );
        let batch = delegations.spawn(run_batch(agent, config.clone(), tasks, parent));
        delegations.adopt(record, cancel, batch, runs - 1).await;
    }
}
