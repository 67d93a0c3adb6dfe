//! Coverage, a first-class figure (#44 item 4): every crawl test asserts
//! that every real page of its web was fetched. One check, one message:
//! how many of how many real pages were not fetched, and the first of
//! them by URL. A test that stops its crawl early by design (a page
//! budget, a kill it never resumes from) or that is about one refused
//! request says so where the check would be.

use std::collections::HashSet;
use web_crawler::actors::{PageQuery, Store};
use web_crawler_testsupport::TestServer;

/// How many of the missing URLs a failure names.
const SHOWN: usize = 10;

/// Fails unless `missing` is empty, naming how many of `total` real pages
/// were not fetched and the first of them.
#[track_caller]
fn assert_none_missing(missing: &[String], total: usize, how: &str) {
    assert!(
        missing.is_empty(),
        "{} of {total} real pages not {how}, first {:?}",
        missing.len(),
        &missing[..missing.len().min(SHOWN)]
    );
}

/// Fails unless each `(server, target)` of `real` was served at least once
/// (the servers count every request by path and query).
#[track_caller]
pub fn assert_all_fetched<'a, T: AsRef<str>>(real: impl IntoIterator<Item = (&'a TestServer, T)>) {
    let mut total = 0;
    let mut missing = Vec::new();
    for (server, target) in real {
        total += 1;
        if server.hits_of(target.as_ref()) == 0 {
            missing.push(server.url(target.as_ref()));
        }
    }
    assert_none_missing(&missing, total, "fetched");
}

/// [`assert_all_fetched`] on one server: each target of `real` (path and
/// query) was served at least once.
#[track_caller]
pub fn assert_all_real_fetched<T: AsRef<str>>(
    server: &TestServer,
    real: impl IntoIterator<Item = T>,
) {
    assert_all_fetched(real.into_iter().map(|t| (server, t)));
}

/// [`assert_all_fetched`] over a web of several servers, its real pages
/// given as `(server index, target)`, as the generated webs list them.
#[track_caller]
pub fn assert_all_real_fetched_on(servers: &[TestServer], real: &[(usize, String)]) {
    assert_all_fetched(real.iter().map(|(h, t)| (&servers[*h], t.as_str())));
}

/// The URLs of `real` that `store` does not hold as fetched with HTTP 200:
/// for a test whose servers also answered another crawl (their hit counts
/// cannot tell the crawls apart). Check with [`assert_all_stored`].
pub async fn not_stored(store: &dyn Store, real: &[String]) -> Vec<String> {
    let fetched: HashSet<String> = store
        .processed(PageQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|p| p.record.http_returncode == Some(200))
        .map(|p| p.record.url)
        .collect();
    real.iter()
        .filter(|url| !fetched.contains(*url))
        .cloned()
        .collect()
}

/// Fails unless [`not_stored`] found every one of `total` real pages.
#[track_caller]
pub fn assert_all_stored(missing: &[String], total: usize) {
    assert_none_missing(missing, total, "in the store as fetched (HTTP 200)");
}
