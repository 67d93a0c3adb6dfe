//! When the store is away. A database server restarts, a replica set
//! elects a new primary, a network blips, someone holds the SQLite file's
//! write lock: the store is unavailable for a while, and a crawl should wait
//! for it rather than die. This is the rule of that wait, as plain data over
//! `now`: when a store that failed is asked again (backing off), when the
//! wait is over ([`CrawlConfig::store_outage_limit`]), and the sentence the
//! app stops with then ([`StoreFailure`]). The master follows it through its
//! [`Window`](crate::window::Window).
//!
//! [`CrawlConfig::store_outage_limit`]: crate::CrawlConfig::store_outage_limit

use crate::types::Millis;
use std::fmt;
use std::time::Duration;

/// The first retry after a failure...
pub const FIRST_RETRY_MS: Millis = 250;
/// ...doubling up to this: an outage is noticed to be over within seconds.
pub const MAX_RETRY_MS: Millis = 4_000;

/// How long to wait before the `attempt`-th retry (0: the first).
pub fn retry_delay(attempt: u32) -> Millis {
    FIRST_RETRY_MS
        .saturating_mul(1 << attempt.min(16))
        .min(MAX_RETRY_MS)
}

/// A store outage in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outage {
    /// When the first call that failed began (epoch ms).
    pub since: Millis,
    /// Failed calls so far.
    pub attempts: u32,
    /// When to ask the store again.
    pub retry_at: Millis,
    /// Why the last call failed, in words.
    pub cause: String,
}

/// What to do after a call to the store failed transiently.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The store just became unavailable: say so, once; ask again at `retry_at`.
    Began { retry_at: Millis },
    /// It is still away; ask again at `retry_at`.
    Continues { retry_at: Millis },
    /// It has been away for longer than the limit: stop.
    GiveUp(StoreFailure),
}

/// Whether the store is reachable, and since when it is not.
#[derive(Debug)]
pub struct StoreHealth {
    limit_ms: Millis,
    outage: Option<Outage>,
}

impl StoreHealth {
    /// Wait up to `limit` for a store that became unavailable.
    pub fn new(limit: Duration) -> Self {
        Self {
            limit_ms: Millis::try_from(limit.as_millis()).unwrap_or(Millis::MAX),
            outage: None,
        }
    }

    /// A call begun at `started` failed at `now` with a transient error
    /// (`cause`, in words). The outage started when the first failing call
    /// began; it ends in a [`Verdict::GiveUp`] once it lasted the limit. The
    /// last retry falls on the limit, so it is tried before giving up.
    pub fn failed(&mut self, started: Millis, now: Millis, cause: String) -> Verdict {
        let first = self.outage.is_none();
        let outage = self.outage.get_or_insert_with(|| Outage {
            since: started,
            attempts: 0,
            retry_at: now,
            cause: String::new(),
        });
        outage.attempts += 1;
        outage.cause = cause;
        let deadline = outage.since.saturating_add(self.limit_ms);
        if now >= deadline {
            return Verdict::GiveUp(StoreFailure {
                kind: StoreFailureKind::Unreachable {
                    limit: Duration::from_millis(self.limit_ms.max(0) as u64),
                },
                since: outage.since,
                cause: outage.cause.clone(),
            });
        }
        outage.retry_at = (now + retry_delay(outage.attempts - 1)).min(deadline);
        let retry_at = outage.retry_at;
        if first {
            Verdict::Began { retry_at }
        } else {
            Verdict::Continues { retry_at }
        }
    }

    /// A call succeeded: the outage, if there was one, is over (returned).
    pub fn recovered(&mut self) -> Option<Outage> {
        self.outage.take()
    }

    /// The outage in progress.
    pub fn outage(&self) -> Option<&Outage> {
        self.outage.as_ref()
    }

    /// Ask again at once, whenever the retry was due.
    pub fn ask_now(&mut self) {
        if let Some(outage) = &mut self.outage {
            outage.retry_at = Millis::MIN;
        }
    }

    /// Whether the store may be asked now: always, unless it is away and
    /// its next retry is not due yet.
    pub fn may_ask(&self, now: Millis) -> bool {
        self.outage.as_ref().is_none_or(|o| now >= o.retry_at)
    }
}

/// Why the store ended a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreFailureKind {
    /// Unavailable for longer than the outage limit.
    Unreachable { limit: Duration },
    /// A failure no wait would mend: a full disk, refused credentials, a
    /// corrupt store.
    Permanent,
}

/// The store stopped the app: what happened, since when, and why, as one
/// sentence for people ([`fmt::Display`]) that says what to do too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreFailure {
    pub kind: StoreFailureKind,
    /// When the store was first found failing (epoch ms).
    pub since: Millis,
    /// The error and its causes, in words.
    pub cause: String,
}

impl StoreFailure {
    /// A failure no wait would mend, found at `at`.
    pub fn permanent(at: Millis, cause: String) -> Self {
        Self {
            kind: StoreFailureKind::Permanent,
            since: at,
            cause,
        }
    }
}

impl fmt::Display for StoreFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            StoreFailureKind::Unreachable { limit } => write!(
                f,
                "the store has been unreachable since {}, longer than the {} the crawl \
                 waits for it ({}); what was crawled is kept: run the crawl again on the \
                 same store once it is back",
                utc_time(self.since),
                human_duration(*limit),
                self.cause
            ),
            StoreFailureKind::Permanent => write!(
                f,
                "the store failed at {} and waiting will not mend it ({}); what was \
                 crawled is kept: fix that, then run the crawl again on the same store \
                 to resume",
                utc_time(self.since),
                self.cause
            ),
        }
    }
}

/// A duration as people write it: `500ms`, `3s`, `90s`, `10min`, `2h`.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1_000 || !ms.is_multiple_of(1_000) {
        return format!("{ms}ms");
    }
    let s = ms / 1_000;
    if s >= 3_600 && s.is_multiple_of(3_600) {
        format!("{}h", s / 3_600)
    } else if s >= 60 && s.is_multiple_of(60) && s != 60 {
        format!("{}min", s / 60)
    } else {
        format!("{s}s")
    }
}

/// Epoch milliseconds as `2025-06-01 12:03:04 UTC`.
pub fn utc_time(ms: Millis) -> String {
    let secs = ms.div_euclid(1_000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian
/// calendar (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(60);

    #[test]
    fn retries_back_off_from_a_quarter_second_to_four_seconds() {
        let delays: Vec<Millis> = (0..8).map(retry_delay).collect();
        assert_eq!(delays, [250, 500, 1_000, 2_000, 4_000, 4_000, 4_000, 4_000]);
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY_MS);
    }

    #[test]
    fn an_outage_begins_once_backs_off_and_ends_when_a_call_succeeds() {
        let mut h = StoreHealth::new(LIMIT);
        assert!(h.may_ask(0) && h.outage().is_none());
        // The first failing call began at 1_000 and took 10 s (a server
        // selection timeout): the outage started when it began.
        let v = h.failed(1_000, 11_000, "down".into());
        assert_eq!(v, Verdict::Began { retry_at: 11_250 });
        assert_eq!(h.outage().unwrap().since, 1_000);
        assert!(!h.may_ask(11_249), "not before the retry is due");
        assert!(h.may_ask(11_250));
        let v = h.failed(11_250, 11_300, "still down".into());
        assert_eq!(v, Verdict::Continues { retry_at: 11_800 });
        assert_eq!(h.outage().unwrap().cause, "still down");
        assert_eq!(h.outage().unwrap().attempts, 2);
        let over = h.recovered().expect("it was away");
        assert_eq!((over.since, over.attempts), (1_000, 2));
        assert!(h.recovered().is_none(), "said once");
        assert!(h.may_ask(0));
        // The next outage is a new one, announced again.
        assert!(matches!(
            h.failed(50_000, 50_010, "down".into()),
            Verdict::Began { .. }
        ));
    }

    #[test]
    fn the_last_retry_falls_on_the_limit_and_then_it_gives_up() {
        let mut h = StoreHealth::new(Duration::from_secs(3));
        assert_eq!(
            h.failed(0, 100, "down".into()),
            Verdict::Began { retry_at: 350 }
        );
        assert_eq!(
            h.failed(350, 2_900, "down".into()),
            Verdict::Continues { retry_at: 3_000 },
            "capped at the limit"
        );
        match h.failed(3_000, 3_000, "no server answered".into()) {
            Verdict::GiveUp(failure) => {
                assert_eq!(failure.since, 0);
                assert_eq!(
                    failure.kind,
                    StoreFailureKind::Unreachable {
                        limit: Duration::from_secs(3)
                    }
                );
                assert_eq!(failure.cause, "no server answered");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_first_failure_slower_than_the_limit_gives_up_at_once() {
        let mut h = StoreHealth::new(Duration::from_secs(3));
        assert!(matches!(
            h.failed(0, 10_000, "server selection timeout".into()),
            Verdict::GiveUp(_)
        ));
        let mut none = StoreHealth::new(Duration::ZERO);
        assert!(matches!(none.failed(5, 5, "x".into()), Verdict::GiveUp(_)));
    }

    #[test]
    fn the_stop_is_one_sentence_with_when_why_and_what_to_do() {
        let failure = StoreFailure {
            kind: StoreFailureKind::Unreachable {
                limit: Duration::from_secs(60),
            },
            since: 1_748_779_384_000,
            cause: "MongoDB is unavailable: no server answered".into(),
        };
        assert_eq!(
            failure.to_string(),
            "the store has been unreachable since 2025-06-01 12:03:04 UTC, longer than the \
             60s the crawl waits for it (MongoDB is unavailable: no server answered); what \
             was crawled is kept: run the crawl again on the same store once it is back"
        );
        let full = StoreFailure::permanent(0, "the store is full: database or disk is full".into());
        let text = full.to_string();
        assert!(
            text.starts_with("the store failed at 1970-01-01 00:00:00 UTC and waiting"),
            "{text}"
        );
        assert!(text.contains("(the store is full: database or disk is full)"));
        assert!(!text.contains('\n'));
    }

    #[test]
    fn times_and_durations_read_as_people_write_them() {
        assert_eq!(utc_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_time(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_time(4_107_542_399_999), "2100-02-28 23:59:59 UTC");
        assert_eq!(utc_time(-1_000), "1969-12-31 23:59:59 UTC");
        let d = |ms| human_duration(Duration::from_millis(ms));
        assert_eq!(d(500), "500ms");
        assert_eq!(d(1_500), "1500ms");
        assert_eq!(d(3_000), "3s");
        assert_eq!(d(60_000), "60s");
        assert_eq!(d(90_000), "90s");
        assert_eq!(d(600_000), "10min");
        assert_eq!(d(7_200_000), "2h");
    }
}
