//! A batch's writes (see [`CommitBatch`]): each one idempotent single-document
//! operation, in the batch's order.

use super::documents::{
    bson_doc, closure_doc, history_doc, host_doc, millis, operation_of, processed_doc, strings,
};
use super::errors::{backend, corrupt, is_duplicate_key};
use super::{MongoStore, PENDING, PROCESSING, TRAPPED};
use futures_util::TryStreamExt;
use mongodb::IndexModel;
use mongodb::bson::{Bson, DateTime, Document, doc};
use mongodb::options::{IndexOptions, ReturnDocument};
use std::collections::{HashMap, HashSet};
use web_crawler_actors::frontier_rules::{LinkDecision, decide_link, dedupe_by_content};
use web_crawler_actors::traps::TrapClosure;
use web_crawler_actors::{
    ClosedFamily, CommitBatch, CommitSummary, Millis, NewLink, OperationSpec, PageRecord,
    ProcessedPage, Record, StoreError, TrappedClaim, TrappedLink, UrlKey, duplicate_record,
};
impl MongoStore {
    /// Apply a batch (see [`CommitBatch`]): each write is one idempotent
    /// single-document operation, in the batch's order.
    pub(super) async fn write_batch(
        &self,
        batch: &CommitBatch,
    ) -> Result<CommitSummary, StoreError> {
        let mut summary = CommitSummary::default();
        let now = batch.now;
        let mut urls: Vec<&str> = batch.seeds.iter().map(|l| l.url.as_str()).collect();
        urls.extend(batch.trapped.iter().map(|t| t.link.url.as_str()));
        for page in &batch.pages {
            urls.extend(page.links.iter().map(|l| l.url.as_str()));
            urls.extend(page.trapped.iter().map(|t| t.link.url.as_str()));
        }
        urls.sort_unstable();
        urls.dedup();
        let mut processed = self.processed_states(urls).await?;
        // A family's closure before the URLs it refused.
        for closure in &batch.closures {
            self.write_closure(closure).await?;
        }
        for claim in &batch.trapped_claims {
            self.trap_claimed(claim, now).await?;
        }
        for trapped in &batch.trapped {
            self.keep_trapped(trapped, None, &processed, now).await?;
        }
        let trapped_seeds = self.trapped(&batch.seeds).await?;
        self.untrap(&batch.seeds, now, &mut summary).await?;
        for link in merge_links(&batch.seeds) {
            let upserted = self
                .upsert_link(
                    &link,
                    None,
                    &mut processed,
                    now,
                    batch.reprocess_after_ms,
                    &mut summary,
                )
                .await?;
            let key = (link.url, link.operation);
            if upserted == Upserted::Waiting && !trapped_seeds.contains(&key) {
                let (url, operation) = key;
                summary.seeds_queued_already.push(UrlKey { url, operation });
            }
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

    /// The first closure of a family is kept (`trap_closures`, by name).
    async fn write_closure(&self, closure: &TrapClosure) -> Result<(), StoreError> {
        let document = closure_doc(&ClosedFamily::of(closure))?;
        let family = closure.family();
        match self
            .closures
            .update_one(doc! { "_id": &family }, doc! { "$setOnInsert": document })
            .upsert(true)
            .await
        {
            // Another writer stored it first: it is kept.
            Err(e) if is_duplicate_key(&e) => Ok(()),
            other => other.map(drop).map_err(backend),
        }
    }

    /// A claimed URL the trap defence refused: `processing` → `trapped`.
    async fn trap_claimed(&self, claim: &TrappedClaim, now: Millis) -> Result<(), StoreError> {
        self.pending
            .update_one(
                doc! {
                    "url": &claim.key.url,
                    "op_key": claim.key.operation.key(),
                    "status": PROCESSING,
                },
                doc! {
                    "$set": {
                        "status": TRAPPED,
                        "trap_rule": claim.trap.rule.code(),
                        "trap_family": &claim.trap.family,
                        "d_change": now,
                    },
                    "$unset": { "lease_until": "", "lease_owner": "", "claim_token": "" },
                },
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// A link the trap defence refused (found on `referrer`, if any): kept
    /// `trapped` with its rule and family when the store holds nothing of
    /// its URL; a pending, processing or trapped URL only gains the
    /// referral, a processed one too (never a trapped copy).
    async fn keep_trapped(
        &self,
        trapped: &TrappedLink,
        referrer: Option<&str>,
        processed: &HashMap<String, ProcessedState>,
        now: Millis,
    ) -> Result<(), StoreError> {
        let link = &trapped.link;
        let op_key = link.operation.key();
        if processed.get(&link.url).is_some_and(|p| p.op_key == op_key) {
            if let Some(referrer) = referrer {
                self.add_processed_referral(&link.url, referrer).await?;
            }
            return Ok(());
        }
        let mut insert = doc! {
            "operation": &link.operation.0,
            "host": &link.host,
            "status": TRAPPED,
            "trap_rule": trapped.trap.rule.code(),
            "trap_family": &trapped.trap.family,
            "d_change": now,
            "attempts": 0_i32,
            "not_before": 0_i64,
            "priority": link.priority,
            "depth": link.depth as i32,
            "redirect_hops": link.redirect_hops as i32,
        };
        if let Some(every) = link.check_every_ms {
            insert.insert("check_every_ms", every);
        }
        let referrals: Vec<&str> = referrer.into_iter().collect();
        let filter = doc! { "url": &link.url, "op_key": &op_key };
        let update = doc! {
            "$setOnInsert": insert,
            "$addToSet": { "referral_list": { "$each": referrals } },
        };
        match self
            .pending
            .update_one(filter.clone(), update.clone())
            .upsert(true)
            .await
        {
            Err(e) if is_duplicate_key(&e) => {
                self.pending
                    .update_one(filter, update)
                    .upsert(true)
                    .await
                    .map_err(backend)?;
            }
            other => {
                other.map_err(backend)?;
            }
        }
        Ok(())
    }

    /// The keys of `links` kept `trapped` now: queued by the links, not
    /// waiting before them.
    async fn trapped(
        &self,
        links: &[NewLink],
    ) -> Result<HashSet<(String, OperationSpec)>, StoreError> {
        if links.is_empty() {
            return Ok(HashSet::new());
        }
        let urls: Vec<&str> = links.iter().map(|l| l.url.as_str()).collect();
        let found: Vec<Document> = self
            .pending
            .find(doc! { "url": { "$in": urls }, "status": TRAPPED })
            .projection(doc! { "url": 1, "operation": 1 })
            .await
            .map_err(backend)?
            .try_collect()
            .await
            .map_err(backend)?;
        (found.iter())
            .map(|d| {
                Ok((
                    d.get_str("url").map_err(corrupt)?.to_string(),
                    operation_of(d)?,
                ))
            })
            .collect()
    }

    /// Admitted links whose URLs are kept `trapped` (their family lifted,
    /// or the refusal was their referrer's, a soft 404's): pending again,
    /// in one call.
    async fn untrap(
        &self,
        links: &[NewLink],
        now: Millis,
        summary: &mut CommitSummary,
    ) -> Result<(), StoreError> {
        if links.is_empty() {
            return Ok(());
        }
        let urls: Vec<&str> = links.iter().map(|l| l.url.as_str()).collect();
        let result = self
            .pending
            .update_many(
                doc! { "url": { "$in": urls }, "status": TRAPPED },
                doc! {
                    "$set": { "status": PENDING, "d_change": now },
                    "$unset": { "trap_rule": "", "trap_family": "" },
                },
            )
            .await
            .map_err(backend)?;
        summary.queued += result.modified_count;
        Ok(())
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
    pub(super) async fn upsert_link(
        &self,
        link: &MergedLink,
        referrer: Option<&str>,
        processed: &mut HashMap<String, ProcessedState>,
        now: Millis,
        reprocess_after_ms: Option<Millis>,
        summary: &mut CommitSummary,
    ) -> Result<Upserted, StoreError> {
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
                Ok(Upserted::ReferralOnly)
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
                // The driver's UpdateResult: `upserted_id` is set only
                // when the upsert inserted a document.
                if result.upserted_id.is_some() {
                    summary.queued += 1;
                    Ok(Upserted::Queued)
                } else {
                    summary.merged += 1;
                    Ok(Upserted::Waiting)
                }
            }
        }
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
            // Before the page: a crash between leaves the page to process again.
            self.write_record(&duplicate_record(&record.url), now)
                .await?;
        } else {
            self.untrap(&page.links, now, summary).await?;
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
            for trapped in &page.trapped {
                self.keep_trapped(trapped, Some(&record.url), processed, now)
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
        for record in &page.records {
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
        self.history
            .insert_one(history_doc(page, now))
            .await
            .map_err(backend)?;
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
    pub(super) async fn processed_states(
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
}

/// What a batch needs to know of a processed URL.
#[derive(Debug)]
pub(super) struct ProcessedState {
    op_key: String,
    d_processed: Millis,
}

/// What [`MongoStore::upsert_link`] did with a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Upserted {
    /// A new pending document.
    Queued,
    /// Merged into the document waiting (pending, being fetched, or kept
    /// `trapped`).
    Waiting,
    /// Processed and not due again: only the referral.
    ReferralOnly,
}

/// Links of one page (or the seeds) merged by (url, operation): one upsert
/// each.
#[derive(Debug)]
pub(super) struct MergedLink {
    url: String,
    host: String,
    operation: OperationSpec,
    depth: u32,
    priority: f64,
    redirect_hops: u32,
    modified: Option<Millis>,
    check_every_ms: Option<Millis>,
}

pub(super) fn merge_links(links: &[NewLink]) -> Vec<MergedLink> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::mongo::test_support::link;

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
}
