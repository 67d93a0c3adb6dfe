//! `Master`: the paper's `web_crawler_master` gen_server. A mailbox and
//! timers over pure cores that take `now`: the dispatch core ([`Window`]),
//! the store cycle's steps ([`crate::store_cycle`]), admission and the seed
//! replies ([`crate::admission`]), the tick's node check
//! ([`crate::node_check`]) and the `status` answer ([`crate::status`]). It
//! admits URLs (`add_url`, `search_text`), hands claimed URLs to the pools,
//! collects slave reports and has them written in batches. Every store call
//! runs in the store cycle, on a task of its own and one at a time, so
//! reports keep arriving while the store writes; `status` reads the store's
//! counts on a task of its own too. All its durable state is in the store,
//! so a restarted master picks up where the last one stopped. A store that
//! is unavailable for a while is waited for ([`crate::outage`]): the master
//! keeps its results, claims nothing, asks again and resumes.

use crate::admission::{
    AddUrlReply, Admission, AdmittedSeeds, SeedAsk, SeedReplies, WrittenSeeds, answer_written,
};
use crate::behaviour::{Frontier, Queries};
use crate::config::{Behaviours, CrawlConfig};
use crate::cycle_end::{OnFailure, cycle_at_stop, cycle_done, cycle_failed};
use crate::indexer::IndexFeed;
use crate::node_check::check_nodes;
use crate::outage::StoreFailure;
use crate::protocol::{self, IdleReason, MasterMsg, PoolMsg, SlaveReport, Status, SupMsg};
use crate::rate::RecentRate;
use crate::reopen_waiters::ReopenWaiters;
use crate::run_stats::RunStats;
use crate::runtime_settings::RuntimeSettings;
use crate::status::{LastCounts, MasterFacts, StatusDraft};
use crate::store_cycle::{RunningCycle, StoreCycle};
use crate::types::{Job, Millis, UrlKey, now_ms};
use crate::window::{Flush, Window};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

#[derive(Debug)]
pub(crate) struct MasterArgs {
    /// The node's settings: a restarted master sizes its window by what
    /// `set` made them, and follows later changes.
    pub(crate) settings: RuntimeSettings,
    pub(crate) store: Arc<dyn Frontier>,
    /// Where a plain `add_url`'s page is read once its seed is written.
    pub(crate) queries: Arc<dyn Queries>,
    pub(crate) behaviours: Behaviours,
    /// How many times the supervisor restarted the master so far.
    pub(crate) restarts: u32,
    pub(crate) run: Arc<RunStats>,
    /// This node's index queue and its counts, when it keeps an index.
    pub(crate) index_feed: Option<IndexFeed>,
}

#[derive(Debug)]
pub(crate) struct MasterState {
    window: Window,
    cfg: CrawlConfig,
    /// Says when an operator changed the settings `cfg` was read from.
    settings: watch::Receiver<CrawlConfig>,
    /// The store, and what each store cycle needs besides its work.
    store_cycle: StoreCycle,
    /// Where a plain `add_url`'s page is read once its seed is written.
    queries: Arc<dyn Queries>,
    b: Behaviours,
    restarts: u32,
    run: Arc<RunStats>,
    /// The run's fetched count over the last seconds, for `status`.
    rate: RecentRate,
    myself: ActorRef<MasterMsg>,
    /// The store cycle running on its own task.
    cycle: Option<RunningCycle>,
    /// The store's counts last read, for `status` while it is unavailable.
    last_counts: LastCounts,
    /// This master gave up on its store and asked the supervisor to stop
    /// the app: it writes nothing more.
    gave_up: bool,
    /// Callers of `add_url`, answered once their seed is written.
    seeds: SeedReplies<AddUrlReply>,
    idle_waiters: Vec<RpcReplyPort<IdleReason>>,
    drain_waiters: Vec<RpcReplyPort<()>>,
    /// Operators who reopened a trap family, answered once the store has
    /// released its URLs.
    reopen_waiters: ReopenWaiters<RpcReplyPort<Option<u64>>>,
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
        let (fetched, errors) = run.counts();
        let window = Window::new(config.clone(), fetched, errors, now_ms());
        myself.send_interval(config.tick, || MasterMsg::Tick);
        Ok(MasterState {
            rate: RecentRate::new(now_ms(), window.fetched()),
            window,
            store_cycle: StoreCycle {
                store: args.store,
                owner: config.node_name.clone(),
                index_feed: args.index_feed,
                turn: Arc::clone(&run.store_cycle),
            },
            cfg: config,
            settings,
            queries: args.queries,
            b: args.behaviours,
            restarts: args.restarts,
            run,
            myself,
            cycle: None,
            last_counts: LastCounts::default(),
            gave_up: false,
            seeds: SeedReplies::default(),
            idle_waiters: Vec::new(),
            drain_waiters: Vec::new(),
            reopen_waiters: ReopenWaiters::default(),
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
        let nodes = protocol::cast_pools(&state.cfg.pool_name(), || PoolMsg::Resync);
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
            } => {
                let ask = SeedAsk::new(operation, again, every_ms, now);
                let queued = admission(state).add_url(&url, &ask, reply);
                queue_seeds(state, queued, now);
            }
            MasterMsg::AddUrls {
                urls,
                operation,
                again,
                reply,
            } => {
                let ask = SeedAsk::new(operation, again, None, now);
                let queued = admission(state).add_urls(&urls, &ask, reply);
                queue_seeds(state, queued, now);
            }
            MasterMsg::Normalize { url, reply } => {
                let _ = reply.send(admission(state).normalized(&url));
            }
            MasterMsg::Report(report) => on_report(state, report, now),
            MasterMsg::HostRecord(record) => {
                state.window.host_record(record);
                flush(state, false);
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
                for link in admission(state).sitemap(&referrer, urls, now) {
                    state.window.add_link(link, now);
                }
                cycle(state, true, true);
            }
            MasterMsg::Released {
                node,
                host,
                jobs,
                wait_ms,
            } => released(state, &node, host, jobs, wait_ms),
            MasterMsg::Unstarted(jobs) => {
                state.window.unstarted(&jobs);
                cycle(state, false, true);
            }
            MasterMsg::Withdrawn(jobs) => {
                state.window.withdrawn(jobs, now);
                flush(state, false);
            }
            MasterMsg::CycleDone => finish_cycle(state).await?,
            MasterMsg::Flush => {
                state.window.flush_timer_done();
                cycle(state, true, true);
            }
            MasterMsg::Tick => tick(state, now),
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
                let released = state.window.pool_restarted(&node);
                tracing::warn!(%node, released, "pool restarted; its URLs go back to pending");
                cycle(state, false, true);
            }
            MasterMsg::NodeStopping { node } => state.window.departures.stopping(&node),
            MasterMsg::ReopenTrap { family, reply } => {
                let lifted = state.window.reopen_trap(&family);
                tracing::debug!(%family, lifted, "an operator reopens a trap family");
                state.reopen_waiters.wait(family, reply);
                cycle(state, true, true);
            }
            MasterMsg::Drain { timeout, reply } => drain(state, timeout, reply, now),
        }
        if state.window.draining() {
            drain_step(state);
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
            let outcome = running.finish().await?;
            let queued_already = (outcome.as_ref())
                .map(|result| result.seeds_queued_already.clone())
                .unwrap_or_default();
            if cycle_at_stop(&mut state.window, outcome, now_ms())? {
                answer_written(state.seeds.written(), written_seeds(state, queued_already));
            } else {
                // One more try below, with everything.
                state.seeds.cycle_failed();
            }
        }
        // Should the store be away, it gets one last try now.
        state.window.ask_store_now();
        if let Some(mut work) = state.window.start_cycle(true, false, false, now_ms()) {
            let result = state.store_cycle.run(&mut work).await?;
            answer_written(
                state.seeds.all(),
                written_seeds(state, result.seeds_queued_already),
            );
        }
        Ok(())
    }
}

/// What admits seeds and sitemap entries now.
fn admission(state: &MasterState) -> Admission<'_> {
    Admission::of(&state.b, &state.cfg, state.window.budget_reached())
}

/// An admitted `add_url`'s links join the batch; its caller waits for
/// them to be written, in the cycle that starts now.
fn queue_seeds(state: &mut MasterState, queued: Option<AdmittedSeeds>, now: Millis) {
    let Some(AdmittedSeeds { links, reply, url }) = queued else {
        return;
    };
    for link in links {
        state.window.add_seed(link, now);
    }
    state.seeds.wait(reply, url);
    cycle(state, true, true);
}

/// A slave's result joins the batch: written now if a write is due, else
/// within `flush_every`.
fn on_report(state: &mut MasterState, report: SlaveReport, now: Millis) {
    let due = state.window.on_report(report, now);
    for (node, keys) in state.window.take_withdrawals() {
        protocol::send_to_pool(&state.cfg.pool_name(), &node, PoolMsg::Withdraw(keys));
    }
    for event in state.window.take_events() {
        state.b.notify(event);
    }
    state.run.record(&state.window);
    flush(state, due);
}

/// A pool let go of a host that moves: its URLs go to the host's new node.
fn released(state: &mut MasterState, node: &str, host: String, jobs: Vec<Job>, wait_ms: u64) {
    if let Some((to, jobs)) = state.window.released(node, &host, jobs) {
        tracing::debug!(%host, from = %node, %to, urls = jobs.len(), "host moved");
        let msg = PoolMsg::Handover {
            host,
            jobs,
            wait_ms,
        };
        protocol::send_to_pool(&state.cfg.pool_name(), &to, msg);
    }
    cycle(state, false, true);
}

/// The tick: follow the settings, count the rate, check the nodes.
fn tick(state: &mut MasterState, now: Millis) {
    follow_settings(state);
    state.rate.record(now, state.window.fetched());
    let live = protocol::live_pools(&state.cfg.pool_name());
    let check = check_nodes(&mut state.window, &live, now);
    let local_pool = state.cfg.pool_name();
    check.send(&mut state.window, |node, msg| {
        protocol::send_to_pool(&local_pool, node, msg)
    });
    cycle(state, true, true);
}

/// Stop handing out URLs: the pools stop starting slaves, and running ones
/// get `timeout` to finish before `drain_step` gives up on them.
fn drain(state: &mut MasterState, timeout: Duration, reply: RpcReplyPort<()>, now: Millis) {
    state.window.begin_drain(now, timeout.as_millis() as Millis);
    state.drain_waiters.push(reply);
    protocol::cast_pools(&state.cfg.pool_name(), || PoolMsg::Drain);
    // Running slaves get `timeout` to finish; this wakes us then.
    state.myself.send_after(timeout, || MasterMsg::Flush);
    cycle(state, true, false);
}

/// While draining, after each message: answer the waiters once drained,
/// else write what came in.
fn drain_step(state: &mut MasterState) {
    if state.window.drain_step(now_ms()) {
        for waiter in state.drain_waiters.drain(..) {
            let _ = waiter.send(());
        }
    } else {
        cycle(state, true, false);
    }
}

/// Write what joined the batch now if `due`, else by the flush timer.
fn flush(state: &mut MasterState, due: bool) {
    match state.window.flush(due) {
        Flush::Now => cycle(state, true, true),
        Flush::StartTimer => {
            state
                .myself
                .send_after(state.cfg.flush_every, || MasterMsg::Flush);
        }
        Flush::TimerRunning => {}
    }
}

/// Start the next store cycle, if the window has work for one and none runs.
fn cycle(state: &mut MasterState, write: bool, claim: bool) {
    let waiting = !state.idle_waiters.is_empty();
    let Some(work) = state.window.start_cycle(write, claim, waiting, now_ms()) else {
        return;
    };
    state.seeds.cycle_started(!work.batch.seeds.is_empty());
    let myself = state.myself.clone();
    let done = move || drop(myself.cast(MasterMsg::CycleDone));
    state.cycle = Some(state.store_cycle.spawn(work, done, now_ms()));
}

/// Take the finished cycle's result: answer the seeds it wrote, dispatch
/// what it claimed, answer idle waiters, and start the next one if due. A
/// store error is waited out, stops the app, or fails the master.
async fn finish_cycle(state: &mut MasterState) -> Result<(), ActorProcessingErr> {
    let Some(running) = state.cycle.take() else {
        return Ok(());
    };
    let outcome = running.finish().await?;
    let now = now_ms();
    let mut result = match outcome {
        Ok(result) => result,
        Err(failed) => {
            let limit = state.cfg.store_outage_limit;
            match cycle_failed(&mut state.window, failed, limit, now) {
                // Their seeds went back into the batch: answered once written.
                OnFailure::Wait => state.seeds.cycle_failed(),
                OnFailure::GiveUp(failure) => give_up(state, failure)?,
                OnFailure::Fail(error) => return Err(error.into()),
            }
            return Ok(());
        }
    };
    let queued_already = std::mem::take(&mut result.seeds_queued_already);
    answer_written(state.seeds.written(), written_seeds(state, queued_already));
    let live = protocol::live_nodes(&state.cfg.pool_name());
    let after = cycle_done(&mut state.window, &mut result, &live, now);
    for (family, released) in &result.reopened {
        for reply in state.reopen_waiters.take(family) {
            let _ = reply.send(*released);
        }
    }
    for (node, jobs) in after.dispatch {
        protocol::send_to_pool(&state.cfg.pool_name(), &node, PoolMsg::Dispatch(jobs));
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

/// Stop the app on a store failure: the supervisor stops the tree with it
/// as the reason ([`crate::ExitReason::Store`]); this master writes nothing
/// more meanwhile.
fn give_up(state: &mut MasterState, failure: StoreFailure) -> Result<(), ActorProcessingErr> {
    state.gave_up = true;
    tracing::debug!(%failure, "giving up on the store");
    let sup =
        ActorRef::<SupMsg>::where_is(state.cfg.sup_name()).ok_or_else(|| failure.to_string())?;
    sup.cast(SupMsg::StoreFailed(failure))?;
    Ok(())
}

/// What the seeds' callers are judged by: the seeds the cycle found
/// waiting already, and the store's pages, by the reprocess interval the
/// settings say now.
fn written_seeds(state: &MasterState, queued_already: Vec<UrlKey>) -> WrittenSeeds {
    WrittenSeeds {
        queries: Arc::clone(&state.queries),
        reprocess_after_ms: state.cfg.reprocess_after.map(|d| d.as_millis() as Millis),
        queued_already: queued_already.into_iter().collect(),
    }
}

/// Take an operator's `set` (within a tick): the window's sizes follow.
fn follow_settings(state: &mut MasterState) {
    if state.settings.has_changed().unwrap_or(false) {
        state.cfg = state.settings.borrow_and_update().clone();
        state.window.retune(state.cfg.clone());
    }
}

/// Answer `status` with what the master knows now, and the store's counts
/// and the pools' running requests read on a task of its own so the
/// mailbox never waits for the store or a pool.
fn status(state: &MasterState, reply: RpcReplyPort<Status>) {
    let facts = MasterFacts {
        node: state.cfg.node_name.clone(),
        restarts: state.restarts,
        elapsed_ms: state.run.elapsed_ms(),
        live: protocol::live_nodes(&state.cfg.pool_name()),
        last_counts: state.last_counts.read(),
        index: (state.store_cycle.index_feed.as_ref()).map(|feed| feed.progress.counts()),
        gave_up: state.gave_up,
    };
    let draft = StatusDraft::new(&state.window, &state.rate, facts, now_ms());
    let (store, last) = (
        Arc::clone(&state.store_cycle.store),
        state.last_counts.clone(),
    );
    draft.answer(store, state.cfg.pool_name(), last, reply);
}
