//! The master's look at the cluster on each tick: pools that left or
//! joined, the hosts that move to a joined node (asked of their old pool in
//! one `Release` each), moves whose old pool never handed the host back,
//! and nodes that left for good ([`crate::departures`]), whose pages the
//! store cycle then hands over. Pure over the [`Window`] at `now`; the master sends what it says
//! (through [`NodeCheck::send`], which takes the sending as a function).

use crate::protocol::{MASTER_LOG, PoolMsg};
use crate::types::{Job, Millis};
use crate::window::{MOVE_DEADLINE_MS, Window};
use std::collections::BTreeMap;

/// What a tick found among the nodes, and what to send for it.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct NodeCheck {
    /// Hosts each old node is asked to let go of (`PoolMsg::Release`);
    /// a pool that cannot be asked keeps them ([`Window::move_failed`]).
    pub(crate) release: BTreeMap<String, Vec<String>>,
    /// URLs parked for a move that was abandoned, for the node the host
    /// stays on (`PoolMsg::Dispatch`).
    pub(crate) dispatch: Vec<(String, Vec<Job>)>,
}

impl NodeCheck {
    /// Send what the check says with `send` (to a node's pool; false when
    /// it cannot be reached): a host whose old pool cannot be asked to let
    /// go of it stays there.
    pub(crate) fn send(self, window: &mut Window, mut send: impl FnMut(&str, PoolMsg) -> bool) {
        for (from, hosts) in self.release {
            if !send(&from, PoolMsg::Release(hosts.clone())) {
                for host in &hosts {
                    window.move_failed(host);
                }
            }
        }
        for (node, parked) in self.dispatch {
            send(&node, PoolMsg::Dispatch(parked));
        }
    }
}

/// The tick's node check at `now`, with the `live` pools as (node, pool
/// id): nothing while a restarted master waits for its pools' answers (its
/// recovery ends once due).
pub(crate) fn check_nodes(
    window: &mut Window,
    live: &[(String, String)],
    now: Millis,
) -> NodeCheck {
    let mut check = NodeCheck::default();
    window.end_recovery_if_due(now);
    if window.recovering() {
        return check;
    }
    for (node, released) in window.pools_replaced(live) {
        tracing::warn!(target: MASTER_LOG, "node {node} restarted; its {released} URLs go back to pending");
    }
    let names: Vec<String> = live.iter().map(|(node, _)| node.clone()).collect();
    let (gone, joined) = window.nodes_changed(&names);
    let gone_nodes: Vec<String> = gone.iter().map(|(node, _)| node.clone()).collect();
    for (node, released) in gone {
        tracing::warn!(target: MASTER_LOG, "node {node} left the cluster; its {released} URLs go back to pending");
    }
    window.departures.nodes_changed(&gone_nodes, &joined, now);
    let grace = window.departed_after();
    for node in window.departures.left_for_good(now, grace) {
        tracing::warn!(
            target: MASTER_LOG,
            "node {node} left the cluster for good; the pages it fetched are fetched again by their hosts' new owners"
        );
    }
    let moves = if joined.is_empty() {
        Vec::new()
    } else {
        window.rebalance(&joined, now)
    };
    for node in &joined {
        let n = moves.iter().filter(|m| m.to == *node).count();
        tracing::info!(target: MASTER_LOG, "node {node} joined the cluster; {n} hosts move to it");
    }
    for m in moves {
        check.release.entry(m.from).or_default().push(m.host);
    }
    // The host stays on its old node, and so do the URLs parked for it.
    for m in window.abandon_late_moves(now) {
        tracing::info!(
            target: MASTER_LOG,
            host = %m.host,
            from = %m.from,
            to = %m.to,
            parked = m.parked.len(),
            "host move abandoned: the old node did not hand it back within {} s; it stays there",
            MOVE_DEADLINE_MS / 1_000
        );
        if !m.parked.is_empty() {
            check.dispatch.push((m.from, m.parked));
        }
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CrawlConfig;

    const T0: Millis = 1_000_000;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// Live pools, each the first its node started.
    fn nodes(names: &[&str]) -> Vec<(String, String)> {
        names.iter().map(|n| (n.to_string(), "1".into())).collect()
    }

    fn job(host: &str, path: &str) -> Job {
        Job::fixture(host, path, 1)
    }

    /// A window past recovery on node "a", holding two URLs of each of
    /// hosts h0..h3.
    fn busy_on_a() -> Window {
        let cfg = CrawlConfig {
            node_name: "a".into(),
            claim_window: 16,
            per_host_window: 4,
            ..CrawlConfig::default()
        };
        let mut w = Window::new(cfg, 0, 0, T0);
        w.begin_recovery(&names(&["a"]), T0);
        w.adopt("a", Vec::new());
        assert_eq!(
            check_nodes(&mut w, &nodes(&["a"]), T0),
            NodeCheck::default()
        );
        let work = w.start_cycle(false, true, false, T0).unwrap();
        assert!(work.claim.is_some());
        let jobs = (0..8).map(|i| job(&format!("h{}", i / 2), &format!("/{i}")));
        w.cycle_done(jobs.collect(), None, &names(&["a"]), T0);
        w
    }

    #[test]
    fn nothing_is_checked_while_a_restarted_master_recovers() {
        let mut w = Window::new(CrawlConfig::default(), 0, 0, T0);
        w.begin_recovery(&names(&["a"]), T0);
        assert_eq!(
            check_nodes(&mut w, &nodes(&["a", "b"]), T0),
            NodeCheck::default()
        );
        assert!(w.recovering());
    }

    #[test]
    fn a_joined_node_takes_hosts_each_old_pool_is_asked_for_at_once() {
        let mut w = busy_on_a();
        let check = check_nodes(&mut w, &nodes(&["a", "b"]), T0);
        assert_eq!(check.release.len(), 1, "{check:?}");
        assert_eq!(check.release["a"].len(), 2, "half the busy hosts");
        assert!(check.dispatch.is_empty());
        // Seen once: the next tick asks nothing more.
        assert_eq!(
            check_nodes(&mut w, &nodes(&["a", "b"]), T0),
            NodeCheck::default()
        );
    }

    #[test]
    fn a_late_move_leaves_its_parked_urls_on_the_old_node() {
        let mut w = busy_on_a();
        let check = check_nodes(&mut w, &nodes(&["a", "b"]), T0);
        let host = check.release["a"][0].clone();
        // Claimed while the host moves: parked.
        w.start_cycle(false, true, false, T0).unwrap();
        let parked = job(&host, "/parked");
        w.cycle_done(vec![parked.clone()], None, &names(&["a", "b"]), T0);
        let late = check_nodes(&mut w, &nodes(&["a", "b"]), T0 + MOVE_DEADLINE_MS);
        assert_eq!(late.dispatch, [("a".to_string(), vec![parked])]);
        assert!(late.release.is_empty());
    }

    #[test]
    fn a_host_whose_old_pool_cannot_be_asked_stays_there() {
        let mut w = busy_on_a();
        let check = check_nodes(&mut w, &nodes(&["a", "b"]), T0);
        let host = check.release["a"][0].clone();
        let mut sent = Vec::new();
        check.send(&mut w, |node, msg| {
            sent.push((node.to_string(), format!("{msg:?}")));
            false
        });
        assert_eq!(sent.len(), 1, "one Release for a: {sent:?}");
        assert!(sent[0].1.starts_with("Release"), "{sent:?}");
        // The move was given up: a late hand-back goes back to a.
        let (to, _) = w.released("a", &host, Vec::new()).unwrap();
        assert_eq!(to, "a");
    }

    #[test]
    fn a_host_whose_old_pool_was_asked_moves() {
        let mut w = busy_on_a();
        let check = check_nodes(&mut w, &nodes(&["a", "b"]), T0);
        let host = check.release["a"][0].clone();
        check.send(&mut w, |_, _| true);
        let (to, _) = w.released("a", &host, Vec::new()).unwrap();
        assert_eq!(to, "b");
    }

    #[test]
    fn a_stopped_node_that_leaves_hands_its_pages_over_in_the_next_cycle() {
        let mut w = busy_on_a();
        check_nodes(&mut w, &nodes(&["a", "b"]), T0);
        w.departures.stopping("b");
        check_nodes(&mut w, &nodes(&["a"]), T0 + 1);
        assert_eq!(w.departures.handing_over(), ["b"]);
        let work = w.start_cycle(false, false, false, T0 + 1).unwrap();
        let step = work.hand_over.expect("a hand-over step");
        assert_eq!((step.node.as_str(), step.after), ("b", None));
    }

    #[test]
    fn a_node_gone_past_the_grace_hands_its_pages_over() {
        let mut w = busy_on_a();
        check_nodes(&mut w, &nodes(&["a", "b"]), T0);
        check_nodes(&mut w, &nodes(&["a"]), T0);
        let grace = w.departed_after();
        check_nodes(&mut w, &nodes(&["a"]), T0 + grace - 1);
        assert!(w.departures.handing_over().is_empty(), "within the grace");
        check_nodes(&mut w, &nodes(&["a"]), T0 + grace);
        assert_eq!(w.departures.handing_over(), ["b"]);
    }

    #[test]
    fn a_node_that_left_frees_its_urls() {
        let mut w = busy_on_a();
        assert_eq!(w.in_flight(), 8);
        check_nodes(&mut w, &nodes(&["b"]), T0);
        assert_eq!(w.in_flight(), 0);
    }

    /// A node's process killed and started again between two ticks, under
    /// the same name: its pool is another actor, and what the old one held
    /// goes back to pending (before, it stayed leased for good).
    #[test]
    fn a_node_restarted_between_two_looks_frees_what_its_old_pool_held() {
        let mut w = busy_on_a();
        assert_eq!(w.in_flight(), 8);
        check_nodes(&mut w, &nodes(&["a"]), T0 + 1);
        assert_eq!(w.in_flight(), 8, "the same pool keeps its URLs");
        let restarted = vec![("a".to_string(), "2".to_string())];
        check_nodes(&mut w, &restarted, T0 + 2);
        assert_eq!(w.in_flight(), 0);
        let work = w.start_cycle(false, false, false, T0 + 2).unwrap();
        assert_eq!(work.release.len(), 8, "all eight back to pending");
        check_nodes(&mut w, &restarted, T0 + 3);
        assert_eq!(w.in_flight(), 0);
    }

    /// A pool its supervisor restarted says so (`PoolRestarted`): its URLs
    /// are released then, and its new id at the next look is not a second
    /// restart (which would release what the new pool was given meanwhile).
    #[test]
    fn a_pool_restarted_by_its_supervisor_is_released_once() {
        let mut w = busy_on_a();
        assert_eq!(w.pool_restarted("a"), 8);
        let work = w.start_cycle(false, true, false, T0 + 1).unwrap();
        assert_eq!(work.release.len(), 8);
        let jobs = vec![job("h9", "/")];
        w.cycle_done(jobs, None, &names(&["a"]), T0 + 1);
        assert_eq!(w.in_flight(), 1);
        check_nodes(&mut w, &[("a".to_string(), "2".to_string())], T0 + 2);
        assert_eq!(w.in_flight(), 1, "the new pool keeps what it was given");
    }
}
