//! The commands that change what a conversation is and how it is answered: `/model`,
//! `/personality`, `/verbose` (chat settings kept in the store), `/title`, `/sethome`, and
//! the history edits `/retry`, `/undo`, `/compress` (refused while a turn runs: they would
//! race it). Also [`ChatSettings`], what a turn reads of those settings.

use super::*;
use crate::config::ToolProgress;
use crate::store::Undone;

/// The settings names in the store.
const MODEL: &str = "model";
const PERSONALITY: &str = "personality";
const VERBOSE: &str = "verbose";
const REASONING: &str = "reasoning";

/// Hermes' reasoning effort levels (`agent.reasoning_effort`, `/reasoning`).
pub(super) const EFFORTS: &[&str] = &[
    "none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra",
];

/// What the chat chose with commands.
#[derive(Debug, Default)]
pub(super) struct ChatSettings {
    pub model: Option<String>,
    pub personality: Option<String>,
    pub verbose: Option<ToolProgress>,
    /// The chat's reasoning effort (`/reasoning`), over `agent.reasoning_effort`.
    pub reasoning: Option<String>,
    /// When the chat hears its replies (`/voice`).
    pub voice: super::voice::VoiceMode,
}

impl ChatSettings {
    pub(super) async fn load(store: &Store, key: &str) -> ChatSettings {
        let mut settings = ChatSettings::default();
        match store.chat_settings(key).await {
            Ok(rows) => {
                for (name, value) in rows {
                    match name.as_str() {
                        MODEL => settings.model = Some(value),
                        PERSONALITY => settings.personality = Some(value),
                        VERBOSE => settings.verbose = progress_mode(&value),
                        REASONING => settings.reasoning = Some(value),
                        super::voice::VOICE => {
                            settings.voice = super::voice::VoiceMode::read(&value)
                        }
                        _ => {}
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "session: cannot read the chat's settings; using the defaults")
            }
        }
        settings
    }
}

impl SessionActor {
    /// The model the chat uses (see [`chat_model_of`]).
    pub(super) async fn chat_model(&self) -> Arc<crate::llm::LlmClient> {
        chat_model_of(&self.services, &self.key, &self.chat).await
    }
}

/// The model the chat `key` in `chat` uses: its `/model` choice where that still resolves,
/// else its channel's (`channel_overrides`), else the main one.
pub(super) async fn chat_model_of(
    services: &SessionServices,
    key: &str,
    chat: &hermes_adapter::ChatRef,
) -> Arc<crate::llm::LlmClient> {
    let models = &services.agent.models;
    let channel = services.channel_overrides.for_chat(chat);
    ChatSettings::load(&services.store, key)
        .await
        .model
        .and_then(|name| models.resolve(&name).ok())
        .or_else(|| {
            let name = channel.and_then(|c| c.model.as_deref())?;
            models.resolve(name).ok()
        })
        .unwrap_or_else(|| models.primary.clone())
}

fn progress_mode(text: &str) -> Option<ToolProgress> {
    match text.trim().to_ascii_lowercase().as_str() {
        "off" | "false" | "none" => Some(ToolProgress::Off),
        "new" => Some(ToolProgress::New),
        "all" | "verbose" | "true" | "on" => Some(ToolProgress::All),
        _ => None,
    }
}

fn progress_name(mode: ToolProgress) -> &'static str {
    match mode {
        ToolProgress::Off => "off",
        ToolProgress::New => "new",
        ToolProgress::All => "all",
    }
}

impl SessionActor {
    /// The open session's id (opening one if needed).
    pub(super) async fn session_id_for(&mut self, author: &Author) -> Result<String, String> {
        match self
            .services
            .store
            .session_open(&self.key, &self.chat, Some(&author.user_id))
            .await
        {
            Ok(s) => {
                self.session_id = Some(s.id.clone());
                Ok(s.id)
            }
            Err(e) => {
                tracing::error!(error = %e, "session: cannot open the session");
                Err(
                    "⚠️ I could not open this conversation (database error); please try again."
                        .into(),
                )
            }
        }
    }

    /// Answer a chat command; `/retry` starts a turn instead.
    pub(super) async fn chat_command(
        &mut self,
        inbox_id: i64,
        message_id: String,
        author: &Author,
        command: SessionCommand,
        running: &mut Option<RunningTurn>,
    ) {
        let text = match command {
            SessionCommand::Retry => match self.retry(inbox_id, &message_id, author, running).await
            {
                Some(text) => text,
                None => return, // a turn answers it
            },
            SessionCommand::Undo => self.undo(inbox_id, author).await,
            SessionCommand::Compress => {
                return self.compress(inbox_id, message_id, author).await;
            }
            SessionCommand::Model(name) => self.model(name.trim()).await,
            SessionCommand::Title(title) => self.title(author, title.trim()).await,
            SessionCommand::SetHome => self.set_home(author).await,
            SessionCommand::Personality(name) => self.personality(name.trim()).await,
            SessionCommand::Verbose(mode) => self.verbose(mode.trim()).await,
            SessionCommand::Reasoning(args) => self.reasoning(args.trim()).await,
            SessionCommand::ReloadMcp => self.reload_mcp().await,
            SessionCommand::ReloadSkills => self.reload_skills().await,
            SessionCommand::Voice(args) => self.voice(&args).await,
            _ => return,
        };
        self.say(inbox_id, &message_id, &text).await;
    }

    /// `/retry`: the person's last message is taken back with what answered it, and asked
    /// again (the new answer replies to the `/retry`). `Some` is a reply when it cannot.
    async fn retry(
        &mut self,
        inbox_id: i64,
        message_id: &str,
        author: &Author,
        running: &mut Option<RunningTurn>,
    ) -> Option<String> {
        let session = match self.session_id_for(author).await {
            Ok(id) => id,
            Err(text) => return Some(text),
        };
        match self
            .services
            .store
            .session_undo(&session, inbox_id, true)
            .await
        {
            Ok(Undone::Hidden(text)) => {
                let input = UserInput {
                    inbox_id: Some(inbox_id),
                    message_id: Some(message_id.to_owned()),
                    author: author.clone(),
                    text: text.clone(),
                    attachments: Vec::new(),
                };
                self.start(vec![input], text, Vec::new(), running).await;
                None
            }
            Ok(Undone::Nothing) => Some("There's no earlier message to retry.".into()),
            Ok(Undone::NoText) => Some(
                "Your last message had no words to ask again (only a file); send it again instead."
                    .into(),
            ),
            Err(e) => {
                tracing::error!(error = %e, "session: /retry could not edit the history");
                Some("⚠️ I could not change the history (database error).".into())
            }
        }
    }

    /// `/undo`: the last exchange leaves the model's context (it stays searchable).
    async fn undo(&mut self, inbox_id: i64, author: &Author) -> String {
        let session = match self.session_id_for(author).await {
            Ok(id) => id,
            Err(text) => return text,
        };
        match self
            .services
            .store
            .session_undo(&session, inbox_id, false)
            .await
        {
            Ok(Undone::Hidden(text)) if text.trim().is_empty() => {
                "↩️ Undone: your last message and my answer. I won't see them again.".into()
            }
            Ok(Undone::Hidden(text)) => format!(
                "↩️ Undone: your message “{}” and my answer. I won't see them again.",
                short(&text, 60)
            ),
            Ok(Undone::Nothing | Undone::NoText) => "There's nothing to undo.".into(),
            Err(e) => {
                tracing::error!(error = %e, "session: /undo could not edit the history");
                "⚠️ I could not change the history (database error).".into()
            }
        }
    }

    /// `/compress`: summarise the earlier part of the conversation now. The summary takes
    /// a model call, so it runs beside the actor (which goes on taking `/stop` and new
    /// messages; a turn started meanwhile only adds messages after what is summarised),
    /// and answers the command itself.
    async fn compress(&mut self, inbox_id: i64, message_id: String, author: &Author) {
        let Some(compressor) = self.services.agent.compressor.clone() else {
            let text = "Compression is turned off here (compression.enabled: false).";
            return self.say(inbox_id, &message_id, text).await;
        };
        let session = match self.session_id_for(author).await {
            Ok(id) => id,
            Err(text) => return self.say(inbox_id, &message_id, &text).await,
        };
        // Against the model the chat uses (its /model choice), as a turn would measure.
        let context = self.chat_model().await.config().context_length;
        let services = self.services.clone();
        let chat = self.chat.clone();
        let cancel = self.services.work.child_token();
        self.services.tasks.spawn(async move {
            let text = match compressor
                .compress(&services.store, &session, &cancel, false, context)
                .await
            {
                Ok(crate::agent::Compressed::Done {
                    replaced,
                    before,
                    after,
                }) => format!(
                    "🗜️ Compressed: {replaced} earlier messages became a summary (about {before} → {after} tokens). They stay in the history search."
                ),
                Ok(crate::agent::Compressed::NothingToDo) => {
                    "The conversation is still too short to compress.".into()
                }
                Err(_) if cancel.is_cancelled() => return, // answered after the restart
                Err(e) => format!("⚠️ Compression failed: {e}"),
            };
            let rows = services
                .delivery
                .reply_rows(&chat, &text, Some(message_id));
            let record = TurnRecord::outcome(vec![inbox_id], InboxState::Done, "command", rows);
            if let Err(e) = services.delivery.commit(record).await {
                // The command stays open in the inbox and runs again after a restart.
                tracing::error!(error = %e, "session: could not record the answer to /compress");
            }
        });
    }

    /// `/model [name]`: show the chat's model, or switch it (`default` goes back).
    async fn model(&mut self, name: &str) -> String {
        let models = &self.services.agent.models;
        let store = &self.services.store;
        if name.is_empty() {
            let chosen = ChatSettings::load(store, &self.key).await.model;
            let current = chosen
                .as_deref()
                .and_then(|n| models.resolve(n).ok())
                .unwrap_or_else(|| models.primary.clone());
            let mut lines = vec![format!(
                "🤖 Model: {}",
                crate::agent::models::describe(&current)
            )];
            if chosen.is_some() {
                lines.push(format!(
                    "Default: {}",
                    crate::agent::models::describe(&models.primary)
                ));
            }
            if !models.fallbacks.is_empty() {
                let chain: Vec<String> = models
                    .fallbacks
                    .iter()
                    .map(|f| crate::agent::models::describe(f))
                    .collect();
                lines.push(format!("Fallbacks: {}", chain.join(" → ")));
            }
            lines.push(
                "Switch with /model provider:model (for example /model openrouter:anthropic/claude-sonnet-4) or /model name; /model default goes back."
                    .into(),
            );
            return lines.join("\n");
        }
        if matches!(name.to_ascii_lowercase().as_str(), "default" | "reset") {
            return match store.set_chat_setting(&self.key, MODEL, None).await {
                Ok(()) => format!(
                    "🤖 Back to the default model: {}.",
                    crate::agent::models::describe(&models.primary)
                ),
                Err(e) => store_failed(e),
            };
        }
        match models.resolve(name) {
            Ok(client) => match store
                .set_chat_setting(&self.key, MODEL, Some(name.to_owned()))
                .await
            {
                Ok(()) => format!(
                    "🤖 This chat now uses {}.",
                    crate::agent::models::describe(&client)
                ),
                Err(e) => store_failed(e),
            },
            Err(e) => format!("⚠️ I can't use {name:?}: {e}."),
        }
    }

    /// `/title [text]`.
    async fn title(&mut self, author: &Author, title: &str) -> String {
        let session = match self.session_id_for(author).await {
            Ok(id) => id,
            Err(text) => return text,
        };
        let store = &self.services.store;
        if title.is_empty() {
            return match store.session_title(&session).await {
                Ok(Some(t)) => format!("📝 Title: {t}"),
                Ok(None) => "This conversation has no title yet; /title <text> sets one.".into(),
                Err(e) => store_failed(e),
            };
        }
        let title = short(title, 100);
        match store.session_set_title(&session, &title).await {
            Ok(()) => format!("📝 Title set: {title}"),
            Err(e) => store_failed(e),
        }
    }

    /// `/sethome`: notices with no conversation of their own go to this chat.
    async fn set_home(&mut self, author: &Author) -> String {
        match self
            .services
            .store
            .set_home_channel(&self.chat, &author.display_name)
            .await
        {
            Ok(()) => format!(
                "🏠 This chat is now the home channel for {} (in place of the configured one; /status shows it).",
                self.chat.platform
            ),
            Err(e) => store_failed(e),
        }
    }

    /// `/personality [name]` (`none` goes back to none).
    async fn personality(&mut self, name: &str) -> String {
        let known = &self.services.agent.personalities;
        let store = &self.services.store;
        let names = || {
            if known.is_empty() {
                "none are set up (agent.personalities in config.yaml)".to_owned()
            } else {
                known.keys().cloned().collect::<Vec<_>>().join(", ")
            }
        };
        if name.is_empty() {
            let current = ChatSettings::load(store, &self.key)
                .await
                .personality
                .filter(|p| known.contains_key(p));
            return format!(
                "🎭 Personality: {}\nAvailable: {}\nChoose with /personality <name>; /personality none goes back.",
                current.as_deref().unwrap_or("none"),
                names()
            );
        }
        let name = name.to_ascii_lowercase();
        if matches!(name.as_str(), "none" | "default" | "reset") {
            return match store.set_chat_setting(&self.key, PERSONALITY, None).await {
                Ok(()) => "🎭 No personality: back to the plain prompt.".into(),
                Err(e) => store_failed(e),
            };
        }
        if !known.contains_key(&name) {
            return format!("There's no personality {name:?}. Available: {}", names());
        }
        match store
            .set_chat_setting(&self.key, PERSONALITY, Some(name.clone()))
            .await
        {
            Ok(()) => format!("🎭 Personality: {name}"),
            Err(e) => store_failed(e),
        }
    }

    /// `/verbose [off|new|all]`: without a word it moves to the next level.
    async fn verbose(&mut self, mode: &str) -> String {
        let store = &self.services.store;
        let current = ChatSettings::load(store, &self.key)
            .await
            .verbose
            .unwrap_or(
                self.services
                    .agent
                    .tool_progress
                    .for_platform(self.chat.platform),
            );
        let next = if mode.is_empty() {
            match current {
                ToolProgress::Off => ToolProgress::New,
                ToolProgress::New => ToolProgress::All,
                ToolProgress::All => ToolProgress::Off,
            }
        } else {
            match progress_mode(mode) {
                Some(m) => m,
                None => return format!("{mode:?} is not a level; use /verbose off, new or all."),
            }
        };
        match store
            .set_chat_setting(&self.key, VERBOSE, Some(progress_name(next).into()))
            .await
        {
            Ok(()) => format!(
                "🔧 Tool progress here: {} ({}).",
                progress_name(next),
                match next {
                    ToolProgress::Off => "tools run quietly",
                    ToolProgress::New => "a line when a different tool starts",
                    ToolProgress::All => "a line for every tool call",
                }
            ),
            Err(e) => store_failed(e),
        }
    }
}

impl SessionActor {
    /// `/reasoning [level | reset | show | hide]`: the chat's reasoning effort (kept with
    /// its other settings, for every session of the chat) over `agent.reasoning_effort`.
    async fn reasoning(&mut self, args: &str) -> String {
        let store = &self.services.store;
        let words: Vec<String> = args
            .split_whitespace()
            .map(str::to_ascii_lowercase)
            .collect();
        if words.iter().any(|w| w == "--global") {
            return "⚠️ `--global` is not supported here: the gateway does not write config.yaml. Set `agent.reasoning_effort` there (and reload) to change the default.".into();
        }
        let chosen = ChatSettings::load(store, &self.key).await.reasoning;
        let configured = self
            .services
            .agent
            .models
            .primary
            .config()
            .reasoning_effort
            .clone();
        match words.first().map(String::as_str) {
            None => {
                let (effort, scope) = match (&chosen, &configured) {
                    (Some(e), _) => (e.clone(), "this chat"),
                    (None, Some(e)) => (e.clone(), "global config"),
                    (None, None) => ("medium (default)".to_owned(), "global config"),
                };
                format!(
                    "🧠 **Reasoning Settings**\n\n**Effort:** `{effort}`\n**Scope:** {scope}\n**Display:** off\n\n_Usage:_ `/reasoning <none|minimal|low|medium|high|xhigh|max|ultra|reset>`"
                )
            }
            Some("reset") => match store.set_chat_setting(&self.key, REASONING, None).await {
                Ok(()) => "🧠 ✓ Session reasoning override cleared; falling back to global config.".into(),
                Err(e) => store_failed(e),
            },
            Some("show" | "on" | "hide" | "off") => "🧠 The model's thinking is not shown in chats here (its display is off); `/reasoning <level>` sets how much it thinks.".into(),
            Some(level) if EFFORTS.contains(&level) => match store
                .set_chat_setting(&self.key, REASONING, Some(level.to_owned()))
                .await
            {
                Ok(()) => format!(
                    "🧠 ✓ Reasoning effort set to `{level}` for this chat\n_(takes effect on next message)_"
                ),
                Err(e) => store_failed(e),
            },
            Some(other) => format!(
                "⚠️ Unknown argument: `{other}`\n\n**Valid levels:** none, minimal, low, medium, high, xhigh, max, ultra"
            ),
        }
    }
}

fn store_failed(e: crate::store::StoreError) -> String {
    tracing::error!(error = %e, "session: a chat command could not reach the store");
    "⚠️ I could not save that (database error); please try again.".into()
}

/// At most `max` characters of `text`, with "…" when cut.
fn short(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
