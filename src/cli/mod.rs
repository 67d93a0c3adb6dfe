//! Flags and subcommands.

mod console;
mod prometheus;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use prometheus::NodeMetrics;
use regex::Regex;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use web_crawler::actors::LinkPolicy;
use web_crawler::actors::cluster;
use web_crawler::actors::monitor::{
    FetchHistory, HistoryQuery, WATCH_OFF, availability, changes, check_every,
};
use web_crawler::actors::outage::utc_time;
use web_crawler::actors::traps::TrapSettings;
use web_crawler::actors::{
    AppError, AppHandle, ControlRequest, IdleReason, Millis, OperationSpec, PageQuery,
    RestartIntensity, Store, StoreFailureKind, now_ms,
};
use web_crawler::archive::{ArchiveReader, WarcArchive};
use web_crawler::graph;
use web_crawler::notify::Notify;
use web_crawler::operations::builtin_operations;
use web_crawler::policy::{CrawlPolicy, Scope};
use web_crawler::search::{
    Ranking, SearchAnswer, SearchError, SearchIndex, SearchOptions, index_dir_for,
};
use web_crawler::store::{MongoStore, SqliteStore};
use web_crawler::{Settings, start, start_worker};

/// Exit codes beyond 0 (success) and 1 (an error), for scripts.
const EXIT_CODES: &str = "Exit codes: 0 done; 1 an error; 74 the store failed for good \
(a full disk, refused credentials: fix it and run again to resume); 75 the store was \
unreachable for longer than --store-outage-limit (run again once it is back); 128 + N \
stopped by signal N.";

/// The store failed for good (sysexits' EX_IOERR).
pub(crate) const EXIT_STORE_FAILED: u8 = 74;
/// The store stayed unreachable past --store-outage-limit (EX_TEMPFAIL).
pub(crate) const EXIT_STORE_UNREACHABLE: u8 = 75;

#[derive(Debug, Parser)]
#[command(
    name = "web_crawler",
    version,
    about = "An OTP-style supervised web crawler",
    after_help = EXIT_CODES
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Crawl from the given URLs until nothing is pending (or a budget is hit).
    /// The --db file is created if missing; running it again on the same
    /// --db resumes.
    #[command(after_help = EXIT_CODES)]
    Crawl {
        /// Seed URLs.
        #[arg(required = true)]
        urls: Vec<String>,
        #[command(flatten)]
        opts: CrawlOpts,
    },
    /// Crawl from URL recording where TEXT occurs on each page (the paper's
    /// search_text), then print the pages and positions. With --connect, queue
    /// it on a running cluster instead.
    #[command(after_help = EXIT_CODES)]
    SearchText {
        url: String,
        text: String,
        #[command(flatten)]
        opts: CrawlOpts,
        /// Send it to the cluster at HOST:PORT instead of crawling here.
        #[arg(long, value_name = "HOST:PORT", requires = "cookie_file")]
        connect: Option<String>,
        /// The cluster's cookie file.
        #[arg(long)]
        cookie_file: Option<PathBuf>,
        /// Match case exactly (the default ignores case).
        #[arg(long)]
        exact: bool,
    },
    /// Run a node with the master (like `erl -sname NAME` + the application):
    /// the supervision tree, its pool, and the control actor consoles talk to.
    #[command(after_help = EXIT_CODES)]
    Start {
        #[command(flatten)]
        node: NodeOpts,
        /// Seed URLs to queue at start.
        urls: Vec<String>,
        #[command(flatten)]
        store: StoreOpts,
        #[command(flatten)]
        tuning: TuningOpts,
        /// How long the node waits for a store that became unreachable
        /// (a database restart, an election) before it stops, with exit code 75.
        #[arg(long, value_name = "DURATION", default_value = "10min", value_parser = parse_duration)]
        store_outage_limit: Duration,
        #[command(flatten)]
        supervision: SupervisionOpts,
        #[command(flatten)]
        monitor: MonitorOpts,
    },
    /// Run a worker node: a pool that fetches for the master of the cluster it joins.
    Node {
        #[command(flatten)]
        node: NodeOpts,
        /// The master's node to join (HOST:PORT).
        #[arg(long, value_name = "HOST:PORT")]
        join: String,
        /// When the master goes away, keep reconnecting (with backoff) for
        /// this many seconds, then exit with an error; 0: for ever.
        #[arg(long, value_name = "SECONDS", default_value_t = 60)]
        master_grace: u64,
        #[command(flatten)]
        tuning: TuningOpts,
    },
    /// Attach an interactive shell to a running cluster (like `erl -remsh`).
    Console {
        #[command(flatten)]
        remote: RemoteOpts,
    },
    /// Queue a URL on a running cluster.
    AddUrl {
        url: String,
        /// Attach the search operation with this text.
        #[arg(long, value_name = "TEXT")]
        search: Option<String>,
        /// Attach the mirror operation: archive the responses of this URL's crawl.
        #[arg(long, conflicts_with = "search")]
        mirror: bool,
        /// Fetch it again even if it was processed (without it, a URL
        /// already processed is refused with when).
        #[arg(long)]
        again: bool,
        /// Watch it at this interval of its own, e.g. `30s`, `10min`, `1h`
        /// (1s at the least): it overrides --recrawl-every, and the node
        /// need not have one. `off`: not watched, not even at
        /// --recrawl-every. A URL processed already is fetched again now.
        #[arg(long, value_name = "DURATION|off")]
        every: Option<String>,
        #[command(flatten)]
        remote: RemoteOpts,
    },
    /// Print a running cluster's status.
    Status {
        #[command(flatten)]
        remote: RemoteOpts,
    },
    /// Search the pages a crawl indexed (offline: reads the index
    /// directory only, never the store; works while a crawl writes).
    Search {
        /// The query: words, and "quoted phrases" that must occur.
        query: String,
        /// The crawl's store file; its index is the directory `PATH.index` beside it.
        #[arg(long, value_name = "PATH", default_value = "crawler.db")]
        db: PathBuf,
        /// The index directory itself (instead of --db).
        #[arg(long, value_name = "DIR", conflicts_with = "db")]
        index: Option<PathBuf>,
        /// At most this many results (1 at the least).
        #[arg(long, default_value_t = 10, value_parser = at_least_one)]
        limit: usize,
        /// Print one JSON document: {"results":[{url,title,snippet,score}...],"did_you_mean":...}.
        #[arg(long)]
        json: bool,
        /// The ranking: `full`, or the plain BM25 baseline.
        #[arg(long, value_enum, default_value_t = RankingArg::Full)]
        ranking: RankingArg,
        /// Ask the running node at HOST:PORT (its master's index) instead.
        #[arg(long, value_name = "HOST:PORT", requires = "cookie_file", conflicts_with_all = ["index", "ranking"])]
        connect: Option<String>,
        /// The cluster's cookie file (with --connect).
        #[arg(long)]
        cookie_file: Option<PathBuf>,
        /// Seconds to wait for the node (with --connect).
        #[arg(long, default_value_t = 10)]
        wait: u64,
    },
    /// Manage the full-text index.
    Index {
        #[command(subcommand)]
        action: IndexAction,
    },
    /// Print what a crawl stored.
    Report {
        #[command(subcommand)]
        what: Report,
    },
}

/// `report ...`: listings read from the store (offline; works while a crawl writes).
#[derive(Debug, Subcommand)]
enum Report {
    /// Processed pages: status, type, size, links found, links in and out.
    ///
    /// `links`: the links the page holds, as found (each distinct http(s)
    /// URL, nofollow and off-scope ones included, and each href that is no
    /// http(s) URL, such as mailto:); `in`: processed pages linking to it;
    /// `out`: the distinct URLs of its links the crawl took (in scope, past
    /// --allow/--deny, --max-depth and the trap defence, not nofollow).
    Pages {
        #[command(flatten)]
        list: ListOpts,
    },
    /// 4xx/5xx and failed pages with the pages linking to them.
    BrokenLinks {
        #[command(flatten)]
        list: ListOpts,
    },
    /// Where search-text found its text (the paper's search_results).
    SearchResults {
        /// Only the results for this text (all texts without it).
        text: Option<String>,
        #[command(flatten)]
        list: ListOpts,
    },
    /// Hosts: robots.txt status, crawl delay, sitemaps, pages processed.
    Hosts {
        #[command(flatten)]
        list: ListOpts,
    },
    /// Availability of watched URLs: checks, uptime, last failure, p50/p95
    /// response time, per URL (from fetch_history).
    Availability {
        #[command(flatten)]
        history: HistoryOpts,
    },
    /// Changes of watched URLs: down, up, another body (from fetch_history).
    Changes {
        #[command(flatten)]
        history: HistoryOpts,
    },
    /// The site graph: pages (status, depth, host, title, links in and out)
    /// and the links between them, for Graphviz, Gephi or a script.
    Graph {
        #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
        format: GraphFormat,
        /// Same as --format json.
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// Only the pages of this host (`host[:port]`, as `report hosts`
        /// lists it), their links, and the pages those links lead to.
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
        /// Write to this file instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        store: StoreOpts,
    },
}

/// `start`'s availability monitoring.
#[derive(Debug, Args)]
struct MonitorOpts {
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

impl MonitorOpts {
    fn apply(&self, settings: &mut Settings) -> Result<()> {
        if let Some(every) = self.recrawl_every {
            check_every(every).map_err(|e| anyhow::anyhow!("--recrawl-every: {e}"))?;
        }
        // A service: URLs added with an interval of their own are watched
        // even without --recrawl-every.
        settings.crawl.monitoring = true;
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

/// Which history a report reads.
#[derive(Debug, Args)]
struct HistoryOpts {
    #[command(flatten)]
    list: ListOpts,
    /// Only this host's URLs (`host[:port]`).
    #[arg(long, value_name = "HOST")]
    host: Option<String>,
    /// Only fetches in this last while (`1h`, `7d` is `168h`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    since: Option<Duration>,
}

impl HistoryOpts {
    async fn read(&self) -> Result<Vec<FetchHistory>> {
        let query = HistoryQuery {
            host: self.host.clone(),
            since: self
                .since
                .map(|d| now_ms().saturating_sub(d.as_millis() as i64)),
        };
        Ok(self.list.store.open().await?.fetch_history(query).await?)
    }
}

/// The store and the shape of a listing.
#[derive(Debug, Args)]
struct ListOpts {
    #[command(flatten)]
    store: StoreOpts,
    /// Print JSON (one array) instead of a table.
    #[arg(long)]
    json: bool,
    /// At most this many rows (1 at the least).
    #[arg(long, value_parser = at_least_one)]
    limit: Option<usize>,
}

/// `report graph --format`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum GraphFormat {
    /// Graphviz DOT (`dot -Tsvg`); node ids are the URLs.
    Dot,
    /// GraphML with typed attributes (Gephi, yEd, networkx).
    Graphml,
    /// {"nodes":[{url,host,status,depth,title,error,fetched,in,out}],"edges":[{source,target}]}.
    Json,
    /// The edge list: Source,Target (Gephi's edges table).
    Csv,
    /// The node table: Id,Label,Host,Status,Depth,Fetched,In,Out,Error (Gephi's nodes table).
    CsvNodes,
}

impl From<GraphFormat> for graph::Format {
    fn from(f: GraphFormat) -> Self {
        match f {
            GraphFormat::Dot => graph::Format::Dot,
            GraphFormat::Graphml => graph::Format::Graphml,
            GraphFormat::Json => graph::Format::Json,
            GraphFormat::Csv => graph::Format::Csv,
            GraphFormat::CsvNodes => graph::Format::CsvNodes,
        }
    }
}

#[derive(Debug, Subcommand)]
enum IndexAction {
    /// Build the index again from what the store holds: every HTML page
    /// processed with success is fetched again (politely, with the tuning
    /// flags) and indexed; nothing new is crawled. For a lost or damaged index.
    Rebuild {
        #[command(flatten)]
        store: StoreOpts,
        #[command(flatten)]
        tuning: TuningOpts,
    },
}

/// `--ranking`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum RankingArg {
    /// Typo correction, anchor text, proximity, link prior, hub penalty.
    Full,
    /// tantivy's BM25 over title and body (the baseline).
    Bm25,
}

impl From<RankingArg> for Ranking {
    fn from(arg: RankingArg) -> Self {
        match arg {
            RankingArg::Full => Ranking::Full,
            RankingArg::Bm25 => Ranking::PlainBm25,
        }
    }
}

/// `--scope`: the CLI's face of the library's [`Scope`] (clap stays in the
/// CLI), with the same names and descriptions.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum ScopeArg {
    /// Same host as the referrer (the paper's rule).
    Host,
    /// Same registrable domain as the referrer (`a.example.com` → `b.example.com`).
    Domain,
    /// Any host (bound it with filters, depth and page budgets).
    Any,
}

impl From<ScopeArg> for Scope {
    fn from(arg: ScopeArg) -> Self {
        match arg {
            ScopeArg::Host => Scope::Host,
            ScopeArg::Domain => Scope::Domain,
            ScopeArg::Any => Scope::Any,
        }
    }
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
}

/// The supervisor's restart intensity (OTP's `{one_for_one, N, S}`).
#[derive(Debug, Args)]
struct SupervisionOpts {
    /// More than N restarts (of the master, the pool, ...) within
    /// --restart-window and the supervisor gives up: the process stops.
    #[arg(long, value_name = "N", default_value_t = 1)]
    max_restarts: u32,
    /// The window --max-restarts counts in: `60s`, `10min` (a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    restart_window: Duration,
}

impl SupervisionOpts {
    fn intensity(&self) -> RestartIntensity {
        RestartIntensity::new(self.max_restarts, self.restart_window)
    }
}

/// A running cluster to talk to.
#[derive(Debug, Args)]
struct RemoteOpts {
    /// A node of the cluster (the master's node).
    #[arg(long, value_name = "HOST:PORT")]
    connect: String,
    /// The cluster's cookie file.
    #[arg(long)]
    cookie_file: PathBuf,
    /// Print the reply as JSON.
    #[arg(long)]
    json: bool,
    /// Seconds to wait for the node.
    #[arg(long, default_value_t = 10)]
    wait: u64,
}

/// Which store: the embedded file, or MongoDB when a URI is given.
#[derive(Debug, Args)]
struct StoreOpts {
    /// The crawl's embedded store file (SQLite).
    #[arg(long, default_value = "crawler.db")]
    db: PathBuf,
    /// Use MongoDB at this URI instead of the embedded store.
    #[arg(long, env = "MONGODB_URI", value_name = "URI")]
    mongodb: Option<String>,
    /// MongoDB database name.
    #[arg(long, default_value = web_crawler::store::DEFAULT_DATABASE)]
    mongodb_database: String,
    /// Let the embedded store file grow to this many pages at most; beyond,
    /// writes fail as on a full disk (for tests of a full disk).
    #[arg(long, value_name = "PAGES", hide = true)]
    db_max_pages: Option<u64>,
    /// The full-text index directory (default: `DB.index` beside the
    /// embedded store, `DATABASE.index` in the current directory with MongoDB).
    #[arg(long, value_name = "DIR")]
    index: Option<PathBuf>,
}

impl StoreOpts {
    /// The store to read (`report`): no lock, and it must exist.
    async fn open(&self) -> Result<Arc<dyn Store>> {
        if self.mongodb.is_none() && !self.db.exists() {
            bail!("no crawl database at {}", self.db.display());
        }
        Ok(match &self.mongodb {
            Some(uri) => Arc::new(MongoStore::connect(uri, &self.mongodb_database).await?),
            None => Arc::new(SqliteStore::open(&self.db)?),
        })
    }

    /// The store to crawl with, held against a second crawling process: an
    /// embedded file is created if missing and locked; a MongoDB database's
    /// owner lease is taken.
    async fn open_for_crawl(&self) -> Result<Arc<dyn Store>> {
        if let Some(uri) = &self.mongodb {
            let command = std::env::args().nth(1).unwrap_or_default();
            let owner = format!("`web_crawler {command}`");
            let store = MongoStore::connect_for_crawl(uri, &self.mongodb_database, &owner).await?;
            return Ok(Arc::new(store));
        }
        let store = SqliteStore::open_for_crawl(&self.db)?;
        if let Some(pages) = self.db_max_pages {
            store.limit_pages(pages)?;
        }
        Ok(Arc::new(store))
    }

    /// Where the full-text index of this store is kept.
    fn index_dir(&self) -> PathBuf {
        match (&self.index, &self.mongodb) {
            (Some(dir), _) => dir.clone(),
            (None, Some(_)) => PathBuf::from(format!("{}.index", self.mongodb_database)),
            (None, None) => index_dir_for(&self.db),
        }
    }

    /// The archive directory when `--warc` names none: `DB.warc` beside the
    /// embedded store, `DATABASE.warc` in the current directory with MongoDB.
    fn archive_dir(&self) -> PathBuf {
        match &self.mongodb {
            Some(_) => PathBuf::from(format!("{}.warc", self.mongodb_database)),
            None => PathBuf::from(format!("{}.warc", self.db.display())),
        }
    }

    /// The node's settings with this store's index, unless indexing is off.
    fn with_index(&self, mut settings: Settings) -> Settings {
        if settings.crawl.index {
            settings.index = Some(self.index_dir());
        }
        settings
    }
}

#[derive(Debug, Args)]
struct CrawlOpts {
    #[command(flatten)]
    store: StoreOpts,
    #[command(flatten)]
    tuning: TuningOpts,
    /// No live progress line.
    #[arg(long)]
    quiet: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// How long the crawl waits for a store that became unreachable (a
    /// database restart, an election, a locked file) before it stops, with
    /// exit code 75: `90s`, `10min`, `1h` (a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    store_outage_limit: Duration,
    #[command(flatten)]
    supervision: SupervisionOpts,
    /// Serve Prometheus metrics at http://HOST:PORT/metrics while it crawls.
    #[arg(long, value_name = "HOST:PORT")]
    metrics: Option<std::net::SocketAddr>,
}

impl CrawlOpts {
    fn settings(&self) -> Result<Settings> {
        let mut s = self.tuning.settings()?;
        s.crawl.store_outage_limit = self.store_outage_limit;
        s.crawl.restart_intensity = self.supervision.intensity();
        // A one-shot crawl must end: a host whose robots.txt stays
        // unreachable is asked a few times over about half a minute, then
        // its URLs are recorded as failed.
        s.crawl.robots_retry = Duration::from_secs(10);
        Ok(s)
    }
}

/// How to crawl: every node of a cluster takes the same ones.
#[derive(Debug, Args)]
struct TuningOpts {
    /// Which links to follow off the referrer's site.
    #[arg(long, value_enum, default_value_t = ScopeArg::Host)]
    scope: ScopeArg,
    /// Stop after fetching this many pages.
    #[arg(long)]
    max_pages: Option<u64>,
    /// Don't follow links deeper than this from a seed.
    #[arg(long)]
    max_depth: Option<u32>,
    /// Pages fetched at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Requests in flight per host.
    #[arg(long, default_value_t = 1)]
    per_host: usize,
    /// Minimum delay between requests to one host (robots.txt Crawl-delay wins if longer).
    #[arg(long, default_value_t = 250)]
    delay_ms: u64,
    #[arg(long, default_value = concat!("web_crawler/", env!("CARGO_PKG_VERSION")))]
    user_agent: String,
    /// Only crawl URLs matching one of these regexes.
    #[arg(long = "allow", value_name = "REGEX")]
    allow: Vec<String>,
    /// Never crawl URLs matching these regexes.
    #[arg(long = "deny", value_name = "REGEX")]
    deny: Vec<String>,
    /// Re-fetch pages processed longer ago than this many seconds when linked again.
    #[arg(long, value_name = "SECS")]
    reprocess_after: Option<u64>,
    /// Keep utm_*, gclid, fbclid and similar tracking parameters in URLs
    /// (dropped by default, so a campaign URL is not fetched again).
    #[arg(long)]
    keep_tracking: bool,
    /// Sort query parameters so reordered queries are one URL.
    #[arg(long)]
    sort_query: bool,
    /// Body size cap in bytes.
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    max_body: usize,
    /// Total time per request, in seconds.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// Don't read sitemaps (robots.txt `Sitemap:` lines, else /sitemap.xml).
    #[arg(long)]
    no_sitemaps: bool,
    /// Don't add the pages to the full-text index (`web_crawler search`).
    #[arg(long)]
    no_index: bool,
    #[command(flatten)]
    traps: TrapOpts,
    #[command(flatten)]
    archive: ArchiveOpts,
}

/// Archives (WARC files with CDXJ indexes).
#[derive(Debug, Args)]
struct ArchiveOpts {
    /// Archive every response this node gets (robots.txt, redirects and
    /// errors too) as WARC files in DIR; `mirror` URLs are archived there
    /// too (default for them: `DB.warc` beside the embedded store,
    /// `DATABASE.warc` with MongoDB, `web_crawler.warc` on a worker node).
    #[arg(long, value_name = "DIR")]
    warc: Option<PathBuf>,
    /// Close a WARC file and begin the next one at this size: `500MB`,
    /// `1GB`, `64KiB` (a bare number is bytes).
    #[arg(long, value_name = "SIZE", default_value = "1GB", value_parser = parse_size)]
    warc_max_size: u64,
}

impl ArchiveOpts {
    /// The node's archive: `--warc`, else `default` (for `mirror` only).
    fn archive(&self, default: PathBuf, node: &str) -> Arc<WarcArchive> {
        let dir = self.warc.clone().unwrap_or(default);
        Arc::new(WarcArchive::new(
            &dir,
            node,
            self.warc_max_size,
            self.warc.is_some(),
        ))
    }
}

/// `--limit N`: a count of results or rows, 1 at the least (0 would ask
/// for nothing and print "No results").
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 would show nothing: give 1 or more".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a number")),
    }
}

/// `1GB`, `500MB`, `64KiB`, `1000`: bytes (decimal units, and binary ones with `i`).
fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size: try 500MB or 1GB"))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use KB, MB or GB"
            ));
        }
    };
    number
        .checked_mul(factor)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// Crawler-trap defence: on by default; see `web_crawler_actors::traps`.
/// A rule whose threshold is 0 is off.
#[derive(Debug, Args)]
struct TrapOpts {
    /// Turn the crawler-trap defence off (infinite calendars, facets,
    /// session ids, soft-404s and generators of excerpts are then followed
    /// until a budget stops them).
    #[arg(long)]
    no_trap_defence: bool,
    /// Two pages whose text simhashes differ in at most this many bits are near-duplicates.
    #[arg(long, value_name = "BITS", default_value_t = TrapSettings::default().near_dup_bits)]
    trap_near_dup_bits: u32,
    /// Recent pages of a URL pattern the trap rules look at.
    #[arg(long, value_name = "PAGES", default_value_t = TrapSettings::default().window)]
    trap_window: u32,
    /// A URL pattern closes when this % of its recent pages are near-duplicates.
    #[arg(long, value_name = "PCT", default_value_t = TrapSettings::default().near_dup_pct)]
    trap_near_dup_pct: u32,
    /// A URL pattern closes after this many near-duplicate pages that link only back into it.
    #[arg(long, value_name = "PAGES", default_value_t = TrapSettings::default().barren_budget)]
    trap_barren_budget: u32,
    /// A path's query space (facets, sorts) closes after this many near-duplicate variants.
    #[arg(long, value_name = "PAGES", default_value_t = TrapSettings::default().facet_budget)]
    trap_facet_budget: u32,
    /// A host serving this many near-duplicate pages in a row keeps only its proven sections.
    #[arg(long, value_name = "PAGES", default_value_t = TrapSettings::default().host_dup_run)]
    trap_host_dup_run: u32,
    /// A page is a copy when at most this % of its text's word sequences are new to its host.
    #[arg(long, value_name = "PCT", default_value_t = TrapSettings::default().copy_pct)]
    trap_copy_pct: u32,
    /// A directory (`/tag/`, `/search?`) closes after this many copies that link nowhere new.
    #[arg(long, value_name = "PAGES", default_value_t = TrapSettings::default().stale_budget)]
    trap_stale_budget: u32,
}

impl TrapOpts {
    fn settings(&self) -> Option<TrapSettings> {
        if self.no_trap_defence {
            return None;
        }
        let mut t = TrapSettings::default();
        t.near_dup_bits = self.trap_near_dup_bits;
        t.window = self.trap_window;
        t.near_dup_pct = self.trap_near_dup_pct;
        t.barren_budget = self.trap_barren_budget;
        t.facet_budget = self.trap_facet_budget;
        t.host_dup_run = self.trap_host_dup_run;
        t.copy_pct = self.trap_copy_pct;
        t.stale_budget = self.trap_stale_budget;
        Some(t)
    }
}

impl TuningOpts {
    fn settings(&self) -> Result<Settings> {
        let mut s = Settings::default();
        s.crawl.concurrency = self.concurrency.max(1);
        s.crawl.per_host = self.per_host.max(1);
        s.crawl.min_delay = Duration::from_millis(self.delay_ms);
        s.crawl.max_pages = self.max_pages;
        s.crawl.reprocess_after = self.reprocess_after.map(Duration::from_secs);
        s.crawl.traps = self.traps.settings();
        s.crawl.sitemaps = !self.no_sitemaps;
        s.crawl.index = !self.no_index;
        s.policy.scope = self.scope.into();
        s.policy.max_depth = self.max_depth;
        s.policy.allow = compile(&self.allow, "--allow")?;
        s.policy.deny = compile(&self.deny, "--deny")?;
        s.policy.normalize.strip_tracking_params = !self.keep_tracking;
        s.policy.normalize.sort_query = self.sort_query;
        s.fetch.user_agent = self.user_agent.clone();
        s.fetch.max_body_bytes = self.max_body;
        s.fetch.total_timeout = Duration::from_secs(self.timeout.max(1));
        Ok(s)
    }
}

/// A URL's own watch interval as `add_url` reads it: `off` (not watched,
/// not even at --recrawl-every), or a duration of 1s at the least.
pub(crate) fn parse_watch(text: &str) -> Result<Millis, String> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(WATCH_OFF);
    }
    check_every(parse_duration(text)?).map_err(|e| e.to_string())
}

/// `500ms`, `90s`, `10min` (or `10m`), `2h`; a bare number is seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: try 90s, 10min or 1h"))?;
    let seconds = match unit.trim() {
        "ms" => number / 1_000.0,
        "" | "s" | "sec" | "secs" => number,
        "m" | "min" | "mins" => number * 60.0,
        "h" => number * 3_600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use ms, s, min or h"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

/// The exit code and the one line an error ends the command with: a store
/// failure has exit codes of its own ([`EXIT_CODES`]) and says what to do.
pub(crate) fn failure(e: &anyhow::Error) -> (ExitCode, String) {
    let store = e.chain().find_map(|c| match c.downcast_ref::<AppError>() {
        Some(AppError::Store(failure)) => Some(failure),
        _ => None,
    });
    match store {
        Some(failure) => {
            let code = match failure.kind {
                StoreFailureKind::Unreachable { .. } => EXIT_STORE_UNREACHABLE,
                _ => EXIT_STORE_FAILED,
            };
            (ExitCode::from(code), format!("error: {failure}"))
        }
        None => (ExitCode::FAILURE, format!("error: {e:#}")),
    }
}

fn compile(patterns: &[String], flag: &str) -> Result<Vec<Regex>> {
    patterns
        .iter()
        .map(|p| Regex::new(p).with_context(|| format!("{flag} {p:?} is not a valid regex")))
        .collect()
}

pub(crate) async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Crawl { urls, opts } => {
            let seeds: Vec<(String, OperationSpec)> = urls
                .into_iter()
                .map(|u| (u, OperationSpec::crawl()))
                .collect();
            let (code, summary) = crawl(&opts, &seeds).await?;
            if let Some(summary) = summary {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            }
            Ok(code)
        }
        Command::SearchText {
            url,
            text,
            opts,
            connect,
            cookie_file,
            exact,
        } => {
            let operation = if exact {
                OperationSpec::search_text_exact(&text)
            } else {
                OperationSpec::search_text(&text)
            };
            builtin_operations().validate(&operation)?;
            if let (Some(addr), Some(cookie_file)) = (connect, cookie_file) {
                let remote = RemoteOpts {
                    connect: addr,
                    cookie_file,
                    json: opts.json,
                    wait: 10,
                };
                let req = ControlRequest::AddUrl {
                    url,
                    operation,
                    again: false,
                    every_ms: None,
                };
                return one_shot(&remote, req).await;
            }
            let (code, crawled) = crawl(&opts, &[(url, operation)]).await?;
            let store = opts.store.open().await?;
            let results = store.search_results(Some(&text)).await?;
            if let Some(crawled) = crawled {
                let doc = serde_json::json!({ "crawl": crawled, "results": results });
                println!("{}", serde_json::to_string_pretty(&doc)?);
            } else {
                println!("{} page(s) contain {:?}:", results.len(), text);
                for r in &results {
                    let positions: Vec<String> = r.positions.iter().map(u64::to_string).collect();
                    println!("{}\t{}", r.url, positions.join(","));
                    for c in &r.contexts {
                        println!("\t{c}");
                    }
                }
            }
            Ok(code)
        }
        Command::Start {
            node,
            urls,
            store,
            tuning,
            store_outage_limit,
            supervision,
            monitor,
        } => {
            let master = Some(MasterOpts {
                store: &store,
                seeds: urls,
                store_outage_limit,
                intensity: supervision.intensity(),
                monitor: &monitor,
            });
            serve_node(&node, master, &tuning, None).await
        }
        Command::Node {
            node,
            join,
            master_grace,
            tuning,
        } => {
            let grace = (master_grace > 0).then(|| Duration::from_secs(master_grace));
            serve_node(&node, None, &tuning, Some((&join, grace))).await
        }
        Command::Console { remote } => {
            let conn = console::connect(
                &remote.connect,
                &remote.cookie_file,
                Duration::from_secs(remote.wait),
            )
            .await?;
            let failed = console::run_console(conn, &remote.connect, remote.json).await?;
            // At a terminal the operator saw each error; a script reading
            // a pipe's exit code learns that some command failed.
            let piped = !std::io::stdin().is_terminal();
            Ok(if piped && failed > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::AddUrl {
            url,
            search,
            mirror,
            again,
            every,
            remote,
        } => {
            let operation = match search {
                Some(text) => OperationSpec::search_text(text),
                None if mirror => web_crawler::operations::mirror(),
                None => OperationSpec::crawl(),
            };
            one_shot(
                &remote,
                ControlRequest::AddUrl {
                    url,
                    operation,
                    again,
                    every_ms: every
                        .as_deref()
                        .map(parse_watch)
                        .transpose()
                        .map_err(|e| anyhow::anyhow!("--every: {e}"))?,
                },
            )
            .await
        }
        Command::Status { remote } => one_shot(&remote, ControlRequest::Status).await,
        Command::Search {
            query,
            db,
            index,
            limit,
            json,
            ranking,
            connect,
            cookie_file,
            wait,
        } => {
            if let (Some(addr), Some(cookie_file)) = (connect, cookie_file) {
                let conn = console::connect(&addr, &cookie_file, Duration::from_secs(wait)).await?;
                let answer = conn.search(&query, limit).await;
                conn.close();
                print_answer(&answer?, &query, json)?;
                return Ok(ExitCode::SUCCESS);
            }
            let dir = index.clone().unwrap_or_else(|| index_dir_for(&db));
            let index = match SearchIndex::open_read_only(&dir) {
                Ok(index) => index,
                Err(SearchError::NoIndex { .. }) => {
                    let store = index.is_none().then(|| (db.as_path(), db.exists()));
                    bail!("{}", no_index(&dir, store));
                }
                Err(e) => {
                    return Err(anyhow::Error::new(e)
                        .context(format!("cannot open the search index at {}", dir.display())));
                }
            };
            let opts = SearchOptions::default()
                .limit(limit)
                .ranking(ranking.into());
            let answer = index
                .search(&query, &opts)
                .with_context(|| format!("cannot search for {query:?}"))?;
            print_answer(&answer, &query, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Index {
            action: IndexAction::Rebuild { store, tuning },
        } => rebuild_index(&store, &tuning).await,
        Command::Report { what } => {
            report(what).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Refuse, in the master's words, a seed the master would refuse: before
/// anything is opened or created for it.
fn check_seeds<'a>(
    settings: &Settings,
    seeds: impl IntoIterator<Item = (&'a str, &'a OperationSpec)>,
) -> Result<()> {
    let policy = CrawlPolicy::new(settings.policy.clone());
    for (url, operation) in seeds {
        if let Err(why) = policy.seed(url, operation) {
            bail!("{}", why.of_url(url));
        }
    }
    Ok(())
}

/// `--webhook`: a URL read as every URL a user gives is
/// ([`web_crawler::normalize::parse_user_url`]).
fn user_url(text: &str) -> Result<url::Url, String> {
    web_crawler::normalize::parse_user_url(text).map_err(|e| e.to_string())
}

/// Crawl to the end (or a signal) and print the summary; with `--json` the
/// summary is returned instead, for the caller's one JSON document.
async fn crawl(
    opts: &CrawlOpts,
    seeds: &[(String, OperationSpec)],
) -> Result<(ExitCode, Option<serde_json::Value>)> {
    let mut settings = opts.store.with_index(opts.settings()?);
    // Before a store or an index is made for a crawl that cannot start.
    check_seeds(&settings, seeds.iter().map(|(u, op)| (u.as_str(), op)))?;
    let metrics = match opts.metrics {
        Some(addr) => {
            Some(serve_metrics(addr, &settings.crawl.node_name.clone(), &mut settings).await?)
        }
        None => None,
    };
    let archive = opts
        .tuning
        .archive
        .archive(opts.store.archive_dir(), &settings.crawl.node_name);
    settings.archive = Some(archive.clone());
    let store = opts.store.open_for_crawl().await?;
    let started = Instant::now();
    let app = start(store.clone(), settings).await?;
    for (url, op) in seeds {
        if let Err(e) = app.add_url_with(url, op.clone()).await {
            app.stop(Duration::from_secs(1)).await.ok();
            bail!("{e}");
        }
    }
    let progress = !opts.quiet && std::io::stderr().is_terminal();
    let mut signals = StopSignals::new()?;
    let track = async {
        match &metrics {
            Some(m) => m.track(&app).await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        r = app.wait_idle() => Ok(r?),
        _ = show_progress(&app, progress) => Err(ExitCode::FAILURE),
        _ = track => Err(ExitCode::FAILURE),
        code = signals.first() => Err(code),
    };
    let fetching = started.elapsed();
    // The crawl is done when every page it fetched is searchable: the
    // index, which took only what fetching left of the CPU, catches up.
    let mut interrupted = None;
    if outcome.is_ok() {
        tokio::select! {
            r = index_caught_up(&app) => r?,
            _ = show_progress(&app, progress) => {}
            code = signals.first() => interrupted = Some(code),
        }
    }
    if progress {
        eprintln!();
    }
    let times = RunTimes {
        fetching,
        total: started.elapsed(),
    };
    let status = app.status().await?;
    app.stop(Duration::from_secs(10)).await?;
    archive.close()?;
    let summary = summary(&*store, &status, outcome.ok(), times, opts.json).await?;
    let code = match (outcome, interrupted) {
        (Err(code), _) | (Ok(_), Some(code)) => code,
        _ if nothing_fetched(status.fetched_this_run, status.errors_this_run) => {
            eprintln!("no page could be fetched: every request of this run failed (reasons above)");
            ExitCode::from(NOTHING_FETCHED)
        }
        _ => ExitCode::SUCCESS,
    };
    Ok((code, summary))
}

/// Exit code of a crawl whose every request failed (an unreachable seed, a
/// typo in its host): a script must not read it as done.
const NOTHING_FETCHED: u8 = 2;

/// A run that tried and got no answer at all; a run with nothing left to
/// do (every page already processed) tried nothing, and is done.
fn nothing_fetched(fetched: u64, errors: u64) -> bool {
    fetched == 0 && errors > 0
}

/// SIGINT and SIGTERM: the first stops gracefully (in-flight URLs finish or
/// go back to pending, the summary is printed), a second one at once.
struct StopSignals {
    term: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn new() -> Result<Self> {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        Ok(Self { term })
    }

    /// Wait for the first signal and return the exit code it stands for
    /// (128 + its number); from then on a second one ends the process.
    async fn first(&mut self) -> ExitCode {
        let code = tokio::select! {
            _ = tokio::signal::ctrl_c() => 130,
            _ = self.term.recv() => 143,
        };
        eprintln!("stopping (a second signal stops at once)");
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        tokio::spawn(async move {
            let again = async {
                match &mut term {
                    Ok(term) => term.recv().await,
                    Err(_) => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = again => {}
            }
            std::process::exit(i32::from(code));
        });
        ExitCode::from(code)
    }
}

/// Wait until everything queued for the index is committed (at once
/// without an index).
async fn index_caught_up(app: &AppHandle) -> Result<()> {
    if app.status().await?.index.is_none() {
        return Ok(());
    }
    // Each wait is bounded; the indexer goes on between them.
    while let Err(e) = app.flush_index().await {
        if !matches!(e, AppError::Stopped(_)) {
            return Err(e.into());
        }
    }
    Ok(())
}

/// How long a crawl fetched, and how long it ran in all (the index
/// catching up after fetching ended).
#[derive(Clone, Copy, Debug)]
struct RunTimes {
    fetching: Duration,
    total: Duration,
}

/// Live progress on stderr, once a second; never returns.
async fn show_progress(app: &AppHandle, enabled: bool) {
    if !enabled {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Ok(s) = app.status().await {
            eprint!("\r\x1b[K{}", progress_line(&s));
            let _ = std::io::stderr().flush();
        }
    }
}

/// The live progress line: requests in flight (at most `--per-host` per
/// host) apart from the URLs claimed from the store for them and those
/// still pending there.
fn progress_line(s: &web_crawler::Status) -> String {
    let away = s
        .store_unreachable_since
        .map(|since| format!("  store unreachable since {}", utc_time(since)))
        .unwrap_or_default();
    let index = s
        .index
        .map(|i| format!("  indexed {} of {}", i.indexed, i.queued))
        .unwrap_or_default();
    format!(
        "{} pages  {:.0} pages/s (avg {:.0})  {} in flight  URLs: {} claimed, {} pending  {} errors{index}{away}",
        s.fetched_this_run,
        s.recent_pages_per_sec,
        s.pages_per_sec,
        console::requests(s.requests_in_flight),
        s.in_flight,
        s.store.pending,
        s.errors_this_run
    )
}

async fn summary(
    store: &dyn Store,
    status: &web_crawler::Status,
    outcome: Option<IdleReason>,
    times: RunTimes,
    json: bool,
) -> Result<Option<serde_json::Value>> {
    let histogram = store.status_histogram().await?;
    let counts = store.counts().await?;
    let elapsed = times.total;
    let rate = status.fetched_this_run as f64 / times.fetching.as_secs_f64().max(1e-3);
    let indexing = times.total.saturating_sub(times.fetching);
    let ended = Ended::of(outcome);
    if json {
        let by_status: Vec<serde_json::Value> = histogram
            .iter()
            .map(|(code, n)| serde_json::json!({"http_returncode": code, "pages": n}))
            .collect();
        let doc = serde_json::json!({
            "ended": ended.as_str(),
            "fetched": status.fetched_this_run,
            "elapsed_s": elapsed.as_secs_f64(),
            "fetch_s": times.fetching.as_secs_f64(),
            "index_s": indexing.as_secs_f64(),
            "index": status.index,
            "pages_per_sec": rate,
            "by_status": by_status,
            "store": counts,
        });
        return Ok(Some(doc));
    }
    // Why pages failed, in words: an unreachable seed must not be a bare count.
    let failed = if counts.failed > 0 {
        store
            .processed(PageQuery {
                limit: Some(FAILED_SHOWN),
                offset: 0,
                only_failed: true,
                newest_first: false,
            })
            .await?
            .into_iter()
            .map(|p| {
                let why = p
                    .record
                    .error
                    .clone()
                    .or_else(|| p.record.http_returncode.map(|c| format!("HTTP {c}")))
                    .unwrap_or_default();
                (p.record.url, why)
            })
            .collect()
    } else {
        Vec::new()
    };
    let run = RunFacts {
        ended,
        fetched: status.fetched_this_run,
        times,
        index: status.index,
    };
    print!("{}", summary_text(&run, &histogram, &counts, &failed));
    Ok(None)
}

/// Why a crawl ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    NothingLeft,
    BudgetReached,
    Interrupted,
}

impl Ended {
    fn of(outcome: Option<IdleReason>) -> Self {
        match outcome {
            Some(IdleReason::FrontierEmpty) => Ended::NothingLeft,
            Some(IdleReason::BudgetReached) => Ended::BudgetReached,
            None => Ended::Interrupted,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Ended::NothingLeft => "nothing left to crawl",
            Ended::BudgetReached => "page budget reached",
            Ended::Interrupted => "interrupted",
        }
    }
}

/// What this run did, as the summary tells it.
#[derive(Clone, Copy, Debug)]
struct RunFacts {
    ended: Ended,
    fetched: u64,
    times: RunTimes,
    index: Option<web_crawler::actors::IndexCounts>,
}

/// The summary: this run's numbers first, labelled as such, then the
/// store's totals over every run on it (a resumed run's store holds the
/// earlier runs' pages too), then the failed pages (`url`, why).
fn summary_text(
    run: &RunFacts,
    histogram: &[(Option<u16>, u64)],
    counts: &web_crawler::actors::StoreCounts,
    failed: &[(String, String)],
) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let rate = run.fetched as f64 / run.times.fetching.as_secs_f64().max(1e-3);
    let indexing = run.times.total.saturating_sub(run.times.fetching);
    let _ = writeln!(
        out,
        "crawl ended ({}): this run fetched {} pages in {:.1}s, {:.1} pages/s",
        run.ended.as_str(),
        run.fetched,
        run.times.fetching.as_secs_f64(),
        rate
    );
    match run.ended {
        Ended::Interrupted => {
            let _ = writeln!(
                out,
                "to resume, run the same command again ({} URLs are left pending)",
                counts.pending
            );
        }
        Ended::BudgetReached if counts.pending > 0 => {
            let _ = writeln!(
                out,
                "{} URLs are left pending: the same command again crawls up to --max-pages more",
                counts.pending
            );
        }
        _ => {}
    }
    if let Some(index) = run.index {
        let left = if index.backlog() > 0 {
            format!(
                "; {} wait in the queue and are indexed when the crawl runs again",
                index.backlog()
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "search index: {} pages indexed this run, searchable {:.1}s after fetching ended{left}",
            index.indexed,
            indexing.as_secs_f64(),
        );
    }
    let _ = writeln!(out, "the store, all runs so far:");
    let _ = writeln!(out, "  pages by status:");
    for (code, n) in histogram {
        let label = code.map_or_else(|| "no response".to_string(), |c| c.to_string());
        let _ = writeln!(out, "  {label:>12}  {n}");
    }
    let _ = writeln!(
        out,
        "  processed {}  failed {}  duplicates skipped {}  robots-blocked {}  still pending {}",
        counts.processed, counts.failed, counts.duplicates, counts.robots_blocked, counts.pending
    );
    for (url, why) in failed {
        let _ = writeln!(out, "  failed  {url}  {why}");
    }
    if counts.failed > failed.len() as u64 {
        let _ = writeln!(out, "  (all of them: web_crawler report broken-links)");
    }
    out
}

/// Failed pages the summary lists with their reason.
const FAILED_SHOWN: usize = 5;

/// Why `search` has no index at `dir`, and the way on. `store` is the
/// crawl's store file the index was looked for beside (with whether it
/// exists); `None` when `--index` named the directory.
fn no_index(dir: &Path, store: Option<(&Path, bool)>) -> String {
    match store {
        Some((db, true)) => format!(
            "the crawl in {db} has no search index (it ran with --no-index, or {dir} was \
             removed): `web_crawler index rebuild --db {db}` makes one from what it fetched",
            db = db.display(),
            dir = dir.display()
        ),
        Some((db, false)) => format!(
            "no crawl at {db}, so no search index: crawl first (`web_crawler crawl URL --db \
             {db}`), or give the store with --db",
            db = db.display()
        ),
        None => format!(
            "no search index at {dir}: `web_crawler index rebuild --index {dir}` (with the \
             crawl's --db or --mongodb) makes one from what the crawl fetched",
            dir = dir.display()
        ),
    }
}

/// Print a search answer: numbered results, or one JSON document.
fn print_answer(answer: &SearchAnswer, query: &str, json: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(answer)?)?;
        return Ok(());
    }
    let bold = std::io::stdout().is_terminal();
    if let Some(corrected) = &answer.did_you_mean {
        writeln!(out, "Did you mean: {corrected}  (showing its results)")?;
    }
    if answer.results.is_empty() {
        let searched = answer.did_you_mean.as_deref().unwrap_or(query);
        writeln!(out, "No results for {searched:?}.")?;
    }
    for (i, hit) in answer.results.iter().enumerate() {
        let title = if hit.title.is_empty() {
            "(untitled)"
        } else {
            &hit.title
        };
        writeln!(out, "{:>2}. {title}", i + 1)?;
        writeln!(out, "    {}  (score {:.3})", hit.url, hit.score)?;
        if !hit.snippet.is_empty() {
            writeln!(out, "    {}", marked(&hit.snippet, &hit.highlights, bold))?;
        }
    }
    Ok(())
}

/// The snippet with its matched terms in bold (on a terminal).
fn marked(snippet: &str, highlights: &[std::ops::Range<usize>], bold: bool) -> String {
    if !bold {
        return snippet.to_string();
    }
    let mut out = String::with_capacity(snippet.len() + 8 * highlights.len());
    let mut at = 0;
    for r in highlights {
        if r.start < at || r.end > snippet.len() {
            continue;
        }
        out.push_str(&snippet[at..r.start]);
        out.push_str("\x1b[1m");
        out.push_str(&snippet[r.clone()]);
        out.push_str("\x1b[0m");
        at = r.end;
    }
    out.push_str(&snippet[at..]);
    out
}

async fn report(what: Report) -> Result<()> {
    match what {
        Report::Pages { list } => report_pages(&list).await,
        Report::BrokenLinks { list } => {
            let mut broken = list.store.open().await?.broken_links().await?;
            list.bound(&mut broken);
            let mut out = std::io::stdout().lock();
            if list.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&broken)?)?;
                return Ok(());
            }
            for b in &broken {
                let why = b
                    .http_returncode
                    .map(|c| format!("HTTP {c}"))
                    .or_else(|| b.error.clone())
                    .unwrap_or_default();
                writeln!(out, "{}\t{}", b.url, why)?;
                for r in &b.referral_list {
                    writeln!(out, "\tlinked from {r}")?;
                }
            }
            Ok(())
        }
        Report::SearchResults { text, list } => {
            let store = list.store.open().await?;
            let mut results = store.search_results(text.as_deref()).await?;
            list.bound(&mut results);
            let mut out = std::io::stdout().lock();
            if list.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&results)?)?;
                return Ok(());
            }
            writeln!(out, "url\ttext\tpositions")?;
            for r in &results {
                let positions: Vec<String> = r.positions.iter().map(u64::to_string).collect();
                writeln!(out, "{}\t{:?}\t{}", r.url, r.text, positions.join(","))?;
            }
            Ok(())
        }
        Report::Hosts { list } => {
            let mut hosts = list.store.open().await?.host_summaries().await?;
            list.bound(&mut hosts);
            let mut out = std::io::stdout().lock();
            if list.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&hosts)?)?;
                return Ok(());
            }
            writeln!(out, "{}", console::HOSTS_HEADER)?;
            for h in &hosts {
                writeln!(out, "{}", console::host_row(h))?;
            }
            Ok(())
        }
        Report::Availability { history } => {
            let mut rows = availability(&history.read().await?);
            history.list.bound(&mut rows);
            let mut out = std::io::stdout().lock();
            if history.list.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
                return Ok(());
            }
            writeln!(out, "{}", console::AVAILABILITY_HEADER)?;
            for row in &rows {
                writeln!(out, "{}", console::availability_row(row))?;
            }
            Ok(())
        }
        Report::Changes { history } => {
            let mut rows = changes(&history.read().await?);
            history.list.bound(&mut rows);
            let mut out = std::io::stdout().lock();
            if history.list.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
                return Ok(());
            }
            writeln!(out, "{}", console::CHANGES_HEADER)?;
            for row in &rows {
                writeln!(out, "{}", console::change_row(row))?;
            }
            Ok(())
        }
        Report::Graph {
            format,
            json,
            host,
            output,
            store,
        } => {
            let format = if json { GraphFormat::Json } else { format };
            let graph = graph::read_graph(store.open().await?.as_ref()).await?;
            match &output {
                Some(path) => {
                    let file = std::fs::File::create(path)
                        .with_context(|| format!("cannot create {}", path.display()))?;
                    let mut out = std::io::BufWriter::new(file);
                    graph.write(format.into(), host.as_deref(), &mut out)?;
                    out.flush()
                        .with_context(|| format!("cannot write {}", path.display()))?;
                }
                None => {
                    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                    graph.write(format.into(), host.as_deref(), &mut out)?;
                    out.flush()?;
                }
            }
            Ok(())
        }
    }
}

impl ListOpts {
    /// Keep the first `--limit` rows.
    fn bound<T>(&self, rows: &mut Vec<T>) {
        if let Some(limit) = self.limit {
            rows.truncate(limit);
        }
    }
}

/// `report pages`: each page with its links in (processed pages linking to
/// it) and out (distinct URLs it links to), the site graph's counts.
async fn report_pages(list: &ListOpts) -> Result<()> {
    let store = list.store.open().await?;
    let pages = store
        .processed(PageQuery {
            limit: list.limit,
            ..PageQuery::default()
        })
        .await?;
    let urls: Vec<&str> = pages.iter().map(|p| p.record.url.as_str()).collect();
    let counts = graph::link_counts(store.as_ref(), &urls).await?;
    let count = |url: &str| counts.get(url).copied().unwrap_or_default();
    let mut out = std::io::stdout().lock();
    if list.json {
        let mut rows = Vec::with_capacity(pages.len());
        for p in &pages {
            let mut row = serde_json::to_value(p)?;
            let (links_in, links_out) = count(&p.record.url);
            row["in"] = links_in.into();
            row["out"] = links_out.into();
            rows.push(row);
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
    writeln!(out, "status\ttype\tsize\tlinks\tin\tout\turl\tnote")?;
    for p in &pages {
        let r = &p.record;
        let note = r
            .error
            .clone()
            .or_else(|| r.redirect_to.as_ref().map(|t| format!("→ {t}")))
            .or_else(|| p.duplicate_of.as_ref().map(|d| format!("duplicate of {d}")))
            .unwrap_or_default();
        let (links_in, links_out) = count(&r.url);
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{links_in}\t{links_out}\t{}\t{}",
            r.http_returncode.map_or("-".into(), |c| c.to_string()),
            r.content_type.as_deref().unwrap_or("-"),
            r.content_length.map_or("-".into(), |c| c.to_string()),
            r.links_count,
            r.url,
            note
        )?;
    }
    Ok(())
}

/// Send one request to a running cluster and print the reply.
async fn one_shot(remote: &RemoteOpts, req: ControlRequest) -> Result<ExitCode> {
    let conn = console::connect(
        &remote.connect,
        &remote.cookie_file,
        Duration::from_secs(remote.wait),
    )
    .await?;
    let reply = console::request(&conn, &req).await;
    conn.close();
    let reply = reply?;
    if remote.json {
        println!("{}", serde_json::to_string_pretty(&reply)?);
    } else {
        println!("{}", console::render(&reply));
    }
    Ok(ExitCode::SUCCESS)
}

/// `index rebuild`: every successful HTML page into a new index, read from
/// the archive when it holds the page, fetched again otherwise.
async fn rebuild_index(store_opts: &StoreOpts, tuning: &TuningOpts) -> Result<ExitCode> {
    let dir = store_opts.index_dir();
    if store_opts.mongodb.is_none() && !store_opts.db.exists() {
        bail!("no crawl database at {}", store_opts.db.display());
    }
    let store = store_opts.open_for_crawl().await?;
    let pages = store
        .processed(PageQuery {
            limit: None,
            offset: 0,
            only_failed: false,
            newest_first: false,
        })
        .await?;
    let urls: Vec<String> = pages
        .into_iter()
        .filter(|p| {
            p.duplicate_of.is_none()
                && p.record.error.is_none()
                && p.record
                    .http_returncode
                    .is_some_and(|c| (200..300).contains(&c))
                && p.record
                    .content_type
                    .as_deref()
                    .is_some_and(|t| t.to_ascii_lowercase().contains("html"))
        })
        .map(|p| p.record.url)
        .collect();
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove the old index at {}", dir.display()))?;
    }
    let archive_dir = tuning
        .archive
        .warc
        .clone()
        .unwrap_or_else(|| store_opts.archive_dir());
    let started = Instant::now();
    let (from_archive, urls) = index_from_archive(&archive_dir, &dir, urls, tuning)?;
    if from_archive > 0 {
        eprintln!(
            "{from_archive} pages read from the archive at {}",
            archive_dir.display()
        );
    }
    let mut settings = tuning.settings()?;
    settings.crawl.index = true;
    settings.crawl.sitemaps = false;
    // The pages again, and no page they link to.
    settings.policy.max_depth = Some(0);
    settings.index = Some(dir.clone());
    if urls.is_empty() && from_archive > 0 {
        eprintln!(
            "index rebuilt: {from_archive} pages in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let app = start(store, settings).await?;
    eprintln!("fetching {} pages again into {}", urls.len(), dir.display());
    for chunk in urls.chunks(512) {
        let queued = futures_util::future::join_all(
            chunk
                .iter()
                .map(|url| app.add_url_again(url, OperationSpec::crawl())),
        )
        .await;
        if let Some(e) = queued.into_iter().find_map(Result::err) {
            app.stop(Duration::from_secs(1)).await.ok();
            bail!("{e}");
        }
    }
    let mut signals = StopSignals::new()?;
    let idle = tokio::select! {
        r = app.wait_idle() => Ok(r?),
        code = signals.first() => Err(code),
    };
    app.stop(Duration::from_secs(30)).await?;
    let indexed = SearchIndex::open_read_only(&dir)?.page_count();
    eprintln!(
        "index rebuilt: {indexed} pages in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(match idle {
        Ok(_) => ExitCode::SUCCESS,
        Err(code) => code,
    })
}

/// Index the pages of `urls` that the archive at `archive_dir` holds (a
/// 2xx response) into the index at `index_dir`; returns how many, and the
/// URLs left to fetch.
fn index_from_archive(
    archive_dir: &Path,
    index_dir: &Path,
    urls: Vec<String>,
    tuning: &TuningOpts,
) -> Result<(usize, Vec<String>)> {
    use web_crawler::actors::search::INDEX_TEXT_BYTES;
    use web_crawler::actors::{Extractor, PageIndex, PageText};
    let archive = ArchiveReader::open(archive_dir)?;
    if archive.is_empty() {
        return Ok((0, urls));
    }
    let extractor =
        web_crawler::extract::HtmlExtractor::new(tuning.settings()?.policy.normalize.clone());
    let mut index = SearchIndex::open(index_dir)
        .with_context(|| format!("cannot create the index at {}", index_dir.display()))?;
    let (mut indexed, mut missing) = (0, Vec::new());
    for url in urls {
        let page = match archive.page(&url) {
            Ok(Some(page)) if (200..300).contains(&page.status) => page,
            Ok(_) => {
                missing.push(url);
                continue;
            }
            Err(e) => {
                let why = web_crawler::actors::error_chain(&e);
                eprintln!("{why}; fetching {url} again");
                missing.push(url);
                continue;
            }
        };
        let extracted = extractor.extract(&url, &page, INDEX_TEXT_BYTES);
        if let Some(text) = PageText::of(&url, &extracted) {
            index.add(&text)?;
        }
        indexed += 1;
    }
    PageIndex::commit(&mut index)?;
    Ok((indexed, missing))
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

/// Serve `--metrics` at `addr` for the node `name`, counted by its tree.
async fn serve_metrics(
    addr: std::net::SocketAddr,
    name: &str,
    settings: &mut Settings,
) -> Result<Arc<NodeMetrics>> {
    let metrics = NodeMetrics::new(name);
    let bound = prometheus::serve(addr, metrics.clone()).await?;
    eprintln!("metrics at http://{bound}/metrics");
    settings.metrics = metrics.clone();
    Ok(metrics)
}

/// What the master's node (`start`) is given beyond a worker's.
struct MasterOpts<'a> {
    store: &'a StoreOpts,
    seeds: Vec<String>,
    store_outage_limit: Duration,
    intensity: RestartIntensity,
    monitor: &'a MonitorOpts,
}

/// Run a node until Ctrl-C / SIGTERM, or until its tree stops by itself.
/// The master's node is given its store, seeds and the settings of
/// [`MasterOpts`].
async fn serve_node(
    node: &NodeOpts,
    master: Option<MasterOpts<'_>>,
    tuning: &TuningOpts,
    join: Option<(&str, Option<Duration>)>,
) -> Result<ExitCode> {
    let cookie = console::read_cookie(&node.cookie_file)?;
    let mut settings = tuning.settings()?;
    settings.crawl.node_name = node.name.clone();
    if let Some(m) = &master {
        let crawl = OperationSpec::crawl();
        check_seeds(&settings, m.seeds.iter().map(|u| (u.as_str(), &crawl)))?;
        settings.crawl.store_outage_limit = m.store_outage_limit;
        settings.crawl.restart_intensity = m.intensity;
        m.monitor.apply(&mut settings)?;
    }
    let metrics = match node.metrics {
        Some(addr) => Some(serve_metrics(addr, &node.name, &mut settings).await?),
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
    let server = cluster::start_node(&node.name, node.listen, &cookie, true).await?;
    let app = match &master {
        Some(m) => {
            start(
                m.store.open_for_crawl().await?,
                m.store.with_index(settings),
            )
            .await?
        }
        None => start_worker(settings).await?,
    };
    if let Some((addr, _)) = join {
        cluster::join(&server, addr, Duration::from_secs(10)).await?;
        eprintln!("node {} joined the cluster at {addr}", node.name);
    }
    if let Some(m) = &master {
        for url in &m.seeds {
            app.add_url(url)
                .await
                .with_context(|| format!("seed {url}"))?;
        }
    }
    eprintln!("node {} listening on {}", node.name, node.listen);
    let mut signals = StopSignals::new()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_shows_requests_apart_from_claimed_urls() {
        // One host at --per-host 1: one request, seven more of its URLs
        // claimed and waiting at the pool.
        let mut s = web_crawler::Status {
            fetched_this_run: 12,
            in_flight: 8,
            requests_in_flight: 1,
            errors_this_run: 2,
            ..web_crawler::Status::default()
        };
        s.store.pending = 350;
        assert_eq!(
            progress_line(&s),
            "12 pages  0 pages/s (avg 0)  1 request in flight  URLs: 8 claimed, 350 pending  2 errors"
        );
    }

    #[test]
    fn progress_shows_the_rate_now_apart_from_the_average() {
        // Idle after a burst: nothing now, the run's average still high.
        let s = web_crawler::Status {
            fetched_this_run: 3000,
            pages_per_sec: 52.4,
            recent_pages_per_sec: 0.0,
            ..web_crawler::Status::default()
        };
        assert!(
            progress_line(&s).starts_with("3000 pages  0 pages/s (avg 52)  "),
            "{}",
            progress_line(&s)
        );
    }

    fn run_facts(ended: Ended, fetched: u64) -> RunFacts {
        RunFacts {
            ended,
            fetched,
            times: RunTimes {
                fetching: Duration::from_secs(10),
                total: Duration::from_secs(10),
            },
            index: None,
        }
    }

    #[test]
    fn an_interrupted_crawl_says_how_to_resume() {
        let counts = web_crawler::actors::StoreCounts {
            processed: 29,
            pending: 31,
            ..Default::default()
        };
        let text = summary_text(
            &run_facts(Ended::Interrupted, 29),
            &[(Some(200), 29)],
            &counts,
            &[],
        );
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("crawl ended (interrupted): this run fetched 29 pages in 10.0s, 2.9 pages/s")
        );
        assert_eq!(
            lines.next(),
            Some("to resume, run the same command again (31 URLs are left pending)")
        );
        let done = summary_text(
            &run_facts(Ended::NothingLeft, 29),
            &[(Some(200), 29)],
            &counts,
            &[],
        );
        assert!(!done.contains("resume"), "{done}");
        let budget = summary_text(
            &run_facts(Ended::BudgetReached, 29),
            &[(Some(200), 29)],
            &counts,
            &[],
        );
        assert_eq!(
            budget.lines().nth(1),
            Some("31 URLs are left pending: the same command again crawls up to --max-pages more")
        );
    }

    #[test]
    fn a_resumed_run_labels_its_numbers_apart_from_the_stores_totals() {
        // The second run of a crawl: 500 pages now, 529 in the store.
        let counts = web_crawler::actors::StoreCounts {
            processed: 529,
            failed: 1,
            ..Default::default()
        };
        let failed = [("http://a/gone".to_string(), "HTTP 404".to_string())];
        let text = summary_text(
            &run_facts(Ended::NothingLeft, 500),
            &[(Some(200), 528), (Some(404), 1)],
            &counts,
            &failed,
        );
        assert_eq!(
            text,
            "crawl ended (nothing left to crawl): this run fetched 500 pages in 10.0s, 50.0 pages/s\n\
             the store, all runs so far:\n\
             \x20 pages by status:\n\
             \x20          200  528\n\
             \x20          404  1\n\
             \x20 processed 529  failed 1  duplicates skipped 0  robots-blocked 0  still pending 0\n\
             \x20 failed  http://a/gone  HTTP 404\n"
        );
    }

    #[test]
    fn search_without_an_index_says_why_and_the_way_on() {
        let dir = Path::new("c.db.index");
        let no_index_crawl = no_index(dir, Some((Path::new("c.db"), true)));
        assert_eq!(
            no_index_crawl,
            "the crawl in c.db has no search index (it ran with --no-index, or c.db.index was \
             removed): `web_crawler index rebuild --db c.db` makes one from what it fetched"
        );
        assert!(no_index(dir, Some((Path::new("c.db"), false))).starts_with("no crawl at c.db"),);
        let named = no_index(Path::new("idx"), None);
        assert!(
            named.starts_with("no search index at idx: `web_crawler index rebuild --index idx`"),
            "{named}"
        );
    }

    #[test]
    fn a_limit_of_zero_is_a_usage_error() {
        let search = Cli::try_parse_from(["web_crawler", "search", "csv", "--limit", "0"]);
        let e = search.unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(e.to_string().contains("0 would show nothing"), "{e}");
        let report = Cli::try_parse_from(["web_crawler", "report", "pages", "--limit", "0"]);
        assert!(report.is_err());
        assert!(Cli::try_parse_from(["web_crawler", "search", "csv", "--limit", "1"]).is_ok());
    }

    #[test]
    fn only_a_crawl_says_its_store_is_created_if_missing() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        let mut help = |path: &[&str]| {
            let mut cmd = &mut cli;
            for name in path {
                cmd = cmd.find_subcommand_mut(name).unwrap();
            }
            cmd.render_long_help().to_string()
        };
        assert!(help(&["crawl"]).contains("created if missing"));
        for report in [&["report", "pages"][..], &["report", "graph"], &["search"]] {
            assert!(!help(report).contains("created if missing"), "{report:?}");
        }
    }

    #[test]
    fn a_run_that_fetched_nothing_fails_only_if_it_tried() {
        assert!(nothing_fetched(0, 3));
        assert!(!nothing_fetched(0, 0), "nothing left to do is done");
        assert!(!nothing_fetched(1, 3), "some answer came");
    }

    #[test]
    fn search_takes_db_or_index_but_not_both() {
        let cli = Cli::try_parse_from(["web_crawler", "search", "rye bread", "--db", "c.db"]);
        match cli.unwrap().command {
            Command::Search {
                query, db, index, ..
            } => {
                assert_eq!(query, "rye bread");
                assert_eq!(index_dir_for(&db), PathBuf::from("c.db.index"));
                assert!(index.is_none());
            }
            other => panic!("{other:?}"),
        }
        let both = ["web_crawler", "search", "q", "--db", "c.db", "--index", "i"];
        assert!(Cli::try_parse_from(both).is_err());
        let bm25 = [
            "web_crawler",
            "search",
            "q",
            "--ranking",
            "bm25",
            "--limit",
            "3",
        ];
        match Cli::try_parse_from(bm25).unwrap().command {
            Command::Search { ranking, limit, .. } => {
                assert_eq!(Ranking::from(ranking), Ranking::PlainBm25);
                assert_eq!(limit, 3);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reports_take_their_own_arguments() {
        let parse = |args: &[&str]| {
            let mut all = vec!["web_crawler", "report"];
            all.extend(args);
            Cli::try_parse_from(all).map(|cli| match cli.command {
                Command::Report { what } => what,
                other => panic!("{other:?}"),
            })
        };
        match parse(&["pages", "--db", "c.db", "--json", "--limit", "3"]).unwrap() {
            Report::Pages { list } => {
                assert!(list.json);
                assert_eq!(list.limit, Some(3));
                assert_eq!(list.store.db, PathBuf::from("c.db"));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["search-results", "rye bread", "--json"]).unwrap() {
            Report::SearchResults { text, list } => {
                assert_eq!(text.as_deref(), Some("rye bread"));
                assert!(list.json);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["search-results"]).unwrap(),
            Report::SearchResults { text: None, .. }
        ));
        assert!(matches!(parse(&["hosts"]).unwrap(), Report::Hosts { .. }));
        match parse(&[
            "graph", "--format", "graphml", "--host", "a:8080", "-o", "g.xml",
        ])
        .unwrap()
        {
            Report::Graph {
                format,
                host,
                output,
                json,
                ..
            } => {
                assert_eq!(graph::Format::from(format), graph::Format::Graphml);
                assert_eq!(host.as_deref(), Some("a:8080"));
                assert_eq!(output, Some(PathBuf::from("g.xml")));
                assert!(!json);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["graph"]).unwrap(),
            Report::Graph {
                format: GraphFormat::Dot,
                ..
            }
        ));
        assert!(parse(&["graph", "--format", "gexf"]).is_err());
        assert!(parse(&["graph", "--format", "dot", "--json"]).is_err());
        assert!(parse(&["nothing"]).is_err());
    }

    #[test]
    fn graph_formats_are_the_library_format_names() {
        for arg in GraphFormat::value_variants() {
            let name = arg.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(name.parse::<graph::Format>(), Ok(graph::Format::from(*arg)));
        }
        assert_eq!(
            GraphFormat::value_variants().len(),
            graph::Format::ALL.len()
        );
    }

    #[test]
    fn durations_read_as_people_write_them() {
        let d = |t| parse_duration(t);
        assert_eq!(d("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(d("90"), Ok(Duration::from_secs(90)));
        assert_eq!(d("10min"), Ok(Duration::from_secs(600)));
        assert_eq!(d("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(d("1.5h"), Ok(Duration::from_secs(5_400)));
        assert_eq!(d("500ms"), Ok(Duration::from_millis(500)));
        assert!(d("soon").unwrap_err().contains("not a duration"));
        assert!(d("3 weeks").unwrap_err().contains("unknown unit"));
        assert!(d("-1s").is_err());
        let limit = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
            Command::Crawl { opts, .. } => opts.store_outage_limit,
            Command::Start {
                store_outage_limit, ..
            } => store_outage_limit,
            other => panic!("{other:?}"),
        };
        assert_eq!(limit(&["w", "crawl", "http://a/"]), Duration::from_secs(60));
        let start = [
            "w",
            "start",
            "--name",
            "m",
            "--listen",
            "127.0.0.1:1",
            "--cookie-file",
            "c",
        ];
        assert_eq!(limit(&start), Duration::from_secs(600));
        let short = ["w", "crawl", "http://a/", "--store-outage-limit", "3s"];
        assert_eq!(limit(&short), Duration::from_secs(3));
    }

    #[test]
    fn a_store_failure_has_its_own_exit_code_and_one_line() {
        use web_crawler::actors::{StoreFailure, StoreFailureKind};
        let away = StoreFailure {
            kind: StoreFailureKind::Unreachable {
                limit: Duration::from_secs(3),
            },
            since: 0,
            cause: "MongoDB is unavailable: no server answered in time".into(),
        };
        let e = anyhow::Error::new(AppError::Store(away.clone())).context("the node stopped");
        let (code, line) = failure(&e);
        assert_eq!(code, ExitCode::from(EXIT_STORE_UNREACHABLE));
        assert_eq!(line, format!("error: {away}"));
        assert!(!line.contains('\n') && !line.contains("Kind:"), "{line}");
        let full = StoreFailure::permanent(0, "the store is full".into());
        let (code, _) = failure(&anyhow::Error::new(AppError::Store(full)));
        assert_eq!(code, ExitCode::from(EXIT_STORE_FAILED));
        let (code, line) = failure(&anyhow::anyhow!("no crawl database at x.db"));
        assert_eq!(code, ExitCode::FAILURE);
        assert_eq!(line, "error: no crawl database at x.db");
    }

    #[test]
    fn marked_bolds_the_highlights_on_a_terminal_only() {
        let bread = [std::ops::Range { start: 4, end: 9 }];
        assert_eq!(marked("rye bread", &bread, false), "rye bread");
        assert_eq!(marked("rye bread", &bread, true), "rye \x1b[1mbread\x1b[0m");
    }

    #[test]
    fn scope_values_are_the_library_scope_names() {
        let names: Vec<String> = ScopeArg::value_variants()
            .iter()
            .map(|arg| {
                let name = arg.to_possible_value().unwrap().get_name().to_string();
                assert_eq!(name.parse::<Scope>(), Ok(Scope::from(*arg)));
                name
            })
            .collect();
        let all: Vec<String> = Scope::ALL.iter().map(Scope::to_string).collect();
        assert_eq!(names, all);
    }
}
