//! robots.txt (RFC 9309) for the crawler, parsed and matched by `texting_robots`.
//!
//! **Which group applies.** Groups are matched against the *product token* of
//! the crawler's User-Agent: the text before its first `/`, trimmed. For the
//! default `web_crawler/0.1 (+https://github.com/web_crawler)` that is
//! `web_crawler`. Matching is case-insensitive and exact; when no group names
//! the token, the `*` group applies; all groups naming it are merged.
//!
//! **Percent-encoding.** `texting_robots` compares paths octet by octet, so
//! `Disallow: /%7Ejoe/` would not block `/~joe/`. Before parsing, the values
//! of rule lines are normalised as RFC 9309 2.2.2 asks, and so is every path
//! checked: `%XX` of an unreserved character (`A-Z a-z 0-9 - . _ ~`) is
//! decoded, other `%XX` keep their encoding with upper-case hex, and octets
//! outside ASCII are percent-encoded. Hence `/%7Ejoe/` and `/~joe/` are
//! equal, while `/a%2fb` (an encoded `/`, reserved) stays distinct from `/a/b`.
//!
//! **Special characters.** In a rule `*` is a wildcard and a final `$` an end
//! anchor; a rule names a literal `*` or `$` as `%2A` / `%24` (RFC 9309
//! 2.2.3), which the normal form above keeps encoded. A URL has no
//! wildcards, so its `*` and `$` are encoded the same way before matching:
//! `Disallow: /a-%2A.html` then blocks `/a-*.html`, and `Disallow: /foo-%24`
//! blocks `/foo-$` (as a prefix, not anchored).

use std::sync::Arc;
use std::time::Duration;

use texting_robots::Robot;
use url::Url;
use web_crawler_actors::{RobotsStatus, WhyUnreachable};

use crate::fetch::{FetchError, HttpFetcher, HttpResponse};

/// RFC 9309 2.5: crawlers must parse at least 500 KiB; this is what we read.
pub const MAX_ROBOTS_BYTES: usize = 500 * 1024;
/// RFC 9309 2.3.1.2: follow at least five consecutive redirects.
const MAX_REDIRECTS: usize = 5;
/// A larger Crawl-delay is treated as a day, so one file cannot park a host forever.
const MAX_CRAWL_DELAY: Duration = Duration::from_secs(24 * 60 * 60);

#[derive(Debug, Clone)]
enum Rules {
    AllowAll,
    DisallowAll,
    // texting_robots' Robot is not Clone; sharing it is cheaper anyway.
    Parsed(Arc<Robot>),
}

/// The rules of one origin's robots.txt for our user-agent token.
#[derive(Debug, Clone)]
pub struct Robots {
    rules: Rules,
    crawl_delay: Option<Duration>,
    sitemaps: Vec<String>,
    warning: Option<String>,
}

impl Robots {
    /// Parses a robots.txt body for `user_agent`, which may be the full
    /// User-Agent header value; only its product token is used (see module
    /// docs). A body that cannot be parsed allows everything and leaves a
    /// [`warning`](Self::warning).
    pub fn parse(body: &[u8], user_agent: &str) -> Robots {
        let token = product_token(user_agent);
        match Robot::new(token, &normalize_rule_lines(body)) {
            Ok(robot) => Robots {
                crawl_delay: robot.delay.map(|secs| {
                    // inf (or absurdly large) seconds fails the conversion.
                    Duration::try_from_secs_f32(secs)
                        .unwrap_or(MAX_CRAWL_DELAY)
                        .min(MAX_CRAWL_DELAY)
                }),
                sitemaps: robot.sitemaps.clone(),
                rules: Rules::Parsed(Arc::new(robot)),
                warning: None,
            },
            Err(e) => Robots {
                warning: Some(format!("robots.txt not parseable, allowing all: {e:#}")),
                ..Robots::allow_all()
            },
        }
    }

    pub fn allow_all() -> Robots {
        Robots {
            rules: Rules::AllowAll,
            crawl_delay: None,
            sitemaps: Vec::new(),
            warning: None,
        }
    }

    pub fn disallow_all() -> Robots {
        Robots {
            rules: Rules::DisallowAll,
            ..Robots::allow_all()
        }
    }

    /// Whether `url` (path and query; scheme and host are not checked, so use
    /// the Robots of the URL's own origin) may be crawled. `/robots.txt` is
    /// always allowed unless everything is disallowed.
    pub fn is_allowed(&self, url: &Url) -> bool {
        match &self.rules {
            Rules::AllowAll => true,
            Rules::DisallowAll => false,
            Rules::Parsed(robot) => {
                let mut target = url.path().to_string();
                if let Some(query) = url.query() {
                    target.push('?');
                    target.push_str(query);
                }
                let mut normalized = Vec::with_capacity(target.len());
                normalize_path(target.as_bytes(), &mut normalized);
                encode_specials(&mut normalized);
                // normalize_path only emits ASCII, so nothing is lost here.
                robot.allowed(&String::from_utf8_lossy(&normalized))
            }
        }
    }

    /// Crawl-delay of our group (non-standard but common), capped at a day.
    pub fn crawl_delay(&self) -> Option<Duration> {
        self.crawl_delay
    }

    /// Sitemap URLs as written; they apply whatever the group.
    pub fn sitemaps(&self) -> &[String] {
        &self.sitemaps
    }

    /// Why the file was ignored, if it was.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }
}

#[derive(Debug)]
pub struct RobotsFetch {
    pub robots: Robots,
    pub source: RobotsStatus,
    /// Status of the last response, if any response came.
    pub status: Option<u16>,
    pub error: Option<String>,
    /// The robots.txt text when fetched (lossy UTF-8, at most 500 KiB), for storage.
    pub body: Option<String>,
    /// Every response got on the way, by URL (redirects too), for archives.
    pub responses: Vec<(String, HttpResponse)>,
    /// Unreachable because the host refused the connection (see
    /// [`FetchError::Refused`]).
    pub refused: bool,
}

impl RobotsFetch {
    fn unreachable(status: Option<u16>, error: String) -> RobotsFetch {
        RobotsFetch {
            robots: Robots::disallow_all(),
            source: RobotsStatus::Unreachable,
            status,
            error: Some(error),
            body: None,
            responses: Vec::new(),
            refused: false,
        }
    }

    /// Why the tree is told it is unreachable; `None` when it is not.
    fn why_unreachable(&self) -> Option<WhyUnreachable> {
        if self.source != RobotsStatus::Unreachable {
            return None;
        }
        Some(match (&self.error, self.refused) {
            (_, true) => WhyUnreachable::Refused,
            (Some(error), false) => WhyUnreachable::Failed(error.clone()),
            (None, false) => WhyUnreachable::default(),
        })
    }
}

/// GET {origin}/robots.txt with the given fetcher; follows up to 5 redirects
/// (RFC 9309); body capped at 500 KiB (parse what was read).
pub async fn fetch_robots(fetcher: &HttpFetcher, origin: &Url) -> RobotsFetch {
    let mut responses = Vec::new();
    let mut fetched = follow_robots(fetcher, origin, &mut responses).await;
    fetched.responses = responses;
    fetched
}

/// [`fetch_robots`]'s requests, each response also pushed on `responses`.
async fn follow_robots(
    fetcher: &HttpFetcher,
    origin: &Url,
    responses: &mut Vec<(String, HttpResponse)>,
) -> RobotsFetch {
    let mut url = match robots_url(origin) {
        Ok(url) => url,
        Err(e) => return RobotsFetch::unreachable(None, e),
    };
    let mut seen = vec![url.clone()];
    loop {
        let resp = match fetcher.get_limited(&url, MAX_ROBOTS_BYTES).await {
            Ok(resp) => resp,
            Err(e) => {
                return RobotsFetch {
                    refused: matches!(e, FetchError::Refused),
                    ..RobotsFetch::unreachable(None, format!("{url}: {e}"))
                };
            }
        };
        responses.push((url.to_string(), resp.clone()));
        let status = Some(resp.status);
        match resp.status {
            200..=299 => {
                return RobotsFetch {
                    robots: Robots::parse(&resp.body, &fetcher.config().user_agent),
                    source: RobotsStatus::Fetched,
                    status,
                    error: None,
                    body: Some(text_for_storage(&resp.body)),
                    responses: Vec::new(),
                    refused: false,
                };
            }
            300..=399 => {
                let Some(location) = resp.location else {
                    return RobotsFetch::unreachable(
                        status,
                        format!("{url}: redirect without Location"),
                    );
                };
                let next = match url.join(location.trim()) {
                    Ok(next) if matches!(next.scheme(), "http" | "https") => next,
                    _ => {
                        return RobotsFetch::unreachable(
                            status,
                            format!("{url}: unusable redirect target {location:?}"),
                        );
                    }
                };
                if seen.contains(&next) {
                    return RobotsFetch::unreachable(status, format!("redirect loop at {next}"));
                }
                if seen.len() > MAX_REDIRECTS {
                    return RobotsFetch::unreachable(
                        status,
                        format!("more than {MAX_REDIRECTS} redirects from {}", seen[0]),
                    );
                }
                seen.push(next.clone());
                url = next;
            }
            // Google treats 429 like a server error: the site asks us to back off.
            429 => return RobotsFetch::unreachable(status, format!("{url}: HTTP 429")),
            400..=499 => {
                return RobotsFetch {
                    robots: Robots::allow_all(),
                    source: RobotsStatus::NotFound,
                    status,
                    error: None,
                    body: None,
                    responses: Vec::new(),
                    refused: false,
                };
            }
            other => return RobotsFetch::unreachable(status, format!("{url}: HTTP {other}")),
        }
    }
}

fn robots_url(origin: &Url) -> Result<Url, String> {
    if !matches!(origin.scheme(), "http" | "https") || origin.host_str().is_none() {
        return Err(format!("{origin}: not an http(s) origin"));
    }
    let mut url = origin.clone();
    url.set_path("/robots.txt");
    url.set_query(None);
    url.set_fragment(None);
    // Cannot fail: the URL has a host.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    Ok(url)
}

/// Lossy UTF-8, cut back to 500 KiB on a character boundary (replacement
/// characters can make the text longer than the bytes read).
fn text_for_storage(body: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(body).into_owned();
    text.truncate(text.floor_char_boundary(MAX_ROBOTS_BYTES));
    text
}

/// The product token of a User-Agent: text before the first '/', trimmed;
/// `*` when that is empty.
fn product_token(user_agent: &str) -> &str {
    let token = user_agent.split('/').next().unwrap_or("").trim();
    if token.is_empty() { "*" } else { token }
}

/// Normalises the paths in rule lines (see module docs). Sitemap lines keep
/// their URL verbatim; other lines are normalised whole, which is harmless
/// for keys, user-agent tokens, delays and comments (all ASCII, no `%`).
fn normalize_rule_lines(body: &[u8]) -> Vec<u8> {
    // texting_robots strips a BOM itself, but only before encoding would hide it.
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let mut out = Vec::with_capacity(body.len() + body.len() / 8);
    // texting_robots reads a NUL as a line end too.
    for line in body.split_inclusive(|&b| matches!(b, b'\n' | b'\r' | 0)) {
        if is_empty_disallow(line) {
            // texting_robots reads an empty `Disallow:` as `Allow: /`, which
            // then ties with `Disallow: /` and wins it. RFC 9309 gives an
            // empty rule no effect: an empty `Allow:` (which matches with
            // length 0, so never wins) keeps the line, and so the group.
            out.extend_from_slice(b"Allow:");
            out.extend(line.iter().filter(|&&b| matches!(b, b'\n' | b'\r' | 0)));
        } else if is_sitemap_line(line) {
            out.extend_from_slice(line);
        } else {
            normalize_path(line, &mut out);
        }
    }
    out
}

/// A `Disallow` line (under any spelling texting_robots takes) with no
/// path: only spaces or tabs, maybe a comment.
fn is_empty_disallow(line: &[u8]) -> bool {
    const KEYS: [&[u8]; 6] = [
        b"disallow",
        b"dissallow",
        b"dissalow",
        b"disalow",
        b"diasllow",
        b"disallaw",
    ];
    let is_space = |b: &u8| matches!(b, b' ' | b'\t');
    let start = line.iter().position(|b| !is_space(b)).unwrap_or(line.len());
    let line = &line[start..];
    let Some(key) = KEYS
        .iter()
        .find(|k| line.len() >= k.len() && line[..k.len()].eq_ignore_ascii_case(k))
    else {
        return false;
    };
    let rest = &line[key.len()..];
    let after_spaces = &rest[rest.iter().position(|b| !is_space(b)).unwrap_or(rest.len())..];
    let value = match after_spaces.strip_prefix(b":") {
        Some(value) => value,
        // `Disallow /x`: the key and its value apart by spaces alone.
        None if rest.first().is_some_and(is_space) => rest,
        None => return false,
    };
    value
        .iter()
        .take_while(|&&b| !matches!(b, b'#' | b'\n' | b'\r' | 0))
        .all(is_space)
}

fn is_sitemap_line(line: &[u8]) -> bool {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    let key = &line[start..line.len().min(start + 8)];
    ["sitemap", "site-map", "site map"]
        .iter()
        .any(|k| key.len() >= k.len() && key[..k.len()].eq_ignore_ascii_case(k.as_bytes()))
}

/// RFC 9309 2.2.2 normal form: decode `%XX` of unreserved characters,
/// upper-case the hex of the other escapes, percent-encode non-ASCII octets.
fn normalize_path(input: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b == b'%'
            && let (Some(hi), Some(lo)) = (
                input.get(i + 1).copied().and_then(hex),
                input.get(i + 2).copied().and_then(hex),
            )
        {
            let decoded = hi << 4 | lo;
            if decoded.is_ascii_alphanumeric() || b"-._~".contains(&decoded) {
                out.push(decoded);
            } else {
                out.extend_from_slice(&[b'%', HEX[hi as usize], HEX[lo as usize]]);
            }
            i += 3;
            continue;
        }
        if b.is_ascii() {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        }
        i += 1;
    }
}

/// Percent-encodes `*` and `$` of a URL being checked (see module docs): a
/// rule can only name them encoded, and texting_robots would compare `%2A`
/// with `*` octet by octet and miss. Rules are not passed through here, so
/// their own `*` and `$` stay wildcard and anchor.
fn encode_specials(path: &mut Vec<u8>) {
    if !path.iter().any(|&b| b == b'*' || b == b'$') {
        return;
    }
    let mut out = Vec::with_capacity(path.len() + 4);
    for &b in path.iter() {
        match b {
            b'*' => out.extend_from_slice(b"%2A"),
            b'$' => out.extend_from_slice(b"%24"),
            _ => out.push(b),
        }
    }
    *path = out;
}

impl web_crawler_actors::RobotsRules for Robots {
    fn is_allowed(&self, url: &str) -> bool {
        // A URL that does not parse is never fetched anyway.
        Url::parse(url).is_ok_and(|u| Robots::is_allowed(self, &u))
    }

    fn crawl_delay_ms(&self) -> Option<u64> {
        self.crawl_delay().map(|d| d.as_millis() as u64)
    }
}

/// Fetch robots.txt of `host` (`host[:port]`) for the tree: the rules and
/// the `hosts` record to store.
pub async fn robots_report(
    fetcher: &HttpFetcher,
    scheme: &str,
    host: &str,
) -> web_crawler_actors::RobotsReport {
    let mut fetched = match Url::parse(&format!("{scheme}://{host}/")) {
        Ok(origin) => fetch_robots(fetcher, &origin).await,
        Err(e) => RobotsFetch::unreachable(None, format!("bad origin {scheme}://{host}: {e}")),
    };
    let record = web_crawler_actors::HostRecord {
        host: host.to_string(),
        robots_status: fetched.source,
        robots_http_code: fetched.status,
        robots_error: fetched
            .error
            .clone()
            .or_else(|| fetched.robots.warning().map(str::to_string)),
        robots_txt: fetched.body.clone(),
        robots_fetched_at: web_crawler_actors::now_ms(),
        crawl_delay_ms: fetched.robots.crawl_delay().map(|d| d.as_millis() as u64),
        sitemaps: fetched.robots.sitemaps().to_vec(),
    };
    web_crawler_actors::RobotsReport {
        unreachable: fetched.why_unreachable(),
        rules: std::sync::Arc::new(fetched.robots),
        record,
        responses: std::mem::take(&mut fetched.responses)
            .into_iter()
            .map(|(url, resp)| (url, resp.into()))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::FetchConfig;
    use web_crawler_testsupport::raw::closed_port_addr;
    use web_crawler_testsupport::{Page, serve, url_for};

    const UA: &str = "web_crawler/0.1 (+https://github.com/web_crawler)";

    fn allowed(robots: &Robots, path: &str) -> bool {
        robots.is_allowed(&Url::parse(&format!("http://example.com{path}")).unwrap())
    }

    #[test]
    fn product_token_is_text_before_slash() {
        assert_eq!(product_token(UA), "web_crawler");
        assert_eq!(product_token("web_crawler"), "web_crawler");
        assert_eq!(product_token(" Other /1"), "Other");
        assert_eq!(product_token(""), "*");
    }

    #[test]
    fn longest_match_wins_and_allow_wins_ties() {
        let r = Robots::parse(
            b"User-agent: *\nDisallow: /shop\nAllow: /shop/public\nDisallow: /shop/public/secret\n\
              Allow: /page\nDisallow: /page\n",
            UA,
        );
        assert!(!allowed(&r, "/shop"));
        assert!(!allowed(&r, "/shop/cart"));
        assert!(allowed(&r, "/shop/public/item"));
        assert!(!allowed(&r, "/shop/public/secret/x"));
        assert!(allowed(&r, "/page"), "equal length: allow wins");
        assert!(allowed(&r, "/elsewhere"));
        assert!(allowed(&r, "/robots.txt"));
        assert!(r.warning().is_none());
    }

    #[test]
    fn wildcards() {
        let r = Robots::parse(
            b"User-agent: *\nDisallow: /*.pdf$\nDisallow: /private*/data\nDisallow: /*?session=\n\
              Allow: /exact$\nDisallow: /exact\n",
            UA,
        );
        assert!(!allowed(&r, "/docs/file.pdf"));
        assert!(allowed(&r, "/docs/file.pdf?x=1"), "$ anchors the end");
        assert!(allowed(&r, "/docs/file.pdfx"));
        assert!(!allowed(&r, "/private-area/data/1"));
        assert!(allowed(&r, "/private-area/other"));
        assert!(!allowed(&r, "/list?session=abc"));
        assert!(allowed(&r, "/list?page=2"));
        assert!(allowed(&r, "/exact"));
        assert!(!allowed(&r, "/exact/more"));
    }

    #[test]
    fn our_group_beats_star_and_matches_case_insensitively() {
        let body = b"User-agent: *\nDisallow: /\n\nUser-agent: Web_Crawler\nDisallow: /private\n\
                     Crawl-delay: 2.5\n\nUser-agent: otherbot\nDisallow: /other\n";
        let ours = Robots::parse(body, UA);
        assert!(allowed(&ours, "/public"));
        assert!(!allowed(&ours, "/private/x"));
        assert_eq!(ours.crawl_delay(), Some(Duration::from_millis(2500)));
        let stranger = Robots::parse(body, "somebot/2.0");
        assert!(!allowed(&stranger, "/public"));
        assert_eq!(stranger.crawl_delay(), None);
    }

    #[test]
    fn star_group_applies_when_we_are_not_named() {
        let r = Robots::parse(
            b"User-agent: googlebot\nDisallow: /\n\nUser-agent: *\nDisallow: /tmp/\nCrawl-delay: 7\n",
            UA,
        );
        assert!(allowed(&r, "/index.html"));
        assert!(!allowed(&r, "/tmp/x"));
        assert_eq!(r.crawl_delay(), Some(Duration::from_secs(7)));
    }

    #[test]
    fn crawl_delay_is_capped() {
        let r = Robots::parse(b"User-agent: *\nCrawl-delay: 1e30\n", UA);
        assert_eq!(r.crawl_delay(), Some(MAX_CRAWL_DELAY));
        let r = Robots::parse(b"User-agent: *\nCrawl-delay: inf\n", UA);
        assert_eq!(r.crawl_delay(), Some(MAX_CRAWL_DELAY));
        let r = Robots::parse(b"User-agent: *\nCrawl-delay: -3\nCrawl-delay: soon\n", UA);
        assert_eq!(r.crawl_delay(), None);
    }

    #[test]
    fn sitemaps_are_collected_verbatim() {
        let r = Robots::parse(
            b"Sitemap: https://example.com/sitemap.xml\nUser-agent: otherbot\nDisallow: /\n\
              sitemap: https://example.com/news%7e.xml\n",
            UA,
        );
        assert_eq!(
            r.sitemaps(),
            [
                "https://example.com/sitemap.xml",
                "https://example.com/news%7e.xml"
            ]
        );
    }

    #[test]
    fn percent_encoding_is_normalised() {
        let r = Robots::parse(
            b"User-agent: *\nDisallow: /%7Ejoe/\nDisallow: /a%2fb\nDisallow: /caf\xc3\xa9\n\
              Disallow: /%e3%83%84\n",
            UA,
        );
        // %7E is unreserved '~': both spellings are the same path.
        assert!(!allowed(&r, "/~joe/x"));
        assert!(!allowed(&r, "/%7ejoe/x"));
        // %2F is a reserved '/': an encoded slash is not a path separator.
        assert!(allowed(&r, "/a/b"));
        assert!(!allowed(&r, "/a%2Fb"));
        assert!(!allowed(&r, "/a%2fb"));
        // Non-ASCII in the rule matches the URL's UTF-8 percent-encoding.
        assert!(!allowed(&r, "/café"));
        assert!(!allowed(&r, "/%E3%83%84/x"));
        assert!(!allowed(&r, "/\u{30c4}/x"));
        // And the reverse: an encoded unreserved char in the URL is decoded.
        let r = Robots::parse(b"User-agent: *\nDisallow: /baz\n", UA);
        assert!(!allowed(&r, "/%62%61%7A"));
    }

    #[test]
    fn encoded_special_characters_are_literal() {
        let r = Robots::parse(
            b"User-agent: *\nDisallow: /path/file-with-a-%2A.html\nDisallow: /path/foo-%24\n\
              Disallow: /wild/*.html$\n",
            UA,
        );
        let check = |url: &str| r.is_allowed(&Url::parse(url).unwrap());
        // RFC 9309 2.2.3's examples: %2A is a literal '*', %24 a literal '$'.
        assert!(!check("http://h/path/file-with-a-*.html"));
        assert!(!check("http://h/path/file-with-a-%2A.html"));
        assert!(check("http://h/path/file-with-a-X.html"), "not a wildcard");
        assert!(!check("http://h/path/foo-$"));
        assert!(!check("http://h/path/foo-$/more"), "not an end anchor");
        assert!(check("http://h/path/foo-"));
        // Unencoded, they keep their meaning, also against a literal '*' in the URL.
        assert!(!check("http://h/wild/a/b.html"));
        assert!(!check("http://h/wild/*.html"));
        assert!(check("http://h/wild/a.html?x=1"));
    }

    #[test]
    fn empty_disallow_and_empty_file_allow_all() {
        assert!(allowed(
            &Robots::parse(b"User-agent: *\nDisallow:\n", UA),
            "/x"
        ));
        assert!(allowed(&Robots::parse(b"", UA), "/x"));
        assert!(allowed(
            &Robots::parse(b"\xEF\xBB\xBFUser-agent: *\nDisallow: /x/\n", UA),
            "/y"
        ));
        assert!(!allowed(
            &Robots::parse(b"\xEF\xBB\xBFUser-agent: *\nDisallow: /x/\n", UA),
            "/x/1"
        ));
    }

    #[test]
    fn garbage_does_not_panic() {
        let mut junk: Vec<u8> = (0..=255u8).cycle().take(64 * 1024).collect();
        junk.extend_from_slice(b"\n%%%\n%zz%4\nDisallow: %\nAllow: *$*$$\nUser-agent:\n\0\0\r\r\n");
        let r = Robots::parse(&junk, UA);
        let _ = allowed(&r, "/anything");
        let html = Robots::parse(b"<html><body><h1>Welcome</h1></body></html>", UA);
        assert!(allowed(&html, "/x"));
        // A pseudo-random byte soup, several seeds.
        let mut x: u32 = 12345;
        for _ in 0..20 {
            let soup: Vec<u8> = (0..4096)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            let _ = allowed(&Robots::parse(&soup, UA), "/x");
        }
    }

    #[test]
    fn allow_all_and_disallow_all() {
        assert!(allowed(&Robots::allow_all(), "/anything"));
        assert!(!allowed(&Robots::disallow_all(), "/anything"));
        assert!(!allowed(&Robots::disallow_all(), "/robots.txt"));
        assert!(Robots::disallow_all().sitemaps().is_empty());
    }

    fn fetcher() -> HttpFetcher {
        HttpFetcher::new(FetchConfig {
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(2),
            total_timeout: Duration::from_secs(10),
            ..FetchConfig::default()
        })
        .unwrap()
    }

    fn text(status: u16, headers: &[(&str, &str)], body: &str) -> Page {
        Page::new(status, headers, body)
    }

    #[tokio::test]
    async fn fetched_robots_are_parsed() {
        let server = serve(|req| {
            assert_eq!(req.uri().path(), "/robots.txt");
            text(
                200,
                &[],
                "User-agent: web_crawler\nDisallow: /no\nSitemap: http://x/s.xml\n",
            )
        })
        .await;
        // Path, query and credentials of the origin are ignored.
        let mut origin = server.parsed_url("/some/page?q=1");
        origin.set_username("user").unwrap();
        let got = fetch_robots(&fetcher(), &origin).await;
        assert_eq!(got.source, RobotsStatus::Fetched);
        assert_eq!(got.status, Some(200));
        assert!(got.error.is_none());
        assert!(got.body.unwrap().contains("Disallow: /no"));
        assert!(!got.robots.is_allowed(&server.parsed_url("/no/x")));
        assert!(got.robots.is_allowed(&server.parsed_url("/yes")));
        assert_eq!(got.robots.sitemaps(), ["http://x/s.xml"]);
    }

    #[tokio::test]
    async fn oversize_robots_is_cut_and_parsed() {
        let mut big = String::from("User-agent: *\nDisallow: /early\n");
        while big.len() < 2 * MAX_ROBOTS_BYTES {
            big.push_str("# padding padding padding padding padding padding\n");
        }
        big.push_str("Disallow: /late\n");
        let server = serve(move |_| text(200, &[], &big)).await;
        let got = fetch_robots(&fetcher(), &server.parsed_url("/")).await;
        assert_eq!(got.source, RobotsStatus::Fetched);
        assert_eq!(got.body.unwrap().len(), MAX_ROBOTS_BYTES);
        assert!(!got.robots.is_allowed(&server.parsed_url("/early")));
        assert!(
            got.robots.is_allowed(&server.parsed_url("/late")),
            "beyond the cap"
        );
    }

    #[tokio::test]
    async fn not_found_allows_all() {
        let server = serve(|_| text(404, &[], "<h1>Not Found</h1>")).await;
        let got = fetch_robots(&fetcher(), &server.parsed_url("/")).await;
        assert_eq!(got.source, RobotsStatus::NotFound);
        assert_eq!(got.status, Some(404));
        assert!(got.body.is_none());
        assert!(got.robots.is_allowed(&server.parsed_url("/anything")));
    }

    #[tokio::test]
    async fn server_error_and_429_disallow_all() {
        let server = serve(|_| text(503, &[], "down")).await;
        let got = fetch_robots(&fetcher(), &server.parsed_url("/")).await;
        assert_eq!(got.source, RobotsStatus::Unreachable);
        assert_eq!(got.status, Some(503));
        assert!(got.error.is_some());
        assert!(!got.robots.is_allowed(&server.parsed_url("/anything")));

        let server = serve(|_| text(429, &[("retry-after", "60")], "slow down")).await;
        let got = fetch_robots(&fetcher(), &server.parsed_url("/")).await;
        assert_eq!(got.source, RobotsStatus::Unreachable);
        assert_eq!(got.status, Some(429));
    }

    #[tokio::test]
    async fn connection_refused_disallows_all() {
        let origin = url_for(closed_port_addr(), "/");
        let got = fetch_robots(&fetcher(), &origin).await;
        assert_eq!(got.source, RobotsStatus::Unreachable);
        assert_eq!(got.status, None);
        assert_eq!(got.why_unreachable(), Some(WhyUnreachable::Refused));
        let error = got.error.clone().unwrap();
        assert!(
            error.ends_with("/robots.txt: connection refused"),
            "{error}"
        );
        assert!(!got.robots.is_allowed(&origin));
    }

    #[tokio::test]
    async fn redirect_to_other_path_is_followed() {
        let server = serve(|req| match req.uri().path() {
            "/robots.txt" => text(301, &[("location", "/moved/robots.txt")], ""),
            "/moved/robots.txt" => text(302, &[("location", "final.txt")], ""),
            "/moved/final.txt" => text(200, &[], "User-agent: *\nDisallow: /blocked\n"),
            _ => text(404, &[], ""),
        })
        .await;
        let got = fetch_robots(&fetcher(), &server.parsed_url("/")).await;
        assert_eq!(got.source, RobotsStatus::Fetched);
        assert_eq!(got.status, Some(200));
        assert!(!got.robots.is_allowed(&server.parsed_url("/blocked")));
        assert_eq!(server.total_hits(), 3);
    }

    #[tokio::test]
    async fn redirect_loop_is_unreachable() {
        let server = serve(|req| {
            let next = if req.uri().path() == "/robots.txt" {
                "/b"
            } else {
                "/robots.txt"
            };
            text(302, &[("location", next)], "")
        })
        .await;
        let got = fetch_robots(&fetcher(), &server.parsed_url("/")).await;
        assert_eq!(got.source, RobotsStatus::Unreachable);
        assert_eq!(got.status, Some(302));
        assert!(got.error.unwrap().contains("loop"));
        assert!(!got.robots.is_allowed(&server.parsed_url("/x")));
        assert_eq!(server.total_hits(), 2);
    }

    #[tokio::test]
    async fn too_many_redirects_is_unreachable() {
        // Each hop goes somewhere new, so only the count stops it.
        let server = serve(|req| {
            let n: u32 = req
                .uri()
                .path()
                .trim_start_matches("/r")
                .parse()
                .unwrap_or(0);
            text(302, &[("location", &format!("/r{}", n + 1))], "")
        })
        .await;
        let got = fetch_robots(&fetcher(), &server.parsed_url("/")).await;
        assert_eq!(got.source, RobotsStatus::Unreachable);
        assert!(got.error.unwrap().contains("more than 5 redirects"));
        // The first request plus five followed redirects.
        assert_eq!(server.total_hits(), 6);
    }

    /// Robots are fetched on a multi-threaded runtime and shared across
    /// actors, so these must stay Send/Sync; this fails to compile otherwise.
    #[test]
    fn robots_types_are_send_and_sync() {
        fn send_sync<T: Send + Sync>(_: &T) {}
        fn send<T: Send>(_: &T) {}
        let f = fetcher();
        let url = Url::parse("http://127.0.0.1:9/").unwrap();
        send(&fetch_robots(&f, &url));
        send_sync(&Robots::allow_all());
    }

    #[tokio::test]
    async fn binary_robots_body_does_not_panic() {
        let server = serve(|_| {
            let soup: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
            Page::new(200, &[], soup)
        })
        .await;
        let got = fetch_robots(&fetcher(), &server.parsed_url("/")).await;
        assert_eq!(got.source, RobotsStatus::Fetched);
        let _ = got.robots.is_allowed(&server.parsed_url("/x"));
    }
}

#[cfg(test)]
mod proptests;
