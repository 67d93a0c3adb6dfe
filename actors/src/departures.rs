//! Nodes that left the cluster for good, and the hand-over of the pages
//! they fetched. A node an operator stopped (`node stop`) has left for
//! good once its pool is gone; any other node once it has been gone for
//! `CrawlConfig::departed_after`. Its index shard is gone with it, so the
//! pages the store says it fetched are queued again
//! ([`Frontier::hand_over`](crate::Frontier::hand_over), a step of the
//! store cycle): their hosts' new owners fetch them, politely, and index
//! them in their shards. Until the store says the node fetched nothing
//! more, its pages wait, and `status` counts them. Pure over `now`; the
//! master feeds it the node check and the store's answers.

use crate::behaviour::HandOver;
use crate::types::Millis;
use std::collections::{BTreeMap, BTreeSet};

/// Pages queued again per store call.
pub(crate) const HAND_OVER_BATCH: usize = 1_000;

/// Once every page of a node is queued, how often the store is asked how
/// many are still waiting.
pub(crate) const RECOUNT_EVERY_MS: Millis = 1_000;

/// One store call of a hand-over: queue up to `limit` pages `node`
/// fetched, after the URL `after` (`limit` 0: count them only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandOverStep {
    pub node: String,
    pub after: Option<String>,
    pub limit: usize,
}

/// How far a departed node's hand-over has got.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Handing {
    /// The last URL queued; the next call goes on after it.
    after: Option<String>,
    /// Every page has been queued; only the count is asked from then on.
    all_queued: bool,
    /// Pages the store still says the node fetched (`None`: not read yet).
    waiting: Option<u64>,
}

/// The master's view of departures.
#[derive(Debug, Default)]
pub(crate) struct Departures {
    /// Nodes an operator stopped: left for good as soon as they are gone.
    stopping: BTreeSet<String>,
    /// Nodes gone, since when, not (yet) taken as left for good.
    gone: BTreeMap<String, Millis>,
    /// Nodes left for good whose pages are being handed over.
    handing: BTreeMap<String, Handing>,
    next_count: Millis,
}

impl Departures {
    /// An operator stopped `node`: it does not come back.
    pub(crate) fn stopping(&mut self, node: &str) {
        self.stopping.insert(node.to_string());
    }

    /// The node check's news at `now`: nodes `gone` and nodes `joined`. A
    /// node back under its name answers for its shard again, so its
    /// hand-over, if any, ends (pages already fetched again elsewhere are
    /// listed once, from their newest copy). A node gone since earlier, or
    /// whose hand-over is under way, stays as it is: a new master reports
    /// the nodes the store names and the cluster lacks as gone, and may
    /// read them again.
    pub(crate) fn nodes_changed(&mut self, gone: &[String], joined: &[String], now: Millis) {
        for node in gone.iter().filter(|n| !self.handing.contains_key(*n)) {
            self.gone.entry(node.clone()).or_insert(now);
        }
        for node in joined {
            self.gone.remove(node);
            self.stopping.remove(node);
            self.handing.remove(node);
        }
    }

    /// The nodes that left for good by `now` (stopped by an operator, or
    /// gone for `grace`): their hand-over begins.
    pub(crate) fn left_for_good(&mut self, now: Millis, grace: Millis) -> Vec<String> {
        let due: Vec<String> = self
            .gone
            .iter()
            .filter(|(node, since)| {
                self.stopping.contains(*node) || now.saturating_sub(**since) >= grace
            })
            .map(|(node, _)| node.clone())
            .collect();
        for node in &due {
            self.gone.remove(node);
            self.stopping.remove(node);
            self.handing.insert(node.clone(), Handing::default());
        }
        due
    }

    /// The next store call of a hand-over at `now`: pages to queue while
    /// some are left to queue (the first node's first), else a count once
    /// every [`RECOUNT_EVERY_MS`].
    pub(crate) fn next_step(&mut self, now: Millis) -> Option<HandOverStep> {
        if let Some((node, h)) = self.handing.iter().find(|(_, h)| !h.all_queued) {
            return Some(HandOverStep {
                node: node.clone(),
                after: h.after.clone(),
                limit: HAND_OVER_BATCH,
            });
        }
        if now < self.next_count {
            return None;
        }
        let node = self.handing.keys().next()?.clone();
        self.next_count = now + RECOUNT_EVERY_MS;
        Some(HandOverStep {
            node,
            after: None,
            limit: 0,
        })
    }

    /// The store's answer to a step for `node`: true when the node's pages
    /// are all handed over (none waits), which ends its hand-over.
    pub(crate) fn handed(&mut self, node: &str, done: HandOver) -> bool {
        let Some(h) = self.handing.get_mut(node) else {
            return false;
        };
        if !h.all_queued {
            h.all_queued = done.last.is_none();
            h.after = done.last;
        }
        h.waiting = Some(done.waiting);
        if h.all_queued && done.waiting == 0 {
            self.handing.remove(node);
            return true;
        }
        false
    }

    /// The nodes whose pages are being handed over.
    pub(crate) fn handing_over(&self) -> Vec<String> {
        self.handing.keys().cloned().collect()
    }

    /// Pages waiting to be fetched again by their hosts' new owners, as
    /// last read from the store.
    pub(crate) fn pages_waiting(&self) -> u64 {
        self.handing.values().filter_map(|h| h.waiting).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Millis = 1_000_000;
    const GRACE: Millis = 60_000;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| n.to_string()).collect()
    }

    fn answer(queued: u64, last: Option<&str>, waiting: u64) -> HandOver {
        HandOver {
            queued,
            last: last.map(str::to_string),
            waiting,
        }
    }

    #[test]
    fn a_node_gone_is_left_for_good_only_after_the_grace() {
        let mut d = Departures::default();
        d.nodes_changed(&names(&["w1"]), &[], T0);
        assert!(d.left_for_good(T0 + GRACE - 1, GRACE).is_empty());
        assert_eq!(d.next_step(T0 + GRACE - 1), None);
        assert_eq!(d.left_for_good(T0 + GRACE, GRACE), names(&["w1"]));
        assert_eq!(d.handing_over(), names(&["w1"]));
        // Taken once.
        assert!(d.left_for_good(T0 + 2 * GRACE, GRACE).is_empty());
    }

    #[test]
    fn a_node_an_operator_stopped_is_left_for_good_once_gone() {
        let mut d = Departures::default();
        d.stopping("w1");
        assert!(d.left_for_good(T0, GRACE).is_empty(), "not gone yet");
        d.nodes_changed(&names(&["w1"]), &[], T0);
        assert_eq!(d.left_for_good(T0, GRACE), names(&["w1"]));
    }

    #[test]
    fn a_node_back_within_the_grace_keeps_its_pages() {
        let mut d = Departures::default();
        d.nodes_changed(&names(&["w1"]), &[], T0);
        d.nodes_changed(&[], &names(&["w1"]), T0 + 1_000);
        assert!(d.left_for_good(T0 + GRACE, GRACE).is_empty());
        assert_eq!(d.next_step(T0 + GRACE), None);
    }

    #[test]
    fn a_node_back_after_it_left_ends_its_hand_over() {
        let mut d = Departures::default();
        d.stopping("w1");
        d.nodes_changed(&names(&["w1"]), &[], T0);
        d.left_for_good(T0, GRACE);
        d.nodes_changed(&[], &names(&["w1"]), T0 + 1);
        assert!(d.handing_over().is_empty());
        assert_eq!(d.next_step(T0 + 1), None);
    }

    #[test]
    fn pages_are_queued_in_batches_then_counted_down_to_none() {
        let mut d = Departures::default();
        d.stopping("w1");
        d.nodes_changed(&names(&["w1"]), &[], T0);
        d.left_for_good(T0, GRACE);
        let first = d.next_step(T0).unwrap();
        assert_eq!((first.after, first.limit), (None, HAND_OVER_BATCH));
        assert!(!d.handed("w1", answer(1_000, Some("http://a/m"), 1_500)));
        assert_eq!(d.pages_waiting(), 1_500);
        // Goes on where the last batch ended, at once.
        let second = d.next_step(T0).unwrap();
        assert_eq!(second.after.as_deref(), Some("http://a/m"));
        assert!(!d.handed("w1", answer(500, None, 1_400)));
        // All queued: counted once a second, not queued again.
        let count = d.next_step(T0).unwrap();
        assert_eq!((count.node.as_str(), count.limit), ("w1", 0));
        assert_eq!(d.next_step(T0 + RECOUNT_EVERY_MS - 1), None);
        assert!(!d.handed("w1", answer(0, None, 3)));
        assert_eq!(d.pages_waiting(), 3);
        let count = d.next_step(T0 + RECOUNT_EVERY_MS).unwrap();
        assert_eq!(count.limit, 0);
        assert!(d.handed("w1", answer(0, None, 0)), "handed over");
        assert_eq!(d.pages_waiting(), 0);
        assert!(d.handing_over().is_empty());
        assert_eq!(d.next_step(T0 + 10 * RECOUNT_EVERY_MS), None);
    }

    #[test]
    fn a_node_that_fetched_nothing_is_handed_over_at_its_first_answer() {
        let mut d = Departures::default();
        d.nodes_changed(&names(&["w1"]), &[], T0);
        d.left_for_good(T0 + GRACE, GRACE);
        assert!(d.next_step(T0 + GRACE).is_some());
        assert!(d.handed("w1", answer(0, None, 0)));
    }

    #[test]
    fn an_answer_for_a_node_not_handed_over_changes_nothing() {
        let mut d = Departures::default();
        assert!(!d.handed("w9", answer(0, None, 0)));
        assert_eq!(d.pages_waiting(), 0);
    }
}
