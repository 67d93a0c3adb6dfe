//! The store's reads: reports, listings and operation records.

use super::MongoStore;
use super::TRAPPED;
use super::documents::{
    broken_link_of, bson_doc, history_of, host_of, int, pending_of, processed_of, record_documents,
    text,
};
use super::errors::backend;
use super::filters::{after_key, broken_links, history, processed_pages};
use async_trait::async_trait;
use futures_util::TryStreamExt;
use mongodb::Collection;
use mongodb::bson::{Document, doc};
use std::collections::HashMap;
use web_crawler_actors::availability::{FetchHistory, HistoryQuery};
use web_crawler_actors::{
    BrokenLink, Document as JsonDoc, Frontier, HostRecord, PageQuery, PageRecord, PendingUrl,
    ProcessedUrl, Queries, StoreError, TrapFamily,
};
impl MongoStore {
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

#[async_trait]
impl Queries for MongoStore {
    async fn processed(&self, query: PageQuery) -> Result<Vec<ProcessedUrl>, StoreError> {
        let (filter, order) = processed_pages(&query);
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
            .map(pending_of)
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
        Ok(self
            .collect(&self.processed, broken_links(), doc! { "_id": 1 }, None, 0)
            .await?
            .iter()
            .map(broken_link_of)
            .collect())
    }

    async fn fetch_history(&self, query: HistoryQuery) -> Result<Vec<FetchHistory>, StoreError> {
        let sort = doc! { "url": 1, "d_fetch": 1, "_id": 1 };
        self.collect(&self.history, history(&query), sort, None, 0)
            .await?
            .iter()
            .map(history_of)
            .collect()
    }

    async fn hosts(&self) -> Result<Vec<HostRecord>, StoreError> {
        self.collect(&self.hosts, doc! {}, doc! { "_id": 1 }, None, 0)
            .await?
            .iter()
            .map(host_of)
            .collect()
    }

    async fn trap_families(&self, samples: usize) -> Result<Vec<TrapFamily>, StoreError> {
        let mut refused: HashMap<String, u64> = HashMap::new();
        let mut cursor = self
            .pending
            .aggregate(vec![
                doc! { "$match": { "status": TRAPPED } },
                doc! { "$group": { "_id": "$trap_family", "n": { "$sum": 1 } } },
            ])
            .await
            .map_err(backend)?;
        while let Some(d) = cursor.try_next().await.map_err(backend)? {
            refused.insert(
                text(&d, "_id").unwrap_or_default(),
                int(&d, "n").unwrap_or(0) as u64,
            );
        }
        let mut families = Vec::new();
        for closed in self.trap_closures().await? {
            let refused = refused.get(&closed.family).copied().unwrap_or(0);
            let samples = if refused > 0 && samples > 0 {
                self.collect(
                    &self.pending,
                    doc! { "status": TRAPPED, "trap_family": &closed.family },
                    doc! { "d_change": 1, "_id": 1 },
                    Some(samples),
                    0,
                )
                .await?
                .iter()
                .filter_map(|d| text(d, "url"))
                .collect()
            } else {
                Vec::new()
            };
            families.push(TrapFamily {
                closed,
                refused,
                samples,
            });
        }
        Ok(families)
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
        self.pages_per("$host").await
    }

    async fn pages_per_node(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.pages_per("$node").await
    }
}

impl MongoStore {
    /// Processed page counts by `field`, in its order.
    async fn pages_per(&self, field: &str) -> Result<Vec<(String, u64)>, StoreError> {
        let mut cursor = self
            .processed
            .aggregate(vec![
                doc! { "$group": { "_id": field, "n": { "$sum": 1 } } },
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
