//! What of a conversation fits the model's context: the turn's own messages first (the
//! oldest tool results of a turn that outgrew the context cut to their head and tail), then
//! the newest history that fits in what they leave. Sizes are estimated (a token is about
//! four bytes of text).

use crate::store::StoredMessage;

/// Bytes kept from each end of a tool result that is cut.
const KEEP_EACH_END: usize = 1_000;

/// Rough token count of a text.
pub(super) fn estimate_tokens(text: &str) -> usize {
    text.len() / 4 + 4
}

/// The bytes of text that `tokens` tokens hold, by the same estimate.
pub(super) fn bytes_for(tokens: usize) -> usize {
    tokens.saturating_mul(4)
}

/// A message's rough token count (its text and its tool calls).
pub(super) fn cost(m: &StoredMessage) -> usize {
    estimate_tokens(m.content.as_deref().unwrap_or(""))
        + m.tool_calls.as_deref().map_or(0, estimate_tokens)
}

/// The newest history that fits in `budget` tokens, never starting inside a tool exchange.
/// A compression summary among what is cut is kept in front when it fits: it stands for
/// everything before it.
pub(super) fn trim_history(history: &[StoredMessage], budget: usize) -> Vec<&StoredMessage> {
    let mut used = 0;
    let mut start = history.len();
    for (i, m) in history.iter().enumerate().rev() {
        let cost = cost(m);
        if used + cost > budget {
            break;
        }
        used += cost;
        start = i;
    }
    // A tool result without its call (or the assistant message of a cut exchange) would be
    // refused by the API: start at a user message.
    while start < history.len() && history[start].role != "user" {
        used -= cost(&history[start]);
        start += 1;
    }
    let summary = history[..start].iter().rev().find(|m| {
        m.role == "user"
            && m.content
                .as_deref()
                .is_some_and(|c| c.starts_with(crate::store::SUMMARY_OPENING))
    });
    let mut kept = Vec::with_capacity(history.len() - start + 1);
    if let Some(summary) = summary.filter(|s| used + cost(s) <= budget) {
        kept.push(summary);
    }
    kept.extend(&history[start..]);
    kept
}

/// Make a turn's messages fit in `budget` tokens by cutting its oldest tool results to
/// their head and tail (what the model saw last stays whole as long as possible); returns
/// what they cost after. A turn that still does not fit is left to the provider to refuse.
pub(super) fn fit_tool_results(messages: &mut [StoredMessage], budget: usize) -> usize {
    let mut used: usize = messages.iter().map(cost).sum();
    for m in messages.iter_mut() {
        if used <= budget {
            break;
        }
        if m.role != "tool" {
            continue;
        }
        let Some(cut) = m.content.as_deref().and_then(cut_middle) else {
            continue;
        };
        let before = cost(m);
        m.content = Some(cut);
        used = used - before + cost(m);
    }
    used
}

/// A long text as its head and tail with a note of what was cut; `None` when short.
fn cut_middle(text: &str) -> Option<String> {
    if text.len() <= 3 * KEEP_EACH_END || text.contains(CUT_NOTE) {
        return None;
    }
    let head_end = text.floor_char_boundary(KEEP_EACH_END);
    let tail_start = text.ceil_char_boundary(text.len() - KEEP_EACH_END);
    let cut = tail_start - head_end;
    Some(format!(
        "{}\n[… {cut} bytes {CUT_NOTE} …]\n{}",
        &text[..head_end],
        &text[tail_start..]
    ))
}

const CUT_NOTE: &str = "cut: this turn's tool output outgrew the model's context";

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(content: String) -> StoredMessage {
        StoredMessage {
            role: "tool".into(),
            content: Some(content),
            tool_calls: None,
            tool_call_id: Some("c".into()),
            tool_name: None,
        }
    }

    #[test]
    fn trimming_keeps_the_newest_and_starts_at_a_user_message() {
        let mut h = Vec::new();
        for i in 0..50 {
            h.push(StoredMessage::user(format!(
                "question {i} {}",
                "x".repeat(400)
            )));
            h.push(tool("r".repeat(400)));
        }
        let kept = trim_history(&h, 1000);
        assert!(!kept.is_empty() && kept.len() < h.len());
        assert_eq!(kept[0].role, "user");
        assert!(
            kept.last()
                .unwrap()
                .content
                .as_deref()
                .unwrap()
                .starts_with("rrr")
        );
    }

    #[test]
    fn a_summary_cut_off_by_the_budget_is_kept_in_front() {
        let mut h = vec![
            StoredMessage::user("first"),
            StoredMessage::user(format!(
                "{} (9 messages)] short",
                crate::store::SUMMARY_OPENING
            )),
        ];
        for i in 0..20 {
            h.push(StoredMessage::user(format!("q{i} {}", "x".repeat(400))));
            h.push(StoredMessage::assistant("y".repeat(400)));
        }
        let kept = trim_history(&h, 1_000);
        assert!(
            kept[0]
                .content
                .as_deref()
                .unwrap()
                .starts_with(crate::store::SUMMARY_OPENING)
        );
        assert!(kept[1].content.as_deref().unwrap().starts_with('q'));
        let total: usize = kept.iter().copied().map(cost).sum();
        assert!(total <= 1_000, "{total}");
    }

    #[test]
    fn a_turn_that_outgrew_the_context_loses_the_middle_of_its_oldest_tool_results() {
        let mut turn = vec![
            StoredMessage::user("build it"),
            tool(format!("first{}", "é".repeat(20_000))),
            tool(format!("second{}", "b".repeat(40_000))),
            tool(format!("third{}", "c".repeat(40_000))),
        ];
        let used = fit_tool_results(&mut turn, 15_000);
        assert!(used <= 15_000, "{used}");
        let texts: Vec<&str> = turn.iter().map(|m| m.content.as_deref().unwrap()).collect();
        assert!(texts[1].starts_with("first") && texts[1].contains(CUT_NOTE));
        assert!(texts[1].len() < 2 * KEEP_EACH_END + 200);
        assert!(texts[2].starts_with("second") && texts[2].contains(CUT_NOTE));
        assert!(!texts[3].contains(CUT_NOTE), "the newest stays whole");
        assert_eq!(texts[0], "build it");

        // Already fitting: nothing changes.
        let before: Vec<_> = turn.iter().map(|m| m.content.clone()).collect();
        fit_tool_results(&mut turn, 1_000_000);
        let after: Vec<_> = turn.iter().map(|m| m.content.clone()).collect();
        assert_eq!(before, after);
    }
}
