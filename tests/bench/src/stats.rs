//! Percentiles over millisecond samples.

use std::time::Duration;

use serde_json::{Value, json};

/// Samples in milliseconds.
#[derive(Debug, Clone, Default)]
pub struct Samples(Vec<f64>);

impl Samples {
    pub fn push(&mut self, d: Duration) {
        self.0.push(d.as_secs_f64() * 1000.0);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Nearest-rank percentile (`p` in 0..=100); NaN when empty.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let mut sorted = self.0.clone();
        sorted.sort_by(f64::total_cmp);
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    pub fn p50(&self) -> f64 {
        self.percentile(50.0)
    }

    pub fn p99(&self) -> f64 {
        self.percentile(99.0)
    }

    pub fn min(&self) -> f64 {
        self.percentile(0.0)
    }

    pub fn max(&self) -> f64 {
        self.percentile(100.0)
    }

    pub fn mean(&self) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        self.0.iter().sum::<f64>() / self.0.len() as f64
    }

    /// `{"n", "p50", "p99", "min", "max", "mean"}`, milliseconds rounded to µs.
    pub fn json(&self) -> Value {
        json!({
            "n": self.len(),
            "p50": round3(self.p50()),
            "p99": round3(self.p99()),
            "min": round3(self.min()),
            "max": round3(self.max()),
            "mean": round3(self.mean()),
        })
    }
}

/// Round to three decimals; NaN becomes JSON null through `serde_json`.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut s = Samples::default();
        for ms in 1..=200 {
            s.push(Duration::from_millis(ms));
        }
        assert_eq!(s.p50(), 100.0);
        assert_eq!(s.p99(), 198.0);
        assert_eq!(s.min(), 1.0);
        assert_eq!(s.max(), 200.0);
    }
}
