//! Flags and subcommands.

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use regex::Regex;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use web_crawler::actors::{AppHandle, IdleReason, OperationSpec, PageQuery, Store};
use web_crawler::policy::Scope;
use web_crawler::store::{MongoStore, SqliteStore};
use web_crawler::{Settings, start};

#[derive(Debug, Parser)]
#[command(
    name = "web_crawler",
    version,
    about = "An OTP-style supervised web crawler"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Crawl from the given URLs until nothing is pending (or a budget is hit).
    /// Running it again on the same --db resumes.
    Crawl {
        /// Seed URLs.
        #[arg(required = true)]
        urls: Vec<String>,
        #[command(flatten)]
        opts: CrawlOpts,
    },
    /// Crawl from URL recording where TEXT occurs on each page (the paper's
    /// search_text), then print the pages and positions.
    SearchText {
        url: String,
        text: String,
        #[command(flatten)]
        opts: CrawlOpts,
    },
    /// Print what a crawl stored.
    Report {
        #[arg(value_enum)]
        what: ReportKind,
        #[command(flatten)]
        store: StoreOpts,
        /// Print JSON (one array) instead of a table.
        #[arg(long)]
        json: bool,
        /// At most this many rows.
        #[arg(long)]
        limit: Option<usize>,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ReportKind {
    /// Processed pages with status, type, size and links.
    Pages,
    /// 4xx/5xx and failed pages with the pages linking to them.
    BrokenLinks,
}

/// Which store: the embedded file, or MongoDB when a URI is given.
#[derive(Debug, Args)]
struct StoreOpts {
    /// Embedded store file (SQLite), created if missing.
    #[arg(long, default_value = "crawler.db")]
    db: PathBuf,
    /// Use MongoDB at this URI instead of the embedded store.
    #[arg(long, env = "MONGODB_URI", value_name = "URI")]
    mongodb: Option<String>,
    /// MongoDB database name.
    #[arg(long, default_value = web_crawler::store::DEFAULT_DATABASE)]
    mongodb_database: String,
}

impl StoreOpts {
    async fn open(&self, must_exist: bool) -> Result<Arc<dyn Store>> {
        if let Some(uri) = &self.mongodb {
            return Ok(Arc::new(
                MongoStore::connect(uri, &self.mongodb_database).await?,
            ));
        }
        if must_exist && !self.db.exists() {
            bail!("no crawl database at {}", self.db.display());
        }
        Ok(Arc::new(SqliteStore::open(&self.db)?))
    }
}

#[derive(Debug, Args)]
struct CrawlOpts {
    #[command(flatten)]
    store: StoreOpts,
    /// Which links to follow off the referrer's site.
    #[arg(long, value_enum, default_value_t = Scope::Host)]
    scope: Scope,
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
    /// Drop utm_* and similar tracking parameters from URLs.
    #[arg(long)]
    strip_tracking: bool,
    /// Sort query parameters so reordered queries are one URL.
    #[arg(long)]
    sort_query: bool,
    /// Body size cap in bytes.
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    max_body: usize,
    /// Total time per request, in seconds.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// No live progress line.
    #[arg(long)]
    quiet: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

impl CrawlOpts {
    fn settings(&self) -> Result<Settings> {
        let mut s = Settings::default();
        s.crawl.concurrency = self.concurrency.max(1);
        s.crawl.per_host = self.per_host.max(1);
        s.crawl.min_delay = Duration::from_millis(self.delay_ms);
        s.crawl.max_pages = self.max_pages;
        s.crawl.reprocess_after = self.reprocess_after.map(Duration::from_secs);
        s.policy.scope = self.scope;
        s.policy.max_depth = self.max_depth;
        s.policy.allow = compile(&self.allow, "--allow")?;
        s.policy.deny = compile(&self.deny, "--deny")?;
        s.policy.normalize.strip_tracking_params = self.strip_tracking;
        s.policy.normalize.sort_query = self.sort_query;
        s.fetch.user_agent = self.user_agent.clone();
        s.fetch.max_body_bytes = self.max_body;
        s.fetch.total_timeout = Duration::from_secs(self.timeout.max(1));
        Ok(s)
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
            crawl(&opts, &seeds).await
        }
        Command::SearchText { url, text, opts } => {
            if text.is_empty() {
                bail!("the search text is empty");
            }
            let code = crawl(&opts, &[(url, OperationSpec::search_text(&text))]).await?;
            let store = opts.store.open(true).await?;
            let results = store.search_results(Some(&text)).await?;
            if opts.json {
                println!("{}", serde_json::to_string_pretty(&results)?);
            } else {
                println!("{} page(s) contain {:?}:", results.len(), text);
                for r in &results {
                    let positions: Vec<String> = r.positions.iter().map(u64::to_string).collect();
                    println!("{}\t{}", r.url, positions.join(","));
                }
            }
            Ok(code)
        }
        Command::Report {
            what,
            store,
            json,
            limit,
        } => {
            report(&*store.open(true).await?, what, json, limit).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn crawl(opts: &CrawlOpts, seeds: &[(String, OperationSpec)]) -> Result<ExitCode> {
    let settings = opts.settings()?;
    let store = opts.store.open(false).await?;
    let started = Instant::now();
    let app = start(store.clone(), settings).await?;
    for (url, op) in seeds {
        if let Err(e) = app.add_url_with(url, op.clone()).await {
            app.stop(Duration::from_secs(1)).await.ok();
            bail!("{e}");
        }
    }
    let progress = !opts.quiet && std::io::stderr().is_terminal();
    let outcome = tokio::select! {
        r = app.wait_idle() => Some(r?),
        _ = show_progress(&app, progress) => None,
        _ = tokio::signal::ctrl_c() => None,
    };
    if progress {
        eprintln!();
    }
    let status = app.status().await?;
    app.stop(Duration::from_secs(10)).await?;
    summary(&*store, &status, outcome, started.elapsed(), opts.json).await?;
    Ok(match outcome {
        Some(_) => ExitCode::SUCCESS,
        None => ExitCode::from(130),
    })
}

/// Live progress on stderr, once a second; never returns.
async fn show_progress(app: &AppHandle, enabled: bool) {
    if !enabled {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Ok(s) = app.status().await {
            eprint!(
                "\r\x1b[K{} pages  {:.0} pages/s  {} queued  {} in flight  {} errors",
                s.fetched_this_run,
                s.pages_per_sec,
                s.store.pending,
                s.in_flight,
                s.errors_this_run
            );
            let _ = std::io::stderr().flush();
        }
    }
}

async fn summary(
    store: &dyn Store,
    status: &web_crawler::Status,
    outcome: Option<IdleReason>,
    elapsed: Duration,
    json: bool,
) -> Result<()> {
    let histogram = store.status_histogram().await?;
    let counts = store.counts().await?;
    let rate = status.fetched_this_run as f64 / elapsed.as_secs_f64().max(1e-3);
    let ended = match outcome {
        Some(IdleReason::FrontierEmpty) => "nothing left to crawl",
        Some(IdleReason::BudgetReached) => "page budget reached",
        None => "interrupted",
    };
    if json {
        let by_status: Vec<serde_json::Value> = histogram
            .iter()
            .map(|(code, n)| serde_json::json!({"http_returncode": code, "pages": n}))
            .collect();
        let doc = serde_json::json!({
            "ended": ended,
            "fetched": status.fetched_this_run,
            "elapsed_s": elapsed.as_secs_f64(),
            "pages_per_sec": rate,
            "by_status": by_status,
            "store": counts,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!(
        "crawl ended ({ended}): {} pages fetched in {:.1}s, {:.1} pages/s",
        status.fetched_this_run,
        elapsed.as_secs_f64(),
        rate
    );
    println!("pages by status:");
    for (code, n) in &histogram {
        let label = code.map_or_else(|| "no response".to_string(), |c| c.to_string());
        println!("  {label:>12}  {n}");
    }
    println!(
        "processed {}  failed {}  duplicates skipped {}  robots-blocked {}  still pending {}",
        counts.processed, counts.failed, counts.duplicates, counts.robots_blocked, counts.pending
    );
    Ok(())
}

async fn report(
    store: &dyn Store,
    what: ReportKind,
    json: bool,
    limit: Option<usize>,
) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match what {
        ReportKind::Pages => {
            let pages = store
                .processed(PageQuery {
                    limit,
                    ..PageQuery::default()
                })
                .await?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&pages)?)?;
                return Ok(());
            }
            writeln!(out, "status\ttype\tsize\tlinks\turl\tnote")?;
            for p in &pages {
                let r = &p.record;
                let note = r
                    .error
                    .clone()
                    .or_else(|| r.redirect_to.as_ref().map(|t| format!("→ {t}")))
                    .or_else(|| p.duplicate_of.as_ref().map(|d| format!("duplicate of {d}")))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    r.http_returncode.map_or("-".into(), |c| c.to_string()),
                    r.content_type.as_deref().unwrap_or("-"),
                    r.content_length.map_or("-".into(), |c| c.to_string()),
                    r.links_count,
                    r.url,
                    note
                )?;
            }
        }
        ReportKind::BrokenLinks => {
            let mut broken = store.broken_links().await?;
            if let Some(limit) = limit {
                broken.truncate(limit);
            }
            if json {
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
        }
    }
    Ok(())
}
