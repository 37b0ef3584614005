//! `whatsapp_webhook`: the bytes as the body of a `POST` to the WhatsApp webhook, through
//! the adapter's own route (signature check, then handler), as the daemon serves it.

use std::sync::{Arc, LazyLock};

use hermes_adapter::{Adapter, Common, Platform, WebhookRequest, WebhookRoute};
use hermes_whatsapp::{WhatsAppAdapter, WhatsAppSettings};
use tokio::runtime::Runtime;

use crate::sink::{Recording, check, check_status};

/// The business number of the seed corpus (the testkit's fake WhatsApp).
const PHONE_NUMBER_ID: &str = "1000000001";

struct Webhook {
    runtime: Runtime,
    sink: Arc<Recording>,
    route: WebhookRoute,
    /// The route's state (windows, liveness) lives as long as the adapter.
    _adapter: WhatsAppAdapter,
}

static WEBHOOK: LazyLock<Webhook> = LazyLock::new(|| {
    let runtime = crate::runtime();
    let _inside = runtime.enter();
    let settings = WhatsAppSettings {
        access_token: "fuzz-access-token".into(),
        phone_number_id: PHONE_NUMBER_ID.into(),
        app_secret: Some("fuzz-app-secret".into()),
        verify_token: Some("fuzz-verify-token".into()),
        api_version: "v26.0".into(),
        // Never called: receiving makes no Graph API call.
        graph_base_url: "http://127.0.0.1:9".into(),
        webhook_path: "/whatsapp/webhook".into(),
        reengage_template: None,
        common: Common::default(),
    };
    let adapter = WhatsAppAdapter::new(&settings).expect("the WhatsApp adapter builds");
    let sink = Arc::new(Recording::default());
    let mut routes = adapter.routes(sink.clone());
    assert_eq!(routes.len(), 1, "WhatsApp has one webhook route");
    drop(_inside);
    Webhook {
        runtime,
        sink,
        route: routes.remove(0),
        _adapter: adapter,
    }
});

fn post(body: &[u8], signature: Option<String>) -> WebhookRequest {
    WebhookRequest {
        method: "POST".into(),
        query: String::new(),
        headers: signature
            .map(|s| ("x-hub-signature-256".to_owned(), s))
            .into_iter()
            .collect(),
        body: body.to_vec(),
    }
}

/// How many events and reports the bytes made.
pub fn run(data: &[u8]) -> usize {
    let webhook = &*WEBHOOK;
    // No forged signature passes, whatever the body.
    let forged = [
        None,
        Some("sha256=".to_owned()),
        Some(format!("sha256={}", "0".repeat(64))),
        Some(format!("sha256={}", crate::hex(data, 32))),
        Some(String::from_utf8_lossy(data).into_owned()),
    ];
    for signature in forged {
        let request = post(data, signature.clone());
        assert!(
            !webhook.route.verify(&request),
            "a forged signature {signature:?} passed"
        );
        let refusal = webhook.route.verifier.refusal(&request);
        assert_eq!(refusal.status, 401, "a bad signature is a 401");
    }
    // The handshake reads the query; whatever it is, it must not panic.
    let handshake = WebhookRequest {
        method: "GET".into(),
        query: String::from_utf8_lossy(data).into_owned(),
        headers: Vec::new(),
        body: Vec::new(),
    };
    if webhook.route.verify(&handshake) {
        let answer = webhook
            .runtime
            .block_on(webhook.route.handler.handle(handshake));
        check_status(answer.status, "the WhatsApp handshake");
    }
    // What a signed delivery does.
    let answer = webhook
        .runtime
        .block_on(webhook.route.handler.handle(post(data, None)));
    check_status(answer.status, "the WhatsApp webhook");
    let (events, reports) = webhook.sink.take();
    if answer.status == 400 {
        assert!(
            events.is_empty() && reports.is_empty(),
            "a delivery refused as unreadable recorded {events:?} {reports:?}"
        );
    }
    for event in &events {
        check(event, Platform::WhatsApp, "whatsapp:");
    }
    events.len() + reports.len()
}
