//! Files the agent sends, the Hermes way: `MEDIA:/path` tags in its final text (bare,
//! quoted or in backticks) are taken out of the text and the files sent after it. A path
//! must resolve (symlinks followed) to a regular file of at most 50 MB that is not one of
//! the protected places (the gateway's own secrets, `/proc`, `/etc`, `~/.ssh`, credential
//! files…): a prompt-injected model must not be able to mail the keys to the chat. What
//! cannot be sent is said in the text instead.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use hermes_adapter::OutboundFile;
use regex::Regex;

use crate::approval::detect::{Place, Scene, protected_places};

/// The largest file a bot may upload (Telegram's limit).
const MAX_SEND_BYTES: u64 = 50 * 1024 * 1024;

static MEDIA_TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"MEDIA:\s*(?:`([^`\n]+)`|"([^"\n]+)"|'([^'\n]+)'|((?:~/|/)[^\s`"']+))"#)
        .expect("valid regex")
});

/// The text without its `MEDIA:` tags, and the files to send (or why each cannot be). Each
/// file sent is a private copy made in `copies` at the moment it was checked, so what is
/// uploaded later (after retries, after a restart) is what was checked.
pub fn take_media(
    text: &str,
    scene: &Scene,
    copies: &Path,
) -> (String, Vec<Result<OutboundFile, String>>) {
    if !text.contains("MEDIA:") {
        return (text.to_owned(), Vec::new());
    }
    // Compared resolved to resolved: a home reached through a symlink is still the home.
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let scene = &Scene {
        home: canonical(&scene.home),
        hermes_home: canonical(&scene.hermes_home),
        other_homes: scene.other_homes.iter().map(|h| canonical(h)).collect(),
        cwd: canonical(&scene.cwd),
        ..scene.clone()
    };
    let mut files = Vec::new();
    let cleaned = MEDIA_TAG.replace_all(text, |caps: &regex::Captures<'_>| {
        let raw = (1..=4)
            .find_map(|i| caps.get(i))
            .map(|m| m.as_str().trim_end_matches(['.', ',', ';', ')']))
            .unwrap_or_default();
        files.push(sendable(raw, scene, copies));
        ""
    });
    let cleaned = cleaned
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_owned();
    (cleaned, files)
}

/// A private copy of the file at `raw` if it may be sent; else why not, for the person.
/// `scene`'s directories are resolved already.
/// The check runs on the path asked for and again on the file actually opened (a link
/// swapped in between is caught), and the gateway's secret files are recognised by their
/// inode too (a hard link elsewhere is caught).
fn sendable(raw: &str, scene: &Scene, copies: &Path) -> Result<OutboundFile, String> {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;

    let expanded = match raw.strip_prefix("~/") {
        Some(rest) => scene.home.join(rest),
        None if Path::new(raw).is_relative() => scene.cwd.join(raw),
        None => PathBuf::from(raw),
    };
    let shown = expanded.display().to_string();
    let refused =
        || format!("⚠️ I did not send `{shown}`: files in that place are not sent to chats.");
    let path = std::fs::canonicalize(&expanded)
        .map_err(|_| format!("⚠️ I could not send `{shown}`: there is no such file."))?;
    if let Some(place) = refused_place(&path, scene) {
        tracing::warn!(path = %path.display(), ?place, "media: refused to send a protected file");
        return Err(refused());
    }
    let mut file =
        std::fs::File::open(&path).map_err(|e| format!("⚠️ I could not send `{shown}`: {e}."))?;
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .unwrap_or_else(|_| path.clone());
    let meta = file
        .metadata()
        .map_err(|e| format!("⚠️ I could not send `{shown}`: {e}."))?;
    let secret_inode = scene
        .gateway_homes()
        .flat_map(|home| {
            [".env", "config.yaml", "gateway.db", "auth.json"].map(|name| home.join(name))
        })
        .filter_map(|path| std::fs::metadata(path).ok())
        .any(|m| m.dev() == meta.dev() && m.ino() == meta.ino());
    if secret_inode || refused_place(&opened, scene).is_some() {
        tracing::warn!(path = %opened.display(), "media: refused to send a protected file");
        return Err(refused());
    }
    if !meta.is_file() {
        return Err(format!("⚠️ I could not send `{shown}`: it is not a file."));
    }
    if meta.len() > MAX_SEND_BYTES {
        return Err(format!(
            "⚠️ I could not send `{shown}`: it is larger than 50 MB."
        ));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let copy = keep_copy(&mut file, &name, meta.len(), copies)
        .map_err(|e| format!("⚠️ I could not send `{shown}`: keeping a copy failed ({e})."))?;
    Ok(OutboundFile {
        path: copy,
        name,
        mime: None,
        caption: None,
        voice: false,
    })
}

/// Copy what was opened into the private directory of files waiting to be sent.
fn keep_copy(
    file: &mut std::fs::File,
    name: &str,
    size: u64,
    copies: &Path,
) -> std::io::Result<PathBuf> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;

    super::documents::private_dir(copies)?;
    super::documents::prune(copies, size);
    let path = copies.join(super::documents::kept_name(name));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    std::io::copy(&mut file.take(MAX_SEND_BYTES + 1), &mut out)?;
    Ok(path)
}

fn refused_place(path: &Path, scene: &Scene) -> Option<Place> {
    let text = path.to_string_lossy();
    if ["/proc/", "/sys/", "/dev/"]
        .iter()
        .any(|p| text.starts_with(p))
    {
        return Some(Place::ProcessMemory);
    }
    // Nothing of a gateway's home (its secrets, its database, other chats' files),
    // unless it is in a working directory for commands set up inside its own.
    if scene.in_gateway_home(path) {
        return Some(Place::GatewaySecret);
    }
    const PRIVATE: &[&str] = &[
        ".gnupg",
        ".config/gcloud",
        ".azure",
        ".password-store",
        ".bash_history",
        ".zsh_history",
        ".python_history",
        ".psql_history",
        ".mysql_history",
    ];
    if PRIVATE.iter().any(|p| path.starts_with(scene.home.join(p))) {
        return Some(Place::Credentials);
    }
    protected_places(path, scene).into_iter().find(|place| {
        matches!(
            place,
            Place::GatewaySecret
                | Place::ProcessMemory
                | Place::BlockDevice
                | Place::SystemConfig
                | Place::Ssh
                | Place::Credentials
                | Place::ShellStartup
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_leave_the_text_and_only_safe_files_go() {
        let dir = tempfile::tempdir().unwrap();
        let hermes_home = dir.path().join("hermes");
        std::fs::create_dir_all(&hermes_home).unwrap();
        std::fs::write(hermes_home.join(".env"), "TOKEN=x").unwrap();
        let chart = dir.path().join("chart.png");
        std::fs::write(&chart, b"png").unwrap();
        // A link to a secret is the secret.
        let sneaky = dir.path().join("innocent.txt");
        std::os::unix::fs::symlink(hermes_home.join(".env"), &sneaky).unwrap();
        let scene = Scene::of_this_process(hermes_home.clone(), dir.path().to_path_buf());
        let copies = hermes_home.join("cache").join("outgoing");
        // A hard link to a secret is the secret too.
        let hard = dir.path().join("notes.txt");
        std::fs::hard_link(hermes_home.join(".env"), &hard).unwrap();

        let text = format!(
            "Here is the chart:\nMEDIA:{}\nand `MEDIA:{}` too, plus MEDIA:\"{}\" and MEDIA:/nope/missing.pdf.",
            chart.display(),
            sneaky.display(),
            hermes_home.join(".env").display()
        );
        let (cleaned, files) = take_media(&text, &scene, &copies);
        assert!(!cleaned.contains("MEDIA:"), "{cleaned}");
        assert!(cleaned.starts_with("Here is the chart:"), "{cleaned}");
        assert_eq!(files.len(), 4);
        let sent = files[0].as_ref().unwrap();
        assert_eq!(sent.name, "chart.png");
        assert!(
            sent.path.starts_with(&copies),
            "a private copy: {:?}",
            sent.path
        );
        assert_eq!(std::fs::read(&sent.path).unwrap(), b"png");
        assert!(files[1].as_ref().unwrap_err().contains("not sent to chats"));
        assert!(files[2].as_ref().unwrap_err().contains("not sent to chats"));
        assert!(files[3].as_ref().unwrap_err().contains("no such file"));

        let (_, hard_linked) = take_media(&format!("MEDIA:{}", hard.display()), &scene, &copies);
        assert!(
            hard_linked[0]
                .as_ref()
                .unwrap_err()
                .contains("not sent to chats")
        );

        let (plain, none) = take_media("no tags here", &scene, &copies);
        assert_eq!((plain.as_str(), none.len()), ("no tags here", 0));
    }
}
