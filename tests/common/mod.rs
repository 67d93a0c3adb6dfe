//! Local test webs: real HTTP servers on distinct 127.x.y.z addresses that
//! count every request they serve.
#![allow(dead_code, unreachable_pub)]

pub mod backend;
pub mod web;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// One response.
#[derive(Clone, Debug)]
pub struct Page {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub delay: Duration,
}

impl Page {
    pub fn html(body: impl Into<String>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/html; charset=utf-8".into())],
            body: body.into().into_bytes(),
            delay: Duration::ZERO,
        }
    }

    pub fn text(content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    pub fn redirect(status: u16, location: &str) -> Self {
        Self {
            status,
            headers: vec![("location".into(), location.into())],
            body: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// HTML page with a title and links.
pub fn page_with_links(title: &str, links: &[&str]) -> Page {
    let mut html =
        format!("<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>");
    for l in links {
        html.push_str(&format!("<p><a href=\"{l}\">{l}</a></p>"));
    }
    html.push_str("</body></html>");
    Page::html(html)
}

/// A running server; stops when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    hits: Arc<Mutex<HashMap<String, u32>>>,
    task: JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// Serve `pages` (keyed by path and query, e.g. `/a?x=1`) on `ip`, port chosen by the OS.
    pub async fn start(ip: Ipv4Addr, pages: HashMap<String, Page>) -> TestServer {
        Self::serve(reserve(ip), pages).await
    }

    /// As [`TestServer::start`], answering any other target with `fallback`
    /// instead of a 404 (a soft-404 site).
    pub async fn start_with_fallback(
        ip: Ipv4Addr,
        pages: HashMap<String, Page>,
        fallback: Page,
    ) -> TestServer {
        Self::serve_with(reserve(ip), pages, Some(fallback)).await
    }

    /// Serve on a listener from [`reserve`] (so pages can name its port).
    pub async fn serve(
        listener: std::net::TcpListener,
        pages: HashMap<String, Page>,
    ) -> TestServer {
        Self::serve_with(listener, pages, None).await
    }

    async fn serve_with(
        listener: std::net::TcpListener,
        pages: HashMap<String, Page>,
        fallback: Option<Page>,
    ) -> TestServer {
        let fallback =
            Arc::new(fallback.unwrap_or_else(|| Page::text("text/plain", "not found").status(404)));
        listener.set_nonblocking(true).unwrap();
        let listener = TcpListener::from_std(listener).expect("tokio listener");
        let addr = listener.local_addr().unwrap();
        let hits: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
        let pages = Arc::new(pages);
        let task = {
            let hits = hits.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let pages = pages.clone();
                    let hits = hits.clone();
                    let fallback = fallback.clone();
                    tokio::spawn(async move {
                        let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                            let pages = pages.clone();
                            let hits = hits.clone();
                            let fallback = fallback.clone();
                            async move {
                                let target = req
                                    .uri()
                                    .path_and_query()
                                    .map(|p| p.as_str().to_string())
                                    .unwrap_or_else(|| "/".into());
                                *hits.lock().unwrap().entry(target.clone()).or_default() += 1;
                                let page = pages
                                    .get(&target)
                                    .cloned()
                                    .unwrap_or_else(|| (*fallback).clone());
                                if !page.delay.is_zero() {
                                    tokio::time::sleep(page.delay).await;
                                }
                                let mut resp = Response::builder().status(page.status);
                                for (k, v) in &page.headers {
                                    resp = resp.header(k, v);
                                }
                                Ok::<_, std::convert::Infallible>(
                                    resp.body(Full::new(Bytes::from(page.body))).unwrap(),
                                )
                            }
                        });
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                    });
                }
            })
        };
        TestServer { addr, hits, task }
    }

    /// `http://ip:port`
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Requests served per target (path and query).
    pub fn hits(&self) -> HashMap<String, u32> {
        self.hits.lock().unwrap().clone()
    }

    pub fn hits_of(&self, target: &str) -> u32 {
        self.hits.lock().unwrap().get(target).copied().unwrap_or(0)
    }

    pub fn total_hits(&self) -> u32 {
        self.hits.lock().unwrap().values().sum()
    }
}

/// Bind a port on `ip` now, to serve on later.
pub fn reserve(ip: Ipv4Addr) -> std::net::TcpListener {
    std::net::TcpListener::bind(SocketAddr::from((ip, 0))).expect("bind test server")
}

/// Poll `cond` until it holds or `timeout` passes.
pub async fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}
