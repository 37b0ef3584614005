//! Splitting a long reply into messages under a length limit.

use hermes_adapter::LengthUnit;
use unicode_segmentation::UnicodeSegmentation;

/// Room kept in every chunk for closing a code fence.
const FENCE_ROOM: usize = 8;
/// The longest opening fence line (``` and its info string) repeated to reopen a block in
/// the next chunk; a longer one is reopened as a bare ``` (the info string names a language
/// for highlighting; one this long is not a language, and repeating it could overflow the
/// chunk).
const REOPEN_MAX: usize = 32;

/// Split `text` into pieces of at most `max` (in `unit`), preferring paragraph and line
/// breaks, then spaces. A chunk that ends inside a ``` fence closes it, and the next chunk
/// reopens it with the same info string, so every chunk renders on its own.
pub fn chunk(text: &str, max: usize, unit: LengthUnit) -> Vec<String> {
    let text = text.trim_end();
    if unit.measure(text) <= max {
        return vec![text.to_owned()];
    }
    let budget = max.saturating_sub(FENCE_ROOM).max(16);
    let mut chunks = Vec::new();
    let mut current = String::new();
    let mut open_fence: Option<String> = None;

    for line in text.split('\n') {
        let is_fence = line.trim_start().starts_with("```");
        for piece in split_long_line(
            line,
            budget.saturating_sub(fence_len(&open_fence, unit) + 1),
            unit,
        ) {
            let needed = unit.measure(&piece) + usize::from(!current.is_empty());
            if !current.is_empty() && unit.measure(&current) + needed > budget {
                flush(&mut chunks, &mut current, &open_fence);
                if let Some(fence) = &open_fence {
                    current.push_str(fence);
                }
            }
            if !current.is_empty() {
                current.push('\n');
            }
            current.push_str(&piece);
        }
        if is_fence {
            open_fence = match open_fence {
                Some(_) => None,
                None => Some(reopening(line.trim_start(), unit)),
            };
        }
    }
    if !current.trim().is_empty() {
        chunks.push(current.trim_end().to_owned());
    }
    chunks
}

/// How a block opened by `opening` is reopened at the top of the next chunk.
fn reopening(opening: &str, unit: LengthUnit) -> String {
    if unit.measure(opening) <= REOPEN_MAX {
        opening.to_owned()
    } else {
        "```".to_owned()
    }
}

fn fence_len(fence: &Option<String>, unit: LengthUnit) -> usize {
    fence.as_deref().map(|f| unit.measure(f)).unwrap_or(0)
}

fn flush(chunks: &mut Vec<String>, current: &mut String, open_fence: &Option<String>) {
    let mut done = std::mem::take(current).trim_end().to_owned();
    if open_fence.is_some() {
        done.push_str("\n```");
    }
    if !done.trim().is_empty() {
        chunks.push(done);
    }
}

/// Split one line into pieces of at most `max`, at spaces where possible, and never
/// inside a grapheme cluster (an emoji sequence, a letter and its accents) unless one
/// cluster alone is longer than `max`.
fn split_long_line(line: &str, max: usize, unit: LengthUnit) -> Vec<String> {
    let max = max.max(8);
    if unit.measure(line) <= max {
        return vec![line.to_owned()];
    }
    let mut pieces = Vec::new();
    let mut rest = line;
    while unit.measure(rest) > max {
        // The longest prefix of whole clusters that fits.
        let mut used = 0;
        let mut cut = 0;
        for (i, cluster) in rest.grapheme_indices(true) {
            let w = unit.measure(cluster);
            if used + w > max {
                break;
            }
            used += w;
            cut = i + cluster.len();
        }
        if cut == 0 {
            // One cluster longer than the limit: cut it between characters.
            for (i, c) in rest.char_indices() {
                let w = unit.of_char(c);
                if used + w > max {
                    break;
                }
                used += w;
                cut = i + c.len_utf8();
            }
        }
        // Back off to the last space in the second half of the window.
        if let Some(space) = rest[..cut].rfind(' ').filter(|&s| s > cut / 2) {
            cut = space + 1;
        }
        pieces.push(rest[..cut].trim_end().to_owned());
        rest = &rest[cut..];
    }
    if !rest.is_empty() {
        pieces.push(rest.to_owned());
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balanced(chunk: &str) -> bool {
        chunk
            .lines()
            .filter(|l| l.trim_start().starts_with("```"))
            .count()
            % 2
            == 0
    }

    #[test]
    fn a_short_reply_is_one_chunk() {
        assert_eq!(chunk("hello\n", 4096, LengthUnit::Utf16), vec!["hello"]);
    }

    #[test]
    fn long_replies_split_under_the_limit_at_line_breaks() {
        let text: String = (0..400)
            .map(|i| format!("line number {i} of the answer\n"))
            .collect();
        let chunks = chunk(&text, 1000, LengthUnit::Chars);
        assert!(chunks.len() > 5);
        for c in &chunks {
            assert!(c.chars().count() <= 1000);
            assert!(c.starts_with("line number"), "{c:?}");
        }
        let joined: String = chunks.join("\n");
        assert_eq!(joined.lines().count(), 400);
    }

    #[test]
    fn code_blocks_are_closed_and_reopened_across_chunks() {
        let code: String = (0..200).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("Here:\n```rust\n{code}```\nDone.");
        let chunks = chunk(&text, 600, LengthUnit::Utf16);
        assert!(chunks.len() > 3);
        for (i, c) in chunks.iter().enumerate() {
            assert!(c.encode_utf16().count() <= 600, "chunk {i} too long");
            assert!(balanced(c), "chunk {i} has an unclosed fence: {c}");
        }
        assert!(chunks[1].starts_with("```rust"));
        assert!(chunks.last().unwrap().ends_with("Done."));
    }

    /// Found by fuzzing (`fuzz/regressions/markdown`): a fence line longer than the limit
    /// was repeated at the top of every chunk, which then overflowed.
    #[test]
    fn a_fence_line_longer_than_the_limit_is_reopened_bare() {
        let text = format!(
            "```{}\n{}\n```",
            "x".repeat(4800),
            "code line\n".repeat(300)
        );
        let chunks = chunk(&text, 2000, LengthUnit::Chars);
        for (i, c) in chunks.iter().enumerate() {
            assert!(
                c.chars().count() <= 2000,
                "chunk {i} has {} chars",
                c.chars().count()
            );
        }
        assert!(chunks[1..].iter().any(|c| c.starts_with("```\ncode line")));
    }

    #[test]
    fn one_huge_line_is_cut_by_utf16_units() {
        let text = "😀".repeat(5000);
        let chunks = chunk(&text, 4096, LengthUnit::Utf16);
        assert!(chunks.len() >= 3);
        for c in &chunks {
            assert!(c.encode_utf16().count() <= 4096);
        }
        assert_eq!(chunks.concat().chars().count(), 5000);
    }
}
