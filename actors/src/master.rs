//! `Master`: the paper's `web_crawler_master` gen_server. Owns the store
//! handle; admits URLs (`add_url`, `search_text`); claims pending URLs in
//! batches with a lease and hands them to the pool; collects slave reports
//! and writes them back in batches. All its durable state is in the store,
//! so a restarted master picks up where the last one stopped.

use crate::behaviour::{ClaimRequest, CommitBatch, ProcessedPage, Retry, StoreError};
use crate::config::{Behaviours, CrawlConfig};
use crate::pool::PoolMsg;
use crate::types::*;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How a slave's URL ended.
#[derive(Debug)]
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

/// A snapshot for `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub node: String,
    #[serde(flatten)]
    pub store: StoreCounts,
    /// Claimed by this node and not yet reported (queued at the pool or running).
    pub in_flight: u64,
    /// Pages fetched since the app started (across master restarts).
    pub fetched_this_run: u64,
    pub errors_this_run: u64,
    pub pages_per_sec: f64,
    pub elapsed_ms: u64,
    pub paused: bool,
    pub idle: Option<IdleReason>,
    pub master_restarts: u32,
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
    /// Write the batch collected so far (sent to self: reports queued behind
    /// it in the mailbox join the batch first).
    Flush,
    Tick,
    Status(RpcReplyPort<Status>),
    /// Reply when the crawl has nothing more to do.
    WaitIdle(RpcReplyPort<IdleReason>),
    Pause(bool),
    /// The pool was restarted: everything it held is gone.
    PoolRestarted,
    /// Graceful stop: stop claiming, let running slaves finish (up to the
    /// timeout), write everything, return unstarted URLs to pending.
    Drain {
        timeout: Duration,
        reply: RpcReplyPort<()>,
    },
}

/// Counters of one run of the app. The supervisor keeps them and hands them
/// to each master incarnation, so budgets and rates survive restarts.
#[derive(Debug)]
pub struct RunStats {
    started: Instant,
    fetched: AtomicU64,
    errors: AtomicU64,
}

impl Default for RunStats {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            fetched: AtomicU64::new(0),
            errors: AtomicU64::new(0),
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
    pub behaviours: Behaviours,
    /// How many times the supervisor restarted the master so far.
    pub restarts: u32,
    pub run: Arc<RunStats>,
}

#[derive(Debug)]
pub struct MasterState {
    cfg: CrawlConfig,
    b: Behaviours,
    restarts: u32,
    /// Claimed and handed to the pool, not yet reported.
    outstanding: HashMap<UrlKey, Job>,
    per_host: HashMap<String, usize>,
    batch: CommitBatch,
    /// Jobs whose results are in `batch`: still counted as outstanding until
    /// committed, so the window bounds what a crash can cost.
    reported: Vec<Job>,
    flush_scheduled: bool,
    waiters: Vec<RpcReplyPort<IdleReason>>,
    drain_waiters: Vec<RpcReplyPort<()>>,
    draining: bool,
    drain_deadline: Option<Millis>,
    paused: bool,
    run: Arc<RunStats>,
    last_lease_renewal: Millis,
}

/// Send a message to the master by its registered name (as the paper's
/// `gen_server:cast(web_crawler_master, ...)`), so a restarted master gets it.
pub(crate) fn cast(master_name: &str, msg: MasterMsg) {
    if let Some(master) = ActorRef::<MasterMsg>::where_is(master_name)
        && let Err(e) = master.cast(msg)
    {
        tracing::debug!(error = %e, "master gone; its successor recovers the lease");
    }
}

pub(crate) fn report(master_name: &str, report: SlaveReport) {
    cast(master_name, MasterMsg::Report(report));
}

fn pool(cfg: &CrawlConfig) -> Option<ActorRef<PoolMsg>> {
    ActorRef::<PoolMsg>::where_is(cfg.pool_name())
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
        let mut state = MasterState {
            cfg: args.config,
            b: args.behaviours,
            restarts: args.restarts,
            outstanding: HashMap::new(),
            per_host: HashMap::new(),
            batch: CommitBatch::default(),
            reported: Vec::new(),
            flush_scheduled: false,
            waiters: Vec::new(),
            drain_waiters: Vec::new(),
            draining: false,
            drain_deadline: None,
            paused: false,
            run: args.run,
            last_lease_renewal: now_ms(),
        };
        // What the pool still holds was claimed by a previous incarnation and
        // is still being worked on: adopt it. Everything else this node had
        // leased goes back to pending now rather than at lease expiry.
        let held = match pool(&state.cfg) {
            Some(pool) => {
                ractor::call_t!(pool, PoolMsg::Held, 5_000).map_err(|e| format!("pool: {e}"))?
            }
            None => Vec::new(),
        };
        let keep: Vec<UrlKey> = held.iter().map(Job::key).collect();
        let released = state.b.store.release(&state.cfg.node_name, &keep).await?;
        if released > 0 {
            tracing::info!(
                released,
                "returned URLs leased by a previous master to pending"
            );
        }
        for job in held {
            *state.per_host.entry(job.host.clone()).or_default() += 1;
            state.outstanding.insert(job.key(), job);
        }
        myself.send_interval(state.cfg.tick, || MasterMsg::Tick);
        Ok(state)
    }

    async fn post_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        Ok(pump(state).await?)
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
                if state.reported.len() >= state.cfg.max_batch {
                    flush(state).await?;
                    pump(state).await?;
                } else {
                    schedule_flush(&myself, state);
                }
            }
            MasterMsg::HostRecord(record) => {
                state.batch.hosts.push(record);
                schedule_flush(&myself, state);
            }
            MasterMsg::Flush => {
                state.flush_scheduled = false;
                flush(state).await?;
                pump(state).await?;
            }
            MasterMsg::Tick => {
                renew_leases(state).await?;
                flush(state).await?;
                pump(state).await?;
            }
            MasterMsg::Status(reply) => {
                let status = status(state).await?;
                let _ = reply.send(status);
            }
            MasterMsg::WaitIdle(reply) => {
                state.waiters.push(reply);
                pump(state).await?;
            }
            MasterMsg::Pause(paused) => {
                state.paused = paused;
                pump(state).await?;
            }
            MasterMsg::PoolRestarted => {
                let keys: Vec<UrlKey> = state.outstanding.drain().map(|(k, _)| k).collect();
                state.per_host.clear();
                let released = state.b.store.release_keys(&keys).await?;
                tracing::warn!(released, "pool restarted; its URLs went back to pending");
                pump(state).await?;
            }
            MasterMsg::Drain { timeout, reply } => {
                state.draining = true;
                state.drain_deadline = Some(now_ms() + timeout.as_millis() as Millis);
                state.drain_waiters.push(reply);
                if let Some(pool) = pool(&state.cfg) {
                    let queued = ractor::call_t!(pool, PoolMsg::Drain, 5_000)
                        .map_err(|e| format!("pool: {e}"))?;
                    let keys: Vec<UrlKey> = queued.iter().map(Job::key).collect();
                    for job in &queued {
                        forget(state, job);
                    }
                    state.b.store.release_keys(&keys).await?;
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
    state.b.store.commit(batch).await?;
    Ok(Ok(admitted))
}

fn reprocess_after_ms(cfg: &CrawlConfig) -> Option<Millis> {
    cfg.reprocess_after.map(|d| d.as_millis() as Millis)
}

fn forget(state: &mut MasterState, job: &Job) -> bool {
    if state.outstanding.remove(&job.key()).is_none() {
        return false;
    }
    if let Some(n) = state.per_host.get_mut(&job.host) {
        *n -= 1;
        if *n == 0 {
            state.per_host.remove(&job.host);
        }
    }
    true
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
        let _ = myself.cast(MasterMsg::Flush);
    }
}

/// Write the collected batch in one store call.
async fn flush(state: &mut MasterState) -> Result<(), StoreError> {
    if state.batch.is_empty() {
        return Ok(());
    }
    let mut batch = std::mem::take(&mut state.batch);
    batch.now = now_ms();
    batch.reprocess_after_ms = reprocess_after_ms(&state.cfg);
    let summary = state.b.store.commit(batch).await?;
    tracing::trace!(?summary, "committed");
    for job in std::mem::take(&mut state.reported) {
        forget(state, &job);
    }
    Ok(())
}

fn budget_reached(state: &MasterState) -> bool {
    state
        .cfg
        .max_pages
        .is_some_and(|max| state.run.fetched() >= max)
}

/// Claim more work if there is room, hand it to the pool, and answer idle
/// waiters when nothing is left.
async fn pump(state: &mut MasterState) -> Result<(), StoreError> {
    let mut claimed_any = false;
    if !state.draining && !state.paused && !budget_reached(state) {
        let window = state.cfg.effective_window();
        let room = window.saturating_sub(state.outstanding.len());
        if room > 0
            && let Some(pool) = pool(&state.cfg)
        {
            let mut limit = room;
            if let Some(max) = state.cfg.max_pages {
                // Don't lease far more than the budget can use.
                let left = max.saturating_sub(state.run.fetched()) as usize;
                limit = limit.min(left.saturating_sub(state.outstanding.len()));
            }
            if limit > 0 {
                let now = now_ms();
                let jobs = state
                    .b
                    .store
                    .claim(ClaimRequest {
                        now,
                        owner: state.cfg.node_name.clone(),
                        lease_until: now + state.cfg.lease.as_millis() as Millis,
                        limit,
                        per_host_cap: state.cfg.effective_per_host_window(),
                        held_per_host: state.per_host.clone(),
                    })
                    .await?;
                if !jobs.is_empty() {
                    claimed_any = true;
                    for job in &jobs {
                        *state.per_host.entry(job.host.clone()).or_default() += 1;
                        state.outstanding.insert(job.key(), job.clone());
                    }
                    if let Err(e) = pool.cast(PoolMsg::Dispatch(jobs)) {
                        tracing::warn!(error = %e, "pool unavailable; leases will expire");
                    }
                }
            }
        }
    }
    if !claimed_any
        && state.outstanding.is_empty()
        && state.batch.is_empty()
        && !state.waiters.is_empty()
    {
        let reason = if budget_reached(state) {
            Some(IdleReason::BudgetReached)
        } else if state.b.store.counts().await?.frontier_empty() {
            Some(IdleReason::FrontierEmpty)
        } else {
            None
        };
        if let Some(reason) = reason {
            for waiter in state.waiters.drain(..) {
                let _ = waiter.send(reason);
            }
        }
    }
    Ok(())
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
        .b
        .store
        .extend_leases(&keys, &state.cfg.node_name, now + lease)
        .await
}

async fn status(state: &mut MasterState) -> Result<Status, StoreError> {
    let store = state.b.store.counts().await?;
    let elapsed = state.run.started.elapsed();
    let fetched = state.run.fetched();
    let idle = if state.outstanding.is_empty() && state.batch.is_empty() {
        if budget_reached(state) {
            Some(IdleReason::BudgetReached)
        } else if store.frontier_empty() {
            Some(IdleReason::FrontierEmpty)
        } else {
            None
        }
    } else {
        None
    };
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
    if !keys.is_empty() {
        state.b.store.release_keys(&keys).await?;
    }
    for waiter in state.drain_waiters.drain(..) {
        let _ = waiter.send(());
    }
    Ok(())
}
