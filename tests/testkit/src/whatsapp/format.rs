//! What a person sees of a WhatsApp message: its formatting markers removed where WhatsApp
//! takes them as markers (and only there), the text itself kept as written.

/// `text` as WhatsApp shows it: ```` ```monospace``` ```` (across lines too; a fence alone
/// on its line leaves no line behind) and `` `inline code` `` shown as written inside;
/// `*bold*`, `_italic_` and `~strike~` markers removed where WhatsApp takes them (the
/// opening one at the start of the line or after a space or punctuation and before a
/// non-space, the closing one after a non-space and before the end, a space or
/// punctuation, both on one line); a leading `> ` (quote) removed. Everything else, stray
/// markers included (`2*3*4`, `snake_case`, an unclosed fence), shows as is.
pub fn visible(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    // (character, literal): literal ones are never markers.
    let mut tokens: Vec<(char, bool)> = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < chars.len() {
        if line_start {
            line_start = false;
            if starts(&chars, i, "> ") {
                i += 2;
                continue;
            }
        }
        if starts(&chars, i, "```")
            && let Some(end) = find(&chars, i + 3, "```").filter(|&e| e > i + 3)
        {
            let mut code = &chars[i + 3..end];
            if code.first() == Some(&'\n') {
                code = &code[1..];
            }
            if code.last() == Some(&'\n') {
                code = &code[..code.len() - 1];
            }
            tokens.extend(code.iter().map(|&c| (c, true)));
            i = end + 3;
            continue;
        }
        let c = chars[i];
        if c == '`'
            && let Some(end) = close(&chars, i, '`').filter(|&e| e > i + 1)
        {
            tokens.extend(chars[i + 1..end].iter().map(|&c| (c, true)));
            i = end + 1;
            continue;
        }
        tokens.push((c, false));
        line_start = c == '\n';
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

/// The next `want` after `at` on the same line.
fn close(chars: &[char], at: usize, want: char) -> Option<usize> {
    let mut rest = chars[at + 1..].iter().take_while(|&&x| x != '\n');
    rest.position(|&x| x == want).map(|p| at + 1 + p)
}

/// Remove the `marker` pairs WhatsApp takes as formatting.
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

#[cfg(test)]
mod tests {
    use super::visible;

    #[test]
    fn what_people_see() {
        let cases = [
            ("Hello *there*", "Hello there"),
            ("*bold* and _it_ and ~gone~", "bold and it and gone"),
            ("*bold _and italic_*", "bold and italic"),
            (
                "2*3*4 and snake_case_name stay",
                "2*3*4 and snake_case_name stay",
            ),
            ("a * b * c", "a * b * c"),
            ("*not closed", "*not closed"),
            ("*across\nlines*", "*across\nlines*"),
            ("x = *y*; done", "x = y; done"),
            ("if a<b && c>d { step(1); }", "if a<b && c>d { step(1); }"),
            ("use `a*b*c` now", "use a*b*c now"),
            ("use ```inline``` here", "use inline here"),
            (
                "```\nif a<b && *x* { }\n```\nafter",
                "if a<b && *x* { }\nafter",
            ),
            ("before\n```\ncode\n```", "before\ncode"),
            ("```rust\nlet x = 1;\n```", "rust\nlet x = 1;"),
            ("```unclosed", "```unclosed"),
            ("``````", "``````"),
            ("> quoted\nplain > not", "quoted\nplain > not"),
            ("* a list item\n- another", "* a list item\n- another"),
            ("Point 3 & more <here>.", "Point 3 & more <here>."),
            ("café *très* 🎉", "café très 🎉"),
        ];
        for (text, shown) in cases {
            assert_eq!(visible(text), shown, "{text:?}");
        }
    }
}
