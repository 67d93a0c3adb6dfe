//! One store cycle at a time: what the next one does (the batch to write,
//! what to claim, release, renew and ask), what its end hands out, and when
//! the crawl is idle.

use super::Window;
use super::claims::Assigned;
use crate::behaviour::CommitBatch;
use crate::departures::HandOverStep;
use crate::outage::Outage;
use crate::protocol::IdleReason;
use crate::store_cycle::CycleWork;
use crate::types::{Job, Millis};

/// What to do once a cycle is done.
#[derive(Debug, Default, PartialEq)]
pub struct AfterCycle {
    /// Claimed jobs for each node's pool.
    pub dispatch: Vec<(String, Vec<Job>)>,
    /// The crawl is idle, for this reason: answer the idle waiters.
    pub idle: Option<IdleReason>,
    /// Start another cycle at once (`Some(write)`): work piled up while this
    /// one ran, or it claimed something and there may be more. A claim that
    /// found nothing is not repeated until something changes.
    pub next: Option<bool>,
    /// The store was unavailable and this cycle reached it: the outage that
    /// ended (say so; claiming resumes with the next cycle).
    pub recovered: Option<Outage>,
}

/// When what joined the batch is written ([`Window::flush`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Flush {
    /// A write is due: start a cycle now.
    Now,
    /// Start the flush timer (`flush_every`), which writes it.
    StartTimer,
    /// The timer running writes it.
    TimerRunning,
}

/// What the store has not been given yet: the batch of writes and the jobs
/// whose results it holds, and those the running cycle writes.
#[derive(Debug, Default)]
pub(super) struct Unwritten {
    pub(super) batch: CommitBatch,
    /// Jobs whose results are in `batch`: still counted as outstanding until
    /// taken for a write, so the window bounds what a crash can cost.
    pub(super) reported: Vec<Job>,
    /// The jobs whose results the running cycle writes, and where they ran:
    /// back into the window should the store be unavailable.
    pub(super) writing: Vec<Job>,
    pub(super) writing_assigned: Vec<Assigned>,
}

/// Why the crawl is idle, given that the master holds nothing.
pub fn idle_reason(budget_reached: bool, frontier_empty: bool) -> Option<IdleReason> {
    if budget_reached {
        Some(IdleReason::BudgetReached)
    } else if frontier_empty {
        Some(IdleReason::FrontierEmpty)
    } else {
        None
    }
}

impl Window {
    /// Write the batch now rather than at the next flush: it is a quarter of
    /// the window, or every URL this master holds is waiting for it (nothing
    /// is left to fetch until it is written and the links it holds are
    /// claimed, so waiting would only slow a narrow crawl down), or it holds
    /// a seed whose caller waits for it to be durable.
    pub fn write_due(&self) -> bool {
        let reported = self.unwritten.reported.len();
        reported >= self.cfg.flush_at()
            || (reported > 0 && reported >= self.claims.outstanding.len())
            || !self.unwritten.batch.seeds.is_empty()
    }

    /// Something joined the batch; `due`: a write is due
    /// ([`Window::write_due`], as [`Window::on_report`] says). Else it is
    /// written within `flush_every` of the first thing that waits, on one
    /// timer at a time.
    pub fn flush(&mut self, due: bool) -> Flush {
        if due {
            Flush::Now
        } else if std::mem::replace(&mut self.flush_timer, true) {
            Flush::TimerRunning
        } else {
            Flush::StartTimer
        }
    }

    /// The flush timer went off (or a drain's, which ends the same way):
    /// the next thing that waits starts it again.
    pub fn flush_timer_done(&mut self) {
        self.flush_timer = false;
    }

    /// The next store cycle's work, if there is any, none is running and the
    /// store may be asked (it is reachable, or its retry is due): the batch
    /// when `write` (its results leave the window while it is written, and
    /// come back should the store be unavailable, [`Window::cycle_failed`]),
    /// and a claim when `claim`, there is room and the store is reachable.
    /// `idle_waiters`: someone waits for the crawl to be idle, so a cycle
    /// that leaves the window empty also asks whether the frontier is empty.
    pub fn start_cycle(
        &mut self,
        write: bool,
        claim: bool,
        idle_waiters: bool,
        now: Millis,
    ) -> Option<CycleWork> {
        if self.cycle_running || !self.store.may_ask(now) {
            self.write_deferred |= write;
            return None;
        }
        // Taken whatever `write` says: a flag left set would chain cycles forever.
        let deferred = std::mem::take(&mut self.write_deferred);
        let write = write || deferred;
        let mut work = CycleWork {
            release_all_but: self.release_all_but.take(),
            release: std::mem::take(&mut self.release),
            extend: self.leases_due(now),
            ..CycleWork::default()
        };
        // A reopened family's URLs are released after the batch in hand
        // is written: it may hold some the family refused.
        if write || !self.unwritten.batch.seeds.is_empty() || !self.traps.reopen.is_empty() {
            work.batch = self.take_batch(now);
        }
        work.reopen = std::mem::take(&mut self.traps.reopen);
        if self.traps.guard.is_some() && !self.traps.closures_asked {
            work.load_closures = true;
            self.traps.closures_asked = true;
        }
        if claim {
            work.claim = self.claim_request(now);
        }
        work.sweep = self.sweep_due(now);
        work.hand_over = self.hand_over_due(now);
        // Not while draining: idleness no longer matters, and a count per
        // cycle kept a cycle running at every check, so the drain never
        // finished while anyone waited for idle.
        work.idle_check = idle_waiters && self.drain.is_none() && self.holds_nothing_but_cycle();
        if self.store.outage().is_some() && work.is_empty() {
            // Nothing to write, but the store is away: ask it something
            // cheap, or nothing would find out that it is back.
            work.idle_check = true;
        }
        if work.is_empty() {
            return None;
        }
        self.cycle_running = true;
        Some(work)
    }

    /// This cycle's step of a departed node's hand-over, if one is due:
    /// not while draining, recovering or waiting for the store.
    fn hand_over_due(&mut self, now: Millis) -> Option<HandOverStep> {
        if self.drain.is_some() || self.recovery.is_some() || self.store.outage().is_some() {
            return None;
        }
        self.departures.next_step(now)
    }

    fn take_batch(&mut self, now: Millis) -> CommitBatch {
        let mut batch = std::mem::take(&mut self.unwritten.batch);
        batch.now = now;
        batch.history_keep = self.cfg.history_keep;
        batch.reprocess_after_ms = self.cfg.reprocess_after.map(|d| d.as_millis() as Millis);
        for job in std::mem::take(&mut self.unwritten.reported) {
            if let Some(assigned) = self.forget(&job.key()) {
                self.unwritten.writing_assigned.push(assigned);
            }
            self.unwritten.writing.push(job);
        }
        batch
    }

    /// Results waiting to be written.
    pub fn results_held(&self) -> usize {
        self.unwritten.reported.len()
    }

    /// A cycle ended: hand out what it claimed (or, when paused or draining,
    /// send it straight back), and say whether the crawl is idle and whether
    /// another cycle should start. `live` are the live pools' nodes.
    pub fn cycle_done(
        &mut self,
        claimed: Vec<Job>,
        frontier_empty: Option<bool>,
        live: &[String],
        now: Millis,
    ) -> AfterCycle {
        self.cycle_running = false;
        self.unwritten.writing.clear();
        self.unwritten.writing_assigned.clear();
        let n = claimed.len();
        let claimed = self.guard_claimed(claimed, now);
        let mut after = AfterCycle {
            recovered: self.store.recovered(),
            ..AfterCycle::default()
        };
        if self.drain.is_some() || self.paused || live.is_empty() {
            // Claimed before the drain or pause: straight back to pending.
            self.release.extend(claimed.iter().map(Job::key));
        } else {
            after.dispatch = self.place(claimed, live);
        }
        if n == 0
            && self.holds_nothing()
            && let Some(frontier_empty) = frontier_empty
        {
            after.idle = idle_reason(self.budget_reached(), frontier_empty);
        }
        let write = self.write_deferred || self.write_due();
        if write
            || n > 0
            || self.release_all_but.is_some()
            || !self.release.is_empty()
            || after.recovered.is_some()
        {
            after.next = Some(write);
        }
        after
    }

    pub fn budget_reached(&self) -> bool {
        self.cfg.max_pages.is_some_and(|max| self.fetched >= max)
    }

    /// No URL claimed and not yet committed, no result waiting to be
    /// written, nothing to release, no store cycle running: whether the
    /// crawl is idle is then up to the budget and the store's frontier.
    pub fn holds_nothing(&self) -> bool {
        !self.cycle_running && self.holds_nothing_but_cycle()
    }

    fn holds_nothing_but_cycle(&self) -> bool {
        self.claims.outstanding.is_empty()
            && self.unwritten.batch.is_empty()
            && self.release.is_empty()
            && self.release_all_but.is_none()
            && self.recovery.is_none()
            && self.traps.reopen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::SlaveReport;
    use crate::types::{NewLink, OperationSpec, ROBOTS_BLOCKED};
    use crate::window::fixtures::*;

    #[test]
    fn reports_become_the_next_batch_and_leave_the_window_when_written() {
        let mut w = running(cfg(), &["a"]);
        let (j1, j2, j3) = (job("h", "/1"), job("h", "/2"), job("g", "/3"));
        claim(&mut w, vec![j1.clone(), j2.clone(), j3.clone()], &["a"]);
        assert!(
            !w.on_report(page(&j1), T0),
            "two still out: wait for the flush"
        );
        assert!(!w.on_report(SlaveReport::RobotsBlocked { job: j2.clone() }, T0));
        assert_eq!(w.in_flight(), 3, "reported but unwritten still counts");
        assert!(
            w.on_report(failed(&j3, false, None), T0),
            "all reported: write"
        );
        let work = w.start_cycle(true, false, false, T0 + 5).unwrap();
        assert_eq!(work.batch.now, T0 + 5);
        let errors: Vec<Option<String>> = work
            .batch
            .pages
            .iter()
            .map(|p| p.record.error.clone())
            .collect();
        assert_eq!(
            errors,
            vec![
                None,
                Some(ROBOTS_BLOCKED.to_string()),
                Some("failed after 1 attempt(s): timeout".to_string())
            ]
        );
        assert_eq!(w.in_flight(), 0);
        assert_eq!((w.fetched(), w.errors()), (1, 1));
    }

    #[test]
    fn a_quarter_window_of_results_is_written_at_once() {
        let mut w = running(cfg(), &["a"]);
        let jobs: Vec<Job> = (0..8).map(|i| job(&format!("h{i}"), "/")).collect();
        claim(&mut w, jobs.clone(), &["a"]);
        let due: Vec<bool> = jobs.iter().map(|j| w.on_report(page(j), T0)).collect();
        // flush_at = min(max_batch, window / 4) = 4.
        assert_eq!(due, [false, false, false, true, true, true, true, true]);
    }

    #[test]
    fn one_cycle_at_a_time_and_a_write_asked_meanwhile_is_not_lost() {
        let mut w = running(cfg(), &["a"]);
        let jobs: Vec<Job> = (0..3).map(|i| job("h", &format!("/{i}"))).collect();
        claim(&mut w, jobs.clone(), &["a"]);
        w.on_report(page(&jobs[0]), T0);
        let _running = w.start_cycle(true, true, false, T0).unwrap();
        w.on_report(page(&jobs[1]), T0);
        assert!(
            w.start_cycle(true, true, false, T0).is_none(),
            "one at a time"
        );
        let after = w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
        assert_eq!(after.next, Some(true), "the deferred write goes next");
        let work = w.start_cycle(false, true, false, T0).unwrap();
        assert_eq!(work.batch.pages.len(), 1);
        // A claim that found nothing is not repeated at once.
        let after = w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
        assert_eq!(after.next, None);
        // A write deferred, then asked for again: one more cycle, not a chain.
        w.start_cycle(false, true, false, T0).unwrap();
        assert!(w.start_cycle(true, true, false, T0).is_none());
        assert_eq!(
            w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0).next,
            Some(true)
        );
        w.start_cycle(true, true, false, T0).unwrap();
        assert_eq!(
            w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0).next,
            None
        );
    }

    #[test]
    fn a_seed_is_written_in_the_next_cycle() {
        let mut w = running(cfg(), &["a"]);
        let seed = NewLink::new(
            "http://h/".into(),
            "h".into(),
            OperationSpec::crawl(),
            0,
            1.0,
        );
        w.add_seed(seed, T0);
        assert!(w.write_due());
        let work = w.start_cycle(false, false, false, T0).unwrap();
        assert_eq!(work.batch.seeds.len(), 1);
    }

    #[test]
    fn what_waits_is_written_at_once_when_due_else_by_one_timer() {
        let mut w = running(cfg(), &["a"]);
        assert_eq!(w.flush(false), Flush::StartTimer);
        assert_eq!(w.flush(false), Flush::TimerRunning, "one timer at a time");
        assert_eq!(w.flush(true), Flush::Now, "a due write does not wait");
        w.flush_timer_done();
        assert_eq!(w.flush(false), Flush::StartTimer);
    }

    #[test]
    fn idle_needs_an_empty_window_and_the_stores_word() {
        let mut w = running(cfg(), &["a"]);
        let j = job("h", "/");
        claim(&mut w, vec![j.clone()], &["a"]);
        let work = w.start_cycle(false, false, true, T0);
        assert!(
            work.is_none_or(|w| !w.idle_check),
            "a URL is out: no need to ask"
        );
        w.on_report(page(&j), T0);
        let work = w.start_cycle(true, true, true, T0).unwrap();
        assert!(work.idle_check, "the window empties with this write");
        let after = w.cycle_done(Vec::new(), Some(false), &nodes(&["a"]), T0);
        assert_eq!(after.idle, None, "URLs wait for their retry time");
        w.start_cycle(false, true, true, T0).unwrap();
        let after = w.cycle_done(Vec::new(), Some(true), &nodes(&["a"]), T0);
        assert_eq!(after.idle, Some(IdleReason::FrontierEmpty));
        assert_eq!(idle_reason(true, false), Some(IdleReason::BudgetReached));
    }
}
