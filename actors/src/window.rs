//! The master's dispatch core, as plain data: the window of claimed URLs
//! (which node holds each, per host and per node), how much to claim, which
//! node fetches a host and which hosts move to a node that joins, how
//! reports become the next commit batch (with retry backoff and the page
//! budget), when the crawl is idle, how a restarted
//! master recovers its predecessor's leases, and how a drain ends. It takes
//! `now` as an argument, holds no actor refs and no store: the
//! `Master` actor feeds it messages and carries out the
//! [`CycleWork`] it hands out, one store cycle at a time.

use crate::behaviour::{
    ClaimRequest, CommitBatch, ProcessedPage, Retry, TrappedClaim, TrappedLink, WhyUnreachable,
};
use crate::cluster::{HostHold, Move, choose_node, rebalance};
use crate::config::CrawlConfig;
use crate::departures::{Departures, HandOverStep};
use crate::monitor::{
    Change, Check, Revisit, StatusEvent, interval_ms, is_up, previous_interval, revisit_for,
    transition,
};
use crate::outage::{Outage, StoreHealth, Verdict};
use crate::protocol::{IdleReason, NodeInfo, SlaveReport};
use crate::refusals::{OnRefusal, REFUSED_RETRY_MS, Refusals};
use crate::store_cycle::CycleWork;
use crate::traps::{TrapClosure, TrapGuard, TrapReason, TrapRule};
use crate::types::{
    ClosedFamily, Job, Millis, NewLink, PageRecord, ROBOTS_BLOCKED, TrapMark, UrlKey,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// How often availability monitoring looks for watched URLs due, and how
/// many it queues at least each time (else a window's worth).
const SWEEP_EVERY_MS: Millis = 1_000;
const SWEEP_MIN: usize = 256;

/// Soft-404 hosts and session-copy patterns a master remembers having
/// stored the closure of (see `Window::announce`).
const ANNOUNCED_MAX: usize = 10_000;

/// How long a starting master waits for pools to answer `Resync`.
pub const RECOVERY_WAIT_MS: Millis = 3_000;

/// A claimed URL and the node whose pool has it.
#[derive(Debug)]
struct Assigned {
    job: Job,
    node: String,
}

/// How long a move waits for the old pool to hand its host back
/// (`Released`). Past it the move is abandoned: that pool restarted and
/// forgot it, or its answer was lost, and the URLs parked for the host
/// would otherwise wait for ever. The host stays on its old node, which
/// gets the parked URLs. A pool whose last fetch of the host is just slow
/// (a minute: a slow body, a robots.txt fetch with a long Crawl-delay) only
/// keeps its host: should it hand the host back later, the master, knowing
/// of no move, hands it straight back to it.
pub const MOVE_DEADLINE_MS: Millis = 60_000;

/// A host on its way to another node: its old pool hands back its queue
/// once nothing of it runs there; URLs claimed for it meanwhile wait here,
/// so that it is never fetched from two nodes at once.
#[derive(Debug)]
struct Moving {
    from: String,
    to: String,
    parked: Vec<Job>,
    /// When the move is abandoned if `from` has not handed the host back.
    deadline: Millis,
}

/// A move abandoned at its deadline ([`Window::abandon_late_moves`]): the
/// host stays on `from`, whose pool gets the URLs `parked` for it.
#[derive(Debug, PartialEq)]
pub struct AbandonedMove {
    pub host: String,
    pub from: String,
    pub to: String,
    pub parked: Vec<Job>,
}

/// A (re)started master waits for the pools to say what they hold before it
/// returns the rest of its leases to pending.
#[derive(Debug)]
struct Recovery {
    deadline: Millis,
    waiting: BTreeSet<String>,
}

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drain {
    Running {
        deadline: Millis,
    },
    /// Everything is written or released once the cycles in hand are done.
    Finishing,
}

/// The master's state, all of it rebuildable from the store.
#[derive(Debug)]
pub struct Window {
    cfg: CrawlConfig,
    claims: Claims,
    placement: Placement,
    recovery: Option<Recovery>,
    unwritten: Unwritten,
    /// Whether the store is reachable; while it is not, nothing is claimed
    /// and the store is asked again only when the retry is due.
    store: StoreHealth,
    release_all_but: Option<Vec<UrlKey>>,
    release: Vec<UrlKey>,
    cycle_running: bool,
    /// A write was asked for while a cycle was running: the next one writes.
    write_deferred: bool,
    last_lease_renewal: Millis,
    fetched: u64,
    errors: u64,
    traps: TrapDefence,
    /// Whether every host of this run refused its connection (a one-shot
    /// crawl then ends at once rather than after its retries).
    refusals: Refusals,
    paused: bool,
    drain: Option<Drain>,
    /// Nodes that left for good, whose pages are handed over to their
    /// hosts' new owners (the node check and the store cycle feed it).
    pub(crate) departures: Departures,
    monitoring: Monitoring,
}

/// Claimed and handed to a pool, not yet committed; counted per host and
/// per node.
#[derive(Debug, Default)]
struct Claims {
    outstanding: HashMap<UrlKey, Assigned>,
    per_host: HashMap<String, usize>,
    per_node: HashMap<String, usize>,
}

/// Which node fetches each host, and the live nodes' pools.
#[derive(Debug, Default)]
struct Placement {
    /// Which node fetches each host (sticky while the node lives, unless
    /// it moves to a node that joined).
    host_owner: HashMap<String, String>,
    moving: HashMap<String, Moving>,
    /// Nodes whose pools were live at the last look.
    live_nodes: BTreeSet<String>,
    /// Each live node's pool as last seen (its actor id): a node whose
    /// process was restarted between two looks has a new one.
    pool_ids: HashMap<String, String>,
}

/// What the store has not been given yet: the batch of writes and the jobs
/// whose results it holds, and those the running cycle writes.
#[derive(Debug, Default)]
struct Unwritten {
    batch: CommitBatch,
    /// Jobs whose results are in `batch`: still counted as outstanding until
    /// taken for a write, so the window bounds what a crash can cost.
    reported: Vec<Job>,
    /// The jobs whose results the running cycle writes, and where they ran:
    /// back into the window should the store be unavailable.
    writing: Vec<Job>,
    writing_assigned: Vec<Assigned>,
}

/// The trap defence and what the window keeps of it.
#[derive(Debug)]
struct TrapDefence {
    /// The trap defence, when on: fed every fetched page, asked about every
    /// link and every claimed URL. The closures it makes are written with
    /// the batch; a restarted master gets them back from the store
    /// ([`Window::restore_traps`]) and learns the rest again from the
    /// pages it sees.
    guard: Option<TrapGuard>,
    /// Links and claimed URLs the trap defence refused.
    trapped: u64,
    /// Whether the store's trap closures were asked for (a master's first
    /// cycle does, with the trap defence on).
    closures_asked: bool,
    /// Soft-404 hosts and session-copy patterns whose closure this master
    /// wrote: the first URL either refuses stores it (they close nothing
    /// the guard keeps). Bounded: emptied past [`ANNOUNCED_MAX`].
    announced: HashSet<String>,
    /// Families an operator reopened: the store releases their URLs in
    /// the next cycle, after the batch in hand.
    reopen: Vec<String>,
    /// Claimed URLs a trap closed on since they went to their pools, by
    /// node: the pools hand back those not started (`withdrawn`).
    withdrawals: HashMap<String, Vec<UrlKey>>,
}

/// Availability monitoring's part of the window.
#[derive(Debug)]
struct Monitoring {
    /// When availability monitoring next looks for watched URLs due.
    next_sweep: Millis,
    /// Changes of watched URLs not yet taken for notification.
    events: Vec<StatusEvent>,
    /// Intervals of their own asked for URLs while they were being fetched
    /// (`add_url … every`): the ask is written to the URL's pending row,
    /// which goes with the fetch's result, so the result takes it instead.
    asked_meanwhile: HashMap<UrlKey, Millis>,
}

impl Window {
    /// A window for a master starting at `now`; `fetched` and `errors` carry
    /// the run's counts over from earlier incarnations.
    pub fn new(cfg: CrawlConfig, fetched: u64, errors: u64, now: Millis) -> Self {
        Self {
            traps: TrapDefence {
                guard: cfg.traps.clone().map(TrapGuard::new),
                trapped: 0,
                closures_asked: false,
                announced: HashSet::new(),
                reopen: Vec::new(),
                withdrawals: HashMap::new(),
            },
            refusals: Refusals::new(!cfg.keep_retrying_robots),
            store: StoreHealth::new(cfg.store_outage_limit),
            cfg,
            claims: Claims::default(),
            placement: Placement::default(),
            recovery: None,
            unwritten: Unwritten::default(),
            release_all_but: None,
            release: Vec::new(),
            cycle_running: false,
            write_deferred: false,
            last_lease_renewal: now,
            fetched,
            errors,
            paused: false,
            drain: None,
            departures: Departures::default(),
            monitoring: Monitoring {
                next_sweep: now,
                events: Vec::new(),
                asked_meanwhile: HashMap::new(),
            },
        }
    }

    // --- recovery -------------------------------------------------------------

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

    // --- nodes ------------------------------------------------------------------

    /// How long a node may be gone before it is taken as left for good.
    pub(crate) fn departed_after(&self) -> Millis {
        self.cfg.departed_after.as_millis() as Millis
    }

    /// The live pools now; returns the nodes that left (with how many URLs
    /// each held, which go back to pending) and the ones that joined.
    pub fn nodes_changed(&mut self, live: &[String]) -> (Vec<(String, usize)>, Vec<String>) {
        let live: BTreeSet<String> = live.iter().cloned().collect();
        let gone: Vec<String> = self
            .placement
            .live_nodes
            .difference(&live)
            .cloned()
            .collect();
        let joined: Vec<String> = live
            .difference(&self.placement.live_nodes)
            .cloned()
            .collect();
        let gone = gone
            .into_iter()
            .map(|node| {
                let released = self.node_lost(&node);
                (node, released)
            })
            .collect();
        self.placement.live_nodes = live;
        (gone, joined)
    }

    /// The live pools now, as (node, pool id): the nodes whose pool is not
    /// the one last seen (the node's process restarted between two looks,
    /// under the same name) lost what theirs held, which goes back to
    /// pending ([`Self::node_lost`]); with how many URLs each.
    pub fn pools_replaced(&mut self, live: &[(String, String)]) -> Vec<(String, usize)> {
        let mut replaced = Vec::new();
        let mut ids = HashMap::with_capacity(live.len());
        for (node, id) in live {
            if self
                .placement
                .pool_ids
                .get(node)
                .is_some_and(|old| old != id)
            {
                replaced.push((node.clone(), self.node_lost(node)));
            }
            ids.insert(node.clone(), id.clone());
        }
        self.placement.pool_ids = ids;
        replaced
    }

    /// `node`'s pool was restarted and [`Self::node_lost`] already said
    /// so: its new pool is taken as it is at the next look.
    pub fn pool_restarted(&mut self, node: &str) -> usize {
        self.placement.pool_ids.remove(node);
        self.node_lost(node)
    }

    /// A node's pool is gone (or was restarted): what it held goes back to
    /// pending and its hosts move to the remaining nodes. Returns how many.
    pub fn node_lost(&mut self, node: &str) -> usize {
        let lost: Vec<UrlKey> = self
            .claims
            .outstanding
            .iter()
            .filter(|(_, a)| a.node == node)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &lost {
            self.forget(key);
        }
        self.unwritten.reported.retain(|j| !lost.contains(&j.key()));
        self.placement.host_owner.retain(|_, owner| owner != node);
        // Its parked URLs were counted as its own, so they went back too.
        self.placement.moving.retain(|_, m| m.from != node);
        let n = lost.len();
        self.release.extend(lost);
        n
    }

    /// Nodes `joined` the live ones at `now`: the hosts that move to them
    /// ([`rebalance`]). Each is moving until its old pool hands it back
    /// ([`Window::released`]) or [`MOVE_DEADLINE_MS`] passes; the caller
    /// asks that pool to (`PoolMsg::Release`).
    pub fn rebalance(&mut self, joined: &[String], now: Millis) -> Vec<Move> {
        if self.drain.is_some() {
            return Vec::new();
        }
        // A host on its way counts as its new node's already.
        let held: Vec<HostHold> = self
            .placement
            .host_owner
            .iter()
            .map(|(host, node)| HostHold {
                host: host.clone(),
                node: self
                    .placement
                    .moving
                    .get(host)
                    .map_or(node, |m| &m.to)
                    .clone(),
                urls: self.claims.per_host.get(host).copied().unwrap_or(0),
            })
            .collect();
        let live: Vec<String> = self.placement.live_nodes.iter().cloned().collect();
        let mut moves = rebalance(&held, &live, joined);
        moves.retain(|m| !self.placement.moving.contains_key(&m.host));
        for m in &moves {
            self.placement.moving.insert(
                m.host.clone(),
                Moving {
                    from: m.from.clone(),
                    to: m.to.clone(),
                    parked: Vec::new(),
                    deadline: now.saturating_add(MOVE_DEADLINE_MS),
                },
            );
        }
        moves
    }

    /// The moves whose old pool has not handed the host back by their
    /// deadline, abandoned at `now`: each host stays on its old node (it
    /// is that node's in the window still, parked URLs included), and the
    /// caller dispatches the parked URLs there. Its old pool, if it still
    /// holds the host as leaving, starts nothing of it and hands it back
    /// later, to itself ([`Window::released`]); so the host is still
    /// fetched from one node at a time.
    pub fn abandon_late_moves(&mut self, now: Millis) -> Vec<AbandonedMove> {
        let mut abandoned: Vec<AbandonedMove> = self
            .placement
            .moving
            .extract_if(|_, m| now >= m.deadline)
            .map(|(host, m)| AbandonedMove {
                host,
                from: m.from,
                to: m.to,
                parked: m.parked,
            })
            .collect();
        abandoned.sort_by(|a, b| a.host.cmp(&b.host));
        abandoned
    }

    /// A move [`Window::rebalance`] just returned could not be asked of the
    /// old pool: the host stays there (nothing was parked for it yet).
    pub fn move_failed(&mut self, host: &str) {
        self.placement.moving.remove(host);
    }

    /// `from`'s pool handed `host` back with its queued `jobs`: they and
    /// the URLs parked for the host go to the node it moves to, or back to
    /// `from` when that node is gone or the move is unknown (a restarted
    /// master). Returns the node and the jobs to hand over; while draining,
    /// nothing (they go back to pending).
    pub fn released(
        &mut self,
        from: &str,
        host: &str,
        jobs: Vec<Job>,
    ) -> Option<(String, Vec<Job>)> {
        let moving = if self
            .placement
            .moving
            .get(host)
            .is_some_and(|m| m.from == from)
        {
            self.placement.moving.remove(host)
        } else {
            None
        };
        let to = match &moving {
            Some(m) if self.placement.live_nodes.contains(&m.to) => m.to.clone(),
            _ => from.to_string(),
        };
        let parked = moving.map(|m| m.parked).unwrap_or_default();
        // Only what is still this master's and `from`'s: a URL of a lost
        // node went back to pending already.
        let jobs: Vec<Job> = jobs
            .into_iter()
            .chain(parked)
            .filter(|j| {
                self.claims
                    .outstanding
                    .get(&j.key())
                    .is_some_and(|a| a.node == from)
            })
            .collect();
        if self.drain.is_some() {
            self.unstarted(&jobs);
            return None;
        }
        for job in &jobs {
            let key = job.key();
            if let Some(assigned) = self.claims.outstanding.get_mut(&key) {
                assigned.node = to.clone();
            }
            decrement(&mut self.claims.per_node, from);
            *self.claims.per_node.entry(to.clone()).or_default() += 1;
        }
        self.placement
            .host_owner
            .insert(host.to_string(), to.clone());
        Some((to, jobs))
    }

    /// A draining pool handed back what it had not started.
    pub fn unstarted(&mut self, jobs: &[Job]) {
        for job in jobs {
            let key = job.key();
            self.forget(&key);
            self.release.push(key);
        }
    }

    // --- reports ----------------------------------------------------------------

    /// Turn a report into writes for the next batch; returns whether the
    /// batch should be written now rather than at the next flush.
    pub fn on_report(&mut self, mut report: SlaveReport, now: Millis) -> bool {
        // Almost always empty: no key is built for every report.
        if !self.monitoring.asked_meanwhile.is_empty()
            && let Some(every) = self.monitoring.asked_meanwhile.remove(&report.job().key())
        {
            report.job_mut().check_every_ms = Some(every);
        }
        self.unwritten.reported.push(report.job().clone());
        if answered(&report) {
            self.refusals.answered();
        }
        match report {
            SlaveReport::Page { job, mut page } => {
                self.fetched += 1;
                self.guard_links(&mut page, job.last.is_none(), now);
                self.monitor(&job, &mut page, now);
                self.unwritten.batch.pages.push(*page);
            }
            SlaveReport::RobotsBlocked { job } => {
                let page = self.failed_page(job, None, ROBOTS_BLOCKED.to_string());
                self.unwritten.batch.pages.push(page);
            }
            SlaveReport::RobotsUnreachable { job, retry_at, why } => {
                self.errors += 1;
                let attempt = job.attempts + 1;
                let reason = robots_unreachable(&why);
                let (retry_at, give_up) = match why {
                    WhyUnreachable::Refused => {
                        match self
                            .refusals
                            .refused(&job.host, attempt, self.cfg.max_attempts)
                        {
                            OnRefusal::GiveUp => (retry_at, true),
                            OnRefusal::RetrySoon => (now.saturating_add(REFUSED_RETRY_MS), false),
                            OnRefusal::Retry => (retry_at, false),
                        }
                    }
                    WhyUnreachable::Failed(_) => (retry_at, false),
                };
                if give_up {
                    tracing::info!(url = %job.url, attempt, "giving up: every host of the run refused the connection");
                    let error = format!(
                        "failed after {attempt} attempt(s): connection refused, as on every host of this run"
                    );
                    let page = self.failed_page(job, None, error);
                    self.unwritten.batch.pages.push(page);
                } else if self.cfg.keep_retrying_robots || attempt < self.cfg.max_attempts {
                    self.unwritten.batch.retries.push(Retry {
                        key: job.key(),
                        not_before: retry_at,
                        error: reason,
                    });
                } else {
                    tracing::info!(url = %job.url, attempt, %reason, "giving up");
                    let error = format!("failed after {attempt} attempt(s): {reason}");
                    let page = self.failed_page(job, None, error);
                    self.unwritten.batch.pages.push(page);
                }
            }
            SlaveReport::Failed {
                job,
                reason,
                retryable,
                status,
                retry_after,
            } => {
                self.errors += 1;
                let attempt = job.attempts + 1;
                // A watched URL's check is not retried: the next check is
                // its retry, and a failure now is what it has to tell.
                let recheck = self.revisit(job.check_every_ms).is_some() && job.last.is_some();
                if retryable && attempt < self.cfg.max_attempts && !recheck {
                    tracing::debug!(url = %job.url, %reason, attempt, "will retry");
                    self.unwritten.batch.retries.push(Retry {
                        key: job.key(),
                        not_before: retry_at(&self.cfg, job.attempts, retry_after, now),
                        error: reason,
                    });
                } else {
                    tracing::info!(url = %job.url, %reason, attempt, "giving up");
                    if status.is_some() {
                        self.fetched += 1;
                    }
                    let error = format!("failed after {attempt} attempt(s): {reason}");
                    let mut page = self.failed_page(job.clone(), status, error);
                    self.monitor(&job, &mut page, now);
                    self.unwritten.batch.pages.push(page);
                }
            }
        }
        self.write_due()
    }

    /// The revisit policy a URL with its own interval `own` is watched
    /// with: that, else the node's `recrawl_every` ([`revisit_for`]).
    fn revisit(&self, own: Option<Millis>) -> Option<Revisit> {
        revisit_for(own, self.cfg.recrawl_every.map(interval_ms))
    }

    /// Availability monitoring for a fetch of `job`: what it changed
    /// against the URL's last fetch (an event to tell), and, when the URL
    /// is watched, when it is due again.
    fn monitor(&mut self, job: &Job, page: &mut ProcessedPage, now: Millis) {
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
            self.monitoring.events.push(StatusEvent {
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
        std::mem::take(&mut self.monitoring.events)
    }

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
    fn guard_links(&mut self, page: &mut ProcessedPage, first: bool, now: Millis) {
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
        if let Some(hash) = page.simhash.filter(|_| first) {
            traps.observe(
                &page.record.url,
                hash,
                &page.shingles,
                page.links.iter().map(|l| l.url.as_str()),
                now,
            );
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
        let refused: Vec<NewLink> = (page.links)
            .extract_if(.., |l| match traps.admit(&l.url, now) {
                Ok(()) => false,
                Err(reason) => {
                    reasons.push(reason);
                    true
                }
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
    fn guard_claimed(&mut self, claimed: Vec<Job>, now: Millis) -> Vec<Job> {
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

    fn failed_page(&self, job: Job, status: Option<u16>, error: String) -> ProcessedPage {
        ProcessedPage {
            record: PageRecord {
                url: job.url,
                operation: job.operation,
                host: job.host,
                depth: job.depth,
                http_returncode: status,
                error: Some(error),
                node: self.cfg.node_name.clone(),
                // Kept: a URL that failed is watched as before.
                check_every_ms: job.check_every_ms,
                ..PageRecord::default()
            },
            ..ProcessedPage::default()
        }
    }

    pub fn host_record(&mut self, record: crate::types::HostRecord) {
        if record.robots_status != crate::types::RobotsStatus::Unreachable
            || record.robots_http_code.is_some()
        {
            self.refusals.answered();
        }
        self.unwritten.batch.hosts.push(record);
    }

    /// A URL a user added: written in the next cycle.
    pub fn add_seed(&mut self, link: NewLink, now: Millis) {
        if let Some(every) = link.check_every_ms {
            self.asked_while_fetched(&link, every, now);
        }
        self.unwritten.batch.seeds.push(link);
    }

    /// `link`'s URL was given the interval `every` of its own. If it is
    /// being fetched, its result takes it (see `asked_meanwhile`); if that
    /// result waits in the batch, it is rescheduled there, from `now`, as
    /// a new interval starts over. (A result being written already is
    /// written first; the seed then queues the URL again with it.)
    fn asked_while_fetched(&mut self, link: &NewLink, every: Millis, now: Millis) {
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
                self.monitoring.asked_meanwhile.insert(key, every);
            }
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

    // --- the store cycle --------------------------------------------------------

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

    /// Whether this cycle looks for watched URLs due again: once a
    /// second at most, and only while the crawl claims (not paused,
    /// draining or waiting for the store).
    fn sweep_due(&mut self, now: Millis) -> Option<usize> {
        if !self.cfg.watches()
            || now < self.monitoring.next_sweep
            || self.paused
            || self.drain.is_some()
            || self.recovery.is_some()
            || self.store.outage().is_some()
        {
            return None;
        }
        self.monitoring.next_sweep = now + SWEEP_EVERY_MS;
        Some(self.cfg.effective_claim_window().max(SWEEP_MIN))
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

    /// The cycle's store calls failed because the store is unavailable
    /// (a transient error); `work` is what the cycle did not do (what it did
    /// is taken out of it), `started` when it began, `cause` why it failed,
    /// in words. The batch and its results go back into the window, to be
    /// written with what arrives meanwhile; releases are kept; a claim whose
    /// answer may have been lost is undone by returning to pending whatever
    /// this node has leased and does not hold; every lease is renewed first
    /// thing. The outage starts or goes on: nothing is claimed, the store is
    /// asked again after a backoff ([`StoreHealth`]), and the verdict says
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

    /// What to claim now, if anything: the window's free room, when it is
    /// worth a store call (a few free slots wait for more to free up, unless
    /// the window is running low), within the page budget.
    fn claim_request(&self, now: Millis) -> Option<ClaimRequest> {
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

    /// Hand claimed jobs to pools: a host keeps its node while the node
    /// lives; a new host goes to the node rendezvous hashing picks, weighted
    /// by load.
    fn place(&mut self, jobs: Vec<Job>, live: &[String]) -> Vec<(String, Vec<Job>)> {
        let mut by_node: BTreeMap<String, Vec<Job>> = BTreeMap::new();
        for job in jobs {
            if let Some(moving) = self.placement.moving.get_mut(&job.host) {
                // Counted as the old node's until the move is done.
                let from = moving.from.clone();
                moving.parked.push(job.clone());
                self.assign(job, &from);
                continue;
            }
            let owner = match self.placement.host_owner.get(&job.host) {
                Some(node) if live.contains(node) => node.clone(),
                _ => {
                    let loads: Vec<(String, usize)> = live
                        .iter()
                        .map(|n| (n.clone(), self.claims.per_node.get(n).copied().unwrap_or(0)))
                        .collect();
                    let i = choose_node(&job.host, &loads).expect("live is not empty");
                    let node = loads[i].0.clone();
                    self.placement
                        .host_owner
                        .insert(job.host.clone(), node.clone());
                    node
                }
            };
            self.assign(job.clone(), &owner);
            by_node.entry(owner).or_default().push(job);
        }
        by_node.into_iter().collect()
    }

    /// Leases of URLs still being worked on, to push forward (every third of
    /// the lease), so they do not expire under a slow fetch.
    fn leases_due(&mut self, now: Millis) -> Option<(Vec<UrlKey>, Millis)> {
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

    // --- idleness, budget, pause, drain -------------------------------------------

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

    // --- status ---------------------------------------------------------------------

    pub fn fetched(&self) -> u64 {
        self.fetched
    }

    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Links and claimed URLs the trap defence refused (a URL refused
    /// twice counts twice); the store counts the URLs.
    pub fn trapped(&self) -> u64 {
        self.traps.trapped
    }

    pub fn in_flight(&self) -> usize {
        self.claims.outstanding.len()
    }

    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Each live pool's load and hosts.
    pub fn nodes(&self, live: &[String]) -> Vec<NodeInfo> {
        live.iter()
            .map(|node| NodeInfo {
                load: self.claims.per_node.get(node).copied().unwrap_or(0) as u64,
                hosts: self
                    .placement
                    .host_owner
                    .values()
                    .filter(|n| *n == node)
                    .count() as u64,
                node: node.clone(),
                index: None,
            })
            .collect()
    }

    // --- bookkeeping ------------------------------------------------------------------

    fn assign(&mut self, job: Job, node: &str) {
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

    fn forget(&mut self, key: &UrlKey) -> Option<Assigned> {
        // Not fetched after all (released, retried): the ask stands in
        // the pending row it was written to.
        if !self.monitoring.asked_meanwhile.is_empty() {
            self.monitoring.asked_meanwhile.remove(key);
        }
        let assigned = self.claims.outstanding.remove(key)?;
        decrement(&mut self.claims.per_host, &assigned.job.host);
        decrement(&mut self.claims.per_node, &assigned.node);
        Some(assigned)
    }
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

/// Whether `report` shows its host answered: a response of any status,
/// or robots.txt read (what `RobotsBlocked` needs).
fn answered(report: &SlaveReport) -> bool {
    match report {
        SlaveReport::Page { .. } | SlaveReport::RobotsBlocked { .. } => true,
        SlaveReport::Failed { status, .. } => status.is_some(),
        SlaveReport::RobotsUnreachable { .. } => false,
    }
}

/// A URL's error while its host's robots.txt cannot be had, with why.
fn robots_unreachable(why: &WhyUnreachable) -> String {
    match why {
        WhyUnreachable::Failed(why) if why.is_empty() => "robots.txt unreachable".to_string(),
        why => format!("robots.txt unreachable ({why})"),
    }
}

fn decrement(counts: &mut HashMap<String, usize>, key: &str) {
    if let Some(n) = counts.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(key);
        }
    }
}

/// When a failed attempt may be retried: the backoff doubles with each
/// attempt, and a host's `Retry-After` wins when later.
fn retry_at(cfg: &CrawlConfig, attempts: u32, retry_after: Option<Millis>, now: Millis) -> Millis {
    let backoff = cfg.retry_backoff.as_millis() as Millis * (1_i64 << attempts.min(16));
    retry_after.unwrap_or(0).max(now + backoff)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::OperationSpec;
    use std::time::Duration;

    const T0: Millis = 1_000_000;

    fn cfg() -> CrawlConfig {
        CrawlConfig {
            node_name: "n1".into(),
            concurrency: 2,
            claim_window: 16,
            per_host_window: 4,
            max_batch: 1024,
            ..CrawlConfig::default()
        }
    }

    fn job(host: &str, path: &str) -> Job {
        Job::fixture(host, path, 1)
    }

    fn page(job: &Job) -> SlaveReport {
        page_with(job, Vec::new(), None)
    }

    /// A fetched page of `job` with these links and text simhash.
    fn page_with(
        job: &Job,
        links: Vec<NewLink>,
        simhash: Option<crate::traps::PageSimhash>,
    ) -> SlaveReport {
        SlaveReport::Page {
            job: job.clone(),
            page: Box::new(ProcessedPage {
                record: PageRecord {
                    url: job.url.clone(),
                    http_returncode: Some(200),
                    ..PageRecord::default()
                },
                links,
                simhash,
                ..ProcessedPage::default()
            }),
        }
    }

    fn failed(job: &Job, retryable: bool, retry_after: Option<Millis>) -> SlaveReport {
        SlaveReport::Failed {
            job: job.clone(),
            reason: "timeout".into(),
            retryable,
            status: None,
            retry_after,
        }
    }

    fn nodes(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// A window past recovery with `live` pools.
    fn running(cfg: CrawlConfig, live: &[&str]) -> Window {
        let mut w = Window::new(cfg, 0, 0, T0);
        w.begin_recovery(&nodes(live), T0);
        for n in live {
            w.adopt(n, Vec::new());
        }
        assert!(w.end_recovery_if_due(T0));
        let work = w.start_cycle(false, false, false, T0).expect("the release");
        assert_eq!(work.release_all_but, Some(Vec::new()));
        w.cycle_done(Vec::new(), None, &nodes(live), T0);
        w
    }

    /// Claim `jobs` through one cycle and return the dispatch.
    fn claim(w: &mut Window, jobs: Vec<Job>, live: &[&str]) -> Vec<(String, Vec<Job>)> {
        let work = w.start_cycle(false, true, false, T0).expect("a cycle");
        assert!(work.claim.is_some(), "room to claim");
        w.cycle_done(jobs, None, &nodes(live), T0).dispatch
    }

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
    fn a_host_sticks_to_its_node_and_new_hosts_spread() {
        let live = ["a", "b", "c"];
        let mut w = running(cfg(), &live);
        let jobs: Vec<Job> = (0..12).map(|i| job(&format!("h{i}"), "/1")).collect();
        let first = claim(&mut w, jobs, &live);
        assert!(first.len() > 1, "hosts spread over nodes: {first:?}");
        let owner_of = |d: &[(String, Vec<Job>)], host: &str| {
            d.iter()
                .find(|(_, jobs)| jobs.iter().any(|j| j.host == host))
                .map(|(n, _)| n.clone())
        };
        let h0 = owner_of(&first, "h0").unwrap();
        let again = claim(&mut w, vec![job("h0", "/2")], &live);
        assert_eq!(owner_of(&again, "h0"), Some(h0.clone()), "sticky");
        // The node leaves: its URLs go back to pending, its hosts move.
        let rest: Vec<String> = live
            .iter()
            .map(|n| n.to_string())
            .filter(|n| *n != h0)
            .collect();
        let (gone, joined) = w.nodes_changed(&rest);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].0, h0);
        assert!(gone[0].1 >= 2, "h0's two URLs at least: {gone:?}");
        assert!(joined.is_empty());
        let work = w.start_cycle(false, false, false, T0).unwrap();
        assert!(work.release.iter().any(|k| k.url == "http://h0/1"));
        let refs: Vec<&str> = rest.iter().map(String::as_str).collect();
        w.cycle_done(Vec::new(), None, &rest, T0);
        let moved = claim(&mut w, vec![job("h0", "/3")], &refs);
        assert_ne!(owner_of(&moved, "h0"), Some(h0));
    }

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
    fn retries_back_off_exponentially_and_honour_retry_after() {
        let mut w = running(cfg(), &["a"]);
        let mut j = job("h", "/");
        claim(&mut w, vec![j.clone()], &["a"]);
        w.on_report(failed(&j, true, None), T0);
        j.attempts = 1;
        w.on_report(failed(&j, true, Some(T0 + 60_000)), T0);
        j.attempts = 1;
        w.on_report(failed(&j, true, Some(T0 + 10)), T0);
        let retries: Vec<Millis> = w
            .start_cycle(true, false, false, T0)
            .unwrap()
            .batch
            .retries
            .iter()
            .map(|r| r.not_before - T0)
            .collect();
        assert_eq!(retries, vec![2_000, 60_000, 4_000]);
        // The last attempt is recorded as failed, not retried.
        j.attempts = 2;
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
        w.on_report(failed(&j, true, None), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert!(batch.retries.is_empty());
        assert_eq!(
            batch.pages[0].record.error.as_deref(),
            Some("failed after 3 attempt(s): timeout")
        );
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
        w.add_seed(
            NewLink {
                url: "http://h/".into(),
                host: "h".into(),
                operation: OperationSpec::crawl(),
                depth: 0,
                priority: 1.0,
                redirect_hops: 0,
                modified: None,
                check_every_ms: None,
            },
            T0,
        );
        assert!(w.write_due());
        let work = w.start_cycle(false, false, false, T0).unwrap();
        assert_eq!(work.batch.seeds.len(), 1);
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

    /// Hosts h0..h3 with two URLs each on "a", then "b" joins: the moves.
    fn b_joins(w: &mut Window) -> Vec<Move> {
        let jobs: Vec<Job> = (0..8)
            .map(|i| job(&format!("h{}", i / 2), &format!("/{i}")))
            .collect();
        claim(w, jobs, &["a"]);
        let (gone, joined) = w.nodes_changed(&nodes(&["a", "b"]));
        assert!(gone.is_empty());
        assert_eq!(joined, ["b"]);
        w.rebalance(&joined, T0)
    }

    #[test]
    fn a_joined_node_takes_hosts_once_their_old_pool_hands_them_back() {
        let mut w = running(cfg(), &["a"]);
        let moves = b_joins(&mut w);
        assert_eq!(moves.len(), 2, "half the busy hosts: {moves:?}");
        assert!(
            moves
                .iter()
                .all(|m| (m.from.as_str(), m.to.as_str()) == ("a", "b"))
        );
        assert!(w.rebalance(&nodes(&["b"]), T0).is_empty(), "moving already");
        assert!(
            w.abandon_late_moves(T0 + MOVE_DEADLINE_MS - 1).is_empty(),
            "not late yet"
        );
        let host = moves[0].host.clone();
        // Claimed while it moves: parked, neither node gets it yet.
        let late = job(&host, "/late");
        let after = claim(&mut w, vec![late.clone()], &["a", "b"]);
        assert!(after.is_empty(), "{after:?}");
        // Its first URL ran and reported on "a"; the second was queued.
        let k: usize = host[1..].parse().unwrap();
        let (ran, queued) = (
            job(&host, &format!("/{}", 2 * k)),
            job(&host, &format!("/{}", 2 * k + 1)),
        );
        w.on_report(page(&ran), T0);
        let (to, jobs) = w.released("a", &host, vec![queued.clone()]).unwrap();
        assert_eq!((to.as_str(), jobs), ("b", vec![queued, late]));
        let info = w.nodes(&nodes(&["a", "b"]));
        assert_eq!((info[1].load, info[1].hosts), (2, 1), "{info:?}");
        assert_eq!(info[0].load, 7, "the reported URL stays a's until written");
        // New URLs of the host go to "b" now.
        let next = job(&host, "/next");
        assert_eq!(
            claim(&mut w, vec![next.clone()], &["a", "b"]),
            vec![("b".to_string(), vec![next])]
        );
    }

    #[test]
    fn a_move_to_a_node_that_left_goes_back_and_one_from_a_lost_node_is_dropped() {
        let mut w = running(cfg(), &["a"]);
        let moves = b_joins(&mut w);
        let (h0, h1) = (moves[0].host.clone(), moves[1].host.clone());
        let parked = job(&h0, "/parked");
        claim(&mut w, vec![parked.clone()], &["a", "b"]);
        w.nodes_changed(&nodes(&["a"]));
        let (to, jobs) = w.released("a", &h0, Vec::new()).unwrap();
        assert_eq!((to.as_str(), jobs), ("a", vec![parked]), "b is gone");
        // A pool's answer the master knows nothing of (it restarted): back.
        let (to, _) = w.released("a", "elsewhere", Vec::new()).unwrap();
        assert_eq!(to, "a");
        // The old node is lost mid-move: its URLs go back, parked ones too.
        let mut w = running(cfg(), &["a"]);
        b_joins(&mut w);
        claim(&mut w, vec![job(&h1, "/parked")], &["a", "b"]);
        assert_eq!(w.node_lost("a"), 9);
        let (to, jobs) = w.released("a", &h1, vec![job(&h1, "/parked")]).unwrap();
        assert_eq!((to.as_str(), jobs.len()), ("a", 0), "nothing of it is held");
    }

    #[test]
    fn a_move_whose_old_pool_never_answers_is_abandoned_at_its_deadline() {
        let mut w = running(cfg(), &["a"]);
        let moves = b_joins(&mut w);
        let (h0, h1) = (moves[0].host.clone(), moves[1].host.clone());
        let parked = job(&h0, "/parked");
        assert!(claim(&mut w, vec![parked.clone()], &["a", "b"]).is_empty());
        // "a"'s pool restarted and forgot the move: no `Released` comes.
        let abandoned = w.abandon_late_moves(T0 + MOVE_DEADLINE_MS);
        let mut want = vec![
            AbandonedMove {
                host: h0.clone(),
                from: "a".into(),
                to: "b".into(),
                parked: vec![parked.clone()],
            },
            AbandonedMove {
                host: h1.clone(),
                from: "a".into(),
                to: "b".into(),
                parked: Vec::new(),
            },
        ];
        want.sort_by(|x, y| x.host.cmp(&y.host));
        assert_eq!(abandoned, want);
        assert!(
            w.abandon_late_moves(T0 + 2 * MOVE_DEADLINE_MS).is_empty(),
            "once"
        );
        // The host stays on "a": its parked URL is counted there, and so
        // is what it claims next.
        let info = w.nodes(&nodes(&["a", "b"]));
        assert_eq!((info[0].load, info[1].load), (9, 0), "{info:?}");
        let next = job(&h0, "/next");
        assert_eq!(
            claim(&mut w, vec![next.clone()], &["a", "b"]),
            vec![("a".to_string(), vec![next])]
        );
        // A late answer from "a" after all: the host goes back to "a".
        let (to, jobs) = w.released("a", &h0, vec![parked.clone()]).unwrap();
        assert_eq!((to.as_str(), jobs), ("a", vec![parked]));
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

    #[test]
    fn a_restarted_pool_loses_what_it_held() {
        let mut w = running(cfg(), &["a"]);
        let j = job("h", "/");
        claim(&mut w, vec![j.clone()], &["a"]);
        w.on_report(page(&j), T0);
        assert_eq!(w.node_lost("a"), 1);
        assert_eq!(w.in_flight(), 0);
        let work = w.start_cycle(true, false, false, T0).unwrap();
        assert_eq!(work.release, vec![j.key()]);
    }

    fn link(url: &str) -> NewLink {
        NewLink {
            url: url.to_string(),
            host: "h".into(),
            operation: OperationSpec::crawl(),
            depth: 2,
            priority: 0.1,
            redirect_hops: 0,
            modified: None,
            check_every_ms: None,
        }
    }

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

    #[test]
    fn unreachable_robots_fail_a_one_shot_crawl_but_not_a_service() {
        let j = job("h", "/");
        let report = |attempts: u32| SlaveReport::RobotsUnreachable {
            job: Job {
                attempts,
                ..j.clone()
            },
            retry_at: T0 + 10_000,
            why: WhyUnreachable::Failed("http://h/robots.txt: HTTP 503".into()),
        };
        let mut w = running(cfg(), &["a"]);
        w.on_report(report(0), T0);
        w.on_report(report(2), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert_eq!(batch.retries.len(), 1);
        assert_eq!(batch.retries[0].not_before, T0 + 10_000);
        assert_eq!(
            batch.pages[0].record.error.as_deref(),
            Some(
                "failed after 3 attempt(s): robots.txt unreachable (http://h/robots.txt: HTTP 503)"
            )
        );
        let mut service = cfg();
        service.keep_retrying_robots = true;
        let mut w = running(service, &["a"]);
        w.on_report(report(50), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert_eq!((batch.retries.len(), batch.pages.len()), (1, 0));
    }

    /// `job`'s host refused the connection on its robots.txt.
    fn refused(job: &Job, attempts: u32) -> SlaveReport {
        SlaveReport::RobotsUnreachable {
            job: Job {
                attempts,
                ..job.clone()
            },
            retry_at: T0 + 10_000,
            why: WhyUnreachable::Refused,
        }
    }

    #[test]
    fn a_run_whose_every_host_refuses_ends_within_a_second_or_two() {
        let (r1, r2) = (job("r1", "/"), job("r2", "/"));
        let mut w = running(cfg(), &["a"]);
        claim(&mut w, vec![r1.clone(), r2.clone()], &["a"]);
        // r2 may still answer: r1 is asked again soon, not in 10 s.
        w.on_report(refused(&r1, 0), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert_eq!(batch.retries.len(), 1);
        assert_eq!(batch.retries[0].not_before, T0 + 1_000);
        assert_eq!(
            batch.retries[0].error,
            "robots.txt unreachable (connection refused)"
        );
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
        // Now every host of the run refused: no more waiting than a second.
        w.on_report(refused(&r2, 0), T0);
        w.on_report(refused(&r1, 1), T0 + 1_000);
        w.on_report(refused(&r2, 1), T0 + 1_000);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert_eq!(batch.retries.len(), 1, "r2's first refusal");
        let errors: Vec<&str> = batch
            .pages
            .iter()
            .filter_map(|p| p.record.error.as_deref())
            .collect();
        assert_eq!(
            errors,
            [
                "failed after 2 attempt(s): connection refused, as on every host of this run",
                "failed after 2 attempt(s): connection refused, as on every host of this run",
            ]
        );
    }

    #[test]
    fn a_refused_host_keeps_its_retries_beside_a_host_that_answers() {
        let (r, busy, up) = (job("r", "/"), job("busy", "/"), job("up", "/"));
        // A host answering 503 is no refusal: the refused one is not given
        // up, and its last attempt waits the whole robots_retry.
        let mut w = running(cfg(), &["a"]);
        claim(&mut w, vec![r.clone(), busy.clone()], &["a"]);
        w.on_report(refused(&r, 0), T0);
        w.on_report(refused(&r, 1), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        let waits: Vec<Millis> = batch.retries.iter().map(|r| r.not_before).collect();
        assert_eq!(waits, [T0 + 1_000, T0 + 10_000]);
        assert!(batch.pages.is_empty());
        // Once a host answered, a refusal is retried as any failure.
        let mut w = running(cfg(), &["a"]);
        claim(&mut w, vec![r.clone(), up.clone()], &["a"]);
        w.on_report(page(&up), T0);
        w.on_report(refused(&r, 0), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert_eq!(batch.retries[0].not_before, T0 + 10_000);
        // A service never gives up on a host.
        let mut service = cfg();
        service.keep_retrying_robots = true;
        let mut w = running(service, &["a"]);
        claim(&mut w, vec![r.clone()], &["a"]);
        w.on_report(refused(&r, 7), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert_eq!((batch.retries.len(), batch.pages.len()), (1, 0));
    }

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

    #[test]
    fn watched_urls_get_their_next_check_and_their_changes_are_told() {
        use crate::monitor::Change;
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
        use crate::monitor::WATCH_OFF;
        let service = CrawlConfig {
            monitoring: true,
            recrawl_every: Some(Duration::from_secs(60)),
            ..cfg()
        };
        let mut w = running(service, &["a"]);
        let (fetching, reported, idle) = (job("h", "/f"), job("h", "/r"), job("h", "/i"));
        claim(&mut w, vec![fetching.clone(), reported.clone()], &["a"]);
        w.on_report(page(&reported), T0);
        let asked = |j: &Job, every| NewLink {
            check_every_ms: Some(every),
            modified: Some(T0 + 100),
            ..link(&j.url)
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
            w.monitoring.asked_meanwhile.is_empty(),
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
            monitoring: true,
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
