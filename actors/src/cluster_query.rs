//! A query across the cluster: every node keeps an index shard of the
//! pages it fetched (its indexer, in [`SHARD_GROUP`](crate::protocol)),
//! and the node that takes the query asks each shard in steps, as a
//! search engine's coordinator does (Elasticsearch's DFS query-then-fetch):
//! the statistics of each [`ShardPhase`], merged over the shards and sent
//! with the next step, then each shard's best pages scored with all of
//! them, merged here ([`merge_tops`]). Pure rules with their tests; the
//! calls are [`ask_shards`].

use crate::behaviour::index::{
    SearchAnswer, SearchHit, ShardNodes, ShardPhase, ShardStats, ShardTop,
};
use crate::protocol::{self, IndexerMsg, ShardAnswer, ShardRequest, ShardStep};
use crate::types::Millis;
use ractor::ActorRef;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// How long a query waits for the shards, all its steps together: a node
/// that has not answered by then is named missing, and the answer is made
/// of the others.
pub const SHARD_DEADLINE: Duration = Duration::from_secs(2);

/// How often the store is asked which nodes hold pages ([`ShardRoster`]).
pub(crate) const ROSTER_REFRESH_MS: Millis = 30_000;

/// How often while a node expected is not live: once a departed node's
/// pages are handed over (none is its in the store), it is no longer
/// named missing.
pub(crate) const ROSTER_REFRESH_MISSING_MS: Millis = 2_000;

/// Each shard asked for more pages than the answer needs: its best pages
/// are chosen with its own largest text score, the merge rescales them
/// with the cluster's, which can reorder a shard's pages near its cut.
pub(crate) fn per_shard_limit(limit: usize) -> usize {
    limit.saturating_mul(2).max(limit + 10)
}

/// The nodes whose shards a query should hear from: those that hold
/// pages of this crawl (from the store, read at most every
/// [`ROSTER_REFRESH_MS`]) and any shard seen live since. A node that went
/// away holding pages is named missing rather than silently left out; one
/// the store says holds none (a departed node whose pages were handed
/// over) is neither answered nor missing.
#[derive(Debug, Default)]
pub(crate) struct ShardRoster {
    from_store: BTreeSet<String>,
    seen: BTreeSet<String>,
    read_at: Option<Millis>,
}

impl ShardRoster {
    /// Whether the store's list is due to be read again, with the shards
    /// `live` now: sooner while a node expected is not among them.
    pub(crate) fn stale(&self, now: Millis, live: &[String]) -> bool {
        let away = self
            .from_store
            .union(&self.seen)
            .any(|node| !live.contains(node));
        let every = if away {
            ROSTER_REFRESH_MISSING_MS
        } else {
            ROSTER_REFRESH_MS
        };
        self.read_at
            .is_none_or(|at| now.saturating_sub(at) >= every)
    }

    /// The store's nodes with pages, read at `now`. A node seen before
    /// that holds none is forgotten (it is seen again when live).
    pub(crate) fn read(&mut self, nodes: impl IntoIterator<Item = String>, now: Millis) {
        self.from_store = nodes.into_iter().filter(|n| !n.is_empty()).collect();
        self.seen.retain(|node| self.from_store.contains(node));
        self.read_at = Some(now);
    }

    /// Every node expected to answer, with the shards live now; sorted.
    pub(crate) fn expected(&mut self, live: &[String]) -> Vec<String> {
        self.seen.extend(live.iter().cloned());
        self.from_store.union(&self.seen).cloned().collect()
    }
}

/// What each step heard: the nodes that answered every step so far, and
/// the error every shard gave, if all gave one (a bad query).
#[derive(Debug)]
pub(crate) struct Heard {
    pub(crate) answered: Vec<String>,
    pub(crate) error: Option<String>,
}

/// Of the nodes asked, those that answered ok; when none did and some
/// answered with an error, that error (a query every shard refuses).
pub(crate) fn heard<T>(
    answers: Vec<(String, Option<Result<T, String>>)>,
) -> (Vec<(String, T)>, Heard) {
    let mut ok = Vec::new();
    let mut error = None;
    for (node, answer) in answers {
        match answer {
            Some(Ok(a)) => ok.push((node, a)),
            Some(Err(e)) => error = error.or(Some(e)),
            None => {}
        }
    }
    ok.sort_by(|a, b| a.0.cmp(&b.0));
    let answered = ok.iter().map(|(n, _)| n.clone()).collect();
    let error = if ok.is_empty() { error } else { None };
    (ok, Heard { answered, error })
}

/// The nodes of `expected` that answered, and those that did not.
pub(crate) fn shard_nodes(expected: &[String], answered: &[String]) -> ShardNodes {
    let answered_set: BTreeSet<&String> = answered.iter().collect();
    let mut all: BTreeSet<String> = expected.iter().cloned().collect();
    all.extend(answered.iter().cloned());
    ShardNodes {
        answered: answered.to_vec(),
        missing: all
            .into_iter()
            .filter(|n| !answered_set.contains(n))
            .collect(),
    }
}

/// The shards' best pages as one answer: each page scored with the
/// cluster's largest text score, one copy of a URL (the copy of the node
/// that fetched it last, by `fetched_by`, else the best scored: a host
/// that moved between nodes leaves its old copies behind), best first,
/// ties by URL; `limit` of them.
pub fn merge_tops(
    tops: Vec<(String, ShardTop)>,
    limit: usize,
    fetched_by: &HashMap<String, String>,
) -> SearchAnswer {
    let norm_max = tops.iter().map(|(_, t)| t.norm_max).fold(0.0f32, f32::max);
    let did_you_mean = tops.iter().find_map(|(_, t)| t.did_you_mean.clone());
    let mut best: BTreeMap<String, (bool, SearchHit)> = BTreeMap::new();
    for (node, top) in tops {
        for shard_hit in top.hits {
            let text = if norm_max > 0.0 {
                shard_hit.norm / norm_max
            } else {
                0.0
            };
            let mut hit = shard_hit.hit;
            hit.score = top.norm_weight * text + shard_hit.rest;
            let newest = fetched_by.get(&hit.url) == Some(&node);
            match best.get(&hit.url) {
                Some((was_newest, kept)) if *was_newest || (!newest && kept.score >= hit.score) => {
                }
                _ => {
                    best.insert(hit.url.clone(), (newest, hit));
                }
            }
        }
    }
    let mut results: Vec<SearchHit> = best.into_values().map(|(_, hit)| hit).collect();
    results.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.url.cmp(&b.url)));
    results.truncate(limit);
    SearchAnswer {
        results,
        did_you_mean,
        nodes: None,
    }
}

/// The nodes that hold an older copy of a page another node fetched last
/// (by `fetched_by`), with those pages: they are told to drop them.
pub(crate) fn stale_copies(
    tops: &[(String, ShardTop)],
    fetched_by: &HashMap<String, String>,
) -> BTreeMap<String, Vec<String>> {
    let mut stale: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (node, top) in tops {
        for h in &top.hits {
            if fetched_by
                .get(&h.hit.url)
                .is_some_and(|newest| newest != node)
            {
                stale
                    .entry(node.clone())
                    .or_default()
                    .push(h.hit.url.clone());
            }
        }
    }
    stale
}

/// The content duplicates of a commit fetched on other nodes, by node
/// (`fetched`: URL and node of each page fetched elsewhere): their shards
/// indexed them before the commit told them apart, and drop them.
pub(crate) fn duplicates_by_node(
    fetched: &[(String, String)],
    duplicates: &[String],
) -> BTreeMap<String, Vec<String>> {
    let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (url, node) in fetched {
        if duplicates.contains(url) {
            by_node.entry(node.clone()).or_default().push(url.clone());
        }
    }
    by_node
}

/// Tell each node of `stale` to drop those pages from its shard.
pub(crate) fn forget(local_indexer: &str, stale: BTreeMap<String, Vec<String>>) {
    let shards = protocol::shards(local_indexer);
    for (node, urls) in stale {
        if let Some((_, shard)) = shards.iter().find(|(n, _)| *n == node) {
            tracing::debug!(%node, pages = urls.len(), "a shard drops pages");
            let _ = shard.cast(IndexerMsg::Forget(urls));
        }
    }
}

/// The URLs more than one shard answered with.
pub(crate) fn listed_twice(tops: &[(String, ShardTop)]) -> Vec<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, top) in tops {
        for h in &top.hits {
            *count.entry(h.hit.url.as_str()).or_default() += 1;
        }
    }
    count
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(u, _)| u.to_string())
        .collect()
}

/// How long one step waits for the shards, of `left` before the deadline
/// with `steps` steps to go (this one included): half of what is left,
/// the last one all of it. A shard that does not answer costs the query
/// half its time once, and the shards that do answer have the rest.
pub(crate) fn step_wait(left: Duration, steps: usize) -> Duration {
    if steps <= 1 { left } else { left / 2 }
}

/// Ask `shards` one step each, all at once, for `wait` at most.
async fn ask_step(
    shards: &[(String, ActorRef<IndexerMsg>)],
    request: &ShardRequest,
    wait: Duration,
) -> Vec<(String, Option<Result<ShardAnswer, String>>)> {
    let mut calls = tokio::task::JoinSet::new();
    for (node, shard) in shards.iter().cloned() {
        let request = request.clone();
        calls.spawn(async move {
            let answer = ractor::call_t!(
                shard,
                |reply| IndexerMsg::Shard { request, reply },
                wait.as_millis().max(1) as u64
            );
            (node, answer.ok())
        });
    }
    calls.join_all().await
}

/// A query across every live shard (this node's indexer registered as
/// `local_indexer`): the phases' statistics, then each shard's best
/// pages, by [`SHARD_DEADLINE`]. The shards that answered every step, and
/// their best pages; or the error all of them gave.
pub(crate) async fn ask_shards(
    local_indexer: &str,
    query: &str,
    limit: usize,
) -> Result<(Vec<String>, Vec<(String, ShardTop)>), String> {
    let deadline = Instant::now() + SHARD_DEADLINE;
    let mut shards = protocol::shards(local_indexer);
    let mut stats = ShardStats::default();
    let mut request = ShardRequest {
        query: query.to_string(),
        limit: per_shard_limit(limit),
        step: ShardStep::Top {
            stats: ShardStats::default(),
        },
    };
    let left = |steps| step_wait(deadline.saturating_duration_since(Instant::now()), steps);
    // One shard's own statistics are the cluster's: no phase to ask.
    let phases: &[ShardPhase] = if shards.len() > 1 {
        &ShardPhase::ALL
    } else {
        &[]
    };
    for (i, phase) in phases.iter().copied().enumerate() {
        request.step = ShardStep::Stats {
            phase,
            known: stats.clone(),
        };
        let steps = phases.len() + 1 - i;
        let (answers, heard) = heard(ask_step(&shards, &request, left(steps)).await);
        if let Some(e) = heard.error {
            return Err(e);
        }
        shards.retain(|(n, _)| heard.answered.contains(n));
        for (_, answer) in answers {
            if let ShardAnswer::Stats(s) = answer {
                stats.merge(s);
            }
        }
    }
    request.step = ShardStep::Top { stats };
    let (answers, heard) = heard(ask_step(&shards, &request, left(1)).await);
    if let Some(e) = heard.error {
        return Err(e);
    }
    let tops = answers
        .into_iter()
        .filter_map(|(node, a)| match a {
            ShardAnswer::Top(top) => Some((node, top)),
            ShardAnswer::Stats(_) => None,
        })
        .collect();
    Ok((heard.answered, tops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behaviour::index::ShardHit;

    fn hit(url: &str, norm: f32, rest: f32) -> ShardHit {
        ShardHit {
            hit: SearchHit {
                url: url.into(),
                title: String::new(),
                snippet: String::new(),
                score: 0.0,
                highlights: Vec::new(),
                section_url: None,
                heading_path: Vec::new(),
            },
            norm,
            rest,
        }
    }

    fn top(hits: Vec<ShardHit>, norm_max: f32) -> ShardTop {
        ShardTop {
            hits,
            did_you_mean: None,
            norm_max,
            norm_weight: 0.5,
        }
    }

    fn urls(a: &SearchAnswer) -> Vec<&str> {
        a.results.iter().map(|h| h.url.as_str()).collect()
    }

    #[test]
    fn pages_are_rescored_with_the_clusters_largest_text_score() {
        // Alone, w1's page would score 0.5 · 1 + 0.1; beside w2's larger
        // text score it is 0.5 · 0.25 + 0.1.
        let tops = vec![
            ("w1".to_string(), top(vec![hit("http://a/", 1.0, 0.1)], 1.0)),
            (
                "w2".to_string(),
                top(
                    vec![hit("http://b/", 4.0, 0.0), hit("http://c/", 2.0, 0.2)],
                    4.0,
                ),
            ),
        ];
        let merged = merge_tops(tops, 10, &HashMap::new());
        assert_eq!(urls(&merged), ["http://b/", "http://c/", "http://a/"]);
        assert!((merged.results[2].score - 0.225).abs() < 1e-6);
        assert!((merged.results[0].score - 0.5).abs() < 1e-6);
    }

    fn tops_again() -> Vec<(String, ShardTop)> {
        vec![
            ("w1".to_string(), top(vec![hit("http://a/", 4.0, 0.0)], 4.0)),
            ("w2".to_string(), top(vec![hit("http://a/", 1.0, 0.0)], 4.0)),
        ]
    }

    #[test]
    fn a_url_is_listed_once_the_newest_copy_first() {
        let tops = vec![
            ("w1".to_string(), top(vec![hit("http://a/", 4.0, 0.0)], 4.0)),
            ("w2".to_string(), top(vec![hit("http://a/", 1.0, 0.0)], 4.0)),
        ];
        assert_eq!(listed_twice(&tops), ["http://a/"]);
        let unknown = merge_tops(tops.clone(), 10, &HashMap::new());
        assert_eq!(urls(&unknown), ["http://a/"]);
        assert_eq!(
            unknown.results[0].score, 0.5,
            "the better copy without a record"
        );
        let by = HashMap::from([("http://a/".to_string(), "w2".to_string())]);
        let newest = merge_tops(tops, 10, &by);
        assert_eq!(urls(&newest), ["http://a/"]);
        assert_eq!(newest.results[0].score, 0.125, "w2 fetched it last");
        assert_eq!(
            stale_copies(&tops_again(), &by),
            BTreeMap::from([("w1".to_string(), vec!["http://a/".to_string()])]),
            "w1 drops its copy"
        );
        assert!(stale_copies(&tops_again(), &HashMap::new()).is_empty());
    }

    #[test]
    fn the_answer_is_cut_to_the_limit_ties_by_url() {
        let tops = vec![(
            "m".to_string(),
            top(
                vec![
                    hit("http://c/", 1.0, 0.0),
                    hit("http://a/", 1.0, 0.0),
                    hit("http://b/", 1.0, 0.0),
                ],
                1.0,
            ),
        )];
        assert_eq!(
            urls(&merge_tops(tops, 2, &HashMap::new())),
            ["http://a/", "http://b/"]
        );
    }

    #[test]
    fn duplicates_fetched_elsewhere_are_dropped_by_their_node() {
        let fetched = vec![
            ("http://a/1".to_string(), "w1".to_string()),
            ("http://a/2".to_string(), "w1".to_string()),
            ("http://b/1".to_string(), "w2".to_string()),
        ];
        let dups = vec!["http://a/2".to_string(), "http://m/9".to_string()];
        assert_eq!(
            duplicates_by_node(&fetched, &dups),
            BTreeMap::from([("w1".to_string(), vec!["http://a/2".to_string()])])
        );
        assert!(duplicates_by_node(&fetched, &[]).is_empty());
    }

    #[test]
    fn shards_that_did_not_answer_are_missing() {
        let answers: Vec<(String, Option<Result<u32, String>>)> = vec![
            ("w2".into(), None),
            ("master".into(), Some(Ok(1))),
            ("w1".into(), Some(Err("index broke".into()))),
        ];
        let (ok, heard) = heard(answers);
        assert_eq!(ok, vec![("master".to_string(), 1)]);
        assert_eq!(heard.answered, ["master"]);
        assert!(heard.error.is_none(), "one shard answered: no error");
        let nodes = shard_nodes(
            &["master".into(), "w1".into(), "w3".into()],
            &heard.answered,
        );
        assert_eq!(nodes.answered, ["master"]);
        assert_eq!(nodes.missing, ["w1", "w3"], "w3 holds pages and is gone");
    }

    #[test]
    fn a_query_every_shard_refuses_is_an_error() {
        let answers: Vec<(String, Option<Result<u32, String>>)> = vec![
            ("m".into(), Some(Err("empty query".into()))),
            ("w1".into(), None),
        ];
        let (_, heard) = heard(answers);
        assert_eq!(heard.error.as_deref(), Some("empty query"));
    }

    #[test]
    fn the_roster_keeps_nodes_with_pages_and_every_shard_seen() {
        let mut r = ShardRoster::default();
        let all: Vec<String> = ["master", "w1", "w2"].map(String::from).into();
        assert!(r.stale(0, &all));
        r.read(
            ["master".to_string(), "w1".to_string(), String::new()],
            1_000,
        );
        assert!(!r.stale(1_000 + ROSTER_REFRESH_MS - 1, &all));
        assert!(r.stale(1_000 + ROSTER_REFRESH_MS, &all));
        assert_eq!(r.expected(&["w2".into()]), ["master", "w1", "w2"]);
        assert_eq!(
            r.expected(&[]),
            ["master", "w1", "w2"],
            "w2 was seen: still expected once gone"
        );
    }

    #[test]
    fn a_node_away_whose_pages_were_handed_over_is_no_longer_expected() {
        let mut r = ShardRoster::default();
        r.read(["master".to_string(), "w1".to_string()], 1_000);
        let live = ["master".to_string(), "w2".to_string()];
        assert_eq!(r.expected(&live), ["master", "w1", "w2"]);
        // w1 is away: the store is asked again soon, not in 30 s.
        assert!(!r.stale(1_000 + ROSTER_REFRESH_MISSING_MS - 1, &live));
        assert!(r.stale(1_000 + ROSTER_REFRESH_MISSING_MS, &live));
        // Its pages were all fetched again by w2: w1 holds none.
        r.read(["master".to_string(), "w2".to_string()], 3_000);
        assert_eq!(r.expected(&live), ["master", "w2"]);
        // Nothing away: the store is asked at the usual pace.
        assert!(!r.stale(3_000 + ROSTER_REFRESH_MISSING_MS, &live));
        // A node seen live without pages, gone, is forgotten at the next read.
        r.expected(&["master".into(), "w2".into(), "w3".into()]);
        r.read(["master".to_string(), "w2".to_string()], 40_000);
        assert_eq!(r.expected(&live), ["master", "w2"]);
    }

    #[test]
    fn a_step_waits_half_of_what_is_left_and_the_last_all_of_it() {
        let two = Duration::from_secs(2);
        assert_eq!(step_wait(two, 6), Duration::from_secs(1));
        assert_eq!(
            step_wait(Duration::from_millis(900), 1),
            Duration::from_millis(900)
        );
        // A silent shard at the first step leaves the others a second.
        let mut left = two - step_wait(two, 6);
        for steps in (1..=5).rev() {
            let wait = step_wait(left, steps);
            assert!(wait >= Duration::from_millis(62), "{steps}: {wait:?}");
            left -= Duration::from_millis(5); // a step answered at once
        }
    }

    #[test]
    fn stats_sum_counts_and_keep_the_largest_values() {
        let mut a = ShardStats::default();
        a.sums.insert("docs".into(), 3);
        a.maxes.insert("best".into(), 1.0);
        let mut b = ShardStats::default();
        b.sums.insert("docs".into(), 4);
        b.sums.insert("df".into(), 1);
        b.maxes.insert("best".into(), 0.5);
        a.merge(b);
        assert_eq!(a.sums["docs"], 7);
        assert_eq!(a.sums["df"], 1);
        assert_eq!(a.maxes["best"], 1.0);
    }
}
