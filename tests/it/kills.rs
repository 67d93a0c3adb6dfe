//! Kills aimed at writes (#47 item 3): the crawl killed with SIGKILL in
//! the middle of a WARC write, an index commit or a store commit
//! (`WEB_CRAWLER_KILL_AT`, src/kill_points.rs), at random reaches of
//! them, then the same command run again to the end. After each crawl so
//! resumed: warcio reads every WARC file whole and none is left open;
//! every response served is in the archive at most as often as served,
//! and at least once; the index holds the store's searchable pages, each
//! once; SQLite's integrity check passes; every real page was fetched.

use crate::archive::warc_python;
use crate::common::bin;
use crate::common::coverage::assert_all_fetched;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};
use web_crawler::actors::{Frontier, PageQuery, Queries};
use web_crawler::store::SqliteStore;
use web_crawler_testsupport::{Page, TestServer, prose_of, reserve};

/// Kills a run of the test makes unless `WEB_CRAWLER_TEST_KILLS` says
/// otherwise: about 30 s in debug (the README's figures are of runs of 100).
const KILLS: usize = 50;
/// Real pages per host of the test web (two hosts).
const PAGES_PER_HOST: usize = 40;
/// Content copies per host: the index leaves out all but one of a body.
const COPIES_PER_HOST: usize = 3;

/// A write point a kill is aimed at (`src/kill_points.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Point {
    WarcWrite,
    IndexCommit,
    StoreCommit,
}

impl Point {
    const ALL: [Point; 3] = [Point::WarcWrite, Point::IndexCommit, Point::StoreCommit];

    fn name(self) -> &'static str {
        match self {
            Point::WarcWrite => "warc-write",
            Point::IndexCommit => "index-commit",
            Point::StoreCommit => "store-commit",
        }
    }

    /// The reaches a kill is aimed among (1..=this). A crawl of the test
    /// web writes an exchange per response (~100), commits its store ~15
    /// times and its index once at the end (each commit reaches the point
    /// twice: pages and anchors). Aims early in a run kill most runs and
    /// leave work for the next.
    fn max_reach(self) -> u64 {
        match self {
            Point::WarcWrite => 15,
            Point::IndexCommit => 2,
            Point::StoreCommit => 4,
        }
    }
}

/// Two hosts that link to each other: per host a root, a chain of pages
/// each with links of its own, a few links to pages that are gone, and
/// pages whose body is another page's (content duplicates).
struct KillWeb {
    servers: Vec<TestServer>,
}

impl KillWeb {
    async fn start() -> Self {
        let listeners: Vec<_> = (1..=2)
            .map(|h| reserve(Ipv4Addr::new(127, 0, 60, h)))
            .collect();
        let addrs: Vec<_> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let mut servers = Vec::new();
        for (h, listener) in listeners.into_iter().enumerate() {
            let other = addrs[(h + 1) % addrs.len()];
            servers.push(TestServer::serve(listener, host_pages(h, other)).await);
        }
        Self { servers }
    }

    fn seed(&self) -> String {
        self.servers[0].url("/")
    }

    /// Every page a crawl must fetch, as `(server, target)`.
    fn real(&self) -> Vec<(&TestServer, String)> {
        self.servers
            .iter()
            .flat_map(|s| {
                let pages = (0..PAGES_PER_HOST).map(|i| format!("/p/{i}"));
                let copies = (0..COPIES_PER_HOST).map(|i| format!("/copy/{i}"));
                std::iter::once("/".to_string())
                    .chain(pages)
                    .chain(copies)
                    .map(move |t| (s, t))
            })
            .collect()
    }

    /// Responses served per URL (robots.txt and 404s too), by [`family`].
    fn served(&self) -> BTreeMap<String, u32> {
        let mut served = BTreeMap::new();
        for s in &self.servers {
            for (target, n) in s.hits() {
                *served.entry(family(&s.url(&target))).or_default() += n;
            }
        }
        served
    }
}

fn page_body(h: usize, i: usize, other: std::net::SocketAddr) -> String {
    let n = PAGES_PER_HOST;
    let mut links = vec![
        format!("/p/{}", (i + 1) % n),
        format!("/p/{}", (i * 7 + 3) % n),
    ];
    if i.is_multiple_of(8) {
        links.push(format!("http://{other}/p/{}", (i * 3) % n));
    }
    if i % 10 == 5 {
        links.push(format!("/gone/{i}"));
    }
    if i < COPIES_PER_HOST {
        links.push(format!("/copy/{i}"));
    }
    let mut body = format!(
        "<!doctype html><html><head><title>host {h} page {i}</title></head><body>\
         <h1>Page {i} of host {h}</h1><p>{}</p><p>{}</p>",
        prose_of(&format!("host {h} page {i}")),
        prose_of(&format!("more of host {h} page {i}"))
    );
    for link in links {
        body.push_str(&format!("<p><a href=\"{link}\">on to {link}</a></p>"));
    }
    body + "</body></html>"
}

fn host_pages(h: usize, other: std::net::SocketAddr) -> HashMap<String, Page> {
    let mut pages = HashMap::from([
        (
            "/robots.txt".to_string(),
            Page::text("text/plain", "User-agent: *\nDisallow: /private/\n"),
        ),
        (
            "/".to_string(),
            Page::html(format!(
                "<!doctype html><title>host {h}</title><p>Root of host {h}.</p>\
                 <a href=\"/p/0\">start</a> <a href=\"http://{other}/\">the other host</a>"
            )),
        ),
    ]);
    for i in 0..PAGES_PER_HOST {
        pages.insert(format!("/p/{i}"), Page::html(page_body(h, i, other)));
    }
    // A copy's body is its page's, byte for byte.
    for i in 0..COPIES_PER_HOST {
        pages.insert(format!("/copy/{i}"), Page::html(page_body(h, i, other)));
    }
    pages
}

/// Kills made, by point.
#[derive(Debug, Default)]
struct Tally {
    kills: BTreeMap<Point, usize>,
    /// Runs whose aimed reach never came: they ended the crawl.
    missed: usize,
    crawls: usize,
    /// Time in the runs aimed at a kill, the resumes, the checks.
    killing: Duration,
    resuming: Duration,
    checking: Duration,
}

impl Tally {
    fn total(&self) -> usize {
        self.kills.values().sum()
    }

    /// A point drawn at random among those killed at least often so far
    /// (give or take two): an index commit comes at a crawl's end, after
    /// which a kill aimed at a write finds none left, so drawn evenly the
    /// index would take half the kills.
    fn next_point(&self, rng: &mut fastrand::Rng) -> Point {
        let kills = |p: &Point| self.kills.get(p).copied().unwrap_or(0);
        let least = Point::ALL.iter().map(kills).min().unwrap_or(0);
        let behind: Vec<Point> = Point::ALL
            .into_iter()
            .filter(|p| kills(p) <= least + 2)
            .collect();
        behind[rng.usize(..behind.len())]
    }
}

/// The crawl command of the test, on the store in `dir`.
fn crawl_args(web: &KillWeb, dir: &Path) -> Vec<String> {
    let path = |p: &str| dir.join(p).display().to_string();
    [
        "crawl",
        &web.seed(),
        "--db",
        &path("crawl.db"),
        "--warc",
        &path("warc"),
        // Small files: kills also land around a file closed and the next begun.
        "--warc-max-size",
        "24KB",
        "--scope",
        "any",
        "--delay-ms",
        "0",
        "--concurrency",
        "8",
        "--quiet",
    ]
    .map(String::from)
    .to_vec()
}

/// Run the crawl, aimed at `aim` (`POINT:N`) or at nothing: whether it
/// was killed (else it ended with success).
async fn run_crawl(args: &[String], aim: Option<&str>) -> bool {
    let mut cmd = bin();
    cmd.args(args).env_remove("WEB_CRAWLER_KILL_AT");
    if let Some(aim) = aim {
        cmd.env("WEB_CRAWLER_KILL_AT", aim);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the crawl ends within a minute")
        .expect("the crawl runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.signal() {
        Some(9) => true,
        None if out.status.success() => false,
        _ => panic!("aimed at {aim:?}: {:?}\n{stderr}", out.status),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_aimed_at_writes_lose_nothing() {
    let wanted: usize = std::env::var("WEB_CRAWLER_TEST_KILLS")
        .map(|n| n.parse().expect("WEB_CRAWLER_TEST_KILLS is a count"))
        .unwrap_or(KILLS);
    let seed: u64 = std::env::var("WEB_CRAWLER_TEST_KILL_SEED")
        .map(|s| s.parse().expect("WEB_CRAWLER_TEST_KILL_SEED is a number"))
        .unwrap_or_else(|_| fastrand::u64(..));
    eprintln!("kills aimed with seed {seed} (WEB_CRAWLER_TEST_KILL_SEED={seed} repeats them)");
    let mut rng = fastrand::Rng::with_seed(seed);
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let mut tally = Tally::default();
    // A crawl is killed until a run ends by itself, then resumed to the
    // end and checked; then the next crawl, on a store of its own.
    while tally.total() < wanted {
        let web = KillWeb::start().await;
        let dir = tmp.path().join(format!("crawl-{}", tally.crawls));
        std::fs::create_dir(&dir).unwrap();
        let args = crawl_args(&web, &dir);
        let mut aims = Vec::new();
        while tally.total() < wanted {
            let point = tally.next_point(&mut rng);
            let aim = format!("{}:{}", point.name(), rng.u64(1..=point.max_reach()));
            let run = Instant::now();
            let killed = run_crawl(&args, Some(&aim)).await;
            tally.killing += run.elapsed();
            if !killed {
                tally.missed += 1;
                break;
            }
            *tally.kills.entry(point).or_default() += 1;
            aims.push(aim);
        }
        let run = Instant::now();
        assert!(!run_crawl(&args, None).await, "the resumed crawl ends");
        tally.resuming += run.elapsed();
        tally.crawls += 1;
        let run = Instant::now();
        check_after_kills(&web, &dir, &aims).await;
        tally.checking += run.elapsed();
    }
    eprintln!(
        "{} kills ({:?}) over {} crawls, {} aims past the crawl's end, in {:.1}s \
         (killed runs {:.1}s, resumes {:.1}s, checks {:.1}s)",
        tally.total(),
        tally.kills,
        tally.crawls,
        tally.missed,
        started.elapsed().as_secs_f64(),
        tally.killing.as_secs_f64(),
        tally.resuming.as_secs_f64(),
        tally.checking.as_secs_f64(),
    );
    for point in Point::ALL {
        assert!(
            wanted < 30 || tally.kills.get(&point).is_some_and(|&n| n >= wanted / 6),
            "kills spread over the three points: {tally:?}"
        );
    }
}

/// What must hold once a crawl killed at `aims` has been resumed to its end.
async fn check_after_kills(web: &KillWeb, dir: &Path, aims: &[String]) {
    let context = format!("after kills at {aims:?}");
    assert_all_fetched(web.real().iter().map(|(s, t)| (*s, t.as_str())));

    // The archive: no file left open, every file read whole, every
    // CDXJ line at a record of its URL.
    let warc = dir.join("warc");
    let open: Vec<String> = std::fs::read_dir(&warc)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".open"))
        .collect();
    assert!(open.is_empty(), "files left open {context}: {open:?}");
    let read = read_whole_with_warcio(&warc, &context);
    let mut archived: BTreeMap<String, u32> = BTreeMap::new();
    let mut at = BTreeSet::new();
    for r in read["records"].as_array().unwrap() {
        if r["type"] == "response" || r["type"] == "revisit" {
            *archived.entry(family(&url_of(r))).or_default() += 1;
            at.insert(place(r));
        }
    }
    for e in read["index"].as_array().unwrap() {
        let entry = place(e);
        assert!(at.contains(&entry), "{entry:?} is at no record {context}");
    }
    // A response is archived before its page is reported, so one served
    // and not archived (the kill came first) was fetched again; one
    // archived twice was served twice.
    let served = web.served();
    for (url, &n) in &served {
        let kept = archived.get(url).copied().unwrap_or(0);
        assert!(
            (1..=n).contains(&kept),
            "{url}: served {n} times, archived {kept} {context}"
        );
    }
    let unserved: Vec<&String> = archived
        .keys()
        .filter(|u| !served.contains_key(*u))
        .collect();
    assert!(unserved.is_empty(), "archived, never served: {unserved:?}");

    // The store: whole, nothing left in flight.
    let db = dir.join("crawl.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok", "{context}");
    drop(conn);
    let store = SqliteStore::open(&db).unwrap();
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.pending, counts.processing), (0, 0), "{context}");
    let pages = store.processed(PageQuery::default()).await.unwrap();
    for p in &pages {
        assert!(
            archived.contains_key(&p.record.url),
            "{} is stored and not archived {context}",
            p.record.url
        );
    }
    let duplicates = pages.iter().filter(|p| p.duplicate_of.is_some()).count();
    assert_eq!(duplicates, 2 * COPIES_PER_HOST, "{context}");

    // The index: the store's searchable pages (as `index rebuild` reads
    // them), each once.
    let searchable: BTreeSet<String> = pages
        .iter()
        .filter(|p| {
            p.duplicate_of.is_none()
                && p.record.error.is_none()
                && p.record.http_returncode == Some(200)
                && p.record
                    .content_type
                    .as_deref()
                    .is_some_and(|t| t.contains("html"))
        })
        .map(|p| p.record.url.clone())
        .collect();
    let indexed = indexed_urls(&dir.join("crawl.db.index"));
    let doubled: Vec<_> = indexed.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "indexed twice {context}: {doubled:?}");
    let indexed: BTreeSet<String> = indexed.into_keys().collect();
    assert_eq!(
        indexed.difference(&searchable).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "indexed and not searchable {context}"
    );
    assert_eq!(
        searchable.difference(&indexed).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "searchable and not indexed {context}"
    );
}

/// warcio reads every WARC file in a directory to its last byte,
/// checking each record's digests: the records' types, URLs and places,
/// and the CDXJ lines' URLs and places.
const WARCIO_READ_WHOLE: &str = r#"
import glob, json, os, sys
from warcio.archiveiterator import ArchiveIterator
d = sys.argv[1]
records = []
for f in sorted(glob.glob(os.path.join(d, "*.warc.gz"))):
    name, end = os.path.basename(f), 0
    with open(f, "rb") as fh:
        it = ArchiveIterator(fh, check_digests="raise")
        for r in it:
            r.content_stream().read()
            url = r.rec_headers.get_header("WARC-Target-URI")
            offset = it.get_record_offset()
            records.append({"type": r.rec_type, "url": url, "file": name, "offset": offset})
            end = offset + it.get_record_length()
        assert it.err_count == 0, name + ": records warcio warned of"
    assert end == os.path.getsize(f), "%s: read to %d of %d bytes" % (name, end, os.path.getsize(f))
index = []
for c in sorted(glob.glob(os.path.join(d, "*.cdxj"))):
    for line in open(c).read().splitlines():
        e = json.loads(line.split(" ", 2)[2])
        index.append({"url": e["url"], "file": e["filename"], "offset": int(e["offset"])})
print(json.dumps({"records": records, "index": index}))
"#;

/// What [`WARCIO_READ_WHOLE`] reads in `dir`.
fn read_whole_with_warcio(dir: &Path, context: &str) -> Value {
    let out = std::process::Command::new(warc_python())
        .args(["-c", WARCIO_READ_WHOLE])
        .arg(dir)
        .output()
        .expect("run warcio");
    assert!(
        out.status.success(),
        "warcio cannot read the archive {context}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("warcio's JSON")
}

/// `url`, or for the soft-404 probe a host's crawl makes after its
/// robots.txt, one name for every probe of the host: each run probes a
/// path of its own.
fn family(url: &str) -> String {
    match url.split_once("/web-crawler-404-probe-") {
        Some((origin, _)) => format!("{origin}/web-crawler-404-probe-*"),
        None => url.to_string(),
    }
}

/// A WARC record's (or CDXJ line's) URL.
fn url_of(record: &Value) -> String {
    record["url"].as_str().unwrap().to_string()
}

/// A WARC record's (or CDXJ line's) URL, file and offset.
fn place(record: &Value) -> (String, String, u64) {
    (
        url_of(record),
        record["file"].as_str().unwrap().to_string(),
        record["offset"].as_u64().unwrap(),
    )
}

/// The URL of every live page in the index at `dir`, with how many
/// documents have it: read with tantivy itself, not the crawler's search.
fn indexed_urls(dir: &Path) -> BTreeMap<String, u32> {
    use tantivy::schema::Value as _;
    let index = tantivy::Index::open_in_dir(dir.join("pages")).unwrap();
    let url = index.schema().get_field("url").unwrap();
    let searcher = index.reader().unwrap().searcher();
    let mut urls = BTreeMap::new();
    for segment in searcher.segment_readers() {
        let docs = segment.get_store_reader(0).unwrap();
        for id in segment.doc_ids_alive() {
            let doc: tantivy::TantivyDocument = docs.get(id).unwrap();
            let page = doc.get_first(url).and_then(|v| v.as_str()).unwrap();
            *urls.entry(page.to_string()).or_default() += 1;
        }
    }
    urls
}

/// Found by the aimed kills: a kill after the commit that found a page a
/// content duplicate and before the index was told left the copy indexed
/// for good. The state such a kill leaves is made by hand here (a copy
/// queued for the index, no drop of it after), as no aim can hit that
/// gap on purpose; the next run drops the copy from the index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_a_kill_left_in_the_index_is_dropped_by_the_next_run() {
    use web_crawler::actors::{INDEX_FORGET, IndexQueue, PageText, QueuedPage};
    let body = page_body(0, 1, "127.0.0.1:9".parse().unwrap());
    let site = TestServer::start(
        Ipv4Addr::new(127, 0, 60, 9),
        HashMap::from([
            (
                "/".to_string(),
                Page::html("<title>root</title><a href=\"/a\">a</a> <a href=\"/copy\">copy</a>"),
            ),
            ("/a".to_string(), Page::html(body.clone())),
            ("/copy".to_string(), Page::html(body)),
        ]),
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("crawl.db");
    let index = tmp.path().join("crawl.db.index");
    let args: Vec<String> = [
        "crawl",
        &site.url("/"),
        "--db",
        db.to_str().unwrap(),
        "--delay-ms",
        "0",
        "--quiet",
    ]
    .map(String::from)
    .to_vec();
    assert!(!run_crawl(&args, None).await);
    let copy = {
        let store = SqliteStore::open(&db).unwrap();
        let pages = store.processed(PageQuery::default()).await.unwrap();
        let copy = pages.iter().find(|p| p.duplicate_of.is_some()).unwrap();
        copy.record.url.clone()
    };
    assert!(!indexed_urls(&index).contains_key(&copy));

    // What the kill leaves: the copy queued for the index by the pool, the
    // commit done, the index never told to drop it.
    let queue = web_crawler::store::IndexQueueLog::open(&web_crawler::store::queue_dir_for(&index))
        .unwrap();
    let text = PageText {
        url: copy.clone(),
        title: "host 0 page 1".into(),
        body: "the copy's text".into(),
        ..PageText::default()
    };
    let queued = QueuedPage::of_record(&text.into_record()).unwrap();
    queue.push(vec![queued]).await.unwrap();
    drop(queue);

    assert!(!run_crawl(&args, None).await);
    let indexed = indexed_urls(&index);
    assert!(!indexed.contains_key(&copy), "{indexed:?}");
    assert_eq!(indexed.len(), 2, "the root and the original: {indexed:?}");
    let store = SqliteStore::open(&db).unwrap();
    let notes = store.first_records(INDEX_FORGET, None, 10).await.unwrap();
    assert!(notes.is_empty(), "the start drained the notes: {notes:?}");
}
