//! `--metrics ADDR`: the node's counters and gauges in the Prometheus text
//! format (OpenMetrics), served over HTTP at `/metrics`. The tree counts
//! through the `Metrics` behaviour; the queue and node gauges are the
//! master's `Status`, read once a second.

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use web_crawler::actors::traps::TrapRule;
use web_crawler::actors::{ChildRole, Metrics, Status};
use web_crawler::{AppHandle, Settings};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabel {
    node: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    node: String,
    /// The HTTP status, or `none` when no answer came.
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChildLabels {
    node: String,
    child: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuleLabel {
    rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: String,
}

/// One node's metrics: what its actors count, and the master's status.
#[derive(Debug)]
pub(crate) struct NodeMetrics {
    node: NodeLabel,
    registry: Registry,
    fetched: Family<StatusLabels, Counter>,
    errors: Family<NodeLabel, Counter>,
    queued: Family<NodeLabel, Gauge>,
    running: Family<NodeLabel, Gauge>,
    restarts: Family<ChildLabels, Counter>,
    frontier: Family<StateLabel, Gauge>,
    trapped: Family<RuleLabel, Gauge>,
    in_flight: Gauge,
    node_load: Family<NodeLabel, Gauge>,
    node_hosts: Family<NodeLabel, Gauge>,
    store_unreachable: Gauge,
}

impl NodeMetrics {
    pub(crate) fn new(node: &str) -> Arc<Self> {
        let mut m = NodeMetrics {
            node: NodeLabel {
                node: node.to_string(),
            },
            fetched: Family::default(),
            errors: Family::default(),
            queued: Family::default(),
            running: Family::default(),
            restarts: Family::default(),
            frontier: Family::default(),
            trapped: Family::default(),
            in_flight: Gauge::default(),
            node_load: Family::default(),
            node_hosts: Family::default(),
            store_unreachable: Gauge::default(),
            registry: Registry::with_prefix("web_crawler"),
        };
        m.registry.register(
            "pages_fetched",
            "URLs this node fetched, by the HTTP status of the answer (none: no answer)",
            m.fetched.clone(),
        );
        m.registry.register(
            "fetch_errors",
            "Failed attempts on this node: no answer, a retryable status, a crashed slave",
            m.errors.clone(),
        );
        m.registry.register(
            "pool_queued",
            "URLs queued at this node's pool, not started",
            m.queued.clone(),
        );
        m.registry.register(
            "pool_running",
            "Slaves running at this node's pool",
            m.running.clone(),
        );
        m.registry.register(
            "restarts",
            "Children this node's supervisor restarted",
            m.restarts.clone(),
        );
        m.registry.register(
            "frontier_urls",
            "URLs in the store by state (the master's node; refreshed each second)",
            m.frontier.clone(),
        );
        m.registry.register(
            "trapped_urls",
            "URLs the trap defence left out, by the rule that refused them (the master's node)",
            m.trapped.clone(),
        );
        m.registry.register(
            "in_flight",
            "URLs claimed and not yet written back (the master's node)",
            m.in_flight.clone(),
        );
        m.registry.register(
            "node_load",
            "URLs the master handed each live node and not yet written back",
            m.node_load.clone(),
        );
        m.registry.register(
            "node_hosts",
            "Hosts the master assigned to each live node",
            m.node_hosts.clone(),
        );
        m.registry.register(
            "store_unreachable",
            "1 while the master waits for an unreachable store",
            m.store_unreachable.clone(),
        );
        // Known series from the start, at 0: an alert on them sees a
        // number, not "no data", until the first error. A restart count
        // appears as the supervisor starts each child of this node.
        let _ = m.errors.get_or_create(&m.node);
        let _ = m.queued.get_or_create(&m.node);
        let _ = m.running.get_or_create(&m.node);
        Arc::new(m)
    }

    /// The gauges the master's status holds.
    fn observe(&self, s: &Status) {
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        for (state, n) in [
            ("pending", s.store.pending),
            ("processing", s.store.processing),
            ("processed", s.store.processed),
            ("failed", s.store.failed),
            ("trapped", s.store.trapped),
        ] {
            let label = StateLabel {
                state: state.to_string(),
            };
            self.frontier.get_or_create(&label).set(gauge(n));
        }
        // Every rule, at 0 until it refuses something.
        for rule in TrapRule::ALL {
            let label = RuleLabel {
                rule: rule.code().to_string(),
            };
            let n = s.store.trapped_by_rule.get(&rule).copied().unwrap_or(0);
            self.trapped.get_or_create(&label).set(gauge(n));
        }
        self.in_flight.set(gauge(s.in_flight));
        self.store_unreachable
            .set(i64::from(s.store_unreachable_since.is_some()));
        // Nodes that left must not linger.
        self.node_load.clear();
        self.node_hosts.clear();
        for n in &s.nodes {
            let label = NodeLabel {
                node: n.node.clone(),
            };
            self.node_load.get_or_create(&label).set(gauge(n.load));
            self.node_hosts.get_or_create(&label).set(gauge(n.hosts));
        }
    }

    /// Read the master's status into the gauges once a second; never returns.
    pub(crate) async fn track(&self, app: &AppHandle) {
        loop {
            if let Ok(status) = app.status().await {
                self.observe(&status);
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// The labels of this node's `child`.
    fn child(&self, child: ChildRole) -> ChildLabels {
        ChildLabels {
            node: self.node.node.clone(),
            child: format!("{child:?}").to_lowercase(),
        }
    }

    fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

impl Metrics for NodeMetrics {
    fn url_done(&self, status: Option<u16>, failed: bool) {
        if let Some(code) = status {
            let labels = StatusLabels {
                node: self.node.node.clone(),
                status: code.to_string(),
            };
            self.fetched.get_or_create(&labels).inc();
        }
        if failed {
            self.errors.get_or_create(&self.node).inc();
        }
    }

    fn pool_load(&self, queued: usize, running: usize) {
        let gauge = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        self.queued.get_or_create(&self.node).set(gauge(queued));
        self.running.get_or_create(&self.node).set(gauge(running));
    }

    fn started(&self, child: ChildRole) {
        let _ = self.restarts.get_or_create(&self.child(child));
    }

    fn restarted(&self, child: ChildRole) {
        self.restarts.get_or_create(&self.child(child)).inc();
    }
}

/// Serve `--metrics` at `addr` for the node `name`, counted by its tree.
pub(crate) async fn serve_for_node(
    addr: SocketAddr,
    name: &str,
    settings: &mut Settings,
) -> Result<Arc<NodeMetrics>> {
    let metrics = NodeMetrics::new(name);
    let bound = serve(addr, metrics.clone()).await?;
    eprintln!("metrics at http://{bound}/metrics");
    settings.metrics = metrics.clone();
    Ok(metrics)
}

/// Serve `GET /metrics` on `addr` until the process ends; returns the
/// address bound (port 0 picks one).
pub(crate) async fn serve(addr: SocketAddr, metrics: Arc<NodeMetrics>) -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen for --metrics on {addr}"))?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<_>| {
                    let metrics = metrics.clone();
                    async move { Ok::<_, std::convert::Infallible>(answer(&req, &metrics)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

fn answer<B>(req: &Request<B>, metrics: &NodeMetrics) -> Response<Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        let mut r = Response::new(Full::new(Bytes::from_static(b"metrics are at /metrics\n")));
        *r.status_mut() = StatusCode::NOT_FOUND;
        return r;
    }
    let mut r = Response::new(Full::new(Bytes::from(metrics.render())));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_render_in_the_text_format() {
        let m = NodeMetrics::new("n1");
        m.url_done(Some(200), false);
        m.url_done(Some(200), false);
        m.url_done(Some(503), true);
        m.url_done(None, true);
        m.pool_load(7, 2);
        m.restarted(ChildRole::Master);
        let text = m.render();
        for line in [
            r#"web_crawler_pages_fetched_total{node="n1",status="200"} 2"#,
            r#"web_crawler_pages_fetched_total{node="n1",status="503"} 1"#,
            r#"web_crawler_fetch_errors_total{node="n1"} 2"#,
            r#"web_crawler_pool_queued{node="n1"} 7"#,
            r#"web_crawler_pool_running{node="n1"} 2"#,
            r#"web_crawler_restarts_total{node="n1",child="master"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn the_trapped_urls_are_counted_by_rule() {
        let m = NodeMetrics::new("n1");
        let mut s = Status::default();
        s.store.trapped = 7;
        s.store.trapped_by_rule = [(TrapRule::Stale, 5), (TrapRule::Soft404, 2)].into();
        m.observe(&s);
        let text = m.render();
        for line in [
            r#"web_crawler_frontier_urls{state="trapped"} 7"#,
            r#"web_crawler_trapped_urls{rule="stale"} 5"#,
            r#"web_crawler_trapped_urls{rule="soft_404"} 2"#,
            r#"web_crawler_trapped_urls{rule="barren"} 0"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} in
{text}"
            );
        }
    }

    #[test]
    fn known_series_are_at_zero_before_anything_happens() {
        let m = NodeMetrics::new("n1");
        m.started(ChildRole::Master);
        m.started(ChildRole::Pool);
        let text = m.render();
        for line in [
            r#"web_crawler_fetch_errors_total{node="n1"} 0"#,
            r#"web_crawler_pool_queued{node="n1"} 0"#,
            r#"web_crawler_pool_running{node="n1"} 0"#,
            r#"web_crawler_restarts_total{node="n1",child="master"} 0"#,
            r#"web_crawler_restarts_total{node="n1",child="pool"} 0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(
            !text.contains(r#"child="indexer""#),
            "not a child here: {text}"
        );
        // Started again after a restart: the count stays.
        m.restarted(ChildRole::Master);
        m.started(ChildRole::Master);
        assert!(
            m.render()
                .contains(r#"web_crawler_restarts_total{node="n1",child="master"} 1"#)
        );
    }
}
