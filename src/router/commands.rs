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
            // Telegram's and Discord's rules for a command's name.
            assert!(
                (1..=32).contains(&word.len())
                    && word
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
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
    fn a_command_is_found_by_its_name_or_an_alias_in_any_case() {
        assert_eq!(find("Start").map(|c| c.name), Some("help"));
        assert_eq!(find("set_home").map(|c| c.name), Some("sethome"));
        assert_eq!(find("reset").map(|c| c.name), Some("reset"));
        assert!(find("rm").is_none());
    }
}
