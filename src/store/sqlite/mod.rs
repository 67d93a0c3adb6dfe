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
mod columns;
mod commit;
mod errors;
mod lock;
mod referrals;
mod rows;
mod schema;
mod wal;

use self::claim::apply_claim;
use self::commit::{apply_commit, file_keys, write_credit};
use self::errors::{Fail, is_unreadable};
pub use self::lock::WriterLock;
use self::schema::init;
pub use self::wal::WalState;
use self::wal::{WARN_BYTES, WalEvent, WalWatch};
use super::seen::SeenWindow;
use async_trait::async_trait;
use rusqlite::{Connection, Transaction, TransactionBehavior};
use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use web_crawler_actors::availability::{FetchHistory, HistoryQuery};
use web_crawler_actors::{
    BrokenLink, ClaimRequest, ClosedFamily, CommitBatch, CommitSummary, Document, Frontier,
    HandOver, HostRecord, Job, Millis, PageQuery, PageRecord, PendingUrl, ProcessedUrl, Queries,
    StoreCounts, StoreError, TrapFamily, UrlKey,
};

/// Keys the seen window holds: two generations of half as many, each table
/// allocated at full size when the generation starts (12.8 MB each). Half
/// is 7/8 of 2^18, what a table of 2^18 buckets holds (a hash table holds
/// at most 7/8 of its buckets): 2^17 keys a generation took the same
/// tables and left 43% of them unused, and a link the window has forgotten
/// costs a lookup in the file (bench/README, "A million pages").
pub(crate) const SEEN_WINDOW: usize = 2 * (7 << 15);

// --- the store --------------------------------------------------------------

/// The embedded [`Store`](web_crawler_actors::Store): one SQLite file in WAL mode, and the window of
/// recently seen keys kept in step with it.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Mutex<Inner>>,
    /// What the checkpoint thread last found of the WAL.
    wal: Arc<Mutex<WalState>>,
    /// Held by a store opened to crawl ([`SqliteStore::open_for_crawl`]).
    _writer: Option<Arc<WriterLock>>,
}

struct Inner {
    conn: Connection,
    seen: SeenWindow,
    /// The checkpoint thread, which holds a connection of its own.
    checkpointer: CheckpointThread,
}

impl Drop for Inner {
    /// Write the credit the window still holds (the next run orders its
    /// claims by it), then close the checkpoint thread's connection before
    /// this one: SQLite removes the `-wal` and `-shm` files when the last
    /// connection to the file closes, so a store closed cleanly leaves
    /// only its file. (A crash leaves them; the next open recovers.)
    fn drop(&mut self) {
        let credit: Vec<(i64, f64)> = self.seen.unsaved_credit().collect();
        if !credit.is_empty() {
            let written = (|| -> Result<(), Fail> {
                let tx = self.conn.transaction()?;
                write_credit(&tx, credit)?;
                Ok(tx.commit()?)
            })();
            if let Err(e) = written {
                tracing::warn!(error = %e, "could not write the last OPIC credit at close");
            }
        }
        self.checkpointer.stop();
    }
}

/// The checkpoint thread and the way to stop it at once.
struct CheckpointThread {
    /// Dropped to stop the thread: its wait ends at once.
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CheckpointThread {
    /// Stop the thread and wait until its connection is closed.
    fn stop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::warn!("the checkpoint thread panicked");
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
        lock::not_a_directory(path)?;
        let shown = path.display();
        let cannot_open = format!("cannot open store {shown}");
        let mut conn = Connection::open(path).map_err(|e| match lock::missing_directory(path) {
            Some(missing) => lock::cannot_create_in(path, &missing),
            None => StoreError::backend(cannot_open.clone(), e),
        })?;
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
        let checkpointer =
            Connection::open(path).map_err(|e| StoreError::backend(cannot_open.clone(), e))?;
        let wal = Arc::new(Mutex::new(WalState::default()));
        let checkpoint = Checkpointer {
            conn: checkpointer,
            wal_path: wal_path(path),
            watch: WalWatch::new(WARN_BYTES),
            shared: Arc::clone(&wal),
        };
        let (stop, stopped) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || checkpoint.until_stopped(&stopped))
            .map_err(|e| StoreError::backend("cannot start the checkpoint thread", e))?;
        let inner = Arc::new(Mutex::new(Inner {
            conn,
            seen: SeenWindow::new(SEEN_WINDOW, in_file),
            checkpointer: CheckpointThread {
                stop: Some(stop),
                thread: Some(thread),
            },
        }));
        Ok(Self {
            inner,
            wal,
            _writer: None,
        })
    }

    /// Whether `path` is a store file: a SQLite database holding this
    /// store's tables. Read only, so a file that is not one is left as it
    /// was (opening it as a store would make an empty file one).
    pub fn is_store(path: &Path) -> bool {
        let Ok(conn) =
            Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        else {
            return false;
        };
        conn.query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'processed_urls'",
            [],
            |_| Ok(()),
        )
        .is_ok()
    }

    /// What the checkpoints last found of the write-ahead log: its size,
    /// and since when they leave frames behind (a reader holds an old
    /// snapshot). See the warning the store logs then.
    pub fn wal(&self) -> WalState {
        *self.wal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Let the file grow to `pages` pages at most (SQLite's
    /// `max_page_count`): writes beyond fail as on a full disk. For tests
    /// of a full disk, and for an operator who wants a crawl stopped before
    /// its disk fills up.
    pub fn limit_pages(&self, pages: u64) -> Result<(), StoreError> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner
            .conn
            .pragma_update(None, "max_page_count", pages)
            .map_err(|e| StoreError::from(Fail::Sql(e)))
    }

    /// Open the store to crawl with it: as [`SqliteStore::open`], and the
    /// file's [`WriterLock`] is held as long as the store is, so a second
    /// crawling process on the file is refused with a clear message.
    pub fn open_for_crawl(path: &Path) -> Result<Self, StoreError> {
        // Before the lock file is made beside it.
        lock::not_a_directory(path)?;
        let writer = WriterLock::acquire(path)?;
        Ok(Self {
            _writer: Some(Arc::new(writer)),
            ..Self::open(path)?
        })
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
            let Inner { conn, seen, .. } = inner;
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
            let Inner { conn, seen, .. } = inner;
            let tx = conn.transaction()?;
            let out = f(&tx, seen)?;
            tx.finish()?;
            Ok(out)
        })
        .await
    }
}

/// `crawl.db` → `crawl.db-wal`.
fn wal_path(db: &Path) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    std::path::PathBuf::from(name)
}

/// The checkpoint thread's connection and what it watches.
struct Checkpointer {
    conn: Connection,
    wal_path: std::path::PathBuf,
    watch: WalWatch,
    shared: Arc<Mutex<WalState>>,
}

impl Checkpointer {
    /// Copy committed WAL frames into the database file every so often,
    /// from a connection of its own: a passive checkpoint never blocks the
    /// writer (nor waits for readers), and the fsync it ends with happens
    /// here rather than in a commit. Ends, closing its connection, when
    /// the store drops the sender of `stopped`.
    fn until_stopped(mut self, stopped: &std::sync::mpsc::Receiver<()>) {
        const EVERY: Duration = Duration::from_millis(500);
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(EVERY) {
            self.checkpoint();
        }
    }

    fn checkpoint(&mut self) {
        // (busy, frames in the WAL, frames copied back)
        let done = self
            .conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                Ok((row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
            });
        let (log, copied) = match done {
            Ok(frames) => frames,
            Err(e) => {
                tracing::debug!(error = %e, "WAL checkpoint failed; the next one retries");
                return;
            }
        };
        let bytes = std::fs::metadata(&self.wal_path).map_or(0, |m| m.len());
        let event = self
            .watch
            .checkpointed(bytes, copied >= log, web_crawler_actors::now_ms());
        *self.shared.lock().unwrap_or_else(|p| p.into_inner()) = self.watch.state();
        match event {
            Some(WalEvent::Growing { bytes, since }) => tracing::warn!(
                "the write-ahead log of {} has grown to {} MiB: a reader has held an old \
                 snapshot since {} (a sqlite3 session inside a transaction?), so checkpoints \
                 cannot empty it; the crawl goes on, and the log shrinks once the reader ends",
                self.wal_path.display(),
                bytes >> 20,
                web_crawler_actors::outage::utc_time(since)
            ),
            Some(WalEvent::CaughtUp) => tracing::warn!(
                "the write-ahead log of {} is checkpointed again",
                self.wal_path.display()
            ),
            None => {}
        }
    }
}

#[async_trait]
impl Frontier for SqliteStore {
    async fn claim(&self, req: ClaimRequest) -> Result<Vec<Job>, StoreError> {
        let (_, jobs) = self.commit_and_claim(Arc::default(), Some(req)).await?;
        Ok(jobs)
    }

    async fn commit(&self, batch: Arc<CommitBatch>) -> Result<CommitSummary, StoreError> {
        if batch.is_empty() {
            return Ok(CommitSummary::default());
        }
        let (summary, _) = self.commit_and_claim(batch, None).await?;
        Ok(summary)
    }

    async fn commit_and_claim(
        &self,
        batch: Arc<CommitBatch>,
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

    async fn frontier_empty(&self) -> Result<bool, StoreError> {
        self.read(|tx, _| rows::frontier_empty(tx)).await
    }

    async fn requeue_due(&self, now: Millis, limit: usize) -> Result<u64, StoreError> {
        self.write(move |tx, seen| commit::requeue_due(tx, seen, now, limit))
            .await
    }

    async fn hand_over(
        &self,
        node: &str,
        after: Option<&str>,
        limit: usize,
        now: Millis,
    ) -> Result<HandOver, StoreError> {
        let (node, after) = (node.to_string(), after.map(str::to_string));
        self.write(move |tx, seen| commit::hand_over(tx, seen, &node, after.as_deref(), limit, now))
            .await
    }

    async fn nodes_with_pages(&self) -> Result<Vec<String>, StoreError> {
        self.read(|tx, _| rows::nodes_with_pages(tx)).await
    }

    async fn trap_closures(&self) -> Result<Vec<ClosedFamily>, StoreError> {
        self.read(|tx, _| rows::trap_closures(tx)).await
    }

    async fn reopen_trap_family(
        &self,
        family: &str,
        now: Millis,
    ) -> Result<Option<u64>, StoreError> {
        let family = family.to_string();
        self.write(move |tx, _| commit::reopen_trap_family(tx, &family, now))
            .await
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

    async fn processed_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PageRecord>, StoreError> {
        let after = after.map(str::to_string);
        self.read(move |tx, _| rows::processed_after(tx, after.as_deref(), limit))
            .await
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

    async fn first_records(
        &self,
        collection: &str,
        after: Option<&Document>,
        limit: usize,
    ) -> Result<Vec<Document>, StoreError> {
        let collection = collection.to_string();
        let after = after.cloned();
        self.read(move |tx, _| rows::first_records(tx, &collection, after.as_ref(), limit))
            .await
    }

    async fn delete_records(&self, collection: &str, keys: &[Document]) -> Result<u64, StoreError> {
        let collection = collection.to_string();
        let keys = keys.to_vec();
        self.write(move |tx, _| commit::delete_records(tx, &collection, &keys))
            .await
    }

    async fn broken_links(&self) -> Result<Vec<BrokenLink>, StoreError> {
        self.read(|tx, _| rows::broken_links(tx)).await
    }

    async fn trap_families(&self, samples: usize) -> Result<Vec<TrapFamily>, StoreError> {
        self.read(move |tx, _| rows::trap_families(tx, samples))
            .await
    }

    async fn fetch_history(&self, query: HistoryQuery) -> Result<Vec<FetchHistory>, StoreError> {
        self.read(move |tx, _| rows::fetch_history(tx, &query))
            .await
    }

    async fn hosts(&self) -> Result<Vec<HostRecord>, StoreError> {
        self.read(|tx, _| rows::hosts(tx)).await
    }

    async fn status_histogram(&self) -> Result<Vec<(Option<u16>, u64)>, StoreError> {
        self.read(|tx, _| rows::status_histogram(tx)).await
    }

    async fn pages_per_host(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.read(|tx, _| rows::pages_per_host(tx)).await
    }

    async fn pages_per_node(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.read(|tx, _| rows::pages_per_node(tx)).await
    }
}

// What both backends must do is tested once, in tests/it/store_conformance.rs;
// these tests cover what is particular to the SQLite file.
#[cfg(test)]
mod test_support {
    use super::*;
    use std::collections::HashMap;
    use web_crawler_actors::{NewLink, OperationSpec, PageRecord, ProcessedPage};

    pub(super) const OWNER: &str = "node1@master";

    pub(super) fn open_temp() -> (tempfile::TempDir, std::path::PathBuf, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crawl.db");
        let store = SqliteStore::open(&path).unwrap();
        (dir, path, store)
    }

    pub(super) fn host_of(url: &str) -> String {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        rest.split('/').next().unwrap().to_string()
    }

    pub(super) fn link(url: &str, depth: u32, priority: f64) -> NewLink {
        NewLink::new(
            url.into(),
            host_of(url),
            OperationSpec::crawl(),
            depth,
            priority,
        )
    }

    pub(super) fn key(url: &str) -> UrlKey {
        UrlKey {
            url: url.to_string(),
            operation: OperationSpec::crawl(),
        }
    }

    pub(super) fn seeds(now: Millis, links: Vec<NewLink>) -> CommitBatch {
        CommitBatch {
            now,
            seeds: links,
            ..CommitBatch::default()
        }
    }

    pub(super) fn claim_req(now: Millis, limit: usize, cap: usize) -> ClaimRequest {
        ClaimRequest {
            now,
            owner: OWNER.to_string(),
            lease_until: now + 60_000,
            limit,
            per_host_cap: cap,
            held_per_host: HashMap::new(),
        }
    }

    pub(super) fn page(
        url: &str,
        code: Option<u16>,
        hash: Option<u64>,
        links: Vec<NewLink>,
    ) -> ProcessedPage {
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
            ..ProcessedPage::default()
        }
    }

    pub(super) fn pages(
        now: Millis,
        reprocess: Option<Millis>,
        pages: Vec<ProcessedPage>,
    ) -> CommitBatch {
        CommitBatch {
            now,
            reprocess_after_ms: reprocess,
            pages,
            ..CommitBatch::default()
        }
    }

    pub(super) async fn pending_urls(store: &SqliteStore) -> Vec<String> {
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
    pub(super) async fn crawl_one(store: &SqliteStore, url: &str, now: Millis) {
        store
            .commit((seeds(now, vec![link(url, 0, 1.0)])).into())
            .await
            .unwrap();
        let jobs = store.claim(claim_req(now, 100, 100)).await.unwrap();
        assert!(jobs.iter().any(|j| j.url == url));
        store
            .commit((pages(now, None, vec![page(url, Some(200), None, vec![])])).into())
            .await
            .unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    /// The priority column of the one pending row, as written in the file.
    fn row_priority(store: &SqliteStore) -> f64 {
        let inner = store.inner.lock().unwrap();
        inner
            .conn
            .query_row("SELECT priority FROM pending_urls", [], |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn a_store_is_told_from_other_files_without_changing_them() {
        let (dir, path, store) = open_temp();
        drop(store);
        assert!(SqliteStore::is_store(&path));
        let notes = dir.path().join("notes.txt");
        std::fs::write(&notes, "my notes").unwrap();
        let empty = dir.path().join("empty.db");
        std::fs::write(&empty, "").unwrap();
        for other in [&notes, &empty, &dir.path().join("missing.db")] {
            assert!(!SqliteStore::is_store(other), "{}", other.display());
        }
        assert!(!SqliteStore::is_store(dir.path()));
        assert_eq!(std::fs::read(&empty).unwrap(), b"", "left as it was");
        assert!(!dir.path().join("missing.db").exists());
    }

    #[test]
    fn a_directory_given_as_the_store_is_named_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let said = |e: StoreError| format!("{}: {}", e, std::error::Error::source(&e).unwrap());
        let expected = format!(
            "cannot open the store {}: it is a directory; the store is a file, such as {}",
            dir.path().display(),
            dir.path().join("crawler.db").display()
        );
        assert_eq!(said(SqliteStore::open(dir.path()).unwrap_err()), expected);
        assert_eq!(
            said(SqliteStore::open_for_crawl(dir.path()).unwrap_err()),
            expected
        );
        assert!(
            !lock::lock_path(dir.path()).exists(),
            "no lock file made beside it"
        );
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
                .commit((pages(1_000, None, vec![linking])).into())
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
}
