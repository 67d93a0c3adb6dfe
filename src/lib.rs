//! # web_crawler
//!
//! A web crawler built the way an Erlang/OTP team builds systems: a
//! supervision tree (`web_crawler_actors`) whose master owns the store,
//! per-URL slave actors, and everything driven by messages. This crate holds
//! the implementations of the tree's behaviours — URL normalization, robots,
//! the hyper fetcher, the HTML extractor, the embedded SQLite store, the link
//! policy, the `search_text` operation — and the MongoDB store; the CLI is
//! the `web_crawler` binary.
//!
//! Cargo features, all on by default: `mongodb` (the MongoDB store,
//! `store::MongoStore`), `search` (the full-text search engine,
//! `search::SearchIndex`, on tantivy), `http` (the node's HTTP JSON API
//! and web page, `http::serve`, on axum) and `cli` (the binary and its CLI
//! stack; implies the others). With `default-features = false`
//! this is the embeddable crawler alone, on the embedded SQLite store.
//!
//! ```no_run
//! # async fn demo() -> Result<(), web_crawler::Error> {
//! use web_crawler::{start_embedded, Settings};
//! let app = start_embedded("crawl.db".as_ref(), Settings::default()).await?;
//! app.add_url("http://127.0.0.1:8080/").await?;
//! app.wait_idle().await?;
//! println!("{:?}", app.status().await?);
//! app.stop(std::time::Duration::from_secs(5)).await?;
//! # Ok(()) }
//! ```

pub mod archive;
pub mod extract;
pub mod fetch;
pub mod graph;
#[cfg(feature = "http")]
pub mod http;
pub mod normalize;
pub mod notify;
pub mod operations;
pub mod policy;
pub mod robots;
#[cfg(feature = "search")]
pub mod search;
pub mod store;

mod behaviour_impls;
mod kill_points;
#[cfg(test)]
use web_crawler_actors::proptest_cases;
mod settings;

pub use settings::{Error, Settings, start, start_embedded, start_on, start_worker};
pub use web_crawler_actors as actors;
pub use web_crawler_actors::{App, AppHandle, CrawlConfig, IdleReason, OperationSpec, Status};
