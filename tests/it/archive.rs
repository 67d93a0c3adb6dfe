//! Archives: the WARC files and CDXJ indexes of a crawl, read back with an
//! independent reader (warcio, installed by scripts/warc-tools.sh), and
//! `index rebuild` reading pages back from them.

use crate::common::bin;
use crate::common::coverage::assert_all_real_fetched;
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Output;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use web_crawler::Settings;
use web_crawler::archive::WarcArchive;
use web_crawler::operations::mirror;
use web_crawler_testsupport::{Page, TestServer, page_with_links};

async fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    tokio::time::timeout(Duration::from_secs(120), bin().args(args).output())
        .await
        .expect("the command finishes")
        .expect("the command runs")
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

const GZ_HTML: &str = "<html><head><title>Zipped</title></head><body><p>compressed \
                       kayak paddles</p></body></html>";
const JSON: &str = "{\"not\": \"html\"}";

/// A small web with what an archive must hold: robots.txt, a redirect, a
/// 404, a non-HTML body, a gzip-encoded page, a 304.
fn site() -> HashMap<String, Page> {
    HashMap::from([
        (
            "/robots.txt".into(),
            Page::text("text/plain", "User-agent: *\nDisallow: /private\n"),
        ),
        (
            "/".into(),
            page_with_links(
                "Home",
                &[
                    "/a",
                    "/moved",
                    "/missing",
                    "/data.json",
                    "/gz",
                    "/same",
                    "/private/x",
                ],
            ),
        ),
        ("/a".into(), page_with_links("Page A", &["/"])),
        ("/moved".into(), Page::redirect(301, "/b")),
        ("/b".into(), page_with_links("Page B", &[])),
        ("/data.json".into(), Page::text("application/json", JSON)),
        (
            "/gz".into(),
            Page::new(
                200,
                &[("content-type", "text/html"), ("content-encoding", "gzip")],
                gzip(GZ_HTML.as_bytes()),
            ),
        ),
        ("/same".into(), Page::new(304, &[], Vec::new())),
    ])
}

/// The python that has warcio: `WEB_CRAWLER_TEST_WARC_PYTHON` (set by
/// scripts/test.sh), or scripts/warc-tools.sh run now. Never skipped.
pub(crate) fn warc_python() -> String {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            crate::common::from_env_or_script(
                "WEB_CRAWLER_TEST_WARC_PYTHON",
                &["warc-tools.sh"],
                "these tests need warcio and it could not be installed",
            )
        })
        .clone()
}

/// warcio reads a directory: `warcio check` on every WARC file, then every
/// record of every file (digests checked) and every CDXJ line looked up at
/// its offset.
const WARCIO_READ: &str = r#"
import glob, hashlib, json, os, subprocess, sys
from warcio.archiveiterator import ArchiveIterator
d = sys.argv[1]
warcio = os.path.join(os.path.dirname(sys.executable), "warcio")
files = sorted(glob.glob(os.path.join(d, "*.warc.gz")))
for f in files:
    subprocess.run([warcio, "check", f], check=True)
    subprocess.run([warcio, "index", f], check=True, stdout=subprocess.DEVNULL)
records = []
for f in files:
    with open(f, "rb") as fh:
        it = ArchiveIterator(fh, check_digests="raise")
        for r in it:
            h = r.rec_headers
            rec = {
                "file": os.path.basename(f),
                "type": r.rec_type,
                "id": h.get_header("WARC-Record-ID"),
                "url": h.get_header("WARC-Target-URI"),
                "date": h.get_header("WARC-Date"),
                "concurrent_to": h.get_header("WARC-Concurrent-To"),
                "profile": h.get_header("WARC-Profile"),
                "payload_digest": h.get_header("WARC-Payload-Digest"),
                "ip": h.get_header("WARC-IP-Address"),
                "version": r.rec_headers.protocol,
            }
            if r.http_headers is not None and r.rec_type in ("response", "revisit"):
                rec["status"] = int(r.http_headers.get_statuscode())
            body = r.content_stream().read()
            rec["body"] = body.decode("latin-1")
            records.append(rec)
index = []
for c in sorted(glob.glob(os.path.join(d, "*.cdxj"))):
    lines = open(c).read().splitlines()
    assert lines == sorted(lines), c + " is not sorted"
    for line in lines:
        surt, ts, js = line.split(" ", 2)
        e = json.loads(js)
        with open(os.path.join(d, e["filename"]), "rb") as fh:
            fh.seek(int(e["offset"]))
            it = ArchiveIterator(fh)
            r = next(it)
            r.content_stream().read()
            found = {
                "url": r.rec_headers.get_header("WARC-Target-URI"),
                "type": r.rec_type,
                "length": it.get_record_length(),
            }
        index.append({"surt": surt, "ts": ts, "entry": e, "found": found})
print(json.dumps({"files": [os.path.basename(f) for f in files], "records": records, "index": index}))
"#;

/// What warcio reads in `dir`.
fn read_with_warcio(dir: &Path) -> Value {
    let out = std::process::Command::new(warc_python())
        .args(["-c", WARCIO_READ])
        .arg(dir)
        .output()
        .expect("run warcio");
    assert!(
        out.status.success(),
        "warcio rejects the archive:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("warcio's JSON")
}

fn records<'a>(read: &'a Value, kind: &str) -> Vec<&'a Value> {
    read["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["type"] == kind)
        .collect()
}

/// The target (path and query) of a record's URL.
fn target(record: &Value) -> String {
    let url = url::Url::parse(record["url"].as_str().unwrap()).unwrap();
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    }
}

#[tokio::test]
async fn a_crawl_is_archived_once_and_warcio_reads_it_back() {
    let tmp = tempfile::tempdir().unwrap();
    let warc = tmp.path().join("warc");
    let server = TestServer::start(Ipv4Addr::new(127, 0, 20, 1), site()).await;
    let crawl = |db: &str| {
        let args = vec![
            "crawl".to_string(),
            server.url("/"),
            "--db".into(),
            tmp.path().join(db).display().to_string(),
            "--no-index".into(),
            "--delay-ms".into(),
            "0".into(),
            "--quiet".into(),
            "--warc".into(),
            warc.display().to_string(),
            "--warc-max-size".into(),
            "3KB".into(),
        ];
        async move { run(&args).await }
    };
    let out = crawl("first.db").await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The 200s (its redirect, 404 and 304 are checked one by one below).
    assert_all_real_fetched(&server, ["/", "/a", "/b", "/data.json", "/gz"]);
    let read = read_with_warcio(&warc);

    // Rotated by size: several files, each beginning with its warcinfo.
    let files = read["files"].as_array().unwrap();
    assert!(files.len() >= 3, "{files:?}");
    let infos = records(&read, "warcinfo");
    assert_eq!(infos.len(), files.len());
    assert!(
        read["records"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["version"] == "WARC/1.1"),
        "{read}"
    );
    assert!(
        std::fs::read_dir(&warc).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".open")),
        "every file closed"
    );

    // Every response the server sent, once; each with its request.
    let responses = records(&read, "response");
    let revisits = records(&read, "revisit");
    let mut archived: HashMap<String, u32> = HashMap::new();
    for r in responses.iter().chain(&revisits) {
        *archived.entry(target(r)).or_default() += 1;
    }
    assert_eq!(
        archived,
        server.hits(),
        "the archive holds each response once"
    );
    for t in [
        "/robots.txt",
        "/moved",
        "/missing",
        "/data.json",
        "/gz",
        "/same",
    ] {
        assert_eq!(archived.get(t), Some(&1), "{t}");
    }
    let requests = records(&read, "request");
    assert_eq!(requests.len(), responses.len() + revisits.len());
    for r in responses.iter().chain(&revisits) {
        assert!(
            requests
                .iter()
                .any(|q| q["concurrent_to"] == r["id"] && q["url"] == r["url"]),
            "no request for {}",
            r["url"]
        );
        assert_eq!(r["ip"], "127.0.20.1");
    }

    // Bodies as the server sent them (decoded where it encoded them).
    let by_target: HashMap<String, &Value> = responses.iter().map(|r| (target(r), *r)).collect();
    assert_eq!(by_target["/gz"]["body"], GZ_HTML);
    assert_eq!(by_target["/data.json"]["body"], JSON);
    assert_eq!(by_target["/moved"]["status"], 301);
    assert_eq!(by_target["/missing"]["status"], 404);
    assert_eq!(by_target["/missing"]["body"], "not found");
    assert!(
        by_target["/robots.txt"]["body"]
            .as_str()
            .unwrap()
            .contains("Disallow: /private")
    );
    // A 304 is a revisit.
    assert_eq!(revisits.len(), 1, "{revisits:?}");
    assert_eq!(target(revisits[0]), "/same");
    assert_eq!(
        revisits[0]["profile"],
        "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
    );

    // The index: one line per response or revisit, each pointing at it.
    let index = read["index"].as_array().unwrap();
    assert_eq!(index.len(), responses.len() + revisits.len());
    for line in index {
        let (entry, found) = (&line["entry"], &line["found"]);
        assert_eq!(found["url"], entry["url"], "{line}");
        assert!(found["type"] == "response" || found["type"] == "revisit");
        assert_eq!(
            found["length"].as_u64().unwrap().to_string(),
            entry["length"].as_str().unwrap(),
            "{line}"
        );
        assert!(line["surt"].as_str().unwrap().starts_with("127.0.20.1:"));
        assert_eq!(line["ts"].as_str().unwrap().len(), 14);
    }

    // Fetched again (a fresh store, the same archive): the unchanged 200s
    // are revisits to the payload archived before.
    let out = crawl("second.db").await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = read_with_warcio(&warc);
    let first_ids: Vec<&Value> = read["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"])
        .collect();
    let new: Vec<&Value> = again["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !first_ids.contains(&&r["id"]))
        .collect();
    let identical: Vec<String> = new
        .iter()
        .filter(|r| {
            r["profile"] == "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
        })
        .map(|r| target(r))
        .collect();
    for t in ["/", "/a", "/b", "/gz", "/data.json", "/robots.txt"] {
        assert!(identical.contains(&t.to_string()), "{t} in {identical:?}");
    }
    let new_responses: Vec<String> = new
        .iter()
        .filter(|r| r["type"] == "response")
        .map(|r| target(r))
        .collect();
    assert!(
        new_responses.contains(&"/missing".to_string()),
        "{new_responses:?}"
    );
    assert!(!new_responses.contains(&"/gz".to_string()));
}

/// A site of two pages with words of their own, for the index.
fn mirrored_site() -> HashMap<String, Page> {
    HashMap::from([
        (
            "/".into(),
            Page::html(
                "<html><head><title>Canoe</title></head><body><p>a birchbark canoe \
                 </p><a href=\"/old\">old</a><a href=\"/gone\">gone</a></body></html>",
            ),
        ),
        ("/old".into(), Page::redirect(302, "/new")),
        (
            "/new".into(),
            Page::html(
                "<html><head><title>Portage</title></head><body><p>a long \
                        portage trail</p></body></html>",
            ),
        ),
    ])
}

#[tokio::test]
async fn mirror_archives_its_urls_and_index_rebuild_reads_them_back() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("crawl.db");
    // `index rebuild` finds it beside the store by default.
    let warc = tmp.path().join("crawl.db.warc");
    let mirrored = TestServer::start(Ipv4Addr::new(127, 0, 20, 2), mirrored_site()).await;
    let plain = TestServer::start(
        Ipv4Addr::new(127, 0, 20, 3),
        HashMap::from([("/".into(), page_with_links("Plain", &[]))]),
    )
    .await;

    let archive = Arc::new(WarcArchive::new(&warc, "local", 1_000_000, false));
    let mut settings = Settings::default();
    settings.crawl.min_delay = Duration::ZERO;
    settings.crawl.sitemaps = false;
    settings.archive = Some(archive.clone());
    let app = web_crawler::start_embedded(&db, settings).await.unwrap();
    app.add_url_with(&mirrored.url("/"), mirror())
        .await
        .unwrap();
    app.add_url(&plain.url("/")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), app.wait_idle())
        .await
        .expect("idle")
        .unwrap();
    app.stop(Duration::from_secs(5)).await.unwrap();
    archive.close().unwrap();

    let read = read_with_warcio(&warc);
    let mut archived: Vec<String> = records(&read, "response")
        .iter()
        .map(|r| r["url"].as_str().unwrap().to_string())
        .collect();
    archived.sort();
    let mut expected: Vec<String> = ["/", "/gone", "/new", "/old"]
        .iter()
        .map(|p| mirrored.url(p))
        .collect();
    expected.sort();
    assert_eq!(
        archived, expected,
        "the mirror URL's crawl, redirect and 404 included; not robots.txt, not the plain crawl"
    );

    // The mirrored site is gone; its pages come back from the archive.
    let origin = mirrored.origin();
    drop(mirrored);
    let out = run(&[
        "index",
        "rebuild",
        "--db",
        db.to_str().unwrap(),
        "--delay-ms",
        "0",
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("2 pages read from the archive"), "{stderr}");
    assert!(stderr.contains("index rebuilt: 3 pages"), "{stderr}");
    assert_eq!(
        plain.hits_of("/"),
        2,
        "what the archive lacks is fetched again"
    );
    for (word, path) in [("birchbark", "/"), ("portage", "/new")] {
        let out = run(&["search", word, "--json", "--db", db.to_str().unwrap()]).await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            answer["results"][0]["url"],
            format!("{origin}{path}"),
            "{answer}"
        );
    }
}
