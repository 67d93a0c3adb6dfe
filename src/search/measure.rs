//! Measuring candidates: each one's [`Features`] for a query, read from
//! the postings and fast fields (no stored document is read).

use super::cluster_stats;
use super::embed;
use super::learned::Features;
use super::query::RankTerms;
use super::rank;
use super::searchers::{Searchers, first_strs};
use super::sections;
use super::{SearchError, err, io_err, on_two_threads};
use std::collections::{BTreeMap, HashMap};
use tantivy::postings::Postings;
use tantivy::query::{Bm25StatisticsProvider, Bm25Weight};
use tantivy::schema::IndexRecordOption;
use tantivy::{DocAddress, DocId, DocSet, Term};

/// Anchor evidence for one target page.
#[derive(Default)]
pub(super) struct AnchorHits {
    pub(super) best: f32,
    /// The best context score.
    pub(super) context: f32,
    pub(super) matched: Vec<bool>,
}

impl Searchers<'_> {
    /// The features of each candidate, from postings and fast fields.
    pub(super) fn measure(
        &self,
        candidates: &[DocAddress],
        known_urls: &[Option<&str>],
        rank_terms: &RankTerms,
        anchors: &HashMap<String, AnchorHits>,
    ) -> Result<(Vec<Features>, Vec<String>), SearchError> {
        let pf = self.pf;
        let terms = rank_terms.as_strs();
        let n = terms.len();
        // Field order: title, headings, body, url words.
        let fields = [pf.title, pf.headings, pf.body, pf.url_words];
        let stats = self.page_stats();
        let mut weights: Vec<Vec<Option<Bm25Weight>>> = Vec::new();
        for f in fields {
            let mut per_term = Vec::new();
            for t in &terms {
                let term = Term::from_field_text(f, t);
                let df = stats.doc_freq(&term).map_err(err("read"))?;
                per_term.push(if df == 0 {
                    None
                } else {
                    Some(Bm25Weight::for_terms(&stats, &[term]).map_err(err("read"))?)
                });
            }
            weights.push(per_term);
        }

        let mut by_segment: BTreeMap<u32, Vec<(DocId, usize)>> = BTreeMap::new();
        for (i, a) in candidates.iter().enumerate() {
            by_segment
                .entry(a.segment_ord)
                .or_default()
                .push((a.doc_id, i));
        }
        // Each candidate's URL: known for those found through anchors, read
        // from the fast field (in one pass per segment) for the others.
        let mut urls: Vec<String> = known_urls
            .iter()
            .map(|u| u.unwrap_or_default().to_string())
            .collect();
        for (ord, docs) in &by_segment {
            let unknown: Vec<(DocId, usize)> = docs
                .iter()
                .copied()
                .filter(|(_, i)| known_urls.get(*i).copied().flatten().is_none())
                .collect();
            if unknown.is_empty() {
                continue;
            }
            let column = self
                .pages
                .segment_reader(*ord)
                .fast_fields()
                .str("url")
                .map_err(err("read"))?;
            let read = first_strs(column.as_ref(), unknown.iter().map(|d| d.0))?;
            for ((_, i), url) in unknown.iter().zip(read) {
                urls[*i] = url.unwrap_or_default();
            }
        }
        // In-links: the URL's document frequency among the anchors' targets,
        // each segment's dictionary opened once; the segments shared by two
        // threads, as are the pages' below.
        let anchor_segments = self.anchors.segment_readers();
        let per_segment = on_two_threads(anchor_segments.len(), |s| {
            let inverted = anchor_segments[s]
                .inverted_index(self.af.target)
                .map_err(err("read"))?;
            urls.iter()
                .map(|url| {
                    let term = Term::from_field_text(self.af.target, url);
                    inverted.doc_freq(&term).map_err(io_err("read"))
                })
                .collect::<Result<Vec<u32>, SearchError>>()
        });
        let mut in_links = vec![0u64; candidates.len()];
        for counts in per_segment {
            for (n, c) in in_links.iter_mut().zip(counts?) {
                *n += u64::from(c);
            }
        }
        // Links on other shards count too, when the links phase counted them.
        if let Some(global) = self.global {
            for (n, url) in in_links.iter_mut().zip(&urls) {
                if let Some(all) = global.sums.get(&cluster_stats::links_key(url)) {
                    *n = *all;
                }
            }
        }
        let segments: Vec<(u32, Vec<(DocId, usize)>)> = by_segment
            .into_iter()
            .map(|(ord, mut docs)| {
                docs.sort_unstable();
                (ord, docs)
            })
            .collect();
        let measured = on_two_threads(segments.len(), |s| {
            let (ord, docs) = &segments[s];
            let segment = self.pages.segment_reader(*ord);
            let mut feats = vec![Features::default(); docs.len()];
            // positions[candidate][field][term]
            let mut positions = vec![vec![vec![Vec::<u32>::new(); n]; 3]; docs.len()];
            let mut matched = vec![vec![[false; 4]; n]; docs.len()];
            for (fi, f) in fields.into_iter().enumerate() {
                let inverted = segment.inverted_index(f).map_err(err("read"))?;
                let norms = segment.get_fieldnorms_reader(f).map_err(err("read"))?;
                for (ti, t) in terms.iter().enumerate() {
                    let Some(weight) = &weights[fi][ti] else {
                        continue;
                    };
                    let option = if fi < 3 {
                        IndexRecordOption::WithFreqsAndPositions
                    } else {
                        IndexRecordOption::WithFreqs
                    };
                    let Some(mut postings) = inverted
                        .read_postings(&Term::from_field_text(f, t), option)
                        .map_err(io_err("read"))?
                    else {
                        continue;
                    };
                    for (j, (doc, _)) in docs.iter().enumerate() {
                        if postings.doc() > *doc || postings.seek(*doc) != *doc {
                            continue;
                        }
                        let score = weight.score(norms.fieldnorm_id(*doc), postings.term_freq());
                        let feat = &mut feats[j];
                        match fi {
                            0 => feat.title += score,
                            1 => feat.headings += score,
                            2 => feat.body += score,
                            _ => feat.url += score,
                        }
                        matched[j][ti][fi] = true;
                        if fi < 3 {
                            postings.positions(&mut positions[j][fi][ti]);
                        }
                    }
                }
            }
            let fast = segment.fast_fields();
            let out_links = fast.u64("out_links").map_err(err("read"))?;
            let words = fast.u64("words").map_err(err("read"))?;
            let (vectors, vector_sections) = match &self.query_vector {
                Some(_) => (
                    fast.bytes("vectors").map_err(err("read"))?,
                    fast.bytes("vector_sections").map_err(err("read"))?,
                ),
                None => (None, None),
            };
            let section_starts = match pf.section_starts {
                Some(_) => fast.bytes("section_starts").map_err(err("read"))?,
                None => None,
            };
            let body_norms = segment
                .get_fieldnorms_reader(pf.body)
                .map_err(err("read"))?;
            let mut packed = Vec::new();
            for (j, (doc, i)) in docs.iter().enumerate() {
                let feat = &mut feats[j];
                feat.out_links = out_links.first(*doc).unwrap_or(0);
                feat.words = words.first(*doc).unwrap_or(0);
                // The section of the nearest passage, when the index says.
                let mut nearest_section = None;
                if let Some(query) = &self.query_vector {
                    column_bytes(vectors.as_ref(), *doc, &mut packed)?;
                    if let Some((k, sim)) = embed::nearest(query, &packed) {
                        feat.similarity = sim;
                        column_bytes(vector_sections.as_ref(), *doc, &mut packed)?;
                        nearest_section = embed::unpack_sections(&packed)
                            .get(k)
                            .map(|&i| usize::from(i));
                    }
                }
                let anchor = anchors.get(urls[*i].as_str());
                if let Some(a) = anchor {
                    feat.anchor = a.best;
                    feat.context = a.context;
                }
                feat.in_links = in_links[*i];
                let in_anchor = |ti: usize| anchor.is_some_and(|a| a.matched[ti]);
                let covered =
                    rank_terms.held_slots(|ti| matched[j][ti].iter().any(|m| *m) || in_anchor(ti));
                let in_body = rank_terms.held_slots(|ti| matched[j][ti][2]);
                let held = |slots: &[bool]| slots.iter().filter(|h| **h).count();
                feat.coverage = rank::coverage(held(&covered), rank_terms.slots);
                feat.answers = rank::coverage(held(&in_body), rank_terms.slots);
                let share = |slots: Vec<bool>| rank::coverage(held(&slots), rank_terms.slots);
                feat.title_coverage = share(rank_terms.held_slots(|ti| matched[j][ti][0]));
                feat.headings_coverage = share(rank_terms.held_slots(|ti| matched[j][ti][1]));
                feat.anchor_coverage = share(rank_terms.held_slots(in_anchor));
                let prox = |fi: usize| {
                    let slots = rank_terms.slot_positions(&positions[j][fi]);
                    let lists: Vec<&[u32]> = slots.iter().map(Vec::as_slice).collect();
                    rank::proximity(&lists, rank_terms.slots)
                };
                feat.proximity = prox(2).max(0.5 * prox(0)).max(0.5 * prox(1));
                column_bytes(section_starts.as_ref(), *doc, &mut packed)?;
                let starts = sections::unpack_starts(&packed);
                let body_words = body_norms.fieldnorm(*doc);
                let (best, score, held) = best_section(
                    &starts,
                    &positions[j][2],
                    body_words,
                    &weights[2],
                    rank_terms,
                );
                // A section holding every word of the query is the answer
                // by them; else the one nearest in meaning is.
                feat.best_section = match nearest_section {
                    Some(i) if held < rank_terms.slots && i < starts.len().max(1) => Some(i),
                    _ => best,
                };
                feat.section = score;
                feat.section_coverage = rank::coverage(held, rank_terms.slots);
            }
            let measured: Vec<(usize, Features)> =
                docs.iter().map(|(_, i)| *i).zip(feats).collect();
            Ok::<_, SearchError>(measured)
        });
        let mut out = vec![Features::default(); candidates.len()];
        for segment in measured {
            for (i, feat) in segment? {
                out[i] = feat;
            }
        }
        Ok((out, urls))
    }
}

/// The section of a page (its [`sections::unpack_starts`]) that best
/// holds the query, its BM25 and the query slots it holds. `positions`:
/// each term's positions in the body; `body_words`: the body's length as
/// BM25 counts it (its field norm: indexed words, stop words left out),
/// shared out among the sections by their share of the body's positions.
fn best_section(
    starts: &[u32],
    positions: &[Vec<u32>],
    body_words: u32,
    weights: &[Option<Bm25Weight>],
    rank_terms: &RankTerms,
) -> (Option<usize>, f32, usize) {
    let ranges = sections::word_ranges(starts);
    let counts = sections::term_counts(&ranges, positions);
    // The body's positions (stop words included), of which its field norm
    // counts the indexed words.
    let positions_in_body = f64::from(starts.last().copied().unwrap_or(0).max(1));
    let measured: Vec<(usize, f32)> = ranges
        .iter()
        .zip(&counts)
        .map(|(range, counts)| {
            let words = if starts.is_empty() {
                body_words
            } else {
                (f64::from(range.end - range.start) * f64::from(body_words) / positions_in_body)
                    .round() as u32
            };
            let norm = tantivy::fieldnorm::FieldNormReader::fieldnorm_to_id(words);
            let score = counts
                .iter()
                .zip(weights)
                .filter(|(n, _)| **n > 0)
                .filter_map(|(n, w)| w.as_ref().map(|w| w.score(norm, *n)))
                .sum();
            let held = rank_terms
                .held_slots(|ti| counts[ti] > 0)
                .iter()
                .filter(|h| **h)
                .count();
            (held, score)
        })
        .collect();
    match sections::best(&measured, &ranges) {
        Some(i) => (Some(i), measured[i].1, measured[i].0),
        None => (None, 0.0, 0),
    }
}

/// `doc`'s value in a bytes column, into `out` (emptied first, and left
/// empty where the index has no such column or the page no value).
fn column_bytes(
    column: Option<&tantivy::columnar::BytesColumn>,
    doc: DocId,
    out: &mut Vec<u8>,
) -> Result<(), SearchError> {
    out.clear();
    if let Some(column) = column
        && let Some(ord) = column.ords().first(doc)
    {
        column.ord_to_bytes(ord, out).map_err(io_err("read"))?;
    }
    Ok(())
}
