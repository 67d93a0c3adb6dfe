//! Rows read into the records the store hands out.

use super::claim::unsaved_credit;
use super::columns::{int_col, json_col, json_err, operation_col, opt_int_col, text_col};
use super::errors::Fail;
use super::referrals::referrals_of;
use super::schema::{
    BROKEN, CLOSURE_LIST, COUNTS, FRONTIER_EMPTY, HISTOGRAM, HISTORY_LIST, HOST_LIST, HOST_PAGES,
    NODE_AFTER, NODE_PAGES, PENDING_LIST, PROCESSED_AFTER, PROCESSED_ONE, PROCESSED_PAGE,
    RECORD_HEAD, RECORD_LIST, TRAPPED_BY_FAMILY, TRAPPED_BY_RULE, TRAPPED_OF_FAMILY,
};
use crate::store::seen::SeenWindow;
use rusqlite::{OptionalExtension, Row, Transaction, named_params, params};
use std::collections::{BTreeMap, HashMap};
use web_crawler_actors::availability::{FetchHistory, HistoryQuery};
use web_crawler_actors::traps::{TrapReason, TrapRule, TrapScope};
use web_crawler_actors::{
    BrokenLink, ClosedFamily, Document, HostRecord, PageQuery, PageRecord, PendingUrl,
    ProcessedUrl, ROBOTS_BLOCKED, SEARCH_RESULTS, StoreCounts, TrapFamily, TrapMark,
};

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
            etag: row.get(19)?,
            last_modified: row.get(20)?,
            d_next_check: row.get(21)?,
            check_interval_ms: row.get(22)?,
            check_every_ms: row.get(23)?,
        },
        referral_count: 0,
        referral_list: Vec::new(),
        duplicate_of: row.get(12)?,
        d_processed: int_col(row, 9, "d_processed")?,
    })
}

fn limit_param(limit: Option<usize>) -> i64 {
    // SQLite reads a negative LIMIT as "no limit".
    limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX))
}

// --- reads ------------------------------------------------------------------
// What `Frontier::counts` and the `Queries` listings read, each in the one read
// transaction `SqliteStore::read` gives it.

pub(super) fn counts(tx: &Transaction<'_>) -> Result<StoreCounts, Fail> {
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
    let mut trapped_by_rule = BTreeMap::new();
    {
        let mut stmt = tx.prepare_cached(TRAPPED_BY_RULE)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let n: i64 = row.get(1)?;
            trapped_by_rule.insert(
                rule_col(row, 0, "pending_urls.trap_rule")?,
                n.cast_unsigned(),
            );
        }
    }
    Ok(StoreCounts {
        pending: counts[0],
        processing: counts[1],
        processed: counts[2],
        failed: counts[3],
        robots_blocked: counts[4],
        duplicates: counts[5],
        search_results: counts[6],
        trapped: trapped_by_rule.values().sum(),
        trapped_by_rule,
    })
}

/// A trap rule's stored code.
fn rule_col(row: &Row<'_>, idx: usize, what: &str) -> Result<TrapRule, Fail> {
    let code = text_col(row, idx)?;
    code.parse()
        .map_err(|e| Fail::Corrupt(format!("{what}: {e}")))
}

/// The families the trap defence closed, by host then name.
pub(super) fn trap_closures(tx: &Transaction<'_>) -> Result<Vec<ClosedFamily>, Fail> {
    let mut stmt = tx.prepare_cached(CLOSURE_LIST)?;
    let mut rows = stmt.query([])?;
    let mut list = Vec::new();
    while let Some(row) = rows.next()? {
        let family: String = row.get(0)?;
        let what = |column: &str| format!("trap_closures.{column} of {family:?}");
        let scope: String = row.get(3)?;
        let scope = match scope.as_str() {
            "pattern" => TrapScope::Pattern,
            "query_space" => TrapScope::QuerySpace,
            "host" => TrapScope::Host,
            "directory" => TrapScope::Directory,
            other => return Err(Fail::Corrupt(format!("{}: {other:?}", what("scope")))),
        };
        let detail: String = row.get(5)?;
        let detail: TrapReason = serde_json::from_str(&detail)
            .map_err(|e| Fail::Corrupt(format!("{}: {e}", what("detail"))))?;
        list.push(ClosedFamily {
            host: text_col(row, 1)?,
            rule: rule_col(row, 2, &what("rule"))?,
            scope,
            reason: text_col(row, 4)?,
            detail,
            closed_at: int_col(row, 6, "closed_at")?,
            pages: int_col(row, 7, "pages")?,
            reopened_at: row.get(8)?,
            allowed: int_col::<i64>(row, 9, "allowed")? != 0,
            family,
        });
    }
    Ok(list)
}

/// Every closed family with how many URLs it holds trapped now and the
/// first `samples` of them.
pub(super) fn trap_families(tx: &Transaction<'_>, samples: usize) -> Result<Vec<TrapFamily>, Fail> {
    let mut refused: HashMap<String, u64> = HashMap::new();
    {
        let mut stmt = tx.prepare_cached(TRAPPED_BY_FAMILY)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let n: i64 = row.get(1)?;
            refused.insert(text_col(row, 0)?, n.cast_unsigned());
        }
    }
    let mut of_family = tx.prepare_cached(TRAPPED_OF_FAMILY)?;
    trap_closures(tx)?
        .into_iter()
        .map(|closed| {
            let mut urls = Vec::new();
            let refused = refused.get(&closed.family).copied().unwrap_or(0);
            if refused > 0 {
                let mut rows = of_family.query([&closed.family])?;
                while urls.len() < samples
                    && let Some(row) = rows.next()?
                {
                    urls.push(row.get(0)?);
                }
            }
            Ok(TrapFamily {
                closed,
                refused,
                samples: urls,
            })
        })
        .collect()
}

pub(super) fn frontier_empty(tx: &Transaction<'_>) -> Result<bool, Fail> {
    Ok(tx
        .prepare_cached(FRONTIER_EMPTY)?
        .query_row([], |row| row.get(0))?)
}

pub(super) fn processed(
    tx: &Transaction<'_>,
    query: &PageQuery,
) -> Result<Vec<ProcessedUrl>, Fail> {
    let mut pages = Vec::new();
    {
        let mut stmt = tx.prepare_cached(PROCESSED_PAGE)?;
        let mut rows = stmt.query(named_params! {
            ":only_failed": query.only_failed,
            ":only_duplicates": query.only_duplicates,
            ":newest_first": query.newest_first,
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
}

pub(super) fn processed_after(
    tx: &Transaction<'_>,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<PageRecord>, Fail> {
    let mut stmt = tx.prepare_cached(PROCESSED_AFTER)?;
    let mut rows = stmt.query(params![after, limit_param(Some(limit))])?;
    let mut pages = Vec::new();
    while let Some(row) = rows.next()? {
        pages.push(read_processed(row)?.record);
    }
    Ok(pages)
}

/// [`Frontier::nodes_with_pages`]: one seek a node down the index on
/// (node, url), not a scan of every page.
///
/// [`Frontier::nodes_with_pages`]: web_crawler_actors::Frontier::nodes_with_pages
pub(super) fn nodes_with_pages(tx: &Transaction<'_>) -> Result<Vec<String>, Fail> {
    let mut stmt = tx.prepare_cached(NODE_AFTER)?;
    let mut nodes: Vec<String> = Vec::new();
    loop {
        let after = nodes.last().map_or("", String::as_str);
        match stmt.query_row([after], |row| row.get(0)).optional()? {
            Some(node) => nodes.push(node),
            None => return Ok(nodes),
        }
    }
}

pub(super) fn processed_url(tx: &Transaction<'_>, url: &str) -> Result<Option<ProcessedUrl>, Fail> {
    let page = {
        let mut stmt = tx.prepare_cached(PROCESSED_ONE)?;
        let mut rows = stmt.query([url])?;
        match rows.next()? {
            None => return Ok(None),
            Some(row) => read_processed(row)?,
        }
    };
    let mut page = page;
    page.referral_list = referrals_of(tx, [url])?.remove(url).unwrap_or_default();
    page.referral_count = page.referral_list.len() as u64;
    Ok(Some(page))
}

pub(super) fn pending(
    tx: &Transaction<'_>,
    seen: &SeenWindow,
    limit: usize,
) -> Result<Vec<PendingUrl>, Fail> {
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
                check_every_ms: row.get(11)?,
                trap: match row.get::<_, Option<String>>(13)? {
                    Some(family) => Some(TrapMark {
                        rule: rule_col(row, 12, "pending_urls.trap_rule")?,
                        family,
                    }),
                    None => None,
                },
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
}

pub(super) fn records(
    tx: &Transaction<'_>,
    collection: &str,
    filter: &Document,
) -> Result<Vec<Document>, Fail> {
    let mut stmt = tx.prepare_cached(RECORD_LIST)?;
    let mut rows = stmt.query([collection])?;
    let mut list = Vec::new();
    while let Some(row) = rows.next()? {
        let text: String = row.get(0)?;
        let doc: Document = serde_json::from_str(&text)
            .map_err(|e| Fail::Corrupt(format!("records.document is not a JSON object: {e}")))?;
        if filter.iter().all(|(k, v)| doc.get(k) == Some(v)) {
            list.push(doc);
        }
    }
    Ok(list)
}

pub(super) fn first_records(
    tx: &Transaction<'_>,
    collection: &str,
    after: Option<&Document>,
    limit: usize,
) -> Result<Vec<Document>, Fail> {
    // Keys are compared as the text they are stored as; "" is before all.
    let after = after.map(record_key).transpose()?.unwrap_or_default();
    let mut stmt = tx.prepare_cached(RECORD_HEAD)?;
    let mut rows = stmt.query(params![collection, after, limit as i64])?;
    let mut list = Vec::new();
    while let Some(row) = rows.next()? {
        let text: String = row.get(0)?;
        list.push(
            serde_json::from_str(&text).map_err(|e| {
                Fail::Corrupt(format!("records.document is not a JSON object: {e}"))
            })?,
        );
    }
    Ok(list)
}

pub(super) fn broken_links(tx: &Transaction<'_>) -> Result<Vec<BrokenLink>, Fail> {
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
}

pub(super) fn hosts(tx: &Transaction<'_>) -> Result<Vec<HostRecord>, Fail> {
    let mut stmt = tx.prepare_cached(HOST_LIST)?;
    let mut rows = stmt.query([])?;
    let mut list = Vec::new();
    while let Some(row) = rows.next()? {
        list.push(HostRecord {
            host: row.get(0)?,
            robots_status: text_col(row, 1)?.parse().map_err(Fail::Corrupt)?,
            robots_http_code: opt_int_col(row, 2, "robots_http_code")?,
            robots_error: row.get(3)?,
            robots_txt: row.get(4)?,
            robots_fetched_at: int_col(row, 5, "robots_fetched_at")?,
            crawl_delay_ms: opt_int_col(row, 6, "crawl_delay_ms")?,
            sitemaps: json_col(row, 7, "sitemaps", |s| serde_json::from_str(s))?,
        });
    }
    Ok(list)
}

pub(super) fn status_histogram(tx: &Transaction<'_>) -> Result<Vec<(Option<u16>, u64)>, Fail> {
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
}

pub(super) fn pages_per_host(tx: &Transaction<'_>) -> Result<Vec<(String, u64)>, Fail> {
    named_counts(tx, HOST_PAGES)
}

pub(super) fn pages_per_node(tx: &Transaction<'_>) -> Result<Vec<(String, u64)>, Fail> {
    named_counts(tx, NODE_PAGES)
}

/// Rows of a name and a count.
fn named_counts(tx: &Transaction<'_>, sql: &str) -> Result<Vec<(String, u64)>, Fail> {
    let mut stmt = tx.prepare_cached(sql)?;
    let mut rows = stmt.query([])?;
    let mut list = Vec::new();
    while let Some(row) = rows.next()? {
        list.push((text_col(row, 0)?, int_col(row, 1, "count")?));
    }
    Ok(list)
}

/// `fetch_history` entries, by URL then time.
pub(super) fn fetch_history(
    tx: &Transaction<'_>,
    query: &HistoryQuery,
) -> Result<Vec<FetchHistory>, Fail> {
    let mut stmt = tx.prepare_cached(HISTORY_LIST)?;
    let mut rows = stmt.query(params![query.host, query.since.unwrap_or(i64::MIN)])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(FetchHistory {
            url: row.get(0)?,
            host: text_col(row, 1)?,
            d_fetch: row.get(2)?,
            http_returncode: opt_int_col(row, 3, "http_returncode")?,
            fetch_ms: row.get(4)?,
            size: row.get(5)?,
            content_hash: row.get::<_, Option<i64>>(6)?.map(i64::cast_unsigned),
            changed: row.get::<_, i64>(7)? != 0,
            error: row.get(8)?,
        });
    }
    Ok(out)
}

/// A record's key as the `records` table's key column: its fields in name
/// order, so one key always has one text (serde_json keeps insertion order).
pub(super) fn record_key(key: &Document) -> Result<String, Fail> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::test_support::*;
    use rusqlite::Connection;
    use web_crawler_actors::{CommitBatch, Frontier, Queries, Record, RobotsStatus, StoreError};

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
                robots_status: RobotsStatus::NotFound,
                ..HostRecord::default()
            }],
            ..CommitBatch::default()
        };
        store.commit(batch.into()).await.unwrap();
        let updated = HostRecord {
            host: "a".into(),
            robots_status: RobotsStatus::Fetched,
            robots_http_code: Some(200),
            crawl_delay_ms: Some(1_500),
            ..HostRecord::default()
        };
        store
            .commit(
                (CommitBatch {
                    now: 2_000,
                    hosts: vec![updated.clone()],
                    ..CommitBatch::default()
                })
                .into(),
            )
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
                newest_first: false,
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
                only_duplicates: false,
                newest_first: false,
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
            trapped: (0..2)
                .map(|i| web_crawler_actors::TrappedLink {
                    link: link(&format!("http://q/tag/{i}/"), 1, 0.5),
                    trap: TrapMark {
                        rule: TrapRule::Stale,
                        family: "q/tag/".into(),
                    },
                })
                .collect(),
            ..CommitBatch::default()
        };
        store.commit(batch.into()).await.unwrap();
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
                trapped: 2,
                trapped_by_rule: [(TrapRule::Stale, 2)].into(),
            }
        );
        assert!(!store.counts().await.unwrap().frontier_empty());
    }

    #[tokio::test]
    async fn the_frontier_is_empty_only_with_nothing_pending_or_leased() {
        let (_dir, _path, store) = open_temp();
        assert!(store.frontier_empty().await.unwrap(), "a new store");
        store
            .commit(seeds(1_000, vec![link("http://a/1", 0, 1.0)]).into())
            .await
            .unwrap();
        assert!(!store.frontier_empty().await.unwrap(), "a URL pending");
        let claimed = store.claim(claim_req(1_000, 1, 10)).await.unwrap();
        assert_eq!(claimed.len(), 1);
        assert!(!store.frontier_empty().await.unwrap(), "a URL leased");
        let done = page("http://a/1", Some(200), Some(1), vec![]);
        store
            .commit(pages(2_000, None, vec![done]).into())
            .await
            .unwrap();
        assert!(store.frontier_empty().await.unwrap(), "all processed");
        assert!(
            store.counts().await.unwrap().frontier_empty(),
            "as counts say"
        );
    }

    #[tokio::test]
    async fn unparsable_operation_is_corrupt() {
        let (_dir, path, store) = open_temp();
        store
            .commit((seeds(0, vec![link("http://a/1", 0, 1.0)])).into())
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
}
