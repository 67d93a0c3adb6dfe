//! The tree's `Fetcher` behaviour over [`HttpFetcher`].
//!
//! The trait bundles page fetches with robots.txt reports, so its impl needs
//! both `fetch` and `robots`. It lives here rather than in either of them:
//! `robots` already uses `fetch` to get robots.txt, and an impl inside `fetch`
//! would make `fetch` depend on `robots` again. Dependencies thus run one way,
//! behaviours → robots → fetch. The `Extractor` and `RobotsRules` impls need
//! nothing but their own module, so they stay beside their types.

use url::Url;

use crate::fetch::{FetchError, HttpFetcher};
use crate::robots::robots_report;

#[async_trait::async_trait]
impl web_crawler_actors::Fetcher for HttpFetcher {
    async fn fetch(
        &self,
        url: &str,
    ) -> Result<web_crawler_actors::FetchedPage, web_crawler_actors::FetchFailure> {
        let failure = |e: FetchError| web_crawler_actors::FetchFailure {
            retryable: e.is_retryable(),
            reason: e.to_string(),
        };
        let parsed =
            Url::parse(url).map_err(|e| failure(FetchError::InvalidUrl(format!("{url}: {e}"))))?;
        let resp = self.get(&parsed).await.map_err(failure)?;
        Ok(web_crawler_actors::FetchedPage {
            status: resp.status,
            content_type: resp.content_type,
            content_length: resp.content_length.and_then(|n| i64::try_from(n).ok()),
            server: resp.server,
            location: resp.location,
            retry_after_ms: resp.retry_after.map(|d| d.as_millis() as i64),
            body: resp.body.to_vec(),
            truncated: resp.truncated,
            fetch_ms: resp.elapsed.as_millis() as i64,
        })
    }

    async fn robots(&self, scheme: &str, host: &str) -> web_crawler_actors::RobotsReport {
        robots_report(self, scheme, host).await
    }
}
