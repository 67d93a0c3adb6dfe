//! What `POST /urls` reads: one URL (a JSON string, or `{"url": ...}`), or
//! many (a JSON array of those, `{"urls": [...]}`, or NDJSON: one a line).
//! Pure: bytes in, URLs (and the items that are not URLs, each with why)
//! out, and the batches they are sent to the control actor in.

use std::ops::Range;
use web_crawler_actors::{MAX_BATCH_BYTES, MAX_BATCH_URLS};

/// The longest URL taken from a body (the crawl's own limit is far
/// shorter): a longer one is refused as an item, never sent.
pub const MAX_URL_BYTES: usize = 16 * 1024;

/// What a `POST /urls` body holds.
#[derive(Debug, PartialEq)]
pub enum UrlsBody {
    /// One URL: the answer is that URL's.
    One(String),
    /// Many: the answer lists each item's outcome, in order.
    Many(Vec<Item>),
}

/// One item of a batch.
#[derive(Debug, PartialEq)]
pub enum Item {
    Url(String),
    /// Not a URL: what it was (cut short), and why it is refused.
    Bad {
        what: String,
        why: String,
    },
}

/// Read a body: JSON, or NDJSON when `ndjson` (the request said
/// `application/x-ndjson`). `Err`: the whole body is refused, and why.
pub fn parse_urls(body: &[u8], ndjson: bool) -> Result<UrlsBody, String> {
    let text = std::str::from_utf8(body)
        .map_err(|e| format!("the body is not UTF-8 text (at byte {})", e.valid_up_to()))?;
    if ndjson {
        let items: Vec<Item> = text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(i, line)| match serde_json::from_str(line) {
                Ok(value) => item_of(value),
                Err(e) => Item::Bad {
                    what: cut(line),
                    why: format!("line {}: not JSON ({e})", i + 1),
                },
            })
            .collect();
        return non_empty(items);
    }
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("the body is not JSON: {e}"))?;
    match value {
        serde_json::Value::Array(items) => non_empty(items.into_iter().map(item_of).collect()),
        serde_json::Value::Object(mut fields)
            if fields.len() == 1 && fields.contains_key("urls") =>
        {
            match fields.remove("urls") {
                Some(serde_json::Value::Array(items)) => {
                    non_empty(items.into_iter().map(item_of).collect())
                }
                _ => Err("\"urls\" must be an array of URLs".to_string()),
            }
        }
        one => match item_of(one) {
            Item::Url(url) => Ok(UrlsBody::One(url)),
            Item::Bad { why, .. } => Err(why),
        },
    }
}

fn non_empty(items: Vec<Item>) -> Result<UrlsBody, String> {
    if items.is_empty() {
        return Err("no URLs in the body".to_string());
    }
    Ok(UrlsBody::Many(items))
}

/// A URL item: a string, or an object whose one field is `url`.
fn item_of(value: serde_json::Value) -> Item {
    let url = match &value {
        serde_json::Value::String(url) => Some(url.clone()),
        serde_json::Value::Object(fields) => match fields.get("url") {
            Some(serde_json::Value::String(url)) if fields.len() == 1 => Some(url.clone()),
            _ => None,
        },
        _ => None,
    };
    match url {
        Some(url) if url.len() > MAX_URL_BYTES => Item::Bad {
            what: cut(&url),
            why: format!(
                "a URL of {} bytes, over the {MAX_URL_BYTES} taken",
                url.len()
            ),
        },
        Some(url) => Item::Url(url),
        None => Item::Bad {
            what: cut(&value.to_string()),
            why: "not a URL: give a string, or {\"url\": \"...\"} with no other field".to_string(),
        },
    }
}

/// At most 200 bytes of `text`, cut at a character.
fn cut(text: &str) -> String {
    let mut end = text.len().min(200);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// The batches `urls` go to the control actor in: each at most
/// [`MAX_BATCH_URLS`] URLs, and well under [`MAX_BATCH_BYTES`] of JSON.
pub fn batches(urls: &[String]) -> Vec<Range<usize>> {
    // Room for the request's envelope, and a URL's quotes and escapes.
    let budget = MAX_BATCH_BYTES - 64 * 1024;
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, url) in urls.iter().enumerate() {
        let size = 2 * url.len() + 8;
        if i > start && (i - start == MAX_BATCH_URLS || bytes + size > budget) {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < urls.len() {
        out.push(start..urls.len());
    }
    out
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    fn many(body: &str, ndjson: bool) -> Vec<Item> {
        match parse_urls(body.as_bytes(), ndjson).unwrap() {
            UrlsBody::Many(items) => items,
            one => panic!("{one:?}"),
        }
    }

    #[test]
    fn one_url_is_a_string_or_an_object_with_a_url() {
        let one = |body: &str| parse_urls(body.as_bytes(), false);
        assert_eq!(one(r#""http://a/""#), Ok(UrlsBody::One("http://a/".into())));
        assert_eq!(
            one(r#"{"url": "http://a/"}"#),
            Ok(UrlsBody::One("http://a/".into()))
        );
        let unknown = one(r#"{"url": "http://a/", "priority": 9}"#).unwrap_err();
        assert!(unknown.contains("no other field"), "{unknown}");
        assert!(
            one(r#"{"url": "http://a/""#)
                .unwrap_err()
                .contains("not JSON")
        );
        assert!(one("").unwrap_err().contains("not JSON"));
        assert!(one("42").unwrap_err().contains("not a URL"));
        let not_utf8 = parse_urls(b"\"http://a/\xff\"", false).unwrap_err();
        assert!(
            not_utf8.contains("not UTF-8 text (at byte 10)"),
            "{not_utf8}"
        );
    }

    #[test]
    fn many_urls_keep_their_order_and_each_bad_item_says_why() {
        let items = many(r#"["http://a/", {"url": "http://b/"}, 7, {"u": 1}]"#, false);
        assert_eq!(items[0], Item::Url("http://a/".into()));
        assert_eq!(items[1], Item::Url("http://b/".into()));
        assert!(matches!(&items[2], Item::Bad { what, .. } if what == "7"));
        assert!(matches!(&items[3], Item::Bad { why, .. } if why.starts_with("not a URL")));
        let wrapped = many(r#"{"urls": ["http://a/"]}"#, false);
        assert_eq!(wrapped, vec![Item::Url("http://a/".into())]);
        assert!(parse_urls(b"[]", false).unwrap_err().contains("no URLs"));
        assert!(parse_urls(br#"{"urls": "http://a/"}"#, false).is_err());
    }

    #[test]
    fn ndjson_takes_a_url_a_line_and_refuses_a_broken_line_alone() {
        let items = many(
            "\"http://a/\"\n\n{\"url\": \"http://b/\"}\n{\"url\": \r\n",
            true,
        );
        assert_eq!(items.len(), 3);
        assert_eq!(items[1], Item::Url("http://b/".into()));
        assert!(matches!(&items[2], Item::Bad { why, .. } if why.starts_with("line 4: not JSON")));
        let long = format!("\"http://a/{}\"", "x".repeat(MAX_URL_BYTES));
        assert!(matches!(&many(&long, true)[0], Item::Bad { why, .. } if why.contains("over the")));
    }

    #[test]
    fn batches_hold_at_most_their_count_and_bytes() {
        let urls: Vec<String> = (0..25_000).map(|i| format!("http://h/{i}")).collect();
        let b = batches(&urls);
        assert_eq!(b, vec![0..10_000, 10_000..20_000, 20_000..25_000]);
        let long: Vec<String> = (0..600).map(|_| "x".repeat(MAX_URL_BYTES)).collect();
        let b = batches(&long);
        assert!(b.len() > 1);
        assert_eq!(b.first().unwrap().start, 0);
        assert_eq!(b.last().unwrap().end, 600);
        for r in &b {
            let bytes: usize = long[r.clone()].iter().map(|u| 2 * u.len() + 8).sum();
            assert!(bytes <= MAX_BATCH_BYTES, "{r:?}: {bytes}");
        }
        assert!(batches(&[]).is_empty());
    }
}
