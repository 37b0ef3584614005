//! The tools offered to the model in a call, in the forms a request needs: made once per
//! set of offered tools (by the toolbox) and shared by every turn that offers that set.
//!
//! Why: a turn used to build its tools' definitions afresh (each schema converted to a
//! `Value` tree) and hold them while it waited for the model; with a thousand turns in
//! flight that was the largest part of the daemon's peak (docs/performance.md, step 18).
//! Shared, they cost one copy; serialised once, a request writes them as they are.

use std::sync::{Arc, OnceLock};

use serde_json::Value;
use serde_json::value::RawValue;

/// OpenAI-shaped tool definitions (`{"type": "function", "function": {…}}`), cheap to
/// clone. The empty offer (no tools: the grace call, compression, vision) is the default.
#[derive(Clone, Default)]
pub struct ToolDefinitions(Option<Arc<Shared>>);

struct Shared {
    values: Vec<Value>,
    /// `values` as one JSON array, serialised the first time a request needs it.
    json: OnceLock<Box<RawValue>>,
}

impl ToolDefinitions {
    pub fn new(values: Vec<Value>) -> Self {
        if values.is_empty() {
            return ToolDefinitions(None);
        }
        ToolDefinitions(Some(Arc::new(Shared {
            values,
            json: OnceLock::new(),
        })))
    }

    /// The definitions, in the order offered.
    pub fn values(&self) -> &[Value] {
        self.0.as_ref().map_or(&[], |s| &s.values)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The definitions as a JSON array, written into a request body as they are.
    pub(super) fn json(&self) -> Option<&RawValue> {
        let shared = self.0.as_ref()?;
        Some(shared.json.get_or_init(|| {
            // A `Value`'s map keys are strings, so it always serialises.
            serde_json::value::to_raw_value(&shared.values).expect("a JSON value serialises")
        }))
    }

    /// Whether `self` and `other` are the same shared definitions (not merely equal).
    #[cfg(test)]
    pub fn same(&self, other: &ToolDefinitions) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}

impl std::fmt::Debug for ToolDefinitions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.values()
                    .iter()
                    .map(|t| t["function"]["name"].as_str().unwrap_or("?")),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_json_is_the_values_and_made_once() {
        let tools = ToolDefinitions::new(vec![
            json!({"type": "function", "function": {"name": "a"}}),
            json!({"type": "function", "function": {"name": "b"}}),
        ]);
        let json = tools.json().unwrap();
        let back: Value = serde_json::from_str(json.get()).unwrap();
        assert_eq!(back, Value::Array(tools.values().to_vec()));
        assert!(std::ptr::eq(json, tools.clone().json().unwrap()));
        assert!(tools.same(&tools.clone()));
        assert!(ToolDefinitions::new(Vec::new()).is_empty());
        assert!(ToolDefinitions::default().json().is_none());
    }
}
