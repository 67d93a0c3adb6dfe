//! A console's or script's connection to a running cluster, as `erl
//! -remsh` attaches to a node: its own (client) node, authenticated with the
//! cookie, and the control actor it calls.

use crate::availability::{Availability, StatusEvent};
use crate::behaviour::index::SearchAnswer;
use crate::cluster::{ClusterError, join, start_node};
use crate::hosts::HostListing;
use crate::protocol::{CONTROL_GROUP, ControlMsg, ControlRequest, Queued, Status};
use crate::reply::{Added, ControlError, ControlReply, Listing, PageView, TrapReopened, from_wire};
use crate::types::{Millis, OperationSpec, PendingUrl, ProcessedUrl, TextMatchHit, TrapFamily};
use ractor::ActorRef;
use ractor_cluster::NodeServerMessage;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Where a [`ControlClient`]'s requests go.
#[derive(Clone, Debug)]
enum Target {
    /// A control actor of this process, looked up by name at each request
    /// (so a restarted one is found).
    Named(String),
    /// A control actor on another node.
    Ref(ActorRef<ControlMsg>),
    /// The cluster's control actor, wherever it runs, found by its process
    /// group at each request (so a restarted one, or one on a master that
    /// came back, is found): this node's first.
    Group,
}

/// The console's requests to a control actor, with typed replies: the
/// same calls on an embedded app ([`AppHandle::control`](crate::AppHandle::control))
/// and on a cluster ([`Remote`], which derefs to one).
#[derive(Clone, Debug)]
pub struct ControlClient {
    target: Target,
    timeout: Duration,
}

impl ControlClient {
    pub(crate) fn named(name: String, timeout: Duration) -> Self {
        Self {
            target: Target::Named(name),
            timeout,
        }
    }

    /// The control actor of the cluster this node is in, wherever it runs
    /// (on the master's node): what a worker node's HTTP API calls.
    pub fn cluster(timeout: Duration) -> Self {
        Self {
            target: Target::Group,
            timeout,
        }
    }

    /// The same client, waiting `timeout` for each answer.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// One request; [`ControlError::Refused`] holds the node's code and
    /// one-line reason.
    pub async fn request(&self, request: &ControlRequest) -> Result<ControlReply, ControlError> {
        let value = self.call(request).await?;
        ControlReply::decode(request, value).map_err(ControlError::BadReply)
    }

    /// One request; its reply's JSON.
    async fn call(&self, request: &ControlRequest) -> Result<Value, ControlError> {
        let text = serde_json::to_string(request).expect("a request always serializes");
        if text.len() > request.max_bytes() {
            return Err(ControlError::TooLarge {
                bytes: text.len(),
                limit: request.max_bytes(),
            });
        }
        let control = match &self.target {
            Target::Ref(control) => control.clone(),
            Target::Named(name) => ActorRef::<ControlMsg>::where_is(name.clone())
                .ok_or_else(|| ControlError::NoControl(name.clone()))?,
            Target::Group => {
                let mut members = ractor::pg::get_members(&CONTROL_GROUP.to_string());
                members.sort_by_key(|c| !c.get_id().is_local());
                let first = members.into_iter().next();
                ActorRef::from(first.ok_or(ControlError::NoClusterControl)?)
            }
        };
        let reply = ractor::call_t!(
            control,
            |port| ControlMsg::Request(text, port),
            self.timeout.as_millis() as u64
        )
        .map_err(|e| ControlError::NoAnswer(Box::new(e)))?;
        from_wire(&reply)
    }

    /// The reply to `request`, as the type its variant holds.
    async fn typed<T: DeserializeOwned>(
        &self,
        request: &ControlRequest,
    ) -> Result<T, ControlError> {
        serde_json::from_value(self.call(request).await?).map_err(ControlError::BadReply)
    }

    /// The families the trap defence closed, the first `limit` (see
    /// [`ControlRequest::Traps`]).
    pub async fn traps(&self, limit: usize) -> Result<Listing<TrapFamily>, ControlError> {
        self.typed(&ControlRequest::Traps { limit }).await
    }

    /// Reopen a trap family: never closed again on this store, and the
    /// URLs it refused go back to pending (see [`ControlRequest::ReopenTrap`]).
    pub async fn reopen_trap(&self, family: &str) -> Result<TrapReopened, ControlError> {
        let request = ControlRequest::ReopenTrap {
            family: family.to_string(),
        };
        self.typed(&request).await
    }

    /// `add_url` on the master; returns the normalized URL, and whether
    /// it was waiting in the queue already. A URL already
    /// processed (with this operation, not due again) is refused with when.
    pub async fn add_url(
        &self,
        url: &str,
        operation: OperationSpec,
    ) -> Result<Queued, ControlError> {
        self.add(url, operation, false, None).await
    }

    /// `add_url` that fetches the URL again even if it was processed.
    pub async fn add_url_again(
        &self,
        url: &str,
        operation: OperationSpec,
    ) -> Result<Queued, ControlError> {
        self.add(url, operation, true, None).await
    }

    /// `add_url` that watches the URL at an interval of its own (see
    /// [`AppHandle::add_url_watched`](crate::AppHandle::add_url_watched)).
    pub async fn add_url_watched(
        &self,
        url: &str,
        operation: OperationSpec,
        every: Duration,
    ) -> Result<Queued, ControlError> {
        // Refused here: a zero interval would travel as `WATCH_OFF`.
        let every_ms = crate::availability::check_every(every)?;
        self.add(url, operation, false, Some(every_ms)).await
    }

    /// Stop watching a URL (see [`AppHandle::unwatch`](crate::AppHandle::unwatch)).
    pub async fn unwatch(
        &self,
        url: &str,
        operation: OperationSpec,
    ) -> Result<Queued, ControlError> {
        self.add(url, operation, false, Some(crate::availability::WATCH_OFF))
            .await
    }

    async fn add(
        &self,
        url: &str,
        operation: OperationSpec,
        again: bool,
        every_ms: Option<Millis>,
    ) -> Result<Queued, ControlError> {
        self.typed(&ControlRequest::AddUrl {
            url: url.to_string(),
            operation,
            again,
            every_ms,
        })
        .await
    }

    /// `add_url` of many URLs at once (at most
    /// [`MAX_BATCH_URLS`](crate::MAX_BATCH_URLS)): each URL's outcome, in
    /// order, queued (normalized) or refused with a code.
    pub async fn add_urls(
        &self,
        urls: Vec<String>,
        operation: OperationSpec,
        again: bool,
    ) -> Result<Added, ControlError> {
        self.typed(&ControlRequest::AddUrls {
            urls,
            operation,
            again,
        })
        .await
    }

    /// A processed page's record and its fetch history.
    pub async fn page(&self, url: &str) -> Result<PageView, ControlError> {
        let url = url.to_string();
        self.typed(&ControlRequest::Page { url }).await
    }

    /// The paper's `search_text(URL, Text)`.
    pub async fn search_text(&self, url: &str, text: &str) -> Result<Queued, ControlError> {
        self.add_url(url, OperationSpec::search_text(text)).await
    }

    pub async fn status(&self) -> Result<Status, ControlError> {
        self.typed(&ControlRequest::Status).await
    }

    /// The `limit` best pages for `query` over every node's index shard
    /// (`nodes` says which shards answered in time).
    pub async fn search(&self, query: &str, limit: usize) -> Result<SearchAnswer, ControlError> {
        let query = query.to_string();
        self.typed(&ControlRequest::Search {
            query,
            limit,
            offset: 0,
        })
        .await
    }

    /// The first `limit` pending URLs.
    pub async fn pending(&self, limit: usize) -> Result<Vec<PendingUrl>, ControlError> {
        self.typed(&ControlRequest::Pending { limit }).await
    }

    /// The last `limit` pages processed, newest first.
    pub async fn processed(&self, limit: usize) -> Result<Vec<ProcessedUrl>, ControlError> {
        self.typed(&ControlRequest::Processed { limit }).await
    }

    /// The last `limit` pages that failed or answered 4xx/5xx, newest first.
    pub async fn failed(&self, limit: usize) -> Result<Vec<ProcessedUrl>, ControlError> {
        self.typed(&ControlRequest::Failed { limit }).await
    }

    /// Where `search_text` found its text (only `text`'s results, if given),
    /// by URL.
    pub async fn text_match_hits(
        &self,
        text: Option<&str>,
        limit: usize,
    ) -> Result<Listing<TextMatchHit>, ControlError> {
        let text = text.map(str::to_string);
        self.typed(&ControlRequest::TextMatchHits { text, limit })
            .await
    }

    /// Watched URLs' availability (only `host`'s with one), by URL.
    pub async fn availability(
        &self,
        host: Option<&str>,
        limit: usize,
    ) -> Result<Listing<Availability>, ControlError> {
        let host = host.map(str::to_string);
        self.typed(&ControlRequest::Availability { host, limit })
            .await
    }

    /// Watched URLs' changes (only `host`'s with one), newest first.
    pub async fn changes(
        &self,
        host: Option<&str>,
        limit: usize,
    ) -> Result<Listing<StatusEvent>, ControlError> {
        let host = host.map(str::to_string);
        self.typed(&ControlRequest::Changes { host, limit }).await
    }

    /// The crawl's hosts: robots.txt state, crawl delay, pages processed,
    /// and what the pool holding each does with it now (queue, fetches,
    /// robots.txt, backoff); hosts with work first.
    pub async fn hosts(&self, limit: usize) -> Result<HostListing, ControlError> {
        self.typed(&ControlRequest::Hosts { limit }).await
    }
}

/// A console's or script's connection to a running cluster: its own
/// (client) node, authenticated with the cookie, and the control actor it
/// calls (the [`ControlClient`] it derefs to).
#[derive(Debug)]
pub struct Remote {
    node: ActorRef<NodeServerMessage>,
    client: ControlClient,
}

impl std::ops::Deref for Remote {
    type Target = ControlClient;

    fn deref(&self) -> &ControlClient {
        &self.client
    }
}

impl Remote {
    /// Connect to the node at `addr` with `cookie`.
    pub async fn connect(
        addr: &str,
        cookie: &str,
        timeout: Duration,
    ) -> Result<Remote, ClusterError> {
        let target: SocketAddr = tokio::net::lookup_host(addr)
            .await
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| ClusterError::Unreachable {
                addr: addr.to_string(),
                reason: "not a HOST:PORT address".to_string(),
            })?;
        let local = SocketAddr::new(
            if target.ip().is_loopback() {
                target.ip()
            } else {
                [0, 0, 0, 0].into()
            },
            0,
        );
        let name = format!("remote-{}-{}", std::process::id(), crate::types::now_ms());
        let node = start_node(&name, local, cookie, false).await?;
        join(&node, addr, timeout).await?;
        let deadline = Instant::now() + timeout;
        loop {
            let control = ractor::pg::get_members(&CONTROL_GROUP.to_string())
                .into_iter()
                .find(|c| !c.get_id().is_local());
            if let Some(control) = control {
                return Ok(Remote {
                    node,
                    client: ControlClient {
                        target: Target::Ref(ActorRef::from(control)),
                        timeout,
                    },
                });
            }
            if Instant::now() >= deadline {
                return Err(ClusterError::Missing(
                    "control actor (is it a worker node? connect to the master's node)",
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Close the connection.
    pub fn close(self) {
        self.node.stop(None);
    }
}
