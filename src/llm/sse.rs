//! A minimal Server-Sent Events reader: bytes in, the `data:` payloads of complete events out.

/// Buffers partial lines between network chunks.
#[derive(Default)]
pub struct SseLines {
    buffer: Vec<u8>,
    /// How much of `buffer` is known to hold no newline (each byte is searched once).
    searched: usize,
    /// `data:` lines of the event being read (an event ends at a blank line).
    data: Vec<String>,
}

impl SseLines {
    /// Feed bytes; returns the payload of every event completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(found) = self.buffer[self.searched..]
            .iter()
            .position(|&b| b == b'\n')
        {
            let end = self.searched + found;
            self.searched = 0;
            let line: Vec<u8> = self.buffer.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    events.push(self.data.join("\n"));
                    self.data.clear();
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                let value = value.strip_prefix(' ').unwrap_or(value);
                // Servers that omit the blank line between events still send one JSON per line.
                if !self.data.is_empty() && (value == "[DONE]" || value.starts_with('{')) {
                    events.push(self.data.join("\n"));
                    self.data.clear();
                }
                self.data.push(value.to_owned());
            }
            // `event:`, `id:`, `retry:` and `:` comments carry nothing we need.
        }
        self.searched = self.buffer.len();
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_are_reassembled() {
        let mut sse = SseLines::default();
        assert!(sse.push(b"data: {\"a\"").is_empty());
        assert_eq!(
            sse.push(b":1}\n\n: keepalive\n\ndata: [DONE]\n\n"),
            vec!["{\"a\":1}", "[DONE]"]
        );
    }

    #[test]
    fn crlf_line_endings_work() {
        let mut sse = SseLines::default();
        assert_eq!(sse.push(b"data: x\r\n\r\n"), vec!["x"]);
    }
}
