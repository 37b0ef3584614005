//! `/sessions` and `/resume`, with Hermes' arguments and texts: this conversation's earlier
//! sessions listed (titled ones; `full` adds the rest; `search <words>` finds titles and
//! ids), and one of them taken up again by its number in that list, its id or its title.
//! Only this conversation's own sessions are reachable (see `store::earlier`).

use super::*;
use crate::store::{EarlierSession, Resumed};

/// How many sessions a listing shows (Hermes: ten, no paging).
const LISTED: usize = 10;

/// `/sessions`' arguments.
#[derive(Debug, PartialEq, Eq)]
enum Listing {
    /// Titled sessions, or every one with `full`.
    Recent {
        untitled: bool,
    },
    Search(String),
    /// Words that are not a listing's: a session to resume.
    Resume(String),
}

fn listing(args: &str) -> Listing {
    let mut untitled = false;
    let mut words = args.split_whitespace().peekable();
    while let Some(word) = words.peek().copied() {
        match word.to_ascii_lowercase().as_str() {
            "list" | "ls" | "browse" | "all" | "--all" => {}
            "full" | "--full" => untitled = true,
            "search" | "find" => {
                words.next();
                return Listing::Search(words.collect::<Vec<_>>().join(" "));
            }
            _ => return Listing::Resume(words.collect::<Vec<_>>().join(" ")),
        }
        words.next();
    }
    Listing::Recent { untitled }
}

/// One line of a listing: `1. **title** — `id` — _preview_`.
fn line(number: usize, session: &EarlierSession) -> String {
    let title = session.title.as_deref().unwrap_or("—");
    let mut line = format!("{number}. **{title}** — `{}`", session.id);
    if let Some(preview) = session.preview.as_deref().filter(|p| !p.is_empty()) {
        let short: String = preview.chars().take(40).collect();
        line.push_str(&format!(" — _{short}_"));
    }
    line
}

impl SessionActor {
    /// `/sessions [full] [search <words>]`.
    pub(super) async fn sessions(
        &mut self,
        inbox_id: i64,
        message_id: String,
        author: &Author,
        args: &str,
    ) {
        let (search, untitled) = match listing(args) {
            Listing::Resume(target) => {
                return self.resume(inbox_id, message_id, author, &target).await;
            }
            Listing::Search(words) if words.is_empty() => {
                return self
                    .say(inbox_id, &message_id, "Usage: `/sessions search <query>`")
                    .await;
            }
            Listing::Search(words) => (Some(words), true),
            Listing::Recent { untitled } => (None, untitled),
        };
        let found = self
            .services
            .store
            .earlier_sessions(&self.key, search.as_deref(), untitled, LISTED)
            .await;
        let text = match found {
            Err(e) => {
                tracing::error!(error = %e, "session: cannot list the earlier sessions");
                "⚠️ I could not read the earlier sessions (database error).".to_owned()
            }
            Ok(sessions) if sessions.is_empty() => "No sessions found.\nUse `/title My Session` to name this chat, or `/sessions full` to include unnamed sessions.".to_owned(),
            Ok(sessions) => {
                let heading = match (&search, untitled) {
                    (Some(words), _) => format!("Sessions matching “{words}”"),
                    (None, true) => "Sessions".to_owned(),
                    (None, false) => "Named Sessions".to_owned(),
                };
                let mut text = format!("📋 **{heading}**\n");
                for (i, session) in sessions.iter().enumerate() {
                    text.push_str(&format!("\n{}", line(i + 1, session)));
                }
                text.push_str("\n\nResume: `/resume <session id>` or `/resume <number>` from `/resume`.\nMore: `/sessions full`, `/sessions search <query>`.");
                text
            }
        };
        self.say(inbox_id, &message_id, &text).await;
    }

    /// `/resume [number | id | title]`: without one, the titled sessions to choose from.
    pub(super) async fn resume(
        &mut self,
        inbox_id: i64,
        message_id: String,
        author: &Author,
        args: &str,
    ) {
        let text = self.resume_text(author, args).await;
        self.say(inbox_id, &message_id, &text).await;
    }

    async fn resume_text(&mut self, author: &Author, args: &str) -> String {
        let store = self.services.store.clone();
        let name = args
            .trim()
            .trim_start_matches(['<', '[', '"', '\''])
            .trim_end_matches(['>', ']', '"', '\''])
            .trim();
        let titled = match store.earlier_sessions(&self.key, None, false, LISTED).await {
            Ok(list) => list,
            Err(e) => return format!("Could not list sessions: {e}"),
        };
        if name.is_empty() {
            if titled.is_empty() {
                return "No named sessions found.\nUse `/title My Session` to name your current session, then `/resume My Session` to return to it later.".into();
            }
            let mut text = "📋 **Named Sessions**\n".to_owned();
            for (i, session) in titled.iter().enumerate() {
                text.push_str(&format!("\n{}", line(i + 1, session)));
            }
            text.push_str("\n\nUsage: `/resume <session name>` or `/resume <number>` (e.g. `/resume 1` for the most recent)");
            return text;
        }
        // The open session, named by its title or id.
        if let Ok(open) = self.session_id_for(author).await {
            let title = self
                .services
                .store
                .session_title(&open)
                .await
                .ok()
                .flatten();
            if open == name
                || title
                    .as_deref()
                    .is_some_and(|t| t.eq_ignore_ascii_case(name))
            {
                let shown = title.unwrap_or(open);
                return format!("📌 Already on session **{shown}**.");
            }
        }
        // A number in the list, else an id, else a title (the newest of that name).
        let id = if let Ok(index) = name.parse::<usize>() {
            match index.checked_sub(1).and_then(|i| titled.get(i)) {
                Some(session) => session.id.clone(),
                None => {
                    return format!(
                        "Resume index {index} is out of range.\nUse `/resume` with no arguments to see available sessions."
                    );
                }
            }
        } else {
            let by_title = store
                .earlier_sessions(&self.key, Some(name), true, 500)
                .await
                .unwrap_or_default()
                .into_iter()
                .find(|s| {
                    s.id == name
                        || s.title
                            .as_deref()
                            .is_some_and(|t| t.eq_ignore_ascii_case(name))
                });
            by_title.map_or_else(|| name.to_owned(), |s| s.id)
        };
        let resumed = store.session_resume(&self.key, &id).await;
        match resumed {
            Err(e) => {
                tracing::error!(error = %e, "session: /resume could not switch sessions");
                "Failed to switch session.".into()
            }
            Ok(Resumed::NotFound) => format!(
                "No session found matching '**{name}**'.\nUse `/resume` with no arguments to see available sessions."
            ),
            Ok(Resumed::AlreadyOpen(session)) => format!(
                "📌 Already on session **{}**.",
                session.title.as_deref().unwrap_or(&session.id)
            ),
            Ok(Resumed::Now(session)) => {
                // What belonged to the session left: its approvals for this session, its
                // background delegations; the actor reads the open session anew.
                self.services.delegations.cancel_session(&self.key);
                self.services.approvals.forget_session(&self.key);
                self.session_id = Some(session.id.clone());
                tracing::info!(session = %self.key, id = %session.id, user = %author.user_id, "session: an earlier session resumed");
                let title = session.title.as_deref().unwrap_or(&session.id);
                match session.asked {
                    0 => format!("↻ Resumed session **{title}**. Conversation restored."),
                    1 => {
                        format!("↻ Resumed session **{title}** (1 message). Conversation restored.")
                    }
                    n => format!(
                        "↻ Resumed session **{title}** ({n} messages). Conversation restored."
                    ),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_arguments_read_as_hermes_reads_them() {
        assert_eq!(listing(""), Listing::Recent { untitled: false });
        assert_eq!(listing("list full"), Listing::Recent { untitled: true });
        assert_eq!(
            listing("search lisbon trip"),
            Listing::Search("lisbon trip".into())
        );
        assert_eq!(listing("find"), Listing::Search(String::new()));
        assert_eq!(
            listing("Budget 2027"),
            Listing::Resume("Budget 2027".into())
        );
    }
}
