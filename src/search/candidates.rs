//! Candidate generation and ranking: the pages BM25 finds by their own
//! text, through the links to them (anchor text, the words around the
//! links) and by their vectors, measured (`measure.rs`) and scored
//! (`learned.rs`).

use super::cluster_stats;
use super::embed;
use super::learned;
use super::measure::AnchorHits;
use super::query::{ParsedQuery, RankTerms};
use super::rank;
use super::searchers::{Searchers, first_strs, term_query};
use super::{SearchError, err, io_err};
use std::collections::{BTreeMap, HashMap, HashSet};
use tantivy::collector::TopDocs;
use tantivy::postings::Postings;
use tantivy::query::{Bm25StatisticsProvider, BooleanQuery, BoostQuery, Occur, PhraseQuery, Query};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, DocId, DocSet, Searcher, TERMINATED, Term};

/// Pages gathered by BM25 before re-ranking (or `limit`, if larger).
const CANDIDATES: usize = 100;

/// A query with phrases first takes this many pages by its words alone,
/// then reads positions in those only: a phrase of common words otherwise
/// reads the positions of most of the index (180 ms at 100,000 pages).
/// When fewer than the candidates needed pass, the exact query runs.
pub(super) const PHRASE_POOL: usize = 1_000;

/// The pool's pages are checked for the phrases this many at a time.
const PHRASE_BATCH: usize = 2 * CANDIDATES;

/// Pages gathered by the similarity of their vectors to the query's (when
/// both have vectors), beside the candidates the words find: the pages
/// that answer in other words.
const NEIGHBOURS: usize = 20;

/// Anchor documents gathered to find pages through the links to them (by
/// anchor text, then as many by the words around the links).
const ANCHOR_CANDIDATES: usize = 200;

/// Words in more than this share of the links' texts are not searched for
/// in them (they still count as held by the links found): "next", "home",
/// "section", words of one link in twenty, name no page in particular.
const ANCHOR_MAX_DF: f64 = 0.05;

/// Words around more than this share of the links are not searched for in
/// the links' context (they still count as held by it).
const CONTEXT_MAX_DF: f64 = 0.1;

/// ... but words of at most this many links always are (a small index has
/// no words that cost much).
const ALWAYS_SEARCHED_DF: u64 = 1_000;

/// The key a shard's anchors phase leaves in the statistics: the links'
/// evidence of every shard is in them (`e.` keys), none to search again.
pub(super) const ANCHORS_DONE: &str = "e.done";

/// The key of the links not deleted (BM25 counts deleted ones too).
pub(super) const LIVE_LINKS: &str = "a.live";

/// The candidates of a query, ranked, with the two parts of each score
/// and the best text score they were divided by (see `learned::score`).
pub(super) struct Ranked {
    pub(super) best_text: f32,
    pub(super) pages: Vec<RankedPage>,
    /// The URL of every candidate measured.
    pub(super) candidates: Vec<String>,
    /// The candidate scores of the first candidates (those found by their
    /// own text; the others were found through links to them).
    pub(super) hit_scores: Vec<f32>,
}

pub(super) struct RankedPage {
    pub(super) score: f32,
    pub(super) addr: DocAddress,
    pub(super) text: f32,
    pub(super) rest: f32,
    /// The page's section that best holds the query (see `sections`).
    pub(super) section: Option<usize>,
}

impl Searchers<'_> {
    /// The `n` live pages whose best passage is most similar to the query
    /// (none without a query vector). Each segment's vectors are read once,
    /// in their dictionary's order, then mapped to its pages.
    fn vector_neighbours(&self, n: usize) -> Result<Vec<DocAddress>, SearchError> {
        let Some(query) = &self.query_vector else {
            return Ok(Vec::new());
        };
        let mut best: Vec<(f32, DocAddress)> = Vec::new();
        for (ord, segment) in self.pages.segment_readers().iter().enumerate() {
            let Some(vectors) = segment
                .fast_fields()
                .bytes("vectors")
                .map_err(err("read"))?
            else {
                continue;
            };
            let mut by_ord = vec![0f32; vectors.num_terms()];
            let mut stream = vectors.dictionary().stream().map_err(io_err("read"))?;
            while stream.advance() {
                if let Some(slot) = by_ord.get_mut(stream.term_ord() as usize) {
                    *slot = embed::best_similarity(query, stream.key());
                }
            }
            for doc in segment.doc_ids_alive() {
                let Some(sim) = vectors
                    .ords()
                    .first(doc)
                    .and_then(|o| by_ord.get(o as usize))
                else {
                    continue;
                };
                if *sim > 0.0 {
                    best.push((*sim, DocAddress::new(ord as u32, doc)));
                }
            }
            if best.len() > 4 * n {
                best.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
                best.truncate(n);
            }
        }
        best.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
        best.truncate(n);
        Ok(best.into_iter().map(|(_, addr)| addr).collect())
    }

    /// The links' evidence every shard gathered in a query's anchors phase
    /// (see [`cluster_stats`](super::cluster_stats)), when it did.
    fn cluster_anchors(&self, terms: usize) -> Option<HashMap<String, AnchorHits>> {
        let global = self.global?;
        global.sums.get(ANCHORS_DONE)?;
        Some(
            cluster_stats::evidence(global, terms)
                .into_iter()
                .map(|(url, (best, context, matched))| {
                    (
                        url,
                        AnchorHits {
                            best,
                            context,
                            matched,
                        },
                    )
                })
                .collect(),
        )
    }

    /// Baseline: BM25 over title and body.
    pub(super) fn plain(
        &self,
        q: &ParsedQuery,
        limit: usize,
    ) -> Result<Vec<(f32, DocAddress)>, SearchError> {
        let fields = [self.pf.title, self.pf.body];
        let mut clauses = required(q, &fields);
        for t in q.terms() {
            for f in fields {
                clauses.push((Occur::Should, term_query(f, t)));
            }
        }
        self.pages
            .search(
                &BooleanQuery::new(clauses),
                &TopDocs::with_limit(limit).order_by_score(),
            )
            .map_err(err("search"))
    }

    /// Candidates by weighted BM25 and anchors, re-ranked by `rank`.
    pub(super) fn full(
        &self,
        q: &ParsedQuery,
        rank_terms: &RankTerms,
        limit: usize,
    ) -> Result<Ranked, SearchError> {
        let terms = rank_terms.as_strs();
        let pf = self.pf;
        let weighted = [
            (pf.title, rank::TITLE),
            (pf.headings, rank::HEADINGS),
            (pf.body, rank::BODY),
            (pf.url_words, rank::URL),
        ];
        let text_fields = [pf.title, pf.headings, pf.body];
        let scored = |mut clauses: Vec<(Occur, Box<dyn Query>)>| {
            for t in &terms {
                for (f, w) in weighted {
                    clauses.push((
                        Occur::Should,
                        Box::new(BoostQuery::new(term_query(f, t), w)),
                    ));
                }
            }
            BooleanQuery::new(clauses)
        };
        let wanted = CANDIDATES.max(limit);
        let stats = self.page_stats();
        let search = |query: &BooleanQuery, n: usize| {
            self.pages
                .search_with_statistics_provider(
                    query,
                    &TopDocs::with_limit(n).order_by_score(),
                    &stats,
                )
                .map_err(err("search pages"))
        };
        let exact = || search(&scored(required(q, &text_fields)), wanted);
        let pages = || {
            if q.phrases().is_empty() {
                return exact();
            }
            // Ranked by the words alone (no required clause, so the top
            // pages are found without scoring every page), the phrases
            // checked after.
            let words = required_terms(q.required_terms(), &text_fields);
            let pool = search(&scored(words), PHRASE_POOL.max(wanted))?;
            let complete = pool.len() < PHRASE_POOL.max(wanted);
            // In rank order, a batch at a time, until enough hold them:
            // where the phrase is common, the first batch does.
            let phrases = q.phrases();
            let mut kept = Vec::new();
            for batch in pool.chunks(PHRASE_BATCH.max(wanted)) {
                kept.extend(with_phrases(
                    &self.pages,
                    &text_fields,
                    &phrases,
                    batch.to_vec(),
                )?);
                if kept.len() >= wanted {
                    break;
                }
            }
            if complete || kept.len() >= wanted {
                kept.truncate(wanted);
                Ok(kept)
            } else {
                exact()
            }
        };
        // The pages and the anchors are two indexes: searched at once, on
        // two cores when there are.
        let (page_hits, anchors) = std::thread::scope(|scope| {
            let anchors = scope.spawn(|| match self.cluster_anchors(terms.len()) {
                Some(known) => Ok(known),
                None => self.anchor_hits(q, &terms),
            });
            let page_hits = pages();
            // A panic there is a bug: it carries on here.
            let anchors = anchors
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (page_hits, anchors)
        });
        let (mut page_hits, anchors) = (page_hits?, anchors?);
        // Of this shard's best pages, those among the cluster's best
        // `wanted`, as one index would take them.
        if let Some(cutoff) = self.global.and_then(|g| cluster_stats::cutoff(g, wanted)) {
            page_hits.retain(|(score, _)| *score >= cutoff);
        }
        let hit_scores: Vec<f32> = page_hits.iter().map(|(score, _)| *score).collect();
        let mut candidates: Vec<DocAddress> = page_hits.iter().map(|(_, a)| *a).collect();
        let mut urls: Vec<Option<&str>> = vec![None; candidates.len()];
        let mut seen: HashMap<DocAddress, usize> = candidates
            .iter()
            .enumerate()
            .map(|(i, a)| (*a, i))
            .collect();
        for (url, addr) in find_pages(&self.pages, pf.url, anchors.keys().map(String::as_str))? {
            match seen.entry(addr) {
                std::collections::hash_map::Entry::Occupied(e) => urls[*e.get()] = Some(url),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(candidates.len());
                    candidates.push(addr);
                    urls.push(Some(url));
                }
            }
        }
        for addr in self.vector_neighbours(NEIGHBOURS)? {
            if let std::collections::hash_map::Entry::Vacant(e) = seen.entry(addr) {
                e.insert(candidates.len());
                candidates.push(addr);
                urls.push(None);
            }
        }
        let (features, urls) = self.measure(&candidates, &urls, rank_terms, &anchors)?;
        learned::dump(&urls, &features);
        let best_text = learned::best_text(&features);
        let mut order: Vec<(RankedPage, &str)> = features
            .iter()
            .zip(candidates)
            .zip(&urls)
            .map(|((f, addr), url)| {
                let (text, rest) = (f.text(), f.rest());
                let page = RankedPage {
                    score: learned::score(text, best_text, rest),
                    addr,
                    text,
                    rest,
                    section: f.best_section,
                };
                (page, url.as_str())
            })
            .collect();
        // Ties by URL: the order of pages that score alike is the same
        // whichever shards hold them (see `cluster_query::merge_tops`).
        order.sort_by(|(a, a_url), (b, b_url)| b.score.total_cmp(&a.score).then(a_url.cmp(b_url)));
        order.truncate(limit);
        let pages = order.into_iter().map(|(page, _)| page).collect();
        Ok(Ranked {
            best_text,
            pages,
            candidates: urls,
            hit_scores,
        })
    }

    /// The best anchor documents for the query, by target URL: by their
    /// anchor text, and by the words around the links (their context).
    pub(super) fn anchor_hits(
        &self,
        q: &ParsedQuery,
        terms: &[&str],
    ) -> Result<HashMap<String, AnchorHits>, SearchError> {
        let af = self.af;
        let mut by_target: HashMap<String, AnchorHits> = HashMap::new();
        let fields = std::iter::once((af.text, false, ANCHOR_MAX_DF))
            .chain(af.context.map(|f| (f, true, CONTEXT_MAX_DF)));
        let stats = self.anchor_stats();
        let anchor_docs = self
            .global
            .and_then(|g| g.sums.get(LIVE_LINKS))
            .copied()
            .unwrap_or_else(|| self.anchors.num_docs());
        let links_with = |field: Field, t: &str| {
            stats
                .doc_freq(&Term::from_field_text(field, t))
                .map_err(err("read"))
        };
        // A phrase (or quoted word) that the links' texts must hold, all of
        // whose words are too common to search for: no link is searched.
        for phrase in q.phrase_terms() {
            let mut common = true;
            for (_, t) in &phrase {
                let df = links_with(af.text, t)?;
                common &= df > 0 && too_common(df, anchor_docs, ANCHOR_MAX_DF);
            }
            if common {
                return Ok(by_target);
            }
        }
        for (field, is_context, max_df) in fields {
            let mut clauses = required(q, &[af.text]);
            let mut searched = 0;
            for t in terms {
                let df = links_with(field, t)?;
                if df == 0 || too_common(df, anchor_docs, max_df) {
                    continue;
                }
                clauses.push((Occur::Should, term_query(field, t)));
                searched += 1;
            }
            if searched == 0 {
                continue;
            }
            let hits = self
                .anchors
                .search_with_statistics_provider(
                    &BooleanQuery::new(clauses),
                    &TopDocs::with_limit(ANCHOR_CANDIDATES).order_by_score(),
                    &stats,
                )
                .map_err(err("search anchors"))?;
            let mut by_segment: BTreeMap<u32, Vec<(DocId, f32)>> = BTreeMap::new();
            for (score, addr) in hits {
                by_segment
                    .entry(addr.segment_ord)
                    .or_default()
                    .push((addr.doc_id, score));
            }
            for (ord, mut docs) in by_segment {
                docs.sort_unstable_by_key(|d| d.0);
                let segment = self.anchors.segment_reader(ord);
                let targets = segment
                    .fast_fields()
                    .str("target")
                    .map_err(err("read anchor targets"))?;
                let Some(targets) = targets else { continue };
                let mut matched = vec![vec![false; terms.len()]; docs.len()];
                let inverted = segment.inverted_index(field).map_err(err("read"))?;
                for (i, t) in terms.iter().enumerate() {
                    let term = Term::from_field_text(field, t);
                    let Some(mut postings) = inverted
                        .read_postings(&term, IndexRecordOption::Basic)
                        .map_err(io_err("read"))?
                    else {
                        continue;
                    };
                    for (j, (doc, _)) in docs.iter().enumerate() {
                        if postings.doc() <= *doc && postings.seek(*doc) == *doc {
                            matched[j][i] = true;
                        }
                    }
                }
                let urls = first_strs(Some(&targets), docs.iter().map(|d| d.0))?;
                for (((_, score), matched), url) in docs.into_iter().zip(matched).zip(urls) {
                    let Some(url) = url else {
                        continue;
                    };
                    let entry = by_target.entry(url).or_insert_with(|| AnchorHits {
                        best: 0.0,
                        context: 0.0,
                        matched: vec![false; terms.len()],
                    });
                    if is_context {
                        entry.context = entry.context.max(score);
                    } else {
                        entry.best = entry.best.max(score);
                    }
                    for (m, hit) in entry.matched.iter_mut().zip(matched) {
                        *m |= hit;
                    }
                }
            }
        }
        Ok(by_target)
    }
}

fn phrase_query(field: Field, phrase: &[(usize, &str)]) -> Box<dyn Query> {
    Box::new(PhraseQuery::new_with_offset(
        phrase
            .iter()
            .map(|(offset, t)| (*offset, Term::from_field_text(field, t)))
            .collect(),
    ))
}

/// The query's phrases and quoted terms, each required in one of `fields`.
fn required(q: &ParsedQuery, fields: &[Field]) -> Vec<(Occur, Box<dyn Query>)> {
    let mut out = required_phrases(q, fields);
    out.extend(required_terms(q.required_terms(), fields));
    out
}

/// Each phrase of the query required in one of `fields`.
fn required_phrases(q: &ParsedQuery, fields: &[Field]) -> Vec<(Occur, Box<dyn Query>)> {
    q.phrases()
        .iter()
        .map(|phrase| {
            let any = fields.iter().map(|f| phrase_query(*f, phrase)).collect();
            (
                Occur::Must,
                Box::new(BooleanQuery::union(any)) as Box<dyn Query>,
            )
        })
        .collect()
}

/// Each of `terms` required in one of `fields`.
fn required_terms<'a>(
    terms: impl IntoIterator<Item = &'a str>,
    fields: &[Field],
) -> Vec<(Occur, Box<dyn Query>)> {
    terms
        .into_iter()
        .map(|term| {
            let any = fields.iter().map(|f| term_query(*f, term)).collect();
            (
                Occur::Must,
                Box::new(BooleanQuery::union(any)) as Box<dyn Query>,
            )
        })
        .collect()
}

/// Whether a word of `df` of the `links` is left out of the anchor search
/// (more than `max_share` of them, and more than [`ALWAYS_SEARCHED_DF`]): a
/// word of a large share of all links says little, and costs the most to
/// search, the best of its links being a walk over most of them.
fn too_common(df: u64, links: u64, max_share: f64) -> bool {
    df > ALWAYS_SEARCHED_DF && df as f64 > max_share * links as f64
}

/// The documents of `docs` that hold every phrase (analyzed terms at
/// their offsets) in one of `fields`, in `docs`' order. Positions are read
/// at these documents only: a phrase scorer sought to a document reads on
/// to the next one that matches, which for a rare phrase of common words
/// is most of the segment.
fn with_phrases(
    searcher: &Searcher,
    fields: &[Field],
    phrases: &[Vec<(usize, &str)>],
    docs: Vec<(f32, DocAddress)>,
) -> Result<Vec<(f32, DocAddress)>, SearchError> {
    let mut sorted: Vec<DocAddress> = docs.iter().map(|(_, a)| *a).collect();
    sorted.sort_unstable();
    let mut kept = HashSet::new();
    for segment in sorted.chunk_by(|a, b| a.segment_ord == b.segment_ord) {
        let reader = searcher.segment_reader(segment[0].segment_ord);
        // held[doc][phrase]
        let mut held = vec![vec![false; phrases.len()]; segment.len()];
        for field in fields {
            let inverted = reader.inverted_index(*field).map_err(err("read"))?;
            for (pi, phrase) in phrases.iter().enumerate() {
                let mut postings = Vec::with_capacity(phrase.len());
                for (_, t) in phrase {
                    let term = Term::from_field_text(*field, t);
                    match inverted
                        .read_postings(&term, IndexRecordOption::WithFreqsAndPositions)
                        .map_err(io_err("read"))?
                    {
                        Some(p) => postings.push(p),
                        None => break,
                    }
                }
                if postings.len() < phrase.len() {
                    continue;
                }
                let mut positions: Vec<Vec<u32>> = vec![Vec::new(); phrase.len()];
                for (di, addr) in segment.iter().enumerate() {
                    if held[di][pi] {
                        continue;
                    }
                    let mut all = true;
                    for (p, at) in postings.iter_mut().zip(positions.iter_mut()) {
                        if p.doc() > addr.doc_id || p.seek(addr.doc_id) != addr.doc_id {
                            all = false;
                            break;
                        }
                        p.positions(at);
                    }
                    held[di][pi] = all && phrase_at(phrase, &positions);
                }
            }
        }
        for (di, addr) in segment.iter().enumerate() {
            if held[di].iter().all(|h| *h) {
                kept.insert(*addr);
            }
        }
    }
    Ok(docs.into_iter().filter(|(_, a)| kept.contains(a)).collect())
}

/// Whether the terms' positions (sorted, one list per phrase term) hold
/// the phrase: some start where every term sits at its offset.
fn phrase_at(phrase: &[(usize, &str)], positions: &[Vec<u32>]) -> bool {
    let (first_offset, _) = phrase[0];
    positions[0].iter().any(|&p| {
        let Some(start) = p.checked_sub(first_offset as u32) else {
            return false;
        };
        phrase
            .iter()
            .zip(positions)
            .skip(1)
            .all(|((offset, _), at)| at.binary_search(&(start + *offset as u32)).is_ok())
    })
}

/// The live page of each URL in `urls` that has one, by URL: each
/// segment's term dictionary is opened once and asked for every URL not
/// yet found (the first segment holding a live page wins).
fn find_pages<'a>(
    searcher: &Searcher,
    url_field: Field,
    urls: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<(&'a str, DocAddress)>, SearchError> {
    let mut pending: Vec<&str> = urls.into_iter().collect();
    let mut found = Vec::with_capacity(pending.len());
    for (ord, segment) in searcher.segment_readers().iter().enumerate() {
        if pending.is_empty() {
            break;
        }
        let inverted = segment.inverted_index(url_field).map_err(err("read"))?;
        let mut i = 0;
        while i < pending.len() {
            let term = Term::from_field_text(url_field, pending[i]);
            let mut live = None;
            if let Some(mut postings) = inverted
                .read_postings(&term, IndexRecordOption::Basic)
                .map_err(io_err("read"))?
            {
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    if !segment.is_deleted(doc) {
                        live = Some(DocAddress::new(ord as u32, doc));
                        break;
                    }
                    doc = postings.advance();
                }
            }
            match live {
                Some(addr) => found.push((pending.swap_remove(i), addr)),
                None => i += 1,
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phrase_is_found_at_its_offsets() {
        // "bake the bread": `the` is a stop word, so `bread` sits at +2.
        let phrase = [(0, "bake"), (2, "bread")];
        assert!(phrase_at(&phrase, &[vec![1, 7], vec![4, 9]]));
        assert!(!phrase_at(&phrase, &[vec![1, 7], vec![2, 8]]));
        assert!(!phrase_at(&phrase, &[vec![], vec![2]]));
        let offset_start = [(1, "bake"), (2, "bread")];
        assert!(phrase_at(&offset_start, &[vec![0, 5], vec![6]]));
    }
}
