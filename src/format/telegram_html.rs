//! Markdown → Telegram HTML (`parse_mode=HTML`): bold, italic, strike, inline code, code
//! blocks with language, links, quotes; headings become bold lines and lists get bullets,
//! since Telegram has no tags for them. Everything else is escaped text.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use super::escape_html;

pub fn render(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len() + 64);
    // Ordered list counters (None = bullet list), innermost last.
    let mut lists: Vec<Option<u64>> = Vec::new();
    for event in Parser::new_ext(markdown, Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Paragraph => {}
                Tag::Heading { .. } => out.push_str("<b>"),
                Tag::BlockQuote(_) => out.push_str("<blockquote>"),
                Tag::CodeBlock(kind) => match kind {
                    CodeBlockKind::Fenced(lang) if !lang.trim().is_empty() => {
                        let lang = lang.split_whitespace().next().unwrap_or_default();
                        out.push_str(&format!(
                            "<pre><code class=\"language-{}\">",
                            escape_html(lang)
                        ));
                    }
                    _ => out.push_str("<pre><code>"),
                },
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
                Tag::Emphasis => out.push_str("<i>"),
                Tag::Strong => out.push_str("<b>"),
                Tag::Strikethrough => out.push_str("<s>"),
                Tag::Link { dest_url, .. } => {
                    out.push_str(&format!("<a href=\"{}\">", escape_html(&dest_url)));
                }
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph => out.push_str(if lists.is_empty() { "\n\n" } else { "\n" }),
                TagEnd::Heading(_) => out.push_str("</b>\n\n"),
                TagEnd::BlockQuote(_) => {
                    trim_trailing_newlines(&mut out);
                    out.push_str("</blockquote>\n\n");
                }
                TagEnd::CodeBlock => {
                    trim_trailing_newlines(&mut out);
                    out.push_str("</code></pre>\n\n");
                }
                TagEnd::List(_) => {
                    lists.pop();
                    if lists.is_empty() {
                        out.push('\n');
                    }
                }
                TagEnd::Item if !out.ends_with('\n') => out.push('\n'),
                TagEnd::Emphasis => out.push_str("</i>"),
                TagEnd::Strong => out.push_str("</b>"),
                TagEnd::Strikethrough => out.push_str("</s>"),
                TagEnd::Link => out.push_str("</a>"),
                _ => {}
            },
            Event::Text(text) => out.push_str(&escape_html(&text)),
            Event::Code(code) => out.push_str(&format!("<code>{}</code>", escape_html(&code))),
            Event::Html(html) | Event::InlineHtml(html) => out.push_str(&escape_html(&html)),
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => out.push_str("———\n\n"),
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
