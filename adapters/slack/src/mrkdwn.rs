//! Markdown → Slack mrkdwn: the [`Dialect`] the shared walker renders with. `*bold*`,
//! `_italic_`, `~strike~`, `` `code` ``, fenced blocks, `<url|text>` links, `>` quotes; `&`,
//! `<` and `>` escaped as Slack wants (so the model's text can never form a link, a
//! `<!channel>` ping or a user mention).

use hermes_format::{Dialect, backticks, walk};

/// Slack's mrkdwn.
pub struct SlackMrkdwn;

/// Render the model's Markdown as mrkdwn.
pub fn render(markdown: &str) -> String {
    walk(markdown, &SlackMrkdwn)
}

impl Dialect for SlackMrkdwn {
    fn escape(&self, text: &str) -> String {
        escape(text)
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
        backticks::code_span(code, escape)
    }
    fn code_block_open(&self, _lang: Option<&str>) -> String {
        // Slack shows no language; the fence alone.
        backticks::FENCE_OPEN.to_owned()
    }
    fn code_block_close(&self) -> &'static str {
        backticks::FENCE_CLOSE
    }
    fn code_text(&self, code: &str) -> String {
        backticks::fenced_text(&escape(code))
    }
    fn link_open(&self, url: &str) -> String {
        if is_web_link(url) {
            format!("<{}|", escape(url).replace('|', "%7C"))
        } else {
            String::new()
        }
    }
    fn link_close(&self, url: &str) -> String {
        if is_web_link(url) {
            ">".to_owned()
        } else {
            // `<!channel|…>`, `<@U…|…>`, `<#C…|…>` would ping or point inside Slack: the
            // target is shown as text instead.
            format!(" ({})", escape(url))
        }
    }
    fn quote(&self, open: bool) -> &'static str {
        if open { "> " } else { "" }
    }
}

/// Only web and mail links become links; anything else in `<…|…>` means something to Slack.
fn is_web_link(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https" | "mailto"))
}

/// Text as Slack shows it literally: `&`, `<`, `>` as entities (Slack's own rule).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_links_and_escapes_are_mrkdwn() {
        assert_eq!(
            render("**bold** *it* ~~gone~~ `a<b` [docs](https://x.y/?a=1&b=2)"),
            "*bold* _it_ ~gone~ `a&lt;b` <https://x.y/?a=1&amp;b=2|docs>"
        );
    }

    #[test]
    fn the_model_cannot_ping_or_forge_links() {
        assert_eq!(
            render("hey <!channel> and <@U123> see <https://evil|ok>"),
            // Not a URL a browser opens: text, not a link.
            "hey &lt;!channel&gt; and &lt;@U123&gt; see https://evil|ok (https://evil|ok)"
        );
    }

    #[test]
    fn link_targets_cannot_ping_either() {
        assert_eq!(render("[all](!channel)"), "all (!channel)");
        assert_eq!(render("[you](@U123)"), "you (@U123)");
        assert_eq!(render("[here](!here) [c](#C1)"), "here (!here) c (#C1)");
        assert_eq!(render("[mail](mailto:a@b.c)"), "<mailto:a@b.c|mail>");
    }

    #[test]
    fn code_blocks_stay_closed_until_their_end() {
        assert_eq!(render("````\nx = ```\n````"), "```\nx = ``\u{200b}`\n```");
    }
}
