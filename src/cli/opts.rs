//! The flag groups several commands share: which store, how to crawl
//! (tuning, traps, archives, scope) and the supervisor's restart
//! intensity; and the seed check every crawl makes before it starts.

use super::parse::{fetches_at_once, parse_duration, parse_size, timeout_secs, whole};
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use regex::Regex;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use web_crawler::Settings;
use web_crawler::actors::LinkPolicy;
use web_crawler::actors::traps::TrapSettings;
use web_crawler::actors::{
    AppError, AppHandle, OperationSpec, RefusalCode, RestartIntensity, Store, now_ms,
};
use web_crawler::archive::WarcArchive;
use web_crawler::policy::{CrawlPolicy, Scope};
use web_crawler::search::index_dir_for;
use web_crawler::store::{MongoStore, SqliteStore};

/// Which store: the embedded file, or MongoDB when a URI is given.
#[derive(Debug, Args)]
pub(super) struct StoreOpts {
    /// The crawl's embedded store file (SQLite).
    #[arg(long, default_value = "crawler.db")]
    pub(super) db: PathBuf,
    /// Use MongoDB at this URI instead of the embedded store.
    #[arg(long, env = "MONGODB_URI", value_name = "URI")]
    pub(super) mongodb: Option<String>,
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
    pub(super) async fn open(&self) -> Result<Arc<dyn Store>> {
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
    pub(super) async fn open_for_crawl(&self) -> Result<Arc<dyn Store>> {
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
    pub(super) fn index_dir(&self) -> PathBuf {
        match (&self.index, &self.mongodb) {
            (Some(dir), _) => dir.clone(),
            (None, Some(_)) => PathBuf::from(format!("{}.index", self.mongodb_database)),
            (None, None) => index_dir_for(&self.db),
        }
    }

    /// The archive directory when `--warc` names none: `DB.warc` beside the
    /// embedded store, `DATABASE.warc` in the current directory with MongoDB.
    pub(super) fn archive_dir(&self) -> PathBuf {
        match &self.mongodb {
            Some(_) => PathBuf::from(format!("{}.warc", self.mongodb_database)),
            None => PathBuf::from(format!("{}.warc", self.db.display())),
        }
    }

    /// The node's settings with this store's index, unless indexing is off.
    pub(super) fn with_index(&self, mut settings: Settings) -> Settings {
        if settings.crawl.index_pages {
            settings.index_dir = Some(self.index_dir());
        }
        settings
    }
}

/// How to crawl: every node of a cluster takes the same ones.
#[derive(Debug, Args)]
pub(super) struct TuningOpts {
    /// Which links to follow off the referrer's site.
    #[arg(long, value_enum, default_value_t = ScopeArg::Host)]
    scope: ScopeArg,
    /// Stop after fetching this many pages.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = whole::<u64>)]
    max_pages: Option<u64>,
    /// Don't follow links deeper than this from a seed.
    #[arg(long, value_name = "D", allow_negative_numbers = true, value_parser = whole::<u32>)]
    max_depth: Option<u32>,
    /// Pages fetched at once (1 or more).
    #[arg(long, value_name = "N", default_value_t = 32, allow_negative_numbers = true,
          value_parser = fetches_at_once)]
    concurrency: usize,
    /// Requests in flight per host (1 or more).
    #[arg(long, value_name = "N", default_value_t = 1, allow_negative_numbers = true,
          value_parser = fetches_at_once)]
    per_host: usize,
    /// Minimum delay between requests to one host, in milliseconds (0 or
    /// more; robots.txt Crawl-delay wins if longer).
    #[arg(long, value_name = "MS", default_value_t = 250, allow_negative_numbers = true,
          value_parser = whole::<u64>)]
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
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = whole::<u64>)]
    reprocess_after: Option<u64>,
    /// Keep utm_*, gclid, fbclid and similar tracking parameters in URLs
    /// (dropped by default, so a campaign URL is not fetched again).
    #[arg(long)]
    keep_tracking: bool,
    /// Sort query parameters so reordered queries are one URL.
    #[arg(long)]
    sort_query: bool,
    /// Body size cap in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 8 * 1024 * 1024,
          allow_negative_numbers = true, value_parser = whole::<usize>)]
    max_body: usize,
    /// Total time per request, in seconds (1 or more).
    #[arg(long, value_name = "SECS", default_value_t = 30, allow_negative_numbers = true,
          value_parser = timeout_secs)]
    timeout: u64,
    /// Don't read sitemaps (robots.txt `Sitemap:` lines, else /sitemap.xml).
    #[arg(long)]
    no_sitemaps: bool,
    /// Don't add the pages to the full-text index (`web_crawler search`).
    #[arg(long)]
    no_index: bool,
    /// Give each indexed page vectors of its sections (up to 8: the
    /// all-MiniLM-L6-v2 sentence model, installed by `scripts/models.sh`),
    /// so that `search` also finds pages that answer in other words, and
    /// links to the section nearest the question. A few tenths of a
    /// CPU-second a page: for sites of a few thousand pages.
    #[arg(long, conflicts_with = "no_index")]
    semantic: bool,
    #[command(flatten)]
    traps: TrapOpts,
    #[command(flatten)]
    pub(super) archive: ArchiveOpts,
}

impl TuningOpts {
    pub(super) fn settings(&self) -> Result<Settings> {
        let mut s = Settings::default();
        s.crawl.concurrency = self.concurrency;
        s.crawl.per_host = self.per_host;
        s.crawl.min_delay = Duration::from_millis(self.delay_ms);
        s.crawl.max_pages = self.max_pages;
        s.crawl.reprocess_after = self.reprocess_after.map(Duration::from_secs);
        s.crawl.traps = self.traps.settings();
        s.crawl.sitemaps = !self.no_sitemaps;
        s.crawl.index_pages = !self.no_index;
        if self.semantic {
            let embedder = web_crawler::search::Embedder::installed()
                .context("--semantic needs the sentence model")?;
            s.embedder = Some(std::sync::Arc::new(embedder));
        }
        s.policy.scope = self.scope.into();
        s.policy.max_depth = self.max_depth;
        s.policy.allow = compile(&self.allow, "--allow")?;
        s.policy.deny = compile(&self.deny, "--deny")?;
        s.policy.normalize.strip_tracking_params = !self.keep_tracking;
        s.policy.normalize.sort_query = self.sort_query;
        s.fetch.user_agent = self.user_agent.clone();
        s.fetch.max_body_bytes = self.max_body;
        s.fetch.total_timeout = Duration::from_secs(self.timeout);
        Ok(s)
    }
}

/// Crawler-trap defence: on by default; see `web_crawler_actors::traps`.
/// A rule whose threshold is 0 is off.
#[derive(Debug, Args)]
pub(super) struct TrapOpts {
    /// Turn the crawler-trap defence off (infinite calendars, facets,
    /// session ids, soft-404s and generators of excerpts are then followed
    /// until a budget stops them).
    #[arg(long)]
    no_trap_defence: bool,
    /// Two pages whose text simhashes differ in at most this many bits are near-duplicates.
    #[arg(long, value_name = "BITS", default_value_t = TrapSettings::default().near_dup_bits)]
    trap_near_dup_bits: u32,
    /// Recent pages of a URL pattern the trap rules look at.
    #[arg(long, value_name = "PAGES", default_value_t = TrapSettings::default().pattern_window)]
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
    /// ... and only while this % of its recent pages link new URLs of it (0: whether or not).
    #[arg(long, value_name = "PCT", default_value_t = TrapSettings::default().growing_pct)]
    trap_growing_pct: u32,
}

impl TrapOpts {
    fn settings(&self) -> Option<TrapSettings> {
        if self.no_trap_defence {
            return None;
        }
        let mut t = TrapSettings::default();
        t.near_dup_bits = self.trap_near_dup_bits;
        t.pattern_window = self.trap_window;
        t.near_dup_pct = self.trap_near_dup_pct;
        t.barren_budget = self.trap_barren_budget;
        t.facet_budget = self.trap_facet_budget;
        t.host_dup_run = self.trap_host_dup_run;
        t.copy_pct = self.trap_copy_pct;
        t.stale_budget = self.trap_stale_budget;
        t.growing_pct = self.trap_growing_pct;
        Some(t)
    }
}

/// Trap families to reopen before the crawl starts.
#[derive(Debug, Args)]
pub(super) struct TrapAllowOpts {
    /// Reopen this trap family before the crawl starts (repeatable): its
    /// name as `report traps` lists it (a pattern such as
    /// `example.com/cal/{n}/{n}/`, a directory `example.com/tag/`, a query
    /// space `example.com/shop?` or a host). It is never closed again on
    /// this store, and the URLs it refused are fetched by this run.
    #[arg(long, value_name = "FAMILY")]
    pub(super) trap_allow: Vec<String>,
}

impl TrapAllowOpts {
    /// Reopen each family in `store`, saying how many URLs it released; a
    /// name the store knows no family by is an error (a typo must not
    /// pass for a reopened family).
    pub(super) async fn reopen(&self, store: &dyn Store) -> Result<()> {
        for family in &self.trap_allow {
            match store.reopen_trap_family(family, now_ms()).await? {
                Some(released) => eprintln!(
                    "trap family {family} reopened: {released} URL(s) it refused go back to pending"
                ),
                None => anyhow::bail!(
                    "--trap-allow {family:?}: this store knows no trap family by that name \
                     (`web_crawler report traps` lists them)"
                ),
            }
        }
        Ok(())
    }
}

/// Archives (WARC files with CDXJ indexes).
#[derive(Debug, Args)]
pub(super) struct ArchiveOpts {
    /// Archive every response this node gets (robots.txt, redirects and
    /// errors too) as WARC files in DIR; `mirror` URLs are archived there
    /// too (default for them: `DB.warc` beside the embedded store,
    /// `DATABASE.warc` with MongoDB, `web_crawler.warc` on a worker node).
    #[arg(long, value_name = "DIR")]
    pub(super) warc: Option<PathBuf>,
    /// Close a WARC file and begin the next one at this size: `500MB`,
    /// `1GB`, `64KiB` (a bare number is bytes).
    #[arg(long, value_name = "SIZE", default_value = "1GB", value_parser = parse_size)]
    warc_max_size: u64,
}

impl ArchiveOpts {
    /// The node's archive: `--warc`, else `default` (for `mirror` only).
    pub(super) fn archive(&self, default: PathBuf, node: &str) -> Arc<WarcArchive> {
        let dir = self.warc.clone().unwrap_or(default);
        Arc::new(WarcArchive::new(
            &dir,
            node,
            self.warc_max_size,
            self.warc.is_some(),
        ))
    }
}

/// `--scope`: the CLI's face of the library's [`Scope`] (clap stays in the
/// CLI), with the same names and descriptions.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum ScopeArg {
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

/// The supervisor's restart intensity (OTP's `{one_for_one, N, S}`).
#[derive(Debug, Args)]
pub(super) struct SupervisionOpts {
    /// More than N restarts (of the master, the pool, ...) within
    /// --restart-window and the supervisor gives up: the process stops.
    #[arg(long, value_name = "N", default_value_t = 1)]
    max_restarts: u32,
    /// The window --max-restarts counts in: `60s`, `10min` (a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    restart_window: Duration,
}

impl SupervisionOpts {
    pub(super) fn intensity(&self) -> RestartIntensity {
        RestartIntensity::new(self.max_restarts, self.restart_window)
    }
}

fn compile(patterns: &[String], flag: &str) -> Result<Vec<Regex>> {
    patterns
        .iter()
        .map(|p| Regex::new(p).with_context(|| format!("{flag} {p:?} is not a valid regex")))
        .collect()
}

/// Refuse, in the master's words, a seed the master would refuse: before
/// anything is opened or created for it.
pub(super) fn check_seeds<'a>(
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

/// Queue a command line's seed. One an earlier run on this store processed
/// is no error: `add_url` refuses it as `already_known` (recording the
/// referral), and the crawl resumes with what is pending.
pub(super) async fn queue_seed(
    app: &AppHandle,
    url: &str,
    operation: OperationSpec,
) -> Result<(), AppError> {
    match app.add_url_with(url, operation).await {
        Err(e) if e.code() == Some(RefusalCode::AlreadyKnown) => {
            tracing::info!(%url, "the seed was processed by an earlier run; resuming");
            Ok(())
        }
        answer => answer.map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
