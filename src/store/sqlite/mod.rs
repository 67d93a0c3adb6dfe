//! The embedded store: the paper's MongoDB collections as SQLite tables.
//!
//! One connection behind a mutex: SQLite serialises writers anyway, and a
//! single connection makes every trait call one transaction that no other call
//! of this process can interleave with (claims cannot hand out a URL twice).
//! All SQL runs on tokio's blocking pool so the actors' runtime never stalls on
//! disk I/O.
//!
//! Split along its concerns: `schema` (the tables, their migration and every
//! statement), `rows` (errors, and rows read into records), `referrals` (who
//! links to what), `commit` and `claim` (the frontier's two write paths). What
//! is here is the store itself: the connection, its transactions, and the
//! trait impls that call into those.

mod claim;
mod commit;
mod referrals;
mod rows;
mod schema;

use self::claim::apply_claim;
use self::commit::{apply_commit, file_keys, write_credit};
use self::rows::{Fail, is_unreadable};
use self::schema::init;
use super::seen::SeenWindow;
use async_trait::async_trait;
use rusqlite::{Connection, Transaction, TransactionBehavior};
use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use web_crawler_actors::{
    BrokenLink, ClaimRequest, CommitBatch, CommitSummary, Document, Frontier, HostRecord, Job,
    Millis, PageQuery, PendingUrl, ProcessedUrl, Queries, StoreCounts, StoreError, UrlKey,
};

/// Keys the seen window holds: two generations of half as many, each table
/// allocated at full size when the generation starts (about 12.5 MiB each).
const SEEN_WINDOW: usize = 1 << 18;

// --- the store --------------------------------------------------------------

/// The embedded [`Store`]: one SQLite file in WAL mode, and the window of
/// recently seen keys kept in step with it.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    conn: Connection,
    seen: SeenWindow,
}

impl Drop for Inner {
    /// Write the credit the window still holds: the next run orders its
    /// claims by it.
    fn drop(&mut self) {
        let credit: Vec<(i64, f64)> = self.seen.unsaved_credit().collect();
        if credit.is_empty() {
            return;
        }
        let written = (|| -> Result<(), Fail> {
            let tx = self.conn.transaction()?;
            write_credit(&tx, credit)?;
            Ok(tx.commit()?)
        })();
        if let Err(e) = written {
            tracing::warn!(error = %e, "could not write the last OPIC credit at close");
        }
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Open or create the database file; WAL, synchronous=NORMAL, busy_timeout
    /// 5 s, foreign_keys off; creates tables and indexes idempotently. A file
    /// that is not a SQLite DB or has an incompatible schema is refused with a
    /// message naming the path.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display();
        let cannot_open = format!("cannot open store {shown}");
        let mut conn =
            Connection::open(path).map_err(|e| StoreError::backend(cannot_open.clone(), e))?;
        init(&mut conn).map_err(|fail| match fail {
            Fail::Corrupt(msg) => {
                StoreError::Corrupt(format!("{shown} is not a usable web crawler store: {msg}"))
            }
            Fail::Sql(e) if is_unreadable(&e) => {
                StoreError::Corrupt(format!("{shown} is not a usable web crawler store: {e}"))
            }
            other => StoreError::backend(cannot_open.clone(), other),
        })?;
        tracing::debug!(path = %shown, "sqlite store open");
        let in_file = file_keys(&conn).map_err(|fail| {
            StoreError::backend(format!("cannot read the keys of store {shown}"), fail)
        })?;
        let inner = Arc::new(Mutex::new(Inner {
            conn,
            seen: SeenWindow::new(SEEN_WINDOW, in_file),
        }));
        let checkpointer =
            Connection::open(path).map_err(|e| StoreError::backend(cannot_open.clone(), e))?;
        let store = Arc::downgrade(&inner);
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || checkpoint_until_dropped(checkpointer, store))
            .map_err(|e| StoreError::backend("cannot start the checkpoint thread", e))?;
        Ok(Self { inner })
    }

    /// Run `f` on the blocking pool with the connection locked.
    async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Inner) -> Result<T, Fail> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            // A panic inside a call dropped its Transaction, which rolled
            // back; the window may be ahead of the file then, so it is
            // cleared. Otherwise poisoning is not fatal.
            let mut guard = inner.lock().unwrap_or_else(|poisoned| {
                let mut guard = poisoned.into_inner();
                guard.seen.clear();
                guard
            });
            f(&mut guard).map_err(StoreError::from)
        })
        .await
        .map_err(|e| StoreError::backend("the store's task failed", e))?
    }

    /// Run `f` in one write transaction. IMMEDIATE takes the write lock up
    /// front, so another process on the file (a user's sqlite3) makes us wait
    /// busy_timeout instead of failing half-way on a lock upgrade.
    async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, &mut SeenWindow) -> Result<T, Fail> + Send + 'static,
    {
        self.run(move |inner| {
            let Inner { conn, seen } = inner;
            let result = (|| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let out = f(&tx, seen)?;
                tx.commit()?;
                Ok(out)
            })();
            if result.is_err() {
                // Rolled back: what the window learnt in it may not be in the file.
                seen.clear();
            }
            result
        })
        .await
    }

    /// Run `f` in one read transaction, so a list and its referral lists come
    /// from the same snapshot.
    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, &SeenWindow) -> Result<T, Fail> + Send + 'static,
    {
        self.run(move |inner| {
            let Inner { conn, seen } = inner;
            let tx = conn.transaction()?;
            let out = f(&tx, seen)?;
            tx.finish()?;
            Ok(out)
        })
        .await
    }
}

/// Copy committed WAL frames into the database file every so often, from a
/// connection of its own: a passive checkpoint never blocks the writer, and
/// the fsync it ends with happens here rather than in a commit. Ends when the
/// store is dropped.
fn checkpoint_until_dropped(conn: Connection, store: std::sync::Weak<Mutex<Inner>>) {
    const EVERY: Duration = Duration::from_millis(500);
    loop {
        std::thread::sleep(EVERY);
        if store.strong_count() == 0 {
            return;
        }
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "WAL checkpoint failed; the next one retries");
        }
    }
}

#[async_trait]
impl Frontier for SqliteStore {
    async fn claim(&self, req: ClaimRequest) -> Result<Vec<Job>, StoreError> {
        let (_, jobs) = self
            .commit_and_claim(CommitBatch::default(), Some(req))
            .await?;
        Ok(jobs)
    }

    async fn commit(&self, batch: CommitBatch) -> Result<CommitSummary, StoreError> {
        if batch.is_empty() {
            return Ok(CommitSummary::default());
        }
        let (summary, _) = self.commit_and_claim(batch, None).await?;
        Ok(summary)
    }

    async fn commit_and_claim(
        &self,
        batch: CommitBatch,
        claim: Option<ClaimRequest>,
    ) -> Result<(CommitSummary, Vec<Job>), StoreError> {
        self.write(move |tx, seen| {
            let summary = if batch.is_empty() {
                CommitSummary::default()
            } else {
                apply_commit(tx, seen, &batch)?
            };
            let jobs = match &claim {
                Some(req) => apply_claim(tx, seen, req)?,
                None => Vec::new(),
            };
            Ok((summary, jobs))
        })
        .await
    }

    async fn extend_leases(
        &self,
        keys: &[UrlKey],
        owner: &str,
        until: Millis,
    ) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let keys = keys.to_vec();
        let owner = owner.to_string();
        self.write(move |tx, _| claim::extend_leases(tx, &keys, &owner, until))
            .await
    }

    async fn release(&self, owner: &str, keep: &[UrlKey]) -> Result<u64, StoreError> {
        let owner = owner.to_string();
        let keep: HashSet<(String, String)> = keep
            .iter()
            .map(|k| (k.url.clone(), k.operation.key()))
            .collect();
        self.write(move |tx, _| claim::release(tx, &owner, &keep))
            .await
    }

    async fn release_keys(&self, keys: &[UrlKey]) -> Result<u64, StoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        let keys = keys.to_vec();
        self.write(move |tx, _| claim::release_keys(tx, &keys))
            .await
    }

    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        self.read(|tx, _| rows::counts(tx)).await
    }
}

#[async_trait]
impl Queries for SqliteStore {
    async fn processed(&self, query: PageQuery) -> Result<Vec<ProcessedUrl>, StoreError> {
        self.read(move |tx, _| rows::processed(tx, &query)).await
    }

    async fn processed_url(&self, url: &str) -> Result<Option<ProcessedUrl>, StoreError> {
        let url = url.to_string();
        self.read(move |tx, _| rows::processed_url(tx, &url)).await
    }

    async fn pending(&self, limit: usize) -> Result<Vec<PendingUrl>, StoreError> {
        self.read(move |tx, seen| rows::pending(tx, seen, limit))
            .await
    }

    async fn records(
        &self,
        collection: &str,
        filter: &Document,
    ) -> Result<Vec<Document>, StoreError> {
        let collection = collection.to_string();
        let filter = filter.clone();
        self.read(move |tx, _| rows::records(tx, &collection, &filter))
            .await
    }

    async fn broken_links(&self) -> Result<Vec<BrokenLink>, StoreError> {
        self.read(|tx, _| rows::broken_links(tx)).await
    }

    async fn hosts(&self) -> Result<Vec<HostRecord>, StoreError> {
        self.read(|tx, _| rows::hosts(tx)).await
    }

    async fn status_histogram(&self) -> Result<Vec<(Option<u16>, u64)>, StoreError> {
        self.read(|tx, _| rows::status_histogram(tx)).await
    }
}

// What both backends must do is tested once, in tests/store_conformance.rs;
// these tests cover what is particular to the SQLite file.
#[cfg(test)]
mod tests {
    use super::schema::ALL_STATEMENTS;
    use super::*;
    use std::collections::HashMap;
    use web_crawler_actors::{
        NewLink, OperationSpec, PageRecord, ProcessedPage, ROBOTS_BLOCKED, Record, Retry,
        SEARCH_RESULTS,
    };

    const OWNER: &str = "node1@master";

    fn open_temp() -> (tempfile::TempDir, std::path::PathBuf, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crawl.db");
        let store = SqliteStore::open(&path).unwrap();
        (dir, path, store)
    }

    fn host_of(url: &str) -> String {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        rest.split('/').next().unwrap().to_string()
    }

    fn link(url: &str, depth: u32, priority: f64) -> NewLink {
        NewLink {
            url: url.to_string(),
            host: host_of(url),
            operation: OperationSpec::crawl(),
            depth,
            priority,
            redirect_hops: 0,
        }
    }

    fn key(url: &str) -> UrlKey {
        UrlKey {
            url: url.to_string(),
            operation: OperationSpec::crawl(),
        }
    }

    fn seeds(now: Millis, links: Vec<NewLink>) -> CommitBatch {
        CommitBatch {
            now,
            seeds: links,
            ..CommitBatch::default()
        }
    }

    fn claim_req(now: Millis, limit: usize, cap: usize) -> ClaimRequest {
        ClaimRequest {
            now,
            owner: OWNER.to_string(),
            lease_until: now + 60_000,
            limit,
            per_host_cap: cap,
            held_per_host: HashMap::new(),
        }
    }

    fn page(url: &str, code: Option<u16>, hash: Option<u64>, links: Vec<NewLink>) -> ProcessedPage {
        ProcessedPage {
            record: PageRecord {
                url: url.to_string(),
                operation: OperationSpec::crawl(),
                host: host_of(url),
                http_returncode: code,
                content_hash: hash,
                links_count: links.len() as u32,
                node: "node1".to_string(),
                ..PageRecord::default()
            },
            links,
            records: Vec::new(),
            simhash: None,
        }
    }

    fn pages(now: Millis, reprocess: Option<Millis>, pages: Vec<ProcessedPage>) -> CommitBatch {
        CommitBatch {
            now,
            reprocess_after_ms: reprocess,
            pages,
            ..CommitBatch::default()
        }
    }

    async fn pending_urls(store: &SqliteStore) -> Vec<String> {
        let mut urls: Vec<String> = store
            .pending(usize::MAX)
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.url)
            .collect();
        urls.sort();
        urls
    }

    /// Claim `url` alone and commit it as a plain 200 page.
    async fn crawl_one(store: &SqliteStore, url: &str, now: Millis) {
        store
            .commit(seeds(now, vec![link(url, 0, 1.0)]))
            .await
            .unwrap();
        let jobs = store.claim(claim_req(now, 100, 100)).await.unwrap();
        assert!(jobs.iter().any(|j| j.url == url));
        store
            .commit(pages(now, None, vec![page(url, Some(200), None, vec![])]))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn claim_caps_per_host_and_round_robins_across_hosts() {
        let (_dir, _path, store) = open_temp();
        store
            .commit(seeds(
                0,
                vec![
                    link("http://a/1", 0, 1.0),
                    link("http://a/2", 0, 5.0),
                    link("http://a/3", 0, 3.0),
                    link("http://a/4", 0, 1.0),
                    link("http://b/1", 0, 2.0),
                    link("http://b/2", 0, 2.0),
                    link("http://b/3", 0, 0.5),
                    link("http://c/1", 0, 0.1),
                    link("http://d/1", 0, 9.0),
                ],
            ))
            .await
            .unwrap();
        let mut req = claim_req(10, 100, 2);
        req.held_per_host = HashMap::from([("a".to_string(), 1), ("d".to_string(), 2)]);
        let jobs = store.claim(req).await.unwrap();
        let urls: Vec<&str> = jobs.iter().map(|j| j.url.as_str()).collect();
        // Rank 1 of a, b, c (by priority), then rank 2 of b (FIFO tiebreak);
        // a has room for one more, d for none.
        assert_eq!(
            urls,
            vec!["http://a/2", "http://b/1", "http://c/1", "http://b/2"]
        );
        assert!(jobs.iter().all(|j| j.attempts == 0 && j.depth == 0));

        // The limit cuts the round-robin order, not one host's queue.
        let jobs = store.claim(claim_req(20, 2, 10)).await.unwrap();
        let urls: Vec<&str> = jobs.iter().map(|j| j.url.as_str()).collect();
        assert_eq!(urls, vec!["http://d/1", "http://a/3"]);

        let counts = store.counts().await.unwrap();
        assert_eq!((counts.pending, counts.processing), (3, 6));
        let p = store.pending(100).await.unwrap();
        let claimed = p.iter().find(|p| p.url == "http://a/2").unwrap();
        assert_eq!(claimed.status, "processing");
        assert_eq!(claimed.lease_until, Some(60_010));
        assert_eq!(claimed.d_change, 10);
    }

    #[tokio::test]
    async fn release_returns_all_but_kept_and_extend_needs_owner() {
        let (_dir, _path, store) = open_temp();
        let links = (0..4)
            .map(|i| link(&format!("http://a/{i}"), 0, 1.0))
            .collect();
        store.commit(seeds(0, links)).await.unwrap();
        assert_eq!(store.claim(claim_req(0, 10, 10)).await.unwrap().len(), 4);

        store
            .extend_leases(&[key("http://a/0")], "someone else", 999_999)
            .await
            .unwrap();
        store
            .extend_leases(&[key("http://a/1")], OWNER, 999_999)
            .await
            .unwrap();
        let leases: HashMap<String, Option<Millis>> = store
            .pending(10)
            .await
            .unwrap()
            .into_iter()
            .map(|p| (p.url, p.lease_until))
            .collect();
        assert_eq!(leases["http://a/0"], Some(60_000));
        assert_eq!(leases["http://a/1"], Some(999_999));

        assert_eq!(store.release("someone else", &[]).await.unwrap(), 0);
        let released = store
            .release(OWNER, &[key("http://a/1"), key("http://a/3")])
            .await
            .unwrap();
        assert_eq!(released, 2);
        let counts = store.counts().await.unwrap();
        assert_eq!((counts.pending, counts.processing), (2, 2));
        for p in store.pending(10).await.unwrap() {
            if p.status == "pending" {
                assert_eq!(p.lease_until, None);
            }
        }

        // release_keys only moves processing rows.
        let n = store
            .release_keys(&[key("http://a/0"), key("http://a/1"), key("http://nope/")])
            .await
            .unwrap();
        assert_eq!(n, 1);
        let counts = store.counts().await.unwrap();
        assert_eq!((counts.pending, counts.processing), (3, 1));
    }

    #[tokio::test]
    async fn another_operation_is_queued_again() {
        let (_dir, _path, store) = open_temp();
        crawl_one(&store, "http://a/x", 1_000).await;
        let mut search = link("http://a/x", 0, 1.0);
        search.operation = OperationSpec::search_text("needle");
        let s = store.commit(seeds(2_000, vec![search])).await.unwrap();
        assert_eq!(s.queued, 1);
        let jobs = store.claim(claim_req(2_000, 10, 10)).await.unwrap();
        assert_eq!(jobs[0].operation, OperationSpec::search_text("needle"));
    }

    #[tokio::test]
    async fn content_duplicate_is_recorded_and_its_links_not_followed() {
        let (_dir, _path, store) = open_temp();
        let original = page(
            "http://a/orig",
            Some(200),
            Some(u64::MAX - 7),
            vec![link("http://a/from-orig", 1, 1.0)],
        );
        let copy = page(
            "http://b/copy",
            Some(200),
            Some(u64::MAX - 7),
            vec![link("http://b/from-copy", 1, 1.0)],
        );
        let s = store
            .commit(pages(1_000, None, vec![original, copy]))
            .await
            .unwrap();
        assert_eq!((s.queued, s.duplicates), (1, 1));
        assert_eq!(pending_urls(&store).await, vec!["http://a/from-orig"]);
        let copy = store.processed_url("http://b/copy").await.unwrap().unwrap();
        assert_eq!(copy.duplicate_of.as_deref(), Some("http://a/orig"));
        assert_eq!(copy.record.content_hash, Some(u64::MAX - 7));
        assert_eq!(copy.record.out_links, vec!["http://b/from-copy"]);
        let orig = store.processed_url("http://a/orig").await.unwrap().unwrap();
        assert_eq!(orig.duplicate_of, None);

        // Re-processing the original is not a duplicate of its own copy.
        let again = page("http://a/orig", Some(200), Some(u64::MAX - 7), vec![]);
        let s = store.commit(pages(2_000, None, vec![again])).await.unwrap();
        assert_eq!(s.duplicates, 0, "its copy does not make it a duplicate");
        let orig = store.processed_url("http://a/orig").await.unwrap().unwrap();
        assert_eq!(orig.duplicate_of, None);
        // Re-processing a page alone with its hash: not a duplicate.
        let solo = page("http://c/solo", Some(200), Some(42), vec![]);
        store
            .commit(pages(3_000, None, vec![solo.clone()]))
            .await
            .unwrap();
        let s = store.commit(pages(4_000, None, vec![solo])).await.unwrap();
        assert_eq!(s.duplicates, 0);
        assert_eq!(store.counts().await.unwrap().duplicates, 1, "only the copy");
    }

    #[tokio::test]
    async fn non_2xx_pages_are_never_deduplicated() {
        let (_dir, _path, store) = open_temp();
        let e1 = page(
            "http://a/missing1",
            Some(404),
            Some(7),
            vec![link("http://a/l1", 1, 1.0)],
        );
        let e2 = page(
            "http://a/missing2",
            Some(404),
            Some(7),
            vec![link("http://a/l2", 1, 1.0)],
        );
        // A 200 page with the same bytes as the error pages is not their copy.
        let ok = page(
            "http://a/ok",
            Some(200),
            Some(7),
            vec![link("http://a/l3", 1, 1.0)],
        );
        let s = store
            .commit(pages(1_000, None, vec![e1, e2, ok]))
            .await
            .unwrap();
        assert_eq!((s.queued, s.duplicates), (3, 0));
        for url in ["http://a/missing1", "http://a/missing2", "http://a/ok"] {
            let p = store.processed_url(url).await.unwrap().unwrap();
            assert_eq!(p.duplicate_of, None, "{url}");
        }
        // A second 200 page with that hash copies the 200 one, not a 404.
        let ok2 = page("http://a/ok2", Some(200), Some(7), vec![]);
        store.commit(pages(2_000, None, vec![ok2])).await.unwrap();
        let p = store.processed_url("http://a/ok2").await.unwrap().unwrap();
        assert_eq!(p.duplicate_of.as_deref(), Some("http://a/ok"));
    }

    #[tokio::test]
    async fn retries_bump_attempts_and_respect_not_before() {
        let (_dir, _path, store) = open_temp();
        store
            .commit(seeds(0, vec![link("http://a/flaky", 0, 1.0)]))
            .await
            .unwrap();
        let jobs = store.claim(claim_req(0, 10, 10)).await.unwrap();
        assert_eq!(jobs.len(), 1);
        let retry = CommitBatch {
            now: 100,
            retries: vec![Retry {
                key: key("http://a/flaky"),
                not_before: 5_000,
                error: "connection refused".into(),
            }],
            ..CommitBatch::default()
        };
        store.commit(retry).await.unwrap();
        let p = &store.pending(10).await.unwrap()[0];
        assert_eq!(p.status, "pending");
        assert_eq!(p.attempts, 1);
        assert_eq!(p.not_before, 5_000);
        assert_eq!(p.lease_until, None);
        assert_eq!(p.last_error.as_deref(), Some("connection refused"));

        assert!(
            store
                .claim(claim_req(4_999, 10, 10))
                .await
                .unwrap()
                .is_empty()
        );
        // A referral merging into the waiting row does not reset it.
        store
            .commit(seeds(4_999, vec![link("http://a/flaky", 0, 1.0)]))
            .await
            .unwrap();
        let jobs = store.claim(claim_req(5_000, 10, 10)).await.unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].attempts, 1);
        assert_eq!(jobs[0].priority, 2.0);
    }

    #[tokio::test]
    async fn hosts_upsert_histogram_broken_links_and_failed_listing() {
        let (_dir, _path, store) = open_temp();
        let mut blocked = page("http://a/private", None, None, vec![]);
        blocked.record.error = Some(ROBOTS_BLOCKED.into());
        let mut down = page("http://b/", None, None, vec![]);
        down.record.error = Some("connection refused".into());
        let batch = CommitBatch {
            now: 1_000,
            pages: vec![
                page(
                    "http://a/index",
                    Some(200),
                    None,
                    vec![link("http://a/gone", 1, 1.0)],
                ),
                page("http://a/gone", Some(404), None, vec![]),
                page("http://a/err", Some(500), None, vec![]),
                page("http://a/ok", Some(200), None, vec![]),
                blocked,
                down,
            ],
            hosts: vec![HostRecord {
                host: "a".into(),
                robots_status: "not_found".into(),
                ..HostRecord::default()
            }],
            ..CommitBatch::default()
        };
        store.commit(batch).await.unwrap();
        let updated = HostRecord {
            host: "a".into(),
            robots_status: "fetched".into(),
            robots_http_code: Some(200),
            crawl_delay_ms: Some(1_500),
            ..HostRecord::default()
        };
        store
            .commit(CommitBatch {
                now: 2_000,
                hosts: vec![updated.clone()],
                ..CommitBatch::default()
            })
            .await
            .unwrap();
        assert_eq!(store.hosts().await.unwrap(), vec![updated]);

        assert_eq!(
            store.status_histogram().await.unwrap(),
            vec![(None, 2), (Some(200), 2), (Some(404), 1), (Some(500), 1)]
        );
        let broken = store.broken_links().await.unwrap();
        let urls: Vec<_> = broken.iter().map(|b| b.url.as_str()).collect();
        assert_eq!(urls, vec!["http://a/err", "http://a/gone", "http://b/"]);
        assert_eq!(broken[1].referral_list, vec!["http://a/index"]);
        assert_eq!(broken[1].http_returncode, Some(404));
        assert_eq!(broken[2].error.as_deref(), Some("connection refused"));

        let failed = store
            .processed(PageQuery {
                only_failed: true,
                ..PageQuery::default()
            })
            .await
            .unwrap();
        let urls: Vec<_> = failed.iter().map(|p| p.record.url.as_str()).collect();
        assert_eq!(
            urls,
            vec![
                "http://a/err",
                "http://a/gone",
                "http://a/private",
                "http://b/"
            ]
        );
        let window = store
            .processed(PageQuery {
                limit: Some(2),
                offset: 1,
                only_failed: false,
            })
            .await
            .unwrap();
        let urls: Vec<_> = window.iter().map(|p| p.record.url.as_str()).collect();
        assert_eq!(urls, vec!["http://a/gone", "http://a/index"]);
        assert_eq!(window[0].referral_count, 1);
    }

    #[tokio::test]
    async fn counts_cover_every_collection() {
        let (_dir, _path, store) = open_temp();
        assert!(store.counts().await.unwrap().frontier_empty());
        let mut blocked = page("http://a/private", None, None, vec![]);
        blocked.record.error = Some(ROBOTS_BLOCKED.into());
        let mut gave_up = page("http://a/timeout", None, None, vec![]);
        gave_up.record.error = Some("timed out".into());
        let mut hit = page("http://a/1", Some(200), Some(5), vec![]);
        hit.records.push(Record {
            collection: SEARCH_RESULTS.into(),
            key: serde_json::json!({ "url": "http://a/1", "text": "x" })
                .as_object()
                .cloned()
                .unwrap(),
            ..Record::default()
        });
        let batch = CommitBatch {
            now: 1_000,
            seeds: (0..3)
                .map(|i| link(&format!("http://q/{i}"), 0, 1.0))
                .collect(),
            pages: vec![
                hit,
                page("http://a/2", Some(200), Some(5), vec![]),
                page("http://a/404", Some(404), None, vec![]),
                blocked,
                gave_up,
            ],
            ..CommitBatch::default()
        };
        store.commit(batch).await.unwrap();
        store.claim(claim_req(1_000, 1, 10)).await.unwrap();
        assert_eq!(
            store.counts().await.unwrap(),
            StoreCounts {
                pending: 2,
                processing: 1,
                processed: 5,
                failed: 2,
                robots_blocked: 1,
                duplicates: 1,
                search_results: 1,
            }
        );
    }

    /// The priority column of the one pending row, as written in the file.
    fn row_priority(store: &SqliteStore) -> f64 {
        let inner = store.inner.lock().unwrap();
        inner
            .conn
            .query_row("SELECT priority FROM pending_urls", [], |row| row.get(0))
            .unwrap()
    }

    /// Credit below the doubling threshold lives in the seen window; reads
    /// show it, and closing the store writes it.
    #[tokio::test]
    async fn unwritten_credit_is_visible_and_written_at_close() {
        let (_dir, path, store) = open_temp();
        let shares = [0.5, 0.125, 0.125, 0.0625];
        for (i, share) in shares.iter().enumerate() {
            let referrer = format!("http://a/r{i}");
            let linking = page(
                &referrer,
                Some(200),
                None,
                vec![link("http://a/x", 1, *share)],
            );
            store
                .commit(pages(1_000, None, vec![linking]))
                .await
                .unwrap();
        }
        let stored = row_priority(&store);
        assert_eq!(
            stored, 0.5,
            "0.3125 merged since is below the doubling threshold"
        );
        let listed = store.pending(10).await.unwrap();
        assert!((listed[0].priority - 0.8125).abs() < 1e-12);
        assert_eq!(listed[0].referral_list.len(), 4);
        drop(store);
        let store = SqliteStore::open(&path).unwrap();
        let stored = row_priority(&store);
        assert!(
            (stored - 0.8125).abs() < 1e-12,
            "written at close: {stored}"
        );
    }

    #[tokio::test]
    async fn self_links_and_large_batches() {
        let (_dir, _path, store) = open_temp();
        store
            .commit(seeds(0, vec![link("http://a/", 0, 1.0)]))
            .await
            .unwrap();
        store.claim(claim_req(0, 10, 10)).await.unwrap();
        let mut links: Vec<NewLink> = (0..5_000)
            .map(|i| link(&format!("http://h{}/p{i}", i % 50), 1, 0.001))
            .collect();
        links.push(link("http://a/", 1, 0.001));
        let started = std::time::Instant::now();
        let s = store
            .commit(pages(
                10,
                None,
                vec![page("http://a/", Some(200), None, links)],
            ))
            .await
            .unwrap();
        tracing::info!(elapsed = ?started.elapsed(), "5001-link commit");
        assert_eq!((s.queued, s.merged), (5_000, 1));
        let home = store.processed_url("http://a/").await.unwrap().unwrap();
        assert_eq!(home.referral_list, vec!["http://a/"]);
        assert_eq!(home.referral_count, 1);
        assert_eq!(store.counts().await.unwrap().pending, 5_000);
    }

    /// A statement SQLite re-prepares on every call (a bound `LIMIT ?`, for
    /// one) costs a parse and a plan each time: none of the crawl's do.
    #[tokio::test]
    async fn crawl_statements_are_prepared_once() {
        let (_dir, _path, store) = open_temp();
        let home: Vec<NewLink> = (0..4)
            .map(|h| link(&format!("http://h{h}/"), 0, 1.0))
            .collect();
        store.commit(seeds(0, home)).await.unwrap();
        let mut claimed = store.claim(claim_req(0, 2, 1)).await.unwrap();
        for round in 1..4 {
            let pages = claimed
                .iter()
                .enumerate()
                .map(|(n, job)| {
                    let links = (0..3)
                        .map(|i| {
                            let url = format!("http://{}/{round}/{i}", job.host);
                            link(&url, round, 0.5)
                        })
                        .collect();
                    // A body of its own, so no page is a duplicate whose
                    // links are skipped.
                    let hash = u64::from(round) * 100 + n as u64;
                    page(&job.url, Some(200), Some(hash), links)
                })
                .collect();
            let (_, jobs) = store
                .commit_and_claim(
                    CommitBatch {
                        now: round.into(),
                        pages,
                        ..CommitBatch::default()
                    },
                    Some(claim_req(round.into(), 3, 2)),
                )
                .await
                .unwrap();
            assert!(!jobs.is_empty());
            claimed = jobs;
        }
        let inner = store.inner.lock().unwrap();
        for sql in ALL_STATEMENTS {
            let stmt = inner.conn.prepare_cached(sql).unwrap();
            let reprepared = stmt.get_status(rusqlite::StatementStatus::RePrepare);
            assert_eq!(reprepared, 0, "re-prepared {reprepared} times: {sql}");
        }
    }

    #[tokio::test]
    async fn unparsable_operation_is_corrupt() {
        let (_dir, path, store) = open_temp();
        store
            .commit(seeds(0, vec![link("http://a/1", 0, 1.0)]))
            .await
            .unwrap();
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute("UPDATE pending_urls SET operation = 'not json'", [])
                .unwrap();
        }
        let err = store.claim(claim_req(0, 10, 10)).await.unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{err}");
        // The failed claim rolled back: nothing is left half-leased.
        assert_eq!(store.counts().await.unwrap().processing, 0);
    }

    #[tokio::test]
    async fn non_sqlite_or_foreign_files_are_refused_by_path() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("notes.txt");
        std::fs::write(&junk, "this is not a database, just some text. ".repeat(50)).unwrap();
        let err = SqliteStore::open(&junk).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, StoreError::Corrupt(_)), "{msg}");
        assert!(msg.contains(&junk.display().to_string()), "{msg}");
        assert!(msg.contains("not a database"), "{msg}");

        let foreign = dir.path().join("other.db");
        Connection::open(&foreign)
            .unwrap()
            .execute_batch("CREATE TABLE pending_urls (url TEXT)")
            .unwrap();
        let msg = SqliteStore::open(&foreign).unwrap_err().to_string();
        assert!(msg.contains(&foreign.display().to_string()), "{msg}");
        assert!(msg.contains("no meta table"), "{msg}");
        // Refused untouched: not even switched to WAL.
        let mode: String = Connection::open(&foreign)
            .unwrap()
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "delete");

        let old = dir.path().join("old.db");
        Connection::open(&old)
            .unwrap()
            .execute_batch(
                "CREATE TABLE meta (key TEXT PRIMARY KEY, value);
                 INSERT INTO meta VALUES ('schema_version', 2);
                 CREATE TABLE pending_urls (url TEXT, operation TEXT);",
            )
            .unwrap();
        let msg = SqliteStore::open(&old).unwrap_err().to_string();
        assert!(msg.contains(&old.display().to_string()), "{msg}");
        assert!(msg.contains("incompatible schema"), "{msg}");

        let newer = dir.path().join("newer.db");
        drop(SqliteStore::open(&newer).unwrap());
        Connection::open(&newer)
            .unwrap()
            .execute("UPDATE meta SET value = 4 WHERE key = 'schema_version'", [])
            .unwrap();
        let msg = SqliteStore::open(&newer).unwrap_err().to_string();
        assert!(msg.contains("schema_version"), "{msg}");
    }

    /// A version 2 file's search results become records, keyed as a record
    /// written now would be (so a re-processed page replaces, not adds).
    #[tokio::test]
    async fn a_version_2_file_is_migrated() {
        let (_dir, path, store) = open_temp();
        drop(store);
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                r#"DROP TABLE records;
                 CREATE TABLE search_results (
                     id INTEGER PRIMARY KEY, url TEXT NOT NULL, text TEXT NOT NULL,
                     positions TEXT NOT NULL DEFAULT '[]', d_search INTEGER NOT NULL,
                     UNIQUE (url, text));
                 INSERT INTO search_results (url, text, positions, d_search)
                     VALUES ('http://a/1', 'say "hi"', '[3,9]', 1234);
                 UPDATE meta SET value = 2 WHERE key = 'schema_version';"#,
            )
            .unwrap();
        let store = SqliteStore::open(&path).unwrap();
        let docs = store
            .records(SEARCH_RESULTS, &Document::new())
            .await
            .unwrap();
        assert_eq!(
            serde_json::Value::Object(docs[0].clone()),
            serde_json::json!({
                "url": "http://a/1", "text": "say \"hi\"", "positions": [3, 9], "d_search": 1234
            })
        );
        let key = serde_json::json!({ "url": "http://a/1", "text": "say \"hi\"" });
        let mut again = page("http://a/1", Some(200), Some(1), vec![]);
        again.records.push(Record {
            collection: SEARCH_RESULTS.into(),
            key: key.as_object().cloned().unwrap(),
            fields: serde_json::json!({ "positions": [4] })
                .as_object()
                .cloned()
                .unwrap(),
            stamp: Some("d_search".into()),
        });
        store.commit(pages(5_000, None, vec![again])).await.unwrap();
        let docs = store
            .records(SEARCH_RESULTS, &Document::new())
            .await
            .unwrap();
        assert_eq!(docs.len(), 1, "replaced: {docs:?}");
        assert_eq!(docs[0]["positions"], serde_json::json!([4]));
        assert_eq!(docs[0]["d_search"], serde_json::json!(5_000));
        assert_eq!(store.counts().await.unwrap().search_results, 1);
    }
}
