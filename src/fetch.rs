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
//!   hyper-util's `HttpConnector`.
//! * `read_timeout` covers the wait for response headers once a connection is
//!   ready, and then each gap between body chunks.
//! * `total_timeout` covers the whole call, body included.

use std::error::Error as StdError;
use std::io::{self, Write};
use std::time::{Duration, SystemTime};

use brotli::DecompressorWriter;
use bytes::Bytes;
use flate2::write::{DeflateDecoder, GzDecoder, ZlibDecoder};
use http_body_util::{BodyExt, Empty};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{HttpConnector, capture_connection};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::time::{Instant, sleep_until, timeout_at};
use url::Url;

const ACCEPT: &str = "text/html,application/xhtml+xml,*/*;q=0.8";
const ACCEPT_ENCODING: &str = "gzip, deflate, br";
/// A server asking for more than a day is treated as asking for a day, so one
/// bad header cannot park a host forever.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);
/// How long an idle pooled connection is kept before it is closed.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Output buffer of the brotli decoder; it also bounds how far the decoder
/// runs past the cap before the sink refuses more.
const BROTLI_BUFFER: usize = 32 * 1024;

/// Settings of an [`HttpFetcher`].
#[derive(Debug, Clone)]
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
    /// Raw `Location` header, not resolved against the request URL.
    pub location: Option<String>,
    /// `Retry-After` as delta-seconds or HTTP-date (relative to now), capped at a day.
    pub retry_after: Option<Duration>,
    /// Decoded body, at most `max_body_bytes`.
    pub body: Bytes,
    /// The body hit the cap (raw or decoded) and was cut.
    pub truncated: bool,
    pub elapsed: Duration,
}

/// Why a fetch produced no response.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FetchError {
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    #[error("connection failed: {0}")]
    Connect(String),
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
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            FetchError::Connect(_) | FetchError::Timeout(_) | FetchError::Protocol(_)
        )
    }
}

/// A pooled HTTP/HTTPS client. Cheap to share behind an `Arc`; all methods take `&self`.
pub struct HttpFetcher {
    cfg: FetchConfig,
    user_agent: HeaderValue,
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
}

impl std::fmt::Debug for HttpFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpFetcher")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl HttpFetcher {
    /// Builds the client. Fails only if the User-Agent is not a valid header
    /// value (reported as `Protocol`) or TLS cannot be set up (`Tls`).
    pub fn new(cfg: FetchConfig) -> Result<Self, FetchError> {
        let user_agent = HeaderValue::from_str(&cfg.user_agent).map_err(|_| {
            FetchError::Protocol(format!(
                "User-Agent {:?} is not a valid header value",
                cfg.user_agent
            ))
        })?;

        let mut http = HttpConnector::new();
        // The TLS layer needs the plain connector to accept https URIs too.
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(cfg.connect_timeout));

        // The ring provider is passed explicitly so the result does not depend
        // on which rustls providers other crates in the build switch on.
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| FetchError::Tls(e.to_string()))?
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);

        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(cfg.pool_idle_per_host)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            // Without a timer the idle timeout above is never enforced.
            .pool_timer(TokioTimer::new())
            // Real servers send sloppy headers; a crawler would rather skip a
            // bad header line than lose the page.
            .http1_ignore_invalid_headers_in_responses(true)
            .http1_allow_spaces_after_header_name_in_responses(true)
            .http1_allow_obsolete_multiline_headers_in_responses(true)
            .build(https);

        Ok(HttpFetcher {
            cfg,
            user_agent,
            client,
        })
    }

    pub fn config(&self) -> &FetchConfig {
        &self.cfg
    }

    /// One GET, no redirect following (the crawler records 3xx itself).
    /// Sends User-Agent, `Accept: text/html,application/xhtml+xml,*/*;q=0.8`
    /// and `Accept-Encoding: gzip, deflate, br`.
    pub async fn get(&self, url: &Url) -> Result<HttpResponse, FetchError> {
        self.get_limited(url, self.cfg.max_body_bytes).await
    }

    /// [`get`](Self::get) with a body cap other than the configured one
    /// (robots.txt uses 500 KiB).
    pub(crate) async fn get_limited(
        &self,
        url: &Url,
        max_body: usize,
    ) -> Result<HttpResponse, FetchError> {
        let start = Instant::now();
        let deadline = start + self.cfg.total_timeout;

        let mut req = Request::get(request_uri(url)?)
            .header(header::USER_AGENT, self.user_agent.clone())
            .header(header::ACCEPT, HeaderValue::from_static(ACCEPT))
            .header(
                header::ACCEPT_ENCODING,
                HeaderValue::from_static(ACCEPT_ENCODING),
            )
            .body(Empty::new())
            .map_err(|e| FetchError::InvalidUrl(format!("{url}: {e}")))?;
        // Tells us when the client has a connection for this request, which is
        // where the connect phase ends and the wait for headers starts.
        let mut connected = capture_connection(&mut req);
        let mut pending = self.client.request(req);

        let connect_deadline = deadline.min(start + self.cfg.connect_timeout);
        let early = tokio::select! {
            res = &mut pending => Some(res),
            _ = connected.wait_for_connection_metadata() => None,
            _ = sleep_until(connect_deadline) => {
                return Err(timeout(connect_deadline, deadline, "connect"));
            }
        };
        let res = match early {
            Some(res) => res,
            None => {
                let headers_deadline = deadline.min(Instant::now() + self.cfg.read_timeout);
                match timeout_at(headers_deadline, &mut pending).await {
                    Ok(res) => res,
                    Err(_) => return Err(timeout(headers_deadline, deadline, "headers")),
                }
            }
        };
        let resp = res.map_err(|e| classify_client_error(&e))?;

        let (parts, mut body) = resp.into_parts();
        let headers = &parts.headers;
        let mut decoder = BodyDecoder::new(content_coding(headers), max_body);
        let mut raw_len = 0usize;
        let mut truncated = false;
        loop {
            let frame_deadline = deadline.min(Instant::now() + self.cfg.read_timeout);
            let frame = match timeout_at(frame_deadline, body.frame()).await {
                Err(_) => return Err(timeout(frame_deadline, deadline, "body")),
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(FetchError::Protocol(error_message(&e))),
                Ok(Some(Ok(frame))) => frame,
            };
            // Trailers carry nothing we keep.
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let take = data.len().min(max_body - raw_len);
            raw_len += take;
            if decoder.feed(&data[..take])? || take < data.len() {
                truncated = true;
                break;
            }
        }
        // Dropping an unfinished body closes the connection instead of
        // returning it to the pool, so the rest is never read.
        drop(body);
        let (decoded, cut) = decoder.finish(truncated)?;

        Ok(HttpResponse {
            status: parts.status.as_u16(),
            content_type: header_text(headers, &header::CONTENT_TYPE),
            content_length: header_text(headers, &header::CONTENT_LENGTH)
                .and_then(|v| v.trim().parse().ok()),
            server: header_text(headers, &header::SERVER),
            location: header_text(headers, &header::LOCATION),
            retry_after: header_text(headers, &header::RETRY_AFTER)
                .and_then(|v| parse_retry_after(&v, SystemTime::now())),
            body: Bytes::from(decoded),
            truncated: truncated || cut,
            elapsed: start.elapsed(),
        })
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

/// The URI hyper sends: http(s) only, without fragment or credentials (the
/// crawler never authenticates, and hyper would put them in the Host header).
fn request_uri(url: &Url) -> Result<Uri, FetchError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(FetchError::InvalidUrl(format!(
            "unsupported scheme {:?} in {url}",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(FetchError::InvalidUrl(format!("no host in {url}")));
    }
    let mut clean = url.clone();
    clean.set_fragment(None);
    // Both only fail for URLs without a host, excluded above.
    let _ = clean.set_username("");
    let _ = clean.set_password(None);
    clean
        .as_str()
        .parse::<Uri>()
        .map_err(|e| FetchError::InvalidUrl(format!("{url}: {e}")))
}

/// A header as text. Bytes that are not UTF-8 become U+FFFD rather than
/// making the whole header disappear.
fn header_text(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

fn classify_client_error(err: &hyper_util::client::legacy::Error) -> FetchError {
    let chain = error_chain(err);
    // The client's own text ("client error (Connect)") only repeats what the
    // variant says; the causes are the useful part.
    let msg = chain_message(if chain.len() > 1 { &chain[1..] } else { &chain });
    let tls = chain
        .iter()
        .any(|e| e.is::<rustls::Error>() || e.is::<rustls::pki_types::InvalidDnsNameError>());
    let timed_out = chain.iter().any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::TimedOut)
    });
    if tls {
        FetchError::Tls(msg)
    } else if timed_out && err.is_connect() {
        FetchError::Timeout("connect")
    } else if err.is_connect() {
        FetchError::Connect(msg)
    } else {
        FetchError::Protocol(msg)
    }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coding {
    Identity,
    Gzip,
    Deflate,
    Brotli,
}

/// The body's content coding. Only a single coding is undone; a stack of
/// several (rare, usually a misconfiguration) is left as is, like an unknown one.
fn content_coding(headers: &HeaderMap) -> Coding {
    let mut codings = Vec::new();
    for value in headers.get_all(header::CONTENT_ENCODING) {
        for token in String::from_utf8_lossy(value.as_bytes()).split(',') {
            let token = token.trim().to_ascii_lowercase();
            if !token.is_empty() && token != "identity" {
                codings.push(token);
            }
        }
    }
    match codings.as_slice() {
        [one] => match one.as_str() {
            "gzip" | "x-gzip" => Coding::Gzip,
            "deflate" => Coding::Deflate,
            "br" => Coding::Brotli,
            _ => Coding::Identity,
        },
        _ => Coding::Identity,
    }
}

/// Collects decoded bytes up to a cap. Once full, a write fails instead of
/// returning 0, so decoders stop at once (brotli's write loop would spin on 0).
#[derive(Default)]
struct CappedSink {
    buf: Vec<u8>,
    cap: usize,
    overflowed: bool,
}

impl CappedSink {
    fn new(cap: usize) -> Self {
        CappedSink {
            buf: Vec::new(),
            cap,
            overflowed: false,
        }
    }

    /// Takes the bytes out and refuses everything after, since decoders flush
    /// once more when dropped.
    fn take(&mut self) -> Vec<u8> {
        self.cap = 0;
        std::mem::take(&mut self.buf)
    }
}

impl Write for CappedSink {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let room = self.cap.saturating_sub(self.buf.len());
        if room == 0 {
            self.overflowed = true;
            return Err(io::Error::other("decoded body reached the size cap"));
        }
        let n = data.len().min(room);
        let need = self.buf.len() + n;
        if need > self.buf.capacity() {
            // Grow by doubling like Vec, but never past the cap, so a capped
            // body never holds more than `cap` bytes of memory.
            let target = (self.buf.capacity() * 2)
                .max(8 * 1024)
                .min(self.cap)
                .max(need);
            self.buf.reserve_exact(target - self.buf.len());
        }
        self.buf.extend_from_slice(&data[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

enum DecodeState {
    Plain(CappedSink),
    /// "deflate" is zlib-wrapped per the RFC, but many servers send raw
    /// deflate; the first two bytes tell which.
    DeflateSniff {
        head: Vec<u8>,
        sink: CappedSink,
    },
    Gzip(GzDecoder<CappedSink>),
    Zlib(ZlibDecoder<CappedSink>),
    RawDeflate(DeflateDecoder<CappedSink>),
    Brotli(Box<DecompressorWriter<CappedSink>>),
}

/// Streaming body decoder with the decoded-size cap applied while decoding.
struct BodyDecoder {
    state: DecodeState,
    fed_any: bool,
    /// The compressed stream has ended; anything after it is ignored.
    ended: bool,
}

impl BodyDecoder {
    fn new(coding: Coding, cap: usize) -> Self {
        let sink = CappedSink::new(cap);
        let state = match coding {
            Coding::Identity => DecodeState::Plain(sink),
            Coding::Gzip => DecodeState::Gzip(GzDecoder::new(sink)),
            Coding::Deflate => DecodeState::DeflateSniff {
                head: Vec::new(),
                sink,
            },
            Coding::Brotli => {
                DecodeState::Brotli(Box::new(DecompressorWriter::new(sink, BROTLI_BUFFER)))
            }
        };
        BodyDecoder {
            state,
            fed_any: false,
            ended: false,
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match &mut self.state {
            DecodeState::Plain(s) | DecodeState::DeflateSniff { sink: s, .. } => s,
            DecodeState::Gzip(d) => d,
            DecodeState::Zlib(d) => d,
            DecodeState::RawDeflate(d) => d,
            DecodeState::Brotli(d) => d.as_mut(),
        }
    }

    fn sink(&mut self) -> &mut CappedSink {
        match &mut self.state {
            DecodeState::Plain(s) | DecodeState::DeflateSniff { sink: s, .. } => s,
            DecodeState::Gzip(d) => d.get_mut(),
            DecodeState::Zlib(d) => d.get_mut(),
            DecodeState::RawDeflate(d) => d.get_mut(),
            DecodeState::Brotli(d) => d.get_mut(),
        }
    }

    /// Feeds raw body bytes. Returns true once the decoded cap is reached,
    /// after which the caller should stop reading.
    fn feed(&mut self, mut data: &[u8]) -> Result<bool, FetchError> {
        if self.ended || data.is_empty() {
            return Ok(false);
        }
        self.fed_any = true;
        if let DecodeState::DeflateSniff { head, sink } = &mut self.state {
            head.extend_from_slice(data);
            if head.len() < 2 {
                return Ok(false);
            }
            let head = std::mem::take(head);
            let sink = std::mem::take(sink);
            self.state = if is_zlib_header(head[0], head[1]) {
                DecodeState::Zlib(ZlibDecoder::new(sink))
            } else {
                DecodeState::RawDeflate(DeflateDecoder::new(sink))
            };
            return self.feed(&head);
        }
        let brotli = matches!(self.state, DecodeState::Brotli(_));
        while !data.is_empty() {
            match self.writer().write(data) {
                // The decoders accept nothing past the end of their stream.
                Ok(0) => {
                    self.ended = true;
                    break;
                }
                Ok(n) => {
                    // brotli consumes everything it can, so a short write
                    // also means its stream has ended.
                    if brotli && n < data.len() {
                        self.ended = true;
                        break;
                    }
                    data = &data[n..];
                }
                Err(_) if self.sink().overflowed => return Ok(true),
                Err(e) => return Err(FetchError::Decode(e.to_string())),
            }
        }
        Ok(false)
    }

    /// Flushes the decoder and returns the body and whether the decoded cap
    /// cut it. A stream we cut ourselves (`raw_truncated`) cannot end cleanly,
    /// so its errors are ignored.
    fn finish(mut self, raw_truncated: bool) -> Result<(Vec<u8>, bool), FetchError> {
        // An empty body (HEAD-like statuses, 204, 304) is fine whatever the
        // Content-Encoding says.
        let result = if !self.fed_any {
            Ok(())
        } else {
            match &mut self.state {
                DecodeState::Plain(_) => Ok(()),
                DecodeState::DeflateSniff { .. } => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "deflate stream shorter than 2 bytes",
                )),
                DecodeState::Gzip(d) => d.try_finish(),
                DecodeState::Zlib(d) => d.try_finish(),
                DecodeState::RawDeflate(d) => d.try_finish(),
                DecodeState::Brotli(d) => d.close(),
            }
        };
        let overflowed = self.sink().overflowed;
        if let Err(e) = result
            && !overflowed
            && !raw_truncated
        {
            return Err(FetchError::Decode(e.to_string()));
        }
        Ok((self.sink().take(), overflowed))
    }
}

/// RFC 1950 header: compression method 8 and a header checksum divisible by 31.
fn is_zlib_header(cmf: u8, flg: u8) -> bool {
    cmf & 0x0f == 8 && cmf >> 4 <= 7 && (u16::from(cmf) << 8 | u16::from(flg)) % 31 == 0
}

/// `Retry-After` as delta-seconds or an HTTP-date, relative to `now`, capped at a day.
fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // Too many digits for u64 is still "a very long time".
        let secs = value.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    }
    // IMF-fixdate, or the obsolete RFC 850 and asctime forms recipients must accept.
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(MAX_RETRY_AFTER),
    )
}

/// Loopback servers for the tests of this module and of `robots`. Each accept
/// loop ends after a fixed number of connections, and all of it is dropped
/// with the test's runtime, so no test can hang on a server.
#[cfg(test)]
pub(crate) mod test_server {
    use std::convert::Infallible;
    use std::future::Future;
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use bytes::Bytes;
    use http_body_util::Full;
    use hyper::body::Incoming;
    use hyper::{Request, Response};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto;
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};
    use url::Url;

    const MAX_CONNECTIONS: usize = 512;

    pub(crate) struct Server {
        pub addr: SocketAddr,
        pub connections: Arc<AtomicUsize>,
        pub requests: Arc<AtomicUsize>,
    }

    impl Server {
        pub(crate) fn url(&self, path: &str) -> Url {
            url_for(self.addr, path)
        }
    }

    pub(crate) fn url_for(addr: SocketAddr, path: &str) -> Url {
        Url::parse(&format!("http://{addr}{path}")).unwrap()
    }

    /// An HTTP/1.1 + h2c server answering every request with `handler`.
    pub(crate) async fn serve<F>(handler: F) -> Server
    where
        F: Fn(&Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let handler = Arc::new(handler);
        let (conns, reqs) = (connections.clone(), requests.clone());
        tokio::spawn(async move {
            for _ in 0..MAX_CONNECTIONS {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                conns.fetch_add(1, Ordering::SeqCst);
                let (handler, reqs) = (handler.clone(), reqs.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        reqs.fetch_add(1, Ordering::SeqCst);
                        let resp = handler(&req);
                        async move { Ok::<_, Infallible>(resp) }
                    });
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Server {
            addr,
            connections,
            requests,
        }
    }

    /// A server that hands each raw TCP connection to `handler`, for
    /// responses hyper would refuse to produce.
    pub(crate) async fn serve_raw<F, Fut>(handler: F) -> SocketAddr
    where
        F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            for _ in 0..MAX_CONNECTIONS {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(handler(stream));
            }
        });
        addr
    }

    /// Reads one request head (up to the blank line, at most 64 KiB).
    pub(crate) async fn read_head(stream: &mut TcpStream) -> bool {
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while head.len() < 64 * 1024 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
            if head.windows(4).any(|w| w == b"\r\n\r\n") {
                return true;
            }
        }
        false
    }

    /// An address nothing listens on: bound, then released.
    pub(crate) fn closed_port_addr() -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::test_server::{closed_port_addr, read_head, serve, serve_raw, url_for};
    use super::*;
    use http_body_util::Full;
    use hyper::Response;
    use std::sync::atomic::Ordering;
    use std::time::UNIX_EPOCH;
    use tokio::io::AsyncWriteExt;

    fn test_config() -> FetchConfig {
        FetchConfig {
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(2),
            total_timeout: Duration::from_secs(10),
            ..FetchConfig::default()
        }
    }

    fn fetcher_with(cfg: FetchConfig) -> HttpFetcher {
        HttpFetcher::new(cfg).unwrap()
    }

    fn fetcher() -> HttpFetcher {
        fetcher_with(test_config())
    }

    fn response(status: u16, headers: &[(&str, &str)], body: Vec<u8>) -> Response<Full<Bytes>> {
        let mut b = Response::builder().status(status);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(Full::new(Bytes::from(body))).unwrap()
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn page() -> Vec<u8> {
        b"<html><body>hello crawler</body></html>".repeat(200)
    }

    #[tokio::test]
    async fn plain_200() {
        let server = serve(|req| {
            // Echo what the client sent so the test can check the request headers.
            let h = req.headers();
            let echo = format!(
                "{}|{}|{}",
                h["user-agent"].to_str().unwrap(),
                h["accept"].to_str().unwrap(),
                h["accept-encoding"].to_str().unwrap()
            );
            response(
                200,
                &[("content-type", "text/plain"), ("server", "test/1")],
                echo.into_bytes(),
            )
        })
        .await;
        let resp = fetcher().get(&server.url("/a?b=c#frag")).await.unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.content_type.as_deref(), Some("text/plain"));
        assert_eq!(resp.server.as_deref(), Some("test/1"));
        assert_eq!(resp.content_length, Some(resp.body.len() as u64));
        assert!(!resp.truncated);
        assert!(resp.retry_after.is_none());
        assert!(resp.location.is_none());
        assert_eq!(
            std::str::from_utf8(&resp.body).unwrap(),
            format!(
                "{}|{ACCEPT}|{ACCEPT_ENCODING}",
                FetchConfig::default().user_agent
            )
        );
    }

    #[tokio::test]
    async fn gzip_body_is_decoded() {
        let server = serve(|_| response(200, &[("content-encoding", "gzip")], gzip(&page()))).await;
        let resp = fetcher().get(&server.url("/")).await.unwrap();
        assert_eq!(resp.body, page());
        assert!(!resp.truncated);
    }

    #[tokio::test]
    async fn deflate_zlib_and_raw_are_decoded() {
        let server = serve(|req| {
            let body = if req.uri().path() == "/zlib" {
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(&page()).unwrap();
                e.finish().unwrap()
            } else {
                let mut e =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(&page()).unwrap();
                e.finish().unwrap()
            };
            response(200, &[("content-encoding", "deflate")], body)
        })
        .await;
        let f = fetcher();
        for path in ["/zlib", "/raw"] {
            let resp = f.get(&server.url(path)).await.unwrap();
            assert_eq!(resp.body, page(), "{path}");
            assert!(!resp.truncated);
        }
    }

    #[tokio::test]
    async fn brotli_body_is_decoded() {
        let server = serve(|_| {
            let mut w = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22);
            w.write_all(&page()).unwrap();
            response(200, &[("content-encoding", "br")], w.into_inner())
        })
        .await;
        let resp = fetcher().get(&server.url("/")).await.unwrap();
        assert_eq!(resp.body, page());
        assert!(!resp.truncated);
    }

    #[tokio::test]
    async fn unknown_or_stacked_encoding_left_as_is() {
        let server = serve(|req| {
            let coding = if req.uri().path() == "/zstd" {
                "zstd"
            } else {
                "gzip, br"
            };
            response(
                200,
                &[("content-encoding", coding)],
                b"\x28\xb5opaque".to_vec(),
            )
        })
        .await;
        let f = fetcher();
        for path in ["/zstd", "/stacked"] {
            let resp = f.get(&server.url(path)).await.unwrap();
            assert_eq!(&resp.body[..], b"\x28\xb5opaque");
        }
    }

    #[tokio::test]
    async fn corrupt_gzip_is_decode_error() {
        let server = serve(|_| {
            response(
                200,
                &[("content-encoding", "gzip")],
                b"definitely not gzip".to_vec(),
            )
        })
        .await;
        let err = fetcher().get(&server.url("/")).await.unwrap_err();
        assert!(matches!(err, FetchError::Decode(_)), "{err:?}");
        assert!(!err.is_retryable());
    }

    /// 1 GiB of zeros as a ~1 MB gzip member. One fully flushed deflate
    /// segment holding 1 MiB of zeros is repeated 1024 times: a full flush
    /// resets the compressor, so the segments decode independently.
    fn gzip_bomb() -> Vec<u8> {
        const SEGMENT: usize = 1 << 20;
        const COUNT: usize = 1024;
        let zeros = vec![0u8; SEGMENT];
        let mut c = flate2::Compress::new(flate2::Compression::best(), false);
        let mut segment = Vec::with_capacity(64 * 1024);
        c.compress_vec(&zeros, &mut segment, flate2::FlushCompress::Full)
            .unwrap();
        assert_eq!(c.total_in(), SEGMENT as u64, "segment must hold all input");
        let mut crc = flate2::Crc::new();
        crc.update(&zeros);
        let mut one = flate2::Crc::new();
        one.update(&zeros);
        for _ in 1..COUNT {
            crc.combine(&one);
        }
        let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        for _ in 0..COUNT {
            out.extend_from_slice(&segment);
        }
        out.extend_from_slice(&[0x03, 0x00]); // empty final block
        out.extend_from_slice(&crc.sum().to_le_bytes());
        out.extend_from_slice(&((SEGMENT * COUNT) as u32).to_le_bytes());
        out
    }

    #[test]
    fn bomb_decoder_stops_at_cap_without_overallocating() {
        let bomb = gzip_bomb();
        assert!(bomb.len() < 2 * 1024 * 1024, "bomb is {} bytes", bomb.len());
        let cap = 8 * 1024 * 1024;
        let mut d = BodyDecoder::new(Coding::Gzip, cap);
        let mut hit = false;
        for chunk in bomb.chunks(16 * 1024) {
            if d.feed(chunk).unwrap() {
                hit = true;
                break;
            }
        }
        assert!(hit, "cap was never reached");
        assert!(d.sink().buf.capacity() <= cap);
        let (body, cut) = d.finish(false).unwrap();
        assert!(cut);
        assert_eq!(body.len(), cap);
        assert!(body.iter().all(|&b| b == 0));
    }

    #[tokio::test]
    async fn compression_bomb_is_cut_at_cap() {
        let bomb = Bytes::from(gzip_bomb());
        let server = serve(move |_| {
            Response::builder()
                .header("content-encoding", "gzip")
                .body(Full::new(bomb.clone()))
                .unwrap()
        })
        .await;
        let started = std::time::Instant::now();
        let resp = fetcher().get(&server.url("/")).await.unwrap();
        assert!(resp.truncated);
        assert_eq!(resp.body.len(), FetchConfig::default().max_body_bytes);
        assert!(resp.body.iter().all(|&b| b == 0));
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    #[tokio::test]
    async fn oversize_body_is_cut_at_cap() {
        let server = serve(|_| response(200, &[], vec![b'x'; 3 * 1024 * 1024])).await;
        let f = fetcher_with(FetchConfig {
            max_body_bytes: 1024 * 1024,
            ..test_config()
        });
        let resp = f.get(&server.url("/")).await.unwrap();
        assert!(resp.truncated);
        assert_eq!(resp.body.len(), 1024 * 1024);
        assert_eq!(resp.content_length, Some(3 * 1024 * 1024));
    }

    #[tokio::test]
    async fn body_exactly_at_cap_is_not_truncated() {
        let server = serve(|_| response(200, &[], vec![b'x'; 4096])).await;
        let f = fetcher_with(FetchConfig {
            max_body_bytes: 4096,
            ..test_config()
        });
        let resp = f.get(&server.url("/")).await.unwrap();
        assert!(!resp.truncated);
        assert_eq!(resp.body.len(), 4096);
    }

    #[tokio::test]
    async fn endless_chunked_body_finishes() {
        let addr = serve_raw(|mut s| async move {
            if !read_head(&mut s).await {
                return;
            }
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n";
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = format!("8000\r\n{}\r\n", "a".repeat(0x8000));
            // "Forever" as far as the client can tell; bounded (1 GiB) so the
            // server stops by itself even if the client misbehaves.
            for _ in 0..32 * 1024 {
                if s.write_all(chunk.as_bytes()).await.is_err() {
                    return;
                }
            }
        })
        .await;
        let f = fetcher_with(FetchConfig {
            max_body_bytes: 1024 * 1024,
            ..test_config()
        });
        let resp = f.get(&url_for(addr, "/")).await.unwrap();
        assert!(resp.truncated);
        assert_eq!(resp.body.len(), 1024 * 1024);
    }

    #[tokio::test]
    async fn slow_headers_time_out() {
        let addr = serve_raw(|mut s| async move {
            read_head(&mut s).await;
            tokio::time::sleep(Duration::from_secs(10)).await;
        })
        .await;
        let f = fetcher_with(FetchConfig {
            read_timeout: Duration::from_millis(300),
            ..test_config()
        });
        let started = std::time::Instant::now();
        let err = f.get(&url_for(addr, "/")).await.unwrap_err();
        assert!(matches!(err, FetchError::Timeout("headers")), "{err:?}");
        assert!(err.is_retryable());
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    /// Headers, then one byte every `gap`, for at most `count` bytes.
    async fn trickle_server(gap: Duration, count: usize) -> std::net::SocketAddr {
        serve_raw(move |mut s| async move {
            if !read_head(&mut s).await {
                return;
            }
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {count}\r\n\r\n");
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for _ in 0..count {
                tokio::time::sleep(gap).await;
                if s.write_all(b"x").await.is_err() {
                    return;
                }
            }
        })
        .await
    }

    #[tokio::test]
    async fn trickling_body_hits_read_timeout() {
        let addr = trickle_server(Duration::from_secs(2), 10).await;
        let f = fetcher_with(FetchConfig {
            read_timeout: Duration::from_millis(300),
            ..test_config()
        });
        let err = f.get(&url_for(addr, "/")).await.unwrap_err();
        assert!(matches!(err, FetchError::Timeout("body")), "{err:?}");
    }

    #[tokio::test]
    async fn trickling_body_hits_total_timeout() {
        let addr = trickle_server(Duration::from_millis(50), 200).await;
        let f = fetcher_with(FetchConfig {
            read_timeout: Duration::from_secs(2),
            total_timeout: Duration::from_millis(700),
            ..test_config()
        });
        let started = std::time::Instant::now();
        let err = f.get(&url_for(addr, "/")).await.unwrap_err();
        assert!(matches!(err, FetchError::Timeout("total")), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[tokio::test]
    async fn connection_refused_is_connect_error() {
        let url = url_for(closed_port_addr(), "/");
        let err = fetcher().get(&url).await.unwrap_err();
        assert!(matches!(err, FetchError::Connect(_)), "{err:?}");
        assert!(err.is_retryable());
        assert!(err.to_string().starts_with("connection failed: "), "{err}");
    }

    #[tokio::test]
    async fn full_accept_queue_is_connect_timeout() {
        // A listener that never accepts, with its queue filled: Linux then
        // drops further SYNs, so the next connect hangs until our timeout.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(1).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut fillers = Vec::new();
        for _ in 0..4 {
            let connect = tokio::net::TcpStream::connect(addr);
            if let Ok(Ok(s)) = tokio::time::timeout(Duration::from_millis(200), connect).await {
                fillers.push(s);
            }
        }
        let f = fetcher_with(FetchConfig {
            connect_timeout: Duration::from_millis(300),
            ..test_config()
        });
        let started = std::time::Instant::now();
        let err = f.get(&url_for(addr, "/")).await.unwrap_err();
        assert!(matches!(err, FetchError::Timeout("connect")), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
        drop(listener);
    }

    #[tokio::test]
    async fn tls_handshake_garbage_is_tls_error() {
        // Answers the ClientHello with plain HTTP, which rustls rejects.
        let addr = serve_raw(|mut s| async move {
            let mut buf = [0u8; 1024];
            let _ = tokio::io::AsyncReadExt::read(&mut s, &mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                .await;
        })
        .await;
        let url = Url::parse(&format!("https://{addr}/")).unwrap();
        let err = fetcher().get(&url).await.unwrap_err();
        assert!(matches!(err, FetchError::Tls(_)), "{err:?}");
        assert!(!err.is_retryable());
    }

    #[tokio::test]
    async fn bad_urls_are_rejected() {
        let f = fetcher();
        for u in ["ftp://127.0.0.1/x", "mailto:someone@127.0.0.1"] {
            let err = f.get(&Url::parse(u).unwrap()).await.unwrap_err();
            assert!(matches!(err, FetchError::InvalidUrl(_)), "{u}: {err:?}");
            assert!(!err.is_retryable());
        }
    }

    #[test]
    fn bad_user_agent_is_rejected() {
        let cfg = FetchConfig {
            user_agent: "bad\nagent".into(),
            ..FetchConfig::default()
        };
        assert!(HttpFetcher::new(cfg).is_err());
    }

    #[tokio::test]
    async fn retry_after_seconds_and_http_date() {
        let in_an_hour = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
        let server = serve(move |req| {
            let value = match req.uri().path() {
                "/secs" => "120".to_string(),
                "/date" => in_an_hour.clone(),
                "/past" => "Sun, 06 Nov 1994 08:49:37 GMT".to_string(),
                "/far" => "Fri, 01 Jan 2100 00:00:00 GMT".to_string(),
                "/huge" => "99999999999999999999999".to_string(),
                _ => "soon".to_string(),
            };
            response(503, &[("retry-after", &value)], Vec::new())
        })
        .await;
        let f = fetcher();
        let get = |path: &'static str| {
            let url = server.url(path);
            let f = &f;
            async move { f.get(&url).await.unwrap() }
        };
        let secs = get("/secs").await;
        assert_eq!(secs.status, 503);
        assert_eq!(secs.retry_after, Some(Duration::from_secs(120)));
        let date = get("/date").await.retry_after.unwrap();
        assert!(
            date > Duration::from_secs(3590) && date <= Duration::from_secs(3600),
            "{date:?}"
        );
        assert_eq!(get("/past").await.retry_after, Some(Duration::ZERO));
        assert_eq!(get("/far").await.retry_after, Some(MAX_RETRY_AFTER));
        assert_eq!(get("/huge").await.retry_after, Some(MAX_RETRY_AFTER));
        assert_eq!(get("/junk").await.retry_after, None);
    }

    #[test]
    fn retry_after_forms() {
        // RFC 9110's example instant, seen from 777 s before it.
        let now = UNIX_EPOCH + Duration::from_secs(784_111_000);
        let want = Some(Duration::from_secs(777));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            want
        );
        assert_eq!(
            parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now),
            want
        );
        assert_eq!(parse_retry_after("Sun Nov  6 08:49:37 1994", now), want);
        assert_eq!(parse_retry_after(" 777 ", now), want);
        assert_eq!(parse_retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        for bad in [
            "",
            "GMT",
            "-5",
            "1.5",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:00:00 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            // httpdate also checks the weekday against the date.
            "Mon, 06 Nov 1994 08:49:37 GMT",
            "06 Nov 1994 08:49:37",
        ] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[tokio::test]
    async fn redirect_is_returned_not_followed() {
        let server = serve(|req| {
            if req.uri().path() == "/old" {
                response(301, &[("location", "/new")], b"moved".to_vec())
            } else {
                response(200, &[], b"new".to_vec())
            }
        })
        .await;
        let resp = fetcher().get(&server.url("/old")).await.unwrap();
        assert_eq!(resp.status, 301);
        assert_eq!(resp.location.as_deref(), Some("/new"));
        assert_eq!(&resp.body[..], b"moved");
        assert_eq!(server.requests.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn non_utf8_header_values_do_not_panic() {
        let addr = serve_raw(|mut s| async move {
            if !read_head(&mut s).await {
                return;
            }
            let _ = s
                .write_all(
                    b"HTTP/1.1 302 Found\r\nContent-Type: text/html; charset=\xff\r\n\
                      Server: caf\xe9\r\nLocation: /caf\xc3\xa9\r\n\
                      Retry-After: \xff\r\nBad Header\x01: x\r\nContent-Length: 2\r\n\r\nok",
                )
                .await;
        })
        .await;
        let resp = fetcher().get(&url_for(addr, "/")).await.unwrap();
        assert_eq!(resp.status, 302);
        assert_eq!(resp.server.as_deref(), Some("caf\u{fffd}"));
        assert_eq!(resp.location.as_deref(), Some("/caf\u{e9}"));
        assert_eq!(
            resp.content_type.as_deref(),
            Some("text/html; charset=\u{fffd}")
        );
        assert_eq!(resp.retry_after, None);
        assert_eq!(&resp.body[..], b"ok");
    }

    #[tokio::test]
    async fn keep_alive_reuses_connections() {
        let server = serve(|_| response(200, &[], b"ok".to_vec())).await;
        let f = fetcher();
        let url = server.url("/");
        for _ in 0..100 {
            let resp = f.get(&url).await.unwrap();
            assert_eq!(&resp.body[..], b"ok");
        }
        assert_eq!(server.requests.load(Ordering::SeqCst), 100);
        let conns = server.connections.load(Ordering::SeqCst);
        assert!(conns <= 2, "{conns} connections for 100 requests");
    }

    /// The crawler spawns fetches on a multi-threaded runtime and shares the
    /// fetcher, so these must stay Send/Sync; this fails to compile otherwise.
    #[test]
    fn fetch_types_are_send_and_sync() {
        fn send_sync<T: Send + Sync>(_: &T) {}
        fn send<T: Send>(_: &T) {}
        let f = fetcher();
        let url = Url::parse("http://127.0.0.1:9/").unwrap();
        send_sync(&f);
        send(&f.get(&url));
        send_sync(&FetchError::Timeout("total"));
    }

    #[test]
    fn zlib_header_detection() {
        assert!(is_zlib_header(0x78, 0x9c));
        assert!(is_zlib_header(0x78, 0x01));
        assert!(is_zlib_header(0x78, 0xda));
        // Raw deflate of typical text starts with a block header, not a zlib one.
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&page()).unwrap();
        let raw = e.finish().unwrap();
        assert!(!is_zlib_header(raw[0], raw[1]));
    }
}
