//! `Slave`: the paper's `web_crawler_slave:process(URL, Referrals)`. Lives
//! for one URL: fetch → extract → run the URL's operation → report (through
//! its pool, which forwards to the master) → exit normally. Its work runs in `post_start`, so a panic there is
//! an `ActorFailed` its pool sees and reports; the master never goes down with it.

use crate::behaviour::index::{INDEX_TEXT_BYTES, PageText};
use crate::behaviour::{Archive, FetchedPage, PageContext, ProcessedPage, error_chain};
use crate::config::Behaviours;
use crate::frontier_rules::recency_weight;
use crate::protocol::{PoolMsg, SlaveReport};
use crate::types::{Job, PageRecord, now_ms};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::time::Duration;

/// What a slave makes of a page besides its record and links.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PageWants {
    /// The simhash of its visible text (the trap defence is on).
    pub(crate) simhash: bool,
    /// Its text for the full-text index (the `index` operation).
    pub(crate) index: bool,
}

/// What one slave does.
#[derive(Debug)]
pub(crate) enum SlaveTask {
    Page(Job),
    /// Fetch robots.txt of `host`, reached by `scheme`.
    Robots {
        scheme: String,
        host: String,
    },
}

#[derive(Debug)]
pub(crate) struct SlaveArgs {
    pub(crate) task: SlaveTask,
    pub(crate) behaviours: Behaviours,
    pub(crate) node_name: String,
    pub(crate) pool: ActorRef<PoolMsg>,
    /// What to make of each page besides its links.
    pub(crate) wants: PageWants,
    /// Read the host's sitemaps after its robots.txt.
    pub(crate) sitemaps: bool,
    /// The pool's minimum delay between two requests to one host.
    pub(crate) min_delay_ms: u64,
}

/// The robots slave's extra requests to a host (soft-404 probe, sitemap),
/// each after the host's delay.
struct PoliteFetch<'a> {
    b: &'a Behaviours,
    pause: Duration,
    /// Whether a request was made (the next one, a page, waits too).
    asked: bool,
}

impl PoliteFetch<'_> {
    async fn get(&mut self, url: &str) -> Option<FetchedPage> {
        tokio::time::sleep(self.pause).await;
        self.asked = true;
        let page = self.b.fetcher.fetch(url).await.ok()?;
        keep_host_response(self.b, url, &page).await;
        Some(page)
    }
}

/// Archive a response the host's robots slave got, when the archive keeps
/// everything. No page fails with it, so a failure is only logged.
async fn keep_host_response(b: &Behaviours, url: &str, page: &FetchedPage) {
    if let Some(archive) = b.archive.as_ref().filter(|a| a.keeps_everything())
        && let Err(e) = archive.keep(url, page).await
    {
        tracing::warn!("{}", error_chain(&e));
    }
}

/// The archive a page job's responses go to: the node's, when it keeps
/// everything or the job's operation archives. `Err`: the operation
/// archives and the node has no archive.
fn archive_for<'a>(job: &Job, b: &'a Behaviours) -> Result<Option<&'a dyn Archive>, String> {
    let wanted = job
        .operation
        .name()
        .and_then(|name| b.operations.get(name))
        .is_some_and(|op| op.archives());
    match &b.archive {
        Some(archive) if wanted || archive.keeps_everything() => Ok(Some(archive.as_ref())),
        None if wanted => Err("this node keeps no archive".to_string()),
        _ => Ok(None),
    }
}

/// Slaves take no messages: they run once and exit.
#[derive(Debug)]
pub(crate) enum SlaveMsg {}

impl ractor::Message for SlaveMsg {}

#[derive(Debug)]
pub(crate) struct Slave;

impl Actor for Slave {
    type Msg = SlaveMsg;
    type State = Option<SlaveArgs>;
    type Arguments = SlaveArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SlaveArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(Some(args))
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let args = state.take().expect("a slave runs once");
        match args.task {
            SlaveTask::Robots { scheme, host } => {
                let mut report = args.behaviours.fetcher.robots(&scheme, &host).await;
                for (url, page) in std::mem::take(&mut report.responses) {
                    keep_host_response(&args.behaviours, &url, &page).await;
                }
                // The host's politeness holds for the extra requests too,
                // and for its first page after them (the pool starts it
                // when this report arrives).
                let mut host_fetch = PoliteFetch {
                    b: &args.behaviours,
                    pause: Duration::from_millis(
                        report
                            .rules
                            .crawl_delay_ms()
                            .unwrap_or(0)
                            .max(args.min_delay_ms),
                    ),
                    asked: false,
                };
                let soft_404 = if args.wants.simhash && report.unreachable.is_none() {
                    probe_soft_404(&mut host_fetch, &scheme, &host, report.rules.as_ref()).await
                } else {
                    None
                };
                let sitemaps = if args.sitemaps && report.unreachable.is_none() {
                    sitemaps_of(&mut host_fetch, &scheme, &host, &report).await
                } else {
                    Vec::new()
                };
                if host_fetch.asked {
                    tokio::time::sleep(host_fetch.pause).await;
                }
                args.pool.cast(PoolMsg::RobotsFetched {
                    host,
                    report: Box::new(report),
                    soft_404,
                    sitemaps,
                })?;
            }
            SlaveTask::Page(job) => {
                let report = process(&job, &args.behaviours, &args.node_name, args.wants).await;
                args.pool.cast(PoolMsg::Report(Box::new(report)))?;
            }
        }
        myself.stop(None);
        Ok(())
    }
}

/// Ask a host for a path that cannot exist (once, right after its
/// robots.txt): a 2xx HTML answer is the page it serves for any unknown
/// path, a soft 404. Returns the probe's URL and its text's simhash.
async fn probe_soft_404(
    host_fetch: &mut PoliteFetch<'_>,
    scheme: &str,
    host: &str,
    rules: &dyn crate::behaviour::RobotsRules,
) -> Option<(String, crate::traps::PageSimhash)> {
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let url = format!("{scheme}://{host}/web-crawler-404-probe-{nonce:08x}/");
    if !rules.is_allowed(&url) {
        return None;
    }
    let page = host_fetch.get(&url).await?;
    if !(200..300).contains(&page.status) {
        return None;
    }
    let extracted = host_fetch
        .b
        .extractor
        .extract(&url, &page, crate::traps::SIMHASH_TEXT_BYTES);
    extracted.is_html.then(|| {
        let simhash = crate::traps::PageSimhash::of(&extracted.visible_head, &extracted.text);
        (url, simhash)
    })
}

/// What to queue from a host's sitemaps: the ones its robots.txt names;
/// else, if `/sitemap.xml` answers with a sitemap, the URLs it lists (asked
/// here, so a host without one leaves no 404 in the store).
async fn sitemaps_of(
    host_fetch: &mut PoliteFetch<'_>,
    scheme: &str,
    host: &str,
    robots: &crate::behaviour::RobotsReport,
) -> Vec<String> {
    if !robots.record.sitemaps.is_empty() {
        return robots.record.sitemaps.clone();
    }
    let url = format!("{scheme}://{host}/sitemap.xml");
    if !robots.rules.is_allowed(&url) {
        return Vec::new();
    }
    match host_fetch.get(&url).await {
        Some(page) if (200..300).contains(&page.status) => {
            let found = host_fetch.b.extractor.extract(&url, &page, 0);
            if found.is_html {
                return Vec::new();
            }
            found.links.into_iter().map(String::from).collect()
        }
        _ => Vec::new(),
    }
}

/// Default wait after a 429/503 without `Retry-After`.
const DEFAULT_BACKOFF_MS: i64 = 10_000;

/// Fetch one page and turn it into a report: the whole per-URL algorithm.
pub(crate) async fn process(
    job: &Job,
    b: &Behaviours,
    node_name: &str,
    wants: PageWants,
) -> SlaveReport {
    let archive = match archive_for(job, b) {
        Ok(archive) => archive,
        Err(why) => return failed(job, why),
    };
    // A page fetched before is asked for conditionally, with the
    // validators of its last response.
    let fetched = match &job.last {
        Some(last) if last.etag.is_some() || last.last_modified.is_some() => {
            b.fetcher.fetch_if_changed(&job.url, last).await
        }
        _ => b.fetcher.fetch(&job.url).await,
    };
    let page = match fetched {
        Ok(page) => page,
        Err(failure) => {
            return SlaveReport::Failed {
                job: job.clone(),
                reason: failure.reason,
                retryable: failure.retryable,
                status: None,
                retry_after: None,
            };
        }
    };
    // Every response once, whatever its status; a page that cannot be
    // archived is fetched again later.
    if let Some(archive) = archive
        && let Err(e) = archive.keep(&job.url, &page).await
    {
        return SlaveReport::Failed {
            job: job.clone(),
            reason: error_chain(&e),
            retryable: true,
            status: None,
            retry_after: None,
        };
    }
    if page.status == 429 || page.status == 503 {
        let wait = page.retry_after_ms.unwrap_or(DEFAULT_BACKOFF_MS);
        return SlaveReport::Failed {
            job: job.clone(),
            reason: format!("HTTP {}", page.status),
            retryable: true,
            status: Some(page.status),
            retry_after: Some(now_ms().saturating_add(wait)),
        };
    }
    let mut record = record_of(job, &page, node_name);
    if page.status == 304
        && let Some(last) = &job.last
    {
        // Unchanged: the stored page stands; only the check is recorded.
        record.etag = record.etag.or_else(|| last.etag.clone());
        record.last_modified = record.last_modified.or_else(|| last.last_modified.clone());
        record.content_hash = last.content_hash;
        return SlaveReport::Page {
            job: job.clone(),
            page: Box::new(ProcessedPage {
                record,
                not_modified: true,
                ..ProcessedPage::default()
            }),
        };
    }
    let mut links = Vec::new();
    let mut records = Vec::new();
    let mut simhash = None;
    let mut shingles = Vec::new();

    if (300..400).contains(&page.status) {
        if let Some(location) = &page.location {
            match b.policy.link(job, location, true) {
                Ok(link) => {
                    record.redirect_to = Some(link.url.clone());
                    links.push(link);
                }
                Err(why) => {
                    record.redirect_to = Some(location.clone());
                    record.error = Some(format!("redirect not followed: {why}"));
                }
            }
            record.links_count = 1;
        }
    } else {
        let operation = match job.operation.name() {
            None => None,
            Some(name) => match b.operations.get(name) {
                Some(op) => Some((name, op)),
                None => return failed(job, format!("unknown operation {name:?}")),
            },
        };
        // An operation may read all the visible text, the trap defence the
        // start of it; a plain crawl without them collects none.
        let text_limit = if operation.is_some_and(|(_, op)| op.reads_text()) {
            usize::MAX
        } else if wants.index {
            INDEX_TEXT_BYTES
        } else if wants.simhash {
            crate::traps::SHINGLE_TEXT_BYTES.max(crate::traps::SIMHASH_TEXT_BYTES)
        } else {
            0
        };
        let extracted = b.extractor.extract(&job.url, &page, text_limit);
        if wants.simhash && extracted.is_html && (200..300).contains(&page.status) {
            // A re-check's text is not new by definition: rule 6 judges
            // first fetches.
            let (page_simhash, sampled) = crate::traps::read_page(
                &extracted.visible_head,
                &extracted.text,
                job.last.is_none(),
            );
            simhash = Some(page_simhash);
            shingles = sampled;
        }
        record.title = extracted.title.clone();
        record.error = extracted.problem.clone();
        record.content_hash = Some(extracted.content_hash);
        record.links_count = u32::try_from(extracted.links_found).unwrap_or(u32::MAX);
        if (200..300).contains(&page.status) {
            if let Some((name, op)) = operation {
                let ctx = PageContext {
                    job,
                    page: &page,
                    extracted: &extracted,
                };
                match op.run(&ctx, job.operation.args()).await {
                    Ok(output) => records = output.records,
                    Err(e) => {
                        return failed(job, format!("operation {name}: {}", error_chain(&e)));
                    }
                }
            }
            if wants.index
                && let Some(text) = PageText::of(&job.url, &extracted)
            {
                records.push(text.into_record());
            }
            // After the operation, which may read them: the links' URLs move
            // into the admitted links.
            links = b.policy.links(job, extracted.links);
            if !extracted.modified.is_empty() {
                for link in &mut links {
                    link.modified = extracted.modified.get(&link.url).copied();
                }
            }
        }
    }
    // OPIC: the page's credit is shared among the links it hands on, more
    // of it to those a sitemap says changed recently.
    let now = now_ms();
    let weights: Vec<f64> = links
        .iter()
        .map(|l| recency_weight(l.modified, now))
        .collect();
    let total: f64 = weights.iter().sum();
    for (link, weight) in links.iter_mut().zip(weights) {
        link.priority = job.priority * weight / total;
    }
    SlaveReport::Page {
        job: job.clone(),
        page: Box::new(ProcessedPage {
            record,
            links,
            records,
            simhash,
            shingles,
            ..ProcessedPage::default()
        }),
    }
}

fn failed(job: &Job, reason: String) -> SlaveReport {
    SlaveReport::Failed {
        job: job.clone(),
        reason,
        retryable: false,
        status: None,
        retry_after: None,
    }
}

fn record_of(job: &Job, page: &FetchedPage, node_name: &str) -> PageRecord {
    PageRecord {
        url: job.url.clone(),
        operation: job.operation.clone(),
        host: job.host.clone(),
        depth: job.depth,
        http_returncode: Some(page.status),
        content_length: page.content_length,
        content_type: page.content_type.clone(),
        server: page.server.clone(),
        fetch_ms: page.fetch_ms,
        truncated: page.truncated,
        node: node_name.to_string(),
        etag: page.etag.clone(),
        last_modified: page.last_modified.clone(),
        ..PageRecord::default()
    }
}
