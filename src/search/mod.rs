//! Full-text search over the crawled pages (cargo feature `search`, on by
//! default).
//!
//! A [`SearchIndex`] is a directory holding two tantivy indexes: `pages/`
//! (one document per page: title, headings, visible body text, the words of
//! its URL, its out-link count and own word count) and `anchors/` (one
//! document per link: source, target, anchor text and the words around
//! the link in the linking page's text, its context). A page's in-links are
//! the document frequency of its URL among the anchors' targets, so a new
//! link costs one small document and never re-indexes the page it points
//! at (a replaced anchor still counts until tantivy merges its segment). Text is analyzed for English: words lower-cased and ASCII-folded,
//! stop words (Lucene's list plus question words such as "how" and "what")
//! dropped with their positions kept, Porter stemming. The search needs the
//! index directory only, never the crawl's store; [`index_dir_for`] names it
//! beside a store file.
//!
//! # Ranking
//!
//! [`Ranking::Full`] works in three steps. A query is cut into words and
//! `"quoted phrases"` (which must occur). Words that are absent from the
//! index's vocabulary — or rare in it, alone, and one edit from a far more
//! common word — are corrected by edit distance weighted by document
//! frequency, and the corrected query is the one searched and reported as
//! [`SearchAnswer::did_you_mean`]. Two adjacent words whose concatenation
//! is a word of the index ("back up" → `backup`, "data base" → `database`)
//! add that word as an alternative: a page holding it holds both query
//! words for coverage and proximity. Candidates are then gathered by tantivy's
//! BM25: the top pages over title, headings, body and URL words, and the
//! pages that the best-matching anchor texts point at (a page that never
//! names itself is found through the links to it; words of one link text
//! in twenty or more, "next" or "home", left out of that search), and the
//! pages whose
//! links' context matches best (words around a tenth or more of all links
//! left out of that search). Last, each candidate is
//! measured from the postings and fast fields (no stored document is read)
//! and re-scored: per-field BM25 with the body weighted above title,
//! anchor context, anchor text, headings and URL, and a little of its best
//! section's (the part under one heading that holds most of the query's
//! terms, scored as a document of its own: see `sections`); the share of query terms
//! the page (or its links' text and context) covers
//! and the share its own body holds (a "How to …" title alone does not
//! answer the question); how close together the terms sit; a small,
//! saturating prior from in-links; and a penalty for hub pages — indexes,
//! tables of contents, generated listings — which have many links and few
//! words of their own per link, and which plain BM25 ranks too high. Only
//! the results returned are read from the store, for their title and a
//! snippet, cut from that best section, which the result links to
//! (`page#anchor`, [`SearchHit::section_url`], with its heading path). The rules are in `rank.rs`, the weights in `learned.rs`
//! (fitted by `scripts/train-ranker.py`, kept hand-set while fitting
//! does not beat them).
//!
//! With vectors (pages indexed through [`SearchIndex::with_embedder`], a
//! `crawl --semantic`), the query as typed is embedded too ([`Embedder`]):
//! the pages whose best passage (a passage a section) is nearest to it
//! join the candidates, that cosine is one more signal, and when no
//! section holds every word of the query, the nearest passage's section
//! is the one the result links to. [`Ranking::Words`] is the same ranking
//! without them.
//!
//! [`Ranking::PlainBm25`] is the baseline the project measures against:
//! tantivy's BM25 over title and body with the same query words and
//! phrases, nothing else, no typo correction.
//!
//! ```no_run
//! # fn demo() -> Result<(), web_crawler::search::SearchError> {
//! use web_crawler::search::{PageDoc, SearchIndex, SearchOptions};
//! let mut index = SearchIndex::open("crawl.db.index".as_ref())?;
//! index.add_page(&PageDoc {
//!     url: "https://example.com/bread".into(),
//!     title: "Sourdough bread".into(),
//!     body: "Mix the starter with flour and water, then bake.".into(),
//!     ..PageDoc::default()
//! })?;
//! index.commit()?;
//! let answer = index.search("sourdugh bread", &SearchOptions::default())?;
//! assert_eq!(answer.did_you_mean.as_deref(), Some("sourdough bread"));
//! # Ok(()) }
//! ```

mod answer;
mod candidates;
mod cluster_stats;
mod context;
mod embed;
mod index;
mod learned;
mod measure;
mod merges;
mod query;
mod rank;
mod schema;
mod searchers;
mod sections;
mod snippets;
mod typo;
mod vocabulary;
mod word_count;

#[cfg(test)]
mod tests;

pub use cluster_stats::{ShardHit, ShardPhase, ShardStats, ShardTop};
pub use embed::{EmbedError, Embedder, model_dir};
pub use index::SearchIndex;

use std::path::{Path, PathBuf};

/// A fetched HTML page, as the extractor saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageDoc {
    /// The page's normalized URL; indexing a URL again replaces the page.
    pub url: String,
    pub title: String,
    pub headings: Vec<String>,
    /// Visible body text (navigation and footer left out).
    pub body: String,
    /// Number of links on the page (for the hub penalty).
    pub out_links: u32,
    /// Where `body`'s sections start: what a long page is ranked and
    /// linked to by, a section at a time.
    pub sections: Vec<SectionStart>,
}

/// One link of a page: its anchor text and the page it points to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnchorDoc {
    pub target: String,
    pub text: String,
    /// The words around the link in the linking page's text (see
    /// [`add_contexts`]); empty when unknown.
    pub context: String,
}

/// Words of a link's context on each side of its text.
const CONTEXT_WORDS: usize = 25;
/// Words of context a page gives all its links: a page with more than 16
/// links in its text gives each fewer than [`CONTEXT_WORDS`] a side. The
/// context was two fifths of the indexing CPU on the bench's pages (34
/// links in 8–40 KB of text); this bound takes a third of it away, and the
/// eval set moves by at most 0.01 on any row (600 words lost recall).
const CONTEXT_PAGE_WORDS: usize = 800;

/// Words a side for each of these link texts' contexts (see
/// [`CONTEXT_PAGE_WORDS`]).
fn context_words(texts: &[&str]) -> usize {
    let linked = texts.iter().filter(|t| !t.trim().is_empty()).count();
    CONTEXT_WORDS.min(CONTEXT_PAGE_WORDS / (2 * linked.max(1)))
}
/// A page at least this much a hub ([`rank::hubness`]) gives its links no
/// context.
const CONTEXT_HUB: f32 = 0.5;

/// Fill in the [`AnchorDoc::context`] of `page`'s links (in page order):
/// the words around each link's text in the page's body. A hub page's
/// links (an index, a table of contents) get none: the words around one
/// of its links are the labels of the others.
pub fn add_contexts(page: &PageDoc, links: &mut [AnchorDoc]) {
    let hub = rank::hubness(
        u64::from(page.out_links),
        word_count::word_count(&page.body),
    );
    if hub >= CONTEXT_HUB {
        return;
    }
    let texts: Vec<&str> = links.iter().map(|l| l.text.as_str()).collect();
    let contexts = context::anchor_contexts(&page.body, &texts, context_words(&texts));
    for (link, context) in links.iter_mut().zip(contexts) {
        link.context = context;
    }
}

/// How to rank results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Ranking {
    /// Typo correction, anchors, and the re-ranking described in the module
    /// doc, with the pages' vectors when the index has them.
    #[default]
    Full,
    /// [`Ranking::Full`] by the words alone, without the pages' vectors
    /// (what `Full` is on an index without them).
    Words,
    /// tantivy's BM25 over title and body: the baseline.
    PlainBm25,
}

/// Options of one search. `Default`: 10 results, [`Ranking::Full`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SearchOptions {
    /// At most this many results (capped at 1,000).
    pub limit: usize,
    pub ranking: Ranking,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            limit: 10,
            ranking: Ranking::Full,
        }
    }
}

impl SearchOptions {
    #[must_use]
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    #[must_use]
    pub fn ranking(mut self, ranking: Ranking) -> Self {
        self.ranking = ranking;
        self
    }
}

/// The answer and its results are the tree's own types, so an answer reads
/// the same from this index, from a running node and over the wire.
pub use web_crawler_actors::{SearchAnswer, SearchHit, SectionStart};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What went wrong with an index or a search.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    #[error("no search index at {}", dir.display())]
    NoIndex { dir: PathBuf },
    #[error(
        "the search index at {} is already open for writing (by another process or handle)",
        dir.display()
    )]
    Locked {
        dir: PathBuf,
        #[source]
        source: BoxError,
    },
    #[error(
        "the search index at {} cannot be used by this version: {reason} \
         (`web_crawler index rebuild` makes a new one from the store)",
        dir.display()
    )]
    Incompatible { dir: PathBuf, reason: String },
    #[error("the search index was opened read-only")]
    ReadOnly,
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error("cannot create the search index directory {}", dir.display())]
    Io {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("search index: {context}")]
    Index {
        context: &'static str,
        #[source]
        source: BoxError,
    },
}

/// A tantivy error as a [`SearchError`], with what was being done.
fn err(context: &'static str) -> impl FnOnce(tantivy::TantivyError) -> SearchError {
    move |e| SearchError::Index {
        context,
        source: Box::new(e),
    }
}

/// An I/O error reading the index as a [`SearchError`].
fn io_err(context: &'static str) -> impl FnOnce(std::io::Error) -> SearchError {
    move |e| SearchError::Index {
        context,
        source: Box::new(e),
    }
}

/// A query that cannot be searched.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    #[error("the query is empty")]
    Empty,
    #[error("the query is {len} bytes long; the limit is {max}")]
    TooLong { len: usize, max: usize },
    #[error("the query has {count} different words; the limit is {max}")]
    TooManyTerms { count: usize, max: usize },
    #[error("the query has an unbalanced quote (\"): close the phrase or remove the quote")]
    UnbalancedQuote,
    #[error(
        "the query has only common words (like \"the\", \"to\" or \"how\"), which are not indexed"
    )]
    OnlyStopWords,
}

/// The search index directory of a crawl store file: `crawl.db` →
/// `crawl.db.index`, beside it.
pub fn index_dir_for(db: &Path) -> PathBuf {
    let mut dir = db.as_os_str().to_owned();
    dir.push(".index");
    PathBuf::from(dir)
}

/// The first `max` bytes of `text`, or fewer, cut at a char boundary.
pub(crate) fn truncate(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

/// `task(0)` … `task(n - 1)` shared by this thread and one more (when
/// there are two cores and two tasks), their results in task order. A
/// query's per-segment work is independent, and so are a page's passages:
/// two cores answer it sooner.
pub(crate) fn on_two_threads<T: Send>(n: usize, task: impl Fn(usize) -> T + Sync) -> Vec<T> {
    // Asked once: on Linux the answer reads the cgroup's files.
    static CORES: std::sync::LazyLock<usize> =
        std::sync::LazyLock::new(|| std::thread::available_parallelism().map_or(1, |p| p.get()));
    if n < 2 || *CORES < 2 {
        return (0..n).map(task).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if i >= n {
                return done;
            }
            done.push((i, task(i)));
        }
    };
    let mut all = std::thread::scope(|scope| {
        let other = scope.spawn(work);
        let mut mine = work();
        // A panic there is a bug: it carries on here.
        mine.extend(
            other
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        );
        mine
    });
    all.sort_unstable_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, t)| t).collect()
}
