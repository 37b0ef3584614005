//! `hermes-bench`: runs the release `hermes-gateway` binary against the testkit fakes on
//! 127.0.0.1 (the LLM answers at once, the per-chat send budget is opened up) and measures
//! it from outside: spawn → first poll, idle RSS, the sequential reply latency split into
//! inbound / LLM / outbound, the tool round trip, closed loops of many chats, peak RSS, CPU
//! per reply and SIGTERM → exit. Prints a table and one JSON object.
//!
//! This file owns the command line, the order of the phases and the output.

mod long;
mod phases;
mod procfs;
mod search;
mod stats;
mod world;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use crate::procfs::mib;
use crate::stats::round3;
use crate::world::World;

const USAGE: &str = "usage: hermes-bench [--daemon PATH] [--quick] [--json-only] [--only LIST]

  --daemon PATH  the hermes-gateway binary (default: the one next to this executable)
  --quick        a small smoke run (10-20 chats, a few messages)
  --json-only    print only the JSON object
  --only LIST    run only these phases, comma-separated: starts,sequential,tool,loops,
                 conversations,search,store (for profiling one phase; the main daemon's
                 start, idle and exit always run; `conversations` — a fresh daemon's memory
                 once 10,000 people each spoke once and it sat idle 35 s — and `search` —
                 `session_search` over a person's 100,000-message history — run after it;
                 `store` — the database's size after 100,000 group messages not for the bot
                 and after 10,000 answered ones — runs only when named, it takes minutes)
  --terminal K=V a `terminal.K: V` setting for the main daemon, e.g. sandbox=off or
                 network=false (repeatable; to compare the confinement's cost)
  --tool-samples N  commands in the tool round trip (default 20, quick 3)
  --postgres     the main daemon (starts, sequential, tool, loops) on a PostgreSQL store the
                 bench starts (Debian's `postgresql`; fsync off, through a Unix socket)
  --nodes N      with --postgres: N daemons on that store sharing the work (one polls
                 Telegram; each runs the chats of its shares); CPU is summed over them

Environment: HERMES_BENCH_KEEP=1 keeps each world's home (the daemon's log) and names the
doubled replies; HERMES_BENCH_LOG sets the daemon's log filter (default `warn`).

       hermes-bench crash [--kills N] [--chats N] [--seed N] [--nodes N] [--daemon PATH]
       hermes-bench soak [--minutes M] [--warmup-minutes M] [--chats N] [--tool-percent P]
                         [--context-length TOKENS] [--message-bytes N] [--daemon PATH]";

/// Every phase; `store` last, since it runs only when named.
const PHASES: [&str; 7] = [
    "starts",
    "sequential",
    "tool",
    "loops",
    "conversations",
    "search",
    "store",
];
/// Phases run without `--only`: all but `store`, which takes minutes.
const DEFAULT_PHASES: &[&str] = PHASES.split_last().unwrap().1;

/// How long the `conversations` phase's daemon sits idle before its memory is read: past
/// the 30 s after which an idle delivery lane and an idle session actor end (the steady
/// state of a bot between its users' messages).
const CONVERSATIONS_IDLE: Duration = Duration::from_secs(35);

struct Options {
    daemon: PathBuf,
    quick: bool,
    json_only: bool,
    /// Phases to run ([`DEFAULT_PHASES`] unless `--only`).
    phases: Vec<String>,
    /// `terminal.*` settings for the main daemon (`--terminal K=V`), as YAML lines.
    terminal: String,
    /// `--tool-samples`: commands in the tool round trip, instead of the size's.
    tool_samples: Option<usize>,
    /// `--postgres`: the main daemon on a PostgreSQL store the bench starts.
    postgres: bool,
    /// `--nodes`: daemons sharing that store.
    nodes: usize,
}

impl Options {
    fn runs(&self, phase: &str) -> bool {
        self.phases.iter().any(|p| p == phase)
    }
}

/// How much each phase does.
struct Sizes {
    cold_starts: usize,
    warmup: usize,
    sequential: usize,
    tool: usize,
    loops: &'static [(usize, usize)],
    /// Group messages not for the bot, and answered direct messages, in `store`.
    store: (usize, usize),
    /// People who each speak once in `conversations`.
    conversations: usize,
    /// Messages in the person's history, and calls timed per query, in `search`.
    search: (usize, usize),
}

const FULL: Sizes = Sizes {
    cold_starts: 5,
    warmup: 10,
    sequential: 200,
    tool: 20,
    loops: &[(100, 3), (1000, 2)],
    store: (100_000, 10_000),
    conversations: 10_000,
    search: (100_000, 20),
};

const QUICK: Sizes = Sizes {
    cold_starts: 2,
    warmup: 3,
    sequential: 20,
    tool: 3,
    loops: &[(10, 3), (20, 2)],
    store: (2_000, 200),
    conversations: 200,
    search: (2_000, 3),
};

fn parse_args() -> Result<Options, String> {
    let mut daemon = None;
    let mut quick = false;
    let mut json_only = false;
    let mut phases: Vec<String> = DEFAULT_PHASES.iter().map(|p| p.to_string()).collect();
    let mut terminal = String::new();
    let mut tool_samples = None;
    let mut postgres = false;
    let mut nodes = 1;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--daemon" => daemon = Some(PathBuf::from(args.next().ok_or("--daemon needs a path")?)),
            "--quick" => quick = true,
            "--json-only" => json_only = true,
            "--only" => {
                let list = args.next().ok_or("--only needs a list of phases")?;
                phases = list.split(',').map(|p| p.trim().to_owned()).collect();
                if let Some(bad) = phases.iter().find(|p| !PHASES.contains(&p.as_str())) {
                    return Err(format!(
                        "unknown phase {bad:?} (known: {})",
                        PHASES.join(",")
                    ));
                }
            }
            "--terminal" => {
                let setting = args.next().ok_or("--terminal needs KEY=VALUE")?;
                let (key, value) = setting
                    .split_once('=')
                    .ok_or("--terminal needs KEY=VALUE")?;
                terminal.push_str(&format!("  {key}: '{value}'\n"));
            }
            "--tool-samples" => {
                let n = args.next().ok_or("--tool-samples needs a number")?;
                tool_samples = Some(n.parse().map_err(|_| "--tool-samples needs a number")?);
            }
            "--postgres" => postgres = true,
            "--nodes" => {
                let n = args.next().ok_or("--nodes needs a number")?;
                nodes = n.parse().map_err(|_| "--nodes needs a number")?;
                if nodes == 0 {
                    return Err("--nodes needs at least 1".into());
                }
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let daemon = match daemon {
        Some(d) => d,
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this executable: {e}"))?
            .with_file_name("hermes-gateway"),
    };
    Ok(Options {
        daemon,
        quick,
        json_only,
        phases,
        terminal,
        tool_samples,
        postgres,
        nodes,
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let next_to_me = std::env::current_exe()
        .map(|e| e.with_file_name("hermes-gateway").display().to_string())
        .unwrap_or_default();
    if let Some(code) = long::run(std::env::args().skip(1), next_to_me).await {
        return code;
    }
    let options = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("hermes-bench: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if !options.daemon.is_file() {
        eprintln!(
            "hermes-bench: no daemon binary at {}\n\
             run `cargo build --release` first (it builds hermes-gateway), or pass --daemon PATH",
            options.daemon.display()
        );
        return ExitCode::from(2);
    }
    let report = run(&options).await;
    if !options.json_only {
        print_table(&report);
        println!();
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&report).expect("JSON of JSON")
    );
    if report["errors"].as_array().is_some_and(|e| !e.is_empty()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A phase's figures, or `{"error": …}` with the error also listed in `errors`.
fn record(errors: &mut Vec<String>, name: &str, result: Result<Value, String>) -> Value {
    match result {
        Ok(v) => v,
        Err(e) => {
            errors.push(format!("{name}: {e}"));
            json!({ "error": e })
        }
    }
}

async fn run(options: &Options) -> Value {
    let sizes = if options.quick { &QUICK } else { &FULL };
    let ticks = procfs::clock_ticks();
    let (cpus, cpu, kernel) = procfs::machine();
    let mut errors = Vec::new();
    let mut report = json!({
        "bench": "hermes-bench",
        "mode": if options.quick { "quick" } else { "full" },
        "daemon": options.daemon.display().to_string(),
        "machine": { "cpus": cpus, "cpu": cpu, "kernel": kernel },
        "clk_tck": ticks,
    });

    if options.runs("starts") {
        let cold = phases::cold_starts(&options.daemon, sizes.cold_starts).await;
        report["cold_starts"] = record(&mut errors, "cold starts", cold);
    }

    if options.runs("store") {
        let (chatter, answered) = sizes.store;
        let store = phases::store_growth(&options.daemon, chatter, answered).await;
        report["store"] = record(&mut errors, "store", store);
    }

    // One daemon for everything else, in this order: on SQLite in its home, or on a
    // PostgreSQL server started here (its own cluster, `fsync` off as the tests' are).
    if options.nodes > 1 && !options.postgres {
        errors.push("--nodes needs --postgres (nodes share a PostgreSQL store)".into());
        report["errors"] = json!(errors);
        return report;
    }
    let (server, store_env) = if options.postgres {
        match hermes_testkit::postgres::TestPostgres::start() {
            Some(server) => {
                let database = server.create_database();
                let url = server.url(&database);
                report["store"] = json!("postgres");
                let mut env = vec![format!("HERMES_STORE_URL={url}")];
                if options.nodes > 1 {
                    env.push("HERMES_NODE_ID=node-1".into());
                }
                (Some((server, database)), env)
            }
            None => {
                errors.push("--postgres: PostgreSQL is not installed".into());
                report["errors"] = json!(errors);
                return report;
            }
        }
    } else {
        (None, Vec::new())
    };
    // Several nodes: leases renewed every second, so the shares spread within seconds.
    let leases = if options.nodes > 1 {
        "store:\n  lease_ttl: 3\n  lease_renew: 1\n"
    } else {
        ""
    };
    let mut w = World::with_settings(&options.terminal, &store_env, leases).await;
    if !options.terminal.is_empty() {
        report["terminal"] = json!(options.terminal);
    }
    let mut p = match w.spawn(&options.daemon) {
        Ok(p) => p,
        Err(e) => {
            errors.push(format!("main daemon: {e}"));
            report["errors"] = json!(errors);
            w.remove();
            return report;
        }
    };
    let Some(first) = w.first_poll_after(p.started, Duration::from_secs(10)).await else {
        errors.push(format!(
            "main daemon: no getUpdates within 10 s; log:\n{}",
            p.log_tail(20)
        ));
        report["errors"] = json!(errors);
        drop(p);
        w.remove();
        return report;
    };
    report["spawn_to_first_poll_ms"] = json!(round3((first - p.started).as_secs_f64() * 1000.0));
    let mut others = Vec::new();
    if let Some((server, database)) = server.as_ref().filter(|_| options.nodes > 1) {
        for n in 2..=options.nodes {
            match w.spawn_node(&options.daemon, n, &[format!("HERMES_NODE_ID=node-{n}")]) {
                Ok(node) => others.push(node),
                Err(e) => errors.push(format!("node {n}: {e}")),
            }
        }
        report["nodes"] = json!(options.nodes);
        match shares_spread(server, database, options.nodes, Duration::from_secs(60)).await {
            Ok((took, held)) => {
                report["shares_spread_s"] = json!(round3(took.as_secs_f64()));
                report["shares_held"] = json!(held);
            }
            Err(e) => errors.push(e),
        }
    }
    let idle_cpu_before = procfs::cpu_time(p.pid, ticks);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = procfs::memory(p.pid).unwrap_or_default();
    let idle_cpu = match (idle_cpu_before, procfs::cpu_time(p.pid, ticks)) {
        (Some(a), Some(b)) => json!(round3((b - a).as_secs_f64() * 1000.0)),
        _ => Value::Null,
    };
    report["idle"] = json!({
        "rss_mib": round3(mib(idle.rss_kib)),
        "anon_mib": round3(mib(idle.anon_kib)),
        "file_mib": round3(mib(idle.file_kib)),
        "threads": idle.threads,
        "cpu_ms_in_1s": idle_cpu,
    });

    if options.runs("sequential") {
        let seq =
            phases::sequential(&mut w, &p, 1_000_001, sizes.warmup, sizes.sequential, ticks).await;
        report["sequential"] = record(&mut errors, "sequential", seq);
    }

    if options.runs("tool") {
        let n = options.tool_samples.unwrap_or(sizes.tool);
        let tool = phases::tool_round_trip(&mut w, &p, 1_500_001, n).await;
        report["tool"] = record(&mut errors, "tool round trip", tool);
    }

    let mut loops = Vec::new();
    let (mut loop_cpu_ms, mut loop_replies) = (0.0, 0u64);
    let loop_sizes = if options.runs("loops") {
        sizes.loops
    } else {
        &[]
    };
    for (i, &(chats, per_chat)) in loop_sizes.iter().enumerate() {
        let first_chat = 2_000_000 + 1_000_000 * i as i64;
        let result =
            phases::closed_loop(&mut w, &p, &others, first_chat, chats, per_chat, ticks).await;
        if let Ok(figures) = &result {
            loop_cpu_ms += figures["daemon_cpu_ms"].as_f64().unwrap_or(0.0);
            loop_replies += figures["replied"].as_u64().unwrap_or(0);
        }
        loops.push(record(
            &mut errors,
            &format!("closed loop {chats} × {per_chat}"),
            result,
        ));
    }
    report["closed_loops"] = json!(loops);
    report["cpu_ms_per_reply_closed_loops"] = if loop_replies > 0 {
        json!(round3(loop_cpu_ms / loop_replies as f64))
    } else {
        Value::Null
    };

    let after = procfs::memory(p.pid).unwrap_or_default();
    report["peak_rss_mib"] = json!(round3(mib(after.hwm_kib)));
    report["rss_after_load_mib"] = json!(round3(mib(after.rss_kib)));
    report["threads_after_load"] = json!(after.threads);

    let exit = p.terminate(Duration::from_secs(15)).await.map(
        |(took, code)| json!({ "ms": round3(took.as_secs_f64() * 1000.0), "exit_code": code }),
    );
    report["sigterm_to_exit"] = record(&mut errors, "SIGTERM", exit);
    report["daemon_log_warnings"] = json!(p.log_problems());
    if !errors.is_empty() {
        eprintln!("daemon log (last 30 lines):\n{}", p.log_tail(30));
    }
    for mut node in others {
        let _ = node.terminate(Duration::from_secs(15)).await;
    }
    drop(p);
    w.remove();

    if options.runs("conversations") {
        let many =
            phases::conversations(&options.daemon, sizes.conversations, CONVERSATIONS_IDLE).await;
        report["conversations"] = record(&mut errors, "conversations", many);
    }
    if options.runs("search") {
        let (messages, samples) = sizes.search;
        let found = search::session_search(&options.daemon, messages, samples).await;
        report["search"] = record(&mut errors, "search", found);
    }
    report["errors"] = json!(errors);
    report
}

/// Wait until `nodes` nodes hold shares of the work, every share is held and none holds
/// two more than another: how long it took, and how many shares each node holds.
async fn shares_spread(
    server: &hermes_testkit::postgres::TestPostgres,
    database: &str,
    nodes: usize,
    timeout: Duration,
) -> Result<(Duration, Value), String> {
    let started = std::time::Instant::now();
    // The shares of the work only (`work:<n>`, not a node's own `work:node:<id>`).
    let sql = "SELECT holder, count(*) FROM leases WHERE name ~ '^work:[0-9]+$' \
               AND expires_at > CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT) \
               GROUP BY holder ORDER BY holder";
    loop {
        let out = server.psql(server.password(), database, sql)?;
        let held: Vec<(String, u32)> = out
            .lines()
            .filter_map(|l| l.split_once('|'))
            .filter_map(|(h, n)| Some((h.to_owned(), n.parse().ok()?)))
            .collect();
        let total: u32 = held.iter().map(|(_, n)| n).sum();
        let (most, least) = (
            held.iter().map(|(_, n)| *n).max().unwrap_or(0),
            held.iter().map(|(_, n)| *n).min().unwrap_or(0),
        );
        // Every share held, and spread to within one of each other.
        if held.len() == nodes && total == hermes_adapter::WORK_SHARES && most - least <= 1 {
            let by_node: serde_json::Map<String, Value> =
                held.into_iter().map(|(h, n)| (h, json!(n))).collect();
            return Ok((started.elapsed(), Value::Object(by_node)));
        }
        if started.elapsed() > timeout {
            return Err(format!(
                "the shares did not spread over {nodes} nodes within {timeout:?}: {held:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A number with `decimals`, or "—" when missing.
fn num(v: &Value, decimals: usize) -> String {
    v.as_f64()
        .map_or_else(|| "—".to_owned(), |x| format!("{x:.decimals$}"))
}

fn print_table(r: &Value) {
    let m = &r["machine"];
    println!(
        "hermes-bench ({} run) · {} × {} · Linux {}",
        r["mode"].as_str().unwrap_or_default(),
        m["cpus"],
        m["cpu"].as_str().unwrap_or_default(),
        m["kernel"].as_str().unwrap_or_default()
    );
    println!("daemon: {}", r["daemon"].as_str().unwrap_or_default());
    println!();
    let c = &r["cold_starts"];
    let skipped = |v: &Value| v.is_null();
    let row = |name: &str, value: String| println!("  {name:<38} {value}");
    println!("start and memory");
    if let Some(e) = c["error"].as_str() {
        row("cold starts", format!("FAILED: {e}"));
    } else if skipped(c) {
        row(
            "spawn → first getUpdates",
            format!(
                "main daemon {} ms (cold starts skipped)",
                num(&r["spawn_to_first_poll_ms"], 1)
            ),
        );
    } else {
        let s = &c["spawn_to_first_poll_ms"];
        row(
            "spawn → first getUpdates",
            format!(
                "p50 {} ms ({} cold starts, {}–{}; main daemon {} ms)",
                num(&s["p50"], 1),
                c["runs"],
                num(&s["min"], 1),
                num(&s["max"], 1),
                num(&r["spawn_to_first_poll_ms"], 1)
            ),
        );
        row(
            "SIGTERM → exit, idle",
            format!("p50 {} ms", num(&c["idle_sigterm_to_exit_ms"]["p50"], 1)),
        );
    }
    row(
        "idle RSS (1 s after first poll)",
        format!(
            "{} MiB ({} heap and stacks, {} files), {} threads, {} ms CPU in that second",
            num(&r["idle"]["rss_mib"], 1),
            num(&r["idle"]["anon_mib"], 1),
            num(&r["idle"]["file_mib"], 1),
            r["idle"]["threads"],
            num(&r["idle"]["cpu_ms_in_1s"], 0)
        ),
    );

    let s = &r["sequential"];
    println!();
    if let Some(e) = s["error"].as_str() {
        println!("sequential replies: FAILED: {e}");
    } else if skipped(s) {
        println!("sequential replies: skipped");
    } else {
        println!(
            "sequential replies ({} in one chat after {} warm-up)   p50 ms    p99 ms",
            s["total_ms"]["n"], s["warmup"]
        );
        for (name, key) in [
            ("total: update available → sendMessage", "total_ms"),
            ("  poll: available → served", "poll_ms"),
            ("  inbound: served → LLM request", "inbound_ms"),
            ("  LLM: request → stream end", "llm_ms"),
            ("  outbound: stream end → sendMessage", "outbound_ms"),
        ] {
            println!(
                "  {name:<40} {:>8} {:>9}",
                num(&s[key]["p50"], 2),
                num(&s[key]["p99"], 2)
            );
        }
        row(
            "CPU per reply (1st half, 2nd half)",
            format!(
                "{} ms ({}, {})",
                num(&s["cpu_ms_per_reply"], 2),
                num(&s["cpu_ms_per_reply_halves"][0], 2),
                num(&s["cpu_ms_per_reply_halves"][1], 2)
            ),
        );
    }

    let t = &r["tool"];
    println!();
    if let Some(e) = t["error"].as_str() {
        println!("tool round trip: FAILED: {e}");
    } else if skipped(t) {
        println!("tool round trip: skipped");
    } else {
        println!(
            "tool round trip (terminal `echo hi`, n={})           p50 ms    p99 ms",
            t["round_trip_ms"]["n"]
        );
        for (name, key) in [
            ("message → reply", "round_trip_ms"),
            ("tool step: stream end → next request", "tool_step_ms"),
        ] {
            println!(
                "  {name:<40} {:>8} {:>9}",
                num(&t[key]["p50"], 2),
                num(&t[key]["p99"], 2)
            );
        }
    }

    println!();
    match r["nodes"].as_u64() {
        Some(nodes) => println!(
            "closed loops (next message when the reply arrives), {nodes} nodes on one store, shares {}",
            r["shares_held"]
        ),
        None => println!("closed loops (next message when the reply arrives)"),
    }
    println!(
        "  {:<12} {:>9} {:>6} {:>8} {:>7} {:>8} {:>8} {:>10} {:>10}",
        "chats × msgs",
        "replies/s",
        "lost",
        "doubled",
        "unsent",
        "p50 ms",
        "p99 ms",
        "CPU ms/rep",
        "bench CPU"
    );
    for l in r["closed_loops"].as_array().into_iter().flatten() {
        if let Some(e) = l["error"].as_str() {
            println!("  FAILED: {e}");
            continue;
        }
        println!(
            "  {:<12} {:>9} {:>6} {:>8} {:>7} {:>8} {:>8} {:>10} {:>8} ms",
            format!("{} × {}", l["chats"], l["per_chat"]),
            num(&l["replies_per_s"], 0),
            l["lost"].to_string(),
            l["doubled"].to_string(),
            l["unsent"].to_string(),
            num(&l["latency_ms"]["p50"], 1),
            num(&l["latency_ms"]["p99"], 1),
            num(&l["cpu_ms_per_reply"], 2),
            num(&l["bench_cpu_ms"], 0)
        );
    }
    row(
        "CPU per reply over the closed loops",
        format!("{} ms", num(&r["cpu_ms_per_reply_closed_loops"], 2)),
    );

    let cv = &r["conversations"];
    if let Some(e) = cv["error"].as_str() {
        println!();
        println!("many conversations: FAILED: {e}");
    } else if !cv.is_null() {
        println!();
        println!("many conversations (a fresh daemon)");
        row(
            &format!("{} people, each answered once", cv["conversations"]),
            format!(
                "in {} s; RSS {} MiB, then {} MiB after {} s idle ({} heap and stacks), {} threads",
                num(&cv["answered_in_s"], 1),
                num(&cv["rss_after_answers_mib"], 1),
                num(&cv["rss_idle_mib"], 1),
                cv["idle_s"],
                num(&cv["anon_idle_mib"], 1),
                cv["threads_idle"]
            ),
        );
    }

    let se = &r["search"];
    if let Some(e) = se["error"].as_str() {
        println!();
        println!("session_search: FAILED: {e}");
    } else if !se.is_null() {
        println!();
        println!(
            "session_search over {} messages in {} sessions (tool step, stream end → next request)",
            se["messages"], se["sessions"]
        );
        for (name, steps) in se["tool_step_ms"].as_object().into_iter().flatten() {
            row(
                name,
                format!(
                    "p50 {} ms, max {} ms",
                    num(&steps["p50"], 2),
                    num(&steps["max"], 2)
                ),
            );
        }
    }

    let st = &r["store"];
    if let Some(e) = st["error"].as_str() {
        println!();
        println!("database growth: FAILED: {e}");
    } else if !st.is_null() {
        println!();
        println!("database growth (used pages after a clean stop, before any pruning; WAL left)");
        row(
            &format!(
                "after {} group messages not for the bot",
                st["chatter_messages"]
            ),
            format!(
                "{} KiB (WAL {} KiB) {}",
                num(&st["after_chatter_kib"], 0),
                num(&st["after_chatter_wal_kib"], 0),
                st["after_chatter_rows"]
            ),
        );
        row(
            &format!("after {} answered messages", st["answered_messages"]),
            format!(
                "{} KiB (WAL {} KiB) {}",
                num(&st["after_answered_kib"], 0),
                num(&st["after_answered_wal_kib"], 0),
                st["after_answered_rows"]
            ),
        );
    }

    println!();
    println!("end");
    row(
        "peak RSS (VmHWM)",
        format!("{} MiB", num(&r["peak_rss_mib"], 1)),
    );
    row(
        "RSS after load",
        format!(
            "{} MiB, {} threads",
            num(&r["rss_after_load_mib"], 1),
            r["threads_after_load"]
        ),
    );
    let e = &r["sigterm_to_exit"];
    if let Some(err) = e["error"].as_str() {
        row("SIGTERM → exit after load", format!("FAILED: {err}"));
    } else {
        row(
            "SIGTERM → exit after load",
            format!("{} ms (exit code {})", num(&e["ms"], 1), e["exit_code"]),
        );
    }
    row(
        "daemon log lines at WARN/ERROR",
        r["daemon_log_warnings"].to_string(),
    );
    for err in r["errors"].as_array().into_iter().flatten() {
        println!("ERROR {}", err.as_str().unwrap_or_default());
    }
}
