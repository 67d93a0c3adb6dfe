//! The acceptance web: 20 hosts × 250 pages with normalization traps
//! and robots-disallowed pages, crawled end to end on the embedded store.

use crate::common::web::GeneratedWeb;
use std::sync::Arc;
use std::time::{Duration, Instant};
use web_crawler::actors::{PageQuery, Store};
use web_crawler::policy::Scope;
use web_crawler::store::SqliteStore;
use web_crawler::{IdleReason, Settings, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_pages_twenty_hosts_every_page_once_no_robots_violation() {
    let web = GeneratedWeb::start(20, 250, 42).await;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("web.db")).unwrap());
    let mut s = Settings::default();
    s.crawl.node_name = "generated".into();
    s.crawl.concurrency = 32;
    s.crawl.per_host = 2;
    s.crawl.min_delay = Duration::ZERO;
    s.policy.scope = Scope::Any;
    let started = Instant::now();
    let app = start(store.clone(), s).await.unwrap();
    app.add_url(&web.seed_url()).await.unwrap();
    let idle = tokio::time::timeout(Duration::from_secs(600), app.wait_idle())
        .await
        .expect("the crawl finishes")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    let status = app.status().await.unwrap();
    app.stop(Duration::from_secs(5)).await.unwrap();
    let elapsed = started.elapsed();
    eprintln!(
        "generated web: {} pages fetched in {:.1}s ({:.0} pages/s)",
        status.fetched_this_run,
        elapsed.as_secs_f64(),
        status.fetched_this_run as f64 / elapsed.as_secs_f64()
    );

    // Every canonical page reached, each fetched exactly once.
    let mut missing = Vec::new();
    for (h, target) in web.canonical_targets() {
        let n = web.servers[h].hits_of(&target);
        if n != 1 {
            missing.push(format!("host {h} {target}: {n} fetches"));
        }
    }
    assert!(
        missing.is_empty(),
        "{} pages not fetched exactly once: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );

    let mut repeated = 0;
    let mut robots_violations = 0;
    for server in &web.servers {
        for (target, n) in server.hits() {
            if target.starts_with("/private/") {
                robots_violations += n;
            }
            if n > 1 {
                repeated += 1;
            }
        }
    }
    assert_eq!(robots_violations, 0, "robots.txt obeyed");
    assert_eq!(repeated, 0, "no URL fetched twice");

    let pages = store.processed(PageQuery::default()).await.unwrap();
    let ok = pages
        .iter()
        .filter(|p| p.record.http_returncode == Some(200))
        .count();
    assert_eq!(ok, 20 * 251);
    let counts = store.counts().await.unwrap();
    assert!(
        counts.robots_blocked > 0,
        "disallowed links were seen and recorded"
    );
    assert_eq!((counts.pending, counts.processing), (0, 0));
}
