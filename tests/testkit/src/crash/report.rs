//! What a crash run found: the counts, what broke an invariant ([`Report::problems`]),
//! and the report as JSON and as a table.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// What the run found.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub kills: usize,
    /// Kills per moment; a moment not reached within its wait is counted under `anytime`.
    pub moments: BTreeMap<&'static str, usize>,
    pub messages: usize,
    pub answered_once: usize,
    /// Tokens of messages never answered.
    pub lost: Vec<String>,
    /// Per platform, tokens answered more than once.
    pub doubled: BTreeMap<&'static str, Vec<String>>,
    /// Model calls beyond one per message (a turn cut by a kill and done again).
    pub turns_redone: usize,
    pub approvals: usize,
    /// Approvals whose command ran anyway (must be none).
    pub approvals_ran: Vec<String>,
    /// Approval chats not told that their command was not run.
    pub approvals_untold: Vec<String>,
    /// Messages shown that are neither an answer nor a restart notice.
    pub other_shown: Vec<String>,
    /// Answers to two or more messages at once (one came while the other was answered).
    pub joined: usize,
    /// Chats whose answers were shown in another order than their messages were written.
    pub out_of_order: Vec<String>,
    /// Several nodes: pauses (`SIGSTOP` past the lease, then `SIGCONT`).
    pub pauses: usize,
    /// Several nodes: killing or pausing the working node → the next message answered (by
    /// another node), in milliseconds, one per such kill.
    pub failovers_ms: Vec<u64>,
    pub seconds: f64,
}

/// The platforms whose fakes let the gateway tell a resend (so nothing may show twice).
pub const TELLS_RESENDS: [&str; 2] = ["discord", "slack"];

impl Report {
    /// What breaks the invariants: lost messages, doubles where the platform can tell,
    /// approvals run or not told.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !self.lost.is_empty() {
            problems.push(format!("never answered: {:?}", self.lost));
        }
        for platform in TELLS_RESENDS {
            if let Some(doubled) = self.doubled.get(platform).filter(|d| !d.is_empty()) {
                problems.push(format!("answered twice on {platform}: {doubled:?}"));
            }
        }
        if !self.approvals_ran.is_empty() {
            problems.push(format!("approvals run: {:?}", self.approvals_ran));
        }
        if !self.approvals_untold.is_empty() {
            problems.push(format!("approvals not told: {:?}", self.approvals_untold));
        }
        if !self.out_of_order.is_empty() {
            problems.push(format!("answered out of order: {:?}", self.out_of_order));
        }
        problems
    }

    pub fn json(&self) -> Value {
        let doubled: BTreeMap<_, _> = self.doubled.iter().map(|(p, t)| (*p, t.len())).collect();
        json!({
            "kills": self.kills,
            "moments": self.moments,
            "messages": self.messages,
            "answered_once": self.answered_once,
            "lost": self.lost.len(),
            "doubled": doubled,
            "turns_redone": self.turns_redone,
            "approvals": self.approvals,
            "approvals_ran": self.approvals_ran.len(),
            "approvals_untold": self.approvals_untold.len(),
            "other_shown": self.other_shown.len(),
            "joined": self.joined,
            "out_of_order": self.out_of_order.len(),
            "pauses": self.pauses,
            "failover_ms": failover_figures(&self.failovers_ms),
            "seconds": (self.seconds * 10.0).round() / 10.0,
        })
    }

    pub fn table(&self) -> String {
        let mut out = format!(
            "kills {} in {:.0} s; messages {}, answered once {}, lost {}, turns redone {}\n",
            self.kills,
            self.seconds,
            self.messages,
            self.answered_once,
            self.lost.len(),
            self.turns_redone
        );
        for (moment, n) in &self.moments {
            out.push_str(&format!("  kills {moment:<24} {n}\n"));
        }
        for (platform, tokens) in &self.doubled {
            out.push_str(&format!("  doubled on {platform:<9} {}\n", tokens.len()));
        }
        out.push_str(&format!(
            "  approvals {} (ran {}, not told {}); other messages shown {}; joined answers {}\n",
            self.approvals,
            self.approvals_ran.len(),
            self.approvals_untold.len(),
            self.other_shown.len(),
            self.joined
        ));
        if !self.failovers_ms.is_empty() || self.pauses > 0 {
            let f = failover_figures(&self.failovers_ms);
            out.push_str(&format!(
                "  pauses {}; failovers {} (kill or pause of the working node → next answer): p50 {} ms, max {} ms\n",
                self.pauses, f["n"], f["p50"], f["max"]
            ));
        }
        if !self.out_of_order.is_empty() {
            out.push_str(&format!(
                "  chats answered out of order: {:?}\n",
                self.out_of_order
            ));
        }
        for shown in self.other_shown.iter().take(10) {
            out.push_str(&format!("    other: {shown:?}\n"));
        }
        out
    }
}

/// The count, p50 and max of failover times.
fn failover_figures(ms: &[u64]) -> Value {
    let mut sorted = ms.to_vec();
    sorted.sort_unstable();
    json!({
        "n": sorted.len(),
        "p50": sorted.get(sorted.len() / 2),
        "max": sorted.last(),
    })
}
