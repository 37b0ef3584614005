use super::*;
use std::sync::Arc;

use serde_json::json;

use crate::tools::Tool;

/// The file tools in a temporary directory, with an approval broker that never needs to ask
/// (these tests use ordinary paths; the gate is tested end to end).
struct Bench {
    dir: tempfile::TempDir,
    files: Arc<Files>,
}

fn bench() -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let approvals = crate::approval::ApprovalBroker::for_tests();
    let files = Arc::new(Files::new(
        dir.path().to_path_buf(),
        "/nonexistent/hermes".into(),
        approvals,
    ));
    Bench { dir, files }
}

async fn call(tool: &dyn Tool, args: serde_json::Value) -> String {
    let ctx = crate::tools::ToolContext::for_tests();
    tool.run(args, &ctx).await.text
}

#[tokio::test]
async fn read_write_and_patch_round_trip() {
    let b = bench();
    let write = edit::WriteFileTool(b.files.clone());
    let read = read::ReadFileTool(b.files.clone());
    let patch = edit::PatchTool(b.files.clone());
    let out = call(
        &write,
        json!({"path": "sub/notes.txt", "content": "alpha\nbeta\ngamma\nbeta\n"}),
    )
    .await;
    assert!(out.starts_with("created"), "{out}");
    assert_eq!(
        call(
            &read,
            json!({"path": "sub/notes.txt", "offset": 2, "limit": 2})
        )
        .await,
        "2|beta\n3|gamma\n[… more lines follow: read_file with offset 4 to continue]\n"
    );
    let twice = call(
        &patch,
        json!({"path": "sub/notes.txt", "old_string": "beta", "new_string": "BETA"}),
    )
    .await;
    assert!(twice.contains("found 2 times"), "{twice}");
    let once = call(
        &patch,
        json!({"path": "sub/notes.txt", "old_string": "gamma", "new_string": "GAMMA"}),
    )
    .await;
    assert!(once.contains("-gamma") && once.contains("+GAMMA"), "{once}");
    let all = call(&patch, json!({"path": "sub/notes.txt", "old_string": "beta", "new_string": "b", "replace_all": true})).await;
    assert!(all.starts_with("patched"), "{all}");
    let diff = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n-alpha\n+ALPHA\n b\n";
    let applied = call(
        &patch,
        json!({"mode": "patch", "path": "sub/notes.txt", "patch": diff}),
    )
    .await;
    assert!(applied.starts_with("patched"), "{applied}");
    assert_eq!(
        std::fs::read_to_string(b.dir.path().join("sub/notes.txt")).unwrap(),
        "ALPHA\nb\nGAMMA\nb\n"
    );
    let missing = call(
        &patch,
        json!({"path": "sub/notes.txt", "old_string": "zeta", "new_string": "z"}),
    )
    .await;
    assert!(missing.contains("not found"), "{missing}");
}

#[tokio::test]
async fn reads_are_capped_and_binaries_refused() {
    let b = bench();
    let read = read::ReadFileTool(b.files.clone());
    std::fs::write(b.dir.path().join("bin"), [0u8, 1, 2, 3]).unwrap();
    assert!(
        call(&read, json!({"path": "bin"}))
            .await
            .contains("binary file (4 bytes)")
    );
    let long: String = (0..3_000)
        .map(|i| format!("{i} {}\n", "x".repeat(60)))
        .collect();
    std::fs::write(b.dir.path().join("long"), long).unwrap();
    let out = call(&read, json!({"path": "long", "limit": 2000})).await;
    assert!(out.len() <= 100_200, "{}", out.len());
    assert!(
        out.contains("stopped at 100000 characters"),
        "{}",
        &out[out.len() - 200..]
    );
    let wide = "y".repeat(5_000);
    std::fs::write(b.dir.path().join("wide"), &wide).unwrap();
    assert!(
        call(&read, json!({"path": "wide"}))
            .await
            .ends_with("[…line cut]\n")
    );
    assert!(
        call(&read, json!({"path": "nope"}))
            .await
            .contains("no such file")
    );
    assert_eq!(call(&read, json!({})).await, "error: `path` is required");
}

#[tokio::test]
async fn search_finds_content_and_names_and_skips_what_git_ignores() {
    let b = bench();
    let search = search::SearchFilesTool(b.files.clone());
    let root = b.dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir_all(root.join("target")).unwrap();
    std::fs::write(
        root.join("src/main.rs"),
        "fn main() {\n    println!(\"needle\");\n}\n",
    )
    .unwrap();
    std::fs::write(root.join("src/lib.py"), "needle = 1\n").unwrap();
    std::fs::write(root.join("target/out.rs"), "needle\n").unwrap();
    std::fs::write(root.join("blob"), [b'n', 0, b'e']).unwrap();
    let found = call(&search, json!({"pattern": "needle"})).await;
    assert!(
        found.contains("src/main.rs:2:    println!(\"needle\");"),
        "{found}"
    );
    assert!(found.contains("src/lib.py:1:needle = 1"), "{found}");
    assert!(!found.contains("target/"), "ignored: {found}");
    let only_rs = call(&search, json!({"pattern": "needle", "file_glob": "*.rs"})).await;
    assert!(!only_rs.contains("lib.py"), "{only_rs}");
    let names = call(&search, json!({"pattern": "*.py", "target": "files"})).await;
    assert_eq!(names, "src/lib.py");
    let counted = call(
        &search,
        json!({"pattern": "needle", "output_mode": "count"}),
    )
    .await;
    assert!(counted.contains("src/main.rs: 1"), "{counted}");
    let paged = call(&search, json!({"pattern": "needle", "limit": 1})).await;
    assert!(paged.contains("offset 1"), "{paged}");
    assert!(
        call(&search, json!({"pattern": "("}))
            .await
            .contains("is not a regex")
    );
}

/// A home with the gateway's home inside it, as on a real host.
fn hermes_bench() -> (tempfile::TempDir, Arc<Files>) {
    let dir = tempfile::tempdir().unwrap();
    let hermes = dir.path().join(".hermes");
    std::fs::create_dir_all(&hermes).unwrap();
    std::fs::write(hermes.join(".env"), "TELEGRAM_BOT_TOKEN=123:SECRET\n").unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let files = Arc::new(Files::new(
        work,
        hermes,
        crate::approval::ApprovalBroker::for_tests(),
    ));
    (dir, files)
}

#[tokio::test]
async fn links_proc_and_ignore_files_do_not_reach_the_gateways_secrets() {
    let (dir, files) = hermes_bench();
    let read = read::ReadFileTool(files.clone());
    let write = edit::WriteFileTool(files.clone());
    let search = search::SearchFilesTool(files.clone());
    let work = dir.path().join("work");
    std::os::unix::fs::symlink("../.hermes/.env", work.join("notes.txt")).unwrap();
    let env = dir.path().join(".hermes/.env");
    for path in [
        "notes.txt".to_owned(),
        env.display().to_string(),
        format!("/proc/self/root{}", env.display()),
        "/proc/self/environ".to_owned(),
    ] {
        let out = call(&read, json!({"path": path})).await;
        assert!(out.contains("off limits"), "{path}: {out}");
        assert!(!out.contains("SECRET"), "{path}: {out}");
    }
    let out = call(&write, json!({"path": "notes.txt", "content": "x"})).await;
    assert!(out.contains("off limits"), "{out}");
    assert!(std::fs::read_to_string(&env).unwrap().contains("SECRET"));
    // An ignore file that un-hides the gateway's home does not open it to the search.
    std::fs::write(dir.path().join(".ignore"), "!/.hermes/\n!.env\n").unwrap();
    let found = call(
        &search,
        json!({"pattern": "SECRET", "path": dir.path().display().to_string()}),
    )
    .await;
    assert!(!found.contains("SECRET"), "{found}");
    let unit = format!(
        "{}/.config/systemd/user/x.service",
        std::env::var("HOME").unwrap()
    );
    let out = call(&write, json!({"path": unit, "content": "[Service]"})).await;
    assert!(
        out.contains("off limits") || out.contains("service units"),
        "{out}"
    );
}

#[tokio::test]
async fn fifos_and_huge_replacements_are_refused() {
    let (dir, files) = hermes_bench();
    let read = read::ReadFileTool(files.clone());
    let patch = edit::PatchTool(files.clone());
    let fifo = dir.path().join("work/pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let out = call(&read, json!({"path": "pipe"})).await;
    assert!(out.contains("not a regular file"), "{out}");
    std::fs::write(dir.path().join("work/a.txt"), "a".repeat(60_000)).unwrap();
    let big = "b".repeat(50_000);
    let out = call(
        &patch,
        json!({"path": "a.txt", "old_string": "a", "new_string": big, "replace_all": true}),
    )
    .await;
    assert!(out.contains("would be larger"), "{out}");
}
