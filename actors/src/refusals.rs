//! A run no host answers. A refused connection is an answer at once and a
//! definite one: nothing listens at the host's address and port, and no
//! server was asked anything. When every host a one-shot crawl sent work to
//! has refused its connection, and none has answered anything, the crawl
//! has no one to talk to: waiting out `robots_retry` between attempts (20 s
//! for a mistyped port) only delays the news, so its URLs fail after a
//! second attempt a second later.
//!
//! Only that case ends fast. A host that answers (a page, a robots.txt, a
//! 5xx), times out or drops the connection is not a refusal: its URLs keep
//! their retries and backoff, and once any host has answered the rule is
//! off for the rest of the run. A service (`keep_retrying_robots`) never
//! gives up. Pure, like the other cores: the master's window feeds it.

use std::collections::HashSet;

/// How long a refused host's URL waits for its next attempt while the
/// other hosts of the run have not answered yet (instead of
/// `robots_retry`): soon enough that a run whose every host refuses ends
/// within a few seconds.
pub const REFUSED_RETRY_MS: i64 = 1_000;

/// What to do with a URL whose host refused the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnRefusal {
    /// Every host of the run refused, this one more than once: record
    /// it as failed now.
    GiveUp,
    /// Another host of the run may still answer: ask again after
    /// [`REFUSED_RETRY_MS`].
    RetrySoon,
    /// As any unreachable robots.txt: ask again after `robots_retry`, and
    /// give up after `max_attempts`.
    Retry,
}

/// The hosts of a run that has had no answer yet.
#[derive(Debug, Default)]
struct Unanswered {
    /// Hosts the run sent work to.
    hosts: HashSet<String>,
    /// Those of them that refused the connection (a subset of `hosts`).
    refused: HashSet<String>,
}

/// Whether a run's every host refused its connection.
#[derive(Debug)]
pub struct Refusals {
    /// `None` once any host answered, and for a service.
    unanswered: Option<Unanswered>,
}

impl Refusals {
    /// For a one-shot crawl (`watch`); a service never gives up on a host.
    pub fn new(watch: bool) -> Self {
        Self {
            unanswered: watch.then(Unanswered::default),
        }
    }

    /// The run sent work for `host` to a pool.
    pub fn sent(&mut self, host: &str) {
        if let Some(u) = &mut self.unanswered
            && !u.hosts.contains(host)
        {
            u.hosts.insert(host.to_string());
        }
    }

    /// Some host answered: the run has someone to talk to, for good.
    pub fn answered(&mut self) {
        self.unanswered = None;
    }

    /// `host` refused the connection on the `attempt`th try (1-based) of a
    /// URL that has `max_attempts` in all.
    pub fn refused(&mut self, host: &str, attempt: u32, max_attempts: u32) -> OnRefusal {
        let Some(u) = &mut self.unanswered else {
            return OnRefusal::Retry;
        };
        u.hosts.insert(host.to_string());
        u.refused.insert(host.to_string());
        let everywhere = u.refused.len() == u.hosts.len();
        let more_after_next = attempt + 1 < max_attempts;
        if attempt == 1 && more_after_next {
            // Never on the first refusal: a second later the run's other
            // seeds (added one by one) have been sent out too, and a
            // server that was just starting has had a moment.
            OnRefusal::RetrySoon
        } else if everywhere {
            OnRefusal::GiveUp
        } else if more_after_next {
            OnRefusal::RetrySoon
        } else {
            // The last attempt: should the other hosts answer meanwhile,
            // it goes at `robots_retry`'s pace, as any unreachable robots.txt.
            OnRefusal::Retry
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_whose_only_host_refuses_gives_up_a_second_later() {
        let mut r = Refusals::new(true);
        r.sent("127.0.5.1:1");
        assert_eq!(r.refused("127.0.5.1:1", 1, 3), OnRefusal::RetrySoon);
        assert_eq!(r.refused("127.0.5.1:1", 2, 3), OnRefusal::GiveUp);
    }

    #[test]
    fn every_host_must_refuse_before_the_run_gives_up() {
        let mut r = Refusals::new(true);
        r.sent("a");
        // b, the second seed, is sent after a refused once.
        assert_eq!(r.refused("a", 1, 3), OnRefusal::RetrySoon);
        r.sent("b");
        // The last attempt keeps robots_retry's pace while b may answer.
        assert_eq!(r.refused("a", 2, 3), OnRefusal::Retry);
        assert_eq!(r.refused("b", 1, 3), OnRefusal::RetrySoon);
        assert_eq!(r.refused("b", 2, 3), OnRefusal::GiveUp);
        assert_eq!(r.refused("a", 3, 3), OnRefusal::GiveUp);
    }

    #[test]
    fn once_a_host_answered_refusals_keep_their_retries() {
        let mut r = Refusals::new(true);
        r.sent("a");
        r.sent("b");
        r.answered();
        assert_eq!(r.refused("a", 1, 3), OnRefusal::Retry);
        // A host that timed out or answered 503 is no refusal: a run of it
        // and a refused host does not end fast.
        let mut r = Refusals::new(true);
        r.sent("refused");
        r.sent("timed-out");
        assert_eq!(r.refused("refused", 1, 3), OnRefusal::RetrySoon);
        assert_eq!(r.refused("refused", 2, 3), OnRefusal::Retry);
    }

    #[test]
    fn a_service_never_gives_up() {
        let mut r = Refusals::new(false);
        r.sent("a");
        assert_eq!(r.refused("a", 1, 3), OnRefusal::Retry);
    }
}
