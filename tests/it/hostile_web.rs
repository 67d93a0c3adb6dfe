//! A hostile web, as real sites are. Crawler traps: each infinite URL
//! space of a shape real sites have (calendar, facets, session ids,
//! repeating relative paths, soft-404s) must not keep a crawl alive, and a
//! large legitimate numbered section must be crawled whole; each web is
//! much larger than what the defence lets through, and every real page
//! must still be fetched. Sitemaps (index, gzip, broken) and robots.txt
//! that cannot be had must not stop a crawl either.

use crate::common::coverage::assert_all_real_fetched;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use web_crawler::actors::{PageQuery, Store, TRAPPED};
use web_crawler::policy::Scope;
use web_crawler::store::SqliteStore;
use web_crawler::{IdleReason, Settings, start};
use web_crawler_testsupport::{Page, TestServer, reserve};

const VOCABULARY: &[&str] = &[
    "river", "stone", "garden", "engine", "harbor", "lantern", "meadow", "copper", "violin",
    "glacier", "orchard", "compass", "falcon", "timber", "canyon", "marble", "saddle", "thunder",
    "velvet", "walnut", "anchor", "beacon", "cobalt", "dune", "ember", "fjord", "granite",
    "hollow", "island", "jasper", "kettle", "ledger", "mosaic", "nectar", "oasis", "pepper",
    "quarry", "ribbon", "spruce", "tundra", "umber", "valley", "willow", "yarrow", "zephyr",
    "amber", "bramble", "cinder", "delta", "fable",
];

/// A paragraph of `words` words of its own (seeded), so no two pages of a
/// test web look alike.
fn prose(rng: &mut fastrand::Rng, words: usize) -> String {
    (0..words)
        .map(|_| VOCABULARY[rng.usize(..VOCABULARY.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

fn html(title: &str, text: &str, links: &[String]) -> Page {
    let links: String = links
        .iter()
        .map(|l| format!("<li><a href=\"{l}\">{l}</a></li>"))
        .collect();
    Page::html(format!(
        "<!doctype html><html><head><title>{title}</title></head><body>\
         <nav><a href=\"/\">Home</a></nav><h1>{title}</h1><p>{text}</p><ul>{links}</ul>\
         </body></html>"
    ))
}

/// `count` real pages `/p/0..` with text of their own, linked from `/` and
/// in a chain; `extra` links on `/p/0` lead into the host's trap.
pub(crate) fn real_pages(
    rng: &mut fastrand::Rng,
    count: usize,
    extra: &[&str],
) -> HashMap<String, Page> {
    let mut pages = HashMap::new();
    let all: Vec<String> = (0..count).map(|i| format!("/p/{i}")).collect();
    pages.insert("/".to_string(), html("Home", &prose(rng, 80), &all));
    for i in 0..count {
        let mut links = vec![format!("/p/{}", (i + 1) % count)];
        if i == 0 {
            links.extend(extra.iter().map(|l| l.to_string()));
        }
        pages.insert(
            format!("/p/{i}"),
            html(&format!("Article {i}"), &prose(rng, 120), &links),
        );
    }
    pages
}

pub(crate) fn settings() -> Settings {
    static N: AtomicUsize = AtomicUsize::new(0);
    let mut s = Settings::default();
    s.crawl.node_name = format!("traps-{}", N.fetch_add(1, Ordering::SeqCst));
    s.crawl.concurrency = 8;
    s.crawl.per_host = 2;
    s.crawl.min_delay = Duration::ZERO;
    s.crawl.tick = Duration::from_millis(50);
    s.policy.scope = Scope::Host;
    s
}

/// Crawl `server` from `/` to its end (no page budget) and return the
/// store and how many URLs the trap defence left out (kept `trapped`);
/// fails if the crawl does not end by itself.
async fn crawl(
    server: &TestServer,
    settings: Settings,
) -> (tempfile::TempDir, Arc<dyn Store>, u64) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("t.db")).unwrap());
    let app = start(store.clone(), settings).await.unwrap();
    app.add_url(&server.url("/")).await.unwrap();
    let idle = tokio::time::timeout(Duration::from_secs(240), app.wait_idle())
        .await
        .expect("the crawl ends by itself")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    let refused = app.status().await.unwrap().store.trapped;
    app.stop(Duration::from_secs(5)).await.unwrap();
    (dir, store, refused)
}

/// Requests served whose target starts with `prefix`.
pub(crate) fn hits_under(server: &TestServer, prefix: &str) -> u32 {
    server
        .hits()
        .iter()
        .filter(|(t, _)| t.starts_with(prefix))
        .map(|(_, n)| n)
        .sum()
}

fn assert_real_pages_fetched(server: &TestServer, count: usize) {
    for i in 0..count {
        assert!(server.hits_of(&format!("/p/{i}")) >= 1, "/p/{i} fetched");
    }
}

/// URLs the trap defence left out (kept in `pending_urls` as `trapped`),
/// each with the rule and the family that refused it (`stale h/tag/`).
pub(crate) async fn trapped(store: &dyn Store) -> Vec<(String, String)> {
    store
        .pending(usize::MAX >> 1)
        .await
        .unwrap()
        .into_iter()
        .filter(|p| p.status == TRAPPED)
        .map(|p| {
            let trap = p.trap.expect("a trapped URL says what refused it");
            (p.url, format!("{} {}", trap.rule, trap.family))
        })
        .collect()
}

/// The months' names, for test calendars.
pub(crate) const MONTHS: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// `/cal/YYYY/MM/`: a month view linking to the next and previous month and
/// year, for every month of 1900–2099 (2,400 pages: endless for a crawler).
pub(crate) fn calendar() -> HashMap<String, Page> {
    let path = |y: i32, m: i32| {
        let (y, m) = (y + (m - 1).div_euclid(12), (m - 1).rem_euclid(12) + 1);
        format!("/cal/{y}/{m:02}/")
    };
    let mut pages = HashMap::new();
    for y in 1900..2100 {
        for m in 1..=12 {
            let days: String = (1..=30).map(|d| format!("{d} ")).collect();
            let text = format!(
                "Events calendar for {} {y}. Mon Tue Wed Thu Fri Sat Sun {days} \
                 There are no events this month. Subscribe to the calendar feed.",
                MONTHS[m as usize - 1]
            );
            let links = vec![
                path(y, m - 1),
                path(y, m + 1),
                path(y - 1, m),
                path(y + 1, m),
            ];
            pages.insert(path(y, m), html("Calendar", &text, &links));
        }
    }
    pages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_calendar_does_not_keep_the_crawl_alive() {
    let mut rng = fastrand::Rng::with_seed(1);
    let mut pages = real_pages(&mut rng, 40, &["/cal/2024/06/"]);
    pages.extend(calendar());
    let server = TestServer::start(Ipv4Addr::new(127, 0, 5, 1), pages).await;
    let (_dir, store, refused) = crawl(&server, settings()).await;
    assert_real_pages_fetched(&server, 40);
    let calendar = hits_under(&server, "/cal/");
    assert!(calendar <= 80, "{calendar} of 2,400 calendar pages fetched");
    assert!(refused > 0, "the defence refused calendar links");
    // Every URL refused (a link found, or a URL claimed before the
    // calendar closed) is kept with the rule and the family, and only
    // calendar URLs are.
    let left_out = trapped(store.as_ref()).await;
    assert_eq!(left_out.len() as u64, refused);
    assert!(
        left_out
            .iter()
            .all(|(url, why)| url.contains("/cal/") && why.ends_with("/cal/{n}/{n}/")),
        "only calendar URLs are left out: {left_out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_calendar_without_the_defence_runs_until_a_budget() {
    // The web of the test above is a real trap: without the defence, a
    // budget is what stops the crawl, and the calendar takes most of it.
    let mut rng = fastrand::Rng::with_seed(1);
    let mut pages = real_pages(&mut rng, 40, &["/cal/2024/06/"]);
    pages.extend(calendar());
    let server = TestServer::start(Ipv4Addr::new(127, 0, 5, 7), pages).await;
    let mut s = settings();
    s.crawl.traps = None;
    // Coverage is not asserted: a page budget stops this crawl by design.
    s.crawl.max_pages = Some(400);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("t.db")).unwrap());
    let app = start(store, s).await.unwrap();
    app.add_url(&server.url("/")).await.unwrap();
    let idle = tokio::time::timeout(Duration::from_secs(120), app.wait_idle())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(idle, IdleReason::BudgetReached);
    app.stop(Duration::from_secs(5)).await.unwrap();
    assert!(hits_under(&server, "/cal/") > 300);
}

/// `/shop?brand=..&color=..&size=..&sort=..&view=..`: every combination of
/// five facets (3,125 pages) shows the same products and links to the
/// combinations one change away.
fn facets() -> HashMap<String, Page> {
    const FACETS: &[(&str, &[&str])] = &[
        ("brand", &["acme", "globex", "initech", "umbrella", "hooli"]),
        ("color", &["red", "green", "blue", "black", "white"]),
        ("size", &["xs", "s", "m", "l", "xl"]),
        ("sort", &["price", "name", "rating", "newest", "popular"]),
        ("view", &["grid", "list", "compact", "wide", "table"]),
    ];
    let url = |choice: &[usize]| {
        let query: Vec<String> = FACETS
            .iter()
            .zip(choice)
            .map(|((name, values), &v)| format!("{name}={}", values[v]))
            .collect();
        format!("/shop?{}", query.join("&"))
    };
    let products = "Trail shoe, rain jacket, wool socks, day pack, headlamp, water bottle. \
                    Free shipping on orders over fifty. Compare items and filter by facet.";
    let mut pages = HashMap::new();
    for n in 0..5usize.pow(5) {
        let choice: Vec<usize> = (0..5).map(|i| n / 5usize.pow(i) % 5).collect();
        let mut links = Vec::new();
        for f in 0..5 {
            for v in 0..5 {
                if v != choice[f] {
                    let mut other = choice.clone();
                    other[f] = v;
                    links.push(url(&other));
                }
            }
        }
        pages.insert(url(&choice), html("Shop", products, &links));
    }
    pages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faceted_navigation_is_cut_and_the_real_pages_are_not() {
    let mut rng = fastrand::Rng::with_seed(2);
    let entry = "/shop?brand=acme&color=red&size=m&sort=price&view=grid";
    let mut pages = real_pages(&mut rng, 40, &[entry]);
    pages.extend(facets());
    let server = TestServer::start(Ipv4Addr::new(127, 0, 5, 2), pages).await;
    let (_dir, _store, _) = crawl(&server, settings()).await;
    assert_real_pages_fetched(&server, 40);
    let shop = hits_under(&server, "/shop");
    assert!(shop <= 120, "{shop} of 3,125 facet pages fetched");
}

/// Every page links to the others with a session id made for that link:
/// the 40 pages have 1,600 URLs.
fn sessions(rng: &mut fastrand::Rng) -> HashMap<String, Page> {
    // Session ids look like session ids: long, random, hex.
    let sid = |from: usize, to: usize| {
        let h = ((from * 7919 + to * 104_729) as u64 ^ 0x5eed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        format!("a{:015x}", h >> 4)
    };
    let texts: Vec<String> = (0..40).map(|_| prose(rng, 120)).collect();
    let mut pages = HashMap::new();
    for from in 0..40 {
        for (to, text) in texts.iter().enumerate() {
            let links: Vec<String> = (0..40)
                .filter(|&n| n != to)
                .map(|n| format!("/s/{n}?sid={}", sid(to, n)))
                .collect();
            let page = html(&format!("Member page {to}"), text, &links);
            pages.insert(format!("/s/{to}?sid={}", sid(from, to)), page);
        }
    }
    pages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_ids_do_not_multiply_pages() {
    let mut rng = fastrand::Rng::with_seed(3);
    let mut pages = real_pages(&mut rng, 20, &[]);
    let entry = "/s/0?sid=e0e0e0e0e1f2";
    let mut sessions = sessions(&mut rng);
    let first = sessions
        .iter()
        .find(|(target, _)| target.starts_with("/s/0?"))
        .map(|(_, page)| page.clone())
        .unwrap();
    sessions.insert(entry.to_string(), first);
    pages.extend(sessions);
    let root = pages.get_mut("/").unwrap();
    *root = html(
        "Home",
        "Members area and articles.",
        &[entry.to_string(), "/p/0".into()],
    );
    let server = TestServer::start(Ipv4Addr::new(127, 0, 5, 3), pages).await;
    let (_dir, _store, _) = crawl(&server, settings()).await;
    assert_real_pages_fetched(&server, 20);
    for n in 0..40 {
        let copies = hits_under(&server, &format!("/s/{n}?"));
        assert!(copies >= 1, "member page {n} fetched");
        assert!(copies <= 3, "member page {n} fetched {copies} times");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_links_that_repeat_a_segment_end() {
    let mut rng = fastrand::Rng::with_seed(4);
    let mut pages = real_pages(&mut rng, 20, &["/docs/guide/"]);
    // `guide/` relative to `/docs/guide/` is `/docs/guide/guide/`, and so on.
    let mut path = "/docs/guide/".to_string();
    for _ in 0..60 {
        pages.insert(
            path.clone(),
            html("Guide", "The user guide.", &["guide/".into()]),
        );
        path.push_str("guide/");
    }
    let server = TestServer::start(Ipv4Addr::new(127, 0, 5, 4), pages).await;
    let (_dir, _store, _) = crawl(&server, settings()).await;
    assert_real_pages_fetched(&server, 20);
    let docs = hits_under(&server, "/docs/");
    assert!(docs <= 8, "{docs} of 60 repeating-path pages fetched");
}

/// A soft-404 host: any unknown path answers 200 with the same "not
/// found" page and fresh links to more unknown paths (3,000 of them here).
fn soft_404s(rng: &mut fastrand::Rng) -> HashMap<String, Page> {
    let slug = |rng: &mut fastrand::Rng| -> String { (0..8).map(|_| rng.lowercase()).collect() };
    let paths: Vec<String> = (0..3000).map(|_| format!("/{}/", slug(rng))).collect();
    let mut pages = HashMap::new();
    for (i, path) in paths.iter().enumerate() {
        let links: Vec<String> = (1..=5)
            .map(|k| paths[(i * 5 + k) % paths.len()].clone())
            .collect();
        // The links differ from page to page; the words a reader sees do not.
        let links: String = links
            .iter()
            .map(|l| format!("<li><a href=\"{l}\">A popular page</a></li>"))
            .collect();
        let page = Page::html(format!(
            "<!doctype html><html><head><title>Page not found</title></head><body>\
             <nav><a href=\"/\">Home</a></nav><h1>Page not found</h1><p>Sorry, we could \
             not find that page. Try the search box or go back to the home page. Popular \
             pages are listed below.</p><ul>{links}</ul></body></html>"
        ));
        pages.insert(path.clone(), page);
    }
    pages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_404_host_is_left_after_a_bounded_number_of_pages() {
    let mut rng = fastrand::Rng::with_seed(5);
    let soft = soft_404s(&mut rng);
    let broken: Vec<&str> = soft.keys().take(3).map(String::as_str).collect();
    let mut pages = real_pages(&mut rng, 40, &broken);
    pages.extend(soft.clone());
    // Any other path answers the same "not found" page, with 200.
    let fallback = soft[broken[0]].clone();
    let server = TestServer::serve_fn(reserve(Ipv4Addr::new(127, 0, 5, 5)), move |req| {
        let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
        pages
            .get(target)
            .cloned()
            .unwrap_or_else(|| fallback.clone())
    })
    .await;
    let (_dir, store, _) = crawl(&server, settings()).await;
    assert_real_pages_fetched(&server, 40);
    let soft_hits: u32 = soft.keys().map(|p| server.hits_of(p)).sum();
    assert!(
        soft_hits <= 20,
        "{soft_hits} of 3,000 soft-404 pages fetched"
    );
    let recorded = trapped(store.as_ref()).await;
    assert!(
        recorded.iter().any(|(_, why)| why.starts_with("soft_404 ")),
        "the links of soft 404s are kept as such: {recorded:?}"
    );
    let soft_pages = store
        .processed(PageQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|p| (p.record.error.as_deref()).is_some_and(|e| e.starts_with("trap: soft 404")))
        .count();
    assert!(soft_pages > 0, "a soft 404 fetched is recorded as such");
    // No real page is left out, though the soft 404s link to the home page.
    assert!(
        recorded.iter().all(|(url, _)| !url.contains("/p/")),
        "{recorded:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_distinct_product_pages_are_all_crawled() {
    let mut rng = fastrand::Rng::with_seed(6);
    let mut pages = HashMap::new();
    let lists: Vec<String> = (0..100).map(|l| format!("/list/{l}")).collect();
    pages.insert("/".to_string(), html("Catalogue", "All products.", &lists));
    // Each product has a name of its own, which its list page shows.
    let names: Vec<String> = (0..10_000).map(|_| prose(&mut rng, 3)).collect();
    for l in 0..100 {
        let products: Vec<String> = (0..100)
            .map(|i| format!("/product/{}", l * 100 + i))
            .collect();
        let shown = names[l * 100..(l + 1) * 100].join(", ");
        pages.insert(format!("/list/{l}"), html("Products", &shown, &products));
    }
    for (n, name) in names.iter().enumerate() {
        let text = format!("{name} {} Price {n}. In stock.", prose(&mut rng, 60));
        pages.insert(
            format!("/product/{n}"),
            html(
                &format!("Product {n}"),
                &text,
                &[format!("/product/{}", (n + 1) % 10_000)],
            ),
        );
    }
    let server = TestServer::start(Ipv4Addr::new(127, 0, 5, 6), pages).await;
    let mut s = settings();
    s.crawl.concurrency = 32;
    s.crawl.per_host = 16;
    let (_dir, store, _) = crawl(&server, s).await;
    assert!(
        server.connections() <= 64,
        "{} connections for 10,100 requests: keep-alive connections are reused",
        server.connections()
    );
    let missing: Vec<usize> = (0..10_000)
        .filter(|n| server.hits_of(&format!("/product/{n}")) == 0)
        .collect();
    assert!(
        missing.is_empty(),
        "{} products not crawled: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    // The list pages too, which the products' chain does not lead to.
    assert_all_real_fetched(&server, std::iter::once("/".to_string()).chain(lists));
    assert!(trapped(store.as_ref()).await.is_empty());
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn urlset(origin: &str, paths: &[String]) -> String {
    let entries: String = paths
        .iter()
        .map(|p| format!("<url><loc>{origin}{p}</loc></url>"))
        .collect();
    format!(
        "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">{entries}</urlset>"
    )
}

/// Pages no page links to are found through the sitemaps robots.txt
/// names: an index, a plain and a gzip sitemap, and a broken one whose
/// readable part still counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sitemaps_lead_to_pages_nothing_links_to() {
    let listener = reserve(Ipv4Addr::new(127, 0, 5, 8));
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let orphans = |from: usize| -> Vec<String> {
        (from..from + 10).map(|i| format!("/orphan/{i}")).collect()
    };
    let mut pages = HashMap::new();
    let mut rng = fastrand::Rng::with_seed(8);
    pages.insert("/".to_string(), html("Home", &prose(&mut rng, 50), &[]));
    for i in 0..40 {
        pages.insert(
            format!("/orphan/{i}"),
            html("Orphan", &prose(&mut rng, 80), &[]),
        );
    }
    pages.insert(
        "/robots.txt".to_string(),
        Page::text(
            "text/plain",
            format!("User-agent: *\nDisallow: /orphan/39\nSitemap: {origin}/sitemap_index.xml\n"),
        ),
    );
    let index = format!(
        "<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
         <sitemap><loc>{origin}/a.xml</loc></sitemap><sitemap><loc>{origin}/b.xml.gz</loc></sitemap>\
         <sitemap><loc>{origin}/broken.xml</loc></sitemap></sitemapindex>"
    );
    pages.insert(
        "/sitemap_index.xml".into(),
        Page::text("application/xml", index),
    );
    let mut listed = orphans(0);
    listed.push("/orphan/39".into());
    pages.insert(
        "/a.xml".into(),
        Page::text("application/xml", urlset(&origin, &listed)),
    );
    pages.insert(
        "/b.xml.gz".into(),
        Page::text(
            "application/x-gzip",
            gzip(urlset(&origin, &orphans(10)).as_bytes()),
        ),
    );
    let mut broken = urlset(&origin, &orphans(20));
    broken.truncate(broken.len() - 30);
    pages.insert("/broken.xml".into(), Page::text("application/xml", broken));
    let server = TestServer::serve(listener, pages).await;
    let (_dir, store, _) = crawl(&server, settings()).await;
    for i in 0..10 {
        assert_eq!(
            server.hits_of(&format!("/orphan/{i}")),
            1,
            "/orphan/{i} (plain sitemap)"
        );
        assert_eq!(
            server.hits_of(&format!("/orphan/{}", i + 10)),
            1,
            "gzip sitemap"
        );
    }
    // The broken file's entries before the cut are followed.
    assert!(server.hits_of("/orphan/20") == 1 && server.hits_of("/orphan/27") == 1);
    assert_eq!(server.hits_of("/orphan/30"), 0, "listed nowhere");
    assert_eq!(
        server.hits_of("/orphan/39"),
        0,
        "listed, but robots.txt disallows it"
    );
    assert_eq!(
        server.hits_of("/sitemap.xml"),
        0,
        "robots.txt named the sitemaps"
    );
    // The real pages: `/` and every orphan a sitemap lists whole (the
    // broken file is cut inside /orphan/29's entry) that robots.txt allows.
    let listed = (0..29).map(|i| format!("/orphan/{i}"));
    assert_all_real_fetched(&server, std::iter::once("/".to_string()).chain(listed));
    let broken = store
        .processed_url(&format!("{origin}/broken.xml"))
        .await
        .unwrap()
        .unwrap();
    let why = broken.record.error.unwrap_or_default();
    assert!(why.starts_with("sitemap: invalid XML"), "{why}");
}

/// A sitemap's `lastmod` brings a page back: the next crawl over the same
/// file reads the sitemap again (robots.txt is read again) and fetches the
/// page it says changed since its fetch, not the one it says did not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_the_sitemap_says_changed_is_fetched_again() {
    use std::sync::atomic::AtomicBool;
    let listener = reserve(Ipv4Addr::new(127, 0, 5, 10));
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let changed = Arc::new(AtomicBool::new(false));
    let server = {
        let (origin, changed) = (origin.clone(), changed.clone());
        TestServer::serve_fn(listener, move |req| match req.uri().path() {
            "/robots.txt" => Page::text(
                "text/plain",
                format!("User-agent: *\nSitemap: {origin}/sitemap.xml\n"),
            ),
            "/sitemap.xml" => {
                let a = if changed.load(Ordering::SeqCst) {
                    "2100-01-01T00:00:00Z"
                } else {
                    "2001-01-01"
                };
                Page::text(
                    "application/xml",
                    format!(
                        "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                         <url><loc>{origin}/a</loc><lastmod>{a}</lastmod></url>\
                         <url><loc>{origin}/b</loc><lastmod>2001-01-01</lastmod></url></urlset>"
                    ),
                )
            }
            path => Page::html(format!(
                "<html><head><title>{path}</title></head><body><p>{path}</p></body></html>"
            )),
        })
        .await
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let run = |seed: &'static str| {
        let (db, url) = (db.clone(), server.url(seed));
        async move {
            let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).unwrap());
            let app = start(store.clone(), settings()).await.unwrap();
            app.add_url(&url).await.unwrap();
            let idle = tokio::time::timeout(Duration::from_secs(60), app.wait_idle())
                .await
                .expect("the crawl ends by itself")
                .unwrap();
            assert_eq!(idle, IdleReason::FrontierEmpty);
            app.stop(Duration::from_secs(5)).await.unwrap();
        }
    };
    run("/").await;
    assert_eq!((server.hits_of("/a"), server.hits_of("/b")), (1, 1));
    changed.store(true, Ordering::SeqCst);
    // A new page of the host, so that its robots.txt is read again.
    run("/new").await;
    assert_eq!(server.hits_of("/sitemap.xml"), 2, "read again");
    assert_eq!(server.hits_of("/a"), 2, "changed since its fetch");
    assert_eq!(server.hits_of("/b"), 1, "unchanged");
    assert_eq!(server.hits_of("/"), 1);
    assert_all_real_fetched(&server, ["/", "/a", "/b", "/new"]);
}

/// A host whose robots.txt answers 500, one that answers 503, and one that
/// closes the connection: nothing of them is fetched (RFC 9309), and a
/// one-shot crawl still ends, within about half a minute, with their URLs
/// recorded as failed and the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_robots_txt_does_not_hold_a_crawl_for_long() {
    let mut servers = Vec::new();
    for (i, robots) in [
        Page::text("text/plain", "oops").status(500),
        Page::text("text/plain", "busy").status(503),
    ]
    .into_iter()
    .enumerate()
    {
        let mut pages = HashMap::new();
        pages.insert(
            "/".to_string(),
            html("Home", "A site.", &["/a".to_string()]),
        );
        pages.insert("/robots.txt".to_string(), robots);
        servers.push(TestServer::start(Ipv4Addr::new(127, 0, 5, 9 + i as u8), pages).await);
    }
    // A port that accepts and closes at once; the task ends with the test.
    let closing = tokio::net::TcpListener::bind((Ipv4Addr::new(127, 0, 5, 11), 0))
        .await
        .unwrap();
    let closing_addr = closing.local_addr().unwrap();
    let accept = tokio::spawn(async move {
        while let Ok((stream, _)) = closing.accept().await {
            drop(stream);
        }
    });
    let mut s = settings();
    s.crawl.robots_retry = Duration::from_secs(3);
    s.crawl.retry_backoff = Duration::from_millis(100);
    s.policy.scope = Scope::Any;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("t.db")).unwrap());
    let app = start(store.clone(), s).await.unwrap();
    let seeds: Vec<String> = servers
        .iter()
        .map(|s| s.url("/"))
        .chain([format!("http://{closing_addr}/")])
        .collect();
    for seed in &seeds {
        app.add_url(seed).await.unwrap();
    }
    let started = std::time::Instant::now();
    let idle = tokio::time::timeout(Duration::from_secs(60), app.wait_idle())
        .await
        .expect("the crawl ends by itself")
        .unwrap();
    assert_eq!(idle, IdleReason::FrontierEmpty);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    app.stop(Duration::from_secs(5)).await.unwrap();
    // Coverage is not asserted: no page of these hosts may be fetched.
    for server in &servers {
        assert_eq!(server.hits_of("/"), 0, "nothing but robots.txt fetched");
        assert!(server.hits_of("/robots.txt") >= 2, "robots.txt asked again");
    }
    for seed in &seeds {
        let page = store.processed_url(seed).await.unwrap().unwrap();
        let error = page.record.error.unwrap_or_default();
        assert!(error.contains("robots.txt unreachable"), "{seed}: {error}");
    }
    accept.abort();
}

/// A shop whose every page opens with the same mega-menu (300 categories,
/// ~10 KB of text before the page's own words), as large shops and news
/// sites do: the start of every page reads alike, the pages are not alike.
/// All 400 are crawled, none recorded as a trap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_that_open_with_one_large_menu_are_all_crawled() {
    let mut rng = fastrand::Rng::with_seed(7);
    let menu: String = (0..300)
        .map(|c| {
            format!(
                "<li><a href=\"/category/{c}\">{}</a></li>",
                prose(&mut rng, 4)
            )
        })
        .collect();
    let page = |title: &str, text: &str, links: &[String]| {
        let links: String = links
            .iter()
            .map(|l| format!("<li><a href=\"{l}\">{l}</a></li>"))
            .collect();
        Page::html(format!(
            "<!doctype html><html><head><title>{title}</title></head><body>\
             <div class=\"menu\"><ul>{menu}</ul></div><h1>{title}</h1><p>{text}</p><ul>{links}</ul>\
             </body></html>"
        ))
    };
    let mut pages = HashMap::new();
    let items: Vec<String> = (0..400).map(|n| format!("/item/{n}")).collect();
    pages.insert("/".to_string(), page("Shop", "Welcome.", &items[..1]));
    for n in 0..400 {
        let mut links = vec![items[(n + 1) % 400].clone()];
        links.extend((0..3).map(|_| items[rng.usize(..400)].clone()));
        let text = prose(&mut rng, 150);
        pages.insert(items[n].clone(), page(&format!("Item {n}"), &text, &links));
    }
    let server = TestServer::start(Ipv4Addr::new(127, 0, 5, 14), pages).await;
    let mut s = settings();
    s.crawl.per_host = 4;
    let (_dir, store, _) = crawl(&server, s).await;
    let missing: Vec<&String> = items.iter().filter(|i| server.hits_of(i) == 0).collect();
    assert!(
        missing.is_empty(),
        "{} items not crawled: {:?}; trapped: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)],
        &trapped(store.as_ref()).await[..]
    );
    assert_all_real_fetched(&server, std::iter::once(&"/".to_string()).chain(&items));
}

/// A host that answers every unknown path with its home page (200), as
/// many single-page-app and misconfigured servers do: the probe for a
/// path that cannot exist gets the home page, and the home page is still
/// a real page whose links are followed. All its pages are crawled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_answering_unknown_paths_with_its_home_page_is_crawled_whole() {
    let mut rng = fastrand::Rng::with_seed(8);
    let pages = real_pages(&mut rng, 60, &[]);
    let home = pages["/"].clone();
    let server = TestServer::serve_fn(reserve(Ipv4Addr::new(127, 0, 5, 15)), move |req| {
        let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
        pages.get(target).cloned().unwrap_or_else(|| home.clone())
    })
    .await;
    let (_dir, store, _) = crawl(&server, settings()).await;
    let missing: Vec<usize> = (0..60)
        .filter(|i| server.hits_of(&format!("/p/{i}")) == 0)
        .collect();
    assert!(
        missing.is_empty(),
        "{} pages not fetched: {missing:?}; trapped: {:?}",
        missing.len(),
        trapped(store.as_ref()).await
    );
}

/// A news site whose stories are `/article.php?sid=N`: `sid` is a story
/// id here, not a session, and every story is crawled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stories_numbered_by_sid_are_not_session_copies() {
    let mut rng = fastrand::Rng::with_seed(9);
    let stories: Vec<String> = (0..120)
        .map(|n| format!("/article.php?sid={}", 1000 + n))
        .collect();
    let mut pages = HashMap::new();
    pages.insert(
        "/".to_string(),
        html("News", &prose(&mut rng, 50), &stories[..10]),
    );
    for (n, story) in stories.iter().enumerate() {
        let links = [
            stories[(n + 1) % stories.len()].clone(),
            stories[rng.usize(..stories.len())].clone(),
        ];
        pages.insert(
            story.clone(),
            html(&format!("Story {n}"), &prose(&mut rng, 150), &links),
        );
    }
    let server = TestServer::start(Ipv4Addr::new(127, 0, 5, 16), pages).await;
    let (_dir, store, _) = crawl(&server, settings()).await;
    let missing: Vec<&String> = stories.iter().filter(|s| server.hits_of(s) == 0).collect();
    assert!(
        missing.is_empty(),
        "{} stories not fetched: {:?}; trapped: {:?}",
        missing.len(),
        &missing[..missing.len().min(5)],
        &trapped(store.as_ref()).await[..]
    );
}
