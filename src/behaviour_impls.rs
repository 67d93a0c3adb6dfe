//! The tree's behaviours over this crate's parts that need more than their
//! own module: `Fetcher` over [`HttpFetcher`] and, with the `search`
//! feature, `PageIndex` over the tantivy `SearchIndex`.
//!
//! The trait bundles page fetches with robots.txt reports, so its impl needs
//! both `fetch` and `robots`. It lives here rather than in either of them:
//! `robots` already uses `fetch` to get robots.txt, and an impl inside `fetch`
//! would make `fetch` depend on `robots` again. Dependencies thus run one way,
//! behaviour_impls → robots → fetch. The `Extractor` and `RobotsRules` impls need
//! nothing but their own module, so they stay beside their types.

use url::Url;

use crate::fetch::{FetchError, HttpFetcher, HttpResponse};
use crate::robots::robots_report;

#[async_trait::async_trait]
impl web_crawler_actors::Fetcher for HttpFetcher {
    async fn fetch(
        &self,
        url: &str,
    ) -> Result<web_crawler_actors::FetchedPage, web_crawler_actors::FetchFailure> {
        let parsed =
            Url::parse(url).map_err(|e| failure(FetchError::InvalidUrl(format!("{url}: {e}"))))?;
        let resp = self.get(&parsed).await.map_err(failure)?;
        Ok(resp.into())
    }

    async fn fetch_if_changed(
        &self,
        url: &str,
        last: &web_crawler_actors::LastFetch,
    ) -> Result<web_crawler_actors::FetchedPage, web_crawler_actors::FetchFailure> {
        let parsed =
            Url::parse(url).map_err(|e| failure(FetchError::InvalidUrl(format!("{url}: {e}"))))?;
        let resp = self
            .get_if_changed(&parsed, last.etag.as_deref(), last.last_modified.as_deref())
            .await
            .map_err(failure)?;
        Ok(resp.into())
    }

    async fn robots(&self, scheme: &str, host: &str) -> web_crawler_actors::RobotsReport {
        robots_report(self, scheme, host).await
    }
}

impl From<HttpResponse> for web_crawler_actors::FetchedPage {
    fn from(resp: HttpResponse) -> Self {
        web_crawler_actors::FetchedPage {
            status: resp.status,
            content_type: resp.content_type,
            content_length: resp.content_length.and_then(|n| i64::try_from(n).ok()),
            server: resp.server,
            location: resp.location,
            retry_after_ms: resp.retry_after.map(|d| d.as_millis() as i64),
            body: resp.body.to_vec(),
            content_decoded: crate::fetch::is_decoded(&resp.headers),
            truncated: resp.truncated,
            fetch_ms: resp.elapsed.as_millis() as i64,
            etag: resp.etag,
            last_modified: resp.last_modified,
            http_version: format!("{:?}", resp.version),
            response_headers: resp
                .headers
                .iter()
                .map(|(name, value)| (name.as_str().to_string(), value.as_bytes().to_vec()))
                .collect(),
            request_headers: resp.request_headers,
            remote_ip: resp.remote_ip,
        }
    }
}

fn failure(e: FetchError) -> web_crawler_actors::FetchFailure {
    web_crawler_actors::FetchFailure {
        retryable: e.is_retryable(),
        reason: e.to_string(),
    }
}

/// The tree's `PageIndex` behaviour over the tantivy [`SearchIndex`]: a
/// page replaces its earlier version and the anchors it gave before.
#[cfg(feature = "search")]
mod index {
    use crate::search::{AnchorDoc, PageDoc, SearchError, SearchIndex};
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use web_crawler_actors::{
        IndexError, IndexOpener, PageIndex, PageSearch, PageText, ShardPhase, ShardStats, ShardTop,
    };

    fn index_error(e: SearchError) -> IndexError {
        match e {
            SearchError::Query(q) => IndexError::Query(q.to_string()),
            other => IndexError::Backend {
                context: other.to_string(),
                source: Box::new(other),
            },
        }
    }

    impl PageIndex for SearchIndex {
        fn add(&mut self, page: PageText) -> Result<(), IndexError> {
            let PageText {
                url,
                title,
                headings,
                body,
                anchors,
                links_found,
                sections,
            } = page;
            let doc = PageDoc {
                url,
                title,
                headings,
                body,
                out_links: links_found,
                sections,
            };
            self.add_page(&doc).map_err(index_error)?;
            let mut links: Vec<AnchorDoc> = anchors
                .into_iter()
                .map(|a| AnchorDoc {
                    target: a.target,
                    text: a.text,
                    context: String::new(),
                })
                .collect();
            crate::search::add_contexts(&doc, &mut links);
            self.set_anchors(&doc.url, &links).map_err(index_error)
        }

        fn remove(&mut self, url: &str) -> Result<(), IndexError> {
            self.remove_page(url).map_err(index_error)
        }

        fn commit(&mut self) -> Result<(), IndexError> {
            SearchIndex::commit(self).map_err(index_error)
        }

        fn searcher(&self) -> Arc<dyn PageSearch> {
            Arc::new(self.reader())
        }
    }

    impl PageSearch for SearchIndex {
        fn stats(
            &self,
            query: &str,
            phase: ShardPhase,
            known: &ShardStats,
        ) -> Result<ShardStats, IndexError> {
            self.shard_stats(query, phase, known).map_err(index_error)
        }

        fn top(
            &self,
            query: &str,
            limit: usize,
            stats: &ShardStats,
        ) -> Result<ShardTop, IndexError> {
            self.shard_top(query, limit, stats).map_err(index_error)
        }
    }

    /// Opens (or creates) the index in a directory, for the indexer; with
    /// a sentence model, the pages get vectors.
    #[derive(Clone, Debug)]
    pub(crate) struct IndexDir {
        pub(crate) dir: PathBuf,
        pub(crate) embedder: Option<Arc<crate::search::Embedder>>,
    }

    /// How long to wait for the index's writer lock: a killed indexer's
    /// writer is released while its successor starts.
    const LOCK_WAIT: Duration = Duration::from_secs(10);

    impl IndexOpener for IndexDir {
        fn open(&self) -> Result<Box<dyn PageIndex>, IndexError> {
            let started = Instant::now();
            loop {
                match SearchIndex::open(&self.dir) {
                    Ok(index) => {
                        return Ok(Box::new(match &self.embedder {
                            Some(embedder) => index.with_embedder(embedder.clone()),
                            None => index,
                        }));
                    }
                    Err(SearchError::Locked { .. }) if started.elapsed() < LOCK_WAIT => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(e) => return Err(index_error(e)),
                }
            }
        }
    }
}

#[cfg(feature = "search")]
pub(crate) use index::IndexDir;
