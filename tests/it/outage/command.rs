//! The store outages of the `web_crawler` command: a full SQLite file, and a
//! real MongoDB-wire server stopped and started again under a running crawl.

use super::{db_path, each_page_fetched_once, eventually, processed, slow_chain};
use crate::common::backend::Backend;
use crate::common::bin;
use crate::common::from_env_or_script;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};
use web_crawler::actors::Frontier;
use web_crawler::store::{MongoStore, SqliteStore};
use web_crawler_testsupport::TestServer;

// --- a full SQLite file --------------------------------------------------------

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The lines a command wrote on stderr.
fn lines(o: &Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

async fn run(args: &[String]) -> Output {
    tokio::time::timeout(Duration::from_secs(120), bin().args(args).output())
        .await
        .expect("the command finishes")
        .expect("the command runs")
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_the_crawl_with_one_line_and_exit_74_then_it_resumes() {
    const PAGES: usize = 150;
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 16, 6),
        slow_chain(PAGES, Duration::ZERO),
    )
    .await;
    let backend = Backend::sqlite();
    let db = db_path(&backend);
    drop(SqliteStore::open(&db).unwrap());
    let pages: u64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    let crawl = args(&[
        "crawl",
        &server.url("/"),
        "--db",
        &db.display().to_string(),
        "--delay-ms",
        "0",
        "--no-index",
    ]);
    // The file may grow by a few pages only: the disk is full soon after
    // the crawl starts.
    let mut full = crawl.clone();
    full.extend(args(&["--db-max-pages", &(pages + 12).to_string()]));
    let out = run(&full).await;
    assert_eq!(out.status.code(), Some(74), "{}", stderr(&out));
    let said = lines(&out);
    assert_eq!(said.len(), 1, "one line: {said:#?}");
    assert!(
        said[0].starts_with("error: the store failed at ")
            && said[0].contains("the store is full: no space is left on its disk")
            && said[0].contains("run the crawl again on the same store to resume"),
        "{}",
        said[0]
    );
    let stored = SqliteStore::open(&db).unwrap().counts().await.unwrap();
    assert!(
        stored.processed > 0 && stored.processed < PAGES as u64,
        "stopped part-way: {stored:?}"
    );

    // Room again: the same command resumes and finishes.
    let out = run(&crawl).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let stored = SqliteStore::open(&db).unwrap().counts().await.unwrap();
    assert_eq!((stored.processed, stored.pending), (PAGES as u64 + 1, 0));
    let hits = server.hits();
    for i in 0..PAGES {
        let n = hits.get(&format!("/p{i}")).copied().unwrap_or(0);
        assert!((1..=2).contains(&n), "/p{i} fetched {n} times");
    }
}

// --- a MongoDB server stopped and started again ----------------------

/// The nx-27017 program (`WEB_CRAWLER_TEST_NX27017`, which scripts/test.sh
/// sets, or installed now by scripts/mongo-server.sh).
fn nx_27017() -> PathBuf {
    PathBuf::from(from_env_or_script(
        "WEB_CRAWLER_TEST_NX27017",
        &["mongo-server.sh", "bin"],
        "the outage tests need nx-27017 and it could not be installed",
    ))
}

/// A MongoDB-wire server of the test's own, on its own data directory and
/// port, which it stops and starts again (the shared test server is never
/// stopped: other tests use it).
struct OwnServer {
    dir: tempfile::TempDir,
    port: u16,
    process: Option<tokio::process::Child>,
}

impl OwnServer {
    async fn start() -> OwnServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = OwnServer {
            dir: tempfile::tempdir().unwrap(),
            port,
            process: None,
        };
        server.up().await;
        server
    }

    fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}", self.port)
    }

    /// Start the server on its data directory and wait until it answers.
    async fn up(&mut self) {
        let dir = self.dir.path();
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        let process = tokio::process::Command::new(nx_27017())
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--host", "127.0.0.1", "-p", &self.port.to_string()])
            .arg("--pid-file")
            .arg(dir.join("nx.pid"))
            .arg("--log-file")
            .arg(dir.join("nx.log"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("start nx-27017");
        self.process = Some(process);
        let uri = self.uri();
        eventually(Duration::from_secs(30), "nx-27017 answering", || {
            let uri = uri.clone();
            async move {
                let mut options = mongodb::options::ClientOptions::parse(&uri).await.ok()?;
                options.server_selection_timeout = Some(Duration::from_millis(300));
                let client = mongodb::Client::with_options(options).ok()?;
                let db = client.database("admin");
                db.run_command(mongodb::bson::doc! { "ping": 1 }).await.ok()
            }
        })
        .await;
    }

    /// Stop it as an operator's restart would (SIGTERM), and wait until it is gone.
    async fn down(&mut self) {
        let mut process = self.process.take().expect("running");
        let pid = process.id().expect("running").to_string();
        let term = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(term.success());
        if tokio::time::timeout(Duration::from_secs(10), process.wait())
            .await
            .is_err()
        {
            process.kill().await.unwrap();
        }
    }
}

/// `web_crawler crawl` of `server`'s chain on `mongo`'s database `database`.
fn mongo_crawl(
    server: &TestServer,
    mongo: &OwnServer,
    database: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut all = args(&[
        "crawl",
        &server.url("/"),
        "--mongodb",
        &mongo.uri(),
        "--mongodb-database",
        database,
        "--delay-ms",
        "0",
        "--concurrency",
        "4",
        "--index",
        &mongo
            .dir
            .path()
            .join(format!("{database}.index"))
            .display()
            .to_string(),
    ]);
    all.extend(args(extra));
    all
}

/// Processed pages in `database`, read through a connection of the test's.
async fn mongo_processed(mongo: &OwnServer, database: &str) -> u64 {
    match MongoStore::connect(&mongo.uri(), database).await {
        Ok(store) => processed(&store).await,
        Err(_) => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mongodb_restart_mid_crawl_is_ridden_out_and_every_page_is_fetched_once() {
    const PAGES: usize = 120;
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 16, 7),
        slow_chain(PAGES, Duration::from_millis(40)),
    )
    .await;
    let mut mongo = OwnServer::start().await;
    let database = "restart";
    let crawl = bin()
        .args(mongo_crawl(&server, &mongo, database, &[]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually(Duration::from_secs(60), "twenty pages", || async {
        (mongo_processed(&mongo, database).await >= 20).then_some(())
    })
    .await;
    // The server restarts: down for ten seconds, back on the same data.
    mongo.down().await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    mongo.up().await;
    let out = tokio::time::timeout(Duration::from_secs(120), crawl.wait_with_output())
        .await
        .expect("the crawl finishes")
        .unwrap();
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    let unavailable: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("the store is unavailable"))
        .collect();
    assert_eq!(unavailable.len(), 1, "said once: {said}");
    assert!(
        unavailable[0].contains("(MongoDB is unavailable: ")
            && unavailable[0].contains("claims nothing and asks again until it is back")
            && !unavailable[0].contains("Kind:")
            && !unavailable[0].contains("Topology"),
        "in words: {said}"
    );
    assert_eq!(
        said.lines()
            .filter(|l| l.contains("the store is back after"))
            .count(),
        1,
        "{said}"
    );
    assert!(!said.contains("ERROR"), "{said}");
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("nothing left to crawl"), "{summary}");
    each_page_fetched_once(&server, PAGES);
    assert_eq!(
        mongo_processed(&mongo, database).await,
        PAGES as u64 + 1,
        "every page processed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mongodb_outage_past_the_limit_ends_with_exit_75_and_a_second_run_resumes() {
    const PAGES: usize = 80;
    let server = TestServer::start(
        Ipv4Addr::new(127, 0, 16, 8),
        slow_chain(PAGES, Duration::from_millis(40)),
    )
    .await;
    let mut mongo = OwnServer::start().await;
    let database = "limit";
    let command = mongo_crawl(&server, &mongo, database, &["--store-outage-limit", "3s"]);
    let crawl = bin()
        .args(&command)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually(Duration::from_secs(60), "ten pages", || async {
        (mongo_processed(&mongo, database).await >= 10).then_some(())
    })
    .await;
    mongo.down().await;
    let away = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(60), crawl.wait_with_output())
        .await
        .expect("the crawl stops")
        .unwrap();
    // The first call to fail waits out the driver's 10 s server selection.
    assert!(
        away.elapsed() < Duration::from_secs(30),
        "{:?}",
        away.elapsed()
    );
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(75), "{said}");
    let errors: Vec<&str> = said.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{said}");
    assert!(
        errors[0].starts_with("error: the store has been unreachable since ")
            && errors[0]
                .contains("longer than the 3s the crawl waits for it (MongoDB is unavailable: ")
            && errors[0].ends_with("run the crawl again on the same store once it is back"),
        "{said}"
    );
    assert!(!said.contains("Kind:") && !said.contains("ERROR"), "{said}");

    // The server is back: the same command resumes and finishes.
    mongo.up().await;
    let out = run(&command).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mongo_processed(&mongo, database).await, PAGES as u64 + 1);
    let hits = server.hits();
    for i in 0..PAGES {
        let n = hits.get(&format!("/p{i}")).copied().unwrap_or(0);
        assert!((1..=2).contains(&n), "/p{i} fetched {n} times");
    }
}
