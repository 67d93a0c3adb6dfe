//! The fetcher's DNS cache: one per [`HttpFetcher`](super::HttpFetcher), so
//! one per node, shared by all its slaves through hyper-util's
//! `HttpConnector`.
//!
//! * Answers come from `hickory-resolver` with the system configuration
//!   (`/etc/resolv.conf`, `/etc/hosts`), because it reports how long an
//!   answer is valid (the record TTL) where getaddrinfo does not. If no
//!   usable system configuration can be read (no resolv.conf, or one without
//!   a nameserver), lookups go to getaddrinfo (hyper-util's `GaiResolver`)
//!   instead, and those answers are kept for a fixed [`DnsConfig::fallback_ttl`].
//! * An answer is kept for its TTL, clamped to
//!   [`min_ttl`](DnsConfig::min_ttl)..=[`max_ttl`](DnsConfig::max_ttl): a
//!   TTL of 0 must not mean one lookup per URL, and a host that moves is seen
//!   within the hour.
//! * A failure (no such host, no address, server error, no answer within
//!   [`lookup_timeout`](DnsConfig::lookup_timeout)) is kept for
//!   [`negative_ttl`](DnsConfig::negative_ttl), so a dead host is not looked
//!   up again for each of its URLs, and is reported as a [`DnsError`], which
//!   the fetcher turns into [`FetchError::Dns`](super::FetchError::Dns).
//! * At most [`max_entries`](DnsConfig::max_entries) names are kept: when
//!   full, expired entries go first, then the tenth that expires soonest.
//! * Concurrent lookups of one name share one query. The query runs in its
//!   own task, so its answer is cached even if the fetch that asked for it
//!   gave up meanwhile.
//!
//! Names with a dot are looked up as fully qualified (`example.com.`): a
//! crawler's host names are absolute, and the resolv.conf search list would
//! only add queries for names such as `example.com.corp.local`. IP literals
//! never get here: hyper-util connects to them without resolving.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hickory_resolver::TokioResolver;
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};
use tokio::sync::watch;
use tower_service::Service;

/// Settings of a [`DnsCache`].
#[derive(Debug, Clone)]
pub(crate) struct DnsConfig {
    /// Most names kept at once. Default 10,000.
    pub(crate) max_entries: usize,
    /// Shortest time an answer is kept, whatever its TTL. Default 5 s.
    pub(crate) min_ttl: Duration,
    /// Longest time an answer is kept, whatever its TTL. Default 1 h.
    pub(crate) max_ttl: Duration,
    /// How long an answer without a TTL (from getaddrinfo) is kept. Default 5 min.
    pub(crate) fallback_ttl: Duration,
    /// How long a failed lookup is remembered. Default 30 s.
    pub(crate) negative_ttl: Duration,
    /// A lookup with no answer by then fails. Default 8 s.
    pub(crate) lookup_timeout: Duration,
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig {
            max_entries: 10_000,
            min_ttl: Duration::from_secs(5),
            max_ttl: Duration::from_secs(60 * 60),
            fallback_ttl: Duration::from_secs(5 * 60),
            negative_ttl: Duration::from_secs(30),
            lookup_timeout: Duration::from_secs(8),
        }
    }
}

impl DnsConfig {
    /// The defaults, with the lookup bounded to four fifths of the fetch's
    /// connect timeout: a name server that never answers is then reported
    /// (and remembered) as a DNS failure before the connect deadline fires.
    pub(crate) fn for_connect_timeout(connect_timeout: Duration) -> Self {
        DnsConfig {
            lookup_timeout: connect_timeout.mul_f64(0.8),
            ..DnsConfig::default()
        }
    }

    /// How long an answer is kept: its TTL clamped, or the fixed fallback.
    fn positive_ttl(&self, ttl: Option<Duration>) -> Duration {
        match ttl {
            Some(ttl) => ttl.clamp(self.min_ttl, self.max_ttl.max(self.min_ttl)),
            None => self.fallback_ttl,
        }
    }
}

/// What a lookup found: the addresses, and how long they are valid if the
/// resolver says (getaddrinfo does not).
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) addrs: Vec<IpAddr>,
    pub(crate) ttl: Option<Duration>,
}

/// A lookup in flight; it fails with the reason as text.
pub(crate) type LookupFuture = Pin<Box<dyn Future<Output = Result<Answer, String>> + Send>>;

/// Where the cache gets its answers: the system resolver in production, a
/// fake in tests. Any `Fn(&str) -> LookupFuture` is one.
pub(crate) trait Lookup: Send + Sync + 'static {
    fn lookup(&self, host: &str) -> LookupFuture;
}

impl<F> Lookup for F
where
    F: Fn(&str) -> LookupFuture + Send + Sync + 'static,
{
    fn lookup(&self, host: &str) -> LookupFuture {
        self(host)
    }
}

/// A host name that could not be resolved, and why.
#[derive(Debug, Clone)]
pub(crate) struct DnsError {
    host: Arc<str>,
    reason: Arc<str>,
}

impl DnsError {
    pub(crate) fn host(&self) -> &str {
        &self.host
    }

    pub(crate) fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for DnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot resolve host {}: {}", self.host, self.reason)
    }
}

impl std::error::Error for DnsError {}

type Outcome = Result<Arc<[IpAddr]>, Arc<str>>;

#[derive(Debug)]
struct Entry {
    outcome: Outcome,
    expires: Instant,
}

#[derive(Default)]
struct State {
    entries: HashMap<Arc<str>, Entry>,
    /// Lookups under way; their answer arrives as `Some`.
    pending: HashMap<Arc<str>, watch::Receiver<Option<Outcome>>>,
}

impl State {
    /// Stores an entry, making room first if the cache is full.
    fn insert(&mut self, host: Arc<str>, entry: Entry, max: usize, now: Instant) {
        let max = max.max(1);
        if !self.entries.contains_key(&host) && self.entries.len() >= max {
            self.entries.retain(|_, e| e.expires > now);
            if self.entries.len() >= max {
                // Evict a tenth at a time, the soonest to expire first, so a
                // full cache is not sorted again on every insert.
                let keep = max - (max / 10).max(1);
                let mut by_expiry: Vec<(Instant, Arc<str>)> = self
                    .entries
                    .iter()
                    .map(|(k, e)| (e.expires, k.clone()))
                    .collect();
                by_expiry.sort_unstable_by_key(|(expires, _)| *expires);
                let evict = by_expiry.len() - keep;
                for (_, k) in by_expiry.into_iter().take(evict) {
                    self.entries.remove(&k);
                }
            }
        }
        self.entries.insert(host, entry);
    }
}

struct Inner {
    lookup: Box<dyn Lookup>,
    cfg: DnsConfig,
    state: Mutex<State>,
}

/// The caching resolver handed to hyper-util's `HttpConnector`. Clones share
/// one cache.
#[derive(Clone)]
pub(crate) struct DnsCache {
    inner: Arc<Inner>,
}

impl fmt::Debug for DnsCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DnsCache")
            .field("cfg", &self.inner.cfg)
            .field("entries", &self.len())
            .finish_non_exhaustive()
    }
}

impl DnsCache {
    /// A cache over the system's resolver (see the module doc).
    pub(crate) fn system(cfg: DnsConfig) -> Self {
        DnsCache::with_lookup(cfg, SystemLookup::default())
    }

    pub(crate) fn with_lookup(cfg: DnsConfig, lookup: impl Lookup) -> Self {
        DnsCache {
            inner: Arc::new(Inner {
                lookup: Box::new(lookup),
                cfg,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Names cached, expired ones included until they are evicted.
    pub(crate) fn len(&self) -> usize {
        self.state().entries.len()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing panics while holding the lock, but a poisoned cache is
        // still a usable cache.
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The addresses of `host`, from the cache while they are valid. Needs
    /// a tokio runtime (the lookup runs in a task of its own).
    pub(crate) async fn resolve(&self, host: &str) -> Result<Arc<[IpAddr]>, DnsError> {
        let key: Arc<str> = host.to_ascii_lowercase().into();
        let (mut answer, start) = {
            let mut state = self.state();
            if let Some(entry) = state.entries.get(&key)
                && entry.expires > Instant::now()
            {
                return entry.outcome.clone().map_err(|reason| DnsError {
                    host: key.clone(),
                    reason,
                });
            }
            match state.pending.get(&key) {
                Some(rx) => (rx.clone(), None),
                None => {
                    let (tx, rx) = watch::channel(None);
                    state.pending.insert(key.clone(), rx.clone());
                    (rx, Some(tx))
                }
            }
        };
        if let Some(tx) = start {
            self.spawn_lookup(key.clone(), tx);
        }
        let outcome = match answer.wait_for(Option::is_some).await {
            Ok(outcome) => outcome.clone().unwrap_or_else(|| Err("no answer".into())),
            // The lookup task was dropped unfinished (its runtime shut down);
            // its guard has already cleared the pending slot.
            Err(_) => Err("lookup abandoned".into()),
        };
        outcome.map_err(|reason| DnsError { host: key, reason })
    }

    fn spawn_lookup(&self, host: Arc<str>, tx: watch::Sender<Option<Outcome>>) {
        let mut guard = PendingGuard {
            cache: self.clone(),
            host,
            tx: Some(tx),
        };
        let query = fully_qualified(&guard.host);
        let lookup = self.inner.lookup.lookup(&query);
        let limit = self.inner.cfg.lookup_timeout;
        tokio::spawn(async move {
            let outcome = match tokio::time::timeout(limit, lookup).await {
                Ok(Ok(answer)) if answer.addrs.is_empty() => Err("no addresses".to_string()),
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(reason)) => Err(reason),
                Err(_) => Err(format!("no answer within {limit:?}")),
            };
            guard.finish(outcome);
        });
    }
}

/// Owns a pending lookup: stores its outcome when it ends, and clears the
/// pending slot if the task is dropped first, so the name is not wedged.
struct PendingGuard {
    cache: DnsCache,
    host: Arc<str>,
    tx: Option<watch::Sender<Option<Outcome>>>,
}

impl PendingGuard {
    fn finish(&mut self, outcome: Result<Answer, String>) {
        let cfg = &self.cache.inner.cfg;
        let now = Instant::now();
        let (outcome, ttl): (Outcome, Duration) = match outcome {
            Ok(answer) => (Ok(answer.addrs.into()), cfg.positive_ttl(answer.ttl)),
            Err(reason) => (Err(reason.into()), cfg.negative_ttl),
        };
        tracing::debug!(host = %self.host, ?outcome, ?ttl, "DNS lookup");
        {
            let mut state = self.cache.state();
            state.pending.remove(&self.host);
            let entry = Entry {
                outcome: outcome.clone(),
                expires: now + ttl,
            };
            state.insert(self.host.clone(), entry, cfg.max_entries, now);
        }
        if let Some(tx) = self.tx.take() {
            // No receiver left is fine: the answer is cached.
            let _ = tx.send(Some(outcome));
        }
    }
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        if self.tx.is_some() {
            self.cache.state().pending.remove(&self.host);
        }
    }
}

/// `example.com` becomes `example.com.`; single labels (`localhost`, names
/// from /etc/hosts) and names already ending in a dot stay as they are.
fn fully_qualified(host: &str) -> String {
    if host.contains('.') && !host.ends_with('.') {
        format!("{host}.")
    } else {
        host.to_string()
    }
}

impl Service<Name> for DnsCache {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = DnsError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, DnsError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), DnsError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let cache = self.clone();
        Box::pin(async move {
            let ips = cache.resolve(name.as_str()).await?;
            // hyper-util puts the URL's port in.
            let addrs: Vec<SocketAddr> = ips.iter().map(|ip| SocketAddr::new(*ip, 0)).collect();
            Ok(addrs.into_iter())
        })
    }
}

/// The system's resolver: hickory over the system configuration, or
/// getaddrinfo when that cannot be read. Chosen at the first lookup, inside
/// the runtime that hickory's background tasks will run on.
#[derive(Default)]
struct SystemLookup {
    backend: OnceLock<Backend>,
}

#[derive(Clone)]
enum Backend {
    Hickory(Arc<TokioResolver>),
    Gai(GaiResolver),
}

impl Backend {
    fn from_system() -> Backend {
        let built = TokioResolver::builder_tokio().and_then(|builder| builder.build());
        match built {
            Ok(resolver) => Backend::Hickory(Arc::new(resolver)),
            Err(e) => {
                tracing::info!(
                    "no usable DNS configuration ({e}); resolving through getaddrinfo, \
                     whose answers carry no TTL"
                );
                Backend::Gai(GaiResolver::new())
            }
        }
    }
}

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> LookupFuture {
        let backend = self.backend.get_or_init(Backend::from_system).clone();
        let host = host.to_string();
        Box::pin(async move {
            match backend {
                Backend::Hickory(resolver) => match resolver.lookup_ip(host.as_str()).await {
                    Ok(found) => {
                        let ttl = found
                            .valid_until()
                            .saturating_duration_since(Instant::now());
                        Ok(Answer {
                            addrs: found.iter().collect(),
                            ttl: Some(ttl),
                        })
                    }
                    Err(e) if e.is_nx_domain() => Err("no such host (NXDOMAIN)".to_string()),
                    Err(e) if e.is_no_records_found() => Err("no address records".to_string()),
                    Err(e) => Err(e.to_string()),
                },
                Backend::Gai(mut gai) => {
                    let name =
                        Name::from_str(host.trim_end_matches('.')).map_err(|e| e.to_string())?;
                    let found = gai.call(name).await.map_err(|e| e.to_string())?;
                    Ok(Answer {
                        addrs: found.map(|a| a.ip()).collect(),
                        ttl: None,
                    })
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    //! No test here sends a DNS query: the cache logic runs over fake
    //! lookups, and the real resolver is only asked for `localhost` (answered
    //! locally) and a `.invalid` name (answered negatively without a query,
    //! RFC 6761). Servers are loopback listeners that take one connection.

    use super::*;
    use crate::fetch::{FetchConfig, FetchError, HttpFetcher};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use url::Url;

    /// Answers `127.0.0.1` with `ttl` after `delay`, or fails for names
    /// starting with `dead.`; records the names it was asked for.
    fn fake(ttl: Option<Duration>, delay: Duration) -> (impl Lookup, Arc<Mutex<Vec<String>>>) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let lookup = move |host: &str| -> LookupFuture {
            log.lock().unwrap().push(host.to_string());
            let host = host.to_string();
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                if host.starts_with("dead.") {
                    Err("no such host (NXDOMAIN)".to_string())
                } else {
                    Ok(Answer {
                        addrs: vec![IpAddr::from([127, 0, 0, 1])],
                        ttl,
                    })
                }
            })
        };
        (lookup, asked)
    }

    fn calls(asked: &Arc<Mutex<Vec<String>>>) -> usize {
        asked.lock().unwrap().len()
    }

    fn quick() -> DnsConfig {
        DnsConfig {
            min_ttl: Duration::ZERO,
            lookup_timeout: Duration::from_secs(2),
            ..DnsConfig::default()
        }
    }

    fn fetch_config() -> FetchConfig {
        FetchConfig {
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(2),
            total_timeout: Duration::from_secs(10),
            ..FetchConfig::default()
        }
    }

    /// A loopback server that answers one request with 200 and `body`, then
    /// closes; it waits at most 10 s for its one connection.
    async fn one_shot(body: &'static str) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let accepted = tokio::time::timeout(Duration::from_secs(10), listener.accept()).await;
            let Ok(Ok((mut stream, _))) = accepted else {
                return;
            };
            let mut head = Vec::new();
            let mut chunk = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&chunk[..n]),
                }
            }
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
        addr
    }

    #[tokio::test]
    async fn second_lookup_within_ttl_is_cached() {
        let (lookup, asked) = fake(Some(Duration::from_secs(60)), Duration::ZERO);
        let cache = DnsCache::with_lookup(quick(), lookup);
        let first = cache.resolve("example.com").await.unwrap();
        assert_eq!(&first[..], &[IpAddr::from([127, 0, 0, 1])]);
        // Same name, other case: one entry.
        let again = cache.resolve("Example.COM").await.unwrap();
        assert_eq!(first, again);
        assert_eq!(calls(&asked), 1);
        // Dotted names are asked for fully qualified.
        assert_eq!(asked.lock().unwrap()[0], "example.com.");
        assert_eq!(cache.len(), 1);
    }

    #[tokio::test]
    async fn expired_entry_is_looked_up_again() {
        let (lookup, asked) = fake(Some(Duration::from_millis(50)), Duration::ZERO);
        let cache = DnsCache::with_lookup(quick(), lookup);
        cache.resolve("example.com").await.unwrap();
        cache.resolve("example.com").await.unwrap();
        assert_eq!(calls(&asked), 1);
        tokio::time::sleep(Duration::from_millis(120)).await;
        cache.resolve("example.com").await.unwrap();
        assert_eq!(calls(&asked), 2);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn ttl_is_clamped_and_missing_ttl_uses_the_fallback() {
        let cfg = DnsConfig::default();
        assert_eq!(cfg.positive_ttl(Some(Duration::ZERO)), cfg.min_ttl);
        assert_eq!(
            cfg.positive_ttl(Some(Duration::from_secs(86_400))),
            cfg.max_ttl
        );
        assert_eq!(
            cfg.positive_ttl(Some(Duration::from_secs(60))),
            Duration::from_secs(60)
        );
        assert_eq!(cfg.positive_ttl(None), cfg.fallback_ttl);
        let dns = DnsConfig::for_connect_timeout(Duration::from_secs(10));
        assert_eq!(dns.lookup_timeout, Duration::from_secs(8));
    }

    #[tokio::test]
    async fn zero_ttl_is_kept_for_the_minimum() {
        let (lookup, asked) = fake(Some(Duration::ZERO), Duration::ZERO);
        let cache = DnsCache::with_lookup(DnsConfig::default(), lookup);
        cache.resolve("example.com").await.unwrap();
        cache.resolve("example.com").await.unwrap();
        assert_eq!(calls(&asked), 1);
    }

    #[tokio::test]
    async fn cache_stays_within_its_bound() {
        let (lookup, asked) = fake(Some(Duration::from_secs(60)), Duration::ZERO);
        let cfg = DnsConfig {
            max_entries: 10,
            ..quick()
        };
        let cache = DnsCache::with_lookup(cfg, lookup);
        for i in 0..55 {
            cache.resolve(&format!("host{i}.example")).await.unwrap();
            assert!(cache.len() <= 10, "{} entries after {i}", cache.len());
        }
        assert_eq!(calls(&asked), 55);
        // The newest name is still cached.
        cache.resolve("host54.example").await.unwrap();
        assert_eq!(calls(&asked), 55);
    }

    #[tokio::test]
    async fn expired_entries_are_evicted_first() {
        let (short, _) = fake(Some(Duration::from_millis(20)), Duration::ZERO);
        let cfg = DnsConfig {
            max_entries: 4,
            ..quick()
        };
        let cache = DnsCache::with_lookup(cfg, short);
        for i in 0..4 {
            cache.resolve(&format!("old{i}.example")).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        cache.resolve("new.example").await.unwrap();
        // All four expired entries made way, not just one.
        assert_eq!(cache.len(), 1);
    }

    #[tokio::test]
    async fn failures_are_negatively_cached_and_reported_with_the_name() {
        let (lookup, asked) = fake(Some(Duration::from_secs(60)), Duration::ZERO);
        let cfg = DnsConfig {
            negative_ttl: Duration::from_millis(100),
            ..quick()
        };
        let cache = DnsCache::with_lookup(cfg, lookup);
        let err = cache.resolve("dead.example").await.unwrap_err();
        assert_eq!(err.host(), "dead.example");
        assert_eq!(
            err.to_string(),
            "cannot resolve host dead.example: no such host (NXDOMAIN)"
        );
        cache.resolve("dead.example").await.unwrap_err();
        assert_eq!(calls(&asked), 1);
        tokio::time::sleep(Duration::from_millis(150)).await;
        cache.resolve("dead.example").await.unwrap_err();
        assert_eq!(calls(&asked), 2);
    }

    #[tokio::test]
    async fn concurrent_lookups_of_a_name_share_one_query() {
        let (lookup, asked) = fake(Some(Duration::from_secs(60)), Duration::from_millis(100));
        let cache = DnsCache::with_lookup(quick(), lookup);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..20 {
            let cache = cache.clone();
            tasks.spawn(async move { cache.resolve("example.com").await });
        }
        while let Some(res) = tasks.join_next().await {
            res.unwrap().unwrap();
        }
        assert_eq!(calls(&asked), 1);
    }

    #[tokio::test]
    async fn a_lookup_without_answer_times_out_as_a_dns_failure() {
        let (lookup, asked) = fake(None, Duration::from_secs(3600));
        let cfg = DnsConfig {
            lookup_timeout: Duration::from_millis(100),
            ..quick()
        };
        let cache = DnsCache::with_lookup(cfg, lookup);
        let started = Instant::now();
        let err = cache.resolve("slow.example").await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(err.reason(), "no answer within 100ms");
        // Remembered: the next URL of that host does not wait again.
        let started = Instant::now();
        cache.resolve("slow.example").await.unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(50));
        assert_eq!(calls(&asked), 1);
    }

    #[tokio::test]
    async fn an_empty_answer_is_a_failure() {
        let lookup = |_: &str| -> LookupFuture {
            Box::pin(async {
                Ok(Answer {
                    addrs: Vec::new(),
                    ttl: None,
                })
            })
        };
        let cache = DnsCache::with_lookup(quick(), lookup);
        let err = cache.resolve("empty.example").await.unwrap_err();
        assert_eq!(err.reason(), "no addresses");
    }

    #[test]
    fn an_abandoned_lookup_does_not_wedge_the_name() {
        // The first lookup never ends and its runtime is dropped under it;
        // the next one, on another runtime, must run rather than wait forever.
        let asked = Arc::new(Mutex::new(0usize));
        let count = asked.clone();
        let lookup = move |_: &str| -> LookupFuture {
            let first = {
                let mut n = count.lock().unwrap();
                *n += 1;
                *n == 1
            };
            Box::pin(async move {
                if first {
                    std::future::pending::<()>().await;
                }
                Ok(Answer {
                    addrs: vec![IpAddr::from([127, 0, 0, 1])],
                    ttl: None,
                })
            })
        };
        let cache = DnsCache::with_lookup(quick(), lookup);
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
        };
        let rt = runtime();
        rt.block_on(async {
            let c = cache.clone();
            tokio::spawn(async move { c.resolve("stuck.example").await });
            // Until the spawned lookup is under way (a bounded wait).
            for _ in 0..1_000 {
                if !cache.state().pending.is_empty() {
                    break;
                }
                tokio::task::yield_now().await;
            }
        });
        assert_eq!(cache.state().pending.len(), 1);
        drop(rt);
        assert!(cache.state().pending.is_empty());
        runtime().block_on(async {
            let res = tokio::time::timeout(Duration::from_secs(2), cache.resolve("stuck.example"));
            res.await.unwrap().unwrap();
        });
        assert_eq!(*asked.lock().unwrap(), 2);
    }

    #[tokio::test]
    async fn a_fetch_of_an_unresolvable_host_is_a_dns_error() {
        let (lookup, asked) = fake(Some(Duration::from_secs(60)), Duration::ZERO);
        let dns = DnsCache::with_lookup(quick(), lookup);
        let fetcher = HttpFetcher::with_dns(fetch_config(), dns).unwrap();
        let url = Url::parse("http://dead.example/page").unwrap();
        let err = fetcher.get(&url).await.unwrap_err();
        match &err {
            FetchError::Dns(msg) => assert_eq!(msg, "dead.example: no such host (NXDOMAIN)"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            err.to_string(),
            "cannot resolve host dead.example: no such host (NXDOMAIN)"
        );
        assert!(err.is_retryable());
        // Another URL of the same host: the failure is remembered.
        let url = Url::parse("https://dead.example/other").unwrap();
        let err = fetcher.get(&url).await.unwrap_err();
        assert!(matches!(err, FetchError::Dns(_)), "{err:?}");
        assert_eq!(calls(&asked), 1);
    }

    #[tokio::test]
    async fn ip_literals_are_not_resolved() {
        let (lookup, asked) = fake(Some(Duration::from_secs(60)), Duration::ZERO);
        let dns = DnsCache::with_lookup(quick(), lookup);
        let fetcher = HttpFetcher::with_dns(fetch_config(), dns).unwrap();
        let addr = one_shot("literal").await;
        let url = Url::parse(&format!("http://{addr}/")).unwrap();
        let resp = fetcher.get(&url).await.unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(&resp.body[..], b"literal");
        assert_eq!(calls(&asked), 0);
    }

    #[tokio::test]
    async fn localhost_resolves_to_loopback_through_the_system_resolver() {
        let cache = DnsCache::system(DnsConfig::default());
        let addrs = cache.resolve("localhost").await.unwrap();
        assert!(!addrs.is_empty());
        assert!(addrs.iter().all(IpAddr::is_loopback), "{addrs:?}");
    }

    #[tokio::test]
    async fn the_getaddrinfo_fallback_resolves_localhost() {
        let lookup = SystemLookup {
            backend: OnceLock::from(Backend::Gai(GaiResolver::new())),
        };
        let cache = DnsCache::with_lookup(DnsConfig::default(), lookup);
        let addrs = cache.resolve("localhost").await.unwrap();
        assert!(!addrs.is_empty());
        assert!(addrs.iter().all(IpAddr::is_loopback), "{addrs:?}");
    }

    #[tokio::test]
    async fn a_fetch_of_localhost_goes_through_the_cache() {
        let fetcher = HttpFetcher::new(fetch_config()).unwrap();
        let addr = one_shot("hello").await;
        let url = Url::parse(&format!("http://localhost:{}/", addr.port())).unwrap();
        let resp = fetcher.get(&url).await.unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(&resp.body[..], b"hello");
    }

    #[tokio::test]
    async fn an_invalid_name_is_a_dns_error_within_the_connect_timeout() {
        let fetcher = HttpFetcher::new(fetch_config()).unwrap();
        let started = Instant::now();
        let url = Url::parse("http://no-such-host.invalid/").unwrap();
        let err = fetcher.get(&url).await.unwrap_err();
        assert!(started.elapsed() < fetch_config().connect_timeout);
        match &err {
            FetchError::Dns(msg) => assert!(msg.starts_with("no-such-host.invalid: "), "{msg}"),
            other => panic!("{other:?}"),
        }
        assert!(err.is_retryable());
    }
}
