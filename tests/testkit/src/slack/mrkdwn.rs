//! What a person sees of the bot's messages: Slack's mrkdwn rendered to plain text, the
//! text of Block Kit blocks, and the buttons of `actions` blocks.

use serde_json::Value;

/// A message in Slack's mrkdwn as a person sees it: code fences and backticks removed
/// (code kept as written), `<url|text>` shown as its text (`<url>` as the url, `<@U…>` as
/// `@U…`, `<#C…|name>` as `#name`, `<!here>` as `@here`), `*bold*`, `_italic_` and
/// `~strike~` markers removed where Slack takes them as markers (at word boundaries, on
/// one line), a leading `>` (quote) removed, and `&amp;`, `&lt;`, `&gt;` unescaped.
pub fn visible(mrkdwn: &str) -> String {
    let chars: Vec<char> = mrkdwn.chars().collect();
    // (character, literal): literal ones are never markers.
    let mut tokens: Vec<(char, bool)> = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < chars.len() {
        if line_start {
            line_start = false;
            let quote = if starts(&chars, i, "&gt;") {
                4
            } else if chars[i] == '>' {
                1
            } else {
                0
            };
            if quote > 0 {
                i += quote;
                if chars.get(i) == Some(&' ') {
                    i += 1;
                }
                continue;
            }
        }
        if starts(&chars, i, "```")
            && let Some(end) = find(&chars, i + 3, "```")
        {
            let mut code = &chars[i + 3..end];
            if code.first() == Some(&'\n') {
                code = &code[1..];
            }
            if code.last() == Some(&'\n') {
                code = &code[..code.len() - 1];
            }
            literal(&mut tokens, &unescape(&code.iter().collect::<String>()));
            i = end + 3;
            continue;
        }
        let c = chars[i];
        let close = |want: char| {
            let mut rest = chars[i + 1..].iter().take_while(|&&x| x != '\n');
            rest.position(|&x| x == want).map(|p| i + 1 + p)
        };
        if c == '`'
            && let Some(end) = close('`').filter(|&e| e > i + 1)
        {
            let code: String = chars[i + 1..end].iter().collect();
            literal(&mut tokens, &unescape(&code));
            i = end + 1;
            continue;
        }
        if c == '<'
            && let Some(end) = close('>')
        {
            let inner: String = chars[i + 1..end].iter().collect();
            literal(&mut tokens, &link_text(&inner));
            i = end + 1;
            continue;
        }
        if c == '&' {
            let entity = [("&amp;", '&'), ("&lt;", '<'), ("&gt;", '>')]
                .into_iter()
                .find(|(e, _)| starts(&chars, i, e));
            if let Some((e, shown)) = entity {
                tokens.push((shown, true));
                i += e.chars().count();
                continue;
            }
        }
        tokens.push((c, false));
        if c == '\n' {
            line_start = true;
        }
        i += 1;
    }
    for marker in ['*', '_', '~'] {
        emphasis(&mut tokens, marker);
    }
    tokens.into_iter().map(|(c, _)| c).collect()
}

fn starts(chars: &[char], at: usize, s: &str) -> bool {
    let s: Vec<char> = s.chars().collect();
    chars.get(at..at + s.len()) == Some(&s[..])
}

fn find(chars: &[char], from: usize, s: &str) -> Option<usize> {
    (from..chars.len()).find(|&j| starts(chars, j, s))
}

fn literal(tokens: &mut Vec<(char, bool)>, text: &str) {
    tokens.extend(text.chars().map(|c| (c, true)));
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// What `<…>` shows.
fn link_text(inner: &str) -> String {
    let (target, label) = match inner.split_once('|') {
        Some((t, l)) => (t, Some(l)),
        None => (inner, None),
    };
    let shown = if let Some(user) = target.strip_prefix('@') {
        format!("@{}", label.unwrap_or(user))
    } else if let Some(channel) = target.strip_prefix('#') {
        format!("#{}", label.unwrap_or(channel))
    } else if let Some(special) = target.strip_prefix('!') {
        match label {
            Some(l) => l.to_owned(),
            None => format!("@{}", special.split('^').next().unwrap_or(special)),
        }
    } else {
        label.unwrap_or(target).to_owned()
    };
    unescape(&shown)
}

/// Remove the `marker` pairs Slack takes as formatting: the opening one after the start of
/// the line, a space or punctuation and before a non-space; the closing one after a
/// non-space and before the end, a space or punctuation; both on one line.
fn emphasis(tokens: &mut Vec<(char, bool)>, marker: char) {
    let is = |t: &[(char, bool)], j: usize| t.get(j) == Some(&(marker, false));
    let word = |t: &[(char, bool)], j: Option<usize>| {
        j.and_then(|j| t.get(j))
            .is_some_and(|(c, _)| c.is_alphanumeric())
    };
    let space = |t: &[(char, bool)], j: Option<usize>| {
        j.and_then(|j| t.get(j))
            .is_none_or(|(c, _)| c.is_whitespace())
    };
    let mut remove = Vec::new();
    let mut j = 0;
    while j < tokens.len() {
        let opens = is(tokens, j)
            && !word(tokens, j.checked_sub(1))
            && !space(tokens, Some(j + 1))
            && !is(tokens, j + 1);
        if !opens {
            j += 1;
            continue;
        }
        let mut k = j + 2;
        let mut closed = None;
        while k < tokens.len() && tokens[k].0 != '\n' {
            if is(tokens, k) && !space(tokens, Some(k - 1)) && !word(tokens, Some(k + 1)) {
                closed = Some(k);
                break;
            }
            k += 1;
        }
        match closed {
            Some(k) => {
                remove.extend([j, k]);
                j = k + 1;
            }
            None => j += 1,
        }
    }
    for j in remove.into_iter().rev() {
        tokens.remove(j);
    }
}

/// Standard Markdown (a `markdown` block) as shown: emphasis, code and link syntax removed.
fn markdown_visible(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for (n, line) in text.split('\n').enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if n > 0 && !out.is_empty() {
            out.push('\n');
        }
        if fenced {
            out.push_str(line);
            continue;
        }
        let line = line.trim_start_matches('#').trim_start_matches("> ");
        let mut shown = String::new();
        let mut rest = line;
        while let Some(open) = rest.find('[') {
            let Some(mid) = rest[open..].find("](") else {
                break;
            };
            let Some(end) = rest[open + mid..].find(')') else {
                break;
            };
            shown.push_str(&rest[..open]);
            shown.push_str(&rest[open + 1..open + mid]);
            rest = &rest[open + mid + end + 1..];
        }
        shown.push_str(rest);
        for marker in ["**", "__", "~~", "`"] {
            shown = shown.replace(marker, "");
        }
        out.push_str(&shown);
    }
    out
}

/// The text of a text object (`mrkdwn` rendered, `plain_text` as is).
fn text_object(t: &Value) -> Option<String> {
    let text = t["text"].as_str()?;
    Some(if t["type"] == "mrkdwn" {
        visible(text)
    } else {
        text.to_owned()
    })
}

fn rich_text(elements: &Value) -> String {
    let mut out = String::new();
    for e in elements.as_array().into_iter().flatten() {
        match e["type"].as_str() {
            Some("text") => out.push_str(e["text"].as_str().unwrap_or_default()),
            Some("link") => out.push_str(e["text"].as_str().or(e["url"].as_str()).unwrap_or("")),
            Some("user") => out.push_str(&format!("@{}", e["user_id"].as_str().unwrap_or(""))),
            Some("emoji") => out.push_str(&format!(":{}:", e["name"].as_str().unwrap_or(""))),
            _ if e.get("elements").is_some() => out.push_str(&rich_text(&e["elements"])),
            _ => {}
        }
    }
    out
}

/// What a message shows: the text of its blocks when it has any that show text, else its
/// `text` (which Slack then uses only for notifications).
pub(super) fn display(text: &str, blocks: &Value) -> String {
    let mut parts = Vec::new();
    for block in blocks.as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("section") => {
                parts.extend(text_object(&block["text"]));
                let fields = block["fields"].as_array().into_iter().flatten();
                parts.extend(fields.filter_map(text_object));
            }
            Some("header") => parts.extend(text_object(&block["text"])),
            Some("markdown") => parts.push(markdown_visible(block["text"].as_str().unwrap_or(""))),
            Some("context") => {
                let elements = block["elements"].as_array().into_iter().flatten();
                let texts: Vec<String> = elements.filter_map(text_object).collect();
                if !texts.is_empty() {
                    parts.push(texts.join(" "));
                }
            }
            Some("rich_text") => parts.push(rich_text(&block["elements"])),
            _ => {}
        }
    }
    if parts.is_empty() {
        visible(text)
    } else {
        parts.join("\n")
    }
}

/// Every button of the `actions` blocks: the button and its block id.
fn all_buttons(blocks: &Value) -> Vec<(Value, Value)> {
    let blocks = blocks.as_array().into_iter().flatten();
    let actions = blocks.filter(|b| b["type"] == "actions");
    actions
        .flat_map(|b| {
            let elements = b["elements"].as_array().cloned().unwrap_or_default();
            let id = b["block_id"].clone();
            elements.into_iter().map(move |e| (e, id.clone()))
        })
        .filter(|(e, _)| e["type"] == "button")
        .collect()
}

/// A button's choice id: its `value`, or its `action_id` when it has none.
fn choice_of(button: &Value) -> String {
    let value = button["value"].as_str().or(button["action_id"].as_str());
    value.unwrap_or_default().to_owned()
}

/// (label, choice id) of every button.
pub(super) fn buttons(blocks: &Value) -> Vec<(String, String)> {
    let all = all_buttons(blocks).into_iter();
    all.map(|(b, _)| {
        (
            b["text"]["text"].as_str().unwrap_or("").to_owned(),
            choice_of(&b),
        )
    })
    .collect()
}

/// The button whose choice id (or `action_id`) is `choice`, with its `block_id`.
pub(super) fn button(blocks: &Value, choice: &str) -> Option<Value> {
    let all = all_buttons(blocks).into_iter();
    let mut found = all
        .into_iter()
        .find(|(b, _)| choice_of(b) == choice || b["action_id"] == choice);
    found.as_mut().map(|(b, block)| {
        if b.get("block_id").is_none() && block.is_string() {
            b["block_id"] = block.clone();
        }
        b.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_people_see() {
        let cases = [
            ("*bold* and _it_ and ~gone~", "bold and it and gone"),
            (
                "snake_case_name stays, 2*3*4 too",
                "snake_case_name stays, 2*3*4 too",
            ),
            ("a * b * c", "a * b * c"),
            ("*not closed", "*not closed"),
            ("x &lt;here&gt; &amp; there", "x <here> & there"),
            (
                "see <https://e.com|the site> or <https://e.com>",
                "see the site or https://e.com",
            ),
            (
                "hi <@U0PERSON1> in <#C0GENERAL|general>, <!here>",
                "hi @U0PERSON1 in #general, @here",
            ),
            ("use `a*b*c` now", "use a*b*c now"),
            (
                "```\nif a&lt;b &amp;&amp; *x* { }\n```\nafter",
                "if a<b && *x* { }\nafter",
            ),
            ("&gt; quoted\nplain", "quoted\nplain"),
            ("*bold with _it_ inside*", "bold with it inside"),
            ("two\n*lines* here", "two\nlines here"),
            ("*across\nlines*", "*across\nlines*"),
            ("```unclosed", "```unclosed"),
        ];
        for (mrkdwn, shown) in cases {
            assert_eq!(visible(mrkdwn), shown, "{mrkdwn:?}");
        }
    }

    #[test]
    fn blocks_show_their_text_and_buttons() {
        let blocks = json!([
            {"type": "section", "text": {"type": "mrkdwn", "text": "Run *this*?"}},
            {"type": "actions", "block_id": "b1", "elements": [
                {"type": "button", "action_id": "once", "value": "once",
                 "text": {"type": "plain_text", "text": "Allow once"}},
                {"type": "button", "action_id": "deny",
                 "text": {"type": "plain_text", "text": "Deny"}}]}
        ]);
        assert_eq!(display("fallback", &blocks), "Run this?");
        assert_eq!(display("*plain*", &Value::Null), "plain");
        assert_eq!(display("*plain*", &json!([])), "plain");
        assert_eq!(
            buttons(&blocks),
            vec![
                ("Allow once".into(), "once".into()),
                ("Deny".into(), "deny".into())
            ]
        );
        let deny = button(&blocks, "deny").unwrap();
        assert_eq!(deny["block_id"], "b1");
        assert!(button(&blocks, "nope").is_none());
        let md =
            json!([{"type": "markdown", "text": "**Hi** [there](https://x.y)\n```\ncode\n```"}]);
        assert_eq!(display("", &md), "Hi there\ncode");
    }
}
