//! `Control`: what an operator's remote shell and one-shot scripts talk to,
//! from another process, over the cluster (as `erl -remsh` attaches to a
//! node). It runs on the master's node, joins the control process group,
//! and answers JSON requests by calling the tree's actors.

use crate::availability::{self, HistoryQuery};
use crate::behaviour::index::SearchAnswer;
use crate::behaviour::{PageQuery, Queries};
use crate::cluster_query::{self, ShardRoster};
use crate::config::{CrawlConfig, shard_holding};
use crate::hosts;
use crate::protocol::{
    self, ChildRole, ControlMsg, ControlRequest, MAX_BATCH_BYTES, MAX_BATCH_URLS,
    MAX_MESSAGE_BYTES, MasterMsg, PoolMsg, Setting, SupMsg,
};
use crate::reply::{
    ActorState, Added, ControlError, ControlReply, HostPaused, Intensity, Listing, NodeStopping,
    PageView, Paused, PoolInfo, RestartStrategy, Restarted, SettingChanged, SupSummary,
    TrapReopened, Tree, UrlOutcome, to_wire,
};
use crate::runtime_settings::RuntimeSettings;
use crate::types::{Millis, OperationSpec, TRAP_SAMPLES, now_ms};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug)]
pub(crate) struct ControlArgs {
    /// The node's settings: `set` writes them, `state config` shows them.
    pub(crate) settings: RuntimeSettings,
    pub(crate) queries: Arc<dyn Queries>,
    /// The nodes a search should hear from.
    pub(crate) roster: ShardRoster,
}

#[derive(Debug)]
pub(crate) struct Control;

/// How long a request may wait for the master.
const MASTER_TIMEOUT_MS: u64 = 10_000;
/// What a `shutdown` gives in-flight pages to finish, as SIGTERM does.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long a `shutdown`'s answer has to reach the console before the stop.
const SHUTDOWN_ANSWER_TIME: Duration = Duration::from_millis(500);

/// How long a batch of URLs may wait for the master to write it.
const BATCH_TIMEOUT_MS: u64 = 60_000;

impl Actor for Control {
    type Msg = ControlMsg;
    type State = ControlArgs;
    type Arguments = ControlArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: ControlArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        ractor::pg::join(protocol::CONTROL_GROUP.to_string(), vec![myself.get_cell()]);
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let ControlMsg::Request(text, reply) = msg;
        let too_large = |limit| ControlError::TooLarge {
            bytes: text.len(),
            limit,
        };
        let answer = if text.len() > MAX_BATCH_BYTES {
            Err(too_large(MAX_BATCH_BYTES))
        } else {
            match serde_json::from_str::<ControlRequest>(&text) {
                Ok(request) if text.len() > request.max_bytes() => {
                    Err(too_large(request.max_bytes()))
                }
                Ok(request) => answer(state, request).await,
                Err(e) => Err(ControlError::BadRequest(e)),
            }
        };
        let _ = reply.send(bounded(to_wire(&answer)));
        Ok(())
    }
}

fn master(cfg: &CrawlConfig) -> Result<ActorRef<MasterMsg>, ControlError> {
    ActorRef::<MasterMsg>::where_is(cfg.master_name()).ok_or(ControlError::MasterRestarting)
}

fn sup(cfg: &CrawlConfig) -> Result<ActorRef<SupMsg>, ControlError> {
    ActorRef::<SupMsg>::where_is(cfg.sup_name()).ok_or(ControlError::NoSupervisor)
}

/// An actor that did not take or answer a message.
fn unanswered<E: std::fmt::Display>(actor: &'static str) -> impl FnOnce(E) -> ControlError {
    move |e| ControlError::Unanswered {
        actor,
        reason: e.to_string(),
    }
}

async fn status(cfg: &CrawlConfig) -> Result<crate::protocol::Status, ControlError> {
    ractor::call_t!(master(cfg)?, MasterMsg::Status, MASTER_TIMEOUT_MS)
        .map_err(unanswered("master"))
}

fn intensity(cfg: &CrawlConfig) -> Intensity {
    Intensity {
        max_restarts: cfg.restart_intensity.max_restarts,
        period_s: cfg.restart_intensity.period.as_secs(),
    }
}

/// The answer to `request`: one function a request, each calling the
/// tree's actors; the rules are theirs (`add_url`'s in
/// [`crate::admission`], applied by the master for every entry point).
async fn answer(
    state: &mut ControlArgs,
    request: ControlRequest,
) -> Result<ControlReply, ControlError> {
    let cfg = &state.settings.current();
    match request {
        ControlRequest::Set { setting } => Ok(set(&state.settings, cfg, setting)),
        ControlRequest::PauseHost { host, paused } => Ok(pause_host(cfg, host, paused)),
        ControlRequest::StopNode { node } => stop_node(cfg, node),
        ControlRequest::Shutdown => shutdown(cfg),
        ControlRequest::Status => Ok(ControlReply::Status(status(cfg).await?)),
        ControlRequest::Nodes => Ok(ControlReply::Nodes(status(cfg).await?.nodes)),
        ControlRequest::Tree => tree(cfg).await,
        ControlRequest::State { actor } => actor_state(cfg, actor).await,
        ControlRequest::AddUrl {
            url,
            operation,
            again,
            every_ms,
        } => add_url(cfg, url, operation, again, every_ms).await,
        ControlRequest::AddUrls {
            urls,
            operation,
            again,
        } => add_urls(cfg, urls, operation, again).await,
        ControlRequest::Page { url } => page(state, cfg, url).await,
        ControlRequest::Pending { limit } => {
            Ok(ControlReply::Pending(state.queries.pending(limit).await?))
        }
        ControlRequest::Processed { limit } => newest_pages(state, limit, false).await,
        ControlRequest::Failed { limit } => newest_pages(state, limit, true).await,
        ControlRequest::Pause => pause(cfg, true),
        ControlRequest::Resume => pause(cfg, false),
        ControlRequest::Search {
            query,
            limit,
            offset,
        } => search_page(state, cfg, query, limit, offset).await,
        ControlRequest::TextMatchHits { text, limit } => {
            let results = state.queries.text_match_hits(text.as_deref()).await?;
            Ok(ControlReply::TextMatchHits(Listing::first(results, limit)))
        }
        ControlRequest::Availability { host, limit } => {
            let rows = availability::availability(&history_of(state, host).await?);
            Ok(ControlReply::Availability(Listing::first(rows, limit)))
        }
        ControlRequest::Changes { host, limit } => {
            let mut changes = availability::changes(&history_of(state, host).await?);
            changes.sort_by_key(|e| std::cmp::Reverse(e.at));
            Ok(ControlReply::Changes(Listing::first(changes, limit)))
        }
        ControlRequest::Hosts { limit } => hosts(state, cfg, limit).await,
        ControlRequest::Traps { limit } => {
            let families = state.queries.trap_families(TRAP_SAMPLES).await?;
            Ok(ControlReply::Traps(Listing::first(families, limit)))
        }
        ControlRequest::ReopenTrap { family } => {
            Ok(ControlReply::TrapReopened(reopen_trap(cfg, family).await?))
        }
        ControlRequest::RestartMaster => restart_master(cfg).await,
    }
}

/// The master's node's settings here, every node's pool by message.
fn set(settings: &RuntimeSettings, cfg: &CrawlConfig, setting: Setting) -> ControlReply {
    settings.set(&setting);
    let nodes = to_pools(cfg, || PoolMsg::Set(setting.clone()));
    ControlReply::SettingChanged(SettingChanged { setting, nodes })
}

fn pause_host(cfg: &CrawlConfig, host: String, paused: bool) -> ControlReply {
    let msg = || PoolMsg::PauseHost {
        host: host.clone(),
        paused,
    };
    let nodes = to_pools(cfg, msg);
    ControlReply::HostPaused(HostPaused {
        host,
        paused,
        nodes,
    })
}

fn stop_node(cfg: &CrawlConfig, node: String) -> Result<ControlReply, ControlError> {
    let pool = node_to_stop(&node, &cfg.node_name, protocol::pools(&cfg.pool_name()))?;
    pool.cast(PoolMsg::StopNode).map_err(unanswered("pool"))?;
    // It does not come back: once gone, its pages are handed over.
    protocol::cast(
        &cfg.master_name(),
        MasterMsg::NodeStopping { node: node.clone() },
    );
    Ok(ControlReply::NodeStopping(NodeStopping { node }))
}

/// The pool of `node` among the live `pools` (by node), which `node stop`
/// stops: never the master's node, whose stop is `shutdown`.
fn node_to_stop<P>(
    node: &str,
    masters_node: &str,
    pools: Vec<(String, P)>,
) -> Result<P, ControlError> {
    if node == masters_node {
        return Err(ControlError::MastersNode {
            node: node.to_string(),
        });
    }
    let live: Vec<String> = pools.iter().map(|(n, _)| n.clone()).collect();
    match pools.into_iter().find(|(n, _)| n == node) {
        Some((_, pool)) => Ok(pool),
        None => Err(ControlError::NoSuchNode {
            node: node.to_string(),
            live,
        }),
    }
}

fn shutdown(cfg: &CrawlConfig) -> Result<ControlReply, ControlError> {
    let (master, sup) = (master(cfg)?, sup(cfg)?);
    // Answered first: the stop ends this actor, and the process with the
    // cluster connection the answer travels on.
    tokio::spawn(async move {
        tokio::time::sleep(SHUTDOWN_ANSWER_TIME).await;
        let _ = ractor::call_t!(
            master,
            |reply| MasterMsg::Drain {
                timeout: SHUTDOWN_GRACE,
                reply
            },
            MASTER_TIMEOUT_MS + SHUTDOWN_GRACE.as_millis() as u64
        );
        let (port, _) = ractor::concurrency::oneshot();
        let _ = sup.cast(SupMsg::Shutdown(port.into()));
    });
    Ok(ControlReply::NodeStopping(NodeStopping {
        node: cfg.node_name.clone(),
    }))
}

async fn tree(cfg: &CrawlConfig) -> Result<ControlReply, ControlError> {
    let children = ractor::call_t!(sup(cfg)?, SupMsg::WhichChildren, MASTER_TIMEOUT_MS)
        .map_err(unanswered("supervisor"))?;
    let pools = protocol::members(protocol::POOL_GROUP, &cfg.pool_name())
        .iter()
        .filter_map(|c| c.get_name())
        .map(|name| PoolInfo {
            node: protocol::node_of(&name).to_string(),
            name,
            role: ChildRole::Pool,
        })
        .collect();
    Ok(ControlReply::Tree(Tree {
        sup: cfg.sup_name(),
        node: cfg.node_name.clone(),
        strategy: RestartStrategy::OneForOne,
        intensity: intensity(cfg),
        children,
        pools,
    }))
}

async fn actor_state(cfg: &CrawlConfig, actor: String) -> Result<ControlReply, ControlError> {
    Ok(ControlReply::State(match actor.as_str() {
        "master" => ActorState::Master(Box::new(status(cfg).await?)),
        "sup" => ActorState::Sup(SupSummary {
            name: cfg.sup_name(),
            strategy: RestartStrategy::OneForOne,
            intensity: intensity(cfg),
        }),
        "config" => ActorState::Config(Box::new(cfg.clone())),
        _ => return Err(ControlError::NoSuchActor(actor)),
    }))
}

/// The master's answer: queued (or waiting already), or refused by the
/// admission rules.
async fn add_url(
    cfg: &CrawlConfig,
    url: String,
    operation: OperationSpec,
    again: bool,
    every_ms: Option<Millis>,
) -> Result<ControlReply, ControlError> {
    let queued = ractor::call_t!(
        master(cfg)?,
        |reply| MasterMsg::AddUrl {
            url,
            operation,
            again,
            every_ms,
            reply
        },
        MASTER_TIMEOUT_MS
    )
    .map_err(unanswered("master"))??;
    Ok(ControlReply::Queued(queued))
}

/// The master's answer for each URL, in order.
async fn add_urls(
    cfg: &CrawlConfig,
    urls: Vec<String>,
    operation: OperationSpec,
    again: bool,
) -> Result<ControlReply, ControlError> {
    if urls.len() > MAX_BATCH_URLS {
        return Err(ControlError::TooManyUrls {
            urls: urls.len(),
            limit: MAX_BATCH_URLS,
        });
    }
    let answers = ractor::call_t!(
        master(cfg)?,
        |reply| MasterMsg::AddUrls {
            urls: urls.clone(),
            operation,
            again,
            reply
        },
        BATCH_TIMEOUT_MS
    )
    .map_err(unanswered("master"))?;
    let results = urls
        .into_iter()
        .zip(answers)
        .map(|(url, answer)| UrlOutcome::of(url, answer.map_err(ControlError::AddUrl)))
        .collect();
    Ok(ControlReply::Added(Added::of(results)))
}

async fn page(
    state: &ControlArgs,
    cfg: &CrawlConfig,
    url: String,
) -> Result<ControlReply, ControlError> {
    let normalized = ractor::call_t!(
        master(cfg)?,
        |reply| MasterMsg::Normalize {
            url: url.clone(),
            reply
        },
        MASTER_TIMEOUT_MS
    )
    .map_err(unanswered("master"))?
    .unwrap_or(url);
    let Some(page) = state.queries.processed_url(&normalized).await? else {
        return Err(ControlError::NoSuchPage { url: normalized });
    };
    let host = Some(page.record.host.clone());
    let mut history = history_of(state, host).await?;
    history.retain(|h| h.url == page.record.url);
    Ok(ControlReply::Page(Box::new(PageView { page, history })))
}

async fn newest_pages(
    state: &ControlArgs,
    limit: usize,
    only_failed: bool,
) -> Result<ControlReply, ControlError> {
    let pages = state
        .queries
        .processed(PageQuery {
            limit: Some(limit),
            offset: 0,
            only_failed,
            only_duplicates: false,
            newest_first: true,
        })
        .await?;
    Ok(ControlReply::Pages(pages))
}

fn pause(cfg: &CrawlConfig, paused: bool) -> Result<ControlReply, ControlError> {
    master(cfg)?
        .cast(MasterMsg::Pause(paused))
        .map_err(unanswered("master"))?;
    Ok(ControlReply::Paused(Paused { paused }))
}

/// A page of the cluster's search: the first `offset + limit` hits, less
/// the first `offset`.
async fn search_page(
    state: &mut ControlArgs,
    cfg: &CrawlConfig,
    query: String,
    limit: usize,
    offset: usize,
) -> Result<ControlReply, ControlError> {
    let store = (&mut state.roster, state.queries.as_ref());
    let mut answer = search(cfg, Some(store), query, offset + limit).await?;
    answer.results.drain(..offset.min(answer.results.len()));
    Ok(ControlReply::Search(answer))
}

async fn hosts(
    state: &ControlArgs,
    cfg: &CrawlConfig,
    limit: usize,
) -> Result<ControlReply, ControlError> {
    let pool_name = cfg.pool_name();
    let (stored, (answers, silent)) = tokio::join!(
        state.queries.host_summaries(),
        protocol::ask_pools(&pool_name, limit)
    );
    Ok(ControlReply::Hosts(hosts::listing(
        stored?, answers, silent, limit,
    )))
}

async fn restart_master(cfg: &CrawlConfig) -> Result<ControlReply, ControlError> {
    let restarted = ractor::call_t!(
        sup(cfg)?,
        |reply| SupMsg::Restart(ChildRole::Master, reply),
        MASTER_TIMEOUT_MS
    )
    .map_err(unanswered("supervisor"))?;
    if !restarted {
        return Err(ControlError::NoMaster);
    }
    Ok(ControlReply::Restarted(Restarted {
        child: ChildRole::Master,
    }))
}

/// Reopen the trap family `family` (an operator says it is real): the
/// master's guard lifts it and never closes it again on this store, and
/// the URLs it refused go back to pending, so the running crawl fetches
/// them. One function for every entry point (the console's `reopen-trap`,
/// an embedding program's [`ControlClient::reopen_trap`](crate::ControlClient::reopen_trap)).
pub(crate) async fn reopen_trap(
    cfg: &CrawlConfig,
    family: String,
) -> Result<TrapReopened, ControlError> {
    let family = family.trim().to_string();
    if family.is_empty() {
        return Err(ControlError::NoSuchTrapFamily { family });
    }
    let released = ractor::call_t!(
        master(cfg)?,
        |reply| MasterMsg::ReopenTrap {
            family: family.clone(),
            reply
        },
        MASTER_TIMEOUT_MS
    )
    .map_err(unanswered("master"))?;
    match released {
        Some(released) => Ok(TrapReopened { family, released }),
        None => Err(ControlError::NoSuchTrapFamily { family }),
    }
}

/// A reply the wire can carry: one over the bound would end the session
/// with the console, so it is replaced by an error saying what to ask.
fn bounded(reply: String) -> String {
    if reply.len() <= MAX_MESSAGE_BYTES {
        return reply;
    }
    to_wire(&Err(ControlError::ReplyTooLarge {
        bytes: reply.len(),
        limit: MAX_MESSAGE_BYTES,
    }))
}

/// Send `msg` to every live pool; the nodes it went to.
fn to_pools(cfg: &CrawlConfig, msg: impl Fn() -> PoolMsg) -> Vec<String> {
    protocol::pools(&cfg.pool_name())
        .into_iter()
        .filter(|(_, pool)| pool.cast(msg()).is_ok())
        .map(|(node, _)| node)
        .collect()
}

/// A query across the cluster's shards ([`cluster_query::ask_shards`]), merged:
/// with the store (on the master's node), the nodes holding pages that
/// did not answer are named missing, and a page that two shards hold is
/// listed from the node that fetched it last (the other is told to drop
/// its copy).
pub(crate) async fn search(
    cfg: &CrawlConfig,
    store: Option<(&mut ShardRoster, &dyn Queries)>,
    query: String,
    limit: usize,
) -> Result<SearchAnswer, ControlError> {
    let local = cfg.indexer_name();
    let live: Vec<String> = protocol::shards(&local)
        .into_iter()
        .map(|(node, _)| node)
        .collect();
    if live.is_empty() {
        return Err(ControlError::NoIndex);
    }
    let (answered, tops) = cluster_query::ask_shards(&local, &query, limit)
        .await
        .map_err(ControlError::Search)?;
    let mut fetched_by = HashMap::new();
    let expected = match store {
        Some((roster, queries)) => {
            let now = now_ms();
            if roster.stale(now, &live) {
                let nodes = queries.pages_per_node().await?;
                let master = &cfg.node_name;
                roster.read(
                    nodes
                        .into_iter()
                        .map(|(node, _)| shard_holding(node, master)),
                    now,
                );
            }
            for url in cluster_query::listed_twice(&tops) {
                if let Some(page) = queries.processed_url(&url).await? {
                    fetched_by.insert(url, shard_holding(page.record.node, &cfg.node_name));
                }
            }
            roster.expected(&live)
        }
        None => live,
    };
    cluster_query::forget(&local, cluster_query::stale_copies(&tops, &fetched_by));
    let mut answer = cluster_query::merge_tops(tops, limit, &fetched_by);
    answer.nodes = Some(cluster_query::shard_nodes(&expected, &answered));
    Ok(answer)
}

/// Every fetch of the watched URLs (only `host`'s with one).
async fn history_of(
    state: &ControlArgs,
    host: Option<String>,
) -> Result<Vec<availability::FetchHistory>, ControlError> {
    Ok(state
        .queries
        .fetch_history(HistoryQuery { host, since: None })
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pools() -> Vec<(String, u8)> {
        vec![("m".to_string(), 0), ("w1".to_string(), 1)]
    }

    #[test]
    fn node_stop_stops_a_live_workers_pool_only() {
        assert_eq!(node_to_stop("w1", "m", pools()).unwrap(), 1);
        assert!(matches!(
            node_to_stop("m", "m", pools()),
            Err(ControlError::MastersNode { node }) if node == "m"
        ));
        assert!(matches!(
            node_to_stop("w2", "m", pools()),
            Err(ControlError::NoSuchNode { node, live }) if node == "w2" && live == ["m", "w1"]
        ));
    }
}
