//! The node's HTTP JSON API and web page (`--http`), driven as scripts and
//! browsers drive them: `web_crawler` processes on loopback, test webs on
//! 127.0.45.x–127.0.47.x, requests over real connections (curl for the
//! cluster's), and the page in Debian's headless chromium.

use crate::cluster::{Cluster, nodes_per_host};
use crate::common::bin;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::Child;
use web_crawler_testsupport::{Page, TestServer, page_with_links, reserve};

const TOKEN: &str = "token-for-the-http-tests";

/// A free port on `ip` (bound and let go: the node takes it at once).
fn free_addr(ip: Ipv4Addr) -> SocketAddr {
    reserve(ip).local_addr().unwrap()
}

/// A site of `pages` pages in a chain from `/`, each after `delay`, and
/// one page about caraway rye bread (`/bread`) that a search finds first;
/// `name` makes its text its own (sites alike would be duplicates).
async fn site(ip: Ipv4Addr, name: &str, pages: usize, delay: Duration) -> TestServer {
    let mut map = HashMap::new();
    let chain = |i: usize| format!("/p/{i}");
    map.insert(
        "/".to_string(),
        page_with_links(&format!("Notes of {name}"), &[&chain(0), "/bread"]).delay(delay),
    );
    for i in 0..pages {
        let next = if i + 1 < pages {
            chain(i + 1)
        } else {
            "/".into()
        };
        let page = page_with_links(&format!("Notes of {name} page {i}"), &[&next]).delay(delay);
        map.insert(chain(i), page);
    }
    map.insert(
        "/bread".to_string(),
        Page::html(format!(
            "<html><head><title>Caraway rye bread</title></head><body><h1>Caraway rye \
             bread</h1><p>A dark sourdough rye loaf with caraway seeds, as {name} bakes it: \
             the caraway is toasted, the rye is fermented overnight.</p></body></html>"
        ))
        .delay(delay),
    );
    TestServer::start(ip, map).await
}

/// The API of a node, over real connections.
#[derive(Clone)]
struct Api {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Api {
    fn new(addr: SocketAddr) -> Api {
        Api {
            base: format!("http://{addr}"),
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// One request; its status and JSON body (`Null` when not JSON).
    async fn send(
        &self,
        method: &str,
        path: &str,
        body: impl Into<Bytes>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        self.try_send(method, path, body.into(), headers)
            .await
            .expect("a response")
    }

    /// One request; `None` if no connection could be had.
    async fn try_send(
        &self,
        method: &str,
        path: &str,
        body: Bytes,
        headers: &[(&str, &str)],
    ) -> Option<(u16, Value)> {
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let request = request.body(Full::new(body)).unwrap();
        let response = tokio::time::timeout(Duration::from_secs(120), self.client.request(request))
            .await
            .expect("the node answers")
            .ok()?;
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Some((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send("GET", path, Bytes::new(), &[]).await
    }

    /// A write with the token.
    async fn write(&self, method: &str, path: &str, body: impl Into<Bytes>) -> (u16, Value) {
        let auth = format!("Bearer {TOKEN}");
        self.send(method, path, body, &[("authorization", &auth)])
            .await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.write("POST", path, body.to_string()).await
    }

    /// Wait until the status says `done` (at most `within`).
    async fn wait_status(&self, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let answer = self.try_send("GET", "/status", Bytes::new(), &[]).await;
            let (code, s) = answer.unwrap_or((0, Value::Null));
            if code == 200 && done(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "the status never came: {code} {s}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Wait until the crawl is idle with at least `processed` pages.
    async fn wait_idle(&self, processed: u64) -> Value {
        self.wait_status(Duration::from_secs(120), |s| {
            s["idle"] == "FrontierEmpty" && s["processed"].as_u64() >= Some(processed)
        })
        .await
    }

    /// Search until `q` finds something (pages are searchable once indexed).
    async fn search_until_found(&self, q: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (code, answer) = self.get(&format!("/search?q={q}")).await;
            assert_eq!(code, 200, "{answer}");
            if answer["results"].as_array().is_some_and(|r| !r.is_empty()) {
                return answer;
            }
            assert!(Instant::now() < deadline, "{q} never found: {answer}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A `start` node with `--http` and a token.
struct Node {
    _child: Child,
    dir: tempfile::TempDir,
    listen: SocketAddr,
    api: Api,
}

impl Node {
    async fn start(ip: Ipv4Addr, extra: &[&str]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cookie"), "http-tests-cookie\n").unwrap();
        std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
        let listen = free_addr(ip);
        let http = free_addr(ip);
        let child = bin()
            .args(["start", "--name", "m", "--listen", &listen.to_string()])
            .arg("--cookie-file")
            .arg(dir.path().join("cookie"))
            .arg("--db")
            .arg(dir.path().join("m.db"))
            .args(["--http", &http.to_string(), "--http-token-file"])
            .arg(dir.path().join("token"))
            .args(["--scope", "any", "--delay-ms", "0"])
            .args(extra)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let api = Api::new(http);
        api.wait_status(Duration::from_secs(30), |s| s["node"] == "m")
            .await;
        Node {
            _child: child,
            dir,
            listen,
            api,
        }
    }

    /// The console, `--json`, fed `script`: its lines of JSON.
    async fn console_json(&self, script: &str) -> Vec<Value> {
        let mut console = bin()
            .args(["console", "--json", "--connect", &self.listen.to_string()])
            .arg("--cookie-file")
            .arg(self.dir.path().join("cookie"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = console.stdin.take().unwrap();
        stdin.write_all(script.as_bytes()).await.unwrap();
        drop(stdin);
        let out = tokio::time::timeout(Duration::from_secs(60), console.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_queues_searches_and_refuses_with_stable_codes() {
    let web = site(Ipv4Addr::new(127, 0, 45, 2), "api", 8, Duration::ZERO).await;
    let node = Node::start(Ipv4Addr::new(127, 0, 45, 1), &[]).await;
    let api = &node.api;
    let seed = web.url("/");

    // The API describes itself for tools, every refusal code with it.
    let (code, described) = api.get("/openapi.json").await;
    assert_eq!(code, 200);
    assert_eq!(described["openapi"], "3.1.0");
    assert!(
        described["paths"]["/urls"]["post"].is_object(),
        "{described}"
    );

    // Writes need the token.
    let (code, refused) = api
        .send("POST", "/urls", json!(seed).to_string(), &[])
        .await;
    assert_eq!(
        (code, &refused["error"]["code"]),
        (401, &json!("unauthorized"))
    );
    let (code, _) = api
        .send(
            "POST",
            "/urls",
            json!(seed).to_string(),
            &[("authorization", "Bearer nope")],
        )
        .await;
    assert_eq!(code, 401);

    // One URL: 202 and its normalized form.
    let (code, one) = api.post("/urls", json!({"url": seed})).await;
    assert_eq!(code, 202, "{one}");
    assert_eq!(one["normalized"], seed.as_str());
    // Many: each one's outcome, in order.
    let shouting = format!("HTTP://{}/p/0#top", web.addr);
    let (code, many) = api
        .post(
            "/urls",
            json!([shouting, "notaurl", {"url": 5}, "ftp://x/", {"url": web.url("/bread")}]),
        )
        .await;
    assert_eq!(code, 200, "{many}");
    assert_eq!(
        (many["accepted"].as_u64(), many["refused"].as_u64()),
        (Some(2), Some(3))
    );
    let r = &many["results"];
    assert_eq!(r[0]["normalized"], web.url("/p/0").as_str(), "{many}");
    let codes: Vec<&Value> = (1..4).map(|i| &r[i]["error"]["code"]).collect();
    assert_eq!(
        codes,
        [
            &json!("invalid_url"),
            &json!("bad_request"),
            &json!("invalid_url")
        ]
    );
    assert!(
        r[1]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no scheme")
    );
    assert_eq!(r[4]["accepted"], true);

    api.wait_idle(10).await;
    assert_eq!(web.hits_of("/bread"), 1);

    // Processed: 409 already_known, unless asked again.
    let (code, again) = api.post("/urls", json!(seed)).await;
    assert_eq!(
        (code, &again["error"]["code"]),
        (409, &json!("already_known")),
        "{again}"
    );
    let (code, _) = api.post("/urls?again=true", json!(seed)).await;
    assert_eq!(code, 202);
    api.wait_status(Duration::from_secs(30), |_| web.hits_of("/") == 2)
        .await;

    // Search: the same answer as `search --json`, with the nodes heard from.
    let answer = api.search_until_found("caraway").await;
    assert_eq!(
        answer["results"][0]["url"],
        web.url("/bread").as_str(),
        "{answer}"
    );
    assert!(
        !answer["results"][0]["highlights"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(answer["nodes"], json!({"answered": ["m"], "missing": []}));
    let out = bin()
        .args([
            "search",
            "caraway",
            "--json",
            "--connect",
            &node.listen.to_string(),
        ])
        .arg("--cookie-file")
        .arg(node.dir.path().join("cookie"))
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli["results"][0]["url"], answer["results"][0]["url"]);
    assert_eq!(cli["nodes"], answer["nodes"]);
    let (_, two) = api.get("/search?q=notes&limit=2").await;
    let (code, second) = api.get("/search?q=notes&limit=1&offset=1").await;
    assert_eq!(code, 200);
    assert!(two["results"][1]["url"].is_string(), "{two}");
    assert_eq!(
        second["results"][0]["url"], two["results"][1]["url"],
        "{second}"
    );
    for bad in [
        "/search",
        "/search?q=%20",
        "/search?q=x&limit=1000",
        "/search?q=x&page=2",
    ] {
        let (code, e) = api.get(bad).await;
        assert_eq!(
            (code, &e["error"]["code"]),
            (400, &json!("bad_request")),
            "{bad}: {e}"
        );
    }

    // A stored page and its history; one never seen is a 404.
    let (code, page) = api
        .get(&format!("/pages?url=HTTP://{}/bread", web.addr))
        .await;
    assert_eq!(code, 200, "{page}");
    assert_eq!(page["page"]["title"], "Caraway rye bread");
    assert_eq!(page["page"]["http_returncode"], 200);
    assert!(page["history"].is_array());
    let (code, e) = api.get(&format!("/pages?url={}", web.url("/nope"))).await;
    assert_eq!((code, &e["error"]["code"]), (404, &json!("not_found")));

    // The lists the console shows.
    let (_, hosts) = api.get("/hosts").await;
    assert_eq!(hosts["total"], 1, "{hosts}");
    assert!(hosts["items"][0]["pages"].as_u64().unwrap() >= 10);
    let (_, nodes) = api.get("/nodes").await;
    assert_eq!(nodes[0]["node"], "m");
    let (_, traps) = api.get("/traps").await;
    assert_eq!(traps["total"], 0);
    let (code, e) = api
        .post("/traps/reopen", json!({"family": "no/such"}))
        .await;
    assert_eq!((code, &e["error"]["code"]), (404, &json!("not_found")));

    // Settings, pause and resume: on every node, as `set` and `pause` do.
    let (code, s) = api
        .write("PUT", "/settings", json!({"per_host": 2}).to_string())
        .await;
    assert_eq!(code, 200, "{s}");
    assert_eq!((&s["per_host"], &s["nodes"]), (&json!(2), &json!(["m"])));
    assert_eq!(api.get("/settings").await.1["per_host"], 2);
    let (code, e) = api
        .write("PUT", "/settings", json!({"perhost": 2}).to_string())
        .await;
    assert_eq!(code, 400);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown field")
    );
    assert_eq!(api.post("/pause", Value::Null).await.1["paused"], true);
    api.wait_status(Duration::from_secs(5), |s| s["paused"] == true)
        .await;
    assert_eq!(api.post("/resume", Value::Null).await.1["paused"], false);

    // The paper's search_text, apart from full-text search.
    let (code, queued) = api
        .post(
            "/search_text",
            json!({"url": web.url("/bread"), "text": "caraway"}),
        )
        .await;
    assert_eq!(code, 202, "{queued}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let found = loop {
        let (_, found) = api.get("/search_text?text=caraway").await;
        if found["total"].as_u64() > Some(0) || Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        found["items"][0]["url"],
        web.url("/bread").as_str(),
        "{found}"
    );
    assert!(found["items"][0]["positions"].as_array().unwrap().len() >= 2);

    // Unknown paths and methods.
    assert_eq!(api.get("/nope").await.0, 404);
    assert_eq!(
        api.send("DELETE", "/status", Bytes::new(), &[]).await.0,
        405
    );

    // The console's --json refuses with the same codes, on the same path.
    let lines = node
        .console_json(&format!("add_url notaurl\nadd_url {seed}\n"))
        .await;
    assert_eq!(lines[0]["error"]["code"], "invalid_url", "{lines:?}");
    assert_eq!(lines[1]["error"]["code"], "already_known", "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_page_budget_refuses_new_urls_with_over_budget() {
    let web = site(Ipv4Addr::new(127, 0, 45, 32), "budget", 8, Duration::ZERO).await;
    let node = Node::start(Ipv4Addr::new(127, 0, 45, 31), &["--max-pages", "3"]).await;
    let (code, _) = node.api.post("/urls", json!(web.url("/"))).await;
    assert_eq!(code, 202);
    node.api
        .wait_status(Duration::from_secs(30), |s| s["idle"] == "BudgetReached")
        .await;
    let (code, refused) = node.api.post("/urls", json!([web.url("/p/7")])).await;
    assert_eq!(code, 200);
    let error = &refused["results"][0]["error"];
    assert_eq!(error["code"], "over_budget", "{refused}");
    assert!(error["message"].as_str().unwrap().contains("--max-pages 3"));
    let (code, one) = node.api.post("/urls", json!(web.url("/p/6"))).await;
    assert_eq!((code, &one["error"]["code"]), (409, &json!("over_budget")));
    assert_eq!(web.hits_of("/p/7") + web.hits_of("/p/6"), 0);
}

/// One request of the storm, and the status it must get.
struct Bad {
    method: &'static str,
    path: String,
    body: Vec<u8>,
    ndjson: bool,
    token: bool,
    want: u16,
}

fn storm_request(i: usize, seed: &str) -> Bad {
    let bad = |method, path: &str, body: &[u8], want| Bad {
        method,
        path: path.to_string(),
        body: body.to_vec(),
        ndjson: false,
        token: true,
        want,
    };
    match i % 10 {
        0 => bad("POST", "/urls", br#"{"urls": ["http://x/"#, 400),
        1 => bad("POST", "/urls", b"[1, 2,", 400),
        2 => bad("POST", "/urls", b"\"http://a/\xff\xfe\"", 400),
        3 => bad("PUT", "/settings", br#"{"unknown": 1}"#, 400),
        4 => Bad {
            token: false,
            ..bad("POST", "/urls", format!("{seed:?}").as_bytes(), 401)
        },
        5 => bad("GET", "/search?q=", b"", 400),
        6 => bad("GET", &format!("/nope/{i}"), b"", 404),
        7 => bad(
            "POST",
            "/urls",
            br#"{"url": "http://x/", "priority": 1}"#,
            400,
        ),
        // NDJSON whose every line is broken: each refused alone (200).
        8 => Bad {
            ndjson: true,
            ..bad("POST", "/urls", b"{\"url\":\n[\n", 200)
        },
        _ => bad("GET", "/status", b"", 200),
    }
}

/// Send `head`, then `body_bytes` of body, on a connection of its own,
/// reading the answer meanwhile: its status, or `None` if none came.
async fn raw_request(addr: SocketAddr, head: &str, body_bytes: usize) -> Option<u16> {
    let stream = TcpStream::connect(addr).await.ok()?;
    let (mut read, mut write) = stream.into_split();
    let head = head.to_string();
    let writer = tokio::spawn(async move {
        write.write_all(head.as_bytes()).await?;
        let chunk = vec![b'x'; 64 * 1024];
        let mut sent = 0;
        while sent < body_bytes {
            let n = chunk.len().min(body_bytes - sent);
            write.write_all(&chunk[..n]).await?;
            sent += n;
        }
        Ok::<_, std::io::Error>(write)
    });
    let mut answer = vec![0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(30), read.read(&mut answer)).await;
    writer.abort();
    let n = n.ok()?.ok()?;
    let line = String::from_utf8_lossy(&answer[..n]).to_string();
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_bad_requests_leaves_the_node_crawling_and_loses_nothing() {
    let web = site(
        Ipv4Addr::new(127, 0, 45, 12),
        "storm",
        120,
        Duration::from_millis(40),
    )
    .await;
    // Pages linked from nowhere: only the API's batch queues them.
    let lone: HashMap<String, Page> = (0..20)
        .map(|i| {
            (
                format!("/lone/{i}"),
                page_with_links(&format!("Lone {i}"), &[]),
            )
        })
        .collect();
    let lone = TestServer::start(Ipv4Addr::new(127, 0, 45, 13), lone).await;
    let node = Node::start(Ipv4Addr::new(127, 0, 45, 11), &["--per-host", "1"]).await;
    let api = node.api.clone();
    let addr: SocketAddr = api.base.trim_start_matches("http://").parse().unwrap();

    let mut urls = vec![web.url("/")];
    urls.extend((0..20).map(|i| lone.url(&format!("/lone/{i}"))));
    let (code, added) = api.post("/urls", json!(urls)).await;
    assert_eq!(
        (code, added["accepted"].as_u64()),
        (200, Some(21)),
        "{added}"
    );
    let accepted: Vec<String> = added["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["normalized"].as_str().unwrap().to_string())
        .collect();

    // 10,000 bad (and a few good) requests over 8 connections, while it crawls.
    let started = Instant::now();
    let fetched_before = web.total_hits();
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..8 {
        let api = api.clone();
        let seed = web.url("/");
        tasks.spawn(async move {
            let mut wrong = Vec::new();
            for i in (t..10_000).step_by(8) {
                let bad = storm_request(i, &seed);
                let auth = format!("Bearer {TOKEN}");
                let mut headers = Vec::new();
                if bad.token {
                    headers.push(("authorization", auth.as_str()));
                }
                if bad.ndjson {
                    headers.push(("content-type", "application/x-ndjson"));
                }
                let (got, answer) = api.send(bad.method, &bad.path, bad.body, &headers).await;
                if got != bad.want || (got >= 400 && answer["error"]["code"].as_str().is_none()) {
                    wrong.push(format!("{i}: {} {}: {got} {answer}", bad.method, bad.path));
                }
            }
            wrong
        });
    }
    // Huge bodies, said up front or sent in full, on connections of their own.
    let huge = format!(
        "POST /urls HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\
         content-length: 40000000\r\n\r\n"
    );
    for _ in 0..5 {
        assert_eq!(raw_request(addr, &huge, 64 * 1024).await, Some(413));
    }
    let chunked = format!(
        "POST /urls HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n\
         2100000\r\n"
    );
    assert_eq!(
        raw_request(addr, &chunked, 33 * 1024 * 1024).await,
        Some(413)
    );
    let wrong: Vec<String> = tasks.join_all().await.into_iter().flatten().collect();
    assert!(
        wrong.is_empty(),
        "{} unexpected answers: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    eprintln!("10,000 requests answered in {:?}", started.elapsed());
    let (_, during) = api.get("/status").await;
    assert!(
        web.total_hits() > fetched_before + 10,
        "it crawled during the storm: {fetched_before} then {}; {during}",
        web.total_hits()
    );

    // Slow clients hold what they were given, and no more: the node serves
    // 64 requests at once, and says 429 to the next one.
    let slow = format!(
        "POST /urls HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\
         content-length: 1000\r\n\r\n[\"http://"
    );
    let mut stalled = Vec::new();
    for _ in 0..64 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(slow.as_bytes()).await.unwrap();
        stalled.push(s);
    }
    // None of them is answered: they wait for their bodies.
    for s in stalled.iter_mut() {
        let mut buf = [0u8; 200];
        let read = tokio::time::timeout(Duration::from_millis(10), s.read(&mut buf)).await;
        assert!(read.is_err(), "a stalled request was answered: {read:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, e) = api.get("/status").await;
        if code == 429 {
            assert_eq!(e["error"]["code"], "too_many_requests");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never 429 with 64 stalled: {code}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(stalled);
    api.wait_status(Duration::from_secs(10), |_| true).await;

    // The crawl went on: every page fetched, every URL accepted processed.
    api.wait_idle(122 + 20).await;
    assert!(web.hits_of("/p/119") >= 1 && web.hits_of("/bread") >= 1);
    for url in &accepted {
        let (code, page) = api.get(&format!("/pages?url={url}")).await;
        assert_eq!(code, 200, "{url} processed: {page}");
    }
    for i in 0..20 {
        assert_eq!(lone.hits_of(&format!("/lone/{i}")), 1, "lone {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_adds_urls_to_a_three_node_cluster_and_search_answers_from_every_node() {
    let tokens = tempfile::tempdir().unwrap();
    let token_file = tokens.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let token_arg = token_file.to_str().unwrap();
    let master_http = free_addr(Ipv4Addr::new(127, 0, 46, 1));
    let worker_http = free_addr(Ipv4Addr::new(127, 0, 46, 2));
    let http_args = |addr: SocketAddr| {
        vec![
            "--http".to_string(),
            addr.to_string(),
            "--http-token-file".to_string(),
            token_arg.to_string(),
        ]
    };
    let master_args = http_args(master_http);
    let master_args: Vec<&str> = master_args.iter().map(String::as_str).collect();
    let mut cluster = Cluster::start_on(Ipv4Addr::new(127, 0, 46, 1), &master_args).await;
    let worker_args = http_args(worker_http);
    let worker_args: Vec<&str> = worker_args.iter().map(String::as_str).collect();
    let _w1 = cluster.worker_with(
        "w1",
        Ipv4Addr::new(127, 0, 46, 2),
        &worker_args,
        Stdio::null(),
    );
    let _w2 = cluster.worker_with("w2", Ipv4Addr::new(127, 0, 46, 3), &[], Stdio::null());
    assert!(cluster.wait_nodes(3).await, "three pools");

    let mut webs = Vec::new();
    for h in 0..6u8 {
        webs.push(
            site(
                Ipv4Addr::new(127, 0, 46, 10 + h),
                &format!("host {h}"),
                4,
                Duration::ZERO,
            )
            .await,
        );
    }
    let roots: Vec<String> = webs.iter().map(|w| w.url("/")).collect();
    // A worker serves its API once it has joined, a moment after the
    // master lists its pool: a script waits for the API as this does.
    Api::new(worker_http)
        .wait_status(Duration::from_secs(30), |_| true)
        .await;

    // curl, as a script would, at the worker's API.
    let out = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "-X",
            "POST",
            "-H",
            &format!("Authorization: Bearer {TOKEN}"),
        ])
        .args(["-H", "Content-Type: application/json", "--data-binary"])
        .arg(json!(roots).to_string())
        .arg(format!("http://{worker_http}/urls"))
        .output()
        .await
        .expect("curl runs");
    assert!(out.status.success(), "{out:?}");
    let added: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(added["accepted"], 6, "{added}");

    // Crawled, each host by the one node that owns it.
    let master = Api::new(master_http);
    master.wait_idle(6 * 6).await;
    for w in &webs {
        assert!(w.hits_of("/bread") == 1 && w.hits_of("/p/3") == 1);
    }
    let per_host = nodes_per_host(&cluster.db()).await;
    assert_eq!(per_host.len(), 6, "{per_host:?}");
    // One node a host, but for one hand-over: a join the master notices
    // after the URLs are in (a loaded machine) moves hosts with work to
    // the new node (`cluster::rebalance`); the hits above say no page was
    // fetched twice either way.
    for (host, nodes) in &per_host {
        assert!(
            nodes.len() <= 2,
            "{host} fetched from one node, or two after a hand-over: {nodes:?}"
        );
    }
    assert!(
        per_host.values().filter(|nodes| nodes.len() == 1).count() >= 4,
        "most hosts fetched from one node: {per_host:?}"
    );
    let used: HashSet<&String> = per_host.values().flatten().collect();
    assert!(used.len() >= 2, "the work was shared: {used:?}");

    // A search at either API hears from every node's shard.
    for api in [&Api::new(worker_http), &master] {
        let answer = api.search_until_found("caraway").await;
        let mut answered: Vec<&str> = answer["nodes"]["answered"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        answered.sort();
        assert_eq!(answered, ["master", "w1", "w2"], "{answer}");
        assert_eq!(answer["nodes"]["missing"], json!([]));
    }
    let (_, nodes) = Api::new(worker_http).get("/nodes").await;
    assert_eq!(nodes.as_array().map(Vec::len), Some(3), "{nodes}");
}

/// chromedriver's and chromium's paths: from scripts/test.sh, else from
/// scripts/chromium.sh (which installs them); `None`, and why, if they
/// cannot be had.
fn chromium() -> Result<(PathBuf, PathBuf), String> {
    if let (Ok(driver), Ok(browser)) = (
        std::env::var("WEB_CRAWLER_TEST_CHROMEDRIVER"),
        std::env::var("WEB_CRAWLER_TEST_CHROMIUM"),
    ) {
        return Ok((driver.into(), browser.into()));
    }
    let script = format!("{}/scripts/chromium.sh", env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg(script)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut lines = text.lines();
    match (lines.next(), lines.next()) {
        (Some(d), Some(b)) => Ok((d.into(), b.into())),
        _ => Err(format!("scripts/chromium.sh printed {text:?}")),
    }
}

/// The text of the element `css` selects.
async fn text_of(browser: &fantoccini::Client, css: &str) -> String {
    browser
        .find(fantoccini::Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Wait (at most `within`) until `done` holds for the text of `css`.
async fn wait_text(
    browser: &fantoccini::Client,
    css: &str,
    within: Duration,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + within;
    loop {
        let text = text_of(browser, css).await;
        if done(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "{css} stayed {text:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_page_shows_a_live_crawl_and_finds_a_page_in_chromium() {
    let (driver, browser_bin) = match chromium() {
        Ok(paths) => paths,
        Err(why) => {
            eprintln!("SKIPPED the browser test: chromium could not be installed: {why}");
            return;
        }
    };
    // A crawl slow enough to be watched: 80 pages, 60 ms each, one at a time.
    let web = site(
        Ipv4Addr::new(127, 0, 47, 2),
        "page",
        80,
        Duration::from_millis(60),
    )
    .await;
    let node = Node::start(Ipv4Addr::new(127, 0, 47, 1), &["--per-host", "1"]).await;
    let page_url = node.api.base.clone() + "/";

    let port = free_addr(Ipv4Addr::LOCALHOST).port();
    let _chromedriver = tokio::process::Command::new(&driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromedriver starts");
    let profile = tempfile::tempdir().unwrap();
    let caps = json!({"goog:chromeOptions": {
        "binary": browser_bin,
        "args": [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync",
            "--window-size=1280,1000",
            format!("--user-data-dir={}", profile.path().display()),
        ],
    }});
    let deadline = Instant::now() + Duration::from_secs(30);
    let browser = loop {
        let connected = fantoccini::ClientBuilder::new(HttpConnector::new())
            .capabilities(caps.as_object().unwrap().clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await;
        match connected {
            Ok(browser) => break browser,
            Err(e) if Instant::now() < deadline => {
                eprintln!("chromedriver not ready: {e}");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("no WebDriver session: {e}"),
        }
    };

    browser.goto(&page_url).await.unwrap();
    wait_text(&browser, "#node", Duration::from_secs(10), |t| {
        t == "node m"
    })
    .await;
    wait_text(&browser, "#state", Duration::from_secs(10), |t| {
        t.starts_with("idle")
    })
    .await;
    let (code, _) = node.api.post("/urls", json!(web.url("/"))).await;
    assert_eq!(code, 202);
    // The numbers move while it crawls.
    let first = wait_text(&browser, "#fetched", Duration::from_secs(20), |t| {
        t.parse::<u64>().is_ok_and(|n| n >= 3)
    })
    .await;
    assert_eq!(text_of(&browser, "#state").await, "crawling");
    let first: u64 = first.parse().unwrap();
    wait_text(&browser, "#fetched", Duration::from_secs(20), |t| {
        t.parse::<u64>().is_ok_and(|n| n >= first + 5)
    })
    .await;
    wait_text(&browser, "#rate", Duration::from_secs(10), |t| {
        t.parse::<f64>().is_ok_and(|r| r > 0.0)
    })
    .await;
    let host = web.addr.to_string();
    wait_text(&browser, "#hosts tbody", Duration::from_secs(10), |t| {
        t.contains(&host)
    })
    .await;
    wait_text(&browser, "#nodes tbody", Duration::from_secs(10), |t| {
        t.starts_with("m")
    })
    .await;
    let shot_while_crawling = browser.screenshot().await.unwrap();

    // Once it is done and indexed, a search finds the bread page first,
    // its words marked.
    node.api.wait_idle(82).await;
    node.api.search_until_found("caraway").await;
    let q = browser.find(fantoccini::Locator::Id("q")).await.unwrap();
    q.send_keys("caraway rye").await.unwrap();
    browser
        .find(fantoccini::Locator::Css("#search-form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let first_hit = browser
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(fantoccini::Locator::Css("#results li .title a"))
        .await
        .unwrap();
    assert_eq!(
        first_hit.attr("href").await.unwrap(),
        Some(web.url("/bread"))
    );
    assert_eq!(first_hit.text().await.unwrap(), "Caraway rye bread");
    let marks = browser
        .find_all(fantoccini::Locator::Css("#results li:first-child mark"))
        .await
        .unwrap();
    assert!(!marks.is_empty(), "the query's words are marked");
    for mark in marks {
        let word = mark.text().await.unwrap().to_lowercase();
        assert!(word == "caraway" || word == "rye", "{word}");
    }
    let note = text_of(&browser, "#search-note").await;
    assert!(note.contains("Answered by m"), "{note}");
    wait_text(&browser, "#state", Duration::from_secs(10), |t| {
        t.starts_with("idle")
    })
    .await;

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::write(dir.join("web-page-crawling.png"), &shot_while_crawling).unwrap();
    let shot = browser.screenshot().await.unwrap();
    assert!(shot.starts_with(b"\x89PNG"), "a PNG");
    std::fs::write(dir.join("web-page.png"), &shot).unwrap();
    eprintln!("screenshots in {}", dir.display());
    browser.close().await.unwrap();
}

/// Run `program args` from the repository's root with `env`; its stdout
/// (it must succeed).
async fn run_example(program: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the example ends")
        .expect("the example runs");
    assert!(out.status.success(), "{program} {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_example_and_the_curl_lines_run_against_a_live_node() {
    let web = site(Ipv4Addr::new(127, 0, 45, 22), "examples", 3, Duration::ZERO).await;
    let other = site(Ipv4Addr::new(127, 0, 45, 23), "curl", 3, Duration::ZERO).await;
    let node = Node::start(Ipv4Addr::new(127, 0, 45, 21), &[]).await;
    let base = node.api.base.clone();
    let token = node.dir.path().join("token");
    let token = token.to_str().unwrap();

    // Python, standard library only: add, then search.
    let py = |args: &[&str]| {
        let mut all = vec![
            "examples/http_client.py",
            "--node",
            &base,
            "--token-file",
            token,
        ];
        all.extend_from_slice(args);
        all.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    let args = py(&["add", &web.url("/"), "notaurl"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let added = run_example("python3", &args, &[]).await;
    assert!(
        added.contains(&format!("queued {}", web.url("/"))),
        "{added}"
    );
    assert!(added.contains("refused notaurl invalid_url - "), "{added}");

    // curl: the README's lines.
    let env = [("NODE", base.as_str()), ("TOKEN_FILE", token)];
    let curl_add = run_example(
        "sh",
        &["examples/http_curl.sh", "add", &other.url("/")],
        &env,
    )
    .await;
    let curl_add: Value = serde_json::from_str(&curl_add).unwrap();
    assert_eq!(curl_add["accepted"], 1, "{curl_add}");

    node.api.wait_idle(2 * 5).await;
    node.api.search_until_found("caraway").await;
    let args = py(&["search", "caraway bread"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let found = run_example("python3", &args, &[]).await;
    assert!(found.contains(" 1. Caraway rye bread"), "{found}");
    assert!(
        found.contains(&web.url("/bread")) && found.contains(&other.url("/bread")),
        "{found}"
    );
    let curl_search =
        run_example("sh", &["examples/http_curl.sh", "search", "caraway"], &env).await;
    let answer: Value = serde_json::from_str(&curl_search).unwrap();
    assert_eq!(
        answer["results"].as_array().map(Vec::len),
        Some(2),
        "{answer}"
    );
    assert_eq!(answer["nodes"]["answered"], json!(["m"]));
}
