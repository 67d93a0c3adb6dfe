//! The supervisor's restart intensity, as OTP's: more than `max_restarts`
//! restarts within `period` and the supervisor gives up. Pure: `Sup` passes
//! `now`, so the rule is tested without crashing actors.

use crate::config::RestartIntensity;
use std::collections::VecDeque;
use std::time::Instant;

/// When the supervisor's recent restarts happened, oldest first.
#[derive(Debug, Default)]
pub(crate) struct RecentRestarts {
    times: VecDeque<Instant>,
}

impl RecentRestarts {
    /// Record a restart at `now`; `false` when it is one more than
    /// `intensity` allows within its period.
    pub(crate) fn allow(&mut self, now: Instant, intensity: RestartIntensity) -> bool {
        while self
            .times
            .front()
            .is_some_and(|t| now.duration_since(*t) > intensity.period)
        {
            self.times.pop_front();
        }
        self.times.push_back(now);
        self.times.len() as u32 <= intensity.max_restarts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn the_papers_intensity_allows_one_restart_a_minute() {
        let start = Instant::now();
        let intensity = RestartIntensity::default();
        let mut recent = RecentRestarts::default();
        assert!(recent.allow(start, intensity));
        assert!(!recent.allow(start + secs(59), intensity));
    }

    #[test]
    fn restarts_older_than_the_period_are_forgotten() {
        let start = Instant::now();
        let intensity = RestartIntensity::new(2, secs(10));
        let mut recent = RecentRestarts::default();
        assert!(recent.allow(start, intensity));
        assert!(recent.allow(start + secs(5), intensity));
        // The first is 11 s old: two in the window, not three.
        assert!(recent.allow(start + secs(11), intensity));
        assert!(!recent.allow(start + secs(12), intensity));
    }

    #[test]
    fn a_restart_exactly_one_period_old_still_counts() {
        let start = Instant::now();
        let intensity = RestartIntensity::new(1, secs(10));
        let mut recent = RecentRestarts::default();
        assert!(recent.allow(start, intensity));
        assert!(!recent.allow(start + secs(10), intensity));
    }

    #[test]
    fn no_restarts_allowed_gives_up_at_the_first() {
        let mut recent = RecentRestarts::default();
        assert!(!recent.allow(Instant::now(), RestartIntensity::new(0, secs(60))));
    }
}
