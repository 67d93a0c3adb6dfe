#![doc = include_str!("../../supervision.md")]

mod admission;
mod app;
mod behaviour;
pub mod cluster;
mod config;
mod control;
mod cycle_end;
mod departures;
mod fetch_load;
pub mod frontier;
pub mod hosts;
pub mod indexer;
mod master;
pub mod metrics;
pub mod monitor;
mod node_check;
pub mod outage;
mod pool;
#[cfg(test)]
mod proptest_cases;
mod protocol;
pub mod rate;
mod refusal;
pub mod refusals;
mod remote;
mod reply;
mod restarts;
mod run_stats;
mod runtime_settings;
pub mod scheduler;
pub mod shards;
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
    Anchor, INDEX_ANCHORS, INDEX_QUEUE, INDEX_TEXT_BYTES, IndexError, IndexOpener, IndexQueue,
    PageIndex, PageSearch, PageText, QueueEntry, QueuePos, QueueRead, QueuedPage, SearchAnswer,
    SearchHit, Shard, ShardHit, ShardNodes, ShardPhase, ShardStats, ShardTop,
};
pub use behaviour::{
    Archive, ArchiveError, BoxError, ClaimRequest, CommitBatch, CommitSummary, Document,
    ExtractedPage, Extractor, FetchFailure, FetchedPage, Fetcher, Frontier, HandOver, LinkPolicy,
    Notifier, Operation, OperationError, OperationOutput, Operations, PageContext, PageQuery,
    ProcessedPage, Queries, Record, Rejection, Retry, RobotsReport, RobotsRules, SectionStart,
    Store, StoreError, TrappedClaim, TrappedLink, WhyUnreachable, error_chain,
};
pub use config::{Behaviours, CrawlConfig, RestartIntensity, Storage};
pub use hosts::{HostListing, HostSummary, LiveHost, LiveRobots, NodeHosts};
pub use metrics::{Metrics, NoMetrics};
pub use outage::{StoreFailure, StoreFailureKind};
pub use protocol::{
    AddUrlError, ChildInfo, ChildRole, ControlRequest, IdleReason, MAX_BATCH_BYTES, MAX_BATCH_URLS,
    MAX_MESSAGE_BYTES, MAX_REQUEST_BYTES, NodeInfo, Setting, SlaveReport, Status, node_of,
};
pub use refusal::{Refusal, RefusalCode};
pub use remote::{ControlClient, Remote};
pub use reply::{
    ActorState, Added, ControlError, ControlReply, HostPaused, Intensity, Listing, NodeStopping,
    PageView, Paused, PoolInfo, RestartStrategy, Restarted, SettingChanged, SupSummary,
    TrapReopened, Tree, UrlOutcome,
};
pub use shards::SHARD_DEADLINE;
pub use sup::ExitReason;
pub use types::{
    BrokenLink, ClosedFamily, HostRecord, IndexCounts, Job, LastFetch, Millis, NewLink,
    OperationSpec, PageRecord, PendingUrl, ProcessedUrl, ROBOTS_BLOCKED, RobotsStatus,
    SEARCH_EXACT, SEARCH_OPERATION, SEARCH_RESULTS, SearchResult, StoreCounts, TRAP_SAMPLES,
    TRAPPED, TrapFamily, TrapMark, UrlKey, now_ms,
};
