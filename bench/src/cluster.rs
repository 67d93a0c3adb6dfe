//! (b3): web_crawler as a three-node cluster on one machine, measured like
//! the single-process rows. `web_crawler start` (the master, on the
//! embedded store) and two `web_crawler node --join` workers, each with the
//! crawl flags of (b); once the master sees the three pools the seed is
//! queued with `web_crawler add-url`, then `web_crawler status --json` is
//! polled until the master reports the crawl idle, and the three processes
//! are stopped with SIGTERM (as a service manager would), all bounded by
//! the run's timeout.
//!
//! The clock (wall s, all real at s) starts when the seed is queued and
//! stops when the master reports the crawl idle (polled every 200 ms, so up
//! to ~0.3 s late), or for a run that never goes idle when its processes
//! have exited; the cluster's start-up and each node's stop time are
//! printed on stderr (a node's stop is not the crawl's). CPU s is the three processes' (the `status` and
//! `add-url` commands' own CPU is taken out); peak RSS is the sum of the
//! three processes' peaks.

use super::{Cost, children_cpu, vm_hwm_kb};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// How often the master is asked whether the crawl is idle.
const POLL: Duration = Duration::from_millis(200);
/// How long a node may take to stop after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// The cluster's three nodes: name, and the address it listens on.
const NODES: [(&str, Ipv4Addr); 3] = [
    ("master", Ipv4Addr::new(127, 0, 21, 1)),
    ("w1", Ipv4Addr::new(127, 0, 21, 2)),
    ("w2", Ipv4Addr::new(127, 0, 21, 3)),
];

/// A free port on `ip` (bound, then released for the node to take).
fn free_addr(ip: Ipv4Addr) -> SocketAddr {
    let l = std::net::TcpListener::bind((ip, 0)).expect("bind a cluster address");
    l.local_addr().unwrap()
}

struct Node {
    name: &'static str,
    child: Child,
    pid: u32,
    stderr: PathBuf,
}

/// The cluster run: the crawler binary, the seed, the crawl flags every
/// node takes (those of (b)), a scratch directory, the time limit.
pub struct Spec<'a> {
    pub crawler: &'a Path,
    pub seed: &'a str,
    pub flags: &'a [String],
    pub work: &'a Path,
    pub timeout: Duration,
}

struct Ctl<'a> {
    crawler: &'a Path,
    master: SocketAddr,
    cookie: PathBuf,
    /// CPU of the control commands (status, add-url), taken out of the total.
    overhead: Duration,
}

impl Ctl<'_> {
    /// One control command against the master; its stdout if it succeeded.
    async fn run(&mut self, args: &[&str]) -> Option<Vec<u8>> {
        let before = children_cpu();
        let out = Command::new(self.crawler)
            .args(args)
            .args(["--connect", &self.master.to_string()])
            .arg("--cookie-file")
            .arg(&self.cookie)
            .args(["--wait", "5"])
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(30), out).await;
        self.overhead += children_cpu().saturating_sub(before);
        match out {
            Ok(Ok(o)) if o.status.success() => Some(o.stdout),
            _ => None,
        }
    }

    async fn status(&mut self) -> Option<serde_json::Value> {
        let out = self.run(&["status", "--json"]).await?;
        serde_json::from_slice(&out).ok()
    }
}

fn spawn(crawler: &Path, name: &'static str, args: Vec<String>, work: &Path) -> Node {
    let stderr = work.join(format!("{name}.stderr"));
    // Absolute: the node runs in `work`.
    let crawler = std::path::absolute(crawler).expect("the crawler's path");
    let child = Command::new(crawler)
        .args(args)
        // A worker's index shard and its backlog go in its working
        // directory (`NAME.index`): the run's, removed with it.
        .current_dir(work)
        .env(
            "RUST_LOG",
            std::env::var("BENCH_CLUSTER_LOG").unwrap_or("error".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(&stderr).expect("node stderr file"))
        .kill_on_drop(true)
        .spawn()
        .expect("start a cluster node");
    let pid = child.id().unwrap_or(0);
    Node {
        name,
        child,
        pid,
        stderr,
    }
}

fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Is any node gone already? Its name and last stderr line.
fn exited(nodes: &mut [Node]) -> Option<String> {
    for n in nodes.iter_mut() {
        if let Ok(Some(status)) = n.child.try_wait() {
            return Some(format!(
                "node {} exited ({status}): {}",
                n.name,
                last_line(&n.stderr)
            ));
        }
    }
    None
}

/// Queries through `search --connect` while the cluster is up: each a
/// command of its own, as an operator's (start-up, the connection, the
/// query's phases over the three shards, the merge), timed whole and
/// printed on stderr. The shards may still be indexing what the crawl
/// fetched last. The commands' CPU is not in the CPU total; the nodes'
/// work answering them is.
async fn search_latency(ctl: &mut Ctl<'_>) {
    const QUERIES: usize = 60;
    let queries = crate::latency::queries(42);
    let mut took = Vec::new();
    let mut partial = 0;
    for q in queries.iter().take(QUERIES) {
        let asked = Instant::now();
        let Some(out) = ctl
            .run(&["search", &q.text, "--json", "--limit", "10"])
            .await
        else {
            continue;
        };
        took.push(asked.elapsed());
        let answer: serde_json::Value = serde_json::from_slice(&out).unwrap_or_default();
        if answer["nodes"]["missing"]
            .as_array()
            .is_some_and(|m| !m.is_empty())
        {
            partial += 1;
        }
    }
    took.sort();
    eprintln!(
        "(b3) search --connect: {} of {QUERIES} queries answered, p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms; {partial} with a node missing",
        took.len(),
        crate::latency::pct(&took, 0.50),
        crate::latency::pct(&took, 0.95),
        took.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
    );
}

/// Run the cluster to idle (or to the time limit) and stop it.
pub async fn measure(spec: Spec<'_>) -> Cost {
    let dir = spec.work.join("cluster");
    std::fs::create_dir_all(&dir).expect("cluster dir");
    let cookie = dir.join("cookie");
    std::fs::write(&cookie, format!("bench-cookie-{}\n", std::process::id())).unwrap();
    let addrs: Vec<SocketAddr> = NODES.iter().map(|(_, ip)| free_addr(*ip)).collect();
    let mut ctl = Ctl {
        crawler: spec.crawler,
        master: addrs[0],
        cookie: cookie.clone(),
        overhead: Duration::ZERO,
    };
    let node_args = |i: usize| -> Vec<String> {
        let mut a: Vec<String> = vec![
            "--name".into(),
            NODES[i].0.into(),
            "--listen".into(),
            addrs[i].to_string(),
            "--cookie-file".into(),
            cookie.display().to_string(),
        ];
        a.extend(spec.flags.iter().cloned());
        a
    };
    let cpu_before = children_cpu();
    let spawned = Instant::now();
    let deadline = spawned + spec.timeout;
    let mut nodes = Vec::new();

    let mut master = vec!["start".to_string()];
    master.extend(node_args(0));
    master.extend(["--db".into(), dir.join("cluster.db").display().to_string()]);
    nodes.push(spawn(spec.crawler, NODES[0].0, master, &dir));

    // Peak RSS of each node, sampled every 20 ms until the nodes are stopped.
    let peaks: Arc<Vec<AtomicU64>> =
        Arc::new((0..NODES.len()).map(|_| AtomicU64::new(0)).collect());
    let pids = Arc::new(std::sync::Mutex::new(vec![nodes[0].pid]));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peaks, pids, sampling) = (peaks.clone(), pids.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                let now: Vec<u32> = pids.lock().unwrap().clone();
                for (i, pid) in now.into_iter().enumerate() {
                    if let Some(kb) = vm_hwm_kb(pid) {
                        peaks[i].fetch_max(kb, Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    // Start-up: the master answers, the workers join, the master sees three pools.
    let mut failure: Option<String> = None;
    let up = |what: &str| format!("cluster start-up: {what}");
    while ctl.status().await.is_none() {
        if let Some(e) = exited(&mut nodes) {
            failure = Some(e);
            break;
        }
        if Instant::now() > deadline {
            failure = Some(up("the master never answered"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if failure.is_none() {
        for (i, (name, _)) in NODES.iter().enumerate().skip(1) {
            let mut args = vec!["node".to_string()];
            args.extend(node_args(i));
            args.extend(["--join".into(), addrs[0].to_string()]);
            let node = spawn(spec.crawler, name, args, &dir);
            pids.lock().unwrap().push(node.pid);
            nodes.push(node);
        }
        loop {
            if let Some(s) = ctl.status().await
                && s["nodes"].as_array().map(Vec::len) == Some(NODES.len())
            {
                break;
            }
            if let Some(e) = exited(&mut nodes) {
                failure = Some(e);
                break;
            }
            if Instant::now() > deadline {
                failure = Some(up("the master never saw three pools"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let startup = spawned.elapsed();

    // The crawl: queue the seed, poll until idle.
    let started = Instant::now();
    let mut timed_out = false;
    let mut idle = None;
    if failure.is_none() && ctl.run(&["add-url", spec.seed]).await.is_none() {
        failure = Some(format!("add-url {} was refused", spec.seed));
    }
    let mut polls = 0u32;
    let trace = std::env::var_os("BENCH_CLUSTER_TRACE").is_some();
    while failure.is_none() {
        tokio::time::sleep(POLL).await;
        polls += 1;
        let asked = Instant::now();
        let status = ctl.status().await;
        if trace {
            let field = |k: &str| status.as_ref().map_or("-".into(), |s| s[k].to_string());
            eprintln!(
                "(b3) poll {polls} at {:.2} s took {:.2} s: idle {} pending {} processing {} in_flight {} processed {}",
                asked.duration_since(started).as_secs_f64(),
                asked.elapsed().as_secs_f64(),
                field("idle"),
                field("pending"),
                field("processing"),
                field("in_flight"),
                field("processed"),
            );
        }
        if let Some(s) = status
            && let Some(reason) = s["idle"].as_str()
        {
            idle = Some((reason.to_string(), s));
            break;
        }
        if let Some(e) = exited(&mut nodes) {
            failure = Some(e);
        } else if Instant::now() > deadline {
            timed_out = true;
            break;
        }
    }

    // The crawl's end: when the master reported it idle (else now).
    let crawl_end = started.elapsed();

    if failure.is_none() && !timed_out {
        search_latency(&mut ctl).await;
    }

    // Stop: SIGTERM to every node at once, SIGKILL after the grace period;
    // each node's stop time is reported.
    let stopping = Instant::now();
    for n in &nodes {
        let _ = kill(Pid::from_raw(n.pid as i32), Signal::SIGTERM);
    }
    let mut stopped_cleanly = true;
    let mut stop_times: Vec<Option<Duration>> = vec![None; nodes.len()];
    while stop_times.iter().any(Option::is_none) && stopping.elapsed() < STOP_GRACE {
        for (i, n) in nodes.iter_mut().enumerate() {
            if stop_times[i].is_some() {
                continue;
            }
            if let Ok(Some(status)) = n.child.try_wait() {
                stop_times[i] = Some(stopping.elapsed());
                if !status.success() {
                    stopped_cleanly = false;
                    if failure.is_none() && !timed_out {
                        failure = Some(format!(
                            "node {} stopped with {status}: {}",
                            n.name,
                            last_line(&n.stderr)
                        ));
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (i, n) in nodes.iter_mut().enumerate() {
        if stop_times[i].is_none() {
            stopped_cleanly = false;
            let _ = n.child.kill().await;
            if failure.is_none() && !timed_out {
                failure = Some(format!("node {} did not stop after SIGTERM", n.name));
            }
        }
    }
    let stops: Vec<String> = nodes
        .iter()
        .zip(&stop_times)
        .map(|(n, t)| match t {
            Some(t) => format!("{} {:.2} s", n.name, t.as_secs_f64()),
            None => format!("{} killed", n.name),
        })
        .collect();
    let stops = format!(
        "stopped {} ({})",
        if stopped_cleanly {
            "cleanly"
        } else {
            "NOT cleanly"
        },
        stops.join(", ")
    );
    // A crawl that went idle is timed to its end, not to its processes'
    // exit (reported above); any other run to the processes' exit.
    let wall = if idle.is_some() {
        crawl_end
    } else {
        started.elapsed()
    };
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.await;
    let cpu = children_cpu()
        .saturating_sub(cpu_before)
        .saturating_sub(ctl.overhead);
    let peak_rss_kb = peaks.iter().map(|p| p.load(Ordering::Relaxed)).sum();

    match &idle {
        Some((reason, s)) => eprintln!(
            "(b3) cluster start-up {:.2} s; idle ({reason}) after {:.2} s and {polls} polls: \
             {} processed, {} pending, {} failed, {} trapped; nodes {}; {stops}",
            startup.as_secs_f64(),
            crawl_end.as_secs_f64(),
            s["processed"],
            s["pending"],
            s["failed"],
            s["trapped"],
            s["nodes"],
        ),
        None => eprintln!(
            "(b3) cluster start-up {:.2} s; never idle ({}); {stops}",
            startup.as_secs_f64(),
            failure.as_deref().unwrap_or("timed out"),
        ),
    }
    if let Ok(keep) = std::env::var("BENCH_CLUSTER_KEEP") {
        // For a look afterwards (`web_crawler report pages --db …/cluster.db`).
        let to = PathBuf::from(keep);
        let _ = std::fs::create_dir_all(&to);
        for f in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let _ = std::fs::copy(f.path(), to.join(f.file_name()));
        }
        eprintln!("(b3) cluster files kept in {}", to.display());
    }
    let ok = idle.is_some() && failure.is_none() && !timed_out;
    Cost {
        started,
        wall,
        cpu,
        peak_rss_kb,
        // Summed over three processes, peaks apart would mislead.
        peak_anon_kb: 0,
        peak_file_kb: 0,
        ok,
        timed_out,
        stderr: failure.unwrap_or_default(),
        curve: None,
    }
}
