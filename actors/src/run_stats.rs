//! Counters of one run of the app: they outlive each master incarnation,
//! so budgets and rates survive restarts, and the store cycle's turn, so a
//! cycle of a killed master ends before its successor's first.

use crate::window::Window;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Counters of one run of the app. The supervisor keeps them and hands them
/// to each master incarnation, so budgets and rates survive restarts.
#[derive(Debug)]
pub(crate) struct RunStats {
    started: Instant,
    fetched: AtomicU64,
    errors: AtomicU64,
    /// Held by a running store cycle, which outlives a killed master: its
    /// successor's first cycle (which releases the leases) waits for it, so
    /// a claim that lands late is released too instead of waiting out its
    /// lease.
    pub(crate) store_cycle: Arc<tokio::sync::Mutex<()>>,
}

impl Default for RunStats {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            fetched: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            store_cycle: Arc::default(),
        }
    }
}

impl RunStats {
    /// Pages fetched and errors so far this run.
    pub(crate) fn counts(&self) -> (u64, u64) {
        let fetched = self.fetched.load(Ordering::Relaxed);
        (fetched, self.errors.load(Ordering::Relaxed))
    }

    pub(crate) fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The window's counts, for the next master incarnation.
    pub(crate) fn record(&self, window: &Window) {
        self.fetched.store(window.fetched(), Ordering::Relaxed);
        self.errors.store(window.errors(), Ordering::Relaxed);
    }
}
