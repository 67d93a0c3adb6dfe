//! `Sup`: the paper's `web_crawler_sup`, a `one_for_one` supervisor over the
//! pool and the master. ractor reports child exits; the restart policy and
//! the restart intensity are ours, as OTP's: a child that exits is restarted
//! alone; more than `max_restarts` restarts within `period` and the
//! supervisor stops, taking the app down with the reason.

use crate::behaviour::error_chain;
use crate::behaviour::index::IndexShard;
use crate::config::{Behaviours, Storage};
use crate::control::{Control, ControlArgs};
use crate::indexer::{IndexFeed, IndexProgress, Indexer, IndexerArgs};
use crate::master::{Master, MasterArgs};
use crate::outage::StoreFailure;
use crate::pool::{Pool, PoolArgs};
use crate::protocol::{self, ChildInfo, ChildRole, IndexerMsg, MasterMsg, SupMsg};
use crate::restarts::RecentRestarts;
use crate::run_stats::RunStats;
use crate::runtime_settings::RuntimeSettings;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;

/// Why the tree stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitReason {
    /// `Shutdown`: a stop that was asked for.
    Requested,
    /// The restart intensity was exceeded (or a child could not start).
    Failed(String),
    /// The store was unavailable for longer than the outage limit, or
    /// failed for good (a full disk, refused credentials).
    Store(StoreFailure),
}

#[derive(Debug)]
pub(crate) struct SupArgs {
    /// The node's runtime settings, which outlive any child: each
    /// incarnation is handed them.
    pub(crate) settings: RuntimeSettings,
    /// The store, on the node that runs the master; `None` on a worker node
    /// (a pool only).
    pub(crate) storage: Option<Storage>,
    /// The index shard this node keeps (on the master's node, its
    /// `storage`'s).
    pub(crate) shard: Option<IndexShard>,
    pub(crate) behaviours: Behaviours,
    /// Where the reason the tree stopped is published.
    pub(crate) exit: watch::Sender<Option<ExitReason>>,
}

#[derive(Debug)]
struct Child {
    role: ChildRole,
    cell: ractor::ActorCell,
}

#[derive(Debug)]
pub(crate) struct SupState {
    args: SupArgs,
    children: HashMap<ActorId, Child>,
    recent_restarts: RecentRestarts,
    restarts: HashMap<ChildRole, u32>,
    /// Children killed by an operator's `Restart` (not crashes), with who
    /// to tell once the successor runs.
    asked_to_restart: HashMap<ActorId, RpcReplyPort<bool>>,
    run: Arc<RunStats>,
    /// Pages queued for the index and committed, across restarts of
    /// either actor.
    index_progress: Arc<IndexProgress>,
    shutting_down: bool,
}

#[derive(Debug)]
pub(crate) struct Sup;

impl Actor for Sup {
    type Msg = SupMsg;
    type State = SupState;
    type Arguments = SupArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SupArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut state = SupState {
            args,
            children: HashMap::new(),
            recent_restarts: RecentRestarts::default(),
            restarts: HashMap::new(),
            asked_to_restart: HashMap::new(),
            run: Arc::default(),
            index_progress: Arc::default(),
            shutting_down: false,
        };
        // The master adopts what the pool holds, so the pool starts first.
        start_child(&myself, &mut state, ChildRole::Pool).await?;
        if state.args.storage.is_some() {
            start_child(&myself, &mut state, ChildRole::Master).await?;
            start_child(&myself, &mut state, ChildRole::Control).await?;
        }
        if state.args.shard.is_some() {
            start_child(&myself, &mut state, ChildRole::Indexer).await?;
        }
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupMsg::Restart(role, reply) => {
                let child = state.children.iter().find(|(_, c)| c.role == role);
                match child {
                    Some((id, c)) if !state.shutting_down => {
                        c.cell.kill();
                        state.asked_to_restart.insert(*id, reply);
                    }
                    _ => {
                        let _ = reply.send(false);
                    }
                }
            }
            SupMsg::WhichChildren(reply) => {
                let mut rows: Vec<ChildInfo> = state
                    .children
                    .values()
                    .map(|c| ChildInfo {
                        name: c.cell.get_name().unwrap_or_default(),
                        role: c.role,
                        restarts: state.restarts.get(&c.role).copied().unwrap_or(0),
                    })
                    .collect();
                rows.sort_by_key(|c| c.role);
                let _ = reply.send(rows);
            }
            SupMsg::Shutdown(reply) => {
                state.shutting_down = true;
                stop_children(state, true).await;
                let _ = state.args.exit.send(Some(ExitReason::Requested));
                let _ = reply.send(());
                myself.stop(None);
            }
            SupMsg::StoreFailed(failure) => {
                if state.shutting_down {
                    return Ok(());
                }
                // Not a crash: no restart helps, and the reason is the
                // app's to report (once), so it is published before the
                // children stop; there is no store to index from.
                state.shutting_down = true;
                let reason = failure.to_string();
                let _ = state.args.exit.send(Some(ExitReason::Store(failure)));
                stop_children(state, false).await;
                myself.stop(Some(reason));
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        evt: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, why) = match evt {
            SupervisionEvent::ActorTerminated(cell, last_state, reason) => {
                // ractor hands the child's last state to its supervisor; it is
                // dropped now, before a successor starts: it may hold what the
                // successor needs (the indexer's writer lock).
                drop(last_state);
                (cell, reason.unwrap_or_else(|| "stopped".to_string()))
            }
            SupervisionEvent::ActorFailed(cell, err) => (cell, error_chain(err.as_ref())),
            _ => return Ok(()),
        };
        let Some(child) = state.children.remove(&cell.get_id()) else {
            return Ok(());
        };
        if state.shutting_down {
            return Ok(());
        }
        let mut waiter = state.asked_to_restart.remove(&cell.get_id());
        let mut asked = waiter.is_some();
        if asked {
            tracing::info!(child = ?child.role, "restarting it, as the operator asked");
        } else {
            tracing::error!(child = ?child.role, reason = %why, "child exited; restarting it");
        }
        // A child whose restart fails to start counts as another restart.
        let mut why = why;
        loop {
            let over_intensity = if std::mem::take(&mut asked) {
                *state.restarts.entry(child.role).or_default() += 1;
                None
            } else {
                note_restart(state, child.role, &why)
            };
            if let Some(reason) = over_intensity {
                tracing::error!(%reason, "supervisor giving up");
                state.shutting_down = true;
                for other in state.children.values() {
                    other.cell.stop(Some("supervisor shutdown".to_string()));
                }
                let _ = state
                    .args
                    .exit
                    .send(Some(ExitReason::Failed(reason.clone())));
                myself.stop(Some(reason));
                return Ok(());
            }
            match start_child(&myself, state, child.role).await {
                Ok(()) => {
                    state.args.behaviours.metrics.restarted(child.role);
                    if let Some(waiter) = waiter.take() {
                        let _ = waiter.send(true);
                    }
                    break;
                }
                Err(e) => {
                    why = format!("restart failed: {e}");
                    tracing::error!(child = ?child.role, reason = %why, "child did not start");
                }
            }
        }
        if child.role == ChildRole::Pool {
            // To the master on this node or another one (a worker's pool).
            let cfg = state.args.settings.current();
            protocol::cast(
                &cfg.master_name(),
                MasterMsg::PoolRestarted {
                    node: cfg.node_name.clone(),
                },
            );
        }
        Ok(())
    }
}

/// How long a requested stop lets the indexer index what its queue holds:
/// a short backlog is indexed (and the queue's files go), a long one waits
/// on the node's disk for its next start, so a stop takes seconds however
/// far behind the index is.
const STOP_INDEX_WAIT_MS: u64 = 2_000;

/// Stop the children one role at a time, control first and the pool last
/// (the master writes its last batch while the pool still runs). With
/// `index_first` the indexer first indexes its backlog for up to
/// [`STOP_INDEX_WAIT_MS`] (`crawl` waits for the whole of it before it
/// stops; an embedder calls `AppHandle::flush_index`). Then the frontier
/// is closed (its owner lease let go) and the queue tidied.
async fn stop_children(state: &SupState, index_first: bool) {
    for role in [
        ChildRole::Control,
        ChildRole::Master,
        ChildRole::Indexer,
        ChildRole::Pool,
    ] {
        if index_first
            && role == ChildRole::Indexer
            && let Some(indexer) =
                ActorRef::<IndexerMsg>::where_is(state.args.settings.current().indexer_name())
        {
            let _ = ractor::call_t!(indexer, IndexerMsg::CatchUp, STOP_INDEX_WAIT_MS);
        }
        let cells: Vec<_> = state
            .children
            .values()
            .filter(|c| c.role == role)
            .map(|c| c.cell.clone())
            .collect();
        for cell in cells {
            let _ = cell.stop_and_wait(None, None).await;
        }
    }
    if let Some(storage) = &state.args.storage {
        storage.frontier.close().await;
    }
    // After the pool: nothing is queued any more.
    if let Some(shard) = &state.args.shard
        && let Err(e) = shard.queue.close().await
    {
        tracing::warn!(error = %error_chain(&e), "the index queue could not be tidied");
    }
}

/// This node's index queue as the pool and the master queue pages in it.
fn index_feed(state: &SupState) -> Option<IndexFeed> {
    state.args.shard.as_ref().map(|s| IndexFeed {
        queue: Arc::clone(&s.queue),
        progress: state.index_progress.clone(),
        indexer: state.args.settings.current().indexer_name(),
    })
}

/// Record a restart; `Some(reason)` when it exceeds the restart intensity.
fn note_restart(state: &mut SupState, role: ChildRole, why: &str) -> Option<String> {
    let intensity = state.args.settings.current().restart_intensity;
    if !state.recent_restarts.allow(Instant::now(), intensity) {
        return Some(format!(
            "restart intensity exceeded ({} restart(s) in {:?}): {role:?} exited: {why}",
            intensity.max_restarts, intensity.period
        ));
    }
    *state.restarts.entry(role).or_default() += 1;
    None
}

async fn start_child(
    myself: &ActorRef<SupMsg>,
    state: &mut SupState,
    role: ChildRole,
) -> Result<(), ActorProcessingErr> {
    state.args.behaviours.metrics.started(role);
    let cfg = state.args.settings.current();
    let cell = match role {
        ChildRole::Pool => {
            let args = PoolArgs {
                settings: state.args.settings.clone(),
                behaviours: state.args.behaviours.clone(),
                index_feed: index_feed(state),
            };
            Actor::spawn_linked(Some(cfg.pool_name()), Pool, args, myself.get_cell())
                .await?
                .0
                .get_cell()
        }
        ChildRole::Master => {
            let storage = state
                .args
                .storage
                .as_ref()
                .ok_or("a worker node runs no master")?;
            let args = MasterArgs {
                settings: state.args.settings.clone(),
                store: Arc::clone(&storage.frontier),
                queries: Arc::clone(&storage.queries),
                behaviours: state.args.behaviours.clone(),
                restarts: state.restarts.get(&role).copied().unwrap_or(0),
                run: state.run.clone(),
                index_feed: index_feed(state),
            };
            Actor::spawn_linked(Some(cfg.master_name()), Master, args, myself.get_cell())
                .await?
                .0
                .get_cell()
        }
        ChildRole::Indexer => {
            let shard = state.args.shard.as_ref().ok_or("no index to keep")?;
            let args = IndexerArgs {
                progress: state.index_progress.clone(),
                opener: Arc::clone(&shard.opener),
                queue: Arc::clone(&shard.queue),
                commit_every: cfg.index_commit_every,
                commit_pages: cfg.index_commit_pages,
                yield_to_fetching: cfg.index_yields_to_fetching,
            };
            Actor::spawn_linked(Some(cfg.indexer_name()), Indexer, args, myself.get_cell())
                .await?
                .0
                .get_cell()
        }
        ChildRole::Control => {
            let storage = state
                .args
                .storage
                .as_ref()
                .ok_or("a worker node runs no control")?;
            let args = ControlArgs {
                settings: state.args.settings.clone(),
                queries: Arc::clone(&storage.queries),
                roster: Default::default(),
            };
            Actor::spawn_linked(Some(cfg.control_name()), Control, args, myself.get_cell())
                .await?
                .0
                .get_cell()
        }
    };
    state.children.insert(cell.get_id(), Child { role, cell });
    Ok(())
}
