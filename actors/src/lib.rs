#![doc = include_str!("../../supervision.md")]

mod admission;
mod app;
pub mod availability;
mod behaviour;
pub mod cluster;
pub mod cluster_query;
mod config;
mod control;
mod cycle_end;
mod departures;
mod fetch_load;
pub mod frontier_rules;
pub mod hosts;
pub mod indexer;
mod master;
pub mod metrics;
mod node_check;
pub mod outage;
mod pool;
#[cfg(any(test, feature = "proptest-cases"))]
#[doc(hidden)]
pub mod proptest_cases;
mod protocol;
pub mod rate;
mod refusal;
pub mod refusals;
mod remote;
mod reopen_waiters;
mod reply;
mod restarts;
mod run_stats;
mod runtime_settings;
pub mod scheduler;
mod slave;
mod status;
pub mod store_cycle;
mod sup;
pub mod traps;
mod types;
pub mod window;

pub use app::{App, AppError, AppHandle};
/// Implementers of the behaviours use the same `async_trait` as the traits.
pub use async_trait::async_trait;
pub use behaviour::index::{
    Anchor, INDEX_ANCHORS, INDEX_FORGET, INDEX_QUEUE, INDEX_TEXT_BYTES, IndexError, IndexOpener,
    IndexQueue, IndexShard, PageIndex, PageSearch, PageText, QueueEntry, QueuePos, QueueRead,
    QueuedPage, SearchAnswer, SearchHit, ShardHit, ShardNodes, ShardPhase, ShardStats, ShardTop,
    duplicate_record,
};
pub use behaviour::{
    Archive, ArchiveError, BoxError, ClaimRequest, CommitBatch, CommitSummary, Document,
    ExtractedPage, Extractor, FetchFailure, FetchedPage, Fetcher, Frontier, HandOver, LinkPolicy,
    Notifier, Operation, OperationError, OperationOutput, Operations, PageContext, PageQuery,
    ProcessedPage, Queries, Record, Rejection, Retry, RobotsReport, RobotsRules, SectionStart,
    Store, StoreError, TrappedClaim, TrappedLink, WhyUnreachable, error_chain,
};
pub use cluster_query::SHARD_DEADLINE;
pub use config::{Behaviours, CrawlConfig, RestartIntensity, Storage};
pub use hosts::{HostListing, HostSummary, LiveHost, LiveRobots, NodeHosts};
pub use metrics::{Metrics, NoMetrics};
pub use outage::{StoreFailure, StoreFailureKind};
pub use protocol::{
    AddUrlError, ChildInfo, ChildRole, ControlRequest, IdleReason, MAX_BATCH_BYTES, MAX_BATCH_URLS,
    MAX_MESSAGE_BYTES, MAX_REQUEST_BYTES, NodeInfo, Queued, Setting, SlaveReport, Status, node_of,
};
pub use refusal::{Refusal, RefusalCode};
pub use remote::{ControlClient, Remote};
pub use reply::{
    ActorState, AddOutcome, Added, ControlError, ControlReply, HostPaused, Intensity, Listing,
    NodeStopping, PageView, Paused, PoolInfo, RestartStrategy, Restarted, SettingChanged,
    SupSummary, TrapReopened, Tree, UrlOutcome,
};
pub use sup::ExitReason;
pub use types::{
    BrokenLink, ClosedFamily, HostRecord, IndexCounts, Job, LastFetch, Millis, NewLink,
    OperationSpec, PageRecord, PendingUrl, ProcessedUrl, ROBOTS_BLOCKED, RobotsStatus,
    SEARCH_RESULTS, StoreCounts, TEXT_MATCH_EXACT, TEXT_MATCH_OPERATION, TRAP_SAMPLES, TRAPPED,
    TextMatchHit, TrapFamily, TrapMark, UrlKey, now_ms,
};
