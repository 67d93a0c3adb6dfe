//! A server for the synthetic web: every host on its own loopback address,
//! pages from memory (trap pages computed from their path, and every page
//! on a streamed web), keep-alive, a
//! count of requests per normalized URL (as a real server resolves
//! `/p/./1` and `/%70/1` to one resource, so must the count of repeated
//! fetches), what each request was (real page, trap page, other), and when
//! every real page had been fetched.

use crate::web::{Class, Response, Web};
use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::net::TcpListener;
use web_crawler::normalize::{NormalizeOptions, normalize};

/// Requests served, per host and normalized path, with their class.
pub struct Hits {
    /// The web's static pages.
    known: HashMap<(usize, String), (AtomicU32, Class)>,
    /// Everything else asked for: trap pages and 404s.
    other: Mutex<HashMap<(usize, String), (u32, Class)>>,
    /// Requests of any kind.
    requests: AtomicU64,
    /// Real pages on the web, and how many have been fetched.
    real_total: usize,
    real_reached: AtomicUsize,
    /// When the last real page was first fetched.
    all_real_at: Mutex<Option<Instant>>,
    /// When the last request of any kind was served.
    last_at: Mutex<Option<Instant>>,
}

impl Hits {
    /// Counters for every static page of `web`, all at zero.
    pub fn new(web: &Web) -> Hits {
        let mut known = HashMap::new();
        for (h, path) in web.static_paths() {
            let class = web.classify(h, &path);
            known.insert((h, path), (AtomicU32::new(0), class));
        }
        let real_total = known.values().filter(|(_, c)| *c == Class::Real).count();
        Hits {
            known,
            other: Mutex::default(),
            requests: AtomicU64::new(0),
            real_total,
            real_reached: AtomicUsize::new(0),
            all_real_at: Mutex::default(),
            last_at: Mutex::default(),
        }
    }

    pub fn record(&self, host: usize, path: &str, class: Class) {
        *self.last_at.lock().unwrap() = Some(Instant::now());
        self.requests.fetch_add(1, Ordering::Relaxed);
        match self.known.get(&(host, path.to_string())) {
            Some((n, class)) => {
                let before = n.fetch_add(1, Ordering::Relaxed);
                if before == 0
                    && *class == Class::Real
                    && self.real_reached.fetch_add(1, Ordering::Relaxed) + 1 == self.real_total
                {
                    *self.all_real_at.lock().unwrap() = Some(Instant::now());
                }
            }
            None => {
                self.other
                    .lock()
                    .unwrap()
                    .entry((host, path.to_string()))
                    .or_insert((0, class))
                    .0 += 1;
            }
        }
    }

    pub fn of(&self, host: usize, path: &str) -> u32 {
        self.known
            .get(&(host, path.to_string()))
            .map(|(n, _)| n.load(Ordering::Relaxed))
            .unwrap_or_else(|| {
                self.other
                    .lock()
                    .unwrap()
                    .get(&(host, path.to_string()))
                    .map_or(0, |(n, _)| *n)
            })
    }

    /// Every (host, path) asked for, with its count and class.
    pub fn all(&self) -> Vec<((usize, String), u32, Class)> {
        let mut out: Vec<_> = self
            .known
            .iter()
            .map(|(k, (n, c))| (k.clone(), n.load(Ordering::Relaxed), *c))
            .filter(|(_, n, _)| *n > 0)
            .collect();
        out.extend(
            self.other
                .lock()
                .unwrap()
                .iter()
                .map(|(k, (n, c))| (k.clone(), *n, *c)),
        );
        out
    }

    /// Requests served since the last reset.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Real pages fetched at least once since the last reset.
    pub fn real_reached(&self) -> usize {
        self.real_reached.load(Ordering::Relaxed)
    }

    /// The first time every real page had been fetched since the last reset.
    pub fn all_real_at(&self) -> Option<Instant> {
        *self.all_real_at.lock().unwrap()
    }

    /// When the last request since the last reset was served.
    pub fn last_at(&self) -> Option<Instant> {
        *self.last_at.lock().unwrap()
    }

    pub fn reset(&self) {
        for (n, _) in self.known.values() {
            n.store(0, Ordering::Relaxed);
        }
        self.other.lock().unwrap().clear();
        self.requests.store(0, Ordering::Relaxed);
        self.real_reached.store(0, Ordering::Relaxed);
        *self.all_real_at.lock().unwrap() = None;
        *self.last_at.lock().unwrap() = None;
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
        let hits = Arc::new(Hits::new(&web));
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
                            let (class, page) = web.serve(h, &path);
                            hits.record(h, &path, class);
                            let resp = respond(page.as_ref());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::Preset;

    fn web() -> Web {
        let preset = Preset {
            hosts: 16,
            pages: 20,
            traps: true,
            text: false,
            shared: false,
            streamed: false,
        };
        Web::generate(preset, 8080, 42)
    }

    fn get(web: &Web, hits: &Hits, h: usize, target: &str) {
        let path = resolve(target);
        let (class, _) = web.serve(h, &path);
        hits.record(h, &path, class);
    }

    #[test]
    fn trap_urls_resolve_as_they_are() {
        assert_eq!(
            resolve("/s/3;jsessionid=AB?sid=cd"),
            "/s/3;jsessionid=AB?sid=cd"
        );
        assert_eq!(resolve("/shop?size=m&color=red"), "/shop?size=m&color=red");
        assert_eq!(resolve("/docs/guide/./guide/"), "/docs/guide/guide/");
        assert_eq!(resolve("/%70/1#top"), "/p/1");
    }

    #[test]
    fn classes_counted_and_all_real_time_taken() {
        let web = web();
        let hits = Hits::new(&web);
        let canonical = web.canonical();
        assert_eq!(hits.real_total, canonical.len());
        let (last, rest) = canonical.split_last().unwrap();
        for (h, p) in rest {
            get(&web, &hits, *h, p);
        }
        get(&web, &hits, rest[0].0, &rest[0].1);
        get(&web, &hits, 5, "/cal/2024/06/");
        get(&web, &hits, 5, "/cal/2024/06/");
        get(&web, &hits, 15, "/shop?color=red");
        get(&web, &hits, 3, "/missing/1");
        get(&web, &hits, 3, "/robots.txt");
        assert!(hits.all_real_at().is_none());
        let before = Instant::now();
        get(&web, &hits, last.0, &last.1);
        assert!(hits.all_real_at().is_some_and(|t| t >= before));
        let all = hits.all();
        let sum = |class: Class| -> u32 {
            all.iter()
                .filter(|(_, _, c)| *c == class)
                .map(|(_, n, _)| n)
                .sum()
        };
        assert_eq!(sum(Class::Real) as usize, canonical.len() + 1);
        assert_eq!(sum(Class::Trap), 3);
        assert_eq!(sum(Class::Other), 2);
        assert_eq!(hits.requests(), canonical.len() as u64 + 6);
        assert_eq!(hits.of(5, "/cal/2024/06/"), 2);
        hits.reset();
        assert_eq!(hits.requests(), 0);
        assert!(hits.all_real_at().is_none());
        assert!(hits.all().is_empty());
        for (h, p) in &canonical {
            get(&web, &hits, *h, p);
        }
        assert!(hits.all_real_at().is_some());
    }
}
