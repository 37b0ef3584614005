//! Judging one simple command: wrappers (`sudo`, `env`, `nohup`, `xargs`, `timeout`, …) are
//! peeled off to reach the command that really runs, and that command word and its
//! arguments are checked against the classes in [`super::classes`]. Where the command word is
//! only known at run time, or code reaches a shell or interpreter by `-c`, a pipe, a
//! here-doc or a here-string, the answer is to ask.

use std::path::Path;

mod code;
mod peel;

use super::Scene;
use super::classes::{self as c, Class};
use super::paths::{Place, is_absolute, places};
use super::script::{Direction, Feed, Invocation};
use super::words::{Arg, Unknown};
use code::{SHELLS, interpreted, interpreter, shell};
use peel::{Peel, option_value};

/// What a command was found to do; `nested` are strings that will run as shell code
/// (`trap` handlers, `alias` values, `sh -c` payloads) and are checked in turn.
#[derive(Default)]
pub struct Verdict {
    pub found: Vec<&'static Class>,
    pub nested: Vec<String>,
}

impl Verdict {
    fn add(&mut self, class: &'static Class) {
        if !self.found.iter().any(|f| f.key == class.key) {
            self.found.push(class);
        }
    }
}

/// The file name a command word runs (`/usr/bin/rm` → `rm`), lower-cased.
fn program(arg: &Arg) -> Option<String> {
    let text = arg.text()?;
    let name = text.rsplit('/').next().unwrap_or(&text);
    Some(name.to_ascii_lowercase())
}

fn is_flag(arg: &Arg) -> bool {
    arg.text()
        .is_some_and(|t| t.starts_with('-') && t.len() > 1)
}

/// Short-option letters of a `-abc` word (none for `--long` or operands).
fn short_flags(arg: &Arg) -> Option<String> {
    let text = arg.text()?;
    let rest = text.strip_prefix('-')?;
    if rest.starts_with('-') || rest.is_empty() {
        return None;
    }
    Some(rest.to_owned())
}

fn text_is(arg: &Arg, options: &[&str]) -> bool {
    arg.text().is_some_and(|t| options.contains(&t.as_str()))
}

/// Operands: words that are not options, with everything after `--` an operand.
fn operands(args: &[Arg]) -> Vec<&Arg> {
    let mut out = Vec::new();
    let mut options_done = false;
    for arg in args {
        if !options_done && text_is(arg, &["--"]) {
            options_done = true;
            continue;
        }
        if options_done || !is_flag(arg) {
            out.push(arg);
        }
    }
    out
}

/// Judge one invocation.
pub fn judge(invocation: &Invocation, scene: &Scene) -> Verdict {
    let mut verdict = Verdict::default();
    let cwd = invocation.cwd.as_deref();
    for (name, _) in &invocation.assignments {
        if matches!(
            name.as_str(),
            "DOCKER_HOST" | "DOCKER_CONTEXT" | "CONTAINER_HOST"
        ) {
            verdict.add(&c::DOCKER_REMOTE);
        }
    }
    for redirect in &invocation.redirects {
        match redirect.direction {
            Direction::Write => written(&redirect.target, cwd, scene, &mut verdict),
            Direction::Read => read(&redirect.target, cwd, scene, &mut verdict),
        }
    }
    if invocation.argv.is_empty() {
        return verdict;
    }
    let mut peel = Peel {
        cwd: cwd.map(Path::to_path_buf),
        detached: invocation.background,
        ..Peel::default()
    };
    let argv = peel.run(&invocation.argv, &mut verdict);
    for arg in &invocation.argv {
        read(arg, cwd, scene, &mut verdict);
    }
    let Some(argv) = argv else {
        return verdict;
    };
    let cwd = peel.cwd.as_deref();
    let Some(name) = program(&argv[0]) else {
        verdict.add(&c::DYNAMIC_COMMAND);
        return verdict;
    };
    let word = argv[0].text().unwrap_or_default();
    if word.contains(['*', '?', '[']) {
        // A glob picks the command word at run time.
        verdict.add(&c::DYNAMIC_COMMAND);
        return verdict;
    }
    let args = &argv[1..];
    let ctx = Ctx {
        scene,
        cwd,
        stdin: &invocation.stdin,
        detached: peel.detached,
    };
    if peel.via_xargs && matches!(name.as_str(), "rm" | "unlink" | "shred") {
        verdict.add(&c::XARGS_RM);
    }
    command(&name, args, &ctx, &mut verdict);
    verdict
}

struct Ctx<'a> {
    scene: &'a Scene,
    cwd: Option<&'a Path>,
    stdin: &'a Feed,
    detached: bool,
}

/// The rules, by command word. Kept as one `match` on purpose, though it is long: it is a
/// table (a word or a family of words, and what they are flagged for), read top to bottom
/// like Hermes' pattern list; the rules with more to them are functions of their own.
fn command(name: &str, args: &[Arg], ctx: &Ctx, v: &mut Verdict) {
    let scene = ctx.scene;
    match name {
        "rm" | "unlink" | "rmdir" => remove(args, ctx, v),
        "shred" | "wipefs" | "blkdiscard" | "fdisk" | "sfdisk" | "cfdisk" | "parted" | "gdisk"
        | "sgdisk" | "cryptsetup" => v.add(&c::DISK_WIPE),
        "mke2fs" | "mkswap" | "mkdosfs" => v.add(&c::MKFS),
        n if n.starts_with("mkfs") => v.add(&c::MKFS),
        "dd" => {
            for arg in args {
                if let Some(text) = arg.text() {
                    if text.starts_with("if=") {
                        v.add(&c::DD);
                    }
                    if let Some(target) = text.strip_prefix("of=") {
                        written(&Arg::literal(target), ctx.cwd, scene, v);
                    }
                } else if arg.pattern().starts_with("of=") {
                    v.add(&c::DD);
                    written(&Arg::unknown(Unknown::Variable), ctx.cwd, scene, v);
                }
            }
        }
        "chmod" => chmod(args, ctx, v),
        "chown" | "chgrp" => {
            let recursive = args.iter().any(|a| {
                short_flags(a).is_some_and(|f| f.contains('R')) || text_is(a, &["--recursive"])
            });
            let owner = operands(args)
                .first()
                .map(|a| a.pattern())
                .unwrap_or_default();
            if recursive && (owner.starts_with("root") || owner.starts_with('*')) {
                v.add(&c::CHOWN_ROOT);
            }
            for operand in operands(args).iter().skip(1) {
                sensitive_change(operand, ctx, v);
            }
        }
        "tee" => {
            for operand in operands(args) {
                written(operand, ctx.cwd, scene, v);
            }
        }
        "cp" | "install" | "rsync" | "scp" => {
            let ops = operands(args);
            let target =
                option_value(args, &["-t", "--target-directory"]).map(|t| Arg::literal(&t));
            match target.as_ref().or(ops.last().copied()) {
                Some(dest) if ops.len() >= 2 || target.is_some() => {
                    written(dest, ctx.cwd, scene, v);
                }
                _ => {}
            }
        }
        "mv" | "ln" | "truncate" => {
            for operand in operands(args) {
                written(operand, ctx.cwd, scene, v);
            }
        }
        "sed" => {
            let in_place = args.iter().any(|a| {
                a.text().is_some_and(|t| t.starts_with("--in-place"))
                    || short_flags(a).is_some_and(|f| f.contains('i'))
            });
            if in_place {
                for operand in operands(args) {
                    written(operand, ctx.cwd, scene, v);
                }
            }
        }
        "vi" | "vim" | "nvim" | "nano" | "emacs" | "ed" | "ex" | "pico" | "micro" => {
            for operand in operands(args) {
                written(operand, ctx.cwd, scene, v);
            }
        }
        "curl" => {
            if let Some(out) = option_value(args, &["-o", "--output"]) {
                written(&Arg::literal(&out), ctx.cwd, scene, v);
            }
        }
        "wget" => {
            if let Some(out) = option_value(args, &["-O", "--output-document"]) {
                written(&Arg::literal(&out), ctx.cwd, scene, v);
            }
        }
        "kill" => kill(args, ctx, v),
        "pkill" | "killall" => pkill(name, args, ctx, v),
        "systemctl" => {
            let sub = operands(args)
                .first()
                .and_then(|a| a.text())
                .unwrap_or_default();
            match sub.as_str() {
                "poweroff" | "reboot" | "halt" | "kexec" | "suspend" | "hibernate" | "rescue"
                | "emergency" | "default" | "switch-root" | "soft-reboot" => v.add(&c::POWER),
                "stop"
                | "restart"
                | "try-restart"
                | "reload-or-restart"
                | "try-reload-or-restart"
                | "disable"
                | "mask"
                | "kill"
                | "isolate"
                | "exit" => v.add(&c::SYSTEMCTL),
                _ => {}
            }
        }
        "launchctl"
            if operands(args).first().is_some_and(|a| {
                text_is(
                    a,
                    &[
                        "stop",
                        "kickstart",
                        "bootout",
                        "unload",
                        "kill",
                        "disable",
                        "remove",
                    ],
                )
            }) =>
        {
            v.add(&c::SYSTEMCTL)
        }
        "shutdown" | "reboot" | "halt" | "poweroff" => v.add(&c::POWER),
        "init" | "telinit" if args.iter().any(|a| text_is(a, &["0", "6", "1", "s", "S"])) => {
            v.add(&c::POWER)
        }
        "docker" | "podman" | "nerdctl" | "docker-compose" | "podman-compose" => {
            docker(name, args, v)
        }
        "git" => git(args, v),
        "crontab" => {
            let listing = args
                .iter()
                .all(|a| text_is(a, &["-l", "-u"]) || !is_flag(a));
            if !listing || !operands(args).is_empty() {
                v.add(&c::CRONTAB);
            }
        }
        "at" | "batch" => v.add(&c::CRONTAB),
        "eval" => v.add(&c::EVAL),
        "source" | "."
            if operands(args).first().is_some_and(|file| {
                file.text().is_none() || text_is(file, &["/dev/stdin", "/dev/fd/0", "-"])
            }) =>
        {
            v.add(&c::DYNAMIC_SCRIPT)
        }
        "trap" => {
            if let Some(code) = operands(args).first().and_then(|a| a.text()) {
                v.nested.push(code);
            }
        }
        "alias" => {
            for arg in args {
                if let Some((_, code)) = arg.text().as_deref().and_then(|t| t.split_once('=')) {
                    v.nested.push(code.to_owned());
                }
            }
        }
        "su" | "runuser" | "script" => {
            if let Some(code) = option_value(args, &["-c", "--command"]) {
                v.add(&c::SHELL_C);
                v.nested.push(code);
            }
        }
        "nc" | "ncat" | "netcat"
            if args
                .iter()
                .any(|a| short_flags(a).is_some_and(|f| f.contains(['e', 'c']))) =>
        {
            v.add(&c::REVERSE_SHELL)
        }
        "socat"
            if args.iter().any(|a| {
                let p = a.pattern().to_ascii_lowercase();
                p.contains("exec:") || p.contains("system:")
            }) =>
        {
            v.add(&c::REVERSE_SHELL)
        }
        "hermes-gateway" | "hermes" => gateway(name, args, ctx, v),
        "find" => find(args, ctx, v),
        "awk" | "gawk" | "mawk" | "nawk" => {
            let program = operands(args)
                .first()
                .map(|a| a.pattern())
                .unwrap_or_default();
            if program.contains("system") || program.contains('|') {
                v.add(&c::SCRIPT_C);
            }
        }
        n if SHELLS.contains(&n) => shell(args, ctx, v),
        n if interpreter(n).is_some() => interpreted(n, args, ctx, v),
        _ => {}
    }
    if name == scene.gateway_name.as_str() && name != "hermes-gateway" {
        gateway("hermes-gateway", args, ctx, v);
    }
}

/// `find`: `-delete`, output files, and the command `-exec` runs on each match.
fn find(args: &[Arg], ctx: &Ctx, v: &mut Verdict) {
    let mut i = 0;
    while i < args.len() {
        let text = args[i].text().unwrap_or_default();
        i += 1;
        match text.as_str() {
            "-delete" => v.add(&c::FIND_DELETE),
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                if let Some(file) = args.get(i) {
                    written(file, ctx.cwd, ctx.scene, v);
                }
            }
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let end = args[i..]
                    .iter()
                    .position(|a| text_is(a, &[";", "+"]))
                    .map_or(args.len(), |p| i + p);
                let inner: Vec<Arg> = args[i..end]
                    .iter()
                    .map(|a| {
                        if a.text().is_some_and(|t| t.contains("{}")) {
                            Arg::unknown(Unknown::Variable)
                        } else {
                            a.clone()
                        }
                    })
                    .collect();
                i = end + 1;
                let mut peel = Peel::default();
                let Some(inner) = peel.run(&inner, v) else {
                    continue;
                };
                let Some(name) = program(&inner[0]) else {
                    v.add(&c::DYNAMIC_COMMAND);
                    continue;
                };
                if matches!(name.as_str(), "rm" | "unlink" | "shred") {
                    v.add(&c::FIND_EXEC);
                }
                command(&name, &inner[1..], ctx, v);
            }
            _ => {}
        }
    }
}

fn remove(args: &[Arg], ctx: &Ctx, v: &mut Verdict) {
    let mut options_done = false;
    for arg in args {
        if !options_done && text_is(arg, &["--"]) {
            options_done = true;
            continue;
        }
        if !options_done && is_flag(arg) {
            // GNU rm takes its flags anywhere, even after the operands.
            if short_flags(arg).is_some_and(|f| f.contains(['r', 'R']))
                || text_is(arg, &["--recursive"])
            {
                v.add(&c::RM_RECURSIVE);
            }
            continue;
        }
        if arg.wholly_unknown() {
            v.add(&c::RM_DYNAMIC);
            continue;
        }
        let found = places(arg, ctx.cwd, ctx.scene);
        if found.contains(&Place::Root) {
            v.add(&c::RM_ROOT);
        } else if arg.wholly_unknown() || arg.text().is_none() {
            v.add(&c::RM_DYNAMIC);
        } else if is_absolute(arg) {
            v.add(&c::RM_ABSOLUTE);
        }
        for place in found {
            if place != Place::Root {
                v.add(write_class(place));
            }
        }
    }
}

fn chmod(args: &[Arg], ctx: &Ctx, v: &mut Verdict) {
    let ops = operands(args);
    let Some(mode) = ops.first() else { return };
    let mode = mode.pattern();
    if mode.chars().all(|ch| ch.is_ascii_digit()) && !mode.is_empty() {
        let digits: Vec<u32> = mode.chars().filter_map(|ch| ch.to_digit(8)).collect();
        if digits.last().is_some_and(|d| d & 2 != 0) {
            v.add(&c::CHMOD_777);
        }
        if digits.len() == 4 && digits[0] & 6 != 0 {
            v.add(&c::SETUID);
        }
    } else {
        for clause in mode.split(',') {
            let who: String = clause
                .chars()
                .take_while(|ch| "ugoa".contains(*ch))
                .collect();
            let mut rest = clause.chars().skip(who.len());
            let Some(op) = rest.next() else { continue };
            if op == '-' {
                continue;
            }
            let perms: String = rest.collect();
            if perms.contains('w') && (who.contains(['o', 'a'])) {
                v.add(&c::CHMOD_777);
            }
            if perms.contains('s') {
                v.add(&c::SETUID);
            }
        }
        if mode.contains('*') {
            v.add(&c::CHMOD_777);
        }
    }
    for operand in ops.iter().skip(1) {
        sensitive_change(operand, ctx, v);
    }
}

/// Changing who may read a secret is as good as reading it.
fn sensitive_change(arg: &Arg, ctx: &Ctx, v: &mut Verdict) {
    for place in places(arg, ctx.cwd, ctx.scene) {
        match place {
            Place::GatewaySecret => v.add(&c::GATEWAY_SECRET),
            Place::Ssh | Place::ShellStartup | Place::Credentials | Place::SystemConfig => {
                v.add(write_class(place))
            }
            _ => {}
        }
    }
}

/// `kill [-s SIG | -n NUM | -SIG] [--] pid…`: only the first word can name the signal.
fn kill(args: &[Arg], ctx: &Ctx, v: &mut Verdict) {
    let first = args.first().and_then(Arg::text).unwrap_or_default();
    let mut pids = match first.as_str() {
        "-s" | "-n" => args.get(2..).unwrap_or_default(),
        s if s.starts_with('-') && s != "--" && args.len() > 1 => &args[1..],
        _ => args,
    };
    if pids.first().is_some_and(|a| text_is(a, &["--"])) {
        pids = &pids[1..];
    }
    let gateway = ctx.scene.gateway_pid.to_string();
    for pid in pids {
        match pid.text() {
            None if pid.has(Unknown::Substitution) => v.add(&c::KILL_DYNAMIC),
            Some(t) if t == "-1" => v.add(&c::KILL_ALL),
            Some(t) if t.trim_start_matches('-') == gateway => v.add(&c::KILL_GATEWAY),
            _ => {}
        }
    }
}

fn pkill(name: &str, args: &[Arg], ctx: &Ctx, v: &mut Verdict) {
    let mut i = 0;
    let mut regex = name == "pkill";
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let text = arg.text().unwrap_or_default();
        let upper = text.to_ascii_uppercase();
        if matches!(upper.as_str(), "-9" | "-KILL" | "-SIGKILL" | "-S9")
            || ((text == "-s" || text == "--signal")
                && args.get(i).and_then(Arg::text).is_some_and(|s| {
                    matches!(s.to_ascii_uppercase().as_str(), "9" | "KILL" | "SIGKILL")
                }))
        {
            v.add(&c::PKILL_9);
        }
        if name == "killall" && (text == "-r" || text == "--regexp") {
            v.add(&c::KILLALL_REGEX);
            regex = true;
        }
        if [
            "-s", "--signal", "-u", "-U", "-g", "-G", "-P", "-t", "--user", "-o", "-y",
        ]
        .contains(&text.as_str())
        {
            i += 1;
        }
    }
    for pattern in operands(args) {
        let Some(text) = pattern.text() else {
            v.add(&c::KILL_GATEWAY);
            continue;
        };
        let lower = text.to_ascii_lowercase();
        let hits_gateway = ["hermes", "gateway", "cli.py"]
            .iter()
            .any(|n| lower.contains(n))
            || ctx.scene.gateway_name == text
            || (regex
                && regex::Regex::new(&text).is_ok_and(|re| {
                    re.is_match(&ctx.scene.gateway_name) || re.is_match("hermes-gateway run")
                }));
        if hits_gateway {
            v.add(&c::KILL_GATEWAY);
        }
    }
}

fn docker(name: &str, args: &[Arg], v: &mut Verdict) {
    let mut i = 0;
    // Global options before the subcommand.
    while i < args.len() {
        let text = args[i].text().unwrap_or_default();
        if !text.starts_with('-') {
            break;
        }
        let flag = text.split('=').next().unwrap_or_default();
        if matches!(
            flag,
            "-H" | "--host" | "--context" | "-c" | "--remote" | "-r" | "--url" | "--connection"
        ) {
            v.add(&c::DOCKER_REMOTE);
        }
        if matches!(
            flag,
            "-H" | "--host"
                | "--context"
                | "-c"
                | "--url"
                | "--connection"
                | "--config"
                | "-l"
                | "--log-level"
        ) && !text.contains('=')
        {
            i += 1;
        }
        i += 1;
    }
    let words: Vec<String> = args[i.min(args.len())..]
        .iter()
        .filter(|a| !is_flag(a))
        .map(|a| a.text().unwrap_or_default())
        .collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let compose = name.ends_with("compose");
    let lifecycle = ["stop", "kill", "restart", "down", "pause", "rm"];
    match words.as_slice() {
        [sub, ..] if compose && lifecycle.contains(sub) => v.add(&c::DOCKER_LIFECYCLE),
        ["compose", sub, ..] if lifecycle.contains(sub) => v.add(&c::DOCKER_LIFECYCLE),
        ["container", sub, ..] if lifecycle.contains(sub) => v.add(&c::DOCKER_LIFECYCLE),
        ["stop" | "kill" | "restart" | "pause", ..] => v.add(&c::DOCKER_LIFECYCLE),
        ["rm", ..] if args.iter().any(|a| text_is(a, &["-f", "--force"])) => {
            v.add(&c::DOCKER_LIFECYCLE)
        }
        [
            "system" | "volume" | "image" | "container" | "network",
            "prune" | "rm",
            ..,
        ] => v.add(&c::DOCKER_LIFECYCLE),
        ["context", "use" | "create", ..] => v.add(&c::DOCKER_REMOTE),
        ["system", "connection", ..] => v.add(&c::DOCKER_REMOTE),
        _ => {}
    }
}

fn git(args: &[Arg], v: &mut Verdict) {
    // Skip global options (`-C dir`, `-c key=value`).
    let mut i = 0;
    while i < args.len() && is_flag(&args[i]) {
        if text_is(&args[i], &["-C", "-c", "--git-dir", "--work-tree"]) {
            i += 1;
        }
        i += 1;
    }
    let Some(sub) = args.get(i).and_then(Arg::text) else {
        return;
    };
    let rest = &args[i + 1..];
    let has = |f: &dyn Fn(&str) -> bool| rest.iter().filter_map(Arg::text).any(|t| f(&t));
    match sub.as_str() {
        "reset" if has(&|t| t.starts_with("--h") && "--hard".starts_with(t)) => {
            v.add(&c::GIT_DESTRUCTIVE)
        }
        "push"
            if has(&|t| {
                t.starts_with("--forc") || t == "-f" || (t.starts_with('+') && t.len() > 1)
            }) || rest
                .iter()
                .any(|a| short_flags(a).is_some_and(|f| f.contains('f'))) =>
        {
            v.add(&c::GIT_DESTRUCTIVE)
        }
        "clean"
            if rest
                .iter()
                .any(|a| short_flags(a).is_some_and(|f| f.contains('f')))
                || has(&|t| t == "--force") =>
        {
            v.add(&c::GIT_DESTRUCTIVE)
        }
        "branch" => {
            let delete = has(&|t| t == "-D" || t == "--delete" || t == "-d");
            let force = has(&|t| t == "-D" || t == "--force" || t == "-f");
            if delete && force {
                v.add(&c::GIT_DESTRUCTIVE);
            }
        }
        _ => {}
    }
}

fn gateway(name: &str, args: &[Arg], ctx: &Ctx, v: &mut Verdict) {
    let words: Vec<String> = operands(args)
        .iter()
        .map(|a| a.text().unwrap_or_else(|| "*".into()))
        .collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let words: &[&str] = if name == "hermes" {
        match words.as_slice() {
            ["update", ..] => {
                v.add(&c::GATEWAY_CONTROL);
                return;
            }
            ["gateway", rest @ ..] => rest,
            _ => return,
        }
    } else {
        &words
    };
    let harmless = matches!(
        words,
        [] | ["status", ..]
            | ["check-config", ..]
            | ["help", ..]
            | ["version", ..]
            | ["approvals", "list", ..]
            | ["pairing", "list", ..]
    );
    if words.first() == Some(&"run") && ctx.detached {
        v.add(&c::GATEWAY_DETACH);
    } else if !harmless {
        v.add(&c::GATEWAY_CONTROL);
    }
}

/// The class for writing into a protected place.
fn write_class(place: Place) -> &'static Class {
    match place {
        Place::GatewaySecret => &c::GATEWAY_SECRET,
        Place::ProcessMemory => &c::PROCESS_MEMORY,
        Place::BlockDevice => &c::BLOCK_DEVICE,
        Place::NetworkSocket => &c::REVERSE_SHELL,
        Place::SystemConfig => &c::ETC_WRITE,
        Place::SystemFiles => &c::SYSTEM_WRITE,
        Place::Ssh => &c::SSH_WRITE,
        Place::ShellStartup => &c::RC_WRITE,
        Place::Credentials => &c::CREDENTIALS_WRITE,
        Place::Root => &c::SYSTEM_WRITE,
    }
}

/// A word the command writes to.
fn written(arg: &Arg, cwd: Option<&Path>, scene: &Scene, v: &mut Verdict) {
    if arg.wholly_unknown() {
        v.add(&c::WRITE_DYNAMIC);
        return;
    }
    for place in places(arg, cwd, scene) {
        if place == Place::Root {
            continue;
        }
        v.add(write_class(place));
    }
}

/// Any word a command reads or names: the gateway's secrets, another process's memory and
/// network sockets are flagged whatever the command is.
fn read(arg: &Arg, cwd: Option<&Path>, scene: &Scene, v: &mut Verdict) {
    if arg.wholly_unknown() {
        return;
    }
    for place in places(arg, cwd, scene) {
        match place {
            Place::GatewaySecret => v.add(&c::GATEWAY_SECRET),
            Place::ProcessMemory => v.add(&c::PROCESS_MEMORY),
            Place::NetworkSocket => v.add(&c::REVERSE_SHELL),
            _ => {}
        }
    }
}
