//! End-to-end crawls of local test webs by the real tree on the embedded store.

use crate::common::backend::Backend;
use crate::common::coverage::assert_all_real_fetched;
use crate::common::{queue_seed, wait_for};
use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use web_crawler::actors::{
    ClaimRequest, CommitBatch, CommitSummary, ControlError, Document, Frontier, Job, Operation,
    OperationError, OperationOutput, OperationSpec, PageContext, PageQuery, ProcessedUrl, Record,
    RefusalCode, Storage, Store, StoreCounts, StoreError, UrlKey, async_trait,
};
use web_crawler::policy::Scope;
use web_crawler::store::SqliteStore;
use web_crawler::{IdleReason, Settings, start, start_on};
use web_crawler_testsupport::{Page, TestServer, page_with_links, reserve};

/// Test settings; the node name is unique in the process (two tests may run
/// the same body on two backends at once).
fn settings(node: &str) -> Settings {
    static N: AtomicUsize = AtomicUsize::new(0);
    let mut s = Settings::default();
    s.crawl.node_name = format!("{node}-{}", N.fetch_add(1, Ordering::SeqCst));
    s.crawl.concurrency = 8;
    s.crawl.per_host = 1;
    s.crawl.min_delay = Duration::ZERO;
    s.crawl.retry_backoff = Duration::from_millis(20);
    s.crawl.tick = Duration::from_millis(50);
    s.policy.scope = Scope::Any;
    s.fetch.total_timeout = Duration::from_secs(5);
    s
}

/// Crawl to the end and hand back the store for inspection.
async fn crawl(store: Arc<dyn Store>, settings: Settings, seeds: &[(String, OperationSpec)]) {
    let app = start(store, settings).await.unwrap();
    for (url, op) in seeds {
        queue_seed(&app, url, op.clone()).await;
    }
    let idle = tokio::time::timeout(Duration::from_secs(120), app.wait_idle())
        .await
        .expect("crawl finishes")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    app.stop(Duration::from_secs(5)).await.unwrap();
}

async fn processed_by_url(store: &dyn Store) -> HashMap<String, ProcessedUrl> {
    store
        .processed(PageQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.record.url.clone(), p))
        .collect()
}

/// The small web: two hosts, robots.txt, redirects with a loop, a 404,
/// relative links, normalization variants of one URL.
async fn small_web() -> (TestServer, TestServer) {
    let b = TestServer::start(
        Ipv4Addr::new(127, 0, 0, 3),
        HashMap::from([
            ("/".to_string(), page_with_links("B home", &["/x"])),
            ("/x".to_string(), page_with_links("B x", &["/"])),
        ]),
    )
    .await;
    let b_home = b.url("/");
    let a_pages = HashMap::from([
        (
            "/robots.txt".to_string(),
            Page::text("text/plain", "User-agent: *\nDisallow: /private/\n"),
        ),
        (
            "/".to_string(),
            page_with_links(
                "A home",
                &[
                    "/a",
                    "./b",
                    "/a#section",
                    "/sub/../a",
                    "/%7Euser/",
                    "/~user/",
                    "/private/secret",
                    "/redirect",
                    "/loop1",
                    "/missing",
                    &b_home,
                    "mailto:someone@example.com",
                    "javascript:void(0)",
                ],
            ),
        ),
        (
            "/a".to_string(),
            page_with_links("A a", &["/", "/b", "/sub/c"]),
        ),
        (
            "/b".to_string(),
            page_with_links("A b", &["/a", "HTTP://127.0.0.2:PORT/a"]),
        ),
        ("/sub/c".to_string(), page_with_links("A c", &["../b", "d"])),
        ("/sub/d".to_string(), page_with_links("A d", &[])),
        ("/~user/".to_string(), page_with_links("A user", &[])),
        (
            "/private/secret".to_string(),
            page_with_links("secret", &[]),
        ),
        ("/redirect".to_string(), Page::redirect(301, "/target")),
        ("/target".to_string(), page_with_links("A target", &[])),
        ("/loop1".to_string(), Page::redirect(302, "/loop2")),
        ("/loop2".to_string(), Page::redirect(302, "/loop1")),
    ]);
    // The absolute self-link needs the port, known only once bound: bind, then serve.
    let listener = reserve(Ipv4Addr::new(127, 0, 0, 2));
    let addr = listener.local_addr().unwrap();
    let a_pages = a_pages
        .into_iter()
        .map(|(k, mut v)| {
            let body = String::from_utf8(v.body).unwrap();
            v.body = body.replace("PORT", &addr.port().to_string()).into_bytes();
            (k, v)
        })
        .collect();
    let a = TestServer::serve(listener, a_pages).await;
    (a, b)
}

/// The real pages of the small web's host a (200s: not its redirects, its
/// 404, nor what robots.txt disallows).
const A_PAGES: [&str; 7] = ["/", "/a", "/b", "/sub/c", "/sub/d", "/~user/", "/target"];

async fn crawls_a_small_web_exactly_once(backend: Backend) {
    let (a, b) = small_web().await;
    let store = backend.open().await;
    crawl(
        store.clone(),
        settings("e2e"),
        &[(a.url("/"), OperationSpec::crawl())],
    )
    .await;

    // Every reachable allowed page fetched exactly once; nothing disallowed
    // fetched. Besides pages: robots.txt, the conventional sitemap, and one
    // path that cannot exist (the soft-404 probe).
    let a_expected = [
        "/robots.txt",
        "/sitemap.xml",
        "/",
        "/a",
        "/b",
        "/sub/c",
        "/sub/d",
        "/~user/",
        "/redirect",
        "/target",
        "/loop1",
        "/loop2",
        "/missing",
    ];
    let a_hits = a.hits();
    for path in a_expected {
        assert_eq!(
            a_hits.get(path),
            Some(&1),
            "{path} fetched once: {a_hits:?}"
        );
    }
    let probes: Vec<&String> = a_hits
        .keys()
        .filter(|t| t.starts_with("/web-crawler-404-probe-"))
        .collect();
    assert_eq!(probes.len(), 1, "one soft-404 probe: {a_hits:?}");
    assert_eq!(
        a_hits.len(),
        a_expected.len() + 1,
        "nothing else fetched: {a_hits:?}"
    );
    assert_eq!(a.hits_of("/private/secret"), 0);
    let b_hits = b.hits();
    assert_eq!(b_hits.get("/"), Some(&1));
    assert_eq!(b_hits.get("/x"), Some(&1));
    assert_eq!(b_hits.get("/robots.txt"), Some(&1));

    let pages = processed_by_url(&*store).await;
    let home = &pages[&a.url("/")];
    assert_eq!(home.record.http_returncode, Some(200));
    assert_eq!(
        home.record.content_type.as_deref(),
        Some("text/html; charset=utf-8")
    );
    // Distinct links (normalization variants count once) plus the two unusable ones.
    assert_eq!(home.record.links_count, 10);
    assert_eq!(home.record.title.as_deref(), Some("A home"));

    // Referral lists: /a is linked from /, /b and /b's absolute variant.
    let a_page = &pages[&a.url("/a")];
    let referrals: HashSet<&str> = a_page.referral_list.iter().map(String::as_str).collect();
    assert_eq!(
        referrals,
        HashSet::from([a.url("/").as_str(), a.url("/b").as_str()])
    );
    assert_eq!(a_page.referral_count, 2);

    // Redirects recorded, the loop ends.
    assert_eq!(pages[&a.url("/redirect")].record.http_returncode, Some(301));
    assert_eq!(
        pages[&a.url("/redirect")].record.redirect_to.as_deref(),
        Some(a.url("/target").as_str())
    );
    assert_eq!(
        pages[&a.url("/loop2")].record.redirect_to.as_deref(),
        Some(a.url("/loop1").as_str())
    );
    assert_eq!(pages[&a.url("/missing")].record.http_returncode, Some(404));

    // robots-blocked page recorded, not fetched.
    let secret = &pages[&a.url("/private/secret")];
    assert_eq!(secret.record.http_returncode, None);
    assert_eq!(
        secret.record.error.as_deref(),
        Some(web_crawler::actors::ROBOTS_BLOCKED)
    );

    let counts = store.counts().await.unwrap();
    assert_eq!(counts.pending, 0);
    assert_eq!(counts.processing, 0);
    // a's pages (not robots.txt and the sitemap), its robots-blocked page,
    // and b's two pages.
    assert_eq!(counts.processed as usize, a_expected.len() - 2 + 1 + 2);

    // The hosts collection knows both robots.txt outcomes.
    let hosts = store.hosts().await.unwrap();
    assert_eq!(hosts.len(), 2, "{hosts:?}");
}

async fn host_scope_stays_on_the_seed_host(backend: Backend) {
    let (a, b) = small_web().await;
    let store = backend.open().await;
    let mut s = settings("scope");
    s.policy.scope = Scope::Host;
    crawl(store.clone(), s, &[(a.url("/"), OperationSpec::crawl())]).await;
    assert_eq!(b.total_hits(), 0, "other host never contacted");
    assert!(a.hits_of("/sub/d") == 1);
    assert_all_real_fetched(&a, A_PAGES);
}

async fn search_text_records_where_readers_see_the_text(b: Backend) {
    // Visible text "Needle page" (the title) then the paragraph; the
    // attribute, the script and the nav are not what a reader sees.
    let body = "<html><head><title>Needle page</title></head><body>\
                <nav>needle nav</nav><p class=\"needle\">first needle, then NEEDLE \
                and é needle.</p><script>var needle = 1;</script>\
                <a href=\"/other\">x</a></body></html>";
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 0, 4),
        HashMap::from([
            ("/".to_string(), Page::html(body)),
            ("/other".to_string(), page_with_links("nothing here", &[])),
        ]),
    )
    .await;
    let store = b.open().await;
    crawl(
        store.clone(),
        settings("search"),
        &[(server.url("/"), OperationSpec::search_text("needle"))],
    )
    .await;
    let results = store.text_match_hits(Some("needle")).await.unwrap();
    assert_eq!(results.len(), 1, "only the page with the text: {results:?}");
    assert_eq!(results[0].url, server.url("/"));
    let visible = "Needle page first needle, then NEEDLE and é needle. x";
    let expected: Vec<u64> = visible
        .to_lowercase()
        .match_indices("needle")
        .map(|(i, _)| visible[..i].chars().count() as u64)
        .collect();
    assert_eq!(results[0].positions, expected, "char offsets, any case");
    assert_eq!(results[0].positions.len(), 4);
    assert!(
        results[0].contexts[1].contains("first needle, then"),
        "{results:?}"
    );
    assert!(results[0].d_search > 0);
    // The link was followed with the operation attached.
    let other = store
        .processed_url(&server.url("/other"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(other.record.operation, OperationSpec::search_text("needle"));
    assert_all_real_fetched(&server, ["/", "/other"]);
}

/// #26 item 3: an operator's `set concurrency` and `set delay` are the
/// node's runtime settings, not the actors' copies: the master's window
/// follows them at once, and a pool killed and restarted and a master
/// restarted by the operator keep them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_set_at_run_time_hold_across_restarts_and_size_the_window() {
    use web_crawler::actors::{ActorState, ChildRole, ControlReply, ControlRequest, Setting};
    use web_crawler::actors::{RestartIntensity, Status};
    // Four hosts whose every answer takes 100 ms; each request's start is logged.
    let starts: Arc<std::sync::Mutex<Vec<(String, String, Instant)>>> = Arc::default();
    let mut servers = Vec::new();
    for i in 0..4 {
        let listener = reserve(Ipv4Addr::new(127, 0, 40, 1 + i));
        let host = listener.local_addr().unwrap().to_string();
        let log = starts.clone();
        let server = TestServer::serve_fn(listener, move |req| {
            let path = req.uri().path().to_string();
            log.lock()
                .unwrap()
                .push((host.clone(), path, Instant::now()));
            let page = match req.uri().path() {
                "/robots.txt" => Page::not_found(),
                "/" => page_with_links(&format!("{host} home"), &["/a", "/b"]),
                path => Page::html(format!("<p>{host} page {path}</p>")),
            };
            page.delay(Duration::from_millis(100))
        })
        .await;
        servers.push(server);
    }
    let mut s = settings("runtime-settings");
    s.crawl.restart_intensity = RestartIntensity::new(5, Duration::from_secs(60));
    let pool_name = s.crawl.pool_name();
    let app = start(Backend::sqlite().open().await, s).await.unwrap();
    let control = app.control();
    let status_until = |want: fn(&Status) -> bool| {
        let app = &app;
        async move {
            for _ in 0..200 {
                let status = app.status().await.unwrap();
                if want(&status) {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("{:?}", app.status().await.unwrap())
        }
    };
    let status = status_until(|s| s.claim_window > 0).await;
    assert_eq!(
        status.claim_window,
        8 * 64,
        "one node's window at concurrency 8"
    );
    for setting in [Setting::Concurrency(1), Setting::DelayMs(300)] {
        control
            .request(&ControlRequest::Set { setting })
            .await
            .unwrap();
    }
    status_until(|s| s.claim_window == 64).await;

    // The pool crashes; the operator restarts the master.
    ractor::registry::where_is(pool_name)
        .expect("the pool runs")
        .kill();
    let restarted = |role| {
        let app = &app;
        async move {
            for _ in 0..200 {
                let children = app.which_children().await.unwrap();
                if children.iter().any(|c| c.role == role && c.restarts == 1) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("{role:?} restarted")
        }
    };
    restarted(ChildRole::Pool).await;
    control
        .request(&ControlRequest::RestartMaster)
        .await
        .unwrap();
    restarted(ChildRole::Master).await;
    let status = status_until(|s| s.master_restarts == 1 && s.claim_window > 0).await;
    assert_eq!(
        status.claim_window, 64,
        "the restarted master's window: concurrency 1"
    );
    let state = control
        .request(&ControlRequest::State {
            actor: "config".into(),
        })
        .await
        .unwrap();
    let ControlReply::State(ActorState::Config(config)) = state else {
        panic!("{state:?}")
    };
    assert_eq!(config.concurrency, 1);
    assert_eq!(config.min_delay, Duration::from_millis(300));

    // The restarted pool fetches one request at a time over the four
    // hosts, each host's pages 300 ms apart.
    for server in &servers {
        app.add_url(&server.url("/")).await.unwrap();
    }
    let idle = tokio::time::timeout(Duration::from_secs(60), app.wait_idle())
        .await
        .expect("crawl finishes")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    app.stop(Duration::from_secs(5)).await.unwrap();
    let mut starts = starts.lock().unwrap().clone();
    starts.sort_by_key(|(_, _, at)| *at);
    // Robots.txt, sitemaps and the soft-404 probe too: every request.
    for pair in starts.windows(2) {
        let gap = pair[1].2 - pair[0].2;
        assert!(
            gap >= Duration::from_millis(95),
            "one request at a time: {gap:?} between {pair:?}"
        );
    }
    for server in &servers {
        let host = server.addr.to_string();
        let pages: Vec<&(String, String, Instant)> = starts
            .iter()
            .filter(|(h, path, _)| *h == host && ["/", "/a", "/b"].contains(&path.as_str()))
            .collect();
        assert_eq!(pages.len(), 3, "{host}'s pages, once each: {starts:?}");
        for pair in pages.windows(2) {
            let gap = pair[1].2 - pair[0].2;
            assert!(
                gap >= Duration::from_millis(290),
                "{host}: {gap:?} between two pages"
            );
        }
    }
}

/// Embedding: `AppHandle::control()` reads what the console lists (pages
/// newest first, failures, search results, hosts, pending), typed, with
/// the same calls and error type as a `Remote`; once the app has stopped
/// a read says there is no control actor.
async fn an_embedded_app_reads_pages_results_and_hosts(b: Backend) {
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 0, 13),
        HashMap::from([
            (
                "/".to_string(),
                page_with_links("alpha home", &["/a", "/gone"]),
            ),
            ("/a".to_string(), Page::html("<p>alpha again, alpha</p>")),
        ]),
    )
    .await;
    let store = b.open().await;
    let app = start(store, settings("reads")).await.unwrap();
    app.add_url_with(&server.url("/"), OperationSpec::search_text("alpha"))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), app.wait_idle())
        .await
        .expect("crawl finishes")
        .unwrap();
    let control = app.control();
    let processed = control.processed(10).await.unwrap();
    let urls: HashSet<&str> = processed.iter().map(|p| p.record.url.as_str()).collect();
    for path in ["/", "/a", "/gone"] {
        assert!(urls.contains(server.url(path).as_str()), "{urls:?}");
    }
    assert!(
        processed
            .windows(2)
            .all(|w| w[0].d_processed >= w[1].d_processed),
        "newest first"
    );
    let failed: Vec<String> = control
        .failed(10)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.record.url)
        .collect();
    assert!(failed.contains(&server.url("/gone")), "{failed:?}");
    assert!(!failed.contains(&server.url("/a")), "{failed:?}");
    let results = control.text_match_hits(Some("alpha"), 1).await.unwrap();
    assert_eq!(results.total, 2, "{results:?}");
    assert_eq!(results.items.len(), 1, "the limit");
    assert_eq!(results.items[0].url, server.url("/"));
    let at_a = control.text_match_hits(None, 10).await.unwrap();
    let a = at_a
        .items
        .iter()
        .find(|r| r.url == server.url("/a"))
        .unwrap();
    assert_eq!(a.positions.len(), 2, "{a:?}");
    let hosts = control.hosts(10).await.unwrap();
    assert_eq!(hosts.total, 1, "{hosts:?}");
    assert!(server.url("/").contains(&hosts.items[0].host), "{hosts:?}");
    assert!(hosts.items[0].pages >= 3, "{hosts:?}");
    assert!(control.pending(10).await.unwrap().is_empty());
    // A one-shot crawl checks nothing again: a URL's own interval is refused.
    let every = Duration::from_secs(2);
    let through_app = app
        .add_url_watched(&server.url("/a"), OperationSpec::crawl(), every)
        .await
        .unwrap_err()
        .to_string();
    let through_control = control
        .add_url_watched(&server.url("/a"), OperationSpec::crawl(), every)
        .await
        .unwrap_err()
        .to_string();
    let unwatch = control
        .unwatch(&server.url("/a"), OperationSpec::crawl())
        .await
        .unwrap_err()
        .to_string();
    for said in [through_app, through_control, unwatch] {
        assert!(said.contains("checks nothing again"), "{said}");
    }
    // A zero interval is refused before it is sent, not taken for `off`.
    let zero = control
        .add_url_watched(&server.url("/a"), OperationSpec::crawl(), Duration::ZERO)
        .await
        .unwrap_err();
    assert!(zero.to_string().contains("shortest interval"), "{zero}");
    app.stop(Duration::from_secs(5)).await.unwrap();
    let gone = control.status().await.unwrap_err();
    assert!(matches!(gone, ControlError::NoControl(_)), "{gone:?}");
}

/// An operation that panics on pages containing "POISON".
struct Poison;

#[async_trait]
impl Operation for Poison {
    fn name(&self) -> &str {
        "poison"
    }
    fn validate(&self, _args: &[String]) -> Result<(), OperationError> {
        Ok(())
    }
    async fn run(
        &self,
        ctx: &PageContext<'_>,
        _args: &[String],
    ) -> Result<OperationOutput, OperationError> {
        if ctx.extracted.document.contains("POISON") {
            panic!("poisoned page {}", ctx.job.url);
        }
        Ok(OperationOutput::default())
    }
}

async fn a_panicking_slave_is_retried_then_recorded_as_failed(b: Backend) {
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 0, 5),
        HashMap::from([
            (
                "/".to_string(),
                page_with_links("home", &["/poisoned", "/fine"]),
            ),
            (
                "/poisoned".to_string(),
                Page::html("<p>POISON</p><a href=\"/after\">a</a>"),
            ),
            ("/fine".to_string(), page_with_links("fine", &[])),
        ]),
    )
    .await;
    let store = b.open().await;
    let mut s = settings("poison");
    s.crawl.max_attempts = 3;
    s.operations = s.operations.clone().with(Arc::new(Poison));
    let op = OperationSpec(vec!["poison".into()]);
    crawl(store.clone(), s, &[(server.url("/"), op)]).await;

    assert_eq!(server.hits_of("/poisoned"), 3, "fetched once per attempt");
    assert_eq!(server.hits_of("/fine"), 1);
    let failed = store
        .processed_url(&server.url("/poisoned"))
        .await
        .unwrap()
        .unwrap();
    let error = failed.record.error.unwrap();
    assert!(error.contains("failed after 3 attempt(s)"), "{error}");
    assert!(
        error.contains("poisoned page"),
        "the panic message is kept: {error}"
    );
    assert_eq!(
        server.hits_of("/after"),
        0,
        "a failed page's links are not followed"
    );
}

/// A user's operation, as an embedding user writes it: the visible words
/// of each page, kept in a collection of its own.
struct CountWords;

#[async_trait]
impl Operation for CountWords {
    fn name(&self) -> &str {
        "count_words"
    }
    fn validate(&self, args: &[String]) -> Result<(), OperationError> {
        match args {
            [] => Ok(()),
            _ => Err(OperationError::BadArguments("no arguments".into())),
        }
    }
    async fn run(
        &self,
        ctx: &PageContext<'_>,
        _args: &[String],
    ) -> Result<OperationOutput, OperationError> {
        let words = ctx.extracted.text.split_whitespace().count();
        let key = Document::from_iter([("url".to_string(), ctx.job.url.clone().into())]);
        let fields = Document::from_iter([("words".to_string(), words.into())]);
        Ok(OperationOutput::records(vec![Record {
            collection: "word_counts".into(),
            key,
            fields,
            stamp: Some("d_counted".into()),
        }]))
    }
}

/// A page whose only visible words are `words` (its links have no text).
fn words_page(words: &str, links: &[&str]) -> Page {
    let links: String = links
        .iter()
        .map(|l| format!("<a href=\"{l}\"></a>"))
        .collect();
    Page::html(format!("<html><body><p>{words}</p>{links}</body></html>"))
}

async fn a_custom_operation_stores_its_own_records(b: Backend) {
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 0, 12),
        HashMap::from([
            ("/".to_string(), words_page("one two three", &["/a", "/b"])),
            ("/a".to_string(), words_page("four five", &["/"])),
            ("/b".to_string(), words_page("six", &[])),
        ]),
    )
    .await;
    let store = b.open().await;
    let mut s = settings("custom-op");
    s.operations = s.operations.clone().with(Arc::new(CountWords));
    let op = OperationSpec(vec!["count_words".into()]);
    crawl(store.clone(), s.clone(), &[(server.url("/"), op.clone())]).await;
    let mut counts: Vec<(String, u64)> = store
        .records("word_counts", &Document::new())
        .await
        .unwrap()
        .into_iter()
        .map(|d| {
            assert!(d["d_counted"].as_i64().unwrap() > 0, "stamped: {d:?}");
            (
                d["url"].as_str().unwrap().to_string(),
                d["words"].as_u64().unwrap(),
            )
        })
        .collect();
    counts.sort();
    assert_eq!(
        counts,
        vec![
            (server.url("/"), 3),
            (server.url("/a"), 2),
            (server.url("/b"), 1),
        ]
    );
    // A bad argument list is refused at add_url, with the operation's reason.
    let app = start(store.clone(), s).await.unwrap();
    let err = app
        .add_url_with(
            &server.url("/"),
            OperationSpec(vec!["count_words".into(), "x".into()]),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no arguments"), "{err}");
    app.stop(Duration::from_secs(5)).await.unwrap();
}

/// The real store with injected failures: the Nth and later commits fail
/// (up to `failures` times), as a disk or server error would. It wraps the
/// frontier only; the queries go to the store itself.
#[derive(Debug)]
struct FlakyStore {
    inner: Arc<dyn Store>,
    commits: AtomicUsize,
    fail_from: usize,
    failures: AtomicUsize,
}

impl FlakyStore {
    fn new(inner: Arc<dyn Store>, fail_from: usize, failures: usize) -> Arc<Self> {
        Arc::new(Self {
            inner,
            commits: AtomicUsize::new(0),
            fail_from,
            failures: AtomicUsize::new(failures),
        })
    }

    fn storage(self: &Arc<Self>) -> Storage {
        Storage::split(self.clone(), self.inner.clone())
    }
}

#[async_trait]
impl Frontier for FlakyStore {
    async fn claim(&self, req: ClaimRequest) -> Result<Vec<Job>, StoreError> {
        self.inner.claim(req).await
    }
    async fn commit(&self, batch: Arc<CommitBatch>) -> Result<CommitSummary, StoreError> {
        let n = self.commits.fetch_add(1, Ordering::SeqCst);
        if n >= self.fail_from
            && self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| f.checked_sub(1))
                .is_ok()
        {
            return Err(StoreError::backend(
                "injected failure",
                std::io::Error::other("disk I/O error"),
            ));
        }
        self.inner.commit(batch).await
    }
    async fn extend_leases(&self, k: &[UrlKey], o: &str, u: i64) -> Result<(), StoreError> {
        self.inner.extend_leases(k, o, u).await
    }
    async fn release(&self, owner: &str, keep: &[UrlKey]) -> Result<u64, StoreError> {
        self.inner.release(owner, keep).await
    }
    async fn release_keys(&self, keys: &[UrlKey]) -> Result<u64, StoreError> {
        self.inner.release_keys(keys).await
    }
    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        self.inner.counts().await
    }

    async fn frontier_empty(&self) -> Result<bool, StoreError> {
        self.inner.frontier_empty().await
    }

    async fn requeue_due(&self, now: i64, limit: usize) -> Result<u64, StoreError> {
        self.inner.requeue_due(now, limit).await
    }

    async fn hand_over(
        &self,
        node: &str,
        after: Option<&str>,
        limit: usize,
        now: i64,
    ) -> Result<web_crawler::actors::HandOver, StoreError> {
        self.inner.hand_over(node, after, limit, now).await
    }

    async fn nodes_with_pages(&self) -> Result<Vec<String>, StoreError> {
        self.inner.nodes_with_pages().await
    }
    async fn trap_closures(&self) -> Result<Vec<web_crawler::actors::ClosedFamily>, StoreError> {
        self.inner.trap_closures().await
    }
    async fn reopen_trap_family(
        &self,
        family: &str,
        now: web_crawler::actors::Millis,
    ) -> Result<Option<u64>, StoreError> {
        self.inner.reopen_trap_family(family, now).await
    }
}

fn chain_web(n: usize) -> HashMap<String, Page> {
    let mut pages = HashMap::new();
    for i in 0..n {
        let links: Vec<String> = (1..=3).map(|k| format!("/p{}", (i + k) % n)).collect();
        let refs: Vec<&str> = links.iter().map(String::as_str).collect();
        pages.insert(
            format!("/p{i}"),
            page_with_links(&format!("page {i}"), &refs),
        );
    }
    pages.insert("/".to_string(), page_with_links("root", &["/p0"]));
    pages
}

async fn a_crashed_master_is_restarted_and_the_crawl_completes(b: Backend) {
    let server = TestServer::start(Ipv4Addr::new(127, 0, 0, 6), chain_web(60)).await;
    let store = FlakyStore::new(b.open().await, 5, 1);
    let app = start_on(store.storage(), settings("restart"))
        .await
        .unwrap();
    app.add_url(&server.url("/")).await.unwrap();
    let idle = tokio::time::timeout(Duration::from_secs(60), app.wait_idle())
        .await
        .expect("crawl finishes")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    let status = app.status().await.unwrap();
    assert_eq!(
        status.master_restarts, 1,
        "the sup restarted the master once"
    );
    let children = app.which_children().await.unwrap();
    assert_eq!(children.len(), 3, "pool, master, control: {children:?}");
    app.stop(Duration::from_secs(5)).await.unwrap();

    let processed = processed_by_url(&*store.inner).await;
    for i in 0..60 {
        let url = server.url(&format!("/p{i}"));
        assert_eq!(processed[&url].record.http_returncode, Some(200), "{url}");
    }
    assert_eq!(store.inner.counts().await.unwrap().pending, 0);
}

async fn exceeding_the_restart_intensity_stops_the_app_with_the_reason(b: Backend) {
    let server = TestServer::start(Ipv4Addr::new(127, 0, 0, 7), chain_web(20)).await;
    let store = FlakyStore::new(b.open().await, 1, usize::MAX);
    let app = start_on(store.storage(), settings("intensity"))
        .await
        .unwrap();
    app.add_url(&server.url("/")).await.unwrap();
    // Coverage is not asserted: the app stops by design before the web's end.
    let err = tokio::time::timeout(Duration::from_secs(30), app.wait_idle())
        .await
        .expect("the app stops")
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("restart intensity exceeded"), "{msg}");
    assert!(
        msg.contains("injected failure"),
        "the child's reason is kept: {msg}"
    );
    assert!(app.exit_reason().is_some());
    assert!(wait_for(Duration::from_secs(5), || app.exit_reason().is_some()).await);
    assert!(app.wait().await.is_err());
}

async fn resumes_on_the_same_store_without_refetching(b: Backend) {
    let server = TestServer::start(Ipv4Addr::new(127, 0, 0, 8), chain_web(40)).await;
    {
        let store = b.open().await;
        let mut s = settings("resume");
        s.crawl.max_pages = Some(15);
        let app = start(store.clone(), s).await.unwrap();
        app.add_url(&server.url("/")).await.unwrap();
        assert_eq!(app.wait_idle().await.unwrap(), IdleReason::BudgetReached);
        app.stop(Duration::from_secs(5)).await.unwrap();
        assert!(store.counts().await.unwrap().pending > 0);
    }
    let store = b.open().await;
    crawl(
        store.clone(),
        settings("resume"),
        &[(server.url("/"), OperationSpec::crawl())],
    )
    .await;
    // robots.txt, the conventional sitemap and the soft-404 probe are asked
    // by each run; every page once across both.
    let pages: HashMap<String, u32> = server
        .hits()
        .into_iter()
        .filter(|(t, _)| t == "/" || t.starts_with("/p"))
        .collect();
    for (target, n) in &pages {
        assert_eq!(*n, 1, "{target} fetched once across both runs");
    }
    assert_eq!(pages.len(), 40 + 1, "every page and the root");
}

async fn unreachable_robots_txt_means_nothing_is_fetched(b: Backend) {
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 0, 9),
        HashMap::from([
            (
                "/robots.txt".to_string(),
                Page::text("text/plain", "busy").status(503),
            ),
            ("/".to_string(), page_with_links("home", &["/a"])),
        ]),
    )
    .await;
    let store = b.open().await;
    let mut s = settings("robots503");
    s.crawl.max_attempts = 2;
    s.crawl.robots_retry = Duration::from_millis(100);
    crawl(
        store.clone(),
        s,
        &[(server.url("/"), OperationSpec::crawl())],
    )
    .await;
    // Coverage is not asserted: no page may be fetched without robots.txt.
    assert_eq!(
        server.hits_of("/"),
        0,
        "no page fetched while robots.txt is unreachable"
    );
    assert_eq!(
        server.hits_of("/robots.txt"),
        2,
        "asked again after the retry interval"
    );
    let home = store
        .processed_url(&server.url("/"))
        .await
        .unwrap()
        .unwrap();
    let error = home.record.error.unwrap();
    assert_eq!(
        error,
        format!(
            "failed after 2 attempt(s): robots.txt unreachable ({}: HTTP 503)",
            server.url("/robots.txt")
        )
    );
    let hosts = store.hosts().await.unwrap();
    assert_eq!(
        hosts[0].robots_status,
        web_crawler::actors::RobotsStatus::Unreachable
    );
    assert_eq!(hosts[0].robots_http_code, Some(503));
}

/// A narrow web (each page links to the next only) never waits for the
/// group-commit timer: when every URL the master holds is waiting for the
/// write, it writes at once. With the timer and the tick both far beyond
/// `crawl`'s time limit, waiting would not finish.
async fn a_narrow_crawl_writes_without_waiting_for_the_timer(b: Backend) {
    let n = 15;
    let mut pages: HashMap<String, Page> = (0..n)
        .map(|i| {
            let next = format!("/p{}", i + 1);
            (
                format!("/p{i}"),
                page_with_links(&format!("page {i}"), &[&next]),
            )
        })
        .collect();
    pages.insert(format!("/p{n}"), page_with_links("end", &[]));
    let server = TestServer::start(Ipv4Addr::new(127, 0, 0, 11), pages).await;
    let store = b.open().await;
    let mut s = settings("narrow");
    s.crawl.flush_every = Duration::from_secs(3600);
    s.crawl.tick = Duration::from_secs(3600);
    crawl(
        store.clone(),
        s,
        &[(server.url("/p0"), OperationSpec::crawl())],
    )
    .await;
    assert_eq!(server.hits_of(&format!("/p{n}")), 1);
    assert_eq!(store.counts().await.unwrap().processed, n as u64 + 1);
}

async fn a_killed_master_is_restarted_and_adopts_the_pools_work(b: Backend) {
    let pages: HashMap<String, Page> = chain_web(40)
        .into_iter()
        .map(|(k, v)| (k, v.delay(Duration::from_millis(10))))
        .collect();
    let server = TestServer::start(Ipv4Addr::new(127, 0, 0, 10), pages).await;
    let store = b.open().await;
    let s = settings("kill-master");
    let window = s.crawl.effective_claim_window() as u32;
    let app = start(store.clone(), s).await.unwrap();
    app.add_url(&server.url("/")).await.unwrap();
    assert!(wait_for(Duration::from_secs(30), || server.total_hits() >= 10).await);
    app.kill_master().await.unwrap();
    let idle = tokio::time::timeout(Duration::from_secs(60), app.wait_idle())
        .await
        .expect("crawl finishes")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    assert_eq!(app.status().await.unwrap().master_restarts, 1);
    let children = app.which_children().await.unwrap();
    assert!(children.iter().any(|c| c.restarts == 1), "{children:?}");
    app.stop(Duration::from_secs(5)).await.unwrap();
    for i in 0..40 {
        let url = server.url(&format!("/p{i}"));
        let page = store.processed_url(&url).await.unwrap();
        assert_eq!(
            page.map(|p| p.record.http_returncode),
            Some(Some(200)),
            "{url}"
        );
    }
    // The pool kept running across the restart: only results the old master
    // had not yet committed (at most the window) are fetched again.
    let repeated: u32 = server.hits().values().map(|n| n.saturating_sub(1)).sum();
    assert!(repeated <= window, "{repeated} repeated fetches");
}

/// An operator restarts the master twice within the restart period: not
/// crashes, so the default intensity (1 in 60 s) is not spent on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_restarts_do_not_spend_the_restart_intensity() {
    let web = chain_web(30);
    let real: Vec<String> = web.keys().cloned().collect();
    let server = TestServer::start(Ipv4Addr::new(127, 0, 0, 11), web).await;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("c.db")).unwrap());
    let s = settings("operator");
    assert_eq!(s.crawl.restart_intensity.max_restarts, 1, "the default");
    let app = start(store.clone(), s).await.unwrap();
    for restarts in 1..=2 {
        app.restart_master().await.unwrap();
        // Its successor answers before it is restarted again.
        assert_eq!(app.status().await.unwrap().master_restarts, restarts);
    }
    app.add_url(&server.url("/")).await.unwrap();
    let idle = tokio::time::timeout(Duration::from_secs(60), app.wait_idle())
        .await
        .expect("crawl finishes")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    assert_eq!(app.status().await.unwrap().master_restarts, 2);
    assert!(app.exit_reason().is_none(), "the app runs on");
    app.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!(store.counts().await.unwrap().processed, 31);
    assert_all_real_fetched(&server, &real);
}

on_both_backends!(
    crawls_a_small_web_exactly_once,
    crawls_a_small_web_exactly_once
);
on_both_backends!(
    narrow_crawl_writes_at_once,
    a_narrow_crawl_writes_without_waiting_for_the_timer
);
on_both_backends!(
    host_scope_stays_on_the_seed_host,
    host_scope_stays_on_the_seed_host
);
on_both_backends!(
    search_text_records_where_readers_see_the_text,
    search_text_records_where_readers_see_the_text
);
on_both_backends!(
    a_custom_operation_stores_its_own_records,
    a_custom_operation_stores_its_own_records
);
on_both_backends!(
    a_panicking_slave_is_retried_then_recorded_as_failed,
    a_panicking_slave_is_retried_then_recorded_as_failed
);
on_both_backends!(
    a_crashed_master_is_restarted_and_the_crawl_completes,
    a_crashed_master_is_restarted_and_the_crawl_completes
);
on_both_backends!(
    exceeding_the_restart_intensity_stops_the_app_with_the_reason,
    exceeding_the_restart_intensity_stops_the_app_with_the_reason
);
on_both_backends!(
    resumes_on_the_same_store_without_refetching,
    resumes_on_the_same_store_without_refetching
);
on_both_backends!(
    unreachable_robots_txt_means_nothing_is_fetched,
    unreachable_robots_txt_means_nothing_is_fetched
);
on_both_backends!(
    a_killed_master_is_restarted_and_adopts_the_pools_work,
    a_killed_master_is_restarted_and_adopts_the_pools_work
);
on_both_backends!(
    embedded_reads,
    an_embedded_app_reads_pages_results_and_hosts
);

/// `status` counts requests apart from claimed URLs: one host at
/// `--per-host 1` has one request in flight at a time, while the master
/// holds several of its URLs claimed for the pool (the progress line once
/// showed those as "8 in flight").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_counts_requests_in_flight_apart_from_claimed_urls() {
    let links: Vec<String> = (0..20).map(|i| format!("/p/{i}")).collect();
    let link_refs: Vec<&str> = links.iter().map(String::as_str).collect();
    let mut pages = HashMap::from([("/".to_string(), page_with_links("home", &link_refs))]);
    for path in &links {
        let page = page_with_links(path, &[]).delay(Duration::from_millis(100));
        pages.insert(path.clone(), page);
    }
    let site = TestServer::start(Ipv4Addr::new(127, 0, 27, 1), pages).await;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("c.db")).unwrap());
    let app = start(store, settings("requests")).await.unwrap();
    app.add_url(&site.url("/")).await.unwrap();
    let (mut most_requests, mut most_claimed) = (0, 0);
    let idle = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let s = app.status().await.unwrap();
            most_requests = most_requests.max(s.requests_in_flight);
            most_claimed = most_claimed.max(s.in_flight);
            if s.idle.is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    })
    .await;
    assert!(idle.is_ok(), "the crawl ends");
    app.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!(most_requests, 1, "--per-host 1: one request at a time");
    assert!(most_claimed > 1, "several URLs claimed: {most_claimed}");
    assert_all_real_fetched(&site, std::iter::once(&"/".to_string()).chain(&links));
}

/// A host that refuses connections beside one that answers: the run has
/// someone to crawl, so the refused host keeps its retries (each a new
/// connection attempt) and its URL fails after them, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_host_beside_an_answering_one_keeps_its_retries() {
    let site = TestServer::start(
        Ipv4Addr::new(127, 0, 27, 2),
        HashMap::from([("/".to_string(), page_with_links("home", &[]))]),
    )
    .await;
    let closed = reserve(Ipv4Addr::new(127, 0, 27, 3));
    let refused_url = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("c.db")).unwrap());
    let mut s = settings("refused");
    s.crawl.robots_retry = Duration::from_millis(300);
    crawl(
        store.clone(),
        s,
        &[
            (site.url("/"), OperationSpec::crawl()),
            (refused_url.clone(), OperationSpec::crawl()),
        ],
    )
    .await;
    let refused = store.processed_url(&refused_url).await.unwrap().unwrap();
    assert_eq!(
        refused.record.error.as_deref(),
        Some("failed after 3 attempt(s): robots.txt unreachable (connection refused)")
    );
    let home = store.processed_url(&site.url("/")).await.unwrap().unwrap();
    assert_eq!(home.record.http_returncode, Some(200));
}

/// `add_url` of a processed URL through the Rust API (`AppHandle`) and
/// through the control actor (one URL and a batch, as the console, the
/// CLI and `POST /urls` send it): the same refusal, `already_known`, in
/// the same words; `again` queues it on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_url_of_a_processed_url_is_refused_alike_by_the_rust_api_and_the_control_actor() {
    let server = TestServer::start(Ipv4Addr::new(127, 0, 48, 1), chain_web(3)).await;
    let store = Backend::sqlite().open().await;
    let app = start(store, settings("known")).await.unwrap();
    let seed = server.url("/");
    app.add_url(&seed).await.unwrap();
    assert_eq!(app.wait_idle().await.unwrap(), IdleReason::FrontierEmpty);

    let by_app = app.add_url(&seed).await.unwrap_err();
    assert_eq!(by_app.code(), Some(RefusalCode::AlreadyKnown), "{by_app}");
    let by_control = app
        .control()
        .add_url(&seed, OperationSpec::crawl())
        .await
        .unwrap_err();
    assert_eq!(by_control.code(), RefusalCode::AlreadyKnown, "{by_control}");
    assert_eq!(by_app.to_string(), by_control.to_string());
    let batch = app
        .control()
        .add_urls(vec![seed.clone()], OperationSpec::crawl(), false)
        .await
        .unwrap();
    let refusal = batch.results[0].error.as_ref().expect("refused");
    assert_eq!(
        (refusal.code, refusal.message.as_str()),
        (RefusalCode::AlreadyKnown, by_app.to_string().as_str())
    );
    assert_eq!(server.hits_of("/"), 1, "nothing queued");

    assert_eq!(
        app.add_url_again(&seed, OperationSpec::crawl())
            .await
            .unwrap()
            .url,
        seed
    );
    app.wait_idle().await.unwrap();
    assert_eq!(server.hits_of("/"), 2, "fetched again");
    app.stop(Duration::from_secs(5)).await.unwrap();
}
