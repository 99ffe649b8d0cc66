//! Percentiles of recorded samples.

use serde::Serialize;

/// p50 / p90 / p99 / max of a sample set, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Summary {
    pub count: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

/// Summarises nanosecond samples (sorts them in place). Nearest-rank percentiles.
pub fn summarize(samples: &mut [u64]) -> Summary {
    if samples.is_empty() {
        return Summary::default();
    }
    samples.sort_unstable();
    let rank = |p: f64| {
        let index = ((p / 100.0) * samples.len() as f64).ceil() as usize;
        samples[index.clamp(1, samples.len()) - 1]
    };
    let ms = |ns: u64| ns as f64 / 1e6;
    let sum: u128 = samples.iter().map(|&s| u128::from(s)).sum();
    Summary {
        count: samples.len(),
        p50_ms: ms(rank(50.0)),
        p90_ms: ms(rank(90.0)),
        p99_ms: ms(rank(99.0)),
        max_ms: ms(samples[samples.len() - 1]),
        mean_ms: sum as f64 / samples.len() as f64 / 1e6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut samples: Vec<u64> = (1..=100).rev().map(|ms| ms * 1_000_000).collect();
        let s = summarize(&mut samples);
        assert_eq!((s.count, s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms), (100, 50.0, 90.0, 99.0, 100.0));
        assert!((s.mean_ms - 50.5).abs() < 1e-9);
        assert_eq!(summarize(&mut []).count, 0);
        assert_eq!(summarize(&mut [7_000_000]).p99_ms, 7.0);
    }
}
