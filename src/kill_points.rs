//! Kills aimed at writes (#47): a test hook compiled into the real
//! binary and inert unless `WEB_CRAWLER_KILL_AT=POINT:N` names one of the
//! [`KillPoint`]s, when the process sends itself SIGKILL the N-th time it
//! reaches that point, in the middle of the write. The variable is read
//! once; unset, a point costs a load and a branch.
//!
//! SIGKILL rather than `abort`: nothing runs after it (no unwinding, no
//! `Drop`, no buffered flush), as with `kill -9` or the OOM killer.

use std::io::{self, Write};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The variable that aims a kill.
const KILL_AT_VAR: &str = "WEB_CRAWLER_KILL_AT";

/// A write the process can be killed in the middle of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KillPoint {
    /// An exchange's records appended to a WARC file: killed after half
    /// of its bytes are written, before its CDXJ line.
    WarcWrite,
    /// One of the full-text index's two parts committing: its segments
    /// written, its `meta.json` not yet (nor the queue marked done).
    IndexCommit,
    /// A batch written into the embedded store's transaction, not yet
    /// committed.
    StoreCommit,
}

impl KillPoint {
    fn parse(name: &str) -> Option<Self> {
        match name {
            "warc-write" => Some(Self::WarcWrite),
            "index-commit" => Some(Self::IndexCommit),
            "store-commit" => Some(Self::StoreCommit),
            _ => None,
        }
    }
}

/// A kill aimed at the `nth` reach of `point`.
#[derive(Debug)]
struct Aim {
    point: KillPoint,
    nth: u64,
    reached: AtomicU64,
}

impl Aim {
    /// `POINT:N`, N from 1; `None` for anything else.
    fn parse(value: &str) -> Option<Self> {
        let (point, nth) = value.split_once(':')?;
        let nth = nth.parse().ok().filter(|&n| n > 0)?;
        Some(Self {
            point: KillPoint::parse(point)?,
            nth,
            reached: AtomicU64::new(0),
        })
    }

    /// Count a reach of `point`: whether it is the one aimed at.
    fn hit(&self, point: KillPoint) -> bool {
        point == self.point && self.reached.fetch_add(1, Ordering::SeqCst) + 1 == self.nth
    }
}

static AIM: LazyLock<Option<Aim>> = LazyLock::new(|| {
    let value = std::env::var(KILL_AT_VAR).ok()?;
    let aim = Aim::parse(&value);
    if aim.is_none() {
        tracing::error!(
            "{KILL_AT_VAR}={value:?} aims at nothing: it takes warc-write:N, \
             index-commit:N or store-commit:N (N from 1)"
        );
    }
    aim
});

/// `point` is reached: the aimed reach of it kills the process.
pub(crate) fn reached(point: KillPoint) {
    if let Some(aim) = &*AIM
        && aim.hit(point)
    {
        kill();
    }
}

/// `out.write_all(bytes)`, or on the aimed reach of `point` half of
/// `bytes` written and the process killed.
pub(crate) fn write_all(point: KillPoint, out: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    if let Some(aim) = &*AIM
        && aim.hit(point)
    {
        out.write_all(&bytes[..bytes.len() / 2])?;
        kill();
    }
    out.write_all(bytes)
}

fn kill() -> ! {
    // SIGKILL to this thread ends the whole process before `raise` returns.
    let sent = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    unreachable!("SIGKILL was not delivered: {sent:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aim_names_a_point_and_a_reach_from_one() {
        let aim = Aim::parse("store-commit:3").unwrap();
        assert_eq!((aim.point, aim.nth), (KillPoint::StoreCommit, 3));
        assert_eq!(
            Aim::parse("warc-write:1").unwrap().point,
            KillPoint::WarcWrite
        );
        assert_eq!(
            Aim::parse("index-commit:7").unwrap().point,
            KillPoint::IndexCommit
        );
        for wrong in [
            "",
            "store-commit",
            "store-commit:0",
            "store-commit:-1",
            "store-commit:x",
            "store:1",
            ":1",
        ] {
            assert!(Aim::parse(wrong).is_none(), "{wrong:?}");
        }
    }

    #[test]
    fn only_the_aimed_reach_of_the_aimed_point_hits() {
        let aim = Aim::parse("index-commit:3").unwrap();
        let hits: Vec<bool> = [
            KillPoint::IndexCommit,
            KillPoint::StoreCommit,
            KillPoint::WarcWrite,
            KillPoint::IndexCommit,
            KillPoint::IndexCommit,
            KillPoint::IndexCommit,
        ]
        .into_iter()
        .map(|p| aim.hit(p))
        .collect();
        assert_eq!(hits, [false, false, false, false, true, false]);
    }
}
