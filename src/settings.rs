//! Wiring: settings → behaviours → a running app.

use crate::archive::WarcArchive;
use crate::extract::HtmlExtractor;
use crate::fetch::{FetchConfig, FetchError, HttpFetcher};
use crate::operations::builtin_operations;
use crate::policy::{CrawlPolicy, PolicyConfig};
use crate::store::SqliteStore;
use std::path::Path;
use std::sync::Arc;
use web_crawler_actors::{
    App, AppError, AppHandle, Behaviours, CrawlConfig, Metrics, NoMetrics, Notifier, Operations,
    Storage, Store, StoreError,
};

/// Errors of starting and running a crawler.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error(transparent)]
    App(#[from] AppError),
}

/// Everything a node is configured with.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Settings {
    pub crawl: CrawlConfig,
    pub policy: PolicyConfig,
    pub fetch: FetchConfig,
    /// Operations a URL may carry; the built-in `search` by default. Add
    /// your own with `Operations::with`.
    pub operations: Operations,
    /// Told when a watched URL goes down, comes back or changes
    /// ([`crate::notify::Notify`]).
    pub notifier: Option<Arc<dyn Notifier>>,
    /// Keep a full-text index of the pages crawled in this directory
    /// (created if missing; see [`crate::search`]). On the master's node;
    /// worker nodes hand their pages to it when `crawl.index_pages` is on. None
    /// by default: [`AppHandle::search`] then has no index to answer from.
    /// The command's place for it, beside the store:
    /// `settings.index_dir = Some(web_crawler::search::index_dir_for(&db));`
    #[cfg(feature = "search")]
    pub index_dir: Option<std::path::PathBuf>,
    /// Give the indexed pages vectors made by this sentence model, for
    /// semantic retrieval (`crawl --semantic`); None by default.
    #[cfg(feature = "search")]
    pub embedder: Option<Arc<crate::search::Embedder>>,
    /// Where the node counts fetches, pool load and restarts (nothing by default).
    pub metrics: Arc<dyn Metrics>,
    /// Where this node archives responses (the `mirror` operation's, or
    /// all of them): one writer per directory, shared by whoever archives
    /// there; [`WarcArchive::close`] it once the app has stopped.
    pub archive: Option<Arc<WarcArchive>>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            crawl: CrawlConfig::default(),
            policy: PolicyConfig::default(),
            fetch: FetchConfig::default(),
            operations: builtin_operations(),
            notifier: None,
            #[cfg(feature = "search")]
            index_dir: None,
            #[cfg(feature = "search")]
            embedder: None,
            metrics: Arc::new(NoMetrics),
            archive: None,
        }
    }
}

impl Settings {
    /// The behaviours pools and slaves run with.
    pub fn behaviours(&self) -> Result<Behaviours, Error> {
        let mut fetch = self.fetch.clone();
        // Keep as many idle connections to a host as requests may be in
        // flight to it, or each burst closes and reopens the rest.
        fetch.pool_idle_per_host = fetch.pool_idle_per_host.max(self.crawl.per_host);
        let fetcher = HttpFetcher::new(fetch)?;
        Ok(Behaviours {
            fetcher: Arc::new(fetcher),
            extractor: Arc::new(HtmlExtractor::new(self.policy.normalize.clone())),
            policy: Arc::new(CrawlPolicy::new(self.policy.clone())),
            operations: self.operations.clone(),
            metrics: self.metrics.clone(),
            notifier: self.notifier.clone(),
            archive: self
                .archive
                .clone()
                .map(|a| a as Arc<dyn web_crawler_actors::Archive>),
        })
    }
}

/// Start the app (a pool and the master) over any store.
pub async fn start(store: Arc<dyn Store>, settings: Settings) -> Result<AppHandle, Error> {
    start_on(Storage::new(store), settings).await
}

/// Start the app over a frontier and queries given apart (e.g. a wrapper
/// around one side of a store).
pub async fn start_on(storage: Storage, settings: Settings) -> Result<AppHandle, Error> {
    let behaviours = settings.behaviours()?;
    #[allow(unused_mut)]
    let (mut storage, mut crawl, mut noted_dropped) = (storage, settings.crawl.clone(), false);
    #[cfg(feature = "search")]
    if let Some(dir) = &settings.index_dir {
        let shard = shard_in(dir, settings.embedder.clone())?;
        move_earlier_queue(storage.queries.as_ref(), shard.queue.as_ref()).await?;
        forget_noted_duplicates(storage.queries.as_ref(), Some(shard.queue.as_ref())).await?;
        noted_dropped = true;
        storage = storage.with_index(shard);
        crawl.index_pages = true;
    }
    if !noted_dropped {
        forget_noted_duplicates(storage.queries.as_ref(), None).await?;
    }
    Ok(App::start(crawl, storage, behaviours).await?)
}

/// Queue the drop of the pages earlier runs found content duplicates
/// (noted in [`INDEX_FORGET`] by their commits) that the store still holds
/// as duplicates, for this node's shard (`queue`; none without an index):
/// a run killed between such a commit and telling its index left them in
/// it. Then the notes go. A page the shard does not hold (one another node
/// fetched: its shard is told at the commit, by a message not kept) drops
/// nothing.
async fn forget_noted_duplicates(
    queries: &dyn web_crawler_actors::Queries,
    queue: Option<&dyn web_crawler_actors::IndexQueue>,
) -> Result<(), StoreError> {
    use web_crawler_actors::{Document, INDEX_FORGET};
    loop {
        let notes = queries.first_records(INDEX_FORGET, None, 500).await?;
        let urls: Vec<String> = notes
            .iter()
            .filter_map(|note| note.get("url")?.as_str().map(str::to_string))
            .collect();
        if urls.is_empty() {
            return Ok(());
        }
        if let Some(queue) = queue {
            let mut duplicates = Vec::new();
            for url in &urls {
                let page = queries.processed_url(url).await?;
                if page.is_some_and(|p| p.duplicate_of.is_some()) {
                    duplicates.push(url.clone());
                }
            }
            if !duplicates.is_empty() {
                tracing::debug!(
                    pages = duplicates.len(),
                    "content duplicates an earlier run found are dropped from the index again"
                );
                queue.forget(duplicates).await?;
            }
        }
        let keys: Vec<Document> = urls
            .into_iter()
            .map(|url| std::iter::once(("url".to_string(), url.into())).collect())
            .collect();
        if queries.delete_records(INDEX_FORGET, &keys).await? == 0 {
            // Notes keyed otherwise: not ours; leave them.
            return Ok(());
        }
    }
}

/// Start a worker node's tree: a pool fetching for the cluster's master
/// and, with `settings.index_dir`, an indexer keeping the pages this node
/// fetches in its shard there (their queue in `DIR.queue` beside it).
pub async fn start_worker(settings: Settings) -> Result<AppHandle, Error> {
    let behaviours = settings.behaviours()?;
    #[allow(unused_mut)]
    let (mut shard, mut crawl) = (None, settings.crawl.clone());
    #[cfg(feature = "search")]
    if let Some(dir) = &settings.index_dir {
        shard = Some(shard_in(dir, settings.embedder.clone())?);
        crawl.index_pages = true;
    }
    Ok(App::start_worker(crawl, shard, behaviours).await?)
}

/// The index shard in `dir` and its queue in `DIR.queue` beside it.
#[cfg(feature = "search")]
fn shard_in(
    dir: &Path,
    embedder: Option<Arc<crate::search::Embedder>>,
) -> Result<web_crawler_actors::IndexShard, StoreError> {
    let queue = crate::store::IndexQueueLog::open(&crate::store::queue_dir_for(dir))?;
    Ok(web_crawler_actors::IndexShard {
        opener: Arc::new(crate::behaviour_impls::IndexDir {
            dir: dir.to_path_buf(),
            embedder,
        }),
        queue: Arc::new(queue),
    })
}

/// Move the pages an earlier version left waiting for the index in the
/// store itself (its `index_queue` collection) to the shard's queue, so
/// that they are indexed: once, at the first start of this version.
#[cfg(feature = "search")]
async fn move_earlier_queue(
    queries: &dyn web_crawler_actors::Queries,
    queue: &dyn web_crawler_actors::IndexQueue,
) -> Result<(), StoreError> {
    use web_crawler_actors::{INDEX_QUEUE, QueuedPage};
    let mut moved = 0;
    loop {
        let docs = queries.first_records(INDEX_QUEUE, None, 500).await?;
        if docs.is_empty() {
            break;
        }
        let pages = docs
            .iter()
            .filter_map(|doc| {
                QueuedPage::of_document(doc)
                    .map_err(|why| tracing::warn!(%why, "a page an earlier version queued cannot be read; it is not indexed"))
                    .ok()
            })
            .collect();
        queue.push(pages).await?;
        // The queue's records are keyed by URL alone.
        let keys: Vec<web_crawler_actors::Document> = docs
            .iter()
            .map(|doc| {
                doc.get("url")
                    .map(|url| ("url".to_string(), url.clone()))
                    .into_iter()
                    .collect()
            })
            .collect();
        let deleted = queries.delete_records(INDEX_QUEUE, &keys).await?;
        if deleted == 0 {
            // Records keyed otherwise: not this queue's; leave them.
            break;
        }
        moved += deleted;
    }
    if moved > 0 {
        tracing::info!(
            pages = moved,
            "pages an earlier version queued in the store moved to the index's queue"
        );
    }
    Ok(())
}

/// Start the app on the embedded store at `db` (created if missing).
pub async fn start_embedded(db: &Path, settings: Settings) -> Result<AppHandle, Error> {
    let store = SqliteStore::open_for_crawl(db)?;
    start(Arc::new(store), settings).await
}
