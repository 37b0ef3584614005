//! The web chat beyond the conformance kit: its door (the login token, the cookie and the
//! API header, `Host` and `Origin`), files both ways, a reply that waits for a page across
//! a daemon restart, and `web-url`.

use std::time::Duration;

use hermes_testkit::conformance::{Kit, WAIT};
use hermes_testkit::eventually;
use hermes_testkit::llm::{Reply, last_user_text};
use hermes_testkit::webchat::{FakeWebPage, TOKEN};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_hermes-gateway");

async fn kit() -> Kit<FakeWebPage> {
    Kit::open(FakeWebPage::start().await, BINARY).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_login_from_another_site_or_host_nothing_gets_in() {
    let kit = kit().await;
    kit.fake.go_away(Duration::from_secs(3600));
    let _d = kit.start();
    let page = kit.fake.client().await; // waits for the listener
    let base = kit.fake.base_url();
    let http = reqwest::Client::new();
    let send = json!({"chat": "c-door", "id": "m-door-0001", "text": "rm -rf ~"});
    let status = |r: reqwest::Result<reqwest::Response>| r.map_or(0, |r| r.status().as_u16());

    // The page itself needs nothing, and says what may run in it.
    let index = http.get(format!("{base}/")).send().await.unwrap();
    let csp = index.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{csp}");

    // A wrong token, no cookie, a cookie without the API header, another site, another host.
    let wrong = http
        .post(format!("{base}/api/login"))
        .header("origin", &base)
        .json(&json!({"token": "dGVzdC10b2tlbi1mb3ItdGhlLXdlYi1jaGF0LWZha2X"}))
        .send()
        .await;
    assert_eq!(status(wrong), 401);
    let foreign_login = http
        .post(format!("{base}/api/login"))
        .header("origin", "https://evil.example")
        .json(&json!({"token": TOKEN}))
        .send()
        .await;
    assert_eq!(
        status(foreign_login),
        403,
        "a login posted from another site"
    );
    let bare = http
        .post(format!("{base}/api/send"))
        .header("origin", &base)
        .json(&send)
        .send()
        .await;
    assert_eq!(status(bare), 401, "no cookie");
    let login = http
        .post(format!("{base}/api/login"))
        .header("origin", &base)
        .json(&json!({"token": TOKEN}))
        .send()
        .await
        .unwrap();
    let set_cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"),
        "{set_cookie}"
    );
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    let session = login.json::<Value>().await.unwrap()["session"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(
        cookie.split('=').nth(1).unwrap(),
        session,
        "the header is not the cookie"
    );
    let cookie_only = http
        .post(format!("{base}/api/send"))
        .header("origin", &base)
        .header("cookie", &cookie)
        .json(&send)
        .send()
        .await;
    assert_eq!(
        status(cookie_only),
        401,
        "the cookie alone (another port of this host has it too)"
    );
    let stream_cookie_only = http
        .get(format!("{base}/api/events"))
        .header("cookie", &cookie)
        .send()
        .await;
    assert_eq!(status(stream_cookie_only), 401);
    let csrf = http
        .post(format!("{base}/api/send"))
        .header("origin", "https://evil.example")
        .header("cookie", &cookie)
        .header("x-hermes-session", &session)
        .json(&send)
        .send()
        .await;
    assert_eq!(status(csrf), 403, "another site's page");
    let rebound = http
        .post(format!("{base}/api/send"))
        .header("host", "evil.example")
        .header("origin", "http://evil.example")
        .header("cookie", &cookie)
        .header("x-hermes-session", &session)
        .json(&send)
        .send()
        .await;
    assert_eq!(status(rebound), 421, "a name rebound to 127.0.0.1");

    // The page, logged in, is let in: its message is the only one the model sees.
    kit.llm.push(Reply::text("hello, operator"));
    assert_eq!(
        page.post(
            "/api/send",
            &json!({"chat": "c-door", "id": "m-door-0002", "text": "hello"})
        )
        .await,
        200
    );
    eventually(WAIT, "the model asked", || {
        (!kit.llm.requests().is_empty()).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let requests = kit.llm.requests();
    assert_eq!(requests.len(), 1, "only the logged-in page's message");
    assert_eq!(last_user_text(&requests[0]), "hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_waits_for_a_page_across_a_restart_and_shows_once() {
    let kit = kit().await;
    kit.fake.go_away(Duration::from_secs(3600));
    kit.llm.push(Reply::text("kept for you"));
    let first = kit.start();
    let page = kit.fake.client().await;
    assert_eq!(
        page.post(
            "/api/send",
            &json!({"chat": "c-kit", "id": "m-wait-0001", "text": "remember"})
        )
        .await,
        200
    );
    eventually(WAIT, "the model asked", || {
        (!kit.llm.requests().is_empty()).then_some(())
    })
    .await;
    let log = first.log.clone();
    eventually(WAIT, "the reply held for a page", || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|l| l.contains("nobody is connected to take the reply"))
    })
    .await;
    drop(first);
    let _second = kit.start();
    assert_eq!(kit.fake.connections(), 0, "no page was open");
    kit.fake.come_back();
    assert_eq!(kit.shown("c-kit", 1).await, ["kept for you"]);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(kit.fake.shown("c-kit").len(), 1, "once");
    assert_eq!(
        kit.llm.requests().len(),
        1,
        "answered before the restart, not again"
    );
}

use hermes_testkit::conformance::PlatformFake;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_goes_up_to_the_model_and_one_comes_down_to_the_page_only() {
    let kit = kit().await;
    let chart = kit.home.dir.join("work").join("chart.png");
    let page_html = kit.home.dir.join("work").join("page.html");
    std::fs::write(&chart, b"\x89PNG chart").unwrap();
    std::fs::write(&page_html, b"<script>alert(1)</script>").unwrap();
    kit.llm.push(Reply::text("a test pattern"));
    kit.llm.push(Reply::text(format!(
        "Here.\nMEDIA:{}\nMEDIA:{}",
        chart.display(),
        page_html.display()
    )));
    let _d = kit.start();
    let page = kit.fake.client().await;
    let photo = hermes_testkit::sample_jpeg();
    assert_eq!(
        page.upload(
            "c-kit",
            "u-upload-0001",
            "photo.jpg",
            "image/jpeg",
            photo.clone()
        )
        .await,
        200
    );
    eventually(WAIT, "the model asked", || {
        (!kit.llm.requests().is_empty()).then_some(())
    })
    .await;
    let request = &kit.llm.requests()[0];
    let user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone();
    let url = user["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "image_url")
        .expect("an image part")["image_url"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    use base64::Engine;
    let sent = base64::engine::general_purpose::STANDARD
        .decode(url.strip_prefix("data:image/jpeg;base64,").unwrap())
        .unwrap();
    assert_eq!(sent, photo, "the bytes the page uploaded");

    kit.fake
        .write("c-kit", "operator", "send me the chart", true);
    let files = eventually(WAIT, "two files on the page", || {
        let files: Vec<_> = kit
            .fake
            .messages("c-kit")
            .into_iter()
            .filter_map(|m| m.file)
            .collect();
        (files.len() >= 2).then_some(files)
    })
    .await;
    let (status, kind, disposition, bytes) = page.fetch_file(&files[0].1).await;
    assert_eq!(
        (status, kind.as_str(), disposition.as_str()),
        (200, "image/png", "inline")
    );
    assert_eq!(bytes, b"\x89PNG chart");
    let (status, kind, disposition, _) = page.fetch_file(&files[1].1).await;
    assert_eq!(
        (status, kind.as_str(), disposition.as_str()),
        (200, "application/octet-stream", "attachment"),
        "an HTML file is never served as a page of the chat's origin"
    );
    let stranger = reqwest::get(format!("{}{}", kit.fake.base_url(), files[0].1))
        .await
        .unwrap();
    assert_eq!(stranger.status().as_u16(), 401, "not without the cookie");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_url_prints_the_login_address_and_rotate_logs_everyone_out() {
    let kit = kit().await;
    let run = |args: &[&str]| {
        std::process::Command::new(BINARY)
            .args(args)
            .arg("--home")
            .arg(&kit.home.dir)
            .output()
            .unwrap()
    };
    let out = run(&["web-url"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        url.trim(),
        format!("{}/#token={TOKEN}", kit.fake.base_url())
    );
    let _d = kit.start();
    let before_restart = kit.fake.client().await;
    assert_eq!(before_restart.get_json("/api/commands").await.0, 200);
    let out = run(&["web-url", "--rotate"]);
    assert!(out.status.success());
    let url = String::from_utf8(out.stdout).unwrap();
    let token = url.trim().split("#token=").nth(1).unwrap().to_owned();
    assert_ne!(token, TOKEN);
    assert_eq!(token.len(), 43);
    // Taken at the next start (or reload): the old token is out, the new one in.
    drop(_d);
    let _again = kit.start();
    let base = kit.fake.base_url();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while hermes_testkit::webchat::Client::login(&base, &token)
        .await
        .is_none()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the new token logs in"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        hermes_testkit::webchat::Client::login(&base, TOKEN)
            .await
            .is_none(),
        "the old token is out"
    );
    // A login lasts as long as the process: what a page sent before the restart (to
    // whoever held the port meanwhile) opens nothing now.
    assert_eq!(before_restart.get_json("/api/commands").await.0, 401);
    // Not enabled: said, exit 2.
    std::fs::write(
        kit.home.dir.join("config.yaml"),
        "model:\n  provider: custom\n  default: m\n  base_url: http://127.0.0.1:9/v1\n",
    )
    .unwrap();
    let out = run(&["web-url"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not enabled"));
}
