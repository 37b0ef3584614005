//! Markdown → WhatsApp formatting: the [`Dialect`] the shared walker renders with.
//! `*bold*`, `_italic_`, `~strike~`, `` `code` ``, ```` ``` ```` blocks and `> ` quotes;
//! links as `text (url)`, since WhatsApp has no link markup (a bare URL stays as it is).
//! WhatsApp has no escapes either: literal text goes out as written.

use std::cell::RefCell;

use hermes_format::{Dialect, backticks, walk};

/// WhatsApp's formatting.
#[derive(Default)]
pub struct WhatsAppFormat {
    /// Link targets written so far, to fold `url (url)` back into `url`.
    links: RefCell<Vec<String>>,
}

/// Render the model's Markdown for WhatsApp.
pub fn render(markdown: &str) -> String {
    let dialect = WhatsAppFormat::default();
    let mut text = walk(markdown, &dialect);
    for url in dialect.links.take() {
        text = text.replace(&format!("{url} ({url})"), &url);
    }
    text
}

impl Dialect for WhatsAppFormat {
    fn escape(&self, text: &str) -> String {
        text.to_owned()
    }
    fn bold(&self, _open: bool) -> &'static str {
        "*"
    }
    fn italic(&self, _open: bool) -> &'static str {
        "_"
    }
    fn strike(&self, _open: bool) -> &'static str {
        "~"
    }
    fn code(&self, code: &str) -> String {
        backticks::code_span(code, str::to_owned)
    }
    fn code_block_open(&self, _lang: Option<&str>) -> String {
        backticks::FENCE_OPEN.to_owned()
    }
    fn code_block_close(&self) -> &'static str {
        backticks::FENCE_CLOSE
    }
    fn code_text(&self, code: &str) -> String {
        backticks::fenced_text(code)
    }
    fn link_open(&self, _url: &str) -> String {
        String::new()
    }
    fn link_close(&self, url: &str) -> String {
        self.links.borrow_mut().push(url.to_owned());
        format!(" ({url})")
    }
    fn quote(&self, open: bool) -> &'static str {
        if open { "> " } else { "" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_whatsapp_formatting() {
        assert_eq!(
            render("**bold** *it* ~~gone~~ `a<b` [docs](https://x.y/?a=1&b=2)"),
            "*bold* _it_ ~gone~ `a<b` docs (https://x.y/?a=1&b=2)"
        );
        assert_eq!(
            render("# Title\n\nsee <https://a.b/c>"),
            "*Title*\n\nsee https://a.b/c"
        );
        assert_eq!(render("```rust\nlet x = 1;\n```"), "```\nlet x = 1;\n```");
        assert_eq!(render("````\nx = ```\n````"), "```\nx = ``\u{200b}`\n```");
    }
}
