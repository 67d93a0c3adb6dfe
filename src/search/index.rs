//! [`SearchIndex`]: the handle on an index directory — opening (or
//! creating) its two tantivy indexes, writing pages and links, committing
//! and reloading. Searching it is in `answer.rs`.

use super::embed::{self, Embedder};
use super::query::QueryAnalyzers;
use super::schema::{self, AnchorFields, IndexPart, PageFields};
use super::sections;
use super::snippets::SNIPPET_SCAN_BYTES;
use super::word_count;
use super::{AnchorDoc, PageDoc, SearchError, err, truncate};
use crate::kill_points::{self, KillPoint};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use tantivy::directory::MmapDirectory;
use tantivy::indexer::IndexWriterOptions;
use tantivy::schema::{Schema, TantivyDocument};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyError, Term};

/// Body text beyond this is neither indexed nor stored.
const MAX_BODY_BYTES: usize = 1 << 20;

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
pub(super) struct Part<F> {
    pub(super) reader: IndexReader,
    writer: Option<IndexWriter<QueuedDoc>>,
    pub(super) fields: F,
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
    pub(super) pages: Part<PageFields>,
    pub(super) anchors: Part<AnchorFields>,
    pub(super) analyzers: QueryAnalyzers,
    in_flight: std::sync::Arc<InFlight>,
    /// What gives the pages added vectors (`crawl --semantic`, see
    /// [`with_embedder`](Self::with_embedder)); none by default.
    page_embedder: Option<std::sync::Arc<Embedder>>,
    /// What embeds queries over an index that holds page vectors: the page
    /// embedder, else the installed model, loaded by the first such query
    /// (shared by readers).
    pub(super) query_embedder:
        std::sync::Arc<std::sync::OnceLock<Option<std::sync::Arc<Embedder>>>>,
    /// The last query embedded and its vector (shared by readers): a query
    /// across the cluster asks each shard twice (its candidates, then its
    /// top pages), and a pass is most of a query's time.
    pub(super) last_query: std::sync::Arc<std::sync::Mutex<Option<EmbeddedQuery>>>,
    /// This handle answers one query ([`for_one_query`](Self::for_one_query)).
    pub(super) one_query: bool,
}

/// A query and its vector.
pub(super) type EmbeddedQuery = (String, Vec<f32>);

impl fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SearchIndex")
            .field("dir", &self.dir)
            .field("writable", &self.pages.writer.is_some())
            .field("pages", &self.page_count())
            .finish_non_exhaustive()
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
            // A process killed inside a commit leaves the files it wrote
            // before `meta.json` (a segment's `.del` at the next opstamp);
            // the same commit made again would find them there and fail.
            writer
                .garbage_collect_files()
                .wait()
                .map_err(err("remove the files a stopped commit left"))?;
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
            one_query: false,
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
            one_query: false,
        }
    }

    /// This handle answers one query (a `search` process): over an index
    /// with page vectors, the query's vector is made with only the part
    /// of the model it needs loaded (see `Embedder::installed_for`),
    /// half the model's bytes and most of such a process's time.
    pub fn for_one_query(self) -> Self {
        Self {
            one_query: true,
            ..self
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
        // The sections' word positions come from the pass that counts
        // the body's words.
        let sections = match (f.section_starts, f.outline) {
            (Some(_), Some(_)) => sections::inside(body, &doc.sections),
            _ => Vec::new(),
        };
        let words = word_count::body_words(body, sections.iter().map(|s| s.offset as usize));
        d.add_u64(f.words, words.spaced);
        if let (Some(starts), Some(outline)) = (f.section_starts, f.outline)
            && !sections.is_empty()
        {
            d.add_bytes(starts, &sections::pack_starts(&words.positions));
            d.add_bytes(
                outline,
                &sections::pack_outline(body, &sections, start.len()),
            );
        }
        if let (Some(field), Some(embedder)) = (f.vectors, &self.page_embedder) {
            let passages = embed::section_passages(&doc.title, body, &sections);
            let texts: Vec<&str> = passages.iter().map(|(_, t)| t.as_str()).collect();
            // A page the model fails on is still a page: indexed without
            // vectors and a warning, never a crash (the indexer would retry it).
            match embedder.passages(&texts) {
                Ok(vectors) => {
                    d.add_bytes(field, &embed::pack(&vectors));
                    if let Some(of) = f.vector_sections {
                        let numbers: Vec<u16> = passages.iter().map(|(i, _)| *i).collect();
                        d.add_bytes(of, &embed::pack_sections(&numbers));
                    }
                }
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
            let prepared = writer.prepare_commit().map_err(err("commit"))?;
            // #47's aimed kills: the segments written, `meta.json` not.
            kill_points::reached(KillPoint::IndexCommit);
            prepared.commit().map_err(err("commit"))?;
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
