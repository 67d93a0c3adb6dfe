//! Plain data that travels between actors and into the store.

use crate::traps::{TrapClosure, TrapReason, TrapRule, TrapScope};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch: the one timestamp representation the
/// store uses for anything that changes after insert.
pub type Millis = i64;

/// Wall-clock now in epoch milliseconds.
pub fn now_ms() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

/// The paper's `operation` field: an array whose first element names the
/// operation and the rest are its arguments (`["search", "text"]`). The empty
/// array is a plain crawl.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OperationSpec(pub Vec<String>);

impl OperationSpec {
    /// A plain crawl: fetch, record, follow links.
    pub fn crawl() -> Self {
        Self(Vec::new())
    }

    /// The paper's `search_text(URL, Text)` operation (case-insensitive).
    pub fn search_text(text: impl Into<String>) -> Self {
        Self(vec![TEXT_MATCH_OPERATION.to_string(), text.into()])
    }

    /// `search_text` matching case exactly.
    pub fn search_text_exact(text: impl Into<String>) -> Self {
        Self(vec![
            TEXT_MATCH_OPERATION.to_string(),
            text.into(),
            TEXT_MATCH_EXACT.to_string(),
        ])
    }

    /// The operation's name, `None` for a plain crawl.
    pub fn name(&self) -> Option<&str> {
        self.0.first().map(String::as_str)
    }

    /// Arguments after the name.
    pub fn args(&self) -> &[String] {
        self.0.get(1..).unwrap_or(&[])
    }

    /// Canonical string form, used as part of the pending-URL key: a JSON
    /// array, unambiguous for any strings (unlike joining).
    pub fn key(&self) -> String {
        serde_json::to_string(&self.0).expect("a list of strings always serializes")
    }

    /// Parse the form [`OperationSpec::key`] writes.
    pub fn from_key(key: &str) -> Option<Self> {
        serde_json::from_str(key).ok().map(Self)
    }
}

impl fmt::Display for OperationSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            None => f.write_str("crawl"),
            Some(_) => f.write_str(&self.0.join(" ")),
        }
    }
}

/// The stored name of the paper's `search_text` operation (listing 13).
pub const TEXT_MATCH_OPERATION: &str = "search";
/// The `search_text` argument that makes it match case exactly.
pub const TEXT_MATCH_EXACT: &str = "exact";

/// The collection `search_text`'s hits go to (paper listing 3),
/// counted in [`StoreCounts::search_results`].
pub const SEARCH_RESULTS: &str = "search_results";

/// Identity of a unit of work: the paper's pending_urls key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UrlKey {
    pub url: String,
    pub operation: OperationSpec,
}

/// A URL admitted to the frontier, on its way into `pending_urls`. Its
/// referrer is the page whose [`ProcessedPage`](crate::behaviour::ProcessedPage)
/// carries it (a seed has none): one URL per page instead of a copy per link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewLink {
    /// Normalized absolute URL.
    pub url: String,
    /// Politeness key: `host[:port]` of the URL.
    pub host: String,
    pub operation: OperationSpec,
    pub depth: u32,
    /// OPIC credit handed down by the referrer; summed when referrals merge.
    pub priority: f64,
    /// Length of the redirect chain that led here (0 for a normal link).
    pub redirect_hops: u32,
    /// When the referrer says the page last changed (a sitemap's
    /// `lastmod`, epoch ms): a page fetched before that is queued again.
    #[serde(default)]
    pub modified: Option<Millis>,
    /// The URL's own watch interval (`add_url … every`): it is checked
    /// again this often (adapted, [`crate::availability::Revisit`]) instead of
    /// `recrawl_every`. Only a seed carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_every_ms: Option<Millis>,
}

impl NewLink {
    /// A link to `url` (normalized; `host` its politeness key) to fetch
    /// with `operation` at `depth` with `priority` credit: no redirect
    /// behind it, no change date and no watch interval of its own.
    pub fn new(
        url: String,
        host: String,
        operation: OperationSpec,
        depth: u32,
        priority: f64,
    ) -> Self {
        Self {
            url,
            host,
            operation,
            depth,
            priority,
            redirect_hops: 0,
            modified: None,
            check_every_ms: None,
        }
    }

    /// The same link to a page that changed at `at` (epoch ms): a page
    /// fetched before that is queued again.
    pub fn changed_at(self, at: Millis) -> Self {
        Self {
            modified: Some(at),
            ..self
        }
    }
}

/// What the last fetch of a processed URL left behind: what a re-check sends
/// back as validators and compares its answer with. Travels in the
/// [`Job`] the claim hands out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastFetch {
    pub http_returncode: Option<u16>,
    pub content_hash: Option<u64>,
    /// `ETag` of the last response, sent back as `If-None-Match`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// `Last-Modified` of the last response, sent back as `If-Modified-Since`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// The revisit interval the last check chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_interval_ms: Option<Millis>,
    /// The URL's own watch interval when it was fetched (`add_url … every`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_every_ms: Option<Millis>,
}

/// A claimed URL, leased to this node, on its way to a slave.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub url: String,
    pub host: String,
    pub operation: OperationSpec,
    pub depth: u32,
    pub priority: f64,
    /// Attempts made before this one.
    pub attempts: u32,
    pub redirect_hops: u32,
    /// What the URL's last fetch left, when it was processed before: a
    /// re-check sends its validators and compares its answer with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<LastFetch>,
    /// The URL's own watch interval, from its pending row or else its
    /// processed one ([`NewLink::check_every_ms`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_every_ms: Option<Millis>,
}

impl Job {
    /// Its last fetch, as a claim reads it from the processed row. The
    /// URL's own interval is its pending row's (the newest `add_url …
    /// every`), else the one it was last fetched with.
    pub fn set_last(&mut self, last: Option<LastFetch>) {
        self.check_every_ms = self
            .check_every_ms
            .or_else(|| last.as_ref()?.check_every_ms);
        self.last = last;
    }

    pub fn key(&self) -> UrlKey {
        UrlKey {
            url: self.url.clone(),
            operation: self.operation.clone(),
        }
    }

    /// A first attempt at `http://{host}{path}` to crawl, for the unit tests.
    #[cfg(test)]
    pub(crate) fn fixture(host: &str, path: &str, depth: u32) -> Job {
        Job {
            url: format!("http://{host}{path}"),
            host: host.to_string(),
            operation: OperationSpec::crawl(),
            depth,
            priority: 1.0,
            attempts: 0,
            redirect_hops: 0,
            last: None,
            check_every_ms: None,
        }
    }
}

/// What a slave learned about one page: the paper's processed_urls document,
/// minus the referral fields the store maintains.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PageRecord {
    pub url: String,
    pub operation: OperationSpec,
    pub host: String,
    pub depth: u32,
    /// `None` when no HTTP response was had (network error, robots).
    pub http_returncode: Option<u16>,
    /// The Content-Length header, as the server sent it.
    pub content_length: Option<i64>,
    pub content_type: Option<String>,
    pub server: Option<String>,
    /// Links found on the page (before scope and filters).
    pub links_count: u32,
    pub title: Option<String>,
    /// 64-bit hash of the body, for content-seen de-duplication.
    pub content_hash: Option<u64>,
    pub redirect_to: Option<String>,
    /// Why the page is failed / not fetched, in one line.
    pub error: Option<String>,
    pub fetch_ms: i64,
    /// Admitted out-links (site structure), as read back from the store. A
    /// store writes the URLs of the page's admitted links
    /// ([`ProcessedPage::links`](crate::behaviour::ProcessedPage)) here, so a
    /// report carries each URL once.
    pub out_links: Vec<String>,
    /// The body hit the size cap and was cut.
    pub truncated: bool,
    /// Name of the node whose slave fetched the page.
    pub node: String,
    /// Validators of the response, for the next conditional request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// When a watched URL is due to be checked again (epoch ms), and the
    /// interval the revisit policy chose; `None` when it is not watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d_next_check: Option<Millis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_interval_ms: Option<Millis>,
    /// The URL's own watch interval ([`NewLink::check_every_ms`]), kept
    /// with the page so every later check knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_every_ms: Option<Millis>,
}

/// How a host's robots.txt was obtained (stored as its snake_case name).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RobotsStatus {
    /// 2xx: the body was parsed.
    #[default]
    Fetched,
    /// 4xx (except 429): no restrictions (RFC 9309 2.3.1.3).
    NotFound,
    /// 5xx, 429, other statuses, network errors, too many redirects or a
    /// redirect loop: complete disallow (RFC 9309 2.3.1.4).
    Unreachable,
}

impl RobotsStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RobotsStatus::Fetched => "fetched",
            RobotsStatus::NotFound => "not_found",
            RobotsStatus::Unreachable => "unreachable",
        }
    }
}

impl fmt::Display for RobotsStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for RobotsStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [Self::Fetched, Self::NotFound, Self::Unreachable]
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| format!("{s:?} is not a robots.txt status"))
    }
}

/// robots.txt and politeness facts about one host, for the `hosts` collection.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostRecord {
    pub host: String,
    pub robots_status: RobotsStatus,
    pub robots_http_code: Option<u16>,
    pub robots_error: Option<String>,
    pub robots_txt: Option<String>,
    pub robots_fetched_at: Millis,
    pub crawl_delay_ms: Option<u64>,
    pub sitemaps: Vec<String>,
}

/// A search_results document (the paper's listing 3), as
/// [`Queries::text_match_hits`](crate::Queries::text_match_hits) reads it
/// back: where `search_text` found its text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextMatchHit {
    pub url: String,
    pub text: String,
    /// Character offsets of the matches in the page's visible text.
    pub positions: Vec<u64>,
    /// The first matches with some text on each side (`…` where cut).
    #[serde(default)]
    pub contexts: Vec<String>,
    /// When it was found (epoch milliseconds).
    pub d_search: Millis,
}

/// A stored processed_urls document, as read back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessedUrl {
    #[serde(flatten)]
    pub record: PageRecord,
    pub referral_count: u64,
    pub referral_list: Vec<String>,
    pub duplicate_of: Option<String>,
    pub d_processed: Millis,
}

/// A stored pending_urls document, as read back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingUrl {
    pub url: String,
    pub operation: OperationSpec,
    pub host: String,
    pub status: String,
    pub depth: u32,
    pub priority: f64,
    pub attempts: u32,
    pub referral_list: Vec<String>,
    pub d_change: Millis,
    pub not_before: Millis,
    pub lease_until: Option<Millis>,
    pub last_error: Option<String>,
    /// The URL's own watch interval (`add_url … every`; 0: `off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_every_ms: Option<Millis>,
    /// Status `trapped`: the rule that refused it and the family it names.
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub trap: Option<TrapMark>,
}

/// The `status` of a URL in `pending_urls` the trap defence refused: kept,
/// with what a later fetch needs, but neither pending nor processing.
pub const TRAPPED: &str = "trapped";

/// Why the trap defence refused a URL, as its `pending_urls` row keeps it:
/// the rule's code and the family's name (`trap_rule`, `trap_family`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TrapMark {
    #[serde(rename = "trap_rule")]
    pub rule: TrapRule,
    #[serde(rename = "trap_family")]
    pub family: String,
}

impl TrapMark {
    pub fn of(reason: &TrapReason) -> Self {
        Self {
            rule: reason.rule(),
            family: reason.family(),
        }
    }
}

/// A family the trap defence closed, as the store keeps it
/// (`trap_closures`, keyed by `family`): what closed it and when, and
/// whether an operator reopened it (an allowed family is never closed
/// again on this store).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClosedFamily {
    /// Its name and key: a pattern, a path's query space (`h/shop?`), a
    /// host or a directory ([`TrapReason::family`]).
    pub family: String,
    pub host: String,
    pub rule: TrapRule,
    pub scope: TrapScope,
    /// Why, in words (`trap: …`).
    pub reason: String,
    /// Why, as the guard says it (what a restarted master restores).
    pub detail: TrapReason,
    pub closed_at: Millis,
    /// Pages of the family judged before it closed.
    pub pages: u32,
    /// When an operator reopened it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reopened_at: Option<Millis>,
    /// Reopened by an operator: never closed again on this store.
    #[serde(default)]
    pub allowed: bool,
}

impl ClosedFamily {
    pub fn of(closure: &TrapClosure) -> Self {
        let reason = &closure.reason;
        Self {
            family: reason.family(),
            host: reason.host().to_string(),
            rule: reason.rule(),
            scope: reason.rule().scope(),
            reason: reason.to_string(),
            detail: reason.clone(),
            closed_at: closure.closed_at,
            pages: closure.pages,
            reopened_at: None,
            allowed: false,
        }
    }

    /// The closure, for a master to restore.
    pub fn closure(&self) -> TrapClosure {
        TrapClosure {
            reason: self.detail.clone(),
            closed_at: self.closed_at,
            pages: self.pages,
        }
    }
}

/// A closed family as `report traps` lists it: its closure, how many URLs
/// it holds refused now, and the first of them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrapFamily {
    #[serde(flatten)]
    pub closed: ClosedFamily,
    /// URLs in `pending_urls` with status `trapped` under this family.
    pub refused: u64,
    /// The first few of them, oldest first.
    pub samples: Vec<String>,
}

/// Sample URLs `report traps` lists per family.
pub const TRAP_SAMPLES: usize = 5;

/// A page that answered 4xx/5xx or could not be fetched, with who links to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrokenLink {
    pub url: String,
    pub http_returncode: Option<u16>,
    pub error: Option<String>,
    pub referral_list: Vec<String>,
}

/// Counts over the store, for status and the idle check.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreCounts {
    /// Waiting in pending_urls (including ones waiting for a retry time).
    pub pending: u64,
    /// Leased to a slave somewhere.
    pub processing: u64,
    pub processed: u64,
    /// Processed with an error (gave up, robots-blocked, ...).
    pub failed: u64,
    pub robots_blocked: u64,
    pub duplicates: u64,
    pub search_results: u64,
    /// Left out by the trap defence (`pending_urls` rows with status
    /// `trapped`): neither pending nor processing.
    #[serde(default)]
    pub trapped: u64,
    /// The same by the rule that refused them (only rules with some).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub trapped_by_rule: BTreeMap<TrapRule, u64>,
}

impl StoreCounts {
    /// Nothing left to do in the frontier.
    pub fn frontier_empty(&self) -> bool {
        self.pending == 0 && self.processing == 0
    }
}

/// Pages queued for the full-text index and pages it has committed, in a
/// status: "indexed N of M" (the master counts pages in as it queues them,
/// the indexer counts them out at each commit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexCounts {
    /// Pages committed to the index since the node started.
    pub indexed: u64,
    /// Pages queued for the index since the node started (and the backlog
    /// found at start, once read).
    pub queued: u64,
}

impl IndexCounts {
    /// Pages queued and not searchable yet.
    pub fn backlog(&self) -> u64 {
        self.queued.saturating_sub(self.indexed)
    }

    /// Two shards' counts together.
    #[must_use]
    pub fn plus(self, other: Self) -> Self {
        Self {
            indexed: self.indexed + other.indexed,
            queued: self.queued + other.queued,
        }
    }
}

/// Error text recorded for a page robots.txt disallows.
pub const ROBOTS_BLOCKED: &str = "disallowed by robots.txt";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_key_is_unambiguous() {
        let a = OperationSpec(vec!["search".into(), "a,b".into()]);
        let b = OperationSpec(vec!["search".into(), "a".into(), "b".into()]);
        assert_ne!(a.key(), b.key());
        assert_eq!(OperationSpec::crawl().key(), "[]");
        assert_eq!(
            OperationSpec::search_text("say \"hi\"").key(),
            r#"["search","say \"hi\""]"#
        );
    }

    #[test]
    fn operation_name_and_args() {
        let op = OperationSpec::search_text("needle");
        assert_eq!(op.name(), Some("search"));
        assert_eq!(op.args(), &["needle".to_string()]);
        assert_eq!(OperationSpec::crawl().name(), None);
        assert!(OperationSpec::crawl().args().is_empty());
    }

    #[test]
    fn robots_status_round_trips_through_its_stored_name() {
        for status in [
            RobotsStatus::Fetched,
            RobotsStatus::NotFound,
            RobotsStatus::Unreachable,
        ] {
            assert_eq!(status.as_str().parse::<RobotsStatus>(), Ok(status));
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{status}\""));
        }
        assert!("gone".parse::<RobotsStatus>().is_err());
    }
}
