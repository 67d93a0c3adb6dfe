//! `Pool`: the paper's `pool` on one node. Takes claimed URLs from the
//! master, keeps them in per-host queues ([`HostScheduler`]) and spawns one
//! linked, short-lived [`Slave`] per URL when politeness allows. It supervises
//! its slaves: a slave that fails is reported to the master as a failed
//! attempt (the URL is retried, then recorded as failed).

use crate::behaviour::Record;
use crate::behaviour::index::INDEX_QUEUE;
use crate::config::Behaviours;
use crate::hosts::MAX_LIVE_HOSTS;
use crate::indexer::IndexFeed;
use crate::metrics;
use crate::protocol::{self, MasterMsg, PoolMsg, SlaveReport, SupMsg};
use crate::runtime_settings::RuntimeSettings;
use crate::scheduler::{Action, HostScheduler};
use crate::slave::{PageWants, Slave, SlaveArgs, SlaveTask};
use crate::types::{Job, Millis, now_ms};
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug)]
pub(crate) struct PoolArgs {
    /// The node's settings, read here each time: a restarted pool starts
    /// with what `set` made them.
    pub(crate) settings: RuntimeSettings,
    pub(crate) behaviours: Behaviours,
    /// On a node that keeps an index shard: where its slaves' pages wait
    /// for it (their text is not sent to the master).
    pub(crate) index_feed: Option<IndexFeed>,
}

#[derive(Debug)]
enum Running {
    Page(Job),
    Robots(String),
}

#[derive(Debug)]
pub(crate) struct PoolState {
    args: PoolArgs,
    scheduler: HostScheduler,
    slaves: HashMap<ActorId, Running>,
    /// Registered name of the master reports go to.
    master: String,
    draining: bool,
    /// Time of the wake-up already scheduled, so delays don't pile up timers.
    wake_at: Option<Millis>,
}

#[derive(Debug)]
pub(crate) struct Pool;

impl Actor for Pool {
    type Msg = PoolMsg;
    type State = PoolState;
    type Arguments = PoolArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: PoolArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        // Like pool:attach/1: the master finds every node's pool in this group.
        ractor::pg::join(protocol::POOL_GROUP.to_string(), vec![myself.get_cell()]);
        let config = args.settings.current();
        Ok(PoolState {
            scheduler: HostScheduler::new(config.politeness()),
            master: config.master_name(),
            args,
            slaves: HashMap::new(),
            draining: false,
            wake_at: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            PoolMsg::Dispatch(jobs) => {
                if state.draining {
                    // Too late to start: the master releases what it sent.
                    return Ok(());
                }
                for job in jobs {
                    state.scheduler.push(job);
                }
            }
            PoolMsg::Withdraw(keys) => {
                let keys = keys.into_iter().collect();
                let jobs = state.scheduler.withdraw(&keys);
                if !jobs.is_empty() {
                    protocol::cast(&state.master, MasterMsg::Withdrawn(jobs));
                }
            }
            PoolMsg::Resync => protocol::cast(
                &state.master,
                MasterMsg::Adopt {
                    node: state.args.settings.current().node_name,
                    jobs: state.scheduler.held(),
                },
            ),
            PoolMsg::Release(hosts) => {
                for host in &hosts {
                    state.scheduler.release(host);
                }
            }
            PoolMsg::Handover {
                host,
                jobs,
                wait_ms,
            } => {
                if state.draining {
                    return Ok(());
                }
                let not_before = now_ms().saturating_add(wait_ms.min(i64::MAX as u64) as Millis);
                state.scheduler.take_host(&host, jobs, not_before);
            }
            PoolMsg::Drain => {
                state.draining = true;
                protocol::cast(
                    &state.master,
                    MasterMsg::Unstarted(state.scheduler.take_queued()),
                );
            }
            PoolMsg::RobotsFetched {
                host,
                report,
                soft_404,
                sitemaps,
            } => {
                protocol::cast(&state.master, MasterMsg::HostRecord(report.record.clone()));
                if let Some((probe_url, simhash)) = soft_404 {
                    protocol::cast(&state.master, MasterMsg::Soft404 { probe_url, simhash });
                }
                if !sitemaps.is_empty()
                    && let Some(referrer) = state.scheduler.job_of(&host)
                {
                    let referrer = referrer.clone();
                    protocol::cast(
                        &state.master,
                        MasterMsg::Sitemaps {
                            referrer,
                            urls: sitemaps,
                        },
                    );
                }
                state
                    .scheduler
                    .robots_ready(&host, report.rules, report.unreachable, now_ms());
            }
            PoolMsg::Report(mut report) => {
                if let Some(feed) = &state.args.index_feed {
                    // Queued here before the report leaves: a page the
                    // master has processed is in this node's queue (a
                    // failed write fails the pool, whose restart returns
                    // its URLs to pending).
                    feed.push_records(&index_records(&mut report)).await?;
                }
                if let SlaveReport::Failed {
                    job,
                    retry_after: Some(until),
                    ..
                } = report.as_ref()
                {
                    state.scheduler.back_off(&job.host, *until);
                }
                state.scheduler.reported(report.job());
                if let Some((status, failed)) = metrics::outcome(&report) {
                    state.args.behaviours.metrics.url_done(status, failed);
                }
                protocol::report(&state.master, *report);
            }
            PoolMsg::Wake => state.wake_at = None,
            PoolMsg::Hosts { limit, reply } => {
                let node = state.args.settings.current().node_name;
                let limit = limit.min(MAX_LIVE_HOSTS);
                let mut answer = state.scheduler.snapshot(&node, now_ms(), limit);
                answer.index = state.args.index_feed.as_ref().map(|f| f.progress.counts());
                let _ = reply.send(answer);
                return Ok(());
            }
            PoolMsg::Set(setting) => {
                // Written here too: a worker node's settings are its own.
                state.args.settings.set(&setting);
                let politeness = state.args.settings.current().politeness();
                state.scheduler.set_politeness(politeness);
                tracing::info!(?setting, "setting changed by an operator");
            }
            PoolMsg::PauseHost { host, paused } => {
                tracing::info!(%host, paused, "host paused or resumed by an operator");
                state.scheduler.pause_host(&host, paused);
            }
            PoolMsg::StopNode => {
                tracing::warn!("node stopped by an operator");
                if let Some(sup) =
                    ActorRef::<SupMsg>::where_is(state.args.settings.current().sup_name())
                {
                    // Not waited for: the supervisor stops this pool too.
                    let (port, _) = ractor::concurrency::oneshot();
                    let _ = sup.cast(SupMsg::Shutdown(port.into()));
                }
                return Ok(());
            }
            PoolMsg::MasterLost => {
                let dropped = state.scheduler.take_queued().len();
                if dropped > 0 {
                    tracing::info!(dropped, "the master is gone: its queued URLs are dropped");
                }
            }
        }
        pump(&myself, state).await
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        evt: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, failure) = match evt {
            SupervisionEvent::ActorTerminated(cell, _, _) => (cell, None),
            SupervisionEvent::ActorFailed(cell, err) => (cell, Some(err.to_string())),
            _ => return Ok(()),
        };
        match state.slaves.remove(&cell.get_id()) {
            Some(Running::Page(job)) => {
                state.scheduler.finished(&job.key(), &job.host);
                if let Some(reason) = failure {
                    tracing::warn!(url = %job.url, %reason, "slave failed");
                    state.args.behaviours.metrics.url_done(None, true);
                    protocol::report(
                        &state.master,
                        SlaveReport::Failed {
                            job,
                            reason: format!("slave crashed: {reason}"),
                            retryable: true,
                            status: None,
                            retry_after: None,
                        },
                    );
                }
            }
            Some(Running::Robots(host)) => match failure {
                None => state.scheduler.robots_done(),
                Some(reason) => {
                    tracing::warn!(%host, %reason, "robots.txt slave failed");
                    state.scheduler.robots_failed(&host);
                }
            },
            None => {}
        }
        pump(&myself, state).await
    }
}

/// Start whatever politeness allows now, and schedule the next wake-up.
async fn pump(myself: &ActorRef<PoolMsg>, state: &mut PoolState) -> Result<(), ActorProcessingErr> {
    if state.draining {
        return Ok(());
    }
    let now = now_ms();
    for released in state.scheduler.take_released(now) {
        protocol::cast(
            &state.master,
            MasterMsg::Released {
                node: state.args.settings.current().node_name,
                host: released.host,
                jobs: released.jobs,
                wait_ms: released.wait_ms,
            },
        );
    }
    let (actions, wake) = state.scheduler.poll(now);
    for action in actions {
        match action {
            Action::FetchRobots { scheme, host } => {
                let task = SlaveTask::Robots {
                    scheme,
                    host: host.clone(),
                };
                let id = spawn_slave(myself, state, task).await?;
                state.slaves.insert(id, Running::Robots(host));
            }
            Action::Run(job) => {
                let id = spawn_slave(myself, state, SlaveTask::Page(job.clone())).await?;
                state.slaves.insert(id, Running::Page(job));
            }
            Action::Blocked(job) => {
                protocol::report(&state.master, SlaveReport::RobotsBlocked { job })
            }
            // Retry once robots.txt is asked again, not sooner.
            Action::Unreachable(job, why) => protocol::report(
                &state.master,
                SlaveReport::RobotsUnreachable {
                    job,
                    retry_at: now
                        + state.args.settings.current().robots_retry.as_millis() as Millis,
                    why,
                },
            ),
        }
    }
    let metrics = &state.args.behaviours.metrics;
    metrics.pool_load(state.scheduler.queued(), state.scheduler.in_flight());
    if let Some(at) = wake
        && state.wake_at.is_none_or(|w| at < w)
    {
        state.wake_at = Some(at);
        let delay = Duration::from_millis(at.saturating_sub(now).max(1) as u64);
        myself.send_after(delay, || PoolMsg::Wake);
    }
    Ok(())
}

/// The [`INDEX_QUEUE`] records of a page's report, taken out of it.
fn index_records(report: &mut SlaveReport) -> Vec<Record> {
    let SlaveReport::Page { page, .. } = report else {
        return Vec::new();
    };
    let (pages, rest) = std::mem::take(&mut page.records)
        .into_iter()
        .partition(|r| r.collection == INDEX_QUEUE);
    page.records = rest;
    pages
}

async fn spawn_slave(
    myself: &ActorRef<PoolMsg>,
    state: &PoolState,
    task: SlaveTask,
) -> Result<ActorId, ActorProcessingErr> {
    let cfg = state.args.settings.current();
    let args = SlaveArgs {
        task,
        behaviours: state.args.behaviours.clone(),
        node_name: cfg.node_name,
        pool: myself.clone(),
        wants: PageWants {
            simhash: cfg.traps.is_some(),
            index: cfg.index_pages,
        },
        sitemaps: cfg.sitemaps,
        min_delay_ms: cfg.min_delay.as_millis() as u64,
    };
    let (slave, _) = Actor::spawn_linked(None, Slave, args, myself.get_cell()).await?;
    Ok(slave.get_id())
}
