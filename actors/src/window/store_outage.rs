//! A store cycle that failed because the store is unavailable: what it did
//! not do goes back into the window, and the outage goes on
//! ([`StoreHealth`](crate::outage::StoreHealth)).

use super::Window;
use crate::outage::{Outage, Verdict};
use crate::store_cycle::CycleWork;
use crate::types::Millis;

impl Window {
    /// The cycle's store calls failed because the store is unavailable
    /// (a transient error); `work` is what the cycle did not do (what it did
    /// is taken out of it), `started` when it began, `cause` why it failed,
    /// in words. The batch and its results go back into the window, to be
    /// written with what arrives meanwhile; releases are kept; a claim whose
    /// answer may have been lost is undone by returning to pending whatever
    /// this node has leased and does not hold; every lease is renewed first
    /// thing. The outage starts or goes on: nothing is claimed, the store is
    /// asked again after a backoff
    /// ([`StoreHealth`](crate::outage::StoreHealth)), and the verdict says
    /// when to give up.
    pub fn cycle_failed(
        &mut self,
        work: CycleWork,
        started: Millis,
        now: Millis,
        cause: String,
    ) -> Verdict {
        self.cycle_running = false;
        let mut batch = work.batch;
        batch.append(std::mem::take(&mut self.unwritten.batch));
        self.unwritten.batch = batch;
        for assigned in std::mem::take(&mut self.unwritten.writing_assigned) {
            self.assign(assigned.job, &assigned.node);
        }
        let mut reported = std::mem::take(&mut self.unwritten.writing);
        reported.append(&mut self.unwritten.reported);
        self.unwritten.reported = reported;
        let mut release = work.release;
        release.append(&mut self.release);
        self.release = release;
        let mut reopen = work.reopen;
        reopen.append(&mut self.traps.reopen);
        self.traps.reopen = reopen;
        if work.load_closures {
            self.traps.closures_asked = false;
        }
        if work.release_all_but.is_some() || work.claim.is_some() {
            self.release_all_but = Some(self.claims.outstanding.keys().cloned().collect());
        }
        // Whatever was due, renew every lease in the first cycle that reaches
        // the store, before it claims: a long outage must not let a URL
        // still being fetched be claimed again.
        self.last_lease_renewal = now - self.cfg.lease.as_millis() as Millis;
        self.write_deferred = true;
        self.store.failed(started, now, cause)
    }

    /// The store outage in progress, if the store is unavailable.
    pub fn store_outage(&self) -> Option<&Outage> {
        self.store.outage()
    }

    /// Ask an unavailable store again in the next cycle, retry due or not
    /// (a stopping master's last write).
    pub fn ask_store_now(&mut self) {
        self.store.ask_now();
    }
}

#[cfg(test)]
mod tests {
    use crate::outage::Verdict;
    use crate::store_cycle::CycleWork;
    use crate::types::Job;
    use crate::window::fixtures::*;
    use std::time::Duration;

    #[test]
    fn an_unavailable_store_keeps_the_results_claims_nothing_and_asks_again_later() {
        let mut w = running(cfg(), &["a"]);
        let jobs: Vec<Job> = (0..4).map(|i| job("h", &format!("/{i}"))).collect();
        claim(&mut w, jobs.clone(), &["a"]);
        w.on_report(page(&jobs[0]), T0);
        w.on_report(page(&jobs[1]), T0);
        w.add_seed(link("http://s/"), T0);
        let work = w.start_cycle(true, true, false, T0).unwrap();
        assert_eq!(work.batch.pages.len(), 2);
        assert_eq!(w.in_flight(), 2, "written results leave the window");
        // The write fails: the store is away.
        let t1 = T0 + 10_000;
        let v = w.cycle_failed(work, T0, t1, "no server answered".into());
        assert_eq!(v, Verdict::Began { retry_at: t1 + 250 });
        assert_eq!(w.in_flight(), 4, "...and come back, so the window holds");
        assert_eq!(w.results_held(), 2);
        assert_eq!(w.store_outage().unwrap().since, T0);
        // Slaves still running report meanwhile; nothing is asked before the retry.
        w.on_report(page(&jobs[2]), t1 + 100);
        assert!(w.start_cycle(true, true, false, t1 + 100).is_none());
        assert!(!w.holds_nothing());
        let retry = w.start_cycle(false, true, false, t1 + 250).unwrap();
        let urls: Vec<&str> = retry
            .batch
            .pages
            .iter()
            .map(|p| p.record.url.as_str())
            .collect();
        assert_eq!(
            urls,
            ["http://h/0", "http://h/1", "http://h/2"],
            "the failed batch, then what came since"
        );
        assert_eq!(retry.batch.seeds.len(), 1, "the seed too");
        assert!(retry.claim.is_none(), "nothing is claimed while it is away");
        let (renewed, _) = retry.extend.clone().expect("every lease renewed first");
        assert_eq!(renewed.len(), 4);
        let mut kept = retry
            .release_all_but
            .clone()
            .expect("a lost claim is undone");
        kept.sort_by(|a, b| a.url.cmp(&b.url));
        assert_eq!(kept, jobs.iter().map(Job::key).collect::<Vec<_>>());
        // It fails again: backing off; then it is back.
        let v = w.cycle_failed(retry, t1 + 250, t1 + 300, "no server answered".into());
        assert_eq!(v, Verdict::Continues { retry_at: t1 + 800 });
        let retry = w.start_cycle(false, false, false, t1 + 800).unwrap();
        assert_eq!(retry.batch.pages.len(), 3);
        let after = w.cycle_done(Vec::new(), None, &nodes(&["a"]), t1 + 900);
        let outage = after.recovered.expect("the outage is over");
        assert_eq!((outage.since, outage.attempts), (T0, 2));
        assert!(w.store_outage().is_none());
        assert_eq!(w.in_flight(), 1, "written: only the running job is held");
        assert!(after.next.is_some(), "a claim follows at once");
        let next = w.start_cycle(false, true, false, t1 + 900).unwrap();
        assert!(next.claim.is_some(), "claiming again");
    }

    #[test]
    fn a_store_away_with_nothing_to_write_is_asked_the_idle_question() {
        let mut w = running(cfg(), &["a"]);
        let work = w.start_cycle(false, true, false, T0).unwrap();
        assert!(work.claim.is_some());
        assert!(matches!(
            w.cycle_failed(work, T0, T0 + 5, "locked".into()),
            Verdict::Began { .. }
        ));
        let probe = w.start_cycle(false, true, false, T0 + 255).unwrap();
        assert!(probe.claim.is_none());
        assert_eq!(
            probe.release_all_but,
            Some(Vec::new()),
            "the claim may have landed"
        );
        let mut w = running(cfg(), &["a"]);
        let work = w.start_cycle(false, true, false, T0).unwrap();
        w.cycle_failed(work, T0, T0, "locked".into());
        w.start_cycle(false, false, false, T0 + 250).unwrap();
        w.cycle_failed(CycleWork::default(), T0 + 250, T0 + 250, "locked".into());
        let probe = w.start_cycle(false, false, false, T0 + 750).unwrap();
        assert!(
            probe.idle_check && probe.batch.is_empty(),
            "a cheap question"
        );
    }

    #[test]
    fn an_outage_longer_than_the_limit_is_given_up() {
        let mut c = cfg();
        c.store_outage_limit = Duration::from_secs(3);
        let mut w = running(c, &["a"]);
        let mut now = T0;
        let mut work = w.start_cycle(false, true, false, now).unwrap();
        loop {
            match w.cycle_failed(work, now, now + 100, "no server answered".into()) {
                Verdict::GiveUp(failure) => {
                    assert_eq!(failure.since, T0);
                    assert_eq!(now, T0 + 3_000, "the last retry falls on the limit");
                    break;
                }
                Verdict::Began { retry_at } | Verdict::Continues { retry_at } => {
                    assert!(retry_at <= T0 + 3_000);
                    now = retry_at;
                    work = w.start_cycle(false, true, false, now).unwrap();
                }
            }
        }
    }
}
