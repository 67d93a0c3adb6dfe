//! The master's dispatch core, as plain data: the window of claimed URLs
//! (which node holds each, per host and per node), how much to claim, which
//! node fetches a host and which hosts move to a node that joins, how
//! reports become the next commit batch (with retry backoff and the page
//! budget), when the crawl is idle, how a restarted
//! master recovers its predecessor's leases, and how a drain ends. It takes
//! `now` as an argument, holds no actor refs and no store: the
//! `Master` actor feeds it messages and carries out the
//! [`CycleWork`](crate::store_cycle::CycleWork) it hands out, one store
//! cycle at a time.
//!
//! One concern a file, each with its tests: what is claimed (`claims`),
//! which node fetches a host (`placement`), a restarted master's leases
//! (`recovery`), reports into the batch (`reports`), watched URLs
//! (`availability`), the trap defence (`trap_defence`), the store cycle and
//! idleness (`cycle`), the store's outages (`store_outage`), pause and
//! drain (`drain`).

use crate::config::CrawlConfig;
use crate::departures::Departures;
use crate::outage::StoreHealth;
use crate::refusals::Refusals;
use crate::traps::TrapGuard;
use crate::types::{Millis, UrlKey};
use std::collections::{HashMap, HashSet};

mod availability;
mod claims;
mod cycle;
mod drain;
#[cfg(test)]
mod fixtures;
mod placement;
mod recovery;
mod reports;
mod store_outage;
mod trap_defence;

use availability::AvailabilityWatch;
use claims::Claims;
use cycle::Unwritten;
pub use cycle::{AfterCycle, Flush, idle_reason};
use drain::Drain;
use placement::Placement;
pub use placement::{AbandonedMove, MOVE_DEADLINE_MS};
pub use recovery::RECOVERY_WAIT_MS;
use recovery::Recovery;
use trap_defence::TrapDefence;

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
    /// The flush timer is running: it writes what waits ([`Window::flush`]).
    flush_timer: bool,
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
    availability: AvailabilityWatch,
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
            flush_timer: false,
            last_lease_renewal: now,
            fetched,
            errors,
            paused: false,
            drain: None,
            departures: Departures::default(),
            availability: AvailabilityWatch {
                next_sweep: now,
                events: Vec::new(),
                asked_meanwhile: HashMap::new(),
            },
        }
    }
}
