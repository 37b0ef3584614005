//! A tool's arguments, from its Rust type to the model and back: the JSON schema the model
//! is sent, derived from the type with `schemars` and trimmed to what chat models read
//! ([`parameters`]); and a model's arguments repaired the way Hermes' `coerce_tool_args`
//! repairs them, guided by that schema, before they are read into the type ([`read`]).
//!
//! The repair exists because models drift: `"30"` for 30, `"true"` for true, a bare
//! string where a list is expected, a list sent as a JSON string, `null` for "not given".
//! Hermes repairs these in one place for every tool; so do we, so no tool parses by hand.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{LazyLock, RwLock};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The `parameters` object of an OpenAI function definition for arguments of type `A`:
/// the derived schema inlined (no `$ref`), without what only a validator reads (`$schema`,
/// `title`, `format`), with `Option`'s "or null" dropped (a field left out and a field set
/// to null mean the same to every tool, see [`read`]). The model reads the fields' doc
/// comments as their descriptions; the doc comments of the argument type and of a list's
/// element type are not sent.
///
/// Derived once per type and kept: every turn offers the tools and every call reads its
/// arguments against the schema.
pub fn parameters<A: JsonSchema + 'static>() -> &'static Value {
    static DERIVED: LazyLock<RwLock<HashMap<TypeId, &'static Value>>> =
        LazyLock::new(Default::default);
    let key = TypeId::of::<A>();
    if let Some(schema) = DERIVED.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return schema;
    }
    let mut derived = DERIVED.write().unwrap_or_else(|e| e.into_inner());
    // One schema per argument type of the gateway's tools: a fixed, small set, kept for the
    // life of the process.
    derived
        .entry(key)
        .or_insert_with(|| Box::leak(Box::new(derive::<A>())))
}

fn derive<A: JsonSchema>() -> Value {
    let mut settings = schemars::generate::SchemaSettings::draft07();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let schema = settings.into_generator().into_root_schema_for::<A>();
    let mut value = schema.to_value();
    trim(&mut value);
    if let Value::Object(map) = &mut value {
        // The argument type's own doc comment is for Rust readers; the tool's
        // description says what it does.
        map.remove("description");
        // A tool without parameters still offers an (empty) object.
        map.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    value
}

/// Drops what the model does not need from a derived schema, everywhere in it.
fn trim(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("$schema");
            map.remove("title");
            map.remove("format");
            drop_null_type(map);
            // A list's element type documents itself for Rust readers; the list field's
            // own doc comment is what the model reads.
            if let Some(Value::Object(items)) = map.get_mut("items") {
                items.remove("description");
            }
            for child in map.values_mut() {
                trim(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(trim),
        _ => {}
    }
}

/// `"type": ["string", "null"]` becomes `"type": "string"`; `"anyOf": [X, {"type": "null"}]`
/// becomes X (keeping the field's own description).
fn drop_null_type(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(options)) = map.get("anyOf") {
        let kept: Vec<&Value> = options
            .iter()
            .filter(|o| o.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        if let [Value::Object(only)] = kept.as_slice() {
            let only = only.clone();
            map.remove("anyOf");
            for (key, value) in only {
                map.entry(key).or_insert(value);
            }
        }
    }
    // An enum that allows null lists it as a value; the model should not send it.
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
}

/// A model's `args` read into `A`, after the repairs of [`coerce`] against `schema` (the
/// `parameters` of [`parameters`]). The error names the argument and what was wrong, for
/// the model to correct its call.
pub fn read<A: DeserializeOwned>(mut args: Value, schema: &Value) -> Result<A, String> {
    coerce(&mut args, schema);
    serde_path_to_error::deserialize::<_, A>(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde says "missing field `path`"; the tools have always said "`path` is
        // required".
        let inner = match inner.strip_prefix("missing field ") {
            Some(field) => format!("{field} is required"),
            None => inner,
        };
        if path == "." {
            inner
        } else {
            format!("`{path}`: {inner}")
        }
    })
}

/// Hermes' `coerce_tool_args`, applied to every level the schema describes: a string
/// where the schema wants a number, an integer, a boolean, a list or an object is parsed
/// as one when it reads as one; a lone value where a list is wanted becomes a list of it;
/// a number or boolean where a string is wanted is written as text (ids); `null`, and the
/// string "null" where no string is wanted, are "not given" (the key is removed). Anything else is left as it came,
/// for the type's own error to name.
pub fn coerce(value: &mut Value, schema: &Value) {
    let Value::Object(schema) = schema else {
        return;
    };
    match value {
        Value::Object(fields) => {
            let Some(Value::Object(properties)) = schema.get("properties") else {
                return;
            };
            fields.retain(|key, field| {
                let not_given = field.is_null()
                    || field.as_str().is_some_and(|s| s.trim() == "null")
                        && properties
                            .get(key)
                            .is_some_and(|s| !wanted_types(s).contains(&"string"));
                !not_given
            });
            for (key, field) in fields.iter_mut() {
                if let Some(field_schema) = properties.get(key) {
                    coerce_field(field, field_schema);
                }
            }
        }
        Value::Array(items) => {
            if let Some(items_schema) = schema.get("items") {
                for item in items {
                    coerce_field(item, items_schema);
                }
            }
        }
        _ => {}
    }
}

/// One value against its schema (see [`coerce`]).
fn coerce_field(value: &mut Value, schema: &Value) {
    let wanted = wanted_types(schema);
    let wants = |kind: &str| wanted.contains(&kind);
    if let Value::String(text) = value {
        let trimmed = text.trim();
        let parsed = if wants("array") && trimmed.starts_with('[')
            || wants("object") && trimmed.starts_with('{')
        {
            serde_json::from_str::<Value>(trimmed)
                .ok()
                .filter(|v| v.is_array() && wants("array") || v.is_object() && wants("object"))
        } else if wants("integer") || wants("number") {
            number(trimmed, !wants("number"))
        } else if wants("boolean") {
            match trimmed.to_ascii_lowercase().as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            }
        } else {
            None
        };
        if let Some(parsed) = parsed {
            *value = parsed;
        }
    } else if wants("string") && !wants("number") && !wants("integer") {
        if let Value::Number(n) = value {
            *value = Value::String(n.to_string());
        } else if let Value::Bool(b) = value
            && !wants("boolean")
        {
            *value = Value::String(b.to_string());
        }
    }
    if wants("array") && !value.is_array() && !value.is_null() {
        *value = Value::Array(vec![value.take()]);
    }
    if value.is_array() || value.is_object() {
        coerce(value, schema);
    }
}

/// The JSON types `schema` accepts (`type` as a string or a list, and `anyOf`/`oneOf`
/// branches).
fn wanted_types(schema: &Value) -> Vec<&str> {
    let mut types = Vec::new();
    match schema.get("type") {
        Some(Value::String(t)) => types.push(t.as_str()),
        Some(Value::Array(list)) => types.extend(list.iter().filter_map(Value::as_str)),
        _ => {}
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(union) {
            for branch in branches {
                types.extend(wanted_types(branch));
            }
        }
    }
    types
}

/// `text` as a JSON number, as Hermes' `_coerce_number` reads it: a whole number becomes an
/// integer; a fraction only where the schema takes any number; not infinity or NaN.
fn number(text: &str, integer_only: bool) -> Option<Value> {
    let parsed: f64 = text.parse().ok()?;
    if !parsed.is_finite() {
        return None;
    }
    if parsed.fract() == 0.0 && parsed.abs() < 9.0e15 {
        #[allow(clippy::cast_possible_truncation)]
        return Some(Value::from(parsed as i64));
    }
    if integer_only {
        return None;
    }
    serde_json::Number::from_f64(parsed).map(Value::Number)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// Example arguments covering what tools use.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Example {
        /// The command line.
        command: String,
        /// Seconds.
        timeout: Option<u64>,
        #[serde(default)]
        background: bool,
        urls: Option<Vec<String>>,
        items: Option<Vec<Item>>,
        mode: Option<Mode>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Item {
        id: String,
        done: Option<bool>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Replace,
        Patch,
    }

    fn schema() -> Value {
        parameters::<Example>().clone()
    }

    #[test]
    fn the_schema_is_inlined_and_trimmed_to_what_the_model_reads() {
        let schema = schema();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["command"]));
        assert_eq!(
            schema["properties"]["command"]["description"],
            "The command line."
        );
        assert_eq!(schema["properties"]["timeout"]["type"], "integer");
        assert_eq!(
            schema["properties"]["mode"]["enum"],
            json!(["replace", "patch"])
        );
        assert_eq!(
            schema["properties"]["items"]["items"]["properties"]["id"]["type"],
            "string"
        );
        let text = schema.to_string();
        for gone in ["$ref", "$schema", "title", "format", "null"] {
            assert!(!text.contains(gone), "{gone} in {text}");
        }
    }

    #[test]
    fn strings_a_model_sent_for_numbers_booleans_and_lists_are_read_as_meant() {
        let args = json!({
            "command": "ls",
            "timeout": " 30 ",
            "background": "True",
            "urls": "https://a.example",
            "items": "[{\"id\": 7, \"done\": \"false\"}]",
            "mode": null,
        });
        let read: Example = read(args, &schema()).unwrap();
        assert_eq!(read.timeout, Some(30));
        assert!(read.background);
        assert_eq!(read.urls.unwrap(), ["https://a.example"]);
        let items = read.items.unwrap();
        assert_eq!(items[0].id, "7");
        assert_eq!(items[0].done, Some(false));
        assert!(read.mode.is_none());
    }

    #[test]
    fn what_cannot_be_repaired_is_named_for_the_model() {
        let err = read::<Example>(json!({"command": "ls", "timeout": "soon"}), &schema())
            .err()
            .unwrap();
        assert!(
            err.starts_with("`timeout`: invalid type: string \"soon\""),
            "{err}"
        );
        let err = read::<Example>(json!({"timeout": 3}), &schema())
            .err()
            .unwrap();
        assert_eq!(err, "`command` is required");
        let err = read::<Example>(json!({"command": "ls", "timeout": "2.5"}), &schema())
            .err()
            .unwrap();
        assert!(err.contains("timeout"), "{err}");
    }
}
