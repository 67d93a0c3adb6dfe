//! Per-host politeness for one pool, as a pure state machine: which job may
//! start now, given robots.txt, per-host concurrency, per-host delay and the
//! pool's total concurrency. The `Pool` actor feeds it events
//! and carries out the [`Action`]s it returns.

use crate::behaviour::{RobotsRules, WhyUnreachable};
use crate::hosts::{LiveHost, LiveRobots, NodeHosts};
use crate::types::{Job, Millis, UrlKey};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

/// Politeness settings.
#[derive(Clone, Debug)]
pub struct Politeness {
    /// Slaves running at once in this pool (robots fetches included).
    pub max_in_flight: usize,
    /// Requests in flight per host.
    pub per_host: usize,
    /// Minimum time between two request starts on one host; a longer
    /// robots.txt `Crawl-delay` wins.
    pub min_delay_ms: u64,
    /// How long robots.txt rules are trusted before they are fetched again.
    pub robots_ttl_ms: Millis,
    /// How long to wait before asking an unreachable robots.txt again.
    pub robots_retry_ms: Millis,
}

/// Something the pool must do now.
#[derive(Debug)]
pub enum Action {
    /// Spawn a slave that fetches robots.txt of this host.
    FetchRobots { scheme: String, host: String },
    /// Spawn a slave for this job.
    Run(Job),
    /// robots.txt disallows this job: report it, fetch nothing.
    Blocked(Job),
    /// robots.txt is unreachable (and why): the job cannot be fetched now.
    Unreachable(Job, WhyUnreachable),
}

#[derive(Debug)]
enum Robots {
    Unknown,
    Fetching,
    Ready {
        rules: Arc<dyn RobotsRules>,
        unreachable: Option<WhyUnreachable>,
        expires_at: Millis,
    },
}

#[derive(Debug)]
struct HostSlot {
    robots: Robots,
    queue: VecDeque<Job>,
    /// How many jobs at the front of `queue` the current rules allowed:
    /// each job is checked once per rules, not on every poll.
    vetted: usize,
    running: Vec<Started>,
    /// Earliest start of the next request (delay, Crawl-delay, Retry-After,
    /// or another node's last request when the host moved here).
    next_start: Millis,
    /// Until when the host asked us to wait (429/503), for the operator's
    /// view; `next_start` holds it too.
    backoff_until: Millis,
    /// The master moves this host to another node: nothing of it starts,
    /// and once nothing of it runs its queue is handed back ([`Released`]).
    leaving: bool,
}

/// A host handed back to the master for another node, with its queued
/// jobs and how long that node must wait before its first request (what is
/// left of this node's delay, relative so that clocks need not agree).
#[derive(Debug, PartialEq)]
pub struct Released {
    pub host: String,
    pub jobs: Vec<Job>,
    pub wait_ms: u64,
}

/// A job whose slave runs; `reported` once the slave has sent its report
/// (it still holds the host's slot until it exits).
#[derive(Debug)]
struct Started {
    job: Job,
    reported: bool,
}

/// The scheduler's state. All methods are cheap and never block.
#[derive(Debug)]
pub struct HostScheduler {
    cfg: Politeness,
    hosts: HashMap<String, HostSlot>,
    /// Hosts with queued jobs, in round-robin order.
    active: VecDeque<String>,
    in_flight: usize,
    /// Hosts an operator paused: nothing of them starts, robots.txt included.
    paused: HashSet<String>,
    /// A poll has work that takes no free slot: jobs to check against their
    /// host's robots.txt, an unreachable host's queue to hand back. Without
    /// it a poll at `max_in_flight` has nothing to do and skips the walk
    /// over every host (most polls of a busy crawl).
    settle: bool,
}

impl HostScheduler {
    pub fn new(cfg: Politeness) -> Self {
        Self {
            cfg,
            hosts: HashMap::new(),
            active: VecDeque::new(),
            in_flight: 0,
            paused: HashSet::new(),
            settle: false,
        }
    }

    /// Change the politeness at run time (an operator's `set`): what starts
    /// from now on follows it; what runs finishes.
    pub fn set_politeness(&mut self, cfg: Politeness) {
        self.cfg = cfg;
        self.settle = true;
    }

    /// Pause or resume one host: its queued jobs wait, running ones finish.
    pub fn pause_host(&mut self, host: &str, paused: bool) {
        if paused {
            self.paused.insert(host.to_string());
        } else {
            self.paused.remove(host);
            self.settle = true;
        }
    }

    /// Slaves running now (robots fetches included).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Jobs queued but not started.
    pub fn queued(&self) -> usize {
        self.hosts.values().map(|h| h.queue.len()).sum()
    }

    /// Every job this pool holds and has not reported yet, queued or running.
    pub fn held(&self) -> Vec<Job> {
        self.hosts
            .values()
            .flat_map(|h| {
                let running = h.running.iter().filter(|s| !s.reported).map(|s| &s.job);
                h.queue.iter().chain(running).cloned()
            })
            .collect()
    }

    pub fn push(&mut self, job: Job) {
        let host = job.host.clone();
        let slot = self.slot(&host);
        slot.queue.push_back(job);
        if slot.queue.len() == 1 {
            self.active.push_back(host);
        }
        self.settle = true;
    }

    fn slot(&mut self, host: &str) -> &mut HostSlot {
        self.hosts
            .entry(host.to_string())
            .or_insert_with(|| HostSlot {
                robots: Robots::Unknown,
                queue: VecDeque::new(),
                vetted: 0,
                running: Vec::new(),
                next_start: 0,
                backoff_until: 0,
                leaving: false,
            })
    }

    /// The master moves `host` to another node: start nothing more of it;
    /// [`HostScheduler::take_released`] hands it back once nothing of it
    /// runs (at once if nothing does).
    pub fn release(&mut self, host: &str) {
        self.slot(host).leaving = true;
    }

    /// The leaving hosts of which nothing runs (robots.txt included), with
    /// their queues: they are no longer this pool's.
    pub fn take_released(&mut self, now: Millis) -> Vec<Released> {
        let mut released = Vec::new();
        for (host, slot) in &mut self.hosts {
            if slot.leaving && slot.running.is_empty() && !matches!(slot.robots, Robots::Fetching) {
                slot.leaving = false;
                slot.vetted = 0;
                // Its wait goes with it (`wait_ms`); this pool shows none.
                slot.backoff_until = 0;
                released.push(Released {
                    host: host.clone(),
                    jobs: slot.queue.drain(..).collect(),
                    wait_ms: slot.next_start.saturating_sub(now).max(0) as u64,
                });
            }
        }
        if !released.is_empty() {
            self.active
                .retain(|h| !released.iter().any(|r| r.host == *h));
        }
        released
    }

    /// A host handed over from another node, with its queued jobs: its
    /// first request (robots.txt included) waits until `not_before`, so the
    /// host's delay holds across the move.
    pub fn take_host(&mut self, host: &str, jobs: Vec<Job>, not_before: Millis) {
        let slot = self.slot(host);
        slot.next_start = slot.next_start.max(not_before);
        for job in jobs {
            self.push(job);
        }
    }

    /// robots.txt for `host` arrived (the robots slave has exited).
    pub fn robots_ready(
        &mut self,
        host: &str,
        rules: Arc<dyn RobotsRules>,
        unreachable: Option<WhyUnreachable>,
        now: Millis,
    ) {
        if let Some(slot) = self.hosts.get_mut(host) {
            let ttl = if unreachable.is_some() {
                self.cfg.robots_retry_ms
            } else {
                self.cfg.robots_ttl_ms
            };
            slot.robots = Robots::Ready {
                rules,
                unreachable,
                expires_at: now.saturating_add(ttl),
            };
            slot.vetted = 0;
            self.settle = true;
        }
    }

    /// The robots fetch for `host` ended without a report (its slave failed):
    /// ask again on the next pump.
    pub fn robots_failed(&mut self, host: &str) {
        if let Some(slot) = self.hosts.get_mut(host)
            && matches!(slot.robots, Robots::Fetching)
        {
            slot.robots = Robots::Unknown;
        }
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// A robots slave exited after reporting.
    pub fn robots_done(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// A page slave sent its report; it keeps the host's slot until it exits.
    pub fn reported(&mut self, job: &Job) {
        if let Some(slot) = self.hosts.get_mut(&job.host)
            && let Some(started) = slot
                .running
                .iter_mut()
                .find(|s| s.job.url == job.url && s.job.operation == job.operation)
        {
            started.reported = true;
        }
    }

    /// A page slave exited (whatever its outcome).
    pub fn finished(&mut self, key: &UrlKey, host: &str) {
        if let Some(slot) = self.hosts.get_mut(host)
            && let Some(i) = slot
                .running
                .iter()
                .position(|s| s.job.url == key.url && s.job.operation == key.operation)
        {
            slot.running.swap_remove(i);
            self.in_flight = self.in_flight.saturating_sub(1);
        }
    }

    /// The host asked us to slow down (429/503 with Retry-After).
    pub fn back_off(&mut self, host: &str, until: Millis) {
        if let Some(slot) = self.hosts.get_mut(host) {
            slot.next_start = slot.next_start.max(until);
            slot.backoff_until = slot.backoff_until.max(until);
        }
    }

    /// What this pool does with its hosts at `now`, for an operator's
    /// `hosts`: the `limit` busiest of those with anything to show (URLs
    /// queued or being fetched, a backoff, robots.txt being fetched or
    /// unreachable, paused, moving), and how many hold work in all.
    pub fn snapshot(&self, node: &str, now: Millis, limit: usize) -> NodeHosts {
        if limit == 0 {
            // The counts alone (each `status`): no row built per host.
            return NodeHosts {
                node: node.to_string(),
                busy: self
                    .hosts
                    .values()
                    .filter(|slot| !slot.queue.is_empty() || !slot.running.is_empty())
                    .count() as u64,
                running: self.in_flight as u64,
                hosts: Vec::new(),
                index: None,
            };
        }
        let left = |until: Millis| until.saturating_sub(now).max(0) as u64;
        let mut hosts: Vec<LiveHost> = self
            .hosts
            .iter()
            .map(|(host, slot)| LiveHost {
                host: host.clone(),
                node: node.to_string(),
                queued: slot.queue.len() as u64,
                in_flight: slot.running.len() as u64,
                robots: match slot.robots {
                    Robots::Unknown => LiveRobots::ToFetch,
                    Robots::Fetching => LiveRobots::Fetching,
                    Robots::Ready {
                        unreachable: Some(_),
                        ..
                    } => LiveRobots::Unreachable,
                    Robots::Ready { .. } => LiveRobots::Ready,
                },
                next_fetch_ms: left(slot.next_start),
                backoff_ms: left(slot.backoff_until),
                paused: self.paused.contains(host),
                moving: slot.leaving,
            })
            .chain(
                // Paused before anything of it came here.
                self.paused
                    .iter()
                    .filter(|host| !self.hosts.contains_key(*host))
                    .map(|host| LiveHost {
                        host: host.clone(),
                        node: node.to_string(),
                        paused: true,
                        ..LiveHost::default()
                    }),
            )
            .filter(|h| {
                h.work() > 0
                    || h.backoff_ms > 0
                    || matches!(h.robots, LiveRobots::Fetching | LiveRobots::Unreachable)
                    || h.paused
                    || h.moving
            })
            .collect();
        let busy = hosts.iter().filter(|h| h.work() > 0).count() as u64;
        if hosts.len() > limit {
            // Only the busiest are sorted: a pool may hold 100,000 hosts.
            hosts.select_nth_unstable_by(limit, LiveHost::busiest_first);
            hosts.truncate(limit);
        }
        hosts.sort_by(LiveHost::busiest_first);
        NodeHosts {
            node: node.to_string(),
            busy,
            running: self.in_flight as u64,
            hosts,
            index: None,
        }
    }

    /// A job this pool holds for `host` (queued or running), if any.
    pub fn job_of(&self, host: &str) -> Option<&Job> {
        let slot = self.hosts.get(host)?;
        slot.queue.front().or(slot.running.first().map(|s| &s.job))
    }

    /// Take every queued (not running) job out, e.g. to hand it back on
    /// drain; a move in progress ends with it.
    /// Take the queued jobs (not started) of `keys`: the master no longer
    /// wants them fetched.
    pub fn withdraw(&mut self, keys: &HashSet<UrlKey>) -> Vec<Job> {
        let mut out = Vec::new();
        for slot in self.hosts.values_mut() {
            let mut vetted = 0;
            let queue = std::mem::take(&mut slot.queue);
            for (i, job) in queue.into_iter().enumerate() {
                if keys.contains(&job.key()) {
                    out.push(job);
                } else {
                    vetted += usize::from(i < slot.vetted);
                    slot.queue.push_back(job);
                }
            }
            slot.vetted = vetted;
        }
        out
    }

    pub fn take_queued(&mut self) -> Vec<Job> {
        self.active.clear();
        self.hosts
            .values_mut()
            .flat_map(|h| {
                h.vetted = 0;
                h.leaving = false;
                h.queue.drain(..)
            })
            .collect()
    }

    /// Decide what may start at `now`. Returns the actions and the time of
    /// the next wake-up when something is waiting on a delay.
    pub fn poll(&mut self, now: Millis) -> (Vec<Action>, Option<Millis>) {
        if self.in_flight >= self.cfg.max_in_flight && !self.settle {
            // Nothing can start, and a slot freed polls again.
            return (Vec::new(), None);
        }
        self.settle = false;
        let mut actions = Vec::new();
        let mut wake: Option<Millis> = None;
        let mut progress = true;
        // Round-robin: one start per host per pass, passes until nothing moves.
        while progress {
            progress = false;
            for _ in 0..self.active.len() {
                let Some(host) = self.active.pop_front() else {
                    break;
                };
                let keep = self.poll_host(&host, now, &mut actions, &mut wake, &mut progress);
                if keep {
                    self.active.push_back(host);
                }
            }
        }
        (actions, wake)
    }

    /// One step for one host; returns whether it stays active (has queued jobs).
    fn poll_host(
        &mut self,
        host: &str,
        now: Millis,
        actions: &mut Vec<Action>,
        wake: &mut Option<Millis>,
        progress: &mut bool,
    ) -> bool {
        let cfg = &self.cfg;
        let Some(slot) = self.hosts.get_mut(host) else {
            return false;
        };
        if slot.queue.is_empty() {
            return false;
        }
        if slot.leaving || self.paused.contains(host) {
            return true;
        }
        if let Robots::Ready { expires_at, .. } = slot.robots
            && now >= expires_at
            && slot.running.is_empty()
        {
            slot.robots = Robots::Unknown;
        }
        match &slot.robots {
            Robots::Fetching => true,
            Robots::Unknown => {
                if now < slot.next_start {
                    *wake = Some(wake.map_or(slot.next_start, |w| w.min(slot.next_start)));
                } else if self.in_flight < cfg.max_in_flight {
                    let scheme = slot
                        .queue
                        .front()
                        .map(|j| scheme_of(&j.url))
                        .unwrap_or("http");
                    actions.push(Action::FetchRobots {
                        scheme: scheme.to_string(),
                        host: host.to_string(),
                    });
                    slot.robots = Robots::Fetching;
                    self.in_flight += 1;
                    *progress = true;
                }
                true
            }
            Robots::Ready {
                rules, unreachable, ..
            } => {
                let rules = rules.clone();
                if let Some(why) = unreachable {
                    slot.vetted = 0;
                    actions.extend(
                        slot.queue
                            .drain(..)
                            .map(|job| Action::Unreachable(job, why.clone())),
                    );
                    *progress = true;
                    return false;
                }
                // Disallowed jobs cost no request: settle the new ones at once.
                let unvetted = slot.queue.split_off(slot.vetted.min(slot.queue.len()));
                for job in unvetted {
                    if rules.is_allowed(&job.url) {
                        slot.queue.push_back(job);
                    } else {
                        actions.push(Action::Blocked(job));
                        *progress = true;
                    }
                }
                slot.vetted = slot.queue.len();
                if slot.queue.is_empty() {
                    return false;
                }
                if slot.running.len() >= cfg.per_host || self.in_flight >= cfg.max_in_flight {
                    return true;
                }
                if now < slot.next_start {
                    *wake = Some(wake.map_or(slot.next_start, |w| w.min(slot.next_start)));
                    return true;
                }
                let job = slot.queue.pop_front().expect("queue checked non-empty");
                slot.vetted -= 1;
                let delay = cfg
                    .min_delay_ms
                    .max(rules.crawl_delay_ms().unwrap_or(0))
                    .min(i64::MAX as u64) as Millis;
                slot.next_start = now.saturating_add(delay);
                slot.running.push(Started {
                    job: job.clone(),
                    reported: false,
                });
                self.in_flight += 1;
                actions.push(Action::Run(job));
                *progress = true;
                !slot.queue.is_empty()
            }
        }
    }
}

fn scheme_of(url: &str) -> &str {
    url.split_once("://").map_or("http", |(s, _)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Rules {
        deny_prefix: &'static str,
        delay: Option<u64>,
    }
    impl RobotsRules for Rules {
        fn is_allowed(&self, url: &str) -> bool {
            !url.contains(self.deny_prefix)
        }
        fn crawl_delay_ms(&self) -> Option<u64> {
            self.delay
        }
    }

    fn job(host: &str, path: &str) -> Job {
        Job::fixture(host, path, 0)
    }

    fn sched(max: usize, per_host: usize, delay: u64) -> HostScheduler {
        HostScheduler::new(Politeness {
            max_in_flight: max,
            per_host,
            min_delay_ms: delay,
            robots_ttl_ms: 1_000_000,
            robots_retry_ms: 1_000,
        })
    }

    /// The first poll fetches `host`'s robots.txt, which disallows `/private`.
    fn robots_fetched(s: &mut HostScheduler, host: &str) {
        s.poll(0);
        s.robots_done();
        s.robots_ready(host, rules("/private", None), None, 0);
    }

    fn rules(deny: &'static str, delay: Option<u64>) -> Arc<dyn RobotsRules> {
        Arc::new(Rules {
            deny_prefix: deny,
            delay,
        })
    }

    fn runs(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Run(j) => Some(j.url.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn robots_is_fetched_once_before_any_page() {
        let mut s = sched(10, 1, 0);
        s.push(job("a", "/1"));
        s.push(job("a", "/2"));
        let (actions, _) = s.poll(0);
        assert_eq!(actions.len(), 1);
        assert!(
            matches!(&actions[0], Action::FetchRobots { host, scheme } if host == "a" && scheme == "http")
        );
        // Still fetching: nothing else happens.
        assert!(s.poll(0).0.is_empty());
        s.robots_done();
        s.robots_ready("a", rules("/private", None), None, 0);
        assert_eq!(runs(&s.poll(0).0), vec!["http://a/1"]);
    }

    #[test]
    fn per_host_limit_and_delay_hold() {
        let mut s = sched(10, 1, 100);
        s.robots_ready("a", rules("/x", None), None, 0); // no slot yet: ignored
        for i in 0..3 {
            s.push(job("a", &format!("/{i}")));
        }
        robots_fetched(&mut s, "a");
        let (a, _) = s.poll(0);
        assert_eq!(runs(&a), vec!["http://a/0"]);
        // Second request waits for the first to finish (per_host = 1).
        assert!(s.poll(0).0.is_empty());
        s.finished(&job("a", "/0").key(), "a");
        // ...and for the delay.
        let (a, wake) = s.poll(50);
        assert!(a.is_empty());
        assert_eq!(wake, Some(100));
        assert_eq!(runs(&s.poll(100).0), vec!["http://a/1"]);
    }

    #[test]
    fn a_paused_host_waits_while_others_run_and_a_new_delay_applies() {
        let mut s = sched(10, 1, 0);
        s.pause_host("a", true);
        s.push(job("a", "/1"));
        s.push(job("b", "/1"));
        s.push(job("b", "/2"));
        let (actions, _) = s.poll(0);
        assert!(
            actions
                .iter()
                .all(|a| matches!(a, Action::FetchRobots { host, .. } if host == "b")),
            "nothing of a, robots.txt included: {actions:?}"
        );
        s.robots_done();
        s.robots_ready("b", rules("/private", None), None, 0);
        s.set_politeness(Politeness {
            min_delay_ms: 500,
            ..s.cfg.clone()
        });
        assert_eq!(runs(&s.poll(0).0), vec!["http://b/1"]);
        s.finished(&job("b", "/1").key(), "b");
        let (a, wake) = s.poll(100);
        assert!(a.is_empty());
        assert_eq!(wake, Some(500), "the new delay spaces b's requests");
        s.pause_host("a", false);
        assert!(
            matches!(&s.poll(500).0[..], [Action::FetchRobots { host, .. }, Action::Run(_)] if host == "a")
        );
    }

    #[test]
    fn crawl_delay_longer_than_configured_wins() {
        let mut s = sched(10, 4, 10);
        s.push(job("a", "/0"));
        s.push(job("a", "/1"));
        s.poll(0);
        s.robots_done();
        s.robots_ready("a", rules("/private", Some(500)), None, 0);
        assert_eq!(runs(&s.poll(0).0).len(), 1);
        let (a, wake) = s.poll(100);
        assert!(a.is_empty());
        assert_eq!(wake, Some(500));
    }

    #[test]
    fn disallowed_jobs_are_blocked_without_a_fetch() {
        let mut s = sched(10, 1, 0);
        s.push(job("a", "/private/1"));
        s.push(job("a", "/ok"));
        robots_fetched(&mut s, "a");
        let (a, _) = s.poll(0);
        assert!(matches!(&a[0], Action::Blocked(j) if j.url.ends_with("/private/1")));
        assert_eq!(runs(&a), vec!["http://a/ok"]);
    }

    /// Allows everything and counts how often it was asked.
    #[derive(Debug, Default)]
    struct Counting(std::sync::atomic::AtomicUsize);
    impl RobotsRules for Counting {
        fn is_allowed(&self, _url: &str) -> bool {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            true
        }
        fn crawl_delay_ms(&self) -> Option<u64> {
            None
        }
    }

    #[test]
    fn each_queued_job_is_checked_once_per_rules() {
        let mut s = sched(10, 1, 0);
        for i in 0..5 {
            s.push(job("a", &format!("/{i}")));
        }
        s.poll(0);
        s.robots_done();
        let counting = Arc::new(Counting::default());
        s.robots_ready("a", counting.clone(), None, 0);
        let asked = || counting.0.load(std::sync::atomic::Ordering::Relaxed);
        for i in 0..5 {
            assert_eq!(runs(&s.poll(0).0), vec![format!("http://a/{i}")]);
            // Polls while the host is busy ask nothing new.
            assert!(s.poll(0).0.is_empty());
            s.finished(&job("a", &format!("/{i}")).key(), "a");
        }
        assert_eq!(asked(), 5, "one check per job, not one per poll");
        // A job queued later is checked when it arrives; new rules check again.
        s.push(job("a", "/5"));
        s.push(job("a", "/6"));
        assert_eq!(runs(&s.poll(0).0), vec!["http://a/5"]);
        assert_eq!(asked(), 7);
        s.robots_ready("a", rules("/6", None), None, 0);
        let (a, _) = s.poll(0);
        assert!(matches!(&a[..], [Action::Blocked(j)] if j.url.ends_with("/6")));
    }

    #[test]
    fn at_the_global_limit_disallowed_and_unreachable_jobs_still_settle_at_once() {
        let mut s = sched(2, 2, 0);
        for h in ["a", "b"] {
            s.push(job(h, "/1"));
        }
        assert_eq!(s.poll(0).0.len(), 2, "two robots fetches fill the pool");
        s.robots_ready("a", rules("/private", None), None, 0);
        let (a, wake) = s.poll(0);
        assert!(a.is_empty() && wake.is_none(), "nothing can start: {a:?}");
        s.push(job("a", "/private/x"));
        let (a, _) = s.poll(0);
        assert!(matches!(&a[..], [Action::Blocked(j)] if j.url.ends_with("/private/x")));
        s.robots_ready("b", rules("", None), Some(WhyUnreachable::Refused), 0);
        let (a, _) = s.poll(0);
        assert!(matches!(&a[..], [Action::Unreachable(..)]), "{a:?}");
        // A slot frees: the allowed job starts.
        s.robots_done();
        assert_eq!(runs(&s.poll(0).0), vec!["http://a/1"]);
    }

    #[test]
    fn unreachable_robots_returns_all_jobs() {
        let mut s = sched(10, 1, 0);
        s.push(job("a", "/1"));
        s.poll(0);
        s.robots_done();
        s.robots_ready("a", rules("", None), Some(WhyUnreachable::Refused), 0);
        let (a, _) = s.poll(0);
        assert!(matches!(
            &a[0],
            Action::Unreachable(_, WhyUnreachable::Refused)
        ));
        assert_eq!(s.queued(), 0);
        // After the retry interval robots.txt is asked again.
        s.push(job("a", "/2"));
        let (a, _) = s.poll(2_000);
        assert!(matches!(&a[0], Action::FetchRobots { .. }));
    }

    #[test]
    fn hosts_share_the_pool_round_robin_within_the_global_limit() {
        let mut s = sched(3, 2, 0);
        for h in ["a", "b"] {
            for i in 0..3 {
                s.push(job(h, &format!("/{i}")));
            }
        }
        let (a, _) = s.poll(0);
        assert_eq!(a.len(), 2); // two robots fetches
        s.robots_done();
        s.robots_done();
        s.robots_ready("a", rules("/private", None), None, 0);
        s.robots_ready("b", rules("/private", None), None, 0);
        let started = runs(&s.poll(0).0);
        assert_eq!(started.len(), 3, "global limit");
        assert!(started.iter().any(|u| u.contains("//a/")));
        assert!(started.iter().any(|u| u.contains("//b/")));
        assert_eq!(s.in_flight(), 3);
        assert_eq!(s.held().len(), 6);
    }

    #[test]
    fn a_reported_job_is_no_longer_held_but_keeps_its_slot() {
        let mut s = sched(10, 1, 0);
        s.push(job("a", "/1"));
        s.push(job("a", "/2"));
        robots_fetched(&mut s, "a");
        assert_eq!(runs(&s.poll(0).0), vec!["http://a/1"]);
        s.reported(&job("a", "/1"));
        assert_eq!(s.held(), vec![job("a", "/2")]);
        assert!(s.poll(1).0.is_empty(), "one per host until the slave exits");
        s.finished(&job("a", "/1").key(), "a");
        assert_eq!(runs(&s.poll(2).0), vec!["http://a/2"]);
    }

    #[test]
    fn back_off_delays_the_host() {
        let mut s = sched(10, 1, 0);
        s.push(job("a", "/1"));
        s.push(job("a", "/2"));
        robots_fetched(&mut s, "a");
        s.poll(0);
        s.back_off("a", 5_000);
        s.finished(&job("a", "/1").key(), "a");
        let (a, wake) = s.poll(10);
        assert!(a.is_empty());
        assert_eq!(wake, Some(5_000));
        assert_eq!(runs(&s.poll(5_000).0), vec!["http://a/2"]);
    }

    #[test]
    fn a_snapshot_shows_the_busiest_hosts_with_queue_fetches_robots_and_backoff() {
        let mut s = sched(10, 1, 100);
        for i in 0..3 {
            s.push(job("busy", &format!("/{i}")));
        }
        s.push(job("slow", "/0"));
        s.push(job("slow", "/1"));
        s.push(job("new", "/0"));
        s.poll(0);
        s.robots_done();
        s.robots_done();
        s.robots_ready("busy", rules("/private", None), None, 0);
        s.robots_ready("slow", rules("/private", None), None, 0);
        s.poll(0); // busy/0 and slow/0 start; new's robots.txt is fetched
        s.back_off("slow", 30_000);
        s.finished(&job("slow", "/0").key(), "slow");
        s.pause_host("quiet", true);
        let snap = s.snapshot("w1", 1_000, 10);
        let rows: Vec<(&str, u64, u64, LiveRobots, u64)> = snap
            .hosts
            .iter()
            .map(|h| {
                (
                    h.host.as_str(),
                    h.queued,
                    h.in_flight,
                    h.robots,
                    h.backoff_ms,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("busy", 2, 1, LiveRobots::Ready, 0),
                ("slow", 1, 0, LiveRobots::Ready, 29_000),
                ("new", 1, 0, LiveRobots::Fetching, 0),
                ("quiet", 0, 0, LiveRobots::ToFetch, 0),
            ]
        );
        assert_eq!(snap.busy, 3);
        assert!(snap.hosts.iter().all(|h| h.node == "w1"));
        assert_eq!(
            snap.hosts[1].next_fetch_ms, 29_000,
            "the backoff holds its next fetch"
        );
        assert!(snap.hosts[3].paused);
        // Bounded: the busiest only, but every busy host counted.
        let first = s.snapshot("w1", 1_000, 1);
        assert_eq!(first.hosts.len(), 1);
        assert_eq!((first.hosts[0].host.as_str(), first.busy), ("busy", 3));
        // `status` asks for the counts alone: busy hosts, and requests
        // running (busy/0 and new's robots.txt).
        let counts = s.snapshot("w1", 1_000, 0);
        assert_eq!((counts.busy, counts.running), (3, 2));
        assert!(counts.hosts.is_empty());
        assert_eq!(snap.running, 2);
        // Once its backoff is over and its queue done, a host is not shown.
        assert_eq!(runs(&s.poll(31_000).0).len(), 1, "slow/1 starts");
        s.finished(&job("slow", "/1").key(), "slow");
        assert!(
            s.snapshot("w1", 31_000, 10)
                .hosts
                .iter()
                .all(|h| h.host != "slow")
        );
    }

    #[test]
    fn failed_robots_fetch_is_retried() {
        let mut s = sched(10, 1, 0);
        s.push(job("a", "/1"));
        s.poll(0);
        s.robots_failed("a");
        let (a, _) = s.poll(0);
        assert!(matches!(&a[0], Action::FetchRobots { .. }));
    }

    #[test]
    fn a_leaving_host_is_handed_back_once_nothing_of_it_runs() {
        let mut s = sched(10, 1, 100);
        for i in 0..3 {
            s.push(job("a", &format!("/{i}")));
        }
        s.push(job("b", "/0"));
        robots_fetched(&mut s, "a");
        assert_eq!(runs(&s.poll(0).0), vec!["http://a/0"]);
        s.release("a");
        assert!(s.take_released(10).is_empty(), "a/0 runs");
        s.finished(&job("a", "/0").key(), "a");
        let (actions, _) = s.poll(200);
        assert!(
            actions
                .iter()
                .all(|a| matches!(a, Action::FetchRobots { host, .. } if host == "b")),
            "nothing of a starts while it leaves: {actions:?}"
        );
        let released = s.take_released(30);
        assert_eq!(
            released,
            vec![Released {
                host: "a".into(),
                jobs: vec![job("a", "/1"), job("a", "/2")],
                wait_ms: 70,
            }],
            "its queue, and what is left of its delay"
        );
        assert!(s.take_released(30).is_empty(), "handed back once");
        assert_eq!(s.held(), vec![job("b", "/0")]);
        // Should it come back, it is this pool's again.
        s.push(job("a", "/3"));
        assert_eq!(runs(&s.poll(300).0), vec!["http://a/3"]);
    }

    #[test]
    fn a_host_with_nothing_here_or_fetching_robots_waits_or_goes_at_once() {
        let mut s = sched(10, 1, 100);
        s.release("unknown");
        let released = s.take_released(0);
        assert_eq!(
            (released[0].host.as_str(), released[0].wait_ms),
            ("unknown", 0)
        );
        assert!(released[0].jobs.is_empty());
        s.push(job("a", "/0"));
        s.poll(0);
        s.release("a");
        assert!(s.take_released(0).is_empty(), "robots.txt is being fetched");
        s.robots_done();
        s.robots_ready("a", rules("/private", None), None, 5);
        assert_eq!(s.take_released(5)[0].jobs, vec![job("a", "/0")]);
    }

    #[test]
    fn a_host_handed_over_waits_out_the_other_nodes_delay() {
        let mut s = sched(10, 1, 0);
        s.take_host("a", vec![job("a", "/0")], 500);
        let (actions, wake) = s.poll(100);
        assert!(actions.is_empty(), "not even robots.txt: {actions:?}");
        assert_eq!(wake, Some(500));
        assert!(matches!(&s.poll(500).0[..], [Action::FetchRobots { .. }]));
    }

    #[test]
    fn withdraw_takes_queued_jobs_only() {
        let mut s = sched(10, 1, 0);
        for path in ["/1", "/2", "/3"] {
            s.push(job("a", path));
        }
        robots_fetched(&mut s, "a");
        s.poll(0);
        let keys: HashSet<UrlKey> = ["/1", "/2"].iter().map(|p| job("a", p).key()).collect();
        assert_eq!(s.withdraw(&keys), vec![job("a", "/2")], "/1 runs");
        assert_eq!(s.withdraw(&keys), Vec::<Job>::new());
        let mut held = s.held();
        held.sort_by(|a, b| a.url.cmp(&b.url));
        assert_eq!(held, vec![job("a", "/1"), job("a", "/3")]);
    }

    #[test]
    fn take_queued_leaves_running_jobs() {
        let mut s = sched(10, 1, 0);
        s.push(job("a", "/1"));
        s.push(job("a", "/2"));
        robots_fetched(&mut s, "a");
        s.poll(0);
        let q = s.take_queued();
        assert_eq!(q.len(), 1);
        assert_eq!(s.held(), vec![job("a", "/1")]);
    }
}
