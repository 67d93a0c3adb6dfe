//! The trap defence in the window: fetched pages teach the guard, links and
//! claimed URLs it refuses are kept `trapped`, claimed URLs a closure
//! catches are withdrawn from their pools, and closures are restored from
//! the store and reopened by an operator.

use super::Window;
use crate::behaviour::{ProcessedPage, TrappedClaim, TrappedLink};
use crate::traps::{ReadLinks, TrapClosure, TrapGuard, TrapReason, TrapRule};
use crate::types::{ClosedFamily, Job, Millis, NewLink, TrapMark, UrlKey};
use std::collections::{HashMap, HashSet};

/// Soft-404 hosts and session-copy patterns a master remembers having
/// stored the closure of (see `Window::announce`).
const ANNOUNCED_MAX: usize = 10_000;

/// The trap defence and what the window keeps of it.
#[derive(Debug)]
pub(super) struct TrapDefence {
    /// The trap defence, when on: fed every fetched page, asked about every
    /// link and every claimed URL. The closures it makes are written with
    /// the batch; a restarted master gets them back from the store
    /// ([`Window::restore_traps`]) and learns the rest again from the
    /// pages it sees.
    pub(super) guard: Option<TrapGuard>,
    /// Links and claimed URLs the trap defence refused.
    pub(super) trapped: u64,
    /// Whether the store's trap closures were asked for (a master's first
    /// cycle does, with the trap defence on).
    pub(super) closures_asked: bool,
    /// Soft-404 hosts and session-copy patterns whose closure this master
    /// wrote: the first URL either refuses stores it (they close nothing
    /// the guard keeps). Bounded: emptied past [`ANNOUNCED_MAX`].
    pub(super) announced: HashSet<String>,
    /// Families an operator reopened: the store releases their URLs in
    /// the next cycle, after the batch in hand.
    pub(super) reopen: Vec<String>,
    /// Claimed URLs a trap closed on since they went to their pools, by
    /// node: the pools hand back those not started (`withdrawn`).
    pub(super) withdrawals: HashMap<String, Vec<UrlKey>>,
}

impl Window {
    /// A host answered a path that cannot exist with a page: its soft 404.
    pub fn soft_404_probe(&mut self, probe_url: &str, simhash: crate::traps::PageSimhash) {
        if let Some(traps) = &mut self.traps.guard {
            traps.soft_404_probe(probe_url, simhash);
        }
    }

    /// Trap defence for a fetched page: learn from it, and take out the
    /// links it refuses: the page carries them apart (`trapped`), and the
    /// store keeps each with its rule and family, not to be fetched. A
    /// soft 404 is recorded as such, and none of its links are followed.
    /// Only a URL's first fetch teaches the rules (`first`): a watched
    /// page checked again and again is the same page, not a pattern's
    /// near-duplicates.
    pub(super) fn guard_links(&mut self, page: &mut ProcessedPage, first: bool, now: Millis) {
        let Some(traps) = &mut self.traps.guard else {
            return;
        };
        if let Some(hash) = page.simhash
            && let Some(soft) = traps.soft_404(&page.record.url, hash)
        {
            self.traps.trapped += page.links.len() as u64;
            let trap = TrapMark::of(&soft);
            page.trapped = (page.links.drain(..))
                .map(|link| TrappedLink {
                    link,
                    trap: trap.clone(),
                })
                .collect();
            page.record.error = Some(soft.to_string());
            self.announce(&soft, now);
            return;
        }
        let links = ReadLinks::of(page.links.iter().map(|l| l.url.as_str()));
        if let Some(hash) = page.simhash.filter(|_| first) {
            traps.observe_read(&page.record.url, hash, &page.shingles, &links, now);
            let mut closed = false;
            for closure in traps.take_closures() {
                tracing::info!(reason = %closure.reason, "crawler trap closed");
                self.unwritten.batch.closures.push(closure);
                closed = true;
            }
            if closed {
                // What a pool holds of the family is not fetched either.
                for (key, assigned) in &self.claims.outstanding {
                    if traps.admit(&key.url, now).is_err() {
                        (self
                            .traps
                            .withdrawals
                            .entry(assigned.node.clone())
                            .or_default())
                        .push(key.clone());
                    }
                }
            }
        }
        let mut reasons = Vec::new();
        let mut verdicts = traps.admit_read(&links, now).into_iter();
        let refused: Vec<NewLink> = (page.links)
            .extract_if(.., |_| match verdicts.next() {
                Some(Err(reason)) => {
                    reasons.push(reason);
                    true
                }
                _ => false,
            })
            .collect();
        self.traps.trapped += refused.len() as u64;
        for (link, reason) in refused.into_iter().zip(reasons) {
            self.announce(&reason, now);
            let trap = TrapMark::of(&reason);
            page.trapped.push(TrappedLink { link, trap });
        }
    }

    /// Claimed URLs a trap closed on, by node, for their pools to hand
    /// back (see [`Window::withdrawn`]).
    pub fn take_withdrawals(&mut self) -> Vec<(String, Vec<UrlKey>)> {
        self.traps.withdrawals.drain().collect()
    }

    /// A pool handed back jobs a trap closed on before they started: they
    /// are refused as a claim would be (kept `trapped`), or, if their
    /// family was reopened meanwhile, go back to pending.
    pub fn withdrawn(&mut self, jobs: Vec<Job>, now: Millis) {
        let jobs: Vec<Job> = jobs
            .into_iter()
            .filter(|job| self.claims.outstanding.contains_key(&job.key()))
            .collect();
        for job in self.guard_claimed(jobs, now) {
            let key = job.key();
            self.forget(&key);
            self.release.push(key);
        }
    }

    /// Trap defence for claimed URLs: those it refuses are not fetched;
    /// their rows become `trapped`, with the rule and the family.
    pub(super) fn guard_claimed(&mut self, claimed: Vec<Job>, now: Millis) -> Vec<Job> {
        let Some(traps) = &mut self.traps.guard else {
            return claimed;
        };
        let mut refused = Vec::new();
        let admitted = claimed
            .into_iter()
            .filter_map(|job| match traps.admit(&job.url, now) {
                Ok(()) => {
                    traps.dispatched(&job.url);
                    Some(job)
                }
                Err(reason) => {
                    refused.push((job, reason));
                    None
                }
            })
            .collect();
        for (job, reason) in refused {
            self.traps.trapped += 1;
            self.announce(&reason, now);
            self.unwritten.batch.trapped_claims.push(TrappedClaim {
                key: job.key(),
                trap: TrapMark::of(&reason),
            });
            self.unwritten.reported.push(job);
        }
        admitted
    }

    /// A refusal by a rule that closes nothing the guard keeps (a soft-404
    /// host, a session copy): the first one of its family this master sees
    /// stores its closure, so `report traps` lists the family (the store
    /// keeps the first it is given).
    fn announce(&mut self, reason: &TrapReason, now: Millis) {
        if !matches!(reason.rule(), TrapRule::Soft404 | TrapRule::SessionCopy) {
            return;
        }
        if self.traps.announced.len() >= ANNOUNCED_MAX {
            self.traps.announced.clear();
        }
        if self.traps.announced.insert(reason.family()) {
            self.unwritten.batch.closures.push(TrapClosure {
                reason: reason.clone(),
                closed_at: now,
                pages: 1,
            });
        }
    }

    /// The trap closures the store kept, at a master's start: closed ones
    /// refuse at once (until they would have lifted), allowed ones stay
    /// open for good.
    pub fn restore_traps(&mut self, closures: &[ClosedFamily], now: Millis) {
        let Some(traps) = &mut self.traps.guard else {
            return;
        };
        let mut allowed = 0;
        for closed in closures {
            if closed.allowed {
                traps.allow(&closed.family);
                allowed += 1;
            } else {
                traps.restore(&closed.closure(), now);
            }
        }
        if !closures.is_empty() {
            tracing::info!(
                closed = closures.len() - allowed,
                allowed,
                "trap closures read from the store"
            );
        }
    }

    /// An operator reopens the trap family `family`: the guard lifts it
    /// and never closes it again, and the next cycle has the store release
    /// its URLs (after the batch in hand, which may hold some it refused).
    /// Returns whether the guard had it closed.
    pub fn reopen_trap(&mut self, family: &str) -> bool {
        let lifted = self.traps.guard.as_mut().is_some_and(|t| t.allow(family));
        self.traps.reopen.push(family.to_string());
        lifted
    }

    /// The store knows no trap family `family`: the guard takes back its
    /// allow (a typo must not keep a future trap open).
    pub fn no_such_trap(&mut self, family: &str) {
        if let Some(traps) = &mut self.traps.guard {
            traps.disallow(family);
        }
    }

    /// A link found outside a page (a host's sitemap): written in the next
    /// cycle like a seed; one the trap defence refuses is kept `trapped`.
    pub fn add_link(&mut self, link: NewLink, now: Millis) {
        if let Some(traps) = &mut self.traps.guard
            && let Err(reason) = traps.admit(&link.url, now)
        {
            self.traps.trapped += 1;
            self.announce(&reason, now);
            let trap = TrapMark::of(&reason);
            self.unwritten
                .batch
                .trapped
                .push(TrappedLink { link, trap });
            return;
        }
        self.unwritten.batch.seeds.push(link);
    }

    /// Links and claimed URLs the trap defence refused (a URL refused
    /// twice counts twice); the store counts the URLs.
    pub fn trapped(&self) -> u64 {
        self.traps.trapped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behaviour::CommitBatch;
    use crate::config::CrawlConfig;
    use crate::outage::Verdict;
    use crate::protocol::SlaveReport;
    use crate::window::fixtures::*;

    /// A calendar page: the same text every month, links to more months.
    fn calendar_page(job: &Job, month: u32) -> SlaveReport {
        let links = vec![
            link(&format!("http://h/cal/2024/{:02}/", month + 1)),
            link(&format!("http://h/cal/2025/{month:02}/")),
        ];
        page_with(
            job,
            links,
            Some(crate::traps::PageSimhash {
                shown: 0x5eed_cafe_f00d_beef,
                own: 0x5eed_cafe_f00d_beef,
            }),
        )
    }

    /// Fetch calendar months until the trap defence refuses something;
    /// returns the batch of the last cycle (which refused it).
    fn crawl_calendar(w: &mut Window) -> CommitBatch {
        let mut month = 0;
        let mut closures = Vec::new();
        loop {
            month += 1;
            assert!(month < 200, "the calendar never closed");
            let j = job(
                "h",
                &format!("/cal/{}/{:02}/", 2000 + month / 12, month % 12 + 1),
            );
            claim(w, vec![j.clone()], &["a"]);
            w.on_report(calendar_page(&j, month % 12 + 1), T0);
            let mut batch = w.start_cycle(true, false, false, T0).unwrap().batch;
            w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
            closures.append(&mut batch.closures);
            if w.trapped() > 0 {
                assert!(month <= 40, "closed after {month} calendar pages");
                batch.closures = closures;
                return batch;
            }
        }
    }

    /// A closure takes back what the pool holds of the family: the
    /// months claimed and not started are handed back and kept trapped,
    /// not fetched.
    #[test]
    fn a_closure_withdraws_what_the_pool_holds_of_the_family() {
        let mut w = running(
            CrawlConfig {
                claim_window: 64,
                per_host_window: 64,
                ..cfg()
            },
            &["a"],
        );
        let months: Vec<Job> = (0..48)
            .map(|m| job("h", &format!("/cal/{}/{:02}/", 2000 + m / 12, m % 12 + 1)))
            .collect();
        claim(&mut w, months.clone(), &["a"]);
        let mut reported = 0;
        let withdrawals = loop {
            assert!(reported < months.len(), "the calendar never closed");
            let j = &months[reported];
            w.on_report(calendar_page(j, (reported % 12 + 1) as u32), T0);
            reported += 1;
            let withdrawals = w.take_withdrawals();
            if !withdrawals.is_empty() {
                break withdrawals;
            }
        };
        assert!(reported <= 40, "closed after {reported} months");
        let unstarted: Vec<Job> = months[reported..].to_vec();
        assert_eq!(withdrawals.len(), 1);
        let (node, keys) = &withdrawals[0];
        assert_eq!(node, "a");
        for j in &unstarted {
            assert!(keys.contains(&j.key()), "{} withdrawn", j.url);
        }
        w.withdrawn(unstarted.clone(), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        let trapped: Vec<&UrlKey> = batch.trapped_claims.iter().map(|t| &t.key).collect();
        for j in &unstarted {
            assert!(trapped.contains(&&j.key()), "{} kept trapped", j.url);
        }
    }

    /// A watched page checked again and again reads the same each time:
    /// those re-checks are not near-duplicates of its pattern, and it is
    /// never refused (a URL whose pattern is itself closed after ~24
    /// checks under rule 1, before).
    #[test]
    fn re_checks_of_a_watched_page_teach_the_trap_rules_nothing() {
        let mut w = running(cfg(), &["a"]);
        let hash = crate::traps::PageSimhash {
            shown: 0x5eed_cafe_f00d_beef,
            own: 0x5eed_cafe_f00d_beef,
        };
        for check in 0..60 {
            let mut j = job("h", "/status");
            if check > 0 {
                j.last = Some(crate::types::LastFetch::default());
            }
            claim(&mut w, vec![j.clone()], &["a"]);
            assert_eq!(w.trapped(), 0, "check {check} refused");
            w.on_report(page_with(&j, Vec::new(), Some(hash)), T0);
            w.start_cycle(true, false, false, T0).unwrap();
            w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
        }
        assert_eq!(w.trapped(), 0);
    }

    #[test]
    fn trap_defence_keeps_refused_links_and_claims_with_their_rule_and_family() {
        let mut w = running(cfg(), &["a"]);
        let batch = crawl_calendar(&mut w);
        // The closure is written, and so is every link it refused, apart
        // from the links followed, with its rule and family.
        assert_eq!(batch.closures.len(), 1, "{:?}", batch.closures);
        let closure = &batch.closures[0];
        let family = closure.family();
        assert_eq!(family, "h/cal/{n}/{n}/");
        let page = batch.pages.last().unwrap();
        assert!(!page.trapped.is_empty());
        for refused in &page.trapped {
            assert!(refused.link.url.starts_with("http://h/cal/"), "{refused:?}");
            assert_eq!(refused.trap.family, family);
            assert_eq!(refused.trap.rule, closure.rule());
        }
        assert!(page.links.iter().all(|l| !l.url.contains("/cal/")));
        // A claimed calendar URL is not fetched: its row becomes trapped.
        w.start_cycle(false, true, false, T0).unwrap();
        let cal = job("h", "/cal/1999/07/");
        let real = job("h", "/about");
        let after = w.cycle_done(vec![cal.clone(), real.clone()], None, &nodes(&["a"]), T0);
        assert_eq!(after.dispatch, vec![("a".to_string(), vec![real])]);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert!(batch.pages.is_empty());
        assert_eq!(
            batch.trapped_claims,
            [TrappedClaim {
                key: cal.key(),
                trap: TrapMark {
                    rule: closure.rule(),
                    family: family.clone()
                }
            }]
        );
        // Trap defence off: nothing is refused.
        let mut off = cfg();
        off.traps = None;
        let mut w = running(off, &["a"]);
        w.start_cycle(false, true, false, T0).unwrap();
        let after = w.cycle_done(vec![cal.clone()], None, &nodes(&["a"]), T0);
        assert_eq!(after.dispatch.len(), 1);
        assert_eq!(w.trapped(), 0);
    }

    #[test]
    fn a_soft_404s_links_are_kept_trapped_and_its_host_closed_once() {
        let mut w = running(cfg(), &["a"]);
        w.soft_404_probe("http://h/no-such-page-x7", 0xabcd.into());
        for n in 0..2 {
            let j = job("h", &format!("/gone{n}"));
            claim(&mut w, vec![j.clone()], &["a"]);
            let links = vec![link("http://h/a"), link("http://h/b")];
            w.on_report(page_with(&j, links, Some(0xabcd.into())), T0);
        }
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        let trapped: Vec<(&str, TrapRule, &str)> = (batch.pages.iter())
            .flat_map(|p| &p.trapped)
            .map(|t| (t.link.url.as_str(), t.trap.rule, t.trap.family.as_str()))
            .collect();
        assert_eq!(trapped.len(), 4);
        assert!(
            trapped
                .iter()
                .all(|(_, rule, family)| *rule == TrapRule::Soft404 && *family == "h")
        );
        assert!(batch.pages.iter().all(|p| p.links.is_empty()));
        assert_eq!(batch.closures.len(), 1, "the soft-404 host is stored once");
        assert_eq!(batch.closures[0].family(), "h");
        // A sitemap's link it refuses is kept too.
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
    }

    #[test]
    fn a_master_restores_the_stores_closures_and_allowed_families() {
        let mut first = running(cfg(), &["a"]);
        let closure = crawl_calendar(&mut first).closures.remove(0);
        let stored = ClosedFamily::of(&closure);
        let mut w = Window::new(cfg(), 0, 0, T0);
        w.begin_recovery(&nodes(&["a"]), T0);
        w.adopt("a", Vec::new());
        assert!(w.end_recovery_if_due(T0));
        let work = w.start_cycle(false, true, false, T0).unwrap();
        assert!(work.load_closures, "a new master's first cycle reads them");
        w.restore_traps(std::slice::from_ref(&stored), T0);
        let cal = job("h", "/cal/1999/07/");
        let after = w.cycle_done(vec![cal.clone()], None, &nodes(&["a"]), T0);
        assert!(after.dispatch.is_empty(), "refused at once");
        let next = w.start_cycle(true, true, false, T0).unwrap();
        assert!(!next.load_closures, "read once");
        assert_eq!(next.batch.trapped_claims.len(), 1);
        assert!(next.batch.closures.is_empty(), "not written again");
        // Allowed in the store: open for good.
        let mut w = running(cfg(), &["a"]);
        let allowed = ClosedFamily {
            allowed: true,
            ..stored
        };
        w.restore_traps(&[allowed], T0);
        w.start_cycle(false, true, false, T0).unwrap();
        let after = w.cycle_done(vec![cal], None, &nodes(&["a"]), T0);
        assert_eq!(after.dispatch.len(), 1);
    }

    #[test]
    fn a_reopened_family_is_released_after_the_batch_in_hand() {
        let mut w = running(cfg(), &["a"]);
        let closure = crawl_calendar(&mut w).closures.remove(0);
        let family = closure.family();
        // A refused claim waits in the batch when the operator reopens.
        w.start_cycle(false, true, false, T0).unwrap();
        let cal = job("h", "/cal/1999/07/");
        w.cycle_done(vec![cal.clone()], None, &nodes(&["a"]), T0);
        assert!(w.reopen_trap(&family), "the guard had it closed");
        assert!(!w.holds_nothing(), "a reopen to do");
        // The next cycle, write or not, writes the batch, then reopens.
        let work = w.start_cycle(false, true, false, T0).unwrap();
        assert_eq!(work.batch.trapped_claims.len(), 1);
        assert_eq!(work.reopen, std::slice::from_ref(&family));
        // The store was away: the reopen is done by the next cycle.
        let verdict = w.cycle_failed(work, T0, T0, "away".into());
        assert!(matches!(verdict, Verdict::Began { .. }), "{verdict:?}");
        let work = w.start_cycle(false, true, false, T0 + 60_000).unwrap();
        assert_eq!(work.reopen, std::slice::from_ref(&family));
        assert_eq!(work.batch.trapped_claims.len(), 1);
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0 + 60_000);
        // Fetched now, and never closed again however alike its pages.
        w.start_cycle(false, true, false, T0).unwrap();
        let after = w.cycle_done(vec![cal], None, &nodes(&["a"]), T0);
        assert_eq!(after.dispatch.len(), 1);
        // A name the store does not know: the guard forgets the allow.
        w.reopen_trap("h/nothing/{n}/");
        w.no_such_trap("h/nothing/{n}/");
        assert!(!w.traps.guard.as_ref().unwrap().allows("h/nothing/{n}/"));
    }
}
