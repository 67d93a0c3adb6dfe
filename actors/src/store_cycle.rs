//! The store cycle: every store call the master makes, in one order. The
//! [`Window`](crate::window::Window) hands out a cycle's [`CycleWork`]; its
//! steps come out of it one at a time ([`CycleWork::take_step`], pure), and
//! a step that fails goes back in ([`CycleWork::put_back`]), so after an
//! error the work holds exactly what is left to do. `StoreCycle` carries
//! the steps out against the [`Frontier`] on a task of their own.

use crate::behaviour::index::INDEX_QUEUE;
use crate::behaviour::{
    ClaimRequest, CommitBatch, CommitSummary, Frontier, HandOver, StoreError, error_chain,
};
use crate::cluster_query;
use crate::departures::HandOverStep;
use crate::indexer::IndexFeed;
use crate::protocol::MASTER_LOG;
use crate::types::{ClosedFamily, Job, Millis, UrlKey, now_ms};
use std::sync::Arc;
use std::time::Instant;
use tokio::task::JoinHandle;

/// One store cycle's work. Its steps run in this order: the trap closures
/// a new master restores (before anything it claims is judged); releases;
/// lease renewals (after a long outage a lease that lapsed meanwhile is
/// renewed before a claim could take its URL again); the sweep of watched
/// URLs due again; the batch's writes and the claim (one call, so the
/// results just written free their room before the claim is sized); the
/// trap families an operator reopened (after the batch, which may hold
/// URLs they refused); the idle check.
#[derive(Debug, Default)]
pub struct CycleWork {
    /// Return every URL this node leased to pending except these: what a
    /// previous incarnation held that no pool adopted.
    pub release_all_but: Option<Vec<UrlKey>>,
    /// Return exactly these URLs to pending.
    pub release: Vec<UrlKey>,
    pub batch: CommitBatch,
    pub claim: Option<ClaimRequest>,
    /// Push these leases forward to the given time.
    pub extend: Option<(Vec<UrlKey>, Millis)>,
    /// Ask the store whether its frontier is empty, after the rest
    /// (someone waits for idleness, or the store is away and this is the
    /// cheap question that finds it back).
    pub idle_check: bool,
    /// Queue again up to this many watched URLs whose check is due
    /// (`Frontier::requeue_due`), before the claim.
    pub sweep: Option<usize>,
    /// A step of a departed node's hand-over (`Frontier::hand_over`),
    /// before the claim, so that the pages it queues can be claimed.
    pub hand_over: Option<HandOverStep>,
    /// Read the store's trap closures (`Frontier::trap_closures`): a
    /// master's first cycle, with the trap defence on.
    pub load_closures: bool,
    /// Trap families an operator reopened (`Frontier::reopen_trap_family`).
    pub reopen: Vec<String>,
}

/// One store call of a cycle, with what it needs taken out of the work.
#[derive(Debug)]
pub enum Step {
    ReleaseAllBut(Vec<UrlKey>),
    Release(Vec<UrlKey>),
    ExtendLeases {
        keys: Vec<UrlKey>,
        until: Millis,
    },
    RequeueDue {
        now: Millis,
        limit: usize,
    },
    HandOver {
        now: Millis,
        step: HandOverStep,
    },
    LoadClosures,
    Reopen {
        now: Millis,
        families: Vec<String>,
    },
    /// Shared with the store, which may keep it while it retries.
    CommitAndClaim {
        batch: Arc<CommitBatch>,
        claim: Option<ClaimRequest>,
    },
    FrontierEmpty,
}

impl CycleWork {
    pub(crate) fn is_empty(&self) -> bool {
        self.release_all_but.is_none()
            && self.release.is_empty()
            && self.batch.is_empty()
            && self.claim.is_none()
            && self.extend.is_none()
            && !self.idle_check
            && self.sweep.is_none()
            && self.hand_over.is_none()
            && !self.load_closures
            && self.reopen.is_empty()
    }

    /// The next step, taken out of the work; `None` once all are done.
    pub fn take_step(&mut self, now: Millis) -> Option<Step> {
        if std::mem::take(&mut self.load_closures) {
            return Some(Step::LoadClosures);
        }
        if let Some(keep) = self.release_all_but.take() {
            return Some(Step::ReleaseAllBut(keep));
        }
        if !self.release.is_empty() {
            return Some(Step::Release(std::mem::take(&mut self.release)));
        }
        if let Some((keys, until)) = self.extend.take() {
            return Some(Step::ExtendLeases { keys, until });
        }
        if let Some(limit) = self.sweep.take() {
            return Some(Step::RequeueDue { now, limit });
        }
        if let Some(step) = self.hand_over.take() {
            return Some(Step::HandOver { now, step });
        }
        if !self.batch.is_empty() || self.claim.is_some() {
            return Some(Step::CommitAndClaim {
                batch: Arc::new(std::mem::take(&mut self.batch)),
                claim: self.claim.take(),
            });
        }
        if !self.reopen.is_empty() {
            return Some(Step::Reopen {
                now,
                families: std::mem::take(&mut self.reopen),
            });
        }
        if std::mem::take(&mut self.idle_check) {
            return Some(Step::FrontierEmpty);
        }
        None
    }

    /// A step that failed: it is still to do (the batch comes back whole,
    /// to be written in one piece).
    pub fn put_back(&mut self, step: Step) {
        match step {
            Step::ReleaseAllBut(keep) => self.release_all_but = Some(keep),
            Step::Release(keys) => self.release = keys,
            Step::ExtendLeases { keys, until } => self.extend = Some((keys, until)),
            Step::RequeueDue { limit, .. } => self.sweep = Some(limit),
            Step::HandOver { step, .. } => self.hand_over = Some(step),
            Step::LoadClosures => self.load_closures = true,
            Step::Reopen { families, .. } => self.reopen = families,
            Step::CommitAndClaim { batch, claim } => {
                self.batch = Arc::try_unwrap(batch).unwrap_or_else(|kept| (*kept).clone());
                self.claim = claim;
            }
            Step::FrontierEmpty => self.idle_check = true,
        }
    }
}

/// What a master's store cycles run against: the store, the node whose
/// leases they hold, this node's index queue, and the run's turn.
#[derive(Clone, Debug)]
pub(crate) struct StoreCycle {
    pub(crate) store: Arc<dyn Frontier>,
    pub(crate) owner: String,
    /// Pages a node without a shard of its own sent with their reports
    /// are queued here (a node's pool queues its own).
    pub(crate) index_feed: Option<IndexFeed>,
    /// One cycle of the run at a time: a cycle outlives a killed master, and
    /// its successor's first (which releases the leases) waits for it, so
    /// a claim that lands late is released too.
    pub(crate) turn: Arc<tokio::sync::Mutex<()>>,
}

/// A store cycle running on a task of its own.
#[derive(Debug)]
pub(crate) struct RunningCycle {
    handle: JoinHandle<Result<CycleResult, FailedCycle>>,
}

/// A store cycle that failed: why, the work it did not do, and when it began.
#[derive(Debug)]
pub(crate) struct FailedCycle {
    pub(crate) error: StoreError,
    pub(crate) work: CycleWork,
    pub(crate) started: Millis,
}

impl StoreCycle {
    /// Run `work` on a task of its own, begun at `now`; `done` is called
    /// when it ends (the master's `CycleDone`).
    pub(crate) fn spawn(
        &self,
        mut work: CycleWork,
        done: impl FnOnce() + Send + 'static,
        now: Millis,
    ) -> RunningCycle {
        let this = self.clone();
        let handle = tokio::spawn(async move {
            let result = this.run(&mut work).await;
            done();
            result.map_err(|error| FailedCycle {
                error,
                work,
                started: now,
            })
        });
        RunningCycle { handle }
    }

    /// Run `work` in the run's turn; after an error it holds what is left.
    pub(crate) async fn run(&self, work: &mut CycleWork) -> Result<CycleResult, StoreError> {
        let _turn = self.turn.lock().await;
        run_cycle(
            self.store.as_ref(),
            &self.owner,
            work,
            self.index_feed.as_ref(),
        )
        .await
    }
}

impl RunningCycle {
    /// What it did, or why it failed and the work it did not do.
    pub(crate) async fn finish(self) -> Result<Result<CycleResult, FailedCycle>, StoreError> {
        let failed = |e| StoreError::backend("the store cycle's task failed", e);
        self.handle.await.map_err(failed)
    }
}

/// What a store cycle did.
#[derive(Debug, Default)]
pub(crate) struct CycleResult {
    pub(crate) claimed: Vec<Job>,
    /// The idle check's answer, when it ran.
    pub(crate) frontier_empty: Option<bool>,
    /// A departed node's hand-over step: the node, and what the store did.
    pub(crate) handed_over: Option<(String, HandOver)>,
    /// The nodes the store says fetched pages, read by a new master's
    /// first cycle (after releasing its predecessor's leases).
    pub(crate) nodes_with_pages: Option<Vec<String>>,
    /// The store's trap closures, read by a new master's first cycle.
    pub(crate) closures: Option<Vec<ClosedFamily>>,
    /// The trap families reopened, and how many URLs each released
    /// (`None`: the store knows no family of that name).
    pub(crate) reopened: Vec<(String, Option<u64>)>,
    /// The seeds written that were waiting already ([`CommitSummary`]).
    pub(crate) seeds_queued_already: Vec<UrlKey>,
}

/// Run `work`'s steps against `store` for the node `owner`; then the
/// batch's pages go to the indexer. After an error `work` holds what is
/// left to do.
async fn run_cycle(
    store: &dyn Frontier,
    owner: &str,
    work: &mut CycleWork,
    index_feed: Option<&IndexFeed>,
) -> Result<CycleResult, StoreError> {
    let started = Instant::now();
    let pages = work.batch.pages.len();
    queue_for_index(&mut work.batch, index_feed).await?;
    // The node that fetched each page (and queued it for its shard), should
    // the commit find it a content duplicate (which one index leaves out).
    let fetched_by: Vec<(String, String)> = work
        .batch
        .pages
        .iter()
        .map(|p| (p.record.url.clone(), p.record.node.clone()))
        .collect();
    let mut result = CycleResult::default();
    let mut summary = CommitSummary::default();
    while let Some(step) = work.take_step(now_ms()) {
        match run_step(store, owner, &step).await {
            Ok(Done::Nothing) => {}
            Ok(Done::Committed(done, claimed)) => {
                let mut copies = cluster_query::duplicates_by_node(&fetched_by, &done.duplicates);
                // This node's go to its queue now: a message to its indexer
                // is lost while the indexer starts (it starts after the
                // master) and with a kill. Should this fail, the commit's
                // notes have the next start drop them.
                if let (Some(feed), Some(own)) = (index_feed, copies.remove(owner))
                    && let Err(e) = feed.forget(own).await
                {
                    tracing::warn!(target: MASTER_LOG, error = %error_chain(&e), "content duplicates stay in the index until the next start");
                }
                cluster_query::forget(&format!("web_crawler_indexer@{owner}"), copies);
                (result.seeds_queued_already).extend_from_slice(&done.seeds_queued_already);
                (summary, result.claimed) = (done, claimed);
            }
            Ok(Done::FrontierEmpty(empty)) => result.frontier_empty = Some(empty),
            Ok(Done::HandedOver(node, done)) => result.handed_over = Some((node, done)),
            Ok(Done::Recovered(nodes)) => result.nodes_with_pages = Some(nodes),
            Ok(Done::Closures(closures)) => result.closures = Some(closures),
            Ok(Done::Reopened(reopened)) => result.reopened = reopened,
            Err(e) => {
                work.put_back(step);
                return Err(e);
            }
        }
    }
    tracing::debug!(
        target: MASTER_LOG,
        pages,
        claimed = result.claimed.len(),
        ms = started.elapsed().as_secs_f64() * 1e3,
        ?summary,
        "store cycle"
    );
    Ok(result)
}

/// What a step brought back.
enum Done {
    Nothing,
    Committed(CommitSummary, Vec<Job>),
    FrontierEmpty(bool),
    HandedOver(String, HandOver),
    Recovered(Vec<String>),
    Closures(Vec<ClosedFamily>),
    Reopened(Vec<(String, Option<u64>)>),
}

async fn run_step(store: &dyn Frontier, owner: &str, step: &Step) -> Result<Done, StoreError> {
    match step {
        Step::ReleaseAllBut(keep) => {
            let released = store.release(owner, keep).await?;
            if released > 0 {
                tracing::info!(
                    target: MASTER_LOG,
                    released,
                    "returned URLs leased by a previous master to pending"
                );
            }
            return Ok(Done::Recovered(store.nodes_with_pages().await?));
        }
        Step::Release(keys) => {
            store.release_keys(keys).await?;
        }
        Step::ExtendLeases { keys, until } => store.extend_leases(keys, owner, *until).await?,
        Step::RequeueDue { now, limit } => {
            let queued = store.requeue_due(*now, *limit).await?;
            if queued > 0 {
                tracing::debug!(target: MASTER_LOG, queued, "watched URLs due again");
            }
        }
        Step::HandOver { now, step } => {
            let done = store
                .hand_over(&step.node, step.after.as_deref(), step.limit, *now)
                .await?;
            if done.queued > 0 {
                tracing::debug!(target: MASTER_LOG, node = %step.node, queued = done.queued, waiting = done.waiting, "a departed node's pages queued again");
            }
            return Ok(Done::HandedOver(step.node.clone(), done));
        }
        Step::CommitAndClaim { batch, claim } => {
            let (summary, claimed) = store
                .commit_and_claim(Arc::clone(batch), claim.clone())
                .await?;
            return Ok(Done::Committed(summary, claimed));
        }
        Step::FrontierEmpty => return Ok(Done::FrontierEmpty(store.frontier_empty().await?)),
        Step::LoadClosures => return Ok(Done::Closures(store.trap_closures().await?)),
        Step::Reopen { now, families } => {
            let mut reopened = Vec::with_capacity(families.len());
            for family in families {
                let released = store.reopen_trap_family(family, *now).await?;
                if let Some(released) = released {
                    tracing::info!(target: MASTER_LOG, %family, released, "trap family reopened");
                }
                reopened.push((family.clone(), released));
            }
            return Ok(Done::Reopened(reopened));
        }
    }
    Ok(Done::Nothing)
}

/// Queue for this node's index the pages of `batch` that came with their
/// text (from a node that keeps no shard), and take the text out of the
/// batch: the store never holds it. Without an index here it is dropped.
async fn queue_for_index(
    batch: &mut CommitBatch,
    index_feed: Option<&IndexFeed>,
) -> Result<(), StoreError> {
    if let Some(feed) = index_feed {
        feed.push_records(batch.pages.iter().flat_map(|p| &p.records))
            .await?;
    }
    for page in &mut batch.pages {
        page.records.retain(|r| r.collection != INDEX_QUEUE);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behaviour::index::{IndexQueue, QueuePos, QueueRead, QueuedPage};
    use crate::behaviour::{ProcessedPage, Record};
    use crate::types::StoreCounts;
    use std::sync::Mutex;

    const T0: Millis = 1_000_000;

    fn key(url: &str) -> UrlKey {
        UrlKey {
            url: url.to_string(),
            operation: crate::types::OperationSpec::crawl(),
        }
    }

    fn claim() -> ClaimRequest {
        ClaimRequest {
            now: T0,
            owner: "n1".into(),
            lease_until: T0 + 60_000,
            limit: 10,
            per_host_cap: 2,
            held_per_host: Default::default(),
        }
    }

    fn page(collections: &[&str]) -> ProcessedPage {
        ProcessedPage {
            records: collections
                .iter()
                .map(|c| Record {
                    collection: c.to_string(),
                    key: Default::default(),
                    fields: Default::default(),
                    stamp: None,
                })
                .collect(),
            ..ProcessedPage::default()
        }
    }

    /// Work with every step to do.
    fn full_work() -> CycleWork {
        CycleWork {
            release_all_but: Some(vec![key("http://a/1")]),
            release: vec![key("http://a/2")],
            batch: CommitBatch {
                pages: vec![page(&[INDEX_QUEUE])],
                ..CommitBatch::default()
            },
            claim: Some(claim()),
            extend: Some((vec![key("http://a/3")], T0 + 5_000)),
            idle_check: true,
            sweep: Some(256),
            hand_over: Some(HandOverStep {
                node: "w1".into(),
                after: None,
                limit: 10,
            }),
            load_closures: true,
            reopen: vec!["h/cal/{n}/".into()],
        }
    }

    fn names(work: &mut CycleWork) -> Vec<&'static str> {
        std::iter::from_fn(|| work.take_step(T0).map(|s| name(&s))).collect()
    }

    fn name(step: &Step) -> &'static str {
        match step {
            Step::ReleaseAllBut(_) => "release_all_but",
            Step::Release(_) => "release",
            Step::ExtendLeases { .. } => "extend",
            Step::RequeueDue { .. } => "requeue_due",
            Step::HandOver { .. } => "hand_over",
            Step::CommitAndClaim { .. } => "commit_and_claim",
            Step::FrontierEmpty => "frontier_empty",
            Step::LoadClosures => "trap_closures",
            Step::Reopen { .. } => "reopen",
        }
    }

    #[test]
    fn steps_run_releases_then_leases_then_sweep_then_commit_then_the_idle_check() {
        let mut work = full_work();
        assert_eq!(
            names(&mut work),
            [
                "trap_closures",
                "release_all_but",
                "release",
                "extend",
                "requeue_due",
                "hand_over",
                "commit_and_claim",
                "reopen",
                "frontier_empty"
            ]
        );
        assert!(work.is_empty(), "every step taken out: {work:?}");
    }

    #[test]
    fn empty_parts_are_skipped_and_the_sweep_asks_at_now() {
        let mut work = CycleWork {
            sweep: Some(300),
            idle_check: true,
            ..CycleWork::default()
        };
        assert!(matches!(
            work.take_step(T0 + 7),
            Some(Step::RequeueDue {
                now: 1_000_007,
                limit: 300
            })
        ));
        assert!(matches!(work.take_step(T0), Some(Step::FrontierEmpty)));
        assert!(work.take_step(T0).is_none());
        // A claim alone is a commit call too: one call claims.
        let mut work = CycleWork {
            claim: Some(claim()),
            ..CycleWork::default()
        };
        assert_eq!(names(&mut work), ["commit_and_claim"]);
    }

    #[test]
    fn a_step_put_back_is_the_next_again_with_its_batch_whole() {
        let mut work = full_work();
        for _ in 0..6 {
            work.take_step(T0);
        }
        let step = work.take_step(T0).unwrap();
        assert_eq!(name(&step), "commit_and_claim");
        let Step::CommitAndClaim { batch, .. } = &step else {
            unreachable!()
        };
        // The store may still hold the batch it failed on.
        let held_by_store = Arc::clone(batch);
        work.put_back(step);
        assert_eq!(work.batch.pages.len(), 1);
        assert!(work.claim.is_some());
        assert_eq!(held_by_store.pages.len(), 1);
        assert_eq!(
            names(&mut work),
            ["commit_and_claim", "reopen", "frontier_empty"]
        );
    }

    #[tokio::test]
    async fn the_store_never_gets_a_pages_text() {
        let mut batch = CommitBatch {
            pages: vec![page(&[INDEX_QUEUE, "other"]), page(&["other"])],
            ..CommitBatch::default()
        };
        queue_for_index(&mut batch, None).await.unwrap();
        let kept: Vec<usize> = batch.pages.iter().map(|p| p.records.len()).collect();
        assert_eq!(kept, [1, 1]);
    }

    /// A store that records its calls and fails the `fail_at`th one; its
    /// commits find `duplicates`.
    #[derive(Debug, Default)]
    struct Recording {
        calls: Mutex<Vec<&'static str>>,
        fail_at: Option<usize>,
        duplicates: Vec<String>,
    }

    impl Recording {
        fn call(&self, name: &'static str) -> Result<(), StoreError> {
            let mut calls = self.calls.lock().unwrap();
            calls.push(name);
            if Some(calls.len()) == self.fail_at {
                return Err(StoreError::unavailable(name, "the store is away"));
            }
            Ok(())
        }
    }

    #[async_trait::async_trait]
    impl Frontier for Recording {
        async fn claim(&self, _: ClaimRequest) -> Result<Vec<Job>, StoreError> {
            self.call("claim").map(|()| Vec::new())
        }
        async fn commit(&self, _: Arc<CommitBatch>) -> Result<CommitSummary, StoreError> {
            self.call("commit").map(|()| CommitSummary {
                duplicates: self.duplicates.clone(),
                ..CommitSummary::default()
            })
        }
        async fn extend_leases(&self, _: &[UrlKey], _: &str, _: Millis) -> Result<(), StoreError> {
            self.call("extend")
        }
        async fn release(&self, _: &str, _: &[UrlKey]) -> Result<u64, StoreError> {
            self.call("release_all_but").map(|()| 0)
        }
        async fn release_keys(&self, _: &[UrlKey]) -> Result<u64, StoreError> {
            self.call("release").map(|()| 0)
        }
        async fn counts(&self) -> Result<StoreCounts, StoreError> {
            self.call("counts").map(|()| StoreCounts::default())
        }
        async fn frontier_empty(&self) -> Result<bool, StoreError> {
            self.call("frontier_empty").map(|()| true)
        }
        async fn requeue_due(&self, _: Millis, _: usize) -> Result<u64, StoreError> {
            self.call("requeue_due").map(|()| 0)
        }
        async fn hand_over(
            &self,
            _: &str,
            _: Option<&str>,
            _: usize,
            _: Millis,
        ) -> Result<HandOver, StoreError> {
            self.call("hand_over").map(|()| HandOver::default())
        }
        async fn nodes_with_pages(&self) -> Result<Vec<String>, StoreError> {
            self.call("nodes_with_pages")
                .map(|()| vec!["gone".to_string()])
        }
        async fn trap_closures(&self) -> Result<Vec<ClosedFamily>, StoreError> {
            self.call("trap_closures").map(|()| Vec::new())
        }
        async fn reopen_trap_family(&self, _: &str, _: Millis) -> Result<Option<u64>, StoreError> {
            self.call("reopen").map(|()| Some(3))
        }
    }

    #[tokio::test]
    async fn a_cycle_calls_the_store_in_step_order() {
        let store = Recording::default();
        let mut work = full_work();
        let result = run_cycle(&store, "n1", &mut work, None).await.unwrap();
        assert!(result.frontier_empty.is_some());
        assert_eq!(
            *store.calls.lock().unwrap(),
            [
                "trap_closures",
                "release_all_but",
                "nodes_with_pages",
                "release",
                "extend",
                "requeue_due",
                "hand_over",
                "commit",
                "claim",
                "reopen",
                "frontier_empty"
            ]
        );
        assert_eq!(result.closures, Some(Vec::new()));
        assert_eq!(result.reopened, [("h/cal/{n}/".to_string(), Some(3))]);
        assert_eq!(
            result.handed_over,
            Some(("w1".to_string(), HandOver::default()))
        );
        assert_eq!(result.nodes_with_pages, Some(vec!["gone".to_string()]));
    }

    #[tokio::test]
    async fn a_failed_cycle_leaves_what_it_did_not_do() {
        // The commit fails: the releases, the renewal, the sweep and the
        // hand-over are done.
        let store = Recording {
            fail_at: Some(8),
            ..Recording::default()
        };
        let mut work = full_work();
        assert!(run_cycle(&store, "n1", &mut work, None).await.is_err());
        assert!(!work.load_closures, "the closures were read");
        assert_eq!(work.reopen.len(), 1, "the reopen is still to do");
        assert!(work.release_all_but.is_none() && work.release.is_empty());
        assert!(work.extend.is_none() && work.sweep.is_none() && work.hand_over.is_none());
        assert_eq!(work.batch.pages.len(), 1);
        assert!(work.claim.is_some() && work.idle_check);
    }

    /// The drops an index queue was given.
    #[derive(Debug, Default)]
    struct Drops(Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl IndexQueue for Drops {
        async fn push(&self, _: Vec<QueuedPage>) -> Result<(), StoreError> {
            Ok(())
        }
        async fn forget(&self, urls: Vec<String>) -> Result<(), StoreError> {
            self.0.lock().unwrap().extend(urls);
            Ok(())
        }
        async fn read(&self, _: Option<QueuePos>, _: usize) -> Result<QueueRead, StoreError> {
            unreachable!("the cycle does not read the queue")
        }
        async fn done(&self, _: QueuePos) -> Result<(), StoreError> {
            Ok(())
        }
        async fn close(&self) -> Result<(), StoreError> {
            Ok(())
        }
    }

    /// Found by the aimed kills (tests/it/kills.rs): this node's content
    /// copies were dropped from its shard by a message to its indexer,
    /// lost while the indexer starts (after the master, so a resumed
    /// crawl's first commits lost theirs): the copies stayed searchable.
    /// They now go to the node's queue, read by the indexer whenever it is up.
    #[tokio::test]
    async fn this_nodes_copies_are_queued_for_its_shard_with_no_indexer_up() {
        let fetched = |url: &str, node: &str| {
            let mut page = page(&[]);
            page.record.url = url.into();
            page.record.node = node.into();
            page
        };
        let store = Recording {
            duplicates: vec!["http://h/copy".into(), "http://h/their-copy".into()],
            ..Recording::default()
        };
        let drops = Arc::new(Drops::default());
        let feed = IndexFeed {
            queue: drops.clone(),
            progress: Default::default(),
            indexer: "web_crawler_indexer@n1-not-started".into(),
        };
        let mut work = CycleWork {
            batch: CommitBatch {
                pages: vec![
                    fetched("http://h/copy", "n1"),
                    fetched("http://h/original", "n1"),
                    fetched("http://h/their-copy", "w2"),
                ],
                ..CommitBatch::default()
            },
            ..CycleWork::default()
        };
        run_cycle(&store, "n1", &mut work, Some(&feed))
            .await
            .unwrap();
        assert_eq!(
            *drops.0.lock().unwrap(),
            ["http://h/copy"],
            "another node's copy is its own shard's"
        );
    }
}
