//! Commands that act on the session itself and work while a turn runs: `/stop` (and
//! `/stop all`), `/new` (`/reset`), `/status`, `/usage`.

use super::*;

impl SessionActor {
    pub(super) async fn command(
        &mut self,
        inbox_id: i64,
        message_id: String,
        author: &Author,
        command: SessionCommand,
        running: &mut Option<RunningTurn>,
    ) {
        match command {
            SessionCommand::Stop | SessionCommand::StopAll => {
                // The turn first: it must not start anything new while its processes stop.
                // It is answered when it has really ended (see `turn_ended`); a second /stop
                // is answered with the first, and a /new already under way stays what ends
                // the turn.
                if let Some(turn) = running.as_mut() {
                    turn.stop_commands.push(inbox_id);
                    if turn.stop != Some(StopReason::Reset) {
                        turn.stop = Some(StopReason::Stop);
                    }
                    turn.cancel.cancel();
                }
                if matches!(command, SessionCommand::StopAll) || self.services.stop_kills_background
                {
                    let killed = self.services.processes.kill_session(&self.key).await;
                    if killed > 0 {
                        tracing::info!(session = %self.key, killed, "session: background processes killed by /stop");
                    }
                }
                let delegations = self.services.delegations.cancel_session(&self.key);
                if delegations > 0 {
                    tracing::info!(session = %self.key, delegations, "session: background delegations stopped by /stop");
                }
                let waiting = self.drop_waiting();
                self.finish(waiting, InboxState::Done, "stopped", None)
                    .await;
                if running.is_none() {
                    let text = if delegations > 0 {
                        format!(
                            "⏹ Stopped {delegations} delegated task batch(es) running in the background."
                        )
                    } else {
                        "Nothing is running right now.".to_owned()
                    };
                    self.say(inbox_id, &message_id, &text).await;
                }
            }
            SessionCommand::New => {
                let mut cleared = self.drop_waiting();
                if let Some(turn) = running {
                    turn.stop = Some(StopReason::Reset);
                    turn.cancel.cancel();
                }
                cleared.push(inbox_id);
                self.services.delegations.cancel_session(&self.key);
                self.services.approvals.forget_session(&self.key);
                if let Err(e) = self.services.store.session_end(&self.key, "reset").await {
                    tracing::error!(error = %e, "session: could not end the session");
                }
                self.session_id = None;
                let reply = "✨ New session started. Earlier messages are forgotten; what would you like to do?";
                self.finish(
                    cleared,
                    InboxState::Done,
                    "reset",
                    Some((reply.to_owned(), Some(message_id))),
                )
                .await;
            }
            SessionCommand::Status => {
                let text = self.status(author, running.as_ref()).await;
                self.say(inbox_id, &message_id, &text).await;
            }
            SessionCommand::Usage => {
                let text = self.usage().await;
                self.say(inbox_id, &message_id, &text).await;
            }
            SessionCommand::Restart => self.restart(inbox_id, message_id).await,
            SessionCommand::Profile => {
                let text = profile_text(&self.services.home, std::env::var_os("HOME"));
                self.say(inbox_id, &message_id, &text).await;
            }
            SessionCommand::Platform(args) => {
                let text = self.platform(&args);
                self.say(inbox_id, &message_id, &text).await;
            }
            SessionCommand::Context => {
                let text = self.context_view(author).await;
                self.say(inbox_id, &message_id, &text).await;
            }
            SessionCommand::Queue(prompt) => {
                self.queue(inbox_id, message_id, author, prompt.trim(), running)
                    .await
            }
            SessionCommand::Steer(prompt) => {
                self.steer(inbox_id, message_id, author, prompt.trim(), running)
                    .await
            }
            SessionCommand::Background(prompt) => {
                self.background(inbox_id, message_id, author, prompt.trim())
                    .await
            }
            SessionCommand::Sessions(args) => {
                self.sessions(inbox_id, message_id, author, &args).await
            }
            SessionCommand::Resume(args) => self.resume(inbox_id, message_id, author, &args).await,
            other => {
                self.chat_command(inbox_id, message_id, author, other, running)
                    .await
            }
        }
    }

    /// `/usage`: the tokens of this session and of today (UTC), every conversation.
    async fn usage(&self) -> String {
        let day_ms = 24 * 60 * 60 * 1000;
        let today = crate::store::now_ms() / day_ms * day_ms;
        match self
            .services
            .store
            .usage_totals(self.session_id.clone(), today)
            .await
        {
            Ok((session, day)) => format!(
                "📈 Usage\nThis conversation: {}\nToday (UTC, every conversation): {}",
                usage_line(session),
                usage_line(day)
            ),
            Err(e) => {
                tracing::error!(error = %e, "session: cannot read the usage");
                "⚠️ I could not read the usage (database error).".to_owned()
            }
        }
    }

    pub(super) async fn status(
        &mut self,
        author: &Author,
        running: Option<&RunningTurn>,
    ) -> String {
        let store = &self.services.store;
        let session = store
            .session_open(&self.key, &self.chat, Some(&author.user_id))
            .await;
        let mut lines = vec!["📊 Status".to_owned()];
        match session {
            Ok(s) => {
                self.session_id = Some(s.id.clone());
                lines.push(format!("Session: {} ({} messages)", s.id, s.message_count));
            }
            Err(e) => lines.push(format!("Session: unavailable ({e})")),
        }
        let chosen = self.chat_model().await;
        lines.push(format!(
            "Model: {}",
            crate::agent::models::describe(&chosen)
        ));
        lines.push(match running {
            Some(t) => format!("Agent: working for {}s", t.started.elapsed().as_secs()),
            None => "Agent: idle".to_owned(),
        });
        if !self.queued.is_empty() {
            lines.push(format!("Queued: {} message(s)", self.queued.len()));
        }
        let delegated = self.services.delegations.running_in(&self.key);
        if delegated > 0 {
            lines.push(format!(
                "Delegated in the background: {delegated} batch(es) (/stop ends them)"
            ));
        }
        lines.push(format!("Busy mode: {}", self.services.busy_mode.as_str()));
        if let Some(mcp) = self.services.mcp.status_line() {
            lines.push(mcp);
        }
        let confinement = &self.services.confinement;
        lines.push(match confinement.warning().await {
            Some(warning) => format!("⚠️ {warning}"),
            None => format!(
                "Commands: {}",
                confinement.level().await.describe(confinement.network())
            ),
        });
        if let Ok(Some(home)) = store.home_channel(self.chat.platform).await {
            lines.push(if home == self.chat {
                "Home channel: this chat".to_owned()
            } else {
                format!("Home channel: {}", home.chat_id)
            });
        }
        lines.join("\n")
    }
}

/// `/profile` (Hermes' text): the profile is named by its home, `…/profiles/<name>` as
/// Hermes keeps them, else `default`; the home shown with `~` for the user's home.
fn profile_text(home: &std::path::Path, user_home: Option<std::ffi::OsString>) -> String {
    let name = match (home.parent(), home.file_name()) {
        (Some(parent), Some(name)) if parent.file_name().is_some_and(|p| p == "profiles") => {
            name.to_string_lossy().into_owned()
        }
        _ => "default".to_owned(),
    };
    let shown = match user_home.map(std::path::PathBuf::from) {
        Some(user) if home.starts_with(&user) => {
            format!("~/{}", home.strip_prefix(&user).unwrap_or(home).display())
        }
        _ => home.display().to_string(),
    };
    format!("👤 **Profile:** `{name}`\n📂 **Home:** `{shown}`")
}

/// "1,234 tokens in (600 from the cache), 56 out".
fn usage_line(usage: crate::llm::Usage) -> String {
    if usage == crate::llm::Usage::default() {
        return "nothing yet".to_owned();
    }
    let mut line = format!("{} tokens in", grouped(usage.prompt));
    if usage.cached > 0 {
        line.push_str(&format!(" ({} from the cache)", grouped(usage.cached)));
    }
    if usage.cache_write > 0 {
        line.push_str(&format!(
            ", {} written to the cache",
            grouped(usage.cache_write)
        ));
    }
    line.push_str(&format!(", {} out", grouped(usage.completion)));
    // The provider's figure or the model's list price (`config::catalog`); nothing where
    // neither is known.
    match usage.cost_micros {
        0 => {}
        1..100 => line.push_str(", under $0.0001"),
        micros => line.push_str(&format!(", ${:.4}", micros as f64 / 1e6)),
    }
    line
}

/// 1234567 as "1,234,567".
pub(super) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::profile_text;
    use std::path::Path;

    #[test]
    fn the_profile_is_named_by_its_home_as_hermes_keeps_them() {
        assert_eq!(
            profile_text(Path::new("/home/ada/.hermes"), Some("/home/ada".into())),
            "👤 **Profile:** `default`\n📂 **Home:** `~/.hermes`"
        );
        assert_eq!(
            profile_text(
                Path::new("/srv/hermes/profiles/work"),
                Some("/home/ada".into())
            ),
            "👤 **Profile:** `work`\n📂 **Home:** `/srv/hermes/profiles/work`"
        );
    }
}
