//! The approval broker. A dangerous `terminal` call asks [`ApprovalBroker::check`], which
//! returns at once for harmless commands and for pattern classes already approved (for the
//! session, or always). Otherwise it records the request, queues the prompt (choices where
//! the platform has them, `/approve` `/deny` text always; see [`super::prompt`]), and waits
//! for [`ApprovalBroker::resolve`] (a press or a text command from an allowed person in that
//! chat), the timeout, or the turn's cancellation (`/stop`, an interrupting message).
//! Whoever removes the pending entry under the lock owns the outcome, so a press and a
//! timeout can never both win. The decision is recorded first; then the prompt is settled
//! through the outbox (rewritten if it has not gone out, else edited behind it in the
//! chat's lane), so an outcome never overtakes its prompt and a decided prompt never goes
//! out with live choices.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hermes_adapter::{Author, ChatRef, ChoiceLimits};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::detect::{self, Danger, Scene};
use super::prompt::{self, Ask, Decision, human_duration};
use crate::config::{ApprovalConfig, ApprovalMode};
use crate::delivery::Delivery;
use crate::store::Store;

/// Which pending request a decision is for.
#[derive(Debug, Clone)]
pub enum Target {
    /// The request a button belongs to.
    Id(i64),
    /// The oldest request of this session whose prompt has gone out (text commands).
    OldestOf(String),
    /// The request whose prompt is the platform message with this id (a text command sent
    /// as a reply to the prompt).
    Prompt(String),
}

/// What became of a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Decided; `outcome` is what the prompt and the model were told too.
    Resolved { id: i64, outcome: String },
    /// Nothing (or not this request) is waiting: decided or expired already.
    NothingPending,
    /// The request belongs to another chat.
    OtherChat,
    /// The request is another person's: only whoever's turn asked for it decides it.
    NotYours { owner: String },
}

/// Whether the tool may run the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    Run,
    /// Not run; the text tells the model why.
    Refused(String),
}

struct Verdict {
    decision: Decision,
    by: String,
    /// An admin decided: "always" is for everyone's commands, not only the asker's.
    by_admin: bool,
    /// Where the waiting turn reports the outcome it settled on, for the decider.
    outcome: oneshot::Sender<String>,
}

struct Pending {
    chat: ChatRef,
    session_key: String,
    /// Whose turn asked: the one person who may decide.
    asker: Author,
    /// The asking turn's cancellation (a stop cancels a turn no press can reach now).
    turn: CancellationToken,
    prompt_row: Option<i64>,
    decide: oneshot::Sender<Verdict>,
}

/// Whose commands a standing approval for `ctx`'s asker covers (`platform:user_id`).
fn owner_of(ctx: &CheckContext<'_>) -> String {
    format!("{}:{}", ctx.chat.platform, ctx.asker.user_id)
}

/// Where a check comes from.
pub struct CheckContext<'a> {
    pub session_key: &'a str,
    pub chat: &'a ChatRef,
    /// Whose turn the command is for (a scheduled job's author, a sub-agent's person).
    pub asker: &'a Author,
    pub cancel: &'a CancellationToken,
    /// The directory the command runs in.
    pub workdir: &'a Path,
    pub background: bool,
}

/// "For this session" approvals are forgotten after a day without use, and at most this
/// many sessions keep them.
const SESSION_APPROVALS_IDLE: Duration = Duration::from_secs(24 * 3600);
const SESSION_APPROVALS_MAX: usize = 4096;
/// How long a decider waits to hear the outcome the waiting turn settled on.
const OUTCOME_WAIT: Duration = Duration::from_secs(2);

pub struct ApprovalBroker {
    store: Store,
    delivery: Delivery,
    config: ApprovalConfig,
    /// The gateway's side of every check (home, pid); the working directory is per check.
    scene: Scene,
    pending: Mutex<HashMap<i64, Pending>>,
    /// Pattern classes approved "for this session", by session key, with their last use.
    session_allowed: Mutex<HashMap<String, (HashSet<&'static str>, Instant)>>,
    /// The daemon is stopping: no press can arrive, so waiting turns are cancelled (and
    /// asked again after the start), which the prompt says.
    stopping: std::sync::atomic::AtomicBool,
}

enum Ending {
    /// The decision, who made it, whether an admin did, and where to tell the decider.
    Decided(Decision, String, bool, Option<oneshot::Sender<String>>),
    Expired,
    Cancelled(Option<oneshot::Sender<String>>),
}

impl ApprovalBroker {
    /// Where commands are judged: the homes they must keep out of among it.
    pub fn scene(&self) -> &Scene {
        &self.scene
    }

    pub fn new(store: Store, delivery: Delivery, config: ApprovalConfig, scene: Scene) -> Self {
        ApprovalBroker {
            store,
            delivery,
            config,
            scene,
            pending: Mutex::new(HashMap::new()),
            session_allowed: Mutex::new(HashMap::new()),
            stopping: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// A broker over an in-memory store with no platform, for tests of what uses it.
    #[cfg(test)]
    pub(crate) fn for_tests() -> std::sync::Arc<ApprovalBroker> {
        let store = Store::open_in_memory().expect("in-memory store");
        let delivery = Delivery::new(
            store.clone(),
            HashMap::new(),
            crate::config::DeliveryConfig::default(),
            tokio_util::sync::CancellationToken::new(),
        );
        let config = ApprovalConfig {
            mode: crate::config::ApprovalMode::Manual,
            timeout: Duration::from_secs(1),
            deny: Vec::new(),
            allowlist: Vec::new(),
        };
        let scene = Scene::of_this_process("/nonexistent/hermes".into(), "/tmp".into());
        std::sync::Arc::new(ApprovalBroker::new(store, delivery, config, scene))
    }

    /// The dangers of `command` run from `workdir`. Parsing is CPU work on a thread of its
    /// own (see [`detect::detect`]), so it runs off the async workers.
    async fn dangers(&self, command: &str, workdir: &Path) -> Vec<Danger> {
        let scene = Scene {
            cwd: workdir.to_path_buf(),
            ..self.scene.clone()
        };
        let text = command.to_owned();
        match tokio::task::spawn_blocking(move || detect::detect(&text, &scene)).await {
            Ok(dangers) => dangers,
            Err(e) => {
                tracing::error!(error = %e, "approval: the check failed; asking");
                vec![Danger::unchecked()]
            }
        }
    }

    /// May `command` run in this session? Waits for a person when it is dangerous.
    pub async fn check(&self, ctx: CheckContext<'_>, command: &str) -> Gate {
        self.check_with(ctx, command, Vec::new()).await
    }

    /// [`Self::check`], with `extra` findings of the caller's besides the command's own
    /// dangers (a file tool's write outside the allowed roots).
    pub async fn check_with(
        &self,
        ctx: CheckContext<'_>,
        command: &str,
        extra: Vec<Danger>,
    ) -> Gate {
        if let Some(rule) = denied_by_rule(&self.config, command) {
            tracing::warn!(command, rule, "approval: refused by approvals.deny");
            return Gate::Refused(format!(
                "BLOCKED: this command matches the deny rule '{rule}' (approvals.deny in config.yaml). \
                 It cannot be run; do not try another way. Tell the person if it is needed."
            ));
        }
        if self.config.mode == ApprovalMode::Off {
            return Gate::Run;
        }
        let mut dangers = self.dangers(command, ctx.workdir).await;
        dangers.extend(extra);
        if dangers.is_empty() {
            return Gate::Run;
        }
        self.decide(ctx, command, dangers, false).await
    }

    /// May this `execute_code` script run? The whole script is shown, never shortened
    /// (Hermes' one approval per script in the gateway, class `execute_code`), with what in
    /// its text needs an approval of its own (a script naming the gateway's secrets is
    /// asked about even when scripts are allowed for the session); the commands it runs
    /// through `terminal` are checked again one by one.
    pub async fn check_script(&self, ctx: CheckContext<'_>, script: &str) -> Gate {
        if self.config.mode == ApprovalMode::Off {
            return Gate::Run;
        }
        let mut dangers = vec![Danger::of(&super::detect::classes::EXECUTE_CODE)];
        let scene = Scene {
            cwd: ctx.workdir.to_path_buf(),
            ..self.scene.clone()
        };
        dangers.extend(detect::script_dangers(script, &scene));
        self.decide(ctx, script, dangers, true).await
    }

    /// Run what a session approval, the allowlists or a person allows; ask otherwise
    /// (`whole`: the prompt shows all of `command`, however long).
    async fn decide(
        &self,
        ctx: CheckContext<'_>,
        command: &str,
        dangers: Vec<Danger>,
        whole: bool,
    ) -> Gate {
        let keys: Vec<&'static str> = dangers.iter().map(|d| d.key).collect();
        if self.session_covers(ctx.session_key, &keys) {
            tracing::info!(command, "approval: covered by a session approval");
            return Gate::Run;
        }
        if allowlisted(&self.config, command, &dangers) {
            tracing::info!(command, "approval: covered by command_allowlist");
            return Gate::Run;
        }
        match self.store.allowlist_covers(&keys, &owner_of(&ctx)).await {
            Ok(true) => {
                tracing::info!(command, "approval: covered by the standing allowlist");
                return Gate::Run;
            }
            Ok(false) => {}
            Err(e) => tracing::error!(error = %e, "approval: cannot read the allowlist; asking"),
        }
        match self.ask(&ctx, command, &dangers, whole).await {
            Ok(gate) => gate,
            Err(e) => {
                tracing::error!(error = %e, "approval: could not ask; the command is not run");
                Gate::Refused(format!(
                    "The command was NOT run: the approval request could not be sent ({e})."
                ))
            }
        }
    }

    fn session_covers(&self, session_key: &str, keys: &[&str]) -> bool {
        let mut allowed = self.session_allowed.lock().expect("session approvals lock");
        match allowed.get_mut(session_key) {
            Some((set, used)) if keys.iter().all(|k| set.contains(k)) => {
                *used = Instant::now();
                true
            }
            _ => false,
        }
    }

    fn allow_for_session(&self, session_key: &str, keys: &[&'static str]) {
        let mut allowed = self.session_allowed.lock().expect("session approvals lock");
        let now = Instant::now();
        allowed.retain(|_, (_, used)| now.duration_since(*used) < SESSION_APPROVALS_IDLE);
        if allowed.len() >= SESSION_APPROVALS_MAX && !allowed.contains_key(session_key) {
            let oldest = allowed
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                allowed.remove(&oldest);
            }
        }
        let entry = allowed
            .entry(session_key.to_owned())
            .or_insert_with(|| (HashSet::new(), now));
        entry.0.extend(keys.iter().copied());
        entry.1 = now;
    }

    /// How many sessions hold "for this session" approvals (for tests and status).
    pub fn sessions_with_approvals(&self) -> usize {
        self.session_allowed
            .lock()
            .expect("session approvals lock")
            .len()
    }

    /// Ask a person about `command`: record the request, send the prompt, wait for a
    /// decision (or the timeout, or the turn's cancellation) and settle on the outcome.
    /// `Err` when the request could not be recorded or the prompt could not be sent.
    async fn ask(
        &self,
        ctx: &CheckContext<'_>,
        command: &str,
        dangers: &[Danger],
        whole: bool,
    ) -> Result<Gate, crate::store::StoreError> {
        let keys: Vec<&'static str> = dangers.iter().map(|d| d.key).collect();
        let id = self
            .store
            .approval_create(ctx.session_key, ctx.chat, command, &keys)
            .await?;
        let rows = self.prompt_rows(id, ctx, command, dangers, whole);
        // Listed before the prompt can go out, so an early press finds it.
        let decision = self.list_pending(id, ctx);
        let prompt_row = self.send_prompt(id, ctx, rows).await?;
        tracing::info!(id, command, "approval: waiting for a person");
        let ending = self.wait_for_ending(id, ctx, decision).await;
        Ok(self
            .conclude(id, ctx, command, dangers, prompt_row, ending)
            .await)
    }

    /// The outbox rows of request `id`'s prompt, with the choices (where the platform has
    /// them) on the last one.
    fn prompt_rows(
        &self,
        id: i64,
        ctx: &CheckContext<'_>,
        command: &str,
        dangers: &[Danger],
        whole: bool,
    ) -> Vec<crate::store::NewOutboxRow> {
        let limits = self
            .delivery
            .sender(ctx.chat.platform)
            .map_or(ChoiceLimits::NONE, |s| s.capabilities().choices);
        let choices = prompt::choices(id, limits);
        let text = prompt::prompt_text(&Ask {
            command,
            whole,
            dangers,
            workdir: ctx.workdir,
            background: ctx.background,
            timeout: self.config.timeout,
            buttons: !choices.is_empty(),
        });
        let mut rows = self.delivery.reply_rows(ctx.chat, &text, None);
        if let Some(last) = rows.last_mut() {
            last.choices = choices;
        }
        rows
    }

    /// Put request `id` on the pending list; the other end hears the person's verdict.
    fn list_pending(&self, id: i64, ctx: &CheckContext<'_>) -> oneshot::Receiver<Verdict> {
        let (decide, decision) = oneshot::channel();
        self.pending.lock().expect("pending lock").insert(
            id,
            Pending {
                chat: ctx.chat.clone(),
                session_key: ctx.session_key.to_owned(),
                asker: ctx.asker.clone(),
                turn: ctx.cancel.clone(),
                prompt_row: None,
                decide,
            },
        );
        decision
    }

    /// Take request `id` off the pending list (it was never asked after all).
    fn withdraw(&self, id: i64) {
        self.pending.lock().expect("pending lock").remove(&id);
    }

    /// Queue the prompt `rows` of request `id` and tie the request to it; the prompt's
    /// outbox row, if any. On failure the request is withdrawn and recorded as cancelled.
    async fn send_prompt(
        &self,
        id: i64,
        ctx: &CheckContext<'_>,
        rows: Vec<crate::store::NewOutboxRow>,
    ) -> Result<Option<i64>, crate::store::StoreError> {
        let prompt_row = match self.delivery.queue(rows).await {
            Ok(ids) => ids.last().copied(),
            Err(e) => {
                self.withdraw(id);
                let _ = self.store.approval_decide(id, "cancelled", None).await;
                return Err(e);
            }
        };
        if let Some(row) = prompt_row {
            if let Err(e) = self.store.approval_set_prompt(id, row).await {
                // Nobody could ever settle a request the store does not tie to its prompt:
                // take the choices back off the prompt and give up on it.
                self.withdraw(id);
                let _ = self.store.approval_decide(id, "cancelled", None).await;
                self.show_outcome(
                    ctx.chat,
                    Some(row),
                    "⚠️ Cancelled: this request could not be recorded, so the command was NOT run.",
                )
                .await;
                return Err(e);
            }
            if let Some(p) = self.pending.lock().expect("pending lock").get_mut(&id) {
                p.prompt_row = Some(row);
            }
        }
        Ok(prompt_row)
    }

    /// Wait for request `id` to end: a person's verdict (through `decision`), the
    /// timeout, or the turn's cancellation.
    async fn wait_for_ending(
        &self,
        id: i64,
        ctx: &CheckContext<'_>,
        mut decision: oneshot::Receiver<Verdict>,
    ) -> Ending {
        let ending = tokio::select! {
            verdict = &mut decision => match verdict {
                Ok(v) => Ending::Decided(v.decision, v.by, v.by_admin, Some(v.outcome)),
                Err(_) => Ending::Cancelled(None),
            },
            _ = tokio::time::sleep(self.config.timeout) => Ending::Expired,
            _ = ctx.cancel.cancelled() => Ending::Cancelled(None),
        };
        // Whoever removes the entry owns the outcome. If a decider got there first (a press
        // at the very moment of the timeout), its decision stands: it sends it right after
        // the removal, with no await in between, so waiting for it is brief.
        let ending = match ending {
            decided @ Ending::Decided(..) => decided,
            other => {
                let removed = self.pending.lock().expect("pending lock").remove(&id);
                match removed {
                    Some(_) => other,
                    None => match decision.await {
                        Ok(v) => Ending::Decided(v.decision, v.by, v.by_admin, Some(v.outcome)),
                        Err(_) => other,
                    },
                }
            }
        };
        // A decision never starts a command whose turn was stopped meanwhile.
        match ending {
            Ending::Decided(_, _, _, outcome) if ctx.cancel.is_cancelled() => {
                Ending::Cancelled(outcome)
            }
            other => other,
        }
    }

    async fn conclude(
        &self,
        id: i64,
        ctx: &CheckContext<'_>,
        command: &str,
        dangers: &[Danger],
        prompt_row: Option<i64>,
        ending: Ending,
    ) -> Gate {
        let keys: Vec<&'static str> = dangers.iter().map(|d| d.key).collect();
        let window = human_duration(self.config.timeout);
        let (state, by, line, gate, tell) = match ending {
            Ending::Decided(decision, by, by_admin, tell) => {
                let gate = match &decision {
                    Decision::Deny(reason) => Gate::Refused(match reason {
                        Some(r) => format!("The person denied this command; it was NOT run. Their reason: {r}"),
                        None => "The person denied this command; it was NOT run. Do not run it another way; ask what they want instead.".into(),
                    }),
                    _ => Gate::Run,
                };
                match &decision {
                    Decision::Session => self.allow_for_session(ctx.session_key, &keys),
                    Decision::Always => {
                        // An admin's stands for everyone; anyone else's for the asker's
                        // own commands (they are the asker: only admins decide for others).
                        let owner = if by_admin {
                            String::new()
                        } else {
                            owner_of(ctx)
                        };
                        for d in dangers {
                            if let Err(e) = self
                                .store
                                .allowlist_add(d.key, d.description, command, &by, &owner)
                                .await
                            {
                                tracing::error!(error = %e, "approval: could not save the standing approval");
                            }
                        }
                    }
                    _ => {}
                }
                let state = decision.state();
                let mut line = format!("{} by {by}.", decision.acknowledgement());
                if let Decision::Deny(Some(reason)) = &decision {
                    line = format!("❌ Denied by {by}: {reason}");
                }
                if decision == Decision::Always {
                    let whose = if by_admin {
                        String::new()
                    } else {
                        format!("{}'s commands only; ", ctx.asker.display_name)
                    };
                    line.push_str(&format!(
                        " ({whose}undo with `hermes-gateway approvals revoke {}`)",
                        keys.join(" ")
                    ));
                }
                (state, Some(by), line, gate, tell)
            }
            Ending::Expired => (
                "expired",
                None,
                format!("⌛ Expired: nobody answered within {window}, so the command was NOT run."),
                Gate::Refused(format!(
                    "Nobody approved this command within {window}, so it was NOT run. Tell the person; they can ask you to try again."
                )),
                None,
            ),
            Ending::Cancelled(tell) => (
                "cancelled",
                None,
                if self.stopping.load(std::sync::atomic::Ordering::Relaxed) {
                    "⏹ The gateway is restarting, so the command was NOT run; you will be asked again once it is back.".to_owned()
                } else {
                    "⏹ Cancelled: the task was stopped, so the command was NOT run.".to_owned()
                },
                Gate::Refused("The command was NOT run: the task was stopped.".into()),
                tell,
            ),
        };
        if let Some(tell) = tell {
            let _ = tell.send(line.clone());
        }
        if let Err(e) = self.store.approval_decide(id, state, by).await {
            tracing::error!(error = %e, "approval: could not record the decision");
        }
        tracing::info!(id, state, "approval: decided");
        crate::metrics::approval(state);
        self.show_outcome(ctx.chat, prompt_row, &line).await;
        gate
    }

    /// Show the outcome under the prompt (dropping its choices) through the outbox, or in a
    /// message of its own when there is no prompt row.
    async fn show_outcome(&self, chat: &ChatRef, prompt_row: Option<i64>, line: &str) {
        let settled = match prompt_row {
            Some(row) => self.delivery.settle(row, line).await,
            None => self.delivery.reply(chat, line, None).await.map(|_| ()),
        };
        if let Err(e) = settled {
            tracing::error!(error = %e, "approval: could not show the outcome");
        }
    }

    /// A decision by `by`, an allowed person in `chat` (the router checked who they are).
    /// A request is decided only by the person whose turn asked for it, or by an admin
    /// (`admin`, where tiers are on; an admin's "always" stands for everyone, anyone
    /// else's for the asker's own commands): anyone else is refused
    /// ([`Resolution::NotYours`]), and a text command without a reply looks only at
    /// their own requests. A button names its request; a text command replying to a prompt names
    /// that prompt's; else it takes the oldest request of the person's session whose prompt
    /// has been delivered. Returns once the waiting turn has settled the outcome, so the
    /// decider is told what the prompt and the model are told.
    pub async fn resolve(
        &self,
        chat: &ChatRef,
        target: Target,
        decision: Decision,
        by: &Author,
        admin: bool,
    ) -> Resolution {
        let id = match target {
            Target::Id(id) => id,
            Target::OldestOf(session_key) => {
                let mut candidates: Vec<(i64, Option<i64>)> = {
                    let pending = self.pending.lock().expect("pending lock");
                    pending
                        .iter()
                        .filter(|(_, p)| {
                            p.session_key == session_key
                                && p.chat.same_chat(chat)
                                && p.asker.user_id == by.user_id
                        })
                        .map(|(id, p)| (*id, p.prompt_row))
                        .collect()
                };
                candidates.sort_unstable();
                let mut chosen = None;
                for (id, row) in candidates {
                    if self.delivered(row).await {
                        chosen = Some(id);
                        break;
                    }
                }
                match chosen {
                    Some(id) => id,
                    None => return Resolution::NothingPending,
                }
            }
            Target::Prompt(message_id) => {
                let candidates: Vec<(i64, i64)> = {
                    let pending = self.pending.lock().expect("pending lock");
                    pending
                        .iter()
                        .filter(|(_, p)| p.chat.same_chat(chat))
                        .filter_map(|(id, p)| Some((*id, p.prompt_row?)))
                        .collect()
                };
                let mut chosen = None;
                for (id, row) in candidates {
                    if let Ok(Some(sent_as)) = self.store.outbox_platform_id(row).await
                        && sent_as == message_id
                    {
                        chosen = Some(id);
                        break;
                    }
                }
                match chosen {
                    Some(id) => id,
                    None => return Resolution::NothingPending,
                }
            }
        };
        {
            let pending = self.pending.lock().expect("pending lock");
            match pending.get(&id) {
                None => return Resolution::NothingPending,
                Some(p) if !p.chat.same_chat(chat) => return Resolution::OtherChat,
                Some(p) if p.asker.user_id != by.user_id && !admin => {
                    return Resolution::NotYours {
                        owner: p.asker.display_name.clone(),
                    };
                }
                Some(_) => {}
            }
        }
        let Some(entry) = self.pending.lock().expect("pending lock").remove(&id) else {
            return Resolution::NothingPending;
        };
        let (tell, told) = oneshot::channel();
        let fallback = decision.acknowledgement().to_owned();
        let _ = entry.decide.send(Verdict {
            decision,
            by: by.display_name.clone(),
            by_admin: admin,
            outcome: tell,
        });
        let outcome = match tokio::time::timeout(OUTCOME_WAIT, told).await {
            Ok(Ok(line)) => line,
            Ok(Err(_)) => "⚠️ The request was withdrawn; the command was NOT run.".to_owned(),
            Err(_) => fallback,
        };
        Resolution::Resolved { id, outcome }
    }

    /// The daemon stops taking messages: no decision can arrive any more, so the turns
    /// waiting for one are cancelled (their prompts say the gateway is restarting; they
    /// run again, and ask again, after the start). Returns how many there were.
    pub fn stop_taking_decisions(&self) -> usize {
        self.stopping
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let pending = self.pending.lock().expect("pending lock");
        for waiting in pending.values() {
            waiting.turn.cancel();
        }
        pending.len()
    }

    /// Whether a turn in a chat `mine` keeps waits for a person's decision (its event is
    /// closed by then: a kill does not run it again, it is told).
    pub fn waits_in(&self, mine: impl Fn(&ChatRef) -> bool) -> bool {
        self.pending
            .lock()
            .expect("pending lock")
            .values()
            .any(|waiting| mine(&waiting.chat))
    }

    /// Whether the prompt queued as outbox row `row` has reached the chat.
    async fn delivered(&self, row: Option<i64>) -> bool {
        match row {
            Some(row) => matches!(self.store.outbox_platform_id(row).await, Ok(Some(_))),
            None => false,
        }
    }

    /// Forget "for this session" approvals (`/new`).
    pub fn forget_session(&self, session_key: &str) {
        self.session_allowed
            .lock()
            .expect("session approvals lock")
            .remove(session_key);
    }

    /// Startup (or shares of the work taken over): the approvals of the chats `mine` keeps
    /// that an earlier run left pending expire; nothing runs on its own. Call it before
    /// delivery starts, so stale prompts are withdrawn before they could be sent.
    pub async fn expire_leftovers(&self, mine: impl Fn(&ChatRef) -> bool) {
        let leftovers = match self.store.approvals_pending().await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "approval: cannot read pending approvals");
                return;
            }
        };
        for p in leftovers.into_iter().filter(|p| mine(&p.chat)) {
            let _ = self.store.approval_decide(p.id, "expired", None).await;
            let mut preview: String = p.command.chars().take(200).collect();
            if preview.len() < p.command.len() {
                preview.push('…');
            }
            let line = format!(
                "⌛ The gateway restarted while `{preview}` was waiting for approval, so it was NOT run."
            );
            tracing::info!(id = p.id, "approval: expired by restart");
            // A prompt still in the outbox goes out settled, without live choices.
            self.show_outcome(&p.chat, p.prompt_outbox_id, &line).await;
        }
    }
}

/// The `approvals.deny` glob `command` matches, on its raw or its normalised text.
fn denied_by_rule<'a>(config: &'a ApprovalConfig, command: &str) -> Option<&'a str> {
    if config.deny.is_empty() {
        return None;
    }
    let variants = [
        command.trim().to_lowercase(),
        detect::normalise(command).trim().to_owned(),
    ];
    config.deny.iter().map(String::as_str).find(|rule| {
        let rule = rule.trim().to_lowercase();
        glob::Pattern::new(&rule).is_ok_and(|p| variants.iter().any(|v| p.matches(v)))
            || variants.contains(&rule)
    })
}

/// `command_allowlist`: every class named, or the whole (simple) command listed.
fn allowlisted(config: &ApprovalConfig, command: &str, dangers: &[Danger]) -> bool {
    let list = &config.allowlist;
    if list.is_empty() {
        return false;
    }
    let named = |d: &Danger| {
        list.iter()
            .filter_map(|entry| detect::named(entry))
            .any(|class| class.key == d.key)
    };
    if dangers.iter().all(named) {
        return true;
    }
    // A listed command covers itself only when nothing else is chained to it.
    let command = command.trim();
    let compound = ["\n", "&&", "||", ";", "&", "|", "<", ">", "`", "$("]
        .iter()
        .any(|op| command.contains(op));
    !compound
        && list.iter().any(|entry| {
            let entry = entry.trim();
            entry == command
                || (entry.contains(['*', '?', '['])
                    && glob::Pattern::new(entry).is_ok_and(|p| p.matches(command)))
        })
}

#[cfg(test)]
mod tests;
