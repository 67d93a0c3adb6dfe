//! `crawl` and `search-text`: a crawl from seeds to the end (or a
//! budget, or a signal), with a live progress line and a summary.

use super::opts::{StoreOpts, SupervisionOpts, TrapAllowOpts, TuningOpts, check_seeds, queue_seed};
use super::parse::parse_duration;
use super::prometheus;
use super::remote::{RemoteOpts, one_shot};
use super::rows::{requests, trapped_by_rule};
use super::signals::StopSignals;
use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use web_crawler::actors::frontier_rules::{FailureKind, failure_kind};
use web_crawler::actors::outage::utc_time;
use web_crawler::actors::{AppHandle, ControlRequest, IdleReason, OperationSpec, PageQuery, Store};
use web_crawler::operations::builtin_operations;
use web_crawler::{Settings, start};

/// `crawl`.
#[derive(Debug, Args)]
pub(super) struct CrawlArgs {
    /// Seed URLs.
    #[arg(required = true)]
    urls: Vec<String>,
    #[command(flatten)]
    pub(super) opts: CrawlOpts,
}

impl CrawlArgs {
    pub(super) async fn exec(self) -> Result<ExitCode> {
        let seeds: Vec<(String, OperationSpec)> = self
            .urls
            .into_iter()
            .map(|u| (u, OperationSpec::crawl()))
            .collect();
        let (code, summary) = crawl(&self.opts, &seeds).await?;
        if let Some(summary) = summary {
            outln!("{}", serde_json::to_string_pretty(&summary)?)?;
        }
        Ok(code)
    }
}

/// `search-text`.
#[derive(Debug, Args)]
pub(super) struct SearchTextArgs {
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
}

impl SearchTextArgs {
    pub(super) async fn exec(self) -> Result<ExitCode> {
        let Self {
            url,
            text,
            opts,
            connect,
            cookie_file,
            exact,
        } = self;
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
        let results = store.text_match_hits(Some(&text)).await?;
        if let Some(crawled) = crawled {
            let doc = serde_json::json!({ "crawl": crawled, "results": results });
            outln!("{}", serde_json::to_string_pretty(&doc)?)?;
        } else {
            outln!("{} page(s) contain {:?}:", results.len(), text)?;
            for r in &results {
                let positions: Vec<String> = r.positions.iter().map(u64::to_string).collect();
                outln!("{}\t{}", r.url, positions.join(","))?;
                for c in &r.contexts {
                    outln!("\t{c}")?;
                }
            }
        }
        Ok(code)
    }
}

#[derive(Debug, Args)]
pub(super) struct CrawlOpts {
    #[command(flatten)]
    store: StoreOpts,
    #[command(flatten)]
    tuning: TuningOpts,
    #[command(flatten)]
    trap_allow: TrapAllowOpts,
    /// Which pages that failed on an earlier run on this store this run
    /// fetches again.
    #[arg(long, value_enum, value_name = "WHICH", default_value_t = RetryFailed::Transient)]
    retry_failed: RetryFailed,
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
    pub(super) store_outage_limit: Duration,
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
        Some(addr) => Some(
            prometheus::serve_for_node(addr, &settings.crawl.node_name.clone(), &mut settings)
                .await?,
        ),
        None => None,
    };
    let vectors = settings.embedder.is_some();
    let archive = opts
        .tuning
        .archive
        .archive(opts.store.archive_dir(), &settings.crawl.node_name);
    settings.archive = Some(archive.clone());
    let store = opts.store.open_for_crawl().await?;
    // The store's lock is held: the archive's files are this run's to mend.
    archive.resume()?;
    opts.trap_allow.reopen(store.as_ref()).await?;
    let failed_before = failed_before(&*store).await?;
    let started = Instant::now();
    let app = start(store.clone(), settings).await?;
    for (url, op) in seeds {
        if let Err(e) = queue_seed(&app, url, op.clone()).await {
            app.stop(Duration::from_secs(1)).await.ok();
            bail!("{e}");
        }
    }
    let mut earlier = EarlierFailures {
        policy: opts.retry_failed,
        ..EarlierFailures::default()
    };
    for (url, operation, kind) in failed_before {
        earlier.count(kind);
        if opts.retry_failed.retries(kind) {
            // A URL this run's rules refuse (a narrower --scope, a --deny)
            // is counted apart and named in the summary.
            match app.add_url_again(&url, operation).await {
                Ok(_) => earlier.retried += 1,
                Err(_) => earlier.refused += 1,
            }
        }
    }
    let progress = !opts.quiet && std::io::stderr().is_terminal();
    let mut signals = StopSignals::new()?.below_progress_line(progress);
    let track = async {
        match &metrics {
            Some(m) => m.track(&app).await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        r = app.wait_idle() => Ok(r?),
        _ = show_progress(&app, progress, None) => Err(ExitCode::FAILURE),
        _ = track => Err(ExitCode::FAILURE),
        code = signals.first() => Err(code),
    };
    let fetching = started.elapsed();
    // The crawl is done when every page it fetched is searchable: the
    // index, which took only what fetching left of the CPU, catches up.
    let mut interrupted = None;
    if outcome.is_ok() {
        let catching_up = IndexPhase { vectors, fetching };
        tokio::select! {
            r = super::index_caught_up(&app) => r?,
            _ = show_progress(&app, progress, Some(catching_up)) => {}
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
    let run = RunFacts {
        ended: Ended::of(outcome.as_ref().ok().copied()),
        fetched: status.fetched_this_run,
        times,
        index: status.index,
        vectors,
        earlier,
    };
    let summary = summary(&*store, &run, opts.json).await?;
    let code = match (outcome, interrupted) {
        (Err(code), _) | (Ok(_), Some(code)) => code,
        _ if nothing_fetched(status.fetched_this_run, status.errors_this_run) => {
            eprintln!("no page could be fetched: every request of this run failed (reasons above)");
            ExitCode::from(super::EXIT_NOTHING_FETCHED)
        }
        _ => ExitCode::SUCCESS,
    };
    Ok((code, summary))
}

/// Which pages that failed on an earlier run a rerun fetches again
/// (`--retry-failed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(super) enum RetryFailed {
    /// Those that got no answer (a refused connection, a timeout, a name
    /// that did not resolve) or a 5xx or 429: a server fixed since answers.
    #[default]
    Transient,
    /// Every failed page, 4xx answers too.
    All,
    /// None: failed pages stay as they are.
    None,
}

impl RetryFailed {
    fn retries(self, kind: FailureKind) -> bool {
        match self {
            RetryFailed::Transient => kind == FailureKind::Transient,
            RetryFailed::All => true,
            RetryFailed::None => false,
        }
    }
}

/// The pages the store holds as failed before this run starts, with how
/// each failed (robots-blocked pages are the site's rule, not failures).
async fn failed_before(store: &dyn Store) -> Result<Vec<(String, OperationSpec, FailureKind)>> {
    let pages = store
        .processed(PageQuery {
            limit: None,
            offset: 0,
            only_failed: true,
            only_duplicates: false,
            newest_first: false,
        })
        .await?;
    Ok(pages
        .into_iter()
        .filter_map(|p| {
            let kind = failure_kind(&p.record)?;
            Some((p.record.url, p.record.operation, kind))
        })
        .collect())
}

/// Pages that had failed on earlier runs, and what this run did with them.
#[derive(Clone, Copy, Debug, Default)]
struct EarlierFailures {
    policy: RetryFailed,
    transient: u64,
    answered: u64,
    /// Queued again by this run.
    retried: u64,
    /// To be retried, but refused by this run's rules.
    refused: u64,
}

impl EarlierFailures {
    fn count(&mut self, kind: FailureKind) {
        match kind {
            FailureKind::Transient => self.transient += 1,
            FailureKind::Answered => self.answered += 1,
        }
    }

    /// Failed before and not queued again, by `--retry-failed`'s choice.
    fn left_by_policy(&self) -> u64 {
        (self.transient + self.answered).saturating_sub(self.retried + self.refused)
    }

    /// What the summary says of them: what was tried again, what was not
    /// and which flag tries it.
    fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if self.retried > 0 {
            lines.push(format!(
                "tried again: {} URL(s) that failed on an earlier run",
                self.retried
            ));
        }
        let left = self.left_by_policy();
        if left > 0 {
            lines.push(match self.policy {
                RetryFailed::None => format!(
                    "not tried again: {left} URL(s) that failed on an earlier run \
                     (--retry-failed none); without it the {} that got no answer, \
                     a 5xx or a 429 are tried again, with --retry-failed all every one",
                    self.transient
                ),
                _ => format!(
                    "not tried again: {left} URL(s) that failed on an earlier run with an \
                     answer that stands (4xx); --retry-failed all tries them again"
                ),
            });
        }
        if self.refused > 0 {
            lines.push(format!(
                "not tried again: {} URL(s) that failed on an earlier run and that this \
                 run's --scope, --allow/--deny, --max-depth or trap defence refuses",
                self.refused
            ));
        }
        lines
    }
}

/// A run that tried and got no answer at all; a run with nothing left to
/// do (every page already processed) tried nothing, and is done.
fn nothing_fetched(fetched: u64, errors: u64) -> bool {
    fetched == 0 && errors > 0
}

/// How long a crawl fetched, and how long it ran in all (the index
/// catching up after fetching ended).
#[derive(Clone, Copy, Debug)]
struct RunTimes {
    fetching: Duration,
    total: Duration,
}

/// After fetching, while the index catches up: whether pages get passage
/// vectors (the slow part of a `--semantic` crawl), and how long fetching took.
#[derive(Clone, Copy, Debug)]
struct IndexPhase {
    vectors: bool,
    fetching: Duration,
}

/// Live progress on stderr, once a second; never returns. While fetching,
/// the crawl's numbers; after (`catching_up`), the index's.
async fn show_progress(app: &AppHandle, enabled: bool, catching_up: Option<IndexPhase>) {
    if !enabled {
        return std::future::pending().await;
    }
    let since = Instant::now();
    let mut first: Option<u64> = None;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Ok(s) = app.status().await else { continue };
        let line = match (catching_up, s.index) {
            (Some(phase), Some(index)) => {
                let from = *first.get_or_insert(index.indexed);
                let rate = index.indexed.saturating_sub(from) as f64
                    / since.elapsed().as_secs_f64().max(1e-3);
                index_phase_line(s.fetched_this_run, phase, index, rate)
            }
            _ => progress_line(&s),
        };
        eprint!("\r\x1b[K{line}");
        let _ = std::io::stderr().flush();
    }
}

/// The progress line once fetching is done and the index catches up: what
/// is being done (with `--semantic`, computing passage vectors, which can
/// take minutes), how far along, at what rate, and about how long is left.
fn index_phase_line(
    fetched: u64,
    phase: IndexPhase,
    index: web_crawler::actors::IndexCounts,
    rate: f64,
) -> String {
    let doing = if phase.vectors {
        "computing passage vectors and indexing"
    } else {
        "indexing"
    };
    let left = if rate > 0.0 {
        let secs = index.backlog() as f64 / rate;
        format!(
            ", about {} left",
            run_time(Duration::from_secs_f64(secs.ceil()))
        )
    } else {
        String::new()
    };
    format!(
        "fetched {} in {}; {doing}: {} of {} pages, {rate:.1} pages/s{left}",
        pages(fetched),
        run_time(phase.fetching),
        index.indexed,
        index.queued,
    )
}

/// "1 page", "2 pages".
fn pages(n: u64) -> String {
    if n == 1 {
        "1 page".to_string()
    } else {
        format!("{n} pages")
    }
}

/// A run's time as people read it: `4.2s`, `3m14s`, `1h02m`.
fn run_time(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..60 => format!("{:.1}s", d.as_secs_f64()),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
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
        requests(s.requests_in_flight),
        s.in_flight,
        s.store.pending,
        s.errors_this_run
    )
}

async fn summary(
    store: &dyn Store,
    run: &RunFacts,
    json: bool,
) -> Result<Option<serde_json::Value>> {
    let histogram = store.status_histogram().await?;
    let counts = store.counts().await?;
    let times = run.times;
    let earlier = run.earlier;
    let rate = run.fetched as f64 / times.fetching.as_secs_f64().max(1e-3);
    let indexing = times.total.saturating_sub(times.fetching);
    if json {
        let by_status: Vec<serde_json::Value> = histogram
            .iter()
            .map(|(code, n)| serde_json::json!({"http_returncode": code, "pages": n}))
            .collect();
        let doc = serde_json::json!({
            "ended": run.ended.as_str(),
            "fetched": run.fetched,
            "elapsed_s": times.total.as_secs_f64(),
            "fetch_s": times.fetching.as_secs_f64(),
            "index_s": indexing.as_secs_f64(),
            "index": run.index,
            "passage_vectors": run.vectors,
            "pages_per_sec": rate,
            "by_status": by_status,
            "store": counts,
            "failed_before": {
                "retry_failed": earlier.policy.to_possible_value().map(|v| v.get_name().to_string()),
                "retried": earlier.retried,
                "not_retried": earlier.left_by_policy() + earlier.refused,
            },
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
                only_duplicates: false,
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
    {
        use std::io::Write as _;
        write!(
            std::io::stdout().lock(),
            "{}",
            summary_text(run, &histogram, &counts, &failed)
        )?;
    }
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
    /// Pages got passage vectors (`--semantic`).
    vectors: bool,
    earlier: EarlierFailures,
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
    // The whole run's time first: with the index catching up (minutes of
    // passage vectors with --semantic) it is not the fetching time.
    let _ = writeln!(
        out,
        "crawl ended ({}) after {}: this run fetched {} ({} of fetching, {:.1} pages/s)",
        run.ended.as_str(),
        run_time(run.times.total),
        pages(run.fetched),
        run_time(run.times.fetching),
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
    for line in run.earlier.lines() {
        let _ = writeln!(out, "{line}");
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
        let vectors = if run.vectors {
            " with passage vectors"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "search index: {} indexed this run{vectors}, searchable {} after fetching ended{left}",
            pages(index.indexed),
            run_time(indexing),
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
    if let Some(trapped) = trapped_by_rule(counts) {
        let _ = writeln!(
            out,
            "  left out by the trap defence: {trapped} (web_crawler report traps; \
             --trap-allow FAMILY fetches a family's)"
        );
    }
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
            vectors: false,
            earlier: EarlierFailures::default(),
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
            Some(
                "crawl ended (interrupted) after 10.0s: this run fetched 29 pages \
                 (10.0s of fetching, 2.9 pages/s)"
            )
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
            "crawl ended (nothing left to crawl) after 10.0s: this run fetched 500 pages \
             (10.0s of fetching, 50.0 pages/s)\n\
             the store, all runs so far:\n\
             \x20 pages by status:\n\
             \x20          200  528\n\
             \x20          404  1\n\
             \x20 processed 529  failed 1  duplicates skipped 0  robots-blocked 0  still pending 0\n\
             \x20 failed  http://a/gone  HTTP 404\n"
        );
    }

    #[test]
    fn the_summary_says_what_the_trap_rules_left_out_by_rule() {
        use web_crawler::actors::traps::TrapRule;
        let counts = web_crawler::actors::StoreCounts {
            processed: 40,
            trapped: 130,
            trapped_by_rule: [(TrapRule::Barren, 120), (TrapRule::Soft404, 10)].into(),
            ..Default::default()
        };
        let text = summary_text(
            &run_facts(Ended::NothingLeft, 40),
            &[(Some(200), 40)],
            &counts,
            &[],
        );
        assert!(
            text.ends_with(
                "\x20 left out by the trap defence: 130 URLs (barren 120, soft_404 10) \
                 (web_crawler report traps; --trap-allow FAMILY fetches a family's)\n"
            ),
            "{text}"
        );
        let none = web_crawler::actors::StoreCounts::default();
        let text = summary_text(&run_facts(Ended::NothingLeft, 0), &[], &none, &[]);
        assert!(!text.contains("trap"), "{text}");
    }

    #[test]
    fn a_rerun_says_which_failures_it_left_and_the_flag_that_retries_them() {
        let mut run = run_facts(Ended::NothingLeft, 2);
        run.earlier = EarlierFailures {
            policy: RetryFailed::Transient,
            transient: 2,
            answered: 3,
            retried: 2,
            refused: 0,
        };
        let counts = web_crawler::actors::StoreCounts::default();
        let text = summary_text(&run, &[], &counts, &[]);
        let lines: Vec<&str> = text.lines().skip(1).take(2).collect();
        assert_eq!(
            lines,
            [
                "tried again: 2 URL(s) that failed on an earlier run",
                "not tried again: 3 URL(s) that failed on an earlier run with an answer \
                 that stands (4xx); --retry-failed all tries them again"
            ]
        );
        run.earlier.policy = RetryFailed::None;
        run.earlier.retried = 0;
        let text = summary_text(&run, &[], &counts, &[]);
        assert_eq!(
            text.lines().nth(1),
            Some(
                "not tried again: 5 URL(s) that failed on an earlier run (--retry-failed none); \
                 without it the 2 that got no answer, a 5xx or a 429 are tried again, \
                 with --retry-failed all every one"
            )
        );
        let first = summary_text(&run_facts(Ended::NothingLeft, 2), &[], &counts, &[]);
        assert!(!first.contains("tried again"), "{first}");
        assert!(RetryFailed::Transient.retries(FailureKind::Transient));
        assert!(!RetryFailed::Transient.retries(FailureKind::Answered));
        assert!(RetryFailed::All.retries(FailureKind::Answered));
        assert!(!RetryFailed::None.retries(FailureKind::Transient));
    }

    #[test]
    fn a_semantic_crawl_says_what_it_does_after_fetching_and_its_whole_time_first() {
        let index = web_crawler::actors::IndexCounts {
            indexed: 86,
            queued: 527,
        };
        let phase = IndexPhase {
            vectors: true,
            fetching: Duration::from_millis(1_100),
        };
        assert_eq!(
            index_phase_line(529, phase, index, 2.5),
            "fetched 529 pages in 1.1s; computing passage vectors and indexing: \
             86 of 527 pages, 2.5 pages/s, about 2m57s left"
        );
        let words = IndexPhase {
            vectors: false,
            ..phase
        };
        assert_eq!(
            index_phase_line(1, words, index, 0.0),
            "fetched 1 page in 1.1s; indexing: 86 of 527 pages, 0.0 pages/s"
        );
        let mut run = run_facts(Ended::NothingLeft, 529);
        run.times = RunTimes {
            fetching: Duration::from_millis(1_100),
            total: Duration::from_millis(194_200),
        };
        run.vectors = true;
        run.index = Some(web_crawler::actors::IndexCounts {
            indexed: 527,
            queued: 527,
        });
        let text = summary_text(&run, &[], &Default::default(), &[]);
        let lines: Vec<&str> = text.lines().take(2).collect();
        assert_eq!(
            lines,
            [
                "crawl ended (nothing left to crawl) after 3m14s: this run fetched 529 pages \
                 (1.1s of fetching, 480.9 pages/s)",
                "search index: 527 pages indexed this run with passage vectors, \
                 searchable 3m13s after fetching ended"
            ]
        );
        let one = summary_text(
            &run_facts(Ended::NothingLeft, 1),
            &[],
            &Default::default(),
            &[],
        );
        assert!(one.contains("this run fetched 1 page ("), "{one}");
    }

    #[test]
    fn a_run_that_fetched_nothing_fails_only_if_it_tried() {
        assert!(nothing_fetched(0, 3));
        assert!(!nothing_fetched(0, 0), "nothing left to do is done");
        assert!(!nothing_fetched(1, 3), "some answer came");
    }
}
