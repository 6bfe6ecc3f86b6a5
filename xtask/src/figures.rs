//! How the bridge benchmark and the soak turn measurements into figures: nearest-rank
//! percentiles, milliseconds, MiB.

use std::time::Duration;

/// The nearest-rank percentile `p` (0-100) of `sorted`, which must not be empty.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `d` in milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `kib` KiB in MiB.
pub(crate) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<Duration> = (1..=200).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Duration::from_millis(100));
        assert_eq!(percentile(&v, 99.0), Duration::from_millis(198));
        assert_eq!(percentile(&v[..1], 99.0), Duration::from_millis(1));
    }
}
