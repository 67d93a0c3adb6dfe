//! Cluster membership, as Erlang distribution: nodes connect over TCP with a
//! shared cookie (ractor_cluster's `NodeServer`); pools, the master and the
//! control actor join process groups that ractor_cluster keeps in sync
//! across connected nodes (see `protocol.rs` for the groups and the
//! wire form of what crosses nodes).

use ractor::ActorRef;
use ractor_cluster::{NodeServer, NodeServerMessage, NodeSessionMessage};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Weighted rendezvous hashing: the pool (by node name, with its load) that
/// should fetch `host`. Every master computes the same choice for the same
/// live nodes; a loaded node wins fewer new hosts.
pub fn choose_node(host: &str, nodes: &[(String, usize)]) -> Option<usize> {
    nodes
        .iter()
        .enumerate()
        .map(|(i, (node, load))| {
            let h = fnv1a(host.as_bytes(), fnv1a(node.as_bytes(), 0xcbf29ce484222325));
            // Uniform in (0, 1); score = w / -ln(u) (weighted rendezvous).
            let u = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            let weight = 1.0 / (1.0 + *load as f64);
            (i, weight / -u.ln())
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
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
    .with_listen_addr(listen.ip());
    let (node, _) =
        ractor::Actor::spawn(None, server, ())
            .await
            .map_err(|e| ClusterError::Listen {
                addr: listen,
                reason: e.to_string(),
            })?;
    Ok(node)
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
    fn a_refused_connection_reads_as_words() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let reason = connect_reason(&ractor_cluster::ClientConnectErr::Socket(refused));
        assert_eq!(reason, "connection refused");
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
