//! Markdown → Discord's own Markdown: the [`Dialect`] the shared walker renders with. Discord
//! reads Markdown already, so the work is escaping: text from the model that Discord would
//! turn into formatting (`*`, `_`, `~`, `` ` ``, `|` spoilers, `>` quotes, `#` headings,
//! `[…](…)` links) is backslash-escaped, and a code block cannot be closed early by the
//! code inside it.

use hermes_format::{Dialect, walk};

/// Discord's Markdown.
pub struct DiscordMarkdown;

/// Render the model's Markdown for Discord.
pub fn render(markdown: &str) -> String {
    walk(markdown, &DiscordMarkdown)
}

impl Dialect for DiscordMarkdown {
    fn escape(&self, text: &str) -> String {
        escape(text)
    }
    fn bold(&self, _open: bool) -> &'static str {
        "**"
    }
    fn italic(&self, _open: bool) -> &'static str {
        "*"
    }
    fn strike(&self, _open: bool) -> &'static str {
        "~~"
    }
    fn code(&self, code: &str) -> String {
        // A span holding backticks needs a longer fence, padded so a leading or trailing
        // backtick is not read as part of it.
        let code = code.replace('\n', " ");
        if code.contains('`') {
            format!("`` {} ``", code.replace("``", "`\u{200b}`"))
        } else if code.is_empty() {
            String::new()
        } else {
            format!("`{code}`")
        }
    }
    fn code_block_open(&self, lang: Option<&str>) -> String {
        let lang: String = lang
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_' | '#'))
            .take(20)
            .collect();
        format!("```{lang}\n")
    }
    fn code_block_close(&self) -> &'static str {
        "\n```"
    }
    fn code_text(&self, code: &str) -> String {
        // Three backticks in a row (in any longer run too) would end the block; a zero-width
        // space after every second one keeps them apart.
        let mut out = String::with_capacity(code.len());
        let mut run = 0;
        for c in code.chars() {
            if c == '`' {
                run += 1;
                if run == 3 {
                    out.push('\u{200b}');
                    run = 1;
                }
            } else {
                run = 0;
            }
            out.push(c);
        }
        out
    }
    fn link_open(&self, _url: &str) -> String {
        "[".to_owned()
    }
    fn link_close(&self, url: &str) -> String {
        let url: String = url
            .chars()
            .map(|c| match c {
                ')' => "%29".to_owned(),
                ' ' => "%20".to_owned(),
                c => c.to_string(),
            })
            .collect();
        format!("]({url})")
    }
    fn quote(&self, open: bool) -> &'static str {
        if open { "> " } else { "" }
    }
}

/// Text as Discord shows it literally.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if matches!(
            c,
            '\\' | '*' | '_' | '~' | '`' | '|' | '>' | '#' | '[' | ']'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_stay_markdown_and_literal_markers_are_escaped() {
        assert_eq!(
            render("**bold** *it* ~~gone~~ `a*b` [link](https://x.y/a_(b))"),
            "**bold** *it* ~~gone~~ `a*b` [link](https://x.y/a_(b%29)"
        );
        assert_eq!(
            render(r"2 \* 3 = 6, snake\_case, a \| b"),
            r"2 \* 3 = 6, snake\_case, a \| b"
        );
        assert_eq!(render("||spoiler||"), r"\|\|spoiler\|\|");
    }

    #[test]
    fn code_cannot_close_its_block_early() {
        let rendered = render("````\nx = ```\n````");
        assert_eq!(rendered, "```\nx = ``\u{200b}`\n```");
        assert_eq!(render("`` a`b ``"), "`` a`b ``");
        let long_run = render("~~~\nx = ``````\n~~~");
        assert!(
            !long_run
                .trim_start_matches("```\n")
                .trim_end_matches("\n```")
                .contains("```"),
            "{long_run:?}"
        );
    }

    #[test]
    fn headings_lists_and_quotes_become_readable_text() {
        assert_eq!(
            render("# Title\n\n- one\n- two\n\n> quoted\n\nend"),
            "**Title**\n\n• one\n• two\n\n> quoted\n\nend"
        );
    }

    #[test]
    fn mentions_in_text_are_left_to_allowed_mentions() {
        // The text keeps what the model wrote; pings are stopped by `allowed_mentions`.
        assert_eq!(render("hi @everyone"), "hi @everyone");
    }
}
