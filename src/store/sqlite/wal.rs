//! The write-ahead log under a long reader. Readers never block the crawl
//! (WAL mode), but a checkpoint cannot copy back the frames written after
//! the oldest open read transaction began: while someone keeps one open (a
//! `sqlite3` session inside `BEGIN`, a report reading a large crawl), the
//! WAL only grows. The checkpoint thread watches that and says so, with a
//! warning each time the WAL doubles past [`WARN_BYTES`]; once the reader
//! lets go, the next checkpoint completes and the WAL is cut back to
//! `journal_size_limit` ([`JOURNAL_SIZE_LIMIT`]) when it restarts.

use web_crawler_actors::Millis;

/// The WAL kept on disk after a checkpoint (SQLite's `journal_size_limit`):
/// a WAL grown under a long reader shrinks back to this.
pub(super) const JOURNAL_SIZE_LIMIT: u64 = 64 << 20;

/// A WAL that checkpoints cannot empty is reported when it reaches this
/// size, then each time it doubles.
pub(super) const WARN_BYTES: u64 = 256 << 20;

/// What the last checkpoints said about the WAL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalState {
    /// The WAL file's size.
    pub bytes: u64,
    /// Since when checkpoints leave frames behind (epoch ms): a reader holds
    /// an old snapshot (or the crawl writes faster than it can be copied).
    pub stuck_since: Option<Millis>,
}

/// Something to tell people about the WAL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WalEvent {
    /// Checkpoints have not caught up since `since` and the WAL is `bytes`.
    Growing { bytes: u64, since: Millis },
    /// A checkpoint completed again after a warning.
    CaughtUp,
}

/// The rule over the checkpoints' results.
#[derive(Debug)]
pub(super) struct WalWatch {
    state: WalState,
    warn_at: u64,
    first_warning: u64,
}

impl WalWatch {
    pub(super) fn new(warn_at: u64) -> Self {
        Self {
            state: WalState::default(),
            warn_at,
            first_warning: warn_at,
        }
    }

    pub(super) fn state(&self) -> WalState {
        self.state
    }

    /// A checkpoint ran at `now`: the WAL is `bytes` long, and `complete`
    /// when every frame in it was copied back.
    pub(super) fn checkpointed(
        &mut self,
        bytes: u64,
        complete: bool,
        now: Millis,
    ) -> Option<WalEvent> {
        self.state.bytes = bytes;
        if complete {
            self.state.stuck_since = None;
            let warned = self.warn_at > self.first_warning;
            self.warn_at = self.first_warning;
            return warned.then_some(WalEvent::CaughtUp);
        }
        let since = *self.state.stuck_since.get_or_insert(now);
        if bytes < self.warn_at {
            return None;
        }
        while self.warn_at <= bytes {
            self.warn_at = self.warn_at.saturating_mul(2);
        }
        Some(WalEvent::Growing { bytes, since })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wal_that_checkpoints_cannot_empty_is_reported_as_it_doubles() {
        let mut w = WalWatch::new(100);
        assert_eq!(w.checkpointed(10, true, 0), None);
        assert_eq!(w.state().stuck_since, None);
        // A reader holds an old snapshot from t=500 on.
        assert_eq!(w.checkpointed(50, false, 500), None, "small yet");
        assert_eq!(w.state().stuck_since, Some(500));
        assert_eq!(
            w.checkpointed(120, false, 1_000),
            Some(WalEvent::Growing {
                bytes: 120,
                since: 500
            })
        );
        assert_eq!(w.checkpointed(190, false, 1_500), None, "once per doubling");
        assert_eq!(
            w.checkpointed(450, false, 2_000),
            Some(WalEvent::Growing {
                bytes: 450,
                since: 500
            })
        );
        assert_eq!(w.checkpointed(790, false, 2_500), None, "next at 800");
        assert_eq!(w.state().bytes, 790);
        // The reader let go.
        assert_eq!(w.checkpointed(790, true, 3_000), Some(WalEvent::CaughtUp));
        assert_eq!(w.state().stuck_since, None);
        assert_eq!(w.checkpointed(10, true, 3_500), None, "said once");
        // A later episode starts from the first threshold again.
        assert_eq!(w.checkpointed(20, false, 4_000), None);
        assert!(matches!(
            w.checkpointed(100, false, 4_500),
            Some(WalEvent::Growing { since: 4_000, .. })
        ));
    }

    #[test]
    fn a_short_lag_behind_the_writer_is_not_news() {
        let mut w = WalWatch::new(100);
        assert_eq!(w.checkpointed(30, false, 0), None);
        assert_eq!(w.checkpointed(30, true, 500), None, "nothing was said");
    }
}
