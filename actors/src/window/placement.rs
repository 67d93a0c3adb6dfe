//! Which node fetches each host: a host sticks to its node while the node
//! lives, a new one goes where rendezvous hashing puts it; nodes that leave
//! or whose pool restarts give their URLs back, and hosts move to a node
//! that joins once their old pool hands them back (or the move's deadline
//! passes).

use super::Window;
use super::claims::decrement;
use crate::cluster::{HostHold, Move, choose_node, rebalance};
use crate::protocol::NodeInfo;
use crate::types::{Job, Millis, UrlKey};
use std::collections::{BTreeMap, BTreeSet, HashMap};

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
pub(super) struct Moving {
    pub(super) from: String,
    pub(super) to: String,
    pub(super) parked: Vec<Job>,
    /// When the move is abandoned if `from` has not handed the host back.
    pub(super) deadline: Millis,
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

/// Which node fetches each host, and the live nodes' pools.
#[derive(Debug, Default)]
pub(super) struct Placement {
    /// Which node fetches each host (sticky while the node lives, unless
    /// it moves to a node that joined).
    pub(super) host_owner: HashMap<String, String>,
    pub(super) moving: HashMap<String, Moving>,
    /// Nodes whose pools were live at the last look.
    pub(super) live_nodes: BTreeSet<String>,
    /// Each live node's pool as last seen (its actor id): a node whose
    /// process was restarted between two looks has a new one.
    pub(super) pool_ids: HashMap<String, String>,
}

impl Window {
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

    /// Hand claimed jobs to pools: a host keeps its node while the node
    /// lives; a new host goes to the node rendezvous hashing picks, weighted
    /// by load.
    pub(super) fn place(&mut self, jobs: Vec<Job>, live: &[String]) -> Vec<(String, Vec<Job>)> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::fixtures::*;

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
}
