//! Code reaching a shell or an interpreter: by `-c`/`-e`/`--eval`, through a pipe, a
//! here-doc or a here-string, or from a script only known at run time.

use super::super::classes as c;
use super::super::script::Feed;
use super::super::words::Arg;
use super::{Ctx, Verdict, operands, short_flags, text_is, written};

pub(super) const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "ksh",
    "mksh",
    "dash",
    "ash",
    "fish",
    "tcsh",
    "csh",
    "yash",
    "rbash",
    "pwsh",
    "powershell",
];

/// Tools that, fed a stream, usually decode or transform it.
const DECODERS: &[&str] = &[
    "base64", "base32", "basenc", "xxd", "openssl", "tr", "rev", "gzip", "gunzip", "zcat", "bzcat",
    "xzcat", "xz", "uudecode", "od", "printf",
];

const FETCHERS: &[&str] = &[
    "curl", "wget", "fetch", "nc", "ncat", "netcat", "socat", "aria2c", "http", "lynx",
];

pub(super) fn shell(args: &[Arg], ctx: &Ctx, v: &mut Verdict) {
    let with_value = ["-o", "+o", "-O", "+O", "--rcfile", "--init-file"];
    let mut i = 0;
    let mut code = None;
    while i < args.len() {
        let Some(text) = args[i].text() else { break };
        if text == "--" || text == "-" {
            break;
        }
        if !(text.starts_with('-') || text.starts_with('+')) {
            break;
        }
        if text == "--command" || text == "-Command" || text == "-command" {
            code = Some(args.get(i + 1).and_then(Arg::text).unwrap_or_default());
        } else if let Some(flags) = short_flags(&args[i])
            && flags.contains('c')
        {
            code = Some(args.get(i + 1).and_then(Arg::text).unwrap_or_default());
        } else if text.to_ascii_lowercase().starts_with("-e") && text.len() <= 15 {
            // PowerShell's -EncodedCommand and its abbreviations.
            code = Some(String::new());
        }
        if with_value.contains(&text.as_str()) {
            i += 1;
        }
        i += 1;
    }
    if let Some(code) = code {
        v.add(&c::SHELL_C);
        if !code.is_empty() {
            v.nested.push(code);
        }
        return;
    }
    let script = args.get(i).filter(|a| !text_is(a, &["--"]));
    fed_code(script, ctx, v, true);
}

/// Code reaching a shell or interpreter from somewhere other than a file named now.
fn fed_code(script: Option<&Arg>, ctx: &Ctx, v: &mut Verdict, is_shell: bool) {
    let from_stdin = match script {
        None => true,
        Some(arg) => text_is(arg, &["-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"]),
    };
    if let Some(arg) = script
        && arg.text().is_none()
    {
        v.add(&c::DYNAMIC_SCRIPT);
        return;
    }
    if !from_stdin {
        return;
    }
    match ctx.stdin {
        Feed::Inherited | Feed::File(_) => {}
        Feed::Pipe(upstream) => {
            let upstream: Vec<String> = upstream
                .iter()
                .map(|n| n.rsplit('/').next().unwrap_or(n).to_ascii_lowercase())
                .collect();
            if upstream.iter().any(|n| FETCHERS.contains(&n.as_str())) {
                v.add(&c::PIPE_SHELL);
            } else if upstream.iter().any(|n| DECODERS.contains(&n.as_str())) {
                v.add(&c::DECODE_SHELL);
            } else if is_shell {
                v.add(&c::STDIN_SHELL);
            } else {
                v.add(&c::SCRIPT_STDIN);
            }
        }
        Feed::HereDoc | Feed::HereString => v.add(if is_shell {
            &c::SHELL_HEREDOC
        } else {
            &c::SCRIPT_STDIN
        }),
        Feed::Substitution => v.add(&c::DYNAMIC_SCRIPT),
    }
}

/// The family of an interpreter's name, if it is one.
pub(super) fn interpreter(name: &str) -> Option<&'static str> {
    let base = name.trim_end_matches(|ch: char| ch.is_ascii_digit() || ch == '.');
    Some(match base {
        "python" | "py" | "pypy" => "python",
        "node" | "nodejs" | "bun" | "deno" => "node",
        "perl" => "perl",
        "ruby" => "ruby",
        "php" => "php",
        "lua" | "luajit" => "lua",
        "rscript" => "r",
        "osascript" => "osascript",
        "tclsh" | "wish" | "expect" => "tcl",
        _ => return None,
    })
}

pub(super) fn interpreted(name: &str, args: &[Arg], ctx: &Ctx, v: &mut Verdict) {
    let family = interpreter(name).unwrap_or_default();
    let code_flags: &[char] = match family {
        "python" => &['c'],
        "node" => &['e', 'p'],
        "perl" => &['e', 'E'],
        "ruby" | "lua" | "r" | "osascript" => &['e'],
        "php" => &['r', 'R', 'B', 'E'],
        _ => &[],
    };
    let with_value: &[&str] = match family {
        "python" => &["-W", "-X", "-Q"],
        "node" => &["-r", "--require", "--import", "--loader", "-C"],
        "perl" => &["-I", "-M", "-m"],
        "ruby" => &["-I", "-r"],
        _ => &[],
    };
    let mut i = 0;
    while i < args.len() {
        let Some(text) = args[i].text() else { break };
        if text == "--" || text == "-" || !text.starts_with('-') {
            break;
        }
        if matches!(text.as_str(), "--eval" | "--print" | "-Command") {
            v.add(&c::SCRIPT_C);
            return;
        }
        if family == "python" && (text == "-m" || (text.starts_with("-m") && text.len() > 2)) {
            return; // runs a module by name
        }
        if let Some(flags) = short_flags(&args[i]) {
            // The letters up to an option that takes the rest of the word as its value.
            if flags
                .chars()
                .take_while(
                    |ch| !matches!(ch, 'W' | 'X' | 'I' | 'M' | 'm' | 'r' if family != "php"),
                )
                .any(|ch| code_flags.contains(&ch))
            {
                v.add(&c::SCRIPT_C);
                return;
            }
            if family == "perl" || family == "ruby" {
                // `-i` edits the named files in place.
                if flags.starts_with('i') || flags.contains("pi") || flags.contains("ni") {
                    for operand in operands(&args[i + 1..]) {
                        written(operand, ctx.cwd, ctx.scene, v);
                    }
                }
            }
        }
        if with_value.contains(&text.as_str()) {
            i += 1;
        }
        i += 1;
    }
    if family == "node" && args.get(i).is_some_and(|a| text_is(a, &["eval"])) {
        v.add(&c::SCRIPT_C);
        return;
    }
    fed_code(args.get(i), ctx, v, false);
}
