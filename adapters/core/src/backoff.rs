//! The one backoff of the gateway: exponential from a base delay to a cap, optionally
//! jittered (±50 %). Adapters reconnecting, delivery retrying a send and the LLM client
//! retrying a call all use it.

use std::time::Duration;

/// An exponential backoff with its attempt counter.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    jitter: bool,
    attempt: u32,
}

impl Backoff {
    /// `base`, `2·base`, `4·base`, … never more than `max`.
    pub const fn new(base: Duration, max: Duration) -> Backoff {
        Backoff {
            base,
            max,
            jitter: false,
            attempt: 0,
        }
    }

    /// The same, each delay scaled by a random factor in [0.5, 1.5) (and still capped), so
    /// many clients that failed together do not retry together.
    pub const fn jittered(mut self) -> Backoff {
        self.jitter = true;
        self
    }

    /// The delay before retry number `attempt` (0 = the first retry).
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = self.base.saturating_mul(1 << attempt.min(16)).min(self.max);
        if self.jitter {
            exp.mul_f64(0.5 + rand::random::<f64>()).min(self.max)
        } else {
            exp
        }
    }

    /// The next delay; each call waits longer, up to the cap.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.delay(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        delay
    }

    /// Start again from the base delay (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        let delays: Vec<u64> = (0..7).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_secs(1));
    }

    #[test]
    fn jitter_stays_within_half_either_side_and_under_the_cap() {
        let b = Backoff::new(Duration::from_millis(500), Duration::from_secs(20)).jittered();
        for _ in 0..100 {
            let first = b.delay(0);
            assert!(first >= Duration::from_millis(250) && first < Duration::from_millis(750));
            assert!(b.delay(40) <= Duration::from_secs(20));
        }
    }
}
