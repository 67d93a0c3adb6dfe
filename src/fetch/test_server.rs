//! Loopback servers for the tests of `fetch` and of `robots`, and a fetcher
//! with short timeouts to query them. Each accept loop ends after a fixed
//! number of connections, and all of it is dropped with the test's runtime,
//! so no test can hang on a server.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use url::Url;

use super::{FetchConfig, HttpFetcher};

const MAX_CONNECTIONS: usize = 512;

/// Timeouts short enough that a failing test ends quickly.
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

pub(crate) fn response(
    status: u16,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Response<Full<Bytes>> {
    let mut b = Response::builder().status(status);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(Full::new(Bytes::from(body))).unwrap()
}

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
