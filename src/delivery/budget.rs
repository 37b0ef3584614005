//! Per-chat rate budget: a token bucket with a small burst, shared by sends, edits and typing
//! (invariant 4). Replies wait for a token; typing only takes one when the bucket has room
//! to spare, so it never delays a reply. A platform's `retry_after` blocks the bucket.

use std::time::Duration;

use hermes_adapter::RateLimit;
use tokio::time::Instant;

#[derive(Debug)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    refilled_at: Instant,
    blocked_until: Option<Instant>,
}

impl TokenBucket {
    pub fn new(limit: RateLimit) -> Self {
        let burst = f64::from(limit.burst.max(1));
        TokenBucket {
            rate: limit.per_second.max(0.001),
            burst,
            tokens: burst,
            refilled_at: Instant::now(),
            blocked_until: None,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now
            .saturating_duration_since(self.refilled_at)
            .as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.refilled_at = now;
    }

    /// Take a token for a message: `Duration::ZERO` when taken, else how long to wait before
    /// asking again.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if let Some(until) = self.blocked_until {
            if until > now {
                return until - now;
            }
            self.blocked_until = None;
        }
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / self.rate)
        }
    }

    /// Take a token for a best-effort action only if one would still be left for a reply.
    pub fn try_spare(&mut self, now: Instant) -> bool {
        if self.blocked_until.is_some_and(|u| u > now) {
            return false;
        }
        self.refill(now);
        if self.tokens >= 2.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Full and not held back: forgetting it loses nothing (a new one starts full).
    pub fn is_rested(&mut self, now: Instant) -> bool {
        if self.blocked_until.is_some_and(|u| u > now) {
            return false;
        }
        self.refill(now);
        self.tokens >= self.burst
    }

    /// The platform said to wait.
    pub fn block_for(&mut self, wait: Duration, now: Instant) {
        let until = now + wait;
        self.blocked_until = Some(self.blocked_until.map_or(until, |u| u.max(until)));
        self.tokens = 0.0;
        self.refilled_at = until;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_applies() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(RateLimit {
            per_second: 1.0,
            burst: 3,
        });
        for _ in 0..3 {
            assert_eq!(b.reserve(t0), Duration::ZERO);
        }
        let wait = b.reserve(t0);
        assert!(
            wait > Duration::from_millis(900) && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert_eq!(b.reserve(t0 + Duration::from_secs(1)), Duration::ZERO);
    }

    #[test]
    fn typing_never_takes_the_last_token() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(RateLimit {
            per_second: 1.0,
            burst: 2,
        });
        assert!(b.try_spare(t0));
        assert!(!b.try_spare(t0));
        assert_eq!(
            b.reserve(t0),
            Duration::ZERO,
            "a reply still goes out at once"
        );
    }

    #[test]
    fn retry_after_blocks_everything_until_it_passes() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(RateLimit {
            per_second: 10.0,
            burst: 5,
        });
        b.block_for(Duration::from_secs(3), t0);
        assert!(
            b.reserve(t0 + Duration::from_secs(1))
                >= Duration::from_secs(2) - Duration::from_millis(1)
        );
        assert!(!b.try_spare(t0 + Duration::from_secs(2)));
        assert_eq!(b.reserve(t0 + Duration::from_secs(4)), Duration::ZERO);
    }
}
