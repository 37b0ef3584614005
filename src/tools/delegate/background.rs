//! Delegations that went on in the background. Each is recorded in the store before the
//! model hears it was dispatched; when its children are done their results go into the
//! inbox as a wake-up of the conversation (`gateway:delegation:<id>`, so a report recorded
//! twice is one turn), and only then is the record closed. `/stop` and `/new` cancel the
//! session's delegations; at shutdown they stop with the daemon and the next start runs
//! the ones still recorded again ([`resume`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use hermes_adapter::{Inbound, InboundKind, InboundSink, Wakeup};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Batch, Task, run_batch};
use crate::agent::AgentRuntime;
use crate::config::DelegationConfig;
use crate::store::{RecordedDelegation, Store};
use crate::tools::ToolContext;

/// How often a report the inbox would not take is tried again before it is left for the
/// next start.
const REPORT_ATTEMPTS: u32 = 5;

pub struct Delegations {
    store: Store,
    /// The daemon's: cancelled at shutdown (every delegation's token is a child of it).
    root: CancellationToken,
    /// Running in the background: id → (session key, token).
    running: Mutex<HashMap<String, (String, CancellationToken)>>,
    /// Where reports are recorded (set once the daemon's sink exists).
    sink: OnceLock<Arc<dyn InboundSink>>,
}

impl Delegations {
    pub fn new(store: Store, root: CancellationToken) -> Arc<Self> {
        Arc::new(Delegations {
            store,
            root,
            running: Mutex::new(HashMap::new()),
            sink: OnceLock::new(),
        })
    }

    /// A token for a new delegation's children.
    pub fn token(&self) -> CancellationToken {
        self.root.child_token()
    }

    /// Reports go to `sink` from now on.
    pub fn attach(&self, sink: Arc<dyn InboundSink>) {
        let _ = self.sink.set(sink);
    }

    /// Cancel session `session_key`'s delegations (`/stop`, `/new`); how many there were.
    pub fn cancel_session(&self, session_key: &str) -> usize {
        let running = self.running.lock().expect("delegations lock");
        running
            .values()
            .filter(|(key, _)| key == session_key)
            .inspect(|(_, token)| token.cancel())
            .count()
    }

    /// How many delegations run in the background (for `/status`).
    pub fn running_in(&self, session_key: &str) -> usize {
        let running = self.running.lock().expect("delegations lock");
        running
            .values()
            .filter(|(key, _)| key == session_key)
            .count()
    }

    /// Take over `batch`, running under `cancel`: recorded first, reported when done.
    pub async fn adopt(
        self: &Arc<Self>,
        record: RecordedDelegation,
        cancel: CancellationToken,
        batch: JoinHandle<Batch>,
        restarted: bool,
    ) {
        if !restarted && let Err(e) = self.store.delegation_started(record.clone()).await {
            tracing::error!(delegation = %record.id, error = %e, "delegate: could not record a background delegation; a restart would lose it");
        }
        self.running.lock().expect("delegations lock").insert(
            record.id.clone(),
            (record.session_key.clone(), cancel.clone()),
        );
        let this = self.clone();
        tokio::spawn(async move {
            let done = batch.await;
            this.running
                .lock()
                .expect("delegations lock")
                .remove(&record.id);
            this.finish(record, cancel, done, restarted).await;
        });
    }

    async fn finish(
        &self,
        record: RecordedDelegation,
        cancel: CancellationToken,
        done: Result<Batch, tokio::task::JoinError>,
        restarted: bool,
    ) {
        let batch = match done {
            Ok(batch) => batch,
            Err(e) => {
                tracing::error!(delegation = %record.id, error = %e, "delegate: the sub-agents failed");
                let _ = self.store.delegation_ended(&record.id, "failed").await;
                return;
            }
        };
        for (model, usage) in batch.usage.0 {
            if let Err(e) = self
                .store
                .usage_add(record.session_id.clone(), model, usage)
                .await
            {
                tracing::warn!(error = %e, "delegate: could not record the sub-agents' token usage");
            }
        }
        if self.root.is_cancelled() {
            // Shutdown: still recorded as running, so the next start runs it again.
            tracing::info!(delegation = %record.id, "delegate: stopped by the shutdown; it runs again at the next start");
            return;
        }
        if cancel.is_cancelled() {
            tracing::info!(delegation = %record.id, "delegate: stopped in its conversation");
            let _ = self.store.delegation_ended(&record.id, "stopped").await;
            return;
        }
        let event = Inbound {
            event_id: format!("gateway:delegation:{}", record.id),
            chat: record.chat.clone(),
            author: record.author.clone(),
            kind: InboundKind::Wakeup(Wakeup {
                session_key: record.session_key.clone(),
                text: report_text(&record.id, &batch.report, restarted),
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
fn report_text(id: &str, report: &Value, restarted: bool) -> String {
    let count = report["results"].as_array().map_or(0, Vec::len);
    let again = if restarted {
        " (it was run again from the start because the gateway restarted while it ran)"
    } else {
        ""
    };
    format!(
        "[The background delegation {id} has finished: {count} task(s){again}. Its results follow as JSON; \
         tell the person what came of it.]\n\n{report}"
    )
}

/// At start: run again the delegations a stopped daemon left running (those whose report
/// is already in the inbox are only closed).
pub async fn resume(
    delegations: &Arc<Delegations>,
    agent: Weak<AgentRuntime>,
    config: DelegationConfig,
) {
    let records = match delegations.store.delegations_running().await {
        Ok(records) => records,
        Err(e) => {
            tracing::error!(error = %e, "delegate: cannot read the delegations left running");
            return;
        }
    };
    for record in records {
        let event_id = format!("gateway:delegation:{}", record.id);
        if let Ok(Some(_)) = delegations.store.inbox_state(&event_id).await {
            let _ = delegations
                .store
                .delegation_ended(&record.id, "reported")
                .await;
            continue;
        }
        let tasks: Vec<Task> = match serde_json::from_value(record.tasks.clone()) {
            Ok(tasks) => tasks,
            Err(e) => {
                tracing::error!(delegation = %record.id, error = %e, "delegate: the tasks cannot be read; dropped");
                let _ = delegations
                    .store
                    .delegation_ended(&record.id, "failed")
                    .await;
                continue;
            }
        };
        let Some(agent) = agent.upgrade() else { return };
        tracing::info!(delegation = %record.id, tasks = tasks.len(), "delegate: running again a delegation the last run left unfinished");
        let cancel = delegations.token();
        let parent = ToolContext {
            session_key: record.session_key.clone(),
            session_id: record.session_id.clone(),
            chat: record.chat.clone(),
            author: record.author.clone(),
            cancel: cancel.clone(),
            attention: CancellationToken::new(),
            usage: Default::default(),
            depth: 0,
        };
        let batch = tokio::spawn(run_batch(agent, config.clone(), tasks, parent));
        delegations.adopt(record, cancel, batch, true).await;
    }
}
