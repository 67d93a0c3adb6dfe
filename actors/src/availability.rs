//! Availability watching, the paper's first use of its robot besides
//! finding text: when a watched URL is due again (the revisit policy), what
//! a fetch changed (the status transition), and what the availability report
//! makes of a URL's history. Pure functions of their inputs and `now`.

use crate::types::{LastFetch, Millis};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// The shortest interval a URL is watched at: the master looks for URLs
/// due once a second, so a shorter one would not be kept.
pub const MIN_CHECK_EVERY_MS: Millis = 1_000;

/// A watch interval (`add_url … every`, `--recrawl-every`) that cannot be kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot watch a URL every {0}ms: the shortest interval is 1s (due URLs are looked for once a second)"
)]
pub struct IntervalTooShort(pub Millis);

/// `every` in milliseconds, as a watch interval travels (saturating).
pub fn interval_ms(every: Duration) -> Millis {
    Millis::try_from(every.as_millis()).unwrap_or(Millis::MAX)
}

/// `every` as a watch interval in milliseconds, if it is one that can be kept.
pub fn check_every(every: Duration) -> Result<Millis, IntervalTooShort> {
    check_every_ms(interval_ms(every))
}

/// [`check_every`] for an interval already in milliseconds (as a request carries it).
fn check_every_ms(ms: Millis) -> Result<Millis, IntervalTooShort> {
    if ms < MIN_CHECK_EVERY_MS {
        return Err(IntervalTooShort(ms));
    }
    Ok(ms)
}

/// A URL's own interval that says "not watched": not even at
/// `recrawl_every` (`add_url … every off`). Stored as such, so it stays
/// off across re-fetches until another interval of its own is given.
pub const WATCH_OFF: Millis = 0;

/// A URL's own interval as a request carries it: [`WATCH_OFF`], or one
/// that can be kept. The edges that read a duration refuse a zero one
/// ([`check_every`]) before it could be taken for `off`.
pub fn own_interval_ms(ms: Millis) -> Result<Millis, IntervalTooShort> {
    if ms == WATCH_OFF {
        return Ok(WATCH_OFF);
    }
    check_every_ms(ms)
}

/// Whether a fetch found the resource available: any HTTP answer below 400
/// (a redirect or a 304 included). No answer, 4xx and 5xx are down.
pub fn is_up(http_returncode: Option<u16>) -> bool {
    matches!(http_returncode, Some(100..=399))
}

/// A watched URL's state changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// It answered before and does not now.
    Down,
    /// It did not answer before and does now.
    Up,
    /// It answers as before, with another body.
    Changed,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Down => "down",
            Change::Up => "up",
            Change::Changed => "changed",
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One fetch as the transition rule sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    pub http_returncode: Option<u16>,
    pub content_hash: Option<u64>,
    /// A 304: the body is the one fetched before.
    pub not_modified: bool,
}

/// What `now` changed against the fetch before it (`None`: the first fetch,
/// which changes nothing). A 304 is unchanged; a body is compared by hash
/// only while the URL is up before and after.
pub fn transition(previous: Option<&LastFetch>, now: &Check) -> Option<Change> {
    let previous = previous?;
    match (is_up(previous.http_returncode), is_up(now.http_returncode)) {
        (true, false) => Some(Change::Down),
        (false, true) => Some(Change::Up),
        (false, false) => None,
        (true, true) => {
            let differs = !now.not_modified
                && previous.content_hash.is_some()
                && now.content_hash.is_some()
                && previous.content_hash != now.content_hash;
            differs.then_some(Change::Changed)
        }
    }
}

/// The revisit policy (seed 002's, adaptive): a watched URL is checked
/// again `every` after its fetch at first; a change halves its interval, a
/// check that finds it unchanged makes it half as long again, and a URL
/// that is down is checked at the shortest interval, so a recovery is seen
/// soon. The interval stays within [`every / 2`, `4 × every`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Revisit {
    pub every_ms: Millis,
}

impl Revisit {
    pub fn min_ms(&self) -> Millis {
        (self.every_ms / 2).max(1)
    }

    pub fn max_ms(&self) -> Millis {
        self.every_ms.saturating_mul(4)
    }

    /// The interval until the next check after a fetch that found the URL
    /// `up` or not, with `change` against the fetch before; `previous` is
    /// the interval the last check chose (`None`: first fetch).
    pub fn next_interval(
        &self,
        previous: Option<Millis>,
        up: bool,
        change: Option<Change>,
    ) -> Millis {
        let Some(previous) = previous else {
            return self.every_ms;
        };
        let next = if !up {
            self.min_ms()
        } else if change.is_some() {
            previous / 2
        } else {
            previous.saturating_add(previous / 2)
        };
        next.clamp(self.min_ms(), self.max_ms())
    }
}

/// The revisit policy of a URL whose own interval is `own` (`add_url …
/// every`) on a node watching every URL at `global` (`recrawl_every`): its
/// own interval wins ([`WATCH_OFF`]: not watched at all); `None` when the
/// URL is not watched.
pub fn revisit_for(own: Option<Millis>, global: Option<Millis>) -> Option<Revisit> {
    match own {
        Some(WATCH_OFF) => None,
        own => own.or(global).map(|every_ms| Revisit { every_ms }),
    }
}

/// The interval the last check chose, as the revisit policy of a fetch
/// made with the URL's own interval `own` builds on: a URL given another
/// interval of its own since starts over from it.
pub fn previous_interval(last: Option<&LastFetch>, own: Option<Millis>) -> Option<Millis> {
    last.filter(|l| l.check_every_ms == own)
        .and_then(|l| l.check_interval_ms)
}

/// One fetch of a URL as `fetch_history` keeps it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FetchHistory {
    pub url: String,
    pub host: String,
    /// When the result was written (epoch ms).
    pub d_fetch: Millis,
    /// `None`: no response (network error, robots).
    pub http_returncode: Option<u16>,
    pub fetch_ms: i64,
    /// The response's `Content-Length`.
    pub size: Option<i64>,
    pub content_hash: Option<u64>,
    /// The fetch changed the URL's state ([`transition`]): down, up, or
    /// another body.
    pub changed: bool,
    pub error: Option<String>,
}

/// Which history to read.
#[derive(Clone, Debug, Default)]
pub struct HistoryQuery {
    /// Only this host's URLs (`host[:port]`).
    pub host: Option<String>,
    /// Only fetches at or after this time.
    pub since: Option<Millis>,
}

/// A URL's availability over its history: the `report availability` row.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Availability {
    pub url: String,
    pub host: String,
    pub checks: u64,
    /// Checks that found it up, in percent.
    pub uptime_pct: f64,
    /// The last check that found it down, and why.
    pub last_failure: Option<Millis>,
    pub last_failure_reason: Option<String>,
    pub p50_ms: i64,
    pub p95_ms: i64,
}

/// Availability of each URL of `history` (sorted by URL, then time), in URL order.
pub fn availability(history: &[FetchHistory]) -> Vec<Availability> {
    history
        .chunk_by(|a, b| a.url == b.url)
        .map(|fetches| {
            let up = fetches.iter().filter(|f| is_up(f.http_returncode)).count();
            let last_down = fetches.iter().rev().find(|f| !is_up(f.http_returncode));
            let mut times: Vec<i64> = fetches.iter().map(|f| f.fetch_ms).collect();
            times.sort_unstable();
            Availability {
                url: fetches[0].url.clone(),
                host: fetches[0].host.clone(),
                checks: fetches.len() as u64,
                uptime_pct: 100.0 * up as f64 / fetches.len() as f64,
                last_failure: last_down.map(|f| f.d_fetch),
                last_failure_reason: last_down.map(|f| match (&f.error, f.http_returncode) {
                    (Some(e), _) => e.clone(),
                    (None, Some(code)) => format!("HTTP {code}"),
                    (None, None) => "no response".to_string(),
                }),
                p50_ms: percentile(&times, 50),
                p95_ms: percentile(&times, 95),
            }
        })
        .collect()
}

/// Nearest-rank percentile of sorted, non-empty `values`.
fn percentile(sorted: &[i64], p: usize) -> i64 {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// A change a fetch made, as notifications and `report changes` tell it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusEvent {
    pub url: String,
    pub change: Change,
    /// The status before and now (`None`: no response).
    pub previous_returncode: Option<u16>,
    pub http_returncode: Option<u16>,
    /// Why it is down, in one line.
    pub reason: Option<String>,
    pub at: Millis,
}

/// The changes in `history` (sorted by URL, then time): each fetch marked
/// changed, with the status before it, in URL then time order.
pub fn changes(history: &[FetchHistory]) -> Vec<StatusEvent> {
    let mut out = Vec::new();
    for fetches in history.chunk_by(|a, b| a.url == b.url) {
        for pair in fetches.windows(2) {
            let (before, now) = (&pair[0], &pair[1]);
            if !now.changed {
                continue;
            }
            let up = is_up(now.http_returncode);
            let change = match (is_up(before.http_returncode), up) {
                (true, false) => Change::Down,
                (false, true) => Change::Up,
                _ => Change::Changed,
            };
            out.push(StatusEvent {
                url: now.url.clone(),
                change,
                previous_returncode: before.http_returncode,
                http_returncode: now.http_returncode,
                reason: if up { None } else { now.error.clone() },
                at: now.d_fetch,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last(code: Option<u16>, hash: Option<u64>) -> LastFetch {
        LastFetch {
            http_returncode: code,
            content_hash: hash,
            ..LastFetch::default()
        }
    }

    fn check(code: Option<u16>, hash: Option<u64>) -> Check {
        Check {
            http_returncode: code,
            content_hash: hash,
            not_modified: false,
        }
    }

    #[test]
    fn up_means_an_answer_below_400() {
        assert!(is_up(Some(200)) && is_up(Some(304)) && is_up(Some(301)));
        assert!(!is_up(Some(404)) && !is_up(Some(500)) && !is_up(None));
    }

    #[test]
    fn transitions_from_the_last_fetch() {
        let ok = last(Some(200), Some(1));
        assert_eq!(transition(None, &check(Some(500), None)), None, "first");
        assert_eq!(
            transition(Some(&ok), &check(Some(500), Some(9))),
            Some(Change::Down)
        );
        assert_eq!(
            transition(Some(&ok), &check(None, None)),
            Some(Change::Down)
        );
        let down = last(None, None);
        assert_eq!(
            transition(Some(&down), &check(Some(200), Some(1))),
            Some(Change::Up)
        );
        assert_eq!(transition(Some(&down), &check(Some(503), None)), None);
        assert_eq!(transition(Some(&ok), &check(Some(200), Some(1))), None);
        assert_eq!(
            transition(Some(&ok), &check(Some(200), Some(2))),
            Some(Change::Changed)
        );
        let not_modified = Check {
            http_returncode: Some(304),
            content_hash: None,
            not_modified: true,
        };
        assert_eq!(transition(Some(&ok), &not_modified), None, "304");
        assert_eq!(
            transition(Some(&last(Some(200), None)), &check(Some(200), Some(2))),
            None,
            "nothing to compare with"
        );
    }

    #[test]
    fn the_interval_adapts_within_its_bounds() {
        let r = Revisit { every_ms: 10_000 };
        assert_eq!((r.min_ms(), r.max_ms()), (5_000, 40_000));
        assert_eq!(r.next_interval(None, true, None), 10_000, "first fetch");
        assert_eq!(r.next_interval(None, false, None), 10_000);
        assert_eq!(r.next_interval(Some(10_000), true, None), 15_000);
        assert_eq!(r.next_interval(Some(30_000), true, None), 40_000, "capped");
        assert_eq!(r.next_interval(Some(40_000), true, None), 40_000);
        assert_eq!(
            r.next_interval(Some(40_000), true, Some(Change::Changed)),
            20_000
        );
        assert_eq!(
            r.next_interval(Some(6_000), true, Some(Change::Up)),
            5_000,
            "floored"
        );
        assert_eq!(
            r.next_interval(Some(40_000), false, Some(Change::Down)),
            5_000
        );
        assert_eq!(r.next_interval(Some(5_000), false, None), 5_000);
        // Unchanged for ever: it settles at the cap.
        let mut i = None;
        for _ in 0..20 {
            i = Some(r.next_interval(i, true, None));
        }
        assert_eq!(i, Some(40_000));
    }

    #[test]
    fn a_url_s_own_interval_beats_the_node_s() {
        assert_eq!(revisit_for(None, None), None, "not watched");
        assert_eq!(revisit_for(None, Some(60_000)).unwrap().every_ms, 60_000);
        assert_eq!(revisit_for(Some(2_000), None).unwrap().every_ms, 2_000);
        let own = revisit_for(Some(2_000), Some(60_000)).unwrap();
        assert_eq!(own.every_ms, 2_000, "its own wins");
        // Bounds relative to its own interval, not the node's.
        assert_eq!((own.min_ms(), own.max_ms()), (1_000, 8_000));
        assert_eq!(own.next_interval(Some(60_000), true, None), 8_000);
    }

    #[test]
    fn a_url_watched_off_is_not_watched_even_at_the_node_s_interval() {
        assert_eq!(revisit_for(Some(WATCH_OFF), Some(60_000)), None);
        assert_eq!(revisit_for(Some(WATCH_OFF), None), None);
        assert_eq!(own_interval_ms(WATCH_OFF), Ok(WATCH_OFF));
        assert_eq!(own_interval_ms(2_000), Ok(2_000));
        assert_eq!(own_interval_ms(999), Err(IntervalTooShort(999)));
    }

    #[test]
    fn a_new_interval_of_its_own_starts_the_adaptation_over() {
        let last = |interval, own| LastFetch {
            check_interval_ms: Some(interval),
            check_every_ms: own,
            ..LastFetch::default()
        };
        assert_eq!(previous_interval(None, Some(2_000)), None);
        assert_eq!(
            previous_interval(Some(&last(3_000, Some(2_000))), Some(2_000)),
            Some(3_000)
        );
        assert_eq!(
            previous_interval(Some(&last(240_000, None)), Some(2_000)),
            None,
            "watched at the node's interval before"
        );
        assert_eq!(
            previous_interval(Some(&last(3_000, Some(2_000))), Some(5_000)),
            None
        );
        assert_eq!(
            previous_interval(Some(&last(90_000, None)), None),
            Some(90_000),
            "the node's interval, as before"
        );
    }

    #[test]
    fn intervals_shorter_than_the_sweep_are_refused() {
        assert_eq!(check_every(Duration::from_secs(1)), Ok(1_000));
        assert_eq!(check_every(Duration::from_secs(600)), Ok(600_000));
        assert_eq!(check_every(Duration::ZERO), Err(IntervalTooShort(0)));
        assert_eq!(check_every_ms(999), Err(IntervalTooShort(999)));
        assert_eq!(
            IntervalTooShort(500).to_string(),
            "cannot watch a URL every 500ms: the shortest interval is 1s \
             (due URLs are looked for once a second)"
        );
        assert_eq!(check_every(Duration::MAX), Ok(Millis::MAX));
    }

    fn fetch(url: &str, at: Millis, code: Option<u16>, ms: i64, changed: bool) -> FetchHistory {
        FetchHistory {
            url: url.into(),
            host: "h".into(),
            d_fetch: at,
            http_returncode: code,
            fetch_ms: ms,
            changed,
            error: code.is_none().then(|| "connection refused".to_string()),
            ..FetchHistory::default()
        }
    }

    #[test]
    fn availability_and_changes_of_a_history() {
        let history = vec![
            fetch("http://a/", 1, Some(200), 10, false),
            fetch("http://a/", 2, Some(500), 30, true),
            fetch("http://a/", 3, None, 20, false),
            fetch("http://a/", 4, Some(200), 40, true),
            fetch("http://a/", 5, Some(200), 50, true),
            fetch("http://b/", 1, Some(304), 5, false),
        ];
        let a = availability(&history);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].checks, 5);
        assert!((a[0].uptime_pct - 60.0).abs() < 1e-9);
        assert_eq!(a[0].last_failure, Some(3));
        assert_eq!(
            a[0].last_failure_reason.as_deref(),
            Some("connection refused")
        );
        assert_eq!((a[0].p50_ms, a[0].p95_ms), (30, 50));
        assert_eq!(
            (a[1].checks, a[1].uptime_pct, a[1].last_failure),
            (1, 100.0, None)
        );

        let c = changes(&history);
        let kinds: Vec<(Millis, Change)> = c.iter().map(|e| (e.at, e.change)).collect();
        assert_eq!(
            kinds,
            vec![(2, Change::Down), (4, Change::Up), (5, Change::Changed)]
        );
        assert_eq!(c[0].previous_returncode, Some(200));
        assert_eq!(c[0].http_returncode, Some(500));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        assert_eq!(percentile(&[7], 95), 7);
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!((percentile(&v, 50), percentile(&v, 95)), (50, 95));
    }
}
