//! The frontier over `pending_urls`: claims (expired leases first, then
//! the best candidates round-robin over hosts), leases and their release,
//! and watched URLs queued again when due.

use super::commit::merge_links;
use super::documents::{closed_family_of, int, job_of, last_fetch_of, operation_of, text};
use super::errors::{backend, corrupt};
use super::{MongoStore, PENDING, PROCESSING, TRAPPED};
use async_trait::async_trait;
use futures_util::TryStreamExt;
use mongodb::Collection;
use mongodb::bson::{Bson, Document, doc, oid::ObjectId};
use std::collections::BTreeMap;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use web_crawler_actors::{
    ClaimRequest, ClosedFamily, CommitBatch, CommitSummary, Frontier, HandOver, Job, Millis,
    NewLink, ROBOTS_BLOCKED, SEARCH_RESULTS, StoreCounts, StoreError, UrlKey,
};
impl MongoStore {
    /// Up to `limit` processed pages matching `filter`, in `sort` order, as
    /// links that say each page changed at `now`.
    async fn pages_as_links(
        &self,
        filter: Document,
        sort: Document,
        limit: usize,
        now: Millis,
    ) -> Result<Vec<NewLink>, StoreError> {
        let pages: Vec<Document> = self
            .processed
            .find(filter)
            .sort(sort)
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .projection(doc! { "operation": 1, "op_key": 1, "host": 1, "depth": 1 })
            .await
            .map_err(backend)?
            .try_collect()
            .await
            .map_err(backend)?;
        pages
            .iter()
            .map(|d| {
                let url = d.get_str("_id").map_err(corrupt)?.to_string();
                let host = text(d, "host").unwrap_or_default();
                let depth = int(d, "depth").unwrap_or(0) as u32;
                let link = NewLink::new(url, host, operation_of(d)?, depth, 1.0);
                Ok(link.changed_at(now))
            })
            .collect()
    }

    /// Queue `links` as new links to pages already processed; how many
    /// were queued.
    async fn queue_again(&self, links: &[NewLink], now: Millis) -> Result<u64, StoreError> {
        let urls: Vec<&str> = links.iter().map(|l| l.url.as_str()).collect();
        let mut processed = self.processed_states(urls).await?;
        let mut summary = CommitSummary::default();
        for link in merge_links(links) {
            self.upsert_link(&link, None, &mut processed, now, None, &mut summary)
                .await?;
        }
        Ok(summary.queued)
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
            last.insert(url, last_fetch_of(&d));
        }
        for job in jobs {
            job.set_last(last.remove(&job.url));
        }
        Ok(())
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
}

fn key_set(keys: &[UrlKey]) -> HashSet<(String, String)> {
    keys.iter()
        .map(|k| (k.url.clone(), k.operation.key()))
        .collect()
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
        let chosen = web_crawler_actors::frontier_rules::round_robin(
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
        let mut trapped_by_rule = BTreeMap::new();
        let mut cursor = self
            .pending
            .aggregate(vec![
                doc! { "$match": { "status": TRAPPED } },
                doc! { "$group": { "_id": "$trap_rule", "n": { "$sum": 1 } } },
            ])
            .await
            .map_err(backend)?;
        while let Some(d) = cursor.try_next().await.map_err(backend)? {
            let code = text(&d, "_id").unwrap_or_default();
            let rule = code
                .parse()
                .map_err(|e| corrupt(format!("pending_urls.trap_rule: {e}")))?;
            trapped_by_rule.insert(rule, int(&d, "n").unwrap_or(0) as u64);
        }
        Ok(StoreCounts {
            trapped: trapped_by_rule.values().sum(),
            trapped_by_rule,
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

    async fn frontier_empty(&self) -> Result<bool, StoreError> {
        // The index on (status, not_before, priority) answers it: no scan.
        let any = self
            .pending
            .find_one(doc! { "status": { "$in": [PENDING, PROCESSING] } })
            .projection(doc! { "_id": 1 })
            .await
            .map_err(backend)?;
        Ok(any.is_none())
    }

    async fn close(&self) {
        if let Some(owner) = &self.owner {
            owner.release().await;
        }
    }

    async fn requeue_due(&self, now: Millis, limit: usize) -> Result<u64, StoreError> {
        let due = self
            .pages_as_links(
                doc! { "d_next_check": { "$lte": now } },
                doc! { "d_next_check": 1 },
                limit,
                now,
            )
            .await?;
        if due.is_empty() {
            return Ok(0);
        }
        // Queued as a link saying the page changed now would be; the next
        // check is cleared after, so a crash in between queues it again
        // (a merge).
        let queued = self.queue_again(&due, now).await?;
        let urls: Vec<&str> = due.iter().map(|l| l.url.as_str()).collect();
        self.processed
            .update_many(
                doc! { "_id": { "$in": urls } },
                doc! { "$unset": { "d_next_check": "" } },
            )
            .await
            .map_err(backend)?;
        Ok(queued)
    }

    async fn hand_over(
        &self,
        node: &str,
        after: Option<&str>,
        limit: usize,
        now: Millis,
    ) -> Result<HandOver, StoreError> {
        let mut queued = 0;
        let mut last = None;
        if limit > 0 {
            let links = self
                .pages_as_links(
                    doc! { "node": node, "_id": { "$gt": after.unwrap_or("") } },
                    doc! { "_id": 1 },
                    limit,
                    now,
                )
                .await?;
            if links.len() == limit {
                last = links.last().map(|l| l.url.clone());
            }
            if !links.is_empty() {
                // Validators first: a crash after them queues the page
                // again at the next call (from `after`), a merge.
                let urls: Vec<&str> = links.iter().map(|l| l.url.as_str()).collect();
                self.processed
                    .update_many(
                        doc! { "_id": { "$in": urls } },
                        doc! { "$unset": { "etag": "", "last_modified": "" } },
                    )
                    .await
                    .map_err(backend)?;
                queued = self.queue_again(&links, now).await?;
            }
        }
        let waiting = self
            .processed
            .count_documents(doc! { "node": node })
            .await
            .map_err(backend)?;
        Ok(HandOver {
            queued,
            last,
            waiting,
        })
    }

    async fn trap_closures(&self) -> Result<Vec<ClosedFamily>, StoreError> {
        let docs: Vec<Document> = self
            .closures
            .find(doc! {})
            .sort(doc! { "host": 1, "_id": 1 })
            .await
            .map_err(backend)?
            .try_collect()
            .await
            .map_err(backend)?;
        docs.iter().map(closed_family_of).collect()
    }

    async fn reopen_trap_family(
        &self,
        family: &str,
        now: Millis,
    ) -> Result<Option<u64>, StoreError> {
        self.check_owner()?;
        // The closure first: a crash in between leaves it allowed, and
        // reopening again releases the URLs.
        let closure = self
            .closures
            .update_one(
                doc! { "_id": family },
                doc! { "$set": { "reopened_at": now, "allowed": true } },
            )
            .await
            .map_err(backend)?;
        let released = self
            .pending
            .update_many(
                doc! { "status": TRAPPED, "trap_family": family },
                doc! {
                    "$set": { "status": PENDING, "not_before": 0_i64, "d_change": now },
                    "$unset": { "trap_rule": "", "trap_family": "" },
                },
            )
            .await
            .map_err(backend)?
            .modified_count;
        Ok((closure.matched_count > 0 || released > 0).then_some(released))
    }

    async fn nodes_with_pages(&self) -> Result<Vec<String>, StoreError> {
        // One seek a node down the index on the pages' node.
        let mut nodes: Vec<String> = Vec::new();
        loop {
            let after = nodes.last().map_or("", String::as_str);
            let next = self
                .processed
                .find_one(doc! { "node": { "$gt": after } })
                .sort(doc! { "node": 1 })
                .projection(doc! { "node": 1 })
                .await
                .map_err(backend)?;
            match next.as_ref().and_then(|d| d.get_str("node").ok()) {
                Some(node) => nodes.push(node.to_string()),
                None => return Ok(nodes),
            }
        }
    }
}
