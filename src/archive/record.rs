//! The pure parts of archiving: digests, the HTTP blocks of records, the
//! revisit rule, SURT keys and CDXJ lines.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};
use web_crawler_actors::FetchedPage;

/// `WARC-Profile` of a 200 whose payload is the URL's last archived one.
pub const IDENTICAL_PAYLOAD: &str =
    "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest";
/// `WARC-Profile` of a 304 Not Modified.
pub const SERVER_NOT_MODIFIED: &str = "http://netpreserve.org/warc/1.1/revisit/server-not-modified";

/// `sha1:` and the SHA-1 of `bytes` in base32, as WARC digests are written.
pub fn sha1_digest(bytes: &[u8]) -> String {
    format!(
        "sha1:{}",
        data_encoding::BASE32.encode(&Sha1::digest(bytes))
    )
}

/// `WARC-Date`: UTC to the second.
pub fn warc_date(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The 14-digit timestamp of CDXJ lines and file names.
pub fn timestamp14(at: DateTime<Utc>) -> String {
    at.format("%Y%m%d%H%M%S").to_string()
}

/// The HTTP head of a response record: the status line and the headers as
/// received. The body is archived as the crawler read it: decoded
/// (`content_decoded`: the fetcher undid a `Content-Encoding`), without chunking,
/// perhaps cut at the body cap; so the `Content-Encoding` it undid,
/// `Transfer-Encoding` and a `Content-Length` that no longer holds are
/// renamed `X-Archive-Orig-…`, and a `Content-Length` of the body as
/// archived is added.
pub fn response_head(page: &FetchedPage) -> Vec<u8> {
    let reason = hyper::StatusCode::from_u16(page.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    // HTTP/2 and 3 have no status line; archives write theirs as HTTP/1.1.
    let version = match page.http_version.as_str() {
        v @ ("HTTP/1.0" | "HTTP/0.9") => v,
        _ => "HTTP/1.1",
    };
    let length = page.body.len().to_string();
    let mut length_holds = false;
    let mut head = format!("{version} {} {reason}\r\n", page.status).into_bytes();
    for (name, value) in &page.response_headers {
        let untrue = match name.to_ascii_lowercase().as_str() {
            "content-encoding" => page.content_decoded,
            "transfer-encoding" => true,
            "content-length" => {
                let holds = !length_holds && value.trim_ascii() == length.as_bytes();
                length_holds |= holds;
                !holds
            }
            _ => false,
        };
        if untrue {
            head.extend_from_slice(b"X-Archive-Orig-");
        }
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    if !length_holds {
        head.extend_from_slice(format!("Content-Length: {length}\r\n").as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// The HTTP head of a request record: the GET we sent for `url`.
pub fn request_head(url: &url::Url, page: &FetchedPage) -> Vec<u8> {
    let mut target = url.path().to_string();
    if let Some(query) = url.query() {
        target.push('?');
        target.push_str(query);
    }
    let mut head = format!("GET {target} HTTP/1.1\r\n");
    for (name, value) in &page.request_headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// The last payload archived for a URL (a 200), for revisits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Archived {
    pub digest: String,
    /// Its `WARC-Date`.
    pub date: String,
}

/// What record a response becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Response,
    /// A revisit with this `WARC-Profile`: the payload is not stored again.
    Revisit(&'static str),
}

/// A 304 is a revisit (the server says nothing changed); so is a 200 whose
/// payload digest equals the URL's last archived 200's. Anything else is
/// archived whole.
pub fn kind(status: u16, payload_digest: &str, last: Option<&Archived>) -> Kind {
    match (status, last) {
        (304, _) => Kind::Revisit(SERVER_NOT_MODIFIED),
        (200, Some(last)) if last.digest == payload_digest => Kind::Revisit(IDENTICAL_PAYLOAD),
        _ => Kind::Response,
    }
}

/// The SURT form of a URL as pywb sorts by it: host labels reversed and
/// comma-joined (an IP address as is), `www.` dropped, a port other than
/// the scheme's kept, then `)` and the path and query; in lower case, the
/// query's parameters sorted.
pub fn surt(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let host = match url.host() {
        Some(url::Host::Domain(_)) => {
            let host = host.strip_prefix("www.").unwrap_or(&host);
            host.split('.').rev().collect::<Vec<_>>().join(",")
        }
        _ => host,
    };
    let mut key = host;
    if let Some(port) = url.port() {
        key.push_str(&format!(":{port}"));
    }
    key.push(')');
    key.push_str(&url.path().to_ascii_lowercase());
    if let Some(query) = url.query().filter(|q| !q.is_empty()) {
        let mut params: Vec<String> = query.split('&').map(str::to_ascii_lowercase).collect();
        params.sort();
        key.push('?');
        key.push_str(&params.join("&"));
    }
    key
}

/// The JSON of a CDXJ line (pywb's fields; numbers as text, as pywb writes them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CdxEntry {
    pub url: String,
    /// The media type without parameters; `warc/revisit` for a revisit.
    pub mime: String,
    pub status: String,
    pub digest: String,
    /// The record's gzip member: its length and offset in `filename`.
    pub length: String,
    pub offset: String,
    pub filename: String,
}

impl CdxEntry {
    pub fn offset(&self) -> Option<u64> {
        self.offset.parse().ok()
    }

    pub fn length(&self) -> Option<u64> {
        self.length.parse().ok()
    }
}

/// One CDXJ line, without its newline: `SURT TIMESTAMP {json}`.
pub fn cdxj_line(url: &url::Url, timestamp: &str, entry: &CdxEntry) -> String {
    let json = serde_json::to_string(entry).expect("strings serialize");
    format!("{} {timestamp} {json}", surt(url))
}

/// A CDXJ line read back: its timestamp and entry (`None`: not one, e.g.
/// a line cut by a crash).
pub fn parse_cdxj_line(line: &str) -> Option<(String, CdxEntry)> {
    let mut parts = line.splitn(3, ' ');
    let (_surt, timestamp, json) = (parts.next()?, parts.next()?, parts.next()?);
    let entry = serde_json::from_str(json).ok()?;
    Some((timestamp.to_string(), entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(headers: &[(&str, &str)], body: &[u8]) -> FetchedPage {
        FetchedPage {
            status: 200,
            http_version: "HTTP/1.1".into(),
            response_headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect(),
            request_headers: vec![
                ("Host".into(), "a.test:8080".into()),
                ("User-Agent".into(), "ua".into()),
            ],
            body: body.to_vec(),
            ..FetchedPage::default()
        }
    }

    #[test]
    fn digests_are_base32_sha1() {
        // The SHA-1 of "" is da39a3ee…, base32 3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ.
        assert_eq!(sha1_digest(b""), "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ");
    }

    #[test]
    fn a_decoded_body_gets_its_own_length_and_the_originals_are_kept() {
        let p = page(
            &[
                ("content-type", "text/html"),
                ("content-encoding", "gzip"),
                ("transfer-encoding", "chunked"),
            ],
            b"hello",
        );
        let p = FetchedPage {
            content_decoded: true,
            ..p
        };
        let head = String::from_utf8(response_head(&p)).unwrap();
        assert_eq!(
            head,
            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\
             X-Archive-Orig-content-encoding: gzip\r\n\
             X-Archive-Orig-transfer-encoding: chunked\r\nContent-Length: 5\r\n\r\n"
        );
        // An encoding the fetcher left alone stays true, and so does a
        // length that holds.
        let p = page(
            &[("content-encoding", "zstd"), ("content-length", "5")],
            b"xxxxx",
        );
        let head = String::from_utf8(response_head(&p)).unwrap();
        assert_eq!(
            head,
            "HTTP/1.1 200 OK\r\ncontent-encoding: zstd\r\ncontent-length: 5\r\n\r\n"
        );
        // A body cut at the cap is shorter than the server said.
        let p = page(&[("content-length", "9")], b"xxxxx");
        let head = String::from_utf8(response_head(&p)).unwrap();
        assert!(
            head.ends_with("X-Archive-Orig-content-length: 9\r\nContent-Length: 5\r\n\r\n"),
            "{head}"
        );
    }

    #[test]
    fn the_request_is_the_get_we_sent() {
        let url = url::Url::parse("http://a.test:8080/p/q?x=1#frag").unwrap();
        let head = String::from_utf8(request_head(&url, &page(&[], b""))).unwrap();
        assert_eq!(
            head,
            "GET /p/q?x=1 HTTP/1.1\r\nHost: a.test:8080\r\nUser-Agent: ua\r\n\r\n"
        );
    }

    #[test]
    fn revisits_are_304s_and_unchanged_200s() {
        let last = Archived {
            digest: "sha1:A".into(),
            date: "2024-01-01T00:00:00Z".into(),
        };
        assert_eq!(kind(200, "sha1:A", None), Kind::Response);
        assert_eq!(
            kind(200, "sha1:A", Some(&last)),
            Kind::Revisit(IDENTICAL_PAYLOAD)
        );
        assert_eq!(kind(200, "sha1:B", Some(&last)), Kind::Response);
        assert_eq!(kind(404, "sha1:A", Some(&last)), Kind::Response);
        assert_eq!(kind(304, "", None), Kind::Revisit(SERVER_NOT_MODIFIED));
    }

    #[test]
    fn surt_keys_sort_by_reversed_host() {
        let key = |u: &str| surt(&url::Url::parse(u).unwrap());
        assert_eq!(key("http://www.Example.com/A/b"), "com,example)/a/b");
        assert_eq!(
            key("https://sub.example.com:8443/?b=2&a=1"),
            "com,example,sub:8443)/?a=1&b=2"
        );
        assert_eq!(key("http://127.0.0.2:8080/x"), "127.0.0.2:8080)/x");
    }

    #[test]
    fn cdxj_lines_read_back() {
        let url = url::Url::parse("http://example.com/a").unwrap();
        let entry = CdxEntry {
            url: url.to_string(),
            mime: "text/html".into(),
            status: "200".into(),
            digest: "sha1:A".into(),
            length: "120".into(),
            offset: "4096".into(),
            filename: "f.warc.gz".into(),
        };
        let line = cdxj_line(&url, "20240101000000", &entry);
        assert!(
            line.starts_with("com,example)/a 20240101000000 {"),
            "{line}"
        );
        assert_eq!(
            parse_cdxj_line(&line),
            Some(("20240101000000".to_string(), entry.clone()))
        );
        assert_eq!(entry.offset(), Some(4096));
        assert_eq!(parse_cdxj_line("com,example)/a 2024 {\"url\":"), None);
    }
}
