//! The chat commands, each declared once: its name and other words for it, its line in
//! `/help`, its entry in the platforms' native menus (Telegram's menu, Discord's slash
//! commands; Slack's `/hermes` takes every name and alias), whether it waits for a running
//! turn, and what it does. `/help`, the menus, Slack's words and the router's dispatch are
//! all read from [`COMMANDS`]; so is who may run it where admin tiers are on ([`Who`],
//! applied by `router::tiers`).

use std::sync::LazyLock;

use hermes_adapter::CommandSpec;

use crate::session::SessionCommand;
pub use crate::session::WhileBusy;

/// One chat command.
pub struct Command {
    pub name: &'static str,
    /// Other words for it; they work everywhere (Slack's `/hermes` too) and are shown
    /// nowhere.
    pub aliases: &'static [&'static str],
    /// Its line in `/help`; `None`: not listed there (an alias shown under another name).
    pub help: Option<Help>,
    /// Its entry in the native command menus; `None`: not offered there.
    pub menu: Option<Menu>,
    pub while_busy: WhileBusy,
    /// Who may run it where admin tiers are on (with none, every allowed person).
    pub who: Who,
    pub action: Action,
}

/// Who may run a command where the chat's scope lists admins (and the operator has not
/// listed the users' commands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// Every allowed person: it touches only what is theirs, or only looks.
    Anyone,
    /// Admins: it changes the bot for everyone.
    Admins,
    /// Anyone in a conversation of their own; in one the chat shares (a group without
    /// sessions per person), only admins, since it changes it for the others too.
    AdminsWhenShared,
}

/// A command's line in `/help`: `/name args — text`.
pub struct Help {
    /// Its arguments as shown (`[provider:model]`), or empty.
    pub args: &'static str,
    pub text: &'static str,
}

/// A command's entry in a native menu.
pub struct Menu {
    pub description: &'static str,
    /// Its one optional argument and what it means.
    pub argument: Option<&'static str>,
}

/// What a command does.
pub enum Action {
    /// Answered by the router with [`help_text`].
    Help,
    /// Decides the oldest waiting approval (`/approve [session|always]`).
    Approve,
    /// Refuses it (`/deny [reason]`).
    Deny,
    /// Answered by the router: the person's id and tier here (`/whoami`).
    WhoAmI,
    /// Answered by the router with a page of [`commands_page`] (`/commands [page]`).
    Commands,
    /// Handed to the conversation's actor, made from the arguments.
    Session(fn(&str) -> SessionCommand),
}

/// Every chat command, in the order `/help` and the menus show them.
pub const COMMANDS: &[Command] = &[
    Command {
        name: "new",
        aliases: &[],
        help: Some(Help {
            args: "",
            text: "start a fresh conversation (also /reset)",
        }),
        menu: Some(Menu {
            description: "Start a fresh conversation",
            argument: None,
        }),
        while_busy: WhileBusy::Runs,
        who: Who::AdminsWhenShared,
        action: Action::Session(|_| SessionCommand::New),
    },
    Command {
        name: "reset",
        aliases: &[],
        help: None,
        menu: Some(Menu {
            description: "Start a fresh conversation (same as /new)",
            argument: None,
        }),
        while_busy: WhileBusy::Runs,
        who: Who::AdminsWhenShared,
        action: Action::Session(|_| SessionCommand::New),
    },
    Command {
        name: "stop",
        aliases: &[],
        help: Some(Help {
            args: "",
            text: "stop what I'm doing (/stop all also kills background processes)",
        }),
        menu: Some(Menu {
            description: "Stop what the agent is doing",
            argument: Some("all: also kill background processes"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::Session(|args| {
            if args.eq_ignore_ascii_case("all") {
                SessionCommand::StopAll
            } else {
                SessionCommand::Stop
            }
        }),
    },
    Command {
        name: "status",
        aliases: &[],
        help: Some(Help {
            args: "",
            text: "what I'm doing and which model I use",
        }),
        menu: Some(Menu {
            description: "What the agent is doing and which model it uses",
            argument: None,
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::Session(|_| SessionCommand::Status),
    },
    Command {
        name: "usage",
        aliases: &[],
        help: Some(Help {
            args: "",
            text: "the tokens (and cost) this conversation and today took",
        }),
        menu: Some(Menu {
            description: "The tokens this conversation and today took",
            argument: None,
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::Session(|_| SessionCommand::Usage),
    },
    Command {
        name: "model",
        aliases: &[],
        help: Some(Help {
            args: "[provider:model]",
            text: "show or switch this chat's model (/model default goes back)",
        }),
        menu: Some(Menu {
            description: "Show or switch this chat's model",
            argument: Some("provider:model, or default"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::AdminsWhenShared,
        action: Action::Session(|args| SessionCommand::Model(args.to_owned())),
    },
    Command {
        name: "retry",
        aliases: &[],
        help: Some(Help {
            args: "",
            text: "ask your last message again",
        }),
        menu: Some(Menu {
            description: "Ask your last message again",
            argument: None,
        }),
        while_busy: WhileBusy::Refused,
        who: Who::AdminsWhenShared,
        action: Action::Session(|_| SessionCommand::Retry),
    },
    Command {
        name: "undo",
        aliases: &[],
        help: Some(Help {
            args: "",
            text: "take back your last message and my answer",
        }),
        menu: Some(Menu {
            description: "Take back your last message and the answer",
            argument: None,
        }),
        while_busy: WhileBusy::Refused,
        who: Who::AdminsWhenShared,
        action: Action::Session(|_| SessionCommand::Undo),
    },
    Command {
        name: "compress",
        aliases: &[],
        help: Some(Help {
            args: "",
            text: "summarise the earlier conversation to make room",
        }),
        menu: Some(Menu {
            description: "Summarise the earlier conversation to make room",
            argument: None,
        }),
        while_busy: WhileBusy::Refused,
        who: Who::AdminsWhenShared,
        action: Action::Session(|_| SessionCommand::Compress),
    },
    Command {
        name: "title",
        aliases: &[],
        help: Some(Help {
            args: "[text]",
            text: "show or set this conversation's title",
        }),
        menu: Some(Menu {
            description: "Show or set this conversation's title",
            argument: Some("the new title"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::AdminsWhenShared,
        action: Action::Session(|args| SessionCommand::Title(args.to_owned())),
    },
    Command {
        name: "personality",
        aliases: &[],
        help: Some(Help {
            args: "[name]",
            text: "show or choose a personality (none goes back)",
        }),
        menu: Some(Menu {
            description: "Show or choose a personality",
            argument: Some("a name, or none"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::AdminsWhenShared,
        action: Action::Session(|args| SessionCommand::Personality(args.to_owned())),
    },
    Command {
        name: "verbose",
        aliases: &[],
        help: Some(Help {
            args: "[off|new|all]",
            text: "how much of my tool use you see here",
        }),
        menu: Some(Menu {
            description: "How much tool use is shown here",
            argument: Some("off, new or all"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::AdminsWhenShared,
        action: Action::Session(|args| SessionCommand::Verbose(args.to_owned())),
    },
    Command {
        name: "sessions",
        aliases: &[],
        help: Some(Help {
            args: "[full | search <words>]",
            text: "this conversation's earlier sessions",
        }),
        menu: Some(Menu {
            description: "List this conversation's earlier sessions",
            argument: Some("full, or search <words>"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::Session(|args| SessionCommand::Sessions(args.to_owned())),
    },
    Command {
        name: "resume",
        aliases: &[],
        help: Some(Help {
            args: "[number | id | title]",
            text: "take an earlier session up again",
        }),
        menu: Some(Menu {
            description: "Take an earlier session up again",
            argument: Some("its number in /resume, its id or its title"),
        }),
        while_busy: WhileBusy::Refused,
        who: Who::AdminsWhenShared,
        action: Action::Session(|args| SessionCommand::Resume(args.to_owned())),
    },
    Command {
        name: "background",
        aliases: &["bg", "btw"],
        help: Some(Help {
            args: "<prompt>",
            text: "run a prompt in a separate session; keep chatting meanwhile (also /bg, /btw)",
        }),
        menu: Some(Menu {
            description: "Run a prompt in the background",
            argument: Some("the prompt"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::Session(|args| SessionCommand::Background(args.to_owned())),
    },
    Command {
        name: "queue",
        aliases: &["q"],
        help: Some(Help {
            args: "<prompt>",
            text: "a prompt for the next turn, without interrupting",
        }),
        menu: Some(Menu {
            description: "Queue a prompt for the next turn (doesn't interrupt)",
            argument: Some("the prompt"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::Session(|args| SessionCommand::Queue(args.to_owned())),
    },
    Command {
        name: "steer",
        aliases: &[],
        help: Some(Help {
            args: "<prompt>",
            text: "words for the running turn, read after its next tool call",
        }),
        menu: Some(Menu {
            description: "Add words to the running turn after its next tool call",
            argument: Some("the words"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::Session(|args| SessionCommand::Steer(args.to_owned())),
    },
    Command {
        name: "context",
        aliases: &[],
        help: Some(Help {
            args: "",
            text: "what this conversation takes of the model's context",
        }),
        menu: Some(Menu {
            description: "What this conversation takes of the model's context",
            argument: None,
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::Session(|_| SessionCommand::Context),
    },
    Command {
        name: "reasoning",
        aliases: &[],
        help: Some(Help {
            args: "[none|minimal|low|medium|high|xhigh|max|ultra|reset]",
            text: "show or set how much the model thinks here",
        }),
        menu: Some(Menu {
            description: "Show or set how much the model thinks",
            argument: Some("none, minimal, low, medium, high, xhigh, max, ultra or reset"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::AdminsWhenShared,
        action: Action::Session(|args| SessionCommand::Reasoning(args.to_owned())),
    },
    Command {
        name: "voice",
        aliases: &[],
        help: Some(Help {
            args: "[on|off|tts|status]",
            text: "spoken replies: to voice messages (on), to everything (tts), or none",
        }),
        menu: Some(Menu {
            description: "Toggle voice replies",
            argument: Some("on, off, tts or status"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::AdminsWhenShared,
        action: Action::Session(|args| SessionCommand::Voice(args.to_owned())),
    },
    Command {
        name: "sethome",
        aliases: &["set_home"],
        help: Some(Help {
            args: "",
            text: "make this chat the home channel for notices",
        }),
        menu: Some(Menu {
            description: "Make this chat the home channel for notices",
            argument: None,
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Admins,
        action: Action::Session(|_| SessionCommand::SetHome),
    },
    Command {
        name: "restart",
        aliases: &[],
        help: Some(Help {
            args: "",
            text: "restart the gateway after running turns finish",
        }),
        menu: Some(Menu {
            description: "Restart the gateway after draining running turns",
            argument: None,
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Admins,
        action: Action::Session(|_| SessionCommand::Restart),
    },
    Command {
        name: "platform",
        aliases: &[],
        help: Some(Help {
            args: "[list | pause <name> | resume <name>]",
            text: "the platforms' states; stop or start one",
        }),
        menu: Some(Menu {
            description: "List, pause or resume a platform",
            argument: Some("list, pause <name> or resume <name>"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Admins,
        action: Action::Session(|args| SessionCommand::Platform(args.to_owned())),
    },
    Command {
        name: "reload_mcp",
        aliases: &["reload-mcp"],
        help: Some(Help {
            args: "",
            text: "connect the MCP servers again from config.yaml",
        }),
        menu: Some(Menu {
            description: "Reload MCP servers from config",
            argument: None,
        }),
        while_busy: WhileBusy::Refused,
        who: Who::Admins,
        action: Action::Session(|_| SessionCommand::ReloadMcp),
    },
    Command {
        name: "reload_skills",
        aliases: &["reload-skills"],
        help: Some(Help {
            args: "",
            text: "scan the skills directory again",
        }),
        menu: Some(Menu {
            description: "Re-scan the skills directory for new or removed skills",
            argument: None,
        }),
        while_busy: WhileBusy::Refused,
        who: Who::Admins,
        action: Action::Session(|_| SessionCommand::ReloadSkills),
    },
    Command {
        name: "profile",
        aliases: &[],
        help: Some(Help {
            args: "",
            text: "this profile's name and home directory",
        }),
        menu: Some(Menu {
            description: "Show the active profile's name and home directory",
            argument: None,
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Admins,
        action: Action::Session(|_| SessionCommand::Profile),
    },
    Command {
        name: "approve",
        aliases: &[],
        help: Some(Help {
            args: "[session|always]",
            text: "allow the oldest command waiting for approval",
        }),
        menu: Some(Menu {
            description: "Allow the oldest command waiting for approval",
            argument: Some("session or always"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::Approve,
    },
    Command {
        name: "deny",
        aliases: &[],
        help: Some(Help {
            args: "[reason]",
            text: "refuse it",
        }),
        menu: Some(Menu {
            description: "Refuse the oldest command waiting for approval",
            argument: Some("reason"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::Deny,
    },
    Command {
        name: "commands",
        aliases: &[],
        help: Some(Help {
            args: "[page]",
            text: "every command and skill, a page at a time",
        }),
        menu: Some(Menu {
            description: "Browse all commands and skills",
            argument: Some("the page"),
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::Commands,
    },
    Command {
        name: "whoami",
        aliases: &[],
        help: Some(Help {
            args: "",
            text: "your user id and what you may do here",
        }),
        menu: Some(Menu {
            description: "Your user id and what you may do here",
            argument: None,
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::WhoAmI,
    },
    Command {
        name: "help",
        aliases: &["start"],
        help: Some(Help {
            args: "",
            text: "this message",
        }),
        menu: Some(Menu {
            description: "What the agent can do",
            argument: None,
        }),
        while_busy: WhileBusy::Runs,
        who: Who::Anyone,
        action: Action::Help,
    },
];

/// `/help`'s first paragraph.
const INTRODUCTION: &str =
    "I'm Hermes, an AI agent. Write to me and I'll answer; I can run commands on my host.";

/// The command `word` names (its name or an alias, any case).
pub fn find(word: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| {
        c.name.eq_ignore_ascii_case(word) || c.aliases.iter().any(|a| a.eq_ignore_ascii_case(word))
    })
}

/// `/help`: the introduction, then a line per listed command.
pub fn help_text() -> &'static str {
    static TEXT: LazyLock<String> = LazyLock::new(|| {
        let mut text = format!("{INTRODUCTION}\n");
        for command in COMMANDS {
            let Some(help) = &command.help else { continue };
            let args = if help.args.is_empty() {
                String::new()
            } else {
                format!(" {}", help.args)
            };
            text.push_str(&format!("\n/{}{args} — {}", command.name, help.text));
        }
        text
    });
    &TEXT
}

/// Lines on a page of `/commands` (Hermes: 20; 15 on Telegram, whose messages the
/// gateway splits when they are long anyway).
pub const PER_PAGE: usize = 20;

/// One page of `/commands` (Hermes' layout): every command with its arguments, text and
/// aliases, then the skills (`(name, description)`), `per_page` lines a page. `page`
/// counts from 1 and is brought into range (and then says so).
pub fn commands_page(page: usize, per_page: usize, skills: &[(String, String)]) -> String {
    let mut entries: Vec<String> = COMMANDS
        .iter()
        .filter_map(|c| {
            let help = c.help.as_ref()?;
            let args = if help.args.is_empty() {
                String::new()
            } else {
                format!(" {}", help.args)
            };
            let aliases: Vec<String> = c
                .aliases
                .iter()
                .filter(|a| !a.contains('-'))
                .map(|a| format!("`/{a}`"))
                .collect();
            let aliases = if aliases.is_empty() {
                String::new()
            } else {
                format!(" (alias: {})", aliases.join(", "))
            };
            Some(format!("`/{}{args}` -- {}{aliases}", c.name, help.text))
        })
        .collect();
    if !skills.is_empty() {
        entries.push(String::new());
        entries.push("⚡ **Skills** (ask for one by name):".to_owned());
        for (name, description) in skills {
            let description = if description.is_empty() {
                "Skill"
            } else {
                description
            };
            entries.push(format!("`{name}` — {description}"));
        }
    }
    let per_page = per_page.max(1);
    let pages = entries.len().div_ceil(per_page).max(1);
    let shown = page.clamp(1, pages);
    let mut text = format!(
        "📚 **Commands** ({} total, page {shown}/{pages})\n\n",
        COMMANDS.iter().filter(|c| c.help.is_some()).count() + skills.len()
    );
    text.push_str(
        &entries
            .iter()
            .skip((shown - 1) * per_page)
            .take(per_page)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n"),
    );
    if pages > 1 {
        let mut nav = Vec::new();
        if shown > 1 {
            nav.push(format!("`/commands {}` ← prev", shown - 1));
        }
        if shown < pages {
            nav.push(format!("next → `/commands {}`", shown + 1));
        }
        text.push_str(&format!("\n\n{}", nav.join(" | ")));
    }
    if shown != page {
        text.push_str(&format!(
            "\n_(Requested page {page} was out of range, showing page {shown}.)_"
        ));
    }
    text
}

/// What the platforms are given for their menus and words: every command with a menu
/// entry, with its aliases.
pub fn specs() -> Vec<CommandSpec> {
    COMMANDS
        .iter()
        .filter_map(|c| {
            let menu = c.menu.as_ref()?;
            Some(CommandSpec {
                name: c.name,
                description: menu.description,
                argument: menu.argument,
                aliases: c.aliases,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_are_unique_and_fit_every_menu() {
        let mut words: Vec<&str> = COMMANDS
            .iter()
            .flat_map(|c| std::iter::once(c.name).chain(c.aliases.iter().copied()))
            .collect();
        let count = words.len();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), count, "a word names two commands");
        for word in words {
            // Telegram's and Discord's rules for a command's name (an alias, never in a
            // menu, may also be Hermes' hyphenated name).
            let is_name = COMMANDS.iter().any(|c| c.name == word);
            assert!(
                (1..=32).contains(&word.len())
                    && word.chars().all(|c| {
                        c.is_ascii_lowercase()
                            || c.is_ascii_digit()
                            || c == '_'
                            || (!is_name && c == '-')
                    }),
                "{word}"
            );
        }
        for command in COMMANDS {
            if let Some(menu) = &command.menu {
                assert!(
                    (3..=100).contains(&menu.description.len()),
                    "{}",
                    command.name
                );
            }
        }
    }

    #[test]
    fn commands_come_a_page_at_a_time_with_the_skills_last() {
        let skills = vec![("arxiv".to_owned(), "Search papers".to_owned())];
        let first = commands_page(1, 15, &skills);
        assert!(first.starts_with("📚 **Commands** ("), "{first}");
        assert!(
            first.contains("`/new` -- start a fresh conversation"),
            "{first}"
        );
        assert!(first.contains("next → `/commands 2`"), "{first}");
        assert!(!first.contains("← prev"));
        let lines = |page: &str| page.lines().filter(|l| l.starts_with('`')).count();
        assert_eq!(lines(&first), 15);
        let last = commands_page(99, 15, &skills);
        assert!(last.contains("`arxiv` — Search papers"), "{last}");
        assert!(
            last.contains("Requested page 99 was out of range"),
            "{last}"
        );
        assert!(last.contains("← prev") && !last.contains("next →"));
        assert!(
            commands_page(1, 20, &skills).contains("`/background <prompt>` -- run a prompt in a separate session; keep chatting meanwhile (also /bg, /btw) (alias: `/bg`, `/btw`)")
        );
    }

    #[test]
    fn a_command_is_found_by_its_name_or_an_alias_in_any_case() {
        assert_eq!(find("Start").map(|c| c.name), Some("help"));
        assert_eq!(find("set_home").map(|c| c.name), Some("sethome"));
        assert_eq!(find("reset").map(|c| c.name), Some("reset"));
        assert!(find("rm").is_none());
    }
}
