//! `slack_webhook`: the bytes as the body of each Events API route of the Slack adapter
//! (`/slack/interactions`, raw and as the `payload` field of a form; `/slack/commands`;
//! `/slack/events`), after a check that no forged signature passes.
//!
//! The events route waits up to 2 s for the bot's identity (`auth.test`), which never comes
//! here: the runtime's clock is paused, so that wait passes at once and the route answers
//! 503. Parsing, `url_verification` and `app_rate_limited` are reached all the same.

use std::sync::{Arc, LazyLock};
use std::time::{SystemTime, UNIX_EPOCH};

use hermes_adapter::{Adapter, Common, Platform, WebhookRequest, WebhookRoute};
use hermes_slack::{Mode, SlackAdapter, SlackSettings};
use tokio::runtime::Runtime;

use crate::sink::{Recording, check, check_status};

struct Routes {
    runtime: Runtime,
    sink: Arc<Recording>,
    routes: Vec<WebhookRoute>,
    _adapter: SlackAdapter,
}

static ROUTES: LazyLock<Routes> = LazyLock::new(|| {
    let runtime = crate::runtime();
    let _inside = runtime.enter();
    let settings = SlackSettings {
        bot_token: "xoxb-fuzz".into(),
        app_token: None,
        signing_secret: Some("fuzz-signing-secret".into()),
        // Never called: the identity is never asked for and presses need no Web API.
        api_base_url: "http://127.0.0.1:9/api".into(),
        mode: Mode::Events,
        reply_in_thread: true,
        common: Common {
            require_mention: true,
            ..Common::default()
        },
    };
    let adapter = SlackAdapter::new(&settings).expect("the Slack adapter builds");
    let sink = Arc::new(Recording::default());
    let routes = adapter.routes(sink.clone());
    drop(_inside);
    Routes {
        runtime,
        sink,
        routes,
        _adapter: adapter,
    }
});

fn post(body: Vec<u8>, headers: &[(&str, String)]) -> WebhookRequest {
    WebhookRequest {
        method: "POST".into(),
        query: String::new(),
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), v.clone()))
            .collect(),
        body,
    }
}

/// How many events the bytes made.
pub fn run(data: &[u8]) -> usize {
    let slack = &*ROUTES;
    let route = |path: &str| {
        slack
            .routes
            .iter()
            .find(|r| r.path == path)
            .unwrap_or_else(|| panic!("no route {path}"))
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let forged = [
        vec![],
        vec![("x-slack-request-timestamp", now.to_string())],
        vec![
            ("x-slack-signature", format!("v0={}", crate::hex(data, 32))),
            ("x-slack-request-timestamp", now.to_string()),
        ],
        vec![
            (
                "x-slack-signature",
                String::from_utf8_lossy(data).into_owned(),
            ),
            (
                "x-slack-request-timestamp",
                String::from_utf8_lossy(data).into_owned(),
            ),
        ],
    ];
    for headers in &forged {
        assert!(
            !route("/slack/events").verify(&post(data.to_vec(), headers)),
            "a forged Slack signature passed: {headers:?}"
        );
    }
    let mut form = b"payload=".to_vec();
    form.extend(url::form_urlencoded::byte_serialize(data).flat_map(str::bytes));
    let calls = [
        ("/slack/interactions", data.to_vec()),
        ("/slack/interactions", form),
        ("/slack/commands", data.to_vec()),
        ("/slack/events", data.to_vec()),
    ];
    let mut made = 0;
    for (path, body) in calls {
        let answer = slack
            .runtime
            .block_on(route(path).handler.handle(post(body, &[])));
        check_status(answer.status, path);
        let (events, _) = slack.sink.take();
        if answer.status != 200 {
            assert!(
                events.is_empty(),
                "{path} answered {} yet recorded {events:?}",
                answer.status
            );
        }
        for event in &events {
            check(event, Platform::Slack, "slack:");
        }
        made += events.len();
    }
    made
}
