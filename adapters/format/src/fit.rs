//! Chunks that fit once rendered. A chunk measured as Markdown can grow when rendered
//! (`<` becomes `&lt;`, a link gains its target), so each rendered chunk is measured again
//! and a chunk that is too long is split once more with a smaller budget.

use std::collections::VecDeque;

use hermes_adapter::{LengthUnit, MessageBody};

use crate::chunk::chunk;

/// The smallest budget a chunk is split down to; below it the piece goes out as plain text.
const MIN_BUDGET: usize = 64;

/// Split `markdown` into message bodies rendered by `render`, each at most `max` long in
/// `unit` as rendered. The plain fallback of each body is its Markdown piece, which is
/// never longer than `max` either.
pub fn fit(
    markdown: &str,
    max: usize,
    unit: LengthUnit,
    render: impl Fn(&str) -> String,
) -> Vec<MessageBody> {
    let mut bodies = Vec::new();
    let mut queue: VecDeque<(String, usize)> = chunk(markdown, max, unit)
        .into_iter()
        .map(|piece| (piece, max))
        .collect();
    while let Some((piece, budget)) = queue.pop_front() {
        let rendered = render(&piece);
        let length = unit.measure(&rendered);
        if length <= max {
            bodies.push(MessageBody {
                markup: Some(rendered),
                plain: piece,
            });
            continue;
        }
        if budget <= MIN_BUDGET {
            // Even a small piece renders too long (a huge link target): send it plain.
            bodies.push(MessageBody::plain(piece));
            continue;
        }
        // Shrink in proportion to the overshoot, with some room to spare.
        let smaller = (budget * max / length)
            .saturating_sub(16)
            .clamp(MIN_BUDGET, budget - 1);
        for part in chunk(&piece, smaller, unit).into_iter().rev() {
            queue.push_front((part, smaller));
        }
    }
    bodies
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A renderer that blows `<` up sixfold, as HTML escaping does with `&lt;` and worse.
    fn inflating(md: &str) -> String {
        md.replace('<', "&lt;&lt;")
    }

    #[test]
    fn escapes_never_push_a_rendered_chunk_over_the_limit() {
        let text: String = (0..300).map(|i| format!("a<b<c<d {i}\n")).collect();
        let bodies = fit(&text, 500, LengthUnit::Utf16, inflating);
        assert!(bodies.len() > 2);
        for body in &bodies {
            let shown = body.markup.as_deref().unwrap_or(&body.plain);
            assert!(shown.encode_utf16().count() <= 500, "{shown}");
        }
        let lines: usize = bodies.iter().map(|b| b.plain.lines().count()).sum();
        assert_eq!(lines, 300, "nothing was lost");
    }

    #[test]
    fn a_short_text_is_one_body_with_its_markdown_as_fallback() {
        let bodies = fit("**hi**", 100, LengthUnit::Chars, |md| {
            format!("<b>{md}</b>")
        });
        assert_eq!(bodies.len(), 1);
        assert_eq!(bodies[0].plain, "**hi**");
    }

    #[test]
    fn a_piece_that_cannot_fit_rendered_goes_out_plain() {
        let bodies = fit("x", 10, LengthUnit::Chars, |_| "y".repeat(50));
        assert_eq!(bodies, vec![MessageBody::plain("x")]);
    }
}
