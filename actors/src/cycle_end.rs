//! How a store cycle ends, for the master: a failed one is waited out,
//! gives up or fails the master ([`cycle_failed`]); one that reached an
//! unavailable store again ends the outage, and one whose hand-over step
//! found a departed node's pages all fetched again ends its hand-over
//! ([`cycle_done`]); the one
//! running when the master stops leaves its work to the last cycle
//! ([`cycle_at_stop`]). Pure over the [`Window`] at `now`; the master
//! carries out what they return.

use crate::behaviour::{StoreError, error_chain};
use crate::config::ONE_SHOT_NODE;
use crate::outage::{StoreFailure, Verdict, human_duration};
use crate::protocol::MASTER_LOG;
use crate::store_cycle::{CycleResult, FailedCycle};
use crate::types::Millis;
use crate::window::{AfterCycle, Window};
use std::time::Duration;

/// What a failed store cycle means for the master.
#[derive(Debug)]
pub(crate) enum OnFailure {
    /// The store is unavailable: its work went back into the window, and
    /// the store is asked again after a backoff.
    Wait,
    /// Stop the app: a permanent failure (a full disk, refused
    /// credentials), or an outage past its limit (`outage_limit`).
    GiveUp(StoreFailure),
    /// Any other error fails the master: its supervisor restarts it and its
    /// successor recovers the leases.
    Fail(StoreError),
}

/// A store cycle failed at `now`. One line says so when an outage begins
/// (and one when it ends, [`cycle_done`]).
pub(crate) fn cycle_failed(
    window: &mut Window,
    failed: FailedCycle,
    outage_limit: Duration,
    now: Millis,
) -> OnFailure {
    let FailedCycle {
        error,
        work,
        started,
    } = failed;
    let cause = error_chain(&error);
    tracing::debug!(target: MASTER_LOG, ?error, "store cycle failed");
    if error.is_permanent() {
        return OnFailure::GiveUp(StoreFailure::permanent(started, cause));
    }
    if !error.is_transient() {
        return OnFailure::Fail(error);
    }
    match window.cycle_failed(work, started, now, cause.clone()) {
        Verdict::Began { .. } => tracing::warn!(
            target: MASTER_LOG,
            "the store is unavailable ({cause}); the crawl holds its {} result(s), claims \
             nothing and asks again until it is back, for up to {}",
            window.results_held(),
            human_duration(outage_limit)
        ),
        Verdict::Continues { retry_at } => tracing::debug!(
            target: MASTER_LOG,
            %cause,
            retry_in_ms = retry_at - now,
            "the store is still unavailable"
        ),
        Verdict::GiveUp(failure) => return OnFailure::GiveUp(failure),
    }
    OnFailure::Wait
}

/// A store cycle did `result` at `now`, with the `live` pools' nodes: what
/// the window makes of it ([`Window::cycle_done`]).
pub(crate) fn cycle_done(
    window: &mut Window,
    result: &mut CycleResult,
    live: &[String],
    now: Millis,
) -> AfterCycle {
    if let Some(nodes) = result.nodes_with_pages.take() {
        // A new master knows nothing of departures before it: a node that
        // fetched pages and is not in the cluster is gone from now on, and
        // handed over unless it is back within the grace. A one-shot
        // crawl's pages are this master's own (its shard is the store's
        // index): a service started over them fetches nothing again.
        let absent: Vec<String> = nodes
            .into_iter()
            .filter(|n| !live.contains(n) && n != ONE_SHOT_NODE)
            .collect();
        if !absent.is_empty() {
            tracing::info!(
                target: MASTER_LOG,
                "nodes that fetched pages and are not in the cluster: {}; their pages are fetched again by their hosts' new owners unless they are back within {}",
                absent.join(", "),
                human_duration(Duration::from_millis(window.departed_after().max(0) as u64))
            );
            window.departures.nodes_changed(&absent, &[], now);
        }
    }
    if let Some((node, done)) = result.handed_over.take()
        && window.departures.handed(&node, done)
    {
        tracing::info!(
            target: MASTER_LOG,
            "node {node}'s pages are handed over: each was fetched again by its host's new owner"
        );
    }
    // Before what it claimed is judged.
    if let Some(closures) = result.closures.take() {
        window.restore_traps(&closures, now);
    }
    let mut released = 0;
    for (family, reopened) in &result.reopened {
        match reopened {
            Some(n) => released += n,
            None => window.no_such_trap(family),
        }
    }
    let claimed = std::mem::take(&mut result.claimed);
    let mut after = window.cycle_done(claimed, result.frontier_empty, live, now);
    if released > 0 {
        // Reopened families' URLs are pending again: claim them.
        after.next.get_or_insert(false);
    }
    if let Some(outage) = &after.recovered {
        let away = Duration::from_millis((now - outage.since).max(0) as u64);
        tracing::warn!(
            target: MASTER_LOG,
            "the store is back after {:.1}s away; the crawl resumes",
            away.as_secs_f64()
        );
    }
    after
}

/// The cycle still running when the master stops ended at `now`: what it
/// claimed goes back to pending (no pool gets it: no live nodes), and an
/// unavailable store's work back into the window, for the last cycle to
/// write; any other error fails the stop. Whether its seeds were written.
pub(crate) fn cycle_at_stop(
    window: &mut Window,
    outcome: Result<CycleResult, FailedCycle>,
    now: Millis,
) -> Result<bool, StoreError> {
    match outcome {
        Ok(result) => {
            window.cycle_done(result.claimed, None, &[], now);
            Ok(true)
        }
        Err(failed) if failed.error.is_transient() => {
            let cause = error_chain(&failed.error);
            let _ = window.cycle_failed(failed.work, failed.started, now, cause);
            Ok(false)
        }
        Err(failed) => Err(failed.error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CrawlConfig;
    use crate::store_cycle::CycleWork;

    const T0: Millis = 1_000_000;
    const LIMIT: Duration = Duration::from_secs(60);

    fn failed(error: StoreError) -> FailedCycle {
        FailedCycle {
            error,
            work: CycleWork::default(),
            started: T0,
        }
    }

    fn window() -> Window {
        let cfg = CrawlConfig {
            store_outage_limit: LIMIT,
            ..CrawlConfig::default()
        };
        Window::new(cfg, 0, 0, T0)
    }

    #[test]
    fn an_unavailable_store_is_waited_for_until_the_limit() {
        let mut w = window();
        let away = || failed(StoreError::unavailable("commit", "connection refused"));
        assert!(matches!(
            cycle_failed(&mut w, away(), LIMIT, T0 + 10),
            OnFailure::Wait
        ));
        assert_eq!(w.store_outage().map(|o| o.since), Some(T0));
        assert!(matches!(
            cycle_failed(&mut w, away(), LIMIT, T0 + 1_000),
            OnFailure::Wait
        ));
        let past = T0 + LIMIT.as_millis() as Millis;
        assert!(matches!(
            cycle_failed(&mut w, away(), LIMIT, past),
            OnFailure::GiveUp(_)
        ));
    }

    #[test]
    fn a_permanent_failure_gives_up_and_any_other_fails_the_master() {
        let mut w = window();
        let full = failed(StoreError::refused("commit", "disk full"));
        assert!(matches!(
            cycle_failed(&mut w, full, LIMIT, T0),
            OnFailure::GiveUp(_)
        ));
        let bug = failed(StoreError::backend("commit", "a bad document"));
        assert!(matches!(
            cycle_failed(&mut w, bug, LIMIT, T0),
            OnFailure::Fail(_)
        ));
        assert!(w.store_outage().is_none(), "neither is an outage");
    }

    #[test]
    fn a_cycle_that_reaches_the_store_again_ends_the_outage() {
        let mut w = window();
        let away = failed(StoreError::unavailable("commit", "connection refused"));
        cycle_failed(&mut w, away, LIMIT, T0);
        w.ask_store_now();
        assert!(w.start_cycle(true, true, false, T0 + 300).is_some());
        let mut result = CycleResult::default();
        let after = cycle_done(&mut w, &mut result, &[], T0 + 400);
        assert_eq!(after.recovered.map(|o| o.since), Some(T0));
        assert!(w.store_outage().is_none());
    }

    #[test]
    fn a_cycle_that_finds_a_departed_nodes_pages_all_fetched_again_ends_its_hand_over() {
        let mut w = window();
        w.departures.stopping("w1");
        w.departures.nodes_changed(&["w1".to_string()], &[], T0);
        assert_eq!(w.departures.left_for_good(T0, 600_000), ["w1"]);
        let answer = |waiting| crate::behaviour::HandOver {
            queued: 0,
            last: None,
            waiting,
        };
        let mut result = CycleResult {
            handed_over: Some(("w1".to_string(), answer(3))),
            ..CycleResult::default()
        };
        cycle_done(&mut w, &mut result, &[], T0 + 10);
        assert_eq!(w.departures.handing_over(), ["w1"], "3 pages still wait");
        let mut result = CycleResult {
            handed_over: Some(("w1".to_string(), answer(0))),
            ..CycleResult::default()
        };
        cycle_done(&mut w, &mut result, &[], T0 + 20);
        assert!(w.departures.handing_over().is_empty());
    }

    /// A master started after a node left (or restarted while it was
    /// away) learns of it from the store: the node fetched pages and is not
    /// in the cluster, so it is gone from then on and, not back within the
    /// grace, handed over; a node that comes back is not.
    #[test]
    fn a_new_master_takes_nodes_that_fetched_pages_and_are_not_live_as_gone() {
        let mut w = window();
        let grace = w.departed_after();
        let mut result = CycleResult {
            nodes_with_pages: Some(vec!["a".into(), "w1".into(), "w2".into()]),
            ..CycleResult::default()
        };
        cycle_done(&mut w, &mut result, &["a".to_string()], T0);
        w.departures.nodes_changed(&[], &["w2".to_string()], T0 + 5);
        assert!(w.departures.left_for_good(T0 + grace - 1, grace).is_empty());
        assert_eq!(w.departures.left_for_good(T0 + grace, grace), ["w1"]);
        // Read again (a later cycle lost its claim and releases again): a
        // hand-over under way is not begun anew.
        let mut again = CycleResult {
            nodes_with_pages: Some(vec!["a".into(), "w1".into()]),
            ..CycleResult::default()
        };
        cycle_done(&mut w, &mut again, &["a".to_string()], T0 + grace + 1);
        assert!(w.departures.left_for_good(T0 + 3 * grace, grace).is_empty());
        assert_eq!(w.departures.handing_over(), ["w1"]);
    }

    /// `start` over a store a one-shot `crawl` made: its pages are the
    /// master's own, not a departed node's to fetch again.
    #[test]
    fn a_master_over_a_one_shot_crawls_store_takes_its_pages_as_its_own() {
        let mut w = window();
        let grace = w.departed_after();
        let mut result = CycleResult {
            nodes_with_pages: Some(vec![ONE_SHOT_NODE.into()]),
            ..CycleResult::default()
        };
        cycle_done(&mut w, &mut result, &["master".to_string()], T0);
        assert!(w.departures.left_for_good(T0 + grace, grace).is_empty());
        assert!(w.departures.handing_over().is_empty());
    }

    #[test]
    fn at_stop_an_unavailable_store_leaves_the_work_to_the_last_cycle() {
        let mut w = window();
        let written = cycle_at_stop(&mut w, Ok(CycleResult::default()), T0);
        assert!(matches!(written, Ok(true)));
        let away = failed(StoreError::unavailable("commit", "connection refused"));
        assert!(matches!(cycle_at_stop(&mut w, Err(away), T0), Ok(false)));
        // The last cycle asks the store at once, outage or not.
        w.ask_store_now();
        assert!(w.start_cycle(true, false, false, T0).is_some());
        let bug = failed(StoreError::backend("commit", "a bad document"));
        assert!(cycle_at_stop(&mut w, Err(bug), T0).is_err());
    }
}
