//! Ranked search over what a crawl fetched, end to end on both stores: the
//! slaves hand pages to the indexer through the store's queue, and
//! `AppHandle::search` answers from the index — typos corrected, anchor text
//! finding a page that never names itself, duplicates and `noindex` pages
//! left out, bad queries answered with a clear message. And the indexer
//! killed mid-crawl: its successor indexes what the queue still holds.

use crate::common::backend::Backend;
use crate::common::coverage::{assert_all_real_fetched, assert_all_stored, not_stored};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use web_crawler::actors::{AppHandle, ChildRole, IdleReason, SearchAnswer};
use web_crawler::search::SearchIndex;
use web_crawler::{Settings, start};
use web_crawler_testsupport::{Page, TestServer};

fn settings(index: &Path) -> Settings {
    static N: AtomicUsize = AtomicUsize::new(0);
    let mut s = Settings::default();
    s.crawl.node_name = format!("search-{}", N.fetch_add(1, Ordering::SeqCst));
    s.crawl.concurrency = 8;
    s.crawl.per_host = 4;
    s.crawl.min_delay = Duration::ZERO;
    s.crawl.tick = Duration::from_millis(50);
    s.crawl.index_commit_every = Duration::from_millis(200);
    s.index_dir = Some(index.to_path_buf());
    s
}

fn html(title: &str, head: &str, body: &str) -> Page {
    Page::html(format!(
        "<!doctype html><html><head><title>{title}</title>{head}</head>\
         <body><nav><a href=\"/\">Home</a></nav>{body}</body></html>"
    ))
}

/// A small site whose pages carry known words.
pub(crate) fn bakery() -> HashMap<String, Page> {
    let rye = html(
        "Rye",
        "",
        "<h1>Rye bread</h1><p>Rye flour has little gluten, so a rye loaf is dense and \
         keeps for a week.</p>",
    );
    HashMap::from([
        (
            "/".to_string(),
            html(
                "Bakery",
                "",
                "<h1>Our bakery</h1><p>Read the <a href=\"/guide\">sourdough baking guide</a>, \
                 our <a href=\"/rye\">rye notes</a>, the <a href=\"/mystery\">kayak repair \
                 manual</a>, <a href=\"/copy\">a copy</a> and <a href=\"/secret\">staff \
                 notes</a>.</p>",
            ),
        ),
        (
            "/guide".to_string(),
            html(
                "Baking",
                "",
                "<h1>Method</h1><p>Mix the sourdough starter with flour and water, knead, \
                 proof overnight and bake in a hot oven for forty minutes.</p>",
            ),
        ),
        ("/rye".to_string(), rye.clone()),
        // Byte for byte the rye page: a duplicate, not indexed.
        ("/copy".to_string(), rye),
        (
            "/mystery".to_string(),
            html(
                "Untitled",
                "",
                "<p>Patch the hull with epoxy and fibreglass cloth, then sand it smooth \
                 before the next paddle.</p>",
            ),
        ),
        (
            "/secret".to_string(),
            html(
                "Staff",
                "<meta name=\"robots\" content=\"noindex\">",
                "<p>The zanzibar rota is on the fridge.</p>",
            ),
        ),
    ])
}

async fn crawl_and_flush(app: &AppHandle, seed: &str) {
    app.add_url(seed).await.unwrap();
    let idle = tokio::time::timeout(Duration::from_secs(120), app.wait_idle())
        .await
        .expect("the crawl ends")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    app.flush_index().await.unwrap();
}

fn urls(answer: &web_crawler::actors::SearchAnswer) -> Vec<String> {
    answer.results.iter().map(|h| h.url.clone()).collect()
}

async fn search_end_to_end(backend: Backend) {
    let server = TestServer::start(Ipv4Addr::new(127, 0, 12, 1), bakery()).await;
    let index = tempfile::tempdir().unwrap();
    let app = start(backend.open().await, settings(&index.path().join("ix")))
        .await
        .unwrap();
    let empty = app.search("bread", 10).await.unwrap();
    assert!(empty.results.is_empty(), "an empty index answers nothing");
    crawl_and_flush(&app, &server.url("/")).await;
    // The copy and the noindex page too, which the index leaves out.
    assert_all_real_fetched(&server, bakery().keys());

    // /rye and /copy are one body: whichever was processed first is indexed.
    let dense = app.search("dense loaf", 10).await.unwrap();
    let rye_urls = [server.url("/rye"), server.url("/copy")];
    assert_eq!(
        urls(&dense).iter().filter(|u| rye_urls.contains(u)).count(),
        1,
        "one of the two copies: {dense:?}"
    );
    assert!(rye_urls.contains(&dense.results[0].url), "{dense:?}");
    assert!(dense.results[0].snippet.contains("dense"), "{dense:?}");
    assert_eq!(dense.results[0].title, "Rye");
    assert_eq!(dense.did_you_mean, None, "spelled right: not altered");

    let typo = app.search("sourdugh", 10).await.unwrap();
    assert_eq!(typo.did_you_mean.as_deref(), Some("sourdough"));
    assert!(urls(&typo).contains(&server.url("/guide")), "{typo:?}");

    let kayak = app.search("kayak", 10).await.unwrap();
    assert!(
        urls(&kayak).contains(&server.url("/mystery")),
        "found through the anchor text of the link to it: {kayak:?}"
    );

    let secret = app.search("zanzibar", 10).await.unwrap();
    assert!(secret.results.is_empty(), "noindex: {secret:?}");
    let none = app.search("xylophone", 10).await.unwrap();
    assert!(none.results.is_empty());

    for (query, says) in [
        ("\"unbalanced phrase", "quote"),
        ("how to the", "common words"),
        ("", "empty"),
    ] {
        let err = app.search(query, 10).await.unwrap_err().to_string();
        assert!(err.contains(says), "{query:?}: {err}");
    }
    let huge = "bread ".repeat(2_000);
    let err = app.search(&huge, 10).await.unwrap_err().to_string();
    assert!(err.contains("limit"), "{err}");
    app.stop(Duration::from_secs(5)).await.unwrap();

    // The index is on disk: a reader opens it without the store.
    let reader = SearchIndex::open_read_only(&index.path().join("ix")).unwrap();
    assert_eq!(reader.page_count(), 4, "/, guide, one rye page, mystery");
}

on_both_backends!(search_finds_what_the_crawl_fetched, search_end_to_end);

/// A word of letters only for `i` (the trap defence's simhash ignores
/// numbers, so pages that differ only by one look alike to it).
pub(crate) fn word(i: usize) -> String {
    let mut w = String::from("qz");
    let mut n = i;
    loop {
        w.push((b'a' + (n % 26) as u8) as char);
        n /= 26;
        if n == 0 {
            return w;
        }
    }
}

/// A site of `n` pages, each with words of its own, linked in a tree.
fn numbered_site(n: usize) -> HashMap<String, Page> {
    const VOCABULARY: &[&str] = &[
        "river", "stone", "garden", "engine", "harbor", "lantern", "meadow", "copper", "violin",
        "glacier", "orchard", "compass", "falcon", "timber", "canyon", "marble", "saddle",
        "thunder", "velvet", "walnut", "anchor", "beacon", "cobalt", "ember", "granite",
    ];
    let mut rng = fastrand::Rng::with_seed(12);
    (0..n)
        .map(|i| {
            let links: String = (1..=3)
                .map(|k| 3 * i + k)
                .filter(|&j| j < n)
                .map(|j| format!("<a href=\"/p/{j}\">page {j}</a> "))
                .collect();
            let prose: Vec<&str> = (0..60)
                .map(|_| VOCABULARY[rng.usize(..VOCABULARY.len())])
                .collect();
            let path = if i == 0 {
                "/".to_string()
            } else {
                format!("/p/{i}")
            };
            let body = format!("<p>About {}: {}.</p>{links}", word(i), prose.join(" "));
            (path, html(&format!("Page {i}"), "", &body))
        })
        .collect()
}

/// The indexer is killed while pages are being processed; the supervisor
/// restarts it, it reads the queue, and every page ends up in the index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexer_killed_mid_crawl_loses_no_page() {
    const PAGES: usize = 400;
    let server = TestServer::start(Ipv4Addr::new(127, 0, 12, 2), numbered_site(PAGES)).await;
    let backend = Backend::sqlite();
    let index = tempfile::tempdir().unwrap();
    let mut s = settings(&index.path().join("ix"));
    s.crawl.concurrency = 2;
    s.crawl.per_host = 2;
    // Slow enough that the kill lands mid-crawl.
    s.crawl.min_delay = Duration::from_millis(5);
    let indexer_name = s.crawl.indexer_name();
    let app = start(backend.open().await, s).await.unwrap();
    app.add_url(&server.url("/")).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while app.status().await.unwrap().fetched_this_run < 100 {
        assert!(tokio::time::Instant::now() < deadline, "the crawl moves");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ractor::registry::where_is(indexer_name)
        .expect("the indexer runs")
        .kill();
    let idle = tokio::time::timeout(Duration::from_secs(120), app.wait_idle())
        .await
        .expect("the crawl ends")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    let children = app.which_children().await.unwrap();
    let indexer = children
        .iter()
        .find(|c| c.role == ChildRole::Indexer)
        .expect("an indexer runs again");
    assert_eq!(indexer.restarts, 1);
    app.flush_index().await.unwrap();
    for i in [1, 150, PAGES - 1] {
        let answer = app.search(&word(i), 5).await.unwrap();
        assert_eq!(
            urls(&answer).first(),
            Some(&server.url(&format!("/p/{i}"))),
            "{answer:?}"
        );
    }
    app.stop(Duration::from_secs(5)).await.unwrap();
    let reader = SearchIndex::open_read_only(&index.path().join("ix")).unwrap();
    assert_eq!(reader.page_count(), PAGES as u64, "every page, once");
}

/// A stop gives the index two seconds, not its whole backlog: with a
/// backlog queued that takes many seconds to index, the tree stops with
/// the rest still queued on disk, and the next start indexes every page of
/// it, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_leaves_the_index_backlog_queued_for_the_next_start() {
    use web_crawler::actors::{IndexQueue, PageText, QueuedPage};
    use web_crawler::store::{IndexQueueLog, queue_dir_for, queue_waiting_bytes};
    const PAGES: usize = 20_000;
    let backend = Backend::sqlite();
    let index = tempfile::tempdir().unwrap();
    let ix = index.path().join("ix");
    // What a crawl stopped while its index was far behind leaves queued.
    let queue = IndexQueueLog::open(&queue_dir_for(&ix)).unwrap();
    let pages: Vec<QueuedPage> = (0..PAGES)
        .map(|i| {
            let text = PageText {
                url: format!("http://127.0.12.9/p/{i}"),
                title: format!("Page {}", word(i)),
                body: format!("{} ", word(i)).repeat(20)
                    + &"the backlog of an index is queued on disk ".repeat(60),
                ..PageText::default()
            };
            QueuedPage::of_record(&text.into_record()).unwrap()
        })
        .collect();
    queue.push(pages).await.unwrap();
    queue.close().await.unwrap();
    drop(queue);

    let app = start(backend.open().await, settings(&ix)).await.unwrap();
    app.stop(Duration::from_secs(5)).await.unwrap();
    let held = SearchIndex::open_read_only(&ix).map_or(0, |s| s.page_count());
    assert!(
        held < PAGES as u64,
        "the stop did not index the backlog: {held} of {PAGES}"
    );
    assert!(
        queue_waiting_bytes(&queue_dir_for(&ix)).unwrap() > 0,
        "what is not indexed stays queued"
    );

    let app = start(backend.open().await, settings(&ix)).await.unwrap();
    app.flush_index().await.unwrap();
    let answer = app.search(&word(PAGES - 1), 5).await.unwrap();
    assert_eq!(
        urls(&answer).first().map(String::as_str),
        Some(format!("http://127.0.12.9/p/{}", PAGES - 1).as_str()),
        "{answer:?}"
    );
    app.stop(Duration::from_secs(5)).await.unwrap();
    let reader = SearchIndex::open_read_only(&ix).unwrap();
    assert_eq!(reader.page_count(), PAGES as u64, "every page, once");
}

/// `kill -9` of a crawl while it indexes, three times over, then the same
/// command to the end: every page it processed is searchable, and exactly
/// once (a page indexed but not committed, or committed and still queued,
/// is indexed again on the next run, never twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_killed_while_indexing_resumes_with_every_page_searchable_once() {
    const PAGES: usize = 300;
    let server = TestServer::start(Ipv4Addr::new(127, 0, 12, 3), numbered_site(PAGES)).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crawl.db");
    let index = web_crawler::search::index_dir_for(&db);
    let seed = server.url("/");
    let args = [
        "crawl",
        seed.as_str(),
        "--db",
        db.to_str().unwrap(),
        "--delay-ms",
        "0",
        "--per-host",
        "2",
        "--quiet",
    ];
    let mut rng = fastrand::Rng::with_seed(23);
    for _ in 0..3 {
        let mut child = crate::common::bin().args(args).spawn().unwrap();
        // Once the index is open (the crawl is fetching and indexing), at
        // a moment of its work.
        let committed = crate::common::wait_for(Duration::from_secs(60), || {
            index.join("pages").join("meta.json").is_file()
        })
        .await;
        assert!(committed, "the index is opened");
        tokio::time::sleep(Duration::from_millis(rng.u64(0..400))).await;
        child.start_kill().unwrap(); // SIGKILL
        child.wait().await.unwrap();
    }
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        crate::common::bin().args(args).output(),
    )
    .await
    .expect("the crawl ends")
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reader = SearchIndex::open_read_only(&index).unwrap();
    assert_eq!(reader.page_count(), PAGES as u64, "every page, once");
    let opts = web_crawler::search::SearchOptions::default();
    for i in 0..PAGES {
        let answer = reader.search(&word(i), &opts).unwrap();
        let path = if i == 0 {
            "/".to_string()
        } else {
            format!("/p/{i}")
        };
        // (Stems may join two words, "qzy" and "qzi": the page is among the
        // results, once.)
        let url = server.url(&path);
        let found = urls(&answer).iter().filter(|u| **u == url).count();
        assert_eq!(found, 1, "{}: {answer:?}", word(i));
    }
}

/// A documentation site as Sphinx builds it: every page carries the same
/// chrome in `div`s, not `<nav>` (the related-links bar, a sidebar with the
/// previous and next topics and "This Page: Report a Bug, Show Source", a
/// footer), around a body marked `role=main`.
fn sphinx_site() -> HashMap<String, Page> {
    let modules = [
        (
            "csv",
            "CSV File Reading and Writing",
            "The csv module reads and writes tabular data in comma separated values format, the most common import and export format for spreadsheets.",
        ),
        (
            "json",
            "JSON encoder and decoder",
            "The json module serializes Python objects to JavaScript Object Notation text and parses such text back into dictionaries and lists.",
        ),
        (
            "shutil",
            "High-level file operations",
            "The shutil module copies and removes whole directory trees and moves files between filesystems, preserving permission bits.",
        ),
        (
            "decimal",
            "Decimal fixed point arithmetic",
            "The decimal module provides correctly rounded decimal floating point arithmetic for money and other exact quantities.",
        ),
        (
            "tarfile",
            "Read and write tar archive files",
            "The tarfile module reads and writes tar archives, including those compressed with gzip, bz2 and lzma.",
        ),
    ];
    let page = |i: usize| {
        let (name, title, text) = modules[i];
        let prev = modules[(i + modules.len() - 1) % modules.len()];
        let next = modules[(i + 1) % modules.len()];
        Page::html(format!(
            "<!doctype html><html><head><title>{name} — {title}</title></head><body>\
             <div class=\"related\" role=\"navigation\" aria-label=\"related navigation\">\
             <h3>Navigation</h3><ul><li class=\"right\"><a href=\"/genindex.html\">index</a></li>\
             <li class=\"right\"><a href=\"/{}.html\">next</a> |</li>\
             <li><a href=\"/index.html\">Python 3.11 documentation</a> »</li></ul></div>\
             <div class=\"document\"><div class=\"body\" role=\"main\"><section>\
             <h1>{name} — {title}</h1><p>{text}</p></section></div></div>\
             <div class=\"sphinxsidebar\" role=\"navigation\" aria-label=\"main navigation\">\
             <h4>Previous topic</h4><p class=\"topless\"><a href=\"/{}.html\">{} — {}</a></p>\
             <h4>Next topic</h4><p class=\"topless\"><a href=\"/{}.html\">{} — {}</a></p>\
             <div role=\"note\"><h3>This Page</h3><ul class=\"this-page-menu\">\
             <li><a href=\"/bugs.html\">Report a Bug</a></li>\
             <li><a href=\"/_sources/{name}.rst.txt\">Show Source</a></li></ul></div></div>\
             <div class=\"footer\">© Copyright 2001-2023, Python Software Foundation. \
             Found a bug? Please report it.</div></body></html>",
            next.0, prev.0, prev.0, prev.1, next.0, next.0, next.1
        ))
    };
    let mut site: HashMap<String, Page> = (0..modules.len())
        .map(|i| (format!("/{}.html", modules[i].0), page(i)))
        .collect();
    let index: String = modules
        .iter()
        .map(|(name, title, _)| format!("<li><a href=\"/{name}.html\">{name} — {title}</a></li>"))
        .collect();
    site.insert(
        "/".to_string(),
        html(
            "Python 3.11 documentation",
            "",
            &format!("<ul>{index}</ul><a href=\"/bugs.html\">Report a Bug</a>"),
        ),
    );
    site.insert(
        "/bugs.html".to_string(),
        html(
            "Dealing with Bugs",
            "",
            "<div role=\"main\"><h1>Dealing with Bugs</h1><p>Python is a mature programming \
             language; to report a bug in the interpreter or its documentation, open an issue \
             on the tracker and describe how to reproduce it.</p></div>",
        ),
    );
    site
}

/// Snippets and matches come from a page's own text, not the site's chrome
/// (which every page repeats): the chrome's words neither show in
/// snippets nor make every page match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snippets_carry_no_site_chrome() {
    let server = TestServer::start(Ipv4Addr::new(127, 0, 12, 4), sphinx_site()).await;
    let index = tempfile::tempdir().unwrap();
    let backend = Backend::sqlite();
    let app = start(backend.open().await, settings(&index.path().join("ix")))
        .await
        .unwrap();
    crawl_and_flush(&app, &server.url("/")).await;
    for (query, page) in [
        ("comma separated values", "/csv.html"),
        ("javascript object notation", "/json.html"),
        ("copy directory trees", "/shutil.html"),
        ("exact money arithmetic", "/decimal.html"),
        ("compressed tar archives", "/tarfile.html"),
    ] {
        let answer = app.search(query, 10).await.unwrap();
        let first = answer
            .results
            .first()
            .unwrap_or_else(|| panic!("{query:?}: no result"));
        assert_eq!(first.url, server.url(page), "{query:?}: {answer:?}");
        for chrome in [
            "Navigation",
            "Previous topic",
            "Next topic",
            "This Page",
            "Show Source",
            "Copyright",
            "documentation »",
        ] {
            assert!(
                !first.snippet.contains(chrome),
                "{query:?}: {chrome:?} in the snippet {:?}",
                first.snippet
            );
        }
    }
    // Every page carries "Report a Bug": only the page about bugs answers.
    let bugs = app.search("report a bug", 10).await.unwrap();
    assert_eq!(urls(&bugs), vec![server.url("/bugs.html")], "{bugs:?}");
    app.stop(Duration::from_secs(5)).await.unwrap();
}

/// A long reference page in Sphinx's shape: each part a `<section id>`
/// with its heading and permalink, the sidebar's headings beside them.
fn reference_site() -> HashMap<String, Page> {
    let filler = "The module keeps its rows as lists of strings and reads them lazily. ".repeat(12);
    let section = |id: &str, level: u8, heading: &str, text: &str| {
        format!(
            "<section id=\"{id}\"><h{level}>{heading}<a class=\"headerlink\" href=\"#{id}\">¶</a>\
             </h{level}><p>{text} {filler}</p>"
        )
    };
    let page = format!(
        "<!doctype html><html><head><title>csv — CSV File Reading and Writing</title></head><body>\
         <div class=\"body\" role=\"main\">{}{}</section>{}</section>{}</section></section></div>\
         <div class=\"sphinxsidebar\" role=\"navigation\"><h3>Table of Contents</h3>\
         <ul><li><a href=\"#dialects\">Dialects</a></li></ul></div></body></html>",
        section(
            "module-csv",
            1,
            "csv — CSV File Reading and Writing",
            "Tabular data in comma separated values."
        ),
        section(
            "module-contents",
            2,
            "Module Contents",
            "The reader and writer functions."
        ),
        section(
            "dialects",
            2,
            "Dialects and Formatting Parameters",
            "A dialect groups the quoting character, the delimiter and the line terminator \
             a spreadsheet program uses.",
        ),
        section(
            "examples",
            2,
            "Examples",
            "Reading a file with the reader function."
        ),
    );
    HashMap::from([
        (
            "/".to_string(),
            html("Docs", "", "<a href=\"/csv.html\">csv</a>"),
        ),
        ("/csv.html".to_string(), Page::html(page)),
    ])
}

/// A result links to the section its words meet in (`page#anchor`, with
/// its heading path) and shows a snippet from it; `url` stays the page's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_links_to_its_section_with_a_snippet_from_it() {
    let server = TestServer::start(Ipv4Addr::new(127, 0, 12, 7), reference_site()).await;
    let index = tempfile::tempdir().unwrap();
    let backend = Backend::sqlite();
    let app = start(backend.open().await, settings(&index.path().join("ix")))
        .await
        .unwrap();
    crawl_and_flush(&app, &server.url("/")).await;
    let answer = app.search("quoting character delimiter", 10).await.unwrap();
    let first = answer.results.first().expect("a result");
    assert_eq!(first.url, server.url("/csv.html"), "{answer:?}");
    assert_eq!(
        first.section_url.as_deref(),
        Some(format!("{}#dialects", server.url("/csv.html")).as_str()),
        "{first:?}"
    );
    assert_eq!(
        first.heading_path,
        [
            "csv — CSV File Reading and Writing",
            "Dialects and Formatting Parameters"
        ]
    );
    assert!(first.snippet.contains("quoting character"), "{first:?}");
    assert!(!first.snippet.contains("Table of Contents"), "{first:?}");
    // A page without headings links to no section.
    let answer = app.search("docs", 10).await.unwrap();
    let home = answer
        .results
        .iter()
        .find(|h| h.url == server.url("/"))
        .expect("the home page");
    assert_eq!(home.section_url, None, "{home:?}");
    app.stop(Duration::from_secs(5)).await.unwrap();
}

/// The sentence model: in `WEB_CRAWLER_TEST_MODEL_DIR` (set by
/// scripts/test.sh), or installed now by scripts/models.sh. Never skipped.
fn embedder() -> std::sync::Arc<web_crawler::search::Embedder> {
    static MODEL: std::sync::OnceLock<std::sync::Arc<web_crawler::search::Embedder>> =
        std::sync::OnceLock::new();
    MODEL
        .get_or_init(|| {
            let dir = crate::common::from_env_or_script(
                "WEB_CRAWLER_TEST_MODEL_DIR",
                &["models.sh"],
                "this test needs the sentence model and it could not be installed",
            );
            std::sync::Arc::new(web_crawler::search::Embedder::load(Path::new(&dir)).unwrap())
        })
        .clone()
}

/// A site whose pages answer questions in other words than the questions'.
fn workshop() -> HashMap<String, Page> {
    let page = |title: &str, body: &str| html(title, "", &format!("<h1>{title}</h1><p>{body}</p>"));
    HashMap::from([
        (
            "/".to_string(),
            page(
                "Workshop notes",
                "Notes: <a href=\"/garage\">garage</a>, <a href=\"/bread\">bread</a>, \
                 <a href=\"/garden\">garden</a>, <a href=\"/kayak\">kayak</a>.",
            ),
        ),
        (
            "/garage".to_string(),
            page(
                "Garage",
                "Mechanics mend engines, brakes and tyres of cars and trucks; bring the \
                 vehicle in when the motor stalls or a warning light comes on.",
            ),
        ),
        (
            "/bread".to_string(),
            page(
                "Bread",
                "Mix the sourdough starter with flour and water, knead, proof overnight \
                 and bake in a hot oven for forty minutes.",
            ),
        ),
        (
            "/garden".to_string(),
            page(
                "Garden",
                "Tomatoes want sun, deep watering twice a week and a stake to climb; \
                 pinch out the side shoots.",
            ),
        ),
        (
            "/kayak".to_string(),
            page(
                "Kayak",
                "Patch the hull with epoxy and fibreglass cloth, then sand it smooth \
                 before the next paddle.",
            ),
        ),
    ])
}

/// `crawl --semantic`: a question sharing no word with its answer finds
/// it through the pages' vectors (nearest neighbours beside the words'
/// candidates), first; the same crawl without vectors cannot find it, and
/// a question the words answer is answered as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semantic_search_finds_an_answer_in_other_words() {
    let server = TestServer::start(Ipv4Addr::new(127, 0, 12, 5), workshop()).await;
    let question = "who can repair my automobile";
    for semantic in [true, false] {
        let index = tempfile::tempdir().unwrap();
        let mut settings = settings(&index.path().join("ix"));
        if semantic {
            settings.embedder = Some(embedder());
        }
        let backend = Backend::sqlite();
        let store = backend.open().await;
        let app = start(store.clone(), settings).await.unwrap();
        crawl_and_flush(&app, &server.url("/")).await;
        // The server answers both crawls: this one's pages are in its store.
        let real: Vec<String> = workshop().keys().map(|t| server.url(t)).collect();
        assert_all_stored(&not_stored(store.as_ref(), &real).await, real.len());
        let answer = answered_search(&app, question).await;
        if semantic {
            assert_eq!(
                answer.results.first().map(|h| h.url.as_str()),
                Some(server.url("/garage").as_str()),
                "{answer:?}"
            );
        } else {
            assert!(
                !urls(&answer).contains(&server.url("/garage")),
                "no word of the question is on the page: {answer:?}"
            );
        }
        let words = answered_search(&app, "sourdough").await;
        assert_eq!(
            urls(&words).first(),
            Some(&server.url("/bread")),
            "{words:?}"
        );
        app.stop(Duration::from_secs(5)).await.unwrap();
    }
}

/// A search the node's shard answered: on a loaded machine the first
/// query (a debug build embedding it) can pass the shard deadline and be
/// named missing, which is the answer's to say, not this test's subject.
async fn answered_search(app: &AppHandle, query: &str) -> SearchAnswer {
    for _ in 0..10 {
        let answer = app.search(query, 10).await.unwrap();
        if answer.nodes.as_ref().is_none_or(|n| n.missing.is_empty()) {
            return answer;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("the shard never answered {query:?}");
}
