//! A configuration's place among the gateways one process runs (Hermes'
//! `gateway.multiplex_profiles`, `crate::profiles`): its name, the homes it keeps out of,
//! and what the others hold, which it must not take (`Config::take_place`).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use hermes_adapter::Platform;

use super::Config;

/// Where a configuration stands among the gateways one process runs (Hermes'
/// `gateway.multiplex_profiles`): each profile is a gateway of its own, home and all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serving {
    /// The profile's name; `None` for the home the process was started with.
    pub profile: Option<String>,
    /// The homes of the other gateways in this process: hidden from this one's agent as
    /// its own home is (its tools, its commands, the files it may send).
    pub other_homes: Vec<PathBuf>,
    /// This gateway tells systemd how the process is doing (one of them does).
    pub speaks_for_process: bool,
    /// Its commands work in its own `workspace`: the daemon's `$HOME` and the other homes
    /// are not theirs (a profile's, unless it names a place of its own).
    pub works_apart: bool,
    /// What every gateway of the process holds now, kept current as each starts and
    /// reloads: what the others hold, this one must not take.
    pub held: Holdings,
}

impl Default for Serving {
    fn default() -> Self {
        Serving {
            profile: None,
            other_homes: Vec::new(),
            speaks_for_process: true,
            works_apart: false,
            held: Holdings::default(),
        }
    }
}

impl Serving {
    /// The gateway's name among the process's: its profile's, or `default`.
    pub fn name(&self) -> &str {
        self.profile.as_deref().unwrap_or("default")
    }
}

/// What gateways of the process hold: bots (by [`bot_fingerprint`]), PostgreSQL stores,
/// addresses listened on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Taken {
    pub bots: Vec<u64>,
    pub stores: Vec<String>,
    pub listen: Vec<std::net::SocketAddr>,
}

/// What each gateway of the process holds, by name (shared by all of them).
#[derive(Clone, Default)]
pub struct Holdings(Arc<std::sync::Mutex<std::collections::BTreeMap<String, Taken>>>);

impl Holdings {
    /// What every gateway but `me` holds.
    pub fn others_than(&self, me: &str) -> Taken {
        let held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken = Taken::default();
        for (_, theirs) in held.iter().filter(|(name, _)| *name != me) {
            taken.bots.extend(theirs.bots.iter().copied());
            taken.stores.extend(theirs.stores.iter().cloned());
            taken.listen.extend(theirs.listen.iter().copied());
        }
        taken
    }

    /// `me` holds `taken` now (`None`: nothing: it stopped).
    pub fn set(&self, me: &str, taken: Option<Taken>) {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match taken {
            Some(taken) => held.insert(me.to_owned(), taken),
            None => held.remove(me),
        };
    }
}

impl fmt::Debug for Holdings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Holdings(..)")
    }
}

impl PartialEq for Holdings {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Holdings {}

/// A bot's credential as the process compares it (salted per process: never shown, never
/// the same twice across runs).
pub fn bot_fingerprint(platform: Platform, credential: &str) -> u64 {
    use std::hash::BuildHasher;
    static SALT: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    SALT.get_or_init(Default::default)
        .hash_one((platform.as_str(), credential))
}

impl Config {
    /// What this gateway holds that another may not: its bots' fingerprints, its
    /// PostgreSQL store, the addresses it listens on (port 0 is anyone's).
    pub fn holds(&self) -> Taken {
        Taken {
            bots: self
                .platforms
                .iter()
                .filter_map(|s| Some(bot_fingerprint(s.platform(), s.credential()?)))
                .collect(),
            stores: self
                .store
                .postgres
                .iter()
                .map(|t| t.shown().to_owned())
                .collect(),
            listen: self
                .http
                .listen
                .into_iter()
                .chain(self.platforms.iter().filter_map(|s| s.own_listener()))
                .filter(|a| a.port() != 0)
                .collect(),
        }
    }

    /// Take this configuration's place among the process's gateways, at a start or a
    /// reload: keep off what the others hold now (`serving.held`: a bot of theirs is
    /// dropped, a platform listening where they do is dropped, their HTTP address leaves
    /// this one without an HTTP server), work in the own workspace where `works_apart`
    /// says so, and hold what is left. What cannot be kept apart is the error (nothing is
    /// held then); what was dropped is said, one line each.
    pub fn take_place(&mut self) -> Result<Vec<String>, String> {
        let me = self.serving.name().to_owned();
        let taken = self.serving.held.others_than(&me);
        if let Some(store) = self.store.postgres.as_ref().map(|t| t.shown().to_owned())
            && taken.stores.contains(&store)
        {
            return Err(format!(
                "its store ({store}) is another profile's too, and conversations would mix; give each profile a database of its own"
            ));
        }
        let mut said = Vec::new();
        self.platforms.retain(|settings| {
            let bot = settings
                .credential()
                .is_some_and(|c| taken.bots.contains(&bot_fingerprint(settings.platform(), c)));
            let address = settings.own_listener().filter(|a| taken.listen.contains(a));
            if bot {
                said.push(format!(
                    "{} is not started: another profile serves the same bot (one bot cannot be served twice); give each profile its own",
                    settings.platform()
                ));
            } else if let Some(addr) = address {
                said.push(format!(
                    "{} is not started: {addr} is another profile's; give it an address of its own",
                    settings.platform()
                ));
            }
            !bot && address.is_none()
        });
        if let Some(addr) = self.http.listen.filter(|a| taken.listen.contains(a)) {
            if let Some(needs) = self.platforms.iter().find(|s| s.needs_http()) {
                return Err(format!(
                    "its HTTP address {addr} ({}) is another profile's, and {} needs it for webhooks; give it an address of its own",
                    self.http.listen_key,
                    needs.platform()
                ));
            }
            self.http.listen = None;
            said.push(format!(
                "its HTTP server is off: {addr} is another profile's (set http.listen for health checks and metrics of its own)"
            ));
        }
        if self.serving.works_apart {
            self.terminal.cwd = self.home.join(crate::home::WORKSPACE);
            self.terminal.cwd_was_home = false;
        }
        self.serving.held.set(&me, Some(self.holds()));
        Ok(said)
    }
}
