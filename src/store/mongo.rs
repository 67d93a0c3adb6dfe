//! The MongoDB store: the paper's `crawler` database with its collections
//! `pending_urls`, `processed_urls` and `search_results` (listings 1–3), plus
//! `hosts` and `fetch_history`, through the official `mongodb` driver.
//!
//! Every write is a single-document atomic operation made idempotent; there
//! are no multi-document transactions, so it runs on a standalone server as
//! on a replica set or a sharded cluster. Timestamps that change after insert
//! are Int64 epoch milliseconds; `d_processed` and `d_search` are BSON dates,
//! written only by whole-document replaces. Absent values are left out of a
//! document (never stored as null), and queries test them with `$exists`.

use super::mongo_owner::OwnerLease;
use async_trait::async_trait;
use futures_util::TryStreamExt;
use mongodb::bson::{Bson, DateTime, Document, doc, oid::ObjectId};
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::options::{ClientOptions, IndexOptions, ReturnDocument};
use mongodb::{Client, Collection, Database, IndexModel};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use web_crawler_actors::LastFetch;
use web_crawler_actors::frontier::{LinkDecision, decide_link, dedupe_by_content};
use web_crawler_actors::monitor::{FetchHistory, HistoryQuery};
use web_crawler_actors::{
    BrokenLink, ClaimRequest, CommitBatch, CommitSummary, Document as JsonDoc, Frontier,
    HostRecord, INDEX_QUEUE, Job, Millis, NewLink, OperationSpec, PageQuery, PageRecord,
    PendingUrl, ProcessedPage, ProcessedUrl, Queries, ROBOTS_BLOCKED, Record, SEARCH_RESULTS,
    StoreCounts, StoreError, UrlKey,
};

/// The paper's database name.
pub const DEFAULT_DATABASE: &str = "crawler";

const PENDING: &str = "pending";
const PROCESSING: &str = "processing";

/// MongoDB duplicate-key error code: the only way a duplicate is recognised.
const DUPLICATE_KEY: i32 = 11000;

/// The store behaviours over a MongoDB deployment.
#[derive(Clone, Debug)]
pub struct MongoStore {
    db: Database,
    pending: Collection<Document>,
    processed: Collection<Document>,
    hosts: Collection<Document>,
    history: Collection<Document>,
    /// Collections of operation records whose key index exists.
    record_indexes: Arc<Mutex<HashSet<String>>>,
    /// Held by a store opened to crawl ([`MongoStore::connect_for_crawl`]).
    owner: Option<Arc<OwnerLease>>,
}

/// A driver error as the crawler reports it: classified by what the master
/// does with it ([`class_of`]), with its cause in words.
fn backend(e: mongodb::error::Error) -> StoreError {
    let class = class_of(&e);
    let cause = DriverError::from(e);
    match class {
        Class::Transient => StoreError::unavailable("MongoDB is unavailable", cause),
        Class::Permanent => StoreError::refused("MongoDB refuses the crawl's writes", cause),
        Class::Other => StoreError::backend("MongoDB", cause),
    }
}

/// A driver error in words. The driver's own text is a debug dump (the
/// whole topology, `labels: {}`, write failures with `{:?}`); this says what
/// happened in one line, and keeps the error for the debug log (its
/// `Debug` form).
struct DriverError {
    words: String,
    error: mongodb::error::Error,
}

impl From<mongodb::error::Error> for DriverError {
    fn from(error: mongodb::error::Error) -> Self {
        Self {
            words: describe(&error),
            error,
        }
    }
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.words)
    }
}

impl std::fmt::Debug for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverError")
            .field("words", &self.words)
            .field("error", &self.error)
            .finish()
    }
}

impl std::error::Error for DriverError {}

/// What the master does with a driver error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Wait and ask again: no server answers, the connection broke, a
    /// replica set has no primary for the moment, a timeout.
    Transient,
    /// Stop: no wait mends it (refused credentials, a full disk).
    Permanent,
    /// Anything else: the master fails and is restarted.
    Other,
}

/// Labels the driver and servers put on errors worth retrying.
const TRANSIENT_LABELS: [&str; 4] = [
    "RetryableWriteError",
    "TransientTransactionError",
    "RetryableError",
    "SystemOverloadedError",
];

fn class_of(e: &mongodb::error::Error) -> Class {
    match e.kind.as_ref() {
        ErrorKind::ServerSelection { .. }
        | ErrorKind::Io(_)
        | ErrorKind::ConnectionPoolCleared { .. }
        | ErrorKind::DnsResolve { .. } => return Class::Transient,
        ErrorKind::Authentication { .. } => return Class::Permanent,
        _ => {}
    }
    if TRANSIENT_LABELS.iter().any(|label| e.contains_label(label)) {
        return Class::Transient;
    }
    server_code(e).map_or(Class::Other, class_of_code)
}

/// The server's error code, if the server answered with an error.
fn server_code(e: &mongodb::error::Error) -> Option<i32> {
    match e.kind.as_ref() {
        ErrorKind::Command(c) => Some(c.code),
        ErrorKind::Write(WriteFailure::WriteError(w)) => Some(w.code),
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => Some(w.code),
        _ => None,
    }
}

/// Server error codes (MongoDB's `error_codes.yml`) by what they mean here.
fn class_of_code(code: i32) -> Class {
    match code {
        // HostUnreachable, HostNotFound, MaxTimeMSExpired, WriteConcernFailed
        // (a timeout), NetworkTimeout, ShutdownInProgress, WriteConflict,
        // FailedToSatisfyReadPreference, ReadConcernMajorityNotAvailableYet,
        // PrimarySteppedDown, ExceededTimeLimit, SocketException,
        // LegacyNotPrimary, NotWritablePrimary, InterruptedAtShutdown,
        // InterruptedDueToReplStateChange, NotPrimaryNoSecondaryOk,
        // NotPrimaryOrSecondary.
        6 | 7 | 50 | 64 | 89 | 91 | 112 | 133 | 134 | 189 | 262 | 9001 | 10058 | 10107 | 11600
        | 11602 | 13435 | 13436 => Class::Transient,
        // Unauthorized, AuthenticationFailed, DocumentValidationFailure (a
        // schema the crawl's documents do not fit), OutOfDiskSpace.
        13 | 18 | 121 | 14031 => Class::Permanent,
        _ => Class::Other,
    }
}

/// One line of words for a driver error.
fn describe(e: &mongodb::error::Error) -> String {
    match e.kind.as_ref() {
        ErrorKind::ServerSelection { message, .. } => no_server(message),
        ErrorKind::Io(io) => format!("the connection to the server failed: {io}"),
        ErrorKind::ConnectionPoolCleared { .. } => {
            "the connection to the server was lost".to_string()
        }
        ErrorKind::Authentication { message, .. } => format!("authentication failed: {message}"),
        ErrorKind::DnsResolve { message, .. } => {
            format!("the server's name did not resolve: {message}")
        }
        ErrorKind::Command(c) => coded(&c.message, Some(&c.code_name), c.code),
        ErrorKind::Write(WriteFailure::WriteError(w)) => {
            coded(&w.message, w.code_name.as_deref(), w.code)
        }
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => {
            coded(&w.message, Some(&w.code_name), w.code)
        }
        other => {
            let text = other.to_string();
            let line = text.lines().next().unwrap_or_default();
            match line.char_indices().nth(200) {
                Some((cut, _)) => format!("{}…", &line[..cut]),
                None => line.to_string(),
            }
        }
    }
}

/// `message (CodeName, code N)`.
fn coded(message: &str, code_name: Option<&str>, code: i32) -> String {
    match code_name.filter(|n| !n.is_empty()) {
        Some(name) => format!("{message} ({name}, code {code})"),
        None => format!("{message} (code {code})"),
    }
}

/// `uri` with its password, if it has one, replaced by `***`: for messages.
fn redacted(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((user_info, _)) if user_info.contains(':') => {
            let user = &user_info[..user_info.find(':').unwrap_or(0)];
            let at = rest[..authority_end].rfind('@').unwrap_or(0);
            format!("{scheme}://{user}:***{}", &rest[at..])
        }
        _ => uri.to_string(),
    }
}

/// A server selection timeout in words: the driver's message describes the
/// whole topology; what matters is which server was asked and why it did
/// not answer, when the message says (`Address: A, ... Error: Kind: WHY, labels`).
fn no_server(message: &str) -> String {
    let after = |key: &str, end: &str| {
        let start = message.find(key)? + key.len();
        let rest = &message[start..];
        Some(
            rest[..rest.find(end).unwrap_or(rest.len())]
                .trim()
                .to_string(),
        )
    };
    let address = after("Address: ", ",");
    let why = after("Error: Kind: ", ", labels");
    match (address, why) {
        (Some(address), Some(why)) => {
            format!("no server answered in time ({address}: {why})")
        }
        (Some(address), None) => format!("no server answered in time ({address})"),
        _ => "no server answered in time".to_string(),
    }
}

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

pub(super) fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    match e.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code == DUPLICATE_KEY,
        ErrorKind::Command(c) => c.code == DUPLICATE_KEY,
        _ => false,
    }
}

impl MongoStore {
    /// Connect to `uri` and use database `database`; creates the indexes
    /// (identified by their keys, so creating them again is a no-op).
    pub async fn connect(uri: &str, database: &str) -> Result<Self, StoreError> {
        let mut options = ClientOptions::parse(uri)
            .await
            .map_err(|e| StoreError::Invalid(format!("MongoDB URI {uri:?}: {e}")))?;
        options.app_name = Some("web_crawler".to_string());
        // Fail in seconds, with the reason, when no server answers.
        options.server_selection_timeout = Some(Duration::from_secs(10));
        options.connect_timeout = Some(Duration::from_secs(5));
        let client = Client::with_options(options).map_err(backend)?;
        let db = client.database(database);
        db.run_command(doc! { "ping": 1 }).await.map_err(|e| {
            let context = format!("cannot reach MongoDB at {}", redacted(uri));
            match class_of(&e) {
                Class::Transient => StoreError::unavailable(context, DriverError::from(e)),
                Class::Permanent => StoreError::refused(context, DriverError::from(e)),
                Class::Other => StoreError::backend(context, DriverError::from(e)),
            }
        })?;
        let store = Self {
            pending: db.collection("pending_urls"),
            processed: db.collection("processed_urls"),
            hosts: db.collection("hosts"),
            history: db.collection("fetch_history"),
            record_indexes: Arc::default(),
            owner: None,
            db,
        };
        store.create_indexes().await?;
        Ok(store)
    }

    /// Connect to crawl: as [`MongoStore::connect`], and this process takes
    /// the database's owner lease (`crawl_owner`) for as long as the app
    /// runs, so a second master on the database is refused with a clear
    /// message; `owner` says who in that message (e.g. the node's name).
    pub async fn connect_for_crawl(
        uri: &str,
        database: &str,
        owner: &str,
    ) -> Result<Self, StoreError> {
        let store = Self::connect(uri, database).await?;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "an unknown host".into());
        let who = format!("{owner}, process {} on {host}", std::process::id());
        let lease = OwnerLease::acquire(&store.db, who, backend).await?;
        Ok(Self {
            owner: Some(Arc::new(lease)),
            ..store
        })
    }

    /// Refused once another process holds the owner lease.
    fn check_owner(&self) -> Result<(), StoreError> {
        self.owner.as_ref().map_or(Ok(()), |o| o.check())
    }

    /// The database, for tools and tests that read raw documents.
    pub fn database(&self) -> &Database {
        &self.db
    }

    async fn create_indexes(&self) -> Result<(), StoreError> {
        let unique = || IndexOptions::builder().unique(true).build();
        let indexes = [
            (
                &self.pending,
                doc! { "url": 1, "op_key": 1 },
                Some(unique()),
            ),
            (
                &self.pending,
                doc! { "status": 1, "not_before": 1, "priority": -1 },
                None,
            ),
            (&self.pending, doc! { "status": 1, "lease_until": 1 }, None),
            (&self.pending, doc! { "claim_token": 1 }, None),
            (&self.processed, doc! { "content_hash": 1 }, None),
            (&self.processed, doc! { "d_next_check": 1 }, None),
            (&self.history, doc! { "url": 1, "d_fetch": 1 }, None),
        ];
        for (collection, keys, options) in indexes {
            let model = IndexModel::builder().keys(keys).options(options).build();
            collection.create_index(model).await.map_err(backend)?;
        }
        Ok(())
    }

    /// Apply a batch (see [`CommitBatch`]): each write is one idempotent
    /// single-document operation, in the batch's order.
    async fn write_batch(&self, batch: &CommitBatch) -> Result<CommitSummary, StoreError> {
        let mut summary = CommitSummary::default();
        let now = batch.now;
        let mut urls: Vec<&str> = batch.seeds.iter().map(|l| l.url.as_str()).collect();
        for page in &batch.pages {
            urls.extend(page.links.iter().map(|l| l.url.as_str()));
        }
        urls.sort_unstable();
        urls.dedup();
        let mut processed = self.processed_states(urls).await?;
        for link in merge_links(&batch.seeds) {
            self.upsert_link(
                &link,
                None,
                &mut processed,
                now,
                batch.reprocess_after_ms,
                &mut summary,
            )
            .await?;
        }
        for page in &batch.pages {
            self.commit_page(
                page,
                &mut processed,
                now,
                batch.reprocess_after_ms,
                batch.history_keep,
                &mut summary,
            )
            .await?;
        }
        for retry in &batch.retries {
            self.pending
                .update_one(
                    doc! { "url": &retry.key.url, "op_key": retry.key.operation.key() },
                    doc! {
                        "$set": {
                            "status": PENDING,
                            "not_before": retry.not_before,
                            "last_error": &retry.error,
                            "d_change": now,
                        },
                        "$inc": { "attempts": 1_i32 },
                        "$unset": { "lease_until": "", "lease_owner": "", "claim_token": "" },
                    },
                )
                .await
                .map_err(backend)?;
        }
        for host in &batch.hosts {
            self.hosts
                .replace_one(doc! { "_id": &host.host }, host_doc(host))
                .upsert(true)
                .await
                .map_err(backend)?;
        }
        Ok(summary)
    }

    /// `url` is processed (now): its pending document goes, and the batch
    /// knows it as processed.
    async fn processed_now(
        &self,
        url: &str,
        op_key: &str,
        processed: &mut HashMap<String, ProcessedState>,
        now: Millis,
    ) -> Result<(), StoreError> {
        processed.insert(
            url.to_string(),
            ProcessedState {
                op_key: op_key.to_string(),
                d_processed: now,
            },
        );
        self.pending
            .delete_one(doc! { "url": url, "op_key": op_key })
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// Upsert one admitted link found on `referrer` (none for a seed): the
    /// paper's `add_pending_url`, given what is known of the URL in
    /// processed_urls.
    async fn upsert_link(
        &self,
        link: &MergedLink,
        referrer: Option<&str>,
        processed: &mut HashMap<String, ProcessedState>,
        now: Millis,
        reprocess_after_ms: Option<Millis>,
        summary: &mut CommitSummary,
    ) -> Result<(), StoreError> {
        let op_key = link.operation.key();
        let done = processed
            .get(&link.url)
            .filter(|p| p.op_key == op_key)
            .map(|p| p.d_processed);
        match decide_link(done, link.modified, now, reprocess_after_ms) {
            LinkDecision::ReferralOnly => {
                summary.merged += 1;
                if let Some(referrer) = referrer {
                    self.add_processed_referral(&link.url, referrer).await?;
                }
            }
            LinkDecision::Queue => {
                let filter = doc! { "url": &link.url, "op_key": &op_key };
                let referrals: Vec<&str> = referrer.into_iter().collect();
                let mut update = doc! {
                    "$setOnInsert": {
                        "operation": &link.operation.0,
                        "host": &link.host,
                        "status": PENDING,
                        "d_change": now,
                        "attempts": 0_i32,
                        "not_before": 0_i64,
                    },
                    "$inc": { "priority": link.priority },
                    "$min": { "depth": link.depth as i32, "redirect_hops": link.redirect_hops as i32 },
                    "$addToSet": { "referral_list": { "$each": referrals } },
                };
                // A URL added with an interval of its own takes it, waiting or new.
                if let Some(every) = link.check_every_ms {
                    update.insert("$set", doc! { "check_every_ms": every });
                }
                // Two writers upserting the same new URL at once: one insert
                // wins, the other gets 11000 and merges on its second try.
                let result = match self
                    .pending
                    .update_one(filter.clone(), update.clone())
                    .upsert(true)
                    .await
                {
                    Err(e) if is_duplicate_key(&e) => self
                        .pending
                        .update_one(filter, update)
                        .upsert(true)
                        .await
                        .map_err(backend)?,
                    other => other.map_err(backend)?,
                };
                if result.upserted_id.is_some() {
                    summary.queued += 1;
                } else {
                    summary.merged += 1;
                }
            }
        }
        Ok(())
    }

    /// Add a referral to a processed page and keep `referral_count` equal to
    /// the list's length.
    async fn add_processed_referral(&self, url: &str, referrer: &str) -> Result<(), StoreError> {
        let after = self
            .processed
            .find_one_and_update(
                doc! { "_id": url },
                doc! { "$addToSet": { "referral_list": referrer } },
            )
            .return_document(ReturnDocument::After)
            .projection(doc! { "referral_list": 1 })
            .await
            .map_err(backend)?;
        if let Some(after) = after {
            let count = after.get_array("referral_list").map_or(0, Vec::len);
            self.processed
                .update_one(
                    doc! { "_id": url },
                    doc! { "$set": { "referral_count": count as i32 } },
                )
                .await
                .map_err(backend)?;
        }
        Ok(())
    }

    /// The original this page's body duplicates, if any.
    async fn duplicate_of(&self, record: &PageRecord) -> Result<Option<String>, StoreError> {
        let Some(hash) = record.content_hash else {
            return Ok(None);
        };
        if !dedupe_by_content(record.http_returncode) {
            return Ok(None);
        }
        let original = self
            .processed
            .find_one(doc! {
                "content_hash": hash as i64,
                "_id": { "$ne": &record.url },
                "duplicate_of": { "$exists": false },
                "http_returncode": { "$gte": 200, "$lt": 300 },
            })
            .sort(doc! { "d_processed": 1, "_id": 1 })
            .projection(doc! { "_id": 1 })
            .await
            .map_err(backend)?;
        Ok(original.and_then(|d| d.get_str("_id").ok().map(str::to_string)))
    }

    /// Commit one page: its links first, then the page (so a crash in between
    /// re-processes the page and loses no link).
    async fn commit_page(
        &self,
        page: &ProcessedPage,
        processed: &mut HashMap<String, ProcessedState>,
        now: Millis,
        reprocess_after_ms: Option<Millis>,
        history_keep: usize,
        summary: &mut CommitSummary,
    ) -> Result<(), StoreError> {
        let record = &page.record;
        self.write_history(page, now, history_keep).await?;
        let op_key = record.operation.key();
        if page.not_modified {
            // A 304: the stored page, its links and records stand. Replaced
            // whole, as `d_processed` always is.
            let stored = self
                .processed
                .find_one(doc! { "_id": &record.url })
                .await
                .map_err(backend)?;
            if let Some(mut d) = stored {
                d.insert("d_processed", DateTime::from_millis(now));
                d.insert("fetch_ms", record.fetch_ms);
                d.insert("node", &record.node);
                for (key, value) in [
                    ("etag", &record.etag),
                    ("last_modified", &record.last_modified),
                ] {
                    if let Some(v) = value {
                        d.insert(key, v);
                    }
                }
                for (key, value) in [
                    ("d_next_check", record.d_next_check),
                    ("check_interval_ms", record.check_interval_ms),
                    ("check_every_ms", record.check_every_ms),
                ] {
                    match value {
                        Some(v) => d.insert(key, v),
                        None => d.remove(key),
                    };
                }
                self.processed
                    .replace_one(doc! { "_id": &record.url }, d)
                    .await
                    .map_err(backend)?;
            }
            return self
                .processed_now(&record.url, &op_key, processed, now)
                .await;
        }
        let duplicate_of = self.duplicate_of(record).await?;
        if duplicate_of.is_some() {
            summary.duplicates.push(record.url.clone());
        } else {
            for link in merge_links(&page.links) {
                self.upsert_link(
                    &link,
                    Some(&record.url),
                    processed,
                    now,
                    reprocess_after_ms,
                    summary,
                )
                .await?;
            }
        }
        // The pending document carries the referrals gathered while it waited.
        let pending = self
            .pending
            .find_one(doc! { "url": &record.url, "op_key": &op_key })
            .projection(doc! { "referral_list": 1 })
            .await
            .map_err(backend)?;
        let previous = self
            .processed
            .find_one(doc! { "_id": &record.url })
            .projection(doc! { "referral_list": 1 })
            .await
            .map_err(backend)?;
        let mut referrals: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        for source in [previous.as_ref(), pending.as_ref()].into_iter().flatten() {
            for r in strings(source, "referral_list") {
                if seen.insert(r.clone()) {
                    referrals.push(r);
                }
            }
        }
        let doc = processed_doc(page, &referrals, duplicate_of.as_deref(), now);
        self.processed
            .replace_one(doc! { "_id": &record.url }, doc)
            .upsert(true)
            .await
            .map_err(backend)?;
        self.processed_now(&record.url, &op_key, processed, now)
            .await?;
        // A duplicate is not indexed: the original stands for it.
        for record in page
            .records
            .iter()
            .filter(|r| duplicate_of.is_none() || r.collection != INDEX_QUEUE)
        {
            self.write_record(record, now).await?;
        }
        Ok(())
    }

    /// A page's `fetch_history` document, and the URL's oldest beyond
    /// `keep` removed.
    async fn write_history(
        &self,
        page: &ProcessedPage,
        now: Millis,
        keep: usize,
    ) -> Result<(), StoreError> {
        if keep == 0 {
            return Ok(());
        }
        let record = &page.record;
        let mut d = doc! {
            "url": &record.url,
            "host": &record.host,
            "d_fetch": DateTime::from_millis(now),
            "fetch_ms": record.fetch_ms,
            "changed": page.changed,
        };
        let optional: [(&str, Option<Bson>); 4] = [
            (
                "http_returncode",
                record.http_returncode.map(|c| Bson::Int32(c.into())),
            ),
            (
                "content-length",
                record.content_length.map(|n| Bson::String(n.to_string())),
            ),
            (
                "content_hash",
                record.content_hash.map(|h| Bson::Int64(h.cast_signed())),
            ),
            ("error", record.error.clone().map(Bson::String)),
        ];
        for (key, value) in optional {
            if let Some(v) = value {
                d.insert(key, v);
            }
        }
        self.history.insert_one(d).await.map_err(backend)?;
        if !page.fetched_before {
            return Ok(());
        }
        let old: Vec<Bson> = self
            .history
            .find(doc! { "url": &record.url })
            .sort(doc! { "d_fetch": -1, "_id": -1 })
            .skip(keep as u64)
            .projection(doc! { "_id": 1 })
            .await
            .map_err(backend)?
            .try_collect::<Vec<Document>>()
            .await
            .map_err(backend)?
            .into_iter()
            .filter_map(|d| d.get("_id").cloned())
            .collect();
        if !old.is_empty() {
            self.history
                .delete_many(doc! { "_id": { "$in": old } })
                .await
                .map_err(backend)?;
        }
        Ok(())
    }

    /// What the claimed URLs' last fetches left, in one query.
    async fn last_fetches(&self, jobs: &mut [Job]) -> Result<(), StoreError> {
        let urls: Vec<&str> = jobs.iter().map(|j| j.url.as_str()).collect();
        let mut cursor = self
            .processed
            .find(doc! { "_id": { "$in": urls } })
            .projection(doc! {
                "http_returncode": 1, "content_hash": 1, "etag": 1, "last_modified": 1,
                "check_interval_ms": 1, "check_every_ms": 1,
            })
            .await
            .map_err(backend)?;
        let mut last = HashMap::new();
        while let Some(d) = cursor.try_next().await.map_err(backend)? {
            let url = d.get_str("_id").map_err(corrupt)?.to_string();
            last.insert(
                url,
                LastFetch {
                    http_returncode: int(&d, "http_returncode").map(|c| c as u16),
                    content_hash: int(&d, "content_hash").map(i64::cast_unsigned),
                    etag: text(&d, "etag"),
                    last_modified: text(&d, "last_modified"),
                    check_interval_ms: int(&d, "check_interval_ms"),
                    check_every_ms: int(&d, "check_every_ms"),
                },
            );
        }
        for job in jobs {
            job.set_last(last.remove(&job.url));
        }
        Ok(())
    }

    /// Write (or replace) an operation's record in its collection: its key
    /// and fields as one document, the stamp a date.
    async fn write_record(&self, record: &Record, now: Millis) -> Result<(), StoreError> {
        let key = bson_doc(&record.key)?;
        let mut document = key.clone();
        document.extend(bson_doc(&record.fields)?);
        if let Some(stamp) = &record.stamp {
            document.insert(stamp, DateTime::from_millis(now));
        }
        let collection = self.db.collection::<Document>(&record.collection);
        let indexed = self
            .record_indexes
            .lock()
            .expect("index set lock")
            .contains(&record.collection);
        if !indexed {
            // A unique index on the key fields: replaces find their record at
            // once, and two writers cannot add the same record twice.
            let keys: Document = key.keys().map(|k| (k.clone(), Bson::Int32(1))).collect();
            let model = IndexModel::builder()
                .keys(keys)
                .options(IndexOptions::builder().unique(true).build())
                .build();
            collection.create_index(model).await.map_err(backend)?;
            self.record_indexes
                .lock()
                .expect("index set lock")
                .insert(record.collection.clone());
        }
        collection
            .replace_one(key, document)
            .upsert(true)
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// `processed_urls` state of these URLs, in one query.
    async fn processed_states(
        &self,
        urls: Vec<&str>,
    ) -> Result<HashMap<String, ProcessedState>, StoreError> {
        let mut out = HashMap::new();
        if urls.is_empty() {
            return Ok(out);
        }
        let mut cursor = self
            .processed
            .find(doc! { "_id": { "$in": urls } })
            .projection(doc! { "op_key": 1, "d_processed": 1 })
            .await
            .map_err(backend)?;
        while let Some(d) = cursor.try_next().await.map_err(backend)? {
            let url = d.get_str("_id").map_err(corrupt)?.to_string();
            out.insert(
                url,
                ProcessedState {
                    op_key: d.get_str("op_key").unwrap_or("[]").to_string(),
                    d_processed: millis(&d, "d_processed"),
                },
            );
        }
        Ok(out)
    }

    /// `_id`s of the pending documents matching `filter` whose
    /// (url, op_key) passes `keep`.
    async fn leased_ids(
        &self,
        filter: Document,
        keep: impl Fn(&(String, String)) -> bool,
    ) -> Result<Vec<Bson>, StoreError> {
        let docs: Vec<Document> = self
            .pending
            .find(filter)
            .projection(doc! { "_id": 1, "url": 1, "op_key": 1 })
            .await
            .map_err(backend)?
            .try_collect()
            .await
            .map_err(backend)?;
        Ok(docs
            .iter()
            .filter(|d| {
                keep(&(
                    text(d, "url").unwrap_or_default(),
                    text(d, "op_key").unwrap_or_default(),
                ))
            })
            .filter_map(|d| d.get("_id").cloned())
            .collect())
    }

    async fn release_ids(&self, ids: Vec<Bson>) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let result = self
            .pending
            .update_many(
                doc! { "_id": { "$in": ids }, "status": PROCESSING },
                doc! {
                    "$set": { "status": PENDING, "d_change": web_crawler_actors::now_ms() },
                    "$unset": { "lease_until": "", "lease_owner": "", "claim_token": "" },
                },
            )
            .await
            .map_err(backend)?;
        Ok(result.modified_count)
    }

    async fn collect(
        &self,
        collection: &Collection<Document>,
        filter: Document,
        sort: Document,
        limit: Option<usize>,
        skip: usize,
    ) -> Result<Vec<Document>, StoreError> {
        let mut find = collection.find(filter).sort(sort).skip(skip as u64);
        if let Some(limit) = limit {
            find = find.limit(limit as i64);
        }
        find.await
            .map_err(backend)?
            .try_collect()
            .await
            .map_err(backend)
    }
}

/// The filter and sort of the records after `key` in key order (its
/// fields in name order): `(a > x) or (a = x and b > y) or …`.
fn after_key(key: &Document) -> (Document, Document) {
    let mut fields: Vec<(&String, &Bson)> = key.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    let mut any = Vec::new();
    for (i, (name, value)) in fields.iter().enumerate() {
        let mut clause: Document = fields[..i]
            .iter()
            .map(|(n, v)| ((*n).clone(), (*v).clone()))
            .collect();
        clause.insert((*name).clone(), doc! { "$gt": (*value).clone() });
        any.push(Bson::Document(clause));
    }
    let sort = fields
        .iter()
        .map(|(n, _)| ((*n).clone(), Bson::Int32(1)))
        .collect();
    (doc! { "$or": any }, sort)
}

/// Records as operations wrote them: their key and fields, without `_id`.
fn record_documents(docs: Vec<Document>) -> Vec<JsonDoc> {
    docs.into_iter()
        .map(|d| {
            d.into_iter()
                .filter(|(k, _)| k != "_id")
                .map(|(k, v)| (k, json_of(v)))
                .collect()
        })
        .collect()
}

/// What a batch needs to know of a processed URL.
#[derive(Debug)]
struct ProcessedState {
    op_key: String,
    d_processed: Millis,
}

/// Links of one page (or the seeds) merged by (url, operation): one upsert
/// each.
#[derive(Debug)]
struct MergedLink {
    url: String,
    host: String,
    operation: OperationSpec,
    depth: u32,
    priority: f64,
    redirect_hops: u32,
    modified: Option<Millis>,
    check_every_ms: Option<Millis>,
}

fn merge_links(links: &[NewLink]) -> Vec<MergedLink> {
    let mut index: HashMap<(&str, &OperationSpec), usize> = HashMap::new();
    let mut out: Vec<MergedLink> = Vec::new();
    for l in links {
        match index.get(&(l.url.as_str(), &l.operation)) {
            Some(&i) => {
                let m = &mut out[i];
                m.priority += l.priority;
                m.depth = m.depth.min(l.depth);
                m.redirect_hops = m.redirect_hops.min(l.redirect_hops);
                m.modified = m.modified.max(l.modified);
                m.check_every_ms = l.check_every_ms.or(m.check_every_ms);
            }
            None => {
                index.insert((l.url.as_str(), &l.operation), out.len());
                out.push(MergedLink {
                    url: l.url.clone(),
                    host: l.host.clone(),
                    operation: l.operation.clone(),
                    depth: l.depth,
                    priority: l.priority,
                    redirect_hops: l.redirect_hops,
                    modified: l.modified,
                    check_every_ms: l.check_every_ms,
                });
            }
        }
    }
    out
}

/// The processed_urls document (listing 2 plus ours). Absent values are left out.
fn processed_doc(
    page: &ProcessedPage,
    referrals: &[String],
    duplicate_of: Option<&str>,
    now: Millis,
) -> Document {
    let record = &page.record;
    let mut d = doc! {
        "_id": &record.url,
        "referral_count": referrals.len() as i32,
        "referral_list": referrals,
        "links_count": record.links_count as i32,
        "d_processed": DateTime::from_millis(now),
        "operation": &record.operation.0,
        "op_key": record.operation.key(),
        "host": &record.host,
        "depth": record.depth as i32,
        "fetch_ms": record.fetch_ms,
        "out_links": page.out_links(),
        "truncated": record.truncated,
        "node": &record.node,
    };
    // The paper stores the header's text: "content-length" is a string.
    if let Some(n) = record.content_length {
        d.insert("content-length", n.to_string());
    }
    let optional: [(&str, Option<Bson>); 13] = [
        ("etag", record.etag.clone().map(Bson::String)),
        (
            "last_modified",
            record.last_modified.clone().map(Bson::String),
        ),
        ("d_next_check", record.d_next_check.map(Bson::Int64)),
        (
            "check_interval_ms",
            record.check_interval_ms.map(Bson::Int64),
        ),
        ("check_every_ms", record.check_every_ms.map(Bson::Int64)),
        (
            "content-type",
            record.content_type.clone().map(Bson::String),
        ),
        ("server", record.server.clone().map(Bson::String)),
        (
            "http_returncode",
            record.http_returncode.map(|c| Bson::Int32(c as i32)),
        ),
        ("title", record.title.clone().map(Bson::String)),
        (
            "content_hash",
            record.content_hash.map(|h| Bson::Int64(h as i64)),
        ),
        (
            "duplicate_of",
            duplicate_of.map(|s| Bson::String(s.to_string())),
        ),
        ("redirect_to", record.redirect_to.clone().map(Bson::String)),
        ("error", record.error.clone().map(Bson::String)),
    ];
    for (key, value) in optional {
        if let Some(v) = value {
            d.insert(key, v);
        }
    }
    d
}

/// An integer field written as Int64 or Int32 (or a double), as epoch ms
/// for dates.
fn int(d: &Document, key: &str) -> Option<i64> {
    match d.get(key)? {
        Bson::Int64(n) => Some(*n),
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Double(f) => Some(*f as i64),
        Bson::DateTime(t) => Some(t.timestamp_millis()),
        _ => None,
    }
}

fn millis(d: &Document, key: &str) -> Millis {
    int(d, key).unwrap_or(0)
}

fn text(d: &Document, key: &str) -> Option<String> {
    d.get_str(key).ok().map(str::to_string)
}

fn strings(d: &Document, key: &str) -> Vec<String> {
    d.get_array(key)
        .map(|a| {
            a.iter()
                .filter_map(|b| b.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn operation_of(d: &Document) -> Result<OperationSpec, StoreError> {
    match d.get("operation") {
        None => Ok(OperationSpec::crawl()),
        Some(Bson::Array(parts)) => parts
            .iter()
            .map(|b| b.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(OperationSpec)
            .ok_or_else(|| corrupt(format!("operation is not an array of strings in {d}"))),
        Some(other) => Err(corrupt(format!("operation is {other}, not an array"))),
    }
}

fn job_of(d: &Document) -> Result<Job, StoreError> {
    Ok(Job {
        url: d.get_str("url").map_err(corrupt)?.to_string(),
        host: text(d, "host").unwrap_or_default(),
        operation: operation_of(d)?,
        depth: int(d, "depth").unwrap_or(0) as u32,
        priority: d
            .get_f64("priority")
            .ok()
            .or_else(|| int(d, "priority").map(|n| n as f64))
            .unwrap_or(0.0),
        attempts: int(d, "attempts").unwrap_or(0) as u32,
        redirect_hops: int(d, "redirect_hops").unwrap_or(0) as u32,
        last: None,
        check_every_ms: int(d, "check_every_ms"),
    })
}

fn processed_of(d: &Document) -> Result<ProcessedUrl, StoreError> {
    Ok(ProcessedUrl {
        record: PageRecord {
            url: d.get_str("_id").map_err(corrupt)?.to_string(),
            operation: operation_of(d)?,
            host: text(d, "host").unwrap_or_default(),
            depth: int(d, "depth").unwrap_or(0) as u32,
            http_returncode: int(d, "http_returncode").map(|c| c as u16),
            content_length: text(d, "content-length")
                .and_then(|s| s.parse().ok())
                .or_else(|| int(d, "content-length")),
            content_type: text(d, "content-type"),
            server: text(d, "server"),
            links_count: int(d, "links_count").unwrap_or(0) as u32,
            title: text(d, "title"),
            content_hash: int(d, "content_hash").map(|h| h as u64),
            redirect_to: text(d, "redirect_to"),
            error: text(d, "error"),
            fetch_ms: millis(d, "fetch_ms"),
            out_links: strings(d, "out_links"),
            truncated: d.get_bool("truncated").unwrap_or(false),
            node: text(d, "node").unwrap_or_default(),
            etag: text(d, "etag"),
            last_modified: text(d, "last_modified"),
            d_next_check: int(d, "d_next_check"),
            check_interval_ms: int(d, "check_interval_ms"),
            check_every_ms: int(d, "check_every_ms"),
        },
        referral_count: int(d, "referral_count").unwrap_or(0) as u64,
        referral_list: strings(d, "referral_list"),
        duplicate_of: text(d, "duplicate_of"),
        d_processed: millis(d, "d_processed"),
    })
}

fn key_set(keys: &[UrlKey]) -> HashSet<(String, String)> {
    keys.iter()
        .map(|k| (k.url.clone(), k.operation.key()))
        .collect()
}

fn host_doc(h: &HostRecord) -> Document {
    let mut d = doc! {
        "_id": &h.host,
        "robots_status": h.robots_status.as_str(),
        "robots_fetched_at": h.robots_fetched_at,
        "sitemaps": &h.sitemaps,
    };
    if let Some(c) = h.robots_http_code {
        d.insert("robots_http_code", c as i32);
    }
    if let Some(e) = &h.robots_error {
        d.insert("robots_error", e);
    }
    if let Some(t) = &h.robots_txt {
        d.insert("robots_txt", t);
    }
    if let Some(ms) = h.crawl_delay_ms {
        d.insert("crawl_delay_ms", ms as i64);
    }
    d
}

fn host_of(d: &Document) -> Result<HostRecord, StoreError> {
    Ok(HostRecord {
        host: text(d, "_id").unwrap_or_default(),
        robots_status: text(d, "robots_status")
            .unwrap_or_default()
            .parse()
            .map_err(corrupt)?,
        robots_http_code: int(d, "robots_http_code").map(|c| c as u16),
        robots_error: text(d, "robots_error"),
        robots_txt: text(d, "robots_txt"),
        robots_fetched_at: millis(d, "robots_fetched_at"),
        crawl_delay_ms: int(d, "crawl_delay_ms").map(|n| n as u64),
        sitemaps: strings(d, "sitemaps"),
    })
}

/// Pending URLs scanned per claim for each URL asked for: the per-host caps
/// and round-robin are applied to this window.
const CLAIM_SCAN_FACTOR: usize = 8;

#[async_trait]
impl Frontier for MongoStore {
    async fn claim(&self, req: ClaimRequest) -> Result<Vec<Job>, StoreError> {
        self.check_owner()?;
        // Expired leases go back to pending first (a dead slave or node).
        self.pending
            .update_many(
                doc! { "status": PROCESSING, "lease_until": { "$lt": req.now } },
                doc! {
                    "$set": { "status": PENDING, "d_change": req.now },
                    "$unset": { "lease_until": "", "lease_owner": "", "claim_token": "" },
                },
            )
            .await
            .map_err(backend)?;
        if req.limit == 0 {
            return Ok(Vec::new());
        }
        let candidates: Vec<Document> = self
            .pending
            .find(doc! { "status": PENDING, "not_before": { "$lte": req.now } })
            .sort(doc! { "priority": -1, "_id": 1 })
            .limit((req.limit * CLAIM_SCAN_FACTOR).max(256) as i64)
            .projection(doc! { "_id": 1, "host": 1 })
            .await
            .map_err(backend)?
            .try_collect()
            .await
            .map_err(backend)?;
        let chosen = web_crawler_actors::frontier::round_robin(
            candidates
                .iter()
                .filter_map(|d| Some((d.get("_id")?.clone(), d.get_str("host").ok()?))),
            req.limit,
            req.per_host_cap,
            &req.held_per_host,
        );
        if chosen.is_empty() {
            return Ok(Vec::new());
        }
        // Each document's update is atomic: a concurrent claimer can take a
        // candidate first, then our status filter skips it. The token tells
        // which ones this call won.
        // A string: the test server cannot match ObjectId values outside `_id`.
        let token = ObjectId::new().to_hex();
        self.pending
            .update_many(
                doc! { "_id": { "$in": chosen }, "status": PENDING },
                doc! { "$set": {
                    "status": PROCESSING,
                    "lease_until": req.lease_until,
                    "lease_owner": &req.owner,
                    "claim_token": &token,
                    "d_change": req.now,
                } },
            )
            .await
            .map_err(backend)?;
        let won: Vec<Document> = self
            .pending
            .find(doc! { "claim_token": &token })
            .sort(doc! { "priority": -1, "_id": 1 })
            .await
            .map_err(backend)?
            .try_collect()
            .await
            .map_err(backend)?;
        let mut jobs = won.iter().map(job_of).collect::<Result<Vec<Job>, _>>()?;
        self.last_fetches(&mut jobs).await?;
        Ok(jobs)
    }

    async fn commit(&self, batch: Arc<CommitBatch>) -> Result<CommitSummary, StoreError> {
        self.write_batch(&batch).await
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
        let urls: Vec<&str> = keys.iter().map(|k| k.url.as_str()).collect();
        self.pending
            .update_many(
                doc! { "status": PROCESSING, "lease_owner": owner, "url": { "$in": urls } },
                doc! { "$set": { "lease_until": until } },
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn release(&self, owner: &str, keep: &[UrlKey]) -> Result<u64, StoreError> {
        let keep = key_set(keep);
        let ids = self
            .leased_ids(doc! { "status": PROCESSING, "lease_owner": owner }, |key| {
                !keep.contains(key)
            })
            .await?;
        self.release_ids(ids).await
    }

    async fn release_keys(&self, keys: &[UrlKey]) -> Result<u64, StoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        let wanted = key_set(keys);
        let urls: Vec<&str> = keys.iter().map(|k| k.url.as_str()).collect();
        let ids = self
            .leased_ids(
                doc! { "status": PROCESSING, "url": { "$in": urls } },
                |key| wanted.contains(key),
            )
            .await?;
        self.release_ids(ids).await
    }

    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        let count = |c: &Collection<Document>, f: Document| {
            let c = c.clone();
            async move { c.count_documents(f).await.map_err(backend) }
        };
        Ok(StoreCounts {
            pending: count(&self.pending, doc! { "status": PENDING }).await?,
            processing: count(&self.pending, doc! { "status": PROCESSING }).await?,
            processed: count(&self.processed, doc! {}).await?,
            failed: count(&self.processed, doc! { "error": { "$exists": true } }).await?,
            robots_blocked: count(&self.processed, doc! { "error": ROBOTS_BLOCKED }).await?,
            duplicates: count(
                &self.processed,
                doc! { "duplicate_of": { "$exists": true } },
            )
            .await?,
            search_results: count(&self.db.collection(SEARCH_RESULTS), doc! {}).await?,
        })
    }

    async fn close(&self) {
        if let Some(owner) = &self.owner {
            owner.release().await;
        }
    }

    async fn requeue_due(&self, now: Millis, limit: usize) -> Result<u64, StoreError> {
        let due: Vec<Document> = self
            .processed
            .find(doc! { "d_next_check": { "$lte": now } })
            .sort(doc! { "d_next_check": 1 })
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .projection(doc! { "operation": 1, "op_key": 1, "host": 1, "depth": 1 })
            .await
            .map_err(backend)?
            .try_collect()
            .await
            .map_err(backend)?;
        if due.is_empty() {
            return Ok(0);
        }
        let mut links = Vec::with_capacity(due.len());
        for d in &due {
            links.push(NewLink {
                url: d.get_str("_id").map_err(corrupt)?.to_string(),
                host: text(d, "host").unwrap_or_default(),
                operation: operation_of(d)?,
                depth: int(d, "depth").unwrap_or(0) as u32,
                priority: 1.0,
                redirect_hops: 0,
                modified: Some(now),
                check_every_ms: None,
            });
        }
        let urls: Vec<&str> = links.iter().map(|l| l.url.as_str()).collect();
        let mut processed = self.processed_states(urls.clone()).await?;
        let mut summary = CommitSummary::default();
        // Queued as a link saying the page changed now would be; the next
        // check is cleared after, so a crash in between queues it again
        // (a merge).
        for link in merge_links(&links) {
            self.upsert_link(&link, None, &mut processed, now, None, &mut summary)
                .await?;
        }
        self.processed
            .update_many(
                doc! { "_id": { "$in": urls } },
                doc! { "$unset": { "d_next_check": "" } },
            )
            .await
            .map_err(backend)?;
        Ok(summary.queued)
    }
}

#[async_trait]
impl Queries for MongoStore {
    async fn processed(&self, query: PageQuery) -> Result<Vec<ProcessedUrl>, StoreError> {
        let filter = if query.only_failed {
            doc! { "$or": [ { "http_returncode": { "$gte": 400 } }, { "error": { "$exists": true } } ] }
        } else {
            doc! {}
        };
        let order = if query.newest_first {
            doc! { "d_processed": -1, "_id": 1 }
        } else {
            doc! { "_id": 1 }
        };
        self.collect(&self.processed, filter, order, query.limit, query.offset)
            .await?
            .iter()
            .map(processed_of)
            .collect()
    }

    async fn processed_url(&self, url: &str) -> Result<Option<ProcessedUrl>, StoreError> {
        self.processed
            .find_one(doc! { "_id": url })
            .await
            .map_err(backend)?
            .as_ref()
            .map(processed_of)
            .transpose()
    }

    async fn processed_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PageRecord>, StoreError> {
        let filter = match after {
            Some(after) => doc! { "_id": { "$gt": after } },
            None => doc! {},
        };
        let docs: Vec<Document> = self
            .processed
            .find(filter)
            .sort(doc! { "_id": 1 })
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .projection(doc! { "referral_list": 0 })
            .await
            .map_err(backend)?
            .try_collect()
            .await
            .map_err(backend)?;
        docs.iter()
            .map(|d| processed_of(d).map(|p| p.record))
            .collect()
    }

    async fn pending(&self, limit: usize) -> Result<Vec<PendingUrl>, StoreError> {
        self.collect(&self.pending, doc! {}, doc! { "_id": 1 }, Some(limit), 0)
            .await?
            .iter()
            .map(|d| {
                let job = job_of(d)?;
                Ok(PendingUrl {
                    url: job.url,
                    operation: job.operation,
                    host: job.host,
                    status: text(d, "status").unwrap_or_default(),
                    depth: job.depth,
                    priority: job.priority,
                    attempts: job.attempts,
                    referral_list: strings(d, "referral_list"),
                    d_change: millis(d, "d_change"),
                    not_before: millis(d, "not_before"),
                    lease_until: int(d, "lease_until"),
                    last_error: text(d, "last_error"),
                    check_every_ms: job.check_every_ms,
                })
            })
            .collect()
    }

    async fn records(
        &self,
        collection: &str,
        filter: &JsonDoc,
    ) -> Result<Vec<JsonDoc>, StoreError> {
        let docs = self
            .collect(
                &self.db.collection(collection),
                bson_doc(filter)?,
                doc! { "_id": 1 },
                None,
                0,
            )
            .await?;
        Ok(record_documents(docs))
    }

    async fn first_records(
        &self,
        collection: &str,
        after: Option<&JsonDoc>,
        limit: usize,
    ) -> Result<Vec<JsonDoc>, StoreError> {
        // The head in insertion order; read on after a key in key order
        // (a record may then be read twice before its consumer removes it,
        // which a queue's consumer takes as it takes any repeat).
        let (filter, sort) = match after {
            None => (doc! {}, doc! { "_id": 1 }),
            Some(key) => after_key(&bson_doc(key)?),
        };
        let docs = self
            .collect(
                &self.db.collection(collection),
                filter,
                sort,
                Some(limit),
                0,
            )
            .await?;
        Ok(record_documents(docs))
    }

    async fn delete_records(&self, collection: &str, keys: &[JsonDoc]) -> Result<u64, StoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        let keys = keys.iter().map(bson_doc).collect::<Result<Vec<_>, _>>()?;
        let deleted = self
            .db
            .collection::<Document>(collection)
            .delete_many(doc! { "$or": keys })
            .await
            .map_err(backend)?;
        Ok(deleted.deleted_count)
    }

    async fn broken_links(&self) -> Result<Vec<BrokenLink>, StoreError> {
        let filter = doc! { "$or": [
            { "http_returncode": { "$gte": 400 } },
            { "$and": [ { "error": { "$exists": true } }, { "error": { "$ne": ROBOTS_BLOCKED } } ] },
        ] };
        Ok(self
            .collect(&self.processed, filter, doc! { "_id": 1 }, None, 0)
            .await?
            .iter()
            .map(|d| BrokenLink {
                url: text(d, "_id").unwrap_or_default(),
                http_returncode: int(d, "http_returncode").map(|c| c as u16),
                error: text(d, "error"),
                referral_list: strings(d, "referral_list"),
            })
            .collect())
    }

    async fn fetch_history(&self, query: HistoryQuery) -> Result<Vec<FetchHistory>, StoreError> {
        let mut filter = Document::new();
        if let Some(host) = &query.host {
            filter.insert("host", host);
        }
        if let Some(since) = query.since {
            filter.insert("d_fetch", doc! { "$gte": DateTime::from_millis(since) });
        }
        let docs: Vec<Document> = self
            .history
            .find(filter)
            .sort(doc! { "url": 1, "d_fetch": 1, "_id": 1 })
            .await
            .map_err(backend)?
            .try_collect()
            .await
            .map_err(backend)?;
        docs.iter()
            .map(|d| {
                Ok(FetchHistory {
                    url: d.get_str("url").map_err(corrupt)?.to_string(),
                    host: text(d, "host").unwrap_or_default(),
                    d_fetch: millis(d, "d_fetch"),
                    http_returncode: int(d, "http_returncode").map(|c| c as u16),
                    fetch_ms: millis(d, "fetch_ms"),
                    size: text(d, "content-length").and_then(|s| s.parse().ok()),
                    content_hash: int(d, "content_hash").map(i64::cast_unsigned),
                    changed: d.get_bool("changed").unwrap_or(false),
                    error: text(d, "error"),
                })
            })
            .collect()
    }

    async fn hosts(&self) -> Result<Vec<HostRecord>, StoreError> {
        self.collect(&self.hosts, doc! {}, doc! { "_id": 1 }, None, 0)
            .await?
            .iter()
            .map(host_of)
            .collect()
    }

    async fn status_histogram(&self) -> Result<Vec<(Option<u16>, u64)>, StoreError> {
        let mut cursor = self
            .processed
            .aggregate(vec![
                doc! { "$group": { "_id": "$http_returncode", "n": { "$sum": 1 } } },
            ])
            .await
            .map_err(backend)?;
        let mut out = Vec::new();
        while let Some(d) = cursor.try_next().await.map_err(backend)? {
            out.push((
                int(&d, "_id").map(|c| c as u16),
                int(&d, "n").unwrap_or(0) as u64,
            ));
        }
        out.sort();
        Ok(out)
    }

    async fn pages_per_host(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let mut cursor = self
            .processed
            .aggregate(vec![
                doc! { "$group": { "_id": "$host", "n": { "$sum": 1 } } },
            ])
            .await
            .map_err(backend)?;
        let mut out = Vec::new();
        while let Some(d) = cursor.try_next().await.map_err(backend)? {
            out.push((
                text(&d, "_id").unwrap_or_default(),
                int(&d, "n").unwrap_or(0) as u64,
            ));
        }
        out.sort();
        Ok(out)
    }
}

/// An operation's JSON document as BSON.
fn bson_doc(json: &JsonDoc) -> Result<Document, StoreError> {
    mongodb::bson::to_document(json)
        .map_err(|e| StoreError::Invalid(format!("a record that BSON cannot hold: {e}")))
}

/// A stored value as JSON, dates as epoch milliseconds (as the embedded
/// store keeps them).
fn json_of(value: Bson) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Bson::Double(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        Bson::String(s) => Value::String(s),
        Bson::Array(items) => Value::Array(items.into_iter().map(json_of).collect()),
        Bson::Document(d) => Value::Object(d.into_iter().map(|(k, v)| (k, json_of(v))).collect()),
        Bson::Boolean(b) => Value::Bool(b),
        Bson::Null | Bson::Undefined => Value::Null,
        Bson::Int32(n) => n.into(),
        Bson::Int64(n) => n.into(),
        Bson::DateTime(d) => d.timestamp_millis().into(),
        other => Value::String(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(url: &str, depth: u32, priority: f64) -> NewLink {
        NewLink {
            url: url.into(),
            host: "h".into(),
            operation: OperationSpec::crawl(),
            depth,
            priority,
            redirect_hops: 0,
            modified: None,
            check_every_ms: None,
        }
    }

    #[test]
    fn records_after_a_key_compare_its_fields_in_name_order() {
        let (filter, sort) = after_key(&doc! { "url": "http://h/b", "op": "crawl" });
        assert_eq!(
            filter,
            doc! { "$or": [
                { "op": { "$gt": "crawl" } },
                { "op": "crawl", "url": { "$gt": "http://h/b" } },
            ] }
        );
        assert_eq!(sort, doc! { "op": 1, "url": 1 });
    }

    #[test]
    fn links_merge_by_url_and_operation() {
        let links = [
            link("http://h/a", 3, 0.5),
            link("http://h/a", 1, 0.25),
            link("http://h/a", 2, 0.25),
            link("http://h/b", 1, 1.0),
        ];
        let merged = merge_links(&links);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].depth, 1);
        assert_eq!(merged[0].priority, 1.0);
        assert_eq!((merged[1].url.as_str(), merged[1].depth), ("http://h/b", 1));
    }

    #[test]
    fn processed_doc_has_the_papers_fields_and_no_nulls() {
        let record = PageRecord {
            url: "http://h/".into(),
            http_returncode: Some(200),
            content_length: Some(1234),
            content_type: Some("text/html".into()),
            ..PageRecord::default()
        };
        let page = ProcessedPage {
            record,
            links: vec![link("http://h/next", 1, 1.0)],
            ..ProcessedPage::default()
        };
        let d = processed_doc(&page, &["http://h/r".to_string()], None, 1_000);
        assert_eq!(d.get_str("_id").unwrap(), "http://h/");
        assert_eq!(d.get_str("content-length").unwrap(), "1234");
        assert_eq!(d.get_i32("http_returncode").unwrap(), 200);
        assert_eq!(d.get_i32("referral_count").unwrap(), 1);
        assert!(matches!(d.get("d_processed"), Some(Bson::DateTime(_))));
        assert!(d.get("error").is_none() && d.get("duplicate_of").is_none());
        assert!(d.values().all(|v| !matches!(v, Bson::Null)));
        let back = processed_of(&d).unwrap();
        assert_eq!(back.record.content_length, Some(1234));
        assert_eq!(back.record.out_links, vec!["http://h/next"]);
        assert_eq!(back.d_processed, 1_000);
    }

    /// A driver error as the server sends it: a write error with this code.
    fn write_error(code: i32, name: &str, message: &str) -> mongodb::error::Error {
        let w: mongodb::error::WriteError = mongodb::bson::from_document(
            doc! { "code": code, "codeName": name, "errmsg": message },
        )
        .unwrap();
        mongodb::error::Error::from(ErrorKind::Write(WriteFailure::WriteError(w)))
    }

    fn command_error(code: i32, name: &str, message: &str) -> mongodb::error::Error {
        let c: mongodb::error::CommandError = mongodb::bson::from_document(
            doc! { "code": code, "codeName": name, "errmsg": message },
        )
        .unwrap();
        mongodb::error::Error::from(ErrorKind::Command(c))
    }

    #[test]
    fn unreachable_servers_and_elections_are_waited_for_a_full_disk_is_not() {
        let refused = mongodb::error::Error::from(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        ));
        let e = backend(refused);
        assert!(e.is_transient(), "{e:?}");
        assert_eq!(
            web_crawler_actors::error_chain(&e),
            "MongoDB is unavailable: the connection to the server failed: connection refused"
        );
        for (code, name) in [
            (10107, "NotWritablePrimary"),
            (11602, "InterruptedDueToReplStateChange"),
            (189, "PrimarySteppedDown"),
            (91, "ShutdownInProgress"),
            (89, "NetworkTimeout"),
        ] {
            assert!(
                backend(command_error(code, name, "x")).is_transient(),
                "{name}"
            );
        }
        let full = backend(write_error(
            14031,
            "OutOfDiskSpace",
            "No space left on device",
        ));
        assert!(full.is_permanent(), "{full:?}");
        assert_eq!(
            web_crawler_actors::error_chain(&full),
            "MongoDB refuses the crawl's writes: No space left on device (OutOfDiskSpace, \
             code 14031)"
        );
        assert!(backend(command_error(18, "AuthenticationFailed", "bad auth")).is_permanent());
        let other = backend(command_error(2, "BadValue", "unknown operator"));
        assert!(!other.is_transient() && !other.is_permanent());
        assert_eq!(
            web_crawler_actors::error_chain(&other),
            "MongoDB: unknown operator (BadValue, code 2)"
        );
    }

    #[test]
    fn a_server_selection_timeout_reads_as_which_server_and_why() {
        let driver = "Server selection timeout: No available servers. Topology: { Type: \
            Unknown, Set Name: , Max Set Version: , Max Election ID: , Servers: [ { Address: \
            127.0.0.1:40404, Type: Unknown, Error: Kind: I/O error: Connection refused (os \
            error 111), labels: {} } ], Compatibility Error:  }";
        assert_eq!(
            no_server(driver),
            "no server answered in time (127.0.0.1:40404: I/O error: Connection refused (os \
             error 111))"
        );
        assert_eq!(
            no_server("Server selection timeout"),
            "no server answered in time"
        );
    }

    #[test]
    fn a_uri_in_a_message_keeps_its_password_to_itself() {
        assert_eq!(
            redacted("mongodb://crawler:s3cret@db1:27017,db2/crawler?replicaSet=rs"),
            "mongodb://crawler:***@db1:27017,db2/crawler?replicaSet=rs"
        );
        assert_eq!(redacted("mongodb://db1:27017"), "mongodb://db1:27017");
        assert_eq!(redacted("mongodb://user@db1/"), "mongodb://user@db1/");
    }

    #[test]
    fn int32_is_read_where_int64_was_written() {
        let d = doc! { "url": "u", "depth": 3_i32, "attempts": 2_i64, "priority": 1_i32 };
        let job = job_of(&d).unwrap();
        assert_eq!((job.depth, job.attempts, job.priority), (3, 2, 1.0));
        assert!(job_of(&doc! { "url": "u", "operation": "search" }).is_err());
    }
}
