//! The fuzz corpora, replayed on stable: every file in `fuzz/corpus/<target>/` (the seeds
//! and what fuzzing added) and `fuzz/regressions/<target>/` (inputs that once found
//! something) through its target. A panic fails the test naming the file; a target with no
//! file at all fails too (a moved corpus must not pass by replaying nothing), and so does
//! one whose seeds all miss (the seeds are realistic payloads: at least one must make an
//! event or a message).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use hermes_fuzzing::TARGETS;

/// `fuzz/` at the root of the repository.
fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of a directory, sorted; none when it does not exist.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(no message)".into())
}

#[test]
fn every_corpus_file_runs_through_its_target_without_a_finding() {
    let mut failures = Vec::new();
    for (target, run) in TARGETS {
        let seeds = files(&fuzz_dir().join("corpus").join(target));
        let regressions = files(&fuzz_dir().join("regressions").join(target));
        assert!(
            !seeds.is_empty(),
            "no corpus for {target} in {}",
            fuzz_dir().join("corpus").join(target).display()
        );
        let mut reached = 0;
        for file in seeds.iter().chain(&regressions) {
            let data = std::fs::read(file).expect("a corpus file");
            match catch_unwind(AssertUnwindSafe(|| run(&data))) {
                Ok(made) => {
                    println!("{target}: {} made {made}", file.display());
                    reached += made;
                }
                Err(panic) => failures.push(format!(
                    "{target}: {} panicked: {}",
                    file.display(),
                    message(panic.as_ref())
                )),
            }
        }
        assert!(
            reached > 0,
            "no file of {target}'s corpus made anything: the seeds no longer fit the target"
        );
    }
    assert!(failures.is_empty(), "findings:\n{}", failures.join("\n"));
}
