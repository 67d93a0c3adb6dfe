//! Clusters of `web_crawler` processes on loopback: a master node, worker
//! nodes joining and dying, scripts and the console talking to them.

use crate::common::coverage::{
    assert_all_fetched, assert_all_real_fetched, assert_all_stored, not_stored,
};
use crate::common::wait_for;
use crate::common::web::GeneratedWeb;
use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use web_crawler::actors::{Frontier, PageQuery, Queries};
use web_crawler::store::SqliteStore;

use crate::common::bin;
use web_crawler_testsupport::{Page, Request, TestServer, page_with_links, prose_of, reserve};

/// A free port on `ip` for a node to take, below the kernel's ephemeral
/// range (32768–60999): a port picked by binding port 0 and released could
/// be taken before the node binds it by any of the consoles and scripts the
/// tests start, whose client nodes listen on ephemeral ports of the same
/// addresses.
fn addr(ip: Ipv4Addr) -> SocketAddr {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let base = 20_000 + (std::process::id() % 50) as u16 * 200;
    loop {
        let port = base + NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 200;
        if let Ok(l) = std::net::TcpListener::bind((ip, port)) {
            return l.local_addr().unwrap();
        }
    }
}

/// What a worker node says once its own side of the join is done: the
/// master lists its pool a little sooner, and a master killed between the
/// two fails the worker's join instead of leaving it without a master.
const JOINED: &str = "joined the cluster at";

/// A process's stderr, collected line by line as it comes.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<String>>);

impl Log {
    fn of(stderr: tokio::process::ChildStderr) -> Log {
        let log = Log::default();
        let collected = log.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
            while let Ok(Some(line)) = lines.next_line().await {
                let mut text = collected.0.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        log
    }

    fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }

    /// Lines so far that contain `what`.
    fn lines_with(&self, what: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .lines()
            .filter(|l| l.contains(what))
            .count()
    }

    /// Wait (at most 20 s) until `n` lines contain `what`.
    async fn wait_lines(&self, what: &str, n: usize) -> bool {
        wait_for(Duration::from_secs(20), || self.lines_with(what) >= n).await
    }
}

pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    cookie: PathBuf,
    master_addr: SocketAddr,
    extra: Vec<String>,
    /// The master node's process, killed when the test ends.
    master: Child,
}

impl Cluster {
    /// A Rust program's connection to the master, with the cluster's cookie.
    async fn remote(&self) -> web_crawler::actors::Remote {
        web_crawler::actors::Remote::connect(
            &self.master_addr.to_string(),
            "shared-secret-for-tests",
            Duration::from_secs(10),
        )
        .await
        .unwrap()
    }

    /// A master node on 127.0.9.1 with the embedded store.
    async fn start(extra: &[&str]) -> Cluster {
        Self::start_on(Ipv4Addr::new(127, 0, 9, 1), extra).await
    }

    /// A master node on `ip`: a test that restarts its master on the same
    /// port has an address of its own, which no other test's free-port
    /// pick can take while the master is down.
    pub(crate) async fn start_on(ip: Ipv4Addr, extra: &[&str]) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let cookie = dir.path().join("cookie");
        std::fs::write(&cookie, "shared-secret-for-tests\n").unwrap();
        let master_addr = addr(ip);
        let extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
        let master = Self::spawn_master(dir.path(), &cookie, master_addr, &extra);
        let mut cluster = Cluster {
            dir,
            cookie,
            master_addr,
            extra,
            master,
        };
        assert!(cluster.wait_nodes(1).await, "master node up");
        cluster
    }

    fn spawn_master(dir: &Path, cookie: &Path, listen: SocketAddr, extra: &[String]) -> Child {
        let mut cmd = bin();
        cmd.args(["start", "--name", "master", "--listen", &listen.to_string()])
            .arg("--cookie-file")
            .arg(cookie)
            .arg("--db")
            .arg(dir.join("master.db"))
            .args(["--scope", "any", "--delay-ms", "0", "--concurrency", "4"])
            .args(extra)
            .stderr(Stdio::null());
        cmd.spawn().unwrap()
    }

    /// Kill the master node's process (SIGKILL) and wait for it.
    async fn kill_master(&mut self) {
        self.master.start_kill().unwrap();
        self.master.wait().await.unwrap();
    }

    /// A new master node on the same address and store.
    fn restart_master(&mut self) {
        self.master =
            Self::spawn_master(self.dir.path(), &self.cookie, self.master_addr, &self.extra);
    }

    pub(crate) fn db(&self) -> PathBuf {
        self.dir.path().join("master.db")
    }

    /// A worker node joining the master.
    fn worker(&self, name: &str, ip: Ipv4Addr) -> Child {
        self.worker_with(name, ip, &[], Stdio::null())
    }

    pub(crate) fn worker_with(
        &self,
        name: &str,
        ip: Ipv4Addr,
        extra: &[&str],
        stderr: Stdio,
    ) -> Child {
        self.worker_command(name, ip, extra)
            .stderr(stderr)
            .spawn()
            .unwrap()
    }

    /// The command that starts a worker node joining the master.
    fn worker_command(&self, name: &str, ip: Ipv4Addr, extra: &[&str]) -> Command {
        let listen = addr(ip);
        let mut cmd = bin();
        // Its index shard, NAME.index, is made in the working directory.
        cmd.current_dir(self.dir.path())
            .args(["node", "--name", name, "--listen", &listen.to_string()])
            .arg("--cookie-file")
            .arg(&self.cookie)
            .args(["--join", &self.master_addr.to_string()])
            .args(["--scope", "any", "--delay-ms", "0", "--concurrency", "4"])
            .args(extra);
        cmd
    }

    /// A console attached to the master's node, fed `script` on a pipe
    /// until it ends: its whole output.
    pub(crate) async fn console(&self, extra: &[&str], script: &str) -> Output {
        let mut console = bin()
            .args(["console", "--connect", &self.master_addr.to_string()])
            .arg("--cookie-file")
            .arg(&self.cookie)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = console.stdin.take().unwrap();
        stdin.write_all(script.as_bytes()).await.unwrap();
        drop(stdin);
        tokio::time::timeout(Duration::from_secs(60), console.wait_with_output())
            .await
            .expect("the console ends")
            .unwrap()
    }

    async fn cli(&self, args: &[&str]) -> Output {
        self.cli_with_cookie(args, &self.cookie).await
    }

    async fn cli_with_cookie(&self, args: &[&str], cookie: &Path) -> Output {
        let mut cmd = bin();
        cmd.args(args)
            .args(["--connect", &self.master_addr.to_string()])
            .arg("--cookie-file")
            .arg(cookie)
            .args(["--wait", "5"]);
        tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .expect("the command finishes")
            .unwrap()
    }

    /// `add-url` through the command line; it must succeed.
    pub(crate) async fn add_url(&self, url: &str) {
        let out = self.cli(&["add-url", url]).await;
        assert!(out.status.success(), "add-url {url}: {out:?}");
    }

    pub(crate) async fn status(&self) -> Option<serde_json::Value> {
        let out = self.cli(&["status", "--json"]).await;
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// Wait until the master sees `n` live pools.
    pub(crate) async fn wait_nodes(&mut self, n: usize) -> bool {
        for _ in 0..100 {
            if let Some(s) = self.status().await
                && s["nodes"].as_array().map(Vec::len) == Some(n)
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// Wait until the master's window counts `n` live nodes: it learns of
    /// a node's arrival or departure at its tick, later than `status` lists
    /// the pools, and sizes its claims by the nodes it knows (the default
    /// window a node, 64 × `--concurrency 4`). Hosts go only to nodes it
    /// knows; a node gone has its URLs back to pending then.
    pub(crate) async fn wait_window(&self, n: u64) -> bool {
        const NODE_WINDOW: u64 = 64 * 4;
        for _ in 0..100 {
            if let Some(s) = self.status().await
                && s["nodes"].as_array().map(|n| n.len() as u64) == Some(n)
                && s["window"].as_u64() == Some(n * NODE_WINDOW)
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    async fn wait_idle(&self) -> serde_json::Value {
        let mut last = None;
        for _ in 0..600 {
            if let Some(s) = self.status().await {
                if s["idle"] == "FrontierEmpty" {
                    return s;
                }
                last = Some(s);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("the cluster did not finish the crawl: {last:?}");
    }
}

/// host → nodes that fetched its pages, from the master's store.
pub(crate) async fn nodes_per_host(db: &Path) -> HashMap<String, HashSet<String>> {
    let store = SqliteStore::open(db).unwrap();
    let mut out: HashMap<String, HashSet<String>> = HashMap::new();
    for p in store.processed(PageQuery::default()).await.unwrap() {
        if p.record.http_returncode.is_some() {
            out.entry(p.record.host.clone())
                .or_default()
                .insert(p.record.node.clone());
        }
    }
    out
}

fn assert_every_page_fetched(web: &GeneratedWeb, at_most_once: bool) {
    for (h, target) in web.canonical_targets() {
        let n = web.servers[h].hits_of(&target);
        assert!(n >= 1, "host {h} {target} fetched");
        if at_most_once {
            assert_eq!(n, 1, "host {h} {target} fetched once");
        }
    }
    for s in &web.servers {
        assert!(
            s.hits().keys().all(|t| !t.starts_with("/private/")),
            "robots.txt obeyed"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_and_two_workers_share_a_crawl() {
    let web = GeneratedWeb::start_with(6, 30, 11, Duration::from_millis(5)).await;
    let mut cluster = Cluster::start(&[]).await;
    let _w1 = cluster.worker("w1", Ipv4Addr::new(127, 0, 9, 2));
    let _w2 = cluster.worker("w2", Ipv4Addr::new(127, 0, 9, 3));
    assert!(cluster.wait_nodes(3).await, "three pools");

    let out = cluster.cli(&["add-url", &web.seed_url()]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("queued"));
    let status = cluster.wait_idle().await;
    assert!(status["processed"].as_u64().unwrap() >= 6 * 31);

    assert_every_page_fetched(&web, true);
    let per_host = nodes_per_host(&cluster.db()).await;
    assert_eq!(per_host.len(), 6, "{per_host:?}");
    for (host, nodes) in &per_host {
        assert_eq!(nodes.len(), 1, "{host} fetched from one node: {nodes:?}");
    }
    let used: HashSet<&String> = per_host.values().flatten().collect();
    assert!(used.len() >= 2, "the work was shared: {used:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_loses_nothing() {
    let web = GeneratedWeb::start_with(6, 40, 12, Duration::from_millis(15)).await;
    let mut cluster = Cluster::start(&[]).await;
    let mut w1 = cluster.worker("w1", Ipv4Addr::new(127, 0, 9, 4));
    let _w2 = cluster.worker("w2", Ipv4Addr::new(127, 0, 9, 5));
    assert!(cluster.wait_nodes(3).await);
    cluster.add_url(&web.seed_url()).await;
    let progressed = wait_for(Duration::from_secs(60), || {
        web.servers.iter().map(|s| s.total_hits()).sum::<u32>() >= 60
    })
    .await;
    assert!(progressed);
    w1.start_kill().unwrap(); // SIGKILL
    w1.wait().await.unwrap();
    let at_kill = cluster.status().await.unwrap();
    assert!(
        at_kill["processed"].as_u64().unwrap() < 6 * 41,
        "killed mid-crawl: {at_kill}"
    );
    assert!(cluster.wait_nodes(2).await, "the master noticed");
    cluster.wait_idle().await;
    assert_every_page_fetched(&web, false);
    let store = SqliteStore::open(&cluster.db()).unwrap();
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.pending, counts.processing), (0, 0));
    let ok = store
        .processed(PageQuery::default())
        .await
        .unwrap()
        .iter()
        .filter(|p| p.record.http_returncode == Some(200))
        .count();
    assert_eq!(ok, 6 * 41, "every page processed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_joining_mid_crawl_receives_work() {
    let web = GeneratedWeb::start_with(10, 25, 13, Duration::from_millis(20)).await;
    let mut cluster = Cluster::start(&[]).await;
    cluster.add_url(&web.seed_url()).await;
    let started = wait_for(Duration::from_secs(60), || {
        web.servers.iter().map(|s| s.total_hits()).sum::<u32>() >= 5
    })
    .await;
    assert!(started);
    let _late = cluster.worker("late", Ipv4Addr::new(127, 0, 9, 6));
    assert!(cluster.wait_nodes(2).await);
    cluster.wait_idle().await;
    assert_every_page_fetched(&web, true);
    let per_host = nodes_per_host(&cluster.db()).await;
    assert!(
        per_host.values().any(|nodes| nodes.contains("late")),
        "the late node fetched some hosts: {per_host:?}"
    );
}

/// Issue 15: `hosts` during a crawl shows what each node's pool does with
/// its hosts now — queued and in flight for slow hosts, the backoff of a
/// host answering 503 — and a worker's pool answers over the wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_shows_the_pools_queues_fetches_and_backoffs_during_a_crawl() {
    use web_crawler::actors::HostListing;
    let listeners: Vec<std::net::TcpListener> = (0..4)
        .map(|h| reserve(Ipv4Addr::new(127, 0, 5, 30 + h)))
        .collect();
    let hosts: Vec<String> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect();
    let roots: Vec<String> = hosts.iter().map(|h| format!("http://{h}/")).collect();
    // Three slow hosts (a second a page, one fetch at a time: the rest of
    // what is claimed for them waits in their queue) and one answering 503.
    let mut servers = Vec::new();
    let mut listeners = listeners.into_iter();
    for h in 0..3 {
        let mut links: Vec<String> = (0..12).map(|i| format!("/p{i}")).collect();
        links.extend(roots.iter().cloned());
        let links: Vec<&str> = links.iter().map(String::as_str).collect();
        let mut pages: HashMap<String, Page> = (0..12)
            .map(|i| {
                (
                    format!("/p{i}"),
                    page_with_links(&format!("page {h} {i}"), &links),
                )
            })
            .collect();
        pages.insert("/".into(), page_with_links(&format!("home {h}"), &links));
        let pages = pages
            .into_iter()
            .map(|(target, page)| (target, page.delay(Duration::from_secs(1))))
            .collect();
        servers.push(TestServer::serve(listeners.next().unwrap(), pages).await);
    }
    let busy_host = TestServer::serve_fn(listeners.next().unwrap(), |req: &Request| {
        if req.uri().path() == "/robots.txt" {
            Page::not_found()
        } else {
            Page::new(503, &[("retry-after", "120")], "busy")
        }
    })
    .await;
    // Coverage is not asserted: the test reads the pools mid-crawl and ends
    // there (the 503 host asks for two minutes' wait).
    let mut cluster = Cluster::start(&[]).await;
    let _w1 = cluster.worker("w1", Ipv4Addr::new(127, 0, 9, 16));
    assert!(cluster.wait_nodes(2).await, "two pools");
    let remote = cluster.remote().await;
    cluster.add_url(&roots[0]).await;
    let mut last: HostListing;
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        last = remote.hosts(50).await.unwrap();
        let working = last
            .items
            .iter()
            .filter_map(|h| h.live.as_ref())
            .any(|l| l.queued > 0 && l.in_flight > 0);
        let backing_off = last
            .items
            .iter()
            .any(|h| h.host == hosts[3] && h.live.as_ref().is_some_and(|l| l.backoff_ms > 0));
        if (working && backing_off) || Instant::now() >= deadline {
            break working && backing_off;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        seen,
        "a host with a queue and a fetch, and the 503 host's backoff: {last:#?}"
    );
    assert!(
        last.silent_nodes.is_empty(),
        "both pools answered: {last:#?}"
    );
    assert!(last.busy >= 1, "{last:#?}");
    let first = last.items[0]
        .live
        .as_ref()
        .expect("a host a pool holds first");
    assert!(first.work() > 0, "hosts with work first: {last:#?}");
    for live in last.items.iter().filter_map(|h| h.live.as_ref()) {
        assert!(["master", "w1"].contains(&live.node.as_str()), "{live:?}");
    }
    assert!(busy_host.hits_of("/") >= 1);
    // The console shows the same, one host a row.
    let out = cluster.console(&[], "hosts\nquit\n").await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("host\tnode\tqueued\tin_flight\trobots\tbackoff\t"),
        "{text}"
    );
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with(&format!("{}\t", hosts[3])))
        .unwrap_or_else(|| panic!("a row of the 503 host: {text}"))
        .split('\t')
        .collect();
    assert!(row[5].ends_with('s'), "its backoff, in seconds: {row:?}");
    remote.close();
    drop(servers);
}

/// A request a site served: when it arrived, what, and which node asked
/// (each node of the test fetches with a User-Agent `crawler-NODE`).
struct Served {
    at: Instant,
    target: String,
    node: String,
}

/// A wide site on `ip`: a root linking to `pages` pages, each answering
/// after 50 ms, behind a robots.txt asking for 500 ms between requests.
/// Every request is logged, in the order they arrived.
async fn wide_site(ip: Ipv4Addr, pages: usize) -> (TestServer, Arc<Mutex<Vec<Served>>>) {
    let log: Arc<Mutex<Vec<Served>>> = Arc::default();
    let served = Arc::clone(&log);
    let links: Vec<String> = (0..pages).map(|i| format!("/p/{i}")).collect();
    let links: Vec<&str> = links.iter().map(String::as_str).collect();
    let root = page_with_links(&format!("site {ip}"), &links);
    let handler = move |req: &Request| {
        let target = req.uri().path().to_string();
        let agent = req
            .headers()
            .get("user-agent")
            .and_then(|v| v.to_str().ok());
        let node = agent
            .and_then(|a| a.strip_prefix("crawler-"))
            .unwrap_or("?");
        served.lock().unwrap().push(Served {
            at: Instant::now(),
            target: target.clone(),
            node: node.to_string(),
        });
        match target.as_str() {
            "/robots.txt" => Page::text("text/plain", "User-agent: *\nCrawl-delay: 0.5\n"),
            "/" => root.clone(),
            t if t.starts_with("/p/") => page_with_links(&format!("{ip} page {t}"), &[]),
            _ => Page::not_found(),
        }
        .delay(Duration::from_millis(50))
    };
    (TestServer::serve_fn(reserve(ip), handler).await, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_joining_mid_crawl_takes_hosts_queued_elsewhere_politely() {
    const PAGES: usize = 24;
    let mut sites = Vec::new();
    for h in 1..=4 {
        sites.push(wide_site(Ipv4Addr::new(127, 0, 22, h), PAGES).await);
    }
    let mut cluster = Cluster::start(&["--user-agent", "crawler-master"]).await;
    let w1 = ["--user-agent", "crawler-w1"];
    let _w1 = cluster.worker_with("w1", Ipv4Addr::new(127, 0, 9, 7), &w1, Stdio::null());
    assert!(cluster.wait_nodes(2).await);
    for (site, _) in &sites {
        cluster.add_url(&site.url("/")).await;
    }
    let hits = || sites.iter().map(|(s, _)| s.total_hits()).sum::<u32>();
    assert!(wait_for(Duration::from_secs(20), || hits() >= 20).await);

    let joined = Instant::now();
    let w2 = ["--user-agent", "crawler-w2"];
    let _w2 = cluster.worker_with("w2", Ipv4Addr::new(127, 0, 9, 8), &w2, Stdio::null());
    let w2_fetched = || {
        sites.iter().any(|(_, log)| {
            let log = log.lock().unwrap();
            log.iter()
                .any(|r| r.node == "w2" && r.target.starts_with("/p/"))
        })
    };
    assert!(
        wait_for(Duration::from_secs(8), w2_fetched).await,
        "the new node fetched no page within 8 s of joining"
    );
    let took = joined.elapsed();
    cluster.wait_idle().await;

    for (site, log) in &sites {
        assert_eq!(site.hits_of("/"), 1);
        for i in 0..PAGES {
            assert_eq!(site.hits_of(&format!("/p/{i}")), 1, "{} /p/{i}", site.addr);
        }
        // Where a host changed nodes, the new node's first request came
        // after the old node's last one had been answered (50 ms), and
        // after the host's delay (500 ms, less 100 ms for the arrival
        // jitter of a loaded machine; without the delay carried over the
        // gap is the answer's 50 ms and a few hops, under 200 ms).
        let log = log.lock().unwrap();
        for pair in log.windows(2).filter(|p| p[0].node != p[1].node) {
            let gap = pair[1].at - pair[0].at;
            assert!(
                gap >= Duration::from_millis(400),
                "{}: {} by {} then {} by {} after {gap:?}",
                site.addr,
                pair[0].target,
                pair[0].node,
                pair[1].target,
                pair[1].node,
            );
        }
    }
    let per_host = nodes_per_host(&cluster.db()).await;
    assert!(
        per_host
            .values()
            .any(|nodes| nodes.contains("w2") && nodes.len() == 2),
        "a host being crawled moved to w2 ({took:?} after it joined): {per_host:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_cookie_is_refused_with_a_clear_message() {
    let cluster = Cluster::start(&[]).await;
    let bad = cluster.dir.path().join("bad-cookie");
    std::fs::write(&bad, "not-the-secret").unwrap();
    let out = cluster.cli_with_cookie(&["status"], &bad).await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refused") && err.contains("cookie"), "{err}");
    assert!(
        !err.contains("shared-secret") && !err.contains("not-the-secret"),
        "no cookie printed"
    );
    // A bad URL is refused by the node with a one-line reason.
    let out = cluster.cli(&["add-url", "notaurl"]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid URL"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_drives_the_cluster() {
    let web = GeneratedWeb::start_with(2, 10, 14, Duration::ZERO).await;
    let cluster = Cluster::start(&[]).await;
    let script = format!(
        "help\ntree\nnodes\nadd_url {}\nnonsense here\nrestart master\nstatus\nstate sup\nquit\n",
        web.seed_url()
    );
    let out = cluster.console(&[], &script).await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed command in a pipe fails the run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("restart master"), "help: {text}");
    assert!(
        text.contains("web_crawler_master@master (Master"),
        "tree: {text}"
    );
    assert!(text.contains("node\tload\thosts"), "nodes: {text}");
    assert!(text.contains("queued http://"), "add_url: {text}");
    assert!(text.contains("error: unknown command"), "bad input: {text}");
    assert!(
        text.contains("master restarted")
            && text.contains("this console now talks to the new master"),
        "{text}"
    );
    assert!(
        text.contains("node master:"),
        "status after the restart: {text}"
    );
    // The crawl the console started completes, on the restarted master.
    let status = cluster.wait_idle().await;
    assert_eq!(status["master_restarts"], 1);
    assert_every_page_fetched(&web, false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_answers_in_json_lines() {
    let cluster = Cluster::start(&[]).await;
    let out = cluster.console(&["--json"], "status\nnodes\n").await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["node"], "master", "{lines:?}");
    assert_eq!(lines[1][0]["node"], "master", "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_program_joins_and_sends_add_url() {
    use web_crawler::actors::OperationSpec;
    use web_crawler::actors::Remote;
    let web = GeneratedWeb::start_with(1, 5, 15, Duration::ZERO).await;
    let cluster = Cluster::start(&[]).await;
    let remote = cluster.remote().await;
    let queued = remote
        .add_url(&web.seed_url(), OperationSpec::crawl())
        .await
        .unwrap();
    assert_eq!((queued.url, queued.already_queued), (web.seed_url(), false));
    assert!(
        remote
            .add_url("javascript:alert(1)", OperationSpec::crawl())
            .await
            .is_err()
    );
    let status = remote.status().await.unwrap();
    assert_eq!(status.nodes.len(), 1);
    cluster.wait_idle().await;
    assert_every_page_fetched(&web, true);
    // What the console lists, typed.
    let newest = remote.processed(3).await.unwrap();
    assert_eq!(newest.len(), 3);
    assert!(
        newest
            .windows(2)
            .all(|w| w[0].d_processed >= w[1].d_processed)
    );
    assert!(remote.pending(10).await.unwrap().is_empty());
    let hosts = remote.hosts(10).await.unwrap();
    assert_eq!(hosts.total, 1, "{hosts:?}");
    assert!(hosts.items[0].pages >= 5, "{hosts:?}");
    // Adding a processed URL says so and queues nothing; `again` fetches it.
    let refused = remote
        .add_url(&web.seed_url(), OperationSpec::crawl())
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("was already processed at"),
        "{refused}"
    );
    assert_eq!(web.servers[0].hits_of("/"), 1);
    // `add-url --json`: one JSON answer on stdout for each outcome.
    let out = cluster.cli(&["add-url", &web.seed_url(), "--json"]).await;
    assert_eq!(out.status.code(), Some(1), "refused: {out:?}");
    let refused: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&refused["accepted"], &refused["error"]["code"]),
        (
            &serde_json::json!(false),
            &serde_json::json!("already_known")
        ),
        "{refused}"
    );
    assert!(out.stderr.is_empty(), "{out:?}");
    let out = cluster
        .cli(&["add-url", &web.seed_url(), "--again", "--json"])
        .await;
    assert!(out.status.success(), "{out:?}");
    let queued: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        queued,
        serde_json::json!({
            "url": web.seed_url(), "outcome": "added", "accepted": true,
            "normalized": web.seed_url()
        })
    );
    cluster.wait_idle().await;
    assert_eq!(web.servers[0].hits_of("/"), 2, "fetched again");
    remote
        .add_url_again(&web.seed_url(), OperationSpec::crawl())
        .await
        .unwrap();
    cluster.wait_idle().await;
    assert_eq!(web.servers[0].hits_of("/"), 3, "fetched again");
    remote.close();
    let wrong = Remote::connect(
        &cluster.master_addr.to_string(),
        "wrong",
        Duration::from_secs(3),
    )
    .await;
    assert!(wrong.unwrap_err().to_string().contains("wrong cookie"));
}

/// #49: `add-url --json` answers each outcome on stdout with its own
/// `outcome` (added, already_queued, already_processed, refused with the
/// refusal's code), and exits 0 when the URL is in the queue, 1 when not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_url_answers_each_outcome_apart() {
    let web = GeneratedWeb::start_with(1, 3, 49, Duration::ZERO).await;
    let cluster = Cluster::start(&[]).await;
    let seed = web.seed_url();
    // Paused, the seed stays in the queue for the second ask to find.
    let paused = cluster.console(&[], "pause\n").await;
    assert!(paused.status.success(), "{paused:?}");
    let add = |args: &'static [&'static str]| {
        let mut all = vec!["add-url", seed.as_str()];
        all.extend(args);
        let cluster = &cluster;
        async move {
            let out = cluster.cli(&all).await;
            assert!(out.stderr.is_empty(), "{all:?}: {out:?}");
            let answer: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{all:?}: {e}: {out:?}"));
            (out.status.code(), answer)
        }
    };
    let (code, added) = add(&["--json"]).await;
    assert_eq!(
        (code, &added["outcome"], &added["normalized"]),
        (
            Some(0),
            &serde_json::json!("added"),
            &serde_json::json!(seed)
        ),
        "{added}"
    );
    let (code, waiting) = add(&["--json"]).await;
    assert_eq!(
        (code, &waiting["outcome"], &waiting["accepted"]),
        (
            Some(0),
            &serde_json::json!("already_queued"),
            &serde_json::json!(true)
        ),
        "{waiting}"
    );
    let text = cluster.cli(&["add-url", &seed]).await;
    assert!(text.status.success(), "{text:?}");
    assert!(
        String::from_utf8_lossy(&text.stdout).starts_with(&format!("already queued {seed}")),
        "{text:?}"
    );
    let resumed = cluster.console(&[], "resume\n").await;
    assert!(resumed.status.success(), "{resumed:?}");
    cluster.wait_idle().await;
    assert_eq!(web.servers[0].hits_of("/"), 1, "queued once");
    let (code, processed) = add(&["--json"]).await;
    assert_eq!(
        (code, &processed["outcome"], &processed["error"]["code"]),
        (
            Some(1),
            &serde_json::json!("already_processed"),
            &serde_json::json!("already_known")
        ),
        "{processed}"
    );
    let out = cluster
        .cli(&["add-url", "javascript:alert(1)", "--json"])
        .await;
    let refused: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            out.status.code(),
            &refused["outcome"],
            &refused["error"]["code"]
        ),
        (
            Some(1),
            &serde_json::json!("refused"),
            &serde_json::json!("invalid_url")
        ),
        "{out:?}"
    );
}

/// Issue 13's cluster case: a master and two workers on a web whose three
/// hosts each hold an endless calendar go idle by themselves, every real
/// page fetched, the calendars cut short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_on_a_web_with_traps_goes_idle_by_itself() {
    use crate::hostile_web::{calendar, real_pages};
    use web_crawler_testsupport::{TestServer, reserve};
    let listeners: Vec<std::net::TcpListener> = (0..3)
        .map(|h| reserve(Ipv4Addr::new(127, 0, 5, 20 + h)))
        .collect();
    let roots: Vec<String> = listeners
        .iter()
        .map(|l| format!("http://{}/", l.local_addr().unwrap()))
        .collect();
    let mut rng = fastrand::Rng::with_seed(13);
    let mut servers = Vec::new();
    for (h, listener) in listeners.into_iter().enumerate() {
        let next = &roots[(h + 1) % roots.len()];
        let mut pages = real_pages(&mut rng, 30, &["/cal/2024/06/", next]);
        pages.extend(calendar());
        servers.push(TestServer::serve(listener, pages).await);
    }
    let mut cluster = Cluster::start(&[]).await;
    let _w1 = cluster.worker("w1", Ipv4Addr::new(127, 0, 9, 7));
    let _w2 = cluster.worker("w2", Ipv4Addr::new(127, 0, 9, 8));
    assert!(cluster.wait_nodes(3).await, "three pools");
    cluster.add_url(&roots[0]).await;
    let status = cluster.wait_idle().await;
    assert_eq!(status["pending"], 0, "{status}");
    assert_all_fetched(servers.iter().flat_map(|server| {
        std::iter::once("/".to_string())
            .chain((0..30).map(|i| format!("/p/{i}")))
            .map(move |t| (server, t))
    }));
    for (h, server) in servers.iter().enumerate() {
        for i in 0..30 {
            assert!(server.hits_of(&format!("/p/{i}")) >= 1, "host {h} /p/{i}");
        }
        let calendar: u32 = server
            .hits()
            .iter()
            .filter(|(t, _)| t.starts_with("/cal/"))
            .map(|(_, n)| n)
            .sum();
        assert!(
            calendar <= 80,
            "host {h}: {calendar} of 2,400 calendar pages"
        );
    }
}

/// Pages fetched on a worker node are indexed in its own shard; scripts
/// (`search --connect`) and the console ask the running node, which asks
/// every shard. Sixteen hosts,
/// so that both nodes are given some (the chance that one node gets them
/// all is 2 in 65,536).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_indexes_what_its_nodes_fetch_and_answers_searches() {
    use crate::search::word;
    use web_crawler_testsupport::{Page, TestServer, reserve};
    const HOSTS: usize = 16;
    let listeners: Vec<std::net::TcpListener> = (0..HOSTS)
        .map(|h| reserve(Ipv4Addr::new(127, 0, 12, 10 + h as u8)))
        .collect();
    let roots: Vec<String> = listeners
        .iter()
        .map(|l| format!("http://{}/", l.local_addr().unwrap()))
        .collect();
    let mut servers = Vec::new();
    for (h, listener) in listeners.into_iter().enumerate() {
        let page = Page::html(format!(
            "<html><head><title>Host {h}</title></head><body><p>This host keeps the \
             {} archive of sourdough recipes.</p><a href=\"{}\">the next host</a></body></html>",
            word(h),
            roots[(h + 1) % HOSTS]
        ));
        servers.push(TestServer::serve(listener, HashMap::from([("/".to_string(), page)])).await);
    }
    let mut cluster = Cluster::start(&[]).await;
    let _w1 = cluster.worker("w1", Ipv4Addr::new(127, 0, 9, 9));
    assert!(cluster.wait_nodes(2).await, "two pools");
    cluster.add_url(&roots[0]).await;
    cluster.wait_idle().await;
    let store = SqliteStore::open(&cluster.db()).unwrap();
    let pages = store
        .processed(PageQuery {
            limit: None,
            offset: 0,
            only_failed: false,
            only_duplicates: false,
            newest_first: false,
        })
        .await
        .unwrap();
    let nodes: HashSet<&str> = pages.iter().map(|p| p.record.node.as_str()).collect();
    assert_eq!(nodes, HashSet::from(["master", "w1"]), "both nodes fetched");
    // Every host's page is in the index, within a second or so of its commit.
    for (h, root) in roots.iter().enumerate() {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let out = cluster.cli(&["search", &word(h), "--json"]).await;
            let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            if answer["results"][0]["url"] == root.as_str() {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "host {h}: {answer} {}",
                String::from_utf8_lossy(&out.stderr)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // `status` counts every node's shard: the sixteen pages, w1's among them.
    let status = cluster.status().await.expect("a status");
    assert_eq!(
        status["index"],
        serde_json::json!({"indexed": HOSTS, "queued": HOSTS}),
        "{status}"
    );
    let shards: Vec<(String, u64)> = status["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            let node = n["node"].as_str().unwrap_or_default().to_string();
            (node, n["index"]["indexed"].as_u64().unwrap_or(0))
        })
        .collect();
    assert!(
        shards.iter().any(|(n, i)| n == "w1" && *i > 0),
        "{shards:?}"
    );
    assert_eq!(shards.iter().map(|(_, i)| i).sum::<u64>(), HOSTS as u64);
    let out = cluster
        .console(&[], "search sourdugh archive\nsearch \"unbalanced\nquit\n")
        .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("did you mean: sourdough archive"), "{text}");
    // Every host's page matches alike: ten of the sixteen are listed.
    let listed = roots.iter().filter(|r| text.contains(r.as_str())).count();
    assert_eq!(listed, 10, "{text}");
    assert!(text.contains("unbalanced quote"), "{text}");
}

/// A worker node stops at once on SIGTERM: it has no master of its own to
/// wait for (it used to wait ten seconds for one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_rejoins_a_restarted_master_and_fetches_again() {
    let web = GeneratedWeb::start_with(8, 20, 14, Duration::from_millis(10)).await;
    let mut cluster = Cluster::start_on(Ipv4Addr::new(127, 0, 9, 21), &[]).await;
    let mut w1 = cluster
        .worker_command("w1", Ipv4Addr::new(127, 0, 9, 11), &[])
        .env("RUST_LOG", "warn,web_crawler_actors::cluster=debug")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Log::of(w1.stderr.take().unwrap());
    assert!(cluster.wait_nodes(2).await, "two pools");
    assert!(log.wait_lines(JOINED, 1).await, "{}", log.text());
    cluster.kill_master().await;
    // Down until the worker has noticed and tried to reconnect twice.
    assert!(
        log.wait_lines("the master is unreachable; reconnecting", 1)
            .await
            && log.wait_lines("the master is still unreachable", 2).await,
        "the worker notices and retries: {}",
        log.text()
    );
    cluster.restart_master();
    assert!(
        cluster.wait_nodes(2).await,
        "the worker joined the new master"
    );
    cluster.add_url(&web.seed_url()).await;
    cluster.wait_idle().await;
    assert_every_page_fetched(&web, true);
    let per_host = nodes_per_host(&cluster.db()).await;
    assert!(
        per_host.values().any(|nodes| nodes.contains("w1")),
        "the rejoined worker fetched some hosts: {per_host:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_without_its_master_exits_after_the_grace() {
    let mut cluster = Cluster::start(&[]).await;
    let mut worker = cluster.worker_with(
        "w1",
        Ipv4Addr::new(127, 0, 9, 12),
        &["--master-grace", "2"],
        Stdio::piped(),
    );
    let log = Log::of(worker.stderr.take().unwrap());
    assert!(cluster.wait_nodes(2).await, "two pools");
    assert!(log.wait_lines(JOINED, 1).await, "{}", log.text());
    cluster.kill_master().await;
    let status = tokio::time::timeout(Duration::from_secs(30), worker.wait())
        .await
        .expect("the worker gives up")
        .unwrap();
    assert!(!status.success(), "{status:?}");
    assert!(
        log.wait_lines("unreachable for 2 s", 1).await && log.text().contains("--master-grace"),
        "{}",
        log.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_node_with_a_taken_name_is_refused_and_the_first_keeps_running() {
    let mut cluster = Cluster::start(&[]).await;
    let mut first = cluster.worker("w1", Ipv4Addr::new(127, 0, 9, 13));
    assert!(cluster.wait_nodes(2).await, "two pools");
    let second = cluster.worker_with("w1", Ipv4Addr::new(127, 0, 9, 14), &[], Stdio::piped());
    let out = tokio::time::timeout(Duration::from_secs(30), second.wait_with_output())
        .await
        .expect("the second w1 exits")
        .unwrap();
    assert!(!out.status.success(), "{:?}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("a node named w1 is already in the cluster"),
        "{stderr}"
    );
    assert!(first.try_wait().unwrap().is_none(), "the first w1 runs on");
    // The second was refused before it joined: the master's nodes are as
    // they were.
    let status = cluster.status().await.unwrap();
    let nodes: Vec<&str> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert_eq!(nodes.len(), 2, "{status}");
    assert!(nodes.contains(&"w1"), "{status}");
    // The master's own name is taken too.
    let third = cluster.worker_with("master", Ipv4Addr::new(127, 0, 9, 15), &[], Stdio::piped());
    let out = third.wait_with_output().await.unwrap();
    assert!(!out.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stops_promptly_on_sigterm() {
    let mut cluster = Cluster::start(&[]).await;
    let mut worker = cluster.worker("w1", Ipv4Addr::new(127, 0, 9, 10));
    assert!(cluster.wait_nodes(2).await, "two pools");
    let pid = worker.id().expect("the worker runs").to_string();
    let started = std::time::Instant::now();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().await;
    assert!(kill.unwrap().success());
    let status = tokio::time::timeout(Duration::from_secs(30), worker.wait())
        .await
        .expect("the worker exits")
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped in {:?}",
        started.elapsed()
    );
}

/// `GET /metrics` at `addr`: the body.
async fn scrape(addr: SocketAddr) -> String {
    use tokio::io::AsyncReadExt;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut text))
        .await
        .expect("the metrics answer")
        .unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// The value of the sample `name` (with its labels, as rendered), 0 if absent.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_scraped_during_a_crawl_and_match_what_the_server_served() {
    use web_crawler_testsupport::{Page, TestServer, page_with_links};
    let ok: Vec<String> = (0..8).map(|i| format!("/p{i}")).collect();
    let mut pages: HashMap<String, Page> = ok
        .iter()
        .map(|p| {
            (
                p.clone(),
                page_with_links(p, &["/"]).delay(Duration::from_millis(150)),
            )
        })
        .collect();
    let mut links: Vec<&str> = ok.iter().map(String::as_str).collect();
    links.extend(["/gone1", "/gone2"]);
    pages.insert("/".into(), page_with_links("home", &links));
    let site = TestServer::start(Ipv4Addr::new(127, 0, 21, 2), pages).await;
    let metrics = addr(Ipv4Addr::new(127, 0, 21, 1));
    let cluster = Cluster::start_on(
        Ipv4Addr::new(127, 0, 21, 1),
        &["--metrics", &metrics.to_string()],
    )
    .await;
    cluster.add_url(&site.url("/")).await;
    let fetched = |t: &str, status: u16| {
        sample(
            t,
            &format!("web_crawler_pages_fetched_total{{node=\"master\",status=\"{status}\"}}"),
        )
    };
    // Scrape while it crawls: the counters only grow, up to what was served.
    let mut last = (0.0, 0.0);
    let mut during = 0;
    let mut text = String::new();
    for _ in 0..200 {
        text = scrape(metrics).await;
        let now = (fetched(&text, 200), fetched(&text, 404));
        assert!(now.0 >= last.0 && now.1 >= last.1, "counters grow: {text}");
        last = now;
        if now.0 < 9.0 {
            during += 1;
        }
        let frontier = |s: &str| {
            sample(
                &text,
                &format!("web_crawler_frontier_urls{{state=\"{s}\"}}"),
            )
        };
        if now == (9.0, 2.0) && frontier("pending") == 0.0 && frontier("processing") == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(during > 0, "a scrape during the crawl");
    // What the server served: the home page and 8 pages (200), 2 missing (404).
    let served_ok: u32 = std::iter::once("/")
        .chain(ok.iter().map(String::as_str))
        .map(|p| site.hits_of(p))
        .sum();
    assert_eq!(served_ok, 9, "{:?}", site.hits());
    assert_all_real_fetched(&site, std::iter::once(&"/".to_string()).chain(&ok));
    assert_eq!(site.hits_of("/gone1") + site.hits_of("/gone2"), 2);
    assert_eq!(last, (f64::from(served_ok), 2.0), "{text}");
    assert_eq!(
        sample(&text, r#"web_crawler_fetch_errors_total{node="master"}"#),
        0.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, r#"web_crawler_frontier_urls{state="processed"}"#),
        11.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, r#"web_crawler_node_load{node="master"}"#),
        0.0,
        "{text}"
    );
    assert!(
        text.contains(r#"web_crawler_pool_running{node="master"} 0"#),
        "{text}"
    );
    assert!(
        text.contains("# TYPE web_crawler_pages_fetched counter"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_restart_intensity_is_set_by_flags() {
    let cluster = Cluster::start_on(
        Ipv4Addr::new(127, 0, 21, 10),
        &["--max-restarts", "4", "--restart-window", "90s"],
    )
    .await;
    let out = cluster.console(&["--json"], "state sup\n").await;
    assert!(out.status.success(), "{out:?}");
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(state["max_restarts"], 4, "{state}");
    assert_eq!(state["period_s"], 90, "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_request_is_refused_at_the_sender_and_costs_no_connection() {
    use web_crawler::actors::{ControlError, OperationSpec};
    let cluster = Cluster::start_on(Ipv4Addr::new(127, 0, 21, 20), &[]).await;
    let remote = cluster.remote().await;
    let huge = format!("http://127.0.21.21/{}", "a".repeat(1 << 20));
    let err = remote
        .add_url(&huge, OperationSpec::crawl())
        .await
        .unwrap_err();
    assert!(matches!(err, ControlError::TooLarge { .. }), "{err:?}");
    assert!(err.to_string().contains("over the 65536"), "{err}");
    // The same connection answers the next request.
    let status = remote.status().await.unwrap();
    assert_eq!(status.nodes.len(), 1, "the node stays joined");
    remote.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_pause_a_host_change_settings_watch_top_and_stop_a_node() {
    use web_crawler_testsupport::{TestServer, page_with_links};
    // Each page's text is its own: a copy's links are not followed.
    let site = |ip: Ipv4Addr| {
        let pages: HashMap<String, _> = (0..4)
            .map(|i| {
                (
                    format!("/p{i}"),
                    page_with_links(&format!("{ip} page {i}"), &["/"]),
                )
            })
            .chain([(
                "/".to_string(),
                page_with_links(&format!("{ip} home"), &["/p0", "/p1", "/p2", "/p3"]),
            )])
            .collect();
        TestServer::start(ip, pages)
    };
    let (a, b) = (
        site(Ipv4Addr::new(127, 0, 21, 32)).await,
        site(Ipv4Addr::new(127, 0, 21, 33)).await,
    );
    let a_host = a.origin().trim_start_matches("http://").to_string();
    let mut cluster = Cluster::start_on(Ipv4Addr::new(127, 0, 21, 30), &[]).await;
    let mut worker = cluster.worker("w1", Ipv4Addr::new(127, 0, 21, 31));
    assert!(cluster.wait_nodes(2).await, "the worker joined");
    let script = format!(
        "pause {a_host}\nset delay 0\nset per-host 2\nadd_url {}\nadd_url {}\n",
        a.url("/"),
        b.url("/")
    );
    let out = cluster.console(&[], &script).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("{a_host} paused on 2 node(s)")),
        "{text}"
    );
    assert!(text.contains("per-host 2 on 2 node(s)"), "{text}");
    // b is crawled to its end while a waits, robots.txt and all.
    let b_done = wait_for(Duration::from_secs(20), || {
        ["/", "/p0", "/p1", "/p2", "/p3"]
            .iter()
            .all(|p| b.hits_of(p) == 1)
    })
    .await;
    assert!(b_done, "b crawled: {:?}", b.hits());
    // a's seed is at a pool, which holds it and starts nothing of it.
    let remote = cluster.remote().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listing = remote.hosts(10).await.unwrap();
        let held = listing.items.iter().any(|h| {
            h.host == a_host
                && h.live
                    .as_ref()
                    .is_some_and(|l| l.paused && l.queued >= 1 && l.in_flight == 0)
        });
        if held {
            break;
        }
        assert!(Instant::now() < deadline, "a held, paused: {listing:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    remote.close();
    assert_eq!(
        a.total_hits(),
        0,
        "nothing of the paused host: {:?}",
        a.hits()
    );

    let script = format!("resume {a_host}\ntop 2\nnode stop w1\nnode stop nobody\n");
    let out = cluster.console(&[], &script).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("{a_host} resumed on 2 node(s)")),
        "{text}"
    );
    assert_eq!(
        text.matches("node\tload\thosts").count(),
        2,
        "two frames: {text}"
    );
    assert!(
        text.contains("pages/s (last 10 s, ") && text.contains(" on average)"),
        "two frames a second apart: the master's 10-second rate (5 s of frames \
         are not there yet), and the run's average: {text}"
    );
    assert!(text.contains("node w1 is stopping"), "{text}");
    assert!(text.contains("no live node \"nobody\""), "{text}");
    let exit = tokio::time::timeout(Duration::from_secs(20), worker.wait())
        .await
        .expect("the stopped node's process ends")
        .unwrap();
    assert_eq!(exit.code(), Some(0), "an operator's stop is a clean exit");
    assert!(cluster.wait_nodes(1).await);
    cluster.wait_idle().await;
    // A page w1 fetched before its stop is fetched once more: a node
    // stopped by an operator has left for good, and its pages are handed
    // over to their hosts' new owners to be indexed there (#28).
    for p in ["/", "/p0", "/p1", "/p2", "/p3"] {
        let hits = a.hits_of(p);
        assert!(
            (1..=2).contains(&hits),
            "{p} of the resumed host, once (twice if w1 had it): {hits}"
        );
    }
}

/// #27 item 12: with the default log (no `RUST_LOG`), the master says when
/// a node joins as it says when one leaves, one line each; once the crawl
/// is idle, `status` reads 0 pages/s now while the run's average stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_master_logs_joins_and_leaves_and_status_says_the_rate_now() {
    let site = TestServer::start(
        Ipv4Addr::new(127, 0, 28, 3),
        (0..6)
            .map(|i| {
                (
                    format!("/p{i}"),
                    page_with_links(&format!("page {i}"), &["/"]),
                )
            })
            .chain([(
                "/".to_string(),
                page_with_links("home", &["/p0", "/p1", "/p2", "/p3", "/p4", "/p5"]),
            )])
            .collect(),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cookie = dir.path().join("cookie");
    std::fs::write(&cookie, "shared-secret-for-tests\n").unwrap();
    let master_addr = addr(Ipv4Addr::new(127, 0, 28, 1));
    let mut master = bin()
        .env_remove("RUST_LOG")
        .args([
            "start",
            "--name",
            "master",
            "--listen",
            &master_addr.to_string(),
        ])
        .arg("--cookie-file")
        .arg(&cookie)
        .arg("--db")
        .arg(dir.path().join("master.db"))
        .args(["--delay-ms", "0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Log::of(master.stderr.take().unwrap());
    let mut cluster = Cluster {
        dir,
        cookie,
        master_addr,
        extra: Vec::new(),
        master,
    };
    assert!(cluster.wait_nodes(1).await, "master node up");
    let mut w1 = cluster.worker("w1", Ipv4Addr::new(127, 0, 28, 2));
    assert!(cluster.wait_nodes(2).await, "the worker joined");
    assert!(
        log.wait_lines("node w1 joined the cluster; ", 1).await,
        "the join is logged: {}",
        log.text()
    );

    cluster.add_url(&site.url("/")).await;
    let idle = cluster.wait_idle().await;
    assert_eq!(idle["fetched_this_run"], 7, "{idle}");
    let pages = (0..6).map(|i| format!("/p{i}"));
    assert_all_real_fetched(&site, std::iter::once("/".to_string()).chain(pages));
    // Idle: the rate of the last 10 s falls to 0; the run's average does not.
    let deadline = Instant::now() + Duration::from_secs(25);
    let quiet = loop {
        let s = cluster.status().await.unwrap();
        if s["recent_pages_per_sec"].as_f64() == Some(0.0) {
            break s;
        }
        assert!(Instant::now() < deadline, "the rate now reaches 0: {s}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(quiet["pages_per_sec"].as_f64().unwrap() > 0.0, "{quiet}");
    let out = cluster.cli(&["status"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("0.0 pages/s in the last 10 s, ") && text.contains(" on average"),
        "{text}"
    );

    w1.start_kill().unwrap();
    w1.wait().await.unwrap();
    assert!(
        log.wait_lines("node w1 left the cluster; ", 1).await,
        "the leave is logged: {}",
        log.text()
    );
    let log = log.text();
    assert_eq!(log.matches("node w1 joined").count(), 1, "one line: {log}");
    assert_eq!(log.matches("node w1 left").count(), 1, "one line: {log}");
}

/// #27 items 13 and 15: read from a pipe, the console echoes each command
/// before its answer; a command without its arguments says what it needs; a
/// URL without a scheme is refused in one line that names it once and
/// gives the URL to write, by the console and by `add-url` alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_piped_console_says_which_answer_is_whose() {
    let mut cluster = Cluster::start_on(Ipv4Addr::new(127, 0, 28, 10), &[]).await;
    assert!(cluster.wait_nodes(1).await);
    let out = cluster
        .console(&[], "status\n\nsearch\nnodes\nadd_url 127.0.28.11:8091\n")
        .await;
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "> status", "{text}");
    assert!(lines[1].starts_with("node master: "), "{text}");
    assert_eq!(lines[2], "indexed 0 of 0 pages", "{text}");
    assert_eq!(lines[3], "> search", "{text}");
    assert_eq!(
        lines[4], "error: search needs words: search QUERY",
        "{text}"
    );
    assert_eq!(lines[5], "> nodes", "{text}");
    assert_eq!(lines[6], "node\tload\thosts", "{text}");
    let add = lines
        .iter()
        .position(|l| *l == "> add_url 127.0.28.11:8091")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        lines[add + 1],
        "error: invalid URL \"127.0.28.11:8091\": it has no scheme; try http://127.0.28.11:8091/",
        "{text}"
    );
    let out = cluster.cli(&["add-url", "127.0.28.11:8091"]).await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim_end(),
        "error: invalid URL \"127.0.28.11:8091\": it has no scheme; try http://127.0.28.11:8091/",
        "one line, the URL once"
    );
}

/// Piped to `head`, which closes the pipe early, `status --json` and the
/// console end quietly with exit 0 (as `ls | head` does): no panic about a
/// broken pipe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_the_console_piped_to_head_end_quietly() {
    let cluster = Cluster::start_on(Ipv4Addr::new(127, 0, 29, 1), &[]).await;
    let cut_short = |args: &[&str]| {
        let mut cmd = bin();
        cmd.args(args)
            .args(["--connect", &cluster.master_addr.to_string()])
            .arg("--cookie-file")
            .arg(&cluster.cookie)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.spawn().unwrap()
    };
    for args in [&["status", "--json"][..], &["console"]] {
        let mut child = cut_short(args);
        // `head` has read what it wanted: its end of the pipe is closed
        // before the command writes its answer.
        drop(child.stdout.take());
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"status\nnodes\nhelp\n").await.ok();
        drop(stdin);
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("it ends")
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

/// The console stops the master's node as SIGTERM does, once confirmed:
/// any answer but `yes` keeps it; `yes` stops it and its process exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shuts_the_master_down_once_confirmed() {
    let mut cluster = Cluster::start_on(Ipv4Addr::new(127, 0, 29, 2), &[]).await;
    let out = cluster.console(&[], "shutdown\nno\nnodes\n").await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("> no\nnot stopped\n> nodes"), "{text}");
    assert!(cluster.status().await.is_some(), "still running");
    let out = cluster.console(&[], "shutdown\nyes\n").await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("node master is stopping"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exit = tokio::time::timeout(Duration::from_secs(30), cluster.master.wait())
        .await
        .expect("the master's node stops")
        .unwrap();
    assert_eq!(exit.code(), Some(0));
}

/// Topics of the sharded-search web: each page holds one, in words of its
/// own, besides prose of its title.
const TOPICS: &[&str] = &[
    "rotate the server logs daily and compress the old log files",
    "back up the database with a dump and restore it on another server",
    "create an index on a column to speed up slow queries",
    "vacuum reclaims the storage held by dead rows after updates",
    "a replica follows the primary by streaming its write ahead log",
    "locks keep two writers from changing one row at the same time",
    "tune the memory settings of the server for faster sorting",
    "the supervisor restarts a crashed worker within its intensity",
    "a mailbox holds the messages an actor has not handled yet",
    "robots rules and politeness delays keep a crawler welcome",
];

/// Eight hosts of twelve pages on 127.0.`net`.x, each answering after
/// `delay`: each page a topic and prose, linking to the next page of its
/// host and, with words of its own, to a page of the next host (anchor
/// text crosses shards).
async fn sharded_web(net: u8, delay: Duration) -> (Vec<TestServer>, Vec<String>) {
    const HOSTS: usize = 8;
    const PAGES: usize = 12;
    let listeners: Vec<std::net::TcpListener> = (0..HOSTS)
        .map(|h| reserve(Ipv4Addr::new(127, 0, net, 10 + h as u8)))
        .collect();
    let roots: Vec<String> = listeners
        .iter()
        .map(|l| format!("http://{}", l.local_addr().unwrap()))
        .collect();
    let mut servers = Vec::new();
    for (h, listener) in listeners.into_iter().enumerate() {
        let mut pages = HashMap::new();
        for i in 0..PAGES {
            let title = format!("Host {h} page {i}");
            let topic = TOPICS[(h * 3 + i) % TOPICS.len()];
            let other = TOPICS[(h + 2 * i + 1) % TOPICS.len()];
            let next = if i + 1 < PAGES {
                format!("/p/{}", i + 1)
            } else {
                "/".to_string()
            };
            let away = match (i * 5) % PAGES {
                0 => format!("{}/", roots[(h + 1) % HOSTS]),
                j => format!("{}/p/{j}", roots[(h + 1) % HOSTS]),
            };
            let linked = TOPICS[(h + 1 + (i * 5) % PAGES * 3) % TOPICS.len()];
            // The first page also links to two copies of one page (a
            // content duplicate, which the index leaves out).
            let copies = if i == 0 {
                "<a href=\"/about\">about</a> <a href=\"/about/again\">about</a>"
            } else {
                ""
            };
            let html = format!(
                "<html><head><title>{title}</title></head><body><h1>{title}</h1>\
                 <p>{topic}. {}</p><p>See also: {other}.</p>\
                 <p>Read <a href=\"{away}\">how to {}</a> elsewhere, or \
                 <a href=\"{next}\">the next page</a>. {copies}</p></body></html>",
                prose_of(&title),
                linked.split(' ').take(4).collect::<Vec<_>>().join(" "),
            );
            let path = if i == 0 {
                "/".to_string()
            } else {
                format!("/p/{i}")
            };
            pages.insert(path, Page::html(html).delay(delay));
            let about = format!(
                "<html><head><title>About host {h}</title></head><body><p>Host {h} \
                 serves {} for the tests.</p></body></html>",
                prose_of(&format!("about {h}"))
            );
            pages.insert("/about".to_string(), Page::html(about.clone()).delay(delay));
            pages.insert("/about/again".to_string(), Page::html(about).delay(delay));
        }
        servers.push(TestServer::serve(listener, pages).await);
    }
    let seed = format!("{}/", roots[0]);
    let mut all = vec![seed];
    all.extend(roots.iter().skip(1).map(|r| format!("{r}/")));
    (servers, all)
}

/// Every page of the [`sharded_web`] whose roots are `roots`, by URL: its
/// pages and both copies of its about page (a duplicate is fetched, then
/// left out of the index).
fn sharded_pages(roots: &[String]) -> Vec<String> {
    roots
        .iter()
        .flat_map(|root| {
            let pages = (1..12).map(move |i| format!("{root}p/{i}"));
            [
                root.clone(),
                format!("{root}about"),
                format!("{root}about/again"),
            ]
            .into_iter()
            .chain(pages)
        })
        .collect()
}

/// Queries of the eval's kinds over the sharded web: keywords, questions,
/// a phrase and typos.
const SHARD_QUERIES: &[&str] = &[
    "rotate logs",
    "database backup restore",
    "slow queries",
    "how do I reclaim storage",
    "replica streaming",
    "\"write ahead log\"",
    "row locks writers",
    "memory settings",
    "supervisor restarts worker",
    "actor mailbox messages",
    "crawler politeness",
    "erlang cluster node",
    "marble canyon timber",
    "robots sitemap",
    "compres log files",
    "restor database dump",
    "garden river stone",
    "how to vacuum",
    "primary server",
    "commit budget window",
];

/// The URLs of an answer printed with `--json`.
fn answer_urls(answer: &serde_json::Value) -> Vec<String> {
    answer["results"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|h| h["url"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Issue 28: each node indexes the pages it fetched, and a query asks
/// every node's shard and merges. Over one web: a single-process crawl's
/// index answers the eval-style queries; a master and two workers crawl
/// the same web, each worker's shard holds exactly the pages it fetched,
/// and the merged top ten match the single index's. A worker stopped
/// (SIGSTOP) is named missing within the deadline; killed, a page of
/// its fetched again elsewhere is listed once when it is back, and its
/// pages are searchable again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_searches_every_nodes_shard_as_one_index() {
    use web_crawler::search::{SearchIndex, SearchOptions};
    let (_servers, roots) = sharded_web(31, Duration::ZERO).await;

    // The reference: one process, one index over the whole web.
    let reference = tempfile::tempdir().unwrap();
    let ref_db = reference.path().join("ref.db");
    let out = bin()
        .args(["crawl", &roots[0], "--scope", "any", "--delay-ms", "0"])
        .arg("--db")
        .arg(&ref_db)
        .stderr(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let real = sharded_pages(&roots);
    let ref_store = SqliteStore::open(&ref_db).unwrap();
    assert_all_stored(&not_stored(&ref_store, &real).await, real.len());
    let one = SearchIndex::open_read_only(&web_crawler::search::index_dir_for(&ref_db)).unwrap();
    let pages = one.page_count();
    assert_eq!(
        pages,
        8 * 13,
        "the reference indexed the web, one of each pair of copies"
    );

    let mut cluster = Cluster::start_on(Ipv4Addr::new(127, 0, 32, 1), &[]).await;
    let mut w1 = cluster.worker("w1", Ipv4Addr::new(127, 0, 32, 2));
    let _w2 = cluster.worker("w2", Ipv4Addr::new(127, 0, 32, 3));
    assert!(cluster.wait_nodes(3).await, "three pools");
    cluster.add_url(&roots[0]).await;
    cluster.wait_idle().await;

    // Each worker's shard holds the pages it fetched, and only those (a
    // content duplicate it fetched is dropped once the master's commit
    // finds it).
    let store = SqliteStore::open(&cluster.db()).unwrap();
    // The reference crawl was served by the same servers: the store says.
    assert_all_stored(&not_stored(&store, &real).await, real.len());
    let processed = store.processed(PageQuery::default()).await.unwrap();
    let fetched_by = |node: &str| -> HashSet<String> {
        processed
            .iter()
            .filter(|p| {
                p.record.node == node
                    && p.record.http_returncode == Some(200)
                    && p.duplicate_of.is_none()
            })
            .map(|p| p.record.url.clone())
            .collect()
    };
    assert!(
        processed
            .iter()
            .any(|p| p.duplicate_of.is_some() && p.record.node != "master"),
        "a worker fetched a duplicate"
    );
    for node in ["w1", "w2"] {
        let mine = fetched_by(node);
        assert!(!mine.is_empty(), "{node} fetched pages");
        let dir = cluster.dir.path().join(format!("{node}.index"));
        let held = wait_for(Duration::from_secs(30), || {
            SearchIndex::open_read_only(&dir).is_ok_and(|s| s.page_count() == mine.len() as u64)
        })
        .await;
        let count = SearchIndex::open_read_only(&dir).map(|s| s.page_count());
        assert!(
            held,
            "{node}'s shard holds its {} pages: {count:?}",
            mine.len()
        );
    }
    let master_index =
        SearchIndex::open_read_only(&web_crawler::search::index_dir_for(&cluster.db())).unwrap();
    let shard_pages = wait_for(Duration::from_secs(30), || {
        master_index.reload().is_ok()
            && master_index.page_count() == fetched_by("master").len() as u64
    })
    .await;
    assert!(shard_pages, "the master's shard holds its own pages only");

    // The merged top ten against the single index's, query by query.
    let mut overlap = 0.0;
    let mut same_order = 0;
    let mut wanted = HashMap::new();
    for q in SHARD_QUERIES {
        let want: Vec<String> = one
            .search(q, &SearchOptions::default())
            .unwrap()
            .results
            .into_iter()
            .map(|h| h.url)
            .collect();
        let answer = search_json(&cluster, q).await;
        assert_eq!(
            answer["nodes"]["missing"],
            serde_json::json!([]),
            "{q}: {answer}"
        );
        let got = answer_urls(&answer);
        let both = got.iter().filter(|u| want.contains(u)).count();
        overlap += both as f64 / want.len().max(1) as f64;
        same_order += usize::from(got == want);
        if got != want {
            eprintln!("{q}: one index {want:?}, the shards {got:?}");
        }
        wanted.insert(*q, want);
    }
    let overlap = overlap / SHARD_QUERIES.len() as f64;
    eprintln!(
        "sharded top 10: {:.1}% overlap, {same_order} of {} in the same order",
        overlap * 100.0,
        SHARD_QUERIES.len()
    );
    // Measured: 100%, all twenty in the same order (ties by URL on both);
    // now 99% and 17-18 of twenty,
    // the differences at ranks 9-10 or two near-tied pages swapped (cause
    // not established: see the stop note of 2026-11-29).
    assert!(overlap >= 0.9, "overlap {overlap}");
    assert!(same_order >= 16, "{same_order} in the same order");

    // A worker that does not answer (stopped) is named within the deadline.
    let w1_pid = w1.id().unwrap().to_string();
    let signal = |sig: &str| {
        let sent = std::process::Command::new("kill")
            .args([sig, &w1_pid])
            .status()
            .unwrap();
        assert!(sent.success(), "kill {sig}");
    };
    signal("-STOP");
    let started = Instant::now();
    let partial = search_json(&cluster, "rotate logs").await;
    let took = started.elapsed();
    let text = cluster.cli(&["search", "rotate logs"]).await;
    signal("-CONT");
    assert_eq!(
        partial["nodes"]["missing"],
        serde_json::json!(["w1"]),
        "{partial}"
    );
    assert_eq!(
        partial["nodes"]["answered"],
        serde_json::json!(["master", "w2"])
    );
    assert!(took < Duration::from_secs(5), "answered in {took:?}");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("node w1 did not answer in time"), "{text}");

    // A query whose single-index top ten holds pages w1 fetched.
    let w1_pages = fetched_by("w1");
    let (q, moved) = SHARD_QUERIES
        .iter()
        .find_map(|q| {
            let mine: Vec<&String> = wanted[q].iter().filter(|u| w1_pages.contains(*u)).collect();
            (mine.len() >= 2).then(|| (*q, mine[0].clone()))
        })
        .expect("a query finds two of w1's pages");

    // Killed: its hosts move, and one of its pages is fetched again elsewhere.
    w1.start_kill().unwrap();
    w1.wait().await.unwrap();
    assert!(cluster.wait_nodes(2).await, "the master noticed");
    let gone = search_json(&cluster, q).await;
    assert_eq!(
        gone["nodes"]["missing"],
        serde_json::json!(["w1"]),
        "{gone}"
    );
    let out = cluster.cli(&["add-url", &moved, "--again"]).await;
    assert!(out.status.success(), "{out:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let node = store
            .processed_url(&moved)
            .await
            .unwrap()
            .map(|p| p.record.node);
        if node.as_deref().is_some_and(|n| n != "w1") {
            break;
        }
        assert!(Instant::now() < deadline, "{moved} fetched again: {node:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Back: its pages are searchable again, the page fetched twice listed once.
    let _w1 = cluster.worker("w1", Ipv4Addr::new(127, 0, 32, 2));
    assert!(cluster.wait_nodes(3).await, "w1 is back");
    let back = wait_for_answer(&cluster, q, |a| {
        a["nodes"]["missing"] == serde_json::json!([])
    })
    .await;
    let got = answer_urls(&back);
    assert_eq!(
        got.iter().filter(|u| **u == moved).count(),
        1,
        "{moved} listed once: {back}"
    );
    let again = got
        .iter()
        .filter(|u| w1_pages.contains(*u) && **u != moved)
        .count();
    assert!(again >= 1, "w1's pages are found again: {back}");
    // Once the new copy is searchable too, a query that meets both lists
    // the newest and has w1 drop its old copy.
    let shard = cluster.dir.path().join("w1.index");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = search_json(&cluster, q).await;
        let got = answer_urls(&answer);
        assert!(got.iter().filter(|u| **u == moved).count() <= 1, "{answer}");
        let held = SearchIndex::open_read_only(&shard).map_or(0, |s| s.page_count());
        if held + 1 == w1_pages.len() as u64 {
            assert_eq!(got.iter().filter(|u| **u == moved).count(), 1, "{answer}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "w1's shard drops {moved}: {held} pages"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // One node's shard is rebuilt from the store: its pages only.
    cluster.kill_master().await;
    let w2_now = store
        .processed(PageQuery::default())
        .await
        .unwrap()
        .iter()
        .filter(|p| {
            p.record.node == "w2"
                && p.record.http_returncode == Some(200)
                && p.duplicate_of.is_none()
        })
        .count();
    let rebuilt = cluster.dir.path().join("w2-again.index");
    let out = bin()
        .args([
            "index",
            "rebuild",
            "--node",
            "w2",
            "--scope",
            "any",
            "--delay-ms",
            "0",
        ])
        .arg("--db")
        .arg(cluster.db())
        .arg("--index")
        .arg(&rebuilt)
        .stderr(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let shard = SearchIndex::open_read_only(&rebuilt).unwrap();
    assert_eq!(
        shard.page_count(),
        w2_now as u64,
        "w2's pages, fetched again"
    );
}

/// `search --json` through the master's node.
async fn search_json(cluster: &Cluster, q: &str) -> serde_json::Value {
    let out = cluster.cli(&["search", q, "--json"]).await;
    assert!(out.status.success(), "{q}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Ask `q` until `done` holds for the answer (at most 30 s).
async fn wait_for_answer(
    cluster: &Cluster,
    q: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = cluster.cli(&["search", q, "--json"]).await;
        let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if done(&answer) || Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Issue 28: a worker's shard queue is durable. Killed with -9 while it
/// fetches, the pages it reported and had not committed to its shard wait
/// in its queue; started again, it indexes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_crawl_indexes_its_backlog_when_started_again() {
    use web_crawler::search::SearchIndex;
    use web_crawler::store::{queue_dir_for, queue_waiting_bytes};
    let (servers, roots) = sharded_web(33, Duration::from_millis(40)).await;
    let mut cluster = Cluster::start_on(Ipv4Addr::new(127, 0, 34, 1), &[]).await;
    let mut w1 = cluster.worker("w1", Ipv4Addr::new(127, 0, 34, 2));
    assert!(cluster.wait_nodes(2).await, "two pools");
    cluster.add_url(&roots[0]).await;
    let shard = cluster.dir.path().join("w1.index");
    let store = SqliteStore::open(&cluster.db()).unwrap();
    // Kill it once it has reported pages, while it fetches more.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let fetched = store
            .processed(PageQuery::default())
            .await
            .unwrap()
            .iter()
            .filter(|p| p.record.node == "w1")
            .count();
        if fetched >= 10 {
            break;
        }
        assert!(Instant::now() < deadline, "w1 fetches");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    w1.start_kill().unwrap();
    w1.wait().await.unwrap();
    // The master's window lets w1 go, and returns what it held to pending,
    // before a node of the same name is back (else those URLs wait for
    // their leases).
    assert!(cluster.wait_window(1).await, "the master noticed");
    let queue = queue_dir_for(&shard);
    let waiting = queue_waiting_bytes(&queue).unwrap();
    let indexed = SearchIndex::open_read_only(&shard).map_or(0, |s| s.page_count());
    assert!(waiting > 0, "pages wait in the queue ({indexed} indexed)");

    let _w1 = cluster.worker("w1", Ipv4Addr::new(127, 0, 34, 2));
    assert!(cluster.wait_nodes(2).await, "w1 is back");
    cluster.wait_idle().await;
    let real = sharded_pages(&roots);
    assert_all_stored(&not_stored(&store, &real).await, real.len());
    let drained = wait_for(Duration::from_secs(30), || {
        queue_waiting_bytes(&queue).is_ok_and(|bytes| bytes == 0)
    })
    .await;
    assert!(drained, "the queue is indexed");
    let mine: HashSet<String> = store
        .processed(PageQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|p| {
            p.record.node == "w1"
                && p.record.http_returncode == Some(200)
                && p.duplicate_of.is_none()
        })
        .map(|p| p.record.url)
        .collect();
    let held = SearchIndex::open_read_only(&shard).unwrap().page_count();
    // Pages it reported that the master had not committed when it died
    // are fetched again elsewhere, and are in its shard too.
    assert!(
        held >= mine.len() as u64,
        "{held} pages in w1's shard: {indexed} committed at the kill, {waiting} bytes waiting, {} fetched by w1",
        mine.len()
    );
    drop(servers);
}

/// Issue 28, a node that leaves for good: an operator stops w1 (`node
/// stop`), and the pages it fetched become searchable again on their
/// hosts' new owners: fetched again there, politely, and indexed in their
/// shards. Meanwhile `status` counts the pages waiting, down to none; then
/// w1, which holds no page any more, is neither answered nor missing, and
/// the queries that found its pages find them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_for_good_hands_its_pages_over() {
    use web_crawler::search::SearchIndex;
    // Slow enough pages that the hand-over takes a few seconds to watch.
    let (_servers, roots) = sharded_web(35, Duration::from_millis(150)).await;
    let cluster = Cluster::start_on(Ipv4Addr::new(127, 0, 36, 1), &[]).await;
    let mut w1 = cluster.worker("w1", Ipv4Addr::new(127, 0, 36, 2));
    let _w2 = cluster.worker("w2", Ipv4Addr::new(127, 0, 36, 3));
    // The master's window knows all three before the seed is claimed: it
    // gives hosts only to nodes it knows, for good, and a seed claimed
    // before then left w1 without a host on a loaded machine.
    assert!(cluster.wait_window(3).await, "three pools");
    cluster.add_url(&roots[0]).await;
    cluster.wait_idle().await;
    let store = SqliteStore::open(&cluster.db()).unwrap();
    let real = sharded_pages(&roots);
    assert_all_stored(&not_stored(&store, &real).await, real.len());
    let w1_pages: HashSet<String> = store
        .processed(PageQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|p| p.record.node == "w1" && p.record.http_returncode == Some(200))
        .map(|p| p.record.url)
        .collect();
    assert!(w1_pages.len() >= 5, "w1 fetched pages: {w1_pages:?}");
    let w1_titles: Vec<(String, String)> = store
        .processed(PageQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|p| w1_pages.contains(&p.record.url) && p.duplicate_of.is_none())
        .filter_map(|p| Some((p.record.url, p.record.title?)))
        .collect();
    assert!(w1_titles.len() >= 5, "{w1_titles:?}");
    let w1_all = store
        .pages_per_node()
        .await
        .unwrap()
        .into_iter()
        .find_map(|(node, n)| (node == "w1").then_some(n))
        .unwrap();
    // The pages searchable once every shard has committed its backlog.
    let searchable = || async {
        store
            .processed(PageQuery::default())
            .await
            .unwrap()
            .iter()
            .filter(|p| p.record.http_returncode == Some(200) && p.duplicate_of.is_none())
            .count() as u64
    };
    let shard_pages = |name: &str| {
        SearchIndex::open_read_only(&cluster.dir.path().join(format!("{name}.index")))
            .map_or(0, |s| s.page_count())
    };
    let master_index =
        SearchIndex::open_read_only(&web_crawler::search::index_dir_for(&cluster.db())).unwrap();
    let master_pages = || {
        master_index
            .reload()
            .map_or(0, |()| master_index.page_count())
    };
    // "Before" is the whole cluster's answer: every page indexed, w1's too.
    let all = searchable().await;
    let indexed = wait_for(Duration::from_secs(30), || {
        master_pages() + shard_pages("w1") + shard_pages("w2") == all
    })
    .await;
    assert!(
        indexed && shard_pages("w1") > 0,
        "the shards hold {} + {} + {} of {all} pages",
        master_pages(),
        shard_pages("w1"),
        shard_pages("w2")
    );

    // What the whole cluster answers, with w1's pages among it.
    let mut before = HashMap::new();
    for q in SHARD_QUERIES {
        let answer = wait_for_answer(&cluster, q, |a| {
            a["nodes"]["missing"] == serde_json::json!([])
        })
        .await;
        before.insert(*q, answer_urls(&answer));
    }
    let found_on_w1: Vec<(&str, String)> = before
        .iter()
        .flat_map(|(q, urls)| {
            urls.iter()
                .filter(|u| w1_pages.contains(*u))
                .map(|u| (*q, u.clone()))
        })
        .collect();
    assert!(
        found_on_w1.len() >= 3,
        "queries find w1's pages: {found_on_w1:?}"
    );

    // Stopped for good.
    let out = cluster.console(&[], "node stop w1\n").await;
    assert!(out.status.success(), "{out:?}");
    let exit = tokio::time::timeout(Duration::from_secs(30), w1.wait())
        .await
        .expect("w1 stops")
        .unwrap();
    assert!(exit.success(), "{exit:?}");

    // `status` counts the pages waiting down to none.
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(s) = cluster.status().await {
            let waiting = s["pages_awaiting_handover"].as_u64().unwrap_or(0);
            let handing = s["handing_over"].clone();
            if waiting > 0 {
                assert_eq!(handing, serde_json::json!(["w1"]), "{s}");
            }
            // From the first count the store gave (0 before it).
            if (waiting > 0 || !seen.is_empty()) && seen.last() != Some(&waiting) {
                seen.push(waiting);
            }
            if waiting == 0 && !seen.is_empty() && handing.is_null() {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the hand-over ends: {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("pages awaiting the hand-over, as status said: {seen:?}");
    assert!(
        seen[0] <= w1_all,
        "at most the {w1_all} pages w1 fetched waited: {seen:?}"
    );
    assert!(
        seen.windows(2).all(|w| w[1] < w[0]),
        "counted down: {seen:?}"
    );
    let per_node = store.pages_per_node().await.unwrap();
    assert!(
        per_node.iter().all(|(node, _)| node != "w1"),
        "every page of w1's was fetched again elsewhere: {per_node:?}"
    );

    // w1 is neither answered nor missing, and its pages are found again.
    let after = wait_for_answer(&cluster, SHARD_QUERIES[0], |a| {
        a["nodes"]["missing"] == serde_json::json!([])
    })
    .await;
    assert_eq!(after["nodes"]["missing"], serde_json::json!([]), "{after}");
    assert_eq!(
        after["nodes"]["answered"],
        serde_json::json!(["master", "w2"]),
        "{after}"
    );
    // Every page is in the live shards once their indexers commit.
    let all = searchable().await;
    let held = || master_pages() + shard_pages("w2");
    let all_held = wait_for(Duration::from_secs(30), || held() == all).await;
    assert!(all_held, "the live shards hold {} of {all} pages", held());
    // Each of w1's pages is found by its title, from a live shard.
    for (url, title) in &w1_titles {
        let answer = search_json(&cluster, &format!("\"{title}\"")).await;
        assert!(
            answer_urls(&answer).contains(url),
            "{url} found by \"{title}\": {answer}"
        );
    }
    // And the cluster answers as before: anchors are kept in the linking
    // page's shard, so those w1's pages gave come back with them, and
    // those other pages gave them never left.
    let mut changed = Vec::new();
    for q in SHARD_QUERIES {
        let after = answer_urls(&search_json(&cluster, q).await);
        if after != before[q] {
            changed.push(format!("{q:?}: before {:?}, after {after:?}", before[q]));
        }
    }
    assert!(
        changed.is_empty(),
        "top tens that changed with w1's hand-over: {changed:#?}"
    );
}
