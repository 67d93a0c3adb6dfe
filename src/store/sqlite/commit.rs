//! The commit path: links into the frontier, pages, records, retries, hosts.

use super::columns::{json_err, operation_col, opt_int_col, to_i64};
use super::errors::Fail;
use super::referrals::write_referrals;
use super::rows::record_key;
use super::schema::{
    CLEAR_CHECK, CLEAR_VALIDATORS, DELETE_PENDING, DUE_CHECKS, INSERT_PENDING, INSERT_TRAPPED,
    MERGE_PENDING, NODE_PAGE_COUNT, NODE_PAGES_AFTER, PENDING_AT, PROCESSED_AT, RECORD_DELETE,
    REOPEN_CLOSURE, REOPEN_TRAPPED, RETRY, SAME_CONTENT, SET_CHECK_EVERY, TOUCH_PROCESSED,
    TRAP_CLAIMED, TRIM_HISTORY, UNTRAP, WRITE_CLOSURE, WRITE_HISTORY, WRITE_HOST, WRITE_PROCESSED,
    WRITE_RECORD,
};
use crate::kill_points::{self, KillPoint};
use crate::store::seen::{FileKeys, PendingRow, Seen, SeenWindow, key_hash};
use rusqlite::{Connection, OptionalExtension, ToSql, Transaction, params};
use std::collections::HashSet;
use web_crawler_actors::frontier_rules::{LinkDecision, decide_link, dedupe_by_content};
use web_crawler_actors::traps::TrapClosure;
use web_crawler_actors::{
    ClosedFamily, CommitBatch, CommitSummary, Document, HandOver, Millis, NewLink, ProcessedPage,
    Record, TrapMark, TrappedClaim, TrappedLink, UrlKey, duplicate_record,
};

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
                let pending = PendingRow {
                    id: row.get(0)?,
                    stored: row.get::<_, Option<f64>>(1)?.unwrap_or(0.0),
                    unsaved: 0.0,
                    depth: row.get(2)?,
                    redirect_hops: row.get(3)?,
                };
                Ok(if row.get(4)? {
                    Seen::Trapped(pending)
                } else {
                    Seen::Pending(pending)
                })
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

    /// `rec`'s URL is processed: its pending row goes, and the window
    /// knows it as processed now.
    fn processed(&mut self, rec: &web_crawler_actors::PageRecord) -> Result<(), Fail> {
        self.tx
            .prepare_cached(DELETE_PENDING)?
            .execute(params![rec.url, rec.operation.key()])?;
        self.remember(
            key_hash(&rec.url, &rec.operation),
            Seen::Processed { at: self.now },
        )
    }

    /// Record `seen`; credit of keys that fall out of the window is written.
    fn remember(&mut self, key: u64, seen: Seen) -> Result<(), Fail> {
        let fell_out = self.seen.insert(key, seen);
        if !fell_out.is_empty() {
            write_credit(self.tx, fell_out)?;
        }
        if self.seen.filter_is_full() {
            self.seen.refill(file_keys(self.tx)?);
        }
        Ok(())
    }

    /// What the window or the file holds for `link`'s key, now in the
    /// window.
    fn known(&mut self, key: u64, link: &NewLink) -> Result<(), Fail> {
        if self.seen.get(key).is_none()
            && self.seen.may_be_in_file(key)
            && let Some(found) = self.lookup(&link.url, &link.operation.key())?
        {
            self.remember(key, found)?;
        }
        Ok(())
    }

    /// [`Self::known`] for the links the window does not hold and the file
    /// may, in the URL index's order, so that the lookups walk the index's
    /// pages in turn (at a million pages most links are such lookups; the
    /// order saved 2-4% there: the rows found are still read at random).
    fn look_up_in_order<'l>(
        &mut self,
        links: impl Iterator<Item = &'l NewLink>,
    ) -> Result<(), Fail> {
        let mut wanted: Vec<(&NewLink, u64)> = links
            .map(|link| (link, key_hash(&link.url, &link.operation)))
            .filter(|&(_, key)| self.seen.get(key).is_none() && self.seen.may_be_in_file(key))
            .collect();
        wanted.sort_unstable_by(|a, b| a.0.url.cmp(&b.0.url));
        for (link, key) in wanted {
            self.known(key, link)?;
        }
        Ok(())
    }

    /// The paper's `add_pending_url` for one link, as [`decide_link`] rules
    /// it (the referral itself is the referrer's list: [`write_referrals`]).
    /// A URL kept `trapped` is pending again: the trap defence admitted
    /// this link to it.
    fn upsert_link(&mut self, link: &NewLink) -> Result<Upserted, Fail> {
        let key = key_hash(&link.url, &link.operation);
        self.known(key, link)?;
        let mut untrapped = 0;
        if let Some(Seen::Trapped(row)) = self.seen.get(key).copied() {
            self.seen.insert(key, Seen::Pending(row));
            untrapped = (self.tx.prepare_cached(UNTRAP)?).execute(params![row.id, self.now])?;
            self.summary.queued += untrapped as u64;
        }
        match self.seen.get_mut(key) {
            Some(Seen::Pending(row) | Seen::Trapped(row)) => {
                self.summary.merged += 1;
                if let Some(every) = link.check_every_ms {
                    self.tx
                        .prepare_cached(SET_CHECK_EVERY)?
                        .execute(params![row.id, every])?;
                }
                if let Some(credit) = row.merge(link.priority, link.depth, link.redirect_hops) {
                    self.tx.prepare_cached(MERGE_PENDING)?.execute(params![
                        row.id,
                        credit,
                        link.depth,
                        link.redirect_hops
                    ])?;
                }
                Ok(if untrapped > 0 {
                    Upserted::Queued
                } else {
                    Upserted::Waiting
                })
            }
            Some(Seen::Processed { at })
                if decide_link(Some(*at), link.modified, self.now, self.reprocess_after_ms)
                    == LinkDecision::ReferralOnly =>
            {
                self.summary.merged += 1;
                Ok(Upserted::ReferralOnly)
            }
            // Unknown, or processed long enough ago to be queued again.
            _ => {
                let row = self.insert_row(link, None)?;
                self.summary.queued += 1;
                if let Some(row) = row {
                    self.remember(key, Seen::Pending(row))?;
                }
                Ok(Upserted::Queued)
            }
        }
    }
}

/// What [`Commit::upsert_link`] did with a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Upserted {
    /// A new pending row, or one kept `trapped` pending again.
    Queued,
    /// Merged into the row waiting (pending, or being fetched).
    Waiting,
    /// Processed and not due again: only the referral.
    ReferralOnly,
}

impl Commit<'_> {
    /// A link the trap defence refused: kept `trapped`, with its rule and
    /// family, when the store holds nothing of its URL (a pending,
    /// processing or processed URL, or one refused already, stays as it
    /// is).
    fn keep_trapped(&mut self, trapped: &TrappedLink) -> Result<(), Fail> {
        let link = &trapped.link;
        let key = key_hash(&link.url, &link.operation);
        self.known(key, link)?;
        if self.seen.get(key).is_some() {
            return Ok(());
        }
        match self.insert_row(link, Some(&trapped.trap))? {
            Some(row) => self.remember(key, Seen::Trapped(row)),
            // Known to the file after all (the window forgot it).
            None => Ok(()),
        }
    }

    /// A new `pending_urls` row for `link`: `pending`, or `trapped` with
    /// the trap defence's mark. The row as the window knows it; `None`
    /// when the file held the URL already (nothing was written).
    fn insert_row(
        &self,
        link: &NewLink,
        trap: Option<&TrapMark>,
    ) -> Result<Option<PendingRow>, Fail> {
        let operation = link.operation.key();
        let rule = trap.map(|t| t.rule.code());
        let family = trap.map(|t| t.family.as_str());
        let values: [&dyn ToSql; 10] = [
            &link.url,
            &operation,
            &link.host,
            &self.now,
            &link.depth,
            &link.priority,
            &link.redirect_hops,
            &link.check_every_ms,
            &rule,
            &family,
        ];
        let (sql, values) = match trap {
            None => (INSERT_PENDING, &values[..8]),
            Some(_) => (INSERT_TRAPPED, &values[..]),
        };
        if self.tx.prepare_cached(sql)?.execute(values)? == 0 {
            return Ok(None);
        }
        Ok(Some(PendingRow {
            id: self.tx.last_insert_rowid(),
            stored: link.priority,
            unsaved: 0.0,
            depth: link.depth,
            redirect_hops: link.redirect_hops,
        }))
    }

    /// A claimed URL the trap defence refused: `processing` → `trapped`.
    fn trap_claimed(&mut self, claim: &TrappedClaim) -> Result<(), Fail> {
        let changed = self.tx.prepare_cached(TRAP_CLAIMED)?.execute(params![
            claim.key.url,
            claim.key.operation.key(),
            claim.trap.rule.code(),
            claim.trap.family,
            self.now,
        ])?;
        let key = key_hash(&claim.key.url, &claim.key.operation);
        if changed > 0
            && let Some(Seen::Pending(row)) = self.seen.get(key).copied()
        {
            self.seen.insert(key, Seen::Trapped(row));
        }
        Ok(())
    }
}

/// A family the trap defence closed: its first closure is kept.
fn write_closure(tx: &Transaction<'_>, closure: &TrapClosure) -> Result<(), Fail> {
    let closed = ClosedFamily::of(closure);
    let detail = serde_json::to_string(&closed.detail).map_err(json_err)?;
    tx.prepare_cached(WRITE_CLOSURE)?.execute(params![
        closed.family,
        closed.host,
        closed.rule.code(),
        closed.scope.code(),
        closed.reason,
        detail,
        closed.closed_at,
        closed.pages,
    ])?;
    Ok(())
}

/// An operator reopens `family` at `now`: its closure is allowed for good
/// and its trapped URLs are pending again; how many (`None`: the file
/// knows no family of that name). The seen window may still know some of
/// them as trapped: a link to one makes it pending again, which it is.
pub(super) fn reopen_trap_family(
    tx: &Transaction<'_>,
    family: &str,
    now: Millis,
) -> Result<Option<u64>, Fail> {
    let closures = tx
        .prepare_cached(REOPEN_CLOSURE)?
        .execute(params![family, now])?;
    let released = tx
        .prepare_cached(REOPEN_TRAPPED)?
        .execute(params![family, now])?;
    Ok((closures > 0 || released > 0).then_some(released as u64))
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
    // In the table's order: a window's worth of rows (at a million pages
    // a fifth of the crawl's CPU went here) in one pass over the pages
    // they share, not a random page each.
    let mut credit: Vec<(i64, f64)> = credit.into_iter().collect();
    credit.sort_unstable_by_key(|&(id, _)| id);
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

/// Remove the records of `collection` with these keys.
pub(super) fn delete_records(
    tx: &Transaction<'_>,
    collection: &str,
    keys: &[Document],
) -> Result<u64, Fail> {
    let mut stmt = tx.prepare_cached(RECORD_DELETE)?;
    let mut removed = 0;
    for key in keys {
        removed += stmt.execute(params![collection, record_key(key)?])? as u64;
    }
    Ok(removed)
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
    for closure in &batch.closures {
        write_closure(tx, closure)?;
    }
    for claim in &batch.trapped_claims {
        c.trap_claimed(claim)?;
    }
    for trapped in &batch.trapped {
        c.keep_trapped(trapped)?;
    }
    // A seed waiting behind one queued earlier in this batch was not
    // waiting before it.
    let mut seeds_queued = HashSet::new();
    for link in &batch.seeds {
        let key = UrlKey {
            url: link.url.clone(),
            operation: link.operation.clone(),
        };
        match c.upsert_link(link)? {
            Upserted::Queued => {
                seeds_queued.insert(key);
            }
            Upserted::Waiting if !seeds_queued.contains(&key) => {
                c.summary.seeds_queued_already.push(key);
            }
            Upserted::Waiting | Upserted::ReferralOnly => {}
        }
    }
    c.look_up_in_order(batch.pages.iter().flat_map(|page| {
        page.links
            .iter()
            .chain(page.trapped.iter().map(|t| &t.link))
    }))?;
    for page in &batch.pages {
        let rec = &page.record;
        write_history(tx, page, now, batch.history_keep)?;
        if page.not_modified {
            // A 304: the stored page, its links and records stand.
            tx.prepare_cached(TOUCH_PROCESSED)?.execute(params![
                rec.url,
                now,
                rec.fetch_ms,
                rec.node,
                rec.etag,
                rec.last_modified,
                rec.d_next_check,
                rec.check_interval_ms,
                rec.check_every_ms,
            ])?;
            c.processed(rec)?;
            continue;
        }
        let dup = match rec.content_hash {
            Some(hash) if dedupe_by_content(rec.http_returncode) => {
                duplicate_of(tx, &rec.url, hash)?
            }
            _ => None,
        };
        if dup.is_some() {
            c.summary.duplicates.push(rec.url.clone());
            write_record(tx, &duplicate_record(&rec.url), now)?;
        } else {
            for link in &page.links {
                c.upsert_link(link)?;
            }
            for trapped in &page.trapped {
                c.keep_trapped(trapped)?;
            }
            write_referrals(
                tx,
                &rec.url,
                page.links
                    .iter()
                    .chain(page.trapped.iter().map(|t| &t.link)),
            )?;
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
            rec.etag,
            rec.last_modified,
            rec.d_next_check,
            rec.check_interval_ms,
            rec.check_every_ms,
        ])?;
        c.processed(rec)?;
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
            host.robots_status.as_str(),
            host.robots_http_code,
            host.robots_error,
            host.robots_txt,
            host.robots_fetched_at,
            delay,
            sitemaps,
        ])?;
    }
    // #47's aimed kills: the whole batch written, the transaction open.
    kill_points::reached(KillPoint::StoreCommit);
    Ok(summary)
}

/// A page's `fetch_history` entry, and, for a URL fetched before, its
/// oldest beyond `keep`.
fn write_history(
    tx: &Transaction<'_>,
    page: &ProcessedPage,
    now: Millis,
    keep: usize,
) -> Result<(), Fail> {
    if keep == 0 {
        return Ok(());
    }
    let rec = &page.record;
    tx.prepare_cached(WRITE_HISTORY)?.execute(params![
        rec.url,
        rec.host,
        now,
        rec.http_returncode,
        rec.fetch_ms,
        rec.content_length,
        rec.content_hash.map(u64::cast_signed),
        page.changed,
        rec.error,
    ])?;
    if page.fetched_before {
        tx.prepare_cached(TRIM_HISTORY)?
            .execute(params![rec.url, to_i64(keep, "history_keep")?])?;
    }
    Ok(())
}

/// Queue again the watched URLs due by `now` (up to `limit`), as a link
/// that says the page changed now would ([`Commit::upsert_link`], so the
/// seen window and the file-key filter stay in step), and clear their next
/// check until they are processed again.
pub(super) fn requeue_due(
    tx: &Transaction<'_>,
    seen: &mut SeenWindow,
    now: Millis,
    limit: usize,
) -> Result<u64, Fail> {
    let mut due = Vec::new();
    {
        let mut stmt = tx.prepare_cached(DUE_CHECKS)?;
        let mut rows = stmt.query(params![now, to_i64(limit, "limit")?])?;
        while let Some(row) = rows.next()? {
            due.push(page_as_link(row, now)?);
        }
    }
    queue_again(tx, seen, now, &due, CLEAR_CHECK)
}

/// A processed page's row (URL, operation, host, depth) as a link that
/// says the page changed at `now`.
fn page_as_link(row: &rusqlite::Row<'_>, now: Millis) -> Result<NewLink, Fail> {
    let url = row.get(0)?;
    let operation = operation_col(row, 1, "processed_urls")?;
    let link = NewLink::new(url, row.get(2)?, operation, row.get(3)?, 1.0);
    Ok(link.changed_at(now))
}

/// Queue `links` ([`Commit::upsert_link`]), then run `clear` on each one's
/// processed row; how many were queued.
fn queue_again(
    tx: &Transaction<'_>,
    seen: &mut SeenWindow,
    now: Millis,
    links: &[NewLink],
    clear: &str,
) -> Result<u64, Fail> {
    let mut c = Commit {
        tx,
        seen,
        now,
        reprocess_after_ms: None,
        summary: CommitSummary::default(),
    };
    for link in links {
        c.upsert_link(link)?;
        tx.prepare_cached(clear)?.execute([&link.url])?;
    }
    Ok(c.summary.queued)
}

/// A departed node's hand-over ([`Frontier::hand_over`]): up to `limit`
/// of the pages `node` fetched, by URL after `after`, queued again as a
/// link that says the page changed now would, their validators cleared so
/// that the new owner's fetch is whole; and how many pages are still the
/// node's.
///
/// [`Frontier::hand_over`]: web_crawler_actors::Frontier::hand_over
pub(super) fn hand_over(
    tx: &Transaction<'_>,
    seen: &mut SeenWindow,
    node: &str,
    after: Option<&str>,
    limit: usize,
    now: Millis,
) -> Result<HandOver, Fail> {
    let mut pages = Vec::new();
    if limit > 0 {
        let mut stmt = tx.prepare_cached(NODE_PAGES_AFTER)?;
        let mut rows = stmt.query(params![node, after.unwrap_or(""), to_i64(limit, "limit")?])?;
        while let Some(row) = rows.next()? {
            pages.push(page_as_link(row, now)?);
        }
    }
    let last = HandOver::last_read(&pages, limit);
    let queued = queue_again(tx, seen, now, &pages, CLEAR_VALIDATORS)?;
    let waiting: i64 = tx
        .prepare_cached(NODE_PAGE_COUNT)?
        .query_row([node], |row| row.get(0))?;
    Ok(HandOver {
        queued,
        last,
        waiting: waiting.max(0) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::test_support::*;
    use web_crawler_actors::{Frontier, OperationSpec, Queries, Retry};

    #[tokio::test]
    async fn another_operation_is_queued_again() {
        let (_dir, _path, store) = open_temp();
        crawl_one(&store, "http://a/x", 1_000).await;
        let mut search = link("http://a/x", 0, 1.0);
        search.operation = OperationSpec::search_text("needle");
        let s = store
            .commit((seeds(2_000, vec![search])).into())
            .await
            .unwrap();
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
            .commit((pages(1_000, None, vec![original, copy])).into())
            .await
            .unwrap();
        assert_eq!((s.queued, s.duplicates.len()), (1, 1));
        assert_eq!(pending_urls(&store).await, vec!["http://a/from-orig"]);
        let copy = store.processed_url("http://b/copy").await.unwrap().unwrap();
        assert_eq!(copy.duplicate_of.as_deref(), Some("http://a/orig"));
        assert_eq!(copy.record.content_hash, Some(u64::MAX - 7));
        assert_eq!(copy.record.out_links, vec!["http://b/from-copy"]);
        let orig = store.processed_url("http://a/orig").await.unwrap().unwrap();
        assert_eq!(orig.duplicate_of, None);

        // Re-processing the original is not a duplicate of its own copy.
        let again = page("http://a/orig", Some(200), Some(u64::MAX - 7), vec![]);
        let s = store
            .commit((pages(2_000, None, vec![again])).into())
            .await
            .unwrap();
        assert!(
            s.duplicates.is_empty(),
            "its copy does not make it a duplicate"
        );
        let orig = store.processed_url("http://a/orig").await.unwrap().unwrap();
        assert_eq!(orig.duplicate_of, None);
        // Re-processing a page alone with its hash: not a duplicate.
        let solo = page("http://c/solo", Some(200), Some(42), vec![]);
        store
            .commit((pages(3_000, None, vec![solo.clone()])).into())
            .await
            .unwrap();
        let s = store
            .commit((pages(4_000, None, vec![solo])).into())
            .await
            .unwrap();
        assert!(s.duplicates.is_empty());
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
            .commit((pages(1_000, None, vec![e1, e2, ok])).into())
            .await
            .unwrap();
        assert_eq!((s.queued, s.duplicates.len()), (3, 0));
        for url in ["http://a/missing1", "http://a/missing2", "http://a/ok"] {
            let p = store.processed_url(url).await.unwrap().unwrap();
            assert_eq!(p.duplicate_of, None, "{url}");
        }
        // A second 200 page with that hash copies the 200 one, not a 404.
        let ok2 = page("http://a/ok2", Some(200), Some(7), vec![]);
        store
            .commit((pages(2_000, None, vec![ok2])).into())
            .await
            .unwrap();
        let p = store.processed_url("http://a/ok2").await.unwrap().unwrap();
        assert_eq!(p.duplicate_of.as_deref(), Some("http://a/ok"));
    }

    #[tokio::test]
    async fn retries_bump_attempts_and_respect_not_before() {
        let (_dir, _path, store) = open_temp();
        store
            .commit((seeds(0, vec![link("http://a/flaky", 0, 1.0)])).into())
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
        store.commit(retry.into()).await.unwrap();
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
            .commit((seeds(4_999, vec![link("http://a/flaky", 0, 1.0)])).into())
            .await
            .unwrap();
        let jobs = store.claim(claim_req(5_000, 10, 10)).await.unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].attempts, 1);
        assert_eq!(jobs[0].priority, 2.0);
    }

    #[tokio::test]
    async fn self_links_and_large_batches() {
        let (_dir, _path, store) = open_temp();
        store
            .commit((seeds(0, vec![link("http://a/", 0, 1.0)])).into())
            .await
            .unwrap();
        store.claim(claim_req(0, 10, 10)).await.unwrap();
        let mut links: Vec<NewLink> = (0..5_000)
            .map(|i| link(&format!("http://h{}/p{i}", i % 50), 1, 0.001))
            .collect();
        links.push(link("http://a/", 1, 0.001));
        let started = std::time::Instant::now();
        let s = store
            .commit((pages(10, None, vec![page("http://a/", Some(200), None, links)])).into())
            .await
            .unwrap();
        tracing::info!(elapsed = ?started.elapsed(), "5001-link commit");
        assert_eq!((s.queued, s.merged), (5_000, 1));
        let home = store.processed_url("http://a/").await.unwrap().unwrap();
        assert_eq!(home.referral_list, vec!["http://a/"]);
        assert_eq!(home.referral_count, 1);
        assert_eq!(store.counts().await.unwrap().pending, 5_000);
    }
}
