//! The integration tests, one binary so the suite links the crate once.
//! Test names carry their module: `crawl::…`, `cli::…`; one module runs with
//! `cargo test --test it crawl::`. Modules that drive the `web_crawler`
//! binary need the `cli` feature; `cargo test --no-default-features` runs
//! the rest on the embedded store.

#[macro_use]
mod common;

#[cfg(feature = "cli")]
mod archive;
#[cfg(feature = "cli")]
mod availability;
#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "cli")]
mod cluster;
mod crawl;
mod generated_web;
mod hostile_web;
#[cfg(feature = "cli")]
mod http;
#[cfg(feature = "cli")]
mod kills;
#[cfg(feature = "mongodb")]
mod mongo;
mod outage;
mod refusals;
#[cfg(feature = "cli")]
mod reports;
#[cfg(feature = "search")]
mod search;
mod shared_text;
mod store_conformance;
mod text_traps;
