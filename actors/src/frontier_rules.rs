//! The rules a [`Frontier`](crate::Frontier) store applies, as pure
//! functions (both backends call them, so they agree): the paper's
//! `add_pending_url` rules for each link, the credit a link carries, which
//! pending URLs a claim takes, and how a failed page is judged.

use crate::types::{Millis, PageRecord, ROBOTS_BLOCKED};
use std::collections::{HashMap, VecDeque};

/// What to do with a link whose URL may already be known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkDecision {
    /// Upsert into pending_urls (merging referrals if already pending).
    Queue,
    /// Already processed recently: only add the referral to processed_urls.
    ReferralOnly,
}

/// `processed` is the matching processed_urls document's `d_processed`, when
/// one exists with the same operation. A page processed with another
/// operation is queued again (as the paper's lookup on `_id` + `operation`).
/// `modified` is when the link says the page last changed (a sitemap's
/// `lastmod`): a page fetched before that is queued again, whatever the
/// reprocess interval.
pub fn decide_link(
    processed: Option<Millis>,
    modified: Option<Millis>,
    now: Millis,
    reprocess_after_ms: Option<Millis>,
) -> LinkDecision {
    let Some(at) = processed else {
        return LinkDecision::Queue;
    };
    let changed_since = modified.is_some_and(|m| m > at);
    let due = reprocess_after_ms.is_some_and(|interval| now.saturating_sub(at) >= interval);
    if changed_since || due {
        LinkDecision::Queue
    } else {
        LinkDecision::ReferralOnly
    }
}

/// How a page failed, as a later run of the crawl judges it: worth
/// another try, or an answer that stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// No answer (a refused connection, a timeout, a name that did not
    /// resolve, a TLS failure, robots.txt unreachable) or an answer that
    /// means "not now" (5xx, 429): a server fixed since may answer.
    Transient,
    /// The server answered and meant it (4xx, a redirect loop, a soft 404).
    Answered,
}

/// How `record` failed; `None` for a page that did not fail, or that
/// robots.txt disallows (the site's rule, not a failure to retry).
pub fn failure_kind(record: &PageRecord) -> Option<FailureKind> {
    let failed = record.error.is_some() || record.http_returncode.is_some_and(|c| c >= 400);
    if !failed || record.error.as_deref() == Some(ROBOTS_BLOCKED) {
        return None;
    }
    Some(match record.http_returncode {
        None | Some(429) | Some(500..=599) => FailureKind::Transient,
        Some(_) => FailureKind::Answered,
    })
}

/// How much of a page's OPIC credit a link gets, relative to its siblings,
/// given when the link says its page last changed (a sitemap's `lastmod`):
/// 4 for a page changed just now, halving its excess every week down to 1,
/// the weight of a link that says nothing. Recently changed pages are
/// fetched first; the page's credit is only shared differently, not grown.
pub fn recency_weight(modified: Option<Millis>, now: Millis) -> f64 {
    const WEEK_MS: f64 = 7.0 * 24.0 * 3600.0 * 1000.0;
    match modified {
        None => 1.0,
        Some(at) => {
            let age = now.saturating_sub(at).max(0) as f64;
            1.0 + 3.0 * 0.5_f64.powf(age / WEEK_MS)
        }
    }
}

/// Whether a pending URL's OPIC credit gathered since it was last written
/// (`unsaved`) is due to be written. Writing once the unsaved part reaches
/// the stored part keeps the stored priority within a factor of two of the
/// exact credit, at a few writes per URL instead of one per inbound link.
pub fn credit_due(stored: f64, unsaved: f64) -> bool {
    unsaved > 0.0 && unsaved >= stored
}

/// A content hash marks a duplicate only for successful responses: error
/// pages are often byte-identical without being the same resource.
pub fn dedupe_by_content(http_returncode: Option<u16>) -> bool {
    matches!(http_returncode, Some(200..=299))
}

/// Choose up to `limit` of `candidates` (in priority order, each with its
/// host) so that no host gets more than `per_host_cap` minus what this node
/// already holds of it, taking hosts in turn: the first of every host before
/// the second of any.
pub fn round_robin<'h, K>(
    candidates: impl IntoIterator<Item = (K, &'h str)>,
    limit: usize,
    per_host_cap: usize,
    held: &HashMap<String, usize>,
) -> Vec<K> {
    let mut hosts: Vec<(&str, VecDeque<K>)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (key, host) in candidates {
        let i = *index.entry(host).or_insert_with(|| {
            hosts.push((host, VecDeque::new()));
            hosts.len() - 1
        });
        hosts[i].1.push_back(key);
    }
    let mut allowance: Vec<usize> = hosts
        .iter()
        .map(|(h, _)| per_host_cap.saturating_sub(held.get(*h).copied().unwrap_or(0)))
        .collect();
    let mut out = Vec::new();
    loop {
        let before = out.len();
        for (i, (_, queue)) in hosts.iter_mut().enumerate() {
            if out.len() == limit {
                return out;
            }
            if allowance[i] > 0
                && let Some(key) = queue.pop_front()
            {
                allowance[i] -= 1;
                out.push(key);
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_of_the_moment_is_transient_and_an_answer_stands() {
        let failed = |code: Option<u16>, error: Option<&str>| {
            failure_kind(&PageRecord {
                http_returncode: code,
                error: error.map(str::to_string),
                ..PageRecord::default()
            })
        };
        let transient = Some(FailureKind::Transient);
        let refused = "failed after 2 attempt(s): connection refused";
        assert_eq!(failed(None, Some(refused)), transient);
        assert_eq!(
            failed(None, Some("failed after 3 attempt(s): timed out (total)")),
            transient
        );
        assert_eq!(failed(Some(500), None), transient);
        assert_eq!(
            failed(Some(503), Some("failed after 3 attempt(s): HTTP 503")),
            transient
        );
        assert_eq!(failed(Some(429), Some("HTTP 429")), transient);
        assert_eq!(failed(Some(404), None), Some(FailureKind::Answered));
        assert_eq!(
            failed(Some(200), Some("trap: soft 404")),
            Some(FailureKind::Answered)
        );
        assert_eq!(failed(None, Some(ROBOTS_BLOCKED)), None, "the site's rule");
        assert_eq!(failed(Some(200), None), None, "not failed");
        assert_eq!(failed(Some(301), None), None, "a redirect");
    }

    #[test]
    fn round_robin_takes_hosts_in_turn_within_their_caps() {
        let candidates = [(1, "a"), (2, "a"), (3, "a"), (4, "b"), (5, "c"), (6, "c")];
        let held = HashMap::from([("c".to_string(), 1)]);
        assert_eq!(round_robin(candidates, 10, 2, &held), vec![1, 4, 5, 2]);
        assert_eq!(round_robin(candidates, 2, 2, &held), vec![1, 4]);
        assert!(round_robin(candidates, 0, 2, &held).is_empty());
        assert_eq!(
            round_robin(candidates, 10, 5, &HashMap::new()),
            vec![1, 4, 5, 2, 6, 3]
        );
    }

    #[test]
    fn unknown_url_is_queued() {
        assert_eq!(decide_link(None, None, 1_000, None), LinkDecision::Queue);
        assert_eq!(
            decide_link(None, None, 1_000, Some(60_000)),
            LinkDecision::Queue
        );
    }

    #[test]
    fn processed_url_without_interval_only_gains_a_referral() {
        assert_eq!(
            decide_link(Some(0), None, i64::MAX, None),
            LinkDecision::ReferralOnly
        );
    }

    #[test]
    fn reprocess_interval_is_the_papers_age_rule() {
        let interval = Some(60_000);
        assert_eq!(
            decide_link(Some(100_000), None, 159_999, interval),
            LinkDecision::ReferralOnly
        );
        assert_eq!(
            decide_link(Some(100_000), None, 160_000, interval),
            LinkDecision::Queue
        );
    }

    #[test]
    fn a_page_changed_since_its_fetch_is_queued_again() {
        // lastmod after the fetch: queued, even with no reprocess interval.
        assert_eq!(
            decide_link(Some(100_000), Some(100_001), 100_002, None),
            LinkDecision::Queue
        );
        // lastmod before (or at) the fetch: only a referral.
        assert_eq!(
            decide_link(Some(100_000), Some(100_000), 200_000, None),
            LinkDecision::ReferralOnly
        );
        // The interval still applies to an unchanged page.
        assert_eq!(
            decide_link(Some(100_000), Some(50_000), 200_000, Some(60_000)),
            LinkDecision::Queue
        );
    }

    #[test]
    fn recently_changed_pages_get_more_credit() {
        let day = 24 * 3600 * 1000;
        let now = 1_000 * day;
        assert_eq!(recency_weight(None, now), 1.0);
        assert_eq!(recency_weight(Some(now), now), 4.0);
        assert_eq!(
            recency_weight(Some(now + day), now),
            4.0,
            "a future date is now"
        );
        let week_old = recency_weight(Some(now - 7 * day), now);
        assert!((week_old - 2.5).abs() < 1e-9, "{week_old}");
        let year_old = recency_weight(Some(now - 365 * day), now);
        assert!(year_old > 1.0 && year_old < 1.001, "{year_old}");
        assert!(recency_weight(Some(now - day), now) > week_old);
    }

    #[test]
    fn credit_is_written_when_the_unsaved_part_reaches_the_stored_one() {
        assert!(!credit_due(1.0, 0.0));
        assert!(!credit_due(1.0, 0.99));
        assert!(credit_due(1.0, 1.0));
        assert!(
            credit_due(0.0, 1e-12),
            "a zero priority gains its first credit"
        );
        assert!(!credit_due(0.0, 0.0));
        // Links of equal share: written at 2, 4, 8, ... links, not at each.
        let (mut stored, mut unsaved, mut writes) = (1.0, 0.0, 0);
        for _ in 0..63 {
            unsaved += 1.0;
            if credit_due(stored, unsaved) {
                stored += unsaved;
                unsaved = 0.0;
                writes += 1;
            }
        }
        assert_eq!((stored, writes), (64.0, 6));
    }

    #[test]
    fn only_successful_pages_are_content_deduplicated() {
        assert!(dedupe_by_content(Some(200)));
        assert!(!dedupe_by_content(Some(404)));
        assert!(!dedupe_by_content(None));
    }
}
