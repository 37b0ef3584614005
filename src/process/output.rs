//! A rolling output buffer addressed by absolute byte offsets: it keeps the last `capacity`
//! bytes and remembers how many came before, so "what is new since offset N" stays
//! answerable while memory stays bounded.

use std::collections::VecDeque;

pub struct RollingOutput {
    capacity: usize,
    bytes: VecDeque<u8>,
    /// Bytes dropped from the front so far (the absolute offset of `bytes[0]`).
    dropped: u64,
}

impl RollingOutput {
    pub fn new(capacity: usize) -> Self {
        RollingOutput {
            capacity,
            bytes: VecDeque::new(),
            dropped: 0,
        }
    }

    pub fn push(&mut self, data: &[u8]) {
        self.bytes.extend(data);
        if self.bytes.len() > self.capacity {
            let excess = self.bytes.len() - self.capacity;
            self.bytes.drain(..excess);
            self.dropped += excess as u64;
        }
    }

    /// Total bytes ever written (the offset after the newest byte).
    pub fn end(&self) -> u64 {
        self.dropped + self.bytes.len() as u64
    }

    /// Text from absolute `offset` to the end (from the oldest kept byte if `offset` is gone),
    /// and whether some of it had already been dropped.
    pub fn since(&self, offset: u64) -> (String, bool) {
        let lost = offset < self.dropped;
        let start = offset
            .saturating_sub(self.dropped)
            .min(self.bytes.len() as u64) as usize;
        let slice: Vec<u8> = self.bytes.iter().skip(start).copied().collect();
        (String::from_utf8_lossy(&slice).into_owned(), lost)
    }

    /// The last `n` lines.
    pub fn last_lines(&self, n: usize) -> String {
        let (all, _) = self.since(self.dropped);
        let lines: Vec<&str> = all.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_survive_rolling() {
        let mut out = RollingOutput::new(10);
        out.push(b"hello ");
        assert_eq!(out.since(0), ("hello ".into(), false));
        let mark = out.end();
        out.push(b"world, again");
        assert_eq!(out.end(), 18);
        let (text, lost) = out.since(mark);
        assert_eq!(text, "rld, again");
        assert!(lost, "part of what came after the mark rolled out");
        assert_eq!(out.since(out.end()), (String::new(), false));
    }

    #[test]
    fn last_lines_are_the_tail() {
        let mut out = RollingOutput::new(1000);
        out.push(b"a\nb\nc\nd\n");
        assert_eq!(out.last_lines(2), "c\nd");
    }
}
