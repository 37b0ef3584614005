//! A bounded output buffer: keeps the head and a rolling tail, so a command that prints
//! gigabytes costs a fixed amount of memory and the model still sees both ends.

/// Head and tail of a byte stream, each at most `half` bytes.
pub struct HeadTail {
    half: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    dropped: usize,
}

impl HeadTail {
    pub fn new(limit: usize) -> Self {
        let half = (limit / 2).max(64);
        HeadTail {
            half,
            head: Vec::new(),
            tail: Default::default(),
            dropped: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < self.half {
            let take = bytes.len().min(self.half - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        while self.tail.len() > self.half {
            let excess = self.tail.len() - self.half;
            self.tail.drain(..excess);
            self.dropped += excess;
        }
    }

    /// The kept text, with a marker where the middle was left out.
    pub fn text(&self) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.dropped > 0 {
            out.push_str(&format!(
                "\n[… {} bytes of output left out …]\n",
                self.dropped
            ));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        out.push_str(&String::from_utf8_lossy(&tail));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_output_keeps_both_ends_in_bounded_memory() {
        let mut buf = HeadTail::new(200);
        buf.push(b"START");
        for _ in 0..10_000 {
            buf.push(b"middle middle middle ");
        }
        buf.push(b"END");
        let text = buf.text();
        assert!(text.starts_with("START"));
        assert!(text.ends_with("END"));
        assert!(text.contains("bytes of output left out"));
        assert!(text.len() < 300);
    }

    #[test]
    fn small_output_is_untouched() {
        let mut buf = HeadTail::new(1000);
        buf.push(b"hello\n");
        assert_eq!(buf.text(), "hello\n");
    }
}
