//! What a control request answers: a [`ControlReply`], one type per
//! request, or a [`ControlError`]. Both sides use these types (the control
//! actor builds them, a console renders them), so a renamed field is a
//! compile error rather than a `?` on the screen. On the wire a reply is
//! `{"ok": REPLY}` or `{"error": "one line"}`, REPLY being the variant's
//! own JSON (as `--json` prints it).

use crate::availability::{Availability, FetchHistory, IntervalTooShort, StatusEvent};
use crate::behaviour::StoreError;
use crate::behaviour::index::SearchAnswer;
use crate::cluster::ClusterError;
use crate::config::CrawlConfig;
use crate::hosts::HostListing;
use crate::protocol::{
    AddUrlError, ChildInfo, ChildRole, ControlRequest, NodeInfo, Queued, Setting, Status,
};
use crate::refusal::{Refusal, RefusalCode};
use crate::types::{PendingUrl, ProcessedUrl, TextMatchHit, TrapFamily};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A control request's answer; which variant is the request's.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ControlReply {
    Status(Status),
    Nodes(Vec<NodeInfo>),
    Tree(Tree),
    State(ActorState),
    /// `add_url`: the URL as queued (normalized), and whether it was
    /// waiting already.
    Queued(Queued),
    Pending(Vec<PendingUrl>),
    /// `processed` and `failed`, newest first.
    Pages(Vec<ProcessedUrl>),
    Paused(Paused),
    SettingChanged(SettingChanged),
    HostPaused(HostPaused),
    NodeStopping(NodeStopping),
    Restarted(Restarted),
    Search(SearchAnswer),
    TextMatchHits(Listing<TextMatchHit>),
    Availability(Listing<Availability>),
    Changes(Listing<StatusEvent>),
    Hosts(HostListing),
    Traps(Listing<TrapFamily>),
    TrapReopened(TrapReopened),
    /// `add_urls`: each URL's outcome.
    Added(Added),
    /// `page`: a processed page and its fetches.
    Page(Box<PageView>),
}

impl ControlReply {
    /// Read the reply to `request` from its JSON: the request says which
    /// variant it is (the JSON carries no tag, so `--json` prints the reply
    /// alone).
    pub fn decode(request: &ControlRequest, value: Value) -> Result<Self, serde_json::Error> {
        fn as_<T: DeserializeOwned>(v: Value) -> Result<T, serde_json::Error> {
            serde_json::from_value(v)
        }
        Ok(match request {
            ControlRequest::Status => Self::Status(as_(value)?),
            ControlRequest::Nodes => Self::Nodes(as_(value)?),
            ControlRequest::Tree => Self::Tree(as_(value)?),
            ControlRequest::State { actor } => Self::State(match actor.as_str() {
                "master" => ActorState::Master(as_(value)?),
                "sup" => ActorState::Sup(as_(value)?),
                _ => ActorState::Config(as_(value)?),
            }),
            ControlRequest::AddUrl { .. } => Self::Queued(as_(value)?),
            ControlRequest::Pending { .. } => Self::Pending(as_(value)?),
            ControlRequest::Processed { .. } | ControlRequest::Failed { .. } => {
                Self::Pages(as_(value)?)
            }
            ControlRequest::Pause | ControlRequest::Resume => Self::Paused(as_(value)?),
            ControlRequest::Set { .. } => Self::SettingChanged(as_(value)?),
            ControlRequest::PauseHost { .. } => Self::HostPaused(as_(value)?),
            ControlRequest::StopNode { .. } | ControlRequest::Shutdown => {
                Self::NodeStopping(as_(value)?)
            }
            ControlRequest::RestartMaster => Self::Restarted(as_(value)?),
            ControlRequest::Search { .. } => Self::Search(as_(value)?),
            ControlRequest::TextMatchHits { .. } => Self::TextMatchHits(as_(value)?),
            ControlRequest::Availability { .. } => Self::Availability(as_(value)?),
            ControlRequest::Changes { .. } => Self::Changes(as_(value)?),
            ControlRequest::Hosts { .. } => Self::Hosts(as_(value)?),
            ControlRequest::Traps { .. } => Self::Traps(as_(value)?),
            ControlRequest::ReopenTrap { .. } => Self::TrapReopened(as_(value)?),
            ControlRequest::AddUrls { .. } => Self::Added(as_(value)?),
            ControlRequest::Page { .. } => Self::Page(as_(value)?),
        })
    }
}

/// `state ACTOR`: a readable summary of one actor (`sys:get_state/1`).
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ActorState {
    Master(Box<Status>),
    Sup(SupSummary),
    /// The node's settings as they are now, `set` included.
    Config(Box<CrawlConfig>),
}

/// OTP's restart strategies; the supervisor runs `one_for_one`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum RestartStrategy {
    #[serde(rename = "one_for_one")]
    OneForOne,
}

impl std::fmt::Display for RestartStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::OneForOne => "one_for_one",
        })
    }
}

/// The supervisor's restart intensity, in whole seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intensity {
    pub max_restarts: u32,
    pub period_s: u64,
}

/// `state sup`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupSummary {
    pub name: String,
    pub strategy: RestartStrategy,
    #[serde(flatten)]
    pub intensity: Intensity,
}

/// `tree`: the supervisor, its children, and the pools of other nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tree {
    pub sup: String,
    pub node: String,
    pub strategy: RestartStrategy,
    pub intensity: Intensity,
    pub children: Vec<ChildInfo>,
    /// Every live pool, this node's too.
    pub pools: Vec<PoolInfo>,
}

/// A live pool of `tree`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolInfo {
    pub name: String,
    pub role: ChildRole,
    pub node: String,
}

/// `pause` and `resume`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paused {
    pub paused: bool,
}

/// `set`: the setting, and the nodes whose pools took it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingChanged {
    pub setting: Setting,
    pub nodes: Vec<String>,
}

/// `pause HOST` and `resume HOST`, and the nodes whose pools took it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPaused {
    pub host: String,
    pub paused: bool,
    pub nodes: Vec<String>,
}

/// `node stop NAME`: the node told to stop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStopping {
    pub node: String,
}

/// `restart master`: the child the supervisor restarted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restarted {
    pub child: ChildRole,
}

/// `reopen-trap FAMILY`: the family, now allowed for good on this store,
/// and how many of the URLs it refused went back to pending.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrapReopened {
    pub family: String,
    pub released: u64,
}

/// `add_urls`: how many URLs were queued and refused, and each one's
/// outcome in the order given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Added {
    pub accepted: usize,
    pub refused: usize,
    pub results: Vec<UrlOutcome>,
}

impl Added {
    /// The counts of `results`.
    pub fn of(results: Vec<UrlOutcome>) -> Self {
        let accepted = results.iter().filter(|r| r.accepted).count();
        Self {
            accepted,
            refused: results.len() - accepted,
            results,
        }
    }
}

/// What became of one URL given to `add_url`, a stable word a script
/// branches on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddOutcome {
    /// Queued by this ask.
    Added,
    /// Waiting already (pending, or being fetched): nothing new queued.
    AlreadyQueued,
    /// Processed already (with this operation) and not due again: nothing
    /// queued, refused as `already_known`; `again` fetches it again.
    AlreadyProcessed,
    /// Refused for another reason: its `error.code` says which.
    Refused,
}

/// One URL given to `add_url`: its outcome, and the URL as queued
/// (`normalized`) or the refusal (`{"url", "outcome", "accepted",
/// "normalized"}` or `{"url", "outcome", "accepted", "error": {"code",
/// "message"}}`). `accepted`: the URL is in the queue (added or queued
/// already).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlOutcome {
    /// The URL as given.
    pub url: String,
    pub outcome: AddOutcome,
    pub accepted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalized: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Refusal>,
}

impl UrlOutcome {
    /// The outcome of `url`'s `add_url`.
    pub fn of(url: String, answer: Result<Queued, ControlError>) -> Self {
        match answer {
            Ok(queued) => Self {
                url,
                outcome: if queued.already_queued {
                    AddOutcome::AlreadyQueued
                } else {
                    AddOutcome::Added
                },
                accepted: true,
                normalized: Some(queued.url),
                error: None,
            },
            Err(e) => Self::refused(url, e.refusal()),
        }
    }

    /// `url` refused: processed already (`already_known`), or another
    /// refusal.
    pub fn refused(url: String, refusal: Refusal) -> Self {
        Self {
            url,
            outcome: match refusal.code {
                RefusalCode::AlreadyKnown => AddOutcome::AlreadyProcessed,
                _ => AddOutcome::Refused,
            },
            accepted: false,
            normalized: None,
            error: Some(refusal),
        }
    }
}

/// `page URL`: the stored record of a processed page, and its fetches
/// (oldest first; as many as `fetch_history` keeps).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PageView {
    pub page: ProcessedUrl,
    pub history: Vec<FetchHistory>,
}

/// The first rows of a listing, and how many there are in all.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Listing<T> {
    pub total: usize,
    pub items: Vec<T>,
}

impl<T> Listing<T> {
    /// The first `limit` of `items`, counting them all.
    pub(crate) fn first(mut items: Vec<T>, limit: usize) -> Self {
        let total = items.len();
        items.truncate(limit);
        Self { total, items }
    }
}

/// Errors of a control request: refused by the control actor (its variants
/// from [`ControlError::MasterRestarting`] on), or lost on the way, in this
/// process ([`AppHandle::control`](crate::AppHandle::control)) or over the
/// cluster ([`Remote`](crate::Remote)): one type for both. A refusal
/// crosses the wire as its code and its one line ([`Refusal`]), read back
/// as [`ControlError::Refused`]; [`ControlError::code`] is the code of any
/// of them, on either side.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// No control actor runs under this name (a worker node's app, or a
    /// stopped one).
    #[error("no control actor {0} runs here (a worker node's app, or one stopped)")]
    NoControl(String),
    /// No node of the cluster runs a control actor now (its master's node
    /// is down, or this node is in no cluster).
    #[error("no control actor in the cluster: is the master's node up?")]
    NoClusterControl,
    #[error("the node did not answer")]
    NoAnswer(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The node refused the request: its code and one-line reason.
    #[error("{0}")]
    Refused(Refusal),
    #[error("the node sent a reply this client cannot read")]
    BadReply(#[source] serde_json::Error),
    /// Refused here, before sending: the connection stays up.
    #[error("the request is {bytes} bytes, over the {limit} a cluster request may carry")]
    TooLarge { bytes: usize, limit: usize },
    #[error("the master is restarting; try again")]
    MasterRestarting,
    #[error("this node runs no master")]
    NoMaster,
    #[error("the supervisor is gone")]
    NoSupervisor,
    /// An actor of the tree did not take or answer the request.
    #[error("the {actor} did not answer: {reason}")]
    Unanswered { actor: &'static str, reason: String },
    #[error("{node} is the master's node: `shutdown` stops it (as SIGTERM to its process does)")]
    MastersNode { node: String },
    #[error("no live node {node:?}; nodes: {}", .live.join(", "))]
    NoSuchNode { node: String, live: Vec<String> },
    #[error("no actor {0:?}: try master, sup or config")]
    NoSuchActor(String),
    /// `reopen-trap` of a name the store knows no trap family by.
    #[error(
        "no trap family {family:?} in this store: `traps` (console) or `report traps` (CLI) \
         lists them by name"
    )]
    NoSuchTrapFamily { family: String },
    #[error(transparent)]
    AddUrl(#[from] AddUrlError),
    #[error(transparent)]
    Interval(#[from] IntervalTooShort),
    #[error(
        "no index here: the crawl was started without a search index, or the indexer is restarting"
    )]
    NoIndex,
    /// The indexer could not answer the search: its one line.
    #[error("{0}")]
    Search(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("bad request: {0}")]
    BadRequest(#[source] serde_json::Error),
    #[error(
        "the answer is {bytes} bytes, over the {limit} a cluster message may carry: ask for fewer"
    )]
    ReplyTooLarge { bytes: usize, limit: usize },
    #[error("{urls} URLs in one request, over the {limit} one request may queue")]
    TooManyUrls { urls: usize, limit: usize },
    /// `page` of a URL the store has not processed.
    #[error("{url} is not a processed page in this store (pending, refused, or never seen)")]
    NoSuchPage { url: String },
}

impl ControlError {
    /// The refusal's stable code, the same on every side of every wire.
    pub fn code(&self) -> RefusalCode {
        use RefusalCode as C;
        match self {
            Self::Refused(r) => r.code,
            Self::Cluster(_)
            | Self::NoControl(_)
            | Self::NoClusterControl
            | Self::NoAnswer(_)
            | Self::MasterRestarting
            | Self::NoMaster
            | Self::NoSupervisor
            | Self::Unanswered { .. }
            | Self::Search(_) => C::Unavailable,
            Self::BadReply(_) => C::Internal,
            Self::TooLarge { .. } | Self::TooManyUrls { .. } => C::TooLarge,
            Self::ReplyTooLarge { .. } => C::ReplyTooLarge,
            Self::MastersNode { .. } => C::Conflict,
            Self::NoSuchNode { .. }
            | Self::NoSuchActor(_)
            | Self::NoSuchTrapFamily { .. }
            | Self::NoSuchPage { .. } => C::NotFound,
            Self::AddUrl(e) => e.code(),
            Self::Interval(_) => C::BadInterval,
            Self::NoIndex => C::NoIndex,
            Self::Store(StoreError::Unavailable { .. }) => C::Unavailable,
            Self::Store(_) => C::Internal,
            Self::BadRequest(_) => C::BadRequest,
        }
    }

    /// The refusal as it crosses a wire: code and sentence.
    pub fn refusal(&self) -> Refusal {
        match self {
            Self::Refused(r) => r.clone(),
            other => Refusal::new(other.code(), other.to_string()),
        }
    }
}

/// The wire form of an answer: `{"ok": REPLY}` or
/// `{"error": {"code": CODE, "message": "one line"}}`.
#[derive(Serialize)]
enum Envelope<'a> {
    #[serde(rename = "ok")]
    Ok(&'a ControlReply),
    #[serde(rename = "error")]
    Error(Refusal),
}

/// Encode an answer for the wire.
pub(crate) fn to_wire(answer: &Result<ControlReply, ControlError>) -> String {
    let envelope = match answer {
        Ok(reply) => Envelope::Ok(reply),
        Err(e) => Envelope::Error(e.refusal()),
    };
    serde_json::to_string(&envelope).expect("a reply always serializes")
}

/// The reply's JSON from the wire form; a refusal becomes
/// [`ControlError::Refused`] with its code and one line.
pub(crate) fn from_wire(text: &str) -> Result<Value, ControlError> {
    #[derive(Deserialize)]
    struct Wire {
        #[serde(default)]
        ok: Value,
        error: Option<Refusal>,
    }
    let wire: Wire = serde_json::from_str(text).map_err(ControlError::BadReply)?;
    match wire.error {
        Some(error) => Err(ControlError::Refused(error)),
        None => Ok(wire.ok),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn state_config_shows_every_setting_in_milliseconds() {
        let cfg = CrawlConfig {
            min_delay: Duration::from_millis(1500),
            reprocess_after: None,
            recrawl_every: Some(Duration::from_secs(600)),
            availability_watch: true,
            history_keep: 7,
            ..CrawlConfig::default()
        };
        let reply = ControlReply::State(ActorState::Config(Box::new(cfg.clone())));
        let v = serde_json::to_value(&reply).unwrap();
        assert_eq!(v["node"], "local");
        assert_eq!(v["min_delay_ms"], 1500);
        assert_eq!(v["reprocess_after_ms"], Value::Null);
        assert_eq!(v["recrawl_every_ms"], 600_000);
        assert_eq!(v["monitoring"], true);
        assert_eq!(v["history_keep"], 7);
        assert_eq!(v["index"], cfg.index_pages);
        // The wire keeps the names the fields had before their renames.
        assert_eq!(v["window"], cfg.claim_window);
        assert_eq!(
            v["traps"]["window"], 24,
            "the trap defence's pattern window"
        );
        assert_eq!(
            v["restart_intensity"]["max_restarts"],
            cfg.restart_intensity.max_restarts
        );
        assert_eq!(v["restart_intensity"]["period_ms"], 60_000);
        assert!(v["robots_ttl_ms"].as_u64().unwrap() > 0);
        // And back, as a console reads it.
        let request = ControlRequest::State {
            actor: "config".into(),
        };
        let ControlReply::State(ActorState::Config(back)) =
            ControlReply::decode(&request, v).unwrap()
        else {
            panic!("a config")
        };
        assert_eq!(back.min_delay, cfg.min_delay);
        assert_eq!(back.recrawl_every, cfg.recrawl_every);
        assert_eq!(back.traps, cfg.traps);
    }

    #[test]
    fn an_answer_crosses_the_wire_as_ok_or_one_line_of_error() {
        let reply = ControlReply::Paused(Paused { paused: true });
        assert_eq!(to_wire(&Ok(reply)), r#"{"ok":{"paused":true}}"#);
        assert_eq!(
            from_wire(r#"{"ok":{"paused":true}}"#).unwrap()["paused"],
            true
        );
        let refused = to_wire(&Err(ControlError::NoSuchNode {
            node: "w9".into(),
            live: vec!["m".into(), "w1".into()],
        }));
        assert_eq!(
            refused,
            r#"{"error":{"code":"not_found","message":"no live node \"w9\"; nodes: m, w1"}}"#
        );
        let err = from_wire(&refused).unwrap_err();
        assert!(
            matches!(&err, ControlError::Refused(why) if why.message.starts_with("no live node")),
            "{err:?}"
        );
        assert_eq!(err.code(), RefusalCode::NotFound);
        let queued = ControlReply::decode(
            &ControlRequest::AddUrl {
                url: "http://a/".into(),
                operation: crate::types::OperationSpec::crawl(),
                again: false,
                every_ms: None,
            },
            from_wire(r#"{"ok":{"url":"http://a/","already_queued":true}}"#).unwrap(),
        )
        .unwrap();
        assert!(matches!(
            queued,
            ControlReply::Queued(Queued { url, already_queued: true }) if url == "http://a/"
        ));
    }

    #[test]
    fn each_add_url_answer_has_its_outcome() {
        let queued = |already_queued| {
            Ok(Queued {
                url: "http://a/".into(),
                already_queued,
            })
        };
        let outcome = |answer| UrlOutcome::of("HTTP://a/".into(), answer);
        let added = outcome(queued(false));
        assert_eq!(
            serde_json::to_value(&added).unwrap(),
            serde_json::json!({
                "url": "HTTP://a/", "outcome": "added", "accepted": true, "normalized": "http://a/"
            })
        );
        let waiting = outcome(queued(true));
        assert_eq!(
            (waiting.outcome, waiting.accepted),
            (AddOutcome::AlreadyQueued, true)
        );
        let processed = outcome(Err(ControlError::AddUrl(AddUrlError::AlreadyKnown {
            url: "http://a/".into(),
            processed_at: 0,
            http_status: Some(200),
        })));
        assert_eq!(
            (processed.outcome, processed.accepted),
            (AddOutcome::AlreadyProcessed, false)
        );
        assert_eq!(processed.error.unwrap().code, RefusalCode::AlreadyKnown);
        // As a refusal crossed the wire, by its code.
        let scope = Refusal::new(RefusalCode::OutOfScope, "off the crawl's hosts");
        let refused = outcome(Err(ControlError::Refused(scope)));
        assert_eq!(
            serde_json::to_value(&refused).unwrap(),
            serde_json::json!({
                "url": "HTTP://a/", "outcome": "refused", "accepted": false,
                "error": {"code": "out_of_scope", "message": "off the crawl's hosts"}
            })
        );
    }

    #[test]
    fn a_processed_url_is_refused_with_when_and_how_it_answered() {
        let err = ControlError::AddUrl(AddUrlError::AlreadyKnown {
            url: "http://a/".into(),
            processed_at: 1_748_779_384_000,
            http_status: Some(200),
        });
        assert_eq!(
            err.to_string(),
            "http://a/ was already processed at 2025-06-01 12:03:04 UTC (HTTP 200): nothing \
             queued; add it with `again` to fetch it again (console: add_url URL again; CLI: \
             add-url --again URL)"
        );
    }

    #[test]
    fn every_refusal_has_its_stable_code() {
        use crate::behaviour::Rejection;
        let rejected = |rejection| {
            ControlError::AddUrl(AddUrlError::Rejected {
                url: "u".into(),
                rejection,
            })
        };
        for (e, code) in [
            (
                rejected(Rejection::Invalid("bad".into())),
                RefusalCode::InvalidUrl,
            ),
            (rejected(Rejection::OutOfScope), RefusalCode::OutOfScope),
            (rejected(Rejection::Filtered), RefusalCode::Filtered),
            (rejected(Rejection::Trap("calendar")), RefusalCode::Trap),
            (rejected(Rejection::TooDeep), RefusalCode::TooDeep),
            (
                ControlError::AddUrl(AddUrlError::OverBudget {
                    url: "u".into(),
                    max: 3,
                }),
                RefusalCode::OverBudget,
            ),
            (
                ControlError::AddUrl(AddUrlError::AlreadyKnown {
                    url: "u".into(),
                    processed_at: 0,
                    http_status: None,
                }),
                RefusalCode::AlreadyKnown,
            ),
            (ControlError::MasterRestarting, RefusalCode::Unavailable),
            (
                ControlError::NoSuchTrapFamily { family: "f".into() },
                RefusalCode::NotFound,
            ),
            (
                ControlError::TooManyUrls { urls: 2, limit: 1 },
                RefusalCode::TooLarge,
            ),
        ] {
            assert_eq!(e.code(), code, "{e}");
            // Across the wire, the same code and sentence.
            let back = from_wire(&to_wire(&Err(e))).unwrap_err();
            assert_eq!(back.code(), code);
        }
    }
}
