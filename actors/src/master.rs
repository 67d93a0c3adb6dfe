//! `Master`: the paper's `web_crawler_master` gen_server. A mailbox, timers
//! and the store cycle over the pure dispatch core ([`Window`]): it admits
//! URLs (`add_url`, `search_text`), hands claimed URLs to the pools, collects
//! slave reports and has them written in batches. Every store call runs in
//! the store cycle, on a task of its own and one at a time, so reports keep
//! arriving while the store writes; `status` reads the store's counts on a
//! task of its own too. All its durable state is in the store, so a
//! restarted master picks up where the last one stopped. A store that is
//! unavailable for a while is waited for ([`crate::outage`]): the master
//! keeps its results, claims nothing, asks again and resumes.

use crate::behaviour::{CommitBatch, CommitSummary, Frontier, StoreError, error_chain};
use crate::config::{Behaviours, CrawlConfig};
use crate::indexer::IndexProgress;
use crate::monitor::own_interval_ms;
use crate::outage::{GaveUp, StoreFailure, Verdict, human_duration};
use crate::protocol::{
    self, AddUrlError, IdleReason, IndexerMsg, MasterMsg, PoolMsg, Status, SupMsg,
};
use crate::rate::{RecentRate, average_per_sec};
use crate::runtime_settings::RuntimeSettings;
use crate::search::INDEX_QUEUE;
use crate::types::{Job, Millis, NewLink, OperationSpec, StoreCounts, now_ms};
use crate::window::{CycleWork, MOVE_DEADLINE_MS, Window, idle_reason};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
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
    /// Set when a master gave up on the store: the indexer's waits end too.
    pub(crate) gave_up: Arc<GaveUp>,
}

impl Default for RunStats {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            fetched: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            store_cycle: Arc::default(),
            gave_up: Arc::default(),
        }
    }
}

#[derive(Debug)]
pub(crate) struct MasterArgs {
    /// The node's settings: a restarted master sizes its window by what
    /// `set` made them, and follows later changes.
    pub(crate) settings: RuntimeSettings,
    pub(crate) store: Arc<dyn Frontier>,
    pub(crate) behaviours: Behaviours,
    /// How many times the supervisor restarted the master so far.
    pub(crate) restarts: u32,
    pub(crate) run: Arc<RunStats>,
    /// The registered name of the indexer, when this tree keeps an index,
    /// and the count of pages queued for it and indexed.
    pub(crate) indexer: Option<(String, Arc<IndexProgress>)>,
}

/// What a store cycle did.
#[derive(Debug)]
struct CycleResult {
    claimed: Vec<Job>,
    counts: Option<StoreCounts>,
}

/// A finished cycle: what it did, or why it failed and the work it did not do.
type CycleOutcome = Result<CycleResult, (StoreError, CycleWork)>;

/// The store cycle running on its own task, and when it began.
#[derive(Debug)]
struct RunningCycle {
    handle: JoinHandle<CycleOutcome>,
    started: Millis,
}

type AddUrlReply = RpcReplyPort<Result<String, AddUrlError>>;

#[derive(Debug)]
pub(crate) struct MasterState {
    window: Window,
    cfg: CrawlConfig,
    /// Says when an operator changed the settings `cfg` was read from.
    settings: watch::Receiver<CrawlConfig>,
    store: Arc<dyn Frontier>,
    b: Behaviours,
    restarts: u32,
    run: Arc<RunStats>,
    /// The run's fetched count over the last seconds, for `status`.
    rate: RecentRate,
    indexer: Option<(String, Arc<IndexProgress>)>,
    myself: ActorRef<MasterMsg>,
    flush_scheduled: bool,
    /// The store cycle running on its own task.
    cycle: Option<RunningCycle>,
    /// The store's counts last read, for `status` while it is unavailable.
    last_counts: Arc<Mutex<StoreCounts>>,
    /// This master gave up on its store and asked the supervisor to stop
    /// the app: it writes nothing more.
    gave_up: bool,
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
        let mut settings = args.settings.subscribe();
        let config = settings.borrow_and_update().clone();
        let window = Window::new(
            config.clone(),
            run.fetched.load(Ordering::Relaxed),
            run.errors.load(Ordering::Relaxed),
            now_ms(),
        );
        myself.send_interval(config.tick, || MasterMsg::Tick);
        let rate = RecentRate::new(now_ms(), window.fetched());
        Ok(MasterState {
            window,
            cfg: config,
            settings,
            store: args.store,
            b: args.behaviours,
            restarts: args.restarts,
            run,
            rate,
            indexer: args.indexer,
            myself,
            flush_scheduled: false,
            cycle: None,
            last_counts: Arc::default(),
            gave_up: false,
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
        if state.gave_up {
            // The app is stopping: answer what needs no store, drop the rest.
            if let MasterMsg::Status(reply) = msg {
                status(state, reply);
            }
            return Ok(());
        }
        match msg {
            MasterMsg::AddUrl {
                url,
                operation,
                again,
                every_ms,
                reply,
            } => match seed(state, &url, &operation, again, every_ms, now) {
                Ok(link) => {
                    // Replied once written: the caller is told it is durable.
                    state.seeds_waiting.push((reply, link.url.clone()));
                    state.window.add_seed(link, now);
                    cycle(state, true, true);
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            MasterMsg::Report(report) => {
                let due = state.window.on_report(report, now);
                for event in state.window.take_events() {
                    notify(state, event);
                }
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
            MasterMsg::Released {
                node,
                host,
                jobs,
                wait_ms,
            } => {
                if let Some((to, jobs)) = state.window.released(&node, &host, jobs) {
                    tracing::debug!(%host, from = %node, %to, urls = jobs.len(), "host moved");
                    let msg = PoolMsg::Handover {
                        host,
                        jobs,
                        wait_ms,
                    };
                    send_to_pool(&state.cfg, &to, msg);
                }
                cycle(state, false, true);
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
                follow_settings(state);
                state.rate.record(now, state.window.fetched());
                state.window.end_recovery_if_due(now);
                if !state.window.recovering() {
                    check_nodes(state, now);
                    abandon_late_moves(state, now);
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
            MasterMsg::PoolRestarted { node } => {
                let released = state.window.node_lost(&node);
                tracing::warn!(%node, released, "pool restarted; its URLs go back to pending");
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
        // no live nodes) in the last cycle, with the batch. After giving up
        // on the store there is nothing to write to.
        if state.gave_up {
            return Ok(());
        }
        if let Some(running) = state.cycle.take() {
            match running.handle.await.map_err(task_failed)? {
                Ok(result) => {
                    reply_seeds(&mut state.seeds_writing);
                    state.window.cycle_done(result.claimed, None, &[], now_ms());
                }
                Err((e, work)) if e.is_transient() => {
                    // One more try below, with everything.
                    state.seeds_waiting.append(&mut state.seeds_writing);
                    let _ =
                        state
                            .window
                            .cycle_failed(work, running.started, now_ms(), error_chain(&e));
                }
                Err((e, _)) => return Err(e.into()),
            }
        }
        // Should the store be away, it gets one last try now.
        state.window.ask_store_now();
        if let Some(mut work) = state.window.start_cycle(true, false, false, now_ms()) {
            let _running = state.run.store_cycle.lock().await;
            run_cycle(
                state.store.as_ref(),
                &state.cfg.node_name,
                &mut work,
                state.indexer.as_ref(),
            )
            .await?;
            reply_seeds(&mut state.seeds_waiting);
        }
        Ok(())
    }
}

/// A watched URL changed: one line at info, and the notifier told off the
/// master's path (it may run a command or wait for a webhook).
fn notify(state: &MasterState, event: crate::monitor::StatusEvent) {
    let reason = event.reason.as_deref().unwrap_or("");
    match event.http_returncode {
        Some(code) => {
            tracing::info!(url = %event.url, status = code, reason, "watched URL {}", event.change)
        }
        None => tracing::info!(url = %event.url, reason, "watched URL {}", event.change),
    }
    if let Some(notifier) = &state.b.notifier {
        let notifier = Arc::clone(notifier);
        tokio::spawn(async move { notifier.notify(&event).await });
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
    let handle = tokio::spawn(async move {
        let _running = lock.lock_owned().await;
        let mut work = work;
        let result = run_cycle(store.as_ref(), &owner, &mut work, indexer.as_ref()).await;
        let _ = myself.cast(MasterMsg::CycleDone);
        result.map_err(|e| (e, work))
    });
    state.cycle = Some(RunningCycle {
        handle,
        started: now_ms(),
    });
}

/// One store cycle: releases, lease renewals, the batch and the claim,
/// counts; then the batch's pages go to the indexer. Each step done is
/// taken out of `work`, so that after an error it holds what is left to do
/// (the batch comes back whole: one write).
async fn run_cycle(
    store: &dyn Frontier,
    owner: &str,
    work: &mut CycleWork,
    indexer: Option<&(String, Arc<IndexProgress>)>,
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
        work.release_all_but = None;
    }
    if !work.release.is_empty() {
        store.release_keys(&work.release).await?;
        work.release.clear();
    }
    // Before the claim: after a long store outage, a lease that lapsed
    // meanwhile is renewed before a claim could take its URL again.
    if let Some((keys, until)) = &work.extend {
        store.extend_leases(keys, owner, *until).await?;
        work.extend = None;
    }
    if let Some(limit) = work.sweep {
        let queued = store.requeue_due(now_ms(), limit).await?;
        if queued > 0 {
            tracing::debug!(queued, "watched URLs due again");
        }
        work.sweep = None;
    }
    let pages = work.batch.pages.len();
    let to_index = pages_to_index(&mut work.batch, indexer.is_some());
    let (summary, claimed) = if work.batch.is_empty() && work.claim.is_none() {
        (CommitSummary::default(), Vec::new())
    } else {
        let batch = Arc::new(std::mem::take(&mut work.batch));
        match store
            .commit_and_claim(Arc::clone(&batch), work.claim.clone())
            .await
        {
            Ok(done) => {
                work.claim = None;
                done
            }
            Err(e) => {
                work.batch = Arc::try_unwrap(batch).unwrap_or_else(|kept| (*kept).clone());
                return Err(e);
            }
        }
    };
    // The pages are in the store's queue (a duplicate is not queued); the
    // indexer reads them from there, whenever it is up and has the CPU.
    let queued = to_index.saturating_sub(summary.duplicates.len());
    if queued > 0
        && let Some((name, progress)) = indexer
    {
        progress.queued(queued as u64);
        if let Some(actor) = ActorRef::<IndexerMsg>::where_is(name.clone()) {
            let _ = actor.cast(IndexerMsg::Queued);
        }
    }
    let counts = if work.counts {
        Some(store.counts().await?)
    } else {
        None
    };
    work.counts = false;
    tracing::debug!(
        pages,
        claimed = claimed.len(),
        ms = started.elapsed().as_secs_f64() * 1e3,
        ?summary,
        "store cycle"
    );
    Ok(CycleResult { claimed, counts })
}

/// How many pages of `batch` go to the index queue. Without an index their
/// records are dropped, so that no queue grows that nobody reads (a worker
/// node may index when its master does not).
fn pages_to_index(batch: &mut CommitBatch, indexed: bool) -> usize {
    let mut pages = 0;
    for page in &mut batch.pages {
        if !indexed {
            page.records.retain(|r| r.collection != INDEX_QUEUE);
            continue;
        }
        pages += page
            .records
            .iter()
            .filter(|r| r.collection == INDEX_QUEUE)
            .count();
    }
    pages
}

/// Take the finished cycle's result: answer the seeds it wrote, dispatch
/// what it claimed, answer idle waiters, and start the next one if due. A
/// store error is [`store_failed`]'s.
async fn finish_cycle(state: &mut MasterState) -> Result<(), ActorProcessingErr> {
    let Some(running) = state.cycle.take() else {
        return Ok(());
    };
    let result = match running.handle.await.map_err(task_failed)? {
        Ok(result) => result,
        Err((e, work)) => return store_failed(state, e, work, running.started),
    };
    reply_seeds(&mut state.seeds_writing);
    if let Some(counts) = &result.counts {
        *lock(&state.last_counts) = counts.clone();
    }
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
    if let Some(outage) = after.recovered {
        let away = Duration::from_millis((now_ms() - outage.since).max(0) as u64);
        tracing::warn!(
            "the store is back after {:.1}s away; the crawl resumes",
            away.as_secs_f64()
        );
    }
    if let Some(write) = after.next {
        cycle(state, write, true);
    }
    Ok(())
}

/// A store cycle failed. An unavailable store is waited for: the work
/// goes back into the window, nothing is claimed, the store is asked again
/// after a backoff (one line says so when it begins, one when it ends), and
/// past the outage limit the app stops. A permanent failure (a full disk,
/// refused credentials) stops the app at once. Any other error fails the
/// master: its supervisor restarts it and its successor recovers the leases.
fn store_failed(
    state: &mut MasterState,
    error: StoreError,
    work: CycleWork,
    started: Millis,
) -> Result<(), ActorProcessingErr> {
    let now = now_ms();
    let cause = error_chain(&error);
    tracing::debug!(?error, "store cycle failed");
    if error.is_permanent() {
        give_up(state, StoreFailure::permanent(started, cause))?;
        return Ok(());
    }
    if !error.is_transient() {
        return Err(error.into());
    }
    // Their seeds go back into the batch: they are answered once written.
    let mut writing = std::mem::take(&mut state.seeds_writing);
    writing.append(&mut state.seeds_waiting);
    state.seeds_waiting = writing;
    match state.window.cycle_failed(work, started, now, cause.clone()) {
        Verdict::Began { .. } => tracing::warn!(
            "the store is unavailable ({cause}); the crawl holds its {} result(s), claims \
             nothing and asks again until it is back, for up to {}",
            state.window.results_held(),
            human_duration(state.cfg.store_outage_limit)
        ),
        Verdict::Continues { retry_at } => {
            tracing::debug!(%cause, retry_in_ms = retry_at - now, "the store is still unavailable");
        }
        Verdict::GiveUp(failure) => give_up(state, failure)?,
    }
    Ok(())
}

/// Stop the app on a store failure: the supervisor stops the tree with it
/// as the reason ([`crate::ExitReason::Store`]); this master writes nothing
/// more meanwhile.
fn give_up(state: &mut MasterState, failure: StoreFailure) -> Result<(), ActorProcessingErr> {
    state.gave_up = true;
    state.run.gave_up.set();
    tracing::debug!(%failure, "giving up on the store");
    let sup =
        ActorRef::<SupMsg>::where_is(state.cfg.sup_name()).ok_or_else(|| failure.to_string())?;
    sup.cast(SupMsg::StoreFailed(failure))?;
    Ok(())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The link `add_url` queues, or the one line why not. `again` or an
/// interval of its own (`every_ms`, [`WATCH_OFF`](crate::monitor::WATCH_OFF)
/// included) queue a processed URL again, now.
fn seed(
    state: &MasterState,
    url: &str,
    operation: &OperationSpec,
    again: bool,
    every_ms: Option<Millis>,
    now: Millis,
) -> Result<NewLink, AddUrlError> {
    state.b.operations.validate(operation)?;
    if every_ms.is_some() && !state.cfg.watches() {
        return Err(AddUrlError::NotWatching {
            url: url.to_string(),
        });
    }
    let every_ms = every_ms
        .map(own_interval_ms)
        .transpose()
        .map_err(|source| AddUrlError::Interval {
            url: url.to_string(),
            source,
        })?;
    let mut link =
        state
            .b
            .policy
            .seed(url, operation)
            .map_err(|rejection| AddUrlError::Rejected {
                url: url.to_string(),
                rejection,
            })?;
    if again || every_ms.is_some() {
        // Fetched again even if processed already.
        link.modified = Some(now);
    }
    link.check_every_ms = every_ms;
    Ok(link)
}

fn reply_seeds(seeds: &mut Vec<(AddUrlReply, String)>) {
    for (reply, url) in seeds.drain(..) {
        let _ = reply.send(Ok(url));
    }
}

fn task_failed(e: tokio::task::JoinError) -> StoreError {
    StoreError::backend("the store cycle's task failed", e)
}

/// Take an operator's `set` (within a tick): the window's sizes follow.
fn follow_settings(state: &mut MasterState) {
    if state.settings.has_changed().unwrap_or(false) {
        state.cfg = state.settings.borrow_and_update().clone();
        state.window.retune(state.cfg.clone());
    }
}

/// Notice pools that left (a node died or was stopped) and ones that joined.
fn check_nodes(state: &mut MasterState, now: Millis) {
    let live: Vec<String> = pools(&state.cfg).into_iter().map(|(n, _)| n).collect();
    let (gone, joined) = state.window.nodes_changed(&live);
    for (node, released) in gone {
        tracing::warn!("node {node} left the cluster; its {released} URLs go back to pending");
    }
    if joined.is_empty() {
        return;
    }
    let moves = state.window.rebalance(&joined, now);
    for node in &joined {
        let n = moves.iter().filter(|m| m.to == *node).count();
        tracing::info!("node {node} joined the cluster; {n} hosts move to it");
    }
    let mut by_pool: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in moves {
        by_pool.entry(m.from).or_default().push(m.host);
    }
    for (from, hosts) in by_pool {
        if !send_to_pool(&state.cfg, &from, PoolMsg::Release(hosts.clone())) {
            for host in &hosts {
                state.window.move_failed(host);
            }
        }
    }
}

/// Moves whose old pool never handed the host back: the host stays there,
/// and so do the URLs parked for it.
fn abandon_late_moves(state: &mut MasterState, now: Millis) {
    for m in state.window.abandon_late_moves(now) {
        tracing::info!(
            host = %m.host,
            from = %m.from,
            to = %m.to,
            parked = m.parked.len(),
            "host move abandoned: the old node did not hand it back within {} s; it stays there",
            MOVE_DEADLINE_MS / 1_000
        );
        if !m.parked.is_empty() {
            send_to_pool(&state.cfg, &m.from, PoolMsg::Dispatch(m.parked));
        }
    }
}

/// Send to `node`'s pool; returns whether it was sent. A pool that cannot
/// be reached is noticed as gone on a tick, and what it held is released.
fn send_to_pool(cfg: &CrawlConfig, node: &str, msg: PoolMsg) -> bool {
    let sent = pools(cfg)
        .into_iter()
        .find(|(n, _)| n == node)
        .is_some_and(|(_, pool)| pool.cast(msg).is_ok());
    if !sent {
        tracing::warn!(%node, "pool unreachable; its leases will be released");
    }
    sent
}

/// Answer `status` from the window, with the store's counts and the
/// pools' running requests read on a task of its own so the mailbox never
/// waits for the store or a pool.
fn status(state: &MasterState, reply: RpcReplyPort<Status>) {
    let elapsed = state.run.started.elapsed();
    let fetched = state.window.fetched();
    let live: Vec<String> = pools(&state.cfg).into_iter().map(|(n, _)| n).collect();
    let outage = state.window.store_outage();
    let (window, per_host_window) = state.window.claim_limits();
    let mut status = Status {
        node: state.cfg.node_name.clone(),
        store: lock(&state.last_counts).clone(),
        in_flight: state.window.in_flight() as u64,
        requests_in_flight: 0,
        fetched_this_run: fetched,
        errors_this_run: state.window.errors(),
        trapped: state.window.trapped(),
        pages_per_sec: average_per_sec(fetched, elapsed.as_millis() as u64),
        recent_pages_per_sec: state.rate.per_sec(now_ms(), fetched),
        elapsed_ms: elapsed.as_millis() as u64,
        paused: state.window.paused(),
        idle: None,
        master_restarts: state.restarts,
        nodes: state.window.nodes(&live),
        window: window as u64,
        per_host_window: per_host_window as u64,
        store_unreachable_since: outage.map(|o| o.since),
        store_error: outage.map(|o| o.cause.clone()),
        index: state
            .indexer
            .as_ref()
            .map(|(_, progress)| progress.counts()),
    };
    // The store is away: the counts last read, without asking it.
    let ask_store = outage.is_none() && !state.gave_up;
    let holds_nothing = state.window.holds_nothing();
    let budget_reached = state.window.budget_reached();
    let store = Arc::clone(&state.store);
    let last_counts = Arc::clone(&state.last_counts);
    let pool_name = state.cfg.pool_name();
    tokio::spawn(async move {
        let counts = async {
            if ask_store {
                Some(store.counts().await)
            } else {
                None
            }
        };
        let (counts, (pools, _silent)) = tokio::join!(counts, protocol::ask_pools(&pool_name, 0));
        status.requests_in_flight = pools.iter().map(|p| p.running).sum();
        match counts {
            Some(Ok(counts)) => {
                if holds_nothing {
                    status.idle = idle_reason(budget_reached, &counts);
                }
                *lock(&last_counts) = counts.clone();
                status.store = counts;
            }
            // The counts last read, and why they are not fresh; the store
            // cycle finds out whether the store is away.
            Some(Err(e)) => status.store_error = Some(error_chain(&e)),
            None => {}
        }
        let _ = reply.send(status);
    });
}
