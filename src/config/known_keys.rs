//! Which `config.yaml` keys anyone knows: Hermes' own (`hermes_keys.txt`, made from Hermes
//! 0.19.0 by `tests/fixtures/hermes_keys.py`) and the ones the gateway asked for while
//! reading. A key Hermes knows and the gateway ignores is information; a key neither knows
//! is a typo until shown otherwise, and is said with the nearest known key.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use super::Problem;

/// Hermes' keys; `prefix.*` takes any key below `prefix`.
static HERMES_KEYS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    include_str!("hermes_keys.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
});

/// How Hermes knows a key.
#[derive(Debug, PartialEq, Eq)]
enum Hermes {
    /// By name (a leaf, or a mapping left empty).
    Names,
    /// Only as somewhere below a mapping that takes any key (`platforms.*`).
    Takes,
    Not,
}

fn hermes_knows(path: &str) -> Hermes {
    let below = |parent: &str, key: &str| {
        key.strip_prefix(parent)
            .is_some_and(|rest| rest.starts_with('.'))
    };
    let named = HERMES_KEYS
        .iter()
        .any(|known| !known.ends_with(".*") && (*known == path || below(path, known)));
    let taken = HERMES_KEYS.iter().any(|known| {
        known
            .strip_suffix(".*")
            .is_some_and(|prefix| path == prefix || below(prefix, path))
    });
    match (named, taken) {
        (true, _) => Hermes::Names,
        (false, true) => Hermes::Takes,
        (false, false) => Hermes::Not,
    }
}

/// Unread keys split into the ones Hermes knows (listed as ignored) and a problem for each
/// key neither knows, with the nearest key either knows when one is close. Below a mapping
/// Hermes leaves open (`platforms.*`), a key next to one the gateway reads is its typo
/// (`platforms.telegram.extra.requre_mention`); anything else there is Hermes'.
pub(super) fn sort_unread(
    unread: Vec<String>,
    asked: &BTreeSet<String>,
) -> (Vec<String>, Vec<Problem>) {
    let mut ignored = Vec::new();
    let mut unknown = Vec::new();
    for path in unread {
        match hermes_knows(&path) {
            Hermes::Names => ignored.push(path),
            Hermes::Takes => match closest(&path, asked.iter().map(String::as_str)) {
                Some(near) => unknown.push(Problem::warning(
                    path,
                    format!("hermes-gateway does not read this key; did you mean `{near}`?"),
                )),
                None => ignored.push(path),
            },
            Hermes::Not => {
                let hermes = HERMES_KEYS.iter().filter(|k| !k.ends_with(".*")).copied();
                let message = match closest(&path, hermes.chain(asked.iter().map(String::as_str))) {
                    Some(near) => format!(
                        "neither hermes-gateway nor Hermes knows this key; did you mean `{near}`?"
                    ),
                    None => "neither hermes-gateway nor Hermes knows this key".to_owned(),
                };
                unknown.push(Problem::warning(path, message));
            }
        }
    }
    (ignored, unknown)
}

/// Of `candidates`, the key of the same depth closest to `path` by edit distance (a
/// swapped pair of letters counts once), when it is close enough to be the one meant.
fn closest<'a>(path: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let depth = path.split('.').count();
    let leaf_len = path.rsplit('.').next().unwrap_or(path).chars().count();
    let close_enough = (leaf_len / 3).clamp(1, 3);
    candidates
        .filter(|k| *k != path && k.split('.').count() == depth)
        .map(|k| (strsim::damerau_levenshtein(path, k), k))
        .filter(|(distance, _)| *distance <= close_enough)
        .min()
        .map(|(_, k)| k.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(keys: &[&str]) -> BTreeSet<String> {
        keys.iter().map(|k| k.to_string()).collect()
    }

    #[test]
    fn typos_under_model_are_problems_with_the_key_meant() {
        let (ignored, problems) = sort_unread(
            vec!["model.defualt".into(), "model.api_kye".into()],
            &asked(&["model.default", "model.api_key", "model.base_url"]),
        );
        assert!(ignored.is_empty());
        let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(said[0].contains("did you mean `model.default`"), "{said:?}");
        assert!(said[1].contains("did you mean `model.api_key`"), "{said:?}");
    }

    #[test]
    fn a_hermes_setting_the_gateway_ignores_is_only_listed() {
        let (ignored, problems) = sort_unread(
            vec![
                "display.compact".into(),
                "providers.mine.base_url".into(),
                "security.tirith_enabled".into(),
            ],
            &asked(&[]),
        );
        assert_eq!(ignored.len(), 3, "{problems:?}");
        assert!(problems.is_empty());
    }

    #[test]
    fn a_typo_below_an_open_hermes_mapping_is_caught_by_the_key_the_gateway_reads() {
        let (ignored, problems) = sort_unread(
            vec![
                "platforms.telegram.extra.requre_mention".into(),
                "platforms.telegram.extra.rich_messages".into(),
                "telegram.require_mention".into(),
            ],
            &asked(&["platforms.telegram.extra.require_mention"]),
        );
        assert_eq!(
            ignored,
            [
                "platforms.telegram.extra.rich_messages",
                "telegram.require_mention"
            ]
        );
        assert!(
            problems[0]
                .to_string()
                .contains("did you mean `platforms.telegram.extra.require_mention`"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_key_far_from_any_known_one_is_said_without_a_guess() {
        let (_, problems) = sort_unread(vec!["frobnicate.level".into()], &asked(&[]));
        let said = problems[0].to_string();
        assert!(said.contains("neither hermes-gateway nor Hermes"), "{said}");
        assert!(!said.contains("did you mean"), "{said}");
    }
}
