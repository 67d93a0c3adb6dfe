//! The store's documents: records written as BSON (absent values left out,
//! never null) and read back, tolerant of Int32 where Int64 was written.

use super::errors::corrupt;
use mongodb::bson::{Bson, DateTime, Document, doc};
use web_crawler_actors::availability::FetchHistory;
use web_crawler_actors::traps::{TrapRule, TrapScope};
use web_crawler_actors::{
    BrokenLink, ClosedFamily, Document as JsonDoc, HostRecord, Job, LastFetch, Millis,
    OperationSpec, PageRecord, PendingUrl, ProcessedPage, ProcessedUrl, StoreError, TrapMark,
};

/// Records as operations wrote them: their key and fields, without `_id`.
pub(super) fn record_documents(docs: Vec<Document>) -> Vec<JsonDoc> {
    docs.into_iter()
        .map(|d| {
            d.into_iter()
                .filter(|(k, _)| k != "_id")
                .map(|(k, v)| (k, json_of(v)))
                .collect()
        })
        .collect()
}

/// The processed_urls document (listing 2 plus ours). Absent values are left out.
pub(super) fn processed_doc(
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
pub(super) fn int(d: &Document, key: &str) -> Option<i64> {
    match d.get(key)? {
        Bson::Int64(n) => Some(*n),
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Double(f) => Some(*f as i64),
        Bson::DateTime(t) => Some(t.timestamp_millis()),
        _ => None,
    }
}

pub(super) fn millis(d: &Document, key: &str) -> Millis {
    int(d, key).unwrap_or(0)
}

pub(super) fn text(d: &Document, key: &str) -> Option<String> {
    d.get_str(key).ok().map(str::to_string)
}

pub(super) fn strings(d: &Document, key: &str) -> Vec<String> {
    d.get_array(key)
        .map(|a| {
            a.iter()
                .filter_map(|b| b.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn operation_of(d: &Document) -> Result<OperationSpec, StoreError> {
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

pub(super) fn job_of(d: &Document) -> Result<Job, StoreError> {
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

pub(super) fn processed_of(d: &Document) -> Result<ProcessedUrl, StoreError> {
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

pub(super) fn host_doc(h: &HostRecord) -> Document {
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

pub(super) fn host_of(d: &Document) -> Result<HostRecord, StoreError> {
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

/// An operation's JSON document as BSON.
pub(super) fn bson_doc(json: &JsonDoc) -> Result<Document, StoreError> {
    mongodb::bson::to_document(json)
        .map_err(|e| StoreError::Invalid(format!("a record that BSON cannot hold: {e}")))
}

/// A stored value as JSON, dates as epoch milliseconds (as the embedded
/// store keeps them).
pub(super) fn json_of(value: Bson) -> serde_json::Value {
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

/// A fetch_history document: one fetch of a URL, absent values left out.
pub(super) fn history_doc(page: &ProcessedPage, now: Millis) -> Document {
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
    d
}

pub(super) fn history_of(d: &Document) -> Result<FetchHistory, StoreError> {
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
}

/// What a processed URL's last fetch left, for its next claim.
pub(super) fn last_fetch_of(d: &Document) -> LastFetch {
    LastFetch {
        http_returncode: int(d, "http_returncode").map(|c| c as u16),
        content_hash: int(d, "content_hash").map(i64::cast_unsigned),
        etag: text(d, "etag"),
        last_modified: text(d, "last_modified"),
        check_interval_ms: int(d, "check_interval_ms"),
        check_every_ms: int(d, "check_every_ms"),
    }
}

pub(super) fn pending_of(d: &Document) -> Result<PendingUrl, StoreError> {
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
        trap: match text(d, "trap_family") {
            Some(family) => Some(TrapMark {
                rule: rule_of(d, "trap_rule")?,
                family,
            }),
            None => None,
        },
    })
}

/// A boolean field (written as a boolean; a server that keeps it as a
/// number reads back the same).
fn flag(d: &Document, key: &str) -> bool {
    match d.get(key) {
        Some(Bson::Boolean(b)) => *b,
        Some(_) => int(d, key).is_some_and(|n| n != 0),
        None => false,
    }
}

/// A trap rule's stored code.
fn rule_of(d: &Document, key: &str) -> Result<TrapRule, StoreError> {
    text(d, key)
        .unwrap_or_default()
        .parse()
        .map_err(|e| corrupt(format!("{key}: {e}")))
}

/// A `trap_closures` document: keyed by the family's name, the guard's
/// reason kept whole as `detail`.
pub(super) fn closure_doc(c: &ClosedFamily) -> Result<Document, StoreError> {
    let detail = mongodb::bson::to_document(&c.detail)
        .map_err(|e| StoreError::Invalid(format!("a trap closure BSON cannot hold: {e}")))?;
    let mut d = doc! {
        "_id": &c.family,
        "host": &c.host,
        "rule": c.rule.code(),
        "scope": c.scope.code(),
        "reason": &c.reason,
        "detail": detail,
        "closed_at": c.closed_at,
        "pages": i64::from(c.pages),
        "allowed": c.allowed,
    };
    if let Some(at) = c.reopened_at {
        d.insert("reopened_at", at);
    }
    Ok(d)
}

pub(super) fn closed_family_of(d: &Document) -> Result<ClosedFamily, StoreError> {
    let family = d.get_str("_id").map_err(corrupt)?.to_string();
    let scope = match text(d, "scope").as_deref() {
        Some("pattern") => TrapScope::Pattern,
        Some("query_space") => TrapScope::QuerySpace,
        Some("host") => TrapScope::Host,
        Some("directory") => TrapScope::Directory,
        other => {
            return Err(corrupt(format!(
                "trap_closures {family:?}: scope {other:?}"
            )));
        }
    };
    let detail = d
        .get_document("detail")
        .map_err(|e| corrupt(format!("trap_closures {family:?}: {e}")))?;
    let detail = mongodb::bson::from_document(detail.clone())
        .map_err(|e| corrupt(format!("trap_closures {family:?}: detail: {e}")))?;
    Ok(ClosedFamily {
        host: text(d, "host").unwrap_or_default(),
        rule: rule_of(d, "rule")?,
        scope,
        reason: text(d, "reason").unwrap_or_default(),
        detail,
        closed_at: millis(d, "closed_at"),
        pages: int(d, "pages").unwrap_or(0).clamp(0, i64::from(u32::MAX)) as u32,
        reopened_at: int(d, "reopened_at"),
        allowed: flag(d, "allowed"),
        family,
    })
}

pub(super) fn broken_link_of(d: &Document) -> BrokenLink {
    BrokenLink {
        url: text(d, "_id").unwrap_or_default(),
        http_returncode: int(d, "http_returncode").map(|c| c as u16),
        error: text(d, "error"),
        referral_list: strings(d, "referral_list"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::mongo::test_support::link;

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

    #[test]
    fn int32_is_read_where_int64_was_written() {
        let d = doc! { "url": "u", "depth": 3_i32, "attempts": 2_i64, "priority": 1_i32 };
        let job = job_of(&d).unwrap();
        assert_eq!((job.depth, job.attempts, job.priority), (3, 2, 1.0));
        assert!(job_of(&doc! { "url": "u", "operation": "search" }).is_err());
    }

    #[test]
    fn a_history_document_reads_back_as_the_fetch_it_records() {
        let page = ProcessedPage {
            record: PageRecord {
                url: "http://h/".into(),
                host: "h".into(),
                http_returncode: Some(404),
                content_length: Some(12),
                content_hash: Some(u64::MAX),
                fetch_ms: 30,
                ..PageRecord::default()
            },
            changed: true,
            ..ProcessedPage::default()
        };
        let d = history_doc(&page, 5_000);
        assert!(d.get("error").is_none(), "absent values are left out");
        let back = history_of(&d).unwrap();
        assert_eq!(
            (
                back.url.as_str(),
                back.d_fetch,
                back.http_returncode,
                back.size
            ),
            ("http://h/", 5_000, Some(404), Some(12))
        );
        assert_eq!(back.content_hash, Some(u64::MAX));
        assert!(back.changed);
        assert!(
            history_of(&doc! { "host": "h" }).is_err(),
            "a fetch has a URL"
        );
    }

    #[test]
    fn a_last_fetch_reads_its_validators_and_intervals() {
        let last = last_fetch_of(&doc! {
            "http_returncode": 200_i32, "etag": "\"v1\"", "check_interval_ms": 60_000_i64,
        });
        assert_eq!(last.http_returncode, Some(200));
        assert_eq!(last.etag.as_deref(), Some("\"v1\""));
        assert_eq!(last.check_interval_ms, Some(60_000));
        assert_eq!((last.last_modified, last.check_every_ms), (None, None));
    }

    #[test]
    fn a_pending_document_reads_with_its_lease_and_status() {
        let d = doc! {
            "url": "http://h/a", "host": "h", "status": "processing", "depth": 2_i32,
            "referral_list": ["http://h/"], "lease_until": 9_000_i64,
        };
        let p = pending_of(&d).unwrap();
        assert_eq!((p.status.as_str(), p.depth), ("processing", 2));
        assert_eq!((p.lease_until, p.not_before), (Some(9_000), 0));
        assert_eq!(p.referral_list, vec!["http://h/"]);
    }
}
