//! `Slave`: the paper's `web_crawler_slave:process(URL, Referrals)`. Lives
//! for one URL: fetch → extract → run the URL's operation → report to the
//! master → exit normally. Its work runs in `post_start`, so a panic there is
//! an `ActorFailed` its pool sees and reports; the master never goes down with it.

use crate::behaviour::{FetchedPage, PageContext, ProcessedPage, error_chain};
use crate::config::Behaviours;
use crate::protocol::{self, PoolMsg, SlaveReport};
use crate::types::{Job, PageRecord, now_ms};
use ractor::{Actor, ActorProcessingErr, ActorRef};

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
    /// Registered name of the master to report to.
    pub(crate) master: String,
    pub(crate) pool: ActorRef<PoolMsg>,
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
                let report = args.behaviours.fetcher.robots(&scheme, &host).await;
                args.pool.cast(PoolMsg::RobotsFetched { host, report })?;
            }
            SlaveTask::Page(job) => {
                let report = process(&job, &args.behaviours, &args.node_name).await;
                if let SlaveReport::Failed {
                    retry_after: Some(until),
                    ..
                } = &report
                {
                    args.pool.cast(PoolMsg::HostBackoff {
                        host: job.host.clone(),
                        until: *until,
                    })?;
                }
                // A master that is restarting misses this report; the URL is
                // still leased and its new incarnation releases it, so nothing is lost.
                protocol::report(&args.master, report);
            }
        }
        myself.stop(None);
        Ok(())
    }
}

/// Default wait after a 429/503 without `Retry-After`.
const DEFAULT_BACKOFF_MS: i64 = 10_000;

/// Fetch one page and turn it into a report: the whole per-URL algorithm.
pub(crate) async fn process(job: &Job, b: &Behaviours, node_name: &str) -> SlaveReport {
    let page = match b.fetcher.fetch(&job.url).await {
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
    let mut links = Vec::new();
    let mut records = Vec::new();

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
        // Only an operation reads the visible text; a plain crawl skips it.
        let visible_text = operation.is_some_and(|(_, op)| op.reads_text());
        let extracted = b.extractor.extract(&job.url, &page, visible_text);
        record.title = extracted.title.clone();
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
            // After the operation, which may read them: the links' URLs move
            // into the admitted links.
            links = b.policy.links(job, extracted.links);
        }
    }
    // OPIC: the page's credit is shared among the links it hands on.
    let share = job.priority / (links.len().max(1) as f64);
    for link in &mut links {
        link.priority = share;
    }
    SlaveReport::Page {
        job: job.clone(),
        page: Box::new(ProcessedPage {
            record,
            links,
            records,
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
        ..PageRecord::default()
    }
}
