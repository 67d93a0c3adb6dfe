//! The loopback HTTP servers of web_crawler's tests: the unit tests of
//! `fetch` and `robots` and the integration tests (`tests/it/`) all start
//! their servers from here.
//!
//! - [`TestServer`]: an HTTP/1.1 + h2c server answering with [`Page`]s, from
//!   a map of targets ([`TestServer::start`], [`TestServer::serve`]) or a
//!   handler ([`serve`], [`TestServer::serve_fn`]); it counts connections and
//!   the requests per target.
//! - [`raw`]: behaviours below HTTP (raw TCP replies, silent, endless or
//!   trickling responses, a closed port).
//! - [`shared_text`]: a generated multi-host web whose pages share their
//!   paragraphs, beside text-rich URL generators (no server: the tests and
//!   the benchmark serve it).
//! - [`text_traps`]: the text-rich URL generators (tags, site search,
//!   days) that the integration tests' blog, the shared-text web and the
//!   benchmark's `-text-traps` presets serve: which URLs they answer, their
//!   links, and what their pages quote.
//!
//! Everything listens on loopback (127.0.0.0/8) only. Each accept loop takes
//! at most [`MAX_CONNECTIONS`] connections and is aborted, with the
//! connections it serves, when its server is dropped (or with the test's
//! runtime), so no test can hang on a server or leave one behind.

pub mod raw;
pub mod shared_text;
pub mod text_traps;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use url::Url;

/// Connections one server accepts before its accept loop ends (it keeps
/// serving the open ones). Far more than any test needs.
pub const MAX_CONNECTIONS: usize = 1024;

/// A request as a handler sees it.
pub type Request = hyper::Request<Incoming>;

/// One response: status, headers, body, and how long to wait before sending it.
#[derive(Clone, Debug)]
pub struct Page {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub delay: Duration,
}

impl Page {
    pub fn new(status: u16, headers: &[(&str, &str)], body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// 200, `text/html; charset=utf-8`.
    pub fn html(body: impl Into<String>) -> Self {
        Self::new(
            200,
            &[("content-type", "text/html; charset=utf-8")],
            body.into(),
        )
    }

    /// 200 with this content type.
    pub fn text(content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self::new(200, &[("content-type", content_type)], body)
    }

    pub fn redirect(status: u16, location: &str) -> Self {
        Self::new(status, &[("location", location)], Vec::new())
    }

    /// What a [`TestServer`] serving a map answers for a target not in it.
    pub fn not_found() -> Self {
        Self::text("text/plain", "not found").status(404)
    }

    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    fn into_response(self) -> Response<Full<Bytes>> {
        let mut resp = Response::builder().status(self.status);
        for (k, v) in &self.headers {
            resp = resp.header(k, v);
        }
        resp.body(Full::new(Bytes::from(self.body)))
            .expect("a valid test response")
    }
}

/// HTML page with a title and links.
pub fn page_with_links(title: &str, links: &[&str]) -> Page {
    let mut html = format!(
        "<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1><p>{}</p>",
        prose_of(title)
    );
    for l in links {
        html.push_str(&format!("<p><a href=\"{l}\">{l}</a></p>"));
    }
    html.push_str("</body></html>");
    Page::html(html)
}

const WORDS: &[&str] = &[
    "actor",
    "mailbox",
    "supervisor",
    "restart",
    "lease",
    "frontier",
    "robots",
    "politeness",
    "crawler",
    "erlang",
    "message",
    "cluster",
    "node",
    "cookie",
    "store",
    "commit",
    "claim",
    "window",
    "budget",
    "sitemap",
    "extract",
    "anchor",
    "referral",
    "pending",
    "river",
    "stone",
    "garden",
    "engine",
    "harbor",
    "lantern",
    "meadow",
    "copper",
    "violin",
    "glacier",
    "orchard",
    "compass",
    "falcon",
    "timber",
    "canyon",
    "marble",
];

/// Forty words of a page's own, derived from its title: real pages differ
/// in their text, and pages that differ only in a number look like a
/// crawler trap (a calendar) to the crawler.
pub fn prose_of(title: &str) -> String {
    let mut state = title.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) | 1;
    (0..40)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            WORDS[(state % WORDS.len() as u64) as usize]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Debug, Default)]
struct Stats {
    connections: AtomicUsize,
    hits: Mutex<HashMap<String, u32>>,
}

/// A running HTTP server; stops, with its connections, when dropped.
#[derive(Debug)]
pub struct TestServer {
    pub addr: SocketAddr,
    stats: Arc<Stats>,
    task: JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// Serve `pages` (keyed by path and query, e.g. `/a?x=1`; anything else
    /// is [`Page::not_found`]) on loopback address `ip`, port chosen by the OS.
    pub async fn start(ip: Ipv4Addr, pages: HashMap<String, Page>) -> TestServer {
        Self::serve(reserve(ip), pages).await
    }

    /// Serve `pages` on a listener from [`reserve`] (so pages can name its port).
    pub async fn serve(
        listener: std::net::TcpListener,
        pages: HashMap<String, Page>,
    ) -> TestServer {
        Self::serve_fn(listener, move |req| {
            pages
                .get(target(req).as_str())
                .cloned()
                .unwrap_or_else(Page::not_found)
        })
        .await
    }

    /// Answer every request with `handler` on a listener from [`reserve`].
    pub async fn serve_fn<F>(listener: std::net::TcpListener, handler: F) -> TestServer
    where
        F: Fn(&Request) -> Page + Send + Sync + 'static,
    {
        let listener = into_tokio(listener);
        let addr = listener.local_addr().expect("listener address");
        let stats = Arc::new(Stats::default());
        let handler = Arc::new(handler);
        let task = {
            let stats = stats.clone();
            accept_loop(listener, move |stream| {
                stats.connections.fetch_add(1, Ordering::SeqCst);
                let (handler, stats) = (handler.clone(), stats.clone());
                let svc = service_fn(move |req: Request| {
                    *stats.hits.lock().unwrap().entry(target(&req)).or_default() += 1;
                    let page = handler(&req);
                    async move {
                        if !page.delay.is_zero() {
                            tokio::time::sleep(page.delay).await;
                        }
                        Ok::<_, Infallible>(page.into_response())
                    }
                });
                async move {
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                }
            })
        };
        TestServer { addr, stats, task }
    }

    /// `http://ip:port`
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://ip:port{path}`
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// [`TestServer::url`], parsed.
    pub fn parsed_url(&self, path: &str) -> Url {
        url_for(self.addr, path)
    }

    /// Requests served per target (path and query).
    pub fn hits(&self) -> HashMap<String, u32> {
        self.stats.hits.lock().unwrap().clone()
    }

    pub fn hits_of(&self, target: &str) -> u32 {
        let hits = self.stats.hits.lock().unwrap();
        hits.get(target).copied().unwrap_or(0)
    }

    /// Requests served, all targets together.
    pub fn total_hits(&self) -> u32 {
        self.stats.hits.lock().unwrap().values().sum()
    }

    /// TCP connections accepted.
    pub fn connections(&self) -> usize {
        self.stats.connections.load(Ordering::SeqCst)
    }
}

/// A [`TestServer`] on 127.0.0.1 answering every request with `handler`.
pub async fn serve<F>(handler: F) -> TestServer
where
    F: Fn(&Request) -> Page + Send + Sync + 'static,
{
    TestServer::serve_fn(reserve(Ipv4Addr::LOCALHOST), handler).await
}

/// Bind a port on loopback address `ip` now, to serve on later.
pub fn reserve(ip: Ipv4Addr) -> std::net::TcpListener {
    assert!(ip.is_loopback(), "test servers listen on loopback only");
    std::net::TcpListener::bind(SocketAddr::from((ip, 0))).expect("bind test server")
}

/// `http://{addr}{path}`, parsed.
pub fn url_for(addr: SocketAddr, path: &str) -> Url {
    Url::parse(&format!("http://{addr}{path}")).expect("a valid test URL")
}

/// The request's path and query, `/` if it has none.
fn target(req: &Request) -> String {
    req.uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into())
}

fn into_tokio(listener: std::net::TcpListener) -> TcpListener {
    let addr = listener.local_addr().expect("listener address");
    assert!(
        addr.ip().is_loopback(),
        "test servers listen on loopback only, not {addr}"
    );
    listener
        .set_nonblocking(true)
        .expect("non-blocking listener");
    TcpListener::from_std(listener).expect("tokio listener")
}

/// Accept at most [`MAX_CONNECTIONS`] connections, each served by the
/// future `on_connection` makes; aborting the task ends them all.
fn accept_loop<C, Fut>(listener: TcpListener, on_connection: C) -> JoinHandle<()>
where
    C: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        let mut connections = JoinSet::new();
        for _ in 0..MAX_CONNECTIONS {
            match listener.accept().await {
                Ok((stream, _)) => {
                    while connections.try_join_next().is_some() {}
                    connections.spawn(on_connection(stream));
                }
                // Counted against the bound; a short pause so a persistent
                // error (out of descriptors) does not spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
        drop(listener);
        while connections.join_next().await.is_some() {}
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: SocketAddr, target: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn pages_are_served_and_counted() {
        let pages = HashMap::from([("/a?x=1".to_string(), Page::html("<p>a</p>"))]);
        let server = TestServer::start(Ipv4Addr::new(127, 0, 0, 1), pages).await;
        let a = get(server.addr, "/a?x=1").await;
        assert!(a.starts_with("HTTP/1.1 200"), "{a}");
        assert!(a.ends_with("<p>a</p>"), "{a}");
        let missing = get(server.addr, "/b").await;
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        assert_eq!(server.hits_of("/a?x=1"), 1);
        assert_eq!(server.hits_of("/b"), 1);
        assert_eq!(server.total_hits(), 2);
        assert_eq!(server.connections(), 2);
    }

    #[tokio::test]
    async fn dropping_a_server_closes_its_connections() {
        let server = serve(|_| Page::html("x")).await;
        let mut s = TcpStream::connect(server.addr).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), async {
            while server.connections() == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
        drop(server);
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await;
        assert!(matches!(read, Ok(Ok(0) | Err(_))), "{read:?}");
    }

    #[test]
    #[should_panic(expected = "loopback only")]
    fn only_loopback_is_served() {
        reserve(Ipv4Addr::new(10, 0, 0, 1));
    }
}
