//! Behaviours: the callback modules the OTP layer is generic over.
//!
//! As an OTP `gen_server` calls its callback module, the master calls a
//! [`Store`], slaves call a [`Fetcher`], an [`Extractor`], a [`LinkPolicy`]
//! and [`Operation`]s. The root crate implements them; tests and embedders
//! may plug in their own. The full-text index's behaviour ([`index`]:
//! `PageIndex`, `PageSearch`, `IndexOpener`) is the indexer's.

pub(crate) mod index;

use crate::availability::{FetchHistory, HistoryQuery, StatusEvent};
use crate::hosts::HostSummary;
use crate::traps::TrapClosure;
use crate::types::*;
use async_trait::async_trait;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// A boxed error kept as the source of ours.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Error from a store backend, classified by what the master does with it:
/// it waits out an [`Unavailable`](StoreError::Unavailable) store (up to
/// `CrawlConfig::store_outage_limit`), stops the app at once on a
/// [permanent](StoreError::is_permanent) failure, and fails on any other
/// (the supervisor restarts it, within the restart intensity).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store cannot be reached for now, and asking again later may
    /// succeed: a server that does not answer, a replica set electing a
    /// primary, a network error or timeout, a file locked by another
    /// connection. `context` says what, `source` why.
    #[error("{context}")]
    Unavailable {
        context: String,
        #[source]
        source: BoxError,
    },
    /// The store refuses for good: a full disk, a read-only file, refused
    /// credentials. Waiting will not help; someone has to act.
    #[error("{context}")]
    Refused {
        context: String,
        #[source]
        source: BoxError,
    },
    /// The backend failed in a way neither transient nor known to be
    /// permanent; `context` says at what, `source` why.
    #[error("{context}")]
    Backend {
        context: String,
        #[source]
        source: BoxError,
    },
    #[error("store holds data it cannot read: {0}")]
    Corrupt(String),
    #[error("invalid request to the store: {0}")]
    Invalid(String),
}

impl StoreError {
    /// A backend failure at `context`, caused by `source`.
    pub fn backend(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Backend {
            context: context.into(),
            source: source.into(),
        }
    }

    /// The store is away for now (see [`StoreError::Unavailable`]).
    pub fn unavailable(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Unavailable {
            context: context.into(),
            source: source.into(),
        }
    }

    /// The store refuses for good (see [`StoreError::Refused`]).
    pub fn refused(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Refused {
            context: context.into(),
            source: source.into(),
        }
    }

    /// Worth asking again later: the store is unreachable or busy.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }

    /// No retry will help: a full disk, refused credentials, a corrupt store.
    pub fn is_permanent(&self) -> bool {
        matches!(self, StoreError::Refused { .. } | StoreError::Corrupt(_))
    }
}

/// An error and its causes in one line (`what: why: deeper why`), for logs
/// and replies that carry text.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// One claim request: take up to `limit` pending URLs, at most `per_host_cap`
/// per host counting the ones this node already holds (`held_per_host`).
#[derive(Clone, Debug)]
pub struct ClaimRequest {
    pub now: Millis,
    pub owner: String,
    pub lease_until: Millis,
    pub limit: usize,
    pub per_host_cap: usize,
    pub held_per_host: HashMap<String, usize>,
}

/// A fetched page, committed with the links it yielded.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ProcessedPage {
    pub record: PageRecord,
    /// Links admitted by the link policy, upserted before the page is marked
    /// processed. Not followed when the page turns out to be a duplicate.
    pub links: Vec<NewLink>,
    /// What the page's operation asks the store to keep.
    pub records: Vec<Record>,
    /// Links the trap defence refused: each kept in `pending_urls` as
    /// `trapped` when the store holds nothing of its URL (its referral
    /// recorded as the others'), not followed. Set by the master.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trapped: Vec<TrappedLink>,
    /// [`simhash`](crate::traps::simhash) of the page's visible text, for
    /// the trap defence (a fetched HTML page, when it is on). Not stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simhash: Option<crate::traps::PageSimhash>,
    /// Sampled [`shingles`](crate::traps::shingles) of the page's visible
    /// text, for the trap defence's rule 6 (a first fetch only). Not stored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shingles: Vec<u32>,
    /// The server answered 304 to a conditional request: the stored page
    /// stands (its content, title, links and records are kept); only the
    /// check is recorded.
    #[serde(default)]
    pub not_modified: bool,
    /// The fetch changed the URL's state (down, up, another body), as
    /// `fetch_history` records it.
    #[serde(default)]
    pub changed: bool,
    /// The URL was fetched before (its job carried the last fetch), so its
    /// `fetch_history` may be full: only then are the oldest entries
    /// beyond the bound trimmed, not on every first fetch of a crawl.
    #[serde(default)]
    pub fetched_before: bool,
}

impl ProcessedPage {
    /// What a store records as the page's `out_links`: its admitted links'
    /// URLs (duplicate pages included, though their links are not followed).
    pub fn out_links(&self) -> Vec<&str> {
        self.links.iter().map(|link| link.url.as_str()).collect()
    }
}

/// A link the trap defence refused, and why.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TrappedLink {
    pub link: NewLink,
    pub trap: TrapMark,
}

/// A claimed URL the trap defence refused: its row goes from `processing`
/// to `trapped`.
#[derive(Clone, Debug, PartialEq)]
pub struct TrappedClaim {
    pub key: UrlKey,
    pub trap: TrapMark,
}

/// A URL going back to pending for another attempt.
#[derive(Clone, Debug)]
pub struct Retry {
    pub key: UrlKey,
    pub not_before: Millis,
    pub error: String,
}

/// Everything the master writes in one batch. A backend applies it in this
/// order — trap closures, refused claims, refused links, seeds, then per
/// page its links before the page itself, retries, hosts — so that a crash
/// part-way re-processes a page instead of losing a link, and a family's
/// closure is stored before the URLs it refused.
#[derive(Clone, Debug, Default)]
pub struct CommitBatch {
    pub now: Millis,
    /// Re-queue an already processed URL when it is older than this; `None`:
    /// never (only its referral list grows).
    pub reprocess_after_ms: Option<Millis>,
    /// `fetch_history` entries kept per URL: a page's entry is written with
    /// it, and the URL's oldest beyond this are removed.
    pub history_keep: usize,
    pub seeds: Vec<NewLink>,
    pub pages: Vec<ProcessedPage>,
    pub retries: Vec<Retry>,
    pub hosts: Vec<HostRecord>,
    /// Families the trap defence closed: each stored unless the store
    /// has one of that name already (`trap_closures`).
    pub closures: Vec<TrapClosure>,
    /// Claimed URLs the trap defence refused: `processing` → `trapped`.
    pub trapped_claims: Vec<TrappedClaim>,
    /// Links found outside a page (a sitemap's) it refused: kept as
    /// `trapped` when the store holds nothing of their URL.
    pub trapped: Vec<TrappedLink>,
}

impl CommitBatch {
    /// Add a later batch's writes after this one's (a batch the store could
    /// not take, then what was collected since).
    pub fn append(&mut self, later: CommitBatch) {
        self.seeds.extend(later.seeds);
        self.pages.extend(later.pages);
        self.retries.extend(later.retries);
        self.hosts.extend(later.hosts);
        self.closures.extend(later.closures);
        self.trapped_claims.extend(later.trapped_claims);
        self.trapped.extend(later.trapped);
    }

    pub fn is_empty(&self) -> bool {
        self.seeds.is_empty()
            && self.pages.is_empty()
            && self.retries.is_empty()
            && self.hosts.is_empty()
            && self.closures.is_empty()
            && self.trapped_claims.is_empty()
            && self.trapped.is_empty()
    }
}

/// What a commit did, so the master knows whether the frontier moved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitSummary {
    /// New or re-queued pending URLs.
    pub queued: u64,
    /// Links that only added a referral (already pending or recently processed).
    pub merged: u64,
    /// Pages whose body duplicates a page processed before: their links are
    /// not followed and they are not indexed.
    pub duplicates: Vec<String>,
    /// The batch's seeds that were waiting already (pending, or being
    /// fetched) before the batch: only their credit (and interval) merged.
    /// A seed's URL kept `trapped` was not waiting: it is queued now.
    pub seeds_queued_already: Vec<UrlKey>,
}

/// Which processed pages to list.
#[derive(Clone, Debug, Default)]
pub struct PageQuery {
    pub limit: Option<usize>,
    pub offset: usize,
    pub only_failed: bool,
    /// Only content duplicates (pages with a `duplicate_of`): which page
    /// each one's links count for.
    pub only_duplicates: bool,
    /// The last processed first (the console's `processed N`); by URL
    /// otherwise, a stable order to page through.
    pub newest_first: bool,
}

/// The frontier: the store as the master uses it — claims, commits and
/// leases, the crawl's only durable state. Both the embedded store and
/// MongoDB implement it; one conformance suite checks both.
#[async_trait]
pub trait Frontier: Send + Sync + fmt::Debug + 'static {
    /// Atomically move up to `limit` pending URLs (including ones whose lease
    /// expired) to `processing`, leased to `owner` until `lease_until`.
    async fn claim(&self, req: ClaimRequest) -> Result<Vec<Job>, StoreError>;

    /// Apply a batch of results idempotently (see [`CommitBatch`]). The
    /// batch is shared: the master keeps it, to write it again should the
    /// store be unavailable (`CommitBatch::into` makes one of a new batch).
    async fn commit(&self, batch: Arc<CommitBatch>) -> Result<CommitSummary, StoreError>;

    /// [`Frontier::commit`] then, if asked, [`Frontier::claim`]: the
    /// master's cycle. A backend may do both in one transaction (one durable
    /// write, not two).
    async fn commit_and_claim(
        &self,
        batch: Arc<CommitBatch>,
        claim: Option<ClaimRequest>,
    ) -> Result<(CommitSummary, Vec<Job>), StoreError> {
        let summary = if batch.is_empty() {
            CommitSummary::default()
        } else {
            self.commit(batch).await?
        };
        let jobs = match claim {
            Some(req) => self.claim(req).await?,
            None => Vec::new(),
        };
        Ok((summary, jobs))
    }

    /// Push the lease of URLs still held by `owner` forward.
    async fn extend_leases(
        &self,
        keys: &[UrlKey],
        owner: &str,
        until: Millis,
    ) -> Result<(), StoreError>;

    /// Return URLs leased by `owner` to pending at once, except `keep` (still
    /// running somewhere). Used when a master starts (its previous incarnation's
    /// leases), when a pool is lost, and on graceful stop.
    async fn release(&self, owner: &str, keep: &[UrlKey]) -> Result<u64, StoreError>;

    /// Return exactly these URLs to pending.
    async fn release_keys(&self, keys: &[UrlKey]) -> Result<u64, StoreError>;

    /// Counts over the store, for `status`.
    async fn counts(&self) -> Result<StoreCounts, StoreError>;

    /// Whether no URL is pending or leased: the master's idle check, asked
    /// at every cycle that leaves its window empty while someone waits for
    /// idleness, so it must cost an index probe, not a count.
    async fn frontier_empty(&self) -> Result<bool, StoreError>;

    /// The app is done with the frontier (its tree has stopped): let go of
    /// what a crawling process holds, such as MongoDB's owner lease, so the
    /// next process takes over at once. Reads still work after it.
    async fn close(&self) {}

    /// Availability watching's sweep: queue again up to `limit` watched
    /// processed URLs whose next check (`PageRecord::d_next_check`) is due
    /// by `now`, as a link would queue a processed URL (a pending URL only
    /// gains nothing), and clear their next check until they are processed
    /// again. Returns how many were queued. Found by an index on the due
    /// time: a sweep never reads what is not due.
    async fn requeue_due(&self, now: Millis, limit: usize) -> Result<u64, StoreError>;

    /// A node that left the cluster for good hands its pages over: queue
    /// again up to `limit` of the pages the store says `node` fetched, by
    /// URL after `after`, as a link saying the page changed `now` would (a
    /// pending URL only gains nothing), their validators cleared so that
    /// the host's new owner fetches each whole and indexes it in its
    /// shard. Says what it queued, the last URL it read (where the next
    /// call goes on; `None` once none is left), and how many pages the
    /// store still says `node` fetched: those not fetched again yet.
    async fn hand_over(
        &self,
        node: &str,
        after: Option<&str>,
        limit: usize,
        now: Millis,
    ) -> Result<HandOver, StoreError>;

    /// The nodes the store says fetched its processed pages, each once,
    /// sorted: a (re)started master takes those not in the cluster as gone
    /// from then on, so that a node that left while no master watched is
    /// handed over too. Found by the index on the pages' node, one look-up
    /// a node.
    async fn nodes_with_pages(&self) -> Result<Vec<String>, StoreError>;

    /// Every family the trap defence closed on this store, by name: what a
    /// starting master gives its guard back (closed ones refuse at once,
    /// allowed ones stay open).
    async fn trap_closures(&self) -> Result<Vec<ClosedFamily>, StoreError>;

    /// An operator reopens the family `family` at `now`: its closure is
    /// marked reopened and allowed (never closed again on this store) and
    /// the URLs it holds `trapped` go back to pending. Returns how many;
    /// `None` when the store knows no family of that name (no closure and
    /// no URL refused under it). Reopening again releases what was
    /// refused since, if anything.
    async fn reopen_trap_family(
        &self,
        family: &str,
        now: Millis,
    ) -> Result<Option<u64>, StoreError>;
}

/// What one call of [`Frontier::hand_over`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HandOver {
    /// Pages queued again by this call.
    pub queued: u64,
    /// The last URL read, to go on after; `None`: every page is queued.
    pub last: Option<String>,
    /// Pages the store still says the node fetched.
    pub waiting: u64,
}

impl HandOver {
    /// [`HandOver::last`] of a call that read `read` (by URL, in order)
    /// when asked for `limit`: the last URL when it read all `limit`
    /// (more may follow); `None` when fewer came back, or none were asked.
    pub fn last_read(read: &[NewLink], limit: usize) -> Option<String> {
        if limit > 0 && read.len() == limit {
            read.last().map(|link| link.url.clone())
        } else {
            None
        }
    }
}

/// Read-side queries: what reports, the console and embedding users list.
/// They never change the store.
#[async_trait]
pub trait Queries: Send + Sync + fmt::Debug + 'static {
    async fn processed(&self, query: PageQuery) -> Result<Vec<ProcessedUrl>, StoreError>;

    async fn processed_url(&self, url: &str) -> Result<Option<ProcessedUrl>, StoreError>;

    /// The records of up to `limit` processed pages, in URL order, whose URL
    /// sorts after `after` (from the first page with `None`): a pass over a
    /// whole crawl in bounded batches, each found by its key (no offset is
    /// skipped), without the referral lists (the site graph reads the pages'
    /// `out_links` instead).
    async fn processed_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PageRecord>, StoreError>;

    async fn pending(&self, limit: usize) -> Result<Vec<PendingUrl>, StoreError>;

    /// The records operations stored in `collection` whose fields equal
    /// those of `filter` (all of them when it is empty), as documents: the
    /// record's key and fields, and its stamp as epoch milliseconds.
    async fn records(
        &self,
        collection: &str,
        filter: &Document,
    ) -> Result<Vec<Document>, StoreError>;

    /// The first `limit` records of `collection` in key order, after the
    /// record keyed `after` when given: the head of a queue such as the
    /// indexer's, read on from where the last read ended.
    async fn first_records(
        &self,
        collection: &str,
        after: Option<&Document>,
        limit: usize,
    ) -> Result<Vec<Document>, StoreError>;

    /// Remove the records of `collection` with these keys (a queue's
    /// consumer, once it has handled them); returns how many were removed.
    async fn delete_records(&self, collection: &str, keys: &[Document]) -> Result<u64, StoreError>;

    /// Where `search_text` found `text` (every text with `None`): its hits
    /// in `search_results`, by URL and text.
    async fn text_match_hits(&self, text: Option<&str>) -> Result<Vec<TextMatchHit>, StoreError> {
        let mut filter = Document::new();
        if let Some(text) = text {
            filter.insert("text".into(), text.into());
        }
        let mut results = self
            .records(SEARCH_RESULTS, &filter)
            .await?
            .into_iter()
            .map(|doc| {
                serde_json::from_value(serde_json::Value::Object(doc))
                    .map_err(|e| StoreError::Corrupt(format!("a search result: {e}")))
            })
            .collect::<Result<Vec<TextMatchHit>, _>>()?;
        results.sort_by(|a, b| (&a.url, &a.text).cmp(&(&b.url, &b.text)));
        Ok(results)
    }

    async fn broken_links(&self) -> Result<Vec<BrokenLink>, StoreError>;

    /// Every family the trap defence closed, by host then name, with how
    /// many URLs it holds `trapped` now and the first `samples` of them.
    async fn trap_families(&self, samples: usize) -> Result<Vec<TrapFamily>, StoreError>;

    /// `fetch_history` entries, by URL then time.
    async fn fetch_history(&self, query: HistoryQuery) -> Result<Vec<FetchHistory>, StoreError>;

    async fn hosts(&self) -> Result<Vec<HostRecord>, StoreError>;

    /// Processed page counts by HTTP status (`None`: no response).
    async fn status_histogram(&self) -> Result<Vec<(Option<u16>, u64)>, StoreError>;

    /// Processed page counts by host (`host[:port]`), in host order.
    async fn pages_per_host(&self) -> Result<Vec<(String, u64)>, StoreError>;

    /// Processed page counts by the node that fetched them, in node order
    /// (the nodes whose index shards hold this crawl's pages).
    async fn pages_per_node(&self) -> Result<Vec<(String, u64)>, StoreError>;

    /// Every host the crawl knows, in host order: its robots.txt facts and
    /// how many of its pages are processed (hosts with pages but no
    /// robots.txt record yet have no robots facts).
    async fn host_summaries(&self) -> Result<Vec<HostSummary>, StoreError> {
        let mut pages: HashMap<String, u64> = self.pages_per_host().await?.into_iter().collect();
        let mut list: Vec<HostSummary> = self
            .hosts()
            .await?
            .into_iter()
            .map(|h| HostSummary {
                pages: pages.remove(&h.host).unwrap_or(0),
                host: h.host,
                robots_status: Some(h.robots_status),
                robots_http_code: h.robots_http_code,
                robots_error: h.robots_error,
                robots_fetched_at: Some(h.robots_fetched_at),
                crawl_delay_ms: h.crawl_delay_ms,
                sitemaps: h.sitemaps,
                live: None,
            })
            .collect();
        list.extend(pages.into_iter().map(|(host, pages)| HostSummary {
            host,
            pages,
            ..HostSummary::default()
        }));
        list.sort_by(|a, b| a.host.cmp(&b.host));
        Ok(list)
    }
}

/// A backend with both sides: what `App::start` takes and the conformance
/// suite checks. Implemented for every type that has both.
pub trait Store: Frontier + Queries {}

impl<T: Frontier + Queries + ?Sized> Store for T {}

/// An HTTP response as the crawler needs it.
#[derive(Clone, Debug, Default)]
pub struct FetchedPage {
    pub status: u16,
    pub content_type: Option<String>,
    pub content_length: Option<i64>,
    pub server: Option<String>,
    /// Raw `Location` header.
    pub location: Option<String>,
    pub retry_after_ms: Option<Millis>,
    /// Decoded (gzip/deflate/br) body, at most the configured cap.
    pub body: Vec<u8>,
    /// The fetcher undid a `Content-Encoding` to get `body` (an archive
    /// says so in the headers it keeps).
    pub content_decoded: bool,
    pub truncated: bool,
    pub fetch_ms: i64,
    /// `ETag` and `Last-Modified` headers, for a later conditional request.
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// The protocol of the status line as received (`HTTP/1.1`), for archives.
    pub http_version: String,
    /// The response headers as received, in order (names in lower case).
    pub response_headers: Vec<(String, Vec<u8>)>,
    /// The request headers sent, `Host` first.
    pub request_headers: Vec<(String, String)>,
    /// The address the response came from, when known.
    pub remote_ip: Option<std::net::IpAddr>,
}

/// A fetch that got no usable response.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{reason}")]
pub struct FetchFailure {
    pub reason: String,
    /// Worth another attempt later (timeouts, refused connections, ...).
    pub retryable: bool,
}

/// A host's robots.txt, parsed.
pub trait RobotsRules: Send + Sync + fmt::Debug + 'static {
    fn is_allowed(&self, url: &str) -> bool;
    fn crawl_delay_ms(&self) -> Option<u64>;
}

/// Why a host's robots.txt could not be had.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhyUnreachable {
    /// The host refused the connection: nothing listens at its address
    /// and port. An answer at once, unlike a timeout, and no server was
    /// asked anything, unlike a 5xx.
    Refused,
    /// Any other failure, in words: a 5xx or 429, a timeout, a dropped
    /// connection, a redirect loop (empty when a node did not say).
    Failed(String),
}

impl Default for WhyUnreachable {
    fn default() -> Self {
        WhyUnreachable::Failed(String::new())
    }
}

impl fmt::Display for WhyUnreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WhyUnreachable::Refused => f.write_str("connection refused"),
            WhyUnreachable::Failed(why) => f.write_str(why),
        }
    }
}

/// robots.txt as fetched for one host: the rules, and the record to store.
#[derive(Clone, Debug)]
pub struct RobotsReport {
    pub rules: Arc<dyn RobotsRules>,
    pub record: HostRecord,
    /// Unreachable robots.txt, and why: nothing on the host may be fetched
    /// for now (RFC 9309). `None`: the rules are in hand (a 4xx is "no
    /// rules": everything is allowed).
    pub unreachable: Option<WhyUnreachable>,
    /// The responses the fetch got (robots.txt and any redirect on the
    /// way), by URL, for the archive.
    pub responses: Vec<(String, FetchedPage)>,
}

/// The fetch behaviour.
#[async_trait]
pub trait Fetcher: Send + Sync + 'static {
    /// One GET; redirects are returned, not followed.
    async fn fetch(&self, url: &str) -> Result<FetchedPage, FetchFailure>;
    /// A conditional GET with the validators of `last` (`If-None-Match`,
    /// `If-Modified-Since`): a 304 answer means unchanged. A fetcher that
    /// cannot ask conditionally fetches the page whole.
    async fn fetch_if_changed(
        &self,
        url: &str,
        _last: &LastFetch,
    ) -> Result<FetchedPage, FetchFailure> {
        self.fetch(url).await
    }
    /// Fetch and parse `robots.txt` of the host `host` (`host[:port]`) reached by `scheme`.
    async fn robots(&self, scheme: &str, host: &str) -> RobotsReport;
}

/// Someone to tell when a watched URL goes down, comes back up or changes
/// (a command, a webhook). Called off the crawl's path: a slow or failing
/// notifier never holds it up.
#[async_trait]
pub trait Notifier: Send + Sync + fmt::Debug + 'static {
    async fn notify(&self, event: &StatusEvent);
}

/// Why a response could not be archived.
#[derive(Debug, thiserror::Error)]
#[error("cannot archive {url}: {context}")]
pub struct ArchiveError {
    pub url: String,
    pub context: String,
    #[source]
    pub source: BoxError,
}

/// The archive behaviour: keeps responses as they came (WARC files), for
/// the URLs whose operation [archives](Operation::archives) or, when it
/// [keeps everything](Archive::keeps_everything), every response the
/// node's slaves get.
#[async_trait]
pub trait Archive: Send + Sync + fmt::Debug + 'static {
    /// Every response, not only those of archiving operations: robots.txt,
    /// sitemaps and probes too.
    fn keeps_everything(&self) -> bool;
    /// Keep the response to a GET of `url`.
    async fn keep(&self, url: &str, page: &FetchedPage) -> Result<(), ArchiveError>;
}

/// What the extractor found in a page.
#[derive(Clone, Debug, Default)]
pub struct ExtractedPage {
    /// The body decoded to UTF-8 (what `search_text` positions index into).
    pub document: String,
    pub is_html: bool,
    pub title: Option<String>,
    pub headings: Vec<String>,
    /// The page's own visible text (without script, style, nav, footer or
    /// the site's chrome); only as much as was asked for.
    pub text: String,
    /// Where `text`'s sections start (its headings `h1`–`h4` and
    /// `<section id>`s), in order.
    pub sections: Vec<SectionStart>,
    /// The start of the visible text as a reader sees it, chrome and link
    /// lists included, up to [`SIMHASH_TEXT_BYTES`](crate::traps::SIMHASH_TEXT_BYTES):
    /// what the trap defence's simhash compares (templates show there: a
    /// catalogue's list pages differ by their lists). Empty unless text was
    /// asked for.
    pub visible_head: String,
    /// Absolute normalized links the page asks to be followed, parsed (the
    /// link policy reads them without parsing them again).
    pub links: Vec<url::Url>,
    /// The anchor text of each of `links`, in the same order (empty strings
    /// for links without text; an empty list unless visible text was asked
    /// for).
    pub anchors: Vec<String>,
    /// `<meta name=robots content=noindex>`: keep the page out of the index.
    pub noindex: bool,
    /// All links found, including nofollow and invalid ones.
    pub links_found: usize,
    /// A sitemap's `lastmod` dates (epoch ms), by link URL; empty for a page.
    pub modified: HashMap<String, Millis>,
    /// 64-bit hash of the body, for content-seen de-duplication.
    pub content_hash: u64,
    /// What could not be read, in one line (a broken or oversized
    /// sitemap): recorded as the page's error; its readable links count.
    pub problem: Option<String>,
}

/// Where a section of a page's own text starts: at a heading (`h1`–`h4`)
/// or a `<section>` with an `id`. What search ranks a long page's parts by
/// and links its answers to (`page#anchor`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SectionStart {
    /// Byte offset of the section in the page's text (a char boundary).
    pub offset: u32,
    /// 1–4 for `h1`–`h4`; 0 for a `<section id>` with no heading of its own.
    pub level: u8,
    /// The heading's text (empty for level 0).
    pub heading: String,
    /// The fragment that links to it: the heading's (or its `<section>`'s)
    /// own `id`, else the nearest `id` or `<a name>` before it; empty when
    /// none precedes it.
    pub anchor: String,
}

/// The extract behaviour: body → text and links.
pub trait Extractor: Send + Sync + 'static {
    /// `text_limit`: fill [`ExtractedPage::text`] with about that many bytes
    /// of visible text at most (0: none, `usize::MAX`: all of it).
    fn extract(&self, url: &str, page: &FetchedPage, text_limit: usize) -> ExtractedPage;
}

/// Why a link was not admitted to the frontier.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// Not a URL the crawl can take: the reason in one line, naming the URL
    /// (`invalid URL "127.0.5.1:8091": it has no scheme; try http://127.0.5.1:8091/`).
    #[error("{0}")]
    Invalid(String),
    #[error("out of scope")]
    OutOfScope,
    #[error("excluded by a URL filter")]
    Filtered,
    #[error("crawler trap: {0}")]
    Trap(&'static str),
    #[error("deeper than the max depth")]
    TooDeep,
}

impl Rejection {
    /// Why `url`, given by a user (`add_url`, a seed), was refused: one line
    /// that names it once ([`Rejection::Invalid`] names it already).
    pub fn of_url(&self, url: &str) -> String {
        match self {
            Rejection::Invalid(why) => why.clone(),
            other => format!("{url}: {other}"),
        }
    }
}

/// The link policy: validation, scope, filters and trap rules, as pure functions.
pub trait LinkPolicy: Send + Sync + 'static {
    /// Admit a URL given by a user (`add_url`).
    fn seed(&self, url: &str, operation: &OperationSpec) -> Result<NewLink, Rejection>;
    /// Admit a link found on (or redirected to from) the page of `referrer`.
    fn link(&self, referrer: &Job, url: &str, redirect: bool) -> Result<NewLink, Rejection>;
    /// The admitted ones of the (absolute, normalized) links found on the
    /// page of `referrer`, in order. An implementation may read the referrer
    /// once for all of them, and keep each URL's buffer as the link's.
    fn links(&self, referrer: &Job, urls: Vec<url::Url>) -> Vec<NewLink> {
        urls.into_iter()
            .filter_map(|url| self.link(referrer, url.as_str(), false).ok())
            .collect()
    }
}

/// Everything a page operation may look at.
#[derive(Debug)]
pub struct PageContext<'a> {
    pub job: &'a Job,
    pub page: &'a FetchedPage,
    pub extracted: &'a ExtractedPage,
}

/// A JSON document: what an operation stores, and what a query returns.
pub type Document = serde_json::Map<String, serde_json::Value>;

/// A document an operation asks the store to keep about a page, in a
/// collection of its own (a MongoDB collection of that name; rows of the
/// embedded store's `records` table). A later record with the same
/// collection and key replaces it, so re-processing a page is idempotent.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    pub collection: String,
    /// The fields that identify the record within its collection.
    pub key: Document,
    /// The rest of the document.
    pub fields: Document,
    /// A field the store sets to the time of the write (a date in MongoDB,
    /// epoch milliseconds in the embedded store), e.g. the paper's `d_search`.
    pub stamp: Option<String>,
}

/// What an operation produced, for the master to have stored.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct OperationOutput {
    pub records: Vec<Record>,
}

impl OperationOutput {
    /// Nothing to store.
    pub fn none() -> Self {
        Self::default()
    }

    /// Store these records.
    pub fn records(records: Vec<Record>) -> Self {
        Self { records }
    }
}

/// Why an operation was refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OperationError {
    #[error("unknown operation {0:?}")]
    Unknown(String),
    #[error("bad arguments: {0}")]
    BadArguments(String),
    #[error("operation failed")]
    Failed(#[source] BoxError),
}

/// A page operation (the paper's `operation` field): runs in the slave on
/// every page fetched for a URL that carries it.
#[async_trait]
pub trait Operation: Send + Sync + 'static {
    /// The name in `OperationSpec` that selects this operation.
    fn name(&self) -> &str;
    /// Checked at `add_url`, so a bad argument list is refused up front.
    fn validate(&self, args: &[String]) -> Result<(), OperationError>;
    /// Whether the operation reads the page's visible text
    /// ([`ExtractedPage::text`]); the extractor builds it only when one does.
    fn reads_text(&self) -> bool {
        true
    }
    /// Whether every response fetched for its URLs (redirects and errors
    /// too) goes to the node's [`Archive`].
    fn archives(&self) -> bool {
        false
    }
    async fn run(
        &self,
        ctx: &PageContext<'_>,
        args: &[String],
    ) -> Result<OperationOutput, OperationError>;
}

/// The operations a node knows, by name.
#[derive(Clone, Default)]
pub struct Operations {
    by_name: HashMap<String, Arc<dyn Operation>>,
}

impl fmt::Debug for Operations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.by_name.keys()).finish()
    }
}

impl Operations {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with(mut self, op: Arc<dyn Operation>) -> Self {
        self.by_name.insert(op.name().to_string(), op);
        self
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Operation>> {
        self.by_name.get(name)
    }

    /// Check that `spec` names a known operation with valid arguments.
    pub fn validate(&self, spec: &OperationSpec) -> Result<(), OperationError> {
        match spec.name() {
            None => Ok(()),
            Some(name) => match self.by_name.get(name) {
                None => Err(OperationError::Unknown(name.to_string())),
                Some(op) => op.validate(spec.args()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_over_goes_on_after_a_full_read_only() {
        let read: Vec<NewLink> = ["http://a/1", "http://a/2"]
            .into_iter()
            .map(|url| NewLink::new(url.into(), "a".into(), OperationSpec::crawl(), 0, 1.0))
            .collect();
        assert_eq!(HandOver::last_read(&read, 2), Some("http://a/2".into()));
        assert_eq!(HandOver::last_read(&read, 3), None);
        assert_eq!(HandOver::last_read(&[], 0), None);
    }
}
