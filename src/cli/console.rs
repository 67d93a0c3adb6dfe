//! The operator's remote shell (`web_crawler console`, like `erl -remsh`):
//! it sends `ControlRequest`s to a running cluster and renders the
//! replies, as the one-shot script commands (`remote.rs`) print them too.

use super::parse::{fetches_at_once, parse_watch};
use super::rows::{
    AVAILABILITY_HEADER, CHANGES_HEADER, LIVE_HOSTS_HEADER, TRAPS_HEADER, availability_row,
    change_row, live_host_row, requests, trap_row, trapped_by_rule,
};
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;
use web_crawler::actors::Remote;
use web_crawler::actors::availability::WATCH_OFF;
use web_crawler::actors::outage::{human_duration, utc_time};
use web_crawler::actors::{
    AddOutcome, ControlError, ControlReply, ControlRequest, HostListing, Listing, NodeStopping,
    OperationSpec, Paused, Refusal, RefusalCode, Restarted, Setting, Status,
};
use web_crawler::operations::mirror;

/// Parse an operation given on a command line: nothing (crawl),
/// `search_text TEXT...` or `mirror`. `search TEXT...` is the older
/// spelling of `search_text`, kept for scripts (the console's own
/// `search QUERY` is the full-text search).
fn operation(words: &[&str]) -> Result<OperationSpec> {
    match words {
        [] => Ok(OperationSpec::crawl()),
        ["search_text" | "search", text @ ..] if !text.is_empty() => {
            Ok(OperationSpec::search_text(text.join(" ")))
        }
        ["mirror"] => Ok(mirror()),
        _ => bail!(
            "unknown operation {:?}: use `search_text TEXT` or `mirror`",
            words.join(" ")
        ),
    }
}

const HELP: &str = "\
commands:
  status                      pages processed/pending/claimed/failed, requests in flight,
                              pages/s in the last 10 s and on average
  nodes                       each node, its load, hosts owned
  tree                        the supervision tree (supervisor:which_children)
  state ACTOR                 an actor's state (master, sup, config)
  add_url URL [search_text TEXT | mirror] [again] [every DURATION|off]
                              queue a URL (optionally with the search_text or mirror
                              operation; `search TEXT` is an older spelling of
                              `search_text TEXT`); `again` fetches it even if
                              processed; `every 30s` (10min, 1h; 1s at the least) watches it
                              at that interval, over --recrawl-every, `every off`
                              not at all (a processed URL is fetched again now)
  search_text URL TEXT        crawl from URL recording where TEXT occurs
  search QUERY                the best 10 pages for QUERY in the full-text index
  page URL                    a processed page's record and its fetch history
  pending [N]                 the first N pending URLs (default 10)
  processed [N]               the first N processed pages (default 10)
  failed [N]                  the first N failed pages (default 10)
  results [TEXT]              where search_text found TEXT (every text without one)
  hosts [N]                   the first N hosts, those with work first: node, queued,
                              in flight, robots.txt, backoff, crawl delay, pages, sitemaps
  availability [HOST] [N]     watched URLs: checks, uptime, last failure, response times
  changes [HOST] [N]          watched URLs' changes (down, up, another body), newest first
  traps [N]                   the families the trap defence closed: host, pattern or directory,
                              rule, when, pages judged, URLs refused and a few of them
  reopen_trap FAMILY          reopen a family (its name as `traps` lists it): never closed
                              again on this store; the URLs it refused are fetched now
  pause | resume              stop/start handing out URLs
  pause HOST | resume HOST    stop/start fetching one host (host[:port], as `hosts` lists it)
  set delay MS                minimum delay between requests to a host (500, 500ms, 2s)
  set per-host N              requests in flight per host
  set concurrency N           fetches at once on each node
  node stop NAME              stop a worker node (its URLs go back to pending)
  top [N]                     a live view, each second: rate, queue, requests in flight, nodes
                              (N frames; until Ctrl-C at a terminal, 5 on a pipe)
  restart master              kill the master; the supervisor restarts it
  shutdown                    stop the master's node gracefully, as SIGTERM does (asks to
                              confirm: answer yes); the whole crawl stops
  help                        this text
  quit                        leave the shell (the cluster keeps running)";

/// What `shutdown` asks before it stops the master's node.
const SHUTDOWN_QUESTION: &str =
    "stop the master's node, and with it the crawl? (yes to confirm, anything else keeps it)";

/// The answer to [`SHUTDOWN_QUESTION`] that stops the master's node.
fn confirmed(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "yes" | "y")
}

/// At most this many of `search_text`'s hits (and hosts, by default) in one answer.
const LISTED: usize = 50;

/// What one console line asks for.
#[derive(Debug, PartialEq)]
enum Line {
    Empty,
    Help,
    Quit,
    /// `shutdown`: stop the master's node, once the next line confirms it.
    Shutdown,
    /// `top [N]`: N frames, or the default for the terminal or pipe.
    Top(Option<usize>),
    Request(ControlRequest),
}

/// `set delay` takes milliseconds: `500`, `500ms`, `2s`.
fn delay_ms(text: &str) -> Result<u64> {
    let (number, scale) = match text.strip_suffix("ms") {
        Some(n) => (n, 1),
        None => match text.strip_suffix('s') {
            Some(n) => (n, 1000),
            None => (text, 1),
        },
    };
    let n: u64 = number
        .parse()
        .with_context(|| format!("{text:?} is not a delay: try 500, 500ms or 2s"))?;
    Ok(n * scale)
}

fn parse_line(line: &str) -> Result<Line> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let limit = |arg: Option<&&str>| -> Result<usize> {
        arg.map_or(Ok(10), |n| n.parse().context("N must be a number"))
    };
    Ok(Line::Request(match words.as_slice() {
        [] => return Ok(Line::Empty),
        ["help"] | ["?"] => return Ok(Line::Help),
        ["quit"] | ["exit"] | ["q"] => return Ok(Line::Quit),
        ["shutdown"] => return Ok(Line::Shutdown),
        ["status"] => ControlRequest::Status,
        ["nodes"] => ControlRequest::Nodes,
        ["tree"] => ControlRequest::Tree,
        ["state", actor] => ControlRequest::State {
            actor: actor.to_string(),
        },
        ["add_url", url, op @ ..] => {
            let (op, every) = match op {
                [op @ .., "every", every] => {
                    (op, Some(parse_watch(every).map_err(anyhow::Error::msg)?))
                }
                op => (op, None),
            };
            let (op, again) = match op {
                [op @ .., "again"] => (op, true),
                op => (op, false),
            };
            ControlRequest::AddUrl {
                url: url.to_string(),
                operation: operation(op)?,
                again,
                every_ms: every,
            }
        }
        ["search_text", url, text @ ..] if !text.is_empty() => ControlRequest::AddUrl {
            url: url.to_string(),
            operation: OperationSpec::search_text(text.join(" ")),
            again: false,
            every_ms: None,
        },
        ["pending", rest @ ..] if rest.len() <= 1 => ControlRequest::Pending {
            limit: limit(rest.first())?,
        },
        ["processed", rest @ ..] if rest.len() <= 1 => ControlRequest::Processed {
            limit: limit(rest.first())?,
        },
        ["failed", rest @ ..] if rest.len() <= 1 => ControlRequest::Failed {
            limit: limit(rest.first())?,
        },
        ["search", query @ ..] if !query.is_empty() => ControlRequest::Search {
            query: query.join(" "),
            limit: 10,
            offset: 0,
        },
        ["page", url] => ControlRequest::Page {
            url: url.to_string(),
        },
        ["results", text @ ..] => ControlRequest::TextMatchHits {
            text: (!text.is_empty()).then(|| text.join(" ")),
            limit: LISTED,
        },
        [cmd @ ("availability" | "changes"), rest @ ..] if rest.len() <= 2 => {
            // `availability [HOST] [N]`: a host has a dot or a colon, N is a number.
            let (mut host, mut limit) = (None, LISTED);
            for arg in rest {
                match arg.parse() {
                    Ok(n) => limit = n,
                    Err(_) => host = Some(arg.to_string()),
                }
            }
            if *cmd == "availability" {
                ControlRequest::Availability { host, limit }
            } else {
                ControlRequest::Changes { host, limit }
            }
        }
        ["hosts", rest @ ..] if rest.len() <= 1 => ControlRequest::Hosts {
            limit: rest
                .first()
                .map_or(Ok(LISTED), |n| n.parse().context("N must be a number"))?,
        },
        ["traps", rest @ ..] if rest.len() <= 1 => ControlRequest::Traps {
            limit: rest
                .first()
                .map_or(Ok(LISTED), |n| n.parse().context("N must be a number"))?,
        },
        ["reopen_trap", family] => ControlRequest::ReopenTrap {
            family: family.to_string(),
        },
        ["pause"] => ControlRequest::Pause,
        ["resume"] => ControlRequest::Resume,
        [cmd @ ("pause" | "resume"), host] => ControlRequest::PauseHost {
            host: host.to_string(),
            paused: *cmd == "pause",
        },
        ["set", key, value] => ControlRequest::Set {
            setting: match *key {
                "delay" => Setting::DelayMs(delay_ms(value)?),
                "per-host" => Setting::PerHost(fetches_at_once(value).map_err(anyhow::Error::msg)?),
                "concurrency" => {
                    Setting::Concurrency(fetches_at_once(value).map_err(anyhow::Error::msg)?)
                }
                other => bail!("no setting {other:?}: try delay, per-host or concurrency"),
            },
        },
        ["node", "stop", node] => ControlRequest::StopNode {
            node: node.to_string(),
        },
        ["top", rest @ ..] if rest.len() <= 1 => {
            return Ok(Line::Top(
                rest.first()
                    .map(|n| n.parse().context("N must be a number"))
                    .transpose()?,
            ));
        }
        ["restart", "master"] => ControlRequest::RestartMaster,
        [cmd, args @ ..] => return Err(usage_error(cmd, args)),
    }))
}

/// Each command: its word, what it needs when it is given nothing (`None`:
/// its arguments are optional, or it takes none) and how it is written.
const USAGE: &[(&str, Option<&str>, &str)] = &[
    ("status", None, "status"),
    ("nodes", None, "nodes"),
    ("tree", None, "tree"),
    ("state", Some("an actor"), "state master|sup|config"),
    (
        "add_url",
        Some("a URL"),
        "add_url URL [search_text TEXT | mirror] [again] [every DURATION|off]",
    ),
    (
        "search_text",
        Some("a URL and text"),
        "search_text URL TEXT",
    ),
    ("search", Some("words"), "search QUERY"),
    ("pending", None, "pending [N]"),
    ("processed", None, "processed [N]"),
    ("failed", None, "failed [N]"),
    ("results", None, "results [TEXT]"),
    ("page", Some("a URL"), "page URL"),
    ("hosts", None, "hosts [N]"),
    ("availability", None, "availability [HOST] [N]"),
    ("changes", None, "changes [HOST] [N]"),
    ("traps", None, "traps [N]"),
    (
        "reopen_trap",
        Some("one family's name, as `traps` lists it"),
        "reopen_trap FAMILY",
    ),
    ("pause", None, "pause [HOST]"),
    ("resume", None, "resume [HOST]"),
    (
        "set",
        Some("a setting and a value"),
        "set delay MS | set per-host N | set concurrency N",
    ),
    ("node", Some("`stop` and a node's name"), "node stop NAME"),
    ("top", None, "top [N]"),
    ("restart", Some("what to restart"), "restart master"),
    ("shutdown", None, "shutdown"),
    ("help", None, "help"),
    ("quit", None, "quit"),
];

/// What a line the parser did not take lacks: a known command says what
/// it needs and how it is written; an unknown one points to `help`.
fn usage_error(cmd: &str, args: &[&str]) -> anyhow::Error {
    match USAGE.iter().find(|(word, ..)| *word == cmd) {
        Some((_, Some(needs), usage)) => anyhow::anyhow!("{cmd} needs {needs}: {usage}"),
        Some((_, None, usage)) => {
            anyhow::anyhow!("{cmd} does not take {:?}: {usage}", args.join(" "))
        }
        None => anyhow::anyhow!("unknown command {cmd:?} (try `help`)"),
    }
}

/// `status`'s word on a store the master waits for: since when, and why.
fn store_away(s: &Status) -> String {
    match s.store_unreachable_since {
        Some(since) => format!(
            "\nstore unreachable since {} ({}); the crawl waits for it",
            utc_time(since),
            s.store_error.as_deref().unwrap_or("no answer")
        ),
        None => String::new(),
    }
}

/// `status`'s word on what the trap rules left out, by rule.
fn trapped_line(s: &Status) -> String {
    trapped_by_rule(&s.store)
        .map(|line| format!("\nleft out by the trap defence: {line}"))
        .unwrap_or_default()
}

/// `status`'s word on nodes that left for good: how many of their pages
/// are not searchable again yet.
fn handing_over(s: &Status) -> String {
    if s.handing_over.is_empty() {
        return String::new();
    }
    format!(
        "\nnode {} left for good: {} of its pages wait to be fetched again by their hosts' new owners",
        s.handing_over.join(", "),
        s.pages_awaiting_handover
    )
}

/// `status`'s word on the full-text index: pages searchable of those
/// queued, over the cluster, and each node's shard when there are several.
fn index_line(s: &Status) -> String {
    let Some(all) = s.index else {
        return String::new();
    };
    let shards: Vec<String> = s
        .nodes
        .iter()
        .filter_map(|n| {
            n.index
                .map(|i| format!("{} {} of {}", n.node, i.indexed, i.queued))
        })
        .collect();
    let by_node = if shards.len() > 1 {
        format!(" ({})", shards.join(", "))
    } else {
        String::new()
    };
    format!("\nindexed {} of {} pages{by_node}", all.indexed, all.queued)
}

/// Pages per second now and on average, apart: the run's average keeps
/// falling while the crawl is idle, the recent rate says 0.
pub(crate) fn rates(s: &Status) -> String {
    format!(
        "{:.1} pages/s in the last {} s, {:.1} on average",
        s.recent_pages_per_sec,
        web_crawler::actors::rate::RECENT_MS / 1_000,
        s.pages_per_sec,
    )
}

/// A URL `add_url` took, in words: queued now, or waiting already.
fn queued_line(url: &str, already_queued: bool) -> String {
    if already_queued {
        format!("already queued {url}: waiting to be fetched; nothing new queued")
    } else {
        format!("queued {url}")
    }
}

/// Human-readable rendering of a reply.
pub(crate) fn render(reply: &ControlReply) -> String {
    match reply {
        ControlReply::Status(s) => format!(
            "node {}: {} processed, {} pending, {} claimed, {} failed, {} in flight, {}{}{}{}{}{}",
            s.node,
            s.store.processed,
            s.store.pending,
            s.in_flight,
            s.store.failed,
            requests(s.requests_in_flight),
            rates(s),
            if s.paused { " (paused)" } else { "" },
            trapped_line(s),
            index_line(s),
            store_away(s),
            handing_over(s)
        ),
        ControlReply::Nodes(nodes) => {
            let mut out = String::from("node\tload\thosts");
            for node in nodes {
                out.push_str(&format!("\n{}\t{}\t{}", node.node, node.load, node.hosts));
            }
            out
        }
        ControlReply::Tree(tree) => {
            let mut out = format!(
                "{} ({} strategy {}, intensity {} in {}s)",
                tree.sup,
                tree.node,
                tree.strategy,
                tree.intensity.max_restarts,
                tree.intensity.period_s
            );
            for c in &tree.children {
                out.push_str(&format!(
                    "\n├── {} ({:?}, node {}, restarts {})",
                    c.name, c.role, tree.node, c.restarts
                ));
            }
            for p in tree.pools.iter().filter(|p| p.node != tree.node) {
                out.push_str(&format!("\n└── {} (Pool, node {})", p.name, p.node));
            }
            out
        }
        ControlReply::Queued(queued) => queued_line(&queued.url, queued.already_queued),
        ControlReply::Added(added) => {
            let mut out = format!("{} queued, {} refused", added.accepted, added.refused);
            for r in &added.results {
                match (&r.normalized, &r.error) {
                    (Some(url), _) => {
                        let waiting = r.outcome == AddOutcome::AlreadyQueued;
                        out.push_str(&format!("\n{}", queued_line(url, waiting)));
                    }
                    (None, Some(e)) => {
                        out.push_str(&format!("\nrefused {} ({}): {e}", r.url, e.code))
                    }
                    (None, None) => {}
                }
            }
            out
        }
        ControlReply::Page(view) => {
            let r = &view.page.record;
            let status = r.http_returncode.map_or("-".to_string(), |c| c.to_string());
            let mut out = format!(
                "{}\t{status}\t{}\tnode {}\tprocessed {}\t{} referrals",
                r.url,
                r.title.as_deref().unwrap_or(""),
                r.node,
                utc_time(view.page.d_processed),
                view.page.referral_count
            );
            for h in &view.history {
                let status = h.http_returncode.map_or("-".to_string(), |c| c.to_string());
                out.push_str(&format!(
                    "\n  {}\t{status}\t{} ms",
                    utc_time(h.d_fetch),
                    h.fetch_ms
                ));
            }
            out
        }
        ControlReply::Pending(pending) => list(pending, |p| {
            let watch = match p.check_every_ms {
                Some(WATCH_OFF) => "\twatch off".to_string(),
                Some(ms) => {
                    let every = Duration::from_millis(ms.unsigned_abs());
                    format!("\tevery {}", human_duration(every))
                }
                None => String::new(),
            };
            let trap = p
                .trap
                .as_ref()
                .map(|t| format!("\t{} {}", t.rule, t.family))
                .unwrap_or_default();
            format!(
                "{}\t{}\tattempts {}{watch}{trap}",
                p.status, p.url, p.attempts
            )
        }),
        ControlReply::Pages(pages) => list(pages, |p| {
            let r = &p.record;
            let status = r.http_returncode.map_or("-".to_string(), |c| c.to_string());
            let error = r
                .error
                .as_deref()
                .map(|e| format!("\t{e}"))
                .unwrap_or_default();
            format!("{status}\t{}\tnode {}{error}", r.url, r.node)
        }),
        ControlReply::Search(answer) => {
            let mut out = String::new();
            if let Some(corrected) = &answer.did_you_mean {
                out.push_str(&format!("did you mean: {corrected}\n"));
            }
            if let Some(line) = answer.nodes.as_ref().and_then(|n| n.missing_line()) {
                out.push_str(&line);
                out.push('\n');
            }
            out.push_str(&list(&answer.results, |hit| {
                format!(
                    "{:.3}\t{}\t{}\n\t{}",
                    hit.score, hit.url, hit.title, hit.snippet
                )
            }));
            out
        }
        ControlReply::TextMatchHits(results) => counted(results, |r| {
            let positions: Vec<String> = r.positions.iter().map(u64::to_string).collect();
            format!("{}\t{:?}\t{}", r.url, r.text, positions.join(","))
        }),
        ControlReply::Hosts(hosts) => hosts_listing(hosts),
        ControlReply::Traps(traps) => format!("{TRAPS_HEADER}\n{}", counted(traps, trap_row)),
        ControlReply::TrapReopened(r) => format!(
            "reopened {}: {} URL(s) back to pending; it is never closed again on this store",
            r.family, r.released
        ),
        ControlReply::Availability(rows) => {
            format!("{AVAILABILITY_HEADER}\n{}", counted(rows, availability_row))
        }
        ControlReply::Changes(rows) => format!("{CHANGES_HEADER}\n{}", counted(rows, change_row)),
        ControlReply::Paused(Paused { paused: true }) => {
            "paused: no new URLs are handed out".to_string()
        }
        ControlReply::Paused(Paused { paused: false }) => "resumed".to_string(),
        ControlReply::SettingChanged(changed) => {
            let what = match &changed.setting {
                Setting::DelayMs(ms) => format!("delay {ms} ms"),
                Setting::PerHost(n) => format!("per-host {n}"),
                Setting::Concurrency(n) => format!("concurrency {n}"),
                other => format!("{other:?}"),
            };
            format!("{what} on {}", nodes_of(&changed.nodes))
        }
        ControlReply::HostPaused(h) => format!(
            "{} {} on {}",
            h.host,
            if h.paused { "paused" } else { "resumed" },
            nodes_of(&h.nodes)
        ),
        ControlReply::NodeStopping(NodeStopping { node }) => {
            format!("node {node} is stopping; what it held goes back to pending")
        }
        ControlReply::Restarted(Restarted { child }) => {
            let child = format!("{child:?}").to_lowercase();
            format!(
                "{child} restarted (an operator's restart is not counted against the restart \
                 intensity); this console now talks to the new {child}"
            )
        }
        // `state ACTOR`: the actor's state, whole.
        ControlReply::State(state) => serde_json::to_string_pretty(state).unwrap_or_default(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// `N node(s): a, b`.
fn nodes_of(nodes: &[String]) -> String {
    format!("{} node(s): {}", nodes.len(), nodes.join(", "))
}

/// What `top` remembers between frames: the last few seconds' samples of
/// pages fetched, for the current rate.
#[derive(Debug, Default)]
struct Top {
    samples: std::collections::VecDeque<(std::time::Instant, u64)>,
}

/// The seconds `top`'s rate is taken over.
const TOP_RATE_SECS: u64 = 5;

impl Top {
    /// One frame for `status`, taken `now`. The rate is over the last
    /// [`TOP_RATE_SECS`] (from the newest frame at least that old); until
    /// `top` has frames that old, the master's own rate of its last
    /// seconds, so that no frame shows the rate of a single second.
    fn frame(&mut self, s: &Status, now: std::time::Instant) -> (String, Value) {
        let window = Duration::from_secs(TOP_RATE_SECS);
        self.samples.push_back((now, s.fetched_this_run));
        while self.samples.len() > 1 && now.duration_since(self.samples[1].0) >= window {
            self.samples.pop_front();
        }
        let (t0, f0) = self.samples[0];
        let span = now.duration_since(t0);
        let (rate, secs) = if span >= window {
            let secs = span.as_secs_f64();
            (s.fetched_this_run.saturating_sub(f0) as f64 / secs, secs)
        } else {
            let master_secs = (web_crawler::actors::rate::RECENT_MS / 1_000) as f64;
            (s.recent_pages_per_sec, master_secs)
        };
        let mut text = format!(
            "node {}  rate {rate:.1} pages/s (last {secs:.0} s, {:.1} on average)  fetched {}  errors {}{}\n\
             queue: {} pending  {} processing  {} processed  {} failed  {} claimed  {} in flight\n\
             node\tload\thosts",
            s.node,
            s.pages_per_sec,
            s.fetched_this_run,
            s.errors_this_run,
            if s.paused { "  (paused)" } else { "" },
            s.store.pending,
            s.store.processing,
            s.store.processed,
            s.store.failed,
            s.in_flight,
            requests(s.requests_in_flight),
        );
        for n in &s.nodes {
            text.push_str(&format!("\n{}\t{}\t{}", n.node, n.load, n.hosts));
        }
        let json = serde_json::json!({ "rate": rate, "status": s });
        (text, json)
    }
}

/// `top`: `frames` frames a second apart (at a terminal, each redraws the
/// screen); Ctrl-C ends it early.
async fn top(remote: &Remote, frames: usize, json: bool) -> Result<()> {
    let terminal = std::io::stdout().is_terminal();
    let mut top = Top::default();
    for i in 0..frames {
        if i > 0 {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = tokio::signal::ctrl_c() => return Ok(()),
            }
        }
        let status = remote.status().await?;
        let (text, value) = top.frame(&status, std::time::Instant::now());
        if json {
            outln!("{value}")?;
        } else if terminal {
            outln!("\x1b[H\x1b[2J{text}\n(Ctrl-C to stop)")?;
        } else {
            outln!("{text}\n")?;
        }
        let _ = std::io::stdout().flush();
    }
    Ok(())
}

/// `top`'s frames at a terminal without N: an hour, unless Ctrl-C comes first.
const TOP_TERMINAL_FRAMES: usize = 3600;
/// `top`'s frames on a pipe without N.
const TOP_PIPE_FRAMES: usize = 5;

/// The console's `hosts`: its rows, how many were left out, how many hosts
/// have work, and the nodes that did not answer.
fn hosts_listing(hosts: &HostListing) -> String {
    let rows = Listing {
        total: hosts.total,
        items: hosts.items.clone(),
    };
    let mut out = format!("{LIVE_HOSTS_HEADER}\n{}", counted(&rows, live_host_row));
    if hosts.busy > 0 {
        out.push_str(&format!(
            "\n{} host(s) with URLs queued or being fetched",
            hosts.busy
        ));
    }
    for node in &hosts.silent_nodes {
        out.push_str(&format!(
            "\nnode {node} did not answer in time: its hosts show no queue"
        ));
    }
    out
}

/// A listing's rows, and how many were left out.
fn counted<T>(listing: &Listing<T>, row: impl Fn(&T) -> String) -> String {
    let mut out = list(&listing.items, row);
    let shown = listing.items.len();
    if listing.total > shown {
        out.push_str(&format!(
            "\n... {} more ({} in all)",
            listing.total - shown,
            listing.total
        ));
    }
    out
}

fn list<T>(items: &[T], row: impl Fn(&T) -> String) -> String {
    if items.is_empty() {
        return "(none)".to_string();
    }
    items.iter().map(row).collect::<Vec<_>>().join("\n")
}

/// The interactive shell. With a terminal: line editing and history;
/// otherwise it reads commands from standard input, one a line. With
/// `json`, each answer is one line of JSON (`{"error": {"code": …,
/// "message": …}}` for a refusal, its code as the HTTP API's).
/// Returns how many commands failed, so that a script feeding it a pipe
/// can tell.
pub(crate) async fn run_console(remote: Remote, addr: &str, json: bool) -> Result<usize> {
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        outln!("connected to {addr}; type `help` for commands, `quit` to leave")?;
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Option<String>>(1);
    let (ack_tx, ack_rx) = std::sync::mpsc::channel::<()>();
    // Line editing blocks: it runs on its own thread, one line at a time.
    std::thread::spawn(move || {
        let mut editor = interactive
            .then(|| rustyline::DefaultEditor::new().ok())
            .flatten();
        let mut stdin = std::io::stdin().lock();
        loop {
            let line = match editor.as_mut() {
                Some(ed) => match ed.readline("web_crawler> ") {
                    Ok(line) => {
                        let _ = ed.add_history_entry(line.as_str());
                        Some(line)
                    }
                    Err(_) => None,
                },
                None => {
                    let mut line = String::new();
                    match stdin.read_line(&mut line) {
                        Ok(0) | Err(_) => None,
                        Ok(_) => Some(line),
                    }
                }
            };
            let done = line.is_none();
            if tx.blocking_send(line).is_err() || done || ack_rx.recv().is_err() {
                return;
            }
        }
    });
    let mut failed = 0;
    let mut error = |refusal: Refusal| {
        failed += 1;
        if json {
            outln!("{}", serde_json::json!({ "error": refusal }))
        } else {
            outln!("error: {refusal}")
        }
    };
    // A line the console itself cannot read.
    let unreadable = |e: anyhow::Error| Refusal::new(RefusalCode::BadRequest, format!("{e:#}"));
    while let Some(Some(line)) = rx.recv().await {
        // Read from a pipe, each answer follows its command, so that a
        // script's output says which answer is whose (JSON lines stay one
        // answer a line).
        if !interactive && !json && !line.trim().is_empty() {
            outln!("> {}", line.trim())?;
        }
        let keep_going = match parse_line(&line) {
            Ok(Line::Empty) => true,
            Ok(Line::Help) => {
                outln!("{HELP}")?;
                true
            }
            Ok(Line::Quit) => false,
            Ok(Line::Shutdown) => {
                outln!("{SHUTDOWN_QUESTION}")?;
                std::io::stdout().flush()?;
                if ack_tx.send(()).is_err() {
                    break;
                }
                let answer = rx.recv().await.flatten().unwrap_or_default();
                if !interactive && !json {
                    outln!("> {}", answer.trim())?;
                }
                if confirmed(&answer) {
                    match remote.request(&ControlRequest::Shutdown).await {
                        Ok(reply) if json => outln!("{}", serde_json::to_string(&reply)?)?,
                        Ok(reply) => outln!("{}", render(&reply))?,
                        Err(e) => error(e.refusal())?,
                    }
                    false
                } else {
                    outln!("not stopped")?;
                    true
                }
            }
            Ok(Line::Top(frames)) => {
                let default = if interactive {
                    TOP_TERMINAL_FRAMES
                } else {
                    TOP_PIPE_FRAMES
                };
                if let Err(e) = top(&remote, frames.unwrap_or(default), json).await {
                    match e.downcast::<ControlError>() {
                        Ok(e) => error(e.refusal())?,
                        // Standard output is gone: the console ends.
                        Err(e) if e.is::<std::io::Error>() => return Err(e),
                        Err(e) => error(unreadable(e))?,
                    }
                }
                true
            }
            Ok(Line::Request(req)) => {
                match remote.request(&req).await {
                    Ok(reply) if json => outln!("{}", serde_json::to_string(&reply)?)?,
                    Ok(reply) => outln!("{}", render(&reply))?,
                    Err(e) => error(e.refusal())?,
                }
                true
            }
            Err(e) => {
                error(unreadable(e))?;
                true
            }
        };
        std::io::stdout().flush()?;
        if !keep_going || ack_tx.send(()).is_err() {
            break;
        }
    }
    remote.close();
    Ok(failed)
}

#[cfg(test)]
mod tests {
    use super::super::rows::host_row;
    use super::*;
    use web_crawler::actors::{HostSummary, PendingUrl};

    /// The rendering of `json` read as the reply to `req`.
    fn rendered(req: &ControlRequest, json: Value) -> String {
        render(&ControlReply::decode(req, json).unwrap())
    }

    #[test]
    fn lines_parse_to_requests() {
        assert_eq!(parse_line("  ").unwrap(), Line::Empty);
        assert_eq!(parse_line("quit").unwrap(), Line::Quit);
        // `search` is the older spelling of `search_text`: both queue the
        // paper's operation, not a full-text search.
        for spelling in ["search_text", "search"] {
            assert_eq!(
                parse_line(&format!("add_url http://a/ {spelling} two words")).unwrap(),
                Line::Request(ControlRequest::AddUrl {
                    url: "http://a/".into(),
                    operation: OperationSpec::search_text("two words"),
                    again: false,
                    every_ms: None,
                }),
                "{spelling}"
            );
        }
        assert_eq!(
            parse_line("pending 5").unwrap(),
            Line::Request(ControlRequest::Pending { limit: 5 })
        );
        assert_eq!(
            parse_line("restart master").unwrap(),
            Line::Request(ControlRequest::RestartMaster)
        );
        assert_eq!(
            parse_line("set delay 2s").unwrap(),
            Line::Request(ControlRequest::Set {
                setting: Setting::DelayMs(2000)
            })
        );
        assert_eq!(
            parse_line("pause a.example:8080").unwrap(),
            Line::Request(ControlRequest::PauseHost {
                host: "a.example:8080".into(),
                paused: true
            })
        );
        assert_eq!(parse_line("top 3").unwrap(), Line::Top(Some(3)));
        assert!(parse_line("set colour blue").is_err());
        assert_eq!(parse_line("shutdown").unwrap(), Line::Shutdown);
        assert!(confirmed("yes\n") && confirmed(" Y ") && !confirmed("") && !confirmed("no"));
        for zero in ["set per-host 0", "set concurrency 0"] {
            let e = parse_line(zero).unwrap_err().to_string();
            assert_eq!(e, "0 would fetch nothing: give 1 or more", "{zero}");
        }
        assert!(parse_line("pending many").is_err());
        assert!(parse_line("frobnicate").is_err());
        assert_eq!(
            parse_line("add_url http://a/ mirror").unwrap(),
            Line::Request(ControlRequest::AddUrl {
                url: "http://a/".into(),
                operation: mirror(),
                again: false,
                every_ms: None,
            })
        );
        assert_eq!(
            parse_line("add_url http://a/ again").unwrap(),
            Line::Request(ControlRequest::AddUrl {
                url: "http://a/".into(),
                operation: OperationSpec::crawl(),
                again: true,
                every_ms: None,
            })
        );
        assert_eq!(
            parse_line("add_url http://a/ mirror again every 10min").unwrap(),
            Line::Request(ControlRequest::AddUrl {
                url: "http://a/".into(),
                operation: mirror(),
                again: true,
                every_ms: Some(600_000),
            })
        );
        assert_eq!(
            parse_line("add_url http://a/ every 1s").unwrap(),
            Line::Request(ControlRequest::AddUrl {
                url: "http://a/".into(),
                operation: OperationSpec::crawl(),
                again: false,
                every_ms: Some(1_000),
            })
        );
        assert_eq!(
            parse_line("add_url http://a/ every off").unwrap(),
            Line::Request(ControlRequest::AddUrl {
                url: "http://a/".into(),
                operation: OperationSpec::crawl(),
                again: false,
                every_ms: Some(WATCH_OFF),
            })
        );
        // Zero is refused here, not taken for `off`.
        let zero = parse_line("add_url http://a/ every 0").unwrap_err();
        assert!(zero.to_string().contains("shortest interval"), "{zero}");
        let soon = parse_line("add_url http://a/ every soon").unwrap_err();
        assert!(soon.to_string().contains("not a duration"), "{soon}");
        assert!(parse_line("add_url http://a/ mirror x").is_err());
        assert!(parse_line("search_text http://a/").is_err());
        assert_eq!(
            parse_line("search  rye   bread").unwrap(),
            Line::Request(ControlRequest::Search {
                query: "rye bread".into(),
                limit: 10,
                offset: 0
            })
        );
        assert!(parse_line("search").is_err());
        assert_eq!(
            parse_line("results").unwrap(),
            Line::Request(ControlRequest::TextMatchHits {
                text: None,
                limit: LISTED
            })
        );
        assert_eq!(
            parse_line("results  two   words").unwrap(),
            Line::Request(ControlRequest::TextMatchHits {
                text: Some("two words".into()),
                limit: LISTED
            })
        );
        assert_eq!(
            parse_line("hosts").unwrap(),
            Line::Request(ControlRequest::Hosts { limit: LISTED })
        );
        assert_eq!(
            parse_line("hosts 3").unwrap(),
            Line::Request(ControlRequest::Hosts { limit: 3 })
        );
        assert!(parse_line("hosts many").is_err());
        assert_eq!(
            parse_line("traps").unwrap(),
            Line::Request(ControlRequest::Traps { limit: LISTED })
        );
        assert_eq!(
            parse_line("reopen_trap 127.0.0.1:8080/cal/{n}/{n}/").unwrap(),
            Line::Request(ControlRequest::ReopenTrap {
                family: "127.0.0.1:8080/cal/{n}/{n}/".into()
            })
        );
        assert_eq!(
            parse_line("reopen_trap").unwrap_err().to_string(),
            "reopen_trap needs one family's name, as `traps` lists it: reopen_trap FAMILY"
        );
        assert!(parse_line("reopen_trap a b").is_err());
        assert_eq!(
            parse_line("availability 127.0.0.1:8080 5").unwrap(),
            Line::Request(ControlRequest::Availability {
                host: Some("127.0.0.1:8080".into()),
                limit: 5
            })
        );
        assert_eq!(
            parse_line("changes").unwrap(),
            Line::Request(ControlRequest::Changes {
                host: None,
                limit: LISTED
            })
        );
        assert!(parse_line("hosts 1 2").is_err());
    }

    #[test]
    fn status_says_how_many_pages_of_a_departed_node_wait() {
        let mut s = Status {
            node: "m".into(),
            ..Status::default()
        };
        let plain = render(&ControlReply::Status(s.clone()));
        assert!(!plain.contains("left for good"), "{plain}");
        s.handing_over = vec!["w1".into()];
        s.pages_awaiting_handover = 42;
        let text = render(&ControlReply::Status(s));
        assert!(
            text.ends_with(
                "\nnode w1 left for good: 42 of its pages wait to be fetched again by their hosts' new owners"
            ),
            "{text}"
        );
    }

    #[test]
    fn status_says_how_many_pages_are_searchable_on_each_node() {
        use web_crawler::actors::{IndexCounts, NodeInfo};
        let counts = |indexed, queued| Some(IndexCounts { indexed, queued });
        let node = |name: &str, index| NodeInfo {
            node: name.into(),
            index,
            ..NodeInfo::default()
        };
        let mut s = Status {
            node: "m".into(),
            nodes: vec![node("m", counts(10, 12))],
            index: counts(10, 12),
            ..Status::default()
        };
        let one = render(&ControlReply::Status(s.clone()));
        assert!(one.ends_with("\nindexed 10 of 12 pages"), "{one}");
        s.nodes.push(node("w1", counts(5, 9)));
        s.nodes.push(node("w2", None));
        s.index = counts(15, 21);
        let two = render(&ControlReply::Status(s.clone()));
        assert!(
            two.ends_with("\nindexed 15 of 21 pages (m 10 of 12, w1 5 of 9)"),
            "{two}"
        );
        s.index = None;
        assert!(!render(&ControlReply::Status(s)).contains("indexed"));
    }

    #[test]
    fn top_shows_the_rate_now_from_its_first_frame_and_the_average_apart() {
        let mut top = Top::default();
        let t0 = std::time::Instant::now();
        let mut s = Status {
            node: "m".into(),
            fetched_this_run: 100,
            pages_per_sec: 40.0,
            recent_pages_per_sec: 0.0,
            ..Status::default()
        };
        let (text, json) = top.frame(&s, t0);
        assert!(
            text.starts_with("node m  rate 0.0 pages/s (last 10 s, 40.0 on average)  fetched 100"),
            "{text}"
        );
        assert_eq!(json["rate"], 0.0);
        // Until it has frames 5 s old: the master's rate, never a 1-s one.
        s.fetched_this_run = 120;
        s.recent_pages_per_sec = 12.5;
        let (text, _) = top.frame(&s, t0 + Duration::from_secs(1));
        assert!(
            text.starts_with("node m  rate 12.5 pages/s (last 10 s, 40.0 on average)"),
            "{text}"
        );
        for (at, fetched) in [(2, 130), (3, 140), (4, 150)] {
            s.fetched_this_run = fetched;
            top.frame(&s, t0 + Duration::from_secs(at));
        }
        s.fetched_this_run = 200;
        let (text, json) = top.frame(&s, t0 + Duration::from_secs(5));
        assert!(
            text.starts_with("node m  rate 20.0 pages/s (last 5 s, 40.0 on average)"),
            "{text}"
        );
        assert_eq!(json["rate"], 20.0);
        // Then always over the last 5 s: (260 - 120) pages in 5 s.
        s.fetched_this_run = 260;
        let (text, _) = top.frame(&s, t0 + Duration::from_secs(6));
        assert!(
            text.starts_with("node m  rate 28.0 pages/s (last 5 s"),
            "{text}"
        );
    }

    #[test]
    fn a_command_missing_its_arguments_says_what_it_needs() {
        let said = |line: &str| parse_line(line).unwrap_err().to_string();
        assert_eq!(said("search"), "search needs words: search QUERY");
        assert_eq!(
            said("add_url"),
            "add_url needs a URL: add_url URL [search_text TEXT | mirror] [again] [every DURATION|off]"
        );
        assert_eq!(
            said("search_text http://a/"),
            "search_text needs a URL and text: search_text URL TEXT"
        );
        assert_eq!(
            said("state"),
            "state needs an actor: state master|sup|config"
        );
        assert_eq!(
            said("set delay"),
            "set needs a setting and a value: set delay MS | set per-host N | set concurrency N"
        );
        assert_eq!(
            said("node"),
            "node needs `stop` and a node's name: node stop NAME"
        );
        assert_eq!(
            said("restart"),
            "restart needs what to restart: restart master"
        );
        assert_eq!(
            said("pending 1 2"),
            "pending does not take \"1 2\": pending [N]"
        );
        assert_eq!(said("status now"), "status does not take \"now\": status");
        assert_eq!(
            said("frobnicate"),
            "unknown command \"frobnicate\" (try `help`)"
        );
        // Every command `help` lists has its usage, and every usage is listed.
        for (word, _, usage) in USAGE {
            let listed = |l: &str| {
                let head = l.get(..30).unwrap_or(l);
                l.starts_with("  ") && head.split_whitespace().any(|w| w == *word)
            };
            assert!(HELP.lines().any(listed), "{word} is in help");
            assert!(usage.starts_with(word), "{usage}");
        }
        for line in HELP.lines().skip(1) {
            let word = line.split_whitespace().next().unwrap_or("");
            if line.starts_with("  ") && !line.starts_with("   ") {
                assert!(USAGE.iter().any(|(w, ..)| *w == word), "{word} has a usage");
            }
        }
    }

    #[test]
    fn pending_rows_say_a_url_s_own_interval() {
        let row = |url: &str, status: &str, attempts, check_every_ms| PendingUrl {
            url: url.into(),
            operation: OperationSpec::crawl(),
            host: "a".into(),
            status: status.into(),
            depth: 0,
            priority: 0.0,
            attempts,
            referral_list: Vec::new(),
            d_change: 0,
            not_before: 0,
            lease_until: None,
            last_error: None,
            check_every_ms,
            trap: None,
        };
        let pending = ControlReply::Pending(vec![
            row("http://a/", "pending", 0, Some(600_000)),
            row("http://b/", "processing", 1, Some(WATCH_OFF)),
            row("http://c/", "pending", 0, None),
        ]);
        assert_eq!(
            render(&pending),
            "pending\thttp://a/\tattempts 0\tevery 10min\n\
             processing\thttp://b/\tattempts 1\twatch off\n\
             pending\thttp://c/\tattempts 0"
        );
    }

    #[test]
    fn traps_render_each_family_with_why_and_what_it_refused() {
        let traps = serde_json::json!({"total": 2, "items": [{
            "family": "h:81/cal/{n}/{n}/", "host": "h:81", "rule": "barren",
            "scope": "pattern",
            "reason": "trap: pattern h:81/cal/{n}/{n}/ yields near-duplicate pages linking only back into h:81/cal/ (16 of 17)",
            "detail": {"rule": "barren", "pattern": "h:81/cal/{n}/{n}/", "family": "h:81/cal/",
                       "barren": 16, "pages": 17},
            "closed_at": 1_748_779_384_000_i64, "pages": 17, "allowed": false,
            "refused": 3, "samples": ["http://h:81/cal/2024/07/", "http://h:81/cal/2025/06/"],
        }]});
        let text = rendered(&ControlRequest::Traps { limit: 1 }, traps);
        assert_eq!(
            text,
            "host\tfamily\trule\tclosed\tpages\trefused\tstate\n\
             h:81\th:81/cal/{n}/{n}/\tbarren\t2025-06-01 12:03:04 UTC\t17\t3\tclosed\n\
             \ttrap: pattern h:81/cal/{n}/{n}/ yields near-duplicate pages linking only back into h:81/cal/ (16 of 17)\n\
             \thttp://h:81/cal/2024/07/\n\
             \thttp://h:81/cal/2025/06/\n\
             \t... 1 more\n\
             ... 1 more (2 in all)"
        );
        let reopened = rendered(
            &ControlRequest::ReopenTrap {
                family: "h:81/cal/{n}/{n}/".into(),
            },
            serde_json::json!({"family": "h:81/cal/{n}/{n}/", "released": 3}),
        );
        assert_eq!(
            reopened,
            "reopened h:81/cal/{n}/{n}/: 3 URL(s) back to pending; it is never closed again on this store"
        );
    }

    #[test]
    fn status_and_pending_say_what_the_trap_rules_left_out() {
        let mut s = Status::default();
        s.store.trapped = 5;
        s.store.trapped_by_rule = [
            (web_crawler::actors::traps::TrapRule::Stale, 3),
            (web_crawler::actors::traps::TrapRule::Barren, 2),
        ]
        .into();
        assert!(
            render(&ControlReply::Status(s))
                .ends_with("\nleft out by the trap defence: 5 URLs (barren 2, stale 3)")
        );
        let json = serde_json::json!([{
            "url": "http://a/tag/x/", "operation": [], "host": "a", "status": "trapped",
            "depth": 2, "priority": 0.5, "attempts": 0, "referral_list": [], "d_change": 0,
            "not_before": 0, "lease_until": null, "last_error": null,
            "trap_rule": "stale", "trap_family": "a/tag/",
        }]);
        assert_eq!(
            rendered(&ControlRequest::Pending { limit: 1 }, json),
            "trapped\thttp://a/tag/x/\tattempts 0\tstale a/tag/"
        );
    }

    #[test]
    fn results_and_hosts_render_as_rows() {
        let results = serde_json::json!({"total": 3, "items": [
            {"url": "http://a/", "text": "rye", "positions": [0, 12], "d_search": 1},
        ]});
        let req = ControlRequest::TextMatchHits {
            text: None,
            limit: 1,
        };
        assert_eq!(
            rendered(&req, results),
            "http://a/\t\"rye\"\t0,12\n... 2 more (3 in all)"
        );
        let hosts = serde_json::json!({"total": 4, "busy": 2, "items": [
            {"host": "c", "robots_status": null, "sitemaps": [], "pages": 0,
             "live": {"host": "c", "node": "w1", "queued": 7, "in_flight": 1,
                      "robots": "fetching", "next_fetch_ms": 0, "backoff_ms": 0,
                      "paused": false, "moving": false}},
            {"host": "a:80", "robots_status": "fetched", "robots_http_code": 200,
             "crawl_delay_ms": 1500, "sitemaps": ["http://a/s.xml"], "pages": 4,
             "live": {"host": "a:80", "node": "m", "queued": 2, "in_flight": 0,
                      "robots": "ready", "next_fetch_ms": 9500, "backoff_ms": 9500,
                      "paused": true, "moving": false}},
            {"host": "b", "robots_status": null, "sitemaps": [], "pages": 1},
        ], "silent_nodes": ["w2"]});
        assert_eq!(
            rendered(&ControlRequest::Hosts { limit: 3 }, hosts.clone()),
            format!(
                "{LIVE_HOSTS_HEADER}\n\
                 c\tw1\t7\t1\tfetching\t-\t-\t0\t-\n\
                 a:80\tm (paused)\t2\t0\tfetched (200)\t9.5s\t1500\t4\thttp://a/s.xml\n\
                 b\t-\t-\t-\t-\t-\t-\t1\t-\n\
                 ... 1 more (4 in all)\n\
                 2 host(s) with URLs queued or being fetched\n\
                 node w2 did not answer in time: its hosts show no queue"
            )
        );
        let stored: HostSummary = serde_json::from_value(hosts["items"][1].clone()).unwrap();
        assert_eq!(
            host_row(&HostSummary {
                live: None,
                ..stored
            }),
            "a:80\tfetched (200)\t1500\t4\thttp://a/s.xml",
            "report hosts: the store's columns"
        );
        let none = serde_json::json!({"total": 0, "items": []});
        assert!(rendered(&req, none).ends_with("(none)"));
    }

    #[test]
    fn status_says_since_when_the_store_is_unreachable() {
        let mut status = serde_json::to_value(web_crawler::Status {
            node: "m".into(),
            in_flight: 3,
            requests_in_flight: 1,
            ..web_crawler::Status::default()
        })
        .unwrap();
        let line = rendered(&ControlRequest::Status, status.clone());
        assert!(
            line.starts_with(
                "node m: 0 processed, 0 pending, 3 claimed, 0 failed, 1 request in flight"
            ),
            "{line}"
        );
        assert!(!line.contains("unreachable"), "{line}");
        status["pages_per_sec"] = 30.4.into();
        status["recent_pages_per_sec"] = 0.0.into();
        assert!(
            rendered(&ControlRequest::Status, status.clone())
                .ends_with("0.0 pages/s in the last 10 s, 30.4 on average"),
            "the rate now and the run's average apart: {}",
            rendered(&ControlRequest::Status, status.clone())
        );
        status["store_unreachable_since"] = 1_748_779_384_000_i64.into();
        status["store_error"] = "MongoDB is unavailable: no server answered in time".into();
        assert_eq!(
            rendered(&ControlRequest::Status, status.clone())
                .lines()
                .nth(1),
            Some(
                "store unreachable since 2025-06-01 12:03:04 UTC (MongoDB is unavailable: no \
                 server answered in time); the crawl waits for it"
            )
        );
    }
}
