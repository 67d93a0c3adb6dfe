//! What the master admits besides the links pages yield: seeds
//! (`add_url`), whose callers are answered once the seed is written, and
//! sitemap entries. Pure: the master passes `now` and the behaviours'
//! link policy and operations.

use crate::behaviour::{LinkPolicy, Operations};
use crate::config::{Behaviours, CrawlConfig};
use crate::monitor::own_interval_ms;
use crate::protocol::{AddUrlError, MASTER_LOG};
use crate::types::{Job, Millis, NewLink, OperationSpec};
use ractor::RpcReplyPort;

/// What admits a seed or a sitemap entry on this node.
pub(crate) struct Admission<'a> {
    pub(crate) policy: &'a dyn LinkPolicy,
    pub(crate) operations: &'a Operations,
    /// The node keeps availability monitoring: a seed may be watched.
    pub(crate) watches: bool,
}

impl<'a> Admission<'a> {
    pub(crate) fn of(behaviours: &'a Behaviours, cfg: &CrawlConfig) -> Self {
        Self {
            policy: behaviours.policy.as_ref(),
            operations: &behaviours.operations,
            watches: cfg.watches(),
        }
    }

    /// The link `add_url` queues, or the one line why not. `again` or an
    /// interval of its own (`every_ms`, [`WATCH_OFF`](crate::monitor::WATCH_OFF)
    /// included) queue a processed URL again, now.
    pub(crate) fn seed(
        &self,
        url: &str,
        operation: &OperationSpec,
        again: bool,
        every_ms: Option<Millis>,
        now: Millis,
    ) -> Result<NewLink, AddUrlError> {
        self.operations.validate(operation)?;
        let url_owned = || url.to_string();
        if every_ms.is_some() && !self.watches {
            return Err(AddUrlError::NotWatching { url: url_owned() });
        }
        let every_ms = every_ms
            .map(own_interval_ms)
            .transpose()
            .map_err(|source| AddUrlError::Interval {
                url: url_owned(),
                source,
            })?;
        let mut link =
            self.policy
                .seed(url, operation)
                .map_err(|rejection| AddUrlError::Rejected {
                    url: url_owned(),
                    rejection,
                })?;
        if again || every_ms.is_some() {
            // Fetched again even if processed already.
            link.modified = Some(now);
        }
        link.check_every_ms = every_ms;
        Ok(link)
    }

    /// The admitted entries of a sitemap found with `referrer`'s host. Read
    /// again each time robots.txt is, so an entry counts as changed `now`:
    /// its lastmod says which pages changed since.
    pub(crate) fn sitemap(&self, referrer: &Job, urls: Vec<String>, now: Millis) -> Vec<NewLink> {
        let admit = |url: String| match self.policy.link(referrer, &url, false) {
            Ok(link) => Some(NewLink {
                modified: Some(now),
                ..link
            }),
            Err(why) => {
                tracing::debug!(target: MASTER_LOG, %url, %why, "sitemap not followed");
                None
            }
        };
        urls.into_iter().filter_map(admit).collect()
    }
}

/// Callers of `add_url` waiting for their seed to be written, each with the
/// URL to answer: those whose seed waits for the next cycle, and those
/// whose seed the running cycle writes. `R` is the reply port.
#[derive(Debug)]
pub(crate) struct SeedReplies<R> {
    waiting: Vec<(R, String)>,
    writing: Vec<(R, String)>,
}

impl<R> Default for SeedReplies<R> {
    fn default() -> Self {
        Self {
            waiting: Vec::new(),
            writing: Vec::new(),
        }
    }
}

impl<R> SeedReplies<R> {
    /// A seed went into the window's batch.
    pub(crate) fn wait(&mut self, reply: R, url: String) {
        self.waiting.push((reply, url));
    }

    /// A cycle started; `writes_seeds`: its batch holds the seeds waiting.
    pub(crate) fn cycle_started(&mut self, writes_seeds: bool) {
        if writes_seeds {
            self.writing.append(&mut self.waiting);
        }
    }

    /// The running cycle wrote its seeds: their callers, to answer.
    pub(crate) fn written(&mut self) -> Vec<(R, String)> {
        std::mem::take(&mut self.writing)
    }

    /// The running cycle failed: its seeds went back into the batch, and
    /// are answered once written.
    pub(crate) fn cycle_failed(&mut self) {
        self.writing.append(&mut self.waiting);
        self.waiting = std::mem::take(&mut self.writing);
    }

    /// Every caller still waiting (the last cycle, on stop, wrote them all).
    pub(crate) fn all(&mut self) -> Vec<(R, String)> {
        self.cycle_failed();
        std::mem::take(&mut self.waiting)
    }
}

/// Each URL of a batch `add_url`: queued as (normalized), or why not.
pub(crate) type AddUrlsAnswer = Vec<Result<String, AddUrlError>>;

/// The reply port of an `add_url` caller: one URL's, or a batch's, which
/// holds its answer until its seeds are written.
#[derive(Debug)]
pub(crate) enum AddUrlReply {
    One(RpcReplyPort<Result<String, AddUrlError>>),
    Many(RpcReplyPort<AddUrlsAnswer>, AddUrlsAnswer),
}

/// Tell `add_url`'s callers their seeds are written (`url`: a single
/// URL's, as queued).
pub(crate) fn answer_written(written: Vec<(AddUrlReply, String)>) {
    for (reply, url) in written {
        // A caller that stopped waiting is gone: nothing to tell.
        match reply {
            AddUrlReply::One(reply) => drop(reply.send(Ok(url))),
            AddUrlReply::Many(reply, answer) => drop(reply.send(answer)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behaviour::Rejection;

    const T0: Millis = 1_000_000;

    /// Admits `http://` URLs on host `a`.
    struct OnlyHostA;

    impl LinkPolicy for OnlyHostA {
        fn seed(&self, url: &str, operation: &OperationSpec) -> Result<NewLink, Rejection> {
            let rest = url.strip_prefix("http://a/");
            let rest = rest.ok_or_else(|| Rejection::Invalid(format!("{url}: not on a")))?;
            Ok(NewLink {
                url: format!("http://a/{rest}"),
                host: "a".into(),
                operation: operation.clone(),
                depth: 0,
                priority: 1.0,
                redirect_hops: 0,
                modified: None,
                check_every_ms: None,
            })
        }
        fn link(&self, _: &Job, url: &str, _: bool) -> Result<NewLink, Rejection> {
            self.seed(url, &OperationSpec::crawl())
        }
    }

    fn admission(operations: &Operations, watches: bool) -> Admission<'_> {
        Admission {
            policy: &OnlyHostA,
            operations,
            watches,
        }
    }

    fn seed(again: bool, every_ms: Option<Millis>, watches: bool) -> Result<NewLink, AddUrlError> {
        let ops = Operations::new();
        let crawl = OperationSpec::crawl();
        admission(&ops, watches).seed("http://a/x", &crawl, again, every_ms, T0)
    }

    #[test]
    fn a_seed_is_fetched_again_only_when_asked_or_watched() {
        assert_eq!(seed(false, None, false).unwrap().modified, None);
        assert_eq!(seed(true, None, false).unwrap().modified, Some(T0));
        let watched = seed(false, Some(60_000), true).unwrap();
        assert_eq!(
            (watched.modified, watched.check_every_ms),
            (Some(T0), Some(60_000))
        );
    }

    #[test]
    fn a_seed_is_refused_with_its_reason() {
        assert!(matches!(
            seed(false, Some(60_000), false),
            Err(AddUrlError::NotWatching { .. })
        ));
        assert!(matches!(
            seed(false, Some(1), true),
            Err(AddUrlError::Interval { .. })
        ));
        let ops = Operations::new();
        let other =
            admission(&ops, false).seed("http://b/", &OperationSpec::crawl(), false, None, T0);
        assert!(matches!(other, Err(AddUrlError::Rejected { .. })));
        let unknown = OperationSpec(vec!["no_such_operation".into()]);
        let refused = admission(&ops, false).seed("http://a/", &unknown, false, None, T0);
        assert!(matches!(refused, Err(AddUrlError::Operation(_))));
    }

    #[test]
    fn sitemap_entries_are_admitted_as_changed_now() {
        let referrer = Job::fixture("a", "/", 0);
        let urls = vec!["http://a/1".to_string(), "http://b/2".to_string()];
        let ops = Operations::new();
        let links = admission(&ops, false).sitemap(&referrer, urls, T0);
        assert_eq!(links.len(), 1);
        assert_eq!(
            (links[0].url.as_str(), links[0].modified),
            ("http://a/1", Some(T0))
        );
    }

    #[test]
    fn seeds_are_answered_once_the_cycle_that_wrote_them_is_done() {
        let mut replies = SeedReplies::default();
        replies.wait(1, "a".to_string());
        // A cycle without the batch writes no seed.
        replies.cycle_started(false);
        assert!(replies.written().is_empty());
        replies.cycle_started(true);
        replies.wait(2, "b".to_string());
        assert_eq!(replies.written(), [(1, "a".to_string())]);
        assert!(replies.written().is_empty());
        // The seed that came meanwhile waits for the next.
        assert_eq!(replies.all(), [(2, "b".to_string())]);
    }

    #[test]
    fn a_failed_cycle_keeps_its_seeds_waiting() {
        let mut replies = SeedReplies::default();
        replies.wait(1, "a".to_string());
        replies.cycle_started(true);
        replies.wait(2, "b".to_string());
        replies.cycle_failed();
        assert!(replies.written().is_empty());
        replies.cycle_started(true);
        let answered: Vec<i32> = replies.written().into_iter().map(|(r, _)| r).collect();
        assert_eq!(answered, [1, 2]);
    }

    #[tokio::test]
    async fn a_batch_is_answered_whole_with_each_urls_outcome_once_written() {
        let (one_tx, one_rx) = ractor::concurrency::oneshot();
        let (many_tx, many_rx) = ractor::concurrency::oneshot();
        let refused = seed_of("http://b/x").unwrap_err();
        let batch = vec![Ok("http://a/1".to_string()), Err(refused)];
        answer_written(vec![
            (AddUrlReply::One(one_tx.into()), "http://a/0".to_string()),
            (AddUrlReply::Many(many_tx.into(), batch), String::new()),
        ]);
        assert_eq!(one_rx.await.unwrap().unwrap(), "http://a/0");
        let answer = many_rx.await.unwrap();
        assert_eq!(answer[0].as_ref().unwrap(), "http://a/1");
        assert!(
            matches!(&answer[1], Err(AddUrlError::Rejected { url, .. }) if url == "http://b/x")
        );
    }

    fn seed_of(url: &str) -> Result<NewLink, AddUrlError> {
        let ops = Operations::new();
        admission(&ops, false).seed(url, &OperationSpec::crawl(), false, None, T0)
    }
}
