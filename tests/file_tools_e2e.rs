//! The file tools end to end (the real daemon, the fake Telegram, the fake LLM): a write,
//! read, patch and search round trip in the working directory, and a write to `~/.bashrc`
//! that waits for the person's approval (denied: nothing written; allowed: written).

mod common;

use common::*;
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;
use hermes_testkit::telegram::FakeTelegram;
use serde_json::json;

fn call(name: &str, arguments: serde_json::Value) -> Reply {
    Reply::ToolCall {
        name: name.into(),
        arguments,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_written_read_patched_and_searched() {
    let w = World::allow_all().await;
    w.llm.push(call(
        "write_file",
        json!({"path": "notes/todo.md", "content": "- buy milk\n- call Ana\n"}),
    ));
    w.llm.push(call(
        "patch",
        json!({"path": "notes/todo.md", "old_string": "call Ana", "new_string": "call Ana at 5"}),
    ));
    w.llm.push(Reply::ToolCalls(vec![
        ("read_file".into(), json!({"path": "notes/todo.md"})),
        ("search_files".into(), json!({"pattern": "Ana at \\d"})),
    ]));
    w.llm.push(Reply::text("noted"));
    let _d = w.start();
    assert_eq!(w.ask("remember to call Ana at 5").await, ["noted"]);
    let results = tool_results(&w);
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(results[0].starts_with("created"), "{results:?}");
    assert!(results[1].contains("+- call Ana at 5"), "{results:?}");
    assert_eq!(results[2], "1|- buy milk\n2|- call Ana at 5\n");
    assert_eq!(results[3], "notes/todo.md:2:- call Ana at 5");
    let written = std::fs::read_to_string(w.home.dir.join("work/notes/todo.md")).unwrap();
    assert_eq!(written, "- buy milk\n- call Ana at 5\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_bashrc_waits_for_approval() {
    let w = World::allow_all().await;
    let home = tempfile::tempdir().unwrap();
    let bashrc = home.path().join(".bashrc");
    let write = |content: &str| {
        call(
            "write_file",
            json!({"path": "~/.bashrc", "content": content}),
        )
    };
    w.llm.push(write("alias ls='rm -rf'\n"));
    w.llm.push(Reply::text("it was refused"));
    w.llm.push(write("export EDITOR=vim\n"));
    w.llm.push(Reply::text("written"));
    let _d = hermes_testkit::daemon::Daemon::start(
        BIN,
        &w.home,
        &[("HOME", home.path().to_str().unwrap())],
    );
    let t = w.telegram.clone();
    w.telegram.dm(ALICE, "change my shell");
    let prompt = eventually(WAIT, "the approval prompt", || {
        t.prompts(ALICE).first().cloned()
    })
    .await;
    let text = prompt.1["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.contains(".bashrc"), "{text}");
    assert!(!bashrc.exists(), "nothing is written before the decision");
    let deny = FakeTelegram::button_data(&prompt.1, "Deny");
    w.telegram.press(ALICE, ALICE, prompt.0, &deny);
    eventually(WAIT, "the refusal answered", || {
        t.sent_texts(ALICE)
            .contains(&"it was refused".to_owned())
            .then_some(())
    })
    .await;
    assert!(!bashrc.exists(), "a denied write writes nothing");

    w.telegram.dm(ALICE, "try again");
    let prompt = eventually(WAIT, "the second prompt", || {
        t.prompts(ALICE).get(1).cloned()
    })
    .await;
    let allow = FakeTelegram::button_data(&prompt.1, "Allow once");
    w.telegram.press(ALICE, ALICE, prompt.0, &allow);
    eventually(WAIT, "the write answered", || {
        t.sent_texts(ALICE)
            .contains(&"written".to_owned())
            .then_some(())
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(&bashrc).unwrap(),
        "export EDITOR=vim\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_to_different_files_run_together_and_to_one_file_in_order() {
    let w = World::allow_all().await;
    let home = tempfile::tempdir().unwrap();
    // The write to ~/.bashrc waits for the person; the other file's write does not wait
    // for it.
    w.llm.push(Reply::ToolCalls(vec![
        (
            "write_file".into(),
            json!({"path": "~/.bashrc", "content": "export A=1\n"}),
        ),
        (
            "write_file".into(),
            json!({"path": "notes/a.txt", "content": "alpha\n"}),
        ),
    ]));
    w.llm.push(Reply::ToolCalls(vec![
        (
            "write_file".into(),
            json!({"path": "notes/b.txt", "content": "one\n"}),
        ),
        (
            "patch".into(),
            json!({"path": "notes/b.txt", "old_string": "one", "new_string": "two"}),
        ),
    ]));
    w.llm.push(Reply::text("done"));
    let _d = hermes_testkit::daemon::Daemon::start(
        BIN,
        &w.home,
        &[("HOME", home.path().to_str().unwrap())],
    );
    w.telegram.dm(ALICE, "write the notes");
    let p = prompt(&w, ALICE, 1).await;
    let other = w.home.dir.join("work/notes/a.txt");
    eventually(
        WAIT,
        "the other file written while the prompt waits",
        || other.exists().then_some(()),
    )
    .await;
    assert!(!home.path().join(".bashrc").exists());
    press(&w, ALICE, ALICE, &p, "Deny");
    assert_eq!(w.replies(ALICE, 2).await.last().unwrap(), "done");
    let results = tool_results(&w);
    assert!(results[2].starts_with("created"), "{results:?}");
    assert!(
        results[3].contains("+two"),
        "the patch saw the write: {results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(w.home.dir.join("work/notes/b.txt")).unwrap(),
        "two\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_confined_writes_a_write_outside_the_working_directory_waits_for_approval() {
    let w = World::allow_all().await;
    let config = w.home.dir.join("config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replacen("terminal:\n", "terminal:\n  confine_writes: true\n", 1),
    )
    .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let outside = elsewhere.path().join("notes.txt");
    w.llm.push(Reply::ToolCalls(vec![
        (
            "write_file".into(),
            json!({"path": "inside.txt", "content": "fine\n"}),
        ),
        (
            "write_file".into(),
            json!({"path": outside.display().to_string(), "content": "elsewhere\n"}),
        ),
    ]));
    w.llm.push(Reply::text("one written"));
    let _d = w.start();
    w.telegram.dm(ALICE, "write both");
    let p = prompt(&w, ALICE, 1).await;
    let shown = p.1["text"].as_str().unwrap();
    assert!(
        shown.contains("outside the working directory") && shown.contains("notes.txt"),
        "{shown}"
    );
    assert!(
        w.home.dir.join("work/inside.txt").exists(),
        "inside needs no approval"
    );
    press(&w, ALICE, ALICE, &p, "Deny");
    assert_eq!(w.replies(ALICE, 2).await.last().unwrap(), "one written");
    assert!(!outside.exists(), "the denied write wrote nothing");
}
