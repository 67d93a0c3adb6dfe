//! The benchmark (run it with `scripts/bench.sh [small|large][-traps|-text-traps|-shared-text]`):
//! serves a synthetic web on loopback and measures, in one run, the
//! machine's ceilings (a bare fetch loop; the same loop extracting links),
//! web_crawler on the embedded store, as a three-node cluster (`--cluster`)
//! and on MongoDB, and spider-rs — each as a child process (the cluster as
//! three), for its wall time, CPU time and peak memory — and
//! checks what each fetched against the web: pages reached, repeated
//! fetches of one normalized URL, robots.txt violations, requests to trap
//! pages, and when every real page had been fetched.

mod bare_index;
mod cluster;
mod latency;
mod page_cost;
mod server;
mod web;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::process::Command;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the whole benchmark and print the table.
    Run {
        /// small, large, small-traps or large-traps (the same webs with
        /// crawler traps and a product section added), small-text-traps or
        /// large-text-traps (text-rich traps instead), small-shared-text or
        /// large-shared-text, xlarge, million (250 x 4,000 pages, made on
        /// request).
        #[arg(default_value = "small")]
        preset: String,
        /// Fetches in flight, for every contender.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// web_crawler's requests in flight per host.
        #[arg(long, default_value_t = 4)]
        per_host: usize,
        /// web_crawler's delay between requests to one host, in ms: a
        /// polite crawl, whose fetching is not bound by this machine's CPU.
        #[arg(long, default_value_t = 0)]
        delay_ms: u64,
        /// The web_crawler binary (release build).
        #[arg(long, default_value = "target/release/web_crawler")]
        crawler: PathBuf,
        /// MongoDB URI for the MongoDB row (skipped when absent).
        #[arg(long)]
        mongodb: Option<String>,
        /// Give up on a contender after this many seconds.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// Stop the report-only MongoDB row after this many seconds.
        #[arg(long, default_value_t = 120)]
        mongo_timeout: u64,
        /// Skip spider-rs.
        #[arg(long)]
        no_spider: bool,
        /// Also run web_crawler as a three-node cluster on this machine
        /// (`start` + two `node --join`), until its master reports it idle.
        #[arg(long)]
        cluster: bool,
        /// Skip the row (b-), web_crawler with `--no-index` (the indexing cost).
        #[arg(long)]
        no_index_cost: bool,
        /// Skip the query latency measured over (b)'s index.
        #[arg(long)]
        no_query_latency: bool,
        /// Skip (i), the indexing ceiling (a child that generates the web
        /// again: too much memory beside the server on `xlarge`).
        #[arg(long)]
        no_ceiling: bool,
        /// Also print (b)'s and (b-)'s resident memory, CPU per request and
        /// the kernel's share of it as the crawl grows.
        #[arg(long)]
        memory_curve: bool,
    },
    /// Only the query latency table, over an index kept from a run
    /// (`BENCH_KEEP_INDEX=DIR`): for trying a search change without crawling.
    Latency {
        /// The index directory (`DB.index`).
        index: PathBuf,
    },
    /// Child: GET every URL in the file once (optionally extracting links).
    FetchLoop {
        urls: PathBuf,
        #[arg(long)]
        concurrency: usize,
        #[arg(long)]
        extract: bool,
    },
    /// Child: (i) bare tantivy, the indexing ceiling, over the preset's
    /// pages' visible text, into an index in DIR.
    BareIndex {
        preset: String,
        dir: PathBuf,
        /// Through web_crawler's own index instead (its CPU alone, without
        /// a crawl: for profiling it).
        #[arg(long)]
        ours: bool,
        /// With `--ours`: the pages without their links (no anchors index,
        /// no anchor context), to price the links apart.
        #[arg(long, requires = "ours")]
        no_links: bool,
    },
    /// What one page costs the crawl's CPU, stage by stage (extraction
    /// with and without the text the trap defence reads, its reading of
    /// the text, the trap guard; extraction for the index and indexing),
    /// over the preset's pages: no network, no store.
    PageCost {
        #[arg(default_value = "large")]
        preset: String,
        /// Pages measured (the first of the preset's real pages).
        #[arg(long, default_value_t = 2000)]
        pages: usize,
        /// One stage alone (links, text, read, guard, index-text, index;
        /// none: only make the pages), for `perf stat -e instructions:u`.
        #[arg(long)]
        only: Option<String>,
    },
    /// Child: spider-rs crawling from the seed over the listed hosts.
    Spider {
        seed: String,
        hosts: PathBuf,
        #[arg(long)]
        concurrency: usize,
    },
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Run {
            preset,
            concurrency,
            per_host,
            delay_ms,
            crawler,
            mongodb,
            timeout,
            mongo_timeout,
            no_spider,
            cluster,
            no_index_cost,
            no_query_latency,
            no_ceiling,
            memory_curve,
        } => {
            let preset_name = preset;
            let Some(preset) = web::Preset::named(&preset_name) else {
                eprintln!(
                    "unknown preset {preset_name:?}: one of {}",
                    web::PRESETS.join(", ")
                );
                std::process::exit(2);
            };
            let contenders = Contenders {
                concurrency,
                per_host,
                delay_ms,
                crawler,
                mongodb,
                timeout: Duration::from_secs(timeout),
                mongo_timeout: Duration::from_secs(mongo_timeout),
                no_spider,
                cluster,
                no_index_cost,
                no_query_latency,
                no_ceiling,
                memory_curve,
            };
            run(&preset_name, preset, contenders).await;
        }
        Cmd::Latency { index } => {
            let queries = latency::queries(42);
            let inp = latency::in_process(&index, &queries);
            latency::print(&queries, &inp, None);
        }
        Cmd::BareIndex {
            preset,
            dir,
            ours,
            no_links,
        } => {
            let preset = web::Preset::named(&preset).expect("a preset");
            let what = match (ours, no_links) {
                (false, _) => bare_index::Indexed::Bare,
                (true, false) => bare_index::Indexed::Ours,
                (true, true) => bare_index::Indexed::OursWithoutLinks,
            };
            bare_index::run(preset, &dir, what);
        }
        Cmd::PageCost {
            preset,
            pages,
            only,
        } => {
            let named = web::Preset::named(&preset).expect("a preset");
            page_cost::run(&preset, named, pages, only.as_deref());
        }
        Cmd::FetchLoop {
            urls,
            concurrency,
            extract,
        } => fetch_loop(urls, concurrency, extract).await,
        Cmd::Spider {
            seed,
            hosts,
            concurrency,
        } => spider_crawl(seed, hosts, concurrency).await,
    }
}

/// One contender's numbers.
struct Row {
    name: String,
    requests: u64,
    wall: Duration,
    cpu: Duration,
    peak_rss_kb: u64,
    /// Peaks of anonymous and file-backed (mapped files) resident memory.
    peak_anon_kb: u64,
    peak_file_kb: u64,
    reached: usize,
    repeated: usize,
    robots_violations: u64,
    /// Requests to trap pages.
    trap_requests: u64,
    /// From the contender's start to the first time every real page had
    /// been fetched.
    all_real_at: Option<Duration>,
    /// From the contender's start to the last request it made.
    last_request_at: Option<Duration>,
    note: String,
}

/// Resident memory and CPU time at one moment of a crawl, and how far
/// the crawl was.
#[derive(Clone, Copy)]
struct CrawlSample {
    anon_kb: u64,
    file_kb: u64,
    /// CPU time so far, in clock ticks (`/proc/PID/stat`).
    user_ticks: u64,
    system_ticks: u64,
    /// Real pages fetched by then.
    reached: usize,
    /// Requests the server had answered by then.
    requests: u64,
}

/// A crawl sampled once a second against the server's counters.
struct CrawlCurve {
    samples: Vec<CrawlSample>,
    /// The kernel's part of the whole run's CPU time (`getrusage`).
    system_cpu: Duration,
}

/// What a child cost: wall time, CPU time, peak RSS.
struct Cost {
    started: Instant,
    wall: Duration,
    cpu: Duration,
    peak_rss_kb: u64,
    peak_anon_kb: u64,
    peak_file_kb: u64,
    ok: bool,
    /// Stopped at its time limit (then `ok` is false).
    timed_out: bool,
    stderr: String,
    /// When measured with the server's counters.
    curve: Option<CrawlCurve>,
}

fn children_cpu() -> Duration {
    cpu_of(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
}

/// User + system CPU time of `who` (`getrusage`).
fn cpu_of(who: nix::sys::resource::UsageWho) -> Duration {
    let (user, system) = user_and_system_cpu(who);
    user + system
}

/// User and system CPU time of `who` (`getrusage`).
fn user_and_system_cpu(who: nix::sys::resource::UsageWho) -> (Duration, Duration) {
    nix::sys::resource::getrusage(who)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| {
                Duration::from_secs(tv.tv_sec() as u64) + Duration::from_micros(tv.tv_usec() as u64)
            };
            (t(u.user_time()), t(u.system_time()))
        })
        .unwrap_or_default()
}

/// A process's user and system CPU time so far, in clock ticks (`utime`
/// and `stime` of `/proc/PID/stat`).
fn cpu_ticks(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (in parentheses, and it may hold spaces) come
    // fields 3 (state) to 13; utime and stime are fields 14 and 15.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace().skip(11);
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// Clock ticks per second, the unit of [`cpu_ticks`].
fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf reads a system constant; no memory is passed.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// A child's peak RSS (`VmHWM`).
fn vm_hwm_kb(pid: u32) -> Option<u64> {
    memory_kb(pid).map(|(hwm, _, _)| hwm)
}

/// A child's peak RSS (`VmHWM`) and its anonymous and file-backed resident
/// memory now (`RssAnon`, `RssFile`), in kB.
fn memory_kb(pid: u32) -> Option<(u64, u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some((field("VmHWM:")?, field("RssAnon:")?, field("RssFile:")?))
}

async fn measure(cmd: Command, timeout: Duration) -> Cost {
    measure_crawl(cmd, timeout, None).await
}

/// [`measure`], sampling resident memory and CPU time once a second
/// against the real pages fetched and the requests `hits` has seen.
async fn measure_crawl(mut cmd: Command, timeout: Duration, hits: Option<&server::Hits>) -> Cost {
    let (user_before, system_before) =
        user_and_system_cpu(nix::sys::resource::UsageWho::RUSAGE_CHILDREN);
    let started = Instant::now();
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the contender");
    let pid = child.id().unwrap_or(0);
    let (mut peak, mut peak_anon, mut peak_file) = (0, 0, 0);
    let mut stderr = child.stderr.take().unwrap();
    let err_task = tokio::spawn(async move {
        let mut s = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut s).await;
        s
    });
    let mut timed_out = false;
    let mut samples = Vec::new();
    let mut next_sample = Duration::ZERO;
    let ok = loop {
        if let Some((hwm, anon, file)) = memory_kb(pid) {
            peak = peak.max(hwm);
            peak_anon = peak_anon.max(anon);
            peak_file = peak_file.max(file);
            if let Some(hits) = hits
                && started.elapsed() >= next_sample
                && let Some((user_ticks, system_ticks)) = cpu_ticks(pid)
            {
                next_sample += Duration::from_secs(1);
                samples.push(CrawlSample {
                    anon_kb: anon,
                    file_kb: file,
                    user_ticks,
                    system_ticks,
                    reached: hits.real_reached(),
                    requests: hits.requests(),
                });
            }
        }
        tokio::select! {
            status = child.wait() => break status.map(|s| s.success()).unwrap_or(false),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {
                if started.elapsed() > timeout {
                    let _ = child.kill().await;
                    timed_out = true;
                    break false;
                }
            }
        }
    };
    let wall = started.elapsed();
    let (user_after, system_after) =
        user_and_system_cpu(nix::sys::resource::UsageWho::RUSAGE_CHILDREN);
    let system_cpu = system_after.saturating_sub(system_before);
    Cost {
        started,
        wall,
        cpu: user_after.saturating_sub(user_before) + system_cpu,
        peak_rss_kb: peak,
        peak_anon_kb: peak_anon,
        peak_file_kb: peak_file,
        ok,
        timed_out,
        stderr: err_task.await.unwrap_or_default(),
        curve: hits.map(|_| CrawlCurve {
            samples,
            system_cpu,
        }),
    }
}

/// Memory and CPU as the crawl grows: the peaks of anonymous and
/// file-backed memory while each tenth of the real pages was fetched, and
/// after the last (the index catching up), with the requests served over
/// each, the CPU time per request and the kernel's share of it: flat rows
/// mean a page costs no more as the crawl grows. `requests` is the whole
/// crawl's.
fn print_crawl_curve(name: &str, cost: &Cost, requests: u64, total: usize) {
    let Some(curve) = &cost.curve else {
        return;
    };
    if curve.samples.is_empty() || total == 0 {
        return;
    }
    println!();
    println!(
        "Memory and CPU as the crawl grows, {name}: peaks while each tenth of the real pages was fetched, CPU over it"
    );
    println!();
    println!(
        "| real pages fetched | samples | anon MB | file MB | requests | CPU ms per request | kernel % |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|");
    let mut rows: Vec<(String, Vec<&CrawlSample>)> = (1..=10)
        .map(|tenth| (format!("to {}%", tenth * 10), Vec::new()))
        .collect();
    rows.push(("after the last".to_string(), Vec::new()));
    let mut done = false;
    for s in &curve.samples {
        let row = if done {
            10
        } else {
            ((s.reached * 10).saturating_sub(1) / total).min(9)
        };
        done |= s.reached >= total;
        rows[row].1.push(s);
    }
    let ticks_per_ms = clock_ticks_per_s() / 1000.0;
    // Each row's CPU and requests run from the previous row's last sample
    // (the first row's from the start, at zero) to its own last.
    let (mut user_before, mut system_before, mut requests_before) = (0, 0, 0);
    for (label, samples) in rows.iter().filter(|(_, s)| !s.is_empty()) {
        let peak = |f: fn(&CrawlSample) -> u64| samples.iter().map(|s| f(s)).max().unwrap_or(0);
        let last = samples[samples.len() - 1];
        let user = last.user_ticks.saturating_sub(user_before);
        let system = last.system_ticks.saturating_sub(system_before);
        let served = last.requests.saturating_sub(requests_before);
        (user_before, system_before, requests_before) =
            (last.user_ticks, last.system_ticks, last.requests);
        println!(
            "| {label} | {} | {:.0} | {:.0} | {served} | {} | {} |",
            samples.len(),
            mb(peak(|s| s.anon_kb)),
            mb(peak(|s| s.file_kb)),
            ms_per_request((user + system) as f64 / ticks_per_ms, served),
            percent(system as f64, (user + system) as f64),
        );
    }
    let cpu = cost.cpu.as_secs_f64();
    println!();
    println!(
        "{name}, the whole run: {requests} requests, {} ms of CPU per request, {} % of it in the kernel",
        ms_per_request(cpu * 1000.0, requests),
        percent(curve.system_cpu.as_secs_f64(), cpu),
    );
}

fn ms_per_request(ms: f64, requests: u64) -> String {
    if requests == 0 {
        "-".to_string()
    } else {
        format!("{:.2}", ms / requests as f64)
    }
}

fn percent(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.0}", 100.0 * part / whole)
    } else {
        "-".to_string()
    }
}

fn score(name: &str, web: &web::Web, hits: &server::Hits, cost: Cost) -> Row {
    let all = hits.all();
    let requests: u64 = all.iter().map(|(_, n, _)| u64::from(*n)).sum();
    let trap_requests: u64 = all
        .iter()
        .filter(|(_, _, c)| *c == web::Class::Trap)
        .map(|(_, n, _)| u64::from(*n))
        .sum();
    let canonical = web.canonical();
    let reached = canonical.iter().filter(|(h, p)| hits.of(*h, p) > 0).count();
    // A real page left out is a bug to chase: say which.
    let missed: Vec<String> = canonical
        .iter()
        .filter(|(h, p)| hits.of(*h, p) == 0)
        .take(20)
        .map(|(h, p)| format!("host {h} {p}"))
        .collect();
    if !missed.is_empty() {
        eprintln!(
            "{name}: {} real pages not reached, e.g. {missed:?}",
            canonical.len() - reached
        );
    }
    let repeated = all
        .iter()
        .filter(|((_, p), n, _)| *n > 1 && p != "/robots.txt")
        .count();
    let robots_violations = all
        .iter()
        .filter(|((_, p), _, _)| p.starts_with("/private/") || p.starts_with("/~admin/"))
        .map(|(_, n, _)| u64::from(*n))
        .sum();
    let all_real_at = hits
        .all_real_at()
        .map(|t| t.saturating_duration_since(cost.started));
    let last_request_at = hits
        .last_at()
        .map(|t| t.saturating_duration_since(cost.started));
    let last = cost.stderr.lines().last().unwrap_or("").trim();
    let note = if cost.ok {
        String::new()
    } else if cost.timed_out {
        format!("timed out: stopped after {:.0} s", cost.wall.as_secs_f64())
    } else {
        format!("failed: {last}")
    };
    Row {
        name: name.to_string(),
        requests,
        wall: cost.wall,
        cpu: cost.cpu,
        peak_rss_kb: cost.peak_rss_kb,
        peak_anon_kb: cost.peak_anon_kb,
        peak_file_kb: cost.peak_file_kb,
        reached,
        repeated,
        robots_violations,
        trap_requests,
        all_real_at,
        last_request_at,
        note,
    }
}

/// How the contenders run (the flags of `bench run`).
struct Contenders {
    concurrency: usize,
    per_host: usize,
    delay_ms: u64,
    crawler: PathBuf,
    mongodb: Option<String>,
    timeout: Duration,
    mongo_timeout: Duration,
    no_spider: bool,
    cluster: bool,
    no_index_cost: bool,
    no_query_latency: bool,
    no_ceiling: bool,
    memory_curve: bool,
}

async fn run(preset_name: &str, preset: web::Preset, contenders: Contenders) {
    let Contenders {
        concurrency,
        per_host,
        delay_ms,
        crawler,
        mongodb,
        timeout,
        mongo_timeout,
        no_spider,
        cluster,
        no_index_cost,
        no_query_latency,
        no_ceiling,
        memory_curve,
    } = contenders;
    let port = {
        let l = std::net::TcpListener::bind("127.0.20.1:0").expect("bind");
        l.local_addr().unwrap().port()
    };
    let web = Arc::new(web::Web::generate(preset, port, 42));
    let srv = server::Server::start(web.clone())
        .await
        .expect("serve the web");
    let total = web.canonical().len();
    // Removed when the run ends: each large run leaves ~500 MB of store.
    let work_dir = tempfile::Builder::new()
        .prefix("web_crawler_bench_")
        .tempdir()
        .expect("bench work dir");
    let work = work_dir.path();
    let urls_file = work.join("urls.txt");
    let urls: Vec<String> = web
        .canonical()
        .iter()
        .map(|(h, p)| format!("http://{}:{}{p}", web.ips[*h], port))
        .collect();
    std::fs::write(&urls_file, urls.join("\n")).unwrap();
    let hosts_file = work.join("hosts.txt");
    let hosts: Vec<String> = web.ips.iter().map(|ip| format!("{ip}:{port}")).collect();
    std::fs::write(&hosts_file, hosts.join("\n")).unwrap();
    let me = std::env::current_exe().unwrap();
    eprintln!(
        "web: {} hosts x {} pages ({} canonical pages), concurrency {concurrency}",
        preset.hosts, preset.pages, total
    );
    if preset.shared {
        eprintln!(
            "shared text: every host's pages share paragraphs; roots, section indexes and content pages are the canonical pages"
        );
    }
    if preset.traps {
        if preset.products() > 0 {
            eprintln!(
                "product section: host {} ({}), {} list pages + {} products (counted in the canonical pages)",
                web::PRODUCT_HOST,
                web.ips[web::PRODUCT_HOST],
                preset.product_lists(),
                preset.products()
            );
        }
        for h in preset.trap_hosts() {
            let families: Vec<_> = web.families(h).iter().map(|f| f.name()).collect();
            eprintln!("traps: host {h} ({}): {}", web.ips[h], families.join(", "));
        }
    }

    let mut rows = Vec::new();
    let mut bare = None;
    for (name, extract) in [
        ("(a) bare fetch loop", false),
        ("(a') fetch + extract links", true),
    ] {
        srv.hits.reset();
        let mut cmd = Command::new(&me);
        cmd.arg("fetch-loop")
            .arg(&urls_file)
            .args(["--concurrency", &concurrency.to_string()]);
        if extract {
            cmd.arg("--extract");
        }
        let cost = measure(cmd, timeout).await;
        rows.push(score(name, &web, &srv.hits, cost));
        eprintln!("done: {name}");
    }
    // How web_crawler crawls, in every row (each node of the cluster too).
    let tuning: Vec<String> = [
        "--scope",
        "any",
        "--delay-ms",
        &delay_ms.to_string(),
        "--concurrency",
        &concurrency.to_string(),
        "--per-host",
        &per_host.to_string(),
    ]
    .map(String::from)
    .to_vec();
    let crawler_args = |store: Vec<String>| {
        let mut cmd = Command::new(&crawler);
        cmd.arg("crawl")
            .arg(web.seed_url())
            .args(store)
            .args(&tuning)
            .arg("--quiet")
            .env("RUST_LOG", "error");
        cmd
    };
    srv.hits.reset();
    let db = work.join("bench.db");
    let cost = measure_crawl(
        crawler_args(vec!["--db".into(), db.display().to_string()]),
        timeout,
        Some(&srv.hits),
    )
    .await;
    if memory_curve {
        // At once: a later row failing (or the machine running out of
        // memory on a large web) does not lose it.
        print_crawl_curve("(b)", &cost, srv.hits.requests(), total);
    }
    rows.push(score(
        "(b) web_crawler, embedded store",
        &web,
        &srv.hits,
        cost,
    ));
    eprintln!("done: (b)");
    if !no_index_cost {
        // The same crawl without the full-text index, right after (b), in a
        // directory of its own removed at once (the store is ~500 MB on large).
        srv.hits.reset();
        let dir = work.join("no-index");
        std::fs::create_dir_all(&dir).expect("bench work dir");
        let mut cmd = crawler_args(vec![
            "--db".into(),
            dir.join("bench.db").display().to_string(),
        ]);
        cmd.arg("--no-index");
        let cost = measure_crawl(cmd, timeout, Some(&srv.hits)).await;
        if memory_curve {
            print_crawl_curve("(b-)", &cost, srv.hits.requests(), total);
        }
        rows.push(score("(b-) web_crawler, no index", &web, &srv.hits, cost));
        let _ = std::fs::remove_dir_all(&dir);
        eprintln!("done: (b-)");
    }
    if !no_index_cost && !no_ceiling {
        // (i), then web_crawler's index alone over the same pages, with
        // and without the links: what the links cost, and what the crawl
        // adds to the index's own work.
        let alone =
            |args: &'static [&'static str]| index_alone(&me, preset_name, work, args, timeout);
        let ceiling = alone(&[]).await;
        eprintln!("done: (i)");
        let with_links = alone(&["--ours"]).await.map(|(_, cpu)| cpu);
        let without_links = alone(&["--ours", "--no-links"]).await.map(|(_, cpu)| cpu);
        eprintln!("done: web_crawler's index alone");
        bare = ceiling.map(|(text_bytes, cpu)| Ceiling {
            text_bytes,
            cpu,
            alone: with_links,
            alone_without_links: without_links,
        });
    }
    // The queries are words of the `/p/N` web, which the shared-text web
    // does not use.
    let latency = if no_query_latency || preset.shared {
        None
    } else {
        // The crawl's index is `DB.index`, beside its store.
        let queries = Arc::new(latency::queries(42));
        let index_dir = web_crawler::search::index_dir_for(&db);
        if let Ok(keep) = std::env::var("BENCH_KEEP_INDEX") {
            // For `bench latency DIR` afterwards, without crawling again.
            let status = std::process::Command::new("cp")
                .arg("-r")
                .arg(&index_dir)
                .arg(&keep)
                .status();
            eprintln!("index of (b) kept in {keep}: {status:?}");
        }
        let inp = {
            let queries = queries.clone();
            tokio::task::spawn_blocking(move || latency::in_process(&index_dir, &queries))
                .await
                .expect("the in-process searches")
        };
        let cli = if inp.is_ok() {
            Some(latency::cli(&crawler, &db, &queries).await)
        } else {
            None
        };
        eprintln!("done: query latency");
        Some((queries, inp, cli))
    };
    if cluster {
        srv.hits.reset();
        let cost = cluster::measure(cluster::Spec {
            crawler: &crawler,
            seed: &web.seed_url(),
            flags: &tuning,
            work,
            timeout,
        })
        .await;
        rows.push(score(
            "(b3) web_crawler, 3-node cluster, embedded store",
            &web,
            &srv.hits,
            cost,
        ));
        eprintln!("done: (b3)");
    }
    if let Some(uri) = &mongodb {
        srv.hits.reset();
        let database = format!("bench_{}", std::process::id());
        let cost = measure(
            crawler_args(vec![
                "--mongodb".into(),
                uri.clone(),
                "--mongodb-database".into(),
                database,
            ]),
            mongo_timeout,
        )
        .await;
        rows.push(score(
            "(c) web_crawler, MongoDB store*",
            &web,
            &srv.hits,
            cost,
        ));
        eprintln!("done: (c)");
    }
    if !no_spider {
        srv.hits.reset();
        let mut cmd = Command::new(&me);
        cmd.arg("spider")
            .arg(web.seed_url())
            .arg(&hosts_file)
            .args(["--concurrency", &concurrency.to_string()]);
        let cost = measure(cmd, timeout).await;
        rows.push(score("(d) spider-rs", &web, &srv.hits, cost));
        eprintln!("done: (d)");
    }
    print_table(&rows, total);
    print_index_cost(&rows, bare);
    if let Some((queries, inp, cli)) = &latency {
        latency::print(queries, inp, cli.as_ref());
    }
}

fn pages_per_s(r: &Row) -> f64 {
    r.requests as f64 / r.wall.as_secs_f64().max(1e-9)
}

/// (i) bare tantivy's text and CPU, and web_crawler's index alone over the
/// same pages (`bare-index --ours`, with and without the links).
struct Ceiling {
    text_bytes: f64,
    cpu: f64,
    /// `bare-index --ours`: CPU seconds.
    alone: Option<f64>,
    /// `bare-index --ours --no-links`: CPU seconds.
    alone_without_links: Option<f64>,
}

/// A `bare-index` child over the preset's pages with `args`, in a
/// directory removed after it: (text bytes, CPU seconds).
async fn index_alone(
    me: &std::path::Path,
    preset_name: &str,
    work: &std::path::Path,
    args: &[&str],
    timeout: Duration,
) -> Option<(f64, f64)> {
    let dir = work.join("bare-index");
    std::fs::create_dir_all(&dir).expect("bench work dir");
    let mut cmd = Command::new(me);
    cmd.arg("bare-index").arg(preset_name).arg(&dir).args(args);
    let cost = measure(cmd, timeout).await;
    let _ = std::fs::remove_dir_all(&dir);
    bare_index_result(&cost)
}

/// What a `bare-index` child indexed: visible-text bytes and the CPU
/// seconds its indexing took (the child's last stderr line).
fn bare_index_result(cost: &Cost) -> Option<(f64, f64)> {
    let line = cost
        .stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("bare-index "))?;
    let mut parts = line.split_whitespace().skip(1);
    let bytes: f64 = parts.next()?.parse().ok()?;
    let cpu: f64 = parts.next()?.parse().ok()?;
    Some((bytes, cpu))
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// The indexing cost: the index's CPU ((b) − (b-)) against the ceiling (i)
/// bare tantivy on the same pages' visible text; fetching (last request)
/// and the whole run with the index against without; memory.
fn print_index_cost(rows: &[Row], bare: Option<Ceiling>) {
    let find = |p: &str| rows.iter().find(|r| r.name.starts_with(p));
    let (Some(with), Some(without)) = (find("(b) "), find("(b-) ")) else {
        return;
    };
    println!();
    if !with.note.is_empty() || !without.note.is_empty() {
        println!("indexing cost: not measured ((b) or (b-) did not finish)");
        return;
    }
    let index_cpu = (with.cpu.as_secs_f64() - without.cpu.as_secs_f64()).max(1e-9);
    println!("| indexing | visible text MB | CPU s | MB per CPU s | share of (i) |");
    println!("|---|---:|---:|---:|---:|");
    match bare {
        Some(Ceiling {
            text_bytes,
            cpu,
            alone,
            alone_without_links,
        }) => {
            let text_mb = text_bytes / 1e6;
            let ceiling = text_mb / cpu.max(1e-9);
            let ours = text_mb / index_cpu;
            println!(
                "| (i) bare tantivy (1 positional field, default tokenizer, 1 writer thread) | {text_mb:.0} | {cpu:.2} | {ceiling:.1} | 100% |"
            );
            for (name, cpu) in [
                (
                    "web_crawler's index alone, no crawl (pages and links)",
                    alone,
                ),
                (
                    "web_crawler's index alone, no crawl, pages without links",
                    alone_without_links,
                ),
            ] {
                if let Some(cpu) = cpu {
                    let rate = text_mb / cpu.max(1e-9);
                    println!(
                        "| {name} | {text_mb:.0} | {cpu:.2} | {rate:.1} | {:.0}% |",
                        100.0 * rate / ceiling
                    );
                }
            }
            println!(
                "| web_crawler's index: CPU s of (b) − (b-) | {text_mb:.0} | {index_cpu:.2} | {ours:.1} | {:.0}% (target ≥ 70%) |",
                100.0 * ours / ceiling
            );
        }
        None => println!("| (i) bare tantivy | not measured | | | |"),
    }
    let secs = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64());
    let (last_with, last_without) = (secs(with.last_request_at), secs(without.last_request_at));
    println!();
    println!(
        "fetching: last request at {last_with:.2} s with the index, {last_without:.2} s without: {:.2}x (target ≤ 1.25x)",
        last_with / last_without
    );
    println!(
        "whole run: {:.2} s with the index, {:.2} s without: {:.2}x (target ≤ 3.0x); indexing after the last request {:.2} s",
        with.wall.as_secs_f64(),
        without.wall.as_secs_f64(),
        with.wall.as_secs_f64() / without.wall.as_secs_f64().max(1e-9),
        with.wall.as_secs_f64() - last_with,
    );
    println!(
        "peak RSS: {:.0} MB with the index (anonymous {:.0}, file-backed {:.0}; target ≤ 192), {:.0} MB without (anonymous {:.0}, file-backed {:.0})",
        mb(with.peak_rss_kb),
        mb(with.peak_anon_kb),
        mb(with.peak_file_kb),
        mb(without.peak_rss_kb),
        mb(without.peak_anon_kb),
        mb(without.peak_file_kb),
    );
    println!(
        "indexing cost: 1 − (b) {:.0} pages/s ÷ (b-) {:.0} pages/s = {:.1}% of crawl throughput; CPU s {:.2} with the index, {:.2} without (+{:.0}%)",
        pages_per_s(with),
        pages_per_s(without),
        100.0 * (1.0 - pages_per_s(with) / pages_per_s(without)),
        with.cpu.as_secs_f64(),
        without.cpu.as_secs_f64(),
        100.0 * (with.cpu.as_secs_f64() / without.cpu.as_secs_f64().max(1e-9) - 1.0),
    );
}

fn print_table(rows: &[Row], total: usize) {
    let ceiling = rows
        .iter()
        .find(|r| r.name.starts_with("(a')"))
        .map(|r| r.requests as f64 / r.wall.as_secs_f64());
    let bare = rows
        .iter()
        .find(|r| r.name.starts_with("(a)"))
        .map(|r| r.requests as f64 / r.wall.as_secs_f64());
    println!(
        "| run | requests | pages/s | wall s | last req s | CPU s | peak RSS MB | anon / file MB | % of (a') | % of (a) | reached | repeated | robots violations | trap reqs | trap % | all real at s | finish / all-real |"
    );
    println!(
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in rows {
        let rate = r.requests as f64 / r.wall.as_secs_f64().max(1e-9);
        let pct =
            |c: Option<f64>| c.map_or("-".to_string(), |c| format!("{:.0}%", 100.0 * rate / c));
        let trap_pct = if r.requests == 0 {
            "-".to_string()
        } else {
            format!("{:.2}%", 100.0 * r.trap_requests as f64 / r.requests as f64)
        };
        // The ratio only for a contender that finished (a stopped one's wall
        // time is its time limit, not a finish).
        let all_real = r
            .all_real_at
            .map_or(String::new(), |t| format!("{:.2}", t.as_secs_f64()));
        let ratio = match r.all_real_at {
            Some(t) if r.note.is_empty() => {
                format!("{:.2}", r.wall.as_secs_f64() / t.as_secs_f64().max(1e-9))
            }
            _ => String::new(),
        };
        println!(
            "| {}{} | {} | {:.0} | {:.2} | {} | {:.2} | {:.0} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} |",
            r.name,
            if r.note.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.note)
            },
            r.requests,
            rate,
            r.wall.as_secs_f64(),
            r.last_request_at
                .map_or(String::new(), |t| format!("{:.2}", t.as_secs_f64())),
            r.cpu.as_secs_f64(),
            r.peak_rss_kb as f64 / 1024.0,
            if r.peak_anon_kb == 0 {
                String::new()
            } else {
                format!("{:.0} / {:.0}", mb(r.peak_anon_kb), mb(r.peak_file_kb))
            },
            pct(ceiling),
            pct(bare),
            r.reached,
            total,
            r.repeated,
            r.robots_violations,
            r.trap_requests,
            trap_pct,
            all_real,
            ratio
        );
    }
}

/// (a) and (a'): every canonical URL once, `concurrency` in flight.
async fn fetch_loop(urls: PathBuf, concurrency: usize, extract: bool) {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let urls: Arc<Vec<String>> = Arc::new(
        std::fs::read_to_string(urls)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect(),
    );
    let client: Client<_, Empty<bytes::Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(concurrency)
        .build_http();
    let next = Arc::new(AtomicUsize::new(0));
    let links = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (urls, client, next, links) =
            (urls.clone(), client.clone(), next.clone(), links.clone());
        tasks.push(tokio::spawn(async move {
            let opts = web_crawler::normalize::NormalizeOptions::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(url) = urls.get(i) else { return };
                let Ok(resp) = client.get(url.parse().unwrap()).await else {
                    continue;
                };
                let Ok(body) = resp.into_body().collect().await else {
                    continue;
                };
                if extract {
                    let body = body.to_bytes();
                    let (text, _) = web_crawler::extract::decode_body(&body, Some("text/html"));
                    let page = url::Url::parse(url).unwrap();
                    let found = web_crawler::extract::extract_html(&text, &page, &opts, 0);
                    links.fetch_add(found.links.len(), Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    eprintln!("links extracted: {}", links.load(Ordering::Relaxed));
}

/// (d): spider-rs with robots.txt on and no delay, allowed on every host.
async fn spider_crawl(seed: String, hosts: PathBuf, concurrency: usize) {
    // Every host of the web, in the forms spider matches external domains by.
    let hosts: Vec<String> = std::fs::read_to_string(hosts)
        .unwrap()
        .lines()
        .flat_map(|h| {
            let ip = h.split(':').next().unwrap_or(h).to_string();
            [format!("http://{h}"), h.to_string(), ip]
        })
        .collect();
    let mut website = spider::website::Website::new(&seed);
    website
        .with_respect_robots_txt(true)
        .with_delay(0)
        .with_external_domains(Some(hosts.into_iter()))
        .with_concurrency_limit(Some(concurrency));
    website.crawl().await;
    eprintln!("spider links: {}", website.get_links().len());
}
