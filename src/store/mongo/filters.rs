//! Filters and sort orders of the store's reads.

use mongodb::bson::{Bson, DateTime, Document, doc};
use web_crawler_actors::availability::HistoryQuery;
use web_crawler_actors::{PageQuery, ROBOTS_BLOCKED};

/// The filter and sort of the records after `key` in key order (its
/// fields in name order): `(a > x) or (a = x and b > y) or …`.
pub(super) fn after_key(key: &Document) -> (Document, Document) {
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

/// The filter and sort of a page listing: failed pages only (an error
/// status or an error), content duplicates only, newest first. The
/// filter's top-level fields must all hold (MongoDB's implicit AND).
pub(super) fn processed_pages(query: &PageQuery) -> (Document, Document) {
    let mut filter = Document::new();
    if query.only_failed {
        filter.insert(
            "$or",
            vec![
                doc! { "http_returncode": { "$gte": 400 } },
                doc! { "error": { "$exists": true } },
            ],
        );
    }
    if query.only_duplicates {
        filter.insert("duplicate_of", doc! { "$exists": true });
    }
    let order = if query.newest_first {
        doc! { "d_processed": -1, "_id": 1 }
    } else {
        doc! { "_id": 1 }
    };
    (filter, order)
}

/// Broken links: an error status, or an error other than robots.txt's
/// refusal (a page the crawl chose not to fetch is not broken).
pub(super) fn broken_links() -> Document {
    doc! { "$or": [
        { "http_returncode": { "$gte": 400 } },
        { "$and": [ { "error": { "$exists": true } }, { "error": { "$ne": ROBOTS_BLOCKED } } ] },
    ] }
}

/// The fetches of one host, or of all, since a moment or ever.
pub(super) fn history(query: &HistoryQuery) -> Document {
    let mut filter = Document::new();
    if let Some(host) = &query.host {
        filter.insert("host", host);
    }
    if let Some(since) = query.since {
        filter.insert("d_fetch", doc! { "$gte": DateTime::from_millis(since) });
    }
    filter
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_page_listing_filters_failures_and_sorts_newest_first_on_request() {
        assert_eq!(
            processed_pages(&PageQuery::default()),
            (doc! {}, doc! { "_id": 1 })
        );
        let (filter, order) = processed_pages(&PageQuery {
            only_failed: true,
            newest_first: true,
            ..PageQuery::default()
        });
        assert_eq!(filter.get_array("$or").unwrap().len(), 2);
        assert_eq!(order, doc! { "d_processed": -1, "_id": 1 });
        let (filter, _) = processed_pages(&PageQuery {
            only_duplicates: true,
            ..PageQuery::default()
        });
        assert_eq!(filter, doc! { "duplicate_of": { "$exists": true } });
    }

    #[test]
    fn a_history_filter_names_only_what_was_asked() {
        assert_eq!(history(&HistoryQuery::default()), doc! {});
        let filter = history(&HistoryQuery {
            host: Some("h".into()),
            since: Some(1_000),
        });
        assert_eq!(
            filter,
            doc! { "host": "h", "d_fetch": { "$gte": DateTime::from_millis(1_000) } }
        );
    }

    #[test]
    fn a_robots_refusal_is_not_a_broken_link() {
        let text = broken_links().to_string();
        assert!(text.contains(ROBOTS_BLOCKED), "{text}");
    }
}
