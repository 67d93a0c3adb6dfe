//! `Master`: the paper's `web_crawler_master` gen_server. A mailbox, timers
//! and the store cycle over the pure dispatch core ([`Window`]): it admits
//! URLs (`add_url`, `search_text`), hands claimed URLs to the pools, collects
//! slave reports and has them written in batches. Every store call runs in
//! the store cycle, on a task of its own and one at a time, so reports keep
//! arriving while the store writes; `status` reads the store's counts on a
//! task of its own too. All its durable state is in the store, so a
//! restarted master picks up where the last one stopped.

use crate::behaviour::{CommitBatch, CommitSummary, Frontier, StoreError};
use crate::config::{Behaviours, CrawlConfig};
use crate::indexer::IndexerLoad;
use crate::protocol::{self, IdleReason, IndexerMsg, MasterMsg, PoolMsg, Status};
use crate::search::{INDEX_QUEUE, PageText};
use crate::types::{Job, NewLink, StoreCounts, now_ms};
use crate::window::{CycleWork, Window, idle_reason};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio::task::JoinHandle;

/// Counters of one run of the app. The supervisor keeps them and hands them
/// to each master incarnation, so budgets and rates survive restarts.
#[derive(Debug)]
pub(crate) struct RunStats {
    started: Instant,
    fetched: AtomicU64,
    errors: AtomicU64,
    /// Held by a running store cycle, which outlives a killed master: its
    /// successor's first cycle (which releases the leases) waits for it, so
    /// a claim that lands late is released too instead of waiting out its
    /// lease.
    store_cycle: Arc<tokio::sync::Mutex<()>>,
}

impl Default for RunStats {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            fetched: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            store_cycle: Arc::default(),
        }
    }
}

#[derive(Debug)]
pub(crate) struct MasterArgs {
    pub(crate) config: CrawlConfig,
    pub(crate) store: Arc<dyn Frontier>,
    pub(crate) behaviours: Behaviours,
    /// How many times the supervisor restarted the master so far.
    pub(crate) restarts: u32,
    pub(crate) run: Arc<RunStats>,
    /// The registered name of the indexer, when this tree keeps an index,
    /// and how many pages it has yet to take.
    pub(crate) indexer: Option<(String, Arc<IndexerLoad>)>,
}

/// What a store cycle did.
#[derive(Debug)]
struct CycleResult {
    claimed: Vec<Job>,
    counts: Option<StoreCounts>,
}

type AddUrlReply = RpcReplyPort<Result<String, String>>;

#[derive(Debug)]
pub(crate) struct MasterState {
    window: Window,
    cfg: CrawlConfig,
    store: Arc<dyn Frontier>,
    b: Behaviours,
    restarts: u32,
    run: Arc<RunStats>,
    indexer: Option<(String, Arc<IndexerLoad>)>,
    myself: ActorRef<MasterMsg>,
    flush_scheduled: bool,
    /// The store cycle running on its own task.
    cycle: Option<JoinHandle<Result<CycleResult, StoreError>>>,
    /// Callers of `add_url` whose seed waits for the next cycle, and those
    /// whose seed the running cycle writes.
    seeds_waiting: Vec<(AddUrlReply, String)>,
    seeds_writing: Vec<(AddUrlReply, String)>,
    idle_waiters: Vec<RpcReplyPort<IdleReason>>,
    drain_waiters: Vec<RpcReplyPort<()>>,
}

#[derive(Debug)]
pub(crate) struct Master;

impl Actor for Master {
    type Msg = MasterMsg;
    type State = MasterState;
    type Arguments = MasterArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: MasterArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        ractor::pg::join(protocol::MASTER_GROUP.to_string(), vec![myself.get_cell()]);
        let run = args.run;
        let window = Window::new(
            args.config.clone(),
            run.fetched.load(Ordering::Relaxed),
            run.errors.load(Ordering::Relaxed),
            now_ms(),
        );
        myself.send_interval(args.config.tick, || MasterMsg::Tick);
        Ok(MasterState {
            window,
            cfg: args.config,
            store: args.store,
            b: args.behaviours,
            restarts: args.restarts,
            run,
            indexer: args.indexer,
            myself,
            flush_scheduled: false,
            cycle: None,
            seeds_waiting: Vec::new(),
            seeds_writing: Vec::new(),
            idle_waiters: Vec::new(),
            drain_waiters: Vec::new(),
        })
    }

    async fn post_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // What the pools still hold was claimed by a previous incarnation and
        // is still being worked on: ask, and adopt it (`Adopt`). Everything
        // else this node had leased goes back to pending rather than waiting
        // for lease expiry.
        let live = pools(&state.cfg);
        for (_, pool) in &live {
            let _ = pool.cast(PoolMsg::Resync);
        }
        let nodes: Vec<String> = live.into_iter().map(|(n, _)| n).collect();
        state.window.begin_recovery(&nodes, now_ms());
        if state.window.end_recovery_if_due(now_ms()) {
            cycle(state, false, true);
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let now = now_ms();
        match msg {
            MasterMsg::AddUrl {
                url,
                operation,
                again,
                reply,
            } => {
                if let Err(e) = state.b.operations.validate(&operation) {
                    let _ = reply.send(Err(e.to_string()));
                } else {
                    match state.b.policy.seed(&url, &operation) {
                        Ok(mut link) => {
                            if again {
                                // Fetched again even if processed already.
                                link.modified = Some(now);
                            }
                            // Replied once written: the caller is told it is durable.
                            state.seeds_waiting.push((reply, link.url.clone()));
                            state.window.add_seed(link);
                            cycle(state, true, true);
                        }
                        Err(e) => {
                            let _ = reply.send(Err(format!("{url}: {e}")));
                        }
                    }
                }
            }
            MasterMsg::Report(report) => {
                let due = state.window.on_report(report, now);
                state
                    .run
                    .fetched
                    .store(state.window.fetched(), Ordering::Relaxed);
                state
                    .run
                    .errors
                    .store(state.window.errors(), Ordering::Relaxed);
                if due {
                    cycle(state, true, true);
                } else {
                    schedule_flush(state);
                }
            }
            MasterMsg::HostRecord(record) => {
                state.window.host_record(record);
                schedule_flush(state);
            }
            MasterMsg::Adopt { node, jobs } => {
                state.window.adopt(&node, jobs);
                if state.window.end_recovery_if_due(now) {
                    cycle(state, false, true);
                }
            }
            MasterMsg::Soft404 { probe_url, simhash } => {
                tracing::info!(%probe_url, "the host serves soft 404s");
                state.window.soft_404_probe(&probe_url, simhash);
            }
            MasterMsg::Sitemaps { referrer, urls } => {
                for url in urls {
                    match state.b.policy.link(&referrer, &url, false) {
                        // Read again each time robots.txt is: its entries'
                        // lastmod says which pages changed since.
                        Ok(link) => state.window.add_link(
                            NewLink {
                                modified: Some(now),
                                ..link
                            },
                            now,
                        ),
                        Err(why) => tracing::debug!(%url, %why, "sitemap not followed"),
                    }
                }
                cycle(state, true, true);
            }
            MasterMsg::Unstarted(jobs) => {
                state.window.unstarted(&jobs);
                cycle(state, false, true);
            }
            MasterMsg::CycleDone => finish_cycle(state).await?,
            MasterMsg::Flush => {
                state.flush_scheduled = false;
                cycle(state, true, true);
            }
            MasterMsg::Tick => {
                state.window.end_recovery_if_due(now);
                if !state.window.recovering() {
                    check_nodes(state);
                }
                cycle(state, true, true);
            }
            MasterMsg::Status(reply) => status(state, reply),
            MasterMsg::WaitIdle(reply) => {
                // A caller whose wait timed out asks again: drop its old port.
                state.idle_waiters.retain(|waiter| !waiter.is_closed());
                state.idle_waiters.push(reply);
                cycle(state, false, true);
            }
            MasterMsg::Pause(paused) => {
                state.window.pause(paused);
                cycle(state, false, true);
            }
            MasterMsg::PoolRestarted => {
                let released = state.window.node_lost(&state.cfg.node_name);
                tracing::warn!(released, "pool restarted; its URLs go back to pending");
                cycle(state, false, true);
            }
            MasterMsg::Drain { timeout, reply } => {
                state
                    .window
                    .begin_drain(now, timeout.as_millis() as crate::types::Millis);
                state.drain_waiters.push(reply);
                for (_, pool) in pools(&state.cfg) {
                    let _ = pool.cast(PoolMsg::Drain);
                }
                // Running slaves get `timeout` to finish; this wakes us then.
                state.myself.send_after(timeout, || MasterMsg::Flush);
                cycle(state, true, false);
            }
        }
        if state.window.draining() {
            if state.window.drain_step(now_ms()) {
                for waiter in state.drain_waiters.drain(..) {
                    let _ = waiter.send(());
                }
            } else {
                cycle(state, true, false);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Stopping normally: keep what was collected. A cycle still running
        // ends first; what it claimed goes back to pending (no pool gets it:
        // no live nodes) in the last cycle, with the batch.
        let now = now_ms();
        if let Some(handle) = state.cycle.take() {
            let result = handle.await.map_err(task_failed)??;
            reply_seeds(&mut state.seeds_writing);
            state.window.cycle_done(result.claimed, None, &[], now);
        }
        if let Some(work) = state.window.start_cycle(true, false, false, now) {
            let _running = state.run.store_cycle.lock().await;
            run_cycle(
                state.store.as_ref(),
                &state.cfg.node_name,
                work,
                state.indexer.as_ref(),
            )
            .await?;
            reply_seeds(&mut state.seeds_waiting);
        }
        Ok(())
    }
}

/// The live pools of the cluster, by node.
fn pools(cfg: &CrawlConfig) -> Vec<(String, ActorRef<PoolMsg>)> {
    protocol::pools(&cfg.pool_name())
}

fn schedule_flush(state: &mut MasterState) {
    if !state.flush_scheduled {
        state.flush_scheduled = true;
        state
            .myself
            .send_after(state.cfg.flush_every, || MasterMsg::Flush);
    }
}

/// Start the next store cycle, if the window has work for one and none runs.
fn cycle(state: &mut MasterState, write: bool, claim: bool) {
    let idle_waiters = !state.idle_waiters.is_empty();
    let Some(work) = state
        .window
        .start_cycle(write, claim, idle_waiters, now_ms())
    else {
        return;
    };
    if !work.batch.seeds.is_empty() {
        state.seeds_writing.append(&mut state.seeds_waiting);
    }
    let store = Arc::clone(&state.store);
    let owner = state.cfg.node_name.clone();
    let myself = state.myself.clone();
    let lock = Arc::clone(&state.run.store_cycle);
    let indexer = state.indexer.clone();
    state.cycle = Some(tokio::spawn(async move {
        let _running = lock.lock_owned().await;
        let result = run_cycle(store.as_ref(), &owner, work, indexer.as_ref()).await;
        let _ = myself.cast(MasterMsg::CycleDone);
        result
    }));
}

/// One store cycle: releases, the batch and the claim, lease renewals, counts;
/// then the batch's pages go to the indexer.
async fn run_cycle(
    store: &dyn Frontier,
    owner: &str,
    mut work: CycleWork,
    indexer: Option<&(String, Arc<IndexerLoad>)>,
) -> Result<CycleResult, StoreError> {
    let started = Instant::now();
    if let Some(keep) = &work.release_all_but {
        let released = store.release(owner, keep).await?;
        if released > 0 {
            tracing::info!(
                released,
                "returned URLs leased by a previous master to pending"
            );
        }
    }
    if !work.release.is_empty() {
        store.release_keys(&work.release).await?;
    }
    let pages = work.batch.pages.len();
    let mut to_index = pages_to_index(&mut work.batch, indexer.is_some());
    let (summary, claimed) = if work.batch.is_empty() && work.claim.is_none() {
        (CommitSummary::default(), Vec::new())
    } else {
        store.commit_and_claim(work.batch, work.claim).await?
    };
    if !summary.duplicates.is_empty() {
        to_index.retain(|page| !summary.duplicates.contains(&page.url));
    }
    // Should the indexer be down or behind, the pages wait in the store's
    // queue, where it reads them once it has caught up.
    if !to_index.is_empty()
        && let Some((name, load)) = indexer
        && let Some(actor) = ActorRef::<IndexerMsg>::where_is(name.clone())
    {
        let n = to_index.len();
        if load.admit(n) && actor.cast(IndexerMsg::Pages(to_index)).is_err() {
            load.not_delivered(n);
        }
    }
    if let Some((keys, until)) = &work.extend {
        store.extend_leases(keys, owner, *until).await?;
    }
    let counts = if work.counts {
        Some(store.counts().await?)
    } else {
        None
    };
    tracing::debug!(
        pages,
        claimed = claimed.len(),
        ms = started.elapsed().as_secs_f64() * 1e3,
        ?summary,
        "store cycle"
    );
    Ok(CycleResult { claimed, counts })
}

/// The pages of `batch` for the index, read from their queue records.
/// Without an index the records are dropped, so that no queue grows that
/// nobody reads (a worker node may index when its master does not).
fn pages_to_index(batch: &mut CommitBatch, indexed: bool) -> Vec<PageText> {
    let mut pages = Vec::new();
    for page in &mut batch.pages {
        if !indexed {
            page.records.retain(|r| r.collection != INDEX_QUEUE);
            continue;
        }
        for record in page.records.iter().filter(|r| r.collection == INDEX_QUEUE) {
            match PageText::from_record(record) {
                Ok(text) => pages.push(text),
                Err(why) => tracing::warn!(%why, "a page for the index is unreadable"),
            }
        }
    }
    pages
}

/// Take the finished cycle's result: answer the seeds it wrote, dispatch
/// what it claimed, answer idle waiters, and start the next one if due. A
/// store error fails the master (its successor recovers the leases).
async fn finish_cycle(state: &mut MasterState) -> Result<(), ActorProcessingErr> {
    let Some(handle) = state.cycle.take() else {
        return Ok(());
    };
    let result = handle.await.map_err(task_failed)??;
    reply_seeds(&mut state.seeds_writing);
    let live = pools(&state.cfg);
    let nodes: Vec<String> = live.iter().map(|(n, _)| n.clone()).collect();
    let after = state
        .window
        .cycle_done(result.claimed, result.counts.as_ref(), &nodes, now_ms());
    for (node, jobs) in after.dispatch {
        if let Some((_, pool)) = live.iter().find(|(n, _)| *n == node)
            && let Err(e) = pool.cast(PoolMsg::Dispatch(jobs))
        {
            tracing::warn!(%node, error = %e, "pool unreachable; its leases will be released");
        }
    }
    if let Some(reason) = after.idle {
        for waiter in state.idle_waiters.drain(..) {
            let _ = waiter.send(reason);
        }
    }
    if let Some(write) = after.next {
        cycle(state, write, true);
    }
    Ok(())
}

fn reply_seeds(seeds: &mut Vec<(AddUrlReply, String)>) {
    for (reply, url) in seeds.drain(..) {
        let _ = reply.send(Ok(url));
    }
}

fn task_failed(e: tokio::task::JoinError) -> StoreError {
    StoreError::backend("the store cycle's task failed", e)
}

/// Notice pools that left (a node died or was stopped) and ones that joined.
fn check_nodes(state: &mut MasterState) {
    let live: Vec<String> = pools(&state.cfg).into_iter().map(|(n, _)| n).collect();
    let (gone, joined) = state.window.nodes_changed(&live);
    for (node, released) in gone {
        tracing::warn!(%node, released, "node left the cluster; its URLs go back to pending");
    }
    for node in joined {
        tracing::info!(%node, "node joined the cluster");
    }
}

/// Answer `status` from the window, with the store's counts read on a task
/// of its own so the mailbox never waits for the store.
fn status(state: &MasterState, reply: RpcReplyPort<Status>) {
    let elapsed = state.run.started.elapsed();
    let fetched = state.window.fetched();
    let live: Vec<String> = pools(&state.cfg).into_iter().map(|(n, _)| n).collect();
    let mut status = Status {
        node: state.cfg.node_name.clone(),
        store: StoreCounts::default(),
        in_flight: state.window.in_flight() as u64,
        fetched_this_run: fetched,
        errors_this_run: state.window.errors(),
        trapped: state.window.trapped(),
        pages_per_sec: fetched as f64 / elapsed.as_secs_f64().max(1e-3),
        elapsed_ms: elapsed.as_millis() as u64,
        paused: state.window.paused(),
        idle: None,
        master_restarts: state.restarts,
        nodes: state.window.nodes(&live),
    };
    let holds_nothing = state.window.holds_nothing();
    let budget_reached = state.window.budget_reached();
    let store = Arc::clone(&state.store);
    tokio::spawn(async move {
        match store.counts().await {
            Ok(counts) => {
                if holds_nothing {
                    status.idle = idle_reason(budget_reached, &counts);
                }
                status.store = counts;
                let _ = reply.send(status);
            }
            // Dropping the reply tells the caller; the next cycle's error,
            // if the store stays broken, fails the master.
            Err(e) => tracing::warn!(error = %e, "status: cannot read the store's counts"),
        }
    });
}
