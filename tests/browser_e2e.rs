//! The web chat in a real browser: Debian's headless Chromium, driven over WebDriver, against
//! the real daemon and the fake model. The person opens the printed address, writes, sees the
//! answer streamed, presses an approval button and sees the command run, uploads a picture,
//! reloads the page in the middle of an answer and sees it finish, and the model's hostile
//! output (`<script>`, `<img onerror>`, `javascript:` links) stays inert text. A screenshot
//! of the page is kept as `target/tmp/web-chat.png` (and `web-chat-wide.png`, a wider window).
//!
//! Skipped (loudly) without `chromium` and `chromedriver` under plain `cargo test`; `.ci/run`
//! installs them and makes the skip a failure.

use std::time::Duration;

use hermes_testkit::browser::Browser;
use hermes_testkit::browser::fantoccini::{self, Client, Locator};
use hermes_testkit::conformance::Kit;
use hermes_testkit::llm::Reply;
use hermes_testkit::webchat::{FakeWebPage, TOKEN};

const BINARY: &str = env!("CARGO_BIN_EXE_hermes-gateway");
/// How long the page may take to show something.
const SHOWN: Duration = Duration::from_secs(20);

/// The bot message containing `text` (as the person reads it), once it shows.
async fn bot_message(c: &Client, text: &str) -> fantoccini::elements::Element {
    let xpath = format!(
        "//div[contains(@class,'msg') and contains(@class,'bot')][contains(normalize-space(.), {})]",
        xpath_literal(text)
    );
    c.wait()
        .at_most(SHOWN)
        .for_element(Locator::XPath(&xpath))
        .await
        .unwrap_or_else(|e| panic!("no bot message with {text:?}: {e}"))
}

/// `text` as an XPath string literal.
fn xpath_literal(text: &str) -> String {
    if !text.contains('\'') {
        return format!("'{text}'");
    }
    let parts: Vec<String> = text.split('\'').map(|p| format!("'{p}'")).collect();
    format!("concat({})", parts.join(", \"'\", "))
}

/// Write `text` in the composer and send it with the button.
async fn say(c: &Client, text: &str) {
    let input = c.find(Locator::Id("text")).await.unwrap();
    input.send_keys(text).await.unwrap();
    c.find(Locator::Id("send"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// How many bot messages read exactly `text`.
async fn count_exact(c: &Client, text: &str) -> usize {
    let mut n = 0;
    for element in c.find_all(Locator::Css(".msg.bot")).await.unwrap() {
        if element.text().await.unwrap_or_default().trim() == text {
            n += 1;
        }
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_chromium_the_page_answers_streams_approves_uploads_resumes_and_renders_inert() {
    let Some(browser) = Browser::start(420, 860).await else {
        return;
    };
    // Answers streamed as they are written, as the first run's configuration has it.
    let streaming = "streaming:\n  enabled: true\n  edit_interval: 0.3\n  buffer_threshold: 5\n";
    let kit = Kit::new(
        FakeWebPage::start().await,
        BINARY,
        &["GATEWAY_ALLOW_ALL_USERS=true".to_owned()],
        streaming,
    )
    .await;
    kit.fake.go_away(Duration::from_secs(3600)); // the browser is the only page
    let victim = kit.victim("approved");
    let photo = kit.home.dir.join("work").join("photo.jpg");
    std::fs::write(&photo, hermes_testkit::sample_jpeg()).unwrap();
    let story = "Once upon a time there was a gateway that never lost a message, and it lived happily ever after.";
    kit.llm.push(Reply::Paced {
        text: "Hello **there**, streamed in pieces.".into(),
        pieces: 4,
        every: Duration::from_millis(150),
    });
    kit.llm
        .push(Reply::terminal(&format!("rm -rf {}", victim.display())));
    kit.llm.push(Reply::text("Removed."));
    kit.llm.push(Reply::text("A test pattern."));
    kit.llm.push(Reply::Paced {
        text: story.into(),
        pieces: 10,
        every: Duration::from_millis(400),
    });
    kit.llm.push(Reply::text(
        "Look: <script>window.pwned=1</script> <img src=x onerror=\"window.pwned=2\"> \
         [click me](javascript:window.pwned=3) and [docs](https://example.org/docs).",
    ));
    // Quotes nested 20,000 deep and a line of 20,000 "[" and "**": drawn, cheaply.
    kit.llm.push(Reply::text(format!(
        "{} too deep\n\n{}{} still here",
        ">".repeat(20_000),
        "[".repeat(20_000),
        "**".repeat(10_000)
    )));
    let _daemon = kit.start();
    let c = &browser.client;
    let base = kit.fake.base_url();

    // The printed address logs in, and the token leaves the address bar.
    c.goto(&format!("{base}/#token={TOKEN}")).await.unwrap();
    c.wait()
        .at_most(SHOWN)
        .for_element(Locator::Css("#composer:not([hidden])"))
        .await
        .unwrap();
    let url = c.current_url().await.unwrap();
    assert!(!url.as_str().contains("token"), "{url}");

    // A message, and the answer streamed into one message.
    say(c, "hello").await;
    bot_message(c, "Hello there, streamed in pieces.").await;
    let strong = c
        .find(Locator::Css(".msg.bot strong"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(strong, "there", "Markdown rendered");

    // An approval: the button runs the command.
    say(c, "clean up").await;
    let allow = c
        .wait()
        .at_most(SHOWN)
        .for_element(Locator::XPath(
            "//div[@class='choices']/button[normalize-space(.)='Allow once']",
        ))
        .await
        .unwrap();
    assert!(victim.exists(), "nothing ran before the press");
    allow.click().await.unwrap();
    bot_message(c, "Removed.").await;
    assert!(!victim.exists(), "the command ran");

    // A picture uploaded reaches the model as the bytes chosen.
    let input = c.find(Locator::Id("file")).await.unwrap();
    input.send_keys(&photo.display().to_string()).await.unwrap();
    bot_message(c, "A test pattern.").await;
    let asked = kit.llm.requests();
    let last = asked.last().unwrap().to_string();
    assert!(
        last.contains("data:image/jpeg;base64,"),
        "the picture reached the model"
    );

    // A reload in the middle of an answer: the page comes back and the answer finishes, once.
    say(c, "tell me a story").await;
    bot_message(c, "Once upon").await;
    let partial = count_exact(c, story).await;
    assert_eq!(partial, 0, "reloaded before the answer was whole");
    c.refresh().await.unwrap();
    bot_message(c, "happily ever after.").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(count_exact(c, story).await, 1, "the story once, whole");

    // The model's hostile output is text: no script ran, no element or handler was made.
    say(c, "show me").await;
    bot_message(c, "and docs").await;
    let shown = bot_message(c, "and docs").await.text().await.unwrap();
    assert!(shown.contains("<script>window.pwned=1</script>"), "{shown}");
    assert!(shown.contains("<img src=x onerror="), "{shown}");
    let checked = c
        .execute(
            "return [String(window.pwned), \
              document.querySelectorAll('#messages script, #messages img[onerror], #messages [onerror]').length, \
              Array.from(document.querySelectorAll('#messages a')).map(a => a.getAttribute('href') + ' ' + a.rel)];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(checked[0], "undefined", "no script of the model ran");
    assert_eq!(checked[1], 0, "no element of the model's HTML");
    let links: Vec<String> = checked[2]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_owned())
        .collect();
    assert!(
        links
            .iter()
            .all(|l| !l.to_lowercase().contains("javascript")),
        "{links:?}"
    );
    assert!(
        links.contains(&"https://example.org/docs noopener noreferrer".to_owned()),
        "{links:?}"
    );

    // The page as a person sees it, kept as the test's artefact.
    let png = c.screenshot().await.unwrap();
    let artefact = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-chat.png");
    std::fs::write(&artefact, png).unwrap();
    eprintln!("screenshot of the web chat: {}", artefact.display());
    // And on a wider screen, with the conversations beside.
    c.set_window_size(1100, 760).await.unwrap();
    let wide = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-chat-wide.png");
    std::fs::write(&wide, c.screenshot().await.unwrap()).unwrap();
    c.set_window_size(420, 860).await.unwrap();

    // Output built to break the renderer is drawn, and the page still loads after it.
    say(c, "break it").await;
    bot_message(c, "still here").await;
    c.refresh().await.unwrap();
    bot_message(c, "still here").await;
    bot_message(c, "and docs").await;

    // An address with a wrong token (a link anyone could make) logs nobody out.
    c.goto(&format!(
        "{base}/#token=dGhpcy1pcy1ub3QtdGhlLXRva2VuLWF0LWFsbC1ub3BlLW5v"
    ))
    .await
    .unwrap();
    bot_message(c, "and docs").await;
    let login_shown = c
        .execute("return !document.getElementById('login').hidden;", vec![])
        .await
        .unwrap();
    assert_eq!(login_shown, false, "still logged in");

    let _ = browser.client.clone().close().await;
}
