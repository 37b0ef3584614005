//! The `search` phase: `session_search` over a person's 100,000-message history. A fresh
//! daemon answers one message so the person has a real session row, then stops; the bench
//! writes the history straight into its database (ended sessions of 100 messages each, words
//! drawn from a Zipf-like vocabulary with a few planted at known rates, the FTS index kept by
//! the schema's own triggers); the daemon starts again and the fake model calls
//! `session_search` with queries of known selectivity. What is timed is the tool step seen
//! from outside: the end of the stream that asked for the search → the arrival of the request
//! that carries its result. A query for a word that appears nowhere is the floor (the
//! agent's own work around any tool); the result of every call is checked, so a search that
//! finds nothing where it should is an error, not a fast figure.

use std::time::{Duration, Instant};

use hermes_testkit::llm::Reply;
use rusqlite::params;
use serde_json::{Value, json};

use crate::phases::{REPLY_TIMEOUT, check_alive, fresh_daemon, replies};
use crate::stats::{Samples, round3};
use crate::world::{Process, World};

const PERSON: i64 = 8_000_000;
/// Messages per stored session.
const PER_SESSION: usize = 100;

/// A planted word and the share of messages that carry it.
struct Planted {
    word: &'static str,
    /// One message in `every` carries it.
    every: usize,
}

const RARE: Planted = Planted {
    word: "zebracorn",
    every: 10_000,
};
const MEDIUM: Planted = Planted {
    word: "budget",
    every: 100,
};
const COMMON: Planted = Planted {
    word: "tonight",
    every: 5,
};

/// The queries timed, by name: what the model asks and whether it must find something.
const QUERIES: [(&str, &str, bool); 5] = [
    ("no_match", "quetzalcoatlus", false),
    ("rare", "zebracorn", true),
    ("medium", "budget", true),
    ("common", "tonight", true),
    ("two_words", "budget tonight", true),
];

pub async fn session_search(
    binary: &std::path::Path,
    messages: usize,
    samples: usize,
) -> Result<Value, String> {
    let (mut w, mut p) = fresh_daemon(binary).await?;
    let result = async {
        w.llm.push(Reply::text("hello"));
        w.telegram.dm(PERSON, "hello");
        replies(&mut w, &p, PERSON, 1, REPLY_TIMEOUT).await?;
        p.terminate(Duration::from_secs(30)).await?;

        let path = w.home.dir.join("gateway.db");
        let written = Instant::now();
        let db = write_history(&path, messages).map_err(|e| format!("writing history: {e}"))?;
        let write_s = written.elapsed().as_secs_f64();

        p = w.spawn(binary)?;
        w.first_poll_after(p.started, Duration::from_secs(10))
            .await
            .ok_or_else(|| format!("no getUpdates after restart; log:\n{}", p.log_tail(20)))?;

        let mut figures = serde_json::Map::new();
        for (name, query, must_find) in QUERIES {
            let steps = search_steps(&mut w, &p, query, must_find, samples).await?;
            figures.insert(name.to_owned(), steps);
        }
        Ok(json!({
            "messages": messages,
            "sessions": messages.div_ceil(PER_SESSION),
            "write_history_s": round3(write_s),
            "database_mib": round3(db as f64 / (1024.0 * 1024.0)),
            "samples": samples,
            "planted_every": {
                "rare": RARE.every, "medium": MEDIUM.every, "common": COMMON.every,
            },
            "tool_step_ms": Value::Object(figures),
        }))
    }
    .await;
    let _ = p.terminate(Duration::from_secs(30)).await;
    w.remove();
    result
}

/// `samples` turns whose model calls `session_search {query}`, each timed from the end of
/// the stream that asked to the request that carries the answer.
async fn search_steps(
    w: &mut World,
    p: &Process,
    query: &str,
    must_find: bool,
    samples: usize,
) -> Result<Value, String> {
    let mut step = Samples::default();
    for i in 0..samples {
        check_alive(p)?;
        let answer = format!("searched {query} {i}");
        w.llm.push(Reply::ToolCall {
            name: "session_search".into(),
            arguments: json!({ "query": query }),
        });
        w.llm.push(Reply::text(answer.clone()));
        let before = w.llm.timings().len();
        w.telegram
            .dm(PERSON, &format!("what did we say about {query}? ({i})"));
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            let sent = w.observer.next_sent(deadline).await.ok_or_else(|| {
                format!("no reply to search {query:?} {i} within {REPLY_TIMEOUT:?}")
            })?;
            if sent.chat == PERSON && sent.text == answer {
                break;
            }
        }
        let timings = w.llm.timings();
        let [first, second] = &timings[before..] else {
            return Err(format!(
                "search {query:?} {i} made {} LLM requests, expected 2",
                timings.len() - before
            ));
        };
        let first_end = first
            .finished
            .ok_or("the tool call stream never finished")?;
        step.push(second.arrived.saturating_duration_since(first_end));
        let requests = w.llm.requests();
        let result = tool_result(&requests[before + 1]);
        let found = !result.starts_with("No earlier conversation");
        if found != must_find || result.starts_with("error") {
            return Err(format!("search {query:?} answered: {result}"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(step.json())
}

/// The text of the last `tool` message of a chat completions request.
fn tool_result(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

/// Ended sessions of the person, `messages` messages in all, written the way the daemon
/// stores them (its schema's triggers index them); the database's size in bytes after.
fn write_history(path: &std::path::Path, messages: usize) -> rusqlite::Result<u64> {
    let mut conn = rusqlite::Connection::open(path)?;
    let tx = conn.transaction()?;
    let (key, platform, chat_id, kind, user_id, account, started): (
        String,
        String,
        String,
        String,
        Option<String>,
        Option<String>,
        i64,
    ) = tx.query_row(
        "SELECT session_key, platform, chat_id, chat_kind, user_id, account, started_at
         FROM sessions WHERE chat_id = ?1",
        [PERSON.to_string()],
        |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        },
    )?;
    let sessions = messages.div_ceil(PER_SESSION);
    let mut words = Words::new(0x9e37_79b9_7f4a_7c15);
    {
        let mut session = tx.prepare(
            "INSERT INTO sessions (id, session_key, platform, chat_id, chat_kind, user_id,
                 account, started_at, updated_at, ended_at, end_reason, message_count, title)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, 'reset', ?10, ?11)",
        )?;
        let mut message = tx.prepare(
            "INSERT INTO messages (session_id, role, content, created_at)
             VALUES (?1, ?2, ?3, ?4)",
        )?;
        let mut n = 0;
        for s in 0..sessions {
            let id = format!("bench-history-{s:05}");
            let count = PER_SESSION.min(messages - n);
            // A day apart, the newest ending before the real session began.
            let began = started - ((sessions - s) as i64) * 86_400_000;
            session.execute(params![
                id,
                key,
                platform,
                chat_id,
                kind,
                user_id,
                account,
                began,
                began + 3_600_000,
                count as i64,
                format!("Talk {s}"),
            ])?;
            for m in 0..count {
                let role = if m % 2 == 0 { "user" } else { "assistant" };
                let text = words.message(n);
                message.execute(params![id, role, text, began + (m as i64) * 1_000])?;
                n += 1;
            }
        }
    }
    tx.commit()?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    let page = |name: &str| conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0));
    Ok((page("page_count")? * page("page_size")?) as u64)
}

/// Message texts: 12–40 words from a 5,000-word made-up vocabulary, the low ranks far more
/// often (about Zipf), and the planted words at their rates (by message number, so their
/// counts are exact).
struct Words {
    state: u64,
    vocabulary: Vec<String>,
}

impl Words {
    fn new(seed: u64) -> Words {
        const SYLLABLES: [&str; 16] = [
            "ka", "lo", "mi", "ren", "sa", "to", "vu", "qen", "dar", "il", "po", "nu", "bre",
            "sho", "ti", "gal",
        ];
        let vocabulary = (0..5_000usize)
            .map(|i| {
                let mut w = String::new();
                let mut x = i + 17;
                while x > 0 {
                    w.push_str(SYLLABLES[x % 16]);
                    x /= 16;
                }
                w
            })
            .collect();
        Words {
            state: seed,
            vocabulary,
        }
    }

    fn next(&mut self) -> u64 {
        // xorshift64*
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn message(&mut self, n: usize) -> String {
        let len = 12 + (self.next() % 29) as usize;
        let mut text = String::new();
        for i in 0..len {
            // rank = 5000^u for u uniform in [0,1): roughly Zipf over the vocabulary.
            let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
            let rank = (5_000f64.powf(u) as usize).saturating_sub(1).min(4_999);
            if i > 0 {
                text.push(' ');
            }
            text.push_str(&self.vocabulary[rank]);
        }
        for planted in [RARE, MEDIUM, COMMON] {
            // Message 7 and every `every`-th after: each rarer word's messages carry the
            // commoner ones too, so two words match together.
            if n % planted.every == 7 % planted.every {
                text.push(' ');
                text.push_str(planted.word);
            }
        }
        text
    }
}
