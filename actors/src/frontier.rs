//! The paper's `add_pending_url` rules that a store applies to each link, as
//! pure functions (both backends call them, so they agree).

use crate::types::Millis;

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
pub fn decide_link(
    processed: Option<Millis>,
    now: Millis,
    reprocess_after_ms: Option<Millis>,
) -> LinkDecision {
    match (processed, reprocess_after_ms) {
        (None, _) => LinkDecision::Queue,
        (Some(_), None) => LinkDecision::ReferralOnly,
        (Some(at), Some(interval)) if now.saturating_sub(at) >= interval => LinkDecision::Queue,
        (Some(_), Some(_)) => LinkDecision::ReferralOnly,
    }
}

/// A content hash marks a duplicate only for successful responses: error
/// pages are often byte-identical without being the same resource.
pub fn dedupe_by_content(http_returncode: Option<u16>) -> bool {
    matches!(http_returncode, Some(200..=299))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_url_is_queued() {
        assert_eq!(decide_link(None, 1_000, None), LinkDecision::Queue);
        assert_eq!(decide_link(None, 1_000, Some(60_000)), LinkDecision::Queue);
    }

    #[test]
    fn processed_url_without_interval_only_gains_a_referral() {
        assert_eq!(
            decide_link(Some(0), i64::MAX, None),
            LinkDecision::ReferralOnly
        );
    }

    #[test]
    fn reprocess_interval_is_the_papers_age_rule() {
        let interval = Some(60_000);
        assert_eq!(
            decide_link(Some(100_000), 159_999, interval),
            LinkDecision::ReferralOnly
        );
        assert_eq!(
            decide_link(Some(100_000), 160_000, interval),
            LinkDecision::Queue
        );
    }

    #[test]
    fn only_successful_pages_are_content_deduplicated() {
        assert!(dedupe_by_content(Some(200)));
        assert!(!dedupe_by_content(Some(404)));
        assert!(!dedupe_by_content(None));
    }
}
