//! Store outages. A store that is away for a while is waited for: the crawl
//! claims nothing meanwhile, keeps its results, resumes when the store is
//! back, and fetches nothing twice. A store away for longer than the limit,
//! or failing for good, stops the crawl with one sentence and an exit code
//! of its own, and a second run resumes. Shown with a wrapper that injects
//! the failures around a real store, with SQLite's lock and long readers,
//! with a full SQLite file, and with a real MongoDB-wire server stopped and
//! started again under a running `web_crawler crawl` (`command`).

#[cfg(feature = "cli")]
mod command;

use crate::common::backend::Backend;
use crate::common::queue_seed;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use web_crawler::actors::{
    AppError, ClaimRequest, CommitBatch, CommitSummary, ExitReason, Frontier, Job, Storage, Store,
    StoreCounts, StoreError, StoreFailureKind, UrlKey, async_trait,
};
use web_crawler::policy::Scope;
use web_crawler::store::SqliteStore;
use web_crawler::{AppHandle, IdleReason, OperationSpec, Settings, start, start_on};
use web_crawler_testsupport::{Page, TestServer, page_with_links};

/// Test settings; the node name is unique in the process.
fn settings(node: &str) -> Settings {
    static N: AtomicUsize = AtomicUsize::new(0);
    let mut s = Settings::default();
    s.crawl.node_name = format!("{node}-{}", N.fetch_add(1, Ordering::SeqCst));
    s.crawl.concurrency = 8;
    s.crawl.min_delay = Duration::ZERO;
    s.crawl.tick = Duration::from_millis(50);
    s.policy.scope = Scope::Any;
    s.fetch.total_timeout = Duration::from_secs(5);
    s
}

/// `/` → `/p0`, and each `/pI` links to the next three: every page is
/// found only by fetching the ones before it, each answering after `delay`.
fn slow_chain(n: usize, delay: Duration) -> HashMap<String, Page> {
    let mut pages = HashMap::new();
    for i in 0..n {
        let links: Vec<String> = (1..=3)
            .filter(|k| i + k < n)
            .map(|k| format!("/p{}", i + k))
            .collect();
        let refs: Vec<&str> = links.iter().map(String::as_str).collect();
        pages.insert(
            format!("/p{i}"),
            page_with_links(&format!("page {i}"), &refs).delay(delay),
        );
    }
    pages.insert("/".to_string(), page_with_links("root", &["/p0"]));
    pages
}

/// Every page of a [`slow_chain`] of `n` was fetched exactly once.
fn each_page_fetched_once(server: &TestServer, n: usize) {
    let hits = server.hits();
    for i in 0..n {
        let target = format!("/p{i}");
        assert_eq!(
            hits.get(&target),
            Some(&1),
            "{target} fetched once: {hits:?}"
        );
    }
}

/// Poll `probe` every 50 ms until it returns something, for at most `timeout`.
async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(Instant::now() < deadline, "waited {timeout:?} for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn processed(store: &dyn Store) -> u64 {
    store.counts().await.map_or(0, |c| c.processed)
}

// --- a wrapper that switches the store off --------------------------------------

const UP: u8 = 0;
const UNAVAILABLE: u8 = 1;
const REFUSED: u8 = 2;

/// The real store, with its frontier switched off by the test: every call
/// then fails as an unreachable server's (`UNAVAILABLE`) or a full disk's
/// (`REFUSED`) would. The queries go to the store itself.
#[derive(Debug)]
struct Switched {
    inner: Arc<dyn Store>,
    mode: AtomicU8,
    /// Frontier calls that failed so.
    failed_calls: AtomicU64,
}

impl Switched {
    fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            mode: AtomicU8::new(UP),
            failed_calls: AtomicU64::new(0),
        })
    }

    fn failed_calls(&self) -> u64 {
        self.failed_calls.load(Ordering::SeqCst)
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    fn storage(self: &Arc<Self>) -> Storage {
        Storage::split(self.clone(), self.inner.clone())
    }

    fn check(&self) -> Result<(), StoreError> {
        let why = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let mode = self.mode.load(Ordering::SeqCst);
        if mode != UP {
            self.failed_calls.fetch_add(1, Ordering::SeqCst);
        }
        match mode {
            UNAVAILABLE => Err(StoreError::unavailable("injected outage", why)),
            REFUSED => Err(StoreError::refused(
                "injected: the disk is full",
                std::io::Error::from(std::io::ErrorKind::StorageFull),
            )),
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl Frontier for Switched {
    async fn claim(&self, req: ClaimRequest) -> Result<Vec<Job>, StoreError> {
        self.check()?;
        self.inner.claim(req).await
    }
    async fn commit(&self, batch: Arc<CommitBatch>) -> Result<CommitSummary, StoreError> {
        self.check()?;
        self.inner.commit(batch).await
    }
    async fn commit_and_claim(
        &self,
        batch: Arc<CommitBatch>,
        claim: Option<ClaimRequest>,
    ) -> Result<(CommitSummary, Vec<Job>), StoreError> {
        self.check()?;
        self.inner.commit_and_claim(batch, claim).await
    }
    async fn extend_leases(&self, k: &[UrlKey], o: &str, u: i64) -> Result<(), StoreError> {
        self.check()?;
        self.inner.extend_leases(k, o, u).await
    }
    async fn release(&self, owner: &str, keep: &[UrlKey]) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.release(owner, keep).await
    }
    async fn release_keys(&self, keys: &[UrlKey]) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.release_keys(keys).await
    }
    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        self.check()?;
        self.inner.counts().await
    }

    async fn frontier_empty(&self) -> Result<bool, StoreError> {
        self.check()?;
        self.inner.frontier_empty().await
    }

    async fn requeue_due(&self, now: i64, limit: usize) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.requeue_due(now, limit).await
    }

    async fn hand_over(
        &self,
        node: &str,
        after: Option<&str>,
        limit: usize,
        now: i64,
    ) -> Result<web_crawler::actors::HandOver, StoreError> {
        self.check()?;
        self.inner.hand_over(node, after, limit, now).await
    }

    async fn nodes_with_pages(&self) -> Result<Vec<String>, StoreError> {
        self.check()?;
        self.inner.nodes_with_pages().await
    }
    async fn trap_closures(&self) -> Result<Vec<web_crawler::actors::ClosedFamily>, StoreError> {
        self.check()?;
        self.inner.trap_closures().await
    }
    async fn reopen_trap_family(
        &self,
        family: &str,
        now: web_crawler::actors::Millis,
    ) -> Result<Option<u64>, StoreError> {
        self.check()?;
        self.inner.reopen_trap_family(family, now).await
    }
}

/// The app's status once it says the store is unreachable.
async fn unreachable_status(app: &AppHandle) -> web_crawler::Status {
    eventually(
        Duration::from_secs(15),
        "status: store unreachable",
        || async {
            app.status()
                .await
                .ok()
                .filter(|s| s.store_unreachable_since.is_some())
        },
    )
    .await
}

async fn an_unavailable_store_is_waited_for_and_nothing_is_fetched_twice(b: Backend) {
    const PAGES: usize = 60;
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 16, 1),
        slow_chain(PAGES, Duration::from_millis(10)),
    )
    .await;
    let store = Switched::new(b.open().await);
    let app = start_on(store.storage(), settings("outage")).await.unwrap();
    app.add_url(&server.url("/")).await.unwrap();
    eventually(Duration::from_secs(30), "ten pages", || async {
        (processed(&*store.inner).await >= 10).then_some(())
    })
    .await;

    store.set(UNAVAILABLE);
    let away = unreachable_status(&app).await;
    let hits_then = server.total_hits();
    assert!(
        away.store_error
            .as_deref()
            .unwrap()
            .contains("injected outage"),
        "{away:?}"
    );
    // It claims nothing while the store is away: the slaves finish what
    // they hold, and no more, while the master asks the store again twice.
    let asked = store.failed_calls();
    let still = eventually(
        Duration::from_secs(30),
        "the slaves done, and the store asked twice more",
        || async {
            let status = app.status().await.unwrap();
            (status.requests_in_flight == 0 && store.failed_calls() >= asked + 2).then_some(status)
        },
    )
    .await;
    assert_eq!(still.store_unreachable_since, away.store_unreachable_since);
    assert!(
        server.total_hits() <= hits_then + away.in_flight as u32,
        "fetched {} since, holding {}",
        server.total_hits() - hits_then,
        away.in_flight
    );
    assert!(processed(&*store.inner).await < PAGES as u64);

    store.set(UP);
    let idle = tokio::time::timeout(Duration::from_secs(60), app.wait_idle())
        .await
        .expect("the crawl finishes once the store is back")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    let status = app.status().await.unwrap();
    assert_eq!(status.master_restarts, 0, "waited for, not restarted");
    assert_eq!(status.store_unreachable_since, None);
    app.stop(Duration::from_secs(5)).await.unwrap();
    each_page_fetched_once(&server, PAGES);
    let counts = store.inner.counts().await.unwrap();
    assert_eq!((counts.processed, counts.pending), (PAGES as u64 + 1, 0));
}

on_both_backends!(
    an_unavailable_store_is_waited_for,
    an_unavailable_store_is_waited_for_and_nothing_is_fetched_twice
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_away_longer_than_the_limit_stops_the_app_and_a_new_one_resumes() {
    const PAGES: usize = 40;
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 16, 2),
        slow_chain(PAGES, Duration::from_millis(10)),
    )
    .await;
    let backend = Backend::sqlite();
    let store = Switched::new(backend.open().await);
    let mut s = settings("limit");
    s.crawl.store_outage_limit = Duration::from_secs(1);
    let app = start_on(store.storage(), s.clone()).await.unwrap();
    app.add_url(&server.url("/")).await.unwrap();
    eventually(Duration::from_secs(30), "five pages", || async {
        (processed(&*store.inner).await >= 5).then_some(())
    })
    .await;
    store.set(UNAVAILABLE);
    let away = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(20), app.wait_idle())
        .await
        .expect("the app stops")
        .unwrap_err();
    let stopped_after = away.elapsed();
    let AppError::Store(failure) = &err else {
        panic!("a store failure: {err:?}");
    };
    assert_eq!(
        failure.kind,
        StoreFailureKind::Unreachable {
            limit: Duration::from_secs(1)
        }
    );
    assert!(failure.cause.contains("injected outage"), "{failure:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("the store has been unreachable since ")
            && text.ends_with("run the crawl again on the same store once it is back"),
        "{text}"
    );
    assert!(
        stopped_after >= Duration::from_secs(1) && stopped_after < Duration::from_secs(8),
        "after the limit, not much later: {stopped_after:?}"
    );
    assert!(matches!(app.exit_reason(), Some(ExitReason::Store(_))));
    assert!(matches!(app.wait().await, Err(AppError::Store(_))));

    // The store is back: a new run on it (same node: it takes its leases
    // back at once) finishes the crawl; what was lost is the window.
    store.set(UP);
    let app = start(store.inner.clone(), s).await.unwrap();
    queue_seed(&app, &server.url("/"), OperationSpec::crawl()).await;
    let idle = tokio::time::timeout(Duration::from_secs(60), app.wait_idle())
        .await
        .expect("the second run finishes")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    app.stop(Duration::from_secs(5)).await.unwrap();
    let counts = store.inner.counts().await.unwrap();
    assert_eq!((counts.processed, counts.pending), (PAGES as u64 + 1, 0));
    let hits = server.hits();
    for i in 0..PAGES {
        let n = hits.get(&format!("/p{i}")).copied().unwrap_or(0);
        assert!((1..=2).contains(&n), "/p{i} fetched {n} times");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_refuses_for_good_stops_the_app_at_once() {
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 16, 3),
        slow_chain(30, Duration::from_millis(10)),
    )
    .await;
    let store = Switched::new(Backend::sqlite().open().await);
    let app = start_on(store.storage(), settings("refused"))
        .await
        .unwrap();
    app.add_url(&server.url("/")).await.unwrap();
    eventually(Duration::from_secs(30), "three pages", || async {
        (processed(&*store.inner).await >= 3).then_some(())
    })
    .await;
    // Coverage is not asserted: the store refusing for good ends the crawl.
    store.set(REFUSED);
    let refused = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(10), app.wait_idle())
        .await
        .expect("the app stops")
        .unwrap_err();
    assert!(refused.elapsed() < Duration::from_secs(3), "at once");
    let AppError::Store(failure) = &err else {
        panic!("a store failure, not a restart loop: {err:?}");
    };
    assert_eq!(failure.kind, StoreFailureKind::Permanent);
    let text = err.to_string();
    assert!(
        text.contains("waiting will not mend it (injected: the disk is full: "),
        "{text}"
    );
    assert!(matches!(app.exit_reason(), Some(ExitReason::Store(_))));
}

// --- SQLite: a lock, a long reader ------------------------------------------------

/// A crawl on the embedded store at `path`, the store's handle kept.
async fn sqlite_crawl(
    path: &Path,
    server: &TestServer,
    node: &str,
) -> (Arc<SqliteStore>, AppHandle) {
    let store = Arc::new(SqliteStore::open(path).unwrap());
    let app = start(store.clone(), settings(node)).await.unwrap();
    app.add_url(&server.url("/")).await.unwrap();
    (store, app)
}

fn db_path(b: &Backend) -> PathBuf {
    match b {
        Backend::Sqlite { path, .. } => path.clone(),
        #[cfg(feature = "mongodb")]
        Backend::Mongo { .. } => unreachable!("SQLite only"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_writer_holding_the_lock_past_the_busy_timeout_is_waited_for() {
    const PAGES: usize = 80;
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 16, 4),
        slow_chain(PAGES, Duration::from_millis(15)),
    )
    .await;
    let backend = Backend::sqlite();
    let path = db_path(&backend);
    let (store, app) = sqlite_crawl(&path, &server, "locked").await;
    eventually(Duration::from_secs(30), "ten pages", || async {
        (processed(&*store).await >= 10).then_some(())
    })
    .await;
    // Someone's sqlite3 starts writing and keeps its transaction open for
    // 7 s: longer than the store's busy timeout (5 s).
    let writer = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || {
            let conn = rusqlite::Connection::open(path).unwrap();
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            std::thread::sleep(Duration::from_secs(7));
            conn.execute_batch("ROLLBACK").unwrap();
        })
    };
    let away = unreachable_status(&app).await;
    assert!(
        away.store_error
            .as_deref()
            .unwrap()
            .contains("locked by another connection"),
        "{away:?}"
    );
    writer.await.unwrap();
    let idle = tokio::time::timeout(Duration::from_secs(60), app.wait_idle())
        .await
        .expect("the crawl finishes once the lock is let go")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    assert_eq!(app.status().await.unwrap().master_restarts, 0);
    app.stop(Duration::from_secs(5)).await.unwrap();
    each_page_fetched_once(&server, PAGES);
    assert_eq!(store.counts().await.unwrap().processed, PAGES as u64 + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_sqlite_reader_never_stops_the_crawl_and_its_wal_is_watched() {
    const PAGES: usize = 80;
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 16, 5),
        slow_chain(PAGES, Duration::from_millis(15)),
    )
    .await;
    let backend = Backend::sqlite();
    let path = db_path(&backend);
    drop(SqliteStore::open(&path).unwrap());
    // A `sqlite3 crawl.db` session inside a transaction, for the whole crawl.
    let (release, held) = std::sync::mpsc::channel::<()>();
    let reader = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || {
            let conn = rusqlite::Connection::open(path).unwrap();
            conn.execute_batch("BEGIN").unwrap();
            let before: i64 = conn
                .query_row("SELECT count(*) FROM processed_urls", [], |r| r.get(0))
                .unwrap();
            held.recv().unwrap();
            let after: i64 = conn
                .query_row("SELECT count(*) FROM processed_urls", [], |r| r.get(0))
                .unwrap();
            conn.execute_batch("COMMIT").unwrap();
            (before, after)
        })
    };
    let (store, app) = sqlite_crawl(&path, &server, "reader").await;
    let stuck = eventually(Duration::from_secs(30), "checkpoints held back", || async {
        store.wal().stuck_since
    })
    .await;
    let idle = tokio::time::timeout(Duration::from_secs(60), app.wait_idle())
        .await
        .expect("the crawl finishes with the reader open")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    let status = app.status().await.unwrap();
    assert_eq!(status.master_restarts, 0);
    assert_eq!(
        status.store_unreachable_since, None,
        "a reader is no outage"
    );
    assert!(store.wal().stuck_since.is_some_and(|s| s == stuck));
    assert!(store.wal().bytes > 0, "the WAL holds the crawl");
    release.send(()).unwrap();
    let (before, after) = reader.await.unwrap();
    assert_eq!((before, after), (0, 0), "the reader kept its snapshot");
    // The reader let go: the next checkpoint empties the WAL.
    eventually(Duration::from_secs(10), "a complete checkpoint", || async {
        store.wal().stuck_since.is_none().then_some(())
    })
    .await;
    app.stop(Duration::from_secs(5)).await.unwrap();
    each_page_fetched_once(&server, PAGES);
}
