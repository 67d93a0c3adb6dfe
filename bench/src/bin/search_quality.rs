//! Search quality (issue #12, item 7): a labelled known-item query set over a
//! real documentation corpus nobody here wrote — the PostgreSQL 15 manual as
//! Debian's `postgresql-doc-15` ships it — crawled from loopback as a user
//! would, then every query asked of `web_crawler search` with the full
//! ranking and with the plain BM25 baseline (`--ranking bm25`).
//!
//! ```sh
//! cargo build --release --bin web_crawler
//! cargo run --release --manifest-path bench/Cargo.toml --bin search_quality
//! ```
//!
//! Prints a Markdown table — per category (keyword, question, typo, all) and
//! split (tune, holdout, all): MRR@10, Recall@10 (share of queries with an
//! acceptable page in the top 10) and P@1, full ranking against BM25 — and
//! the queries with no acceptable page in the top 10, with what came first.
//! `--json` prints the same numbers as JSON instead.
//!
//! Everything is on loopback and bounded: the crawl (`--crawl-timeout`) and
//! each search (`--query-timeout`) are killed when they overrun.

use bytes::Bytes;
use clap::Parser;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::process::Command;

/// The repository root (the bench workspace is `bench/` inside it).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench/ has a parent")
        .to_path_buf()
}

#[derive(Parser, Debug)]
#[command(
    name = "search_quality",
    about = "MRR@10, Recall@10 and P@1 of web_crawler search on the PostgreSQL manual, against plain BM25"
)]
struct Cli {
    /// The corpus's HTML directory; default: what scripts/search-corpus.sh
    /// prints (it installs postgresql-doc-15 if absent).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// The web_crawler binary (release build); relative paths are from the
    /// repository root.
    #[arg(long, default_value = "target/release/web_crawler")]
    crawler: PathBuf,
    /// The labelled query set; relative paths are from the repository root.
    #[arg(long, default_value = "bench/search/queries.tsv")]
    queries: PathBuf,
    /// Use this crawl database: crawled into if it does not exist, reused
    /// as it is (with its index) if it does. Default: a fresh temporary one.
    #[arg(long)]
    db: Option<PathBuf>,
    /// Give the crawl up (and fail) after this many seconds.
    #[arg(long, default_value_t = 900)]
    crawl_timeout: u64,
    /// Give one search up after this many seconds (counted as no results).
    #[arg(long, default_value_t = 60)]
    query_timeout: u64,
    /// The baseline's --ranking value.
    #[arg(long, default_value = "bm25")]
    baseline: String,
    /// Only queries of this split (tune or holdout); default both.
    #[arg(long)]
    split: Option<String>,
    /// Print the numbers (and failures) as JSON instead of Markdown.
    #[arg(long)]
    json: bool,
    /// Keep the temporary directory (crawl.db, its index, the crawl's log).
    #[arg(long)]
    keep: bool,
    /// Crawl with `--semantic` (pages get vectors; needs
    /// `scripts/models.sh`).
    #[arg(long)]
    semantic: bool,
}

// ---------------------------------------------------------------- queries

pub const CATEGORIES: [&str; 3] = ["keyword", "question", "typo"];
pub const SPLITS: [&str; 2] = ["tune", "holdout"];

#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub id: String,
    pub category: String,
    pub split: String,
    pub text: String,
    /// Acceptable answer pages: file names in the corpus directory.
    pub answers: Vec<String>,
}

/// Parses the query file (see its header): tab-separated `id category split
/// query answers...`, `#` comments and blank lines skipped. Every error is
/// reported with its line number.
pub fn parse_queries(text: &str) -> Result<Vec<Query>, String> {
    let mut out = Vec::new();
    let mut ids = HashSet::new();
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() != 5 {
            return Err(format!(
                "line {n}: {} tab-separated columns, want 5 (id category split query answers)",
                cols.len()
            ));
        }
        let [id, category, split, q, answers] =
            [cols[0], cols[1], cols[2], cols[3], cols[4]].map(str::trim);
        if id.is_empty() || !ids.insert(id.to_string()) {
            return Err(format!("line {n}: empty or repeated id {id:?}"));
        }
        if !CATEGORIES.contains(&category) {
            return Err(format!(
                "line {n}: category {category:?}, want one of {CATEGORIES:?}"
            ));
        }
        if !SPLITS.contains(&split) {
            return Err(format!("line {n}: split {split:?}, want one of {SPLITS:?}"));
        }
        if q.is_empty() {
            return Err(format!("line {n}: empty query"));
        }
        let answers: Vec<String> = answers.split_whitespace().map(str::to_string).collect();
        if answers.is_empty() {
            return Err(format!("line {n}: no answer pages"));
        }
        if let Some(a) = answers.iter().find(|a| a.contains('/')) {
            return Err(format!("line {n}: answer {a:?} is not a file name"));
        }
        out.push(Query {
            id: id.to_string(),
            category: category.to_string(),
            split: split.to_string(),
            text: q.to_string(),
            answers,
        });
    }
    if out.is_empty() {
        return Err("no queries".into());
    }
    Ok(out)
}

// ---------------------------------------------------------------- results

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hit {
    pub url: String,
    pub title: String,
    pub snippet: String,
    /// The page's file name in the corpus (last path segment; `index.html`
    /// for a directory).
    pub file: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchOutput {
    pub hits: Vec<Hit>,
    pub did_you_mean: Option<String>,
    /// Why the search gave nothing usable (exit status, timeout, bad JSON).
    pub error: Option<String>,
    /// The `web_crawler search` process's time, start to exit.
    pub elapsed: Duration,
}

/// The p50 and p95 of a run's search times, in ms (nearest rank).
fn latency_ms(outputs: &[SearchOutput]) -> (f64, f64) {
    let mut ms: Vec<f64> = outputs
        .iter()
        .map(|o| o.elapsed.as_secs_f64() * 1e3)
        .collect();
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| {
        ms.get(((q * ms.len() as f64).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0)
    };
    (at(0.5), at(0.95))
}

/// The corpus file a result URL stands for: its last path segment,
/// percent-decoded, query and fragment dropped; `index.html` for `/`.
pub fn url_to_file(u: &str) -> String {
    let path = match url::Url::parse(u) {
        Ok(parsed) => parsed.path().to_string(),
        Err(_) => u.split(['?', '#']).next().unwrap_or("").to_string(),
    };
    let last = path.rsplit('/').next().unwrap_or("");
    if last.is_empty() {
        "index.html".to_string()
    } else {
        percent_decode(last)
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses `web_crawler search --json`:
/// `{"results":[{"url","title","snippet","score"}...],"did_you_mean":null|"..."}`.
pub fn parse_search_json(s: &str) -> Result<SearchOutput, String> {
    let v: Value = serde_json::from_str(s.trim()).map_err(|e| format!("bad JSON: {e}"))?;
    let results = v
        .get("results")
        .and_then(Value::as_array)
        .ok_or("no \"results\" array")?;
    let hits = results
        .iter()
        .filter_map(|r| {
            let url = r.get("url")?.as_str()?.to_string();
            let title = r
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let snippet = r
                .get("snippet")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            Some(Hit {
                file: url_to_file(&url),
                url,
                title,
                snippet,
            })
        })
        .collect();
    let did_you_mean = v
        .get("did_you_mean")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(SearchOutput {
        hits,
        did_you_mean,
        ..SearchOutput::default()
    })
}

// ---------------------------------------------------------------- metrics

/// Whether a snippet shows the site's navigation rather than the page's
/// text: the manual's DocBook header and footer ("Prev Up … Home Next"),
/// Sphinx's related bar and sidebar.
pub fn snippet_has_chrome(snippet: &str) -> bool {
    [
        "Prev Up",
        "Up Home",
        "Home Next",
        "Prev Next",
        "Previous topic",
        "Next topic",
        "Show Source",
    ]
    .iter()
    .any(|chrome| snippet.contains(chrome))
}

/// 1-based rank of the first acceptable page within the top `k`, if any.
pub fn first_relevant(files: &[String], answers: &[String], k: usize) -> Option<usize> {
    files
        .iter()
        .take(k)
        .position(|f| answers.iter().any(|a| a == f))
        .map(|p| p + 1)
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Scores {
    pub n: usize,
    /// Mean reciprocal rank of the first acceptable page, 0 when none in the top 10.
    pub mrr: f64,
    /// Share of queries with an acceptable page in the top 10.
    pub recall: f64,
    /// Share of queries whose first result is acceptable.
    pub p1: f64,
}

/// Scores over the ranks of the first acceptable page (None: not in the top 10).
pub fn score(ranks: &[Option<usize>]) -> Scores {
    let n = ranks.len();
    if n == 0 {
        return Scores::default();
    }
    let nf = n as f64;
    Scores {
        n,
        mrr: ranks
            .iter()
            .map(|r| r.map_or(0.0, |r| 1.0 / r as f64))
            .sum::<f64>()
            / nf,
        recall: ranks.iter().filter(|r| r.is_some()).count() as f64 / nf,
        p1: ranks.iter().filter(|r| *r == &Some(1)).count() as f64 / nf,
    }
}

/// A group of the table: a category (or "all") and a split (or "all").
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut g = Vec::new();
    for c in CATEGORIES.iter().copied().chain(["all"]) {
        for s in SPLITS.iter().copied().chain(["all"]) {
            g.push((c, s));
        }
    }
    g
}

fn in_group(q: &Query, (c, s): (&str, &str)) -> bool {
    (c == "all" || q.category == c) && (s == "all" || q.split == s)
}

/// Per-ranking, per-query outcome.
pub struct Run {
    pub name: String,
    pub outputs: Vec<SearchOutput>,
}

impl Run {
    fn ranks(&self, queries: &[Query]) -> Vec<Option<usize>> {
        queries
            .iter()
            .zip(&self.outputs)
            .map(|(q, o)| {
                let files: Vec<String> = o.hits.iter().map(|h| h.file.clone()).collect();
                first_relevant(&files, &q.answers, 10)
            })
            .collect()
    }

    pub fn group_scores(&self, queries: &[Query], group: (&str, &str)) -> Scores {
        let ranks = self.ranks(queries);
        let sel: Vec<Option<usize>> = queries
            .iter()
            .zip(ranks)
            .filter(|(q, _)| in_group(q, group))
            .map(|(_, r)| r)
            .collect();
        score(&sel)
    }
}

/// The Markdown report: the table, then the failing queries per ranking.
pub fn markdown(queries: &[Query], full: &Run, base: &Run, header: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{header}\n");
    let _ = writeln!(
        o,
        "| category | split | n | MRR@10 {f} | MRR@10 {b} | Δ MRR | R@10 {f} | R@10 {b} | P@1 {f} | P@1 {b} |",
        f = full.name,
        b = base.name
    );
    let _ = writeln!(o, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for g in groups() {
        let a = full.group_scores(queries, g);
        let b = base.group_scores(queries, g);
        if a.n == 0 {
            continue;
        }
        let bold = |s: String| if g.0 == "all" { format!("**{s}**") } else { s };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {:.3} | {:+.3} | {} | {:.3} | {:.3} | {:.3} |",
            bold(g.0.to_string()),
            g.1,
            a.n,
            bold(format!("{:.3}", a.mrr)),
            b.mrr,
            a.mrr - b.mrr,
            bold(format!("{:.3}", a.recall)),
            b.recall,
            a.p1,
            b.p1,
        );
    }
    for run in [full, base] {
        let errors = run.outputs.iter().filter(|o| o.error.is_some()).count();
        let failing: Vec<_> = queries
            .iter()
            .zip(&run.outputs)
            .zip(run.ranks(queries))
            .filter(|(_, r)| r.is_none())
            .map(|(qo, _)| qo)
            .collect();
        let _ = writeln!(
            o,
            "\n### `{}`: {} of {} queries with no acceptable page in the top 10{}\n",
            run.name,
            failing.len(),
            queries.len(),
            if errors > 0 {
                format!(" ({errors} searches failed)")
            } else {
                String::new()
            }
        );
        if failing.is_empty() {
            continue;
        }
        let _ = writeln!(
            o,
            "| id | split | query | want | first result | did you mean |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|");
        for (q, out) in failing {
            let first = match (&out.error, out.hits.first()) {
                (Some(e), _) => format!("error: {}", e.replace('|', "/")),
                (None, Some(h)) => format!("{} ({})", h.file, h.title.replace('|', "/")),
                (None, None) => "(nothing)".into(),
            };
            let _ = writeln!(
                o,
                "| {} | {} | `{}` | {} | {} | {} |",
                q.id,
                q.split,
                q.text,
                q.answers.join(" "),
                first,
                out.did_you_mean.as_deref().unwrap_or("")
            );
        }
    }
    o
}

/// The numbers as JSON: `{"rankings": {NAME: {CATEGORY: {SPLIT: {n, mrr,
/// recall, p1}}}}, "failures": {NAME: [{id, query, want, first}]}}`.
pub fn json_report(queries: &[Query], runs: &[&Run], meta: Value) -> Value {
    let mut rankings = serde_json::Map::new();
    let mut failures = serde_json::Map::new();
    for run in runs {
        let mut cats: BTreeMap<String, serde_json::Map<String, Value>> = BTreeMap::new();
        for g in groups() {
            let s = run.group_scores(queries, g);
            cats.entry(g.0.to_string()).or_default().insert(
                g.1.to_string(),
                json!({"n": s.n, "mrr": s.mrr, "recall": s.recall, "p1": s.p1}),
            );
        }
        rankings.insert(run.name.clone(), json!(cats));
        let fails: Vec<Value> = queries
            .iter()
            .zip(&run.outputs)
            .zip(run.ranks(queries))
            .filter(|(_, r)| r.is_none())
            .map(|((q, o), _)| {
                json!({
                    "id": q.id, "category": q.category, "split": q.split, "query": q.text,
                    "want": q.answers, "first": o.hits.first().map(|h| h.file.clone()),
                    "did_you_mean": o.did_you_mean, "error": o.error,
                })
            })
            .collect();
        failures.insert(run.name.clone(), Value::Array(fails));
    }
    json!({"meta": meta, "rankings": rankings, "failures": failures})
}

// ---------------------------------------------------------------- server

/// Content type by file extension.
pub fn content_type(name: &str) -> &'static str {
    match name
        .rsplit('.')
        .next()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("js") => "text/javascript; charset=utf-8",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The file a request path names, relative to the corpus directory
/// (`index.html` for `/` and for a path ending in `/`: Sphinx sites have
/// subdirectories); None for anything else (`..`, empty or hidden
/// segments, backslashes), which is answered 404.
pub fn request_file(path: &str) -> Option<String> {
    let p = percent_decode(path.split(['?', '#']).next().unwrap_or(""));
    let name = p.strip_prefix('/')?;
    let name = if name.is_empty() || name.ends_with('/') {
        format!("{name}index.html")
    } else {
        name.to_string()
    };
    if name.contains('\\')
        || name
            .split('/')
            .any(|seg| seg.is_empty() || seg.starts_with('.'))
    {
        return None;
    }
    Some(name)
}

/// A static file server for `dir` on loopback; counts the distinct files
/// served with 200.
pub struct FileServer {
    pub addr: SocketAddr,
    pub served: Arc<Mutex<BTreeSet<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FileServer {
    pub async fn start(dir: PathBuf, ip: std::net::IpAddr) -> std::io::Result<FileServer> {
        assert!(ip.is_loopback(), "the corpus is served on loopback only");
        let listener = TcpListener::bind(SocketAddr::new(ip, 0)).await?;
        let addr = listener.local_addr()?;
        let served: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let dir = Arc::new(dir);
        let served2 = served.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let dir = dir.clone();
                let served = served2.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let dir = dir.clone();
                        let served = served.clone();
                        async move { Ok::<_, std::convert::Infallible>(serve(&dir, &served, req).await) }
                    });
                    let _ = http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Ok(FileServer { addr, served, task })
    }
}

async fn serve(
    dir: &Path,
    served: &Mutex<BTreeSet<String>>,
    req: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, msg: &'static str| {
        Response::builder()
            .status(status)
            .header("content-type", "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from_static(msg.as_bytes())))
            .unwrap()
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    let Some(name) = request_file(req.uri().path()) else {
        return plain(StatusCode::NOT_FOUND, "not found\n");
    };
    match tokio::fs::read(dir.join(&name)).await {
        Ok(body) => {
            served.lock().unwrap().insert(name.clone());
            let len = body.len();
            let body = if req.method() == Method::HEAD {
                Bytes::new()
            } else {
                Bytes::from(body)
            };
            Response::builder()
                .header("content-type", content_type(&name))
                .header("content-length", len)
                .body(Full::new(body))
                .unwrap()
        }
        Err(_) => plain(StatusCode::NOT_FOUND, "not found\n"),
    }
}

// ---------------------------------------------------------------- running

fn from_root(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        repo_root().join(p)
    }
}

async fn corpus_dir() -> Result<PathBuf, String> {
    let script = repo_root().join("scripts/search-corpus.sh");
    let out = tokio::time::timeout(
        Duration::from_secs(900),
        Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| format!("{} did not finish in 900 s", script.display()))?
    .map_err(|e| format!("running {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", script.display(), out.status));
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(PathBuf::from(dir))
}

/// The names of the HTML files under `dir`, at any depth (answers name
/// files by their last path segment).
fn html_file_names(dir: &Path) -> Result<BTreeSet<String>, String> {
    let mut names = BTreeSet::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            // The package's symlinks into /usr/share/javascript are not pages.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                dirs.push(entry.path());
            } else if name.ends_with(".html") {
                names.insert(name);
            }
        }
    }
    Ok(names)
}

/// Runs `cmd` to its end within `limit`, killing it past that. Returns
/// (success, stdout, stderr).
async fn run_bounded(mut cmd: Command, limit: Duration) -> Result<(bool, String, String), String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Err(_) => Err(format!("timed out after {} s", limit.as_secs())),
        Ok(Err(e)) => Err(format!("wait: {e}")),
        Ok(Ok(out)) => Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )),
    }
}

fn last_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

async fn search(
    crawler: &Path,
    db: &Path,
    q: &str,
    ranking: Option<&str>,
    limit: Duration,
) -> SearchOutput {
    let mut cmd = Command::new(crawler);
    cmd.arg("search")
        .arg(q)
        .arg("--db")
        .arg(db)
        .args(["--limit", "10", "--json"]);
    if let Some(r) = ranking {
        cmd.args(["--ranking", r]);
    }
    let started = Instant::now();
    let out = run_bounded(cmd, limit).await;
    let elapsed = started.elapsed();
    let out = match out {
        Err(e) => SearchOutput {
            error: Some(e),
            ..Default::default()
        },
        Ok((false, _, err)) => SearchOutput {
            error: Some(format!("exit: {}", last_line(&err))),
            ..Default::default()
        },
        Ok((true, out, _)) => parse_search_json(&out).unwrap_or_else(|e| SearchOutput {
            error: Some(e),
            ..Default::default()
        }),
    };
    SearchOutput { elapsed, ..out }
}

async fn main_inner(cli: Cli) -> Result<(), String> {
    let queries_path = from_root(&cli.queries);
    let text = std::fs::read_to_string(&queries_path)
        .map_err(|e| format!("{}: {e}", queries_path.display()))?;
    let mut queries =
        parse_queries(&text).map_err(|e| format!("{}: {e}", queries_path.display()))?;
    if let Some(split) = &cli.split {
        queries.retain(|q| &q.split == split);
        if queries.is_empty() {
            return Err(format!("no queries in split {split:?}"));
        }
    }
    let crawler = from_root(&cli.crawler);
    if !crawler.is_file() {
        return Err(format!(
            "{} is missing: build it with `cargo build --release --bin web_crawler`",
            crawler.display()
        ));
    }
    let corpus = match &cli.corpus {
        Some(d) => d.clone(),
        None => corpus_dir().await?,
    };
    if !corpus.join("index.html").is_file() {
        return Err(format!("{}: no index.html", corpus.display()));
    }
    let corpus_files = html_file_names(&corpus)?;
    let missing: Vec<String> = queries
        .iter()
        .flat_map(|q| q.answers.iter().map(move |a| format!("{}: {a}", q.id)))
        .filter(|s| !corpus_files.contains(s.split(": ").nth(1).unwrap()))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "answer pages missing from {}: {}",
            corpus.display(),
            missing.join(", ")
        ));
    }

    let tmp = tempfile::Builder::new()
        .prefix("search-quality-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    let db = match &cli.db {
        Some(d) => d.clone(),
        None => tmp.path().join("crawl.db"),
    };
    let mut crawl_note = String::from("reused");
    let mut served_count = None;
    if !db.exists() {
        if let Some(parent) = db.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let server = FileServer::start(corpus.clone(), [127, 0, 0, 1].into())
            .await
            .map_err(|e| format!("server: {e}"))?;
        let seed = format!("http://{}/index.html", server.addr);
        eprintln!("search_quality: crawling {seed} into {}", db.display());
        let started = Instant::now();
        let mut cmd = Command::new(&crawler);
        cmd.arg("crawl")
            .arg(&seed)
            .arg("--db")
            .arg(&db)
            .args(["--delay-ms", "0", "--quiet"]);
        if cli.semantic {
            cmd.arg("--semantic");
        }
        let res = run_bounded(cmd, Duration::from_secs(cli.crawl_timeout)).await;
        let secs = started.elapsed().as_secs_f64();
        let (ok, out, err) = res.map_err(|e| format!("crawl: {e}"))?;
        let _ = std::fs::write(tmp.path().join("crawl.log"), format!("{out}\n{err}"));
        if !ok {
            return Err(format!("crawl failed: {}", last_line(&err)));
        }
        let served = server.served.lock().unwrap().len();
        served_count = Some(served);
        crawl_note = format!(
            "{served} of {} files served in {secs:.1} s, {:.0} ms a file{}",
            corpus_files.len(),
            1e3 * secs / served.max(1) as f64,
            if cli.semantic { " with --semantic" } else { "" }
        );
        eprintln!("search_quality: crawl done, {crawl_note}");
    }
    let index = PathBuf::from(format!("{}.index", db.display()));
    if !index.exists() {
        eprintln!(
            "search_quality: warning: no index at {} (is indexing on in this build?)",
            index.display()
        );
    }

    let limit = Duration::from_secs(cli.query_timeout);
    let mut full = Run {
        name: "full".into(),
        outputs: Vec::new(),
    };
    let mut base = Run {
        name: cli.baseline.clone(),
        outputs: Vec::new(),
    };
    let started = Instant::now();
    for q in &queries {
        full.outputs
            .push(search(&crawler, &db, &q.text, None, limit).await);
        base.outputs
            .push(search(&crawler, &db, &q.text, Some(&cli.baseline), limit).await);
    }
    eprintln!(
        "search_quality: {} queries x 2 rankings in {:.1} s",
        queries.len(),
        started.elapsed().as_secs_f64()
    );
    for run in [&full, &base] {
        let errs: Vec<&String> = run
            .outputs
            .iter()
            .filter_map(|o| o.error.as_ref())
            .collect();
        if errs.len() == queries.len() {
            return Err(format!(
                "every `{}` search failed, e.g.: {}",
                run.name, errs[0]
            ));
        }
    }

    let snippets: Vec<&Hit> = full.outputs.iter().flat_map(|o| &o.hits).collect();
    let chrome = snippets
        .iter()
        .filter(|h| snippet_has_chrome(&h.snippet))
        .count();
    if cli.json {
        let meta = json!({
            "snippets": snippets.len(),
            "snippets_with_navigation": chrome,
            "corpus": corpus.display().to_string(),
            "corpus_html_files": corpus_files.len(),
            "files_served": served_count,
            "queries": queries.len(),
            "crawler": crawler.display().to_string(),
            "cli_latency_ms": {
                "full": latency_ms(&full.outputs),
                "baseline": latency_ms(&base.outputs),
            },
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&json_report(&queries, &[&full, &base], meta)).unwrap()
        );
    } else {
        let header = format!(
            "## Search quality: {} queries over {} ({} HTML files; crawl: {crawl_note})",
            queries.len(),
            corpus.display(),
            corpus_files.len()
        );
        print!("{}", markdown(&queries, &full, &base, &header));
        println!(
            "\nSnippets of the `full` results carrying the site's navigation text: {chrome} of {}",
            snippets.len()
        );
        for run in [&full, &base] {
            let (p50, p95) = latency_ms(&run.outputs);
            println!(
                "`{}`: `web_crawler search` p50 {p50:.1} ms, p95 {p95:.1} ms (the process, start to exit)",
                run.name
            );
        }
    }
    if cli.keep {
        let kept = tmp.keep();
        eprintln!("search_quality: kept {}", kept.display());
    }
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match main_inner(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("search_quality: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------- tests

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn q(id: &str, cat: &str, split: &str, answers: &[&str]) -> Query {
        Query {
            id: id.into(),
            category: cat.into(),
            split: split.into(),
            text: format!("query {id}"),
            answers: answers.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn out(files: &[&str]) -> SearchOutput {
        SearchOutput {
            hits: files
                .iter()
                .map(|f| Hit {
                    url: format!("http://127.0.0.1:1/{f}"),
                    title: f.to_string(),
                    file: f.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn navigation_in_snippets_is_recognised() {
        assert!(snippet_has_chrome(
            "Prev Up Chapter 9. Functions and Operators Home Next 9.27. System"
        ));
        assert!(snippet_has_chrome("tarfile Next topic csv This Page"));
        assert!(!snippet_has_chrome(
            "pg_cancel_backend cancels the current query of the session"
        ));
    }

    #[test]
    fn parses_the_query_format() {
        let text = "# comment\n\nk1\tkeyword\ttune\tvacuum freeze\ta.html b.html\n\
                    q1\tquestion\tholdout\thow do I x\tc.html\r\n";
        let qs = parse_queries(text).unwrap();
        assert_eq!(qs.len(), 2);
        assert_eq!(qs[0].answers, vec!["a.html", "b.html"]);
        assert_eq!(qs[1].split, "holdout");
        assert_eq!(qs[1].answers, vec!["c.html"]);
    }

    #[test]
    fn rejects_bad_query_lines() {
        for bad in [
            "k1\tkeyword\ttune\tq",                                       // 4 columns
            "k1\tkeywords\ttune\tq\ta.html",                              // category
            "k1\tkeyword\ttrain\tq\ta.html",                              // split
            "k1\tkeyword\ttune\t \ta.html",                               // empty query
            "k1\tkeyword\ttune\tq\t ",                                    // no answers
            "k1\tkeyword\ttune\tq\tdir/a.html",                           // not a file name
            "k1\tkeyword\ttune\tq\ta.html\nk1\tkeyword\ttune\tr\tb.html", // repeated id
            "# only a comment",
        ] {
            assert!(parse_queries(bad).is_err(), "{bad:?} parsed");
        }
        let e = parse_queries("# h\nk1\tkeyword\ttune\tq").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
    }

    /// The project's query set: well formed, at least 90 queries, every
    /// category in both splits, about a third held out; and, when the
    /// corpus is installed, every answer page exists.
    #[test]
    fn the_query_set() {
        let text = std::fs::read_to_string(repo_root().join("bench/search/queries.tsv")).unwrap();
        let qs = parse_queries(&text).unwrap();
        assert!(qs.len() >= 90, "{} queries", qs.len());
        for c in CATEGORIES {
            for s in SPLITS {
                let n = qs
                    .iter()
                    .filter(|q| q.category == c && q.split == s)
                    .count();
                assert!(n >= 10, "{c}/{s}: {n}");
            }
        }
        let holdout = qs.iter().filter(|q| q.split == "holdout").count() as f64;
        let share = holdout / qs.len() as f64;
        assert!((0.25..=0.40).contains(&share), "holdout share {share}");
        let dir = Path::new("/usr/share/doc/postgresql-doc-15/html");
        if dir.join("index.html").is_file() {
            for q in &qs {
                for a in &q.answers {
                    assert!(dir.join(a).is_file(), "{}: {a} missing", q.id);
                }
            }
        }
    }

    #[test]
    fn maps_urls_to_files() {
        assert_eq!(
            url_to_file("http://127.0.0.1:8080/sql-vacuum.html"),
            "sql-vacuum.html"
        );
        assert_eq!(url_to_file("http://127.0.0.1:8080/"), "index.html");
        assert_eq!(
            url_to_file("http://127.0.0.1:8080/a.html?x=1#frag"),
            "a.html"
        );
        assert_eq!(
            url_to_file("http://127.0.0.1:8080/d/a%2Db.html"),
            "a-b.html"
        );
        assert_eq!(url_to_file("not a url/x.html#y"), "x.html");
    }

    #[test]
    fn parses_search_json() {
        let s = r#"{"results":[{"url":"http://127.0.0.1:9/sql-vacuum.html","title":"VACUUM","snippet":"…","score":3.5},
                              {"url":"http://127.0.0.1:9/","title":"Home","snippet":"","score":1.0}],
                   "did_you_mean":"vacuum full"}"#;
        let o = parse_search_json(s).unwrap();
        assert_eq!(o.hits.len(), 2);
        assert_eq!(o.hits[0].file, "sql-vacuum.html");
        assert_eq!(o.hits[0].title, "VACUUM");
        assert_eq!(o.hits[1].file, "index.html");
        assert_eq!(o.did_you_mean.as_deref(), Some("vacuum full"));
        let o = parse_search_json(r#"{"results":[],"did_you_mean":null}"#).unwrap();
        assert!(o.hits.is_empty() && o.did_you_mean.is_none());
        assert!(parse_search_json("oops").is_err());
        assert!(parse_search_json(r#"{"hits":[]}"#).is_err());
    }

    #[test]
    fn first_relevant_and_scores() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let answers = s(&["b", "z"]);
        assert_eq!(first_relevant(&s(&["a", "b", "z"]), &answers, 10), Some(2));
        assert_eq!(first_relevant(&s(&["z"]), &answers, 10), Some(1));
        assert_eq!(first_relevant(&s(&["a", "c"]), &answers, 10), None);
        let eleven: Vec<String> = (0..10)
            .map(|i| format!("x{i}"))
            .chain(["b".into()])
            .collect();
        assert_eq!(
            first_relevant(&eleven, &answers, 10),
            None,
            "rank 11 is out"
        );

        let sc = score(&[Some(1), Some(2), None, Some(4)]);
        assert_eq!(sc.n, 4);
        assert!((sc.mrr - (1.0 + 0.5 + 0.0 + 0.25) / 4.0).abs() < 1e-12);
        assert!((sc.recall - 0.75).abs() < 1e-12);
        assert!((sc.p1 - 0.25).abs() < 1e-12);
        assert_eq!(score(&[]), Scores::default());
    }

    #[test]
    fn groups_and_reports() {
        let qs = vec![
            q("k1", "keyword", "tune", &["a.html"]),
            q("k2", "keyword", "holdout", &["b.html"]),
            q("t1", "typo", "tune", &["c.html", "d.html"]),
        ];
        let full = Run {
            name: "full".into(),
            outputs: vec![
                out(&["a.html"]),
                out(&["x.html", "b.html"]),
                out(&["d.html"]),
            ],
        };
        let base = Run {
            name: "bm25".into(),
            outputs: vec![
                out(&["x.html", "y.html", "a.html"]),
                out(&[]),
                SearchOutput {
                    error: Some("timed out after 60 s".into()),
                    ..Default::default()
                },
            ],
        };
        let kt = full.group_scores(&qs, ("keyword", "tune"));
        assert_eq!((kt.n, kt.mrr, kt.p1), (1, 1.0, 1.0));
        let ka = full.group_scores(&qs, ("keyword", "all"));
        assert_eq!(ka.n, 2);
        assert!((ka.mrr - 0.75).abs() < 1e-12);
        let all = full.group_scores(&qs, ("all", "all"));
        assert_eq!((all.n, all.recall), (3, 1.0));
        let q_none = full.group_scores(&qs, ("question", "all"));
        assert_eq!(q_none.n, 0);
        let b = base.group_scores(&qs, ("all", "tune"));
        assert_eq!(b.n, 2);
        assert!((b.mrr - (1.0 / 3.0) / 2.0).abs() < 1e-12);
        assert!((b.recall - 0.5).abs() < 1e-12);

        let md = markdown(&qs, &full, &base, "## t");
        assert!(
            md.contains("| keyword | tune | 1 | 1.000 | 0.333 | +0.667 |"),
            "{md}"
        );
        assert!(md.contains("`full`: 0 of 3"), "{md}");
        assert!(
            md.contains(
                "`bm25`: 2 of 3 queries with no acceptable page in the top 10 (1 searches failed)"
            ),
            "{md}"
        );
        assert!(md.contains("error: timed out after 60 s"), "{md}");
        assert!(md.contains("(nothing)"), "{md}");
        assert!(
            !md.contains("| question |"),
            "empty groups are left out: {md}"
        );

        let j = json_report(&qs, &[&full, &base], json!({}));
        assert_eq!(j["rankings"]["full"]["keyword"]["all"]["n"], 2);
        assert_eq!(j["rankings"]["bm25"]["all"]["all"]["recall"], 1.0 / 3.0);
        assert_eq!(j["failures"]["bm25"].as_array().unwrap().len(), 2);
        assert_eq!(j["failures"]["full"].as_array().unwrap().len(), 0);
    }

    #[test]
    fn request_paths_and_types() {
        assert_eq!(request_file("/").as_deref(), Some("index.html"));
        assert_eq!(
            request_file("/sql-vacuum.html").as_deref(),
            Some("sql-vacuum.html")
        );
        assert_eq!(request_file("/a.html?x=1").as_deref(), Some("a.html"));
        assert_eq!(request_file("/../etc/passwd"), None);
        assert_eq!(request_file("/%2e%2e%2fetc"), None);
        assert_eq!(request_file("/.hidden"), None);
        assert_eq!(request_file("/d/a.html").as_deref(), Some("d/a.html"));
        assert_eq!(request_file("/d/").as_deref(), Some("d/index.html"));
        assert_eq!(request_file("/d/../../x"), None);
        assert_eq!(request_file("/d//x"), None);
        assert_eq!(content_type("a.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("stylesheet.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("x.SVG"), "image/svg+xml");
        assert_eq!(content_type("x.bin"), "application/octet-stream");
    }

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.unwrap();
        buf
    }

    #[tokio::test]
    async fn serves_the_corpus_on_loopback() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("index.html"), "<a href=\"b.html\">b</a>").unwrap();
        std::fs::write(dir.path().join("b.html"), "<p>bee</p>").unwrap();
        std::fs::write(dir.path().join("s.css"), "p{}").unwrap();
        let server = FileServer::start(dir.path().to_path_buf(), [127, 0, 0, 1].into())
            .await
            .unwrap();
        assert!(server.addr.ip().is_loopback());
        let r = get(server.addr, "/").await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(
            r.to_ascii_lowercase()
                .contains("content-type: text/html; charset=utf-8"),
            "{r}"
        );
        assert!(r.ends_with("<a href=\"b.html\">b</a>"), "{r}");
        let r = get(server.addr, "/s.css").await;
        assert!(
            r.to_ascii_lowercase().contains("content-type: text/css"),
            "{r}"
        );
        let r = get(server.addr, "/b.html").await;
        assert!(r.ends_with("<p>bee</p>"), "{r}");
        assert!(
            get(server.addr, "/nope.html")
                .await
                .starts_with("HTTP/1.1 404")
        );
        assert!(
            get(server.addr, "/../b.html")
                .await
                .starts_with("HTTP/1.1 404")
        );
        let served = server.served.lock().unwrap().clone();
        assert_eq!(
            served.into_iter().collect::<Vec<_>>(),
            vec!["b.html", "index.html", "s.css"]
        );
    }
}
