//! Who sends what: every message of the tree, the replies that leave it,
//! the wire form of what crosses nodes, and the process groups that find
//! actors on other nodes. Actor modules depend on this file, not on each
//! other's internals (as an Erlang module's API is its exported messages).

use crate::behaviour::index::{QueuePos, ShardPhase, ShardStats, ShardTop};
use crate::behaviour::{ProcessedPage, RobotsReport, WhyUnreachable};
use crate::hosts::NodeHosts;
use crate::outage::utc_time;
use crate::refusal::RefusalCode;
use crate::types::{HostRecord, IndexCounts, Job, Millis, OperationSpec, StoreCounts, UrlKey};
use ractor::message::{BoxedDowncastErr, SerializedMessage};
use ractor::{ActorCell, ActorRef, RpcReplyPort};
use ractor_cluster::RactorClusterMessage;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::time::Duration;

// --- process groups -----------------------------------------------------------

/// Process group of every node's pool.
pub(crate) const POOL_GROUP: &str = "web_crawler_pools";
/// Process group of the master (one per cluster).
pub(crate) const MASTER_GROUP: &str = "web_crawler_master";
/// The log target of the master's notices, its cores' included: the
/// binary logs it at info by default, and each line names it.
pub(crate) const MASTER_LOG: &str = "web_crawler_actors::master";
/// Process group of the control actor that consoles and scripts talk to.
pub(crate) const CONTROL_GROUP: &str = "web_crawler_control";
/// Process group of every node's indexer: the shards a query asks.
pub(crate) const SHARD_GROUP: &str = "web_crawler_shards";

/// The node name in a registered actor name `role@NODE`.
pub fn node_of(actor_name: &str) -> &str {
    actor_name
        .rsplit_once('@')
        .map_or(actor_name, |(_, node)| node)
}

/// Members of `group` to send to: remote ones, and the local one registered
/// as `local_name` (other apps may share this process).
pub(crate) fn members(group: &str, local_name: &str) -> Vec<ActorCell> {
    ractor::pg::get_members(&group.to_string())
        .into_iter()
        .filter(|c| !c.get_id().is_local() || c.get_name().as_deref() == Some(local_name))
        .collect()
}

/// The live pools: this node's (registered as `local_pool`) and every remote
/// one, by node name, sorted.
pub(crate) fn pools(local_pool: &str) -> Vec<(String, ActorRef<PoolMsg>)> {
    let mut pools: Vec<(String, ActorRef<PoolMsg>)> = members(POOL_GROUP, local_pool)
        .into_iter()
        .filter_map(|cell| {
            let node = node_of(&cell.get_name()?).to_string();
            Some((node, ActorRef::from(cell)))
        })
        .collect();
    pools.sort_by(|a, b| a.0.cmp(&b.0));
    pools.dedup_by(|a, b| a.0 == b.0);
    pools
}

/// The live nodes: those whose pool is in [`pools`].
pub(crate) fn live_nodes(local_pool: &str) -> Vec<String> {
    pools(local_pool)
        .into_iter()
        .map(|(node, _)| node)
        .collect()
}

/// The live pools as (node, the pool's actor id): a node restarted under
/// the same name has a pool of another id.
pub(crate) fn live_pools(local_pool: &str) -> Vec<(String, String)> {
    pools(local_pool)
        .into_iter()
        .map(|(node, pool)| (node, pool.get_id().to_string()))
        .collect()
}

/// Cast `msg()` to every live pool; returns their nodes.
pub(crate) fn cast_pools(local_pool: &str, msg: impl Fn() -> PoolMsg) -> Vec<String> {
    let pools = pools(local_pool);
    for (_, pool) in &pools {
        let _ = pool.cast(msg());
    }
    pools.into_iter().map(|(node, _)| node).collect()
}

/// Send to `node`'s pool; returns whether it was sent. A pool that cannot
/// be reached is noticed as gone on the master's tick, and what it held is
/// released.
pub(crate) fn send_to_pool(local_pool: &str, node: &str, msg: PoolMsg) -> bool {
    let sent = pools(local_pool)
        .into_iter()
        .find(|(n, _)| n == node)
        .is_some_and(|(_, pool)| pool.cast(msg).is_ok());
    if !sent {
        tracing::warn!(target: MASTER_LOG, %node, "pool unreachable; its leases will be released");
    }
    sent
}

/// How long a node's pool is waited for when every pool is asked
/// ([`ask_pools`]): one that has not answered by then is left out, so a
/// lost node never holds a console or a `status` up.
pub(crate) const POOL_ANSWER_MS: u64 = 2_000;

/// What every live pool does with its `limit` busiest hosts (0: only its
/// counts), asked all at once; and the nodes that did not answer within
/// [`POOL_ANSWER_MS`].
pub(crate) async fn ask_pools(local_pool: &str, limit: usize) -> (Vec<NodeHosts>, Vec<String>) {
    let mut calls = tokio::task::JoinSet::new();
    for (node, pool) in pools(local_pool) {
        calls.spawn(async move {
            let answer = ractor::call_t!(
                pool,
                |reply| PoolMsg::Hosts { limit, reply },
                POOL_ANSWER_MS
            );
            (node, answer.ok())
        });
    }
    let mut answers = Vec::new();
    let mut silent = Vec::new();
    for (node, answer) in calls.join_all().await {
        match answer {
            Some(answer) => answers.push(answer),
            None => silent.push(node),
        }
    }
    silent.sort();
    (answers, silent)
}

// --- wire form ----------------------------------------------------------------

/// The largest frame a node reads from a peer (ractor_cluster ends the
/// session on a larger one, which would cost the connection).
pub(crate) const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// The largest message a node sends: the frame, less room for its envelope.
/// A larger one is refused at the sender and never reaches the wire.
pub const MAX_MESSAGE_BYTES: usize = MAX_FRAME_BYTES - 64 * 1024;

/// The largest request a console or script sends (a URL, a search text: a
/// few KB at most), but for a batch of URLs ([`MAX_BATCH_BYTES`]).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// The largest batch of URLs one request queues (`ControlRequest::AddUrls`).
pub const MAX_BATCH_URLS: usize = 10_000;

/// The largest `ControlRequest::AddUrls` request, in bytes.
pub const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl ControlRequest {
    /// The most bytes this request may have on the wire.
    pub fn max_bytes(&self) -> usize {
        match self {
            Self::AddUrls { .. } => MAX_BATCH_BYTES,
            _ => MAX_REQUEST_BYTES,
        }
    }
}

/// Encode a message that crosses nodes.
fn to_wire<T: Serialize>(value: &T) -> Result<SerializedMessage, BoxedDowncastErr> {
    let args = serde_json::to_vec(value).map_err(|_| BoxedDowncastErr)?;
    if args.len() > MAX_MESSAGE_BYTES {
        tracing::error!(
            bytes = args.len(),
            limit = MAX_MESSAGE_BYTES,
            "a cluster message over the size bound is not sent"
        );
        return Err(BoxedDowncastErr);
    }
    Ok(SerializedMessage::Cast {
        variant: String::new(),
        args,
        metadata: None,
    })
}

/// Decode a message that crossed nodes.
fn from_wire<T: DeserializeOwned>(msg: SerializedMessage) -> Result<T, BoxedDowncastErr> {
    match msg {
        SerializedMessage::Cast { args, .. } => {
            serde_json::from_slice(&args).map_err(|_| BoxedDowncastErr)
        }
        _ => Err(BoxedDowncastErr),
    }
}

/// Encode a call that crosses nodes: its arguments, and its reply port as
/// ractor_cluster carries one (the answer comes back as JSON).
fn call_to_wire<A: Serialize, R: DeserializeOwned + Send + 'static>(
    variant: &str,
    args: &A,
    reply: RpcReplyPort<R>,
) -> Result<SerializedMessage, BoxedDowncastErr> {
    Ok(SerializedMessage::Call {
        variant: variant.to_string(),
        args: serde_json::to_vec(args).map_err(|_| BoxedDowncastErr)?,
        reply: reply_to_wire(reply),
        metadata: None,
    })
}

/// Decode a call that crossed nodes as `variant` ([`call_to_wire`]) with
/// `make`, from its arguments and a reply port that answers the caller.
fn call_from_wire<M, A: DeserializeOwned, R: Serialize + Send + 'static>(
    msg: SerializedMessage,
    variant: &str,
    make: impl FnOnce(A, RpcReplyPort<R>) -> M,
) -> Result<M, BoxedDowncastErr> {
    match msg {
        SerializedMessage::Call {
            variant: v,
            args,
            reply,
            ..
        } if v == variant => Ok(make(
            serde_json::from_slice(&args).map_err(|_| BoxedDowncastErr)?,
            reply_from_wire(reply),
        )),
        _ => Err(BoxedDowncastErr),
    }
}

/// A reply port whose answer, if one comes within `timeout`, goes to
/// `deliver` (on a task of its own). Unanswered, `deliver` is dropped
/// uncalled, and with it whatever port it would have answered.
fn forward<A: Send + 'static>(
    timeout: Option<Duration>,
    deliver: impl FnOnce(A) + Send + 'static,
) -> RpcReplyPort<A> {
    let (tx, rx) = ractor::concurrency::oneshot::<A>();
    tokio::spawn(async move {
        let answer = match timeout {
            Some(t) => tokio::time::timeout(t, rx).await.ok().and_then(Result::ok),
            None => rx.await.ok(),
        };
        if let Some(answer) = answer {
            deliver(answer);
        }
    });
    match timeout {
        Some(t) => (tx, t).into(),
        None => tx.into(),
    }
}

/// The caller's side of a call to another node: the reply comes back as
/// JSON bytes and is decoded for `typed`. A reply that cannot be read, or
/// none before the call's timeout, closes `typed`: the caller's call fails
/// rather than waits.
fn reply_to_wire<T: DeserializeOwned + Send + 'static>(
    typed: RpcReplyPort<T>,
) -> RpcReplyPort<Vec<u8>> {
    forward(typed.get_timeout(), move |bytes: Vec<u8>| {
        if let Ok(reply) = serde_json::from_slice(&bytes) {
            let _ = typed.send(reply);
        }
    })
}

/// The answering side of a call from another node: what the actor replies
/// goes back as JSON bytes on `wire` (one over the size bound is not sent,
/// and the caller's call fails).
fn reply_from_wire<T: Serialize + Send + 'static>(wire: RpcReplyPort<Vec<u8>>) -> RpcReplyPort<T> {
    forward(
        wire.get_timeout(),
        move |reply: T| match serde_json::to_vec(&reply) {
            Ok(bytes) if bytes.len() <= MAX_MESSAGE_BYTES => {
                let _ = wire.send(bytes);
            }
            Ok(bytes) => tracing::error!(
                bytes = bytes.len(),
                limit = MAX_MESSAGE_BYTES,
                "a reply over the size bound is not sent"
            ),
            Err(e) => tracing::error!(error = %e, "a reply that cannot be encoded"),
        },
    )
}

// --- slave → master -----------------------------------------------------------

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
    /// The host's robots.txt could not be had: nothing of it may be
    /// fetched (RFC 9309) until it is asked again, at `retry_at`.
    RobotsUnreachable {
        job: Job,
        retry_at: Millis,
        #[serde(default)]
        why: WhyUnreachable,
    },
}

impl SlaveReport {
    pub fn job(&self) -> &Job {
        match self {
            SlaveReport::Page { job, .. }
            | SlaveReport::Failed { job, .. }
            | SlaveReport::RobotsBlocked { job }
            | SlaveReport::RobotsUnreachable { job, .. } => job,
        }
    }
    pub fn job_mut(&mut self) -> &mut Job {
        match self {
            SlaveReport::Page { job, .. }
            | SlaveReport::Failed { job, .. }
            | SlaveReport::RobotsBlocked { job }
            | SlaveReport::RobotsUnreachable { job, .. } => job,
        }
    }
}

// --- replies that leave the tree ------------------------------------------------

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
    /// Its index shard's pages, queued and committed (in `status`, when
    /// the node keeps one and answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexCounts>,
}

/// A snapshot for `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub node: String,
    #[serde(flatten)]
    pub store: StoreCounts,
    /// URLs claimed from the store and not yet written back: queued at a
    /// pool, being fetched, or fetched and not yet written. Not requests:
    /// those are `requests_in_flight`.
    pub in_flight: u64,
    /// Requests running now on the live pools, robots.txt included: at
    /// most `per_host` for any one host. Pools that did not answer within
    /// a couple of seconds are not counted.
    #[serde(default)]
    pub requests_in_flight: u64,
    /// Pages fetched since the app started (across master restarts).
    pub fetched_this_run: u64,
    pub errors_this_run: u64,
    /// The run's average: pages fetched this run over `elapsed_ms`. It
    /// falls slowly while the crawl is idle; the rate now is
    /// `recent_pages_per_sec`.
    pub pages_per_sec: f64,
    /// Pages per second over the last 10 s ([`crate::rate::RECENT_MS`]):
    /// 0 soon after fetching stops.
    #[serde(default)]
    pub recent_pages_per_sec: f64,
    pub elapsed_ms: u64,
    pub paused: bool,
    pub idle: Option<IdleReason>,
    pub master_restarts: u32,
    /// The live pools, one per node.
    pub nodes: Vec<NodeInfo>,
    /// The most URLs the master holds claimed at once (its window, over
    /// every live node), and per host. They follow `set concurrency` and
    /// `set per-host`.
    #[serde(default)]
    #[serde(rename = "window")]
    pub claim_window: u64,
    #[serde(default)]
    pub per_host_window: u64,
    /// When the store became unavailable (epoch ms), while the master waits
    /// for it; the store's counts are then the last ones read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_unreachable_since: Option<Millis>,
    /// Why the store could not be asked, in words: while it is unavailable,
    /// or when these counts could not be read fresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_error: Option<String>,
    /// Pages queued for the full-text index and pages committed to it,
    /// over every node's shard that answered (`None`: no node keeps one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexCounts>,
    /// Nodes that left the cluster for good whose pages are being handed
    /// over to their hosts' new owners.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handing_over: Vec<String>,
    /// Pages those nodes fetched that are not searchable again yet: each
    /// waits to be fetched again by its host's new owner (and indexed in
    /// that node's shard). As the store last said, at most a second ago.
    #[serde(default)]
    pub pages_awaiting_handover: u64,
}

// --- the master -----------------------------------------------------------------

/// A URL `add_url` took: as queued (normalized), and whether this ask
/// queued it or found it waiting already.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Queued {
    pub url: String,
    /// It was waiting already (pending, or being fetched) when the ask was
    /// written: nothing new was queued; its credit (and an interval of its
    /// own) went to the URL waiting.
    pub already_queued: bool,
}

/// Why the master did not queue a URL given to `add_url`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AddUrlError {
    /// The operation is unknown or its arguments are wrong.
    #[error(transparent)]
    Operation(#[from] crate::behaviour::OperationError),
    /// An interval of its own asked of a node that checks nothing again.
    #[error(
        "{url}: this node checks nothing again (a one-shot crawl); \
         watch URLs with a service (`web_crawler start`)"
    )]
    NotWatching { url: String },
    #[error("{url}: {source}")]
    Interval {
        url: String,
        source: crate::availability::IntervalTooShort,
    },
    /// The link policy refused it (not a URL, out of scope, filtered...).
    #[error("{}", .rejection.of_url(.url))]
    Rejected {
        url: String,
        rejection: crate::behaviour::Rejection,
    },
    /// The crawl's page budget is spent: nothing more is fetched.
    #[error("{url}: the crawl's page budget (--max-pages {max}) is spent; nothing more is fetched")]
    OverBudget { url: String, max: u64 },
    /// A plain `add_url` (neither `again` nor an interval of its own) of a
    /// URL processed with this operation and not due again: only its
    /// referral is recorded.
    #[error(
        "{url} was already processed at {} ({}): nothing queued; \
         add it with `again` to fetch it again (console: add_url URL again; \
         CLI: add-url --again URL)",
        utc_time(*.processed_at),
        .http_status.map_or_else(|| "no answer".to_string(), |c| format!("HTTP {c}"))
    )]
    AlreadyKnown {
        url: String,
        processed_at: Millis,
        http_status: Option<u16>,
    },
}

impl AddUrlError {
    /// The refusal's stable code.
    pub fn code(&self) -> RefusalCode {
        use crate::behaviour::Rejection;
        match self {
            Self::Operation(_) => RefusalCode::BadOperation,
            Self::NotWatching { .. } | Self::Interval { .. } => RefusalCode::BadInterval,
            Self::OverBudget { .. } => RefusalCode::OverBudget,
            Self::AlreadyKnown { .. } => RefusalCode::AlreadyKnown,
            Self::Rejected { rejection, .. } => match rejection {
                Rejection::Invalid(_) => RefusalCode::InvalidUrl,
                Rejection::OutOfScope => RefusalCode::OutOfScope,
                Rejection::Filtered => RefusalCode::Filtered,
                Rejection::Trap(_) => RefusalCode::Trap,
                Rejection::TooDeep => RefusalCode::TooDeep,
            },
        }
    }
}

/// The master's messages. Those from pools and slaves cross nodes, as
/// their serde form ([`to_wire`]); a `#[serde(skip)]` one never leaves its
/// node (a call, whose reply port cannot travel, or the master's own).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum MasterMsg {
    /// The paper's `add_url(URL, Operation)`; replies with the admitted URL
    /// once it is written, and whether it was waiting already.
    #[serde(skip)]
    AddUrl {
        url: String,
        operation: OperationSpec,
        /// Queue it even if it was processed already.
        again: bool,
        /// Watch it at this interval of its own (ms; queued at once if it
        /// was processed).
        every_ms: Option<Millis>,
        reply: RpcReplyPort<Result<Queued, AddUrlError>>,
    },
    /// `add_url` of many URLs at once (with one operation, not watched):
    /// replies, once the admitted ones are written, with each URL's
    /// outcome in order.
    #[serde(skip)]
    AddUrls {
        urls: Vec<String>,
        operation: OperationSpec,
        again: bool,
        reply: RpcReplyPort<Vec<Result<Queued, AddUrlError>>>,
    },
    /// `url` as `add_url` would queue it (normalized), if it would.
    #[serde(skip)]
    Normalize {
        url: String,
        reply: RpcReplyPort<Option<String>>,
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
    /// A pool's answer to `PoolMsg::Withdraw`: the jobs it had not started.
    Withdrawn(Vec<Job>),
    /// A pool's answer to `PoolMsg::Release`, once nothing of `host` runs
    /// there: its queued jobs, for the node it moves to, which waits
    /// `wait_ms` before its first request.
    Released {
        node: String,
        host: String,
        jobs: Vec<Job>,
        wait_ms: u64,
    },
    /// A host answered a path that cannot exist (`probe_url`) with a page
    /// whose text has `simhash`: its soft 404.
    Soft404 {
        probe_url: String,
        simhash: crate::traps::PageSimhash,
    },
    /// A host's sitemaps, found when its robots.txt was read: queued as
    /// links of `referrer` (a URL of the host), so scope and filters apply.
    Sitemaps {
        referrer: Job,
        urls: Vec<String>,
    },
    #[serde(skip)]
    Status(RpcReplyPort<Status>),
    /// Reply when the crawl has nothing more to do.
    #[serde(skip)]
    WaitIdle(RpcReplyPort<IdleReason>),
    #[serde(skip)]
    Pause(bool),
    /// `node`'s pool was restarted: everything it held is gone. From a
    /// worker node's supervisor too, so the master does not hold its URLs
    /// for a pool that forgot them.
    PoolRestarted {
        node: String,
    },
    /// An operator stopped `node` (`node stop`, from this node's control
    /// actor): once its pool is gone it has left for good, and its pages
    /// are handed over ([`crate::departures`]).
    #[serde(skip)]
    NodeStopping {
        node: String,
    },
    /// An operator reopens a trap family (from this node's control actor):
    /// the guard lifts it for good and the store releases its URLs; the
    /// answer is how many (`None`: the store knows no family of that name).
    #[serde(skip)]
    ReopenTrap {
        family: String,
        reply: RpcReplyPort<Option<u64>>,
    },
    /// Graceful stop: stop claiming, let running slaves finish (up to the
    /// timeout), write everything, return unstarted URLs to pending.
    #[serde(skip)]
    Drain {
        timeout: Duration,
        reply: RpcReplyPort<()>,
    },
    /// Internal: the store cycle running on its own task finished.
    #[serde(skip)]
    CycleDone,
    /// Internal: write the batch collected so far (sent to self
    /// `flush_every` after the first result of a batch).
    #[serde(skip)]
    Flush,
    /// Internal: timers, leases, nodes, recovery.
    #[serde(skip)]
    Tick,
}

impl ractor::Message for MasterMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        to_wire(&self)
    }

    fn deserialize(msg: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        from_wire(msg)
    }
}

/// Send a message to the master (as the paper's
/// `gen_server:cast(web_crawler_master, ...)`): by its registered name on
/// this node, else through its process group on another node. A restarted
/// master gets it, as it takes the name and the group.
pub(crate) fn cast(master_name: &str, msg: MasterMsg) {
    let master = ActorRef::<MasterMsg>::where_is(master_name)
        .or_else(|| remote_master().map(ActorRef::from));
    match master {
        Some(master) => {
            if let Err(e) = master.cast(msg) {
                tracing::debug!(error = %e, "master gone; its successor recovers the lease");
            }
        }
        None => tracing::debug!("no master reachable; its successor recovers the lease"),
    }
}

/// Whether a master on another node is in the master group (what a worker
/// node's pool sends to).
pub(crate) fn master_reachable() -> bool {
    remote_master().is_some()
}

/// A master on another node, from the master group.
fn remote_master() -> Option<ractor::ActorCell> {
    ractor::pg::get_members(&MASTER_GROUP.to_string())
        .into_iter()
        .find(|c| !c.get_id().is_local())
}

pub(crate) fn report(master_name: &str, report: SlaveReport) {
    cast(master_name, MasterMsg::Report(report));
}

// --- the pool -------------------------------------------------------------------

/// A pool's messages. Those from the master and the control actor cross
/// nodes, as their serde form ([`to_wire`]), and so does `Hosts`, a call
/// (by hand: its reply port travels as ractor_cluster's); a
/// `#[serde(skip)]` one never leaves its node.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum PoolMsg {
    /// Claimed URLs from the master (possibly on another node).
    Dispatch(Vec<Job>),
    /// A (re)started master asks what this pool holds: the pool answers with
    /// `MasterMsg::Adopt`.
    Resync,
    /// The master no longer wants these fetched (a trap closed on them):
    /// hand back those not started yet (`MasterMsg::Withdrawn`).
    Withdraw(Vec<UrlKey>),
    /// Stop starting slaves; hand the queued jobs back (`MasterMsg::Unstarted`);
    /// running ones finish.
    Drain,
    /// These hosts move to a node that joined: start nothing more of them,
    /// and hand each back (`MasterMsg::Released`) once nothing of it runs.
    Release(Vec<String>),
    /// A host moved here from another node, with its queued jobs: its first
    /// request waits `wait_ms`, what was left of the other node's delay.
    Handover {
        host: String,
        jobs: Vec<Job>,
        wait_ms: u64,
    },
    /// From a robots slave on this node, with what the host answered for a
    /// path that cannot exist if that was a page (probe URL, simhash).
    #[serde(skip)]
    RobotsFetched {
        host: String,
        report: Box<RobotsReport>,
        soft_404: Option<(String, crate::traps::PageSimhash)>,
        /// URLs to queue from the host's sitemaps.
        sitemaps: Vec<String>,
    },
    /// From a page slave on this node: its report, which the pool forwards
    /// to the master. Through the pool, so that a restarted master's
    /// `Resync` and the report reach it in the order the pool saw them: a
    /// URL is either still held (adopted, its report follows) or already
    /// reported (not adopted, released if the report was lost).
    #[serde(skip)]
    Report(Box<SlaveReport>),
    /// Internal: a politeness delay ran out.
    #[serde(skip)]
    Wake,
    /// On a worker node: the master went away. What it handed over and is
    /// not started yet is dropped; its successor hands those URLs out again.
    #[serde(skip)]
    MasterLost,
    /// An operator changed a setting (console `set`).
    Set(Setting),
    /// An operator paused or resumed one host (console `pause HOST`).
    PauseHost { host: String, paused: bool },
    /// An operator stopped this node (console `node stop NAME`): its tree
    /// stops; the master returns what it held to pending.
    StopNode,
    /// An operator's `hosts`: what the pool does with its `limit` busiest
    /// hosts now (`HostScheduler::snapshot`). A call, the only one a pool
    /// answers, so the control actor can wait for each node a short while.
    #[serde(skip)]
    Hosts {
        limit: usize,
        reply: RpcReplyPort<NodeHosts>,
    },
}

/// The wire variant of `PoolMsg::Hosts`, a call (the others are casts).
const HOSTS_CALL: &str = "hosts";

/// A setting that can change while the crawl runs; every live pool takes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Setting {
    /// Minimum delay between requests to one host, in milliseconds.
    DelayMs(u64),
    /// Requests in flight per host.
    PerHost(usize),
    /// Slaves running at once on each node.
    Concurrency(usize),
}

impl ractor::Message for PoolMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        match self {
            PoolMsg::Hosts { limit, reply } => call_to_wire(HOSTS_CALL, &limit, reply),
            cast => to_wire(&cast),
        }
    }

    fn deserialize(msg: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        match msg {
            SerializedMessage::Call { .. } => call_from_wire(msg, HOSTS_CALL, |limit, reply| {
                PoolMsg::Hosts { limit, reply }
            }),
            cast => from_wire(cast),
        }
    }
}

// --- the indexer ----------------------------------------------------------------

/// An indexer's messages. `Forget` crosses nodes as its serde form
/// ([`to_wire`]) and `Shard`, a call, by hand; a `#[serde(skip)]` one
/// never leaves its node.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum IndexerMsg {
    /// The master wrote pages to the index queue.
    #[serde(skip)]
    Queued,
    /// Commit if a commit is due.
    #[serde(skip)]
    Tick,
    /// A read of the queue is done.
    #[serde(skip)]
    Read(Result<ReadChunk, String>),
    /// A commit is done: how many pages it made durable.
    #[serde(skip)]
    Committed(Result<u64, String>),
    /// Answer once everything queued is indexed and committed.
    #[serde(skip)]
    CatchUp(RpcReplyPort<()>),
    /// Remove these pages from the shard: another shard holds a newer
    /// copy of each (its host moved), or the master found them content
    /// duplicates. From any node.
    Forget(Vec<String>),
    /// One step of a query across the cluster's shards, from any node (a
    /// call).
    #[serde(skip)]
    Shard {
        request: ShardRequest,
        reply: RpcReplyPort<Result<ShardAnswer, String>>,
    },
}

/// What one read of an indexer's queue did: how many entries it read, how
/// many pages it added, and where the next read starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReadChunk {
    pub(crate) entries: usize,
    pub(crate) pages: u64,
    pub(crate) next: QueuePos,
}

/// One step of a query asked of a shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ShardRequest {
    pub(crate) query: String,
    pub(crate) limit: usize,
    pub(crate) step: ShardStep,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum ShardStep {
    /// The shard's statistics for a phase, given what the earlier ones
    /// gathered.
    Stats {
        phase: ShardPhase,
        known: ShardStats,
    },
    /// The shard's best pages, given every phase's statistics.
    Top { stats: ShardStats },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum ShardAnswer {
    Stats(ShardStats),
    Top(ShardTop),
}

/// The wire variant of `IndexerMsg::Shard`.
const SHARD_CALL: &str = "shard";

impl ractor::Message for IndexerMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        match self {
            IndexerMsg::Shard { request, reply } => call_to_wire(SHARD_CALL, &request, reply),
            cast => to_wire(&cast),
        }
    }

    fn deserialize(msg: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        match msg {
            SerializedMessage::Call { .. } => call_from_wire(msg, SHARD_CALL, |request, reply| {
                IndexerMsg::Shard { request, reply }
            }),
            cast => from_wire(cast),
        }
    }
}

/// The live shards: every node's indexer in [`SHARD_GROUP`] (this node's
/// registered as `local_indexer`), by node name, sorted.
pub(crate) fn shards(local_indexer: &str) -> Vec<(String, ActorRef<IndexerMsg>)> {
    let mut shards: Vec<(String, ActorRef<IndexerMsg>)> = members(SHARD_GROUP, local_indexer)
        .into_iter()
        .filter_map(|cell| {
            let node = node_of(&cell.get_name()?).to_string();
            Some((node, ActorRef::from(cell)))
        })
        .collect();
    shards.sort_by(|a, b| a.0.cmp(&b.0));
    shards.dedup_by(|a, b| a.0 == b.0);
    shards
}

// --- the supervisor -------------------------------------------------------------

/// The supervisor's children, in start order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ChildRole {
    Pool,
    Master,
    Control,
    Indexer,
}

/// One row of `which_children`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildInfo {
    pub name: String,
    pub role: ChildRole,
    pub restarts: u32,
}

#[derive(Debug)]
pub(crate) enum SupMsg {
    /// Like `supervisor:which_children/1`.
    WhichChildren(RpcReplyPort<Vec<ChildInfo>>),
    /// Stop the children (master first, so it writes its last batch) and then
    /// the supervisor itself, without restarting anything.
    Shutdown(RpcReplyPort<()>),
    /// The master gave up on its store: stop the tree with this reason.
    StoreFailed(crate::outage::StoreFailure),
    /// An operator's restart of a child (console `restart master`): it is
    /// killed and started again, and, unlike a crash, does not count
    /// against the restart intensity. Replies once its successor runs.
    Restart(ChildRole, RpcReplyPort<bool>),
}

impl ractor::Message for SupMsg {}

// --- consoles and scripts -------------------------------------------------------

/// A request from a console or script.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ControlRequest {
    Status,
    /// The live nodes: load and hosts owned.
    Nodes,
    /// Like `supervisor:which_children/1`, with the nodes' pools.
    Tree,
    /// Like `sys:get_state/1`: a readable summary of one actor.
    State {
        actor: String,
    },
    /// Queue a URL. One already processed (with this operation, and not
    /// due again) is refused with when, unless `again`: then it is fetched
    /// again. With `every_ms` the URL is watched at that interval of its
    /// own (at least [`crate::availability::MIN_CHECK_EVERY_MS`]); a processed
    /// URL is then fetched again at once, and every `every_ms` after.
    AddUrl {
        url: String,
        operation: OperationSpec,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        again: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        every_ms: Option<Millis>,
    },
    /// Queue many URLs with one operation (at most [`MAX_BATCH_URLS`]):
    /// each is admitted or refused on its own, by the rules of `AddUrl`.
    /// Answered as `{"accepted": N, "refused": M, "results": [one
    /// `UrlOutcome` a URL, in order]}`.
    AddUrls {
        urls: Vec<String>,
        operation: OperationSpec,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        again: bool,
    },
    /// A processed page's stored record and its fetch history (`url` as
    /// given; it is normalized as `add_url` would).
    Page {
        url: String,
    },
    Pending {
        limit: usize,
    },
    Processed {
        limit: usize,
    },
    Failed {
        limit: usize,
    },
    Pause,
    Resume,
    /// Change a setting on every live node (`set KEY VALUE`).
    Set {
        setting: Setting,
    },
    /// Pause or resume one host (`host[:port]`) on every live node.
    PauseHost {
        host: String,
        paused: bool,
    },
    /// Stop a worker node: its process ends with exit code 0.
    StopNode {
        node: String,
    },
    /// Stop the master's node gracefully, as SIGTERM does (the console's
    /// `shutdown`, confirmed): in-flight pages finish or go back to
    /// pending, and its process ends with exit code 0.
    Shutdown,
    /// Kill the master; the supervisor restarts it.
    RestartMaster,
    /// Full-text search over the pages indexed: the `limit` best after
    /// the first `offset`.
    Search {
        query: String,
        limit: usize,
        #[serde(default, skip_serializing_if = "is_zero")]
        offset: usize,
    },
    /// The paper's `search_results`: where `search_text` found its text
    /// (every text with `None`). Answered as `{"total": N, "items": [the
    /// first `limit` by URL]}`. The wire keeps the paper's name.
    #[serde(rename = "search_results")]
    TextMatchHits {
        text: Option<String>,
        limit: usize,
    },
    /// The hosts: robots.txt status, crawl delay, sitemaps, pages processed
    /// (`HostSummary`), and what the pool holding each does with it now
    /// (`LiveHost`: queue, fetches, robots.txt, backoff). Answered as a
    /// `HostListing`: `{"total", "busy", "items": [the first `limit`, the
    /// hosts a pool holds first, busiest first, then by host],
    /// "silent_nodes"}`.
    Hosts {
        limit: usize,
    },
    /// Watched URLs' availability over their `fetch_history` (only `host`'s
    /// with one): checks, uptime, last failure, response times
    /// (`availability::Availability`), as `{"total": N, "items": [...]}` by URL.
    Availability {
        host: Option<String>,
        limit: usize,
    },
    /// Watched URLs' changes (down, up, another body) from their history
    /// (`availability::StatusEvent`), newest first, as `{"total", "items"}`.
    Changes {
        host: Option<String>,
        limit: usize,
    },
    /// The families the trap defence closed (`TrapFamily`: host, name,
    /// rule, when, pages judged, URLs refused and a few of them), by host
    /// then name, as `{"total", "items": [the first `limit`]}`.
    Traps {
        limit: usize,
    },
    /// Reopen a trap family: it is never closed again on this store, and
    /// the URLs it refused go back to pending (`TrapReopened`).
    ReopenTrap {
        family: String,
    },
}

/// The wire message: one request, one reply, both JSON text
/// (`{"ok": ...}` or `{"error": "..."}`).
#[derive(RactorClusterMessage)]
pub(crate) enum ControlMsg {
    #[rpc]
    Request(String, RpcReplyPort<String>),
}

impl std::fmt::Debug for ControlMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlMsg::Request(req, _) => f.debug_tuple("Request").field(req).finish(),
        }
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_over_the_bound_is_refused_at_the_sender() {
        let job = Job::fixture("h", &format!("/{}", "x".repeat(MAX_MESSAGE_BYTES)), 0);
        assert!(ractor::Message::serialize(MasterMsg::Unstarted(vec![job])).is_err());
    }

    #[test]
    fn text_match_hits_keep_the_papers_name_on_the_wire() {
        let ask = ControlRequest::TextMatchHits {
            text: Some("rye".into()),
            limit: 5,
        };
        let wire = serde_json::to_value(&ask).unwrap();
        assert_eq!(wire["cmd"], "search_results");
        assert_eq!(serde_json::from_value::<ControlRequest>(wire).unwrap(), ask);
    }

    #[test]
    fn node_names_come_from_actor_names() {
        assert_eq!(node_of("web_crawler_pool@worker-1"), "worker-1");
        assert_eq!(node_of("plain"), "plain");
    }

    #[test]
    fn only_cross_node_variants_serialize() {
        let msg = MasterMsg::Unstarted(Vec::new());
        let wire = ractor::Message::serialize(msg).expect("crosses nodes");
        assert!(matches!(
            <MasterMsg as ractor::Message>::deserialize(wire),
            Ok(MasterMsg::Unstarted(jobs)) if jobs.is_empty()
        ));
        assert!(ractor::Message::serialize(MasterMsg::Tick).is_err());
        assert!(ractor::Message::serialize(PoolMsg::Wake).is_err());
        let released = MasterMsg::Released {
            node: "w1".into(),
            host: "h".into(),
            jobs: Vec::new(),
            wait_ms: 120,
        };
        let wire = ractor::Message::serialize(released).expect("crosses nodes");
        assert!(matches!(
            <MasterMsg as ractor::Message>::deserialize(wire),
            Ok(MasterMsg::Released { wait_ms: 120, .. })
        ));
        // A worker's pool restarted: its master must hear which node's.
        let restarted = MasterMsg::PoolRestarted { node: "w1".into() };
        let wire = ractor::Message::serialize(restarted).expect("crosses nodes");
        assert!(matches!(
            <MasterMsg as ractor::Message>::deserialize(wire),
            Ok(MasterMsg::PoolRestarted { node }) if node == "w1"
        ));
        let release = PoolMsg::Release(vec!["h".into()]);
        let wire = ractor::Message::serialize(release).expect("crosses nodes");
        assert!(matches!(
            <PoolMsg as ractor::Message>::deserialize(wire),
            Ok(PoolMsg::Release(hosts)) if hosts == ["h"]
        ));
        let wire = ractor::Message::serialize(PoolMsg::Resync).expect("crosses nodes");
        assert!(matches!(
            <PoolMsg as ractor::Message>::deserialize(wire),
            Ok(PoolMsg::Resync)
        ));
        let set = PoolMsg::Set(Setting::PerHost(3));
        let wire = ractor::Message::serialize(set).expect("crosses nodes");
        assert!(matches!(
            <PoolMsg as ractor::Message>::deserialize(wire),
            Ok(PoolMsg::Set(Setting::PerHost(3)))
        ));
        let forget = IndexerMsg::Forget(vec!["http://h/a".into()]);
        let wire = ractor::Message::serialize(forget).expect("crosses nodes");
        assert!(matches!(
            <IndexerMsg as ractor::Message>::deserialize(wire),
            Ok(IndexerMsg::Forget(urls)) if urls == ["http://h/a"]
        ));
        assert!(ractor::Message::serialize(IndexerMsg::Tick).is_err());
        // A cast's bytes are not taken for another actor's message.
        let wire = ractor::Message::serialize(PoolMsg::Resync).unwrap();
        assert!(<MasterMsg as ractor::Message>::deserialize(wire).is_err());
    }

    #[tokio::test]
    async fn a_hosts_call_crosses_nodes_and_its_answer_comes_back() {
        let (tx, rx) = ractor::concurrency::oneshot::<NodeHosts>();
        let port = RpcReplyPort::from((tx, Duration::from_secs(5)));
        let wire = ractor::Message::serialize(PoolMsg::Hosts {
            limit: 7,
            reply: port,
        })
        .expect("crosses nodes");
        assert!(matches!(&wire, SerializedMessage::Call { variant, .. } if variant == HOSTS_CALL));
        let Ok(PoolMsg::Hosts { limit: 7, reply }) =
            <PoolMsg as ractor::Message>::deserialize(wire)
        else {
            panic!("a hosts call with its limit");
        };
        let answer = NodeHosts {
            node: "w1".into(),
            busy: 1,
            running: 1,
            hosts: vec![crate::hosts::LiveHost {
                host: "h".into(),
                queued: 2,
                ..Default::default()
            }],
            index: Some(IndexCounts {
                indexed: 3,
                queued: 5,
            }),
        };
        reply.send(answer.clone()).unwrap();
        assert_eq!(rx.await.unwrap(), answer);
        // A pool that drops the call without answering fails the caller at once.
        let (tx, rx) = ractor::concurrency::oneshot::<NodeHosts>();
        let wire = ractor::Message::serialize(PoolMsg::Hosts {
            limit: 1,
            reply: RpcReplyPort::from((tx, Duration::from_secs(5))),
        })
        .unwrap();
        drop(<PoolMsg as ractor::Message>::deserialize(wire));
        assert!(
            tokio::time::timeout(Duration::from_secs(1), rx)
                .await
                .unwrap()
                .is_err()
        );
    }
}
