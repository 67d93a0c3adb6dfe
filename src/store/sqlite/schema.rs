//! The table layout: what `open` creates or migrates, and every statement the
//! store runs, compiled against the file when it is opened.

use super::errors::{Fail, ffi_error};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use std::time::Duration;

/// Version of the table layout below; a file with another version is refused
/// rather than misread.
const SCHEMA_VERSION: i64 = 6;

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
    check_every_ms INTEGER,
    trap_rule     TEXT,
    trap_family   TEXT,
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
    node             TEXT    NOT NULL DEFAULT '',
    etag             TEXT,
    last_modified    TEXT,
    d_next_check     INTEGER,
    check_interval_ms INTEGER,
    check_every_ms   INTEGER
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
CREATE TABLE IF NOT EXISTS fetch_history (
    id               INTEGER PRIMARY KEY,
    url              TEXT    NOT NULL,
    host             TEXT    NOT NULL,
    d_fetch          INTEGER NOT NULL,
    http_returncode  INTEGER,
    fetch_ms         INTEGER NOT NULL DEFAULT 0,
    "content-length" INTEGER,
    content_hash     INTEGER,
    changed          INTEGER NOT NULL DEFAULT 0,
    error            TEXT
);
CREATE INDEX IF NOT EXISTS fetch_history_url ON fetch_history (url, id);
CREATE TABLE IF NOT EXISTS trap_closures (
    family      TEXT PRIMARY KEY,
    host        TEXT    NOT NULL,
    rule        TEXT    NOT NULL,
    scope       TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    detail      TEXT    NOT NULL,
    closed_at   INTEGER NOT NULL,
    pages       INTEGER NOT NULL DEFAULT 0,
    reopened_at INTEGER,
    allowed     INTEGER NOT NULL DEFAULT 0
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

pub(super) fn init(conn: &mut Connection) -> Result<(), Fail> {
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
    // A WAL grown under a long reader is cut back to this once a checkpoint
    // empties it (see `wal`).
    conn.pragma_update(None, "journal_size_limit", super::wal::JOURNAL_SIZE_LIMIT)?;
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
    if matches!(version, Some(2 | 3)) {
        migrate_3_to_4(&tx)?;
    }
    if matches!(version, Some(2..=4)) {
        migrate_4_to_5(&tx)?;
    }
    if matches!(version, Some(2..=5)) {
        migrate_5_to_6(&tx)?;
    }
    // After the migrations: the column is new in version 4.
    tx.execute_batch(
        "CREATE INDEX IF NOT EXISTS processed_urls_next_check
             ON processed_urls (d_next_check) WHERE d_next_check IS NOT NULL;
         CREATE INDEX IF NOT EXISTS processed_urls_node ON processed_urls (node, url);
         CREATE INDEX IF NOT EXISTS pending_urls_trapped
             ON pending_urls (trap_family, trap_rule) WHERE status = 'trapped';",
    )?;
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

/// Version 2 kept `search_results` in a table of their own; version 3 keeps
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

/// Version 4 adds availability watching: the last response's validators
/// and the next check on processed pages (`fetch_history` is created by
/// [`SCHEMA`]). Columns already there are left as they are.
fn migrate_3_to_4(tx: &rusqlite::Transaction<'_>) -> Result<(), Fail> {
    add_columns(
        tx,
        "processed_urls",
        &[
            ("etag", "TEXT"),
            ("last_modified", "TEXT"),
            ("d_next_check", "INTEGER"),
            ("check_interval_ms", "INTEGER"),
        ],
    )?;
    tx.execute("UPDATE meta SET value = 4 WHERE key = 'schema_version'", [])?;
    Ok(())
}

/// Version 5 adds a URL's own watch interval (`add_url … every`): on its
/// pending row, for its first fetch, and on its processed row, for every
/// check after.
fn migrate_4_to_5(tx: &rusqlite::Transaction<'_>) -> Result<(), Fail> {
    for table in ["pending_urls", "processed_urls"] {
        add_columns(tx, table, &[("check_every_ms", "INTEGER")])?;
    }
    tx.execute("UPDATE meta SET value = 5 WHERE key = 'schema_version'", [])?;
    Ok(())
}

/// Version 6 keeps what the trap defence refuses: a `pending_urls` row
/// with status `trapped` says which rule and family refused it, and
/// `trap_closures` (created by [`SCHEMA`]) the families it closed.
fn migrate_5_to_6(tx: &rusqlite::Transaction<'_>) -> Result<(), Fail> {
    add_columns(
        tx,
        "pending_urls",
        &[("trap_rule", "TEXT"), ("trap_family", "TEXT")],
    )?;
    tx.execute("UPDATE meta SET value = 6 WHERE key = 'schema_version'", [])?;
    Ok(())
}

/// Add those of `columns` (name, type) that `table` does not have yet.
fn add_columns(
    tx: &rusqlite::Transaction<'_>,
    table: &str,
    columns: &[(&str, &str)],
) -> Result<(), Fail> {
    let present: Vec<String> = tx
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for (column, kind) in columns {
        if !present.iter().any(|p| p == column) {
            tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind}"))?;
        }
    }
    Ok(())
}

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
            Some(v @ (2..=5 | SCHEMA_VERSION)) => Ok(Some(v)),
            _ => Err(Fail::Corrupt(format!(
                "schema_version is {version:?}, this build reads versions 2 to {SCHEMA_VERSION}"
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

// --- statements -------------------------------------------------------------
// Constants so `open` can compile each one against the file's schema (a clear
// error up front instead of a failing crawl later) and so `prepare_cached`
// finds them again by text.

pub(super) const EXPIRE_LEASES: &str = "UPDATE pending_urls
    SET status = 'pending', lease_until = NULL, lease_owner = NULL, d_change = ?1
    WHERE status = 'processing' AND lease_until < ?1";

/// Hosts with pending work, by a loose index scan of the claim index: one
/// probe per host, never a pass over every pending row (the frontier may
/// hold hundreds of thousands).
pub(super) const PENDING_HOSTS: &str = "WITH RECURSIVE hosts(h) AS (
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
pub(super) const HOST_CANDIDATES: &str =
    "SELECT id, url, operation, host, depth, priority, attempts,
        redirect_hops, check_every_ms
    FROM pending_urls
    WHERE status = 'pending' AND host = ?1 AND not_before <= ?2
    ORDER BY priority DESC, id";

pub(super) const CLAIM_UPDATE: &str = "UPDATE pending_urls
    SET status = 'processing', lease_until = ?2, lease_owner = ?3, d_change = ?4
    WHERE id = ?1";

pub(super) const PROCESSED_AT: &str =
    "SELECT d_processed FROM processed_urls WHERE url = ?1 AND operation = ?2";

pub(super) const PENDING_AT: &str = "SELECT id, priority, depth, redirect_hops,
        status = 'trapped'
    FROM pending_urls WHERE url = ?1 AND operation = ?2";

/// A referrer's link list: the sorted, distinct `referrals::url_hash`es of the
/// URLs it links to, 8 bytes each (little-endian). One row per referring page
/// makes recording a page's 10–60 links one append instead of as many
/// scattered index inserts; finding who links to a URL reads every list.
pub(super) const REFERRER_LINKS: &str = "SELECT id, links FROM referrers WHERE url = ?1";

pub(super) const INSERT_REFERRER: &str = "INSERT INTO referrers (url, links) VALUES (?1, ?2)";

pub(super) const UPDATE_REFERRER: &str = "UPDATE referrers SET links = ?2 WHERE id = ?1";

pub(super) const ALL_REFERRERS: &str = "SELECT url, links FROM referrers";

/// `ON CONFLICT ... DO NOTHING` then [`MERGE_PENDING`] is the upsert the
/// frontier rules describe, split in two so the caller can tell an insert
/// (`queued`) from a merge (`merged`).
pub(super) const INSERT_PENDING: &str = "INSERT INTO pending_urls
        (url, operation, host, status, d_change, depth, priority, attempts, not_before,
         redirect_hops, check_every_ms)
    VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, 0, 0, ?7, ?8)
    ON CONFLICT (url, operation) DO NOTHING";

/// A link the trap defence refused, kept if the file holds nothing of its
/// URL: never fetched while `trapped`.
pub(super) const INSERT_TRAPPED: &str = "INSERT INTO pending_urls
        (url, operation, host, status, d_change, depth, priority, attempts, not_before,
         redirect_hops, check_every_ms, trap_rule, trap_family)
    VALUES (?1, ?2, ?3, 'trapped', ?4, ?5, ?6, 0, 0, ?7, ?8, ?9, ?10)
    ON CONFLICT (url, operation) DO NOTHING";

/// A claimed URL the trap defence refused: not fetched, kept `trapped`.
pub(super) const TRAP_CLAIMED: &str = "UPDATE pending_urls
    SET status = 'trapped', trap_rule = ?3, trap_family = ?4, lease_until = NULL,
        lease_owner = NULL, d_change = ?5
    WHERE url = ?1 AND operation = ?2 AND status = 'processing'";

/// A trapped URL a link the trap defence admitted leads to (its family
/// lifted, or the refusal was its referrer's, a soft 404): pending again.
pub(super) const UNTRAP: &str = "UPDATE pending_urls
    SET status = 'pending', trap_rule = NULL, trap_family = NULL, d_change = ?2
    WHERE id = ?1 AND status = 'trapped'";

/// The first closure of a family is kept.
pub(super) const WRITE_CLOSURE: &str = "INSERT INTO trap_closures
        (family, host, rule, scope, reason, detail, closed_at, pages)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
    ON CONFLICT (family) DO NOTHING";

pub(super) const CLOSURE_LIST: &str = "SELECT family, host, rule, scope, reason, detail,
        closed_at, pages, reopened_at, allowed
    FROM trap_closures ORDER BY host, family";

pub(super) const REOPEN_CLOSURE: &str =
    "UPDATE trap_closures SET reopened_at = ?2, allowed = 1 WHERE family = ?1";

/// A reopened family's URLs, through the partial index on trapped rows.
pub(super) const REOPEN_TRAPPED: &str = "UPDATE pending_urls
    SET status = 'pending', trap_rule = NULL, trap_family = NULL, not_before = 0, d_change = ?2
    WHERE status = 'trapped' AND trap_family = ?1";

pub(super) const TRAPPED_BY_FAMILY: &str = "SELECT trap_family, COUNT(*) FROM pending_urls
    WHERE status = 'trapped' GROUP BY trap_family";

/// A family's trapped URLs, oldest first (read as far as wanted).
pub(super) const TRAPPED_OF_FAMILY: &str = "SELECT url FROM pending_urls
    WHERE status = 'trapped' AND trap_family = ?1 ORDER BY id";

pub(super) const TRAPPED_BY_RULE: &str = "SELECT trap_rule, COUNT(*) FROM pending_urls
    WHERE status = 'trapped' GROUP BY trap_rule";

/// A URL added with an interval of its own while it waits: it takes it.
pub(super) const SET_CHECK_EVERY: &str =
    "UPDATE pending_urls SET check_every_ms = ?2 WHERE id = ?1";

/// Status and attempts stay: merging a referral must not resurrect or reset a
/// URL that is being fetched or waiting for a retry.
pub(super) const MERGE_PENDING: &str = "UPDATE pending_urls
    SET priority = priority + ?2, depth = MIN(depth, ?3), redirect_hops = MIN(redirect_hops, ?4)
    WHERE id = ?1";

/// The original a body duplicates: the oldest successful page with the same
/// hash that is not itself a duplicate (so `duplicate_of` always names an
/// original, and re-processing an original never makes it a copy of its copy).
pub(super) const SAME_CONTENT: &str = "SELECT url, http_returncode FROM processed_urls
    WHERE content_hash = ?1 AND url != ?2 AND duplicate_of IS NULL
      AND http_returncode BETWEEN 200 AND 299
    ORDER BY d_processed, url";

/// REPLACE: one document per URL, the last operation wins (the paper's `_id`).
/// referral_count and referral_list are read from `referrers`.
pub(super) const WRITE_PROCESSED: &str = r#"INSERT OR REPLACE INTO processed_urls
        (url, operation, host, depth, "content-length", "content-type", server,
         http_returncode, links_count, d_processed, title, content_hash,
         duplicate_of, redirect_to, error, fetch_ms, out_links, truncated, node, etag,
         last_modified, d_next_check, check_interval_ms, check_every_ms)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
            ?19, ?20, ?21, ?22, ?23, ?24)"#;

/// A 304: the stored page stands; the check moves its time and next check.
pub(super) const TOUCH_PROCESSED: &str = "UPDATE processed_urls
    SET d_processed = ?2, fetch_ms = ?3, node = ?4, etag = COALESCE(?5, etag),
        last_modified = COALESCE(?6, last_modified), d_next_check = ?7,
        check_interval_ms = ?8, check_every_ms = ?9
    WHERE url = ?1";

pub(super) const WRITE_HISTORY: &str = r#"INSERT INTO fetch_history
        (url, host, d_fetch, http_returncode, fetch_ms, "content-length", content_hash,
         changed, error)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"#;

/// The retention bound: a URL's entries but its newest ?2.
pub(super) const TRIM_HISTORY: &str = "DELETE FROM fetch_history
    WHERE url = ?1 AND id <= (SELECT id FROM fetch_history WHERE url = ?1
                              ORDER BY id DESC LIMIT 1 OFFSET ?2)";

/// Watched URLs due, soonest first, from the partial index on the due time.
pub(super) const DUE_CHECKS: &str = "SELECT url, operation, host, depth FROM processed_urls
    WHERE d_next_check <= ?1 ORDER BY d_next_check LIMIT ?2";

pub(super) const CLEAR_CHECK: &str = "UPDATE processed_urls SET d_next_check = NULL WHERE url = ?1";

/// A departed node's pages after a URL, for its hand-over.
pub(super) const NODE_PAGES_AFTER: &str = "SELECT url, operation, host, depth FROM processed_urls
    WHERE node = ?1 AND url > ?2 ORDER BY url LIMIT ?3";

/// A page's validators go: its next fetch is whole, not a 304.
pub(super) const CLEAR_VALIDATORS: &str =
    "UPDATE processed_urls SET etag = NULL, last_modified = NULL WHERE url = ?1";

pub(super) const NODE_PAGE_COUNT: &str = "SELECT COUNT(*) FROM processed_urls WHERE node = ?1";

/// The first node after `?1` that fetched a page: one seek down the index
/// on (node, url).
pub(super) const NODE_AFTER: &str =
    "SELECT node FROM processed_urls WHERE node > ?1 ORDER BY node LIMIT 1";

/// What a claimed URL's last fetch left (`LastFetch`).
pub(super) const LAST_FETCH: &str = "SELECT http_returncode, content_hash, etag, last_modified,
        check_interval_ms, check_every_ms
    FROM processed_urls WHERE url = ?1";

pub(super) const HISTORY_LIST: &str = r#"SELECT url, host, d_fetch, http_returncode, fetch_ms,
        "content-length", content_hash, changed, error
    FROM fetch_history WHERE (?1 IS NULL OR host = ?1) AND d_fetch >= ?2
    ORDER BY url, id"#;

pub(super) const DELETE_PENDING: &str =
    "DELETE FROM pending_urls WHERE url = ?1 AND operation = ?2";

pub(super) const WRITE_RECORD: &str = "INSERT INTO records (collection, key, document, d_record)
    VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (collection, key) DO UPDATE SET document = excluded.document,
                                                d_record = excluded.d_record";

pub(super) const RETRY: &str = "UPDATE pending_urls
    SET status = 'pending', attempts = attempts + 1, not_before = ?3, last_error = ?4,
        lease_until = NULL, lease_owner = NULL, d_change = ?5
    WHERE url = ?1 AND operation = ?2";

pub(super) const WRITE_HOST: &str = "INSERT INTO hosts
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

pub(super) const EXTEND_LEASE: &str = "UPDATE pending_urls SET lease_until = ?3
    WHERE url = ?1 AND operation = ?2 AND status = 'processing' AND lease_owner = ?4";

pub(super) const LEASED_BY: &str = "SELECT id, url, operation FROM pending_urls
    WHERE status = 'processing' AND lease_owner = ?1";

pub(super) const RELEASE_ID: &str = "UPDATE pending_urls
    SET status = 'pending', lease_until = NULL, lease_owner = NULL, d_change = ?2
    WHERE id = ?1";

pub(super) const RELEASE_KEY: &str = "UPDATE pending_urls
    SET status = 'pending', lease_until = NULL, lease_owner = NULL, d_change = ?3
    WHERE url = ?1 AND operation = ?2 AND status = 'processing'";

/// The idle check: an index probe on `pending_urls_claim`, however large
/// the frontier or the processed table (COUNTS scans both).
pub(super) const FRONTIER_EMPTY: &str =
    "SELECT NOT EXISTS (SELECT 1 FROM pending_urls WHERE status IN ('pending', 'processing'))";

/// The processed pages' counts are taken in one pass over the table: one
/// scan a count was most of the second a large crawl took to end.
pub(super) const COUNTS: &str = "SELECT
    (SELECT COUNT(*) FROM pending_urls WHERE status = 'pending'),
    (SELECT COUNT(*) FROM pending_urls WHERE status = 'processing'),
    processed.pages, processed.failed, processed.robots_blocked, processed.duplicates,
    (SELECT COUNT(*) FROM records WHERE collection = ?2)
    FROM (SELECT COUNT(*) AS pages, COUNT(error) AS failed,
                 COUNT(CASE WHEN error = ?1 THEN 1 END) AS robots_blocked,
                 COUNT(duplicate_of) AS duplicates
          FROM processed_urls) AS processed";

/// Column list shared by every processed_urls read, in `rows::read_processed`
/// order.
macro_rules! processed_cols {
    () => {
        r#"url, operation, host, depth, "content-length", "content-type", server,
           http_returncode, links_count, d_processed, title, content_hash,
           duplicate_of, redirect_to, error, fetch_ms, out_links, truncated, node, etag,
           last_modified, d_next_check, check_interval_ms, check_every_ms"#
    };
}

pub(super) const PROCESSED_PAGE: &str = concat!(
    "SELECT ",
    processed_cols!(),
    " FROM processed_urls
    WHERE (:only_failed = 0 OR http_returncode >= 400 OR error IS NOT NULL)
      AND (:only_duplicates = 0 OR duplicate_of IS NOT NULL)
    ORDER BY CASE WHEN :newest_first THEN d_processed END DESC, url
    LIMIT :limit OFFSET :offset"
);

pub(super) const PROCESSED_AFTER: &str = concat!(
    "SELECT ",
    processed_cols!(),
    " FROM processed_urls WHERE ?1 IS NULL OR url > ?1 ORDER BY url LIMIT ?2"
);

pub(super) const PROCESSED_ONE: &str = concat!(
    "SELECT ",
    processed_cols!(),
    " FROM processed_urls WHERE url = ?1"
);

pub(super) const PENDING_LIST: &str =
    "SELECT url, operation, host, status, depth, priority, attempts,
        d_change, not_before, lease_until, last_error, check_every_ms, trap_rule, trap_family
    FROM pending_urls ORDER BY id LIMIT ?1";

pub(super) const RECORD_LIST: &str =
    "SELECT document FROM records WHERE collection = ?1 ORDER BY key";

pub(super) const RECORD_HEAD: &str =
    "SELECT document FROM records WHERE collection = ?1 AND key > ?2 ORDER BY key LIMIT ?3";

pub(super) const RECORD_DELETE: &str = "DELETE FROM records WHERE collection = ?1 AND key = ?2";

pub(super) const BROKEN: &str = "SELECT url, http_returncode, error FROM processed_urls
    WHERE http_returncode >= 400 OR (error IS NOT NULL AND error != ?1)
    ORDER BY url";

pub(super) const HOST_LIST: &str =
    "SELECT host, robots_status, robots_http_code, robots_error, robots_txt,
        robots_fetched_at, crawl_delay_ms, sitemaps
    FROM hosts ORDER BY host";

/// SQLite sorts NULL first in ascending order: "no response" leads.
pub(super) const HISTOGRAM: &str = "SELECT http_returncode, COUNT(*) FROM processed_urls
    GROUP BY http_returncode ORDER BY http_returncode";

pub(super) const HOST_PAGES: &str =
    "SELECT host, COUNT(*) FROM processed_urls GROUP BY host ORDER BY host";
pub(super) const NODE_PAGES: &str =
    "SELECT node, COUNT(*) FROM processed_urls GROUP BY node ORDER BY node";

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
    SET_CHECK_EVERY,
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
    FRONTIER_EMPTY,
    PROCESSED_PAGE,
    PROCESSED_AFTER,
    PROCESSED_ONE,
    PENDING_LIST,
    RECORD_LIST,
    BROKEN,
    HOST_LIST,
    HISTOGRAM,
    HOST_PAGES,
    NODE_PAGES,
    TOUCH_PROCESSED,
    WRITE_HISTORY,
    TRIM_HISTORY,
    DUE_CHECKS,
    NODE_PAGES_AFTER,
    CLEAR_VALIDATORS,
    NODE_PAGE_COUNT,
    NODE_AFTER,
    CLEAR_CHECK,
    LAST_FETCH,
    HISTORY_LIST,
    INSERT_TRAPPED,
    TRAP_CLAIMED,
    UNTRAP,
    WRITE_CLOSURE,
    CLOSURE_LIST,
    REOPEN_CLOSURE,
    REOPEN_TRAPPED,
    TRAPPED_BY_FAMILY,
    TRAPPED_OF_FAMILY,
    TRAPPED_BY_RULE,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::{SqliteStore, test_support::*};
    use web_crawler_actors::{
        CommitBatch, Document, Frontier, NewLink, Queries, Record, SEARCH_RESULTS, StoreError,
    };

    /// A statement SQLite re-prepares on every call (a bound `LIMIT ?`, for
    /// one) costs a parse and a plan each time: none of the crawl's do.
    #[tokio::test]
    async fn crawl_statements_are_prepared_once() {
        let (_dir, _path, store) = open_temp();
        let home: Vec<NewLink> = (0..4)
            .map(|h| link(&format!("http://h{h}/"), 0, 1.0))
            .collect();
        store.commit((seeds(0, home)).into()).await.unwrap();
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
                    std::sync::Arc::new(CommitBatch {
                        now: round.into(),
                        pages,
                        ..CommitBatch::default()
                    }),
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
            .execute("UPDATE meta SET value = 7 WHERE key = 'schema_version'", [])
            .unwrap();
        let msg = SqliteStore::open(&newer).unwrap_err().to_string();
        assert!(msg.contains("schema_version"), "{msg}");
    }

    /// A version 4 file gains the columns of a URL's own watch interval;
    /// what it held stays.
    #[tokio::test]
    async fn a_version_4_file_is_migrated() {
        let (_dir, path, store) = open_temp();
        store
            .commit((seeds(0, vec![link("http://a/old", 0, 1.0)])).into())
            .await
            .unwrap();
        drop(store);
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "ALTER TABLE pending_urls DROP COLUMN check_every_ms;
                 ALTER TABLE processed_urls DROP COLUMN check_every_ms;
                 UPDATE meta SET value = 4 WHERE key = 'schema_version';",
            )
            .unwrap();
        let store = SqliteStore::open(&path).unwrap();
        let mut watched = link("http://a/watched", 0, 1.0);
        watched.check_every_ms = Some(2_000);
        store
            .commit((seeds(1, vec![watched])).into())
            .await
            .unwrap();
        let jobs = store.claim(claim_req(1, 10, 10)).await.unwrap();
        let every: Vec<(&str, Option<i64>)> = jobs
            .iter()
            .map(|j| (j.url.as_str(), j.check_every_ms))
            .collect();
        assert_eq!(
            every,
            vec![("http://a/old", None), ("http://a/watched", Some(2_000))]
        );
        drop(store);
        let version: i64 = Connection::open(&path)
            .unwrap()
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    /// A version 5 file gains what keeps the trap defence's refusals: the
    /// pending rows' rule and family, and the closures' table.
    #[tokio::test]
    async fn a_version_5_file_is_migrated() {
        let (_dir, path, store) = open_temp();
        store
            .commit((seeds(0, vec![link("http://a/old", 0, 1.0)])).into())
            .await
            .unwrap();
        drop(store);
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "DROP INDEX pending_urls_trapped;
                 ALTER TABLE pending_urls DROP COLUMN trap_rule;
                 ALTER TABLE pending_urls DROP COLUMN trap_family;
                 DROP TABLE trap_closures;
                 UPDATE meta SET value = 5 WHERE key = 'schema_version';",
            )
            .unwrap();
        let store = SqliteStore::open(&path).unwrap();
        let batch = CommitBatch {
            now: 1,
            trapped: vec![web_crawler_actors::TrappedLink {
                link: link("http://a/cal/1999/01/", 1, 0.5),
                trap: web_crawler_actors::TrapMark {
                    rule: web_crawler_actors::traps::TrapRule::Barren,
                    family: "a/cal/{n}/{n}/".into(),
                },
            }],
            ..CommitBatch::default()
        };
        store.commit(batch.into()).await.unwrap();
        let counts = store.counts().await.unwrap();
        assert_eq!((counts.pending, counts.trapped), (1, 1));
        assert_eq!(
            store.reopen_trap_family("a/cal/{n}/{n}/", 2).await.unwrap(),
            Some(1)
        );
        drop(store);
        let version: i64 = Connection::open(&path)
            .unwrap()
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    /// A version 2 file's `search_results` become records, keyed as a record
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
        store
            .commit((pages(5_000, None, vec![again])).into())
            .await
            .unwrap();
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
