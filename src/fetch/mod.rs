//! HTTP fetching for the crawler: one GET per call over a pooled, keep-alive
//! hyper client (HTTP/1.1, and HTTP/2 when TLS ALPN offers it).
//!
//! Redirects are never followed here, because the crawler records every 3xx
//! itself. Bodies are decoded (gzip, deflate, br) while they stream in, and
//! the size cap is applied during decoding, so a compression bomb costs at
//! most `max_body_bytes` of memory.
//!
//! Timeouts, in order:
//! * `connect_timeout` covers getting a connection: DNS, TCP and TLS for a new
//!   one, or a pool checkout. It also bounds each TCP connect attempt inside
//!   hyper-util's `HttpConnector`, and four fifths of it bound a DNS lookup.
//! * `read_timeout` covers the wait for response headers once a connection is
//!   ready, and then each gap between body chunks.
//! * `total_timeout` covers the whole call, body included.
//!
//! Host names are resolved through a cache in the fetcher, shared by every
//! slave of the node (see `dns`): answers are kept for their TTL, bounded in
//! number, failures are remembered for a short while, and a name that cannot
//! be resolved is reported as [`FetchError::Dns`].
//!
//! `client` holds the hyper client and the request path, `body` reads and
//! decodes what comes back, `dns` resolves host names; the timeout and
//! error-chain helpers here serve them.

use std::error::Error as StdError;
use std::io;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

mod body;
mod client;
mod dns;
#[cfg(test)]
pub(crate) mod testing {
    //! Fetchers with timeouts short enough that a failing test ends quickly;
    //! the servers they query are `web_crawler_testsupport`'s.

    use super::{FetchConfig, HttpFetcher};
    use std::time::Duration;

    pub(crate) fn test_config() -> FetchConfig {
        FetchConfig {
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(2),
            total_timeout: Duration::from_secs(10),
            ..FetchConfig::default()
        }
    }

    pub(crate) fn fetcher_with(cfg: FetchConfig) -> HttpFetcher {
        HttpFetcher::new(cfg).unwrap()
    }

    pub(crate) fn fetcher() -> HttpFetcher {
        fetcher_with(test_config())
    }
}

pub(crate) use body::is_decoded;
pub use client::HttpFetcher;

/// Settings of an [`HttpFetcher`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FetchConfig {
    /// Sent as the `User-Agent` header; its product token (text before the
    /// first `/`) is also what robots.txt groups are matched against.
    pub user_agent: String,
    /// Getting a connection (DNS + TCP + TLS, or a pool checkout). Default 10 s.
    pub connect_timeout: Duration,
    /// Wait for response headers once connected, and the longest gap between
    /// two body chunks. Default 15 s.
    pub read_timeout: Duration,
    /// The whole request, body included. Default 30 s.
    pub total_timeout: Duration,
    /// Cap on the decoded body and also on the raw bytes read. Default 8 MiB.
    pub max_body_bytes: usize,
    /// Idle keep-alive connections kept per host. Default 4.
    pub pool_idle_per_host: usize,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            user_agent: "web_crawler/0.1 (+https://github.com/web_crawler)".to_string(),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(15),
            total_timeout: Duration::from_secs(30),
            max_body_bytes: 8 * 1024 * 1024,
            pool_idle_per_host: 4,
        }
    }
}

/// The result of one GET, whatever its status.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub content_type: Option<String>,
    /// The `Content-Length` header if present and numeric.
    pub content_length: Option<u64>,
    pub server: Option<String>,
    /// `ETag` and `Last-Modified`, for a later conditional request.
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// Raw `Location` header, not resolved against the request URL.
    pub location: Option<String>,
    /// `Retry-After` as delta-seconds or HTTP-date (relative to now), capped at a day.
    pub retry_after: Option<Duration>,
    /// Decoded body, at most `max_body_bytes`.
    pub body: Bytes,
    /// The body hit the cap (raw or decoded) and was cut.
    pub truncated: bool,
    pub elapsed: Duration,
    /// The response's protocol version.
    pub version: hyper::Version,
    /// The response headers as received.
    pub headers: hyper::HeaderMap,
    /// The request headers sent, `Host` first (for archives).
    pub request_headers: Vec<(String, String)>,
    /// The server's address, when the connection reported it.
    pub remote_ip: Option<std::net::IpAddr>,
}

/// Why a fetch produced no response.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FetchError {
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    /// "NAME: reason": the host name could not be resolved (no such host,
    /// no address, or no answer from the name servers in time).
    #[error("cannot resolve host {0}")]
    Dns(String),
    #[error("connection failed: {0}")]
    Connect(String),
    /// The host refused the connection: nothing listens at its address
    /// and port (or a firewall rejects the connection).
    #[error("connection refused")]
    Refused,
    #[error("TLS failure: {0}")]
    Tls(String),
    /// Which limit fired: "connect", "headers", "body" or "total".
    #[error("timed out ({0})")]
    Timeout(&'static str),
    #[error("HTTP protocol error: {0}")]
    Protocol(String),
    #[error("could not decode body: {0}")]
    Decode(String),
}

impl FetchError {
    /// Whether trying the same URL later may succeed. TLS failures count as
    /// permanent: they are nearly always certificate or configuration problems.
    /// DNS failures count as transient: a name server blip is common, and a
    /// name that is really gone fails again quickly (it is negatively cached).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            FetchError::Dns(_)
                | FetchError::Connect(_)
                | FetchError::Refused
                | FetchError::Timeout(_)
                | FetchError::Protocol(_)
        )
    }
}

/// Names the limit that fired: the overall one when it was the nearer.
fn timeout(hit: Instant, total_deadline: Instant, phase: &'static str) -> FetchError {
    FetchError::Timeout(if hit >= total_deadline {
        "total"
    } else {
        phase
    })
}

/// The error and its causes. `io::Error::source` skips the error it wraps, so
/// wrapped errors are reached through `get_ref`, or a rustls error buried in
/// two io::Errors (as hyper-rustls reports them) would never be seen.
fn error_chain<'a>(err: &'a (dyn StdError + 'static)) -> Vec<&'a (dyn StdError + 'static)> {
    let mut chain = Vec::new();
    let mut cur = Some(err);
    // Bounded in case some error type reports itself as its own cause.
    while let Some(e) = cur
        && chain.len() < 16
    {
        chain.push(e);
        cur = match e.downcast_ref::<io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => e.source(),
        };
    }
    chain
}

/// "a: b: c" over the chain, skipping repeats (an io::Error prints the same
/// text as the error it wraps).
fn chain_message(chain: &[&(dyn StdError + 'static)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in chain {
        let text = e.to_string();
        if parts.last() != Some(&text) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

fn error_message(err: &(dyn StdError + 'static)) -> String {
    chain_message(&error_chain(err))
}
