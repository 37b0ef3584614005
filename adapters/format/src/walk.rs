//! The Markdown walker: pulldown-cmark events → a platform's markup through a [`Dialect`].
//! Headings become bold lines, lists get bullets or numbers, and raw HTML from the model is
//! escaped text, on every platform.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// The markup a platform understands. Every method returns what to write; the walker
/// handles structure.
pub trait Dialect {
    /// Text as it must appear literally (escape the platform's special characters).
    fn escape(&self, text: &str) -> String;
    /// Open (`true`) or close a bold span.
    fn bold(&self, open: bool) -> &'static str;
    fn italic(&self, open: bool) -> &'static str;
    fn strike(&self, open: bool) -> &'static str;
    /// An inline code span.
    fn code(&self, code: &str) -> String;
    /// Open a code block with its language, if any.
    fn code_block_open(&self, lang: Option<&str>) -> String;
    fn code_block_close(&self) -> &'static str;
    /// Code inside a block (often escaped differently from text).
    fn code_text(&self, code: &str) -> String {
        self.escape(code)
    }
    /// Open a link to `url`.
    fn link_open(&self, url: &str) -> String;
    /// Close a link to `url`.
    fn link_close(&self, url: &str) -> String;
    fn quote(&self, open: bool) -> &'static str;
    /// A horizontal rule.
    fn rule(&self) -> &'static str {
        "———"
    }
}

/// Render `markdown` in `dialect`.
pub fn walk(markdown: &str, dialect: &impl Dialect) -> String {
    let mut out = String::with_capacity(markdown.len() + 64);
    // Ordered list counters (None = bullet list), innermost last.
    let mut lists: Vec<Option<u64>> = Vec::new();
    // Link targets being written, innermost last.
    let mut links: Vec<String> = Vec::new();
    let mut in_code_block = false;
    for event in Parser::new_ext(markdown, Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Heading { .. } => out.push_str(dialect.bold(true)),
                Tag::BlockQuote(_) => out.push_str(dialect.quote(true)),
                Tag::CodeBlock(kind) => {
                    in_code_block = true;
                    let lang = match &kind {
                        CodeBlockKind::Fenced(lang) => lang.split_whitespace().next(),
                        CodeBlockKind::Indented => None,
                    };
                    out.push_str(&dialect.code_block_open(lang));
                }
                Tag::List(start) => {
                    if !lists.is_empty() && !out.ends_with('\n') {
                        out.push('\n');
                    }
                    lists.push(start);
                }
                Tag::Item => {
                    let depth = lists.len().saturating_sub(1);
                    out.push_str(&"  ".repeat(depth));
                    match lists.last_mut() {
                        Some(Some(n)) => {
                            out.push_str(&format!("{n}. "));
                            *n += 1;
                        }
                        _ => out.push_str("• "),
                    }
                }
                Tag::Emphasis => out.push_str(dialect.italic(true)),
                Tag::Strong => out.push_str(dialect.bold(true)),
                Tag::Strikethrough => out.push_str(dialect.strike(true)),
                Tag::Link { dest_url, .. } => {
                    out.push_str(&dialect.link_open(&dest_url));
                    links.push(dest_url.into_string());
                }
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph => out.push_str(if lists.is_empty() { "\n\n" } else { "\n" }),
                TagEnd::Heading(_) => {
                    out.push_str(dialect.bold(false));
                    out.push_str("\n\n");
                }
                TagEnd::BlockQuote(_) => {
                    trim_trailing_newlines(&mut out);
                    out.push_str(dialect.quote(false));
                    out.push_str("\n\n");
                }
                TagEnd::CodeBlock => {
                    in_code_block = false;
                    trim_trailing_newlines(&mut out);
                    out.push_str(dialect.code_block_close());
                    out.push_str("\n\n");
                }
                TagEnd::List(_) => {
                    lists.pop();
                    if lists.is_empty() {
                        out.push('\n');
                    }
                }
                TagEnd::Item if !out.ends_with('\n') => out.push('\n'),
                TagEnd::Emphasis => out.push_str(dialect.italic(false)),
                TagEnd::Strong => out.push_str(dialect.bold(false)),
                TagEnd::Strikethrough => out.push_str(dialect.strike(false)),
                TagEnd::Link => {
                    let url = links.pop().unwrap_or_default();
                    out.push_str(&dialect.link_close(&url));
                }
                _ => {}
            },
            Event::Text(text) if in_code_block => out.push_str(&dialect.code_text(&text)),
            Event::Text(text) => out.push_str(&dialect.escape(&text)),
            Event::Code(code) => out.push_str(&dialect.code(&code)),
            Event::Html(html) | Event::InlineHtml(html) => out.push_str(&dialect.escape(&html)),
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => {
                out.push_str(dialect.rule());
                out.push_str("\n\n");
            }
            _ => {}
        }
    }
    out.trim_end().to_owned()
}

fn trim_trailing_newlines(out: &mut String) {
    while out.ends_with('\n') {
        out.pop();
    }
}
