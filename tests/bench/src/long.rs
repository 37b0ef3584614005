//! The long runs: `hermes-bench crash` (the crash harness, `hermes_testkit::crash`, with
//! hundreds of kills) and `hermes-bench soak` (`hermes_testkit::soak`), both on the release
//! daemon with all four platforms. Each prints a table and one JSON object.

use std::process::ExitCode;
use std::time::Duration;

use hermes_testkit::crash::{self, Plan};
use hermes_testkit::soak::{self, SoakPlan};
use serde_json::json;

pub const USAGE: &str =
    "usage: hermes-bench crash [--kills N] [--chats N] [--seed N] [--daemon PATH]
       hermes-bench soak [--minutes M] [--warmup-minutes M] [--chats N] [--tool-percent P]
                         [--context-length TOKENS] [--message-bytes N] [--daemon PATH]";

struct Args {
    daemon: String,
    numbers: Vec<(String, f64)>,
}

impl Args {
    fn parse(args: impl Iterator<Item = String>, daemon: String) -> Result<Args, String> {
        let mut parsed = Args {
            daemon,
            numbers: Vec::new(),
        };
        let mut args = args.peekable();
        while let Some(flag) = args.next() {
            let value = args.next().ok_or(format!("{flag} needs a value"))?;
            if flag == "--daemon" {
                parsed.daemon = value;
                continue;
            }
            let name = flag
                .strip_prefix("--")
                .ok_or(format!("unknown argument {flag:?}"))?;
            let number = value
                .parse()
                .map_err(|_| format!("{flag} needs a number, not {value:?}"))?;
            parsed.numbers.push((name.to_owned(), number));
        }
        Ok(parsed)
    }

    fn number(&self, name: &str, default: f64) -> f64 {
        let found = self.numbers.iter().rev().find(|(n, _)| n == name);
        found.map_or(default, |(_, v)| *v)
    }

    fn check(&self, known: &[&str]) -> Result<(), String> {
        match self
            .numbers
            .iter()
            .find(|(n, _)| !known.contains(&n.as_str()))
        {
            Some((n, _)) => Err(format!("unknown flag --{n}")),
            None => Ok(()),
        }
    }
}

/// `hermes-bench crash …` or `hermes-bench soak …`; `None` for any other command line.
pub async fn run(mut args: impl Iterator<Item = String>, daemon: String) -> Option<ExitCode> {
    let command = args.next()?;
    if command != "crash" && command != "soak" {
        return None;
    }
    let parsed = match Args::parse(args, daemon) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("hermes-bench: {e}\n{USAGE}");
            return Some(ExitCode::from(2));
        }
    };
    let code = if command == "crash" {
        crash_run(&parsed).await
    } else {
        soak_run(&parsed).await
    };
    Some(code.unwrap_or_else(|e| {
        eprintln!("hermes-bench: {e}\n{USAGE}");
        ExitCode::from(2)
    }))
}

async fn crash_run(args: &Args) -> Result<ExitCode, String> {
    args.check(&["kills", "chats", "seed", "nodes"])?;
    let plan = Plan {
        binary: args.daemon.clone(),
        kills: args.number("kills", 200.0) as usize,
        chats: args.number("chats", 3.0) as u32,
        seed: args.number("seed", 1.0) as u64,
        verbose: true,
        nodes: args.number("nodes", 1.0) as usize,
    };
    let report = crash::run(&plan).await;
    println!("{}", report.table());
    let problems = report.problems();
    let mut out = report.json();
    out["problems"] = json!(problems);
    println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn soak_run(args: &Args) -> Result<ExitCode, String> {
    let known = [
        "minutes",
        "warmup-minutes",
        "chats",
        "seed",
        "tool-percent",
        "context-length",
        "message-bytes",
    ];
    args.check(&known)?;
    let minutes = |name, default| Duration::from_secs_f64(args.number(name, default) * 60.0);
    let plan = SoakPlan {
        binary: args.daemon.clone(),
        length: minutes("minutes", 10.0),
        warmup: minutes("warmup-minutes", 2.0),
        every: Duration::from_secs(5),
        chats: args.number("chats", 5.0) as u32,
        seed: args.number("seed", 1.0) as u64,
        tool_percent: args.number("tool-percent", 25.0) as u64,
        message_bytes: args.number("message-bytes", 0.0) as usize,
        context_length: args
            .numbers
            .iter()
            .any(|(n, _)| n == "context-length")
            .then(|| args.number("context-length", 0.0) as u64),
    };
    let report = soak::soak(&plan).await;
    println!("  t(s)   rss(KiB)  anon(KiB)  fds  threads  tasks  answered");
    for s in &report.samples {
        println!(
            "{:>6.0} {:>10} {:>10} {:>4} {:>8} {:>6} {:>9}",
            s.seconds, s.rss_kib, s.anon_kib, s.fds, s.threads, s.tasks, s.answered
        );
    }
    let out = report.json(plan.warmup);
    println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
    Ok(if report.answered + 40 >= report.messages {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
