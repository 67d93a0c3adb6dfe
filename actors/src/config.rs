//! Settings of the OTP layer and the behaviours it runs with.

use crate::availability::StatusEvent;
use crate::behaviour::index::IndexShard;
use crate::behaviour::{
    Archive, Extractor, Fetcher, Frontier, LinkPolicy, Notifier, Operations, Queries, Store,
};
use crate::metrics::Metrics;
use crate::protocol::MASTER_LOG;
use crate::scheduler::Politeness;
use crate::traps::TrapSettings;
use crate::types::Millis;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// OTP restart intensity: more than `max_restarts` restarts within `period`
/// and the supervisor gives up, stopping the app (as `{one_for_one, 1, 60}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RestartIntensity {
    pub max_restarts: u32,
    #[serde(rename = "period_ms", with = "millis")]
    pub period: Duration,
}

impl RestartIntensity {
    /// More than `max_restarts` restarts within `period` stop the app.
    pub fn new(max_restarts: u32, period: Duration) -> Self {
        Self {
            max_restarts,
            period,
        }
    }
}

impl Default for RestartIntensity {
    /// The paper's `web_crawler_sup`: one restart in 60 seconds.
    fn default() -> Self {
        Self {
            max_restarts: 1,
            period: Duration::from_secs(60),
        }
    }
}

/// How the tree runs. Every field has a default; see [`CrawlConfig::default`]
/// (build one with `CrawlConfig::default()` and set what differs).
///
/// It serializes whole (`state config`), durations in milliseconds under
/// `_ms` names, so a setting added here is shown there.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct CrawlConfig {
    /// This node's name: lease owner, recorded on each processed page.
    #[serde(rename = "node")]
    pub node_name: String,
    /// Slaves running at once on this node.
    pub concurrency: usize,
    /// Requests in flight per host.
    pub per_host: usize,
    /// Minimum delay between requests to one host.
    #[serde(rename = "min_delay_ms", with = "millis")]
    pub min_delay: Duration,
    /// How long a claimed URL stays leased without renewal.
    #[serde(rename = "lease_ms", with = "millis")]
    pub lease: Duration,
    /// Attempts before a URL is recorded as failed.
    pub max_attempts: u32,
    /// First retry delay; doubles with each attempt.
    #[serde(rename = "retry_backoff_ms", with = "millis")]
    pub retry_backoff: Duration,
    /// Stop claiming after this many pages fetched in this run.
    pub max_pages: Option<u64>,
    /// Re-queue a processed page linked again after this long (the paper's
    /// availability watching); `None` never re-queues.
    #[serde(rename = "reprocess_after_ms", with = "millis::option")]
    pub reprocess_after: Option<Duration>,
    /// Availability watching (a service): check every processed URL
    /// again about this often ([`crate::availability::Revisit`] adapts it to how
    /// often the page changes); `None` watches nothing.
    #[serde(rename = "recrawl_every_ms", with = "millis::option")]
    pub recrawl_every: Option<Duration>,
    /// Availability watching runs (a service): the master queues again
    /// the URLs whose check is due — every processed URL with
    /// `recrawl_every`, else the URLs added with an interval of their own
    /// (`add_url … every`). `recrawl_every` turns it on too; a one-shot
    /// crawl leaves it off and checks nothing again.
    #[serde(rename = "monitoring")]
    pub availability_watch: bool,
    /// `fetch_history` entries kept per URL, the newest.
    pub history_keep: usize,
    /// Claimed URLs held by this node and not yet committed, at most (0: 64 ×
    /// concurrency, at least 16): room for group commits of a quarter of it.
    /// Each commit rewrites most of the frontier's B-tree pages whatever its
    /// size, so fewer, larger commits write less: on the large benchmark
    /// (240 MB file) 32 × with 4 × per host wrote 4.4 GB, this 3.4 GB.
    /// The master's [`Window`](crate::window::Window) holds them.
    #[serde(rename = "window")]
    pub claim_window: usize,
    /// Claimed URLs per host at most (0: 8 × per_host, at least 8). With
    /// many hosts this, not `claim_window`, is what bounds a commit's size.
    pub per_host_window: usize,
    /// Results that start a store write at once (or a quarter of the window,
    /// if smaller). Results reported while a write runs join the next one,
    /// so a write's size is bounded by the window, not by this.
    pub max_batch: usize,
    /// How long a result may wait to be committed with others: one store
    /// write per interval instead of one per result.
    #[serde(rename = "flush_every_ms", with = "millis")]
    pub flush_every: Duration,
    #[serde(rename = "robots_ttl_ms", with = "millis")]
    pub robots_ttl: Duration,
    /// How long to wait before asking an unreachable robots.txt again.
    #[serde(rename = "robots_retry_ms", with = "millis")]
    pub robots_retry: Duration,
    /// A URL whose host's robots.txt stays unreachable is retried without
    /// end (a service watching its sites) instead of failing after
    /// `max_attempts` (a one-shot crawl, which must end).
    pub keep_retrying_robots: bool,
    /// Read each host's sitemaps (robots.txt `Sitemap:` lines, else
    /// `/sitemap.xml`) when its robots.txt is fetched.
    pub sitemaps: bool,
    /// Crawler-trap defence ([`crate::traps`]); `None` turns it off.
    pub traps: Option<TrapSettings>,
    /// Hand every HTML page this node fetches to the full-text index (the
    /// `index` operation, [`PageIndex`](crate::PageIndex)); a node keeps
    /// an index when it has an [`IndexShard`] (the master's node: its
    /// [`Storage`]'s).
    #[serde(rename = "index")]
    pub index_pages: bool,
    /// The indexer commits after this many pages (what a crash makes it
    /// index again; 10,000 cost the bench's large crawl ~16 CPU-s more,
    /// for reasons not measured yet)...
    pub index_commit_pages: usize,
    /// ...or this long after the first page not committed.
    #[serde(rename = "index_commit_every_ms", with = "millis")]
    pub index_commit_every: Duration,
    /// The indexer reads no more pages while fetching keeps the machine
    /// busy (its threads at normal priority use over half the cores; on
    /// Linux): they wait in the node's queue on disk, and the index
    /// catches up once fetching leaves CPU or the crawl is done. Off, the
    /// index runs beside fetching at nice 10: pages are searchable sooner
    /// during a crawl as fast as the machine allows, and fetching is
    /// slower.
    pub index_yields_to_fetching: bool,
    pub restart_intensity: RestartIntensity,
    /// How long the master waits for a store that became unavailable (a
    /// database restart, an election, a network blip, a locked file) before
    /// the app stops ([`crate::outage`]). Meanwhile it claims nothing, keeps
    /// the results it has and asks the store again, backing off.
    #[serde(rename = "store_outage_limit_ms", with = "millis")]
    pub store_outage_limit: Duration,
    /// How long a node may be gone before the master takes it as left for
    /// good (a node an operator stopped, `node stop`, is at once): the
    /// pages it fetched are then fetched again by their hosts' new owners
    /// and indexed in their shards ([`crate::departures`]).
    #[serde(rename = "departed_after_ms", with = "millis")]
    pub departed_after: Duration,
    /// How often the master checks timers, leases and idleness.
    #[serde(rename = "tick_ms", with = "millis")]
    pub tick: Duration,
}

/// The node name of a crawl run without a cluster (the default, and the
/// `crawl` command's). A master started later on the same store takes the
/// pages it fetched as its own: they are in the store's index, which is
/// the master's shard, so they are neither handed over nor missing.
pub(crate) const ONE_SHOT_NODE: &str = "local";

/// The node whose shard holds the pages the store says `node` fetched,
/// asked on the master's node `master`: a one-shot crawl's are the master's.
pub(crate) fn shard_holding(node: String, master: &str) -> String {
    if node == ONE_SHOT_NODE {
        master.to_string()
    } else {
        node
    }
}

impl Default for CrawlConfig {
    fn default() -> Self {
        Self {
            node_name: ONE_SHOT_NODE.to_string(),
            concurrency: 32,
            per_host: 1,
            min_delay: Duration::from_millis(250),
            lease: Duration::from_secs(120),
            max_attempts: 3,
            retry_backoff: Duration::from_secs(2),
            max_pages: None,
            reprocess_after: None,
            recrawl_every: None,
            availability_watch: false,
            history_keep: 1_000,
            claim_window: 0,
            per_host_window: 0,
            max_batch: 1024,
            flush_every: Duration::from_millis(300),
            robots_ttl: Duration::from_secs(24 * 3600),
            robots_retry: Duration::from_secs(60),
            keep_retrying_robots: false,
            sitemaps: true,
            traps: Some(TrapSettings::default()),
            index_pages: false,
            index_commit_pages: 2_000,
            index_commit_every: Duration::from_secs(2),
            index_yields_to_fetching: true,
            restart_intensity: RestartIntensity::default(),
            store_outage_limit: Duration::from_secs(60),
            departed_after: Duration::from_secs(600),
            tick: Duration::from_millis(200),
        }
    }
}

impl CrawlConfig {
    /// The window actually used: `claim_window`, or by default enough to keep every
    /// slave busy while results travel back. It bounds the URLs claimed and
    /// not yet committed: what a crash of the process can cost in re-fetches.
    pub fn effective_claim_window(&self) -> usize {
        if self.claim_window > 0 {
            self.claim_window
        } else {
            (self.concurrency * 64).max(16)
        }
    }

    /// Results that trigger a commit before `flush_every` is up: a quarter of
    /// the window, so results waiting for their commit never starve the slaves.
    pub fn flush_at(&self) -> usize {
        self.max_batch.min(self.effective_claim_window() / 4).max(1)
    }

    pub fn effective_per_host_window(&self) -> usize {
        if self.per_host_window > 0 {
            self.per_host_window
        } else {
            (self.per_host * 8).max(8)
        }
    }

    /// Whether the master looks for URLs due to be checked again
    /// ([`CrawlConfig::availability_watch`]).
    pub fn watches(&self) -> bool {
        self.availability_watch || self.recrawl_every.is_some()
    }

    /// Registered name of this node's master (`web_crawler_master@NODE`):
    /// ractor's registry is per process, so the node name keeps two apps in
    /// one process apart.
    pub fn master_name(&self) -> String {
        format!("web_crawler_master@{}", self.node_name)
    }

    pub fn pool_name(&self) -> String {
        format!("web_crawler_pool@{}", self.node_name)
    }

    pub fn control_name(&self) -> String {
        format!("web_crawler_control@{}", self.node_name)
    }

    pub fn indexer_name(&self) -> String {
        format!("web_crawler_indexer@{}", self.node_name)
    }

    pub fn sup_name(&self) -> String {
        format!("web_crawler_sup@{}", self.node_name)
    }

    pub fn politeness(&self) -> Politeness {
        Politeness {
            max_in_flight: self.concurrency.max(1),
            per_host: self.per_host.max(1),
            min_delay_ms: self.min_delay.as_millis() as u64,
            robots_ttl_ms: self.robots_ttl.as_millis() as Millis,
            robots_retry_ms: self.robots_retry.as_millis() as Millis,
        }
    }
}

/// Durations as whole milliseconds, for [`CrawlConfig`]'s serde form.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis().min(u64::MAX as u128) as u64)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }

    pub(super) mod option {
        use serde::{Deserialize, Deserializer, Serializer};
        use std::time::Duration;

        pub(crate) fn serialize<S: Serializer>(
            d: &Option<Duration>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => super::serialize(d, s),
                None => s.serialize_none(),
            }
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Duration>, D::Error> {
            Option::<u64>::deserialize(d).map(|ms| ms.map(Duration::from_millis))
        }
    }
}

/// The callback modules pools and slaves run with (the master also gets a
/// [`Store`](crate::Store), on the node that runs it).
#[derive(Clone)]
pub struct Behaviours {
    pub fetcher: Arc<dyn Fetcher>,
    pub extractor: Arc<dyn Extractor>,
    pub policy: Arc<dyn LinkPolicy>,
    pub operations: Operations,
    /// Where this node counts fetches, pool load and restarts.
    pub metrics: Arc<dyn Metrics>,
    /// Told of each watched URL's changes (down, up, another body).
    pub notifier: Option<Arc<dyn Notifier>>,
    /// Where responses are archived (`None`: nowhere; an archiving
    /// operation then fails its pages).
    pub archive: Option<Arc<dyn Archive>>,
}

impl Behaviours {
    /// A watched URL changed: one line at info (the master's), and the
    /// notifier told off the caller's path (it may run a command or wait
    /// for a webhook).
    pub(crate) fn notify(&self, event: StatusEvent) {
        let reason = event.reason.as_deref().unwrap_or("");
        let (url, change) = (&event.url, event.change);
        match event.http_returncode {
            Some(code) => {
                tracing::info!(target: MASTER_LOG, %url, status = code, reason, "watched URL {change}")
            }
            None => tracing::info!(target: MASTER_LOG, %url, reason, "watched URL {change}"),
        }
        if let Some(notifier) = &self.notifier {
            let notifier = Arc::clone(notifier);
            tokio::spawn(async move { notifier.notify(&event).await });
        }
    }
}

impl fmt::Debug for Behaviours {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Behaviours")
            .field("operations", &self.operations)
            .field("archive", &self.archive)
            .finish_non_exhaustive()
    }
}

/// The store as the tree uses it: the frontier the master writes, and the
/// queries the control actor reads. Usually one backend serves both
/// ([`Storage::new`]); a wrapper may take one side only ([`Storage::split`]).
/// With an index ([`Storage::with_index`]) the tree runs an indexer too.
#[derive(Clone, Debug)]
pub struct Storage {
    pub frontier: Arc<dyn Frontier>,
    pub queries: Arc<dyn Queries>,
    /// The full-text index this node keeps and its queue (`None`: it
    /// keeps none).
    pub index: Option<IndexShard>,
}

impl Storage {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            frontier: store.clone(),
            queries: store,
            index: None,
        }
    }

    pub fn split(frontier: Arc<dyn Frontier>, queries: Arc<dyn Queries>) -> Self {
        Self {
            frontier,
            queries,
            index: None,
        }
    }

    /// Keep a full-text index of the pages crawled: `shard`.
    pub fn with_index(mut self, shard: IndexShard) -> Self {
        self.index = Some(shard);
        self
    }
}
