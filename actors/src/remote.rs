//! A console's or script's connection to a running cluster, as `erl
//! -remsh` attaches to a node: its own (client) node, authenticated with the
//! cookie, and the control actor it calls.

use crate::cluster::{ClusterError, join, start_node};
use crate::protocol::{CONTROL_GROUP, ControlMsg, ControlRequest, MAX_REQUEST_BYTES, Status};
use crate::types::OperationSpec;
use ractor::ActorRef;
use ractor_cluster::NodeServerMessage;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Errors of a remote request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("the node did not answer")]
    NoAnswer(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The node refused the request, with its one-line reason.
    #[error("{0}")]
    Refused(String),
    #[error("the node sent a reply this client cannot read")]
    BadReply(#[source] serde_json::Error),
    /// Refused here, before sending: the connection stays up.
    #[error("the request is {bytes} bytes, over the {limit} a cluster request may carry")]
    TooLarge { bytes: usize, limit: usize },
}

/// A console's or script's connection to a running cluster: its own
/// (client) node, authenticated with the cookie, and the control actor.
#[derive(Debug)]
pub struct Remote {
    node: ActorRef<NodeServerMessage>,
    control: ActorRef<ControlMsg>,
    timeout: Duration,
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
                    control: ActorRef::from(control),
                    timeout,
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

    /// One request; [`RemoteError::Refused`] holds the node's one-line reason.
    pub async fn request(
        &self,
        request: &ControlRequest,
    ) -> Result<serde_json::Value, RemoteError> {
        let text = serde_json::to_string(request).expect("a request always serializes");
        if text.len() > MAX_REQUEST_BYTES {
            return Err(RemoteError::TooLarge {
                bytes: text.len(),
                limit: MAX_REQUEST_BYTES,
            });
        }
        let reply = ractor::call_t!(
            self.control,
            |port| ControlMsg::Request(text, port),
            self.timeout.as_millis() as u64
        )
        .map_err(|e| RemoteError::NoAnswer(Box::new(e)))?;
        let mut value: serde_json::Value =
            serde_json::from_str(&reply).map_err(RemoteError::BadReply)?;
        if let Some(error) = value.get("error") {
            return Err(RemoteError::Refused(
                error.as_str().unwrap_or("error").to_string(),
            ));
        }
        Ok(value
            .get_mut("ok")
            .map(serde_json::Value::take)
            .unwrap_or_default())
    }

    /// `add_url` on the cluster's master; returns the normalized URL.
    pub async fn add_url(
        &self,
        url: &str,
        operation: OperationSpec,
    ) -> Result<String, RemoteError> {
        let reply = self
            .request(&ControlRequest::AddUrl {
                url: url.to_string(),
                operation,
            })
            .await?;
        Ok(reply.as_str().unwrap_or_default().to_string())
    }

    /// The paper's `search_text(URL, Text)` on the cluster.
    pub async fn search_text(&self, url: &str, text: &str) -> Result<String, RemoteError> {
        self.add_url(url, OperationSpec::search_text(text)).await
    }

    pub async fn status(&self) -> Result<Status, RemoteError> {
        let reply = self.request(&ControlRequest::Status).await?;
        serde_json::from_value(reply).map_err(RemoteError::BadReply)
    }

    /// Close the connection.
    pub fn close(self) {
        self.node.stop(None);
    }
}
