//! Cluster membership, as Erlang distribution: nodes connect over TCP with a
//! shared cookie (ractor_cluster's `NodeServer`); pools, the master and the
//! control actor join process groups that ractor_cluster keeps in sync
//! across connected nodes (see `protocol.rs` for the groups and the
//! wire form of what crosses nodes).

use crate::types::{Millis, now_ms};
use ractor::ActorRef;
use ractor_cluster::{NodeServer, NodeServerMessage, NodeSessionMessage};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Weighted rendezvous hashing: the pool (by node name, with its load) that
/// should fetch `host`. Every master computes the same choice for the same
/// live nodes; a loaded node wins fewer new hosts.
pub fn choose_node(host: &str, nodes: &[(String, usize)]) -> Option<usize> {
    nodes
        .iter()
        .enumerate()
        .map(|(i, (node, load))| (i, score(host, node) / (1.0 + *load as f64)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// The rendezvous score of `host` on `node`, unweighted: `1 / -ln(u)`, `u`
/// uniform in (0, 1) from the two names.
fn score(host: &str, node: &str) -> f64 {
    let h = fnv1a(host.as_bytes(), fnv1a(node.as_bytes(), 0xcbf29ce484222325));
    let u = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    1.0 / -u.ln()
}

/// A host the master has handed to a node's pool, with how many of its
/// URLs that pool holds (queued or running there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostHold {
    pub host: String,
    pub node: String,
    pub urls: usize,
}

/// A host to hand from one node's pool to another's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub host: String,
    pub from: String,
    pub to: String,
}

/// Which hosts move to nodes that just `joined`, so they take a share of
/// the work now rather than only of hosts not seen yet: hosts with work
/// (`held`) go, one at a time, from the live node holding the most to the
/// joined node holding the fewest, until they differ by one at most. Of a
/// node's hosts the one with the most URLs moves first (its queue is where
/// the new node gains), then the one rendezvous hashing ranks highest for
/// the receiver. Hosts of a node not `live` are left alone. Whether a host
/// may go now is its pool's call: it hands it over once nothing of it runs.
pub fn rebalance(held: &[HostHold], live: &[String], joined: &[String]) -> Vec<Move> {
    let mut by_node: BTreeMap<&str, Vec<&HostHold>> =
        live.iter().map(|n| (n.as_str(), Vec::new())).collect();
    for h in held.iter().filter(|h| h.urls > 0) {
        if let Some(hosts) = by_node.get_mut(h.node.as_str()) {
            hosts.push(h);
        }
    }
    let mut moves = Vec::new();
    for _ in 0..held.len() {
        let Some(to) = joined
            .iter()
            .filter(|n| by_node.contains_key(n.as_str()))
            .min_by_key(|n| (by_node[n.as_str()].len(), n.as_str()))
        else {
            break;
        };
        let Some((&from, hosts)) = by_node
            .iter()
            .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))
        else {
            break;
        };
        if hosts.len() <= by_node[to.as_str()].len() + 1 {
            break;
        }
        let (i, _) = hosts
            .iter()
            .enumerate()
            .max_by(|(_, a), (_, b)| {
                a.urls
                    .cmp(&b.urls)
                    .then(score(&a.host, to).total_cmp(&score(&b.host, to)))
            })
            .expect("the fullest node holds hosts");
        let host = by_node.get_mut(from).expect("a live node").swap_remove(i);
        moves.push(Move {
            host: host.host.clone(),
            from: from.to_string(),
            to: to.clone(),
        });
        by_node
            .get_mut(to.as_str())
            .expect("a live node")
            .push(host);
    }
    moves
}

fn fnv1a(bytes: &[u8], seed: u64) -> u64 {
    let mut h = seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    // Final avalanche (splitmix64) so near-identical names spread.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58476d1ce4e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d049bb133111eb);
    h ^ (h >> 31)
}

/// Errors of joining a cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    #[error("cannot listen on {addr}: {reason}")]
    Listen { addr: SocketAddr, reason: String },
    #[error("cannot reach node at {addr}: {reason}")]
    Unreachable { addr: String, reason: String },
    #[error("node at {addr} refused us: wrong cookie, or not a web_crawler node")]
    Refused { addr: String },
    #[error("no {0} in the cluster")]
    Missing(&'static str),
    #[error(
        "a node named {name} is already in the cluster at {addr}; give this one \
         another --name (or stop the other first)"
    )]
    NameTaken { name: String, addr: String },
    #[error(
        "the master at {addr} has been unreachable for {secs} s; this node stops \
         (start the master again, or give the node a longer --master-grace)"
    )]
    MasterLost { addr: String, secs: u64 },
}

/// What a worker node does about its master, checked every
/// [`WATCH_EVERY`]: pure, so it takes `now`.
#[derive(Debug)]
pub struct MasterWatch {
    /// How long to go on without a master; `None`: for ever.
    grace: Option<Duration>,
    lost_since: Option<Millis>,
    next_attempt: Millis,
    backoff: Duration,
}

/// The step after one check.
#[derive(Debug, PartialEq, Eq)]
pub enum WatchStep {
    /// The master is there, or a reconnection is not due yet.
    Wait,
    /// The master just went away: what it handed this node will be handed
    /// out again by its successor, so the queue is dropped.
    Lost,
    /// Connect to the master's address again.
    Reconnect,
    /// The master is back after this many milliseconds.
    Back(Millis),
    /// No master for longer than the grace, since this time.
    GiveUp(Millis),
}

/// How often a worker node checks for its master.
pub const WATCH_EVERY: Duration = Duration::from_millis(250);
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

impl MasterWatch {
    pub fn new(grace: Option<Duration>) -> Self {
        Self {
            grace,
            lost_since: None,
            next_attempt: 0,
            backoff: FIRST_BACKOFF,
        }
    }

    /// `reachable`: a master is in the cluster's master group; `connected`:
    /// this node still has a session to the address it joined (a master
    /// restarting inside its node needs no new connection).
    pub fn check(&mut self, reachable: bool, connected: bool, now: Millis) -> WatchStep {
        if reachable {
            self.backoff = FIRST_BACKOFF;
            return match self.lost_since.take() {
                Some(since) => WatchStep::Back(now.saturating_sub(since)),
                None => WatchStep::Wait,
            };
        }
        let Some(since) = self.lost_since else {
            self.lost_since = Some(now);
            self.next_attempt = now;
            return WatchStep::Lost;
        };
        if self
            .grace
            .is_some_and(|g| now.saturating_sub(since) >= g.as_millis() as Millis)
        {
            return WatchStep::GiveUp(since);
        }
        if connected || now < self.next_attempt {
            return WatchStep::Wait;
        }
        self.next_attempt = now + self.backoff.as_millis() as Millis;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        WatchStep::Reconnect
    }
}

/// Keep a worker node joined to the master at `addr`: when the master
/// goes away, call `lost` once, then connect again with backoff until a
/// master is back (a restarted one on the same address included). Returns
/// only when `grace` runs out without a master.
pub async fn stay_joined(
    node: &ActorRef<NodeServerMessage>,
    addr: &str,
    grace: Option<Duration>,
    lost: impl Fn(),
) -> ClusterError {
    let mut watch = MasterWatch::new(grace);
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let reachable = crate::protocol::master_reachable();
        let connected = !reachable && connected_to(node, addr).await;
        match watch.check(reachable, connected, now_ms()) {
            WatchStep::Wait => {}
            WatchStep::Lost => {
                tracing::warn!(%addr, "the master is unreachable; reconnecting");
                lost();
            }
            WatchStep::Reconnect => {
                if let Err(e) = join(node, addr, Duration::from_secs(5)).await {
                    tracing::debug!(%addr, error = %e, "the master is still unreachable");
                }
            }
            WatchStep::Back(after) => {
                tracing::warn!(%addr, after_ms = after, "the master is back; this node takes hosts again");
            }
            WatchStep::GiveUp(since) => {
                return ClusterError::MasterLost {
                    addr: addr.to_string(),
                    secs: now_ms().saturating_sub(since) as u64 / 1000,
                };
            }
        }
    }
}

/// Whether this node has an outgoing session to `addr`.
async fn connected_to(node: &ActorRef<NodeServerMessage>, addr: &str) -> bool {
    let Ok(sessions) = ractor::call_t!(node, NodeServerMessage::GetSessions, 1_000) else {
        return false;
    };
    sessions
        .values()
        .any(|s| !s.is_server && s.peer_addr == addr)
}

/// This process's node: a `NodeServer` listening on `listen` (port 0 for
/// any), recognising peers by `cookie`. A crawler node connects to the peers
/// of the nodes it joins (transitive); a console or script does not.
pub async fn start_node(
    name: &str,
    listen: SocketAddr,
    cookie: &str,
    transitive: bool,
) -> Result<ActorRef<NodeServerMessage>, ClusterError> {
    use ractor_cluster::node::NodeConnectionMode;
    let mode = if transitive {
        NodeConnectionMode::Transitive
    } else {
        NodeConnectionMode::Isolated
    };
    let server = NodeServer::new(
        listen.port(),
        cookie.to_string(),
        name.to_string(),
        listen.ip().to_string(),
        None,
        Some(mode),
    )
    .with_listen_addr(listen.ip())
    .with_max_inbound_frame_size(crate::protocol::MAX_FRAME_BYTES as u64);
    let (node, _) =
        ractor::Actor::spawn(None, server, ())
            .await
            .map_err(|e| ClusterError::Listen {
                addr: listen,
                reason: e.to_string(),
            })?;
    let _ = node.cast(NodeServerMessage::SubscribeToEvents {
        id: "web_crawler_session_log".to_string(),
        subscription: Box::new(SessionLog::default()),
    });
    Ok(node)
}

/// The node's log of its sessions, in place of the library's (a WARN for
/// every closed session, consoles and scripts included, with a debug dump
/// of the peer's name): a peer that left before authenticating was most
/// likely refused for its cookie (WARN); a node leaving is INFO; a console
/// or script coming and going is DEBUG.
#[derive(Default)]
struct SessionLog {
    authenticated: std::sync::Mutex<std::collections::HashSet<ractor_cluster::NodeId>>,
}

/// Consoles and scripts connect as `remote-…` (see `Remote::connect`).
fn is_client(name: &str) -> bool {
    name.starts_with("remote-")
}

impl ractor_cluster::NodeEventSubscription for SessionLog {
    fn node_session_opened(&self, _: ractor_cluster::node::NodeServerSessionInformation) {}

    fn node_session_authenticated(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        if let Ok(mut set) = self.authenticated.lock() {
            set.insert(ses.node_id);
        }
        let name = ses.peer_name.map(|n| n.name).unwrap_or_default();
        if is_client(&name) {
            tracing::debug!(peer = %ses.peer_addr, "a console or script connected");
        } else {
            tracing::info!(node = %name, peer = %ses.peer_addr, "node connected");
        }
    }

    fn node_session_disconnected(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        let was_authenticated = self
            .authenticated
            .lock()
            .is_ok_and(|mut set| set.remove(&ses.node_id));
        let name = ses.peer_name.map(|n| n.name).unwrap_or_default();
        if !was_authenticated {
            if ses.is_server {
                tracing::warn!(
                    peer = %ses.peer_addr,
                    "refused a peer that did not authenticate (a wrong cookie?)"
                );
            }
        } else if is_client(&name) {
            tracing::debug!(peer = %ses.peer_addr, "a console or script left");
        } else {
            tracing::info!(node = %name, peer = %ses.peer_addr, "node disconnected");
        }
    }
}

/// Connect to the node at `addr` and wait until the session is
/// authenticated and synchronised (process groups exchanged).
pub async fn join(
    node: &ActorRef<NodeServerMessage>,
    addr: &str,
    timeout: Duration,
) -> Result<(), ClusterError> {
    let before = ready_sessions(node).await;
    ractor_cluster::client_connect(node, addr.to_string())
        .await
        .map_err(|e| ClusterError::Unreachable {
            addr: addr.to_string(),
            reason: connect_reason(&e),
        })?;
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if ready_sessions(node).await > before {
            return Ok(());
        }
    }
    Err(ClusterError::Refused {
        addr: addr.to_string(),
    })
}

/// Why a connection failed, in words: the library's own text is its debug
/// form (`Socket(Os { code: 111, .. })`).
fn connect_reason(e: &ractor_cluster::ClientConnectErr) -> String {
    use ractor_cluster::ClientConnectErr as E;
    match e {
        E::Socket(io) => io.to_string(),
        E::Encryption(io) => format!("TLS: {io}"),
        E::Messaging(_) => "this node is stopping".to_string(),
    }
}

/// Sessions that finished authentication and the initial state exchange.
pub async fn ready_sessions(node: &ActorRef<NodeServerMessage>) -> usize {
    let Ok(sessions) = ractor::call_t!(node, NodeServerMessage::GetSessions, 1_000) else {
        return 0;
    };
    let mut ready = 0;
    for s in sessions.values() {
        if let Ok(true) = ractor::call_t!(s.actor, NodeSessionMessage::GetReadyState, 1_000) {
            ready += 1;
        }
    }
    ready
}

/// Names of the peers this node is connected to.
pub async fn peers(node: &ActorRef<NodeServerMessage>) -> Vec<String> {
    let Ok(sessions) = ractor::call_t!(node, NodeServerMessage::GetSessions, 1_000) else {
        return Vec::new();
    };
    let mut names: Vec<String> = sessions
        .values()
        .filter_map(|s| s.peer_name.as_ref().map(|n| n.name.clone()))
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(loads: &[usize]) -> Vec<(String, usize)> {
        loads
            .iter()
            .enumerate()
            .map(|(i, l)| (format!("node{i}"), *l))
            .collect()
    }

    #[test]
    fn the_choice_is_stable_and_spread() {
        let n = nodes(&[0, 0, 0]);
        let mut counts = [0; 3];
        for h in 0..3000 {
            let host = format!("127.0.{}.{}:80", h / 250, h % 250);
            let a = choose_node(&host, &n).unwrap();
            assert_eq!(Some(a), choose_node(&host, &n), "deterministic");
            counts[a] += 1;
        }
        for c in counts {
            assert!((800..1200).contains(&c), "spread evenly: {counts:?}");
        }
    }

    #[test]
    fn a_node_leaving_moves_only_its_hosts() {
        let three = nodes(&[0, 0, 0]);
        let two = three[..2].to_vec();
        for h in 0..1000 {
            let host = format!("h{h}");
            let before = choose_node(&host, &three).unwrap();
            let after = choose_node(&host, &two).unwrap();
            if before < 2 {
                assert_eq!(before, after, "{host} stays where it was");
            }
        }
    }

    #[test]
    fn a_lost_master_is_reconnected_with_backoff_then_given_up() {
        let mut w = MasterWatch::new(Some(Duration::from_secs(10)));
        assert_eq!(w.check(true, true, 0), WatchStep::Wait);
        assert_eq!(w.check(false, false, 1_000), WatchStep::Lost);
        assert_eq!(w.check(false, false, 1_000), WatchStep::Reconnect);
        assert_eq!(w.check(false, false, 1_100), WatchStep::Wait, "backing off");
        assert_eq!(w.check(false, false, 1_250), WatchStep::Reconnect);
        assert_eq!(w.check(false, false, 1_600), WatchStep::Wait, "500 ms now");
        assert_eq!(w.check(false, false, 1_750), WatchStep::Reconnect);
        assert_eq!(
            w.check(false, true, 5_000),
            WatchStep::Wait,
            "connected: its master is restarting"
        );
        assert_eq!(w.check(true, true, 6_000), WatchStep::Back(5_000));
        assert_eq!(w.check(false, false, 7_000), WatchStep::Lost, "lost again");
        assert_eq!(
            w.check(false, false, 7_000),
            WatchStep::Reconnect,
            "backoff reset"
        );
        assert_eq!(w.check(false, false, 17_000), WatchStep::GiveUp(7_000));
    }

    #[test]
    fn without_a_grace_a_node_waits_for_ever() {
        let mut w = MasterWatch::new(None);
        assert_eq!(w.check(false, false, 0), WatchStep::Lost);
        let mut reconnects = 0;
        for t in (0..3_600_000).step_by(250) {
            match w.check(false, false, t) {
                WatchStep::Reconnect => reconnects += 1,
                WatchStep::Wait => {}
                other => panic!("{other:?} at {t}"),
            }
        }
        // Every 5 s at most, once the backoff has grown.
        assert!((700..730).contains(&reconnects), "{reconnects}");
    }

    #[test]
    fn a_refused_connection_reads_as_words() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let reason = connect_reason(&ractor_cluster::ClientConnectErr::Socket(refused));
        assert_eq!(reason, "connection refused");
    }

    fn hold(host: &str, node: &str, urls: usize) -> HostHold {
        HostHold {
            host: host.into(),
            node: node.into(),
            urls,
        }
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_joined_node_takes_its_share_of_the_busy_hosts() {
        let held: Vec<HostHold> = (0..4)
            .map(|i| hold(&format!("h{i}"), "m", 10 + i))
            .chain([hold("done", "m", 0)])
            .collect();
        let moves = rebalance(&held, &names(&["m", "w1"]), &names(&["w1"]));
        let hosts: Vec<&str> = moves.iter().map(|m| m.host.as_str()).collect();
        assert_eq!(hosts, ["h3", "h2"], "the fullest hosts, half of them");
        assert!(moves.iter().all(|m| m.from == "m" && m.to == "w1"));
        // A third node joining takes from both, the fuller first.
        let after: Vec<HostHold> = held
            .iter()
            .map(|h| {
                let moved = hosts.contains(&h.host.as_str());
                hold(&h.host, if moved { "w1" } else { "m" }, h.urls)
            })
            .chain([hold("x", "m", 1), hold("y", "w1", 1)])
            .collect();
        let moves = rebalance(&after, &names(&["m", "w1", "w2"]), &names(&["w2"]));
        assert_eq!(moves.len(), 2, "{moves:?}");
        let from: Vec<&str> = moves.iter().map(|m| m.from.as_str()).collect();
        assert_eq!(from, ["m", "w1"], "{moves:?}");
    }

    #[test]
    fn nothing_moves_when_nothing_would_even_out() {
        let live = names(&["m", "w1"]);
        let joined = names(&["w1"]);
        assert!(rebalance(&[hold("h", "m", 50)], &live, &joined).is_empty());
        assert!(rebalance(&[], &live, &joined).is_empty());
        let two = [hold("a", "m", 5), hold("b", "w1", 5)];
        assert!(rebalance(&two, &live, &joined).is_empty(), "even already");
        let gone = [hold("a", "dead", 5), hold("b", "dead", 5)];
        assert!(rebalance(&gone, &live, &joined).is_empty(), "not live");
        assert!(rebalance(&two, &live, &[]).is_empty(), "nobody joined");
    }

    #[test]
    fn a_move_is_deterministic_and_spreads_over_joined_nodes() {
        let held: Vec<HostHold> = (0..9).map(|i| hold(&format!("h{i}"), "m", 3)).collect();
        let live = names(&["m", "w1", "w2"]);
        let joined = names(&["w1", "w2"]);
        let moves = rebalance(&held, &live, &joined);
        assert_eq!(moves, rebalance(&held, &live, &joined));
        let to = |n: &str| moves.iter().filter(|m| m.to == n).count();
        assert_eq!((to("w1"), to("w2")), (3, 3), "{moves:?}");
    }

    #[test]
    fn a_loaded_node_wins_fewer_hosts() {
        let n = nodes(&[0, 30]);
        let busy = (0..2000)
            .filter(|h| choose_node(&format!("h{h}"), &n) == Some(1))
            .count();
        assert!(busy < 300, "{busy} of 2000 to the loaded node");
        assert_eq!(choose_node("x", &[]), None);
    }
}
