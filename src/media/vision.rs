//! Image descriptions by an auxiliary vision model (`auxiliary.vision.*`), for a model that
//! cannot see images (`agent.image_input_mode: text`, or `auto` after the model refused
//! them): one chat completion with the image, answered with what it shows.

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::VisionConfig;
use crate::llm::{LlmClient, ToolDefinitions};

const PROMPT: &str = "Describe this image for someone who cannot see it: what it shows, any text in it (word for word), and anything notable. Answer with the description only.";

pub struct Describer {
    llm: LlmClient,
}

impl Describer {
    /// The describer a configuration needs: for `text` mode, and for `auto` when a vision
    /// model is set up on purpose (asking the main model again after it refused images
    /// would fail the same way). `None` otherwise: no client is built.
    pub fn needed(config: &VisionConfig, mode: super::ImageInputMode) -> Option<Self> {
        (mode == super::ImageInputMode::Text || config.configured).then(|| Describer {
            llm: LlmClient::new(config.model.clone()),
        })
    }

    /// What the image (a `data:` URL) shows; the error is for the log.
    pub async fn describe(
        &self,
        image: &str,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        let messages = [json!({"role": "user", "content": [
            {"type": "text", "text": PROMPT},
            {"type": "image_url", "image_url": {"url": image}},
        ]})];
        let described = self
            .llm
            .complete(&messages, &ToolDefinitions::default(), cancel)
            .await
            .map_err(|e| e.to_string())?;
        let text = described.content.trim();
        if text.is_empty() {
            return Err("the vision model said nothing".into());
        }
        Ok(text.to_owned())
    }
}
