//! Availability watching's part of the window: what a fetch of a watched
//! URL changed, when it is due again, intervals asked while it is fetched,
//! and when the store is asked for watched URLs due.

use super::Window;
use crate::availability::{
    Change, Check, Revisit, StatusEvent, interval_ms, is_up, previous_interval, revisit_for,
    transition,
};
use crate::behaviour::ProcessedPage;
use crate::types::{Job, Millis, NewLink, PageRecord, UrlKey};
use std::collections::HashMap;

/// How often availability watching looks for watched URLs due, and how
/// many it queues at least each time (else a window's worth).
const SWEEP_EVERY_MS: Millis = 1_000;
const SWEEP_MIN: usize = 256;

/// Availability watching's part of the window.
#[derive(Debug)]
pub(super) struct AvailabilityWatch {
    /// When availability watching next looks for watched URLs due.
    pub(super) next_sweep: Millis,
    /// Changes of watched URLs not yet taken for notification.
    pub(super) events: Vec<StatusEvent>,
    /// Intervals of their own asked for URLs while they were being fetched
    /// (`add_url … every`): the ask is written to the URL's pending row,
    /// which goes with the fetch's result, so the result takes it instead.
    pub(super) asked_meanwhile: HashMap<UrlKey, Millis>,
}

/// When `record`'s URL, watched at its own interval `own` with `revisit`
/// (its own, else the node's), is due again after a fetch at `now`: the
/// policy goes on from the interval the last check chose (`previous`;
/// `None` starts over). Not watched: no next check.
fn schedule(
    record: &mut PageRecord,
    own: Option<Millis>,
    revisit: Option<Revisit>,
    previous: Option<Millis>,
    change: Option<Change>,
    now: Millis,
) {
    let up = is_up(record.http_returncode);
    let interval = revisit.map(|r| r.next_interval(previous, up, change));
    record.check_every_ms = own;
    record.check_interval_ms = interval;
    record.d_next_check = interval.map(|i| now.saturating_add(i));
}

impl Window {
    /// The revisit policy a URL with its own interval `own` is watched
    /// with: that, else the node's `recrawl_every` ([`revisit_for`]).
    pub(super) fn revisit(&self, own: Option<Millis>) -> Option<Revisit> {
        revisit_for(own, self.cfg.recrawl_every.map(interval_ms))
    }

    /// Availability watching for a fetch of `job`: what it changed
    /// against the URL's last fetch (an event to tell), and, when the URL
    /// is watched, when it is due again.
    pub(super) fn track_availability(&mut self, job: &Job, page: &mut ProcessedPage, now: Millis) {
        let check = Check {
            http_returncode: page.record.http_returncode,
            content_hash: page.record.content_hash,
            not_modified: page.not_modified,
        };
        let change = transition(job.last.as_ref(), &check);
        page.changed = change.is_some();
        page.fetched_before = job.last.is_some();
        let previous = previous_interval(job.last.as_ref(), job.check_every_ms);
        let revisit = self.revisit(job.check_every_ms);
        schedule(
            &mut page.record,
            job.check_every_ms,
            revisit,
            previous,
            change,
            now,
        );
        let record = &page.record;
        if let Some(change) = change {
            self.availability.events.push(StatusEvent {
                url: record.url.clone(),
                change,
                previous_returncode: job.last.as_ref().and_then(|l| l.http_returncode),
                http_returncode: record.http_returncode,
                reason: record.error.clone(),
                at: now,
            });
        }
    }

    /// The changes of watched URLs reported since the last call.
    pub fn take_events(&mut self) -> Vec<StatusEvent> {
        std::mem::take(&mut self.availability.events)
    }

    /// `link`'s URL was given the interval `every` of its own. If it is
    /// being fetched, its result takes it (see `asked_meanwhile`); if that
    /// result waits in the batch, it is rescheduled there, from `now`, as
    /// a new interval starts over. (A result being written already is
    /// written first; the seed then queues the URL again with it.)
    pub(super) fn asked_while_fetched(&mut self, link: &NewLink, every: Millis, now: Millis) {
        let key = UrlKey {
            url: link.url.clone(),
            operation: link.operation.clone(),
        };
        if !self.claims.outstanding.contains_key(&key) {
            return;
        }
        let revisit = self.revisit(Some(every));
        let waiting = self
            .unwritten
            .batch
            .pages
            .iter_mut()
            .find(|p| p.record.url == key.url && p.record.operation == key.operation);
        match waiting {
            // A new interval of its own starts over.
            Some(page) => schedule(&mut page.record, Some(every), revisit, None, None, now),
            None => {
                self.availability.asked_meanwhile.insert(key, every);
            }
        }
    }

    /// Whether this cycle looks for watched URLs due again: once a
    /// second at most, and only while the crawl claims (not paused,
    /// draining or waiting for the store).
    pub(super) fn sweep_due(&mut self, now: Millis) -> Option<usize> {
        if !self.cfg.watches()
            || now < self.availability.next_sweep
            || self.paused
            || self.drain.is_some()
            || self.recovery.is_some()
            || self.store.outage().is_some()
        {
            return None;
        }
        self.availability.next_sweep = now + SWEEP_EVERY_MS;
        Some(self.cfg.effective_claim_window().max(SWEEP_MIN))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::CrawlConfig;
    use crate::types::{Job, Millis, NewLink};
    use crate::window::fixtures::*;
    use std::time::Duration;

    #[test]
    fn watched_urls_get_their_next_check_and_their_changes_are_told() {
        use crate::availability::Change;
        use crate::types::LastFetch;
        let cfg = CrawlConfig {
            recrawl_every: Some(Duration::from_secs(10)),
            ..cfg()
        };
        let mut w = running(cfg, &["a"]);
        let mut j = job("h", "/");
        j.last = Some(LastFetch {
            http_returncode: Some(200),
            content_hash: Some(1),
            check_interval_ms: Some(10_000),
            ..LastFetch::default()
        });
        claim(&mut w, vec![j.clone()], &["a"]);
        // A refused connection is recorded at once, not retried: down.
        w.on_report(failed(&j, true, None), T0);
        let work = w.start_cycle(true, false, false, T0).unwrap();
        assert!(work.batch.retries.is_empty());
        let page = &work.batch.pages[0];
        assert!(page.changed);
        assert!(page.fetched_before, "its history may be full: trimmed");
        assert_eq!(page.record.check_interval_ms, Some(5_000));
        assert_eq!(page.record.d_next_check, Some(T0 + 5_000));
        let events = w.take_events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].change, Change::Down);
        assert_eq!(events[0].previous_returncode, Some(200));
        assert!(w.take_events().is_empty());
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
        let work = w.start_cycle(true, true, false, T0 + 500);
        assert!(work.is_none_or(|w| w.sweep.is_none()), "once a second");
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0 + 500);
        let work = w.start_cycle(true, true, false, T0 + 1_000).unwrap();
        assert!(work.sweep.is_some());
    }

    /// An interval asked for a URL while it is fetched is not lost with
    /// the pending row it was written to: the fetch's result takes it,
    /// whether the result is still to come or waits in the batch.
    #[test]
    fn an_interval_asked_while_the_url_is_fetched_goes_with_its_result() {
        use crate::availability::WATCH_OFF;
        let service = CrawlConfig {
            availability_watch: true,
            recrawl_every: Some(Duration::from_secs(60)),
            ..cfg()
        };
        let mut w = running(service, &["a"]);
        let (fetching, reported, idle) = (job("h", "/f"), job("h", "/r"), job("h", "/i"));
        claim(&mut w, vec![fetching.clone(), reported.clone()], &["a"]);
        w.on_report(page(&reported), T0);
        let asked = |j: &Job, every| NewLink {
            check_every_ms: Some(every),
            ..link(&j.url).changed_at(T0 + 100)
        };
        w.add_seed(asked(&fetching, 2_000), T0 + 100);
        w.add_seed(asked(&reported, WATCH_OFF), T0 + 100);
        w.add_seed(asked(&idle, 5_000), T0 + 100);
        w.on_report(page(&fetching), T0 + 200);
        let work = w.start_cycle(true, false, false, T0 + 200).unwrap();
        let record = |url: &str| {
            let p = work
                .batch
                .pages
                .iter()
                .find(|p| p.record.url == url)
                .unwrap();
            (
                p.record.check_every_ms,
                p.record.check_interval_ms,
                p.record.d_next_check,
            )
        };
        assert_eq!(
            record(&fetching.url),
            (Some(2_000), Some(2_000), Some(T0 + 2_200)),
            "its own interval, started over"
        );
        assert_eq!(
            record(&reported.url),
            (Some(WATCH_OFF), None, None),
            "off, though the node watches every URL"
        );
        assert_eq!(work.batch.seeds.len(), 3, "the asks are written too");
        assert!(
            w.availability.asked_meanwhile.is_empty(),
            "nothing was fetching {}",
            idle.url
        );
    }

    /// A URL's own interval (`add_url … every`) is its revisit policy's
    /// base, on a node without `recrawl_every` as on one with it.
    #[test]
    fn a_url_with_an_interval_of_its_own_is_watched_at_it() {
        use crate::types::LastFetch;
        let service = CrawlConfig {
            availability_watch: true,
            ..cfg()
        };
        let mut w = running(service.clone(), &["a"]);
        // Its first fetch: due again after its own interval, which is kept.
        let mut own = job("h", "/own");
        own.check_every_ms = Some(2_000);
        let plain = job("h", "/plain");
        claim(&mut w, vec![own.clone(), plain.clone()], &["a"]);
        w.on_report(page(&own), T0);
        w.on_report(page(&plain), T0);
        let work = w.start_cycle(true, false, false, T0).unwrap();
        let own_page = &work.batch.pages[0].record;
        assert_eq!(own_page.check_every_ms, Some(2_000));
        assert_eq!(own_page.check_interval_ms, Some(2_000));
        assert_eq!(own_page.d_next_check, Some(T0 + 2_000));
        assert!(
            !work.batch.pages[0].fetched_before,
            "a first fetch: nothing to trim"
        );
        let plain_page = &work.batch.pages[1].record;
        assert_eq!(
            (plain_page.d_next_check, plain_page.check_every_ms),
            (None, None),
            "not watched"
        );
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
        let work = w.start_cycle(true, true, false, T0 + 1_000).unwrap();
        assert!(
            work.sweep.is_some(),
            "due URLs looked for without recrawl_every"
        );

        // It beats recrawl_every, and its bounds are its own: unchanged at
        // 7 s makes 8 s (4 × 2 s), not 10.5 s.
        let global = CrawlConfig {
            recrawl_every: Some(Duration::from_secs(60)),
            ..cfg()
        };
        let mut w = running(global, &["a"]);
        own.last = Some(LastFetch {
            http_returncode: Some(200),
            check_interval_ms: Some(7_000),
            check_every_ms: Some(2_000),
            ..LastFetch::default()
        });
        let mut changed = job("h", "/changed");
        changed.check_every_ms = Some(2_000);
        // Watched every 60 s until now: its new interval starts over.
        changed.last = Some(LastFetch {
            http_returncode: Some(200),
            check_interval_ms: Some(240_000),
            ..LastFetch::default()
        });
        claim(&mut w, vec![own.clone(), changed.clone()], &["a"]);
        w.on_report(page(&own), T0);
        w.on_report(page(&changed), T0);
        let work = w.start_cycle(true, false, false, T0).unwrap();
        let intervals: Vec<Option<Millis>> = work
            .batch
            .pages
            .iter()
            .map(|p| p.record.check_interval_ms)
            .collect();
        assert_eq!(intervals, vec![Some(8_000), Some(2_000)]);

        // A failed check of it is not retried: the next check is its retry.
        let mut w = running(service, &["a"]);
        claim(&mut w, vec![own.clone()], &["a"]);
        w.on_report(failed(&own, true, None), T0);
        let work = w.start_cycle(true, false, false, T0).unwrap();
        assert!(work.batch.retries.is_empty());
        let record = &work.batch.pages[0].record;
        assert_eq!(record.d_next_check, Some(T0 + 1_000), "down: the shortest");
        assert_eq!(record.check_every_ms, Some(2_000));
    }

    #[test]
    fn unwatched_urls_are_retried_and_get_no_next_check() {
        let mut w = running(cfg(), &["a"]);
        let j = job("h", "/");
        claim(&mut w, vec![j.clone()], &["a"]);
        w.on_report(failed(&j, true, None), T0);
        let work = w.start_cycle(true, true, false, T0).unwrap();
        assert_eq!(work.batch.retries.len(), 1);
        assert!(work.sweep.is_none());
        assert!(w.take_events().is_empty(), "a first fetch changes nothing");
    }
}
