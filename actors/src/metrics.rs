//! Where the tree counts what happens, for an operator's metrics: the
//! actors call a [`Metrics`] at the places things happen, and the
//! implementation (`web_crawler`'s Prometheus registry) decides how to keep
//! and show them. The queue and node gauges come from [`Status`](crate::Status)
//! instead, which the master answers.

use crate::protocol::{ChildRole, SlaveReport};
use std::fmt;

/// What a node counts. Every method has an empty default, so an
/// implementation takes what it needs; calls are cheap and never block
/// (they run inside actors' handlers).
pub trait Metrics: Send + Sync + fmt::Debug {
    /// A URL this node's pool ran has ended: `status` is the HTTP status of
    /// the answer, if one came; `failed` when the attempt failed (no
    /// answer, a retryable status, a crashed slave).
    fn url_done(&self, _status: Option<u16>, _failed: bool) {}
    /// This node's pool now queues `queued` URLs and runs `running` slaves.
    fn pool_load(&self, _queued: usize, _running: usize) {}
    /// This node's supervisor started `child`, the first time or again
    /// (so that its restart count can be shown at 0 from the start).
    fn started(&self, _child: ChildRole) {}
    /// This node's supervisor restarted `child` (a crash or an operator's restart).
    fn restarted(&self, _child: ChildRole) {}
}

/// Counts nothing (the default).
#[derive(Debug, Default)]
pub struct NoMetrics;

impl Metrics for NoMetrics {}

/// What a slave's report counts as: (HTTP status, failed). `None` for a
/// report that fetched nothing (robots.txt said no, or could not be had).
pub(crate) fn outcome(report: &SlaveReport) -> Option<(Option<u16>, bool)> {
    match report {
        SlaveReport::Page { page, .. } => Some((page.record.http_returncode, false)),
        SlaveReport::Failed { status, .. } => Some((*status, true)),
        SlaveReport::RobotsBlocked { .. } | SlaveReport::RobotsUnreachable { .. } => None,
    }
}
