//! [`SearchIndex`]: the tantivy side — opening, writing, candidate
//! generation, measuring candidates for `rank`, snippets.

use super::embed::{self, Embedder};
use super::learned::{self, Features};
use super::query::{self, ParsedQuery, QueryAnalyzers, RankTerms};
use super::rank;
use super::schema::{self, AnchorFields, IndexPart, PageFields};
use super::shard::{
    self, GlobalVocabulary, ShardHit, ShardPhase, ShardStats, ShardTop, Side, Stats, compound_key,
};
use super::typo::{self, Vocabulary};
use super::{
    AnchorDoc, PageDoc, Ranking, SearchAnswer, SearchError, SearchHit, SearchOptions,
    on_two_threads, truncate,
};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use tantivy::collector::{Count, TopDocs};
use tantivy::directory::MmapDirectory;
use tantivy::indexer::IndexWriterOptions;
use tantivy::postings::Postings;
use tantivy::query::{
    Bm25StatisticsProvider, Bm25Weight, BooleanQuery, BoostQuery, FuzzyTermQuery, Occur,
    PhraseQuery, Query, TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption, Schema, TantivyDocument, Value};
use tantivy::snippet::SnippetGenerator;
use tantivy::{
    DocAddress, DocId, DocSet, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TERMINATED,
    TantivyError, Term,
};

/// Pages gathered by BM25 before re-ranking (or `limit`, if larger).
const CANDIDATES: usize = 100;
/// A query with phrases first takes this many pages by its words alone,
/// then reads positions in those only: a phrase of common words otherwise
/// reads the positions of most of the index (180 ms at 100,000 pages).
/// When fewer than the candidates needed pass, the exact query runs.
pub(super) const PHRASE_POOL: usize = 1_000;
/// The pool's pages are checked for the phrases this many at a time.
const PHRASE_BATCH: usize = 2 * CANDIDATES;
/// A compound of two query words ("back up" → `backup`) joins the query
/// when it is a word of at least this many documents.
const COMPOUND_MIN_DF: u64 = 2;
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
const MAX_LIMIT: usize = 1000;
/// Body text beyond this is neither indexed nor stored.
const MAX_BODY_BYTES: usize = 1 << 20;
/// Snippets are looked for in the first this-many bytes of the body, and
/// only those are stored (`body_start`).
const SNIPPET_SCAN_BYTES: usize = 24 * 1024;
const SNIPPET_CHARS: usize = 200;
/// The writers' arenas: what the index holds in memory before it writes a
/// segment (tantivy's minimum is 15 MB a thread).
const PAGES_WRITER_BYTES: usize = 48_000_000;
const ANCHORS_WRITER_BYTES: usize = 16_000_000;
/// The most documents a merge makes ([`merges`](super::merges)): about
/// 80 MB of a pages segment (8–40 KB of text a page), 30 MB of anchors.
const PAGES_MERGE_MAX_DOCS: u32 = 10_000;
const ANCHORS_MERGE_MAX_DOCS: u32 = 1_000_000;

/// Pages handed to the pages writer and not indexed yet, at most: tantivy
/// queues up to 10,000 documents for its indexing thread, and ours adds
/// them several times faster than it indexes (each holds its page's text,
/// ~50 KB here). Beyond this, `add_page` waits: memory stays bounded
/// without committing to drain the queue. 64 pages are tens of
/// milliseconds of the indexing thread's work; 256 held 13 MB of text
/// (a heap profile of the large web) for no speed.
const PAGES_IN_FLIGHT: usize = 64;

/// A document as the writers take it: with a ticket for a page, which
/// tantivy's indexing thread drops once it has indexed the page. Boxed:
/// tantivy's queue to its indexing thread has 10,000 slots made at each
/// commit, each four documents wide, and with the document inline they
/// were 5.6 MB a writer.
struct QueuedDoc {
    doc: Box<TantivyDocument>,
    _ticket: Option<Ticket>,
}

impl tantivy::Document for QueuedDoc {
    type Value<'a> = <TantivyDocument as tantivy::Document>::Value<'a>;
    type FieldsValuesIter<'a> = <TantivyDocument as tantivy::Document>::FieldsValuesIter<'a>;

    fn iter_fields_and_values(&self) -> Self::FieldsValuesIter<'_> {
        self.doc.iter_fields_and_values()
    }

    fn into_tantivy_document(self) -> TantivyDocument {
        *self.doc
    }
}

/// Counts the pages in the pages writer's queue (see [`PAGES_IN_FLIGHT`]).
#[derive(Debug, Default)]
struct InFlight {
    state: std::sync::Mutex<InFlightCount>,
    taken: std::sync::Condvar,
}

#[derive(Debug, Default)]
struct InFlightCount {
    pages: usize,
    /// `add_page` waits for a page to be indexed.
    adder_waits: bool,
}

/// One page in flight; dropped when indexed.
struct Ticket(std::sync::Arc<InFlight>);

impl InFlight {
    /// Wait until fewer than `max` pages are in flight, then count one more.
    fn issue(self: &std::sync::Arc<Self>, max: usize) -> Ticket {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while state.pages >= max {
            state.adder_waits = true;
            state = self.taken.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.pages += 1;
        Ticket(std::sync::Arc::clone(self))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        state.pages -= 1;
        // Wake the adder only when it waits: most drops need no syscall.
        if std::mem::take(&mut state.adder_waits) {
            self.0.taken.notify_all();
        }
    }
}

/// One of the two tantivy indexes.
struct Part<F> {
    reader: IndexReader,
    writer: Option<IndexWriter<QueuedDoc>>,
    fields: F,
}

impl<F: Copy> Part<F> {
    fn read_only(&self) -> Self {
        Self {
            reader: self.reader.clone(),
            writer: None,
            fields: self.fields,
        }
    }
}

/// A search index directory (`pages/` and `anchors/`), open for writing
/// (one writer per directory: tantivy's lock) or read-only.
///
/// Writes ([`add_page`](Self::add_page), [`set_anchors`](Self::set_anchors))
/// are seen by searches after [`commit`](Self::commit). A read-only index
/// follows another handle's commits by itself after a short delay, or at
/// once on [`reload`](Self::reload).
pub struct SearchIndex {
    dir: PathBuf,
    pages: Part<PageFields>,
    anchors: Part<AnchorFields>,
    analyzers: QueryAnalyzers,
    in_flight: std::sync::Arc<InFlight>,
    /// What gives the pages added vectors (`crawl --semantic`, see
    /// [`with_embedder`](Self::with_embedder)); none by default.
    page_embedder: Option<std::sync::Arc<Embedder>>,
    /// What embeds queries over an index that holds page vectors: the page
    /// embedder, else the installed model, loaded by the first such query
    /// (shared by readers).
    query_embedder: std::sync::Arc<std::sync::OnceLock<Option<std::sync::Arc<Embedder>>>>,
    /// The last query embedded and its vector (shared by readers): a query
    /// across the cluster asks each shard twice (its candidates, then its
    /// top pages), and a pass is most of a query's time.
    last_query: std::sync::Arc<std::sync::Mutex<Option<EmbeddedQuery>>>,
}

/// A query and its vector.
type EmbeddedQuery = (String, Vec<f32>);

impl fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SearchIndex")
            .field("dir", &self.dir)
            .field("writable", &self.pages.writer.is_some())
            .field("pages", &self.page_count())
            .finish_non_exhaustive()
    }
}

fn err(context: &'static str) -> impl FnOnce(TantivyError) -> SearchError {
    move |e| SearchError::Index {
        context,
        source: Box::new(e),
    }
}

fn io_err(context: &'static str) -> impl FnOnce(std::io::Error) -> SearchError {
    move |e| SearchError::Index {
        context,
        source: Box::new(e),
    }
}

/// A new index's settings: stored text (the start of each page's body, for
/// snippets) compressed with zstd at level 1 in blocks of 64 KB, not
/// tantivy's lz4 in blocks of 16 KB. On the bench's large web the pages
/// index is 819 MB this way, 797 MB at zstd's level 3 and 1,263 MB with
/// lz4; level 3 cost about 4 CPU-s more to index, and more in a crawl,
/// where merging a segment with deleted pages compresses its stored text
/// again. A block holds about three pages here, so a snippet decompresses
/// three pages' text at most. An index made with other settings keeps them.
fn new_index_settings() -> tantivy::IndexSettings {
    tantivy::IndexSettings {
        docstore_compression: tantivy::store::Compressor::Zstd(tantivy::store::ZstdCompressor {
            compression_level: Some(ZSTD_LEVEL),
        }),
        docstore_blocksize: STORE_BLOCK_BYTES,
        ..Default::default()
    }
}

/// zstd's level for the stored text.
const ZSTD_LEVEL: i32 = 1;

/// The stored text's block size.
const STORE_BLOCK_BYTES: usize = 64 * 1024;

/// Decompressed blocks a segment's reader keeps (tantivy's default is
/// 100: 6.4 MB a segment at 64 KB blocks). A query reads at most one block
/// a result for its snippet.
const STORE_CACHE_BLOCKS: usize = 10;

fn open_part<F>(
    dir: &Path,
    name: &str,
    schema: Schema,
    fields: fn(&Schema) -> Result<F, String>,
    writer_bytes: Option<usize>,
) -> Result<Part<F>, SearchError> {
    let path = dir.join(name);
    let (part, merge_max_docs) = if name == "pages" {
        (IndexPart::Pages, PAGES_MERGE_MAX_DOCS)
    } else {
        (IndexPart::Anchors, ANCHORS_MERGE_MAX_DOCS)
    };
    let index = if writer_bytes.is_some() {
        std::fs::create_dir_all(&path).map_err(|source| SearchError::Io {
            dir: path.clone(),
            source,
        })?;
        let directory = MmapDirectory::open(&path).map_err(|e| SearchError::Index {
            context: "open directory",
            source: Box::new(e),
        })?;
        if path.join("meta.json").is_file() {
            // An index made by an earlier version may lack a field added
            // since (the anchors' context): it is used as it is, if every
            // field it has is one of this version's, unchanged.
            let index = Index::open(directory).map_err(err("open"))?;
            if let Some(reason) = schema::not_a_subset(&index.schema(), &schema) {
                return Err(SearchError::Incompatible {
                    dir: dir.to_path_buf(),
                    reason,
                });
            }
            index
        } else {
            Index::builder()
                .schema(schema)
                .settings(new_index_settings())
                .open_or_create(directory)
                .map_err(err("create"))?
        }
    } else {
        if !path.join("meta.json").is_file() {
            return Err(SearchError::NoIndex {
                dir: dir.to_path_buf(),
            });
        }
        Index::open_in_dir(&path).map_err(err("open"))?
    };
    let fields = fields(&index.schema()).map_err(|reason| SearchError::Incompatible {
        dir: dir.to_path_buf(),
        reason,
    })?;
    schema::register_analyzers(&index, part);
    let writer = match writer_bytes {
        None => None,
        Some(bytes) => {
            // One indexing thread each (the indexer's own thread prepares
            // pages beside them, and each thread holds an arena of its
            // own), and one merge thread (tantivy's default is four per
            // writer): each running merge holds memory of its own.
            let options = IndexWriterOptions::builder()
                .num_worker_threads(1)
                .memory_budget_per_thread(bytes)
                .num_merge_threads(1)
                .build();
            let writer: IndexWriter<QueuedDoc> =
                index.writer_with_options(options).map_err(|e| match e {
                    TantivyError::LockFailure(..) => SearchError::Locked {
                        dir: dir.to_path_buf(),
                        source: Box::new(e),
                    },
                    e => err("open for writing")(e),
                })?;
            writer.set_merge_policy(Box::new(super::merges::CappedMerges {
                max_docs: merge_max_docs,
            }));
            Some(writer)
        }
    };
    let policy = if writer.is_some() {
        ReloadPolicy::Manual
    } else {
        ReloadPolicy::OnCommitWithDelay
    };
    let reader = index
        .reader_builder()
        .reload_policy(policy)
        .doc_store_cache_num_blocks(STORE_CACHE_BLOCKS)
        .try_into()
        .map_err(err("open a reader"))?;
    Ok(Part {
        reader,
        writer,
        fields,
    })
}

impl SearchIndex {
    /// Open the index in `dir` for writing, creating it if absent. Only one
    /// handle may write a directory: another gets [`SearchError::Locked`].
    pub fn open(dir: &Path) -> Result<Self, SearchError> {
        Self::open_with(dir, true)
    }

    /// Open an existing index to search it, beside a writer if there is
    /// one; [`SearchError::NoIndex`] if there is none.
    pub fn open_read_only(dir: &Path) -> Result<Self, SearchError> {
        Self::open_with(dir, false)
    }

    fn open_with(dir: &Path, write: bool) -> Result<Self, SearchError> {
        let pages = open_part(
            dir,
            "pages",
            PageFields::schema(),
            PageFields::of,
            write.then_some(PAGES_WRITER_BYTES),
        )?;
        let anchors = open_part(
            dir,
            "anchors",
            AnchorFields::schema(),
            AnchorFields::of,
            write.then_some(ANCHORS_WRITER_BYTES),
        )?;
        Ok(Self {
            dir: dir.to_path_buf(),
            pages,
            anchors,
            analyzers: QueryAnalyzers::new(),
            in_flight: Default::default(),
            page_embedder: None,
            query_embedder: Default::default(),
            last_query: Default::default(),
        })
    }

    /// A read-only handle on the same index that sees this one's commits
    /// as they are made (it shares the readers), for queries on other
    /// threads while this handle writes.
    pub fn reader(&self) -> SearchIndex {
        SearchIndex {
            dir: self.dir.clone(),
            pages: self.pages.read_only(),
            anchors: self.anchors.read_only(),
            analyzers: self.analyzers.clone(),
            in_flight: Default::default(),
            page_embedder: None,
            query_embedder: self.query_embedder.clone(),
            last_query: self.last_query.clone(),
        }
    }

    /// Give every page added from now on vectors of its passages, made by
    /// `embedder` (which also embeds this index's queries).
    pub fn with_embedder(self, embedder: std::sync::Arc<Embedder>) -> Self {
        if self.pages.fields.vectors.is_none() {
            tracing::warn!(
                dir = %self.dir.display(),
                "this index was made before page vectors: its pages get none \
                 (`web_crawler index rebuild --semantic` makes it again with them)"
            );
        }
        Self {
            query_embedder: std::sync::Arc::new(std::sync::OnceLock::from(Some(embedder.clone()))),
            page_embedder: Some(embedder),
            ..self
        }
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Index a page, replacing any page with the same URL (at the next commit).
    pub fn add_page(&mut self, doc: &PageDoc) -> Result<(), SearchError> {
        let f = self.pages.fields;
        let writer = self.pages.writer.as_mut().ok_or(SearchError::ReadOnly)?;
        let body = truncate(&doc.body, MAX_BODY_BYTES);
        let start = truncate(body, SNIPPET_SCAN_BYTES);
        let url_words = schema::url_words(&doc.url);
        // The document holds its values in one buffer: sized at once, it
        // is not grown (copied) six times over a page's body.
        let headings: usize = doc.headings.iter().map(String::len).sum();
        let mut d = TantivyDocument::with_capacity(
            doc.url.len()
                + doc.title.len()
                + headings
                + body.len()
                + start.len()
                + url_words.len()
                + 64,
        );
        d.add_text(f.url, &doc.url);
        d.add_text(f.title, &doc.title);
        for h in &doc.headings {
            d.add_text(f.headings, h);
        }
        d.add_text(f.body, body);
        if let Some(field) = f.body_start {
            d.add_text(field, start);
        }
        // The words the text fields gave (see `schema::register_analyzers`).
        d.add_text(f.spell, schema::SPELL_FROM_TEXT);
        d.add_text(f.url_words, url_words);
        d.add_u64(f.out_links, u64::from(doc.out_links));
        d.add_u64(f.words, word_count(body));
        if let (Some(field), Some(embedder)) = (f.vectors, &self.page_embedder) {
            // A page the model fails on is still a page: indexed without
            // vectors and a warning, never a crash (the indexer would retry it).
            match embedder.passages(&doc.title, body) {
                Ok(vectors) => d.add_bytes(field, &embed::pack(&vectors)),
                Err(why) => tracing::warn!(url = %doc.url, %why, "indexed without vectors"),
            }
        }
        writer.delete_term(Term::from_field_text(f.url, &doc.url));
        let ticket = self.in_flight.issue(PAGES_IN_FLIGHT);
        writer
            .add_document(QueuedDoc {
                doc: Box::new(d),
                _ticket: Some(ticket),
            })
            .map_err(err("add a page"))?;
        Ok(())
    }

    /// Set the anchor texts of `source`'s links, replacing the ones it
    /// had (a re-crawled page may have dropped some). Several links to one
    /// target are one anchor with their texts joined; links to itself are
    /// left out. One delete per page: a delete per link cost more memory
    /// and time than the anchors themselves.
    pub fn set_anchors(&mut self, source: &str, links: &[AnchorDoc]) -> Result<(), SearchError> {
        let f = self.anchors.fields;
        let writer = self.anchors.writer.as_mut().ok_or(SearchError::ReadOnly)?;
        writer.delete_term(Term::from_field_text(f.source, source));
        // Borrowed from `links`, copied only to join a second link's text.
        let mut targets: Vec<(&str, Cow<'_, str>, Cow<'_, str>)> = Vec::new();
        let mut at: HashMap<&str, usize> = HashMap::new();
        for link in links.iter().filter(|l| l.target != source) {
            match at.get(link.target.as_str()) {
                Some(&i) => {
                    let (_, text, context) = &mut targets[i];
                    let text = text.to_mut();
                    text.push('\n');
                    text.push_str(&link.text);
                    if !link.context.is_empty() {
                        let context = context.to_mut();
                        context.push('\n');
                        context.push_str(&link.context);
                    }
                }
                None => {
                    at.insert(&link.target, targets.len());
                    targets.push((
                        &link.target,
                        Cow::Borrowed(&link.text),
                        Cow::Borrowed(&link.context),
                    ));
                }
            }
        }
        for (target, text, context) in targets {
            // The link's text goes to two fields (`text`, `spell`).
            let mut d = TantivyDocument::with_capacity(
                source.len() + target.len() + 2 * text.len() + context.len() + 64,
            );
            d.add_text(f.source, source);
            d.add_text(f.target, target);
            d.add_text(f.text, &text);
            d.add_text(f.spell, &text);
            if let Some(field) = f.context
                && !context.is_empty()
            {
                d.add_text(field, &context);
            }
            writer
                .add_document(QueuedDoc {
                    doc: Box::new(d),
                    _ticket: None,
                })
                .map_err(err("add an anchor"))?;
        }
        Ok(())
    }

    /// Remove the page of `url` and the links it gave (its host moved to
    /// another node, which has a newer copy), from the next commit on.
    pub fn remove_page(&mut self, url: &str) -> Result<(), SearchError> {
        let pages = self.pages.writer.as_mut().ok_or(SearchError::ReadOnly)?;
        pages.delete_term(Term::from_field_text(self.pages.fields.url, url));
        self.set_anchors(url, &[])
    }

    /// Make the writes durable and visible to searches. The two indexes
    /// commit at once, on this thread and one more: a commit writes its
    /// writer's segment, and one after the other, each writer's indexing
    /// thread sat idle while the other's wrote (nothing is added during a
    /// commit).
    pub fn commit(&mut self) -> Result<(), SearchError> {
        fn commit_part<F>(part: &mut Part<F>) -> Result<(), SearchError> {
            let writer = part.writer.as_mut().ok_or(SearchError::ReadOnly)?;
            writer.commit().map_err(err("commit"))?;
            part.reader.reload().map_err(err("reload after commit"))
        }
        let (pages, anchors) = (&mut self.pages, &mut self.anchors);
        let (pages, anchors) = std::thread::scope(|scope| {
            let anchors = scope.spawn(move || commit_part(anchors));
            let pages = commit_part(pages);
            let anchors = anchors
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (pages, anchors)
        });
        pages.and(anchors)
    }

    /// See the latest commit now (a read-only index also does by itself,
    /// shortly after each commit).
    pub fn reload(&self) -> Result<(), SearchError> {
        self.pages.reader.reload().map_err(err("reload"))?;
        self.anchors.reader.reload().map_err(err("reload"))
    }

    /// Pages in the index (as of the last commit seen).
    pub fn page_count(&self) -> u64 {
        self.pages.reader.searcher().num_docs()
    }

    /// Search. Bad queries are [`SearchError::Query`]; an empty index or a
    /// query matching nothing is an answer with no results.
    pub fn search(&self, query: &str, opts: &SearchOptions) -> Result<SearchAnswer, SearchError> {
        let mut analyzers = self.analyzers.clone();
        let mut parsed = query::parse(query, &mut analyzers)?;
        let limit = opts.limit.min(MAX_LIMIT);
        let s = self.searchers(None);
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
        let ranked = match opts.ranking {
            Ranking::Full | Ranking::Words => {
                let terms = s.rank_terms(&parsed, &mut analyzers);
                let ranked = s.full(&parsed, &terms, limit)?;
                ranked.pages.iter().map(|p| (p.score, p.addr)).collect()
            }
            Ranking::PlainBm25 => s.plain(&parsed, limit)?,
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
    /// (see [`shard`](super::shard)).
    pub fn shard_stats(
        &self,
        query: &str,
        phase: ShardPhase,
        known: &ShardStats,
    ) -> Result<ShardStats, SearchError> {
        let mut analyzers = self.analyzers.clone();
        let parsed = query::parse(query, &mut analyzers)?;
        let s = self.searchers(Some(known));
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
                    let (best, context, matched) = shard::evidence_keys(&url);
                    shard::max(&mut out, best, hits.best);
                    shard::max(&mut out, context, hits.context);
                    for (i, held) in hits.matched.iter().enumerate() {
                        if *held {
                            shard::max(&mut out, format!("{matched}{i}"), 1.0);
                        }
                    }
                }
                shard::sum(&mut out, ANCHORS_DONE.to_string(), 1);
            }
            ShardPhase::Candidates => {
                let (parsed, _) = s.corrected(query, parsed, &mut analyzers);
                let s = self.embed_query(s, query);
                let terms = s.rank_terms(&parsed, &mut analyzers);
                let ranked = s.full(&parsed, &terms, 1)?;
                for (i, url) in ranked.candidates.iter().enumerate() {
                    shard::sum(&mut out, shard::candidate_key(url), 1);
                    if let Some(score) = ranked.hit_scores.get(i) {
                        shard::max(&mut out, shard::hit_key(url), *score);
                    }
                }
            }
            ShardPhase::Links => {
                let urls = shard::candidates(known);
                for (url, n) in urls.iter().zip(s.in_links(&urls)?) {
                    shard::sum(&mut out, shard::links_key(url), n);
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
        let mut analyzers = self.analyzers.clone();
        let parsed = query::parse(query, &mut analyzers)?;
        let s = self.searchers(Some(stats));
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
        let terms = s.rank_terms(&parsed, &mut analyzers);
        let ranked = s.full(&parsed, &terms, limit)?;
        let pairs: Vec<(f32, DocAddress)> =
            ranked.pages.iter().map(|p| (p.score, p.addr)).collect();
        let hits = s.hits(&parsed, &pairs, &mut analyzers)?;
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
            .get_or_init(|| match Embedder::installed() {
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

/// Words of `text`, split at ASCII white space (other white space is rare
/// in page text, and the count only feeds the hub penalty): the bytes that
/// start a word, counted in runs of 255 into a byte each, which the
/// compiler turns into vector code. It runs twice for every page on the
/// index thread; a loop carrying "in a word" from byte to byte went at
/// 0.5 GB/s, this at 4.5.
pub(super) fn word_count(text: &str) -> u64 {
    fn space(b: u8) -> bool {
        (b == b' ') | (b == b'\n') | (b == b'\t') | (b == b'\r') | (b == 0x0C)
    }
    let bytes = text.as_bytes();
    let Some(&first) = bytes.first() else {
        return 0;
    };
    let mut starts = u64::from(!space(first));
    for (before, at) in bytes.chunks(255).zip(bytes[1..].chunks(255)) {
        let mut run = 0u8;
        for (&b, &a) in before.iter().zip(at) {
            run += u8::from(space(b) & !space(a));
        }
        starts += u64::from(run);
    }
    starts
}

/// One search's view of both indexes, scored with the cluster's
/// statistics when the index is one shard of a query across it
/// (`global`), else with its own.
struct Searchers<'g> {
    pages: Searcher,
    anchors: Searcher,
    pf: PageFields,
    af: AnchorFields,
    global: Option<&'g ShardStats>,
    /// The query's vector, when the pages have vectors and the model is
    /// at hand (see [`SearchIndex::embed_query`]).
    query_vector: Option<Vec<f32>>,
}

impl Searchers<'_> {
    /// Whether any page has vectors.
    fn has_vectors(&self) -> bool {
        self.pf.vectors.is_some()
            && self.pages.segment_readers().iter().any(|segment| {
                matches!(segment.fast_fields().bytes("vectors"), Ok(Some(v)) if v.num_terms() > 0)
            })
    }

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
}

fn term_query(field: Field, text: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, text),
        IndexRecordOption::WithFreqs,
    ))
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

/// The strings of `docs`' first value in a str fast field, in `docs`'
/// order (empty for a document without one), reading the dictionary once
/// in ordinal order.
fn first_strs(
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

/// The candidates of a query, ranked, with the two parts of each score
/// and the best text score they were divided by (see `learned::score`).
struct Ranked {
    best_text: f32,
    pages: Vec<RankedPage>,
    /// The URL of every candidate measured.
    candidates: Vec<String>,
    /// The candidate scores of the first candidates (those found by their
    /// own text; the others were found through links to them).
    hit_scores: Vec<f32>,
}

struct RankedPage {
    score: f32,
    addr: DocAddress,
    text: f32,
    rest: f32,
}

/// The key a shard's anchors phase leaves in the statistics: the links'
/// evidence of every shard is in them (`e.` keys), none to search again.
const ANCHORS_DONE: &str = "e.done";
/// The key of the links not deleted (BM25 counts deleted ones too).
const LIVE_LINKS: &str = "a.live";

/// Anchor evidence for one target page.
#[derive(Default)]
struct AnchorHits {
    best: f32,
    /// The best context score.
    context: f32,
    matched: Vec<bool>,
}

impl Searchers<'_> {
    /// The pages' BM25 statistics (the cluster's, with `global`).
    fn page_stats(&self) -> Stats<'_> {
        Stats {
            searcher: &self.pages,
            part: Side::Pages,
            global: self.global,
        }
    }

    /// The links' BM25 statistics (the cluster's, with `global`).
    fn anchor_stats(&self) -> Stats<'_> {
        Stats {
            searcher: &self.anchors,
            part: Side::Anchors,
            global: self.global,
        }
    }

    /// The query as searched: corrected when a word was (and the corrected
    /// text, the answer's `did_you_mean`).
    fn corrected(
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

    /// The links' evidence every shard gathered in a query's anchors phase
    /// (see [`shard`](super::shard)), when it did.
    fn cluster_anchors(&self, terms: usize) -> Option<HashMap<String, AnchorHits>> {
        let global = self.global?;
        global.sums.get(ANCHORS_DONE)?;
        Some(
            shard::evidence(global, terms)
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

    /// What typo correction asks of the vocabulary for the query's words,
    /// in this shard: pages, and per word its count, its neighbours within
    /// typo distance and whether a page holds it with the others (only
    /// for a word that may be rare over the cluster: one of a tenth of
    /// the share `typo` calls rare here, or less).
    fn vocabulary_stats(&self, q: &ParsedQuery, out: &mut ShardStats) {
        let docs = self.pages.num_docs();
        shard::sum(out, "v.docs".to_string(), docs);
        let words = distinct_words(q);
        for word in &words {
            let df = Vocabulary::doc_freq(self, word);
            shard::sum(out, shard::vocab_df_key(word), df);
            let maybe_rare = df <= (docs / 2_000).max(1);
            if !typo::correctable(word) || !maybe_rare {
                continue;
            }
            for (other, n) in self.neighbours(word, typo::max_distance(word)) {
                shard::sum(out, shard::neighbour_key(word, &other), n);
            }
            let others: Vec<&str> = words
                .iter()
                .filter(|w| *w != word)
                .map(String::as_str)
                .collect();
            for subset in subsets(&others) {
                let held = u64::from(self.co_occurs(word, &subset));
                shard::sum(out, shard::co_key(word, &subset), held);
            }
        }
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
            shard::sum(
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
            shard::sum(out, part.docs_key(), docs);
            for field in fields {
                let tokens = searcher.total_num_tokens(*field).map_err(err("read"))?;
                shard::sum(out, part.tokens_key(*field), tokens);
                for t in &terms {
                    let df = searcher
                        .doc_freq(&Term::from_field_text(*field, t))
                        .map_err(err("read"))?;
                    shard::sum(out, part.df_key(*field, t), df);
                }
            }
        }
        shard::sum(out, LIVE_LINKS.to_string(), self.anchors.num_docs());
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
    fn rank_terms(&self, q: &ParsedQuery, analyzers: &mut QueryAnalyzers) -> RankTerms {
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

    /// Baseline: BM25 over title and body.
    fn plain(&self, q: &ParsedQuery, limit: usize) -> Result<Vec<(f32, DocAddress)>, SearchError> {
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
    fn full(
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
        if let Some(cutoff) = self.global.and_then(|g| shard::cutoff(g, wanted)) {
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
                let (text, rest) = (f.text(), learned::rest(f));
                let page = RankedPage {
                    score: learned::score(text, best_text, rest),
                    addr,
                    text,
                    rest,
                };
                (page, url.as_str())
            })
            .collect();
        // Ties by URL: the order of pages that score alike is the same
        // whichever shards hold them (see `shards::merge_tops`).
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
    fn anchor_hits(
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

    /// The features of each candidate, from postings and fast fields.
    fn measure(
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
                if let Some(all) = global.sums.get(&shard::links_key(url)) {
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
            let vectors = match &self.query_vector {
                Some(_) => fast.bytes("vectors").map_err(err("read"))?,
                None => None,
            };
            let mut packed = Vec::new();
            for (j, (doc, i)) in docs.iter().enumerate() {
                let feat = &mut feats[j];
                feat.out_links = out_links.first(*doc).unwrap_or(0);
                feat.words = words.first(*doc).unwrap_or(0);
                if let (Some(query), Some(vectors)) = (&self.query_vector, &vectors) {
                    packed.clear();
                    if let Some(ord) = vectors.ords().first(*doc) {
                        vectors
                            .ord_to_bytes(ord, &mut packed)
                            .map_err(io_err("read"))?;
                    }
                    feat.similarity = embed::best_similarity(query, &packed);
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

    /// Title, URL and snippet of the ranked pages.
    fn hits(
        &self,
        q: &ParsedQuery,
        ranked: &[(f32, DocAddress)],
        analyzers: &mut QueryAnalyzers,
    ) -> Result<Vec<SearchHit>, SearchError> {
        if ranked.is_empty() {
            return Ok(Vec::new());
        }
        let pf = self.pf;
        let mut terms = BTreeMap::new();
        for t in q.terms() {
            let df = self
                .pages
                .doc_freq(&Term::from_field_text(pf.body, t))
                .map_err(err("read"))?;
            if df > 0 {
                terms.insert(t.to_string(), 1.0 / (1.0 + df as f32));
            }
        }
        // One fragment over the scanned text: every match, to choose from.
        let generator = SnippetGenerator::new(
            terms,
            analyzers.english.clone(),
            pf.body,
            SNIPPET_SCAN_BYTES,
        );
        // Reading a stored page and cutting its snippet: ten at once on two threads.
        on_two_threads(ranked.len(), |k| {
            let (score, addr) = &ranked[k];
            let doc: TantivyDocument = self.pages.doc(*addr).map_err(err("read a page"))?;
            let text = |f: Field| {
                doc.get_first(f)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let body = text(pf.body_start.unwrap_or(pf.body));
            let scan = truncate(&body, SNIPPET_SCAN_BYTES);
            let found = generator.snippet(scan);
            let at = found.fragment_range().start;
            let marks: Vec<Range<usize>> = found
                .highlighted()
                .iter()
                .map(|r| r.start + at..r.end + at)
                .collect();
            let (snippet, highlights) = if marks.is_empty() {
                (truncate_chars(&body, SNIPPET_CHARS), Vec::new())
            } else {
                let w = snippet_window(scan, &marks, SNIPPET_CHARS);
                let inside = marks
                    .iter()
                    .filter(|m| m.start >= w.start && m.end <= w.end)
                    .map(|m| m.start - w.start..m.end - w.start)
                    .collect();
                (scan[w].to_string(), inside)
            };
            let (snippet, highlights) = collapse_whitespace(&snippet, &highlights);
            Ok(SearchHit {
                url: text(pf.url),
                title: collapse_whitespace(&text(pf.title), &[]).0,
                snippet,
                score: *score,
                highlights,
            })
        })
        .into_iter()
        .collect()
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

/// The part of `text` (about `max` bytes, cut at words) to show: the
/// window holding the most different matched words (`marks`, sorted), then
/// the tightest such, the earliest on ties; a third of the spare room
/// before the first match, the rest after.
fn snippet_window(text: &str, marks: &[Range<usize>], max: usize) -> Range<usize> {
    let mut best = (0, std::cmp::Reverse(usize::MAX), 0..0);
    for (i, m) in marks.iter().enumerate() {
        let inside: Vec<&Range<usize>> = marks[i..]
            .iter()
            .take_while(|r| r.end <= m.start + max)
            .collect();
        let mut words: Vec<String> = inside
            .iter()
            .map(|r| text[(*r).clone()].to_lowercase())
            .collect();
        words.sort_unstable();
        words.dedup();
        let last = inside.last().map_or(m.end, |r| r.end);
        // The tightest span holding these words ends at the first mark
        // completing them.
        let mut seen: Vec<String> = Vec::new();
        let mut end = last;
        for r in &inside {
            let w = text[(*r).clone()].to_lowercase();
            if !seen.contains(&w) {
                seen.push(w);
                if seen.len() == words.len() {
                    end = r.end;
                    break;
                }
            }
        }
        let key = (words.len(), std::cmp::Reverse(end - m.start));
        if (key.0, key.1) > (best.0, best.1) {
            best = (key.0, key.1, m.start..end);
        }
    }
    let (first, last) = (best.2.start, best.2.end);
    let lead = max.saturating_sub(last - first) / 3;
    let mut start = first.saturating_sub(lead);
    if start + max > text.len() {
        // Near the end: use the room before instead.
        start = text.len().saturating_sub(max).min(first);
    }
    start = text.ceil_char_boundary(start);
    if start > 0 {
        // Begin at a word: after the first whitespace, if before the match.
        if let Some(ws) = text[start..first].find(char::is_whitespace) {
            start += ws + 1;
        } else if !text[..start].ends_with(char::is_whitespace) {
            start = first;
        }
    }
    let mut end = text.floor_char_boundary((start + max).min(text.len()).max(last));
    if end < text.len()
        && let Some(ws) = text[last..end].rfind(char::is_whitespace)
    {
        end = last + ws;
    }
    start..end
}

/// The first `max` chars of `text`, cut at a word boundary when there is one.
fn truncate_chars(text: &str, max: usize) -> String {
    let text = text.trim_start();
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => {
            let cut = text[..end].rfind(char::is_whitespace).unwrap_or(end);
            text[..cut].to_string()
        }
    }
}

/// `text` with runs of whitespace (and control characters) made one space
/// and ends trimmed; `ranges` (byte ranges of `text`) mapped onto it.
fn collapse_whitespace(text: &str, ranges: &[Range<usize>]) -> (String, Vec<Range<usize>>) {
    let mut out = String::with_capacity(text.len());
    // map[i]: position in `out` of byte i of `text` (and of its end).
    let mut map = vec![0usize; text.len() + 1];
    let mut pending_space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() || c.is_control() {
            pending_space = !out.is_empty();
        } else {
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            map[i..i + c.len_utf8()].fill(out.len());
            out.push(c);
            map[i + c.len_utf8()] = out.len();
            continue;
        }
        map[i..i + c.len_utf8()].fill(out.len());
        map[i + c.len_utf8()] = out.len();
    }
    let ranges = ranges
        .iter()
        .filter(|r| r.end <= text.len() && r.start < r.end)
        .map(|r| map[r.start]..map[r.end].max(map[r.start]))
        .filter(|r| r.start < r.end)
        .collect();
    (out, ranges)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapse_whitespace_maps_highlights() {
        let text = "  bake\n\n the   bread\t";
        let (out, ranges) = collapse_whitespace(text, &[2..6, 15..20]);
        assert_eq!(out, "bake the bread");
        let marked: Vec<&str> = ranges.iter().map(|r| &out[r.clone()]).collect();
        assert_eq!(marked, ["bake", "bread"]);
        assert_eq!(collapse_whitespace("", &[]).0, "");
        let (out, ranges) = collapse_whitespace("é  ü", &[0..2, 4..6]);
        assert_eq!(out, "é ü");
        assert_eq!(ranges, [0..2, 3..5]);
    }

    #[test]
    fn the_snippet_window_holds_the_most_different_matches() {
        let text =
            "bread here. ".repeat(30) + "then the starter and the bread, then more filler words";
        let starter = text.find("starter").unwrap();
        let bread = text.rfind("bread").unwrap();
        let mut marks: Vec<Range<usize>> = text
            .match_indices("bread")
            .map(|(i, w)| i..i + w.len())
            .collect();
        marks.push(starter..starter + 7);
        marks.sort_by_key(|r| r.start);
        let w = snippet_window(&text, &marks, 60);
        assert!(
            w.start <= starter && bread + 5 <= w.end,
            "{:?}",
            &text[w.clone()]
        );
        assert!(w.end - w.start <= 60);
        let shown = &text[w];
        assert!(
            !shown.starts_with(' ') && !shown.ends_with(' '),
            "{shown:?}"
        );
        // A match at the very start.
        let first = [Range { start: 0, end: 5 }];
        assert_eq!(snippet_window("bread is good", &first, 60), 0..13);
        // A short text is shown whole.
        let short = "Feed the starter, then bake the sourdough bread.";
        let at = short.find("sourdough").unwrap();
        let marks = [Range {
            start: at,
            end: at + 9,
        }];
        assert_eq!(snippet_window(short, &marks, 60), 0..short.len());
    }

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

    #[test]
    fn words_are_counted_between_spaces() {
        assert_eq!(word_count(""), 0);
        assert_eq!(word_count("  one\ttwo\n three  "), 3);
        assert_eq!(word_count("héllo wörld"), 2);
        assert_eq!(
            word_count("a\u{b}b\u{c}c\rd"),
            3,
            "vertical tab is not ASCII white space"
        );
        // As splitting does, over texts longer than a run and cut anywhere.
        let parts = ["alpha", " ", "\n\t", "délta", "x", "  ", "\r", "\u{c}"];
        let mut seed = 7_u64;
        let mut text = String::new();
        while text.len() < 3_000 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            text.push_str(parts[(seed >> 33) as usize % parts.len()]);
        }
        for start in (0..600).map(|i| text.floor_char_boundary(i * 3)) {
            for len in [0, 1, 254, 255, 256, 511, 2_000] {
                let piece = &text[start..text.floor_char_boundary(start + len)];
                let split = piece.split_ascii_whitespace().count() as u64;
                assert_eq!(word_count(piece), split, "{piece:?}");
            }
        }
    }

    #[test]
    fn truncate_keeps_char_and_word_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
        assert_eq!(truncate_chars("one two three", 9), "one two");
        assert_eq!(truncate_chars("short", 200), "short");
    }

    #[test]
    fn pages_in_flight_wait_for_one_to_be_indexed() {
        let in_flight = std::sync::Arc::new(InFlight::default());
        let first = in_flight.issue(2);
        let _second = in_flight.issue(2);
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let in_flight = std::sync::Arc::clone(&in_flight);
            std::thread::spawn(move || {
                let third = in_flight.issue(2);
                tx.send(()).unwrap();
                third
            })
        };
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(100))
                .is_err(),
            "two in flight: the third waits"
        );
        drop(first);
        rx.recv_timeout(std::time::Duration::from_secs(5))
            .expect("one indexed: the third goes");
        drop(waiter.join().unwrap());
        assert_eq!(in_flight.state.lock().unwrap().pages, 1);
    }

    #[test]
    fn a_search_index_can_move_between_threads() {
        fn send<T: Send>() {}
        send::<SearchIndex>();
    }
}
