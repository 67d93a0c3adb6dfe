//! How many cases each property test runs: a few thousand in CI, as many as
//! `PROPTEST_CASES` says when it is set (a long hunt on a quiet machine).
//! proptest reads that variable only when no count is given in code, so the
//! counts below defer to it explicitly. Both crates' property tests use
//! it (the root crate through the `proptest-cases` feature).

use proptest::test_runner::Config;

/// The property tests' configuration: `ci_cases` cases unless
/// `PROPTEST_CASES` is set. Failures are kept in `proptest-regressions/`
/// beside the crate's sources and run first next time.
pub fn config(ci_cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(ci_cases);
    Config {
        cases,
        ..Config::default()
    }
}
