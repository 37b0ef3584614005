//! A bounded output buffer: keeps the head and a rolling tail, so a command that prints
//! gigabytes costs a fixed amount of memory and the model still sees both ends; and the
//! small shapes tool results share (durations, JSON lists).

/// The first `head_limit` and the last `tail_limit` bytes of a byte stream.
#[derive(Clone)]
pub struct HeadTail {
    head_limit: usize,
    tail_limit: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    dropped: usize,
}

impl HeadTail {
    /// Half of `limit` for each end.
    pub fn new(limit: usize) -> Self {
        let half = (limit / 2).max(64);
        HeadTail::split(half, half)
    }

    /// `head_limit` bytes of the start and `tail_limit` of the end.
    pub fn split(head_limit: usize, tail_limit: usize) -> Self {
        HeadTail {
            head_limit,
            tail_limit,
            head: Vec::new(),
            tail: Default::default(),
            dropped: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < self.head_limit {
            let take = bytes.len().min(self.head_limit - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        if self.tail.len() > self.tail_limit {
            let excess = self.tail.len() - self.tail_limit;
            self.tail.drain(..excess);
            self.dropped += excess;
        }
    }

    /// Bytes left out of the middle.
    pub fn omitted(&self) -> usize {
        self.dropped
    }

    /// Bytes pushed in all.
    pub fn total(&self) -> usize {
        self.head.len() + self.tail.len() + self.dropped
    }

    /// The kept text, with a marker where the middle was left out.
    pub fn text(&self) -> String {
        self.text_marked(|dropped, _| format!("\n[… {dropped} bytes of output left out …]\n"))
    }

    /// The kept text, with `marker(omitted, total)` where the middle was left out.
    pub fn text_marked(&self, marker: impl Fn(usize, usize) -> String) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.dropped > 0 {
            out.push_str(&marker(self.dropped, self.total()));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        out.push_str(&String::from_utf8_lossy(&tail));
        out
    }
}

/// A duration in seconds to the hundredth, as tool results give it.
pub fn seconds(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 100.0).round() / 100.0
}

/// The items of a JSON array in a service's answer (none when it is not one).
pub fn items(value: &serde_json::Value) -> impl Iterator<Item = &serde_json::Value> {
    value.as_array().into_iter().flatten()
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
    fn a_split_keeps_its_own_share_of_each_end() {
        let mut buf = HeadTail::split(4, 6);
        buf.push(b"0123456789abcdefghij");
        assert_eq!(
            buf.text_marked(|o, t| format!("[{o}/{t}]")),
            "0123[10/20]efghij"
        );
        assert_eq!((buf.omitted(), buf.total()), (10, 20));
        let mut head_only = HeadTail::split(3, 0);
        head_only.push(b"abcdef");
        assert_eq!(head_only.text_marked(|o, _| format!("[{o}]")), "abc[3]");
    }

    #[test]
    fn small_output_is_untouched() {
        let mut buf = HeadTail::new(1000);
        buf.push(b"hello\n");
        assert_eq!(buf.text(), "hello\n");
    }
}
