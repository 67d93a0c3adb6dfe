//! Pages per second for `status`: the rate of the last [`RECENT_MS`] apart
//! from the run's average. The average alone misleads once a crawl goes
//! idle: it keeps falling (61 → 52 → 30 pages/s with nothing fetched),
//! while the recent rate says 0 at once. Pure: the master records the
//! run's fetched count on its tick and passes `now`.

use crate::types::Millis;
use std::collections::VecDeque;

/// The span the recent rate is taken over.
pub const RECENT_MS: Millis = 10_000;

/// Samples closer together than this are not kept (the master ticks every
/// 200 ms): at most a dozen samples in memory.
const SAMPLE_EVERY_MS: Millis = 1_000;

/// The run's fetched count as it was a few moments ago, for
/// [`RecentRate::per_sec`].
#[derive(Clone, Debug)]
pub struct RecentRate {
    /// `(when, fetched then)`, oldest first; the first is at or before the
    /// start of the recent span once the run is that old.
    samples: VecDeque<(Millis, u64)>,
}

impl RecentRate {
    /// Counting from `fetched` pages at `now` (a master starting, or
    /// restarted mid-run).
    pub fn new(now: Millis, fetched: u64) -> Self {
        Self {
            samples: VecDeque::from([(now, fetched)]),
        }
    }

    /// The run had fetched `fetched` pages at `now`.
    pub fn record(&mut self, now: Millis, fetched: u64) {
        if self
            .samples
            .back()
            .is_some_and(|&(at, _)| now < at.saturating_add(SAMPLE_EVERY_MS))
        {
            return;
        }
        self.samples.push_back((now, fetched));
        // Keep the newest sample at or before the span's start as its base.
        let start = now.saturating_sub(RECENT_MS);
        while self.samples.len() > 1 && self.samples[1].0 <= start {
            self.samples.pop_front();
        }
    }

    /// Pages per second over the last [`RECENT_MS`] (a little more: since
    /// the newest sample at or before its start) up to `now`, when the run
    /// has fetched `fetched`; over the time since the first sample while
    /// the run is younger than that. 0 with no time to count over.
    pub fn per_sec(&self, now: Millis, fetched: u64) -> f64 {
        let start = now.saturating_sub(RECENT_MS);
        let base = self
            .samples
            .iter()
            .rev()
            .find(|(at, _)| *at <= start)
            .or(self.samples.front());
        let Some(&(at, then)) = base else {
            return 0.0;
        };
        let ms = now.saturating_sub(at);
        if ms <= 0 {
            return 0.0;
        }
        fetched.saturating_sub(then) as f64 * 1_000.0 / ms as f64
    }
}

/// The run's average: `fetched` pages over `elapsed_ms` (0 before any time
/// has passed).
pub fn average_per_sec(fetched: u64, elapsed_ms: u64) -> f64 {
    if elapsed_ms == 0 {
        return 0.0;
    }
    fetched as f64 * 1_000.0 / elapsed_ms as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Record a count each 200 ms tick from `from` to `to` (exclusive),
    /// `per_tick` more pages each time; returns the count at `to`.
    fn ticks(
        rate: &mut RecentRate,
        from: Millis,
        to: Millis,
        mut fetched: u64,
        per_tick: u64,
    ) -> u64 {
        let mut t = from;
        while t < to {
            rate.record(t, fetched);
            t += 200;
            fetched += per_tick;
        }
        fetched
    }

    #[test]
    fn an_idle_crawl_reads_zero_now_while_its_average_falls() {
        let mut rate = RecentRate::new(0, 0);
        // 60 s at 60 pages/s (12 a tick), then 30 s of nothing.
        let fetched = ticks(&mut rate, 0, 60_000, 0, 12);
        assert!((rate.per_sec(60_000, fetched) - 60.0).abs() < 1.0);
        assert!((average_per_sec(fetched, 60_000) - 60.0).abs() < 1.0);
        ticks(&mut rate, 60_000, 90_000, fetched, 0);
        assert_eq!(rate.per_sec(90_000, fetched), 0.0, "nothing happens now");
        assert!(
            (average_per_sec(fetched, 90_000) - 40.0).abs() < 1.0,
            "the run's average falls as idle time passes"
        );
        // Half-way into the quiet span: the rate counts only what it covers.
        let mut rate = RecentRate::new(0, 0);
        let fetched = ticks(&mut rate, 0, 60_000, 0, 12);
        ticks(&mut rate, 60_000, 65_000, fetched, 0);
        let half = rate.per_sec(65_000, fetched);
        assert!((25.0..=35.0).contains(&half), "{half}");
    }

    #[test]
    fn a_young_run_counts_since_its_start() {
        let mut rate = RecentRate::new(1_000, 0);
        assert_eq!(rate.per_sec(1_000, 0), 0.0, "no time yet");
        rate.record(2_000, 5);
        assert!((rate.per_sec(3_000, 20) - 10.0).abs() < 1e-9);
        // A master restarted mid-run counts from the run's count then.
        let rate = RecentRate::new(50_000, 900);
        assert!((rate.per_sec(52_000, 910) - 5.0).abs() < 1e-9);
        assert_eq!(average_per_sec(10, 0), 0.0);
    }

    #[test]
    fn samples_stay_few_and_cover_the_span() {
        let mut rate = RecentRate::new(0, 0);
        let fetched = ticks(&mut rate, 0, 600_000, 0, 1);
        assert!(rate.samples.len() <= 12, "{}", rate.samples.len());
        let (first, _) = rate.samples[0];
        assert!(first <= 600_000 - 200 - RECENT_MS, "{first}");
        // 1 page a 200 ms tick: 5 pages/s.
        assert!((rate.per_sec(600_000, fetched) - 5.0).abs() < 0.5);
        // A clock that steps back counts nothing rather than dividing by it.
        assert_eq!(RecentRate::new(10_000, 5).per_sec(9_000, 7), 0.0);
    }
}
