//! What the master admits besides the links pages yield: seeds
//! (`add_url`, one URL or a batch), whose callers are answered once the
//! seed is written, and sitemap entries. The rules are pure: the master
//! passes `now`, the behaviours' link policy and operations, whether the
//! page budget is spent, and the page the store holds.
//! Every entry point to `add_url` (console, CLI, HTTP API, Rust API) ends
//! in the master's `add_url`, so they all get these answers.

use crate::availability::own_interval_ms;
use crate::behaviour::{LinkPolicy, Operations, Queries};
use crate::config::{Behaviours, CrawlConfig};
use crate::frontier_rules::{LinkDecision, decide_link};
use crate::protocol::{AddUrlError, MASTER_LOG, Queued};
use crate::types::{Job, Millis, NewLink, OperationSpec, ProcessedUrl, UrlKey};
use ractor::RpcReplyPort;
use std::collections::HashSet;
use std::sync::Arc;

/// What admits a seed or a sitemap entry on this node.
pub(crate) struct Admission<'a> {
    pub(crate) policy: &'a dyn LinkPolicy,
    pub(crate) operations: &'a Operations,
    /// The node keeps availability watching: a seed may be watched.
    pub(crate) watches: bool,
    /// The page budget (`max_pages`), once the crawl has spent it: no seed
    /// is queued then.
    pub(crate) spent_budget: Option<u64>,
}

/// An `add_url` as the master took it: one URL's or a batch's.
#[derive(Clone, Debug)]
pub(crate) struct SeedAsk {
    pub(crate) operation: OperationSpec,
    /// Queue it even if it was processed already.
    pub(crate) again: bool,
    /// A watch interval of its own (one URL's ask only).
    pub(crate) every_ms: Option<Millis>,
    pub(crate) now: Millis,
}

impl SeedAsk {
    pub(crate) fn new(
        operation: OperationSpec,
        again: bool,
        every_ms: Option<Millis>,
        now: Millis,
    ) -> Self {
        Self {
            operation,
            again,
            every_ms,
            now,
        }
    }

    /// The plain ask this is, if it is one.
    pub(crate) fn plain(&self) -> Option<PlainAsk> {
        (!self.again && self.every_ms.is_none()).then(|| PlainAsk {
            operation: self.operation.clone(),
            at: self.now,
        })
    }

    /// What this ask came to once its seed (`url`, as queued) is written:
    /// queued already when the store held it waiting before (pending, or
    /// being fetched: `waiting`), whatever else is true of it; refused as
    /// known when it is a plain ask and `processed`, the store's page, was
    /// processed with its operation and is not due again; added otherwise.
    /// `processed` need only be read for a plain ask not waiting.
    pub(crate) fn outcome(
        &self,
        url: String,
        waiting: bool,
        processed: Option<&ProcessedUrl>,
        reprocess_after_ms: Option<Millis>,
    ) -> Result<Queued, AddUrlError> {
        if !waiting && let Some(plain) = self.plain() {
            plain.known_already(&url, processed, reprocess_after_ms)?;
        }
        Ok(Queued {
            url,
            already_queued: waiting,
        })
    }
}

/// An `add_url` admitted: the links the master queues, and its caller,
/// answered once they are written (`url`: a single URL's, as queued).
#[derive(Debug)]
pub(crate) struct AdmittedSeeds {
    pub(crate) links: Vec<NewLink>,
    pub(crate) reply: AddUrlReply,
    pub(crate) url: String,
}

impl<'a> Admission<'a> {
    /// `budget_reached`: the crawl has fetched its page budget.
    pub(crate) fn of(behaviours: &'a Behaviours, cfg: &CrawlConfig, budget_reached: bool) -> Self {
        Self {
            policy: behaviours.policy.as_ref(),
            operations: &behaviours.operations,
            watches: cfg.watches(),
            spent_budget: cfg.max_pages.filter(|_| budget_reached),
        }
    }

    /// `add_url` of one URL: queued, its caller answered once it is
    /// written; or refused, its caller answered now (`None`).
    pub(crate) fn add_url(
        &self,
        url: &str,
        ask: &SeedAsk,
        reply: RpcReplyPort<Result<Queued, AddUrlError>>,
    ) -> Option<AdmittedSeeds> {
        match self.seed(url, ask) {
            Ok(link) => Some(AdmittedSeeds {
                url: link.url.clone(),
                reply: AddUrlReply::One(reply, ask.clone()),
                links: vec![link],
            }),
            Err(refused) => {
                let _ = reply.send(Err(refused));
                None
            }
        }
    }

    /// `add_url` of a batch: every URL admitted or refused on its own, one
    /// answer for all once the admitted ones are written; now (`None`)
    /// if every URL was refused.
    pub(crate) fn add_urls(
        &self,
        urls: &[String],
        ask: &SeedAsk,
        reply: RpcReplyPort<AddUrlsAnswer>,
    ) -> Option<AdmittedSeeds> {
        let mut links = Vec::new();
        let admitted: Vec<Result<String, AddUrlError>> = (urls.iter())
            .map(|url| {
                let link = self.seed(url, ask)?;
                let queued = link.url.clone();
                links.push(link);
                Ok(queued)
            })
            .collect();
        if links.is_empty() {
            let refused = admitted.into_iter().map(|refused| {
                refused.map(|url| Queued {
                    url,
                    already_queued: false,
                })
            });
            let _ = reply.send(refused.collect());
            return None;
        }
        Some(AdmittedSeeds {
            links,
            reply: AddUrlReply::Many(reply, admitted, ask.clone()),
            url: String::new(),
        })
    }

    /// `url` as `add_url` would queue it (normalized), if the link policy
    /// admits it.
    pub(crate) fn normalized(&self, url: &str) -> Option<String> {
        let link = self.policy.seed(url, &OperationSpec::crawl());
        link.ok().map(|link| link.url)
    }

    /// The link `add_url` queues, or the one line why not. `again` or an
    /// interval of its own (`every_ms`, [`WATCH_OFF`](crate::availability::WATCH_OFF)
    /// included) queue a processed URL again, now. A spent page budget
    /// refuses every seed.
    fn seed(&self, url: &str, ask: &SeedAsk) -> Result<NewLink, AddUrlError> {
        let SeedAsk {
            operation,
            again,
            every_ms,
            now,
        } = ask;
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
        if *again || every_ms.is_some() {
            // Fetched again even if processed already.
            link.modified = Some(*now);
        }
        link.check_every_ms = every_ms;
        match self.spent_budget {
            Some(max) => Err(AddUrlError::OverBudget { url: link.url, max }),
            None => Ok(link),
        }
    }

    /// The admitted entries of a sitemap found with `referrer`'s host. Read
    /// again each time robots.txt is, so an entry counts as changed `now`:
    /// its lastmod says which pages changed since.
    pub(crate) fn sitemap(&self, referrer: &Job, urls: Vec<String>, now: Millis) -> Vec<NewLink> {
        let admit = |url: String| match self.policy.link(referrer, &url, false) {
            Ok(link) => Some(link.changed_at(now)),
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

/// A plain `add_url`: neither `again` nor an interval of its own (either
/// queues a processed URL again), so a URL processed already is refused.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PlainAsk {
    pub(crate) operation: OperationSpec,
    /// When the master took it.
    pub(crate) at: Millis,
}

impl PlainAsk {
    /// Refuse `url` (as queued) as known already when `processed`, the
    /// store's page once the seed is written, was processed with this
    /// operation before the ask and is not due again: the store only
    /// recorded the referral. A page processed since was queued after all.
    pub(crate) fn known_already(
        &self,
        url: &str,
        processed: Option<&ProcessedUrl>,
        reprocess_after_ms: Option<Millis>,
    ) -> Result<(), AddUrlError> {
        match processed {
            Some(page)
                if page.record.operation == self.operation
                    && page.d_processed < self.at
                    && decide_link(Some(page.d_processed), None, self.at, reprocess_after_ms)
                        == LinkDecision::ReferralOnly =>
            {
                Err(AddUrlError::AlreadyKnown {
                    url: url.to_string(),
                    processed_at: page.d_processed,
                    http_status: page.record.http_returncode,
                })
            }
            _ => Ok(()),
        }
    }
}

/// Each URL of a batch `add_url`: queued (normalized, and whether it was
/// waiting already), or why not.
pub(crate) type AddUrlsAnswer = Vec<Result<Queued, AddUrlError>>;

/// The reply port of an `add_url` caller, with its ask, to judge once its
/// seeds are written: one URL's, or a batch's, which holds each URL as
/// admitted (as queued, or refused) until then.
#[derive(Debug)]
pub(crate) enum AddUrlReply {
    One(RpcReplyPort<Result<Queued, AddUrlError>>, SeedAsk),
    Many(
        RpcReplyPort<AddUrlsAnswer>,
        Vec<Result<String, AddUrlError>>,
        SeedAsk,
    ),
}

/// What the store says of the seeds a cycle wrote: those waiting already,
/// and, read from it, the page a plain ask's URL had.
#[derive(Debug)]
pub(crate) struct WrittenSeeds {
    pub(crate) queries: Arc<dyn Queries>,
    pub(crate) reprocess_after_ms: Option<Millis>,
    /// The seeds written that were waiting already (the commit's
    /// [`CommitSummary::seeds_queued_already`](crate::behaviour::CommitSummary)).
    pub(crate) queued_already: HashSet<UrlKey>,
}

impl WrittenSeeds {
    /// `url`'s answer, as queued ([`SeedAsk::outcome`]).
    async fn judge(&self, url: String, ask: &SeedAsk) -> Result<Queued, AddUrlError> {
        let key = UrlKey {
            url,
            operation: ask.operation.clone(),
        };
        let waiting = self.queued_already.contains(&key);
        let url = key.url;
        let page = if waiting || ask.plain().is_none() {
            None
        } else {
            match self.queries.processed_url(&url).await {
                Ok(page) => page,
                // It is queued: a store that cannot say whether it was
                // processed already must not make the caller think it refused.
                Err(error) => {
                    tracing::warn!(target: MASTER_LOG, %url, %error, "add_url: not checked against processed pages");
                    None
                }
            }
        };
        ask.outcome(url, waiting, page.as_ref(), self.reprocess_after_ms)
    }

    async fn answer(&self, reply: AddUrlReply, url: String) {
        // A caller that stopped waiting is gone: nothing to tell.
        match reply {
            AddUrlReply::One(reply, ask) => drop(reply.send(self.judge(url, &ask).await)),
            AddUrlReply::Many(reply, admitted, ask) => {
                let mut judged = Vec::with_capacity(admitted.len());
                for queued in admitted {
                    judged.push(match queued {
                        Ok(url) => self.judge(url, &ask).await,
                        Err(refused) => Err(refused),
                    });
                }
                drop(reply.send(judged));
            }
        }
    }
}

/// Tell `add_url`'s callers their seeds are written (`url`: a single
/// URL's, as queued), on a task of its own: a plain ask's page is read
/// from the store first, and the master's mailbox never waits for it.
pub(crate) fn answer_written(written: Vec<(AddUrlReply, String)>, pages: WrittenSeeds) {
    if written.is_empty() {
        return;
    }
    tokio::spawn(async move {
        for (reply, url) in written {
            pages.answer(reply, url).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::availability::{FetchHistory, HistoryQuery};
    use crate::behaviour::{Document, PageQuery, Rejection, StoreError};
    use crate::types::{BrokenLink, HostRecord, PageRecord, PendingUrl, TrapFamily};

    const T0: Millis = 1_000_000;

    /// Admits `http://` URLs on host `a`.
    struct OnlyHostA;

    impl LinkPolicy for OnlyHostA {
        fn seed(&self, url: &str, operation: &OperationSpec) -> Result<NewLink, Rejection> {
            let rest = url.strip_prefix("http://a/");
            let rest = rest.ok_or_else(|| Rejection::Invalid(format!("{url}: not on a")))?;
            let url = format!("http://a/{rest}");
            Ok(NewLink::new(url, "a".into(), operation.clone(), 0, 1.0))
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
            spent_budget: None,
        }
    }

    fn ask(operation: OperationSpec, again: bool, every_ms: Option<Millis>) -> SeedAsk {
        SeedAsk::new(operation, again, every_ms, T0)
    }

    fn crawl_ask() -> SeedAsk {
        ask(OperationSpec::crawl(), false, None)
    }

    fn seed(again: bool, every_ms: Option<Millis>, watches: bool) -> Result<NewLink, AddUrlError> {
        let ops = Operations::new();
        let ask = ask(OperationSpec::crawl(), again, every_ms);
        admission(&ops, watches).seed("http://a/x", &ask)
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
        let other = admission(&ops, false).seed("http://b/", &crawl_ask());
        assert!(matches!(other, Err(AddUrlError::Rejected { .. })));
        let unknown = ask(OperationSpec(vec!["no_such_operation".into()]), false, None);
        let refused = admission(&ops, false).seed("http://a/", &unknown);
        assert!(matches!(refused, Err(AddUrlError::Operation(_))));
        let spent = Admission {
            spent_budget: Some(10),
            ..admission(&ops, false)
        };
        assert!(matches!(
            spent.seed("http://a/y", &crawl_ask()),
            Err(AddUrlError::OverBudget { ref url, max: 10 }) if url == "http://a/y"
        ));
        // A URL the policy refuses says so, budget or not.
        let other = spent.seed("http://b/", &crawl_ask());
        assert!(matches!(other, Err(AddUrlError::Rejected { .. })));
    }

    #[tokio::test]
    async fn one_url_is_queued_to_be_answered_once_written_or_refused_now() {
        let ops = Operations::new();
        let (tx, _rx) = ractor::concurrency::oneshot();
        let queued = admission(&ops, false).add_url("http://a/x", &crawl_ask(), tx.into());
        let Some(AdmittedSeeds { links, reply, url }) = queued else {
            panic!("queued");
        };
        assert_eq!((links.len(), url.as_str()), (1, "http://a/x"));
        assert!(matches!(reply, AddUrlReply::One(_, ref ask) if ask.plain().is_some()));
        let (tx, rx) = ractor::concurrency::oneshot();
        let refused = admission(&ops, false).add_url("http://b/x", &crawl_ask(), tx.into());
        assert!(refused.is_none());
        assert!(matches!(
            rx.await.unwrap(),
            Err(AddUrlError::Rejected { .. })
        ));
    }

    #[tokio::test]
    async fn a_batch_queues_its_admitted_urls_and_is_answered_now_if_none_was() {
        let ops = Operations::new();
        let urls = ["http://a/1", "http://b/2", "http://a/3"].map(String::from);
        let (tx, _rx) = ractor::concurrency::oneshot();
        let again = ask(OperationSpec::crawl(), true, None);
        let queued = admission(&ops, false).add_urls(&urls, &again, tx.into());
        let Some(AdmittedSeeds { links, reply, .. }) = queued else {
            panic!("queued");
        };
        let queued: Vec<&str> = links.iter().map(|l| l.url.as_str()).collect();
        assert_eq!(queued, ["http://a/1", "http://a/3"]);
        let AddUrlReply::Many(_, answer, ask) = reply else {
            panic!("a batch's reply: {reply:?}");
        };
        assert!(ask.again);
        assert!(answer[0].is_ok() && answer[1].is_err() && answer[2].is_ok());
        let (tx, rx) = ractor::concurrency::oneshot();
        let others = ["http://b/1", "http://b/2"].map(String::from);
        let refused = admission(&ops, false).add_urls(&others, &crawl_ask(), tx.into());
        assert!(refused.is_none());
        assert!(rx.await.unwrap().iter().all(Result::is_err));
    }

    #[test]
    fn normalized_is_the_url_a_seed_would_queue() {
        let ops = Operations::new();
        assert_eq!(
            admission(&ops, false).normalized("http://a/x").as_deref(),
            Some("http://a/x")
        );
        assert_eq!(admission(&ops, false).normalized("http://b/x"), None);
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

    /// `http://a/known`, processed with a plain crawl at `T0 - 1` (HTTP
    /// 200).
    fn known(operation: OperationSpec) -> ProcessedUrl {
        ProcessedUrl {
            record: PageRecord {
                url: "http://a/known".into(),
                operation,
                http_returncode: Some(200),
                ..PageRecord::default()
            },
            referral_count: 0,
            referral_list: Vec::new(),
            duplicate_of: None,
            d_processed: T0 - 1,
        }
    }

    fn plain_ask() -> PlainAsk {
        crawl_ask().plain().unwrap()
    }

    #[test]
    fn only_a_plain_ask_is_judged_against_processed_pages() {
        assert_eq!(
            crawl_ask().plain(),
            Some(PlainAsk {
                operation: OperationSpec::crawl(),
                at: T0
            })
        );
        assert_eq!(ask(OperationSpec::crawl(), true, None).plain(), None);
        let watched = ask(OperationSpec::crawl(), false, Some(60_000));
        assert_eq!(watched.plain(), None);
    }

    #[test]
    fn a_plain_ask_of_a_processed_url_not_due_is_refused_as_known() {
        let page = known(OperationSpec::crawl());
        let refused = plain_ask().known_already(&page.record.url, Some(&page), None);
        assert!(matches!(
            refused,
            Err(AddUrlError::AlreadyKnown { ref url, processed_at, http_status: Some(200) })
                if url == "http://a/known" && processed_at == T0 - 1
        ));
        assert_eq!(
            refused.unwrap_err().code(),
            crate::RefusalCode::AlreadyKnown
        );
    }

    #[test]
    fn a_plain_ask_is_queued_when_the_page_is_new_other_due_or_fresh() {
        let ask = plain_ask();
        let url = "http://a/known";
        assert!(
            ask.known_already(url, None, None).is_ok(),
            "never processed"
        );
        let other = known(OperationSpec::search_text("x"));
        assert!(
            ask.known_already(url, Some(&other), None).is_ok(),
            "other operation"
        );
        let page = known(OperationSpec::crawl());
        assert!(
            ask.known_already(url, Some(&page), Some(1)).is_ok(),
            "due again"
        );
        let since = ProcessedUrl {
            d_processed: T0 + 5,
            ..page
        };
        assert!(
            ask.known_already(url, Some(&since), None).is_ok(),
            "processed since the ask"
        );
    }

    /// A store holding one processed page, or failing every read.
    #[derive(Debug)]
    struct OnePage(Result<ProcessedUrl, ()>);

    #[async_trait::async_trait]
    impl Queries for OnePage {
        async fn processed(&self, _: PageQuery) -> Result<Vec<ProcessedUrl>, StoreError> {
            Ok(Vec::new())
        }
        async fn processed_url(&self, url: &str) -> Result<Option<ProcessedUrl>, StoreError> {
            match &self.0 {
                Ok(page) => Ok((page.record.url == url).then(|| page.clone())),
                Err(()) => Err(StoreError::unavailable("read", "down")),
            }
        }
        async fn processed_after(
            &self,
            _: Option<&str>,
            _: usize,
        ) -> Result<Vec<PageRecord>, StoreError> {
            Ok(Vec::new())
        }
        async fn pending(&self, _: usize) -> Result<Vec<PendingUrl>, StoreError> {
            Ok(Vec::new())
        }
        async fn records(&self, _: &str, _: &Document) -> Result<Vec<Document>, StoreError> {
            Ok(Vec::new())
        }
        async fn first_records(
            &self,
            _: &str,
            _: Option<&Document>,
            _: usize,
        ) -> Result<Vec<Document>, StoreError> {
            Ok(Vec::new())
        }
        async fn delete_records(&self, _: &str, _: &[Document]) -> Result<u64, StoreError> {
            Ok(0)
        }
        async fn broken_links(&self) -> Result<Vec<BrokenLink>, StoreError> {
            Ok(Vec::new())
        }
        async fn trap_families(&self, _: usize) -> Result<Vec<TrapFamily>, StoreError> {
            Ok(Vec::new())
        }
        async fn fetch_history(&self, _: HistoryQuery) -> Result<Vec<FetchHistory>, StoreError> {
            Ok(Vec::new())
        }
        async fn hosts(&self) -> Result<Vec<HostRecord>, StoreError> {
            Ok(Vec::new())
        }
        async fn status_histogram(&self) -> Result<Vec<(Option<u16>, u64)>, StoreError> {
            Ok(Vec::new())
        }
        async fn pages_per_host(&self) -> Result<Vec<(String, u64)>, StoreError> {
            Ok(Vec::new())
        }
        async fn pages_per_node(&self) -> Result<Vec<(String, u64)>, StoreError> {
            Ok(Vec::new())
        }
    }

    fn pages(store: Result<ProcessedUrl, ()>) -> WrittenSeeds {
        WrittenSeeds {
            queries: Arc::new(OnePage(store)),
            reprocess_after_ms: None,
            queued_already: HashSet::new(),
        }
    }

    #[tokio::test]
    async fn a_batch_is_answered_whole_with_each_urls_outcome_once_written() {
        let (one_tx, one_rx) = ractor::concurrency::oneshot();
        let (many_tx, many_rx) = ractor::concurrency::oneshot();
        let refused = seed_of("http://b/x").unwrap_err();
        let batch = vec![
            Ok("http://a/1".to_string()),
            Err(refused),
            Ok("http://a/known".to_string()),
        ];
        let known = pages(Ok(known(OperationSpec::crawl())));
        let again = ask(OperationSpec::crawl(), true, None);
        known
            .answer(
                AddUrlReply::One(one_tx.into(), again),
                "http://a/0".to_string(),
            )
            .await;
        let many = AddUrlReply::Many(many_tx.into(), batch, crawl_ask());
        known.answer(many, String::new()).await;
        assert_eq!(
            one_rx.await.unwrap().unwrap(),
            Queued {
                url: "http://a/0".into(),
                already_queued: false
            }
        );
        let answer = many_rx.await.unwrap();
        assert_eq!(answer[0].as_ref().unwrap().url, "http://a/1");
        assert!(
            matches!(&answer[1], Err(AddUrlError::Rejected { url, .. }) if url == "http://b/x")
        );
        assert!(matches!(&answer[2], Err(AddUrlError::AlreadyKnown { .. })));
    }

    #[tokio::test]
    async fn a_plain_ask_is_answered_queued_when_the_store_cannot_say() {
        let (tx, rx) = ractor::concurrency::oneshot();
        let url = "http://a/known".to_string();
        let reply = AddUrlReply::One(tx.into(), crawl_ask());
        pages(Err(())).answer(reply, url.clone()).await;
        assert_eq!(rx.await.unwrap().unwrap().url, url);
    }

    #[test]
    fn a_written_seed_is_added_queued_already_or_known() {
        let page = known(OperationSpec::crawl());
        let url = || page.record.url.clone();
        let queued = |already_queued| Queued {
            url: url(),
            already_queued,
        };
        // Waiting already: so answered whatever the store knows of its page.
        let waiting = crawl_ask().outcome(url(), true, Some(&page), None);
        assert_eq!(waiting.unwrap(), queued(true));
        let refused = crawl_ask().outcome(url(), false, Some(&page), None);
        assert!(matches!(refused, Err(AddUrlError::AlreadyKnown { .. })));
        let again = ask(OperationSpec::crawl(), true, None);
        let added = again.outcome(url(), false, Some(&page), None);
        assert_eq!(added.unwrap(), queued(false));
        let new = crawl_ask().outcome(url(), false, None, None);
        assert_eq!(new.unwrap(), queued(false));
    }

    #[tokio::test]
    async fn a_seed_the_store_held_waiting_is_answered_queued_already() {
        let mut written = pages(Ok(known(OperationSpec::crawl())));
        let known = UrlKey {
            url: "http://a/known".into(),
            operation: OperationSpec::crawl(),
        };
        written.queued_already.insert(known);
        let (tx, rx) = ractor::concurrency::oneshot();
        let admitted = vec![
            Ok("http://a/known".to_string()),
            Ok("http://a/new".to_string()),
        ];
        let many = AddUrlReply::Many(tx.into(), admitted, crawl_ask());
        written.answer(many, String::new()).await;
        let waiting: Vec<bool> = (rx.await.unwrap().into_iter())
            .map(|answer| answer.unwrap().already_queued)
            .collect();
        assert_eq!(waiting, [true, false]);
        // Another operation on the same URL is another unit of work.
        let (tx, rx) = ractor::concurrency::oneshot();
        let search = ask(OperationSpec::search_text("x"), false, None);
        let one = AddUrlReply::One(tx.into(), search);
        written.answer(one, "http://a/known".to_string()).await;
        assert!(!rx.await.unwrap().unwrap().already_queued);
    }

    fn seed_of(url: &str) -> Result<NewLink, AddUrlError> {
        let ops = Operations::new();
        admission(&ops, false).seed(url, &crawl_ask())
    }
}
