//! [`Searchers`]: one search's view of both indexes, and the reads its
//! steps share.

use super::cluster_stats::{ShardStats, Side, Stats};
use super::schema::{AnchorFields, PageFields};
use super::{SearchError, io_err};
use tantivy::query::{Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, Searcher, Term};

/// One search's view of both indexes, scored with the cluster's
/// statistics when the index is one shard of a query across it
/// (`global`), else with its own.
pub(super) struct Searchers<'g> {
    pub(super) pages: Searcher,
    pub(super) anchors: Searcher,
    pub(super) pf: PageFields,
    pub(super) af: AnchorFields,
    pub(super) global: Option<&'g ShardStats>,
    /// The query's vector, when the pages have vectors and the model is
    /// at hand (see `SearchIndex::embed_query`).
    pub(super) query_vector: Option<Vec<f32>>,
}

impl Searchers<'_> {
    /// The pages' BM25 statistics (the cluster's, with `global`).
    pub(super) fn page_stats(&self) -> Stats<'_> {
        Stats {
            searcher: &self.pages,
            part: Side::Pages,
            global: self.global,
        }
    }

    /// The links' BM25 statistics (the cluster's, with `global`).
    pub(super) fn anchor_stats(&self) -> Stats<'_> {
        Stats {
            searcher: &self.anchors,
            part: Side::Anchors,
            global: self.global,
        }
    }

    /// Whether any page has vectors.
    pub(super) fn has_vectors(&self) -> bool {
        self.pf.vectors.is_some()
            && self.pages.segment_readers().iter().any(|segment| {
                matches!(segment.fast_fields().bytes("vectors"), Ok(Some(v)) if v.num_terms() > 0)
            })
    }
}

pub(super) fn term_query(field: Field, text: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, text),
        IndexRecordOption::WithFreqs,
    ))
}

/// The strings of `docs`' first value in a str fast field, in `docs`'
/// order (empty for a document without one), reading the dictionary once
/// in ordinal order.
pub(super) fn first_strs(
    column: Option<&tantivy::columnar::StrColumn>,
    docs: impl IntoIterator<Item = DocId>,
) -> Result<Vec<Option<String>>, SearchError> {
    let Some(column) = column else {
        return Ok(docs.into_iter().map(|_| None).collect());
    };
    let ords: Vec<Option<u64>> = docs
        .into_iter()
        .map(|doc| column.term_ords(doc).next())
        .collect();
    let mut sorted: Vec<u64> = ords.iter().flatten().copied().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut strs: Vec<Option<String>> = Vec::with_capacity(sorted.len());
    column
        .dictionary()
        .sorted_ords_to_term_cb(&sorted, |bytes| {
            strs.push(std::str::from_utf8(bytes).ok().map(str::to_string));
        })
        .map_err(io_err("read"))?;
    strs.resize(sorted.len(), None);
    Ok(ords
        .into_iter()
        .map(|o| {
            let o = o?;
            let at = sorted.binary_search(&o).ok()?;
            strs[at].clone()
        })
        .collect())
}
