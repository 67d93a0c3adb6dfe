//! The MongoDB store: the paper's `crawler` database with its collections
//! `pending_urls`, `processed_urls` and `search_results` (listings 1–3), plus
//! `hosts`, `fetch_history` and `trap_closures`, through the official
//! `mongodb` driver.
//!
//! Every write is a single-document atomic operation made idempotent; there
//! are no multi-document transactions, so it runs on a standalone server as
//! on a replica set or a sharded cluster. Timestamps that change after insert
//! are Int64 epoch milliseconds; `d_processed` and `d_search` are BSON dates,
//! written only by whole-document replaces. Absent values are left out of a
//! document (never stored as null), and queries test them with `$exists`.
//!
//! By concern, as the embedded store: `documents` (records as BSON and
//! back), `filters` (the queries' filters), `errors` (driver errors as the
//! master reads them), `commit` (a batch's writes), `frontier` (claims and
//! leases), `queries` (the reads), `owner` (one crawling master per
//! database).

mod commit;
mod documents;
mod errors;
mod filters;
mod frontier;
mod owner;
mod queries;

use self::errors::{Class, DriverError, backend, class_of, redacted};
use self::owner::OwnerLease;
use mongodb::bson::{Document, doc};
use mongodb::options::{ClientOptions, IndexOptions};
use mongodb::{Client, Collection, Database, IndexModel};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use web_crawler_actors::StoreError;

/// The paper's database name.
pub const DEFAULT_DATABASE: &str = "crawler";

const PENDING: &str = "pending";
const PROCESSING: &str = "processing";
use web_crawler_actors::TRAPPED;

/// The store behaviours over a MongoDB deployment.
#[derive(Clone, Debug)]
pub struct MongoStore {
    db: Database,
    pending: Collection<Document>,
    processed: Collection<Document>,
    hosts: Collection<Document>,
    history: Collection<Document>,
    /// The families the trap defence closed, by name (`_id`).
    closures: Collection<Document>,
    /// Collections of operation records whose key index exists.
    record_indexes: Arc<Mutex<HashSet<String>>>,
    /// Held by a store opened to crawl ([`MongoStore::connect_for_crawl`]).
    owner: Option<Arc<OwnerLease>>,
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
            closures: db.collection("trap_closures"),
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
            (&self.pending, doc! { "trap_family": 1 }, None),
            (&self.processed, doc! { "content_hash": 1 }, None),
            (&self.processed, doc! { "d_next_check": 1 }, None),
            (&self.processed, doc! { "node": 1 }, None),
            (&self.history, doc! { "url": 1, "d_fetch": 1 }, None),
        ];
        for (collection, keys, options) in indexes {
            let model = IndexModel::builder().keys(keys).options(options).build();
            collection.create_index(model).await.map_err(backend)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod test_support {
    use web_crawler_actors::{NewLink, OperationSpec};

    pub(super) fn link(url: &str, depth: u32, priority: f64) -> NewLink {
        NewLink::new(
            url.into(),
            "h".into(),
            OperationSpec::crawl(),
            depth,
            priority,
        )
    }
}
