//! The embedded store: the paper's MongoDB collections as SQLite tables.
//!
//! One connection behind a mutex: SQLite serialises writers anyway, and a
//! single connection makes every trait call one transaction that no other call
//! of this process can interleave with (claims cannot hand out a URL twice).
//! All SQL runs on tokio's blocking pool so the actors' runtime never stalls on
//! disk I/O.

use super::seen::{FileKeys, PendingRow, Seen, SeenWindow, key_hash};
use async_trait::async_trait;
use rusqlite::{
    Connection, ErrorCode, OptionalExtension, Row, Transaction, TransactionBehavior, named_params,
    params,
};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use web_crawler_actors::frontier::{LinkDecision, decide_link, dedupe_by_content, round_robin};
use web_crawler_actors::{
    BrokenLink, ClaimRequest, CommitBatch, CommitSummary, Document, Frontier, HostRecord, Job,
    Millis, NewLink, OperationSpec, PageQuery, PageRecord, PendingUrl, ProcessedUrl, Queries,
    ROBOTS_BLOCKED, Record, SEARCH_RESULTS, StoreCounts, StoreError, UrlKey, now_ms,
};

/// Version of the table layout below; a file with another version is refused
/// rather than misread.
const SCHEMA_VERSION: i64 = 3;

/// Keys the seen window holds: two generations of half as many, each table
/// allocated at full size when the generation starts (about 12.5 MiB each).
const SEEN_WINDOW: usize = 1 << 18;

/// Keys the file-key filter is sized for at least (about 1.2 MB at 1% false
/// "maybe"s); it is rebuilt twice the file's size whenever it fills.
const FILE_KEYS_MIN: usize = 1 << 20;

/// Idempotent: `open` runs it on every start. `pending_urls.id` aliases the
/// rowid explicitly so that VACUUM cannot renumber it (it is the FIFO order).
const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value
);
CREATE TABLE IF NOT EXISTS pending_urls (
    id            INTEGER PRIMARY KEY,
    url           TEXT    NOT NULL,
    operation     TEXT    NOT NULL,
    host          TEXT    NOT NULL,
    status        TEXT    NOT NULL DEFAULT 'pending',
    d_change      INTEGER NOT NULL,
    depth         INTEGER NOT NULL DEFAULT 0,
    priority      REAL    NOT NULL DEFAULT 0,
    attempts      INTEGER NOT NULL DEFAULT 0,
    not_before    INTEGER NOT NULL DEFAULT 0,
    lease_until   INTEGER,
    lease_owner   TEXT,
    redirect_hops INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    UNIQUE (url, operation)
);
CREATE INDEX IF NOT EXISTS pending_urls_claim ON pending_urls (status, host, priority DESC);
CREATE TABLE IF NOT EXISTS processed_urls (
    url              TEXT PRIMARY KEY,
    operation        TEXT    NOT NULL,
    host             TEXT    NOT NULL,
    depth            INTEGER NOT NULL DEFAULT 0,
    "content-length" INTEGER,
    "content-type"   TEXT,
    server           TEXT,
    http_returncode  INTEGER,
    links_count      INTEGER NOT NULL DEFAULT 0,
    d_processed      INTEGER NOT NULL,
    title            TEXT,
    content_hash     INTEGER,
    duplicate_of     TEXT,
    redirect_to      TEXT,
    error            TEXT,
    fetch_ms         INTEGER NOT NULL DEFAULT 0,
    out_links        TEXT    NOT NULL DEFAULT '[]',
    truncated        INTEGER NOT NULL DEFAULT 0,
    node             TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS processed_urls_content_hash ON processed_urls (content_hash);
CREATE TABLE IF NOT EXISTS referrers (
    id    INTEGER PRIMARY KEY,
    url   TEXT NOT NULL UNIQUE,
    links BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    collection TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    document   TEXT    NOT NULL,
    d_record   INTEGER NOT NULL,
    PRIMARY KEY (collection, key)
);
CREATE TABLE IF NOT EXISTS hosts (
    host              TEXT PRIMARY KEY,
    robots_status     TEXT    NOT NULL,
    robots_http_code  INTEGER,
    robots_error      TEXT,
    robots_txt        TEXT,
    robots_fetched_at INTEGER NOT NULL DEFAULT 0,
    crawl_delay_ms    INTEGER,
    sitemaps          TEXT    NOT NULL DEFAULT '[]'
);
"#;

// --- statements -------------------------------------------------------------
// Constants so `open` can compile each one against the file's schema (a clear
// error up front instead of a failing crawl later) and so `prepare_cached`
// finds them again by text.

const EXPIRE_LEASES: &str = "UPDATE pending_urls
    SET status = 'pending', lease_until = NULL, lease_owner = NULL, d_change = ?1
    WHERE status = 'processing' AND lease_until < ?1";

/// Hosts with pending work, by a loose index scan of the claim index: one
/// probe per host, never a pass over every pending row (the frontier may
/// hold hundreds of thousands).
const PENDING_HOSTS: &str = "WITH RECURSIVE hosts(h) AS (
        SELECT MIN(host) FROM pending_urls WHERE status = 'pending'
        UNION ALL
        SELECT (SELECT MIN(host) FROM pending_urls WHERE status = 'pending' AND host > h)
        FROM hosts WHERE h IS NOT NULL
    )
    SELECT h FROM hosts WHERE h IS NOT NULL";

/// One host's claimable URLs, best first, straight from the claim index
/// (status, host, priority DESC, then rowid = id), so the caller reads only
/// as many rows as it wants. No `LIMIT ?`: SQLite plans with a bound LIMIT's
/// value, so rebinding it re-prepares the statement on every call.
const HOST_CANDIDATES: &str = "SELECT id, url, operation, host, depth, priority, attempts,
        redirect_hops
    FROM pending_urls
    WHERE status = 'pending' AND host = ?1 AND not_before <= ?2
    ORDER BY priority DESC, id";

const CLAIM_UPDATE: &str = "UPDATE pending_urls
    SET status = 'processing', lease_until = ?2, lease_owner = ?3, d_change = ?4
    WHERE id = ?1";

const PROCESSED_AT: &str =
    "SELECT d_processed FROM processed_urls WHERE url = ?1 AND operation = ?2";

const PENDING_AT: &str = "SELECT id, priority, depth, redirect_hops FROM pending_urls
    WHERE url = ?1 AND operation = ?2";

/// A referrer's link list: the sorted, distinct [`url_hash`]es of the URLs it
/// links to, 8 bytes each (little-endian). One row per referring page makes
/// recording a page's 10–60 links one append instead of as many scattered
/// index inserts; finding who links to a URL reads every list.
const REFERRER_LINKS: &str = "SELECT id, links FROM referrers WHERE url = ?1";

const INSERT_REFERRER: &str = "INSERT INTO referrers (url, links) VALUES (?1, ?2)";

const UPDATE_REFERRER: &str = "UPDATE referrers SET links = ?2 WHERE id = ?1";

const ALL_REFERRERS: &str = "SELECT url, links FROM referrers";

/// `ON CONFLICT ... DO NOTHING` then [`MERGE_PENDING`] is the upsert the
/// frontier rules describe, split in two so the caller can tell an insert
/// (`queued`) from a merge (`merged`).
const INSERT_PENDING: &str = "INSERT INTO pending_urls
        (url, operation, host, status, d_change, depth, priority, attempts, not_before,
         redirect_hops)
    VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, 0, 0, ?7)
    ON CONFLICT (url, operation) DO NOTHING";

/// Status and attempts stay: merging a referral must not resurrect or reset a
/// URL that is being fetched or waiting for a retry.
const MERGE_PENDING: &str = "UPDATE pending_urls
    SET priority = priority + ?2, depth = MIN(depth, ?3), redirect_hops = MIN(redirect_hops, ?4)
    WHERE id = ?1";

/// The original a body duplicates: the oldest successful page with the same
/// hash that is not itself a duplicate (so `duplicate_of` always names an
/// original, and re-processing an original never makes it a copy of its copy).
const SAME_CONTENT: &str = "SELECT url, http_returncode FROM processed_urls
    WHERE content_hash = ?1 AND url != ?2 AND duplicate_of IS NULL
      AND http_returncode BETWEEN 200 AND 299
    ORDER BY d_processed, url";

/// REPLACE: one document per URL, the last operation wins (the paper's `_id`).
/// referral_count and referral_list are read from `referrers`.
const WRITE_PROCESSED: &str = r#"INSERT OR REPLACE INTO processed_urls
        (url, operation, host, depth, "content-length", "content-type", server,
         http_returncode, links_count, d_processed, title, content_hash,
         duplicate_of, redirect_to, error, fetch_ms, out_links, truncated, node)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
            ?19)"#;

const DELETE_PENDING: &str = "DELETE FROM pending_urls WHERE url = ?1 AND operation = ?2";

const WRITE_RECORD: &str = "INSERT INTO records (collection, key, document, d_record)
    VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (collection, key) DO UPDATE SET document = excluded.document,
                                                d_record = excluded.d_record";

const RETRY: &str = "UPDATE pending_urls
    SET status = 'pending', attempts = attempts + 1, not_before = ?3, last_error = ?4,
        lease_until = NULL, lease_owner = NULL, d_change = ?5
    WHERE url = ?1 AND operation = ?2";

const WRITE_HOST: &str = "INSERT INTO hosts
        (host, robots_status, robots_http_code, robots_error, robots_txt, robots_fetched_at,
         crawl_delay_ms, sitemaps)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
    ON CONFLICT (host) DO UPDATE SET
        robots_status = excluded.robots_status,
        robots_http_code = excluded.robots_http_code,
        robots_error = excluded.robots_error,
        robots_txt = excluded.robots_txt,
        robots_fetched_at = excluded.robots_fetched_at,
        crawl_delay_ms = excluded.crawl_delay_ms,
        sitemaps = excluded.sitemaps";

const EXTEND_LEASE: &str = "UPDATE pending_urls SET lease_until = ?3
    WHERE url = ?1 AND operation = ?2 AND status = 'processing' AND lease_owner = ?4";

const LEASED_BY: &str = "SELECT id, url, operation FROM pending_urls
    WHERE status = 'processing' AND lease_owner = ?1";

const RELEASE_ID: &str = "UPDATE pending_urls
    SET status = 'pending', lease_until = NULL, lease_owner = NULL, d_change = ?2
    WHERE id = ?1";

const RELEASE_KEY: &str = "UPDATE pending_urls
    SET status = 'pending', lease_until = NULL, lease_owner = NULL, d_change = ?3
    WHERE url = ?1 AND operation = ?2 AND status = 'processing'";

const COUNTS: &str = "SELECT
    (SELECT COUNT(*) FROM pending_urls WHERE status = 'pending'),
    (SELECT COUNT(*) FROM pending_urls WHERE status = 'processing'),
    (SELECT COUNT(*) FROM processed_urls),
    (SELECT COUNT(*) FROM processed_urls WHERE error IS NOT NULL),
    (SELECT COUNT(*) FROM processed_urls WHERE error = ?1),
    (SELECT COUNT(*) FROM processed_urls WHERE duplicate_of IS NOT NULL),
    (SELECT COUNT(*) FROM records WHERE collection = ?2)";

/// Column list shared by every processed_urls read, in [`read_processed`] order.
macro_rules! processed_cols {
    () => {
        r#"url, operation, host, depth, "content-length", "content-type", server,
           http_returncode, links_count, d_processed, title, content_hash,
           duplicate_of, redirect_to, error, fetch_ms, out_links, truncated, node"#
    };
}

const PROCESSED_PAGE: &str = concat!(
    "SELECT ",
    processed_cols!(),
    " FROM processed_urls
    WHERE (:only_failed = 0 OR http_returncode >= 400 OR error IS NOT NULL)
    ORDER BY url LIMIT :limit OFFSET :offset"
);

const PROCESSED_ONE: &str = concat!(
    "SELECT ",
    processed_cols!(),
    " FROM processed_urls WHERE url = ?1"
);

const PENDING_LIST: &str = "SELECT url, operation, host, status, depth, priority, attempts,
        d_change, not_before, lease_until, last_error
    FROM pending_urls ORDER BY id LIMIT ?1";

const RECORD_LIST: &str = "SELECT document FROM records WHERE collection = ?1 ORDER BY key";

const BROKEN: &str = "SELECT url, http_returncode, error FROM processed_urls
    WHERE http_returncode >= 400 OR (error IS NOT NULL AND error != ?1)
    ORDER BY url";

const HOST_LIST: &str = "SELECT host, robots_status, robots_http_code, robots_error, robots_txt,
        robots_fetched_at, crawl_delay_ms, sitemaps
    FROM hosts ORDER BY host";

/// SQLite sorts NULL first in ascending order: "no response" leads.
const HISTOGRAM: &str = "SELECT http_returncode, COUNT(*) FROM processed_urls
    GROUP BY http_returncode ORDER BY http_returncode";

const ALL_STATEMENTS: &[&str] = &[
    EXPIRE_LEASES,
    PENDING_HOSTS,
    HOST_CANDIDATES,
    CLAIM_UPDATE,
    PROCESSED_AT,
    PENDING_AT,
    REFERRER_LINKS,
    INSERT_REFERRER,
    UPDATE_REFERRER,
    ALL_REFERRERS,
    INSERT_PENDING,
    MERGE_PENDING,
    SAME_CONTENT,
    WRITE_PROCESSED,
    DELETE_PENDING,
    WRITE_RECORD,
    RETRY,
    WRITE_HOST,
    EXTEND_LEASE,
    LEASED_BY,
    RELEASE_ID,
    RELEASE_KEY,
    COUNTS,
    PROCESSED_PAGE,
    PROCESSED_ONE,
    PENDING_LIST,
    RECORD_LIST,
    BROKEN,
    HOST_LIST,
    HISTOGRAM,
];

// --- errors -----------------------------------------------------------------

/// Internal error, so `?` works on rusqlite calls; mapped to [`StoreError`] at
/// the trait boundary.
#[derive(Debug, thiserror::Error)]
enum Fail {
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
    #[error("{0}")]
    Corrupt(String),
    #[error("{0}")]
    Invalid(String),
}

impl From<Fail> for StoreError {
    fn from(fail: Fail) -> Self {
        match fail {
            Fail::Sql(e) if is_unreadable(&e) => StoreError::Corrupt(e.to_string()),
            Fail::Sql(e) => StoreError::backend("SQLite", e),
            Fail::Corrupt(msg) => StoreError::Corrupt(msg),
            Fail::Invalid(msg) => StoreError::Invalid(msg),
        }
    }
}

/// SQLite's own error code, also for errors rusqlite reports with the SQL text.
fn ffi_error(e: &rusqlite::Error) -> Option<&rusqlite::ffi::Error> {
    match e {
        rusqlite::Error::SqliteFailure(err, _)
        | rusqlite::Error::SqlInputError { error: err, .. } => Some(err),
        _ => None,
    }
}

/// Errors that mean the data on disk, not the operation, is wrong.
fn is_unreadable(e: &rusqlite::Error) -> bool {
    matches!(
        ffi_error(e).map(|err| err.code),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
    ) || matches!(
        e,
        rusqlite::Error::IntegralValueOutOfRange(..)
            | rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::InvalidColumnType(..)
    )
}

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

fn init(conn: &mut Connection) -> Result<(), Fail> {
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    // The frontier's hot pages stay in our cache instead of being copied in
    // from the OS page cache on every lookup (16 MiB; negative = KiB).
    conn.pragma_update(None, "cache_size", -16_384)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // Checkpoints run on their own thread ([`checkpoint_until_dropped`]): in
    // the commit they cost the master more than the commit itself. This is
    // only the backstop if that thread falls behind (256 MiB of WAL).
    conn.pragma_update(None, "wal_autocheckpoint", 65_536)?;
    // Before anything persistent (WAL is recorded in the file header), so a
    // file that is not ours is refused untouched.
    let version = check_identity(conn)?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(journal_mode = %mode, "sqlite refused WAL mode");
    }
    // Room for every statement in ALL_STATEMENTS, so none is ever recompiled.
    conn.set_prepared_statement_cache_capacity(ALL_STATEMENTS.len() + 8);

    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA).map_err(schema_mismatch)?;
    if version == Some(2) {
        tx.execute_batch(MIGRATE_2_TO_3)?;
    }
    tx.execute(
        "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?1)",
        [SCHEMA_VERSION],
    )?;
    // Compiling every statement checks columns and ON CONFLICT targets
    // against what is actually in the file.
    for sql in ALL_STATEMENTS {
        tx.prepare_cached(sql).map_err(schema_mismatch)?;
    }
    tx.commit()?;
    Ok(())
}

/// Version 2 kept search results in a table of their own; version 3 keeps
/// every operation's records in `records` (created by [`SCHEMA`]).
const MIGRATE_2_TO_3: &str = "
INSERT INTO records (collection, key, document, d_record)
    SELECT 'search_results', json_object('text', text, 'url', url),
           json_object('url', url, 'text', text, 'positions', json(positions),
                       'd_search', d_search),
           d_search
    FROM search_results;
DROP TABLE search_results;
UPDATE meta SET value = 3 WHERE key = 'schema_version';
";

/// A new file (`None`), or one of ours at [`SCHEMA_VERSION`] or a version it
/// migrates from (its version). Reading sqlite_master is also the first read
/// of the header, where a non-SQLite file fails.
fn check_identity(conn: &Connection) -> Result<Option<i64>, Fail> {
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master
             WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
        )?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    if tables.iter().any(|t| t == "meta") {
        let version: Option<rusqlite::types::Value> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |row| row.get(0),
            )
            .optional()?;
        use rusqlite::types::Value;
        let number = match &version {
            Some(Value::Integer(v)) => Some(*v),
            // A number written as text by hand.
            Some(Value::Text(v)) => v.trim().parse::<i64>().ok(),
            _ => None,
        };
        match number {
            Some(v @ (2 | SCHEMA_VERSION)) => Ok(Some(v)),
            _ => Err(Fail::Corrupt(format!(
                "schema_version is {version:?}, this build reads versions 2 and {SCHEMA_VERSION}"
            ))),
        }
    } else if tables.is_empty() {
        Ok(None)
    } else {
        // Someone else's database: do not add our tables to it.
        Err(Fail::Corrupt(format!(
            "it holds tables ({}) but no meta table with a schema_version",
            tables.join(", ")
        )))
    }
}

/// A table of ours that exists with other columns or constraints shows up as
/// a plain SQLITE_ERROR ("no such column", "ON CONFLICT clause does not
/// match") while compiling; anything else (I/O, locks) stays what it is.
fn schema_mismatch(e: rusqlite::Error) -> Fail {
    const SQLITE_ERROR: i32 = 1;
    if ffi_error(&e).map(|f| f.extended_code & 0xff) != Some(SQLITE_ERROR) {
        return Fail::Sql(e);
    }
    // Only SQLite's message: the Display of SqlInputError appends the whole
    // schema script.
    let msg = match &e {
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        rusqlite::Error::SqliteFailure(_, Some(msg)) => msg.clone(),
        other => other.to_string(),
    };
    Fail::Corrupt(format!("incompatible schema: {msg}"))
}

// --- conversions ------------------------------------------------------------

fn to_i64<T: TryInto<i64>>(value: T, what: &str) -> Result<i64, Fail> {
    value
        .try_into()
        .map_err(|_| Fail::Invalid(format!("{what} does not fit in a 64-bit signed integer")))
}

/// NULL reads as 0, so rows written by hand or by an older run still load.
fn int_col<T: TryFrom<i64>>(row: &Row<'_>, idx: usize, what: &str) -> Result<T, Fail> {
    let v: i64 = row.get::<_, Option<i64>>(idx)?.unwrap_or(0);
    T::try_from(v).map_err(|_| Fail::Corrupt(format!("{what} = {v} is out of range")))
}

fn opt_int_col<T: TryFrom<i64>>(row: &Row<'_>, idx: usize, what: &str) -> Result<Option<T>, Fail> {
    match row.get::<_, Option<i64>>(idx)? {
        None => Ok(None),
        Some(v) => T::try_from(v)
            .map(Some)
            .map_err(|_| Fail::Corrupt(format!("{what} = {v} is out of range"))),
    }
}

fn text_col(row: &Row<'_>, idx: usize) -> Result<String, Fail> {
    Ok(row.get::<_, Option<String>>(idx)?.unwrap_or_default())
}

fn operation_col(row: &Row<'_>, idx: usize, table: &str) -> Result<OperationSpec, Fail> {
    let key: String = row.get(idx)?;
    OperationSpec::from_key(&key).ok_or_else(|| {
        Fail::Corrupt(format!(
            "{table}.operation {key:?} is not a JSON array of strings"
        ))
    })
}

/// A JSON list column; NULL or empty text reads as the empty list. `parse`
/// is `serde_json::from_str` at the concrete type (keeps serde out of the deps).
fn json_col<T>(
    row: &Row<'_>,
    idx: usize,
    what: &str,
    parse: impl Fn(&str) -> serde_json::Result<Vec<T>>,
) -> Result<Vec<T>, Fail> {
    match row.get::<_, Option<String>>(idx)? {
        None => Ok(Vec::new()),
        Some(s) if s.trim().is_empty() => Ok(Vec::new()),
        Some(s) => parse(&s)
            .map_err(|e| Fail::Corrupt(format!("{what} is not the expected JSON list: {e}"))),
    }
}

fn json_err(e: serde_json::Error) -> Fail {
    Fail::Invalid(format!("cannot encode as JSON: {e}"))
}

fn read_processed(row: &Row<'_>) -> Result<ProcessedUrl, Fail> {
    Ok(ProcessedUrl {
        record: PageRecord {
            url: row.get(0)?,
            operation: operation_col(row, 1, "processed_urls")?,
            host: text_col(row, 2)?,
            depth: int_col(row, 3, "depth")?,
            content_length: row.get(4)?,
            content_type: row.get(5)?,
            server: row.get(6)?,
            http_returncode: opt_int_col(row, 7, "http_returncode")?,
            links_count: int_col(row, 8, "links_count")?,
            title: row.get(10)?,
            // u64 hashes are stored bit-cast: SQLite integers are signed.
            content_hash: row.get::<_, Option<i64>>(11)?.map(i64::cast_unsigned),
            redirect_to: row.get(13)?,
            error: row.get(14)?,
            fetch_ms: int_col(row, 15, "fetch_ms")?,
            out_links: json_col(row, 16, "out_links", |s| serde_json::from_str(s))?,
            truncated: int_col::<i64>(row, 17, "truncated")? != 0,
            node: text_col(row, 18)?,
        },
        referral_count: 0,
        referral_list: Vec::new(),
        duplicate_of: row.get(12)?,
        d_processed: int_col(row, 9, "d_processed")?,
    })
}

// --- referrals --------------------------------------------------------------

/// A normalized URL as the referrers' link lists hold it. xxh3 is a fixed
/// algorithm, so stored values stay valid across builds.
fn url_hash(url: &str) -> i64 {
    xxhash_rust::xxh3::xxh3_64(url.as_bytes()).cast_signed()
}

fn decode_links(blob: &[u8]) -> Result<Vec<i64>, Fail> {
    if !blob.len().is_multiple_of(8) {
        return Err(Fail::Corrupt(format!(
            "a referrer's link list is {} bytes, not a multiple of 8",
            blob.len()
        )));
    }
    Ok(blob
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

fn encode_links(mut hashes: Vec<i64>) -> Vec<u8> {
    hashes.sort_unstable();
    hashes.dedup();
    hashes.iter().flat_map(|h| h.to_le_bytes()).collect()
}

/// Add the URLs of `links` to `referrer`'s list.
fn write_referrals(tx: &Transaction<'_>, referrer: &str, links: &[NewLink]) -> Result<(), Fail> {
    if links.is_empty() {
        return Ok(());
    }
    let mut hashes: Vec<i64> = links.iter().map(|link| url_hash(&link.url)).collect();
    let existing: Option<(i64, Vec<u8>)> = tx
        .prepare_cached(REFERRER_LINKS)?
        .query_row([referrer], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    match existing {
        None => {
            tx.prepare_cached(INSERT_REFERRER)?
                .execute(params![referrer, encode_links(hashes)])?;
        }
        Some((id, blob)) => {
            let old = decode_links(&blob)?;
            hashes.retain(|h| old.binary_search(h).is_err());
            if !hashes.is_empty() {
                hashes.extend(old);
                tx.prepare_cached(UPDATE_REFERRER)?
                    .execute(params![id, encode_links(hashes)])?;
            }
        }
    }
    Ok(())
}

/// Who links to each of `urls` (sorted), by one pass over the link lists.
fn referrals_of<'u>(
    tx: &Transaction<'_>,
    urls: impl IntoIterator<Item = &'u str>,
) -> Result<HashMap<String, Vec<String>>, Fail> {
    let mut wanted: HashMap<i64, Vec<String>> = HashMap::new();
    let mut names: Vec<(String, i64)> = Vec::new();
    for url in urls {
        let h = url_hash(url);
        wanted.entry(h).or_default();
        names.push((url.to_string(), h));
    }
    if !wanted.is_empty() {
        let mut stmt = tx.prepare_cached(ALL_REFERRERS)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let links = decode_links(row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?)?;
            let referrer: String = row.get(0)?;
            if wanted.len() < 8 {
                for (h, list) in wanted.iter_mut() {
                    if links.binary_search(h).is_ok() {
                        list.push(referrer.clone());
                    }
                }
            } else {
                for h in &links {
                    if let Some(list) = wanted.get_mut(h) {
                        list.push(referrer.clone());
                    }
                }
            }
        }
    }
    Ok(names
        .into_iter()
        .map(|(url, h)| {
            let mut list = wanted.get(&h).cloned().unwrap_or_default();
            list.sort();
            (url, list)
        })
        .collect())
}

fn limit_param(limit: Option<usize>) -> i64 {
    // SQLite reads a negative LIMIT as "no limit".
    limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX))
}

// --- commit -----------------------------------------------------------------

/// One commit's writes: the transaction and the seen window kept in step
/// with it.
struct Commit<'t> {
    tx: &'t Transaction<'t>,
    seen: &'t mut SeenWindow,
    now: Millis,
    reprocess_after_ms: Option<Millis>,
    summary: CommitSummary,
}

impl Commit<'_> {
    /// What the file holds for a key the window does not know.
    fn lookup(&self, url: &str, operation: &str) -> Result<Option<Seen>, Fail> {
        let pending = self
            .tx
            .prepare_cached(PENDING_AT)?
            .query_row(params![url, operation], |row| {
                Ok(Seen::Pending(PendingRow {
                    id: row.get(0)?,
                    stored: row.get::<_, Option<f64>>(1)?.unwrap_or(0.0),
                    unsaved: 0.0,
                    depth: row.get(2)?,
                    redirect_hops: row.get(3)?,
                }))
            })
            .optional()?;
        if pending.is_some() {
            return Ok(pending);
        }
        Ok(self
            .tx
            .prepare_cached(PROCESSED_AT)?
            .query_row(params![url, operation], |row| row.get(0))
            .optional()?
            .map(|at| Seen::Processed { at }))
    }

    /// Record `seen`; credit of keys that fall out of the window is written.
    fn remember(&mut self, key: u64, seen: Seen) -> Result<(), Fail> {
        if let Some(dropped) = self.seen.insert(key, seen) {
            write_credit(self.tx, dropped.values().filter_map(Seen::unsaved))?;
        }
        if self.seen.filter_is_full() {
            self.seen.refill(file_keys(self.tx)?);
        }
        Ok(())
    }

    /// The paper's `add_pending_url` for one link, as [`decide_link`] rules
    /// it (the referral itself is the referrer's list: [`write_referrals`]).
    fn upsert_link(&mut self, link: &NewLink) -> Result<(), Fail> {
        let key = key_hash(&link.url, &link.operation);
        if self.seen.get(key).is_none()
            && self.seen.may_be_in_file(key)
            && let Some(found) = self.lookup(&link.url, &link.operation.key())?
        {
            self.remember(key, found)?;
        }
        match self.seen.get_mut(key) {
            Some(Seen::Pending(row)) => {
                self.summary.merged += 1;
                if let Some(credit) = row.merge(link.priority, link.depth, link.redirect_hops) {
                    self.tx.prepare_cached(MERGE_PENDING)?.execute(params![
                        row.id,
                        credit,
                        link.depth,
                        link.redirect_hops
                    ])?;
                }
                Ok(())
            }
            Some(Seen::Processed { at })
                if decide_link(Some(*at), self.now, self.reprocess_after_ms)
                    == LinkDecision::ReferralOnly =>
            {
                self.summary.merged += 1;
                Ok(())
            }
            // Unknown, or processed long enough ago to be queued again.
            _ => {
                self.tx.prepare_cached(INSERT_PENDING)?.execute(params![
                    link.url,
                    link.operation.key(),
                    link.host,
                    self.now,
                    link.depth,
                    link.priority,
                    link.redirect_hops,
                ])?;
                self.summary.queued += 1;
                let id = self.tx.last_insert_rowid();
                self.remember(
                    key,
                    Seen::Pending(PendingRow {
                        id,
                        stored: link.priority,
                        unsaved: 0.0,
                        depth: link.depth,
                        redirect_hops: link.redirect_hops,
                    }),
                )
            }
        }
    }
}

/// A filter of every key the file holds (the writes of an open transaction
/// included), with room for at least [`FILE_KEYS_MIN`] and twice as many.
/// The keys stream into it: none are held in between.
fn file_keys(conn: &Connection) -> Result<FileKeys, Fail> {
    let held: i64 = conn.query_row(
        "SELECT (SELECT COUNT(*) FROM pending_urls) + (SELECT COUNT(*) FROM processed_urls)",
        [],
        |row| row.get(0),
    )?;
    let mut keys = FileKeys::new(usize::try_from(held).unwrap_or(0), FILE_KEYS_MIN);
    for table in ["pending_urls", "processed_urls"] {
        let mut stmt = conn.prepare(&format!("SELECT url, operation FROM {table}"))?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let url = row.get_ref(0)?.as_str().map_err(rusqlite::Error::from)?;
            keys.insert(key_hash(url, &operation_col(row, 1, table)?));
        }
    }
    Ok(keys)
}

/// Add credit the seen window held to its rows (depth and hops unchanged).
fn write_credit(
    tx: &Transaction<'_>,
    credit: impl IntoIterator<Item = (i64, f64)>,
) -> Result<(), Fail> {
    let mut merge = tx.prepare_cached(MERGE_PENDING)?;
    for (id, unsaved) in credit {
        merge.execute(params![id, unsaved, u32::MAX, u32::MAX])?;
    }
    Ok(())
}

/// The page this one's body duplicates, if any. Candidates are checked with
/// the same [`dedupe_by_content`] rule, so a 200 page never counts as a copy
/// of an identical error page.
fn duplicate_of(tx: &Transaction<'_>, url: &str, hash: u64) -> Result<Option<String>, Fail> {
    let mut stmt = tx.prepare_cached(SAME_CONTENT)?;
    let mut rows = stmt.query(params![hash.cast_signed(), url])?;
    while let Some(row) = rows.next()? {
        let code: Option<u16> = opt_int_col(row, 1, "http_returncode")?;
        if dedupe_by_content(code) {
            return Ok(Some(row.get(0)?));
        }
    }
    Ok(None)
}

/// A record's key as the `records` table's key column: its fields in name
/// order, so one key always has one text (serde_json keeps insertion order).
fn record_key(key: &Document) -> Result<String, Fail> {
    let mut fields: Vec<(&String, &serde_json::Value)> = key.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    let mut text = String::from("{");
    for (i, (name, value)) in fields.into_iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&serde_json::to_string(name).map_err(json_err)?);
        text.push(':');
        text.push_str(&serde_json::to_string(value).map_err(json_err)?);
    }
    text.push('}');
    Ok(text)
}

/// Write (or replace) an operation's record: its key and fields as one
/// document, stamped with the commit time.
fn write_record(tx: &Transaction<'_>, record: &Record, now: Millis) -> Result<(), Fail> {
    let mut document = record.key.clone();
    document.extend(record.fields.clone());
    if let Some(stamp) = &record.stamp {
        document.insert(stamp.clone(), now.into());
    }
    let document = serde_json::to_string(&document).map_err(json_err)?;
    tx.prepare_cached(WRITE_RECORD)?.execute(params![
        record.collection,
        record_key(&record.key)?,
        document,
        now
    ])?;
    Ok(())
}

/// One transaction: SQLite makes the whole batch durable or none of it, so
/// the order inside (links, then the page) only matters to other backends.
fn apply_commit(
    tx: &Transaction<'_>,
    seen: &mut SeenWindow,
    batch: &CommitBatch,
) -> Result<CommitSummary, Fail> {
    let now = batch.now;
    let mut c = Commit {
        tx,
        seen,
        now,
        reprocess_after_ms: batch.reprocess_after_ms,
        summary: CommitSummary::default(),
    };
    for link in &batch.seeds {
        c.upsert_link(link)?;
    }
    for page in &batch.pages {
        let rec = &page.record;
        let dup = match rec.content_hash {
            Some(hash) if dedupe_by_content(rec.http_returncode) => {
                duplicate_of(tx, &rec.url, hash)?
            }
            _ => None,
        };
        if dup.is_some() {
            c.summary.duplicates += 1;
        } else {
            for link in &page.links {
                c.upsert_link(link)?;
            }
            write_referrals(tx, &rec.url, &page.links)?;
        }
        let operation = rec.operation.key();
        let out_links = serde_json::to_string(&page.out_links()).map_err(json_err)?;
        tx.prepare_cached(WRITE_PROCESSED)?.execute(params![
            rec.url,
            operation,
            rec.host,
            rec.depth,
            rec.content_length,
            rec.content_type,
            rec.server,
            rec.http_returncode,
            rec.links_count,
            now,
            rec.title,
            rec.content_hash.map(u64::cast_signed),
            dup,
            rec.redirect_to,
            rec.error,
            rec.fetch_ms,
            out_links,
            rec.truncated,
            rec.node,
        ])?;
        tx.prepare_cached(DELETE_PENDING)?
            .execute(params![rec.url, operation])?;
        c.remember(
            key_hash(&rec.url, &rec.operation),
            Seen::Processed { at: now },
        )?;
        for record in &page.records {
            write_record(tx, record, now)?;
        }
    }
    let summary = c.summary;
    for retry in &batch.retries {
        tx.prepare_cached(RETRY)?.execute(params![
            retry.key.url,
            retry.key.operation.key(),
            retry.not_before,
            retry.error,
            now,
        ])?;
    }
    for host in &batch.hosts {
        let delay = host
            .crawl_delay_ms
            .map(|d| to_i64(d, "crawl_delay_ms"))
            .transpose()?;
        let sitemaps = serde_json::to_string(&host.sitemaps).map_err(json_err)?;
        tx.prepare_cached(WRITE_HOST)?.execute(params![
            host.host,
            host.robots_status,
            host.robots_http_code,
            host.robots_error,
            host.robots_txt,
            host.robots_fetched_at,
            delay,
            sitemaps,
        ])?;
    }
    Ok(summary)
}

// --- claim ------------------------------------------------------------------

/// The credit a pending key gathered that its row does not show yet.
fn unsaved_credit(seen: &SeenWindow, url: &str, operation: &OperationSpec) -> f64 {
    seen.get(key_hash(url, operation))
        .and_then(Seen::unsaved)
        .map_or(0.0, |(_, credit)| credit)
}

fn apply_claim(
    tx: &Transaction<'_>,
    seen: &SeenWindow,
    req: &ClaimRequest,
) -> Result<Vec<Job>, Fail> {
    tx.prepare_cached(EXPIRE_LEASES)?.execute([req.now])?;
    if req.limit == 0 {
        return Ok(Vec::new());
    }
    let hosts: Vec<String> = tx
        .prepare_cached(PENDING_HOSTS)?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    // Per host, the best URLs it still has room for. The round-robin below
    // takes rank 1 of every host before rank 2 of any, so a fair share of the
    // limit is read first (reading each host's whole room would read and drop
    // most of it); if some hosts ran short, the others read up to what is
    // still missing, which is all the round-robin can take from any of them.
    let mut open: Vec<HostCandidates> = hosts
        .into_iter()
        .filter_map(|host| {
            let held = req.held_per_host.get(&host).copied().unwrap_or(0);
            let room = req.per_host_cap.saturating_sub(held).min(req.limit);
            (room > 0).then(|| HostCandidates {
                host,
                room,
                jobs: Vec::new(),
            })
        })
        .collect();
    let mut candidates = tx.prepare_cached(HOST_CANDIDATES)?;
    let share = req.limit.div_ceil(open.len().max(1));
    for h in &mut open {
        read_candidates(&mut candidates, h, req.now, share.min(h.room))?;
    }
    let missing = req
        .limit
        .saturating_sub(open.iter().map(|h| h.jobs.len()).sum());
    if missing > 0 {
        for h in &mut open {
            // A host that gave less than its share has nothing more.
            if h.jobs.len() == share.min(h.room) && h.jobs.len() < h.room {
                let want = h.room.min(h.jobs.len() + missing);
                read_candidates(&mut candidates, h, req.now, want)?;
            }
        }
    }
    let mut per_host: Vec<Vec<(i64, Job)>> = open
        .into_iter()
        .map(|h| h.jobs)
        .filter(|jobs| !jobs.is_empty())
        .collect();
    // Hosts with the most credit first; then rank 1 of every host before
    // rank 2 of any (each list is already within its host's room).
    per_host.sort_by(|a, b| b[0].1.priority.total_cmp(&a[0].1.priority));
    let mut rows: Vec<Option<(i64, Job)>> = per_host.into_iter().flatten().map(Some).collect();
    let order = round_robin(
        rows.iter()
            .enumerate()
            .map(|(i, r)| (i, r.as_ref().map_or("", |(_, j)| j.host.as_str()))),
        req.limit,
        usize::MAX,
        &HashMap::new(),
    );
    let mut chosen: Vec<(i64, Job)> = order.into_iter().filter_map(|i| rows[i].take()).collect();
    let mut update = tx.prepare_cached(CLAIM_UPDATE)?;
    for (id, job) in &mut chosen {
        update.execute(params![*id, req.lease_until, req.owner, req.now])?;
        job.priority += unsaved_credit(seen, &job.url, &job.operation);
    }
    Ok(chosen.into_iter().map(|(_, job)| job).collect())
}

/// One host's claim candidates: its best pending rows so far, and how many
/// it has room for.
struct HostCandidates {
    host: String,
    room: usize,
    jobs: Vec<(i64, Job)>,
}

/// Extend a host's candidates to its best `want`.
fn read_candidates(
    stmt: &mut rusqlite::CachedStatement<'_>,
    h: &mut HostCandidates,
    now: Millis,
    want: usize,
) -> Result<(), Fail> {
    let have = h.jobs.len();
    if want <= have {
        return Ok(());
    }
    let mut rows = stmt.query(params![h.host, now])?;
    let mut skipped = 0;
    while h.jobs.len() < want
        && let Some(row) = rows.next()?
    {
        // The rows it already has come first (same snapshot, same order).
        if skipped < have {
            skipped += 1;
            continue;
        }
        h.jobs.push((
            row.get::<_, i64>(0)?,
            Job {
                url: row.get(1)?,
                operation: operation_col(row, 2, "pending_urls")?,
                host: text_col(row, 3)?,
                depth: int_col(row, 4, "depth")?,
                priority: row.get::<_, Option<f64>>(5)?.unwrap_or(0.0),
                attempts: int_col(row, 6, "attempts")?,
                redirect_hops: int_col(row, 7, "redirect_hops")?,
            },
        ));
    }
    Ok(())
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
        self.write(move |tx, _| {
            let mut stmt = tx.prepare_cached(EXTEND_LEASE)?;
            for key in &keys {
                stmt.execute(params![key.url, key.operation.key(), until, owner])?;
            }
            Ok(())
        })
        .await
    }

    async fn release(&self, owner: &str, keep: &[UrlKey]) -> Result<u64, StoreError> {
        let owner = owner.to_string();
        let keep: HashSet<(String, String)> = keep
            .iter()
            .map(|k| (k.url.clone(), k.operation.key()))
            .collect();
        self.write(move |tx, _| {
            // Filtered in Rust: `keep` is small and exact-match on the stored
            // key text, which is what the unique index holds.
            let ids: Vec<i64> = {
                let mut stmt = tx.prepare_cached(LEASED_BY)?;
                let mut rows = stmt.query([&owner])?;
                let mut ids = Vec::new();
                while let Some(row) = rows.next()? {
                    let key: (String, String) = (row.get(1)?, row.get(2)?);
                    if !keep.contains(&key) {
                        ids.push(row.get(0)?);
                    }
                }
                ids
            };
            let now = now_ms();
            let mut stmt = tx.prepare_cached(RELEASE_ID)?;
            for id in &ids {
                stmt.execute(params![id, now])?;
            }
            Ok(ids.len() as u64)
        })
        .await
    }

    async fn release_keys(&self, keys: &[UrlKey]) -> Result<u64, StoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        let keys = keys.to_vec();
        self.write(move |tx, _| {
            let now = now_ms();
            let mut stmt = tx.prepare_cached(RELEASE_KEY)?;
            let mut released = 0u64;
            for key in &keys {
                released += stmt.execute(params![key.url, key.operation.key(), now])? as u64;
            }
            Ok(released)
        })
        .await
    }

    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        self.read(|tx, _| {
            let counts = tx
                .prepare_cached(COUNTS)?
                .query_row([ROBOTS_BLOCKED, SEARCH_RESULTS], |row| {
                    Ok([
                        row.get::<_, i64>(0)?,
                        row.get(1)?,
                        row.get(2)?,
                        row.get(3)?,
                        row.get(4)?,
                        row.get(5)?,
                        row.get(6)?,
                    ])
                })?
                .map(i64::cast_unsigned);
            Ok(StoreCounts {
                pending: counts[0],
                processing: counts[1],
                processed: counts[2],
                failed: counts[3],
                robots_blocked: counts[4],
                duplicates: counts[5],
                search_results: counts[6],
            })
        })
        .await
    }
}

#[async_trait]
impl Queries for SqliteStore {
    async fn processed(&self, query: PageQuery) -> Result<Vec<ProcessedUrl>, StoreError> {
        self.read(move |tx, _| {
            let mut pages = Vec::new();
            {
                let mut stmt = tx.prepare_cached(PROCESSED_PAGE)?;
                let mut rows = stmt.query(named_params! {
                    ":only_failed": query.only_failed,
                    ":limit": limit_param(query.limit),
                    ":offset": i64::try_from(query.offset).unwrap_or(i64::MAX),
                })?;
                while let Some(row) = rows.next()? {
                    pages.push(read_processed(row)?);
                }
            }
            let mut referrals = referrals_of(tx, pages.iter().map(|p| p.record.url.as_str()))?;
            for page in &mut pages {
                page.referral_list = referrals.remove(&page.record.url).unwrap_or_default();
                page.referral_count = page.referral_list.len() as u64;
            }
            Ok(pages)
        })
        .await
    }

    async fn processed_url(&self, url: &str) -> Result<Option<ProcessedUrl>, StoreError> {
        let url = url.to_string();
        self.read(move |tx, _| {
            let page = {
                let mut stmt = tx.prepare_cached(PROCESSED_ONE)?;
                let mut rows = stmt.query([&url])?;
                match rows.next()? {
                    None => return Ok(None),
                    Some(row) => read_processed(row)?,
                }
            };
            let mut page = page;
            page.referral_list = referrals_of(tx, [url.as_str()])?
                .remove(&url)
                .unwrap_or_default();
            page.referral_count = page.referral_list.len() as u64;
            Ok(Some(page))
        })
        .await
    }

    async fn pending(&self, limit: usize) -> Result<Vec<PendingUrl>, StoreError> {
        self.read(move |tx, seen| {
            let mut list = Vec::new();
            {
                let mut stmt = tx.prepare_cached(PENDING_LIST)?;
                let mut rows = stmt.query([limit_param(Some(limit))])?;
                while let Some(row) = rows.next()? {
                    list.push(PendingUrl {
                        url: row.get(0)?,
                        operation: operation_col(row, 1, "pending_urls")?,
                        host: text_col(row, 2)?,
                        status: text_col(row, 3)?,
                        depth: int_col(row, 4, "depth")?,
                        priority: row.get::<_, Option<f64>>(5)?.unwrap_or(0.0),
                        attempts: int_col(row, 6, "attempts")?,
                        referral_list: Vec::new(),
                        d_change: int_col(row, 7, "d_change")?,
                        not_before: int_col(row, 8, "not_before")?,
                        lease_until: row.get(9)?,
                        last_error: row.get(10)?,
                    });
                }
            }
            // One URL may be pending under several operations.
            let referrals = referrals_of(tx, list.iter().map(|p| p.url.as_str()))?;
            for pending in &mut list {
                pending.referral_list = referrals.get(&pending.url).cloned().unwrap_or_default();
                pending.priority += unsaved_credit(seen, &pending.url, &pending.operation);
            }
            Ok(list)
        })
        .await
    }

    async fn records(
        &self,
        collection: &str,
        filter: &Document,
    ) -> Result<Vec<Document>, StoreError> {
        let collection = collection.to_string();
        let filter = filter.clone();
        self.read(move |tx, _| {
            let mut stmt = tx.prepare_cached(RECORD_LIST)?;
            let mut rows = stmt.query([&collection])?;
            let mut list = Vec::new();
            while let Some(row) = rows.next()? {
                let text: String = row.get(0)?;
                let doc: Document = serde_json::from_str(&text).map_err(|e| {
                    Fail::Corrupt(format!("records.document is not a JSON object: {e}"))
                })?;
                if filter.iter().all(|(k, v)| doc.get(k) == Some(v)) {
                    list.push(doc);
                }
            }
            Ok(list)
        })
        .await
    }

    async fn broken_links(&self) -> Result<Vec<BrokenLink>, StoreError> {
        self.read(|tx, _| {
            let mut list = Vec::new();
            {
                let mut stmt = tx.prepare_cached(BROKEN)?;
                let mut rows = stmt.query([ROBOTS_BLOCKED])?;
                while let Some(row) = rows.next()? {
                    list.push(BrokenLink {
                        url: row.get(0)?,
                        http_returncode: opt_int_col(row, 1, "http_returncode")?,
                        error: row.get(2)?,
                        referral_list: Vec::new(),
                    });
                }
            }
            let mut referrals = referrals_of(tx, list.iter().map(|l| l.url.as_str()))?;
            for link in &mut list {
                link.referral_list = referrals.remove(&link.url).unwrap_or_default();
            }
            Ok(list)
        })
        .await
    }

    async fn hosts(&self) -> Result<Vec<HostRecord>, StoreError> {
        self.read(|tx, _| {
            let mut stmt = tx.prepare_cached(HOST_LIST)?;
            let mut rows = stmt.query([])?;
            let mut list = Vec::new();
            while let Some(row) = rows.next()? {
                list.push(HostRecord {
                    host: row.get(0)?,
                    robots_status: text_col(row, 1)?,
                    robots_http_code: opt_int_col(row, 2, "robots_http_code")?,
                    robots_error: row.get(3)?,
                    robots_txt: row.get(4)?,
                    robots_fetched_at: int_col(row, 5, "robots_fetched_at")?,
                    crawl_delay_ms: opt_int_col(row, 6, "crawl_delay_ms")?,
                    sitemaps: json_col(row, 7, "sitemaps", |s| serde_json::from_str(s))?,
                });
            }
            Ok(list)
        })
        .await
    }

    async fn status_histogram(&self) -> Result<Vec<(Option<u16>, u64)>, StoreError> {
        self.read(|tx, _| {
            let mut stmt = tx.prepare_cached(HISTOGRAM)?;
            let mut rows = stmt.query([])?;
            let mut list = Vec::new();
            while let Some(row) = rows.next()? {
                list.push((
                    opt_int_col(row, 0, "http_returncode")?,
                    int_col(row, 1, "count")?,
                ));
            }
            Ok(list)
        })
        .await
    }
}

// What both backends must do is tested once, in tests/store_conformance.rs;
// these tests cover what is particular to the SQLite file.
#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use web_crawler_actors::{ProcessedPage, Retry};

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
