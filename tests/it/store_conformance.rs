//! One store conformance suite, run against both backends: the embedded
//! SQLite store and MongoDB (a real server process).

use crate::common::backend::Backend;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use web_crawler::actors::availability::HistoryQuery;
use web_crawler::actors::traps::{TrapClosure, TrapReason, TrapRule, TrapScope};
use web_crawler::actors::{
    ClaimRequest, CommitBatch, CommitSummary, Document, HostRecord, Job, NewLink, OperationSpec,
    PageQuery, PageRecord, PendingUrl, ProcessedPage, Record, Retry, SEARCH_RESULTS, Store,
    TRAPPED, TrapMark, TrappedClaim, TrappedLink, UrlKey,
};

const NOW: i64 = 1_700_000_000_000;

fn link(url: &str, depth: u32, priority: f64) -> NewLink {
    NewLink::new(
        url.into(),
        host_of(url),
        OperationSpec::crawl(),
        depth,
        priority,
    )
}

fn host_of(url: &str) -> String {
    url.split('/').nth(2).unwrap_or("").to_string()
}

fn claim_req(now: i64, limit: usize, cap: usize) -> ClaimRequest {
    ClaimRequest {
        now,
        owner: "node-a".into(),
        lease_until: now + 60_000,
        limit,
        per_host_cap: cap,
        held_per_host: HashMap::new(),
    }
}

fn page(url: &str, status: u16, hash: Option<u64>, links: Vec<NewLink>) -> ProcessedPage {
    ProcessedPage {
        record: PageRecord {
            url: url.to_string(),
            host: host_of(url),
            http_returncode: Some(status),
            content_type: Some("text/html".into()),
            content_length: Some(10),
            content_hash: hash,
            links_count: links.len() as u32,
            ..PageRecord::default()
        },
        links,
        ..ProcessedPage::default()
    }
}

fn seeds(now: i64, links: Vec<NewLink>) -> CommitBatch {
    CommitBatch {
        now,
        seeds: links,
        ..CommitBatch::default()
    }
}

fn pages(now: i64, reprocess: Option<i64>, pages: Vec<ProcessedPage>) -> CommitBatch {
    CommitBatch {
        now,
        reprocess_after_ms: reprocess,
        pages,
        ..CommitBatch::default()
    }
}

async fn pending_urls(store: &dyn Store) -> Vec<String> {
    let mut urls: Vec<String> = store
        .pending(10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.url)
        .collect();
    urls.sort();
    urls
}

async fn upsert_and_referral_merge(b: Backend) {
    let store = b.open().await;
    let s = store
        .commit(
            (pages(
                NOW,
                None,
                vec![
                    page(
                        "http://a/1",
                        200,
                        Some(1),
                        vec![link("http://a/x", 3, 0.5), link("http://a/x", 2, 0.25)],
                    ),
                    page(
                        "http://a/2",
                        200,
                        Some(2),
                        vec![link("http://a/x", 1, 0.25)],
                    ),
                ],
            ))
            .into(),
        )
        .await
        .unwrap();
    assert_eq!(s.queued, 1);
    let pending = store.pending(10).await.unwrap();
    assert_eq!(pending.len(), 1);
    let p = &pending[0];
    let refs: HashSet<&str> = p.referral_list.iter().map(String::as_str).collect();
    assert_eq!(refs, HashSet::from(["http://a/1", "http://a/2"]));
    assert_eq!(p.depth, 1, "depth is the minimum");
    assert!(
        (p.priority - 1.0).abs() < 1e-9,
        "credits are summed: {}",
        p.priority
    );
    assert_eq!(p.status, "pending");
    // Another operation on the same URL is another unit of work.
    let mut other = link("http://a/x", 0, 1.0);
    other.operation = OperationSpec::search_text("t");
    store
        .commit((seeds(NOW, vec![other])).into())
        .await
        .unwrap();
    assert_eq!(store.pending(10).await.unwrap().len(), 2);
}

/// #49: a commit names the seeds that were waiting already (pending or
/// being fetched) before it, so `add_url` can answer `already_queued`; a
/// seed queued now, by this batch or out of `trapped`, is not named, nor
/// one processed (only its referral is recorded).
async fn seeds_waiting_already_are_named(b: Backend) {
    let store = b.open().await;
    let named = |s: CommitSummary| -> Vec<String> {
        let mut urls: Vec<String> = s.seeds_queued_already.into_iter().map(|k| k.url).collect();
        urls.sort();
        urls
    };
    let first = seeds(NOW, vec![link("http://a/1", 0, 1.0)]);
    assert!(named(store.commit(first.into()).await.unwrap()).is_empty());
    // Twice in one batch: queued by it, not waiting before.
    let twice = seeds(
        NOW + 1,
        vec![
            link("http://a/1", 0, 1.0),
            link("http://a/2", 0, 1.0),
            link("http://a/2", 0, 1.0),
        ],
    );
    assert_eq!(
        named(store.commit(twice.into()).await.unwrap()),
        ["http://a/1"]
    );
    // Being fetched is waiting too.
    let claimed = store.claim(claim_req(NOW + 2, 10, 10)).await.unwrap();
    assert_eq!(claimed.len(), 2);
    let again = seeds(NOW + 3, vec![link("http://a/2", 0, 1.0)]);
    assert_eq!(
        named(store.commit(again.into()).await.unwrap()),
        ["http://a/2"]
    );
    // Another operation on the same URL is another unit of work.
    let mut other = link("http://a/2", 0, 1.0);
    other.operation = OperationSpec::search_text("t");
    let other = seeds(NOW + 3, vec![other]);
    assert!(named(store.commit(other.into()).await.unwrap()).is_empty());
    // Kept trapped: queued by the seed.
    let trapped = CommitBatch {
        now: NOW + 4,
        trapped: vec![refused("http://a/tag/x/", TrapRule::Stale, "a/tag/")],
        ..CommitBatch::default()
    };
    store.commit(trapped.into()).await.unwrap();
    let seed = seeds(NOW + 5, vec![link("http://a/tag/x/", 0, 1.0)]);
    assert!(named(store.commit(seed.into()).await.unwrap()).is_empty());
    assert_eq!(
        pending_row(&*store, "http://a/tag/x/")
            .await
            .unwrap()
            .status,
        "pending"
    );
    // Processed and not due again: only its referral.
    let done = pages(
        NOW + 6,
        None,
        vec![page("http://a/done", 200, Some(1), vec![])],
    );
    store.commit(done.into()).await.unwrap();
    let seed = seeds(NOW + 7, vec![link("http://a/done", 0, 1.0)]);
    assert!(named(store.commit(seed.into()).await.unwrap()).is_empty());
}

/// A directory the trap defence closed: `a/tag/` under rule 6.
fn stale_tags(at: i64, pages: u32) -> TrapClosure {
    TrapClosure {
        reason: TrapReason::Stale {
            directory: "a/tag/".into(),
            stale: 24,
            pages,
        },
        closed_at: at,
        pages,
    }
}

fn refused(url: &str, rule: TrapRule, family: &str) -> TrappedLink {
    TrappedLink {
        link: link(url, 2, 0.25),
        trap: TrapMark {
            rule,
            family: family.into(),
        },
    }
}

/// The row of `url` in pending_urls, if any.
async fn pending_row(store: &dyn Store, url: &str) -> Option<PendingUrl> {
    (store.pending(10_000).await.unwrap())
        .into_iter()
        .find(|p| p.url == url)
}

async fn refused_urls_are_kept_with_their_family_and_released_by_it(b: Backend) {
    let store = b.open().await;
    // Known already: a pending URL and a processed page.
    store
        .commit((seeds(NOW, vec![link("http://a/waiting", 0, 1.0)])).into())
        .await
        .unwrap();
    store
        .commit((pages(NOW, None, vec![page("http://a/done", 200, Some(1), vec![])])).into())
        .await
        .unwrap();
    // A page whose links the directory's closure refused; a sitemap's link
    // refused too; and links to known URLs refused, which stay as they are.
    let mut home = page(
        "http://a/",
        200,
        Some(2),
        vec![link("http://a/about", 1, 0.5)],
    );
    home.trapped = vec![
        refused("http://a/tag/x+y/", TrapRule::Stale, "a/tag/"),
        refused("http://a/tag/x+z/", TrapRule::Stale, "a/tag/"),
        refused("http://a/waiting", TrapRule::Stale, "a/tag/"),
        refused("http://a/done", TrapRule::Stale, "a/tag/"),
    ];
    let batch = CommitBatch {
        now: NOW + 1,
        pages: vec![home],
        trapped: vec![refused("http://a/tag/q/", TrapRule::Stale, "a/tag/")],
        closures: vec![stale_tags(NOW + 1, 30)],
        ..CommitBatch::default()
    };
    store.commit(batch.into()).await.unwrap();
    let row = pending_row(store.as_ref(), "http://a/tag/x+y/")
        .await
        .unwrap();
    assert_eq!(row.status, TRAPPED);
    assert_eq!(
        row.trap,
        Some(TrapMark {
            rule: TrapRule::Stale,
            family: "a/tag/".into()
        })
    );
    assert_eq!(
        (row.depth, row.priority),
        (2, 0.25),
        "kept to be fetched later"
    );
    assert_eq!(row.referral_list, ["http://a/"], "its referral too");
    let waiting = pending_row(store.as_ref(), "http://a/waiting")
        .await
        .unwrap();
    assert_eq!((waiting.status.as_str(), waiting.trap), ("pending", None));
    assert!(pending_row(store.as_ref(), "http://a/done").await.is_none());
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.pending, counts.trapped), (2, 3));
    assert_eq!(counts.trapped_by_rule, [(TrapRule::Stale, 3)].into());

    // Neither pending nor processing: never claimed, and a frontier
    // holding only trapped URLs is empty (a one-shot crawl ends).
    let mut claimed: Vec<String> = (store.claim(claim_req(NOW + 2, 100, 100)).await.unwrap())
        .into_iter()
        .map(|j| j.url)
        .collect();
    claimed.sort();
    assert_eq!(claimed, ["http://a/about", "http://a/waiting"]);
    // The claimed page the guard refused becomes trapped; a key not
    // being processed is left as it is.
    let batch = CommitBatch {
        now: NOW + 3,
        pages: vec![page("http://a/about", 200, Some(3), vec![])],
        trapped_claims: vec![
            TrappedClaim {
                key: UrlKey {
                    url: "http://a/waiting".into(),
                    operation: OperationSpec::crawl(),
                },
                trap: TrapMark {
                    rule: TrapRule::HostProbation,
                    family: "a".into(),
                },
            },
            TrappedClaim {
                key: UrlKey {
                    url: "http://a/nowhere".into(),
                    operation: OperationSpec::crawl(),
                },
                trap: TrapMark {
                    rule: TrapRule::HostProbation,
                    family: "a".into(),
                },
            },
        ],
        closures: vec![
            // The family's first closure is kept.
            stale_tags(NOW + 3, 99),
            TrapClosure {
                reason: TrapReason::Host {
                    host: "a".into(),
                    run: 64,
                },
                closed_at: NOW + 3,
                pages: 64,
            },
        ],
        ..CommitBatch::default()
    };
    store.commit(batch.into()).await.unwrap();
    let waiting = pending_row(store.as_ref(), "http://a/waiting")
        .await
        .unwrap();
    assert_eq!(waiting.status, TRAPPED);
    assert_eq!(waiting.trap.unwrap().rule, TrapRule::HostProbation);
    assert!(
        pending_row(store.as_ref(), "http://a/nowhere")
            .await
            .is_none()
    );
    assert!(
        store.frontier_empty().await.unwrap(),
        "only trapped URLs left"
    );
    let counts = store.counts().await.unwrap();
    assert_eq!(
        (counts.pending, counts.processing, counts.trapped),
        (0, 0, 4)
    );
    assert!(counts.frontier_empty());

    // The closures, as a starting master reads them.
    let closures = store.trap_closures().await.unwrap();
    assert_eq!(closures.len(), 2);
    let host = &closures[0];
    assert_eq!(
        (host.family.as_str(), host.rule),
        ("a", TrapRule::HostProbation)
    );
    let tags = &closures[1];
    assert_eq!(tags.family, "a/tag/");
    assert_eq!(tags.host, "a");
    assert_eq!(
        (tags.rule, tags.scope),
        (TrapRule::Stale, TrapScope::Directory)
    );
    assert_eq!((tags.closed_at, tags.pages), (NOW + 1, 30));
    assert_eq!(tags.closure(), stale_tags(NOW + 1, 30));
    assert!(
        tags.reason.starts_with("trap: pages under a/tag/"),
        "{}",
        tags.reason
    );
    assert_eq!((tags.reopened_at, tags.allowed), (None, false));
    // `report traps`: by host then name, with counts and samples.
    let families = store.trap_families(2).await.unwrap();
    let listed: Vec<(&str, u64, usize)> = families
        .iter()
        .map(|f| (f.closed.family.as_str(), f.refused, f.samples.len()))
        .collect();
    assert_eq!(listed, [("a", 1, 1), ("a/tag/", 3, 2)]);
    assert!(
        families[1]
            .samples
            .iter()
            .all(|u| u.starts_with("http://a/tag/"))
    );

    // A link the guard admits to a trapped URL (the refusal was its
    // referrer's, or the family lifted) makes it pending again.
    let batch = pages(
        NOW + 4,
        None,
        vec![page(
            "http://a/elsewhere",
            200,
            Some(4),
            vec![link("http://a/tag/q/", 1, 1.0)],
        )],
    );
    store.commit(batch.into()).await.unwrap();
    let q = pending_row(store.as_ref(), "http://a/tag/q/")
        .await
        .unwrap();
    assert_eq!((q.status.as_str(), q.trap), ("pending", None));
    assert_eq!(store.counts().await.unwrap().trapped, 3);

    // An operator reopens the directory: its URLs go back to pending, its
    // closure is allowed for good; on this store, as any process opens it.
    assert_eq!(
        store.reopen_trap_family("a/tag/", NOW + 5).await.unwrap(),
        Some(2)
    );
    let store = b.open().await;
    let row = pending_row(store.as_ref(), "http://a/tag/x+y/")
        .await
        .unwrap();
    assert_eq!((row.status.as_str(), row.trap), ("pending", None));
    let tags = (store.trap_closures().await.unwrap())
        .into_iter()
        .find(|c| c.family == "a/tag/")
        .unwrap();
    assert_eq!((tags.reopened_at, tags.allowed), (Some(NOW + 5), true));
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.pending, counts.trapped), (3, 1));
    assert_eq!(
        counts.trapped_by_rule,
        [(TrapRule::HostProbation, 1)].into()
    );
    let mut claimed: Vec<String> = (store.claim(claim_req(NOW + 6, 100, 100)).await.unwrap())
        .into_iter()
        .map(|j| j.url)
        .collect();
    claimed.sort();
    assert_eq!(
        claimed,
        ["http://a/tag/q/", "http://a/tag/x+y/", "http://a/tag/x+z/"]
    );
    // Again: nothing more to release; a name it knows nothing of: None.
    assert_eq!(
        store.reopen_trap_family("a/tag/", NOW + 7).await.unwrap(),
        Some(0)
    );
    assert_eq!(
        store
            .reopen_trap_family("a/nothing/", NOW + 7)
            .await
            .unwrap(),
        None
    );
}

async fn claim_respects_per_host_caps_round_robin(b: Backend) {
    let store = b.open().await;
    let mut links = Vec::new();
    for i in 0..5 {
        links.push(link(&format!("http://a/{i}"), 0, 1.0));
    }
    links.push(link("http://b/0", 0, 1.0));
    store.commit((seeds(NOW, links)).into()).await.unwrap();
    let mut req = claim_req(NOW, 10, 2);
    req.held_per_host = HashMap::from([("b".to_string(), 2)]);
    let jobs = store.claim(req).await.unwrap();
    let hosts: Vec<&str> = jobs.iter().map(|j| j.host.as_str()).collect();
    assert_eq!(
        hosts,
        vec!["a", "a"],
        "cap 2 for a; b already holds its cap"
    );
    let jobs = store.claim(claim_req(NOW, 1, 2)).await.unwrap();
    assert_eq!(jobs.len(), 1);
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.pending, counts.processing), (3, 3));

    // Uneven hosts: c has one URL, d five. A limit of 4 is still filled,
    // rank by rank: d's first, c's only, then d's next two (the order within
    // a claim is the store's).
    let mut links = vec![link("http://c/0", 0, 3.0)];
    for i in 0..5 {
        links.push(link(&format!("http://d/{i}"), 0, 5.0 - f64::from(i)));
    }
    store.commit((seeds(NOW, links)).into()).await.unwrap();
    let mut req = claim_req(NOW, 4, 10);
    req.held_per_host = HashMap::from([("a".to_string(), 10), ("b".to_string(), 10)]);
    let mut urls: Vec<String> = store
        .claim(req)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.url)
        .collect();
    urls.sort();
    assert_eq!(
        urls,
        ["http://c/0", "http://d/0", "http://d/1", "http://d/2"]
    );
}

async fn claims_race_without_double_claims(b: Backend) {
    let store = b.open().await;
    let n = 300;
    let links = (0..n)
        .map(|i| link(&format!("http://h{}/{i}", i % 7), 0, 1.0))
        .collect();
    store.commit((seeds(NOW, links)).into()).await.unwrap();
    let mut tasks = Vec::new();
    for t in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let mut req = claim_req(NOW, 7, 1_000);
                req.owner = format!("node-{t}");
                let jobs = store.claim(req).await.unwrap();
                if jobs.is_empty() {
                    return mine;
                }
                mine.extend(jobs.into_iter().map(|j| j.url));
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(all.len(), n, "every URL claimed");
    assert_eq!(unique.len(), n, "none claimed twice");
}

async fn lease_expiry_returns_urls(b: Backend) {
    let store = b.open().await;
    store
        .commit((seeds(NOW, vec![link("http://a/1", 0, 1.0)])).into())
        .await
        .unwrap();
    let first = store.claim(claim_req(NOW, 10, 10)).await.unwrap();
    assert_eq!(first.len(), 1);
    assert!(
        store
            .claim(claim_req(NOW + 1_000, 10, 10))
            .await
            .unwrap()
            .is_empty(),
        "leased"
    );
    let again = store.claim(claim_req(NOW + 61_000, 10, 10)).await.unwrap();
    assert_eq!(again.len(), 1, "the lease expired: claimable again");
    // Renewed leases do not expire.
    let key = UrlKey {
        url: "http://a/1".into(),
        operation: OperationSpec::crawl(),
    };
    store
        .extend_leases(std::slice::from_ref(&key), "node-a", NOW + 500_000)
        .await
        .unwrap();
    assert!(
        store
            .claim(claim_req(NOW + 200_000, 10, 10))
            .await
            .unwrap()
            .is_empty()
    );
    // A restarting node releases its leases at once, except what still runs.
    store
        .commit((seeds(NOW, vec![link("http://a/2", 0, 1.0)])).into())
        .await
        .unwrap();
    store.claim(claim_req(NOW, 10, 10)).await.unwrap();
    assert_eq!(store.counts().await.unwrap().processing, 2);
    assert_eq!(
        store
            .release("node-a", std::slice::from_ref(&key))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.counts().await.unwrap().processing, 1);
    assert_eq!(store.release_keys(&[key]).await.unwrap(), 1);
    assert_eq!(store.counts().await.unwrap().processing, 0);
}

async fn processed_pages_by_url_or_newest_first(b: Backend) {
    let store = b.open().await;
    for (i, url) in ["http://n/b", "http://n/c", "http://n/a"]
        .iter()
        .enumerate()
    {
        let at = NOW + 1_000 * i as i64;
        store
            .commit((pages(at, None, vec![page(url, 200, Some(100 + i as u64), vec![])])).into())
            .await
            .unwrap();
    }
    let list = |newest_first| {
        let store = store.clone();
        async move {
            store
                .processed(PageQuery {
                    newest_first,
                    ..PageQuery::default()
                })
                .await
                .unwrap()
                .into_iter()
                .map(|p| p.record.url)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        list(false).await,
        ["http://n/a", "http://n/b", "http://n/c"]
    );
    assert_eq!(list(true).await, ["http://n/a", "http://n/c", "http://n/b"]);
    let two = store
        .processed(PageQuery {
            limit: Some(2),
            newest_first: true,
            ..PageQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(two.len(), 2);
    assert_eq!(two[1].record.url, "http://n/c");
}

async fn reprocess_interval_rule(b: Backend) {
    let store = b.open().await;
    store
        .commit((seeds(NOW, vec![link("http://a/p", 0, 1.0)])).into())
        .await
        .unwrap();
    store.claim(claim_req(NOW, 10, 10)).await.unwrap();
    store
        .commit((pages(NOW, None, vec![page("http://a/p", 200, Some(1), vec![])])).into())
        .await
        .unwrap();
    assert!(pending_urls(&*store).await.is_empty());
    // Linked again soon after: only the referral is added.
    let interval = Some(60_000);
    let linked_from = |referrer: &str, hash| {
        vec![page(
            referrer,
            200,
            Some(hash),
            vec![link("http://a/p", 1, 1.0)],
        )]
    };
    let s = store
        .commit((pages(NOW + 1_000, None, linked_from("http://a/r1", 2))).into())
        .await
        .unwrap();
    assert_eq!((s.queued, s.merged), (0, 1));
    store
        .commit((pages(NOW + 1_000, interval, linked_from("http://a/r2", 3))).into())
        .await
        .unwrap();
    let p = store.processed_url("http://a/p").await.unwrap().unwrap();
    assert_eq!(p.referral_count, 2);
    assert!(pending_urls(&*store).await.is_empty());
    // Linked again after the interval: queued again.
    let s = store
        .commit((pages(NOW + 61_000, interval, linked_from("http://a/r3", 4))).into())
        .await
        .unwrap();
    assert_eq!(s.queued, 1);
    assert_eq!(pending_urls(&*store).await, vec!["http://a/p"]);
}

/// A watched page: fetched, due again, swept back to pending (once), its
/// last fetch handed to the claim, a 304 keeping the stored page, and its
/// history kept within its bound, newest first out.
async fn watched_urls_are_swept_and_their_history_bounded(b: Backend) {
    let store = b.open().await;
    let url = "http://w/a";
    store
        .commit((seeds(NOW, vec![link(url, 0, 1.0)])).into())
        .await
        .unwrap();
    store.claim(claim_req(NOW, 10, 10)).await.unwrap();
    let fetched = |now: i64, status: u16, hash: Option<u64>, changed: bool| {
        let mut p = page(url, status, hash, vec![link("http://w/b", 1, 1.0)]);
        p.record.title = Some("A".into());
        p.record.etag = Some("\"v1\"".into());
        p.record.fetch_ms = now - NOW;
        p.record.d_next_check = Some(now + 2_000);
        p.record.check_interval_ms = Some(2_000);
        p.changed = changed;
        p.fetched_before = now > NOW;
        CommitBatch {
            now,
            history_keep: 3,
            pages: vec![p],
            ..CommitBatch::default()
        }
    };
    store
        .commit((fetched(NOW, 200, Some(1), false)).into())
        .await
        .unwrap();
    let p = store.processed_url(url).await.unwrap().unwrap();
    assert_eq!(p.record.d_next_check, Some(NOW + 2_000));
    assert_eq!(p.record.etag.as_deref(), Some("\"v1\""));
    // Not due yet; then due: queued once, its next check cleared.
    assert_eq!(store.requeue_due(NOW + 1_999, 10).await.unwrap(), 0);
    assert_eq!(store.requeue_due(NOW + 2_000, 10).await.unwrap(), 1);
    assert_eq!(store.requeue_due(NOW + 2_001, 10).await.unwrap(), 0);
    assert_eq!(pending_urls(&*store).await, vec![url, "http://w/b"]);
    assert_eq!(
        store
            .processed_url(url)
            .await
            .unwrap()
            .unwrap()
            .record
            .d_next_check,
        None
    );
    let jobs = store.claim(claim_req(NOW + 2_000, 10, 10)).await.unwrap();
    let job = jobs.iter().find(|j| j.url == url).expect("claimed again");
    let last = job.last.as_ref().expect("the last fetch");
    assert_eq!(last.http_returncode, Some(200));
    assert_eq!(last.content_hash, Some(1));
    assert_eq!(last.etag.as_deref(), Some("\"v1\""));
    assert_eq!(last.check_interval_ms, Some(2_000));
    let other = jobs.iter().find(|j| j.url == "http://w/b").unwrap();
    assert_eq!(other.last, None, "never fetched");

    // A 304: the stored page stands, only the check moves on.
    let mut not_modified = fetched(NOW + 3_000, 304, None, false);
    not_modified.pages[0].not_modified = true;
    not_modified.pages[0].links.clear();
    not_modified.pages[0].record.title = None;
    not_modified.pages[0].record.content_hash = Some(1);
    store.commit(not_modified.into()).await.unwrap();
    let p = store.processed_url(url).await.unwrap().unwrap();
    assert_eq!(p.d_processed, NOW + 3_000);
    assert_eq!(p.record.http_returncode, Some(200));
    assert_eq!(p.record.title.as_deref(), Some("A"));
    assert_eq!(p.record.out_links, vec!["http://w/b"]);
    assert_eq!(p.record.d_next_check, Some(NOW + 5_000));
    assert_eq!(pending_urls(&*store).await, vec!["http://w/b"]);
    assert_eq!(store.counts().await.unwrap().processed, 1, "not a copy");

    // Many checks later: the newest three are kept.
    store.requeue_due(NOW + 5_000, 10).await.unwrap();
    store
        .commit((fetched(NOW + 5_000, 500, Some(9), true)).into())
        .await
        .unwrap();
    store.requeue_due(NOW + 7_000, 10).await.unwrap();
    store
        .commit((fetched(NOW + 7_000, 200, Some(2), true)).into())
        .await
        .unwrap();
    let history = store.fetch_history(HistoryQuery::default()).await.unwrap();
    let seen: Vec<(i64, Option<u16>, bool)> = history
        .iter()
        .map(|h| (h.d_fetch, h.http_returncode, h.changed))
        .collect();
    assert_eq!(
        seen,
        vec![
            (NOW + 3_000, Some(304), false),
            (NOW + 5_000, Some(500), true),
            (NOW + 7_000, Some(200), true),
        ]
    );
    assert_eq!(history[2].url, url);
    assert_eq!(history[2].host, "w");
    assert_eq!(history[2].content_hash, Some(2));
    assert_eq!(history[2].size, Some(10));
    assert_eq!(history[2].fetch_ms, 7_000);
    let since = HistoryQuery {
        since: Some(NOW + 5_000),
        host: Some("w".into()),
    };
    assert_eq!(store.fetch_history(since).await.unwrap().len(), 2);
    let elsewhere = HistoryQuery {
        host: Some("x".into()),
        ..HistoryQuery::default()
    };
    assert!(store.fetch_history(elsewhere).await.unwrap().is_empty());
}

/// A URL's own watch interval (`add_url … every`): on its pending row for
/// its first fetch, on its processed row for every check after (a 304
/// included), across reopening the store; a new one replaces it, whether
/// the URL waits or was processed.
async fn a_urls_own_watch_interval_persists(b: Backend) {
    let watched = |url: &str, every: i64, now: Option<i64>| NewLink {
        check_every_ms: Some(every),
        modified: now,
        ..link(url, 0, 1.0)
    };
    let every = |jobs: &[Job]| -> Vec<(String, Option<i64>)> {
        let mut e: Vec<_> = jobs
            .iter()
            .map(|j| (j.url.clone(), j.check_every_ms))
            .collect();
        e.sort();
        e
    };
    {
        let store = b.open().await;
        store
            .commit(
                (seeds(
                    NOW,
                    vec![
                        watched("http://e/a", 2_000, None),
                        link("http://e/b", 0, 1.0),
                    ],
                ))
                .into(),
            )
            .await
            .unwrap();
    }
    // A new process: the listing shows it, and the first fetch knows it.
    let store = b.open().await;
    let mut listed: Vec<(String, Option<i64>)> = store
        .pending(10)
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.url, p.check_every_ms))
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        vec![
            ("http://e/a".into(), Some(2_000)),
            ("http://e/b".into(), None)
        ]
    );
    let jobs = store.claim(claim_req(NOW, 10, 10)).await.unwrap();
    assert_eq!(
        every(&jobs),
        vec![
            ("http://e/a".into(), Some(2_000)),
            ("http://e/b".into(), None)
        ]
    );
    let fetched = |url: &str, at: i64| {
        let mut p = page(url, 200, Some(1), vec![]);
        p.record.etag = Some("\"v1\"".into());
        p.record.check_every_ms = Some(2_000);
        p.record.check_interval_ms = Some(2_000);
        p.record.d_next_check = Some(at + 2_000);
        p
    };
    store
        .commit((pages(NOW, None, vec![fetched("http://e/a", NOW)])).into())
        .await
        .unwrap();
    drop(store);

    // Every check after knows it, from the processed row.
    let store = b.open().await;
    let a = store.processed_url("http://e/a").await.unwrap().unwrap();
    assert_eq!(a.record.check_every_ms, Some(2_000));
    assert_eq!(store.requeue_due(NOW + 2_000, 10).await.unwrap(), 1);
    let jobs = store.claim(claim_req(NOW + 2_000, 10, 10)).await.unwrap();
    let a = jobs.iter().find(|j| j.url == "http://e/a").unwrap();
    assert_eq!(a.check_every_ms, Some(2_000));
    assert_eq!(a.last.as_ref().unwrap().check_every_ms, Some(2_000));
    // A 304 keeps it.
    let mut not_modified = fetched("http://e/a", NOW + 2_000);
    not_modified.not_modified = true;
    store
        .commit((pages(NOW + 2_000, None, vec![not_modified])).into())
        .await
        .unwrap();
    let a = store.processed_url("http://e/a").await.unwrap().unwrap();
    assert_eq!(a.record.check_every_ms, Some(2_000));
    assert_eq!(a.record.d_next_check, Some(NOW + 4_000));

    // A new interval: for the processed URL (queued again now) and for
    // the one still waiting, which takes it.
    let s = store
        .commit(
            (seeds(
                NOW + 3_000,
                vec![
                    watched("http://e/a", 60_000, Some(NOW + 3_000)),
                    watched("http://e/b", 5_000, Some(NOW + 3_000)),
                ],
            ))
            .into(),
        )
        .await
        .unwrap();
    assert_eq!((s.queued, s.merged), (1, 1));
    store
        .release_keys(&[UrlKey {
            url: "http://e/b".into(),
            operation: OperationSpec::crawl(),
        }])
        .await
        .unwrap();
    let jobs = store.claim(claim_req(NOW + 3_000, 10, 10)).await.unwrap();
    assert_eq!(
        every(&jobs),
        vec![
            ("http://e/a".into(), Some(60_000)),
            ("http://e/b".into(), Some(5_000))
        ]
    );
    let a = jobs.iter().find(|j| j.url == "http://e/a").unwrap();
    assert_eq!(
        a.last.as_ref().unwrap().check_every_ms,
        Some(2_000),
        "the interval its last fetch was made with"
    );
}

async fn content_duplicates_recorded_links_not_followed(b: Backend) {
    let store = b.open().await;
    let original = page(
        "http://a/orig",
        200,
        Some(77),
        vec![link("http://a/from-orig", 1, 1.0)],
    );
    let copy = page(
        "http://b/copy",
        200,
        Some(77),
        vec![link("http://b/from-copy", 1, 1.0)],
    );
    let s = store
        .commit((pages(NOW, None, vec![original])).into())
        .await
        .unwrap();
    assert!(s.duplicates.is_empty());
    let s = store
        .commit((pages(NOW + 1, None, vec![copy])).into())
        .await
        .unwrap();
    assert_eq!(s.duplicates, vec!["http://b/copy".to_string()]);
    // Noted for the index with the page, should the process die before
    // the index is told (drained by the next start).
    let notes = store
        .first_records(web_crawler::actors::INDEX_FORGET, None, 10)
        .await
        .unwrap();
    let noted: Vec<_> = notes.iter().map(|n| n["url"].clone()).collect();
    assert_eq!(noted, vec![json!("http://b/copy")]);
    assert_eq!(pending_urls(&*store).await, vec!["http://a/from-orig"]);
    let copy = store.processed_url("http://b/copy").await.unwrap().unwrap();
    assert_eq!(copy.duplicate_of.as_deref(), Some("http://a/orig"));
    let duplicates = store
        .processed(PageQuery {
            only_duplicates: true,
            ..PageQuery::default()
        })
        .await
        .unwrap();
    let listed: Vec<_> = (duplicates.iter())
        .map(|p| (p.record.url.as_str(), p.duplicate_of.as_deref()))
        .collect();
    assert_eq!(listed, [("http://b/copy", Some("http://a/orig"))]);
    // Re-processing the original does not make it a copy of its copy.
    store
        .commit(
            (pages(
                NOW + 2,
                None,
                vec![page("http://a/orig", 200, Some(77), vec![])],
            ))
            .into(),
        )
        .await
        .unwrap();
    let orig = store.processed_url("http://a/orig").await.unwrap().unwrap();
    assert_eq!(orig.duplicate_of, None);
    // Identical error pages are not duplicates.
    store
        .commit(
            (pages(
                NOW + 3,
                None,
                vec![
                    page("http://a/e1", 404, Some(9), vec![]),
                    page("http://a/e2", 404, Some(9), vec![]),
                ],
            ))
            .into(),
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .processed_url("http://a/e2")
            .await
            .unwrap()
            .unwrap()
            .duplicate_of,
        None
    );
    assert_eq!(store.counts().await.unwrap().duplicates, 1);
}

fn doc(value: serde_json::Value) -> Document {
    value.as_object().cloned().expect("an object")
}

/// An operation's records: one per collection and key, replaced when the
/// page is processed again, stamped with the commit time, listed by
/// collection and filtered by field.
async fn records_replace_per_collection_and_key(b: Backend) {
    let store = b.open().await;
    let mut p = page("http://a/s", 200, None, vec![]);
    p.records = vec![
        Record {
            collection: SEARCH_RESULTS.into(),
            key: doc(json!({ "url": "http://a/s", "text": "needle" })),
            fields: doc(json!({ "positions": [3, 10, 99] })),
            stamp: Some("d_search".into()),
        },
        Record {
            collection: "word_counts".into(),
            key: doc(json!({ "url": "http://a/s" })),
            fields: doc(json!({ "words": 12, "top": ["a", "b"] })),
            stamp: None,
        },
    ];
    store
        .commit((pages(NOW, None, vec![p.clone()])).into())
        .await
        .unwrap();
    p.records[0].fields = doc(json!({ "positions": [4] }));
    store
        .commit((pages(NOW + 5, None, vec![p])).into())
        .await
        .unwrap();
    let results = store.text_match_hits(Some("needle")).await.unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].url, "http://a/s");
    assert_eq!(results[0].positions, vec![4]);
    assert_eq!(results[0].d_search, NOW + 5);
    assert!(
        store
            .text_match_hits(Some("other"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.counts().await.unwrap().search_results, 1);
    let counts = store
        .records("word_counts", &Document::new())
        .await
        .unwrap();
    assert_eq!(
        counts,
        vec![doc(
            json!({ "url": "http://a/s", "words": 12, "top": ["a", "b"] })
        )]
    );
    let none = store
        .records("word_counts", &doc(json!({ "url": "http://b/" })))
        .await
        .unwrap();
    assert!(none.is_empty());
    assert!(
        store
            .records("nothing_here", &Document::new())
            .await
            .unwrap()
            .is_empty()
    );
}

async fn retries_back_off_then_failures_are_recorded(b: Backend) {
    let store = b.open().await;
    store
        .commit((seeds(NOW, vec![link("http://a/f", 0, 1.0)])).into())
        .await
        .unwrap();
    let job: Job = store.claim(claim_req(NOW, 1, 1)).await.unwrap().remove(0);
    assert_eq!(job.attempts, 0);
    let retry = CommitBatch {
        now: NOW,
        retries: vec![Retry {
            key: job.key(),
            not_before: NOW + 5_000,
            error: "timed out".into(),
        }],
        ..CommitBatch::default()
    };
    store.commit(retry.into()).await.unwrap();
    assert!(
        store
            .claim(claim_req(NOW + 1_000, 1, 1))
            .await
            .unwrap()
            .is_empty(),
        "not before"
    );
    let job = store
        .claim(claim_req(NOW + 5_000, 1, 1))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(job.attempts, 1);
    let pending = store.pending(10).await.unwrap();
    assert_eq!(pending[0].last_error.as_deref(), Some("timed out"));
    let mut failed = page("http://a/f", 503, None, vec![]);
    failed.record.error = Some("failed after 2 attempt(s): HTTP 503".into());
    failed.record.content_hash = None;
    store
        .commit((pages(NOW + 6_000, None, vec![failed])).into())
        .await
        .unwrap();
    let counts = store.counts().await.unwrap();
    assert_eq!(
        (counts.failed, counts.pending, counts.processing),
        (1, 0, 0)
    );
    let broken = store.broken_links().await.unwrap();
    assert_eq!(broken.len(), 1);
    assert_eq!(broken[0].http_returncode, Some(503));
    assert_eq!(
        store.status_histogram().await.unwrap(),
        vec![(Some(503), 1)]
    );
}

async fn resume_after_restart_on_the_same_store(b: Backend) {
    {
        let store = b.open().await;
        store
            .commit(
                (seeds(
                    NOW,
                    vec![link("http://a/1", 0, 1.0), link("http://a/2", 0, 1.0)],
                ))
                .into(),
            )
            .await
            .unwrap();
        store.claim(claim_req(NOW, 1, 10)).await.unwrap();
        store
            .commit(
                (CommitBatch {
                    now: NOW,
                    hosts: vec![HostRecord {
                        host: "a".into(),
                        robots_status: web_crawler::actors::RobotsStatus::Fetched,
                        robots_http_code: Some(200),
                        robots_txt: Some("User-agent: *\nDisallow:".into()),
                        robots_fetched_at: NOW,
                        crawl_delay_ms: Some(1500),
                        sitemaps: vec!["http://a/sitemap.xml".into()],
                        ..HostRecord::default()
                    }],
                    ..CommitBatch::default()
                })
                .into(),
            )
            .await
            .unwrap();
    }
    // A new process: the same store, reopened.
    let store = b.open().await;
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.pending, counts.processing), (1, 1));
    assert_eq!(
        store.release("node-a", &[]).await.unwrap(),
        1,
        "the dead run's lease"
    );
    assert_eq!(store.claim(claim_req(NOW, 10, 10)).await.unwrap().len(), 2);
    let hosts = store.hosts().await.unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].crawl_delay_ms, Some(1500));
    assert_eq!(hosts[0].sitemaps, vec!["http://a/sitemap.xml"]);
    store
        .commit((pages(NOW, None, vec![page("http://a/1", 200, None, vec![])])).into())
        .await
        .unwrap();
    drop(store);
    // Reopened again: links to a processed and a pending URL of the earlier
    // runs are referrals, never new work.
    let store = b.open().await;
    let s = store
        .commit(
            (seeds(
                NOW,
                vec![link("http://a/1", 1, 1.0), link("http://a/2", 1, 1.0)],
            ))
            .into(),
        )
        .await
        .unwrap();
    assert_eq!((s.queued, s.merged), (0, 2));
    assert_eq!(pending_urls(&*store).await, vec!["http://a/2"]);
}

async fn crash_between_links_and_processed_loses_nothing(b: Backend) {
    {
        let store = b.open().await;
        store
            .commit((seeds(NOW, vec![link("http://a/page", 0, 1.0)])).into())
            .await
            .unwrap();
        store.claim(claim_req(NOW, 10, 10)).await.unwrap();
        // The first half of a commit: the page's links are queued; the process
        // dies before the page is marked processed.
        store
            .commit((seeds(NOW, vec![link("http://a/child", 1, 0.5)])).into())
            .await
            .unwrap();
    }
    let store = b.open().await;
    store.release("node-a", &[]).await.unwrap();
    assert_eq!(
        pending_urls(&*store).await,
        vec!["http://a/child", "http://a/page"]
    );
    // Re-processing the page queues its links again, idempotently.
    let jobs = store.claim(claim_req(NOW, 10, 10)).await.unwrap();
    assert_eq!(jobs.len(), 2);
    let s = store
        .commit(
            (pages(
                NOW,
                None,
                vec![page(
                    "http://a/page",
                    200,
                    Some(5),
                    vec![link("http://a/child", 1, 0.5)],
                )],
            ))
            .into(),
        )
        .await
        .unwrap();
    assert_eq!((s.queued, s.merged), (0, 1));
    assert_eq!(pending_urls(&*store).await, vec!["http://a/child"]);
    let child = &store.pending(10).await.unwrap()[0];
    assert_eq!(child.referral_list, vec!["http://a/page"]);
}

async fn processed_documents_read_back_whole(b: Backend) {
    let store: Arc<dyn Store> = b.open().await;
    store
        .commit(
            (pages(
                NOW,
                None,
                vec![page(
                    "http://a/",
                    200,
                    Some(1),
                    vec![link("http://a/doc", 1, 1.0)],
                )],
            ))
            .into(),
        )
        .await
        .unwrap();
    let mut p = page(
        "http://a/doc",
        301,
        None,
        vec![link("http://a/new", 1, 1.0)],
    );
    p.record.redirect_to = Some("http://a/new".into());
    p.record.title = Some("Moved".into());
    p.record.server = Some("nginx".into());
    p.record.fetch_ms = 12;
    p.record.node = "node-a".into();
    p.record.depth = 1;
    store
        .commit((pages(NOW + 7, None, vec![p.clone()])).into())
        .await
        .unwrap();
    let back = store.processed_url("http://a/doc").await.unwrap().unwrap();
    // The store records the admitted links as out_links.
    let mut want = p.record.clone();
    want.out_links = vec!["http://a/new".to_string()];
    assert_eq!(back.record, want);
    assert_eq!(back.referral_list, vec!["http://a/"]);
    assert_eq!(back.referral_count, 1);
    assert_eq!(back.d_processed, NOW + 7);
    let listed = store.processed(Default::default()).await.unwrap();
    assert_eq!(listed.len(), 2);
}

/// The site graph's pass: every processed page once, in URL order, in
/// batches found by key; and the counts `report hosts` lists.
async fn pages_in_batches_and_hosts_with_their_pages(b: Backend) {
    let store: Arc<dyn Store> = b.open().await;
    let urls = [
        "http://a/",
        "http://a/1",
        "http://a/2",
        "http://b:81/",
        "http://b:81/x?q=1&r=2",
    ];
    let mut batch = Vec::new();
    for (i, url) in urls.iter().enumerate().rev() {
        let next = urls[(i + 1) % urls.len()];
        batch.push(page(
            url,
            200,
            Some(i as u64 + 10),
            vec![link(next, 1, 1.0)],
        ));
    }
    store
        .commit((pages(NOW, None, batch)).into())
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..10 {
        let got = store.processed_after(after.as_deref(), 2).await.unwrap();
        assert!(got.len() <= 2);
        for p in &got {
            seen.push(p.url.clone());
            let i = urls.iter().position(|u| *u == p.url).unwrap();
            assert_eq!(p.out_links, vec![urls[(i + 1) % urls.len()].to_string()]);
            assert_eq!(p.http_returncode, Some(200));
        }
        match got.last() {
            Some(last) => after = Some(last.url.clone()),
            None => break,
        }
    }
    assert_eq!(seen, urls, "each page once, in URL order");
    assert!(
        store
            .processed_after(Some("http://b:81/x?q=1&r=2"), 5)
            .await
            .unwrap()
            .is_empty()
    );

    assert_eq!(
        store.pages_per_host().await.unwrap(),
        vec![("a".to_string(), 3), ("b:81".to_string(), 2)]
    );
    store
        .commit(
            (CommitBatch {
                now: NOW,
                hosts: vec![HostRecord {
                    host: "b:81".into(),
                    robots_http_code: Some(200),
                    robots_fetched_at: NOW,
                    crawl_delay_ms: Some(1500),
                    sitemaps: vec!["http://b:81/sitemap.xml".into()],
                    ..HostRecord::default()
                }],
                ..CommitBatch::default()
            })
            .into(),
        )
        .await
        .unwrap();
    let hosts = store.host_summaries().await.unwrap();
    assert_eq!(hosts.len(), 2);
    assert_eq!((hosts[0].host.as_str(), hosts[0].pages), ("a", 3));
    assert_eq!(hosts[0].robots_status, None, "no robots.txt record yet");
    assert_eq!((hosts[1].host.as_str(), hosts[1].pages), ("b:81", 2));
    assert_eq!(hosts[1].crawl_delay_ms, Some(1500));
    assert_eq!(hosts[1].sitemaps, vec!["http://b:81/sitemap.xml"]);
}

/// A node that left for good hands its pages over: they are queued again
/// in batches by URL, counted down as their hosts' new owners fetch them,
/// and the store lists the nodes its pages say fetched them.
async fn a_departed_nodes_pages_are_handed_over(b: Backend) {
    let store = b.open().await;
    let fetched_by = |url: &str, node: &str| {
        let mut p = page(url, 200, None, vec![]);
        p.record.node = node.to_string();
        p.record.etag = Some("\"v1\"".into());
        p
    };
    let urls = ["http://a/1", "http://a/2", "http://b/3"];
    let mut done: Vec<ProcessedPage> = urls.iter().map(|u| fetched_by(u, "w1")).collect();
    done.push(fetched_by("http://a/kept", "w2"));
    store.commit(pages(1_000, None, done).into()).await.unwrap();
    assert_eq!(store.nodes_with_pages().await.unwrap(), ["w1", "w2"]);

    let first = store.hand_over("w1", None, 2, 2_000).await.unwrap();
    assert_eq!((first.queued, first.waiting), (2, 3));
    assert_eq!(first.last.as_deref(), Some("http://a/2"));
    let second = store
        .hand_over("w1", first.last.as_deref(), 2, 2_000)
        .await
        .unwrap();
    assert_eq!((second.queued, second.last, second.waiting), (1, None, 3));
    assert_eq!(
        pending_urls(store.as_ref()).await,
        urls,
        "w2's page stays put"
    );
    // Fetched whole by the new owner: no validators to send.
    let jobs = store.claim(claim_req(2_500, 10, 10)).await.unwrap();
    assert_eq!(jobs.len(), 3);
    assert!(
        jobs.iter()
            .all(|j| j.last.as_ref().is_none_or(|l| l.etag.is_none())),
        "{jobs:?}"
    );

    let again = vec![
        fetched_by("http://a/1", "w2"),
        fetched_by("http://b/3", "master"),
    ];
    store
        .commit(pages(3_000, None, again).into())
        .await
        .unwrap();
    let count = store.hand_over("w1", None, 0, 4_000).await.unwrap();
    assert_eq!((count.queued, count.last, count.waiting), (0, None, 1));
    assert_eq!(
        store.nodes_with_pages().await.unwrap(),
        ["master", "w1", "w2"]
    );
}

on_both_backends!(upsert_and_referral_merge_, upsert_and_referral_merge);
on_both_backends!(seeds_waiting_already, seeds_waiting_already_are_named);
on_both_backends!(
    trapped_urls,
    refused_urls_are_kept_with_their_family_and_released_by_it
);
on_both_backends!(hand_over, a_departed_nodes_pages_are_handed_over);
on_both_backends!(
    watched_urls,
    watched_urls_are_swept_and_their_history_bounded
);
on_both_backends!(own_watch_interval, a_urls_own_watch_interval_persists);
on_both_backends!(processed_order, processed_pages_by_url_or_newest_first);
on_both_backends!(
    pages_in_batches_and_hosts,
    pages_in_batches_and_hosts_with_their_pages
);
on_both_backends!(
    claim_caps_round_robin,
    claim_respects_per_host_caps_round_robin
);
on_both_backends!(claim_race, claims_race_without_double_claims);
on_both_backends!(lease_expiry, lease_expiry_returns_urls);
on_both_backends!(reprocess_interval, reprocess_interval_rule);
on_both_backends!(
    content_duplicates,
    content_duplicates_recorded_links_not_followed
);
on_both_backends!(records, records_replace_per_collection_and_key);
on_both_backends!(
    retries_and_failures,
    retries_back_off_then_failures_are_recorded
);
on_both_backends!(resume_after_restart, resume_after_restart_on_the_same_store);
on_both_backends!(
    crash_between_links_and_processed,
    crash_between_links_and_processed_loses_nothing
);
on_both_backends!(processed_read_back, processed_documents_read_back_whole);
