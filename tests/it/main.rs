//! The integration tests, one binary so the suite links the crate once.
//! Test names carry their module: `crawl::…`, `cli::…`; one module runs with
//! `cargo test --test it crawl::`.

#[macro_use]
mod common;

mod archive;
mod cli;
mod cluster;
mod crawl;
mod generated_web;
mod hostile_web;
mod mongo;
mod monitor;
mod outage;
mod reports;
mod search;
mod store_conformance;
mod text_traps;
