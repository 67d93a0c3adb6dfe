//! A (re)started master's recovery of its predecessor's leases: what the
//! live pools say they hold stays leased, the rest goes back to pending.

use super::Window;
use crate::types::{Job, Millis};
use std::collections::BTreeSet;

/// How long a starting master waits for pools to answer `Resync`.
pub const RECOVERY_WAIT_MS: Millis = 3_000;

/// A (re)started master waits for the pools to say what they hold before it
/// returns the rest of its leases to pending.
#[derive(Debug)]
pub(super) struct Recovery {
    pub(super) deadline: Millis,
    pub(super) waiting: BTreeSet<String>,
}

impl Window {
    /// A (re)started master asked the live pools what they hold; until they
    /// answer (or the wait is over) it claims nothing.
    pub fn begin_recovery(&mut self, live: &[String], now: Millis) {
        self.placement.live_nodes = live.iter().cloned().collect();
        self.recovery = Some(Recovery {
            deadline: now + RECOVERY_WAIT_MS,
            waiting: self.placement.live_nodes.clone(),
        });
    }

    /// A pool's answer: what it holds stays leased, to this master now.
    pub fn adopt(&mut self, node: &str, jobs: Vec<Job>) {
        let Some(recovery) = &mut self.recovery else {
            return;
        };
        recovery.waiting.remove(node);
        for job in jobs {
            self.assign(job, node);
        }
    }

    /// End recovery once every pool answered or the wait is over: every
    /// other lease of this node goes back to pending in the next cycle.
    /// Returns whether it ended now.
    pub fn end_recovery_if_due(&mut self, now: Millis) -> bool {
        match &self.recovery {
            Some(r) if r.waiting.is_empty() || now >= r.deadline => {
                self.recovery = None;
                self.release_all_but = Some(self.claims.outstanding.keys().cloned().collect());
                true
            }
            _ => false,
        }
    }

    pub fn recovering(&self) -> bool {
        self.recovery.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::fixtures::*;

    #[test]
    fn recovery_adopts_what_pools_hold_and_releases_the_rest() {
        let mut w = Window::new(cfg(), 7, 1, T0);
        w.begin_recovery(&nodes(&["a", "b"]), T0);
        let held = job("h", "/held");
        w.adopt("a", vec![held.clone()]);
        assert!(!w.end_recovery_if_due(T0 + 10), "b has not answered");
        w.adopt("b", Vec::new());
        assert!(w.end_recovery_if_due(T0 + 10));
        let work = w.start_cycle(false, true, false, T0 + 10).unwrap();
        assert_eq!(work.release_all_but, Some(vec![held.key()]));
        assert!(
            work.claim.is_some(),
            "claims after the release, in one cycle"
        );
        assert_eq!(w.in_flight(), 1, "the adopted URL is held");
        assert_eq!(w.fetched(), 7, "the run's count carries over");
        // An adopt after recovery (a late answer) changes nothing.
        w.adopt("a", vec![job("h", "/late")]);
        assert_eq!(w.in_flight(), 1);
    }
}
