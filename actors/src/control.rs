//! `Control`: what an operator's remote shell and one-shot scripts talk to,
//! from another process, over the cluster (as `erl -remsh` attaches to a
//! node). It runs on the master's node, joins the control process group,
//! and answers JSON requests by calling the tree's actors.

use crate::behaviour::{PageQuery, Queries};
use crate::config::CrawlConfig;
use crate::frontier::{LinkDecision, decide_link};
use crate::hosts;
use crate::monitor::{self, HistoryQuery};
use crate::outage::utc_time;
use crate::protocol::{
    self, ChildRole, ControlMsg, ControlRequest, IndexerMsg, MAX_MESSAGE_BYTES, MAX_REQUEST_BYTES,
    MasterMsg, PoolMsg, Setting, SupMsg,
};
use crate::search::SearchAnswer;
use crate::types::{Millis, now_ms};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Debug)]
pub(crate) struct ControlArgs {
    pub(crate) config: CrawlConfig,
    pub(crate) queries: Arc<dyn Queries>,
}

#[derive(Debug)]
pub(crate) struct Control;

/// How long a request may wait for the master.
const MASTER_TIMEOUT_MS: u64 = 10_000;

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
        let answer = if text.len() > MAX_REQUEST_BYTES {
            json!({ "error": format!("the request is {} bytes, over the {MAX_REQUEST_BYTES} a cluster request may carry", text.len()) })
        } else {
            match serde_json::from_str::<ControlRequest>(&text) {
                Ok(request) => match answer(state, request).await {
                    Ok(value) => json!({ "ok": value }),
                    Err(error) => json!({ "error": error }),
                },
                Err(e) => json!({ "error": format!("bad request: {e}") }),
            }
        };
        let _ = reply.send(bounded(answer.to_string()));
        Ok(())
    }
}

/// Every setting of the node, durations in milliseconds.
fn config_json(cfg: &CrawlConfig) -> Value {
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    json!({
        "node": cfg.node_name,
        "concurrency": cfg.concurrency,
        "per_host": cfg.per_host,
        "min_delay_ms": ms(cfg.min_delay),
        "max_pages": cfg.max_pages,
        "lease_ms": ms(cfg.lease),
        "max_attempts": cfg.max_attempts,
        "retry_backoff_ms": ms(cfg.retry_backoff),
        "reprocess_after_ms": cfg.reprocess_after.map(ms),
        "window": cfg.window,
        "per_host_window": cfg.per_host_window,
        "max_batch": cfg.max_batch,
        "flush_every_ms": ms(cfg.flush_every),
        "robots_ttl_ms": ms(cfg.robots_ttl),
        "robots_retry_ms": ms(cfg.robots_retry),
        "keep_retrying_robots": cfg.keep_retrying_robots,
        "sitemaps": cfg.sitemaps,
        "traps": cfg.traps.is_some(),
        "index": cfg.index,
        "index_commit_pages": cfg.index_commit_pages,
        "index_commit_every_ms": ms(cfg.index_commit_every),
        "restart_intensity": {
            "max_restarts": cfg.restart_intensity.max_restarts,
            "period_ms": ms(cfg.restart_intensity.period),
        },
        "tick_ms": ms(cfg.tick),
        "store_outage_limit_ms": ms(cfg.store_outage_limit),
    })
}

fn master(cfg: &CrawlConfig) -> Result<ActorRef<MasterMsg>, String> {
    ActorRef::<MasterMsg>::where_is(cfg.master_name())
        .ok_or_else(|| "the master is restarting; try again".to_string())
}

async fn answer(state: &mut ControlArgs, request: ControlRequest) -> Result<Value, String> {
    let cfg = &state.config;
    match request {
        ControlRequest::Set { setting } => {
            let c = &mut state.config;
            match setting {
                Setting::DelayMs(ms) => c.min_delay = std::time::Duration::from_millis(ms),
                Setting::PerHost(n) => c.per_host = n.max(1),
                Setting::Concurrency(n) => c.concurrency = n.max(1),
            }
            Ok(
                json!({ "setting": setting, "nodes": to_pools(c, || PoolMsg::Set(setting.clone())) }),
            )
        }
        ControlRequest::PauseHost { host, paused } => {
            let msg = || PoolMsg::PauseHost {
                host: host.clone(),
                paused,
            };
            Ok(json!({ "host": host, "paused": paused, "nodes": to_pools(cfg, msg) }))
        }
        ControlRequest::StopNode { node } => {
            if node == cfg.node_name {
                return Err(format!(
                    "{node} is the master's node: stop its process (SIGTERM) instead"
                ));
            }
            let pools = protocol::pools(&cfg.pool_name());
            let Some((_, pool)) = pools.iter().find(|(n, _)| *n == node) else {
                let names: Vec<&str> = pools.iter().map(|(n, _)| n.as_str()).collect();
                return Err(format!(
                    "no live node {node:?}; nodes: {}",
                    names.join(", ")
                ));
            };
            pool.cast(PoolMsg::StopNode).map_err(|e| e.to_string())?;
            Ok(json!(format!(
                "node {node} is stopping; what it held goes back to pending"
            )))
        }
        ControlRequest::Status => {
            let status = ractor::call_t!(master(cfg)?, MasterMsg::Status, MASTER_TIMEOUT_MS)
                .map_err(|e| e.to_string())?;
            to_json(&status)
        }
        ControlRequest::Nodes => {
            let status = ractor::call_t!(master(cfg)?, MasterMsg::Status, MASTER_TIMEOUT_MS)
                .map_err(|e| e.to_string())?;
            to_json(&status.nodes)
        }
        ControlRequest::Tree => {
            let sup = ActorRef::<SupMsg>::where_is(cfg.sup_name())
                .ok_or_else(|| "the supervisor is gone".to_string())?;
            let children = ractor::call_t!(sup, SupMsg::WhichChildren, MASTER_TIMEOUT_MS)
                .map_err(|e| e.to_string())?;
            let pools: Vec<Value> = protocol::members(protocol::POOL_GROUP, &cfg.pool_name())
                .iter()
                .filter_map(|c| c.get_name())
                .map(
                    |name| json!({ "name": name, "role": "Pool", "node": protocol::node_of(&name) }),
                )
                .collect();
            Ok(json!({
                "sup": cfg.sup_name(),
                "node": cfg.node_name,
                "strategy": "one_for_one",
                "intensity": { "max_restarts": cfg.restart_intensity.max_restarts,
                               "period_s": cfg.restart_intensity.period.as_secs() },
                "children": children,
                "pools": pools,
            }))
        }
        ControlRequest::State { actor } => match actor.as_str() {
            "master" => {
                let status = ractor::call_t!(master(cfg)?, MasterMsg::Status, MASTER_TIMEOUT_MS)
                    .map_err(|e| e.to_string())?;
                to_json(&status)
            }
            "sup" => Ok(json!({
                "name": cfg.sup_name(),
                "strategy": "one_for_one",
                "max_restarts": cfg.restart_intensity.max_restarts,
                "period_s": cfg.restart_intensity.period.as_secs(),
            })),
            "config" => Ok(config_json(cfg)),
            other => Err(format!("no actor {other:?}: try master, sup or config")),
        },
        ControlRequest::AddUrl {
            url,
            operation,
            again,
            every_ms,
        } => {
            let asked = now_ms();
            let wanted = operation.clone();
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
            .map_err(|e| e.to_string())??;
            // An interval of its own queues a processed URL again, as `again` does.
            if !again
                && every_ms.is_none()
                && let Some(page) = state
                    .queries
                    .processed_url(&queued)
                    .await
                    .map_err(|e| e.to_string())?
                && page.record.operation == wanted
                && page.d_processed < asked
                && decide_link(
                    Some(page.d_processed),
                    None,
                    asked,
                    cfg.reprocess_after.map(|d| d.as_millis() as Millis),
                ) == LinkDecision::ReferralOnly
            {
                let status = page
                    .record
                    .http_returncode
                    .map_or_else(|| "no answer".to_string(), |c| format!("HTTP {c}"));
                return Err(format!(
                    "{queued} was already processed at {} ({status}): nothing queued; \
                     add it with `again` to fetch it again (console: add_url URL again; \
                     CLI: add-url --again URL)",
                    utc_time(page.d_processed)
                ));
            }
            Ok(Value::String(queued))
        }
        ControlRequest::Pending { limit } => to_json(
            &state
                .queries
                .pending(limit)
                .await
                .map_err(|e| e.to_string())?,
        ),
        ControlRequest::Processed { limit } | ControlRequest::Failed { limit } => {
            let only_failed = matches!(request, ControlRequest::Failed { .. });
            let pages = state
                .queries
                .processed(PageQuery {
                    limit: Some(limit),
                    offset: 0,
                    only_failed,
                    newest_first: true,
                })
                .await
                .map_err(|e| e.to_string())?;
            to_json(&pages)
        }
        ControlRequest::Pause | ControlRequest::Resume => {
            let paused = matches!(request, ControlRequest::Pause);
            master(cfg)?
                .cast(MasterMsg::Pause(paused))
                .map_err(|e| e.to_string())?;
            Ok(json!({ "paused": paused }))
        }
        ControlRequest::Search { query, limit } => to_json(&search(cfg, query, limit).await?),
        ControlRequest::SearchResults { text, limit } => {
            let results = state
                .queries
                .search_results(text.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            Ok(first(results, limit))
        }
        ControlRequest::Availability { host, limit } => {
            let history = history_of(state, host).await?;
            Ok(first(monitor::availability(&history), limit))
        }
        ControlRequest::Changes { host, limit } => {
            let mut changes = monitor::changes(&history_of(state, host).await?);
            changes.sort_by_key(|e| std::cmp::Reverse(e.at));
            Ok(first(changes, limit))
        }
        ControlRequest::Hosts { limit } => {
            let pool_name = cfg.pool_name();
            let (stored, (answers, silent)) = tokio::join!(
                state.queries.host_summaries(),
                protocol::ask_pools(&pool_name, limit)
            );
            let stored = stored.map_err(|e| e.to_string())?;
            to_json(&hosts::listing(stored, answers, silent, limit))
        }
        ControlRequest::RestartMaster => {
            let sup = ActorRef::<SupMsg>::where_is(cfg.sup_name()).ok_or("no supervisor")?;
            let killed = ractor::call_t!(
                sup,
                |reply| SupMsg::Restart(ChildRole::Master, reply),
                MASTER_TIMEOUT_MS
            )
            .map_err(|e| e.to_string())?;
            if !killed {
                return Err("this node runs no master".to_string());
            }
            Ok(json!(
                "master restarted (an operator's restart is not counted against the restart intensity); this console now talks to the new master"
            ))
        }
    }
}

/// A reply the wire can carry: one over the bound would end the session
/// with the console, so it is replaced by an error saying what to ask.
fn bounded(reply: String) -> String {
    if reply.len() <= MAX_MESSAGE_BYTES {
        return reply;
    }
    json!({ "error": format!(
        "the answer is {} bytes, over the {MAX_MESSAGE_BYTES} a cluster message may carry: ask for fewer",
        reply.len()
    ) })
    .to_string()
}

/// Send `msg` to every live pool; the nodes it went to.
fn to_pools(cfg: &CrawlConfig, msg: impl Fn() -> PoolMsg) -> Vec<String> {
    protocol::pools(&cfg.pool_name())
        .into_iter()
        .filter(|(_, pool)| pool.cast(msg()).is_ok())
        .map(|(node, _)| node)
        .collect()
}

/// Ask this node's indexer.
pub(crate) async fn search(
    cfg: &CrawlConfig,
    query: String,
    limit: usize,
) -> Result<SearchAnswer, String> {
    let indexer = ActorRef::<IndexerMsg>::where_is(cfg.indexer_name()).ok_or_else(|| {
        "no index here: the crawl runs without one (--no-index), or the indexer is restarting"
            .to_string()
    })?;
    ractor::call_t!(
        indexer,
        |reply| IndexerMsg::Search {
            query,
            limit,
            reply
        },
        MASTER_TIMEOUT_MS
    )
    .map_err(|e| e.to_string())?
}

/// `{"total": N, "items": [the first limit]}`: a listing whose length the
/// store decides, bounded in the reply.
/// Every fetch of the watched URLs (only `host`'s with one).
async fn history_of(
    state: &ControlArgs,
    host: Option<String>,
) -> Result<Vec<monitor::FetchHistory>, String> {
    state
        .queries
        .fetch_history(HistoryQuery { host, since: None })
        .await
        .map_err(|e| e.to_string())
}

fn first<T: Serialize>(mut items: Vec<T>, limit: usize) -> Value {
    let total = items.len();
    items.truncate(limit);
    json!({ "total": total, "items": items })
}

fn to_json<T: Serialize>(value: &T) -> Result<Value, String> {
    serde_json::to_value(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_config_shows_the_settings_in_milliseconds() {
        let cfg = CrawlConfig {
            min_delay: std::time::Duration::from_millis(1500),
            reprocess_after: None,
            ..CrawlConfig::default()
        };
        let v = config_json(&cfg);
        assert_eq!(v["min_delay_ms"], 1500);
        assert_eq!(v["reprocess_after_ms"], Value::Null);
        assert_eq!(v["index"], cfg.index);
        assert_eq!(
            v["restart_intensity"]["max_restarts"],
            cfg.restart_intensity.max_restarts
        );
        assert!(v["robots_ttl_ms"].as_u64().unwrap() > 0);
    }
}
