//! Helpers of the integration tests: generated test webs on distinct
//! 127.x.y.z addresses (`web`), the two store backends (`backend`), polling.
//! The HTTP servers themselves are `web_crawler_testsupport`'s.
#![allow(dead_code, unreachable_pub)]

#[macro_use]
pub mod backend;
pub mod web;

use std::time::Duration;

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
