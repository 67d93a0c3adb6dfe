//! URL patterns: how the trap rules group URLs (numbers become `{n}`,
//! ids and session ids `{id}`, query parameters sorted) and the
//! directories rule 6 judges.

use super::{FNV_OFFSET, KEY_DIRECTORY, KEY_PLAIN_URL, fnv1a, key};

/// A URL's pattern and where its parts end.
#[derive(Debug)]
pub(super) struct Parts {
    pub(super) pattern: String,
    pub(super) host_end: usize,
    pub(super) path_end: usize,
    /// Key of the URL without its session ids, if it has any.
    pub(super) without_session: Option<u64>,
    /// [`key`] of rule 6's group, the URL's [`directory`].
    pub(super) directory_key: u64,
}

impl Parts {
    pub(super) fn of(url: &str) -> Parts {
        if let Some((host, path, query)) = split_absolute(url) {
            let mut pattern = String::with_capacity(url.len() + 8);
            pattern.push_str(host);
            let host_end = pattern.len();
            let mut parts = Self::finish(pattern, host_end, host, path, query);
            parts.without_session = without_session(host, path, query);
            return parts;
        }
        // Not absolute: abstract what is there, as a path.
        let url = url.split('#').next().unwrap_or("");
        let (path, query) = match url.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (url, None),
        };
        Self::finish(String::new(), 0, "", path, query)
    }

    pub(super) fn finish(
        mut pattern: String,
        host_end: usize,
        host: &str,
        path: &str,
        query: Option<&str>,
    ) -> Parts {
        for (i, segment) in path.split('/').enumerate() {
            if i > 0 {
                pattern.push('/');
            }
            abstract_segment(segment, &mut pattern);
        }
        let path_end = pattern.len();
        if let Some(query) = query.filter(|q| !q.is_empty()) {
            pattern.push('?');
            abstract_query(query, &mut pattern);
        }
        let mut directory_key = fnv1a(fnv1a(FNV_OFFSET, &[KEY_DIRECTORY]), host.as_bytes());
        walk_directory(path, query, |part| {
            directory_key = fnv1a(directory_key, part)
        });
        Parts {
            pattern,
            host_end,
            path_end,
            without_session: None,
            directory_key,
        }
    }

    pub(super) fn host(&self) -> &str {
        &self.pattern[..self.host_end]
    }

    /// Host and abstracted path, without the query.
    pub(super) fn path(&self) -> &str {
        &self.pattern[..self.path_end]
    }

    pub(super) fn has_query(&self) -> bool {
        self.path_end < self.pattern.len()
    }

    /// Host and path up to the first abstracted segment (`h/cal/` for
    /// `h/cal/{n}/{n}/`), or the path when none is: the pages one
    /// generator makes, whatever its counters say.
    pub(super) fn family(&self) -> &str {
        let path = self.path();
        match path[self.host_end..].find('{') {
            Some(at) => {
                let at = self.host_end + at;
                let start = path[..at].rfind('/').map_or(self.host_end, |s| s + 1);
                &path[..start]
            }
            None => path,
        }
    }

    /// [`key`] of the URL's [`directory`] (asked for every link).
    pub(super) fn directory_key(&self) -> u64 {
        self.directory_key
    }

    /// Host and first path segment (`h/cal`): what probation keeps open.
    pub(super) fn section(&self) -> &str {
        let path = self.path();
        let rest = &path[self.host_end..];
        let first = rest
            .strip_prefix('/')
            .map_or(0, |r| 1 + r.find('/').unwrap_or(r.len()));
        &path[..self.host_end + first]
    }
}

/// The pattern of a URL: host (and port) and path, with numbers replaced by
/// `{n}` and ids by `{id}` (long hex, uuids, long letter-and-digit tokens,
/// path parameters such as `;jsessionid=…`, session query parameters), then
/// the query with parameters sorted and values abstracted the same way.
/// Word slugs stay: `/blog/hello-world` is content, not a counter.
/// Percent-escapes are kept as they are.
///
/// `http://h/cal/2024/05/?sid=a81f3c9d0e` → `h/cal/{n}/{n}/?sid={id}`.
pub fn url_pattern(url: &str) -> String {
    Parts::of(url).pattern
}

/// Rule 6's group of a URL: host and path up to its last segment, as
/// written (`h/tag/` for `h/tag/python+rust/`, `h/day/` for
/// `h/day/2024-03-05/`, `h/3.12/c-api/` for `h/3.12/c-api/arg.html`, `h/`
/// for `h/about`), or for a URL with a query its path's query space
/// (`h/search?`). Numbers are kept: a site's directories are its
/// sections, finitely many, and `/3.11/c-api/` and `/3.12/c-api/` are two
/// of them (one pattern, they lost their pages together when rule 6 judged
/// patterns). Path parameters (session ids) are left out.
pub(super) fn directory(url: &str) -> String {
    let mut out = String::new();
    let (host, path, query) = match split_absolute(url) {
        Some(parts) => parts,
        None => {
            let url = url.split('#').next().unwrap_or("");
            match url.split_once('?') {
                Some((path, query)) => ("", path, Some(query)),
                None => ("", url, None),
            }
        }
    };
    out.push_str(host);
    walk_directory(path, query, |part| {
        out.push_str(std::str::from_utf8(part).unwrap_or_default())
    });
    out
}

/// The pieces of a URL's [`directory`] after its host, in order.
pub(super) fn walk_directory(path: &str, query: Option<&str>, mut part: impl FnMut(&[u8])) {
    let path = if path.is_empty() { "/" } else { path };
    let query = query.is_some_and(|q| !q.is_empty());
    let end = if query {
        path.len()
    } else {
        let trimmed = path.trim_end_matches('/');
        trimmed.rfind('/').map_or(path.len().min(1), |i| i + 1)
    };
    for (i, segment) in path[..end].split('/').enumerate() {
        if i > 0 {
            part(b"/");
        }
        part(segment.split(';').next().unwrap_or("").as_bytes());
    }
    if query {
        part(b"?");
    }
}

/// A path segment: its main part, then path parameters (`;name=value`),
/// whose values are always ids (sessions, matrix parameters).
pub(super) fn abstract_segment(segment: &str, out: &mut String) {
    let mut params = segment.split(';');
    abstract_value(params.next().unwrap_or(""), out);
    for param in params {
        out.push(';');
        match param.split_once('=') {
            Some((name, _)) => {
                abstract_value(name, out);
                out.push_str("={id}");
            }
            None => abstract_value(param, out),
        }
    }
}

/// The key of `url` with its session ids (session path parameters and
/// query parameters) removed, or None when it has none.
/// An absolute URL's `host[:port]`, path and query, split as text: the
/// guard is handed normalized URLs (lower-case host, no default port), so
/// it need not parse them — a parse per link was most of its cost.
pub(super) fn split_absolute(url: &str) -> Option<(&str, &str, Option<&str>)> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    {
        return None;
    }
    let rest = rest.split('#').next().unwrap_or("");
    let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let host = authority.rsplit('@').next().unwrap_or(authority);
    let (path, query) = match tail.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (tail, None),
    };
    Some((host, if path.is_empty() { "/" } else { path }, query))
}

pub(super) fn without_session(host: &str, path: &str, query: Option<&str>) -> Option<u64> {
    let is_session = |pair: &str| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        is_session_param(name, value)
    };
    // Most URLs carry none: found without building the plain URL (a
    // string for every link of every page: an eighth of the guard's
    // instructions).
    let in_path = || {
        path.contains(';')
            && path
                .split('/')
                .flat_map(|segment| segment.split(';').skip(1))
                .any(is_session)
    };
    let in_query = || query.is_some_and(|q| q.split('&').any(is_session));
    if !in_path() && !in_query() {
        return None;
    }
    let mut plain = String::with_capacity(host.len() + path.len() + 8);
    plain.push_str(host);
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            plain.push('/');
        }
        let mut params = segment.split(';');
        plain.push_str(params.next().unwrap_or(""));
        for param in params.filter(|p| !is_session(p)) {
            plain.push(';');
            plain.push_str(param);
        }
    }
    if let Some(query) = query {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|pair| !is_session(pair) && !pair.is_empty())
            .collect();
        if !kept.is_empty() {
            plain.push('?');
            plain.push_str(&kept.join("&"));
        }
    }
    Some(key(KEY_PLAIN_URL, &plain))
}

/// Whether `name=value` carries a session: a session parameter's name,
/// and for the names that also mean something else (`sid` is a story id
/// on many news sites, `session` a conference's), a value that looks like
/// an id (`sid=a81f3c9d0e`, not `sid=1234` or `sid=04/05/12/1234`).
pub(super) fn is_session_param(name: &str, value: &str) -> bool {
    SESSION_PARAMS.iter().any(|p| p.eq_ignore_ascii_case(name))
        && (!AMBIGUOUS_SESSION_PARAMS
            .iter()
            .any(|p| p.eq_ignore_ascii_case(name))
            || is_id(value))
}

/// Names of parameters (query or path) that carry a session.
pub(super) const SESSION_PARAMS: &[&str] = &[
    "jsessionid",
    "phpsessid",
    "aspsessionid",
    "sessionid",
    "session_id",
    "sessid",
    "session",
    "sid",
    "oscsid",
    "zenid",
    "cfid",
    "cftoken",
];

/// Of [`SESSION_PARAMS`], those a site may use for other things.
pub(super) const AMBIGUOUS_SESSION_PARAMS: &[&str] = &["session", "sid"];

pub(super) fn abstract_query(query: &str, out: &mut String) {
    let mut pairs: Vec<String> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let mut s = String::with_capacity(pair.len());
            match pair.split_once('=') {
                Some((name, value)) => {
                    abstract_value(name, &mut s);
                    s.push('=');
                    if is_session_param(name, value) {
                        s.push_str("{id}");
                    } else {
                        abstract_value(value, &mut s);
                    }
                }
                None => abstract_value(pair, &mut s),
            }
            s
        })
        .collect();
    pairs.sort_unstable();
    for (i, pair) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(pair);
    }
}

/// A segment or value: `{id}` when it is an id as a whole, otherwise each
/// run of letters and digits abstracted on its own, the rest kept.
pub(super) fn abstract_value(value: &str, out: &mut String) {
    if is_id(value) {
        out.push_str("{id}");
        return;
    }
    let mut rest = value;
    while let Some(c) = rest.chars().next() {
        let b = rest.as_bytes();
        if c == '%' && b.len() >= 3 && b[1].is_ascii_hexdigit() && b[2].is_ascii_hexdigit() {
            // An escape is one opaque character, not digits.
            out.push_str(&rest[..3]);
            rest = &rest[3..];
        } else if c.is_alphanumeric() {
            let end = rest
                .find(|c: char| !c.is_alphanumeric())
                .unwrap_or(rest.len());
            abstract_token(&rest[..end], out);
            rest = &rest[end..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
}

/// Whole-value ids: hex with dashes (uuids, hashes; at least 8 hex digits,
/// both digits and letters, so neither dates nor words), and URL-safe
/// base64-like tokens (16+ characters with a digit and both cases).
pub(super) fn is_id(value: &str) -> bool {
    let b = value.as_bytes();
    if b.len() < 8 {
        // Under eight hex digits, and under sixteen characters.
        return false;
    }
    let hex_digits = b.iter().filter(|c| c.is_ascii_hexdigit()).count();
    let hex_like = hex_digits >= 8
        && b.iter().all(|&c| c.is_ascii_hexdigit() || c == b'-')
        && b.iter().any(u8::is_ascii_digit)
        && b.iter().any(u8::is_ascii_alphabetic);
    let token_like = b.len() >= 16
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        && b.iter().any(u8::is_ascii_digit)
        && b.iter().any(u8::is_ascii_uppercase)
        && b.iter().any(u8::is_ascii_lowercase);
    hex_like || token_like
}

/// A run of letters and digits: all digits → `{n}`; letters and digits,
/// 8 or more → `{id}`; shorter (`page2`, `v1`) → its digit runs `{n}`;
/// letters only → itself.
pub(super) fn abstract_token(token: &str, out: &mut String) {
    let digits = token.chars().any(|c| c.is_ascii_digit());
    if !digits {
        out.push_str(token);
    } else if token.chars().all(|c| c.is_ascii_digit()) {
        out.push_str("{n}");
    } else if token.chars().count() >= 8 {
        out.push_str("{id}");
    } else {
        let mut in_number = false;
        for c in token.chars() {
            if c.is_ascii_digit() {
                if !in_number {
                    out.push_str("{n}");
                }
                in_number = true;
            } else {
                out.push(c);
                in_number = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_numbers_are_one_pattern() {
        assert_eq!(url_pattern("http://h/cal/2024/05/"), "h/cal/{n}/{n}/");
        assert_eq!(
            url_pattern("http://h/cal/2024/05/"),
            url_pattern("http://h/cal/1999/12/")
        );
        assert_eq!(url_pattern("http://h/product/123"), "h/product/{n}");
        assert_eq!(
            url_pattern("http://h/product/123"),
            url_pattern("http://h/product/9876")
        );
        assert_eq!(
            url_pattern("http://h/archive/2024-05-01.html"),
            "h/archive/{n}-{n}-{n}.html"
        );
        assert_eq!(url_pattern("http://h/list/page2"), "h/list/page{n}");
        assert_eq!(
            url_pattern("http://h/events?day=2024-05-01&view=week"),
            "h/events?day={n}-{n}-{n}&view=week"
        );
        // The port is part of the host: test webs put hosts on ports.
        assert_eq!(
            url_pattern("http://127.0.0.1:8080/p/7"),
            "127.0.0.1:8080/p/{n}"
        );
    }

    #[test]
    fn word_slugs_are_content() {
        assert_eq!(
            url_pattern("http://h/blog/hello-world"),
            "h/blog/hello-world"
        );
        assert_ne!(
            url_pattern("http://h/blog/hello-world"),
            url_pattern("http://h/blog/other-post")
        );
        assert_eq!(url_pattern("http://h/"), "h/");
        // An escape is not a number.
        assert_eq!(url_pattern("http://h/caf%C3%A9"), "h/caf%C3%A9");
    }

    #[test]
    fn ids_and_sessions_collapse() {
        let uuid = url_pattern("http://h/item/550e8400-e29b-41d4-a716-446655440000");
        assert_eq!(uuid, "h/item/{id}");
        assert_eq!(
            uuid,
            url_pattern("http://h/item/f47ac10b-58cc-4372-a567-0e02b2c3d479")
        );
        assert_eq!(
            url_pattern("http://h/commit/9fceb02d0ae598e95dc970b74767f19372d61af8"),
            "h/commit/{id}"
        );
        assert_eq!(url_pattern("http://h/u/ab12cd34ef"), "h/u/{id}");
        // Session id in the path…
        let a = url_pattern("http://h/cart;jsessionid=A81F3C9D0E22B7");
        assert_eq!(a, "h/cart;jsessionid={id}");
        assert_eq!(a, url_pattern("http://h/cart;jsessionid=zzTopSecret"));
        let b = url_pattern("http://h/(S(x3k4m5n6p7q8r9s0))/page.aspx");
        assert_eq!(b, url_pattern("http://h/(S(a1b2c3d4e5f6g7h8))/page.aspx"));
        // …and in the query, whatever the value looks like…
        let q = url_pattern("http://h/page?phpsessid=abc&x=1");
        assert_eq!(q, "h/page?phpsessid={id}&x={n}");
        assert_eq!(q, url_pattern("http://h/page?x=22&phpsessid=someotherword"));
        // …but for names that also mean something else only when the value
        // looks like an id: `sid` is a story id on many news sites.
        assert_eq!(
            url_pattern("http://h/page?sid=a81f3c9d0e"),
            "h/page?sid={id}"
        );
        assert_eq!(
            url_pattern("http://h/article.pl?sid=1234"),
            "h/article.pl?sid={n}"
        );
        assert_eq!(
            Parts::of("http://h/article.pl?sid=04/05/12/1234").without_session,
            None
        );
        assert!(
            Parts::of("http://h/page?sid=a81f3c9d0e")
                .without_session
                .is_some()
        );
        assert_eq!(
            url_pattern("http://h/p?PHPSESSID=q8fj3k2l1m"),
            url_pattern("http://h/p?PHPSESSID=zz")
        );
        assert_eq!(
            url_pattern("http://h/p?token=Ab3dEf6hIj9kLm2nOp"),
            "h/p?token={id}"
        );
    }

    #[test]
    fn query_parameters_are_sorted_and_keep_words() {
        let a = url_pattern("http://h/shop?size=m&color=red");
        assert_eq!(a, "h/shop?color=red&size=m");
        assert_eq!(a, url_pattern("http://h/shop?color=red&size=m"));
        assert_ne!(a, url_pattern("http://h/shop?color=blue&size=m"));
        assert_eq!(url_pattern("http://h/shop?"), "h/shop");
        // Not a URL: abstracted as a path all the same.
        assert_eq!(url_pattern("/cal/2024/05/?a=1#x"), "/cal/{n}/{n}/?a={n}");
    }

    #[test]
    fn family_and_section() {
        let p = Parts::of("http://h/cal/2024/05/");
        assert_eq!(p.family(), "h/cal/");
        assert_eq!(p.section(), "h/cal");
        assert_eq!(Parts::of("http://h/cal/2024/").family(), "h/cal/");
        assert_eq!(Parts::of("http://h/2024/05/").family(), "h/");
        assert_eq!(Parts::of("http://h/shop?color=red").family(), "h/shop");
        assert_eq!(Parts::of("http://h/about").family(), "h/about");
        assert_eq!(Parts::of("http://h/").section(), "h/");
        assert_eq!(Parts::of("http://h/about").section(), "h/about");
        assert_eq!(Parts::of("http://h:81/x/y").host(), "h:81");
    }

    #[test]
    fn directories_group_what_one_generator_makes() {
        let dir = |u: &str| {
            let d = directory(u);
            assert_eq!(Parts::of(u).directory_key(), key(KEY_DIRECTORY, &d), "{u}");
            d
        };
        assert_eq!(dir("http://h/tag/python+rust/"), "h/tag/");
        assert_eq!(dir("http://h/tag/python+rust+web/"), "h/tag/");
        assert_eq!(dir("http://h/day/2024-03-05/"), "h/day/");
        assert_eq!(dir("http://h/search?q=cache+index"), "h/search?");
        assert_eq!(dir("http://h/search"), "h/");
        assert_eq!(dir("http://h/post/hello-world/"), "h/post/");
        assert_eq!(dir("http://h/about"), "h/");
        assert_eq!(dir("http://h/"), "h/");
        assert_eq!(dir("http://h"), "h/");
        assert_eq!(dir("http://h/s/3;jsessionid=ab12cd34ef/x"), "h/s/3/");
        // Numbers are kept: two versions of a manual are two directories.
        assert_eq!(dir("http://h/2024/03/hello"), "h/2024/03/");
        assert_eq!(dir("http://h/3.11/c-api/arg.html"), "h/3.11/c-api/");
        assert_ne!(
            dir("http://h/3.12/c-api/arg.html"),
            dir("http://h/3.11/c-api/arg.html")
        );
    }
}
