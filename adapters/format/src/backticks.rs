//! For dialects whose code marks are backticks and that have no escape for one (Slack's
//! mrkdwn, WhatsApp): an inline code span and the text of a fenced block, made so the
//! model's text can never close either early.

/// The fence that opens a block (no language: these dialects show none).
pub const FENCE_OPEN: &str = "```\n";
/// The fence that closes it.
pub const FENCE_CLOSE: &str = "\n```";

/// An inline code span: a backtick inside becomes a look-alike (`ˋ`), a line break a space,
/// then `escape` (the dialect's own, for text it shows literally); empty code is nothing.
pub fn code_span(code: &str, escape: impl Fn(&str) -> String) -> String {
    let code = escape(&code.replace('`', "ˋ").replace('\n', " "));
    if code.is_empty() {
        String::new()
    } else {
        format!("`{code}`")
    }
}

/// Text inside a fenced block (already escaped): three backticks in a row would end the
/// block early, so a zero-width space goes between the last two.
pub fn fenced_text(text: &str) -> String {
    text.replace("```", "``\u{200b}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_cannot_close_its_span_or_its_block() {
        assert_eq!(code_span("a`b\nc", str::to_owned), "`aˋb c`");
        assert_eq!(code_span("", str::to_owned), "");
        assert_eq!(code_span("<x>", |t| t.replace('<', "&lt;")), "`&lt;x>`");
        assert!(!fenced_text("x ``` y").contains("```"));
    }
}
