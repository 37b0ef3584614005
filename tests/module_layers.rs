//! The daemon's modules form layers, as `docs/architecture.md` draws them (its `layers`
//! block, top layer first): a module of `src/` may name (`crate::…`) only modules of the
//! layers below its own, never one of its own layer or above. A new upward import fails
//! here; so does a module the drawing leaves out. The imports are read as text, comments
//! left out, so a path written in a string counts too (better too strict than blind).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The layers in the architecture document, top first: one line each, modules by name.
fn drawn_layers() -> Vec<Vec<String>> {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/architecture.md")).unwrap();
    let block = doc
        .split("```layers\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/architecture.md has a ```layers block");
    block
        .lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .collect()
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`None` for the crate root).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next()?.as_os_str().to_string_lossy();
    let name = first.trim_end_matches(".rs").to_owned();
    (!matches!(name.as_str(), "lib" | "main")).then_some(name)
}

/// The top-level modules `text` names through `crate::` (in a path or a `crate::{…}`
/// group, over several lines too), with the line each is on.
fn named_modules(text: &str) -> Vec<(String, usize)> {
    let code: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let line_at = |at: usize| code[..at].matches('\n').count() + 1;
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut named = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            let name = ident(rest);
            if !name.is_empty() {
                named.push((name, line_at(at)));
            }
            continue;
        };
        // The first name of each item at the group's own depth.
        let (mut depth, mut item_start) = (0usize, true);
        for (offset, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => item_start = true,
                c if item_start && (c.is_alphanumeric() || c == '_') => {
                    named.push((ident(&group[offset..]), line_at(at + 8 + offset)));
                    item_start = false;
                }
                _ => {}
            }
        }
    }
    named
}

#[test]
fn every_module_names_only_the_layers_below_its_own() {
    let layers = drawn_layers();
    let mut layer_of = BTreeMap::new();
    for (index, layer) in layers.iter().enumerate() {
        for module in layer {
            assert!(
                layer_of
                    .insert(module.clone(), layers.len() - index)
                    .is_none(),
                "{module} is drawn twice in docs/architecture.md's layers"
            );
        }
    }
    let src = Path::new(ROOT).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut modules = BTreeSet::new();
    let mut wrong = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        modules.insert(module.clone());
        let Some(&own) = layer_of.get(&module) else {
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (named, line) in named_modules(&text) {
            if named == module {
                continue;
            }
            let Some(&theirs) = layer_of.get(&named) else {
                continue;
            };
            if theirs >= own {
                wrong.push(format!(
                    "{}:{line}: {module} (layer {own}) names crate::{named} (layer {theirs})",
                    file.strip_prefix(ROOT).unwrap().display()
                ));
            }
        }
    }
    let undrawn: Vec<_> = modules
        .difference(&layer_of.keys().cloned().collect())
        .cloned()
        .collect();
    assert!(
        undrawn.is_empty(),
        "modules missing from docs/architecture.md's layers: {undrawn:?}"
    );
    let gone: Vec<_> = layer_of.keys().filter(|m| !modules.contains(*m)).collect();
    assert!(
        gone.is_empty(),
        "layers name modules src/ does not have: {gone:?}"
    );
    assert!(
        wrong.is_empty(),
        "imports that run up or across the layers (move the shared piece down, or pass it \
         in through a trait the lower layer declares):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn imports_are_found_in_paths_groups_and_not_in_comments() {
    let text = "use crate::store::Store;\nuse crate::{config, tools::{Tool, x}};\n// crate::agent\n\
                let x = crate::metrics::turn(); // crate::daemon\nuse crate::{\n    media,\n    llm::{a, b},\n};\n";
    let names = named_modules(text);
    assert_eq!(
        names,
        [
            ("store".to_owned(), 1),
            ("config".to_owned(), 2),
            ("tools".to_owned(), 2),
            ("metrics".to_owned(), 4),
            ("media".to_owned(), 6),
            ("llm".to_owned(), 7),
        ]
    );
}
