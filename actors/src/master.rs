//! `Master`: the paper's `web_crawler_master` gen_server. Owns the store
//! handle; admits URLs (`add_url`, `search_text`); claims pending URLs in
//! batches with a lease and hands them to the pools of the cluster (each
//! host to one node: rendezvous hashing weighted by load); collects slave
//! reports and writes them back in batches. All its durable state is in the
//! store, so a restarted master picks up where the last one stopped.

use crate::behaviour::{
    ClaimRequest, CommitBatch, CommitSummary, ProcessedPage, Retry, Store, StoreError,
};
use crate::cluster;
use crate::config::{Behaviours, CrawlConfig};
use crate::pool::PoolMsg;
use crate::types::*;
use ractor::message::{BoxedDowncastErr, SerializedMessage};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How a slave's URL ended.
#[derive(Debug, Serialize, Deserialize)]
pub enum SlaveReport {
    Page {
        job: Job,
        page: Box<ProcessedPage>,
    },
    Failed {
        job: Job,
        reason: String,
        retryable: bool,
        status: Option<u16>,
        /// The host asked to wait until then (429/503).
        retry_after: Option<Millis>,
    },
    RobotsBlocked {
        job: Job,
    },
}

impl SlaveReport {
    fn job(&self) -> &Job {
        match self {
            SlaveReport::Page { job, .. }
            | SlaveReport::Failed { job, .. }
            | SlaveReport::RobotsBlocked { job } => job,
        }
    }
}

/// Why the crawl has nothing more to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IdleReason {
    /// Nothing pending or processing.
    FrontierEmpty,
    /// `max_pages` reached (URLs may remain pending for a later run).
    BudgetReached,
}

/// One node's pool as the master sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub node: String,
    /// URLs handed to it and not yet committed.
    pub load: u64,
    /// Hosts assigned to it.
    pub hosts: u64,
}

/// A snapshot for `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub node: String,
    #[serde(flatten)]
    pub store: StoreCounts,
    /// Claimed and not yet committed (queued at a pool, running, or reported).
    pub in_flight: u64,
    /// Pages fetched since the app started (across master restarts).
    pub fetched_this_run: u64,
    pub errors_this_run: u64,
    pub pages_per_sec: f64,
    pub elapsed_ms: u64,
    pub paused: bool,
    pub idle: Option<IdleReason>,
    pub master_restarts: u32,
    /// The live pools, one per node.
    pub nodes: Vec<NodeInfo>,
}

#[derive(Debug)]
pub enum MasterMsg {
    /// The paper's `add_url(URL, Operation)`; replies with the admitted URL.
    AddUrl {
        url: String,
        operation: OperationSpec,
        reply: RpcReplyPort<Result<String, String>>,
    },
    Report(SlaveReport),
    HostRecord(HostRecord),
    /// A pool's answer to `PoolMsg::Resync`: what it holds.
    Adopt {
        node: String,
        jobs: Vec<Job>,
    },
    /// A draining pool's queued jobs: they go back to pending.
    Unstarted(Vec<Job>),
    /// The store cycle running in the background finished.
    CycleDone,
    /// Write the batch collected so far (sent to self `flush_every` after the
    /// first result of a batch, so results arriving meanwhile share its write).
    Flush,
    Tick,
    Status(RpcReplyPort<Status>),
    /// Reply when the crawl has nothing more to do.
    WaitIdle(RpcReplyPort<IdleReason>),
    Pause(bool),
    /// This node's pool was restarted: everything it held is gone.
    PoolRestarted,
    /// Graceful stop: stop claiming, let running slaves finish (up to the
    /// timeout), write everything, return unstarted URLs to pending.
    Drain {
        timeout: Duration,
        reply: RpcReplyPort<()>,
    },
}

/// The variants that may cross nodes (from remote pools and slaves).
#[derive(Serialize, Deserialize)]
enum MasterWire {
    Report(SlaveReport),
    HostRecord(HostRecord),
    Adopt { node: String, jobs: Vec<Job> },
    Unstarted(Vec<Job>),
}

impl ractor::Message for MasterMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        let wire = match self {
            MasterMsg::Report(r) => MasterWire::Report(r),
            MasterMsg::HostRecord(h) => MasterWire::HostRecord(h),
            MasterMsg::Adopt { node, jobs } => MasterWire::Adopt { node, jobs },
            MasterMsg::Unstarted(jobs) => MasterWire::Unstarted(jobs),
            _ => return Err(BoxedDowncastErr),
        };
        cluster::to_wire(&wire)
    }

    fn deserialize(msg: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        Ok(match cluster::from_wire(msg)? {
            MasterWire::Report(r) => MasterMsg::Report(r),
            MasterWire::HostRecord(h) => MasterMsg::HostRecord(h),
            MasterWire::Adopt { node, jobs } => MasterMsg::Adopt { node, jobs },
            MasterWire::Unstarted(jobs) => MasterMsg::Unstarted(jobs),
        })
    }
}

/// Counters of one run of the app. The supervisor keeps them and hands them
/// to each master incarnation, so budgets and rates survive restarts.
#[derive(Debug)]
pub struct RunStats {
    started: Instant,
    fetched: AtomicU64,
    errors: AtomicU64,
    /// Held by a running store cycle, which outlives a killed master: its
    /// successor takes it before releasing leases, so a claim that lands
    /// late is released too instead of waiting out its lease.
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

impl RunStats {
    fn fetched(&self) -> u64 {
        self.fetched.load(Ordering::Relaxed)
    }
}

#[derive(Debug)]
pub struct MasterArgs {
    pub config: CrawlConfig,
    pub store: Arc<dyn Store>,
    pub behaviours: Behaviours,
    /// How many times the supervisor restarted the master so far.
    pub restarts: u32,
    pub run: Arc<RunStats>,
}

/// A claimed URL and the node whose pool has it.
#[derive(Debug)]
struct Assigned {
    job: Job,
    node: String,
}

/// A (re)started master waits for the pools to say what they hold before it
/// returns the rest of its leases to pending.
#[derive(Debug)]
struct Recovery {
    deadline: Millis,
    waiting: HashSet<String>,
}

/// How long a starting master waits for pools to answer `Resync`.
const RECOVERY_WAIT_MS: Millis = 3_000;

#[derive(Debug)]
pub struct MasterState {
    cfg: CrawlConfig,
    store: Arc<dyn Store>,
    b: Behaviours,
    restarts: u32,
    /// Claimed and handed to a pool, not yet committed.
    outstanding: HashMap<UrlKey, Assigned>,
    per_host: HashMap<String, usize>,
    per_node: HashMap<String, usize>,
    /// Which node fetches each host (sticky while the node lives).
    host_owner: HashMap<String, String>,
    /// Nodes whose pools were live at the last look.
    live_nodes: HashSet<String>,
    recovery: Option<Recovery>,
    batch: CommitBatch,
    /// Jobs whose results are in `batch`: still counted as outstanding until
    /// committed, so the window bounds what a crash can cost.
    reported: Vec<Job>,
    flush_scheduled: bool,
    /// The store cycle running on its own task, so the master keeps taking
    /// reports and the slaves keep going while the store writes.
    in_flight: Option<tokio::task::JoinHandle<CycleOutcome>>,
    /// A write was asked for while a cycle was running: the next one writes.
    write_deferred: bool,
    myself: ActorRef<MasterMsg>,
    waiters: Vec<RpcReplyPort<IdleReason>>,
    drain_waiters: Vec<RpcReplyPort<()>>,
    draining: bool,
    drain_deadline: Option<Millis>,
    paused: bool,
    run: Arc<RunStats>,
    last_lease_renewal: Millis,
}

/// Send a message to the master (as the paper's
/// `gen_server:cast(web_crawler_master, ...)`): by its registered name on
/// this node, else through its process group on another node. A restarted
/// master gets it, as it takes the name and the group.
pub(crate) fn cast(master_name: &str, msg: MasterMsg) {
    let master = ActorRef::<MasterMsg>::where_is(master_name).or_else(|| {
        ractor::pg::get_members(&cluster::MASTER_GROUP.to_string())
            .into_iter()
            .find(|c| !c.get_id().is_local())
            .map(ActorRef::from)
    });
    match master {
        Some(master) => {
            if let Err(e) = master.cast(msg) {
                tracing::debug!(error = %e, "master gone; its successor recovers the lease");
            }
        }
        None => tracing::debug!("no master reachable; its successor recovers the lease"),
    }
}

pub(crate) fn report(master_name: &str, report: SlaveReport) {
    cast(master_name, MasterMsg::Report(report));
}

/// The live pools: this node's and every remote one, by node name.
fn pools(cfg: &CrawlConfig) -> Vec<(String, ActorRef<PoolMsg>)> {
    let mut pools: Vec<(String, ActorRef<PoolMsg>)> =
        cluster::members(cluster::POOL_GROUP, &cfg.pool_name())
            .into_iter()
            .filter_map(|cell| {
                let node = cluster::node_of(&cell.get_name()?).to_string();
                Some((node, ActorRef::from(cell)))
            })
            .collect();
    pools.sort_by(|a, b| a.0.cmp(&b.0));
    pools.dedup_by(|a, b| a.0 == b.0);
    pools
}

#[derive(Debug)]
pub struct Master;

impl Actor for Master {
    type Msg = MasterMsg;
    type State = MasterState;
    type Arguments = MasterArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: MasterArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        ractor::pg::join(cluster::MASTER_GROUP.to_string(), vec![myself.get_cell()]);
        let state = MasterState {
            cfg: args.config,
            store: args.store,
            b: args.behaviours,
            restarts: args.restarts,
            outstanding: HashMap::new(),
            per_host: HashMap::new(),
            per_node: HashMap::new(),
            host_owner: HashMap::new(),
            live_nodes: HashSet::new(),
            recovery: None,
            batch: CommitBatch::default(),
            reported: Vec::new(),
            flush_scheduled: false,
            in_flight: None,
            write_deferred: false,
            myself: myself.clone(),
            waiters: Vec::new(),
            drain_waiters: Vec::new(),
            draining: false,
            drain_deadline: None,
            paused: false,
            run: args.run,
            last_lease_renewal: now_ms(),
        };
        myself.send_interval(state.cfg.tick, || MasterMsg::Tick);
        Ok(state)
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
        let waiting: HashSet<String> = live.iter().map(|(n, _)| n.clone()).collect();
        for (_, pool) in &live {
            let _ = pool.cast(PoolMsg::Resync);
        }
        state.live_nodes = waiting.clone();
        state.recovery = Some(Recovery {
            deadline: now_ms() + RECOVERY_WAIT_MS,
            waiting,
        });
        Ok(finish_recovery_if_done(state).await?)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            MasterMsg::AddUrl {
                url,
                operation,
                reply,
            } => {
                let result = add_url(state, &url, operation).await?;
                let _ = reply.send(result);
                pump(state).await?;
            }
            MasterMsg::Report(report) => {
                on_report(state, report);
                if write_due(state) {
                    flush_and_pump(state).await?;
                } else {
                    schedule_flush(&myself, state);
                }
            }
            MasterMsg::HostRecord(record) => {
                state.batch.hosts.push(record);
                schedule_flush(&myself, state);
            }
            MasterMsg::Adopt { node, jobs } => {
                if let Some(recovery) = &mut state.recovery {
                    recovery.waiting.remove(&node);
                    for job in jobs {
                        assign(state, job, &node);
                    }
                    finish_recovery_if_done(state).await?;
                }
            }
            MasterMsg::Unstarted(jobs) => {
                let keys: Vec<UrlKey> = jobs.iter().map(Job::key).collect();
                for job in &jobs {
                    forget(state, job);
                }
                state.store.release_keys(&keys).await?;
            }
            MasterMsg::CycleDone => {
                let claimed = finish_cycle(state).await?;
                let write = std::mem::take(&mut state.write_deferred) || write_due(state);
                // A claim that found nothing is not repeated until something
                // changes (a write, a new URL, the next tick).
                if write || claimed > 0 {
                    cycle(state, write, true).await?;
                }
            }
            MasterMsg::Flush => {
                state.flush_scheduled = false;
                flush_and_pump(state).await?;
            }
            MasterMsg::Tick => {
                finish_recovery_if_done(state).await?;
                check_nodes(state).await?;
                renew_leases(state).await?;
                flush_and_pump(state).await?;
            }
            MasterMsg::Status(reply) => {
                let status = status(state).await?;
                let _ = reply.send(status);
            }
            MasterMsg::WaitIdle(reply) => {
                // A caller whose wait timed out asks again: drop its old port.
                state.waiters.retain(|waiter| !waiter.is_closed());
                state.waiters.push(reply);
                pump(state).await?;
            }
            MasterMsg::Pause(paused) => {
                state.paused = paused;
                pump(state).await?;
            }
            MasterMsg::PoolRestarted => {
                let own = state.cfg.node_name.clone();
                let released = node_lost(state, &own).await?;
                tracing::warn!(released, "pool restarted; its URLs went back to pending");
                pump(state).await?;
            }
            MasterMsg::Drain { timeout, reply } => {
                state.draining = true;
                state.drain_deadline = Some(now_ms() + timeout.as_millis() as Millis);
                state.drain_waiters.push(reply);
                for (_, pool) in pools(&state.cfg) {
                    let _ = pool.cast(PoolMsg::Drain);
                }
                // Running slaves get `timeout` to finish; this wakes us then.
                myself.send_after(timeout, || MasterMsg::Flush);
                flush(state).await?;
            }
        }
        if state.draining {
            finish_drain_if_done(state).await?;
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Stopping normally: keep what was collected.
        flush(state).await?;
        Ok(())
    }
}

/// End recovery once every pool answered (or the wait is over): the leases
/// of everything not adopted go back to pending.
async fn finish_recovery_if_done(state: &mut MasterState) -> Result<(), StoreError> {
    let Some(recovery) = &state.recovery else {
        return Ok(());
    };
    if !recovery.waiting.is_empty() && now_ms() < recovery.deadline {
        return Ok(());
    }
    state.recovery = None;
    let keep: Vec<UrlKey> = state.outstanding.keys().cloned().collect();
    let released = {
        let _predecessor_done = state.run.store_cycle.lock().await;
        state.store.release(&state.cfg.node_name, &keep).await?
    };
    if released > 0 {
        tracing::info!(
            released,
            "returned URLs leased by a previous master to pending"
        );
    }
    pump(state).await
}

fn assign(state: &mut MasterState, job: Job, node: &str) {
    *state.per_host.entry(job.host.clone()).or_default() += 1;
    *state.per_node.entry(node.to_string()).or_default() += 1;
    state
        .host_owner
        .entry(job.host.clone())
        .or_insert_with(|| node.to_string());
    state.outstanding.insert(
        job.key(),
        Assigned {
            job,
            node: node.to_string(),
        },
    );
}

fn forget(state: &mut MasterState, job: &Job) -> bool {
    let Some(assigned) = state.outstanding.remove(&job.key()) else {
        return false;
    };
    decrement(&mut state.per_host, &assigned.job.host);
    decrement(&mut state.per_node, &assigned.node);
    true
}

fn decrement(counts: &mut HashMap<String, usize>, key: &str) {
    if let Some(n) = counts.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(key);
        }
    }
}

/// A node's pool is gone: what it held goes back to pending and its hosts
/// move to the remaining nodes.
async fn node_lost(state: &mut MasterState, node: &str) -> Result<u64, StoreError> {
    let jobs: Vec<Job> = state
        .outstanding
        .values()
        .filter(|a| a.node == node)
        .map(|a| a.job.clone())
        .collect();
    for job in &jobs {
        forget(state, job);
    }
    state
        .reported
        .retain(|j| jobs.iter().all(|lost| lost.key() != j.key()));
    state.host_owner.retain(|_, owner| owner != node);
    let keys: Vec<UrlKey> = jobs.iter().map(Job::key).collect();
    state.store.release_keys(&keys).await
}

/// Notice pools that left (a node died or was stopped) and ones that joined.
async fn check_nodes(state: &mut MasterState) -> Result<(), StoreError> {
    let live: HashSet<String> = pools(&state.cfg).into_iter().map(|(n, _)| n).collect();
    let gone: Vec<String> = state.live_nodes.difference(&live).cloned().collect();
    for node in gone {
        let released = node_lost(state, &node).await?;
        tracing::warn!(%node, released, "node left the cluster; its URLs went back to pending");
    }
    for node in live.difference(&state.live_nodes) {
        tracing::info!(%node, "node joined the cluster");
    }
    state.live_nodes = live;
    Ok(())
}

async fn add_url(
    state: &mut MasterState,
    url: &str,
    operation: OperationSpec,
) -> Result<Result<String, String>, StoreError> {
    if let Err(e) = state.b.operations.validate(&operation) {
        return Ok(Err(e));
    }
    let link = match state.b.policy.seed(url, &operation) {
        Ok(link) => link,
        Err(e) => return Ok(Err(format!("{url}: {e}"))),
    };
    let admitted = link.url.clone();
    // A seed is written at once: the caller is told it is durable.
    let batch = CommitBatch {
        now: now_ms(),
        reprocess_after_ms: reprocess_after_ms(&state.cfg),
        seeds: vec![link],
        ..CommitBatch::default()
    };
    state.store.commit(batch).await?;
    Ok(Ok(admitted))
}

fn reprocess_after_ms(cfg: &CrawlConfig) -> Option<Millis> {
    cfg.reprocess_after.map(|d| d.as_millis() as Millis)
}

/// Turn a report into writes for the next batch.
fn on_report(state: &mut MasterState, report: SlaveReport) {
    state.reported.push(report.job().clone());
    match report {
        SlaveReport::Page { page, .. } => {
            state.run.fetched.fetch_add(1, Ordering::Relaxed);
            state.batch.pages.push(*page);
        }
        SlaveReport::RobotsBlocked { job } => {
            state.batch.pages.push(ProcessedPage {
                record: PageRecord {
                    url: job.url,
                    operation: job.operation,
                    host: job.host,
                    depth: job.depth,
                    error: Some(ROBOTS_BLOCKED.to_string()),
                    node: state.cfg.node_name.clone(),
                    ..PageRecord::default()
                },
                ..ProcessedPage::default()
            });
        }
        SlaveReport::Failed {
            job,
            reason,
            retryable,
            status,
            retry_after,
        } => {
            state.run.errors.fetch_add(1, Ordering::Relaxed);
            let attempt = job.attempts + 1;
            if retryable && attempt < state.cfg.max_attempts {
                let backoff =
                    state.cfg.retry_backoff.as_millis() as Millis * (1_i64 << job.attempts.min(16));
                let not_before = retry_after.unwrap_or(0).max(now_ms() + backoff);
                tracing::debug!(url = %job.url, %reason, attempt, "will retry");
                state.batch.retries.push(Retry {
                    key: job.key(),
                    not_before,
                    error: reason,
                });
            } else {
                tracing::info!(url = %job.url, %reason, attempt, "giving up");
                if status.is_some() {
                    state.run.fetched.fetch_add(1, Ordering::Relaxed);
                }
                state.batch.pages.push(ProcessedPage {
                    record: PageRecord {
                        url: job.url,
                        operation: job.operation,
                        host: job.host,
                        depth: job.depth,
                        http_returncode: status,
                        error: Some(format!("failed after {attempt} attempt(s): {reason}")),
                        node: state.cfg.node_name.clone(),
                        ..PageRecord::default()
                    },
                    ..ProcessedPage::default()
                });
            }
        }
    }
}

fn schedule_flush(myself: &ActorRef<MasterMsg>, state: &mut MasterState) {
    if !state.flush_scheduled {
        state.flush_scheduled = true;
        myself.send_after(state.cfg.flush_every, || MasterMsg::Flush);
    }
}

/// Write the collected batch now, after the cycle in flight (if any), and
/// wait for the write: for a drain and a stop, which must not return before
/// it is written.
async fn flush(state: &mut MasterState) -> Result<(), StoreError> {
    finish_cycle(state).await?;
    cycle(state, true, false).await?;
    finish_cycle(state).await?;
    Ok(())
}

/// Claim more work if there is room, hand each URL to the pool of the node
/// that owns its host, and answer idle waiters when nothing is left.
async fn pump(state: &mut MasterState) -> Result<(), StoreError> {
    cycle(state, false, true).await
}

async fn flush_and_pump(state: &mut MasterState) -> Result<(), StoreError> {
    cycle(state, true, true).await
}

/// The collected batch, ready to write. Should the write fail, the master
/// fails and its successor recovers these leases, so the reported jobs are
/// forgotten now.
fn take_batch(state: &mut MasterState) -> CommitBatch {
    let mut batch = std::mem::take(&mut state.batch);
    batch.now = now_ms();
    batch.reprocess_after_ms = reprocess_after_ms(&state.cfg);
    for job in std::mem::take(&mut state.reported) {
        forget(state, &job);
    }
    batch
}

/// What a background store cycle returns.
type CycleOutcome = (
    Result<(CommitSummary, Vec<Job>), StoreError>,
    usize,
    Duration,
);

/// Start one store call that writes the collected batch (`write`) and claims
/// what the window has room for (`claim`), on its own task: the results just
/// written free their room before the claim is sized. One cycle runs at a
/// time; asked for while one runs, it waits for that one's end (`CycleDone`).
async fn cycle(state: &mut MasterState, write: bool, claim: bool) -> Result<(), StoreError> {
    if state.in_flight.is_some() {
        state.write_deferred |= write;
        return Ok(());
    }
    let batch = if write && !state.batch.is_empty() {
        take_batch(state)
    } else {
        CommitBatch::default()
    };
    let request = if claim {
        claim_request(state, pools(&state.cfg).len())
    } else {
        None
    };
    if batch.is_empty() && request.is_none() {
        if claim {
            answer_idle_waiters(state).await?;
        }
        return Ok(());
    }
    let pages = batch.pages.len();
    let store = Arc::clone(&state.store);
    let myself = state.myself.clone();
    let lock = Arc::clone(&state.run.store_cycle);
    state.in_flight = Some(tokio::spawn(async move {
        let _running = lock.lock_owned().await;
        let started = Instant::now();
        let result = store.commit_and_claim(batch, request).await;
        let _ = myself.cast(MasterMsg::CycleDone);
        (result, pages, started.elapsed())
    }));
    Ok(())
}

/// Take the result of the cycle in flight (waiting for it if need be) and
/// hand out what it claimed; returns how many it claimed.
async fn finish_cycle(state: &mut MasterState) -> Result<usize, StoreError> {
    let Some(handle) = state.in_flight.take() else {
        return Ok(0);
    };
    let (result, pages, took) = handle
        .await
        .map_err(|e| StoreError::Backend(format!("store task failed: {e}")))?;
    let (summary, jobs) = result?;
    let claimed = jobs.len();
    tracing::debug!(
        pages,
        claimed,
        ms = took.as_secs_f64() * 1e3,
        ?summary,
        "store cycle"
    );
    if state.draining || state.paused {
        // Claimed before the drain or pause: straight back to pending.
        let keys: Vec<UrlKey> = jobs.iter().map(Job::key).collect();
        state.store.release_keys(&keys).await?;
    } else {
        dispatch(state, &pools(&state.cfg), jobs);
        if claimed == 0 {
            answer_idle_waiters(state).await?;
        }
    }
    Ok(claimed)
}

fn budget_reached(state: &MasterState) -> bool {
    state
        .cfg
        .max_pages
        .is_some_and(|max| state.run.fetched() >= max)
}

/// What to claim now, if anything: the window's free room, when it is worth a
/// store call (a few free slots wait for more to free up, unless the window
/// is running low).
fn claim_request(state: &MasterState, live_pools: usize) -> Option<ClaimRequest> {
    if state.recovery.is_some()
        || state.draining
        || state.paused
        || budget_reached(state)
        || live_pools == 0
    {
        return None;
    }
    let window = state.cfg.effective_window() * live_pools;
    let mut limit = window.saturating_sub(state.outstanding.len());
    if limit < window / 8 && state.outstanding.len() > window / 2 {
        return None;
    }
    if let Some(max) = state.cfg.max_pages {
        // Don't lease far more than the budget can use.
        let left = max.saturating_sub(state.run.fetched()) as usize;
        limit = limit.min(left.saturating_sub(state.outstanding.len()));
    }
    if limit == 0 {
        return None;
    }
    let now = now_ms();
    Some(ClaimRequest {
        now,
        owner: state.cfg.node_name.clone(),
        lease_until: now + state.cfg.lease.as_millis() as Millis,
        limit,
        per_host_cap: state.cfg.effective_per_host_window(),
        held_per_host: state.per_host.clone(),
    })
}

/// Write the batch now rather than at the next `Flush`: it is a quarter of
/// the window, or every URL this master holds is waiting for it (nothing is
/// left to fetch until it is written and the links it holds are claimed, so
/// waiting would only slow a narrow crawl down).
fn write_due(state: &MasterState) -> bool {
    let reported = state.reported.len();
    reported >= state.cfg.flush_at() || (reported > 0 && reported >= state.outstanding.len())
}

/// No URL claimed and not yet committed, no result waiting to be written, no
/// store call running: whether the crawl is idle is then up to the budget
/// and the store's frontier.
fn holds_nothing(state: &MasterState) -> bool {
    state.outstanding.is_empty() && state.batch.is_empty() && state.in_flight.is_none()
}

/// Why the crawl is idle, given that the master holds nothing.
fn idle_reason(state: &MasterState, store: &StoreCounts) -> Option<IdleReason> {
    if budget_reached(state) {
        Some(IdleReason::BudgetReached)
    } else if store.frontier_empty() {
        Some(IdleReason::FrontierEmpty)
    } else {
        None
    }
}

async fn answer_idle_waiters(state: &mut MasterState) -> Result<(), StoreError> {
    if !holds_nothing(state) || state.waiters.is_empty() || state.recovery.is_some() {
        return Ok(());
    }
    let counts = state.store.counts().await?;
    if let Some(reason) = idle_reason(state, &counts) {
        for waiter in state.waiters.drain(..) {
            let _ = waiter.send(reason);
        }
    }
    Ok(())
}

/// Hand claimed jobs to pools: a host keeps its node while the node lives;
/// a new host goes to the node rendezvous hashing picks, weighted by load.
fn dispatch(state: &mut MasterState, live: &[(String, ActorRef<PoolMsg>)], jobs: Vec<Job>) {
    let mut by_node: HashMap<String, Vec<Job>> = HashMap::new();
    for job in jobs {
        let owner = match state.host_owner.get(&job.host) {
            Some(node) if live.iter().any(|(n, _)| n == node) => node.clone(),
            _ => {
                let loads: Vec<(String, usize)> = live
                    .iter()
                    .map(|(n, _)| (n.clone(), state.per_node.get(n).copied().unwrap_or(0)))
                    .collect();
                let i = cluster::choose_node(&job.host, &loads).expect("live pools");
                state
                    .host_owner
                    .insert(job.host.clone(), loads[i].0.clone());
                loads[i].0.clone()
            }
        };
        assign(state, job.clone(), &owner);
        by_node.entry(owner).or_default().push(job);
    }
    for (node, jobs) in by_node {
        if let Some((_, pool)) = live.iter().find(|(n, _)| *n == node)
            && let Err(e) = pool.cast(PoolMsg::Dispatch(jobs))
        {
            tracing::warn!(%node, error = %e, "pool unreachable; its leases will be released");
        }
    }
}

/// Keep leases of URLs still being worked on from expiring.
async fn renew_leases(state: &mut MasterState) -> Result<(), StoreError> {
    let lease = state.cfg.lease.as_millis() as Millis;
    let now = now_ms();
    if now - state.last_lease_renewal < lease / 3 || state.outstanding.is_empty() {
        return Ok(());
    }
    state.last_lease_renewal = now;
    let keys: Vec<UrlKey> = state.outstanding.keys().cloned().collect();
    state
        .store
        .extend_leases(&keys, &state.cfg.node_name, now + lease)
        .await
}

async fn status(state: &mut MasterState) -> Result<Status, StoreError> {
    let store = state.store.counts().await?;
    let elapsed = state.run.started.elapsed();
    let fetched = state.run.fetched();
    let idle = if holds_nothing(state) {
        idle_reason(state, &store)
    } else {
        None
    };
    let nodes = pools(&state.cfg)
        .into_iter()
        .map(|(node, _)| NodeInfo {
            load: state.per_node.get(&node).copied().unwrap_or(0) as u64,
            hosts: state.host_owner.values().filter(|n| **n == node).count() as u64,
            node,
        })
        .collect();
    Ok(Status {
        node: state.cfg.node_name.clone(),
        store,
        in_flight: state.outstanding.len() as u64,
        fetched_this_run: fetched,
        errors_this_run: state.run.errors.load(Ordering::Relaxed),
        pages_per_sec: fetched as f64 / elapsed.as_secs_f64().max(1e-3),
        elapsed_ms: elapsed.as_millis() as u64,
        paused: state.paused,
        idle,
        master_restarts: state.restarts,
        nodes,
    })
}

/// Answer drain waiters once nothing runs any more, or the deadline passed
/// (then what still runs goes back to pending: its slaves' reports are late).
async fn finish_drain_if_done(state: &mut MasterState) -> Result<(), StoreError> {
    let deadline_passed = state.drain_deadline.is_some_and(|d| d <= now_ms());
    if state.drain_waiters.is_empty() || !(state.outstanding.is_empty() || deadline_passed) {
        return Ok(());
    }
    flush(state).await?;
    let keys: Vec<UrlKey> = state.outstanding.drain().map(|(k, _)| k).collect();
    state.per_host.clear();
    state.per_node.clear();
    if !keys.is_empty() {
        state.store.release_keys(&keys).await?;
    }
    for waiter in state.drain_waiters.drain(..) {
        let _ = waiter.send(());
    }
    Ok(())
}
