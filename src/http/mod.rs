//! The node's HTTP face (`--http ADDR`): a JSON API for scripts and a web
//! page for browsers, served from the binary itself.
//!
//! Every request goes to the cluster's control actor through the same
//! [`ControlClient`] the console and the CLI's remote commands use, as one
//! [`ControlRequest`](web_crawler_actors::ControlRequest): no rule is
//! implemented here twice. A refusal answers
//! `{"error": {"code", "message"}}` with the status its code has
//! ([`problem::status_of`]).
//!
//! Safe by default: it binds where it is told (the binary's default is
//! loopback), takes writes (`POST`, `PUT`) only with the bearer token it
//! was given (none: no writes), answers no cross-origin browser unless
//! told which origins, caps bodies, times out slow clients, and bounds its
//! connections and the requests it serves at once.

mod api;
pub mod body;
pub mod problem;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use problem::ApiError;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use web_crawler_actors::{ControlClient, RefusalCode};

/// How the HTTP listener is bounded.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Limits {
    /// Connections open at once; past it, new ones wait to be accepted.
    pub connections: usize,
    /// Requests served at once; past it, `429 too_many_requests`.
    pub in_flight: usize,
    /// The largest body of `POST /urls`.
    pub urls_body_bytes: usize,
    /// The largest body of any other request.
    pub body_bytes: usize,
    /// A client must send a request's headers within this (and an idle
    /// connection is closed after it).
    pub header_timeout: Duration,
    /// ... and its body within this.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            connections: 256,
            in_flight: 64,
            urls_body_bytes: 32 * 1024 * 1024,
            body_bytes: 64 * 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
        }
    }
}

/// What the HTTP API serves with.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct HttpConfig {
    /// The bearer token writes need; `None`: every write is refused.
    pub token: Option<String>,
    /// Origins whose pages may call the API from a browser (CORS); none
    /// by default.
    pub cors_origins: Vec<String>,
    pub limits: Limits,
}

impl HttpConfig {
    pub fn new(token: Option<String>) -> Self {
        Self {
            token,
            ..Self::default()
        }
    }

    pub fn cors_origins(mut self, origins: Vec<String>) -> Self {
        self.cors_origins = origins;
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

/// Why the HTTP API could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    #[error("cannot listen for --http on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("--http-cors {origin:?} is not an origin (scheme://host[:port])")]
    BadOrigin { origin: String },
}

/// The state every handler shares.
#[derive(Debug)]
pub(crate) struct Api {
    pub(crate) control: ControlClient,
    token: Option<String>,
    in_flight: Arc<Semaphore>,
    pub(crate) limits: Limits,
}

/// The API's routes and layers, without a listener: what [`serve`]
/// serves, and what a test or an embedding program can drive directly.
pub fn router(config: &HttpConfig, control: ControlClient) -> Result<Router, HttpError> {
    let api = Arc::new(Api {
        control,
        token: config.token.clone(),
        in_flight: Arc::new(Semaphore::new(config.limits.in_flight)),
        limits: config.limits.clone(),
    });
    let mut router = api::routes(&api)
        .layer(axum::middleware::from_fn_with_state(api.clone(), bounded))
        .with_state(api);
    if !config.cors_origins.is_empty() {
        router = router.layer(cors(&config.cors_origins)?);
    }
    Ok(router)
}

/// CORS for the given origins: reads and writes, the token in a header.
fn cors(origins: &[String]) -> Result<tower_http::cors::CorsLayer, HttpError> {
    let origins = origins
        .iter()
        .map(|o| {
            url::Url::parse(o)
                .ok()
                .filter(|u| u.has_host() && u.path() == "/")
                .and_then(|_| HeaderValue::from_str(o.trim_end_matches('/')).ok())
                .ok_or_else(|| HttpError::BadOrigin { origin: o.clone() })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(tower_http::cors::CorsLayer::new()
        .allow_origin(origins)
        .allow_methods([Method::GET, Method::POST, Method::PUT])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE]))
}

/// Before anything: a request over the node's bound waits for no one
/// (429). API answers are not cached.
async fn bounded(State(api): State<Arc<Api>>, request: Request, next: Next) -> Response {
    let Ok(_permit) = api.in_flight.clone().try_acquire_owned() else {
        return ApiError::new(
            RefusalCode::TooManyRequests,
            "too many requests at once: try again in a second",
        )
        .into_response();
    };
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// Before a write's handler (and only there: a wrong method is a 405, an
/// unknown path a 404, whoever asks): the token.
pub(crate) async fn writes(State(api): State<Arc<Api>>, request: Request, next: Next) -> Response {
    if let Err(refused) = authorized(api.token.as_deref(), &request) {
        return refused.into_response();
    }
    next.run(request).await
}

/// Whether `request` carries the bearer `token`.
fn authorized(token: Option<&str>, request: &Request) -> Result<(), ApiError> {
    let Some(token) = token else {
        return Err(ApiError::new(
            RefusalCode::Unauthorized,
            "this node takes no writes over HTTP: start it with --http-token-file",
        ));
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(given) if same(given.trim().as_bytes(), token.as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::new(
            RefusalCode::Unauthorized,
            "wrong bearer token",
        )),
        None => Err(ApiError::new(
            RefusalCode::Unauthorized,
            "a write needs the node's token: Authorization: Bearer TOKEN (--http-token-file)",
        )),
    }
}

/// `a == b`, in a time that does not tell where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A running HTTP listener.
#[derive(Debug)]
pub struct HttpServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    /// The address it listens on (port 0 picks one).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting; connections open end with their requests.
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serve the API at `addr` on a task of its own, each request passed to
/// `control`.
pub async fn serve(
    addr: SocketAddr,
    config: &HttpConfig,
    control: ControlClient,
) -> Result<HttpServer, HttpError> {
    let router = router(config, control)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| HttpError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| HttpError::Bind { addr, source })?;
    let connections = Arc::new(Semaphore::new(config.limits.connections));
    let header_timeout = config.limits.header_timeout;
    let task = tokio::spawn(async move {
        loop {
            // Past the bound, the next connection waits in the backlog.
            let Ok(permit) = connections.clone().acquire_owned().await else {
                return;
            };
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors, most likely: wait for some to close.
                    tracing::warn!(error = %e, "the HTTP listener could not accept");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let service = TowerToHyperService::new(router.clone());
            tokio::spawn(async move {
                let served = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(header_timeout)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                if let Err(e) = served {
                    tracing::debug!(error = %e, "an HTTP connection ended in error");
                }
                drop(permit);
            });
        }
    });
    Ok(HttpServer { addr: bound, task })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(auth: Option<&str>) -> Request {
        let mut builder = Request::builder().method("POST").uri("/urls");
        if let Some(auth) = auth {
            builder = builder.header(header::AUTHORIZATION, auth);
        }
        builder.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn a_write_needs_the_exact_token_and_none_is_taken_without_one() {
        let t = Some("s3cret");
        assert!(authorized(t, &request(Some("Bearer s3cret"))).is_ok());
        for bad in [
            None,
            Some("Bearer s3cre"),
            Some("s3cret"),
            Some("Bearer s3cret2"),
        ] {
            let refused = authorized(t, &request(bad)).unwrap_err();
            assert_eq!(refused.0.code, RefusalCode::Unauthorized, "{bad:?}");
        }
        let off = authorized(None, &request(Some("Bearer anything"))).unwrap_err();
        assert!(off.0.message.contains("--http-token-file"), "{off:?}");
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"ab", b"abc"));
    }

    #[test]
    fn cors_takes_origins_only() {
        assert!(cors(&["http://127.0.0.1:8080".into()]).is_ok());
        assert!(cors(&["https://ops.example/".into()]).is_ok());
        for bad in ["*", "ops.example", "http://a/path"] {
            assert!(
                matches!(cors(&[bad.into()]), Err(HttpError::BadOrigin { .. })),
                "{bad}"
            );
        }
    }
}
