//! Telling an operator that a watched URL went down, came back or changed:
//! a command of theirs (`--on-change`) and a webhook (`--webhook`), the
//! tree's [`Notifier`] behaviour.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;
use web_crawler_actors::availability::StatusEvent;
use web_crawler_actors::{Notifier, async_trait};

/// Attempts at a webhook, and the wait before the first retry (doubling).
const WEBHOOK_ATTEMPTS: u32 = 3;
const WEBHOOK_RETRY: Duration = Duration::from_millis(500);
/// How long one webhook request or one command may take.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// Where to tell about changes.
#[derive(Debug)]
pub struct Notify {
    /// A program run for each change, with the change in its environment.
    pub command: Option<String>,
    /// An `http://` or `https://` URL a JSON document is POSTed to.
    pub webhook: Option<url::Url>,
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Notify {
    pub fn new(command: Option<String>, webhook: Option<url::Url>) -> Result<Self, String> {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| e.to_string())?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Self {
            command,
            webhook,
            client: Client::builder(TokioExecutor::new()).build(https),
        })
    }

    /// Run the command with the event in `WEB_CRAWLER_*` variables: never
    /// through a shell, so nothing a page sends is interpreted.
    async fn run_command(&self, command: &str, event: &StatusEvent) {
        let code = |c: Option<u16>| c.map(|c| c.to_string()).unwrap_or_default();
        let child = tokio::process::Command::new(command)
            .env("WEB_CRAWLER_EVENT", event.change.as_str())
            .env("WEB_CRAWLER_URL", &event.url)
            .env("WEB_CRAWLER_STATUS", code(event.http_returncode))
            .env(
                "WEB_CRAWLER_PREVIOUS_STATUS",
                code(event.previous_returncode),
            )
            .env("WEB_CRAWLER_REASON", event.reason.as_deref().unwrap_or(""))
            .env("WEB_CRAWLER_AT", event.at.to_string())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .status();
        match tokio::time::timeout(NOTIFY_TIMEOUT, child).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => tracing::warn!(command, %status, "the --on-change command failed"),
            Ok(Err(e)) => tracing::warn!(command, error = %e, "cannot run the --on-change command"),
            Err(_) => tracing::warn!(command, "the --on-change command took too long; killed"),
        }
    }

    /// POST the event as JSON, retried a little on failure.
    async fn post(&self, url: &url::Url, event: &StatusEvent) {
        let body = Bytes::from(serde_json::to_vec(event).expect("an event serializes"));
        let mut wait = WEBHOOK_RETRY;
        for attempt in 1..=WEBHOOK_ATTEMPTS {
            let outcome = match self.post_once(url, body.clone()).await {
                Ok(status) if (200..300).contains(&status) => return,
                Ok(status) => format!("HTTP {status}"),
                Err(e) => e,
            };
            if attempt == WEBHOOK_ATTEMPTS {
                tracing::warn!(%url, attempt, error = %outcome, "webhook not delivered");
                return;
            }
            tracing::debug!(%url, attempt, error = %outcome, "webhook failed; retrying");
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
    }

    async fn post_once(&self, url: &url::Url, body: Bytes) -> Result<u16, String> {
        let req = Request::post(url.as_str())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::USER_AGENT, "web_crawler")
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        let send = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| web_crawler_actors::error_chain(&e))?;
            let status = resp.status().as_u16();
            // Read the answer whole so the connection can be reused.
            let _ = resp.into_body().collect().await;
            Ok(status)
        };
        tokio::time::timeout(NOTIFY_TIMEOUT, send)
            .await
            .map_err(|_| "timed out".to_string())?
    }
}

#[async_trait]
impl Notifier for Notify {
    async fn notify(&self, event: &StatusEvent) {
        if let Some(command) = &self.command {
            self.run_command(command, event).await;
        }
        if let Some(url) = &self.webhook {
            self.post(url, event).await;
        }
    }
}
