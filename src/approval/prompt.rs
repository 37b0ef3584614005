//! What an approval looks like in a chat: the [`Decision`]s a person can take, the choices
//! offered for them within the platform's limits (an option that does not fit is still
//! offered as its text command, which the prompt always lists), the prompt text, and the
//! outcome line that settles it.

use std::path::Path;
use std::time::Duration;

use hermes_adapter::{Choice, ChoiceLimits, ChoiceStyle};

use super::detect::Danger;

/// The longest command shown in a prompt.
const PREVIEW_CHARS: usize = 3000;

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Once,
    Session,
    Always,
    Deny(Option<String>),
}

impl Decision {
    /// The short code in a choice id.
    fn code(&self) -> &'static str {
        match self {
            Decision::Once => "o",
            Decision::Session => "s",
            Decision::Always => "a",
            Decision::Deny(_) => "d",
        }
    }

    fn from_code(code: &str) -> Option<Decision> {
        Some(match code {
            "o" => Decision::Once,
            "s" => Decision::Session,
            "a" => Decision::Always,
            "d" => Decision::Deny(None),
            _ => return None,
        })
    }

    /// Parse `/approve [session|always]` arguments.
    pub fn from_approve_args(args: &str) -> Option<Decision> {
        match args.trim().to_ascii_lowercase().as_str() {
            "" | "once" => Some(Decision::Once),
            "session" => Some(Decision::Session),
            "always" => Some(Decision::Always),
            _ => None,
        }
    }

    /// What the presser is told.
    pub fn acknowledgement(&self) -> &'static str {
        match self {
            Decision::Once => "✅ Allowed once",
            Decision::Session => "✅ Allowed for this session",
            Decision::Always => "✅ Always allowed",
            Decision::Deny(_) => "❌ Denied",
        }
    }

    /// The state recorded in the store.
    pub fn state(&self) -> &'static str {
        match self {
            Decision::Once => "approved_once",
            Decision::Session => "approved_session",
            Decision::Always => "approved_always",
            Decision::Deny(_) => "denied",
        }
    }
}

/// The id of the choice for approval `id` and `decision`: `appr:<id>:<code>` (well under
/// Telegram's 64 bytes).
pub fn choice_id(id: i64, decision: &Decision) -> String {
    format!("appr:{id}:{}", decision.code())
}

/// Parse an id made by [`choice_id`].
pub fn parse_choice_id(data: &str) -> Option<(i64, Decision)> {
    let mut parts = data.strip_prefix("appr:")?.split(':');
    let id = parts.next()?.parse().ok()?;
    let decision = Decision::from_code(parts.next()?)?;
    Some((id, decision))
}

/// The options, most important first (what a platform with few buttons keeps), with their
/// labels and style.
/// With three buttons (WhatsApp) "for this session" is the one left to its text command,
/// as in Hermes.
const OPTIONS: [(Decision, &str, &str, ChoiceStyle); 4] = [
    (Decision::Once, "Allow once", "Once", ChoiceStyle::Primary),
    (Decision::Deny(None), "Deny", "Deny", ChoiceStyle::Danger),
    (
        Decision::Always,
        "Always allow",
        "Always",
        ChoiceStyle::Normal,
    ),
    (
        Decision::Session,
        "Allow for this session",
        "Session",
        ChoiceStyle::Normal,
    ),
];

/// The order buttons are shown in.
const SHOWN_ORDER: [&str; 4] = ["o", "s", "a", "d"];

/// The choices for approval `id` that fit `limits`: as many as the platform takes, most
/// important first, each with a label that fits; shown in the usual order.
pub fn choices(id: i64, limits: ChoiceLimits) -> Vec<Choice> {
    let mut chosen: Vec<Choice> = OPTIONS
        .iter()
        .filter_map(|(decision, label, short, style)| {
            let choice = Choice {
                id: choice_id(id, decision),
                label: (*label).to_owned(),
                short_label: Some((*short).to_owned()),
                style: *style,
            };
            choice.label_within(limits.label_len)?;
            Some(choice)
        })
        .take(limits.max)
        .collect();
    chosen.sort_by_key(|c| {
        SHOWN_ORDER
            .iter()
            .position(|code| c.id.ends_with(&format!(":{code}")))
    });
    chosen
}

/// What the person is asked about.
pub struct Ask<'a> {
    pub command: &'a str,
    /// Show all of the command, however long (a script): never shortened.
    pub whole: bool,
    pub dangers: &'a [Danger],
    pub workdir: &'a Path,
    pub background: bool,
    pub timeout: Duration,
    pub buttons: bool,
}

/// The prompt: the command as it will run (hidden characters made visible, a long one
/// shortened around — never through — the flagged parts), where and how it runs, why it
/// was flagged, and how to answer (every option as its text command, whether or not it
/// also got a button).
pub fn prompt_text(ask: &Ask) -> String {
    let preview = if ask.whole {
        visible(ask.command)
    } else {
        preview(ask.command, ask.dangers)
    };
    let fence = if preview.contains("```") {
        "~~~"
    } else {
        "```"
    };
    let why: Vec<&str> = ask.dangers.iter().map(|d| d.description).collect();
    let how = if ask.buttons {
        "Answer with the buttons, or"
    } else {
        "Answer with"
    };
    let mode = if ask.background {
        "in the background"
    } else {
        "in the foreground"
    };
    format!(
        "⚠️ **Hermes wants to run a command that needs your OK**\n\n{fence}\n{preview}\n{fence}\n\n\
         Runs in `{}`, {mode}.\n\
         Why it was flagged: {}\n\n\
         {how} `/approve`, `/approve session`, `/approve always`, `/deny [reason]`.\n\
         If you don't answer within {} it will NOT run.",
        visible(&ask.workdir.display().to_string()),
        why.join("; "),
        human_duration(ask.timeout)
    )
}

/// Characters kept around a flagged part when a long command is shortened.
const CONTEXT_CHARS: usize = 200;

/// The command within [`PREVIEW_CHARS`]: whole when it fits; else its start, every flagged
/// part with some context, and its end, with the gaps marked.
fn preview(command: &str, dangers: &[Danger]) -> String {
    let chars: Vec<char> = command.chars().collect();
    if chars.len() <= PREVIEW_CHARS {
        return visible(command);
    }
    let mut keep: Vec<std::ops::Range<usize>> = vec![0..600, chars.len() - 400..chars.len()];
    for danger in dangers {
        if let Some(span) = &danger.span {
            let start = span.start.saturating_sub(CONTEXT_CHARS);
            let end = (span.end + CONTEXT_CHARS).min(chars.len());
            if end - start > PREVIEW_CHARS - 1000 {
                // A flagged part longer than the room left: its two ends stay visible.
                keep.push(start..start + 800);
                keep.push(end - 800..end);
            } else {
                keep.push(start..end);
            }
        }
    }
    keep.sort_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<usize>> = Vec::new();
    for range in keep {
        match merged.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    let mut out = String::new();
    let mut shown_to = 0;
    for range in merged {
        if range.start > shown_to {
            out.push_str(&format!(
                "\n… ({} characters not shown) …\n",
                range.start - shown_to
            ));
        }
        let part: String = chars[range.clone()].iter().collect();
        out.push_str(&visible(&part));
        shown_to = range.end;
    }
    out
}

/// Control and invisible characters written out (`\u{1b}`), so the person sees every byte
/// that will run.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        if super::detect::hides_text(ch) {
            out.push_str(&format!("\\u{{{:x}}}", ch as u32));
        } else {
            out.push(ch);
        }
    }
    out
}

pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        let m = secs / 60;
        format!("{m} minute{}", if m == 1 { "" } else { "s" })
    } else {
        format!("{secs} seconds")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choice_ids_round_trip_and_fit_telegram() {
        for decision in [
            Decision::Once,
            Decision::Session,
            Decision::Always,
            Decision::Deny(None),
        ] {
            let data = choice_id(1_234_567_890, &decision);
            assert!(data.len() <= 64);
            assert_eq!(parse_choice_id(&data), Some((1_234_567_890, decision)));
        }
        assert_eq!(parse_choice_id("appr:x:o"), None);
        assert_eq!(parse_choice_id("other"), None);
    }

    #[test]
    fn approve_arguments_are_understood() {
        assert_eq!(Decision::from_approve_args(""), Some(Decision::Once));
        assert_eq!(
            Decision::from_approve_args(" Session "),
            Some(Decision::Session)
        );
        assert_eq!(
            Decision::from_approve_args("always"),
            Some(Decision::Always)
        );
        assert_eq!(Decision::from_approve_args("everything"), None);
        assert_eq!(human_duration(Duration::from_secs(300)), "5 minutes");
        assert_eq!(human_duration(Duration::from_secs(2)), "2 seconds");
    }

    fn labels(limits: ChoiceLimits) -> Vec<String> {
        choices(7, limits)
            .iter()
            .map(|c| c.label_within(limits.label_len).unwrap().to_owned())
            .collect()
    }

    #[test]
    fn choices_fit_each_platforms_limits_and_the_rest_stay_text_commands() {
        // Telegram / Discord / Slack: all four, full labels.
        let wide = ChoiceLimits {
            max: 5,
            label_len: 80,
        };
        assert_eq!(
            labels(wide),
            [
                "Allow once",
                "Allow for this session",
                "Always allow",
                "Deny"
            ]
        );
        // WhatsApp: three reply buttons of at most 20 characters; "for this session" is
        // left to `/approve session`, which the prompt lists.
        let whatsapp = ChoiceLimits {
            max: 3,
            label_len: 20,
        };
        assert_eq!(labels(whatsapp), ["Allow once", "Always allow", "Deny"]);
        assert!(choices(7, ChoiceLimits::NONE).is_empty());
        let ask = |command, buttons| Ask {
            command,
            whole: false,
            dangers: &[],
            workdir: Path::new("/srv/app"),
            background: false,
            timeout: Duration::from_secs(60),
            buttons,
        };
        let text = prompt_text(&ask("rm -rf /", true));
        assert!(text.contains("`/approve always`"));
        assert!(!prompt_text(&ask("x", false)).contains("buttons"));
    }

    #[test]
    fn a_long_command_keeps_its_flagged_part_and_shows_hidden_characters() {
        let filler = "x".repeat(5000);
        let command = format!("echo {filler}; rm -rf ~; echo \u{1b}[0m {filler}");
        let at = command.find("rm -rf ~").unwrap();
        let dangers = [Danger {
            key: "rm-root",
            description: "delete in root path",
            span: Some(at..at + 8),
        }];
        let text = prompt_text(&Ask {
            whole: false,
            command: &command,
            dangers: &dangers,
            workdir: Path::new("/srv/app"),
            background: true,
            timeout: Duration::from_secs(60),
            buttons: true,
        });
        assert!(text.contains("rm -rf ~"), "the flagged part was cut");
        assert!(text.contains("characters not shown"));
        assert!(text.contains("\\u{1b}"), "the escape is written out");
        assert!(!text.contains('\u{1b}'));
        assert!(text.contains("`/srv/app`") && text.contains("in the background"));
        assert!(text.chars().count() < 4000, "{}", text.chars().count());
    }
}
