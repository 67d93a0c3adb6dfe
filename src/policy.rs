//! The link policy: which URLs enter the frontier. Validation and
//! normalization, scope (the paper's same-host rule, or same registrable
//! domain, or any host), user URL filters, and crawler-trap rules — pure
//! functions over a URL and its referrer.

use crate::normalize::{self, NormalizeOptions};
use regex::Regex;
use std::fmt;
use std::str::FromStr;
use url::{Position, Url};
use web_crawler_actors::{Job, LinkPolicy, NewLink, OperationSpec, Rejection};

/// Which links leave the referrer's site. Parses from and displays as
/// `host`, `domain`, `any` (the CLI's `--scope` values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// Same host as the referrer (the paper's rule).
    #[default]
    Host,
    /// Same registrable domain as the referrer (`a.example.com` → `b.example.com`).
    Domain,
    /// Any host (bound it with filters, depth and page budgets).
    Any,
}

impl Scope {
    /// Every scope, in the order of the CLI's possible values.
    pub const ALL: [Scope; 3] = [Scope::Host, Scope::Domain, Scope::Any];

    /// The scope's name: `host`, `domain` or `any`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Host => "host",
            Scope::Domain => "domain",
            Scope::Any => "any",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not a [`Scope`] name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope `{0}` (expected host, domain or any)")]
pub struct ParseScopeError(String);

impl FromStr for Scope {
    type Err = ParseScopeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| ParseScopeError(s.to_string()))
    }
}

/// Settings of the policy.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PolicyConfig {
    pub scope: Scope,
    /// Links deeper than this many hops from a seed are not followed.
    pub max_depth: Option<u32>,
    pub max_redirect_hops: u32,
    /// A path segment repeated more often than this marks a trap (`/a/b/a/b/a/b/...`).
    pub max_repeated_segments: usize,
    pub max_query_params: usize,
    /// If any are given, a URL must match one of them.
    pub allow: Vec<Regex>,
    /// A URL matching any of these is not crawled.
    pub deny: Vec<Regex>,
    pub normalize: NormalizeOptions,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            scope: Scope::Host,
            max_depth: None,
            max_redirect_hops: 5,
            max_repeated_segments: 3,
            max_query_params: 16,
            allow: Vec::new(),
            deny: Vec::new(),
            normalize: NormalizeOptions::default(),
        }
    }
}

/// [`LinkPolicy`] implementation over [`PolicyConfig`].
#[derive(Clone, Debug, Default)]
pub struct CrawlPolicy {
    cfg: PolicyConfig,
}

impl CrawlPolicy {
    pub fn new(cfg: PolicyConfig) -> Self {
        Self { cfg }
    }

    fn check(&self, url: &Url) -> Result<(), Rejection> {
        let s = url.as_str();
        if !self.cfg.allow.is_empty() && !self.cfg.allow.iter().any(|r| r.is_match(s)) {
            return Err(Rejection::Filtered);
        }
        if self.cfg.deny.iter().any(|r| r.is_match(s)) {
            return Err(Rejection::Filtered);
        }
        trap(url, &self.cfg)
    }

    /// Scope, filters, traps and depth for a resolved, normalized `url`.
    fn admit(
        &self,
        base: &Url,
        referrer: &Job,
        url: Url,
        redirect: bool,
    ) -> Result<NewLink, Rejection> {
        if !in_scope(self.cfg.scope, base, &url) {
            return Err(Rejection::OutOfScope);
        }
        self.check(&url)?;
        // A redirect is the same page moved: same depth, one more hop.
        let (depth, redirect_hops) = if redirect {
            (referrer.depth, referrer.redirect_hops + 1)
        } else {
            (referrer.depth + 1, 0)
        };
        if redirect_hops > self.cfg.max_redirect_hops {
            return Err(Rejection::Trap("redirect chain too long"));
        }
        if self.cfg.max_depth.is_some_and(|max| depth > max) {
            return Err(Rejection::TooDeep);
        }
        let (host, operation) = (host_key(&url), referrer.operation.clone());
        Ok(NewLink {
            redirect_hops,
            ..NewLink::new(url.into(), host, operation, depth, 0.0)
        })
    }
}

/// `host[:port]`: the politeness key and the scope key's host part.
/// A slice of the serialization (which leaves a default port out), so no
/// formatting per link.
pub fn host_key(url: &Url) -> String {
    url[Position::BeforeHost..Position::AfterPort].to_string()
}

/// The registrable domain of a host (`www.example.co.uk` → `example.co.uk`);
/// an IP address or unknown suffix is its own domain.
pub fn registrable_domain(host: &str) -> &str {
    psl::domain_str(host).unwrap_or(host)
}

/// Whether `link` is in scope for a page at `referrer`.
pub fn in_scope(scope: Scope, referrer: &Url, link: &Url) -> bool {
    let (Some(from), Some(to)) = (referrer.host_str(), link.host_str()) else {
        return false;
    };
    match scope {
        Scope::Any => true,
        Scope::Host => from == to,
        Scope::Domain => registrable_domain(from) == registrable_domain(to),
    }
}

/// Crawler-trap rules over a normalized URL.
pub fn trap(url: &Url, cfg: &PolicyConfig) -> Result<(), Rejection> {
    // Sorted, equal segments are neighbours: no hashing per link.
    let mut segments: Vec<&str> = url.path().split('/').filter(|s| !s.is_empty()).collect();
    segments.sort_unstable();
    let most_repeated = segments.chunk_by(|a, b| a == b).map(<[_]>::len).max();
    if most_repeated.is_some_and(|n| n > cfg.max_repeated_segments) {
        return Err(Rejection::Trap("repeated path segment"));
    }
    if url.query_pairs().count() > cfg.max_query_params {
        return Err(Rejection::Trap("too many query parameters"));
    }
    Ok(())
}

impl LinkPolicy for CrawlPolicy {
    fn seed(&self, url: &str, operation: &OperationSpec) -> Result<NewLink, Rejection> {
        let url = normalize::normalize(url.trim(), &self.cfg.normalize)
            .map_err(|e| Rejection::Invalid(e.to_string()))?;
        self.check(&url)?;
        let host = host_key(&url);
        Ok(NewLink::new(url.into(), host, operation.clone(), 0, 1.0))
    }

    fn link(&self, referrer: &Job, href: &str, redirect: bool) -> Result<NewLink, Rejection> {
        let base = Url::parse(&referrer.url)
            .map_err(|e| Rejection::Invalid(format!("invalid URL {:?}: {e}", referrer.url)))?;
        let url = normalize::resolve(&base, href, &self.cfg.normalize)
            .map_err(|e| Rejection::Invalid(e.to_string()))?;
        self.admit(&base, referrer, url, redirect)
    }

    /// The extractor normalized `urls` with the same options (see
    /// `Settings`), so they are admitted as they are.
    fn links(&self, referrer: &Job, urls: Vec<Url>) -> Vec<NewLink> {
        let Ok(base) = Url::parse(&referrer.url) else {
            return Vec::new();
        };
        urls.into_iter()
            .filter_map(|url| self.admit(&base, referrer, url, false).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(url: &str, depth: u32) -> Job {
        Job {
            url: url.to_string(),
            host: host_key(&Url::parse(url).unwrap()),
            operation: OperationSpec::search_text("x"),
            depth,
            priority: 1.0,
            attempts: 0,
            redirect_hops: 0,
            last: None,
            check_every_ms: None,
        }
    }

    fn policy(cfg: PolicyConfig) -> CrawlPolicy {
        CrawlPolicy::new(cfg)
    }

    #[test]
    fn scope_round_trips_through_its_name() {
        for scope in Scope::ALL {
            assert_eq!(scope.to_string().parse::<Scope>(), Ok(scope));
        }
        assert_eq!("domain".parse::<Scope>(), Ok(Scope::Domain));
        assert!("Host".parse::<Scope>().is_err());
        assert!("".parse::<Scope>().is_err());
    }

    #[test]
    fn seed_is_normalized_and_keyed_by_host_and_port() {
        let p = policy(PolicyConfig::default());
        let s = p
            .seed(" HTTP://Example.COM:80/a/../b#x ", &OperationSpec::crawl())
            .unwrap();
        assert_eq!(s.url, "http://example.com/b");
        assert_eq!(s.host, "example.com");
        let s = p
            .seed("http://127.0.0.2:8080/", &OperationSpec::crawl())
            .unwrap();
        assert_eq!(s.host, "127.0.0.2:8080");
        for (url, key) in [
            ("https://u:pw@h.example:443/x", "h.example"),
            ("https://u@h.example:8443/x", "h.example:8443"),
            ("http://[::1]:8080/", "[::1]:8080"),
            ("http://[::1]/", "[::1]"),
        ] {
            assert_eq!(host_key(&Url::parse(url).unwrap()), key, "{url}");
        }
        assert!(matches!(
            p.seed("mailto:a@b.c", &OperationSpec::crawl()),
            Err(Rejection::Invalid(_))
        ));
        assert!(matches!(
            p.seed("not a url", &OperationSpec::crawl()),
            Err(Rejection::Invalid(_))
        ));
    }

    #[test]
    fn host_scope_is_the_papers_same_host_rule() {
        let p = policy(PolicyConfig::default());
        let r = job("http://a.example.com/x/", 0);
        let l = p.link(&r, "../y?q=1", false).unwrap();
        assert_eq!(l.url, "http://a.example.com/y?q=1");
        assert_eq!(l.depth, 1);
        assert_eq!(l.operation, r.operation, "links inherit the operation");
        assert_eq!(
            p.link(&r, "http://b.example.com/", false),
            Err(Rejection::OutOfScope)
        );
    }

    #[test]
    fn a_pages_links_are_admitted_as_parsed_and_filtered_alike() {
        let p = policy(PolicyConfig::default());
        let r = job("http://a.example.com/x/", 0);
        let urls: Vec<Url> = [
            "http://a.example.com/y",
            "http://b.example.com/",
            "http://a.example.com/z",
        ]
        .iter()
        .map(|u| Url::parse(u).unwrap())
        .collect();
        let admitted: Vec<String> = p
            .links(&r, urls.clone())
            .into_iter()
            .map(|l| l.url)
            .collect();
        assert_eq!(
            admitted,
            ["http://a.example.com/y", "http://a.example.com/z"]
        );
        let one_by_one: Vec<String> = urls
            .iter()
            .filter_map(|u| p.link(&r, u.as_str(), false).ok())
            .map(|l| l.url)
            .collect();
        assert_eq!(admitted, one_by_one);
    }

    #[test]
    fn domain_and_any_scopes() {
        let r = job("http://a.example.co.uk/", 0);
        let p = policy(PolicyConfig {
            scope: Scope::Domain,
            ..PolicyConfig::default()
        });
        assert!(p.link(&r, "https://b.example.co.uk/", false).is_ok());
        assert_eq!(
            p.link(&r, "http://other.co.uk/", false),
            Err(Rejection::OutOfScope)
        );
        let p = policy(PolicyConfig {
            scope: Scope::Any,
            ..PolicyConfig::default()
        });
        assert!(p.link(&r, "http://other.org/", false).is_ok());
    }

    #[test]
    fn ip_hosts_scope_by_address() {
        let p = policy(PolicyConfig {
            scope: Scope::Domain,
            ..PolicyConfig::default()
        });
        let r = job("http://127.0.0.2:8000/", 0);
        assert!(p.link(&r, "http://127.0.0.2:9000/", false).is_ok());
        assert_eq!(
            p.link(&r, "http://127.0.0.3:8000/", false),
            Err(Rejection::OutOfScope)
        );
    }

    #[test]
    fn filters_allow_then_deny() {
        let p = policy(PolicyConfig {
            allow: vec![Regex::new("/docs/").unwrap()],
            deny: vec![Regex::new(r"\.pdf$").unwrap()],
            ..PolicyConfig::default()
        });
        let r = job("http://h/docs/", 0);
        assert!(p.link(&r, "/docs/a", false).is_ok());
        assert_eq!(p.link(&r, "/blog/a", false), Err(Rejection::Filtered));
        assert_eq!(p.link(&r, "/docs/a.pdf", false), Err(Rejection::Filtered));
    }

    #[test]
    fn traps_and_depth() {
        let p = policy(PolicyConfig {
            max_depth: Some(2),
            ..PolicyConfig::default()
        });
        let r = job("http://h/", 2);
        assert_eq!(p.link(&r, "/a", false), Err(Rejection::TooDeep));
        let r = job("http://h/", 0);
        assert!(matches!(
            p.link(&r, "/a/b/a/b/a/b/a/b", false),
            Err(Rejection::Trap(_))
        ));
        // At most three of one segment, wherever they are in the path.
        assert!(p.link(&r, "/a/b/a/b/a/b", false).is_ok());
        assert!(matches!(
            p.link(&r, "/a/x/a/y/a/z/a", false),
            Err(Rejection::Trap(_))
        ));
        let q: Vec<String> = (0..20).map(|i| format!("p{i}=1")).collect();
        assert!(matches!(
            p.link(&r, &format!("/?{}", q.join("&")), false),
            Err(Rejection::Trap(_))
        ));
    }

    #[test]
    fn redirects_keep_depth_and_count_hops() {
        let p = policy(PolicyConfig {
            max_redirect_hops: 2,
            ..PolicyConfig::default()
        });
        let mut r = job("http://h/a", 1);
        let l = p.link(&r, "/b", true).unwrap();
        assert_eq!((l.depth, l.redirect_hops), (1, 1));
        r.redirect_hops = 2;
        assert!(matches!(p.link(&r, "/c", true), Err(Rejection::Trap(_))));
    }
}
