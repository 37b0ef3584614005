//! Markdown → Telegram HTML (`parse_mode=HTML`): the [`Dialect`] the shared walker renders
//! with. Bold, italic, strike, inline code, code blocks with language, links, quotes;
//! everything else is escaped text.

use hermes_format::{Dialect, walk};

/// Telegram's HTML subset.
pub struct TelegramHtml;

/// Render Markdown as Telegram HTML.
pub fn render(markdown: &str) -> String {
    walk(markdown, &TelegramHtml)
}

impl Dialect for TelegramHtml {
    fn escape(&self, text: &str) -> String {
        escape_html(text)
    }
    fn bold(&self, open: bool) -> &'static str {
        if open { "<b>" } else { "</b>" }
    }
    fn italic(&self, open: bool) -> &'static str {
        if open { "<i>" } else { "</i>" }
    }
    fn strike(&self, open: bool) -> &'static str {
        if open { "<s>" } else { "</s>" }
    }
    fn code(&self, code: &str) -> String {
        format!("<code>{}</code>", escape_html(code))
    }
    fn code_block_open(&self, lang: Option<&str>) -> String {
        match lang.filter(|l| !l.trim().is_empty()) {
            Some(lang) => format!("<pre><code class=\"language-{}\">", escape_html(lang)),
            None => "<pre><code>".to_owned(),
        }
    }
    fn code_block_close(&self) -> &'static str {
        "</code></pre>"
    }
    fn link_open(&self, url: &str) -> String {
        format!("<a href=\"{}\">", escape_html(url))
    }
    fn link_close(&self, _url: &str) -> String {
        "</a>".to_owned()
    }
    fn quote(&self, open: bool) -> &'static str {
        if open {
            "<blockquote>"
        } else {
            "</blockquote>"
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_styles_map_to_telegram_tags() {
        assert_eq!(
            render("**bold** _it_ ~~gone~~ `a<b` [link](https://x.y/?a=1&b=2)"),
            "<b>bold</b> <i>it</i> <s>gone</s> <code>a&lt;b</code> <a href=\"https://x.y/?a=1&amp;b=2\">link</a>"
        );
    }

    #[test]
    fn code_blocks_keep_their_language_and_escape_html() {
        assert_eq!(
            render("```rust\nif a < b { x() }\n```"),
            "<pre><code class=\"language-rust\">if a &lt; b { x() }</code></pre>"
        );
    }

    #[test]
    fn headings_lists_and_quotes_become_readable_text() {
        let html = render("# Title\n\n- one\n- two\n\n1. first\n2. second\n\n> quoted\n\nend");
        assert_eq!(
            html,
            "<b>Title</b>\n\n• one\n• two\n\n1. first\n2. second\n\n<blockquote>quoted</blockquote>\n\nend"
        );
    }

    #[test]
    fn raw_html_from_the_model_is_escaped_not_interpreted() {
        assert_eq!(
            render("<script>x</script>"),
            "&lt;script&gt;x&lt;/script&gt;"
        );
    }
}
