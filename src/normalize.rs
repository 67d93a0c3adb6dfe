//! URL normalization for the crawler's URL-seen dedupe.
//!
//! Invariant: URLs a server must treat as the same resource normalize to the same string, and
//! URLs that may legitimately differ are never merged. Only RFC 3986 "safe" normalizations are
//! applied by default, and so is tracking-parameter stripping; query sorting is opt-in.

use url::{Host, Url};

/// URLs longer than this (after normalization) are rejected: they are almost always crawler
/// traps or session-id soup, and many servers refuse them anyway.
pub const MAX_URL_LEN: usize = 2048;

/// How many bytes of an offending URL an error message quotes, so log lines stay bounded.
const QUOTE_MAX: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NormalizeOptions {
    /// drop utm_*, gclid, fbclid, mc_cid, mc_eid, yclid, msclkid, _ga, igshid query parameters
    /// (on by default: the same page under a campaign URL is not fetched again)
    pub strip_tracking_params: bool,
    /// sort query parameters by key (stable for equal keys)
    pub sort_query: bool,
}

impl Default for NormalizeOptions {
    fn default() -> Self {
        Self {
            strip_tracking_params: true,
            sort_query: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// The URL parser rejected the input. Holds the quoted (truncated) input and the parser's
    /// reason, e.g. `"http://exa mple.com/": invalid domain character`.
    #[error("invalid URL {0}")]
    Parse(String),
    /// Not an absolute URL: no scheme (`127.0.0.1:8080`, `example.com/docs`) or a path alone
    /// (`/docs/`), as a user may type it. `url` is the input, truncated; `suggestion` the input
    /// with `http://` in front, when that makes an http URL with a host.
    #[error("invalid URL {url:?}: {}", not_absolute_advice(.suggestion.as_deref()))]
    NotAbsolute {
        url: String,
        suggestion: Option<String>,
    },
    /// Parsed fine, but is not http/https (mailto:, javascript:, data:, ftp:, ...). Holds the
    /// offending URL, truncated.
    #[error("unsupported URL scheme (only http and https are crawled): {0:?}")]
    UnsupportedScheme(String),
    /// http(s) URL without a usable host (`http://`, `http://./`). Holds the offending URL,
    /// truncated.
    #[error("URL has no host: {0:?}")]
    MissingHost(String),
    /// Longer than `max` bytes after normalization. `url` is the normalized URL, truncated.
    #[error("URL is {len} bytes after normalization, over the {max}-byte limit: {url:?}")]
    TooLong { len: usize, max: usize, url: String },
}

/// Absolute URL → normalized URL (only http/https accepted). The input is read as
/// [`parse_user_url`] reads it: a user's URL without a scheme is refused with the URL to write.
pub fn normalize(input: &str, opts: &NormalizeOptions) -> Result<Url, UrlError> {
    let input = input.trim();
    let url = parse_user_url(input)?;
    finish(url, input, opts)
}

/// A URL as a user gives it — a seed on the command line, `add_url`, `--webhook` — parsed,
/// not normalized: trimmed of whitespace, absolute, http or https, with a host. The one
/// function every user-given URL goes through, so each mistake gets the same one line.
///
/// One typed without a scheme (`127.0.5.1:8091`, `example.com/docs`, `localhost:8080`) is
/// [`UrlError::NotAbsolute`] with the URL to write instead (`http://127.0.5.1:8091/`), rather
/// than the parser's "relative URL without a base" (or, for `localhost:8080`, "unsupported
/// scheme `localhost`").
pub fn parse_user_url(input: &str) -> Result<Url, UrlError> {
    let input = input.trim();
    let not_absolute = || UrlError::NotAbsolute {
        url: clip(input),
        suggestion: with_http(input),
    };
    let url = match Url::parse(input) {
        Ok(url) => url,
        Err(url::ParseError::RelativeUrlWithoutBase) => return Err(not_absolute()),
        Err(e) => return Err(parse_error(input, e)),
    };
    if !is_http(&url) {
        // `localhost:8080/x` parses as the scheme `localhost`: a host and a port.
        if looks_like_host_and_port(input) && with_http(input).is_some() {
            return Err(not_absolute());
        }
        return Err(UrlError::UnsupportedScheme(clip(input)));
    }
    let has_host = url
        .host_str()
        .is_some_and(|h| !h.bytes().all(|b| b == b'.'));
    if !has_host {
        return Err(UrlError::MissingHost(clip(input)));
    }
    Ok(url)
}

/// `input` with `http://` in front (`http:` before `//host/…`), when that is an http URL with
/// a host: the URL a user who left the scheme out meant.
fn with_http(input: &str) -> Option<String> {
    let candidate = if input.starts_with("//") {
        format!("http:{input}")
    } else if input.contains("://") || input.is_empty() || input.starts_with('/') {
        // A scheme of its own, nothing, or a path alone: no host to put after `http://`.
        return None;
    } else {
        format!("http://{input}")
    };
    let url = Url::parse(&candidate).ok()?;
    let host = url.host_str()?;
    (!host.bytes().all(|b| b == b'.') && url.as_str().len() <= QUOTE_MAX).then(|| url.into())
}

/// `host:8080`, `host:8080/path`: what the parser takes for a scheme is a host, as the part
/// after the colon is a port.
fn looks_like_host_and_port(input: &str) -> bool {
    let Some((_, rest)) = input.split_once(':') else {
        return false;
    };
    let port = rest.split(['/', '?', '#']).next().unwrap_or("");
    !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
}

/// What [`UrlError::NotAbsolute`] says after the URL.
fn not_absolute_advice(suggestion: Option<&str>) -> String {
    match suggestion {
        Some(url) => format!("it has no scheme; try {url}"),
        None => "not an absolute URL (one starts with http:// or https:// and a host)".to_string(),
    }
}

/// Resolve href (relative or absolute, trimmed of ASCII whitespace, as browsers do) against
/// base, then normalize. javascript:, mailto:, tel:, data: etc → UnsupportedScheme.
pub fn resolve(base: &Url, href: &str, opts: &NormalizeOptions) -> Result<Url, UrlError> {
    // HTML strips leading/trailing ASCII whitespace from URL attributes before parsing.
    let href = href.trim_matches(|c: char| c.is_ascii_whitespace());
    let url = base.join(href).map_err(|e| parse_error(href, e))?;
    finish(url, href, opts)
}

/// Normalize an already-parsed http(s) Url in place (used by both above).
///
/// Non-http(s) URLs are left untouched: the rules below are only known to be safe for HTTP.
pub fn normalize_url(url: &mut Url, opts: &NormalizeOptions) {
    if !is_http(url) {
        return;
    }
    // The url crate already lower-cases scheme and host, applies IDNA, drops default ports,
    // resolves (also percent-encoded) dot segments and guarantees a non-empty path.
    url.set_fragment(None);
    strip_host_trailing_dots(url);
    if let Some(path) = normalize_percent(url.path()) {
        // Decoding only yields unreserved characters, which set_path keeps verbatim, so this
        // cannot re-encode anything or create a new dot segment ("%2E" segments are already
        // gone after parsing).
        url.set_path(&path);
    }
    normalize_query(url, opts);
}

fn is_http(url: &Url) -> bool {
    matches!(url.scheme(), "http" | "https")
}

/// Shared tail of `normalize` and `resolve`: scheme check, normalization, host and length
/// checks. `shown` is what error messages quote (what the caller passed in).
fn finish(mut url: Url, shown: &str, opts: &NormalizeOptions) -> Result<Url, UrlError> {
    if !is_http(&url) {
        return Err(UrlError::UnsupportedScheme(clip(shown)));
    }
    normalize_url(&mut url, opts);
    // A host made only of dots ("http://./") survives parsing but names nothing.
    let has_host = url
        .host_str()
        .is_some_and(|h| !h.bytes().all(|b| b == b'.'));
    if !has_host {
        return Err(UrlError::MissingHost(clip(shown)));
    }
    let len = url.as_str().len();
    if len > MAX_URL_LEN {
        return Err(UrlError::TooLong {
            len,
            max: MAX_URL_LEN,
            url: clip(url.as_str()),
        });
    }
    Ok(url)
}

fn parse_error(input: &str, err: url::ParseError) -> UrlError {
    match err {
        url::ParseError::EmptyHost => UrlError::MissingHost(clip(input)),
        _ => UrlError::Parse(format!("{:?}: {err}", clip(input))),
    }
}

/// First ~QUOTE_MAX bytes of `s` (on a char boundary), with an ellipsis if cut.
fn clip(s: &str) -> String {
    if s.len() <= QUOTE_MAX {
        return s.to_owned();
    }
    format!("{}…", &s[..s.floor_char_boundary(QUOTE_MAX)])
}

/// `example.com.` and `example.com` are the same DNS name (the former is just fully
/// qualified), so keep one spelling. All trailing dots go, which keeps this idempotent.
fn strip_host_trailing_dots(url: &mut Url) {
    let trimmed = match url.host() {
        Some(Host::Domain(d)) if d.ends_with('.') => d.trim_end_matches('.').to_owned(),
        _ => return,
    };
    if !trimmed.is_empty() {
        // Cannot fail: it is a suffix-trimmed version of a host the parser already accepted.
        let _ = url.set_host(Some(&trimmed));
    }
}

fn normalize_query(url: &mut Url, opts: &NormalizeOptions) {
    let Some(query) = url.query() else { return };
    if query.is_empty() {
        // "http://a/?" and "http://a/" are the same request for every real server.
        url.set_query(None);
        return;
    }
    let mut new = normalize_percent(query);
    if opts.strip_tracking_params || opts.sort_query {
        let current = new.as_deref().unwrap_or(query);
        // Empty pairs ("a=1&&b=2") are dropped only here: the caller opted into treating the
        // query as an unordered key=value list, under which they carry no meaning.
        let mut pairs: Vec<&str> = current.split('&').filter(|p| !p.is_empty()).collect();
        if opts.strip_tracking_params {
            pairs.retain(|p| !is_tracking_param(query_key(p)));
        }
        if opts.sort_query {
            // sort_by is stable, so repeated keys keep their relative order (a=1&a=2 ≠ a=2&a=1
            // for many servers).
            pairs.sort_by(|a, b| query_key(a).cmp(query_key(b)));
        }
        let rebuilt = pairs.join("&");
        let changed = rebuilt != current;
        if changed {
            new = Some(rebuilt);
        }
    }
    match new {
        Some(q) if q.is_empty() => url.set_query(None),
        Some(q) => url.set_query(Some(&q)),
        None => {}
    }
}

fn query_key(pair: &str) -> &str {
    pair.split_once('=').map_or(pair, |(k, _)| k)
}

fn is_tracking_param(key: &str) -> bool {
    // ASCII case-insensitive: "UTM_Source" is still a tracking tag, never an app parameter.
    const EXACT: [&str; 8] = [
        "gclid", "fbclid", "mc_cid", "mc_eid", "yclid", "msclkid", "_ga", "igshid",
    ];
    let is_utm = key.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("utm_"));
    is_utm || EXACT.iter().any(|t| key.eq_ignore_ascii_case(t))
}

/// Upper-cases the hex digits of every percent-encoding and decodes the ones that stand for
/// unreserved characters (RFC 3986 §6.2.2.1–2). Reserved characters stay encoded: `%2F` is not
/// `/` to a server. Malformed escapes (`%`, `%zz`) are left alone. Returns None when nothing
/// changes so the common case does not allocate.
fn normalize_percent(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            i += 1;
            continue;
        }
        let (Some(hi), Some(lo)) = (
            bytes.get(i + 1).copied().and_then(hex_value),
            bytes.get(i + 2).copied().and_then(hex_value),
        ) else {
            i += 1;
            continue;
        };
        let value = (hi << 4) | lo;
        // A decoded hex digit after `%` or `%H` would make an escape that
        // was not there (`%a%30` → `%a0`): a server reads that as another
        // byte, and a second pass would change it again. It stays encoded.
        // The output so far is what was written to `out`, then the input
        // from `copied` up to `i`.
        let written = out.as_deref().map_or(&b""[..], str::as_bytes);
        let pending = if out.is_some() {
            &bytes[copied..i]
        } else {
            &bytes[..i]
        };
        let back = |k: usize| match pending.len().checked_sub(k) {
            Some(at) => pending.get(at).copied(),
            None => written
                .len()
                .checked_sub(k - pending.len())
                .and_then(|at| written.get(at).copied()),
        };
        let makes_escape = value.is_ascii_hexdigit()
            && (back(1) == Some(b'%')
                || (back(2) == Some(b'%') && back(1).is_some_and(|b| b.is_ascii_hexdigit())));
        let decode = is_unreserved(value) && !makes_escape;
        let already_upper =
            !bytes[i + 1].is_ascii_lowercase() && !bytes[i + 2].is_ascii_lowercase();
        if decode || !already_upper {
            let o = out.get_or_insert_with(|| String::with_capacity(s.len()));
            // `%` is ASCII, so i and copied are char boundaries.
            o.push_str(&s[copied..i]);
            if decode {
                o.push(char::from(value));
            } else {
                o.push('%');
                o.push(char::from(HEX_UPPER[usize::from(hi)]));
                o.push(char::from(HEX_UPPER[usize::from(lo)]));
            }
            copied = i + 3;
        }
        i += 3;
    }
    out.map(|mut o| {
        o.push_str(&s[copied..]);
        o
    })
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> NormalizeOptions {
        NormalizeOptions {
            strip_tracking_params: false,
            sort_query: false,
        }
    }

    fn all_opts() -> NormalizeOptions {
        NormalizeOptions {
            strip_tracking_params: true,
            sort_query: true,
        }
    }

    fn norm(s: &str) -> String {
        normalize(s, &plain())
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .to_string()
    }

    /// (input, expected) with default options; each row exercises one rule.
    const TABLE: &[(&str, &str)] = &[
        // lower-case scheme and host
        ("HTTP://Example.COM/", "http://example.com/"),
        (
            "hTTpS://WWW.Example.Com/Path",
            "https://www.example.com/Path",
        ),
        // empty path → "/"
        ("http://example.com", "http://example.com/"),
        ("http://example.com?q=1", "http://example.com/?q=1"),
        // default ports dropped, other ports kept
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:443/a", "http://example.com:443/a"),
        ("https://example.com:80/", "https://example.com:80/"),
        ("http://example.com:8080/", "http://example.com:8080/"),
        ("http://example.com:0080/", "http://example.com/"),
        // percent-encoding hex upper-cased
        ("http://example.com/a%2fb", "http://example.com/a%2Fb"),
        (
            "http://example.com/%e4%bd%a0",
            "http://example.com/%E4%BD%A0",
        ),
        (
            "http://example.com/?q=%c3%a9",
            "http://example.com/?q=%C3%A9",
        ),
        // unreserved characters decoded
        ("http://example.com/%7euser", "http://example.com/~user"),
        ("http://example.com/%7Euser", "http://example.com/~user"),
        ("http://example.com/%41%42c", "http://example.com/ABc"),
        (
            "http://example.com/a%2Db%2E%5F%7E%30",
            "http://example.com/a-b._~0",
        ),
        (
            "http://example.com/?q=%7e%2f&r=%41",
            "http://example.com/?q=~%2F&r=A",
        ),
        // reserved characters stay encoded
        (
            "http://example.com/a%2Fb%3Fc%26d%3De%23f%25g",
            "http://example.com/a%2Fb%3Fc%26d%3De%23f%25g",
        ),
        (
            "http://example.com/?a=%26%3d%23%25%2b",
            "http://example.com/?a=%26%3D%23%25%2B",
        ),
        // %25 is not decoded, so double encoding cannot collapse into a dot segment
        (
            "http://example.com/a/%252E%252E/b",
            "http://example.com/a/%252E%252E/b",
        ),
        // malformed escapes left alone
        ("http://example.com/100%", "http://example.com/100%"),
        ("http://example.com/%zz%4", "http://example.com/%zz%4"),
        // dot segments, plain and percent-encoded
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        (
            "http://example.com/a/%2E/b/%2e%2E/c",
            "http://example.com/a/c",
        ),
        ("http://example.com/a/.%2E/b", "http://example.com/b"),
        ("http://example.com/a/b/%2e%2e", "http://example.com/a/"),
        ("http://example.com/../../x", "http://example.com/x"),
        // an encoded dot inside a segment is just a dot
        ("http://example.com/a%2E%2Eb", "http://example.com/a..b"),
        // fragment dropped
        ("http://example.com/a/b#frag", "http://example.com/a/b"),
        ("http://example.com/a?x=1#", "http://example.com/a?x=1"),
        // empty query dropped
        ("http://example.com/?", "http://example.com/"),
        ("http://example.com/a?#x", "http://example.com/a"),
        // trailing-dot host
        ("http://example.com./a", "http://example.com/a"),
        ("http://EXAMPLE.com..:80/", "http://example.com/"),
        // userinfo kept as is (only the host is lower-cased)
        (
            "http://user:pass@example.com/",
            "http://user:pass@example.com/",
        ),
        ("http://User@Example.com/", "http://User@example.com/"),
        // IP hosts
        ("http://192.168.0.1:80/x", "http://192.168.0.1/x"),
        ("http://1.2.3.4./", "http://1.2.3.4/"),
        ("http://[::1]:8080/", "http://[::1]:8080/"),
        ("http://[0:0::1]/", "http://[::1]/"),
        // IDNA and non-ASCII path
        ("http://bücher.example/", "http://xn--bcher-kva.example/"),
        ("http://example.com/你", "http://example.com/%E4%BD%A0"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        // query left alone without options (order, duplicates, empty pairs, tracking params)
        (
            "http://example.com/?b=2&a=1&&a=0",
            "http://example.com/?b=2&a=1&&a=0",
        ),
        (
            "http://example.com/?utm_source=x",
            "http://example.com/?utm_source=x",
        ),
        (
            "http://example.com/?a+b=c d",
            "http://example.com/?a+b=c%20d",
        ),
    ];

    #[test]
    fn table() {
        for (input, expected) in TABLE {
            assert_eq!(norm(input), *expected, "input {input}");
        }
    }

    #[test]
    fn idempotent_over_table() {
        for opts in [plain(), all_opts()] {
            for (input, _) in TABLE {
                let once = normalize(input, &opts).unwrap();
                let twice = normalize(once.as_str(), &opts).unwrap();
                assert_eq!(once, twice, "input {input}");
                let mut in_place = once.clone();
                normalize_url(&mut in_place, &opts);
                assert_eq!(once, in_place, "input {input}");
            }
        }
    }

    #[test]
    fn server_equivalent_urls_merge() {
        let variants = [
            "http://example.com/~user/a",
            "HTTP://EXAMPLE.COM:80/%7euser/a",
            "http://example.com./%7Euser/./b/../a#top",
            "http://example.com/%7E%75ser/a?",
        ];
        for v in variants {
            assert_eq!(norm(v), "http://example.com/~user/a", "{v}");
        }
    }

    #[test]
    fn possibly_different_urls_stay_apart() {
        let distinct = [
            "http://example.com/a/b",
            "http://example.com/a%2Fb",
            "http://example.com/a/b/",
            "http://example.com/A/b",
            "https://example.com/a/b",
            "http://example.com:8080/a/b",
            "http://example.com/a/b?",
            "http://user@example.com/a/b",
        ];
        let mut seen: Vec<String> = distinct.iter().map(|s| norm(s)).collect();
        // "?" alone is the one intended merge in this list.
        assert_eq!(seen[6], seen[0]);
        seen.remove(6);
        let count = seen.len();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), count, "{seen:?}");
        assert_ne!(
            norm("http://example.com/?a=1&b=2"),
            norm("http://example.com/?b=2&a=1")
        );
    }

    #[test]
    fn normalize_url_in_place() {
        let mut u = Url::parse("HTTP://Example.COM.:80/%7ex/./y?#f").unwrap();
        normalize_url(&mut u, &plain());
        assert_eq!(u.as_str(), "http://example.com/~x/y");
        // set_port(80) on an http URL must not leave ":80" behind.
        let mut u = Url::parse("http://example.com/").unwrap();
        u.set_port(Some(80)).unwrap();
        normalize_url(&mut u, &plain());
        assert_eq!(u.as_str(), "http://example.com/");
        // Non-http URLs are not touched.
        let mut m = Url::parse("mailto:Someone@Example.COM#x").unwrap();
        normalize_url(&mut m, &all_opts());
        assert_eq!(m.as_str(), "mailto:Someone@Example.COM#x");
    }

    #[test]
    fn strip_tracking_params() {
        let opts = NormalizeOptions {
            strip_tracking_params: true,
            sort_query: false,
        };
        let n = |s: &str| normalize(s, &opts).unwrap().to_string();
        assert_eq!(
            n(
                "http://e.com/p?utm_source=a&id=5&gclid=x&fbclid=y&UTM_Medium=z&_ga=1&igshid=2\
               &mc_cid=3&mc_eid=4&yclid=5&msclkid=6&utm_campaign&b=2"
            ),
            "http://e.com/p?id=5&b=2"
        );
        // Only tracking params → no "?" left.
        assert_eq!(n("http://e.com/p?utm_source=a&fbclid=b"), "http://e.com/p");
        // Percent-encoded key still recognized (decoded to "utm_source" first).
        assert_eq!(n("http://e.com/p?utm%5Fsource=a&x=1"), "http://e.com/p?x=1");
        // Look-alikes are kept.
        assert_eq!(
            n("http://e.com/p?utm=1&xutm_source=2&gclid2=3&ga=4"),
            "http://e.com/p?utm=1&xutm_source=2&gclid2=3&ga=4"
        );
        // Order of the rest untouched when not sorting; empty pairs dropped.
        assert_eq!(
            n("http://e.com/?z=1&&utm_id=2&a=3"),
            "http://e.com/?z=1&a=3"
        );
    }

    #[test]
    fn sort_query() {
        let opts = NormalizeOptions {
            strip_tracking_params: false,
            sort_query: true,
        };
        let n = |s: &str| normalize(s, &opts).unwrap().to_string();
        // Stable: equal keys keep their order.
        assert_eq!(
            n("http://e.com/?b=2&a=1&c=3&a=0&utm_source=x"),
            "http://e.com/?a=1&a=0&b=2&c=3&utm_source=x"
        );
        assert_eq!(n("http://e.com/?b&a=&c=1"), "http://e.com/?a=&b&c=1");
        assert_eq!(
            n("http://e.com/?b=1&a=2"),
            normalize("http://e.com/?a=2&b=1", &opts)
                .unwrap()
                .to_string()
        );
        // Both options together.
        assert_eq!(
            normalize("http://e.com/?z=1&utm_term=q&a=2#x", &all_opts())
                .unwrap()
                .as_str(),
            "http://e.com/?a=2&z=1"
        );
    }

    #[test]
    fn resolve_relative() {
        let base = Url::parse("http://example.com/a/b/c.html?x=1#f").unwrap();
        let r = |h: &str| resolve(&base, h, &plain()).unwrap().to_string();
        assert_eq!(r("../a"), "http://example.com/a/a");
        assert_eq!(r("./b"), "http://example.com/a/b/b");
        assert_eq!(r("?q=1"), "http://example.com/a/b/c.html?q=1");
        assert_eq!(r("//other.host/x"), "http://other.host/x");
        assert_eq!(r("/abs"), "http://example.com/abs");
        assert_eq!(r("d.html#sec"), "http://example.com/a/b/d.html");
        assert_eq!(r("%7euser"), "http://example.com/a/b/~user");
        assert_eq!(r("https://Other.COM:443/Z"), "https://other.com/Z");
        assert_eq!(r("http:rel"), "http://example.com/a/b/rel");
        // whitespace trimmed; tabs/newlines inside removed, as browsers do
        assert_eq!(r("  /x \n"), "http://example.com/x");
        assert_eq!(r("/x\t/y\n"), "http://example.com/x/y");
        // fragment-only and empty hrefs are the same page
        let same = normalize(base.as_str(), &plain()).unwrap().to_string();
        assert_eq!(same, "http://example.com/a/b/c.html?x=1");
        assert_eq!(r("#frag"), same);
        assert_eq!(r(""), same);
        assert_eq!(r("   "), same);
    }

    #[test]
    fn resolve_rejects_non_http() {
        let base = Url::parse("https://example.com/").unwrap();
        for href in [
            "javascript:void(0)",
            " JavaScript:alert(1)",
            "mailto:a@example.com",
            "tel:+1-555-0100",
            "data:text/html,hi",
            "ftp://example.com/f",
            "about:blank",
        ] {
            match resolve(&base, href, &plain()) {
                Err(UrlError::UnsupportedScheme(s)) => assert!(!s.is_empty()),
                other => panic!("{href}: {other:?}"),
            }
        }
        assert!(matches!(
            resolve(&base, "http://", &plain()),
            Err(UrlError::MissingHost(_))
        ));
        assert!(matches!(
            resolve(&base, "http://exa mple.com/", &plain()),
            Err(UrlError::Parse(_))
        ));
    }

    #[test]
    fn errors() {
        let e = |s: &str| normalize(s, &plain()).unwrap_err();
        assert!(matches!(e("mailto:a@b.c"), UrlError::UnsupportedScheme(_)));
        assert!(matches!(e("mailto:"), UrlError::UnsupportedScheme(_)));
        assert!(matches!(
            e("javascript:void(0)"),
            UrlError::UnsupportedScheme(_)
        ));
        assert!(matches!(
            e("file:///etc/passwd"),
            UrlError::UnsupportedScheme(_)
        ));
        assert!(matches!(e("http://"), UrlError::MissingHost(_)));
        assert!(matches!(e("http://:80/"), UrlError::MissingHost(_)));
        assert!(matches!(e("http://./"), UrlError::MissingHost(_)));
        assert!(matches!(e("http://../x"), UrlError::MissingHost(_)));
        assert!(matches!(
            e("not a url"),
            UrlError::NotAbsolute {
                suggestion: None,
                ..
            }
        ));
        assert!(matches!(
            e("/relative/path"),
            UrlError::NotAbsolute {
                suggestion: None,
                ..
            }
        ));
        assert!(matches!(
            e(""),
            UrlError::NotAbsolute {
                suggestion: None,
                ..
            }
        ));
        assert!(matches!(e("http://[::1/"), UrlError::Parse(_)));
        assert!(matches!(e("http://exa mple.com/"), UrlError::Parse(_)));
        assert!(matches!(e("http://example.com:99999/"), UrlError::Parse(_)));
    }

    #[test]
    fn a_url_typed_without_a_scheme_gets_the_url_to_write() {
        let said = |s: &str| parse_user_url(s).unwrap_err().to_string();
        assert_eq!(
            said("127.0.5.1:8091"),
            "invalid URL \"127.0.5.1:8091\": it has no scheme; try http://127.0.5.1:8091/"
        );
        for (typed, meant) in [
            ("example.com", "http://example.com/"),
            (" example.com/docs/a?b=1 ", "http://example.com/docs/a?b=1"),
            ("localhost:8080", "http://localhost:8080/"),
            ("localhost:8080/x", "http://localhost:8080/x"),
            ("Example.com:81/x", "http://example.com:81/x"),
            ("//example.com/x", "http://example.com/x"),
            ("[::1]:8080", "http://[::1]:8080/"),
        ] {
            match parse_user_url(typed) {
                Err(UrlError::NotAbsolute {
                    url,
                    suggestion: Some(s),
                }) => {
                    assert_eq!(s, meant, "{typed}");
                    assert_eq!(url, typed.trim(), "the URL as typed, once");
                }
                other => panic!("{typed}: {other:?}"),
            }
        }
        // No URL to suggest: the message says what one looks like.
        assert_eq!(
            said("not a url"),
            "invalid URL \"not a url\": not an absolute URL (one starts with http:// or \
             https:// and a host)"
        );
        // Schemes that are schemes stay refused as such.
        for url in [
            "mailto:a@b.c",
            "tel:+1-555-0100",
            "ftp://a/",
            "javascript:void(0)",
        ] {
            assert!(
                matches!(parse_user_url(url), Err(UrlError::UnsupportedScheme(_))),
                "{url}"
            );
        }
        // The URL is named once in the line.
        let line = said("127.0.5.1:8091");
        assert_eq!(
            line.matches("127.0.5.1:8091").count(),
            2,
            "typed and suggested: {line}"
        );
        // A URL given whole is taken as given (not normalized).
        assert_eq!(
            parse_user_url(" http://a.example/x?utm_source=y ")
                .unwrap()
                .as_str(),
            "http://a.example/x?utm_source=y"
        );
        assert!(matches!(
            parse_user_url("http://./"),
            Err(UrlError::MissingHost(_))
        ));
        // normalize reads user input the same way.
        assert!(matches!(
            normalize("127.0.5.1:8091", &plain()),
            Err(UrlError::NotAbsolute {
                suggestion: Some(_),
                ..
            })
        ));
    }

    #[test]
    fn too_long() {
        let prefix = "http://example.com/";
        let exact = format!("{prefix}{}", "a".repeat(MAX_URL_LEN - prefix.len()));
        assert_eq!(norm(&exact).len(), MAX_URL_LEN);
        let over = format!("{exact}b");
        match normalize(&over, &plain()) {
            Err(UrlError::TooLong { len, max, url }) => {
                assert_eq!(len, MAX_URL_LEN + 1);
                assert_eq!(max, MAX_URL_LEN);
                assert!(url.len() < 300, "quoted URL is truncated");
            }
            other => panic!("{other:?}"),
        }
        // The limit applies after normalization: a long fragment does not count...
        let long_frag = format!("{prefix}x#{}", "f".repeat(5000));
        assert_eq!(norm(&long_frag), "http://example.com/x");
        // ...but percent-encoding expansion does.
        let expands = format!("{prefix}{}", "é".repeat(400));
        assert!(matches!(
            normalize(&expands, &plain()),
            Err(UrlError::TooLong { .. })
        ));
    }

    #[test]
    fn error_messages_quote_url_truncated() {
        let msg = normalize("mailto:bob@example.com", &plain())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("\"mailto:bob@example.com\""), "{msg}");
        let msg = normalize("http://exa mple.com/", &plain())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("\"http://exa mple.com/\""), "{msg}");
        assert!(msg.contains("domain"), "{msg}");
        let msg = normalize("http://", &plain()).unwrap_err().to_string();
        assert!(msg.contains("\"http://\""), "{msg}");
        // Huge inputs are cut to ~200 chars, on a char boundary.
        let huge = format!("javascript:{}", "é".repeat(10_000));
        let msg = normalize(&huge, &plain()).unwrap_err().to_string();
        assert!(msg.len() < 400, "{}", msg.len());
        assert!(msg.contains('…'));
    }

    #[test]
    fn percent_helper() {
        assert_eq!(normalize_percent("/plain/path"), None);
        assert_eq!(normalize_percent("/a%2F"), None);
        assert_eq!(normalize_percent("/a%2f").as_deref(), Some("/a%2F"));
        assert_eq!(normalize_percent("%61%2e%5f%7E").as_deref(), Some("a._~"));
        assert_eq!(normalize_percent("%"), None);
        assert_eq!(normalize_percent("%a"), None);
        // Decoded, the `A` would follow a `%`: it could begin an escape
        // that was not there, so it stays encoded.
        assert_eq!(normalize_percent("%%41"), None);
        assert_eq!(normalize_percent("%%4a").as_deref(), Some("%J"));
        assert_eq!(normalize_percent("%g1%ff").as_deref(), Some("%g1%FF"));
    }
}
#[cfg(test)]
mod proptests;
