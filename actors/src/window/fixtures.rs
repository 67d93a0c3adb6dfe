//! What the window's unit tests share: a configuration, jobs and reports,
//! and a window past recovery.

use super::Window;
use crate::behaviour::ProcessedPage;
use crate::cluster::Move;
use crate::config::CrawlConfig;
use crate::protocol::SlaveReport;
use crate::types::OperationSpec;
use crate::types::{Job, Millis, NewLink, PageRecord};

pub(super) const T0: Millis = 1_000_000;

pub(super) fn cfg() -> CrawlConfig {
    CrawlConfig {
        node_name: "n1".into(),
        concurrency: 2,
        claim_window: 16,
        per_host_window: 4,
        max_batch: 1024,
        ..CrawlConfig::default()
    }
}

pub(super) fn job(host: &str, path: &str) -> Job {
    Job::fixture(host, path, 1)
}

pub(super) fn page(job: &Job) -> SlaveReport {
    page_with(job, Vec::new(), None)
}

/// A fetched page of `job` with these links and text simhash.
pub(super) fn page_with(
    job: &Job,
    links: Vec<NewLink>,
    simhash: Option<crate::traps::PageSimhash>,
) -> SlaveReport {
    SlaveReport::Page {
        job: job.clone(),
        page: Box::new(ProcessedPage {
            record: PageRecord {
                url: job.url.clone(),
                http_returncode: Some(200),
                ..PageRecord::default()
            },
            links,
            simhash,
            ..ProcessedPage::default()
        }),
    }
}

pub(super) fn failed(job: &Job, retryable: bool, retry_after: Option<Millis>) -> SlaveReport {
    SlaveReport::Failed {
        job: job.clone(),
        reason: "timeout".into(),
        retryable,
        status: None,
        retry_after,
    }
}

pub(super) fn nodes(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// A window past recovery with `live` pools.
pub(super) fn running(cfg: CrawlConfig, live: &[&str]) -> Window {
    let mut w = Window::new(cfg, 0, 0, T0);
    w.begin_recovery(&nodes(live), T0);
    for n in live {
        w.adopt(n, Vec::new());
    }
    assert!(w.end_recovery_if_due(T0));
    let work = w.start_cycle(false, false, false, T0).expect("the release");
    assert_eq!(work.release_all_but, Some(Vec::new()));
    w.cycle_done(Vec::new(), None, &nodes(live), T0);
    w
}

/// Claim `jobs` through one cycle and return the dispatch.
pub(super) fn claim(w: &mut Window, jobs: Vec<Job>, live: &[&str]) -> Vec<(String, Vec<Job>)> {
    let work = w.start_cycle(false, true, false, T0).expect("a cycle");
    assert!(work.claim.is_some(), "room to claim");
    w.cycle_done(jobs, None, &nodes(live), T0).dispatch
}

/// Hosts h0..h3 with two URLs each on "a", then "b" joins: the moves.
pub(super) fn b_joins(w: &mut Window) -> Vec<Move> {
    let jobs: Vec<Job> = (0..8)
        .map(|i| job(&format!("h{}", i / 2), &format!("/{i}")))
        .collect();
    claim(w, jobs, &["a"]);
    let (gone, joined) = w.nodes_changed(&nodes(&["a", "b"]));
    assert!(gone.is_empty());
    assert_eq!(joined, ["b"]);
    w.rebalance(&joined, T0)
}

pub(super) fn link(url: &str) -> NewLink {
    NewLink::new(url.to_string(), "h".into(), OperationSpec::crawl(), 2, 0.1)
}
