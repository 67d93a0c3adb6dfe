//! Availability watching end to end: `web_crawler start --recrawl-every`
//! watching a page that goes down, comes back and changes, with conditional
//! re-fetches, the history, the reports and the notifications (a command
//! and a webhook on a loopback receiver).

use crate::common::{bin, wait_for};
use serde_json::Value;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use web_crawler::actors::Queries;
use web_crawler::actors::availability::{FetchHistory, HistoryQuery, WATCH_OFF};
use web_crawler::store::SqliteStore;
use web_crawler_testsupport::{Page, TestServer, reserve};

/// The watched site: `/` answers 500 while `down`, else version `version`
/// of its body with an ETag, and 304 (no body) to a matching If-None-Match.
#[derive(Default)]
struct Site {
    down: Mutex<bool>,
    version: AtomicU32,
    /// 200 answers with a body.
    bodies: AtomicU32,
    not_modified: AtomicU32,
}

impl Site {
    fn answer(&self, req: &web_crawler_testsupport::Request) -> Page {
        if req.uri().path() != "/" {
            return Page::not_found();
        }
        if *self.down.lock().unwrap() {
            return Page::text("text/plain", "unavailable").status(500);
        }
        let version = self.version.load(Ordering::SeqCst);
        let etag = format!("\"v{version}\"");
        let asked = req
            .headers()
            .get("if-none-match")
            .and_then(|v| v.to_str().ok());
        if asked == Some(etag.as_str()) {
            self.not_modified.fetch_add(1, Ordering::SeqCst);
            return Page::new(304, &[("etag", &etag)], Vec::new());
        }
        self.bodies.fetch_add(1, Ordering::SeqCst);
        let body = format!("<html><title>watched</title><body>version {version}</body></html>");
        Page::new(200, &[("content-type", "text/html"), ("etag", &etag)], body)
    }
}

/// A webhook receiver: keeps each POSTed body, answers 200.
async fn webhook(ip: Ipv4Addr) -> (String, Arc<Mutex<Vec<Value>>>) {
    let std_listener = reserve(ip);
    std_listener.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let keep = got.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let keep = keep.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // One request per connection is all it reads.
                loop {
                    let Ok(n) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length: usize = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    if buf.len() < end + 4 + length {
                        continue;
                    }
                    let body = &buf[end + 4..end + 4 + length];
                    keep.lock()
                        .unwrap()
                        .push(serde_json::from_slice(body).unwrap_or(Value::Null));
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                    return;
                }
            });
        }
    });
    (url, got)
}

async fn history(db: &Path) -> Vec<FetchHistory> {
    match SqliteStore::open(db) {
        Ok(store) => store
            .fetch_history(HistoryQuery::default())
            .await
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

/// Poll the history until `done` holds (at most 30 s).
async fn watch_until(db: &Path, what: &str, done: impl Fn(&[FetchHistory]) -> bool) {
    for _ in 0..300 {
        if done(&history(db).await) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: {:#?}", history(db).await);
}

async fn report(db: &Path, what: &str) -> Value {
    let out = bin()
        .args(["report", what, "--json", "--db"])
        .arg(db)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_page_going_down_coming_back_and_changing() {
    let site = Arc::new(Site::default());
    site.version.store(1, Ordering::SeqCst);
    let server = {
        let site = site.clone();
        TestServer::serve_fn(reserve(Ipv4Addr::new(127, 0, 15, 1)), move |req| {
            site.answer(req)
        })
        .await
    };
    let (hook, posted) = webhook(Ipv4Addr::new(127, 0, 15, 2)).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("watch.db");
    let cookie = dir.path().join("cookie");
    std::fs::write(&cookie, "availability-cookie\n").unwrap();
    let told = dir.path().join("told.txt");
    let script = dir.path().join("on-change.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf '%s %s %s\\n' \"$WEB_CRAWLER_EVENT\" \"$WEB_CRAWLER_STATUS\" \"$WEB_CRAWLER_URL\" >> \"$TOLD\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let listen = reserve(Ipv4Addr::new(127, 0, 15, 3)).local_addr().unwrap();
    let url = server.url("/");
    let mut node = bin()
        .args(["start", "--name", "watch", "--listen", &listen.to_string()])
        .arg("--cookie-file")
        .arg(&cookie)
        .arg("--db")
        .arg(&db)
        .args(["--no-index", "--delay-ms", "0", "--recrawl-every", "2s"])
        .arg("--on-change")
        .arg(&script)
        .args(["--webhook", &hook, &url])
        .env("TOLD", &told)
        .env("RUST_LOG", "web_crawler_actors=info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // Unchanged: asked again conditionally, a 304 and no body.
    watch_until(&db, "a 304", |h| {
        h.iter().any(|f| f.http_returncode == Some(304))
    })
    .await;
    assert_eq!(site.bodies.load(Ordering::SeqCst), 1, "one body only");
    // Down, then back with another body, then changed again.
    *site.down.lock().unwrap() = true;
    watch_until(&db, "down", |h| {
        h.last().is_some_and(|f| f.http_returncode == Some(500))
    })
    .await;
    site.version.store(2, Ordering::SeqCst);
    *site.down.lock().unwrap() = false;
    watch_until(&db, "up", |h| {
        h.last().is_some_and(|f| f.http_returncode == Some(200))
    })
    .await;
    site.version.store(3, Ordering::SeqCst);
    watch_until(&db, "changed", |h| {
        h.iter().filter(|f| f.changed).count() == 3
    })
    .await;
    let told_all = wait_for(Duration::from_secs(10), || {
        posted.lock().unwrap().len() >= 3
            && std::fs::read_to_string(&told).is_ok_and(|t| t.lines().count() >= 3)
    })
    .await;
    // The same lists in the console, newest change first.
    let mut console = bin()
        .args(["console", "--json", "--connect", &listen.to_string()])
        .arg("--cookie-file")
        .arg(&cookie)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = console.stdin.take().unwrap();
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    let script = format!("changes\navailability {host}\navailability 127.9.9.9:80\n");
    stdin.write_all(script.as_bytes()).await.unwrap();
    drop(stdin);
    let answers = tokio::time::timeout(Duration::from_secs(30), console.wait_with_output())
        .await
        .expect("the console ends")
        .unwrap();
    let answers: Vec<Value> = String::from_utf8_lossy(&answers.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = answers[0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["change"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["changed", "up", "down"], "{answers:?}");
    assert_eq!(answers[1]["items"][0]["url"], url.as_str(), "{answers:?}");
    assert!(answers[1]["items"][0]["checks"].as_u64().unwrap() >= 5);
    assert_eq!(answers[2]["total"], 0, "another host's: none");

    node.start_kill().unwrap();
    let out = node.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        told_all,
        "notified: {:?}, log: {log}",
        posted.lock().unwrap()
    );

    // The history: every fetch, in order, what changed marked.
    let h = history(&db).await;
    let codes: Vec<Option<u16>> = h.iter().map(|f| f.http_returncode).collect();
    let first_down = codes.iter().position(|c| *c == Some(500)).unwrap();
    assert!(
        codes[..first_down]
            .iter()
            .all(|c| matches!(c, Some(200 | 304))),
        "{codes:?}"
    );
    let changed: Vec<(Option<u16>, bool)> = h
        .iter()
        .filter(|f| f.changed)
        .map(|f| (f.http_returncode, f.changed))
        .collect();
    assert_eq!(
        changed,
        vec![(Some(500), true), (Some(200), true), (Some(200), true)]
    );
    assert_eq!(
        site.bodies.load(Ordering::SeqCst) as usize,
        codes.iter().filter(|c| **c == Some(200)).count(),
        "a body for each 200, none for a 304"
    );
    assert_eq!(
        site.not_modified.load(Ordering::SeqCst) as usize,
        codes.iter().filter(|c| **c == Some(304)).count()
    );

    // The notifications: the log, the command and the webhook.
    for change in ["down", "up", "changed"] {
        assert!(log.contains(&format!("watched URL {change}")), "{log}");
    }
    let lines: Vec<String> = std::fs::read_to_string(&told)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        lines,
        vec![
            format!("down 500 {url}"),
            format!("up 200 {url}"),
            format!("changed 200 {url}")
        ]
    );
    let posted: Vec<(String, String)> = posted
        .lock()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["change"].as_str().unwrap_or("?").to_string(),
                e["url"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect();
    assert_eq!(
        posted,
        vec![
            ("down".to_string(), url.clone()),
            ("up".to_string(), url.clone()),
            ("changed".to_string(), url.clone())
        ]
    );

    // The reports.
    let availability = report(&db, "availability").await;
    let row = &availability[0];
    assert_eq!(row["url"], url.as_str());
    assert_eq!(row["checks"], h.len() as u64);
    let up = codes.iter().filter(|c| **c != Some(500)).count() as f64;
    let pct = row["uptime_pct"].as_f64().unwrap();
    assert!((pct - 100.0 * up / h.len() as f64).abs() < 1e-6, "{row}");
    assert!(row["last_failure"].is_i64(), "{row}");
    assert_eq!(row["last_failure_reason"], "HTTP 500", "{row}");
    let changes = report(&db, "changes").await;
    let kinds: Vec<&str> = changes
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["change"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["down", "up", "changed"]);
    // The check before the outage was answered with a 304.
    assert_eq!(changes[0]["previous_returncode"], 304);
    assert_eq!(changes[0]["http_returncode"], 500);
}

/// A page fetched by a node: counts its fetches, and when `once` was last.
#[derive(Default)]
struct Hits {
    watched: AtomicU32,
    once: AtomicU32,
    once_last: Mutex<Option<Instant>>,
}

impl Hits {
    /// Wait (at most 30 s) until `once` is fetched after `at`.
    async fn once_fetched_after(&self, at: Instant) -> bool {
        wait_for(Duration::from_secs(30), || {
            self.once_last.lock().unwrap().is_some_and(|last| last > at)
        })
        .await
    }
}

fn start_watch_node(db: &Path, cookie: &Path, listen: &str) -> tokio::process::Child {
    bin()
        .args(["start", "--name", "own", "--listen", listen])
        .arg("--cookie-file")
        .arg(cookie)
        .arg("--db")
        .arg(db)
        .args(["--no-index", "--delay-ms", "0"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Wait until the node at `listen` answers `status` (at most 30 s).
async fn wait_answering(listen: &str, cookie: &Path) {
    for _ in 0..150 {
        let out = bin()
            .args(["status", "--connect", listen])
            .arg("--cookie-file")
            .arg(cookie)
            .output()
            .await
            .unwrap();
        if out.status.success() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the node at {listen} never answered");
}

/// `add-url` on the node at `listen`: whether it succeeded, and what it said.
async fn add_url(listen: &str, cookie: &Path, args: &[&str]) -> (bool, String) {
    let out = bin()
        .arg("add-url")
        .args(args)
        .args(["--connect", listen, "--wait", "10"])
        .arg("--cookie-file")
        .arg(cookie)
        .output()
        .await
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// `add-url --every` on a service started without `--recrawl-every`: that
/// URL is fetched again and again at its own interval, across a restart of
/// the process, while a URL added without one is fetched once; an interval
/// below the sweep's is refused, and one given to a processed URL watches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_added_with_every_is_watched_at_its_own_interval() {
    let hits = Arc::new(Hits::default());
    let server = {
        let hits = hits.clone();
        TestServer::serve_fn(reserve(Ipv4Addr::new(127, 0, 15, 4)), move |req| {
            let counter = match req.uri().path() {
                "/watched" => &hits.watched,
                "/once" => &hits.once,
                _ => return Page::not_found(),
            };
            counter.fetch_add(1, Ordering::SeqCst);
            if req.uri().path() == "/once" {
                *hits.once_last.lock().unwrap() = Some(Instant::now());
            }
            Page::new(
                200,
                &[("content-type", "text/html")],
                "<html><title>same</title><body>unchanged</body></html>",
            )
        })
        .await
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("own.db");
    let cookie = dir.path().join("cookie");
    std::fs::write(&cookie, "own-interval-cookie\n").unwrap();
    let listen = reserve(Ipv4Addr::new(127, 0, 15, 5))
        .local_addr()
        .unwrap()
        .to_string();
    let (watched, once) = (server.url("/watched"), server.url("/once"));
    // --recrawl-every is held to the same shortest interval.
    let refused = bin()
        .args(["start", "--name", "short", "--listen", &listen])
        .arg("--cookie-file")
        .arg(&cookie)
        .arg("--db")
        .arg(dir.path().join("short.db"))
        .args(["--recrawl-every", "500ms"])
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("--recrawl-every: cannot watch a URL every 500ms"),
        "{said}"
    );
    let mut node = start_watch_node(&db, &cookie, &listen);
    wait_answering(&listen, &cookie).await;

    let (ok, said) = add_url(&listen, &cookie, &[&watched, "--every", "0"]).await;
    assert!(!ok, "{said}");
    assert!(said.contains("the shortest interval is 1s"), "{said}");
    assert_eq!(said.trim().lines().count(), 1, "one line: {said}");
    let (ok, said) = add_url(&listen, &cookie, &[&once]).await;
    assert!(ok, "{said}");
    let (ok, said) = add_url(&listen, &cookie, &[&watched, "--every", "1s"]).await;
    assert!(ok, "{said}");

    let fetched_thrice = wait_for(Duration::from_secs(30), || {
        hits.watched.load(Ordering::SeqCst) >= 3
    })
    .await;
    assert!(fetched_thrice, "watched: {:?}", hits.watched);
    assert_eq!(hits.once.load(Ordering::SeqCst), 1, "no interval: once");

    // A new process on the same file watches it still.
    node.start_kill().unwrap();
    node.wait().await.unwrap();
    let before = hits.watched.load(Ordering::SeqCst);
    let mut node = start_watch_node(&db, &cookie, &listen);
    let again = wait_for(Duration::from_secs(30), || {
        hits.watched.load(Ordering::SeqCst) >= before + 2
    })
    .await;
    assert!(again, "after the restart: {:?}", hits.watched);
    assert_eq!(hits.once.load(Ordering::SeqCst), 1);
    wait_answering(&listen, &cookie).await;

    // An interval for a processed URL is not refused: it is fetched now,
    // and watched from then on.
    let (ok, said) = add_url(&listen, &cookie, &[&once, "--every", "1s"]).await;
    assert!(ok, "{said}");
    let watched_too = wait_for(Duration::from_secs(30), || {
        hits.once.load(Ordering::SeqCst) >= 3
    })
    .await;
    assert!(watched_too, "once: {:?}", hits.once);

    // `off`: fetched once more at most (a check may be queued already: it
    // leaves pending_urls once written), then no more. Its interval had
    // grown to 4 s at most (4 × 1 s, the page never changes) and due URLs
    // are looked for each second, so a URL still watched is fetched within
    // 6 s: `once`, watched still, fetched later than that says the node
    // looked for due URLs since.
    const DUE_WITHIN: Duration = Duration::from_secs(6);
    let (ok, said) = add_url(&listen, &cookie, &[&watched, "--every", "off"]).await;
    assert!(ok, "{said}");
    let unwatched_at = hits.watched.load(Ordering::SeqCst);
    let store = SqliteStore::open(&db).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while store
        .pending(100)
        .await
        .unwrap()
        .iter()
        .any(|p| p.url == watched)
    {
        assert!(Instant::now() < deadline, "its last check is written");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let settled = hits.watched.load(Ordering::SeqCst);
    assert!(settled <= unwatched_at + 2, "{unwatched_at} then {settled}");
    let looked = hits.once_fetched_after(Instant::now() + DUE_WITHIN).await;
    assert!(looked, "once is watched still: {:?}", hits.once);
    assert_eq!(
        hits.watched.load(Ordering::SeqCst),
        settled,
        "not watched any more"
    );

    node.start_kill().unwrap();
    node.wait().await.unwrap();
    let page = store.processed_url(&once).await.unwrap().unwrap();
    assert_eq!(page.record.check_every_ms, Some(1_000));
    let page = store.processed_url(&watched).await.unwrap().unwrap();
    assert_eq!(
        (page.record.check_every_ms, page.record.d_next_check),
        (Some(WATCH_OFF), None),
        "off, and so never due"
    );
}
