//! The index's vocabulary as typo correction sees it (a search's view as
//! a [`Vocabulary`], and a shard's part of the cluster's), and the query
//! as searched: corrected, with compounds of adjacent words.

use super::cluster_stats::{self, GlobalVocabulary, ShardStats, compound_key};
use super::query::{self, ParsedQuery, QueryAnalyzers, RankTerms};
use super::searchers::{Searchers, term_query};
use super::typo::{self, Vocabulary};
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use tantivy::Term;
use tantivy::collector::Count;
use tantivy::query::{BooleanQuery, FuzzyTermQuery};

/// A compound of two query words ("back up" → `backup`) joins the query
/// when it is a word of at least this many documents.
const COMPOUND_MIN_DF: u64 = 2;

impl Searchers<'_> {
    /// The query as searched: corrected when a word was (and the corrected
    /// text, the answer's `did_you_mean`).
    pub(super) fn corrected(
        &self,
        text: &str,
        parsed: ParsedQuery,
        analyzers: &mut QueryAnalyzers,
    ) -> (ParsedQuery, Option<String>) {
        if let Some(corrected) = self.correct(text, &parsed)
            && let Ok(p) = query::parse(&corrected, analyzers)
        {
            return (p, Some(corrected));
        }
        (parsed, None)
    }

    /// What typo correction asks of the vocabulary for the query's words,
    /// in this shard: pages, and per word its count, its neighbours within
    /// typo distance and whether a page holds it with the others (only
    /// for a word that may be rare over the cluster: one of a tenth of
    /// the share `typo` calls rare here, or less).
    pub(super) fn vocabulary_stats(&self, q: &ParsedQuery, out: &mut ShardStats) {
        let docs = self.pages.num_docs();
        cluster_stats::sum(out, "v.docs".to_string(), docs);
        let words = distinct_words(q);
        for word in &words {
            let df = Vocabulary::doc_freq(self, word);
            cluster_stats::sum(out, cluster_stats::vocab_df_key(word), df);
            let maybe_rare = df <= (docs / 2_000).max(1);
            if !typo::correctable(word) || !maybe_rare {
                continue;
            }
            for (other, n) in self.neighbours(word, typo::max_distance(word)) {
                cluster_stats::sum(out, cluster_stats::neighbour_key(word, &other), n);
            }
            let others: Vec<&str> = words
                .iter()
                .filter(|w| *w != word)
                .map(String::as_str)
                .collect();
            for subset in subsets(&others) {
                let held = u64::from(self.co_occurs(word, &subset));
                cluster_stats::sum(out, cluster_stats::co_key(word, &subset), held);
            }
        }
    }

    /// The corrected query text, if a word was corrected.
    fn correct(&self, text: &str, q: &ParsedQuery) -> Option<String> {
        let words = distinct_words(q);
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        // The cluster's vocabulary when the statistics hold it.
        let global = self.global.and_then(GlobalVocabulary::of);
        let vocab: &dyn Vocabulary = match &global {
            Some(g) => g,
            None => self,
        };
        let fixes = typo::correct(&words, vocab);
        if fixes.iter().all(Option::is_none) {
            return None;
        }
        let fix: HashMap<&str, &str> = words
            .iter()
            .zip(&fixes)
            .filter_map(|(w, f)| Some((*w, f.as_deref()?)))
            .collect();
        let spans: Vec<(Range<usize>, String)> = q
            .words
            .iter()
            .filter_map(|w| Some((w.span.clone(), fix.get(w.text.as_str())?.to_string())))
            .collect();
        Some(query::replace_spans(text, &spans))
    }

    /// The query's terms, with compounds of adjacent words that the
    /// index holds as one word as alternatives.
    pub(super) fn rank_terms(&self, q: &ParsedQuery, analyzers: &mut QueryAnalyzers) -> RankTerms {
        let mut terms = RankTerms::of(q);
        for (first, joined) in q.compound_candidates() {
            let df = match self.global.and_then(|g| g.sums.get(&compound_key(&joined))) {
                Some(df) => *df,
                None => typo::Vocabulary::doc_freq(self, &joined),
            };
            if df >= COMPOUND_MIN_DF
                && let Some(term) = analyzers.term(&joined)
            {
                terms.add_compound(q, first, term);
            }
        }
        terms
    }
}

/// The query's words that have an index term, once each, in query order.
fn distinct_words(q: &ParsedQuery) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for w in q.words.iter().filter(|w| w.term.is_some()) {
        if !words.contains(&w.text) {
            words.push(w.text.clone());
        }
    }
    words
}

/// The non-empty subsets of `words` (in their order), up to five words;
/// beyond, all of them only (typo correction asks for the query's other
/// words that the index holds: with more words than that, all of them).
fn subsets<'a>(words: &[&'a str]) -> Vec<Vec<&'a str>> {
    if words.is_empty() {
        return Vec::new();
    }
    if words.len() > 5 {
        return vec![words.to_vec()];
    }
    (1u32..1 << words.len())
        .map(|mask| {
            words
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, w)| *w)
                .collect()
        })
        .collect()
}

impl Vocabulary for Searchers<'_> {
    fn doc_freq(&self, word: &str) -> u64 {
        let p = self
            .pages
            .doc_freq(&Term::from_field_text(self.pf.spell, word));
        let a = self
            .anchors
            .doc_freq(&Term::from_field_text(self.af.spell, word));
        p.unwrap_or(0) + a.unwrap_or(0)
    }

    fn neighbours(&self, word: &str, max_distance: u8) -> Vec<(String, u64)> {
        let mut found: BTreeMap<String, u64> = BTreeMap::new();
        for (searcher, field) in [(&self.pages, self.pf.spell), (&self.anchors, self.af.spell)] {
            let fuzzy = FuzzyTermQuery::new(Term::from_field_text(field, word), max_distance, true);
            let Ok(automaton) = fuzzy.automaton() else {
                return Vec::new();
            };
            for segment in searcher.segment_readers() {
                let Ok(inverted) = segment.inverted_index(field) else {
                    continue;
                };
                let Ok(mut stream) = inverted.terms().search(&automaton).into_stream() else {
                    continue;
                };
                while stream.advance() {
                    if let Ok(w) = std::str::from_utf8(stream.key()) {
                        *found.entry(w.to_string()).or_default() +=
                            u64::from(stream.value().doc_freq);
                    }
                }
            }
        }
        found.into_iter().collect()
    }

    fn co_occurs(&self, word: &str, others: &[&str]) -> bool {
        let all = std::iter::once(word)
            .chain(others.iter().copied())
            .map(|w| term_query(self.pf.spell, w))
            .collect();
        self.pages
            .search(&BooleanQuery::intersection(all), &Count)
            .is_ok_and(|n| n > 0)
    }

    fn doc_count(&self) -> u64 {
        self.pages.num_docs()
    }
}
