//! Searching a [`SearchIndex`]: a query answered by this index alone
//! ([`SearchIndex::search`]), or by it as one shard of a query across the
//! cluster (each phase's statistics, [`SearchIndex::shard_stats`], then its
//! best pages, [`SearchIndex::shard_top`]).

use super::candidates::{ANCHORS_DONE, LIVE_LINKS, Ranked};
use super::cluster_stats::{self, ShardHit, ShardPhase, ShardStats, ShardTop, Side, compound_key};
use super::embed::Embedder;
use super::index::SearchIndex;
use super::learned;
use super::query::{self, ParsedQuery, QueryAnalyzers};
use super::searchers::Searchers;
use super::snippets::Shown;
use super::typo::Vocabulary;
use super::{Ranking, SearchAnswer, SearchError, SearchOptions, err, io_err};
use tantivy::Term;
use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::Field;

const MAX_LIMIT: usize = 1000;

impl SearchIndex {
    /// Search. Bad queries are [`SearchError::Query`]; an empty index or a
    /// query matching nothing is an answer with no results.
    pub fn search(&self, query: &str, opts: &SearchOptions) -> Result<SearchAnswer, SearchError> {
        let (mut analyzers, mut parsed, s) = self.parse(query, None)?;
        let limit = opts.limit.min(MAX_LIMIT);
        let mut did_you_mean = None;
        if opts.ranking != Ranking::PlainBm25 {
            (parsed, did_you_mean) = s.corrected(query, parsed, &mut analyzers);
        }
        let s = match opts.ranking {
            Ranking::Full => self.embed_query(s, query),
            Ranking::Words | Ranking::PlainBm25 => s,
        };
        if limit == 0 {
            return Ok(SearchAnswer {
                results: Vec::new(),
                did_you_mean,
                nodes: None,
            });
        }
        let ranked: Vec<Shown> = match opts.ranking {
            Ranking::Full | Ranking::Words => {
                Shown::all(&s.ranked(&parsed, &mut analyzers, limit)?)
            }
            Ranking::PlainBm25 => s
                .plain(&parsed, limit)?
                .into_iter()
                .map(|(score, addr)| Shown {
                    score,
                    addr,
                    section: None,
                })
                .collect(),
        };
        let results = s.hits(&parsed, &ranked, &mut analyzers)?;
        Ok(SearchAnswer {
            results,
            did_you_mean,
            nodes: None,
        })
    }

    /// This index's statistics for `phase` of a query across the shards of
    /// a cluster, given what the earlier phases gathered over all of them
    /// (see [`cluster_stats`](super::cluster_stats)).
    pub fn shard_stats(
        &self,
        query: &str,
        phase: ShardPhase,
        known: &ShardStats,
    ) -> Result<ShardStats, SearchError> {
        let (mut analyzers, parsed, s) = self.parse(query, Some(known))?;
        let mut out = ShardStats::default();
        match phase {
            ShardPhase::Vocabulary => s.vocabulary_stats(&parsed, &mut out),
            ShardPhase::Terms => {
                let (parsed, _) = s.corrected(query, parsed, &mut analyzers);
                s.term_stats(&parsed, &mut analyzers, &mut out)?;
            }
            ShardPhase::Anchors => {
                let (parsed, _) = s.corrected(query, parsed, &mut analyzers);
                let terms = s.rank_terms(&parsed, &mut analyzers);
                for (url, hits) in s.anchor_hits(&parsed, &terms.as_strs())? {
                    let (best, context, matched) = cluster_stats::evidence_keys(&url);
                    cluster_stats::max(&mut out, best, hits.best);
                    cluster_stats::max(&mut out, context, hits.context);
                    for (i, held) in hits.matched.iter().enumerate() {
                        if *held {
                            cluster_stats::max(&mut out, format!("{matched}{i}"), 1.0);
                        }
                    }
                }
                cluster_stats::sum(&mut out, ANCHORS_DONE.to_string(), 1);
            }
            ShardPhase::Candidates => {
                let (parsed, _) = s.corrected(query, parsed, &mut analyzers);
                let s = self.embed_query(s, query);
                let ranked = s.ranked(&parsed, &mut analyzers, 1)?;
                for (i, url) in ranked.candidates.iter().enumerate() {
                    cluster_stats::sum(&mut out, cluster_stats::candidate_key(url), 1);
                    if let Some(score) = ranked.hit_scores.get(i) {
                        cluster_stats::max(&mut out, cluster_stats::hit_key(url), *score);
                    }
                }
            }
            ShardPhase::Links => {
                let urls = cluster_stats::candidates(known);
                for (url, n) in urls.iter().zip(s.in_links(&urls)?) {
                    cluster_stats::sum(&mut out, cluster_stats::links_key(url), n);
                }
            }
        }
        Ok(out)
    }

    /// This index's best `limit` pages for a query across the shards of a
    /// cluster, scored with the statistics of every phase over all of them.
    pub fn shard_top(
        &self,
        query: &str,
        limit: usize,
        stats: &ShardStats,
    ) -> Result<ShardTop, SearchError> {
        let (mut analyzers, parsed, s) = self.parse(query, Some(stats))?;
        let (parsed, did_you_mean) = s.corrected(query, parsed, &mut analyzers);
        let s = self.embed_query(s, query);
        let mut top = ShardTop {
            did_you_mean,
            norm_weight: learned::TEXT_WEIGHT,
            ..ShardTop::default()
        };
        let limit = limit.min(MAX_LIMIT);
        if limit == 0 {
            return Ok(top);
        }
        let ranked = s.ranked(&parsed, &mut analyzers, limit)?;
        let hits = s.hits(&parsed, &Shown::all(&ranked), &mut analyzers)?;
        top.norm_max = ranked.best_text;
        top.hits = hits
            .into_iter()
            .zip(&ranked.pages)
            .map(|(hit, p)| ShardHit {
                hit,
                norm: p.text,
                rest: p.rest,
            })
            .collect();
        Ok(top)
    }

    /// `query` parsed by this index's analyzers (which a correction parses
    /// with again), and the searchers that answer it: with `global`, those
    /// of a query across the cluster.
    fn parse<'g>(
        &self,
        query: &str,
        global: Option<&'g ShardStats>,
    ) -> Result<(QueryAnalyzers, ParsedQuery, Searchers<'g>), SearchError> {
        let mut analyzers = self.analyzers.clone();
        let parsed = query::parse(query, &mut analyzers)?;
        Ok((analyzers, parsed, self.searchers(global)))
    }

    fn searchers<'g>(&self, global: Option<&'g ShardStats>) -> Searchers<'g> {
        Searchers {
            pages: self.pages.reader.searcher(),
            anchors: self.anchors.reader.searcher(),
            pf: self.pages.fields,
            af: self.anchors.fields,
            global,
            query_vector: None,
        }
    }

    /// The installed model: the part of it `query` needs when this handle
    /// answers one query, else all of it.
    fn load_model(&self, query: &str) -> Result<Embedder, super::EmbedError> {
        if self.one_query {
            Embedder::installed_for(query)
        } else {
            Embedder::installed()
        }
    }

    /// `s` with the vector of `query` (as typed: a word the site lacks, which
    /// the words' ranking corrects, is still a word to the model), when the
    /// index holds page vectors:
    /// the model is loaded by the first query that needs it, and a missing
    /// model is warned of once and the ranking goes on without vectors.
    fn embed_query<'g>(&self, mut s: Searchers<'g>, query: &str) -> Searchers<'g> {
        if !s.has_vectors() {
            return s;
        }
        let embedder = self
            .query_embedder
            .get_or_init(|| match self.load_model(query) {
                Ok(embedder) => Some(std::sync::Arc::new(embedder)),
                Err(why) => {
                    tracing::warn!(%why, "the index holds page vectors; searching by words alone");
                    None
                }
            });
        let Some(embedder) = embedder else {
            return s;
        };
        let last = || {
            self.last_query
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some((q, vector)) = last().as_ref()
            && q == query
        {
            s.query_vector = Some(vector.clone());
            return s;
        }
        // Not under the lock: another query may be embedded meanwhile.
        s.query_vector = embedder
            .query(query)
            .map_err(|why| tracing::warn!(%why, "searching by words alone"))
            .ok();
        if let Some(vector) = &s.query_vector {
            *last() = Some((query.to_string(), vector.clone()));
        }
        s
    }
}

impl Searchers<'_> {
    /// The best `limit` pages for `q` by the full ranking, over its rank
    /// terms.
    fn ranked(
        &self,
        q: &ParsedQuery,
        analyzers: &mut QueryAnalyzers,
        limit: usize,
    ) -> Result<Ranked, SearchError> {
        let terms = self.rank_terms(q, analyzers);
        self.full(q, &terms, limit)
    }

    /// The counts BM25 needs of the (corrected) query's terms and of its
    /// compounds, in both indexes, and the compounds' own counts.
    fn term_stats(
        &self,
        q: &ParsedQuery,
        analyzers: &mut QueryAnalyzers,
        out: &mut ShardStats,
    ) -> Result<(), SearchError> {
        let mut terms: Vec<String> = q.terms().into_iter().map(str::to_string).collect();
        for (_, joined) in q.compound_candidates() {
            cluster_stats::sum(
                out,
                compound_key(&joined),
                Vocabulary::doc_freq(self, &joined),
            );
            if let Some(term) = analyzers.term(&joined)
                && !terms.contains(&term)
            {
                terms.push(term);
            }
        }
        let (pf, af) = (self.pf, self.af);
        let page_fields = [pf.title, pf.headings, pf.body, pf.url_words];
        let anchor_fields: Vec<Field> = std::iter::once(af.text).chain(af.context).collect();
        for (searcher, part, fields) in [
            (&self.pages, Side::Pages, &page_fields[..]),
            (&self.anchors, Side::Anchors, &anchor_fields[..]),
        ] {
            let docs = Bm25StatisticsProvider::total_num_docs(searcher).map_err(err("read"))?;
            cluster_stats::sum(out, part.docs_key(), docs);
            for field in fields {
                let tokens = searcher.total_num_tokens(*field).map_err(err("read"))?;
                cluster_stats::sum(out, part.tokens_key(*field), tokens);
                for t in &terms {
                    let df = searcher
                        .doc_freq(&Term::from_field_text(*field, t))
                        .map_err(err("read"))?;
                    cluster_stats::sum(out, part.df_key(*field, t), df);
                }
            }
        }
        cluster_stats::sum(out, LIVE_LINKS.to_string(), self.anchors.num_docs());
        Ok(())
    }

    /// The links in this index to each of `urls`.
    fn in_links(&self, urls: &[String]) -> Result<Vec<u64>, SearchError> {
        let mut counts = vec![0u64; urls.len()];
        for segment in self.anchors.segment_readers() {
            let inverted = segment
                .inverted_index(self.af.target)
                .map_err(err("read"))?;
            for (n, url) in counts.iter_mut().zip(urls) {
                let term = Term::from_field_text(self.af.target, url);
                *n += u64::from(inverted.doc_freq(&term).map_err(io_err("read"))?);
            }
        }
        Ok(counts)
    }
}
