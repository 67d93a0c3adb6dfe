//! Servers below HTTP, for what hyper would refuse to produce: raw bytes on
//! the wire, a response that never comes, a body without end, one that
//! trickles; and a port nothing listens on.

use crate::{accept_loop, into_tokio, reserve};
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// A running raw TCP server on 127.0.0.1; stops, with its connections, when dropped.
#[derive(Debug)]
pub struct RawServer {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RawServer {
    /// Hand each accepted connection to `handler`.
    pub async fn start<F, Fut>(handler: F) -> RawServer
    where
        F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = into_tokio(reserve(Ipv4Addr::LOCALHOST));
        let addr = listener.local_addr().expect("listener address");
        let task = accept_loop(listener, handler);
        RawServer { addr, task }
    }

    /// Reads the request head, writes `response` as is, and closes the connection.
    pub async fn reply(response: impl Into<Vec<u8>>) -> RawServer {
        let response: std::sync::Arc<[u8]> = response.into().into();
        Self::start(move |mut s| {
            let response = response.clone();
            async move {
                if read_head(&mut s).await {
                    let _ = s.write_all(&response).await;
                }
            }
        })
        .await
    }

    /// Reads the request head and never answers; holds the connection
    /// open for `hold`.
    pub async fn silent(hold: Duration) -> RawServer {
        Self::start(move |mut s| async move {
            read_head(&mut s).await;
            tokio::time::sleep(hold).await;
        })
        .await
    }

    /// A 200 `text/html` with a chunked body of `a`s that goes on "forever"
    /// as far as a client can tell: bounded (1 GiB) so the server stops by
    /// itself even if the client misbehaves.
    pub async fn endless_chunked() -> RawServer {
        Self::start(|mut s| async move {
            if !read_head(&mut s).await {
                return;
            }
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n";
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = format!("8000\r\n{}\r\n", "a".repeat(0x8000));
            for _ in 0..32 * 1024 {
                if s.write_all(chunk.as_bytes()).await.is_err() {
                    return;
                }
            }
        })
        .await
    }

    /// Headers announcing `count` bytes, then one byte every `gap`.
    pub async fn trickle(gap: Duration, count: usize) -> RawServer {
        Self::start(move |mut s| async move {
            if !read_head(&mut s).await {
                return;
            }
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {count}\r\n\r\n");
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for _ in 0..count {
                tokio::time::sleep(gap).await;
                if s.write_all(b"x").await.is_err() {
                    return;
                }
            }
        })
        .await
    }
}

/// Reads one request head (up to the blank line, at most 64 KiB); false if
/// the connection ended or the head was too long.
pub async fn read_head(stream: &mut TcpStream) -> bool {
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

/// An address on 127.0.0.1 nothing listens on: bound, then released.
pub fn closed_port_addr() -> SocketAddr {
    let listener = reserve(Ipv4Addr::LOCALHOST);
    listener.local_addr().expect("listener address")
}
