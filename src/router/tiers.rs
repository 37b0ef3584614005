//! Admin and user tiers, with Hermes' names and rule (`allow_admin_from`,
//! `user_allowed_commands`, `group_allow_admin_from`, `group_user_allowed_commands`): where
//! a platform's scope (direct chats, or groups) lists at least one admin, the others there
//! are users, who may run `/help`, `/whoami` and either the commands the operator listed
//! for them or, when none are listed, every command that is not the admins'
//! ([`Who`]). With no admin listed every allowed person may run every command. Who
//! decides an approval: the asker always, and an admin too where tiers are on; a standing
//! approval ("always") is an admin's for everyone, or anyone else's for their own commands
//! (a user may not make one).

use hermes_adapter::{ChatKind, ChatRef};

use super::Router;
use super::commands::{Command, Who};
use crate::config::TierScope;

/// Commands every allowed person may run, whatever the tiers (Hermes' floor).
const FLOOR: [&str; 2] = ["help", "whoami"];

/// A person's tier in one chat.
pub(super) enum Tier<'a> {
    /// No admin is listed for this scope: every allowed person may do everything.
    Unrestricted,
    Admin,
    User(&'a TierScope),
}

impl Router {
    /// `user_id`'s tier in `chat`.
    pub(super) fn tier(&self, chat: &ChatRef, user_id: &str) -> Tier<'_> {
        let Some(tiers) = self.config.access.tiers.get(&chat.platform) else {
            return Tier::Unrestricted;
        };
        let scope = if chat.kind == ChatKind::Direct {
            &tiers.direct
        } else {
            &tiers.group
        };
        if !scope.enabled() {
            Tier::Unrestricted
        } else if scope.admins.iter().any(|a| a == user_id) {
            Tier::Admin
        } else {
            Tier::User(scope)
        }
    }
}

impl Tier<'_> {
    /// Whether this person is an admin: they may decide approvals other people's turns
    /// asked for, and their "always" stands for everyone's commands.
    pub(super) fn is_admin(&self) -> bool {
        matches!(self, Tier::Admin)
    }

    /// Whether this person may allow a command for good (`/approve always`, its button):
    /// a user may not; with tiers off it stands for their own commands only.
    pub(super) fn may_approve_always(&self) -> bool {
        !matches!(self, Tier::User(_))
    }

    /// Whether this person may run `command` in a conversation `shared` by everyone in
    /// the chat (or one of their own).
    pub(super) fn may_run(&self, command: &Command, shared: bool) -> bool {
        let Tier::User(scope) = self else {
            return true;
        };
        if FLOOR.contains(&command.name) {
            return true;
        }
        match &scope.user_commands {
            Some(listed) => listed
                .iter()
                .any(|c| c == command.name || command.aliases.contains(&c.as_str())),
            None => match command.who {
                Who::Anyone => true,
                Who::Admins => false,
                Who::AdminsWhenShared => !shared,
            },
        }
    }

    /// `/whoami`'s answer.
    pub(super) fn describe(&self, chat: &ChatRef, user_id: &str, shared: bool) -> String {
        let scope = if chat.kind == ChatKind::Direct {
            "direct chat"
        } else {
            "group"
        };
        let head = format!("You — {} ({scope})\nUser ID: {user_id}", chat.platform);
        match self {
            Tier::Unrestricted => format!(
                "{head}\nTier: unrestricted (no admin is listed for this scope)\nCommands: all"
            ),
            Tier::Admin => format!("{head}\nTier: admin\nCommands: all"),
            Tier::User(_) => {
                let runnable: Vec<String> = super::commands::COMMANDS
                    .iter()
                    .filter(|c| c.help.is_some() && self.may_run(c, shared))
                    .map(|c| format!("/{}", c.name))
                    .collect();
                format!(
                    "{head}\nTier: user\nCommands you can run here: {}",
                    runnable.join(", ")
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::commands::find;

    fn user(commands: Option<&[&str]>) -> TierScope {
        TierScope {
            admins: vec!["1".into()],
            user_commands: commands.map(|c| c.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn a_user_runs_the_floor_and_what_is_not_the_admins() {
        let scope = user(None);
        let tier = Tier::User(&scope);
        let may = |name: &str, shared: bool| tier.may_run(find(name).unwrap(), shared);
        assert!(may("help", true) && may("whoami", true) && may("status", true));
        assert!(may("stop", true) && may("approve", true));
        assert!(!may("sethome", false), "changes the bot for everyone");
        assert!(
            may("new", false) && !may("new", true),
            "a shared conversation is not theirs"
        );
        assert!(may("model", false) && !may("model", true));
        assert!(!tier.is_admin() && !tier.may_approve_always());
    }

    #[test]
    fn listed_user_commands_are_all_a_user_runs_besides_the_floor() {
        let scope = user(Some(&["status", "reset"]));
        let tier = Tier::User(&scope);
        let may = |name: &str| tier.may_run(find(name).unwrap(), false);
        assert!(may("status") && may("reset") && may("help") && may("whoami"));
        assert!(!may("new") && !may("stop") && !may("model"));
    }

    #[test]
    fn admins_and_a_scope_without_admins_run_everything() {
        for tier in [Tier::Admin, Tier::Unrestricted] {
            assert!(tier.may_run(find("sethome").unwrap(), true));
            assert!(tier.may_approve_always());
        }
        assert!(Tier::Admin.is_admin());
        assert!(!Tier::Unrestricted.is_admin(), "the asker decides");
    }
}
