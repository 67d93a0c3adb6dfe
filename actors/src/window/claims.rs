//! What the window holds claimed: each URL and the node whose pool has it,
//! counted per host and per node; how much to claim next, within the
//! window sizes and the page budget; and the leases renewed while their
//! URLs are worked on.

use super::Window;
use crate::behaviour::ClaimRequest;
use crate::config::CrawlConfig;
use crate::types::{Job, Millis, UrlKey};
use std::collections::HashMap;

/// A claimed URL and the node whose pool has it.
#[derive(Debug)]
pub(super) struct Assigned {
    pub(super) job: Job,
    pub(super) node: String,
}

/// Claimed and handed to a pool, not yet committed; counted per host and
/// per node.
#[derive(Debug, Default)]
pub(super) struct Claims {
    pub(super) outstanding: HashMap<UrlKey, Assigned>,
    pub(super) per_host: HashMap<String, usize>,
    pub(super) per_node: HashMap<String, usize>,
}

pub(super) fn decrement(counts: &mut HashMap<String, usize>, key: &str) {
    if let Some(n) = counts.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(key);
        }
    }
}

impl Window {
    /// What to claim now, if anything: the window's free room, when it is
    /// worth a store call (a few free slots wait for more to free up, unless
    /// the window is running low), within the page budget.
    pub(super) fn claim_request(&self, now: Millis) -> Option<ClaimRequest> {
        let live_pools = self.placement.live_nodes.len();
        if self.recovery.is_some()
            || self.drain.is_some()
            || self.paused
            || self.budget_reached()
            || live_pools == 0
            || self.store.outage().is_some()
        {
            return None;
        }
        let (window, per_host_cap) = self.claim_limits();
        let held = self.claims.outstanding.len();
        let mut limit = window.saturating_sub(held);
        if limit < window / 8 && held > window / 2 {
            return None;
        }
        if let Some(max) = self.cfg.max_pages {
            // Don't lease far more than the budget can use.
            let left = max.saturating_sub(self.fetched) as usize;
            limit = limit.min(left.saturating_sub(held));
        }
        if limit == 0 {
            return None;
        }
        Some(ClaimRequest {
            now,
            owner: self.cfg.node_name.clone(),
            lease_until: now + self.cfg.lease.as_millis() as Millis,
            limit,
            per_host_cap,
            held_per_host: self.claims.per_host.clone(),
        })
    }

    /// The most URLs held claimed at once over the live nodes, and per
    /// host: the window sizes, which follow the settings.
    pub fn claim_limits(&self) -> (usize, usize) {
        (
            self.cfg.effective_claim_window() * self.placement.live_nodes.len(),
            self.cfg.effective_per_host_window(),
        )
    }

    /// The node's settings changed at run time (an operator's `set`): the
    /// window sizes follow them from the next claim.
    pub fn retune(&mut self, cfg: CrawlConfig) {
        self.cfg = cfg;
    }

    /// Leases of URLs still being worked on, to push forward (every third of
    /// the lease), so they do not expire under a slow fetch.
    pub(super) fn leases_due(&mut self, now: Millis) -> Option<(Vec<UrlKey>, Millis)> {
        let lease = self.cfg.lease.as_millis() as Millis;
        if now - self.last_lease_renewal < lease / 3 || self.claims.outstanding.is_empty() {
            return None;
        }
        self.last_lease_renewal = now;
        Some((
            self.claims.outstanding.keys().cloned().collect(),
            now + lease,
        ))
    }

    pub fn in_flight(&self) -> usize {
        self.claims.outstanding.len()
    }

    pub(super) fn assign(&mut self, job: Job, node: &str) {
        self.refusals.sent(&job.host);
        *self.claims.per_host.entry(job.host.clone()).or_default() += 1;
        *self.claims.per_node.entry(node.to_string()).or_default() += 1;
        self.placement
            .host_owner
            .entry(job.host.clone())
            .or_insert_with(|| node.to_string());
        self.claims.outstanding.insert(
            job.key(),
            Assigned {
                job,
                node: node.to_string(),
            },
        );
    }

    pub(super) fn forget(&mut self, key: &UrlKey) -> Option<Assigned> {
        // Not fetched after all (released, retried): the ask stands in
        // the pending row it was written to.
        if !self.availability.asked_meanwhile.is_empty() {
            self.availability.asked_meanwhile.remove(key);
        }
        let assigned = self.claims.outstanding.remove(key)?;
        decrement(&mut self.claims.per_host, &assigned.job.host);
        decrement(&mut self.claims.per_node, &assigned.node);
        Some(assigned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::IdleReason;
    use crate::window::RECOVERY_WAIT_MS;
    use crate::window::fixtures::*;
    use std::time::Duration;

    #[test]
    fn the_claim_sizes_follow_a_set_concurrency_and_per_host() {
        let defaults = CrawlConfig {
            claim_window: 0,
            per_host_window: 0,
            ..cfg()
        };
        let mut w = running(defaults.clone(), &["a", "b"]);
        assert_eq!(w.claim_limits(), (2 * 64 * 2, 8), "64 per slot and node");
        w.retune(CrawlConfig {
            concurrency: 1,
            per_host: 3,
            ..defaults
        });
        assert_eq!(w.claim_limits(), (64 * 2, 24));
        let req = w
            .start_cycle(false, true, false, T0)
            .unwrap()
            .claim
            .unwrap();
        assert_eq!((req.limit, req.per_host_cap), (128, 24));
    }

    #[test]
    fn claims_the_free_room_of_the_window_per_live_node() {
        let mut w = running(cfg(), &["a", "b"]);
        let work = w.start_cycle(false, true, false, T0).unwrap();
        let req = work.claim.unwrap();
        assert_eq!(req.limit, 32, "16 per live pool");
        assert_eq!(req.per_host_cap, 4);
        assert_eq!(req.owner, "n1");
        assert_eq!(req.lease_until, T0 + 120_000);
        let jobs: Vec<Job> = (0..20).map(|i| job(&format!("h{i}"), "/")).collect();
        w.cycle_done(jobs, None, &nodes(&["a", "b"]), T0);
        let req = w
            .start_cycle(false, true, false, T0)
            .unwrap()
            .claim
            .unwrap();
        assert_eq!(req.limit, 12, "what is held counts against the window");
        assert_eq!(req.held_per_host.get("h3"), Some(&1));
    }

    #[test]
    fn a_few_free_slots_wait_unless_the_window_runs_low() {
        let mut w = running(cfg(), &["a"]);
        claim(
            &mut w,
            (0..15).map(|i| job("h", &format!("/{i}"))).collect(),
            &["a"],
        );
        // 1 free of 16, 15 held: not worth a store call.
        let work = w.start_cycle(false, true, false, T0);
        assert!(work.is_none_or(|w| w.claim.is_none()));
    }

    #[test]
    fn nothing_is_claimed_while_recovering_paused_draining_or_without_pools() {
        let mut w = Window::new(cfg(), 0, 0, T0);
        w.begin_recovery(&nodes(&["a"]), T0);
        // The trap closures are read at once; nothing is claimed.
        let work = w.start_cycle(false, true, false, T0).unwrap();
        assert!(work.load_closures && work.claim.is_none() && work.release_all_but.is_none());
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
        assert!(
            w.start_cycle(false, true, false, T0).is_none(),
            "recovering"
        );
        assert!(
            w.end_recovery_if_due(T0 + RECOVERY_WAIT_MS),
            "the wait is over"
        );
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);

        let mut w = running(cfg(), &["a"]);
        w.pause(true);
        assert!(w.start_cycle(false, true, false, T0).is_none(), "paused");
        w.pause(false);
        assert!(w.start_cycle(false, true, false, T0).is_some());
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);

        w.begin_drain(T0, 1_000);
        assert!(w.start_cycle(false, true, false, T0).is_none(), "draining");

        let mut w = running(cfg(), &[]);
        assert!(w.start_cycle(false, true, false, T0).is_none(), "no pools");
    }

    #[test]
    fn the_budget_limits_claims_and_ends_them() {
        let mut c = cfg();
        c.max_pages = Some(5);
        let mut w = running(c, &["a"]);
        let req = w
            .start_cycle(false, true, false, T0)
            .unwrap()
            .claim
            .unwrap();
        assert_eq!(req.limit, 5, "no more than the budget can use");
        let jobs: Vec<Job> = (0..5).map(|i| job("h", &format!("/{i}"))).collect();
        w.cycle_done(jobs.clone(), None, &nodes(&["a"]), T0);
        for j in &jobs {
            w.on_report(page(j), T0);
        }
        assert!(w.budget_reached());
        let work = w.start_cycle(true, true, false, T0).unwrap();
        assert_eq!(work.batch.pages.len(), 5);
        assert!(work.claim.is_none(), "the budget is spent");
        let after = w.cycle_done(Vec::new(), Some(true), &nodes(&["a"]), T0);
        assert_eq!(after.idle, Some(IdleReason::BudgetReached));
    }

    #[test]
    fn leases_are_renewed_every_third_of_the_lease() {
        let mut c = cfg();
        c.lease = Duration::from_secs(30);
        let mut w = running(c, &["a"]);
        claim(&mut w, vec![job("h", "/")], &["a"]);
        assert!(w.start_cycle(false, false, false, T0 + 9_999).is_none());
        let work = w.start_cycle(false, false, false, T0 + 10_000).unwrap();
        let (keys, until) = work.extend.unwrap();
        assert_eq!((keys.len(), until), (1, T0 + 40_000));
    }
}
