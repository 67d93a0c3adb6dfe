//! The `hosts` listing of a running crawl: what the store knows of each
//! host (robots.txt, crawl delay, pages processed) with what the pool that
//! holds it does with it now (queue, fetches, robots.txt state, backoff).
//! Each node's `HostScheduler` takes its snapshot
//! ([`HostScheduler::snapshot`](crate::scheduler::HostScheduler::snapshot))
//! when the control actor asks its pool (`PoolMsg::Hosts`); this module
//! merges the answers with the store's rows. Pure, like the other cores.
//!
//! Bounded for a crawl of 100,000 hosts: a pool answers with its busiest
//! hosts only — as many as the listing shows, never more than
//! [`MAX_LIVE_HOSTS`] — and how many hosts hold work there in all; the
//! listing keeps the first `limit` rows.

use crate::types::{IndexCounts, Millis, RobotsStatus};
use serde::{Deserialize, Serialize};
use std::cmp::{Ordering, Reverse};
use std::collections::HashMap;

/// The most hosts one pool describes in one answer, whatever the listing
/// asks for (a few MB of JSON, well under a cluster message's bound).
pub const MAX_LIVE_HOSTS: usize = 10_000;

/// A host as reports list it: robots.txt facts (not its text), the
/// number of its pages processed and, in a running crawl's listing, what
/// the pool holding it does with it now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSummary {
    pub host: String,
    /// `None`: no robots.txt record (yet) for a host with pages.
    pub robots_status: Option<RobotsStatus>,
    pub robots_http_code: Option<u16>,
    pub robots_error: Option<String>,
    pub robots_fetched_at: Option<Millis>,
    pub crawl_delay_ms: Option<u64>,
    pub sitemaps: Vec<String>,
    /// Processed pages of the host.
    pub pages: u64,
    /// Its queue, fetches, robots.txt state and backoff in the pool that
    /// holds it (a running crawl's `hosts`; `None` in the store's reports
    /// and for a host no pool holds anything of).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveHost>,
}

/// robots.txt of a host as its pool has it now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveRobots {
    /// Not asked yet, or its rules expired: asked before the host's next page.
    #[default]
    ToFetch,
    /// A slave is fetching it.
    Fetching,
    /// The rules are in hand.
    Ready,
    /// It could not be had: nothing of the host is fetched until it is
    /// asked again.
    Unreachable,
}

impl LiveRobots {
    pub fn as_str(self) -> &'static str {
        match self {
            LiveRobots::ToFetch => "to fetch",
            LiveRobots::Fetching => "fetching",
            LiveRobots::Ready => "ready",
            LiveRobots::Unreachable => "unreachable",
        }
    }
}

/// What a node's pool holds of one host now. Waits are relative (ms from
/// when the pool answered), so the nodes' clocks need not agree.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveHost {
    pub host: String,
    /// The node whose pool holds it.
    pub node: String,
    /// URLs queued there, not started.
    pub queued: u64,
    /// Its pages being fetched there.
    pub in_flight: u64,
    pub robots: LiveRobots,
    /// How long until its next request may start (the delay, its
    /// Crawl-delay, a backoff, or what is left of another node's delay
    /// after a move); 0: now.
    pub next_fetch_ms: u64,
    /// What is left of the wait the host asked for (a 429 or 503: its
    /// Retry-After, else 10 s); 0: none.
    pub backoff_ms: u64,
    /// An operator paused it (`pause HOST`).
    pub paused: bool,
    /// It moves to another node (one joined): nothing more of it starts
    /// here.
    pub moving: bool,
}

impl LiveHost {
    /// Its URLs in the pool: queued and being fetched.
    pub fn work(&self) -> u64 {
        self.queued + self.in_flight
    }

    /// Busiest first: the most work, then the longest backoff, then by name.
    pub(crate) fn busiest_first(a: &LiveHost, b: &LiveHost) -> Ordering {
        let key = |h: &LiveHost| (Reverse(h.work()), Reverse(h.backoff_ms));
        key(a).cmp(&key(b)).then_with(|| a.host.cmp(&b.host))
    }
}

/// One node's answer to `PoolMsg::Hosts`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeHosts {
    pub node: String,
    /// Hosts with URLs queued or being fetched there, in all.
    pub busy: u64,
    /// Requests running there now, robots.txt included (at most
    /// `--per-host` of any one host).
    #[serde(default)]
    pub running: u64,
    /// A worker's index shard: its pages queued and committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexCounts>,
    /// Its hosts with anything to show (work, a backoff, robots.txt being
    /// fetched or unreachable, paused, moving), busiest first, at most as
    /// many as asked for.
    pub hosts: Vec<LiveHost>,
}

/// A running crawl's `hosts`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostListing {
    /// Hosts known: the store's, and those only a pool holds so far.
    pub total: usize,
    /// Hosts with URLs queued or being fetched, on the nodes that answered.
    pub busy: u64,
    /// Hosts a pool holds first (busiest first: hosts with work, then those
    /// only waiting out a backoff or paused), then the others by name; the
    /// first `limit`.
    pub items: Vec<HostSummary>,
    /// Live nodes whose pool did not answer in time: their hosts show no
    /// live state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub silent_nodes: Vec<String>,
}

/// The store's hosts with the pools' answers: each host gets what its pool
/// holds of it (during a move, the node with more of it), a host only a
/// pool knows yet gets a row of its own; the first `limit` of them.
pub fn listing(
    stored: Vec<HostSummary>,
    answers: Vec<NodeHosts>,
    silent_nodes: Vec<String>,
    limit: usize,
) -> HostListing {
    let busy = answers.iter().map(|a| a.busy).sum();
    let mut live: HashMap<String, LiveHost> = HashMap::new();
    for host in answers.into_iter().flat_map(|a| a.hosts) {
        match live.get(&host.host) {
            Some(held) if (held.work(), !held.moving) >= (host.work(), !host.moving) => {}
            _ => {
                live.insert(host.host.clone(), host);
            }
        }
    }
    let mut items: Vec<HostSummary> = stored
        .into_iter()
        .map(|summary| HostSummary {
            live: live.remove(&summary.host),
            ..summary
        })
        .collect();
    items.extend(live.into_values().map(|host| HostSummary {
        host: host.host.clone(),
        live: Some(host),
        ..HostSummary::default()
    }));
    items.sort_by(|a, b| match (&a.live, &b.live) {
        (Some(a), Some(b)) => LiveHost::busiest_first(a, b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.host.cmp(&b.host),
    });
    let total = items.len();
    items.truncate(limit);
    HostListing {
        total,
        busy,
        items,
        silent_nodes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(host: &str, pages: u64) -> HostSummary {
        HostSummary {
            host: host.to_string(),
            pages,
            ..HostSummary::default()
        }
    }

    fn live(host: &str, node: &str, queued: u64, in_flight: u64) -> LiveHost {
        LiveHost {
            host: host.to_string(),
            node: node.to_string(),
            queued,
            in_flight,
            robots: LiveRobots::Ready,
            ..LiveHost::default()
        }
    }

    fn hosts_of(listing: &HostListing) -> Vec<&str> {
        listing.items.iter().map(|h| h.host.as_str()).collect()
    }

    #[test]
    fn hosts_with_work_come_first_busiest_first_then_the_rest_by_name() {
        let backing_off = LiveHost {
            backoff_ms: 9_000,
            ..live("d", "w1", 0, 0)
        };
        let answers = vec![
            NodeHosts {
                node: "m".into(),
                busy: 1,
                running: 0,
                hosts: vec![live("c", "m", 1, 0)],
                index: None,
            },
            NodeHosts {
                node: "w1".into(),
                busy: 2,
                running: 0,
                hosts: vec![live("b", "w1", 3, 1), live("new", "w1", 1, 0), backing_off],
                index: None,
            },
        ];
        let all = listing(
            vec![
                stored("a", 5),
                stored("b", 2),
                stored("c", 0),
                stored("d", 1),
            ],
            answers,
            vec!["w2".into()],
            10,
        );
        assert_eq!(hosts_of(&all), ["b", "c", "new", "d", "a"]);
        assert_eq!((all.total, all.busy), (5, 3));
        assert_eq!(all.silent_nodes, ["w2"]);
        let b = &all.items[0];
        assert_eq!(b.pages, 2, "the store's facts stay");
        assert_eq!(
            b.live.as_ref().map(|l| (l.node.as_str(), l.work())),
            Some(("w1", 4))
        );
        assert_eq!(all.items[2].pages, 0, "a host only a pool knows yet");
        assert_eq!(
            all.items[3].live.as_ref().map(|l| l.backoff_ms),
            Some(9_000)
        );
        assert_eq!(all.items[4].live, None);
    }

    #[test]
    fn the_first_limit_rows_and_the_node_with_more_of_a_moving_host() {
        let leaving = LiveHost {
            moving: true,
            ..live("h", "m", 0, 1)
        };
        let answers = vec![
            NodeHosts {
                node: "m".into(),
                busy: 1,
                running: 0,
                hosts: vec![leaving],
                index: None,
            },
            NodeHosts {
                node: "w1".into(),
                busy: 1,
                running: 0,
                hosts: vec![live("h", "w1", 2, 0)],
                index: None,
            },
        ];
        let first = listing(vec![stored("a", 1), stored("h", 1)], answers, Vec::new(), 1);
        assert_eq!(hosts_of(&first), ["h"]);
        assert_eq!(first.total, 2);
        assert_eq!(
            first.items[0].live.as_ref().map(|l| l.node.as_str()),
            Some("w1")
        );
        let wire = serde_json::to_value(&first).unwrap();
        assert!(wire.get("silent_nodes").is_none(), "{wire}");
        assert_eq!(wire["items"][0]["live"]["robots"], "ready");
    }
}
