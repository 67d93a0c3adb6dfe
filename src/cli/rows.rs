//! Rows and columns that the console (live, from the cluster) and the
//! reports (offline, from the store) print alike, and the crawl's
//! progress line borrows.

use web_crawler::actors::outage::utc_time;
use web_crawler::actors::{HostSummary, LiveRobots, TrapFamily};

/// Requests running now, counted in words: `1 request`, `3 requests`.
/// URLs claimed from the store are another number (`claimed`): at
/// `--per-host 1` a host has one request in flight however many of its
/// URLs wait at the pool.
pub(super) fn requests(n: u64) -> String {
    match n {
        1 => "1 request".to_string(),
        n => format!("{n} requests"),
    }
}

/// The columns of `report traps` and the console's `traps`.
pub(super) const TRAPS_HEADER: &str = "host\tfamily\trule\tclosed\tpages\trefused\tstate";

/// One closed family: its row, then why, and the sample URLs it refused,
/// each on a line of its own (indented).
pub(super) fn trap_row(t: &TrapFamily) -> String {
    let c = &t.closed;
    let state = match (c.allowed, c.reopened_at) {
        (true, Some(at)) => format!("reopened {}", utc_time(at)),
        (true, None) => "allowed".to_string(),
        (false, _) => "closed".to_string(),
    };
    let mut out = format!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{state}\n\t{}",
        c.host,
        c.family,
        c.rule,
        utc_time(c.closed_at),
        c.pages,
        t.refused,
        c.reason
    );
    for url in &t.samples {
        out.push_str(&format!("\n\t{url}"));
    }
    if t.refused > t.samples.len() as u64 {
        out.push_str(&format!(
            "\n\t... {} more",
            t.refused - t.samples.len() as u64
        ));
    }
    out
}

/// The line saying how many URLs the trap rules left out, by rule (`None`
/// when none): `340 URLs (near_duplicates 200, stale 140)`.
pub(super) fn trapped_by_rule(counts: &web_crawler::actors::StoreCounts) -> Option<String> {
    if counts.trapped == 0 {
        return None;
    }
    let rules: Vec<String> = (counts.trapped_by_rule.iter())
        .map(|(rule, n)| format!("{rule} {n}"))
        .collect();
    Some(format!("{} URLs ({})", counts.trapped, rules.join(", ")))
}

/// The columns of `report availability`.
pub(super) const AVAILABILITY_HEADER: &str = "url\tchecks\tuptime\tp50_ms\tp95_ms\tlast_failure";

/// One URL's availability.
pub(super) fn availability_row(a: &web_crawler::actors::availability::Availability) -> String {
    let failure = match (a.last_failure, &a.last_failure_reason) {
        (Some(at), Some(why)) => format!("{} ({why})", utc_time(at)),
        (Some(at), None) => utc_time(at),
        _ => "-".to_string(),
    };
    format!(
        "{}\t{}\t{:.1}%\t{}\t{}\t{failure}",
        a.url, a.checks, a.uptime_pct, a.p50_ms, a.p95_ms
    )
}

/// The columns of `report changes`.
pub(super) const CHANGES_HEADER: &str = "at\turl\tchange\tstatus\treason";

/// One change of a watched URL.
pub(super) fn change_row(e: &web_crawler::actors::availability::StatusEvent) -> String {
    let code = |c: Option<u16>| c.map_or("-".to_string(), |c| c.to_string());
    format!(
        "{}\t{}\t{}\t{} -> {}\t{}",
        utc_time(e.at),
        e.url,
        e.change,
        code(e.previous_returncode),
        code(e.http_returncode),
        e.reason.as_deref().unwrap_or("-")
    )
}

/// The columns of `report hosts` (the store's facts).
pub(super) const HOSTS_HEADER: &str = "host\trobots\tcrawl_delay_ms\tpages\tsitemaps";

/// One host of `report hosts`.
pub(super) fn host_row(h: &HostSummary) -> String {
    format!("{}\t{}\t{}", h.host, robots_of(h), stored_columns(h))
}

/// The columns of the console's `hosts`: what the pool holding each host
/// does with it now, then the store's facts.
pub(super) const LIVE_HOSTS_HEADER: &str =
    "host\tnode\tqueued\tin_flight\trobots\tbackoff\tcrawl_delay_ms\tpages\tsitemaps";

/// One host of the console's `hosts`; `-` where no pool holds anything of it.
pub(super) fn live_host_row(h: &HostSummary) -> String {
    let live = match &h.live {
        None => "-\t-\t-".to_string(),
        Some(l) => {
            let mut node = l.node.clone();
            for (flag, word) in [(l.paused, "paused"), (l.moving, "moving")] {
                if flag {
                    node.push_str(&format!(" ({word})"));
                }
            }
            format!("{node}\t{}\t{}", l.queued, l.in_flight)
        }
    };
    let backoff = match &h.live {
        Some(l) if l.backoff_ms > 0 => format!("{:.1}s", l.backoff_ms as f64 / 1000.0),
        _ => "-".to_string(),
    };
    format!(
        "{}\t{live}\t{}\t{backoff}\t{}",
        h.host,
        robots_of(h),
        stored_columns(h)
    )
}

/// A host's robots.txt: its pool's state while that is not the rules in
/// hand (to fetch, fetching, unreachable) or nothing is stored, else the
/// stored status.
fn robots_of(h: &HostSummary) -> String {
    match (h.live.as_ref().map(|l| l.robots), h.robots_status) {
        (Some(live), stored) if live != LiveRobots::Ready || stored.is_none() => {
            live.as_str().to_string()
        }
        (_, None) => "-".to_string(),
        (_, Some(status)) => match h.robots_http_code {
            Some(code) => format!("{status} ({code})"),
            None => status.to_string(),
        },
    }
}

/// The store's columns of a host: crawl delay, pages, sitemaps.
fn stored_columns(h: &HostSummary) -> String {
    let sitemaps = if h.sitemaps.is_empty() {
        "-".to_string()
    } else {
        h.sitemaps.join(" ")
    };
    let delay = h
        .crawl_delay_ms
        .map_or("-".to_string(), |ms| ms.to_string());
    format!("{delay}\t{}\t{sitemaps}", h.pages)
}
