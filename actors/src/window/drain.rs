//! Pause and graceful stop: claim nothing more, let running slaves report
//! until the deadline, and release the rest.

use super::Window;
use crate::types::{Job, Millis, UrlKey};
use std::collections::BTreeSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Drain {
    Running {
        deadline: Millis,
    },
    /// Everything is written or released once the cycles in hand are done.
    Finishing,
}

impl Window {
    pub fn pause(&mut self, paused: bool) {
        self.paused = paused;
    }

    /// Graceful stop: claim nothing more; running slaves get until
    /// `now + timeout` to report.
    pub fn begin_drain(&mut self, now: Millis, timeout_ms: Millis) {
        // URLs parked for a move go back now; what the old pools hand back
        // does too ([`Window::released`]).
        let parked: Vec<Job> = self
            .placement
            .moving
            .drain()
            .flat_map(|(_, m)| m.parked)
            .collect();
        self.unstarted(&parked);
        self.drain = Some(Drain::Running {
            deadline: now + timeout_ms,
        });
    }

    /// Once nothing runs any more, or the deadline passed, whatever is still
    /// outstanding goes back to pending (its slaves' reports are late) and
    /// the drain finishes with the next cycles. Returns whether the drain is
    /// complete: everything written and released.
    pub fn drain_step(&mut self, now: Millis) -> bool {
        match self.drain {
            None => false,
            Some(Drain::Running { deadline }) => {
                if self.claims.outstanding.len() > self.unwritten.reported.len() && now < deadline {
                    return false;
                }
                let reported: BTreeSet<UrlKey> =
                    self.unwritten.reported.iter().map(Job::key).collect();
                let late: Vec<UrlKey> = self
                    .claims
                    .outstanding
                    .keys()
                    .filter(|k| !reported.contains(*k))
                    .cloned()
                    .collect();
                for key in &late {
                    self.forget(key);
                }
                self.release.extend(late);
                self.drain = Some(Drain::Finishing);
                false
            }
            Some(Drain::Finishing) => self.holds_nothing() && !self.write_deferred,
        }
    }

    pub fn draining(&self) -> bool {
        self.drain.is_some()
    }

    pub fn paused(&self) -> bool {
        self.paused
    }
}

#[cfg(test)]
mod tests {
    use crate::window::fixtures::*;

    #[test]
    fn a_drain_finishes_while_someone_waits_for_idle() {
        // `crawl` stopped by a signal leaves its wait for idleness behind:
        // the drain must not keep asking (a cycle always running).
        let mut w = running(cfg(), &["a"]);
        let j = job("h", "/1");
        claim(&mut w, vec![j.clone()], &["a"]);
        w.begin_drain(T0, 1_000);
        w.on_report(page(&j), T0);
        assert!(!w.drain_step(T0 + 1));
        let work = w.start_cycle(true, false, true, T0 + 1).unwrap();
        assert!(!work.idle_check, "no idle check while draining");
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0 + 2);
        assert!(
            w.start_cycle(true, false, true, T0 + 3).is_none(),
            "nothing left to do: no cycle"
        );
        assert!(w.drain_step(T0 + 3), "the drain is complete");
    }

    #[test]
    fn a_drain_waits_for_running_slaves_then_releases_the_rest() {
        let mut w = running(cfg(), &["a"]);
        let (j1, j2, j3) = (job("h", "/1"), job("h", "/2"), job("h", "/3"));
        claim(&mut w, vec![j1.clone(), j2.clone(), j3.clone()], &["a"]);
        w.begin_drain(T0, 1_000);
        w.unstarted(std::slice::from_ref(&j3));
        w.on_report(page(&j1), T0);
        assert!(!w.drain_step(T0 + 10), "j2 still runs");
        assert!(!w.drain_step(T0 + 1_000), "deadline: j2 is given up");
        let work = w.start_cycle(true, true, false, T0 + 1_000).unwrap();
        assert_eq!(work.batch.pages.len(), 1, "j1 is written");
        let mut released = work.release.clone();
        released.sort();
        assert_eq!(released, vec![j2.key(), j3.key()]);
        assert!(work.claim.is_none());
        assert!(!w.drain_step(T0 + 1_001), "the cycle runs");
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
        assert!(w.drain_step(T0 + 1_002));
        assert_eq!(w.in_flight(), 0);
    }

    #[test]
    fn claims_landing_during_a_pause_go_straight_back() {
        let mut w = running(cfg(), &["a"]);
        w.start_cycle(false, true, false, T0).unwrap();
        w.pause(true);
        let after = w.cycle_done(vec![job("h", "/")], None, &nodes(&["a"]), T0);
        assert!(after.dispatch.is_empty());
        assert_eq!(after.next, Some(false), "the release goes next");
        let work = w.start_cycle(false, true, false, T0).unwrap();
        assert_eq!(work.release.len(), 1);
    }

    #[test]
    fn a_drain_sends_parked_and_handed_back_urls_to_pending() {
        let mut w = running(cfg(), &["a"]);
        let moves = b_joins(&mut w);
        let host = moves[0].host.clone();
        let parked = job(&host, "/parked");
        claim(&mut w, vec![parked.clone()], &["a", "b"]);
        w.begin_drain(T0, 1_000);
        let queued = w
            .claims
            .outstanding
            .values()
            .find(|a| a.job.host == host)
            .unwrap()
            .job
            .clone();
        assert_eq!(w.released("a", &host, vec![queued.clone()]), None);
        let work = w.start_cycle(false, false, false, T0).unwrap();
        let mut released = work.release;
        released.sort();
        let mut want = vec![parked.key(), queued.key()];
        want.sort();
        assert_eq!(released, want);
    }
}
