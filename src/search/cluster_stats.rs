//! One index as a shard of the cluster's: the statistics a query needs of
//! every shard ([`ShardStats`], keys below), and the views that score a
//! shard's pages with them as one index over all the shards' pages would.
//!
//! Keys (counts are summed over the shards, values keep their largest):
//!
//! | phase | key | what |
//! |---|---|---|
//! | vocabulary | `v.docs` | pages |
//! | | `v.df.WORD` | pages and links holding the word (spelling field) |
//! | | `v.nb.WORD.OTHER` | a word within typo distance, and its count |
//! | | `v.co.WORD\|OTHERS` | 1 when a page holds the word and all the others |
//! | terms | `c.df.JOINED` | the count of a compound of two query words |
//! | | `p.docs`, `p.tok.F`, `p.df.F.TERM` | pages, tokens of field F, pages holding TERM in F |
//! | | `a.docs`, `a.tok.F`, `a.df.F.TERM` | the same over the links (anchors) |
//! | anchors | `e.best.URL`, `e.ctx.URL` | the best anchor text and context score of the links to URL |
//! | | `e.m.URL.I` | the links to URL hold rank term I |
//! | candidates | `k.URL` | a page a shard measures for the query |
//! | | `s.URL` | its candidate score, when found by its own text |
//! | links | `l.URL` | the links to a candidate (its in-links) |
//!
//! Vocabulary is per word, before typo correction; terms after it (each
//! shard corrects the query alike, from the same counts); anchors with the
//! terms' counts. Without counts of a key (a key no phase gathered) a
//! shard's own count stands in: with no statistics at all (a cluster of
//! one shard asks for its best pages at once) a shard answers as the
//! index alone.
//!
//! The actors crate's `cluster_query.rs` asks every node's shard in these
//! phases and merges their best pages.

use super::typo::Vocabulary;
use std::collections::BTreeMap;
use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::Field;
use tantivy::{Searcher, Term};
pub use web_crawler_actors::{ShardHit, ShardPhase, ShardStats, ShardTop};

/// A phase's statistics as they are gathered: counts and values by key.
pub(crate) fn sum(stats: &mut ShardStats, key: String, n: u64) {
    *stats.sums.entry(key).or_default() += n;
}

pub(crate) fn max(stats: &mut ShardStats, key: String, v: f32) {
    let at = stats.maxes.entry(key).or_insert(v);
    *at = at.max(v);
}

/// Which of the two indexes a key is about.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Side {
    Pages,
    Anchors,
}

impl Side {
    fn prefix(self) -> &'static str {
        match self {
            Self::Pages => "p",
            Self::Anchors => "a",
        }
    }

    pub(crate) fn docs_key(self) -> String {
        format!("{}.docs", self.prefix())
    }

    pub(crate) fn tokens_key(self, field: Field) -> String {
        format!("{}.tok.{}", self.prefix(), field.field_id())
    }

    pub(crate) fn df_key(self, field: Field, term: &str) -> String {
        format!("{}.df.{}.{term}", self.prefix(), field.field_id())
    }
}

/// The BM25 statistics of one of a shard's indexes: the cluster's where
/// the statistics have them, else the shard's own.
pub(crate) struct Stats<'a> {
    pub(crate) searcher: &'a Searcher,
    pub(crate) part: Side,
    pub(crate) global: Option<&'a ShardStats>,
}

impl Stats<'_> {
    fn summed(&self, key: &str) -> Option<u64> {
        self.global?.sums.get(key).copied()
    }
}

impl Bm25StatisticsProvider for Stats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        match self.summed(&self.part.tokens_key(field)) {
            Some(n) => Ok(n),
            None => self.searcher.total_num_tokens(field),
        }
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        match self.summed(&self.part.docs_key()) {
            Some(n) => Ok(n),
            None => self.searcher.total_num_docs(),
        }
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let key = term
            .value()
            .as_str()
            .map(|text| self.part.df_key(term.field(), text));
        match key.and_then(|k| self.summed(&k)) {
            Some(n) => Ok(n),
            None => self.searcher.doc_freq(term),
        }
    }
}

/// Typo correction's view of the cluster's vocabulary (the vocabulary
/// phase's counts).
pub(crate) struct GlobalVocabulary<'a>(pub(crate) &'a ShardStats);

impl GlobalVocabulary<'_> {
    /// Whether the statistics hold a vocabulary phase.
    pub(crate) fn of(stats: &ShardStats) -> Option<GlobalVocabulary<'_>> {
        stats
            .sums
            .contains_key("v.docs")
            .then_some(GlobalVocabulary(stats))
    }
}

pub(crate) fn vocab_df_key(word: &str) -> String {
    format!("v.df.{word}")
}

pub(crate) fn neighbour_key(word: &str, other: &str) -> String {
    format!("v.nb.{word}.{other}")
}

/// The key of "a page holds `word` and all of `others`" (any order).
pub(crate) fn co_key(word: &str, others: &[&str]) -> String {
    let mut others = others.to_vec();
    others.sort_unstable();
    format!("v.co.{word}|{}", others.join(" "))
}

pub(crate) fn compound_key(joined: &str) -> String {
    format!("c.df.{joined}")
}

impl Vocabulary for GlobalVocabulary<'_> {
    fn doc_freq(&self, word: &str) -> u64 {
        self.0.sums.get(&vocab_df_key(word)).copied().unwrap_or(0)
    }

    fn neighbours(&self, word: &str, _max_distance: u8) -> Vec<(String, u64)> {
        let prefix = neighbour_key(word, "");
        self.0
            .sums
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, n)| (k[prefix.len()..].to_string(), *n))
            .collect()
    }

    fn co_occurs(&self, word: &str, others: &[&str]) -> bool {
        self.0
            .sums
            .get(&co_key(word, others))
            .is_some_and(|n| *n > 0)
    }

    fn doc_count(&self) -> u64 {
        self.0.sums.get("v.docs").copied().unwrap_or(0)
    }
}

/// The key of a page some shard has as a candidate.
pub(crate) fn candidate_key(url: &str) -> String {
    format!("k.{url}")
}

/// The candidates of every shard (the candidates phase's keys).
pub(crate) fn candidates(stats: &ShardStats) -> Vec<String> {
    stats
        .sums
        .range("k.".to_string()..)
        .map_while(|(k, _)| k.strip_prefix("k.").map(str::to_string))
        .collect()
}

/// The key of a candidate's score, for one found by its own text.
pub(crate) fn hit_key(url: &str) -> String {
    format!("s.{url}")
}

/// The score a page found by its own text needs to be among the cluster's
/// best `wanted` (none when fewer were found): a shard measures those of
/// its best pages only, as one index over every page would.
pub(crate) fn cutoff(stats: &ShardStats, wanted: usize) -> Option<f32> {
    let mut scores: Vec<f32> = stats
        .maxes
        .range("s.".to_string()..)
        .map_while(|(k, v)| k.starts_with("s.").then_some(*v))
        .collect();
    if scores.len() <= wanted {
        return None;
    }
    scores.sort_unstable_by(|a, b| b.total_cmp(a));
    Some(scores[wanted - 1])
}

/// The key of the links to a page, over every shard.
pub(crate) fn links_key(url: &str) -> String {
    format!("l.{url}")
}

/// The links' evidence for one page, gathered from every shard's anchors.
pub(crate) fn evidence_keys(url: &str) -> (String, String, String) {
    (
        format!("e.best.{url}"),
        format!("e.ctx.{url}"),
        format!("e.m.{url}."),
    )
}

/// The pages the anchors phase found evidence for, with it: best anchor
/// score, best context score, which rank terms the links hold.
pub(crate) fn evidence(
    stats: &ShardStats,
    terms: usize,
) -> BTreeMap<String, (f32, f32, Vec<bool>)> {
    let mut out: BTreeMap<String, (f32, f32, Vec<bool>)> = BTreeMap::new();
    for (key, v) in stats.maxes.range("e.".to_string()..) {
        let Some(rest) = key.strip_prefix("e.") else {
            break;
        };
        if let Some(url) = rest.strip_prefix("best.") {
            out.entry(url.to_string())
                .or_insert_with(|| (0.0, 0.0, vec![false; terms]))
                .0 = *v;
        } else if let Some(url) = rest.strip_prefix("ctx.") {
            out.entry(url.to_string())
                .or_insert_with(|| (0.0, 0.0, vec![false; terms]))
                .1 = *v;
        } else if let Some(m) = rest.strip_prefix("m.")
            && let Some((url, i)) = m.rsplit_once('.')
            && let Ok(i) = i.parse::<usize>()
        {
            let entry = out
                .entry(url.to_string())
                .or_insert_with(|| (0.0, 0.0, vec![false; terms]));
            if let Some(slot) = entry.2.get_mut(i) {
                *slot = *v > 0.0;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clusters_vocabulary_reads_the_summed_counts() {
        let mut s = ShardStats::default();
        sum(&mut s, "v.docs".into(), 10);
        sum(&mut s, vocab_df_key("rotate"), 3);
        sum(&mut s, neighbour_key("rotat", "rotate"), 3);
        sum(&mut s, neighbour_key("rotat", "rotary"), 1);
        sum(&mut s, neighbour_key("rotb", "x"), 1);
        sum(&mut s, co_key("logs", &["rotate", "daily"]), 1);
        let v = GlobalVocabulary::of(&s).unwrap();
        assert_eq!(v.doc_count(), 10);
        assert_eq!(v.doc_freq("rotate"), 3);
        assert_eq!(v.doc_freq("absent"), 0);
        assert_eq!(
            v.neighbours("rotat", 2),
            vec![("rotary".to_string(), 1), ("rotate".to_string(), 3)]
        );
        assert!(v.co_occurs("logs", &["daily", "rotate"]), "any order");
        assert!(!v.co_occurs("logs", &["daily"]));
        assert!(GlobalVocabulary::of(&ShardStats::default()).is_none());
    }

    #[test]
    fn the_clusters_best_candidates_set_the_cutoff() {
        let mut s = ShardStats::default();
        for (url, score) in [("a", 3.0), ("b", 1.0), ("c", 2.0), ("d", 0.5)] {
            max(&mut s, hit_key(url), score);
        }
        assert_eq!(cutoff(&s, 2), Some(2.0));
        assert_eq!(cutoff(&s, 4), None, "no more than wanted: all of them");
    }

    #[test]
    fn anchor_evidence_is_read_back_by_page() {
        let mut s = ShardStats::default();
        let (best, ctx, matched) = evidence_keys("http://h/a.b");
        max(&mut s, best, 2.0);
        max(&mut s, ctx, 1.0);
        max(&mut s, format!("{matched}1"), 1.0);
        max(&mut s, "e.best.http://h/c".into(), 0.5);
        let e = evidence(&s, 2);
        assert_eq!(e["http://h/a.b"], (2.0, 1.0, vec![false, true]));
        assert_eq!(e["http://h/c"], (0.5, 0.0, vec![false, false]));
    }
}
