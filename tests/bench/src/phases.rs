//! The measured phases, each bounded in time and returning its figures or why it failed:
//! cold starts, the sequential latency split, the tool round trip, the closed loops and the
//! database's growth.

use std::time::{Duration, Instant};

use hermes_testkit::llm::Reply;
use serde_json::{Value, json};

use crate::procfs;
use crate::stats::{Samples, round3};
use crate::world::{Process, World};

/// How long one reply may take before the phase calls it lost.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(15);

pub fn check_alive(p: &Process) -> Result<(), String> {
    match p.exited() {
        Some(exit) => Err(format!("the daemon exited (code {:?})", exit.code)),
        None => Ok(()),
    }
}

/// Spawn → first `getUpdates` and SIGTERM → exit of an idle daemon, over `runs` cold starts,
/// each with a fresh home and fresh fakes.
pub async fn cold_starts(binary: &std::path::Path, runs: usize) -> Result<Value, String> {
    let mut first_poll = Samples::default();
    let mut exit = Samples::default();
    let mut codes = Vec::new();
    for _ in 0..runs {
        let world = World::new().await;
        let result = async {
            let mut p = world.spawn(binary)?;
            let at = world
                .first_poll_after(p.started, Duration::from_secs(10))
                .await
                .ok_or_else(|| format!("no getUpdates within 10 s; log:\n{}", p.log_tail(20)))?;
            first_poll.push(at - p.started);
            // Let the first long poll settle in, as an idle daemon would be.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let (took, code) = p.terminate(Duration::from_secs(10)).await?;
            exit.push(took);
            codes.push(code);
            Ok::<_, String>(())
        }
        .await;
        world.remove();
        result?;
    }
    Ok(json!({
        "runs": runs,
        "spawn_to_first_poll_ms": first_poll.json(),
        "idle_sigterm_to_exit_ms": exit.json(),
        "exit_codes": codes,
    }))
}

/// `warmup + n` DMs in one chat, one at a time (the next 10 ms after the reply, so each
/// meets an idle daemon), each split
/// into: poll (made available → served by `getUpdates`), inbound (served → LLM request
/// arrives), LLM (arrives → answer stream ends), outbound (stream end → `sendMessage`).
/// The chat's history grows by two messages a turn.
pub async fn sequential(
    w: &mut World,
    p: &Process,
    chat: i64,
    warmup: usize,
    n: usize,
    ticks: u64,
) -> Result<Value, String> {
    let mut total = Samples::default();
    let mut poll = Samples::default();
    let mut inbound = Samples::default();
    let mut llm = Samples::default();
    let mut outbound = Samples::default();
    // CPU time at the first measured message, half-way and at the end: the halves tell
    // whether a reply costs more as the chat's history grows.
    let mut cpu_marks = Vec::new();
    for i in 0..warmup + n {
        if i == warmup || i == warmup + n / 2 {
            cpu_marks.extend(procfs::cpu_time(p.pid, ticks));
        }
        check_alive(p)?;
        let text = format!("seq {i}");
        let expected = format!("echo: {text}");
        let llm_before = w.llm.timings().len();
        let made = Instant::now();
        let update = w.telegram.dm(chat, &text);
        let deadline = made + REPLY_TIMEOUT;
        let sent = loop {
            let sent = w.observer.next_sent(deadline).await.ok_or_else(|| {
                format!("no reply to sequential message {i} within {REPLY_TIMEOUT:?}")
            })?;
            if sent.chat == chat && sent.text == expected {
                break sent;
            }
        };
        let served = w
            .observer
            .served_at(update)
            .ok_or("a reply to an update getUpdates never served")?;
        let timings = w.llm.timings();
        let [timing] = timings[llm_before..] else {
            return Err(format!(
                "message {i} made {} LLM requests, expected 1",
                timings.len() - llm_before
            ));
        };
        let finished = timing.finished.ok_or("an answer stream never finished")?;
        if i >= warmup {
            total.push(sent.at - made);
            poll.push(served - made);
            inbound.push(timing.arrived.saturating_duration_since(served));
            llm.push(finished.saturating_duration_since(timing.arrived));
            outbound.push(sent.at.saturating_duration_since(finished));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cpu_marks.extend(procfs::cpu_time(p.pid, ticks));
    let per_reply = |from: usize, to: usize, replies: usize| match cpu_marks.get(from..=to) {
        Some([a, .., b]) if replies > 0 => {
            json!(round3((*b - *a).as_secs_f64() * 1000.0 / replies as f64))
        }
        _ => Value::Null,
    };
    let cpu = per_reply(0, 2, n);
    let cpu_halves = json!([per_reply(0, 1, n / 2), per_reply(1, 2, n - n / 2)]);
    Ok(json!({
        "warmup": warmup,
        "total_ms": total.json(),
        "poll_ms": poll.json(),
        "inbound_ms": inbound.json(),
        "llm_ms": llm.json(),
        "outbound_ms": outbound.json(),
        "cpu_ms_per_reply": cpu,
        "cpu_ms_per_reply_halves": cpu_halves,
    }))
}

/// `n` messages each answered by a `terminal` call of `echo hi` and then a text: message →
/// reply, and the tool step (first answer stream ends → second LLM request arrives).
pub async fn tool_round_trip(
    w: &mut World,
    p: &Process,
    chat: i64,
    n: usize,
) -> Result<Value, String> {
    let mut total = Samples::default();
    let mut step = Samples::default();
    for i in 0..n {
        check_alive(p)?;
        let answer = format!("tool done {i}");
        w.llm.push(Reply::terminal("echo hi"));
        w.llm.push(Reply::text(answer.clone()));
        let llm_before = w.llm.timings().len();
        let made = Instant::now();
        w.telegram.dm(chat, &format!("tool {i}"));
        let deadline = made + REPLY_TIMEOUT;
        let sent = loop {
            let sent =
                w.observer.next_sent(deadline).await.ok_or_else(|| {
                    format!("no reply to tool message {i} within {REPLY_TIMEOUT:?}")
                })?;
            if sent.chat == chat && sent.text == answer {
                break sent;
            }
        };
        total.push(sent.at - made);
        let timings = w.llm.timings();
        match &timings[llm_before..] {
            [first, second] => {
                let first_end = first
                    .finished
                    .ok_or("the tool call stream never finished")?;
                step.push(second.arrived.saturating_duration_since(first_end));
            }
            other => {
                return Err(format!(
                    "tool message {i} made {} LLM requests, expected 2",
                    other.len()
                ));
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(json!({
        "round_trip_ms": total.json(),
        "tool_step_ms": step.json(),
    }))
}

/// `chats` DMs chats at once, each sending its next message when the previous reply came,
/// `per_chat` messages each. A message with no reply within [`REPLY_TIMEOUT`] is lost and
/// ends its chat; a second reply to one message is a double (watched for 1 s after the end).
///
/// `others`: further nodes on the same store, whose CPU is counted with the main one's.
#[allow(clippy::too_many_arguments)]
pub async fn closed_loop(
    w: &mut World,
    p: &Process,
    others: &[Process],
    first_chat: i64,
    chats: usize,
    per_chat: usize,
    ticks: u64,
) -> Result<Value, String> {
    struct Chat {
        /// Messages sent so far; the outstanding one is `sent - 1`.
        sent: usize,
        sent_at: Instant,
        replies: Vec<u32>,
        done: bool,
    }
    let hard_deadline = Instant::now() + REPLY_TIMEOUT * per_chat as u32 + Duration::from_secs(30);
    let nodes: Vec<&Process> = std::iter::once(p).chain(others).collect();
    let cpu_of_nodes = || {
        nodes
            .iter()
            .map(|n| procfs::cpu_time(n.pid, ticks))
            .sum::<Option<Duration>>()
    };
    let cpu_before = cpu_of_nodes();
    let own_before = procfs::own_cpu_time();
    let start = Instant::now();
    let mut state: Vec<Chat> = (0..chats)
        .map(|c| {
            let chat = first_chat + c as i64;
            w.telegram.dm(chat, &format!("c{chat} m0"));
            Chat {
                sent: 1,
                sent_at: Instant::now(),
                replies: vec![0; per_chat],
                done: false,
            }
        })
        .collect();
    let mut latency = Samples::default();
    let mut answered = 0usize;
    let mut last_reply = start;
    let mut lost = 0usize;
    let mut strays = 0usize;
    let mut open = chats;
    let mut settle_until: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if open == 0 && settle_until.is_none() {
            settle_until = Some(now + Duration::from_secs(1));
        }
        if settle_until.is_some_and(|s| now >= s) || now >= hard_deadline {
            break;
        }
        if nodes.iter().any(|n| n.exited().is_some()) {
            break;
        }
        let tick = (now + Duration::from_millis(100)).min(settle_until.unwrap_or(hard_deadline));
        if let Some(sent) = w.observer.next_sent(tick).await {
            let index = sent.chat - first_chat;
            let message = sent
                .text
                .rsplit_once(" m")
                .and_then(|(_, k)| k.parse::<usize>().ok());
            let (Some(chat), Some(k)) = (
                usize::try_from(index).ok().and_then(|i| state.get_mut(i)),
                message,
            ) else {
                strays += 1;
                continue;
            };
            if k >= per_chat {
                strays += 1;
                continue;
            }
            chat.replies[k] += 1;
            if chat.replies[k] > 1 || chat.done || k + 1 != chat.sent {
                continue;
            }
            answered += 1;
            last_reply = sent.at;
            latency.push(sent.at.saturating_duration_since(chat.sent_at));
            if chat.sent < per_chat {
                w.telegram
                    .dm(sent.chat, &format!("c{} m{}", sent.chat, chat.sent));
                chat.sent += 1;
                chat.sent_at = Instant::now();
            } else {
                chat.done = true;
                open -= 1;
            }
        }
        let now = Instant::now();
        for chat in state.iter_mut().filter(|c| !c.done) {
            if now - chat.sent_at > REPLY_TIMEOUT {
                chat.done = true;
                lost += 1;
                open -= 1;
            }
        }
    }
    let cpu = match (cpu_before, cpu_of_nodes()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let own = procfs::own_cpu_time() - own_before;
    // Chats still open at the hard deadline (or when the daemon died) lost their message.
    lost += state.iter().filter(|c| !c.done).count();
    let messages = chats * per_chat;
    let sent_total: usize = state.iter().map(|c| c.sent).sum();
    let doubled: usize = state
        .iter()
        .flat_map(|c| &c.replies)
        .filter(|&&r| r > 1)
        .count();
    if std::env::var_os("HERMES_BENCH_KEEP").is_some() {
        // Which ones, to look them up in the kept daemon log.
        for (c, chat) in state.iter().enumerate() {
            for (k, &r) in chat.replies.iter().enumerate().filter(|(_, r)| **r > 1) {
                let chat = first_chat + c as i64;
                eprintln!("bench: chat {chat} message {k} answered {r} times");
            }
        }
    }
    let seconds = (last_reply - start).as_secs_f64();
    let figures = json!({
        "chats": chats,
        "per_chat": per_chat,
        "messages": messages,
        "replied": answered,
        "lost": lost,
        "unsent": messages - sent_total,
        "doubled": doubled,
        "stray_replies": strays,
        "seconds": round3(seconds),
        "replies_per_s": round3(answered as f64 / seconds.max(1e-9)),
        "latency_ms": latency.json(),
        "daemon_cpu_ms": cpu.map(|c| round3(c.as_secs_f64() * 1000.0)),
        "cpu_ms_per_reply": cpu.map(|c| round3(c.as_secs_f64() * 1000.0 / answered.max(1) as f64)),
        "bench_cpu_ms": round3(own.as_secs_f64() * 1000.0),
    });
    for node in nodes {
        check_alive(node)?;
    }
    Ok(figures)
}

/// The database's size (its used pages once the WAL left by a clean stop is folded in, and
/// that WAL's own size) in a fresh home after `chatter` group messages not addressed to the bot, and in another after
/// `answered` direct messages each answered: what a busy group and a busy bot leave
/// behind before retention prunes anything.
pub async fn store_growth(
    binary: &std::path::Path,
    chatter: usize,
    answered: usize,
) -> Result<Value, String> {
    const GROUP: i64 = -5_000_000;
    const LAST_WORD: i64 = 4_000_000;
    const PEOPLE: usize = 100;
    let started = Instant::now();
    let chatter_bytes = {
        let (mut w, mut p) = fresh_daemon(binary).await?;
        for i in 0..chatter {
            let person = 3_000_000 + (i % 50) as i64;
            let text = format!(
                "message {i} in a busy channel: people talking, nothing here is meant for the bot"
            );
            w.telegram.group(GROUP, person, &text, false);
        }
        // Updates are recorded in order: a reply to one sent after them means all are in.
        w.telegram.dm(LAST_WORD, "last word");
        replies(&mut w, &p, LAST_WORD, 1, Duration::from_secs(600)).await?;
        stopped_size(&mut w, &mut p).await?
    };
    let answered_bytes = {
        let (mut w, mut p) = fresh_daemon(binary).await?;
        let rounds = answered.div_ceil(PEOPLE);
        for round in 0..rounds {
            let people = PEOPLE.min(answered - round * PEOPLE);
            for person in 0..people {
                let text =
                    format!("question {round} from person {person}: what should I cook tonight?");
                w.telegram.dm(6_000_000 + person as i64, &text);
            }
            replies(&mut w, &p, 0, people, REPLY_TIMEOUT * 4).await?;
        }
        stopped_size(&mut w, &mut p).await?
    };
    let kib = |bytes: u64| round3(bytes as f64 / 1024.0);
    Ok(json!({
        "chatter_messages": chatter,
        "after_chatter_kib": kib(chatter_bytes.bytes),
        "after_chatter_wal_kib": kib(chatter_bytes.wal_bytes),
        "after_chatter_rows": chatter_bytes.rows,
        "answered_messages": answered,
        "after_answered_kib": kib(answered_bytes.bytes),
        "after_answered_wal_kib": kib(answered_bytes.wal_bytes),
        "after_answered_rows": answered_bytes.rows,
        "seconds": round3(started.elapsed().as_secs_f64()),
    }))
}

/// A fresh daemon's resident memory once `conversations` people have each sent one message
/// and been answered (in waves of at most 1,000 at once), and it has then sat idle for
/// `idle`: what a bot with many occasional users holds between their messages.
pub async fn conversations(
    binary: &std::path::Path,
    conversations: usize,
    idle: Duration,
) -> Result<Value, String> {
    const FIRST_CHAT: i64 = 7_000_000;
    const WAVE: usize = 1_000;
    let (mut w, mut p) = fresh_daemon(binary).await?;
    let started = Instant::now();
    let result = async {
        let mut sent = 0;
        while sent < conversations {
            let wave = WAVE.min(conversations - sent);
            for i in 0..wave {
                let chat = FIRST_CHAT + (sent + i) as i64;
                w.telegram.dm(chat, &format!("hello from chat {chat}"));
            }
            replies(&mut w, &p, 0, wave, REPLY_TIMEOUT * 4).await?;
            sent += wave;
        }
        let answered_in = started.elapsed();
        let busy = procfs::memory(p.pid).unwrap_or_default();
        tokio::time::sleep(idle).await;
        check_alive(&p)?;
        let idle_memory = procfs::memory(p.pid).unwrap_or_default();
        Ok(json!({
            "conversations": conversations,
            "answered_in_s": round3(answered_in.as_secs_f64()),
            "rss_after_answers_mib": round3(procfs::mib(busy.rss_kib)),
            "idle_s": idle.as_secs(),
            "rss_idle_mib": round3(procfs::mib(idle_memory.rss_kib)),
            "anon_idle_mib": round3(procfs::mib(idle_memory.anon_kib)),
            "peak_rss_mib": round3(procfs::mib(idle_memory.hwm_kib)),
            "threads_idle": idle_memory.threads,
        }))
    }
    .await;
    let _ = p.terminate(Duration::from_secs(30)).await;
    w.remove();
    result
}

/// A new home and fakes with the daemon started and polling.
pub async fn fresh_daemon(binary: &std::path::Path) -> Result<(World, Process), String> {
    let w = World::new().await;
    let p = w.spawn(binary)?;
    w.first_poll_after(p.started, Duration::from_secs(10))
        .await
        .ok_or_else(|| format!("no getUpdates within 10 s; log:\n{}", p.log_tail(20)))?;
    Ok((w, p))
}

/// Wait for `count` replies (to `chat`, or to anyone when it is 0).
pub async fn replies(
    w: &mut World,
    p: &Process,
    chat: i64,
    count: usize,
    within: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + within;
    let mut seen = 0;
    while seen < count {
        check_alive(p)?;
        let sent = w
            .observer
            .next_sent(deadline)
            .await
            .ok_or_else(|| format!("{seen} of {count} replies within {within:?}"))?;
        if chat == 0 || sent.chat == chat {
            seen += 1;
        }
    }
    Ok(())
}

/// What a stopped daemon's database holds: its size once the WAL is folded in, the WAL
/// the daemon left on disk, and its rows per table.
struct Measured {
    bytes: u64,
    wal_bytes: u64,
    rows: Value,
}

/// Stop the daemon cleanly and measure its database; the home is removed.
async fn stopped_size(w: &mut World, p: &mut Process) -> Result<Measured, String> {
    p.terminate(Duration::from_secs(30)).await?;
    let path = w.home.dir.join("gateway.db");
    let wal_bytes = std::fs::metadata(w.home.dir.join("gateway.db-wal"))
        .map(|m| m.len())
        .unwrap_or(0);
    let measured = (|| -> rusqlite::Result<Measured> {
        let conn = rusqlite::Connection::open(&path)?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        let pragma = |name: &str| -> rusqlite::Result<u64> {
            conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0))
                .map(|v| v as u64)
        };
        let bytes = (pragma("page_count")? - pragma("freelist_count")?) * pragma("page_size")?;
        let mut rows = serde_json::Map::new();
        for table in ["inbox", "outbox", "messages", "sessions", "seen_events"] {
            let count: Option<i64> = conn
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .ok();
            if let Some(count) = count {
                rows.insert(table.to_owned(), json!(count));
            }
        }
        Ok(Measured {
            bytes,
            wal_bytes,
            rows: Value::Object(rows),
        })
    })()
    .map_err(|e| format!("reading {}: {e}", path.display()));
    w.remove();
    measured
}
