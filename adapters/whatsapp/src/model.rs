//! Meta's webhook payload as far as the gateway reads it:
//! `entry[].changes[].value.{metadata, contacts, messages, statuses, errors}`. Lenient on
//! purpose: a field Meta adds, or one it leaves out, never makes a whole delivery
//! unreadable (an unknown message type is kept as its name, so the person can be told).

use serde::Deserialize;

/// A webhook delivery.
#[derive(Debug, Deserialize)]
pub struct Payload {
    #[serde(default)]
    pub object: String,
    #[serde(default)]
    pub entry: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
pub struct Entry {
    #[serde(default)]
    pub changes: Vec<Change>,
}

#[derive(Debug, Deserialize)]
pub struct Change {
    #[serde(default)]
    pub field: String,
    #[serde(default)]
    pub value: Value,
}

/// What one change carries.
#[derive(Debug, Default, Deserialize)]
pub struct Value {
    #[serde(default)]
    pub metadata: Metadata,
    #[serde(default)]
    pub contacts: Vec<Contact>,
    #[serde(default)]
    pub messages: Vec<Message>,
    #[serde(default)]
    pub statuses: Vec<Status>,
    /// Problems Meta reports about the number or the app, outside any message.
    #[serde(default)]
    pub errors: Vec<MetaError>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Metadata {
    /// The business number the change is about (one app may have several).
    #[serde(default)]
    pub phone_number_id: String,
}

#[derive(Debug, Deserialize)]
pub struct Contact {
    #[serde(default)]
    pub wa_id: String,
    #[serde(default)]
    pub profile: Profile,
}

#[derive(Debug, Default, Deserialize)]
pub struct Profile {
    #[serde(default)]
    pub name: String,
}

/// One message a person sent.
#[derive(Debug, Deserialize)]
pub struct Message {
    /// The sender's `wa_id`.
    #[serde(default)]
    pub from: String,
    /// The `wamid`.
    #[serde(default)]
    pub id: String,
    /// Unix seconds, as a string.
    #[serde(default)]
    pub timestamp: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub text: Option<Text>,
    #[serde(default)]
    pub image: Option<Media>,
    #[serde(default)]
    pub audio: Option<Media>,
    #[serde(default)]
    pub video: Option<Media>,
    #[serde(default)]
    pub document: Option<Media>,
    #[serde(default)]
    pub interactive: Option<Interactive>,
    /// A quick-reply button of a template message.
    #[serde(default)]
    pub button: Option<TemplateButton>,
    /// The message this one replies to.
    #[serde(default)]
    pub context: Option<Context>,
}

#[derive(Debug, Deserialize)]
pub struct Text {
    #[serde(default)]
    pub body: String,
}

#[derive(Debug, Deserialize)]
pub struct Media {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub mime_type: Option<String>,
    #[serde(default)]
    pub caption: Option<String>,
    #[serde(default)]
    pub filename: Option<String>,
    /// An audio message recorded as a voice note.
    #[serde(default)]
    pub voice: bool,
}

#[derive(Debug, Deserialize)]
pub struct Interactive {
    #[serde(default)]
    pub button_reply: Option<Reply>,
    #[serde(default)]
    pub list_reply: Option<Reply>,
}

/// A pressed reply button or a chosen list row (its `id` is the choice's).
#[derive(Debug, Deserialize)]
pub struct Reply {
    #[serde(default)]
    pub id: String,
}

#[derive(Debug, Deserialize)]
pub struct TemplateButton {
    #[serde(default)]
    pub text: String,
}

#[derive(Debug, Deserialize)]
pub struct Context {
    #[serde(default)]
    pub id: String,
}

/// What became of a message the gateway sent.
#[derive(Debug, Deserialize)]
pub struct Status {
    /// The `wamid` the send returned.
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub status: String,
    /// When it happened, unix seconds as a string.
    #[serde(default)]
    pub timestamp: String,
    #[serde(default)]
    pub recipient_id: String,
    #[serde(default)]
    pub errors: Vec<MetaError>,
}

#[derive(Debug, Deserialize)]
pub struct MetaError {
    #[serde(default)]
    pub code: Option<i64>,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub error_data: Option<ErrorData>,
}

#[derive(Debug, Deserialize)]
pub struct ErrorData {
    #[serde(default)]
    pub details: String,
}

impl MetaError {
    /// Code, reason and details as one line.
    pub fn line(&self) -> String {
        let message = if self.message.is_empty() {
            &self.title
        } else {
            &self.message
        };
        crate::graph::error_line(
            self.code,
            message,
            self.error_data.as_ref().map(|d| d.details.as_str()),
        )
    }
}
