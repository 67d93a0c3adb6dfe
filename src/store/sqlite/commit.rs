//! The commit path: links into the frontier, pages, records, retries, hosts.

use super::referrals::write_referrals;
use super::rows::{Fail, json_err, operation_col, opt_int_col, to_i64};
use super::schema::{
    DELETE_PENDING, INSERT_PENDING, MERGE_PENDING, PENDING_AT, PROCESSED_AT, RETRY, SAME_CONTENT,
    WRITE_HOST, WRITE_PROCESSED, WRITE_RECORD,
};
use crate::store::seen::{FileKeys, PendingRow, Seen, SeenWindow, key_hash};
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use web_crawler_actors::frontier::{LinkDecision, decide_link, dedupe_by_content};
use web_crawler_actors::{CommitBatch, CommitSummary, Document, Millis, NewLink, Record};

/// Keys the file-key filter is sized for at least (about 1.2 MB at 1% false
/// "maybe"s); it is rebuilt twice the file's size whenever it fills.
const FILE_KEYS_MIN: usize = 1 << 20;

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
pub(super) fn file_keys(conn: &Connection) -> Result<FileKeys, Fail> {
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
pub(super) fn write_credit(
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
pub(super) fn apply_commit(
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
