//! The `web_crawler` binary, run as a newcomer would, against local test webs.

use crate::common::backend::Backend;
use crate::common::coverage::assert_all_real_fetched;
use crate::common::wait_for;
use crate::common::web::GeneratedWeb;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Output;
use std::time::Duration;
use tokio::process::Command;
use web_crawler::actors::CrawlConfig;
use web_crawler_testsupport::{Page, TestServer, page_with_links};

use crate::common::bin;

/// `args` followed by the flags selecting `backend`'s store.
fn with_store(args: &[&str], backend: &Backend) -> Vec<String> {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend(backend.cli_args());
    all
}

async fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    tokio::time::timeout(Duration::from_secs(120), bin().args(args).output())
        .await
        .expect("the command finishes")
        .expect("the command runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

async fn small_site() -> TestServer {
    TestServer::start(
        Ipv4Addr::new(127, 0, 2, 1),
        HashMap::from([
            (
                "/robots.txt".to_string(),
                Page::text("text/plain", "User-agent: *\nDisallow: /admin\n"),
            ),
            (
                "/".to_string(),
                page_with_links("home", &["/about", "/gone", "/admin/panel", "/words"]),
            ),
            ("/about".to_string(), page_with_links("about", &["/"])),
            (
                "/words".to_string(),
                Page::html("<p>alpha beta alpha gamma alpha</p>"),
            ),
        ]),
    )
    .await
}

/// The small site's real pages (not its 404, nor what robots.txt disallows).
const SMALL_SITE_PAGES: [&str; 3] = ["/", "/about", "/words"];

fn db_arg(dir: &Path) -> String {
    dir.join("crawl.db").display().to_string()
}

async fn crawl_then_report_pages_and_broken_links(backend: Backend) {
    let site = small_site().await;
    let out = run(&with_store(
        &["crawl", &site.url("/"), "--delay-ms", "0"],
        &backend,
    ))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = stdout(&out);
    assert!(summary.contains("nothing left to crawl"), "{summary}");
    assert!(summary.contains("robots-blocked 1"), "{summary}");
    assert!(summary.contains("404"), "pages by status: {summary}");
    assert!(
        summary.contains(&format!("failed  {}  HTTP 404", site.url("/gone"))),
        "the failed page and why: {summary}"
    );
    assert_eq!(site.hits_of("/admin/panel"), 0);
    assert_all_real_fetched(&site, SMALL_SITE_PAGES);

    let out = run(&with_store(&["report", "pages", "--json"], &backend)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let pages: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let urls: Vec<&str> = pages
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["url"].as_str().unwrap())
        .collect();
    for path in ["/", "/about", "/gone", "/admin/panel", "/words"] {
        assert!(
            urls.contains(&site.url(path).as_str()),
            "{path} in {urls:?}"
        );
    }
    let home = pages
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["url"] == site.url("/"))
        .unwrap();
    assert_eq!(home["http_returncode"], 200);
    assert_eq!(home["links_count"], 4);

    let out = run(&with_store(&["report", "broken-links"], &backend)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&format!("{}\tHTTP 404", site.url("/gone"))),
        "{text}"
    );
    assert!(
        text.contains(&format!("linked from {}", site.url("/"))),
        "{text}"
    );
    assert!(
        !text.contains("/admin/panel"),
        "robots-blocked is not broken: {text}"
    );

    // Running it again on the same database has nothing left to do.
    let before = site.total_hits();
    let out = run(&with_store(
        &["crawl", &site.url("/"), "--delay-ms", "0"],
        &backend,
    ))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(site.total_hits(), before, "nothing is fetched again");
}

async fn search_text_prints_pages_and_positions(backend: Backend) {
    let site = small_site().await;
    let out = run(&with_store(
        &["search-text", &site.url("/"), "ALPHA", "--delay-ms", "0"],
        &backend,
    ))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // The page's visible text; positions are character offsets into it.
    let visible = "alpha beta alpha gamma alpha";
    let expected: Vec<String> = visible
        .match_indices("alpha")
        .map(|(i, _)| i.to_string())
        .collect();
    assert!(
        text.contains(&format!("{}\t{}", site.url("/words"), expected.join(","))),
        "{text}"
    );
    assert!(text.contains("1 page(s) contain \"ALPHA\""), "{text}");
    assert!(
        text.contains("\talpha beta alpha gamma alpha"),
        "context: {text}"
    );
    assert_all_real_fetched(&site, SMALL_SITE_PAGES);
    // --exact matches case; --json is one document. (A fresh store: the
    // results above are kept by URL and text.)
    let fresh = if backend.is_mongo() {
        Backend::mongo("search_text_exact")
    } else {
        Backend::sqlite()
    };
    let out = run(&with_store(
        &[
            "search-text",
            &site.url("/"),
            "ALPHA",
            "--exact",
            "--json",
            "--delay-ms",
            "0",
        ],
        &fresh,
    ))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
    assert_eq!(doc["results"], serde_json::json!([]), "{doc}");
    assert!(doc["crawl"]["ended"].is_string(), "{doc}");
    let long = "x".repeat(2_000);
    let out = run(&with_store(
        &["search-text", &site.url("/"), &long],
        &backend,
    ))
    .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("the limit is 1024"),
        "{}",
        stderr(&out)
    );
}

/// A seed nobody answers (a closed port): the crawl ends by itself within
/// a few seconds (a refused connection is a definite answer, and it was
/// the run's only host), says why in words, and exits 2, so that a script
/// does not read it as done. Run again once the server is up, it fetches
/// the seed (unless told `--retry-failed none`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_that_fetched_nothing_exits_2_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let closed = web_crawler_testsupport::reserve(Ipv4Addr::new(127, 0, 3, 9));
    let url = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    // Coverage is not asserted: the one seed is a refused connection.
    let started = std::time::Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(120), run(&["crawl", &url, "--db", &db]))
        .await
        .expect("the crawl ends by itself");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "ended after {:?}, not after the retries (20 s)",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no page could be fetched"),
        "{}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains(&format!(
            "failed  {url}  failed after 2 attempt(s): connection refused, as on every host of this run"
        )),
        "the summary says why: {}",
        stdout(&out)
    );
    // Asked to leave failures alone, a rerun fetches nothing, and says
    // what it did not try and which flag tries it.
    let left = run(&["crawl", &url, "--db", &db, "--retry-failed", "none"]).await;
    assert_eq!(left.status.code(), Some(0), "{}", stderr(&left));
    assert!(
        stdout(&left).contains(
            "not tried again: 1 URL(s) that failed on an earlier run (--retry-failed none); \
             without it the 1 that got no answer, a 5xx or a 429 are tried again"
        ),
        "{}",
        stdout(&left)
    );
    // The server fixed, the same command fetches the seed that failed.
    let listener = std::net::TcpListener::bind(&url[7..url.len() - 1]).unwrap();
    let site = TestServer::serve(
        listener,
        HashMap::from([("/".to_string(), Page::html("<p>up again</p>"))]),
    )
    .await;
    let again = run(&["crawl", &url, "--db", &db]).await;
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    let summary = stdout(&again);
    assert!(summary.contains("this run fetched 1 page"), "{summary}");
    assert!(
        summary.contains("tried again: 1 URL(s) that failed on an earlier run"),
        "{summary}"
    );
    assert!(!summary.contains("failed  "), "no failure left: {summary}");
    assert_eq!(site.hits_of("/"), 1);
}

/// One table of exit codes for every path: a flag clap cannot read, a
/// missing URL and a regex the crawl cannot compile all exit 1 (2 is a
/// crawl that fetched nothing), with a line saying what the flag takes;
/// `--help` exits 0 and lists the codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_argument_exits_1_and_help_lists_the_codes() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let url = "http://127.0.3.10:9/";
    for (args, needle) in [
        (
            vec!["crawl", url, "--db", &db, "--concurrency", "abc"],
            "give 1 or more",
        ),
        (vec!["crawl", "--db", &db], "<URLS>"),
        (
            vec!["crawl", url, "--db", &db, "--allow", "(["],
            "not a valid regex",
        ),
        (
            vec!["crawl", url, "--db", &db, "--delay-ms", "-5"],
            "give 0 or more",
        ),
        (
            vec!["crawl", url, "--db", &db, "--per-host", "0"],
            "give 1 or more",
        ),
        (
            vec!["crawl", url, "--db", &db, "--concurrency", "0"],
            "give 1 or more",
        ),
        (
            vec!["crawl", url, "--db", &db, "--timeout", "0"],
            "1 second or more",
        ),
    ] {
        let out = run(&args).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.starts_with("error: ") && err.contains(needle),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("-- -5"),
            "{args:?}: advice that makes -5 a seed: {err}"
        );
    }
    assert!(!Path::new(&db).exists(), "nothing was crawled");
    let help = run(&["crawl", "--help"]).await;
    assert_eq!(help.status.code(), Some(0));
    assert!(
        stdout(&help)
            .contains("1 an error (bad arguments included); 2 a crawl that could fetch no page"),
        "{}",
        stdout(&help)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_one_clear_line_and_a_failure_exit() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let cookie = dir.path().join("cookie");
    std::fs::write(&cookie, "secret\n").unwrap();
    for (args, needle) in [
        (vec!["crawl", "not a url", "--db", &db], "invalid URL"),
        (vec!["crawl", "ftp://127.0.0.1/", "--db", &db], "scheme"),
        (
            vec!["crawl", "http://127.0.0.1:9/", "--db", &db, "--deny", "("],
            "not a valid regex",
        ),
        (
            vec!["report", "pages", "--db", "/nonexistent/x.db"],
            "no crawl database",
        ),
    ] {
        let out = run(&args).await;
        assert!(!out.status.success(), "{args:?} should fail");
        let err = stderr(&out);
        let first = err.lines().find(|l| l.starts_with("error:")).unwrap_or("");
        assert!(first.contains(needle), "{args:?}: {err}");
    }
    // A URL typed without a scheme: one line naming it once, with the URL
    // to write; refused before a store or an index is made for it.
    let fresh = dir.path().join("fresh.db");
    for command in ["crawl", "start"] {
        let mut args = vec![command, "127.0.28.20:8091", "--db", fresh.to_str().unwrap()];
        if command == "start" {
            args.extend(["--name", "m", "--listen", "127.0.28.20:4370"]);
            args.extend(["--cookie-file", cookie.to_str().unwrap()]);
        }
        let out = run(&args).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            stderr(&out).trim_end(),
            "error: invalid URL \"127.0.28.20:8091\": it has no scheme; try http://127.0.28.20:8091/",
            "{args:?}"
        );
        assert!(!fresh.exists(), "{args:?}: no store made");
        assert!(!dir.path().join("fresh.db.index").exists(), "{args:?}");
    }
    let out = run(&[
        "search-text",
        "localhost:8080/docs",
        "needle",
        "--db",
        fresh.to_str().unwrap(),
    ])
    .await;
    assert_eq!(
        stderr(&out).trim_end(),
        "error: invalid URL \"localhost:8080/docs\": it has no scheme; try http://localhost:8080/docs"
    );
    // A store in a directory that does not exist: the directory is named,
    // not the lock file the crawl would have made beside the store.
    let nowhere = dir.path().join("nope/dir/x.db");
    let out = run(&[
        "crawl",
        "http://127.0.0.1:9/",
        "--db",
        nowhere.to_str().unwrap(),
    ])
    .await;
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).lines().find(|l| l.starts_with("error:")),
        Some(
            format!(
                "error: cannot create the store {}: the directory {} does not exist",
                nowhere.display(),
                dir.path().join("nope").display()
            )
            .as_str()
        ),
        "{}",
        stderr(&out)
    );
    // A file that is not a crawl database is refused, and left alone.
    let not_db = dir.path().join("notes.txt");
    std::fs::write(&not_db, "my notes, not a database").unwrap();
    let out = run(&[
        "crawl",
        "http://127.0.0.1:9/",
        "--db",
        not_db.to_str().unwrap(),
    ])
    .await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("notes.txt"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&not_db).unwrap(),
        "my notes, not a database"
    );
}

/// `--db` naming a directory, or a file no crawl made: one line saying
/// what it names and what --db takes, exit code 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_db_that_is_no_store_says_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let shown = dir.path().display().to_string();
    let in_it = dir.path().join("crawler.db").display().to_string();
    let a_directory = format!(
        "error: cannot open the store {shown}: it is a directory; the store is a file, such as {in_it}"
    );
    for args in [
        vec!["report", "pages", "--db", &shown],
        vec!["crawl", "http://127.0.0.1:9/", "--db", &shown],
    ] {
        let out = run(&args).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(stderr(&out).trim_end(), a_directory, "{args:?}");
    }
    assert!(
        !Path::new(&format!("{shown}.lock")).exists(),
        "no lock file beside it"
    );
    let out = run(&["search", "csv", "--db", &shown]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "error: {shown} is a directory: --db takes the crawl's store file (such as {in_it})"
        )
    );
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "my notes, not a database").unwrap();
    let out = run(&["search", "csv", "--db", notes.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "error: {} is not a web crawler store: --db takes the file a crawl made \
             (`web_crawler crawl URL --db FILE`)",
            notes.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "my notes, not a database"
    );
}

async fn sigkill_mid_crawl_then_resume_loses_nothing(backend: Backend) {
    // Slow pages so the kill lands mid-crawl.
    let web = GeneratedWeb::start_with(4, 60, 7, Duration::from_millis(15)).await;
    let concurrency: u32 = 4;
    let seed = web.seed_url();
    let args = with_store(
        &[
            "crawl",
            &seed,
            "--scope",
            "any",
            "--delay-ms",
            "0",
            "--concurrency",
            "4",
            "--quiet",
        ],
        &backend,
    );
    let mut child = bin().args(&args).spawn().unwrap();
    // Kill once a good part of the web is processed.
    let killed_mid_crawl = wait_for(Duration::from_secs(60), || {
        let total: u32 = web.servers.iter().map(|s| s.total_hits()).sum();
        total >= 100
    })
    .await;
    assert!(killed_mid_crawl, "the crawl made progress");
    child.start_kill().unwrap(); // SIGKILL
    let status = child.wait().await.unwrap();
    assert!(!status.success());
    {
        let store = backend.open().await;
        let counts = store.counts().await.unwrap();
        assert!(
            counts.processed > 0 && counts.pending > 0,
            "killed mid-crawl: {counts:?}"
        );
    }

    let out = run(&args).await;
    assert!(out.status.success(), "{}", stderr(&out));

    let mut twice = 0;
    for (h, target) in web.canonical_targets() {
        let n = web.servers[h].hits_of(&target);
        assert!(n >= 1, "host {h} {target} fetched");
        if n > 1 {
            twice += n - 1;
        }
    }
    eprintln!("{twice} repeated fetches after the kill");
    // Only pages claimed and not yet committed at the kill may be fetched
    // again: at most the window, which on 4 hosts the per-host window bounds.
    let mut cfg = CrawlConfig::default();
    cfg.concurrency = concurrency as usize;
    let window = cfg
        .effective_claim_window()
        .min(web.servers.len() * cfg.effective_per_host_window());
    let pages = web.canonical_targets().len();
    assert!(
        window * 4 <= pages,
        "a bound of {window} of {pages} pages says little"
    );
    assert!(twice as usize <= window, "{twice} repeated fetches");
    let robots_violations: u32 = web
        .servers
        .iter()
        .flat_map(|s| s.hits().into_iter())
        .filter(|(t, _)| t.starts_with("/private/"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(robots_violations, 0);
    let store = backend.open().await;
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.pending, counts.processing), (0, 0));
}

on_both_backends!(
    crawl_then_report_pages_and_broken_links,
    crawl_then_report_pages_and_broken_links
);
on_both_backends!(
    search_text_prints_pages_and_positions,
    search_text_prints_pages_and_positions
);
on_both_backends!(
    sigkill_mid_crawl_then_resume_loses_nothing,
    sigkill_mid_crawl_then_resume_loses_nothing
);

/// What the README promises: `crawl`, then `search` prints ranked pages from
/// the index beside the store (one JSON document with `--json`); when that
/// index is lost, `index rebuild` fetches the pages again into a new one.
async fn crawl_search_and_rebuild_the_index(backend: Backend) {
    let site = TestServer::start(Ipv4Addr::new(127, 0, 12, 40), crate::search::bakery()).await;
    // Beside the store file, or given with `--index` (MongoDB).
    let index = backend.index_dir();
    let index_arg = index.display().to_string();
    let crawl = run(&with_store(
        &["crawl", &site.url("/"), "--delay-ms", "0", "--quiet"],
        &backend,
    ))
    .await;
    assert!(crawl.status.success(), "{}", stderr(&crawl));
    assert_all_real_fetched(&site, crate::search::bakery().keys());
    let search = |query: &'static str, extra: &'static [&'static str]| {
        let index_arg = index_arg.clone();
        async move {
            let mut args = vec!["search", query, "--index", &index_arg];
            args.extend(extra);
            run(&args).await
        }
    };
    let out = search("dense loaf", &["--json"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let answer: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
    let first = answer["results"][0]["url"].as_str().unwrap_or_default();
    assert!(
        first == site.url("/rye") || first == site.url("/copy"),
        "{answer}"
    );
    assert!(answer["did_you_mean"].is_null());
    let out = search("sourdugh", &[]).await;
    assert!(
        stdout(&out).contains("Did you mean: sourdough"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains(&site.url("/guide")),
        "{}",
        stdout(&out)
    );
    let out = search("\"half a phrase", &[]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unbalanced quote"),
        "{}",
        stderr(&out)
    );

    std::fs::remove_dir_all(&index).unwrap();
    let out = search("dense", &[]).await;
    assert!(!out.status.success(), "no index: {}", stdout(&out));
    let rebuild = run(&with_store(
        &["index", "rebuild", "--delay-ms", "0"],
        &backend,
    ))
    .await;
    assert!(rebuild.status.success(), "{}", stderr(&rebuild));
    assert!(
        stderr(&rebuild).contains("index rebuilt: 4 pages"),
        "{}",
        stderr(&rebuild)
    );
    assert_eq!(site.hits_of("/mystery"), 2, "fetched again");
    assert_eq!(
        site.hits_of("/secret"),
        2,
        "noindex pages too: the store cannot tell"
    );
    let out = search("kayak", &["--json"]).await;
    let answer: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let urls: Vec<&str> = answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|hit| hit["url"].as_str())
        .collect();
    assert!(urls.contains(&site.url("/mystery").as_str()), "{answer}");
}

on_both_backends!(crawl_search_and_rebuild, crawl_search_and_rebuild_the_index);

/// The real pages of a [`slow_site`] of `n` pages.
fn slow_site_pages(n: usize) -> impl Iterator<Item = String> {
    std::iter::once("/".to_string()).chain((1..n).map(|i| format!("/p/{i}")))
}

/// A slow site of `n` pages in a chain: a crawl of it runs for a while
/// (with `--no-trap-defence`: pages alike linking on are what a calendar
/// looks like).
async fn slow_site(ip: Ipv4Addr, n: usize) -> TestServer {
    let pages = (0..n)
        .map(|i| {
            let path = if i == 0 {
                "/".to_string()
            } else {
                format!("/p/{i}")
            };
            let next = format!("/p/{}", i + 1);
            let page = page_with_links(&format!("page {i}"), &[next.as_str()])
                .delay(Duration::from_millis(100));
            (path, page)
        })
        .collect();
    TestServer::start(ip, pages).await
}

/// `crawl` of a slow site into `db`, quietly.
fn slow_crawl(site: &TestServer, db: &str) -> Vec<String> {
    let mut args: Vec<String> = ["crawl", &site.url("/"), "--db", db, "--delay-ms", "0"]
        .map(String::from)
        .to_vec();
    args.extend(["--quiet", "--no-trap-defence"].map(String::from));
    args
}

/// A quiet crawl of `site` run in the background, once it has fetched.
async fn crawling(site: &TestServer, args: &[String]) -> tokio::process::Child {
    let crawl = bin()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let started = wait_for(Duration::from_secs(20), || site.total_hits() > 2).await;
    assert!(started, "the first crawl runs");
    crawl
}

/// One crawling process per embedded store: a second crawl on the same
/// file is refused with a clear line while the first runs, and welcome
/// once it has ended (the lock dies with its process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_crawl_on_the_same_file_is_refused() {
    let site = slow_site(Ipv4Addr::new(127, 0, 12, 50), 40).await;
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let mut first = crawling(&site, &slow_crawl(&site, &db)).await;
    let second = run(&[
        "crawl",
        &site.url("/"),
        "--db",
        &db,
        "--delay-ms",
        "0",
        "--no-trap-defence",
    ])
    .await;
    assert!(!second.status.success());
    assert!(
        stderr(&second).contains("another web_crawler process is crawling with"),
        "{}",
        stderr(&second)
    );
    first.start_kill().unwrap();
    first.wait().await.unwrap();
    // kill -9 left the lock file, not the lock: the crawl resumes.
    let third = run(&slow_crawl(&site, &db)).await;
    assert!(third.status.success(), "{}", stderr(&third));
    assert_all_real_fetched(&site, slow_site_pages(40));
}

/// One master per MongoDB database: a second crawl on it is refused while
/// the first runs (it renews its owner lease); after a kill -9 the next
/// crawl waits for the dead one's lease to run out and resumes; a crawl
/// that ends lets go of the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_master_on_one_mongodb_database_is_refused() {
    let site = slow_site(Ipv4Addr::new(127, 0, 12, 52), 100).await;
    let backend = Backend::mongo("second_master");
    let seed = site.url("/");
    let args = with_store(
        &[
            "crawl",
            &seed,
            "--delay-ms",
            "0",
            "--quiet",
            "--no-trap-defence",
            "--no-index",
        ],
        &backend,
    );
    let mut first = crawling(&site, &args).await;
    let asked = std::time::Instant::now();
    let second = run(&args).await;
    assert!(!second.status.success());
    assert!(
        stderr(&second).contains("another web_crawler master is crawling with this MongoDB database (`web_crawler crawl`, process "),
        "{}",
        stderr(&second)
    );
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "refused once the holder renews, not when its lease would run out: {:?}",
        asked.elapsed()
    );
    first.start_kill().unwrap();
    first.wait().await.unwrap();
    let third = run(&args).await;
    assert!(third.status.success(), "{}", stderr(&third));
    assert!(
        stderr(&third).contains("owner lease is held by `web_crawler crawl`"),
        "the dead crawl's lease was waited out: {}",
        stderr(&third)
    );
    assert_eq!(site.hits_of("/p/99"), 1, "the site was finished");
    assert_all_real_fetched(&site, slow_site_pages(100));
    let Backend::Mongo { uri, database, .. } = &backend else {
        unreachable!()
    };
    let store = web_crawler::store::MongoStore::connect(uri, database)
        .await
        .unwrap();
    let owners = store
        .database()
        .collection::<mongodb::bson::Document>("crawl_owner");
    assert_eq!(
        owners
            .count_documents(mongodb::bson::doc! {})
            .await
            .unwrap(),
        0,
        "a crawl that ends lets go of the lease"
    );
}

/// SIGTERM stops a crawl gracefully: the summary is printed and the exit
/// code says which signal (128 + 15); what was in flight goes back to
/// pending, so the next run finishes the site.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_a_crawl_with_its_summary() {
    let site = slow_site(Ipv4Addr::new(127, 0, 12, 51), 60).await;
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let crawl = bin()
        .args(slow_crawl(&site, &db))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let started = wait_for(Duration::from_secs(20), || site.total_hits() > 3).await;
    assert!(started, "the crawl runs");
    let pid = crawl.id().unwrap().to_string();
    let signalled = std::time::Instant::now();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().await;
    assert!(kill.unwrap().success());
    let out = tokio::time::timeout(Duration::from_secs(30), crawl.wait_with_output())
        .await
        .expect("the crawl stops")
        .unwrap();
    assert!(
        signalled.elapsed() < Duration::from_secs(15),
        "{:?} {}",
        signalled.elapsed(),
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("crawl ended (interrupted)"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("to resume, run the same command again ("),
        "the way on: {}",
        stdout(&out)
    );
    assert_eq!(
        beside(dir.path()),
        ["crawl.db", "crawl.db.index"],
        "a graceful stop is a clean exit"
    );
    let resumed = run(&slow_crawl(&site, &db)).await;
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    // The resumed run's count is its own; the store's totals are labelled.
    let summary = stdout(&resumed);
    assert!(
        summary.contains("crawl ended (nothing left to crawl) after "),
        "{summary}"
    );
    assert!(
        summary.contains("the store, all runs so far:\n  pages by status:\n           200  60"),
        "{summary}"
    );
    assert!(
        !summary.contains("this run fetched 61 pages"),
        "the first run's pages are not this run's: {summary}"
    );
    for i in 1..60 {
        assert_eq!(site.hits_of(&format!("/p/{i}")), 1, "/p/{i} fetched once");
    }
    assert_all_real_fetched(&site, slow_site_pages(60));
}

/// `search` on a crawl run with `--no-index` says so and names the way on
/// (`index rebuild`), which works; `--limit 0` is a usage error (exit 2),
/// not "No results".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_on_a_crawl_without_an_index_says_how_to_make_one() {
    let site = TestServer::start(
        Ipv4Addr::new(127, 0, 27, 4),
        HashMap::from([
            ("/".to_string(), page_with_links("home", &["/csv"])),
            (
                "/csv".to_string(),
                Page::html("<title>CSV</title><p>export the table as csv</p>"),
            ),
        ]),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let crawl = run(&[
        "crawl",
        &site.url("/"),
        "--db",
        &db,
        "--delay-ms",
        "0",
        "--no-index",
    ])
    .await;
    assert!(crawl.status.success(), "{}", stderr(&crawl));
    assert_all_real_fetched(&site, ["/", "/csv"]);
    let out = run(&["search", "csv", "--db", &db]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "error: the crawl in {db} has no search index (it ran with --no-index, or \
             {db}.index was removed): `web_crawler index rebuild --db {db}` makes one from \
             what it fetched"
        )
    );
    let out = run(&["search", "csv", "--db", &db, "--limit", "0"]).await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "a usage error: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("0 would show nothing"),
        "{}",
        stderr(&out)
    );
    let rebuild = run(&["index", "rebuild", "--db", &db, "--delay-ms", "0"]).await;
    assert!(rebuild.status.success(), "{}", stderr(&rebuild));
    let out = run(&["search", "csv", "--db", &db, "--limit", "1"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&site.url("/csv")), "{}", stdout(&out));
}

/// `crawl --metrics`: the error and restart counters are there at 0 from
/// the start (an alert on them sees a number, not "no data"), one restart
/// count per child of the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_their_known_series_at_zero_from_the_start() {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let site = slow_site(Ipv4Addr::new(127, 0, 27, 5), 20).await;
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    // Coverage is not asserted: the crawl is killed once the metrics are read.
    let mut args = slow_crawl(&site, &db);
    args.extend(["--metrics", "127.0.27.6:0"].map(String::from));
    let mut crawl = bin()
        .args(&args)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(crawl.stderr.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(at) = line.strip_prefix("metrics at http://") {
                return at.trim_end_matches("/metrics").to_string();
            }
        }
        panic!("no metrics address");
    })
    .await
    .expect("the metrics address");
    assert!(
        wait_for(Duration::from_secs(20), || site.total_hits() > 1).await,
        "the crawl runs"
    );
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    crawl.start_kill().unwrap();
    let zero = |name: &str, labels: &str| {
        text.lines().any(|l| {
            l.starts_with(&format!("web_crawler_{name}{{node=\""))
                && l.ends_with(&format!("\"{labels}}} 0"))
        })
    };
    assert!(zero("fetch_errors_total", ""), "{text}");
    for child in ["master", "pool", "control", "indexer"] {
        assert!(
            zero("restarts_total", &format!(",child=\"{child}\"")),
            "{child}: {text}"
        );
    }
}

/// The files beside the store `db` in `dir`, by name.
fn beside(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A crawl that ends cleanly leaves its store file and its index only: no
/// lock file, no `-wal` or `-shm`. One killed leaves them, and the next
/// run opens the store as usual (and cleans up when it ends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_exit_leaves_only_the_store_and_its_index() {
    let site = slow_site(Ipv4Addr::new(127, 0, 27, 7), 30).await;
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let mut killed = crawling(&site, &slow_crawl(&site, &db)).await;
    killed.start_kill().unwrap();
    killed.wait().await.unwrap();
    let left = beside(dir.path());
    assert!(
        left.contains(&"crawl.db.lock".to_string()) && left.contains(&"crawl.db-wal".to_string()),
        "a kill leaves them: {left:?}"
    );
    let resumed = run(&slow_crawl(&site, &db)).await;
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert_all_real_fetched(&site, slow_site_pages(30));
    assert_eq!(beside(dir.path()), ["crawl.db", "crawl.db.index"]);
    // A run with nothing left to do, and a report, leave nothing either.
    let again = run(&slow_crawl(&site, &db)).await;
    assert!(again.status.success(), "{}", stderr(&again));
    let report = run(&["report", "hosts", "--db", &db]).await;
    assert!(report.status.success(), "{}", stderr(&report));
    assert_eq!(beside(dir.path()), ["crawl.db", "crawl.db.index"]);
}
