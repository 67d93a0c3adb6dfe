//! The hyper client and the request path: connection setup, request
//! headers, the connect and header timeouts, and turning the response head
//! and client errors into an [`HttpResponse`] or a [`FetchError`].

use std::io;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::Empty;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{HttpConnector, HttpInfo, capture_connection};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::time::{Instant, sleep_until, timeout_at};
use url::Url;

use super::body::read_body;
use super::dns::{DnsCache, DnsConfig, DnsError};
use super::{FetchConfig, FetchError, HttpResponse, chain_message, error_chain, timeout};

const ACCEPT: &str = "text/html,application/xhtml+xml,*/*;q=0.8";
const ACCEPT_ENCODING: &str = "gzip, deflate, br";
/// A server asking for more than a day is treated as asking for a day, so one
/// bad header cannot park a host forever.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);
/// How long an idle pooled connection is kept before it is closed.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// A pooled HTTP/HTTPS client. Cheap to share behind an `Arc`; all methods take `&self`.
pub struct HttpFetcher {
    cfg: FetchConfig,
    user_agent: HeaderValue,
    client: Client<HttpsConnector<HttpConnector<DnsCache>>, Empty<Bytes>>,
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
    ///
    /// Host names are resolved through a DNS cache of this fetcher's own
    /// (see the `dns` module), shared by everything that shares the fetcher.
    pub fn new(cfg: FetchConfig) -> Result<Self, FetchError> {
        let dns = DnsCache::system(DnsConfig::for_connect_timeout(cfg.connect_timeout));
        Self::with_dns(cfg, dns)
    }

    /// [`new`](Self::new) over a given resolver cache.
    pub(crate) fn with_dns(cfg: FetchConfig, dns: DnsCache) -> Result<Self, FetchError> {
        let user_agent = HeaderValue::from_str(&cfg.user_agent).map_err(|_| {
            FetchError::Protocol(format!(
                "User-Agent {:?} is not a valid header value",
                cfg.user_agent
            ))
        })?;

        let mut http = HttpConnector::new_with_resolver(dns);
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

    /// A conditional [`get`](Self::get): `If-None-Match: etag` and
    /// `If-Modified-Since: last_modified` (each when given, as the server
    /// sent them). A 304 answer has no body.
    pub async fn get_if_changed(
        &self,
        url: &Url,
        etag: Option<&str>,
        last_modified: Option<&str>,
    ) -> Result<HttpResponse, FetchError> {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            (header::IF_NONE_MATCH, etag),
            (header::IF_MODIFIED_SINCE, last_modified),
        ] {
            // A validator that is not a valid header value is not sent back.
            if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
                headers.insert(name, value);
            }
        }
        self.request(url, self.cfg.max_body_bytes, headers).await
    }

    /// [`get`](Self::get) with a body cap other than the configured one
    /// (robots.txt uses 500 KiB).
    pub(crate) async fn get_limited(
        &self,
        url: &Url,
        max_body: usize,
    ) -> Result<HttpResponse, FetchError> {
        self.request(url, max_body, HeaderMap::new()).await
    }

    async fn request(
        &self,
        url: &Url,
        max_body: usize,
        extra: HeaderMap,
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
        req.headers_mut().extend(extra);
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
        let remote_ip = connected.connection_metadata().as_ref().and_then(|c| {
            let mut extras = hyper::http::Extensions::new();
            c.get_extras(&mut extras);
            extras.get::<HttpInfo>().map(|info| info.remote_addr().ip())
        });

        let (parts, body) = resp.into_parts();
        let headers = &parts.headers;
        let (decoded, truncated) =
            read_body(body, headers, max_body, self.cfg.read_timeout, deadline).await?;

        Ok(HttpResponse {
            status: parts.status.as_u16(),
            content_type: header_text(headers, &header::CONTENT_TYPE),
            content_length: header_text(headers, &header::CONTENT_LENGTH)
                .and_then(|v| v.trim().parse().ok()),
            server: header_text(headers, &header::SERVER),
            etag: header_text(headers, &header::ETAG),
            last_modified: header_text(headers, &header::LAST_MODIFIED),
            location: header_text(headers, &header::LOCATION),
            retry_after: header_text(headers, &header::RETRY_AFTER)
                .and_then(|v| parse_retry_after(&v, SystemTime::now())),
            body: Bytes::from(decoded),
            truncated,
            elapsed: start.elapsed(),
            version: parts.version,
            request_headers: vec![
                ("Host".to_string(), host_header(url)),
                ("User-Agent".to_string(), self.cfg.user_agent.clone()),
                ("Accept".to_string(), ACCEPT.to_string()),
                ("Accept-Encoding".to_string(), ACCEPT_ENCODING.to_string()),
            ],
            remote_ip,
            headers: parts.headers,
        })
    }
}

/// The `Host` header hyper sends for `url`: the host, and the port unless
/// it is the scheme's default.
fn host_header(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
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
    if let Some(dns) = chain.iter().find_map(|e| e.downcast_ref::<DnsError>()) {
        return FetchError::Dns(format!("{}: {}", dns.host(), dns.reason()));
    }
    let tls = chain
        .iter()
        .any(|e| e.is::<rustls::Error>() || e.is::<rustls::pki_types::InvalidDnsNameError>());
    let io_kind = |kind: io::ErrorKind| {
        chain.iter().any(|e| {
            e.downcast_ref::<io::Error>()
                .is_some_and(|io| io.kind() == kind)
        })
    };
    let timed_out = io_kind(io::ErrorKind::TimedOut);
    if tls {
        FetchError::Tls(msg)
    } else if timed_out && err.is_connect() {
        FetchError::Timeout("connect")
    } else if err.is_connect() && io_kind(io::ErrorKind::ConnectionRefused) {
        FetchError::Refused
    } else if err.is_connect() {
        FetchError::Connect(msg)
    } else {
        FetchError::Protocol(msg)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::testing::{fetcher, fetcher_with, test_config};
    use std::time::UNIX_EPOCH;
    use tokio::io::AsyncWriteExt;
    use web_crawler_testsupport::raw::{RawServer, closed_port_addr};
    use web_crawler_testsupport::{Page, serve, url_for};

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
            Page::new(
                200,
                &[("content-type", "text/plain"), ("server", "test/1")],
                echo.into_bytes(),
            )
        })
        .await;
        let resp = fetcher()
            .get(&server.parsed_url("/a?b=c#frag"))
            .await
            .unwrap();
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
    async fn slow_headers_time_out() {
        let server = RawServer::silent(Duration::from_secs(10)).await;
        let f = fetcher_with(FetchConfig {
            read_timeout: Duration::from_millis(300),
            ..test_config()
        });
        let started = std::time::Instant::now();
        let err = f.get(&url_for(server.addr, "/")).await.unwrap_err();
        assert!(matches!(err, FetchError::Timeout("headers")), "{err:?}");
        assert!(err.is_retryable());
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[tokio::test]
    async fn connection_refused_is_said_in_words() {
        let url = url_for(closed_port_addr(), "/");
        let err = fetcher().get(&url).await.unwrap_err();
        assert!(matches!(err, FetchError::Refused), "{err:?}");
        assert!(err.is_retryable());
        assert_eq!(err.to_string(), "connection refused");
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
        let server = RawServer::start(|mut s| async move {
            let mut buf = [0u8; 1024];
            let _ = tokio::io::AsyncReadExt::read(&mut s, &mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                .await;
        })
        .await;
        let url = Url::parse(&format!("https://{}/", server.addr)).unwrap();
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
            Page::new(503, &[("retry-after", &value)], Vec::new())
        })
        .await;
        let f = fetcher();
        let get = |path: &'static str| {
            let url = server.parsed_url(path);
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
                Page::new(301, &[("location", "/new")], b"moved".to_vec())
            } else {
                Page::new(200, &[], b"new".to_vec())
            }
        })
        .await;
        let resp = fetcher().get(&server.parsed_url("/old")).await.unwrap();
        assert_eq!(resp.status, 301);
        assert_eq!(resp.location.as_deref(), Some("/new"));
        assert_eq!(&resp.body[..], b"moved");
        assert_eq!(server.total_hits(), 1);
    }

    #[tokio::test]
    async fn non_utf8_header_values_do_not_panic() {
        let server = RawServer::reply(
            b"HTTP/1.1 302 Found\r\nContent-Type: text/html; charset=\xff\r\n\
              Server: caf\xe9\r\nLocation: /caf\xc3\xa9\r\n\
              Retry-After: \xff\r\nBad Header\x01: x\r\nContent-Length: 2\r\n\r\nok",
        )
        .await;
        let resp = fetcher().get(&url_for(server.addr, "/")).await.unwrap();
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
        let server = serve(|_| Page::new(200, &[], b"ok".to_vec())).await;
        let f = fetcher();
        let url = server.parsed_url("/");
        for _ in 0..100 {
            let resp = f.get(&url).await.unwrap();
            assert_eq!(&resp.body[..], b"ok");
        }
        assert_eq!(server.total_hits(), 100);
        let conns = server.connections();
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
}
