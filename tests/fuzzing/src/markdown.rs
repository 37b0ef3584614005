//! `markdown`: the bytes (as UTF-8, lossily) as a reply of the model, through each
//! platform's render path (`hermes_format::fit` with the platform's renderer, limit and
//! unit) and through `hermes_format::chunk`, each at the platform's limit and at a small
//! one that makes short inputs split. The properties are those of
//! `adapters/format/tests/chunk_properties.rs`, for any text: every piece fits its limit in
//! its unit (markup and plain fallback alike), a reply with something to say is never
//! dropped, and, where no code fence can be opened or reopened, no word is lost or added.

use hermes_adapter::{LengthUnit, MessageBody};
use hermes_format::{chunk, fit};

/// A platform's sender: its name, renderer, limit and unit.
type Sender = (&'static str, fn(&str) -> String, usize, LengthUnit);

const SENDERS: [Sender; 4] = [
    (
        "telegram",
        hermes_telegram::render_html,
        4096,
        LengthUnit::Utf16,
    ),
    (
        "discord",
        hermes_discord::render_markdown,
        hermes_discord::MAX_MESSAGE_LEN,
        LengthUnit::Chars,
    ),
    (
        "slack",
        hermes_slack::render_mrkdwn,
        hermes_slack::MAX_MESSAGE_LEN,
        LengthUnit::Chars,
    ),
    (
        "whatsapp",
        hermes_whatsapp::render_whatsapp,
        hermes_whatsapp::MAX_MESSAGE_LEN,
        LengthUnit::Chars,
    ),
];

const UNITS: [LengthUnit; 3] = [LengthUnit::Chars, LengthUnit::Utf16, LengthUnit::Bytes];

/// What a text says, without the white space and fence lines chunking may add or move.
fn words(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("```"))
        .flat_map(str::split_whitespace)
        .collect()
}

/// Whether words can be compared: with no ``` anywhere, chunking opens no fence, and a
/// piece of a long line cannot start with one.
fn comparable(text: &str) -> bool {
    !text.contains("```")
}

/// How many message bodies the bytes made.
pub fn run(data: &[u8]) -> usize {
    let text = String::from_utf8_lossy(data);
    // A small limit too, so that short inputs split and re-split (at least the 64 that
    // `fit` splits down to).
    let small = 64 + data.len() % 449;
    let mut made = 0;
    for (platform, render, limit, unit) in SENDERS {
        for max in [limit, small] {
            let bodies = fit(&text, max, unit, render);
            check_bodies(platform, &text, &bodies, max, unit);
            made += bodies.len();
        }
    }
    for unit in UNITS {
        check_chunks(&text, &chunk(&text, small, unit), small, unit);
    }
    made
}

fn check_bodies(platform: &str, text: &str, bodies: &[MessageBody], max: usize, unit: LengthUnit) {
    for body in bodies {
        let plain = unit.measure(&body.plain);
        assert!(
            plain <= max,
            "{platform}: a plain fallback of {plain} > {max} {unit:?}: {:?}",
            body.plain
        );
        if let Some(markup) = &body.markup {
            let shown = unit.measure(markup);
            assert!(
                shown <= max,
                "{platform}: a rendered message of {shown} > {max} {unit:?}: {markup:?}"
            );
        }
    }
    if !text.trim().is_empty() {
        assert!(!bodies.is_empty(), "{platform}: the reply was dropped");
    }
    if comparable(text) {
        let said: String = bodies.iter().map(|b| words(&b.plain)).collect();
        assert_eq!(
            words(text),
            said,
            "{platform}: words were lost or added at {max} {unit:?}"
        );
    }
}

fn check_chunks(text: &str, chunks: &[String], max: usize, unit: LengthUnit) {
    for piece in chunks {
        let length = unit.measure(piece);
        assert!(
            length <= max,
            "a chunk of {length} > {max} {unit:?}: {piece:?}"
        );
        assert!(
            !piece.trim().is_empty() || text.trim().is_empty(),
            "an empty chunk"
        );
    }
    if text.trim().is_empty() {
        assert!(chunks.len() <= 1, "a blank text in pieces: {chunks:?}");
    } else {
        assert!(!chunks.is_empty(), "the text was dropped");
    }
    if comparable(text) {
        let said: String = chunks.iter().map(|c| words(c)).collect();
        assert_eq!(
            words(text),
            said,
            "words were lost or added at {max} {unit:?}"
        );
    }
}
