//! `start` and `node`: a node of a cluster (like `erl -sname NAME` and
//! the application), the master's or a worker, until it is stopped.

use super::opts::{StoreOpts, SupervisionOpts, TrapAllowOpts, TuningOpts, check_seeds, queue_seed};
use super::parse::{http_addr, parse_duration, user_url};
use super::prometheus;
use super::remote::read_cookie;
use super::signals::StopSignals;
use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use web_crawler::actors::availability::check_every;
use web_crawler::actors::cluster;
use web_crawler::actors::{ControlClient, OperationSpec, RestartIntensity};
use web_crawler::http::{HttpConfig, HttpServer};
use web_crawler::notify::Notify;
use web_crawler::{Settings, start, start_worker};

/// How long an HTTP request waits for the control actor: a batch of
/// URLs waits for the master to write it (up to a minute).
const HTTP_CONTROL_WAIT: Duration = Duration::from_secs(90);

/// `start`.
#[derive(Debug, Args)]
pub(super) struct StartArgs {
    #[command(flatten)]
    node: NodeOpts,
    /// Seed URLs to queue at start.
    urls: Vec<String>,
    #[command(flatten)]
    store: StoreOpts,
    #[command(flatten)]
    tuning: TuningOpts,
    #[command(flatten)]
    trap_allow: TrapAllowOpts,
    /// How long the node waits for a store that became unreachable
    /// (a database restart, an election) before it stops, with exit code 75.
    #[arg(long, value_name = "DURATION", default_value = "10min", value_parser = parse_duration)]
    pub(super) store_outage_limit: Duration,
    #[command(flatten)]
    supervision: SupervisionOpts,
    #[command(flatten)]
    availability: AvailabilityOpts,
}

impl StartArgs {
    pub(super) async fn exec(self) -> Result<ExitCode> {
        let master = Some(MasterOpts {
            store: &self.store,
            seeds: self.urls,
            store_outage_limit: self.store_outage_limit,
            intensity: self.supervision.intensity(),
            availability: &self.availability,
            trap_allow: &self.trap_allow,
        });
        serve_node(&self.node, master, &self.tuning, None).await
    }
}

/// `node`.
#[derive(Debug, Args)]
pub(super) struct NodeArgs {
    #[command(flatten)]
    node: NodeOpts,
    /// The master's node to join (HOST:PORT).
    #[arg(long, value_name = "HOST:PORT")]
    join: String,
    /// When the master goes away, keep reconnecting (with backoff) for
    /// this many seconds, then exit with an error; 0: for ever.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    master_grace: u64,
    /// This node's shard of the full-text index: the pages it fetches
    /// (default: `NAME.index` in the working directory; the pages waiting
    /// for it are in `DIR.queue` beside it). A query on any node asks every
    /// shard.
    #[arg(long, value_name = "DIR")]
    index: Option<PathBuf>,
    #[command(flatten)]
    tuning: TuningOpts,
}

impl NodeArgs {
    pub(super) async fn exec(self) -> Result<ExitCode> {
        let grace = (self.master_grace > 0).then(|| Duration::from_secs(self.master_grace));
        let index = self
            .index
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("{}.index", self.node.name)));
        let worker = WorkerOpts {
            join: &self.join,
            grace,
            index,
        };
        serve_node(&self.node, None, &self.tuning, Some(worker)).await
    }
}

/// What a worker's node (`node`) is given.
struct WorkerOpts<'a> {
    join: &'a str,
    grace: Option<Duration>,
    index: PathBuf,
}

/// This node in a cluster.
#[derive(Debug, Args)]
struct NodeOpts {
    /// The node's name, unique in the cluster.
    #[arg(long)]
    name: String,
    /// Address to listen on for other nodes, consoles and scripts.
    #[arg(long, value_name = "HOST:PORT")]
    listen: std::net::SocketAddr,
    /// File holding the cluster's shared secret (like .erlang.cookie).
    #[arg(long)]
    cookie_file: PathBuf,
    /// Serve Prometheus metrics at http://HOST:PORT/metrics.
    #[arg(long, value_name = "HOST:PORT")]
    metrics: Option<std::net::SocketAddr>,
    #[command(flatten)]
    http: HttpOpts,
}

/// The node's HTTP JSON API and web page.
#[derive(Debug, Args)]
struct HttpOpts {
    /// Serve the HTTP JSON API and the web page at http://HOST:PORT/
    /// (`--http` alone: 127.0.0.1:8080; a bare PORT: on loopback). On a
    /// worker node it answers for the whole cluster, as the master's does.
    #[arg(
        long,
        value_name = "HOST:PORT",
        num_args = 0..=1,
        default_missing_value = "127.0.0.1:8080",
        value_parser = http_addr
    )]
    http: Option<std::net::SocketAddr>,
    /// File holding the bearer token the API's writes need (POST, PUT:
    /// adding URLs, pausing, settings). Without it, the API only reads.
    #[arg(long, value_name = "FILE", requires = "http")]
    http_token_file: Option<PathBuf>,
    /// Let pages from this origin (scheme://host[:port]) call the API from
    /// a browser (CORS); repeat for more. None by default.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    http_cors: Vec<String>,
}

impl HttpOpts {
    /// Serve the API if asked, each request to `control`.
    async fn serve(&self, control: ControlClient) -> Result<Option<HttpServer>> {
        let Some(addr) = self.http else {
            return Ok(None);
        };
        let token = match &self.http_token_file {
            Some(path) => Some(read_token(path)?),
            None => None,
        };
        let writes = token.is_some();
        let config = HttpConfig::new(token).cors_origins(self.http_cors.clone());
        let server = web_crawler::http::serve(addr, &config, control).await?;
        let bound = server.local_addr();
        eprintln!("HTTP API and web page at http://{bound}/");
        if !writes {
            eprintln!("the HTTP API only reads: give --http-token-file to add URLs over it");
        } else if !bound.ip().is_loopback() {
            eprintln!(
                "the HTTP API listens beyond loopback, on {bound}: its writes need the token"
            );
        }
        Ok(Some(server))
    }
}

/// The bearer token from `--http-token-file`: trimmed, never printed.
fn read_token(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --http-token-file {}", path.display()))?;
    let token = text.trim().to_string();
    if token.is_empty() {
        anyhow::bail!("--http-token-file {} is empty", path.display());
    }
    Ok(token)
}

/// `start`'s availability watching.
#[derive(Debug, Args)]
struct AvailabilityOpts {
    /// Watch every processed URL: fetch it again about this often
    /// (conditionally; adapted to how often it changes, within half and
    /// four times this), e.g. `30s`, `10min`, `1h` (1s at the least). A
    /// URL added with `add-url --every` keeps its own interval.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    recrawl_every: Option<Duration>,
    /// fetch_history entries kept per URL (the newest).
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    history_keep: usize,
    /// Run this program when a watched URL goes down, comes back or
    /// changes, with WEB_CRAWLER_EVENT, _URL, _STATUS, _PREVIOUS_STATUS,
    /// _REASON and _AT in its environment (no shell, no arguments).
    #[arg(long, value_name = "PROGRAM")]
    on_change: Option<String>,
    /// POST each change as JSON to this URL.
    #[arg(long, value_name = "URL", value_parser = user_url)]
    webhook: Option<url::Url>,
}

impl AvailabilityOpts {
    fn apply(&self, settings: &mut Settings) -> Result<()> {
        if let Some(every) = self.recrawl_every {
            check_every(every).map_err(|e| anyhow::anyhow!("--recrawl-every: {e}"))?;
        }
        // A service: URLs added with an interval of their own are watched
        // even without --recrawl-every.
        settings.crawl.availability_watch = true;
        settings.crawl.recrawl_every = self.recrawl_every;
        settings.crawl.history_keep = self.history_keep;
        if self.on_change.is_some() || self.webhook.is_some() {
            let notify = Notify::new(self.on_change.clone(), self.webhook.clone())
                .map_err(|e| anyhow::anyhow!("cannot set up the webhook client: {e}"))?;
            settings.notifier = Some(Arc::new(notify));
        }
        Ok(())
    }
}

/// What the master's node (`start`) is given beyond a worker's.
struct MasterOpts<'a> {
    store: &'a StoreOpts,
    seeds: Vec<String>,
    store_outage_limit: Duration,
    intensity: RestartIntensity,
    availability: &'a AvailabilityOpts,
    trap_allow: &'a TrapAllowOpts,
}

/// Run a node until Ctrl-C / SIGTERM, or until its tree stops by itself.
/// The master's node is given its store, seeds and the settings of
/// [`MasterOpts`].
async fn serve_node(
    node: &NodeOpts,
    master: Option<MasterOpts<'_>>,
    tuning: &TuningOpts,
    worker: Option<WorkerOpts<'_>>,
) -> Result<ExitCode> {
    let join = worker.as_ref().map(|w| (w.join, w.grace));
    let cookie = read_cookie(&node.cookie_file)?;
    let mut settings = tuning.settings()?;
    settings.crawl.node_name = node.name.clone();
    if let Some(m) = &master {
        let crawl = OperationSpec::crawl();
        check_seeds(&settings, m.seeds.iter().map(|u| (u.as_str(), &crawl)))?;
        settings.crawl.store_outage_limit = m.store_outage_limit;
        settings.crawl.restart_intensity = m.intensity;
        m.availability.apply(&mut settings)?;
    }
    let metrics = match node.metrics {
        Some(addr) => Some(prometheus::serve_for_node(addr, &node.name, &mut settings).await?),
        None => None,
    };
    // A service watches its sites: a host whose robots.txt is unreachable
    // is asked again every robots_retry, without end.
    settings.crawl.keep_retrying_robots = true;
    let archive_dir = master.as_ref().map_or_else(
        || PathBuf::from("web_crawler.warc"),
        |m| m.store.archive_dir(),
    );
    let archive = tuning.archive.archive(archive_dir, &node.name);
    settings.archive = Some(archive.clone());
    if let Some((addr, _)) = join {
        ensure_name_free(addr, &node.cookie_file, &node.name).await?;
    }
    // Listening for SIGTERM/SIGINT before the node is seen: a signal sent
    // as soon as the node has joined is then a clean stop, not a kill.
    let mut signals = StopSignals::new()?;
    let server = cluster::start_node(&node.name, node.listen, &cookie, true).await?;
    let app = match &master {
        Some(m) => {
            let store = m.store.open_for_crawl().await?;
            m.trap_allow.reopen(store.as_ref()).await?;
            start(store, m.store.with_index(settings)).await?
        }
        None => {
            if let Some(w) = &worker
                && settings.crawl.index_pages
            {
                settings.index_dir = Some(w.index.clone());
            }
            start_worker(settings).await?
        }
    };
    if let Some((addr, _)) = join {
        cluster::join(&server, addr, Duration::from_secs(10)).await?;
        eprintln!("node {} joined the cluster at {addr}", node.name);
    }
    if let Some(m) = &master {
        for url in &m.seeds {
            queue_seed(&app, url, OperationSpec::crawl())
                .await
                .with_context(|| format!("seed {url}"))?;
        }
    }
    // The same control actor the console reaches: this node's on the
    // master's node, the master's from a worker's.
    let control = if master.is_some() {
        app.control().with_timeout(HTTP_CONTROL_WAIT)
    } else {
        ControlClient::cluster(HTTP_CONTROL_WAIT)
    };
    let http = node.http.serve(control).await?;
    eprintln!("node {} listening on {}", node.name, node.listen);
    let master_watch = async {
        match join {
            Some((addr, grace)) => {
                cluster::stay_joined(&server, addr, grace, || app.master_lost()).await
            }
            None => std::future::pending().await,
        }
    };
    let track = async {
        match (&metrics, master.is_some()) {
            (Some(m), true) => m.track(&app).await,
            _ => std::future::pending().await,
        }
    };
    // A store failure stays in the error's chain: it has exit codes of its own.
    let failed = tokio::select! {
        _ = signals.first() => None,
        _ = track => None,
        why = app.exited() => match why {
            Some(why) => Some(anyhow::Error::new(why).context("the node stopped")),
            None => {
                eprintln!("node {} stopped by an operator", node.name);
                None
            }
        },
        lost = master_watch => Some(anyhow::anyhow!("{lost}")),
    };
    if let Some(http) = &http {
        http.stop();
    }
    if let Some(e) = failed {
        app.stop(Duration::from_secs(2)).await.ok();
        server.stop(None);
        if let Err(e) = archive.close() {
            eprintln!("{e}");
        }
        return Err(e);
    }
    app.stop(Duration::from_secs(10)).await?;
    server.stop(None);
    archive.close()?;
    Ok(ExitCode::SUCCESS)
}

/// Before a node joins the cluster at `addr` as `name`: refuse a name a
/// live node (or the master) has, as Erlang refuses a duplicate node name,
/// so that the newcomer fails instead of taking over the other's sessions.
/// The master's `status` is asked by a process of its own (this binary):
/// two cluster nodes in one process share ractor's registry and unsettle
/// each other's sessions. When it cannot say (a worker's address, a wrong
/// cookie), the join goes on and meets any error itself.
async fn ensure_name_free(addr: &str, cookie_file: &Path, name: &str) -> Result<()> {
    let out = tokio::process::Command::new(std::env::current_exe()?)
        .args(["status", "--json", "--wait", "10", "--connect", addr])
        .arg("--cookie-file")
        .arg(cookie_file)
        .env("RUST_LOG", "error")
        .stderr(std::process::Stdio::null())
        .output()
        .await?;
    if !out.status.success() {
        return Ok(());
    }
    let status: web_crawler::actors::Status =
        serde_json::from_slice(&out.stdout).context("the master's status")?;
    if status.node == name || status.nodes.iter().any(|n| n.node == name) {
        return Err(cluster::ClusterError::NameTaken {
            name: name.to_string(),
            addr: addr.to_string(),
        }
        .into());
    }
    Ok(())
}
