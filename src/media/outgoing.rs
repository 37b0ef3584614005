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

/// The text without its `MEDIA:` tags, and the files to send (or why each cannot be).
pub fn take_media(text: &str, scene: &Scene) -> (String, Vec<Result<OutboundFile, String>>) {
    if !text.contains("MEDIA:") {
        return (text.to_owned(), Vec::new());
    }
    let mut files = Vec::new();
    let cleaned = MEDIA_TAG.replace_all(text, |caps: &regex::Captures<'_>| {
        let raw = (1..=4)
            .find_map(|i| caps.get(i))
            .map(|m| m.as_str().trim_end_matches(['.', ',', ';', ')']))
            .unwrap_or_default();
        files.push(sendable(raw, scene));
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

/// The file at `raw` if it may be sent; else why not, for the person.
fn sendable(raw: &str, scene: &Scene) -> Result<OutboundFile, String> {
    let expanded = match raw.strip_prefix("~/") {
        Some(rest) => scene.home.join(rest),
        None => PathBuf::from(raw),
    };
    let shown = expanded.display().to_string();
    let path = std::fs::canonicalize(&expanded)
        .map_err(|_| format!("⚠️ I could not send `{shown}`: there is no such file."))?;
    // Compared resolved to resolved: a home reached through a symlink is still the home.
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let scene = Scene {
        home: canonical(&scene.home),
        hermes_home: canonical(&scene.hermes_home),
        ..scene.clone()
    };
    if let Some(place) = refused_place(&path, &scene) {
        tracing::warn!(path = %path.display(), ?place, "media: refused to send a protected file");
        return Err(format!(
            "⚠️ I did not send `{shown}`: files in that place are not sent to chats."
        ));
    }
    let meta =
        std::fs::metadata(&path).map_err(|e| format!("⚠️ I could not send `{shown}`: {e}."))?;
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
    Ok(OutboundFile {
        path,
        name,
        mime: None,
        caption: None,
    })
}

fn refused_place(path: &Path, scene: &Scene) -> Option<Place> {
    let text = path.to_string_lossy();
    if ["/proc/", "/sys/", "/dev/"]
        .iter()
        .any(|p| text.starts_with(p))
    {
        return Some(Place::ProcessMemory);
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

        let text = format!(
            "Here is the chart:\nMEDIA:{}\nand `MEDIA:{}` too, plus MEDIA:\"{}\" and MEDIA:/nope/missing.pdf.",
            chart.display(),
            sneaky.display(),
            hermes_home.join(".env").display()
        );
        let (cleaned, files) = take_media(&text, &scene);
        assert!(!cleaned.contains("MEDIA:"), "{cleaned}");
        assert!(cleaned.starts_with("Here is the chart:"), "{cleaned}");
        assert_eq!(files.len(), 4);
        assert_eq!(
            files[0].as_ref().unwrap().path,
            chart.canonicalize().unwrap()
        );
        assert_eq!(files[0].as_ref().unwrap().name, "chart.png");
        assert!(files[1].as_ref().unwrap_err().contains("not sent to chats"));
        assert!(files[2].as_ref().unwrap_err().contains("not sent to chats"));
        assert!(files[3].as_ref().unwrap_err().contains("no such file"));

        let (plain, none) = take_media("no tags here", &scene);
        assert_eq!((plain.as_str(), none.len()), ("no tags here", 0));
    }
}
