//! Turning the model's Markdown into what a platform shows: [`chunk`] splits a reply under the
//! platform's length limit (counted in the platform's unit, code fences closed and reopened
//! across chunks), and [`render`] converts each chunk to the platform's markup with the
//! Markdown source kept as the plain-text fallback.

mod chunk;
mod telegram_html;

pub use chunk::chunk;

use hermes_adapter::{MarkupDialect, MessageBody};

/// Render one chunk of Markdown for a platform.
pub fn render(markdown: &str, dialect: MarkupDialect) -> MessageBody {
    match dialect {
        MarkupDialect::TelegramHtml => MessageBody {
            markup: Some(telegram_html::render(markdown)),
            plain: markdown.to_owned(),
        },
        // Discord renders CommonMark itself; the others get their renderers with their
        // adapters. Until then they receive the source as plain text.
        MarkupDialect::DiscordMarkdown => MessageBody {
            markup: Some(markdown.to_owned()),
            plain: markdown.to_owned(),
        },
        MarkupDialect::SlackMrkdwn | MarkupDialect::WhatsApp | MarkupDialect::Plain => {
            MessageBody::plain(markdown)
        }
    }
}

/// Escape text for Telegram HTML (`&`, `<`, `>`; `"` too, for attribute values).
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}
