//! The master's answer to `status`, in two halves: what the master knows
//! itself (the window, the rate, the counts it last read), taken at `now`
//! in its mailbox, and what a task of its own asks the store and the pools
//! so the mailbox never waits for either. Both halves are pure
//! ([`StatusDraft::new`], [`StatusDraft::finish`]); [`StatusDraft::answer`]
//! is the task.

use crate::behaviour::{Frontier, error_chain};
use crate::hosts::NodeHosts;
use crate::protocol::{self, Status};
use crate::rate::{RecentRate, average_per_sec};
use crate::types::{IndexCounts, Millis, StoreCounts};
use crate::window::{Window, idle_reason};
use ractor::RpcReplyPort;
use std::sync::{Arc, Mutex};

/// The store's counts last read, shared with the `status` tasks: what
/// `status` says while the store is unavailable.
#[derive(Clone, Debug, Default)]
pub(crate) struct LastCounts(Arc<Mutex<StoreCounts>>);

impl LastCounts {
    pub(crate) fn read(&self) -> StoreCounts {
        self.lock().clone()
    }

    pub(crate) fn keep(&self, counts: StoreCounts) {
        *self.lock() = counts;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StoreCounts> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What the master knows of itself besides its window.
#[derive(Debug)]
pub(crate) struct MasterFacts {
    pub(crate) node: String,
    pub(crate) restarts: u32,
    /// Since the app started (across master restarts).
    pub(crate) elapsed_ms: u64,
    /// The live pools' nodes.
    pub(crate) live: Vec<String>,
    /// The store's counts last read.
    pub(crate) last_counts: StoreCounts,
    pub(crate) index: Option<IndexCounts>,
    /// The master gave up on its store: it asks it nothing more.
    pub(crate) gave_up: bool,
}

/// A `status` answer waiting for the store's counts and the pools' requests.
#[derive(Debug)]
pub(crate) struct StatusDraft {
    status: Status,
    ask_store: bool,
    /// The window holds nothing: fresh counts say whether the crawl is idle.
    holds_nothing: bool,
    budget_reached: bool,
}

impl StatusDraft {
    pub(crate) fn new(window: &Window, rate: &RecentRate, facts: MasterFacts, now: Millis) -> Self {
        let fetched = window.fetched();
        let outage = window.store_outage();
        let (claim_window, per_host_window) = window.claim_limits();
        let status = Status {
            node: facts.node,
            store: facts.last_counts,
            in_flight: window.in_flight() as u64,
            requests_in_flight: 0,
            fetched_this_run: fetched,
            errors_this_run: window.errors(),
            pages_per_sec: average_per_sec(fetched, facts.elapsed_ms),
            recent_pages_per_sec: rate.per_sec(now, fetched),
            elapsed_ms: facts.elapsed_ms,
            paused: window.paused(),
            idle: None,
            master_restarts: facts.restarts,
            nodes: window.nodes(&facts.live),
            claim_window: claim_window as u64,
            per_host_window: per_host_window as u64,
            store_unreachable_since: outage.map(|o| o.since),
            store_error: outage.map(|o| o.cause.clone()),
            index: facts.index,
            handing_over: window.departures.handing_over(),
            pages_awaiting_handover: window.departures.pages_waiting(),
        };
        Self {
            status,
            // The store is away: the counts last read, without asking it.
            ask_store: outage.is_none() && !facts.gave_up,
            holds_nothing: window.holds_nothing(),
            budget_reached: window.budget_reached(),
        }
    }

    /// Whether to ask the store its counts.
    pub(crate) fn asks_store(&self) -> bool {
        self.ask_store
    }

    /// The answer, with the store's counts (`None`: not asked; `Err`: why
    /// they could not be read) and the pools that answered; and the counts
    /// to keep as the last read.
    pub(crate) fn finish(
        self,
        counts: Option<Result<StoreCounts, String>>,
        pools: &[NodeHosts],
    ) -> (Status, Option<StoreCounts>) {
        let mut status = self.status;
        status.requests_in_flight = pools.iter().map(|p| p.running).sum();
        shard_counts(&mut status, pools);
        let fresh = match counts {
            Some(Ok(counts)) => {
                if self.holds_nothing {
                    status.idle = idle_reason(self.budget_reached, counts.frontier_empty());
                }
                status.store = counts.clone();
                Some(counts)
            }
            // The counts last read, and why they are not fresh; the store
            // cycle finds out whether the store is away.
            Some(Err(cause)) => {
                status.store_error = Some(cause);
                None
            }
            None => None,
        };
        (status, fresh)
    }

    /// Finish on a task of its own: ask `store` its counts (when it may be
    /// asked) and the pools named `pool_name` their running requests at
    /// once, keep fresh counts in `last`, and answer `reply`.
    pub(crate) fn answer(
        self,
        store: Arc<dyn Frontier>,
        pool_name: String,
        last: LastCounts,
        reply: RpcReplyPort<Status>,
    ) {
        let ask_store = self.asks_store();
        tokio::spawn(async move {
            let counts = async {
                if ask_store {
                    Some(store.counts().await.map_err(|e| error_chain(&e)))
                } else {
                    None
                }
            };
            let (counts, (pools, _silent)) =
                tokio::join!(counts, protocol::ask_pools(&pool_name, 0));
            let (status, fresh) = self.finish(counts, &pools);
            if let Some(counts) = fresh {
                last.keep(counts);
            }
            let _ = reply.send(status);
        });
    }
}

/// Each node's index shard in `status`: the master's own counts for its
/// node, what each other pool answered for its node; `index` is their sum.
fn shard_counts(status: &mut Status, pools: &[NodeHosts]) {
    let own = status.index;
    let of = |node: &str| pools.iter().find(|p| p.node == node).and_then(|p| p.index);
    for info in &mut status.nodes {
        info.index = if info.node == status.node {
            own
        } else {
            of(&info.node)
        };
    }
    status.index = pools
        .iter()
        .filter(|p| p.node != status.node)
        .filter_map(|p| p.index)
        .fold(own, |sum, shard| Some(sum.unwrap_or_default().plus(shard)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CrawlConfig;
    use crate::protocol::IdleReason;

    const T0: Millis = 1_000_000;

    fn facts(gave_up: bool) -> MasterFacts {
        MasterFacts {
            node: "n1".into(),
            restarts: 2,
            elapsed_ms: 10_000,
            live: vec!["n1".into()],
            last_counts: StoreCounts {
                pending: 7,
                ..StoreCounts::default()
            },
            index: None,
            gave_up,
        }
    }

    fn window() -> Window {
        Window::new(CrawlConfig::default(), 50, 3, T0)
    }

    fn draft(window: &Window, gave_up: bool) -> StatusDraft {
        StatusDraft::new(
            window,
            &RecentRate::new(T0, 50),
            facts(gave_up),
            T0 + 10_000,
        )
    }

    fn pool(node: &str, running: u64) -> NodeHosts {
        NodeHosts {
            node: node.into(),
            running,
            ..NodeHosts::default()
        }
    }

    #[test]
    fn the_master_says_what_it_knows_and_the_counts_last_read() {
        let (status, fresh) = draft(&window(), false).finish(None, &[]);
        assert_eq!(
            (
                status.node.as_str(),
                status.master_restarts,
                status.store.pending
            ),
            ("n1", 2, 7)
        );
        assert_eq!((status.fetched_this_run, status.errors_this_run), (50, 3));
        assert_eq!(status.pages_per_sec, 5.0);
        assert_eq!(status.nodes.len(), 1);
        assert_eq!(fresh, None);
    }

    #[test]
    fn requests_in_flight_are_the_answering_pools_running_requests() {
        let pools = [pool("n1", 3), pool("n2", 4)];
        let (status, _) = draft(&window(), false).finish(None, &pools);
        assert_eq!(status.requests_in_flight, 7);
    }

    #[test]
    fn the_index_counts_are_every_answering_shards_summed_and_each_nodes_own() {
        let counts = |indexed, queued| IndexCounts { indexed, queued };
        let mut facts = facts(false);
        facts.index = Some(counts(10, 12));
        facts.live = vec!["n1".into(), "w1".into(), "w2".into(), "w3".into()];
        let cluster = StatusDraft::new(&window(), &RecentRate::new(T0, 50), facts, T0 + 1);
        let mut w1 = pool("w1", 0);
        w1.index = Some(counts(5, 9));
        // The master's node's index is the master's (the store's queue);
        // what its pool says is not counted twice. w2 keeps no index; w3
        // did not answer.
        let mut n1 = pool("n1", 0);
        n1.index = Some(counts(99, 99));
        let (status, _) = cluster.finish(None, &[n1, w1, pool("w2", 0)]);
        assert_eq!(status.index, Some(counts(15, 21)));
        let by_node: Vec<(&str, Option<IndexCounts>)> = status
            .nodes
            .iter()
            .map(|n| (n.node.as_str(), n.index))
            .collect();
        assert_eq!(
            by_node,
            [
                ("n1", Some(counts(10, 12))),
                ("w1", Some(counts(5, 9))),
                ("w2", None),
                ("w3", None)
            ]
        );
        // No node keeps an index: none to report.
        let (status, _) = draft(&window(), false).finish(None, &[pool("w2", 0)]);
        assert_eq!(status.index, None);
    }

    #[test]
    fn fresh_counts_are_kept_and_say_whether_an_empty_window_is_idle() {
        let empty = StoreCounts::default();
        let (status, fresh) = draft(&window(), false).finish(Some(Ok(empty.clone())), &[]);
        assert_eq!(status.idle, Some(IdleReason::FrontierEmpty));
        assert_eq!((status.store.clone(), fresh), (empty.clone(), Some(empty)));
        let pending = StoreCounts {
            pending: 1,
            ..StoreCounts::default()
        };
        let (status, _) = draft(&window(), false).finish(Some(Ok(pending)), &[]);
        assert_eq!(status.idle, None);
    }

    #[test]
    fn counts_that_cannot_be_read_leave_the_last_ones_and_say_why() {
        let (status, fresh) = draft(&window(), false).finish(Some(Err("locked".into())), &[]);
        assert_eq!(status.store.pending, 7);
        assert_eq!(status.store_error.as_deref(), Some("locked"));
        assert_eq!(fresh, None);
    }

    #[test]
    fn an_away_or_given_up_store_is_not_asked() {
        assert!(draft(&window(), false).asks_store());
        assert!(!draft(&window(), true).asks_store());
        let mut away = window();
        away.ask_store_now();
        let work = away.start_cycle(true, true, false, T0).unwrap_or_default();
        away.cycle_failed(work, T0, T0 + 10, "the store is away".into());
        let draft = draft(&away, false);
        assert!(!draft.asks_store());
        let (status, _) = draft.finish(None, &[]);
        assert_eq!(status.store_unreachable_since, Some(T0));
        assert_eq!(status.store_error.as_deref(), Some("the store is away"));
    }

    #[test]
    fn status_json_keeps_the_window_field_name() {
        let status = Status {
            claim_window: 512,
            ..Status::default()
        };
        let v = serde_json::to_value(&status).unwrap();
        assert_eq!(v["window"], 512, "{v}");
        assert!(v.get("claim_window").is_none());
    }
}
