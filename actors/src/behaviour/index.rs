//! The full-text index behaviour: what the tree hands an index and what it
//! asks of it. The tree knows no index library; `web_crawler` implements
//! [`PageIndex`] over tantivy.
//!
//! Indexing is an operation of every HTML page fetched while the crawl's
//! `index_pages` setting is on: the slave turns the page into a [`PageText`]
//! and reports it as a record of the [`INDEX_QUEUE`] collection, which the
//! node's pool takes out of the report and appends to the node's
//! [`IndexQueue`] before the report goes on. The indexer reads that queue,
//! adds the pages to the index, commits the index and only then marks what
//! it read done: a page processed is indexed exactly once across crashes
//! of either (a page fetched again after a crash replaces its copy).

use crate::behaviour::{Document, ExtractedPage, Record, SectionStart, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

/// The store collection pages wait in until the index has committed them.
pub const INDEX_QUEUE: &str = "index_queue";

/// The store collection a commit notes each page it finds a content
/// duplicate in, in the commit itself. The master tells the index to drop
/// such a page once the commit is done; a kill in between would leave it
/// indexed for good, so the next start reads this collection, drops from
/// its shard the pages the store still holds as duplicates, and empties it
/// (see [`duplicate_record`]). A run's notes, one small record a copy,
/// wait for that start.
pub const INDEX_FORGET: &str = "index_forget";

/// The [`INDEX_FORGET`] record of `url`, keyed by it.
pub fn duplicate_record(url: &str) -> Record {
    let mut key = Document::new();
    key.insert("url".into(), url.into());
    Record {
        collection: INDEX_FORGET.to_string(),
        key,
        fields: Document::new(),
        stamp: None,
    }
}

/// Bytes of a page's visible text that are indexed, at most.
pub const INDEX_TEXT_BYTES: usize = 256 * 1024;

/// Links of one page whose anchor text is indexed, at most.
pub const INDEX_ANCHORS: usize = 256;

/// What the index gets of one page.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PageText {
    /// In a queue record, the record's key holds the URL.
    pub url: String,
    pub title: String,
    pub headings: Vec<String>,
    /// Visible text (nav, footer, scripts left out).
    pub body: String,
    /// Links the page hands on, with their anchor text (those with text).
    pub anchors: Vec<Anchor>,
    /// Every link the page has, text or not (hub pages have many).
    pub links_found: u32,
    /// Where `body`'s sections start (offsets into `body`). A page queued
    /// by a version before sections has none ([`unpack_bytes`]).
    pub sections: Vec<SectionStart>,
}

/// A [`PageText`] as versions before sections packed it.
#[derive(Deserialize)]
struct PageTextBeforeSections {
    url: String,
    title: String,
    headings: Vec<String>,
    body: String,
    anchors: Vec<Anchor>,
    links_found: u32,
}

/// One link's anchor text: what the referring page calls `target`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    pub target: String,
    pub text: String,
}

impl PageText {
    /// The page as the extractor read it; `None` for a page that is not HTML
    /// or asks not to be indexed (`<meta name=robots content=noindex>`).
    pub fn of(url: &str, page: &ExtractedPage) -> Option<Self> {
        if !page.is_html || page.noindex {
            return None;
        }
        let anchors = page
            .links
            .iter()
            .zip(&page.anchors)
            .filter(|(_, text)| !text.is_empty())
            .take(INDEX_ANCHORS)
            .map(|(target, text)| Anchor {
                target: target.to_string(),
                text: text.clone(),
            })
            .collect();
        let title = page.title.clone().unwrap_or_default();
        // The extractor's text starts with the title; the index has it apart.
        let body = page
            .text
            .strip_prefix(title.as_str())
            .map_or(page.text.as_str(), str::trim_start);
        let cut = u32::try_from(page.text.len() - body.len()).unwrap_or(u32::MAX);
        let sections = page
            .sections
            .iter()
            .map(|s| SectionStart {
                offset: s.offset.saturating_sub(cut),
                ..s.clone()
            })
            .collect();
        Some(Self {
            url: url.to_string(),
            headings: page.headings.clone(),
            body: body.to_string(),
            title,
            anchors,
            links_found: u32::try_from(page.links_found).unwrap_or(u32::MAX),
            sections,
        })
    }

    /// The [`INDEX_QUEUE`] record that carries this page to the indexer:
    /// the page (without its URL, the key) encoded, compressed, in one
    /// field. Pages are a crawl's largest writes, made on the fetch path
    /// and read back once: compressed they cost the store a fraction of
    /// the bytes, and one string is all the store serializes.
    pub fn into_record(mut self) -> Record {
        let mut key = Document::new();
        key.insert("url".into(), std::mem::take(&mut self.url).into());
        let mut fields = Document::new();
        fields.insert(PACKED.into(), pack(&self).into());
        Record {
            collection: INDEX_QUEUE.to_string(),
            key,
            fields,
            stamp: None,
        }
    }

    fn url_of(doc: &Document) -> Result<String, String> {
        match doc.get("url").and_then(serde_json::Value::as_str) {
            Some(url) if !url.is_empty() => Ok(url.to_string()),
            _ => Err("a queued page without a url".into()),
        }
    }
}

/// The field of an [`INDEX_QUEUE`] record that holds the packed page.
const PACKED: &str = "packed";

/// base64 (a record's fields are text) of [`pack_bytes`].
fn pack(page: &PageText) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD_NO_PAD.encode(pack_bytes(page))
}

/// The lz4-compressed postcard encoding of `page`: its strings are copied
/// as they are (JSON escaped every byte of the text).
fn pack_bytes(page: &PageText) -> Vec<u8> {
    // Encoding plain strings and numbers into a Vec cannot fail.
    let bytes = postcard::to_stdvec(page).unwrap_or_default();
    lz4_flex::block::compress_prepend_size(&bytes)
}

/// lz4 makes at most 255 bytes of one (a match length byte of 255): a
/// packed page claiming more than this was damaged, and its claim is not
/// allocated.
const LZ4_MAX_RATIO: usize = 255;

fn unpack_bytes(compressed: &[u8]) -> Result<PageText, String> {
    let claimed = compressed
        .first_chunk::<4>()
        .map_or(0, |size| u32::from_le_bytes(*size) as usize);
    if claimed > compressed.len().saturating_mul(LZ4_MAX_RATIO) {
        return Err(format!(
            "a queued page claims {claimed} bytes from {}: damaged",
            compressed.len()
        ));
    }
    let bytes = lz4_flex::block::decompress_size_prepended(compressed)
        .map_err(|e| format!("a queued page does not decompress: {e}"))?;
    // A block cut in its last literals decompresses short: the earlier
    // layout below would read it as a page without sections.
    if bytes.len() != claimed {
        return Err(format!(
            "a queued page decompresses to {} of its {claimed} bytes: damaged",
            bytes.len()
        ));
    }
    postcard::from_bytes(&bytes)
        .or_else(|e| {
            let PageTextBeforeSections {
                url,
                title,
                headings,
                body,
                anchors,
                links_found,
            } = postcard::from_bytes(&bytes).map_err(|_| e)?;
            Ok(PageText {
                url,
                title,
                headings,
                body,
                anchors,
                links_found,
                sections: Vec::new(),
            })
        })
        .map_err(|e: postcard::Error| format!("a queued page: {e}"))
}

/// One result of a query.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    pub url: String,
    pub title: String,
    /// Plain text around the best match (or the start of the body), with
    /// whitespace collapsed; no markup.
    pub snippet: String,
    /// Ranking score: higher is better, comparable within one answer only.
    pub score: f32,
    /// Byte ranges of `snippet` holding query terms (to mark them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub highlights: Vec<std::ops::Range<usize>>,
    /// The section the snippet is from, as a link: `url#anchor` (the
    /// page itself when no anchor precedes the section). Absent for a page
    /// without headings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_url: Option<String>,
    /// That section's headings, from the page's top level down to its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub heading_path: Vec<String>,
}

/// The answer to a query: ranked results, and the corrected query when
/// the one asked had a typo.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchAnswer {
    pub results: Vec<SearchHit>,
    pub did_you_mean: Option<String>,
    /// The nodes whose shards were asked: those that answered in time and
    /// those that did not (their pages are not in `results`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<ShardNodes>,
}

/// Which nodes' shards a query across the cluster heard from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardNodes {
    pub answered: Vec<String>,
    pub missing: Vec<String>,
}

impl ShardNodes {
    /// One line naming the nodes that did not answer, if any.
    pub fn missing_line(&self) -> Option<String> {
        match self.missing.as_slice() {
            [] => None,
            [node] => Some(format!(
                "node {node} did not answer in time: its pages are not in these results"
            )),
            nodes => Some(format!(
                "nodes {} did not answer in time: their pages are not in these results",
                nodes.join(", ")
            )),
        }
    }
}

/// What shards tell each other of a query, so that each scores its pages
/// as one index over all of them would: counts summed over the shards
/// (documents, term frequencies, field lengths) and values whose largest
/// counts (the best anchor evidence of a page). The tree only merges
/// them; the index says what the keys mean.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardStats {
    #[serde(default)]
    pub sums: BTreeMap<String, u64>,
    #[serde(default)]
    pub maxes: BTreeMap<String, f32>,
}

impl ShardStats {
    /// Add another shard's statistics to these.
    pub fn merge(&mut self, other: ShardStats) {
        for (key, n) in other.sums {
            *self.sums.entry(key).or_default() += n;
        }
        for (key, v) in other.maxes {
            let at = self.maxes.entry(key).or_insert(v);
            *at = at.max(v);
        }
    }
}

/// The steps of a query across shards, in order: each shard answers
/// [`ShardStep::Stats`] for each phase with what the phases before it
/// gathered (merged), then [`ShardStep::Top`] with all of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardPhase {
    /// What typo correction and compound words need of the query's words.
    Vocabulary,
    /// Document and term counts of the (corrected) query's terms.
    Terms,
    /// The links whose text or context matches, by target page.
    Anchors,
    /// The pages each shard measures for the query.
    Candidates,
    /// The links to those pages (their in-links), on every shard.
    Links,
}

impl ShardPhase {
    pub const ALL: [ShardPhase; 5] = [
        Self::Vocabulary,
        Self::Terms,
        Self::Anchors,
        Self::Candidates,
        Self::Links,
    ];
}

/// One shard's best pages for a query, scored with the cluster's
/// statistics. A page's score is `norm_weight · norm / max norm + rest`,
/// where the largest `norm` is taken over every shard's candidates
/// (`norm_max` is this shard's): the coordinator scores the merged pages
/// with the cluster's largest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardTop {
    pub hits: Vec<ShardHit>,
    pub did_you_mean: Option<String>,
    pub norm_max: f32,
    pub norm_weight: f32,
}

/// A page of a [`ShardTop`] with the two parts of its score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardHit {
    pub hit: SearchHit,
    pub norm: f32,
    pub rest: f32,
}

/// Why the index could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// The query cannot be answered as written (said in words for people).
    #[error("{0}")]
    Query(String),
    /// The index itself failed (disk, lock, corrupt files).
    #[error("{context}")]
    Backend {
        context: String,
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
}

/// A full-text index the indexer writes. Calls block (tokenizing, disk
/// I/O): the indexer makes them on a thread of its own, at a low OS
/// priority, so that indexing takes only the CPU that fetching leaves.
pub trait PageIndex: Send + 'static {
    /// Add `page`, replacing an earlier version of the same URL, and its
    /// anchors, replacing those it gave before. The page is handed over:
    /// its text (8–40 KB a page) moves into the index's document instead
    /// of being copied once more.
    fn add(&mut self, page: PageText) -> Result<(), IndexError>;
    /// Remove the page of `url` and the links it gave: another shard holds
    /// a newer copy. Seen by queries after the next commit.
    fn remove(&mut self, url: &str) -> Result<(), IndexError>;
    /// Make what was added durable and visible to queries.
    fn commit(&mut self) -> Result<(), IndexError>;
    /// A handle that answers queries beside the writer, from other threads
    /// (at normal priority), and sees each commit.
    fn searcher(&self) -> Arc<dyn PageSearch>;
}

/// Answers queries over one shard of the cluster's index (what
/// [`PageIndex::searcher`] gives). A query is asked of every shard in
/// steps (see [`ShardPhase`]); with one shard the steps give what one
/// index gives.
pub trait PageSearch: Send + Sync + 'static {
    /// This shard's statistics for `phase` of `query`, knowing what the
    /// earlier phases gathered over all shards (`known`).
    fn stats(
        &self,
        query: &str,
        phase: ShardPhase,
        known: &ShardStats,
    ) -> Result<ShardStats, IndexError>;
    /// This shard's best `limit` pages for `query`, scored with the
    /// statistics of every phase over all shards.
    fn top(&self, query: &str, limit: usize, stats: &ShardStats) -> Result<ShardTop, IndexError>;
}

/// A position in a node's [`IndexQueue`]: entries are read in the order
/// they were queued, each at a position after the one before.
pub type QueuePos = u64;

/// A page as it waits in an [`IndexQueue`]: its URL and its text packed
/// (compressed; [`QueuedPage::text`] gives it back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedPage {
    pub url: String,
    pub packed: Vec<u8>,
}

impl QueuedPage {
    /// The page an [`INDEX_QUEUE`] record carries.
    pub fn of_record(record: &Record) -> Result<Self, String> {
        Self::of_parts(&record.key, &record.fields)
    }

    /// The page of an [`INDEX_QUEUE`] document as a store gives it back
    /// (key and fields in one): what an earlier version queued in the store.
    pub fn of_document(doc: &Document) -> Result<Self, String> {
        Self::of_parts(doc, doc)
    }

    fn of_parts(key: &Document, fields: &Document) -> Result<Self, String> {
        let url = PageText::url_of(key)?;
        let packed = match fields.get(PACKED) {
            Some(packed) => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD_NO_PAD
                    .decode(packed.as_str().ok_or("a queued page's packed text")?)
                    .map_err(|e| format!("a queued page is not base64: {e}"))?
            }
            // An earlier version queued the page's fields themselves.
            None => pack_bytes(
                &PageText::deserialize(fields).map_err(|e| format!("a queued page: {e}"))?,
            ),
        };
        Ok(Self { url, packed })
    }

    /// The page's text, read back.
    pub fn text(&self) -> Result<PageText, String> {
        let mut page = unpack_bytes(&self.packed)?;
        page.url.clone_from(&self.url);
        Ok(page)
    }
}

/// What waits in an [`IndexQueue`], in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueEntry {
    /// Index this page (replacing an earlier version).
    Page(QueuedPage),
    /// Drop this page from the shard (its host moved to another node, or
    /// it is a content duplicate): after the pages queued before it.
    Forget(String),
}

/// Entries read from an [`IndexQueue`], and where the next read starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueRead {
    pub entries: Vec<QueueEntry>,
    /// Pages read and left out, because a later entry of the queue forgets
    /// them: added, they would only be deleted again (and a segment with a
    /// deleted page has its stored text compressed anew at each merge).
    pub skipped: usize,
    pub next: QueuePos,
}

/// Where pages wait for a node's index shard, on the node's own disk: an
/// append-only log that the node's pool (and its master, for pages other
/// nodes send without indexing them) writes before a page is reported,
/// and that the indexer reads in order. What the indexer has committed
/// it marks [`done`](IndexQueue::done); a restarted indexer reads on from
/// there, so nothing queued is lost and nothing committed is read again.
#[async_trait::async_trait]
pub trait IndexQueue: Send + Sync + fmt::Debug + 'static {
    /// Queue these pages, in order; kept once this returns (a process
    /// killed after it finds them at its restart).
    async fn push(&self, pages: Vec<QueuedPage>) -> Result<(), StoreError>;
    /// Queue the removal of these pages, after everything queued before.
    async fn forget(&self, urls: Vec<String>) -> Result<(), StoreError>;
    /// At most `limit` entries from `from` on (`None`: the first entry not
    /// done).
    async fn read(&self, from: Option<QueuePos>, limit: usize) -> Result<QueueRead, StoreError>;
    /// Every entry before `upto` is indexed and committed: the queue may
    /// drop them.
    async fn done(&self, upto: QueuePos) -> Result<(), StoreError>;
    /// The node stopped and nothing more is queued for now: a queue with
    /// nothing waiting may remove its files (a clean exit leaves the store
    /// and its index only). A push after it starts the queue again.
    async fn close(&self) -> Result<(), StoreError>;
}

/// A node's index shard: the index and the queue its pages wait in.
#[derive(Clone, Debug)]
pub struct IndexShard {
    pub opener: Arc<dyn IndexOpener>,
    pub queue: Arc<dyn IndexQueue>,
}

/// Opens the index, at the indexer's start and at each restart.
pub trait IndexOpener: Send + Sync + 'static {
    fn open(&self) -> Result<Box<dyn PageIndex>, IndexError>;
}

impl fmt::Debug for dyn IndexOpener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IndexOpener")
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> ExtractedPage {
        ExtractedPage {
            is_html: true,
            title: Some("Install".into()),
            headings: vec!["Steps".into()],
            text: "Install Steps Install the package.".into(),
            links: vec![
                url::Url::parse("http://h/a").unwrap(),
                url::Url::parse("http://h/b").unwrap(),
            ],
            anchors: vec![String::new(), "the b page".into()],
            links_found: 5,
            ..Default::default()
        }
    }

    #[test]
    fn a_page_travels_as_a_record_and_back() {
        let text = PageText::of("http://h/", &page()).unwrap();
        assert_eq!(
            text.anchors,
            vec![Anchor {
                target: "http://h/b".into(),
                text: "the b page".into()
            }],
            "links without text give no anchor"
        );
        assert_eq!(text.links_found, 5);
        assert_eq!(
            text.body, "Steps Install the package.",
            "the title is apart"
        );
        let record = text.clone().into_record();
        assert_eq!(record.collection, INDEX_QUEUE);
        let queued = QueuedPage::of_record(&record).unwrap();
        assert_eq!(queued.url, "http://h/");
        assert_eq!(queued.text().unwrap(), text);
        let mut doc = record.key.clone();
        doc.extend(record.fields);
        assert_eq!(QueuedPage::of_document(&doc).unwrap(), queued);
        doc.remove("url");
        assert!(QueuedPage::of_document(&doc).is_err());
    }

    #[test]
    fn a_queue_of_an_earlier_version_is_still_read() {
        let text = PageText::of("http://h/", &page()).unwrap();
        let serde_json::Value::Object(mut doc) = serde_json::to_value(&text).unwrap() else {
            unreachable!()
        };
        assert_eq!(QueuedPage::of_document(&doc).unwrap().text().unwrap(), text);
        doc.insert(PACKED.into(), "not base64!".into());
        let err = QueuedPage::of_document(&doc).unwrap_err();
        assert!(err.contains("base64"), "{err}");
    }

    #[test]
    fn sections_follow_the_body_and_a_page_packed_before_them_still_reads() {
        let mut p = page();
        p.sections = vec![SectionStart {
            offset: "Install ".len() as u32,
            level: 2,
            heading: "Steps".into(),
            anchor: "steps".into(),
        }];
        let text = PageText::of("http://h/", &p).unwrap();
        assert_eq!(text.sections[0].offset, 0, "the title cut from the body");
        let queued = QueuedPage::of_record(&text.clone().into_record()).unwrap();
        assert_eq!(queued.text().unwrap(), text);
        // The packed form as versions before sections made it.
        #[derive(Serialize)]
        struct Earlier<'a> {
            url: &'a str,
            title: &'a str,
            headings: &'a [String],
            body: &'a str,
            anchors: &'a [Anchor],
            links_found: u32,
        }
        let earlier = Earlier {
            url: "",
            title: &text.title,
            headings: &text.headings,
            body: &text.body,
            anchors: &text.anchors,
            links_found: text.links_found,
        };
        let bytes = postcard::to_stdvec(&earlier).unwrap();
        let packed = lz4_flex::block::compress_prepend_size(&bytes);
        let read = QueuedPage {
            url: "http://h/".into(),
            packed,
        }
        .text()
        .unwrap();
        assert_eq!(
            read,
            PageText {
                sections: Vec::new(),
                ..text
            }
        );
    }

    #[test]
    fn a_packed_page_is_smaller_than_its_text() {
        let mut p = page();
        p.text = "the quick brown fox jumps over the lazy dog. ".repeat(400);
        let text = PageText::of("http://h/", &p).unwrap();
        let record = text.clone().into_record();
        let packed = record.fields[PACKED].as_str().unwrap();
        assert!(packed.len() < text.body.len() / 4, "{}", packed.len());
        assert_eq!(
            QueuedPage::of_record(&record).unwrap().text().unwrap(),
            text
        );
    }

    #[test]
    fn noindex_and_non_html_pages_are_not_indexed() {
        let mut p = page();
        p.noindex = true;
        assert!(PageText::of("http://h/", &p).is_none());
        let mut p = page();
        p.is_html = false;
        assert!(PageText::of("http://h/", &p).is_none());
    }
}
