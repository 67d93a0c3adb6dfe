//! `Control`: what an operator's remote shell and one-shot scripts talk to,
//! from another process, over the cluster (as `erl -remsh` attaches to a
//! node). It runs on the master's node, joins the control process group,
//! and answers JSON requests by calling the tree's actors.

use crate::behaviour::{Document, PageQuery, Queries};
use crate::config::CrawlConfig;
use crate::protocol::{self, ControlMsg, ControlRequest, IndexerMsg, MasterMsg, SupMsg};
use crate::search::SearchAnswer;
use crate::types::SEARCH_RESULTS;
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
        let answer = match serde_json::from_str::<ControlRequest>(&text) {
            Ok(request) => match answer(state, request).await {
                Ok(value) => json!({ "ok": value }),
                Err(error) => json!({ "error": error }),
            },
            Err(e) => json!({ "error": format!("bad request: {e}") }),
        };
        let _ = reply.send(answer.to_string());
        Ok(())
    }
}

fn master(cfg: &CrawlConfig) -> Result<ActorRef<MasterMsg>, String> {
    ActorRef::<MasterMsg>::where_is(cfg.master_name())
        .ok_or_else(|| "the master is restarting; try again".to_string())
}

async fn answer(state: &ControlArgs, request: ControlRequest) -> Result<Value, String> {
    let cfg = &state.config;
    match request {
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
            "config" => Ok(json!({
                "node": cfg.node_name,
                "concurrency": cfg.concurrency,
                "per_host": cfg.per_host,
                "min_delay_ms": cfg.min_delay.as_millis() as u64,
                "max_pages": cfg.max_pages,
                "lease_s": cfg.lease.as_secs(),
                "max_attempts": cfg.max_attempts,
            })),
            other => Err(format!("no actor {other:?}: try master, sup or config")),
        },
        ControlRequest::AddUrl { url, operation } => {
            let result = ractor::call_t!(
                master(cfg)?,
                |reply| MasterMsg::AddUrl {
                    url,
                    operation,
                    again: false,
                    reply
                },
                MASTER_TIMEOUT_MS
            )
            .map_err(|e| e.to_string())?;
            result.map(Value::String)
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
            let mut filter = Document::new();
            if let Some(text) = text {
                filter.insert("text".into(), text.into());
            }
            let mut results = state
                .queries
                .records(SEARCH_RESULTS, &filter)
                .await
                .map_err(|e| e.to_string())?;
            let field =
                |d: &Document, k: &str| d.get(k).and_then(Value::as_str).map(str::to_string);
            results.sort_by_cached_key(|d| (field(d, "url"), field(d, "text")));
            Ok(first(results, limit))
        }
        ControlRequest::Hosts { limit } => {
            let hosts = state
                .queries
                .host_summaries()
                .await
                .map_err(|e| e.to_string())?;
            Ok(first(hosts, limit))
        }
        ControlRequest::RestartMaster => {
            master(cfg)?.kill();
            Ok(json!("master killed; the supervisor restarts it"))
        }
    }
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
fn first<T: Serialize>(mut items: Vec<T>, limit: usize) -> Value {
    let total = items.len();
    items.truncate(limit);
    json!({ "total": total, "items": items })
}

fn to_json<T: Serialize>(value: &T) -> Result<Value, String> {
    serde_json::to_value(value).map_err(|e| e.to_string())
}
