//! MongoDB specifics: the same crawl gives the same results on both stores,
//! and the documents have the paper's field names and types when read back
//! as plain BSON.

use crate::common::backend::{Backend, mongo_uri};
use crate::common::coverage::{assert_all_stored, not_stored};
use mongodb::bson::{Bson, Document, doc};
use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use web_crawler::actors::{OperationSpec, PageQuery, Store};
use web_crawler::policy::Scope;
use web_crawler::store::MongoStore;
use web_crawler::{IdleReason, Settings, start};
use web_crawler_testsupport::{Page, TestServer, page_with_links};

async fn site() -> TestServer {
    let mut words = String::from("<html><title>words</title><p>");
    for i in 0..5 {
        words.push_str(&format!("filler {i} needle "));
    }
    words.push_str("</p><a href=\"/\">home</a></html>");
    TestServer::start(
        Ipv4Addr::new(127, 0, 3, 1),
        HashMap::from([
            (
                "/robots.txt".to_string(),
                Page::text("text/plain", "User-agent: *\nDisallow: /private\n"),
            ),
            (
                "/".to_string(),
                page_with_links(
                    "home",
                    &[
                        "/a",
                        "/b",
                        "/words",
                        "/private/x",
                        "/gone",
                        "/moved",
                        "/a#again",
                    ],
                ),
            ),
            (
                "/a".to_string(),
                page_with_links("a", &["/", "/b", "/words"]),
            ),
            ("/b".to_string(), page_with_links("b", &["/a"])),
            ("/words".to_string(), Page::html(words)),
            ("/moved".to_string(), Page::redirect(301, "/b")),
        ]),
    )
    .await
}

/// What must agree between backends, independent of timing.
type Summary = BTreeMap<
    String,
    (
        Option<u16>,
        Vec<String>,
        Option<String>,
        Option<String>,
        u32,
    ),
>;

async fn crawl_on(backend: &Backend, server: &TestServer) -> (Summary, Vec<(String, Vec<u64>)>) {
    static N: AtomicUsize = AtomicUsize::new(0);
    let store: Arc<dyn Store> = backend.open().await;
    let mut s = Settings::default();
    s.crawl.node_name = format!("same-{}", N.fetch_add(1, Ordering::SeqCst));
    s.crawl.min_delay = Duration::ZERO;
    s.policy.scope = Scope::Host;
    let app = start(store.clone(), s).await.unwrap();
    app.add_url_with(&server.url("/"), OperationSpec::search_text("needle"))
        .await
        .unwrap();
    assert_eq!(app.wait_idle().await.unwrap(), IdleReason::FrontierEmpty);
    app.stop(Duration::from_secs(5)).await.unwrap();
    // Its real pages (not its 404, redirect or robots-disallowed page), in
    // this crawl's store: the server answers the crawls on both stores.
    let real: Vec<String> = ["/", "/a", "/b", "/words"]
        .iter()
        .map(|t| server.url(t))
        .collect();
    assert_all_stored(&not_stored(store.as_ref(), &real).await, real.len());
    let mut summary = Summary::new();
    for p in store.processed(PageQuery::default()).await.unwrap() {
        let mut refs = p.referral_list.clone();
        refs.sort();
        summary.insert(
            p.record.url.clone(),
            (
                p.record.http_returncode,
                refs,
                p.record.redirect_to,
                p.record.error,
                p.record.links_count,
            ),
        );
    }
    let results = store
        .text_match_hits(None)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.url, r.positions))
        .collect();
    (summary, results)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_crawl_gives_the_same_results_on_both_stores() {
    let server = site().await;
    let (on_sqlite, hits_sqlite) = crawl_on(&Backend::sqlite(), &server).await;
    let (on_mongo, hits_mongo) = crawl_on(&Backend::mongo("same_results"), &server).await;
    assert_eq!(on_sqlite.len(), 7, "{on_sqlite:#?}");
    assert_eq!(on_sqlite, on_mongo);
    assert_eq!(hits_sqlite.len(), 1);
    assert_eq!(hits_sqlite, hits_mongo);
}

fn kind(b: &Bson) -> &'static str {
    match b {
        Bson::String(_) => "string",
        Bson::Int32(_) => "int32",
        Bson::Int64(_) => "int64",
        Bson::Double(_) => "double",
        Bson::Array(_) => "array",
        Bson::DateTime(_) => "date",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::Null => "null",
        _ => "other",
    }
}

fn assert_fields(d: &Document, expected: &[(&str, &str)]) {
    for (field, ty) in expected {
        let value = d
            .get(field)
            .unwrap_or_else(|| panic!("{field} missing in {d}"));
        assert_eq!(kind(value), *ty, "{field} in {d}");
    }
    assert!(d.values().all(|v| kind(v) != "null"), "no nulls: {d}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_have_the_papers_field_names_and_types() {
    let server = site().await;
    let backend = Backend::mongo("paper_fields");
    let store = backend.open().await;
    let mut s = Settings::default();
    s.crawl.node_name = "paper-fields".into();
    s.crawl.min_delay = Duration::ZERO;
    // Coverage is not asserted: the budget leaves URLs pending by design.
    s.crawl.max_pages = Some(3);
    let app = start(store, s).await.unwrap();
    app.add_url_with(&server.url("/"), OperationSpec::search_text("needle"))
        .await
        .unwrap();
    app.wait_idle().await.unwrap();
    app.stop(Duration::from_secs(5)).await.unwrap();

    let Backend::Mongo { database, .. } = &backend else {
        unreachable!()
    };
    let raw = MongoStore::connect(&mongo_uri(), database).await.unwrap();
    let db = raw.database();
    // Listing 2.
    let home: Document = db
        .collection::<Document>("processed_urls")
        .find_one(doc! { "_id": server.url("/") })
        .await
        .unwrap()
        .expect("home page processed");
    assert_fields(
        &home,
        &[
            ("_id", "string"),
            ("content-length", "string"),
            ("content-type", "string"),
            ("http_returncode", "int32"),
            ("referral_count", "int32"),
            ("referral_list", "array"),
            ("links_count", "int32"),
            ("d_processed", "date"),
            ("operation", "array"),
        ],
    );
    assert_eq!(
        home.get_array("operation").unwrap(),
        &vec![Bson::from("search"), Bson::from("needle")]
    );
    // Listing 1.
    let pending: Document = db
        .collection::<Document>("pending_urls")
        .find_one(doc! {})
        .await
        .unwrap()
        .expect("the budget left URLs pending");
    assert_fields(
        &pending,
        &[
            ("_id", "objectId"),
            ("url", "string"),
            ("referral_list", "array"),
            ("status", "string"),
            ("d_change", "int64"),
            ("operation", "array"),
        ],
    );
    // Listing 3 (the words page may or may not be within the budget).
    let results = db.collection::<Document>("search_results");
    if let Some(r) = results.find_one(doc! {}).await.unwrap() {
        assert_fields(
            &r,
            &[
                ("_id", "objectId"),
                ("url", "string"),
                ("text", "string"),
                ("positions", "array"),
                ("d_search", "date"),
            ],
        );
    }
    // Indexes created at start, again without error, identified by keys.
    MongoStore::connect(&mongo_uri(), database).await.unwrap();
}
