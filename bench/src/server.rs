//! A static server for the synthetic web: every host on its own loopback
//! address, pages from memory, keep-alive, and a count of requests per
//! normalized URL (as a real server resolves `/p/./1` and `/%70/1` to one
//! resource, so must the count of repeated fetches).

use crate::web::{Response, Web};
use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use web_crawler::normalize::{NormalizeOptions, normalize};

/// Requests served, per host and normalized path.
#[derive(Default)]
pub struct Hits {
    known: HashMap<(usize, String), AtomicU32>,
    other: Mutex<HashMap<(usize, String), u32>>,
}

impl Hits {
    fn record(&self, host: usize, path: &str) {
        match self.known.get(&(host, path.to_string())) {
            Some(n) => {
                n.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                *self
                    .other
                    .lock()
                    .unwrap()
                    .entry((host, path.to_string()))
                    .or_default() += 1;
            }
        }
    }

    pub fn of(&self, host: usize, path: &str) -> u32 {
        self.known
            .get(&(host, path.to_string()))
            .map(|n| n.load(Ordering::Relaxed))
            .unwrap_or_else(|| {
                self.other
                    .lock()
                    .unwrap()
                    .get(&(host, path.to_string()))
                    .copied()
                    .unwrap_or(0)
            })
    }

    /// Every (host, path) with its count.
    pub fn all(&self) -> Vec<((usize, String), u32)> {
        let mut out: Vec<_> = self
            .known
            .iter()
            .map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        out.extend(
            self.other
                .lock()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), *v)),
        );
        out
    }

    pub fn reset(&self) {
        for n in self.known.values() {
            n.store(0, Ordering::Relaxed);
        }
        self.other.lock().unwrap().clear();
    }
}

/// The request target resolved as a server would: dot segments removed,
/// unreserved percent-encodings decoded, fragment and empty query dropped.
fn resolve(target: &str) -> String {
    match normalize(&format!("http://h{target}"), &NormalizeOptions::default()) {
        Ok(url) => match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        },
        Err(_) => target.to_string(),
    }
}

pub struct Server {
    pub hits: Arc<Hits>,
}

impl Server {
    /// Serve `web` on every host address; returns once all are listening.
    pub async fn start(web: Arc<Web>) -> std::io::Result<Server> {
        let mut known = HashMap::new();
        for (h, site) in web.pages.iter().enumerate() {
            for path in site.keys() {
                known.insert((h, path.clone()), AtomicU32::new(0));
            }
        }
        let hits = Arc::new(Hits {
            known,
            other: Mutex::default(),
        });
        for (h, ip) in web.ips.iter().enumerate() {
            let listener = TcpListener::bind(SocketAddr::from((*ip, web.port))).await?;
            let web = web.clone();
            let hits = hits.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let web = web.clone();
                    let hits = hits.clone();
                    tokio::spawn(async move {
                        let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                            let target = req
                                .uri()
                                .path_and_query()
                                .map_or("/".to_string(), |p| p.as_str().to_string());
                            let path = resolve(&target);
                            hits.record(h, &path);
                            let resp = respond(web.pages[h].get(&path));
                            async move { Ok::<_, std::convert::Infallible>(resp) }
                        });
                        let _ = http1::Builder::new()
                            .keep_alive(true)
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                    });
                }
            });
        }
        Ok(Server { hits })
    }
}

fn respond(page: Option<&Response>) -> hyper::Response<Full<Bytes>> {
    let Some(page) = page else {
        return hyper::Response::builder()
            .status(404)
            .header("content-type", "text/plain")
            .body(Full::new(Bytes::from_static(b"not found")))
            .unwrap();
    };
    let mut b = hyper::Response::builder()
        .status(page.status)
        .header("content-type", page.content_type)
        .header("server", "bench-static");
    if let Some(location) = &page.location {
        b = b.header("location", location);
    }
    b.body(Full::new(page.body.clone())).unwrap()
}
