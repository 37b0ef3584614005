//! Just enough `multipart/form-data` parsing for the fakes (uploads to the Bot API, audio to
//! `/audio/transcriptions`), so the test dependencies stay lean.

/// One part of a form.
#[derive(Debug, Clone, Default)]
pub struct Part {
    pub name: String,
    pub filename: Option<String>,
    pub bytes: Vec<u8>,
}

impl Part {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// The parts of a body sent with `content_type` (`multipart/form-data; boundary=…`); empty
/// for anything else.
pub fn parse(content_type: &str, body: &[u8]) -> Vec<Part> {
    let Some(boundary) = content_type
        .split("boundary=")
        .nth(1)
        .map(|b| b.trim_matches('"').to_owned())
    else {
        return Vec::new();
    };
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    for chunk in split(body, delimiter.as_bytes()) {
        let Some(at) = find(chunk, b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&chunk[..at]).to_string();
        let mut value = &chunk[at + 4..];
        if value.ends_with(b"\r\n") {
            value = &value[..value.len() - 2];
        }
        let attribute = |key: &str| {
            head.split(&format!("{key}=\""))
                .nth(1)?
                .split('"')
                .next()
                .map(str::to_owned)
        };
        let Some(name) = attribute("name") else {
            continue;
        };
        parts.push(Part {
            name,
            filename: attribute("filename"),
            bytes: value.to_vec(),
        });
    }
    parts
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn split<'a>(mut rest: &'a [u8], delimiter: &[u8]) -> Vec<&'a [u8]> {
    let mut parts = Vec::new();
    while let Some(at) = find(rest, delimiter) {
        parts.push(&rest[..at]);
        rest = &rest[at + delimiter.len()..];
    }
    parts.push(rest);
    parts
}
