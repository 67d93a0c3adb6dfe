//! Nothing refused silently (#44 item 3): every URL the trap defence
//! refuses stays in the store with the rule and the family that refused
//! it; `report traps` and the console's `traps` list each closed family;
//! an operator reopens one at run time (the console's `reopen_trap`) or
//! for a later run (`crawl --trap-allow`), and the crawl then fetches what
//! was refused; a restarted crawl refuses a closed family at once.

use crate::common::coverage::assert_all_real_fetched;
use crate::hostile_web::{MONTHS, hits_under, real_pages, settings, trapped};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;
use web_crawler::actors::Store;
use web_crawler::store::SqliteStore;
use web_crawler::{IdleReason, start};
use web_crawler_testsupport::{Page, TestServer};

const YEARS: std::ops::Range<i32> = 2000..2020;

/// `/cal/YYYY/MM/` for every month of 2000–2019 (240 pages), each linking
/// to the month and the year before and after: a calendar the defence
/// closes long before its end. Real pages `/p/N` link into it.
async fn calendar_site(ip: Ipv4Addr) -> TestServer {
    let mut rng = fastrand::Rng::with_seed(44);
    let mut pages = real_pages(&mut rng, 20, &["/cal/2010/06/"]);
    pages.extend(calendar());
    TestServer::start(ip, pages).await
}

/// The calendar site's real pages: `/` and the twenty articles.
fn real_targets() -> impl Iterator<Item = String> {
    std::iter::once("/".to_string()).chain((0..20).map(|i| format!("/p/{i}")))
}

fn month_path(y: i32, m: i32) -> String {
    format!("/cal/{y}/{m:02}/")
}

fn calendar() -> HashMap<String, Page> {
    let shifted = |y: i32, m: i32| {
        let (y, m) = (y + (m - 1).div_euclid(12), (m - 1).rem_euclid(12) + 1);
        YEARS.contains(&y).then(|| month_path(y, m))
    };
    let mut pages = HashMap::new();
    for y in YEARS {
        for m in 1..=12 {
            let days: String = (1..=30).map(|d| format!("{d} ")).collect();
            let links: String = [shifted(y, m - 1), shifted(y, m + 1), shifted(y - 1, m)]
                .into_iter()
                .chain([shifted(y + 1, m)])
                .flatten()
                .map(|l| format!("<li><a href=\"{l}\">{l}</a></li>"))
                .collect();
            let text = format!(
                "Events calendar for {} {y}. Mon Tue Wed Thu Fri Sat Sun {days} \
                 There are no events this month. Subscribe to the calendar feed.",
                MONTHS[m as usize - 1]
            );
            pages.insert(
                month_path(y, m),
                Page::html(format!(
                    "<!doctype html><html><head><title>Calendar</title></head><body>\
                     <nav><a href=\"/\">Home</a></nav><h1>Calendar</h1><p>{text}</p>\
                     <ul>{links}</ul></body></html>"
                )),
            );
        }
    }
    pages
}

/// Months of the calendar the server never answered.
fn months_not_fetched(server: &TestServer) -> Vec<String> {
    YEARS
        .flat_map(|y| (1..=12).map(move |m| month_path(y, m)))
        .filter(|p| server.hits_of(p) == 0)
        .collect()
}

/// The calendar's family name, as the store keys it.
fn calendar_family(server: &TestServer) -> String {
    format!(
        "{}/cal/{{n}}/{{n}}/",
        server.origin().trim_start_matches("http://")
    )
}

/// A crawl of the calendar site stops in its calendar; a crawl started
/// again on the same store refuses it at once, even a URL it is given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_crawl_refuses_a_closed_family_at_once() {
    let server = calendar_site(Ipv4Addr::new(127, 0, 50, 3)).await;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("t.db")).unwrap());
    let crawl = async |url: &str| {
        let app = start(store.clone(), settings()).await.unwrap();
        app.add_url(url).await.unwrap();
        let idle = tokio::time::timeout(Duration::from_secs(120), app.wait_idle())
            .await
            .expect("the crawl ends by itself")
            .unwrap();
        assert_eq!(idle, IdleReason::FrontierEmpty);
        app.stop(Duration::from_secs(5)).await.unwrap();
    };
    crawl(&server.url("/")).await;
    assert_all_real_fetched(&server, real_targets());
    let family = calendar_family(&server);
    assert!(
        !months_not_fetched(&server).is_empty(),
        "the calendar closed"
    );
    let left_out = trapped(store.as_ref()).await;
    assert!(!left_out.is_empty(), "its refused URLs are kept");
    assert!(
        left_out
            .iter()
            .all(|(url, why)| url.contains("/cal/") && why.ends_with(&family)),
        "{left_out:?}"
    );
    let closures = store.trap_closures().await.unwrap();
    assert!(
        closures.iter().any(|c| c.family == family && !c.allowed),
        "{closures:?}"
    );
    // A calendar URL it refused, given to the next run as a seed: the
    // closure is read back before anything is claimed, so it is not
    // fetched, and is kept refused under its family again.
    let (url, _) = left_out[0].clone();
    let path = url.trim_start_matches(&server.origin()).to_string();
    let fetched = hits_under(&server, "/cal/");
    crawl(&url).await;
    assert_eq!(server.hits_of(&path), 0, "{path} refused at once");
    assert_eq!(hits_under(&server, "/cal/"), fetched);
    assert!(
        (trapped(store.as_ref()).await)
            .iter()
            .any(|(u, why)| *u == url && why.ends_with(&family)),
        "{url} is kept refused"
    );
}

/// `report traps --json`'s family of that name.
#[cfg(feature = "cli")]
fn family_of(json: &[u8], family: &str) -> web_crawler::actors::TrapFamily {
    let families: Vec<web_crawler::actors::TrapFamily> = serde_json::from_slice(json).unwrap();
    families
        .into_iter()
        .find(|f| f.closed.family == family)
        .unwrap_or_else(|| panic!("{family} in {}", String::from_utf8_lossy(json)))
}

#[cfg(feature = "cli")]
mod cli {
    use super::*;
    use crate::common::backend::Backend;
    use crate::common::bin;
    use std::process::Output;

    async fn run(args: &[String]) -> Output {
        tokio::time::timeout(Duration::from_secs(180), bin().args(args).output())
            .await
            .expect("the command finishes")
            .expect("the command runs")
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    fn args(words: &[&str], backend: &Backend) -> Vec<String> {
        let mut all: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        all.extend(backend.cli_args());
        all
    }

    /// A crawl of the calendar site: its summary says how many URLs the
    /// trap rules left out, by rule; `report traps` lists the calendar with
    /// its counts and samples; a later `crawl --trap-allow` of that family
    /// fetches every month (a name the store does not know is refused).
    async fn refused_urls_are_reported_and_a_later_run_that_allows_them_fetches_them(
        backend: Backend,
    ) {
        let server = calendar_site(Ipv4Addr::new(127, 0, 50, 1)).await;
        let seed = server.url("/");
        let crawl = |extra: &[&str]| {
            let mut words = vec![
                "crawl",
                seed.as_str(),
                "--quiet",
                "--delay-ms",
                "0",
                "--per-host",
                "2",
                "--no-index",
            ];
            words.extend(extra);
            args(&words, &backend)
        };
        let out = run(&crawl(&["--json"])).await;
        assert!(out.status.success(), "{}", text(&out.stderr));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let trapped = summary["store"]["trapped"].as_u64().unwrap();
        assert!(trapped > 0, "{summary}");
        assert_all_real_fetched(&server, real_targets());
        let by_rule = summary["store"]["trapped_by_rule"].as_object().unwrap();
        assert_eq!(
            by_rule.values().map(|n| n.as_u64().unwrap()).sum::<u64>(),
            trapped,
            "{summary}"
        );
        assert!(
            !months_not_fetched(&server).is_empty(),
            "the calendar closed"
        );

        // The same command again has nothing to do; its summary says what
        // is left out, by rule, and how to have it.
        let out = run(&crawl(&[])).await;
        assert!(out.status.success(), "{}", text(&out.stderr));
        let rules: Vec<String> = by_rule.iter().map(|(r, n)| format!("{r} {n}")).collect();
        let line = format!(
            "  left out by the trap defence: {trapped} URLs ({}) (web_crawler report traps; \
             --trap-allow FAMILY fetches a family's)",
            rules.join(", ")
        );
        assert!(
            text(&out.stdout).lines().any(|l| l == line),
            "{line:?} in\n{}",
            text(&out.stdout)
        );

        let family = calendar_family(&server);
        let out = run(&args(&["report", "traps"], &backend)).await;
        assert!(out.status.success(), "{}", text(&out.stderr));
        let listing = text(&out.stdout);
        assert!(
            listing.starts_with("host\tfamily\trule\tclosed\tpages\trefused\tstate\n"),
            "{listing}"
        );
        assert!(
            listing.lines().any(|l| l.contains(&format!("\t{family}\t"))
                && l.ends_with(&format!("\t{trapped}\tclosed"))),
            "{listing}"
        );
        assert!(
            listing
                .lines()
                .any(|l| l.starts_with(&format!("\t{}/cal/", server.origin()))),
            "sample URLs: {listing}"
        );
        let out = run(&args(&["report", "traps", "--json"], &backend)).await;
        let calendar = family_of(&out.stdout, &family);
        assert_eq!(calendar.refused, trapped);
        assert!(!calendar.samples.is_empty() && calendar.samples.len() <= 5);
        assert!(calendar.samples.iter().all(|u| u.contains("/cal/")));
        assert!(calendar.closed.pages > 0 && calendar.closed.closed_at > 0);
        assert!(calendar.closed.reason.starts_with("trap: pattern "));
        assert!(!calendar.closed.allowed);

        // A name the store does not know: refused before anything runs.
        let hits = server.total_hits();
        let out = run(&crawl(&["--trap-allow", "example.com/cal/"])).await;
        assert!(!out.status.success());
        let said = text(&out.stderr);
        assert!(
            said.contains("--trap-allow \"example.com/cal/\": this store knows no trap family"),
            "{said}"
        );
        assert_eq!(server.total_hits(), hits, "nothing was crawled");

        // Allowed: the next run fetches the whole calendar.
        let out = run(&crawl(&["--trap-allow", &family])).await;
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(&format!(
                "trap family {family} reopened: {trapped} URL(s) it refused go back to pending"
            )),
            "{}",
            text(&out.stderr)
        );
        assert_eq!(months_not_fetched(&server), Vec::<String>::new());
        let out = run(&args(&["report", "traps", "--json"], &backend)).await;
        let calendar = family_of(&out.stdout, &family);
        assert_eq!(calendar.refused, 0);
        assert!(calendar.closed.allowed && calendar.closed.reopened_at.is_some());
    }

    on_both_backends!(
        reported_then_allowed,
        refused_urls_are_reported_and_a_later_run_that_allows_them_fetches_them
    );

    /// A running service whose calendar closed: the console lists it
    /// (`traps`) and reopens it (`reopen_trap`), and the running crawl
    /// fetches every month.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_operator_reopens_a_trap_family_at_run_time_from_the_console() {
        let server = calendar_site(Ipv4Addr::new(127, 0, 50, 2)).await;
        let cluster = crate::cluster::Cluster::start_on(Ipv4Addr::new(127, 0, 50, 9), &[]).await;
        cluster.add_url(&server.url("/")).await;
        // The calendar closed and what is left is fetched.
        let mut settled = false;
        for _ in 0..600 {
            if let Some(s) = cluster.status().await
                && s["trapped"].as_u64().unwrap_or(0) > 0
                && s["pending"] == 0
                && s["in_flight"] == 0
            {
                settled = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(settled, "the calendar closes and the crawl settles");
        assert_all_real_fetched(&server, real_targets());
        assert!(!months_not_fetched(&server).is_empty());
        let family = calendar_family(&server);
        let db = cluster.db();
        let out = run(&[
            "report".into(),
            "traps".into(),
            "--json".into(),
            "--db".into(),
            db.display().to_string(),
        ])
        .await;
        let refused = family_of(&out.stdout, &family).refused;
        assert!(refused > 0);

        let out = cluster
            .console(&[], &format!("traps\nreopen_trap {family}\nquit\n"))
            .await;
        let said = text(&out.stdout);
        assert!(
            said.lines().any(|l| l.contains(&format!("\t{family}\t"))),
            "`traps` lists the calendar: {said}"
        );
        assert!(
            said.contains(&format!(
                "reopened {family}: {refused} URL(s) back to pending; it is never closed again on this store"
            )),
            "{said}"
        );
        let mut left = months_not_fetched(&server);
        for _ in 0..600 {
            if left.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            left = months_not_fetched(&server);
        }
        assert_eq!(left, Vec::<String>::new(), "every month is fetched");
        // And a name no family has is refused with how to find one.
        let out = cluster
            .console(&[], "reopen_trap example.com/x/\nquit\n")
            .await;
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(
            said.contains("no trap family \"example.com/x/\" in this store"),
            "{said}"
        );
    }
}
