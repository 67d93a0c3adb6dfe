//! Sitemaps (sitemaps.org protocol 0.9): a `<urlset>` lists pages, a
//! `<sitemapindex>` lists more sitemaps; both may come gzip-compressed.
//! Their `<loc>` URLs are links like any other, so they enter the frontier
//! under the same scope, filters and robots rules; an entry's `<lastmod>`
//! goes with its link, so a page changed since it was fetched is fetched
//! again, and recently changed pages sooner.

use flate2::read::GzDecoder;
use std::io::Read;

/// The protocol's bounds: at most this many URLs in one file...
pub const MAX_URLS: usize = 50_000;
/// ...and at most this many bytes, uncompressed.
pub const MAX_BYTES: usize = 50 * 1024 * 1024;

/// One `<url>` (or `<sitemap>`) entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub loc: String,
    /// `<lastmod>`, epoch milliseconds; `None` when absent or unreadable.
    pub lastmod: Option<i64>,
}

/// What a sitemap file held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sitemap {
    /// The entries, in order, at most [`MAX_URLS`].
    pub entries: Vec<Entry>,
    /// It was a sitemap index (its locations are sitemaps).
    pub index: bool,
    /// Why not all of it was read (broken XML after some entries, over a
    /// bound), in one line.
    pub problem: Option<String>,
}

/// Whether a response looks like a sitemap: an XML or gzip body at a URL or
/// with a type that says so, whose root is `urlset` or `sitemapindex`.
pub fn is_sitemap(url: &str, content_type: Option<&str>, body: &[u8]) -> bool {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let named = path.ends_with(".xml") || path.ends_with(".xml.gz");
    let typed = content_type.is_some_and(|c| {
        let c = c.to_ascii_lowercase();
        c.contains("xml") || c.contains("gzip")
    });
    if !(named || typed) {
        return false;
    }
    if is_gzip(body) {
        return named;
    }
    let head = String::from_utf8_lossy(&body[..body.len().min(1024)]);
    head.contains("<urlset") || head.contains("<sitemapindex")
}

fn is_gzip(body: &[u8]) -> bool {
    body.starts_with(&[0x1f, 0x8b])
}

/// Read a sitemap file (gzip or plain XML). Never fails: a broken file
/// yields what could be read and the problem.
pub fn parse(body: &[u8]) -> Sitemap {
    let xml = if is_gzip(body) {
        let mut out = Vec::new();
        let read = GzDecoder::new(body)
            .take(MAX_BYTES as u64 + 1)
            .read_to_end(&mut out);
        if let Err(e) = read {
            return problem(format!("sitemap: cannot gunzip: {e}"));
        }
        out
    } else {
        body.to_vec()
    };
    if xml.len() > MAX_BYTES {
        return problem(format!(
            "sitemap: larger than the protocol's {} MB",
            MAX_BYTES >> 20
        ));
    }
    let text = String::from_utf8_lossy(&xml);
    let options = roxmltree::ParsingOptions {
        // No DTD, so no entity is ever expanded (billion laughs).
        allow_dtd: false,
        nodes_limit: MAX_NODES,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = match roxmltree::Document::parse_with_options(&text, options) {
        Ok(doc) => doc,
        Err(roxmltree::Error::NodesLimitReached) => {
            let why = format!("sitemap: over {MAX_NODES} XML nodes, read by its <loc> tags alone");
            return salvage(&text, why);
        }
        Err(e) => return salvage(&text, format!("sitemap: invalid XML: {e}")),
    };
    let root = doc.root_element();
    let index = match root.tag_name().name() {
        "urlset" => false,
        "sitemapindex" => true,
        other => return problem(format!("sitemap: root element <{other}> is not a sitemap")),
    };
    let mut entries = Entries::default();
    let found = root
        .children()
        .filter(|n| n.is_element())
        .filter_map(|entry| {
            let child = |name: &str| {
                entry
                    .children()
                    .find(|n| n.tag_name().name() == name)
                    .and_then(|n| n.text())
                    .map(str::trim)
            };
            let loc = child("loc").filter(|t| !t.is_empty())?;
            Some(Entry {
                loc: loc.to_string(),
                lastmod: child("lastmod").and_then(w3c_datetime_ms),
            })
        });
    for entry in found {
        entries.push(entry);
    }
    let problem = entries.over_limit();
    Sitemap {
        entries: entries.kept,
        index,
        problem,
    }
}

/// A tree of more nodes than this is not built; the file is read by
/// [`salvage`] instead. A sitemap of [`MAX_URLS`] entries with every
/// optional field, indented, has about 14 nodes an entry; a file of 50 MB
/// of `<a/>` would have 12 million, each some 80 bytes of tree.
const MAX_NODES: u32 = 20 * MAX_URLS as u32;

/// Entries as they are found: the first [`MAX_URLS`] kept, the rest only
/// counted, so a huge file never holds more than the protocol allows.
#[derive(Default)]
struct Entries {
    kept: Vec<Entry>,
    found: usize,
}

impl Entries {
    fn push(&mut self, entry: Entry) {
        self.found += 1;
        if self.kept.len() < MAX_URLS {
            self.kept.push(entry);
        }
    }

    fn over_limit(&self) -> Option<String> {
        (self.found > MAX_URLS).then(|| {
            format!(
                "sitemap: {} URLs, the protocol's {MAX_URLS} were read",
                self.found
            )
        })
    }
}

/// A file that is not well-formed XML (cut off, a stray `&`): the `<loc>`
/// entries before the error are still worth following, as sitemaps are
/// often truncated by a server that gave up.
fn salvage(text: &str, why: String) -> Sitemap {
    let mut entries = Entries::default();
    let mut rest = text;
    while let Some(start) = rest.find("<loc>") {
        rest = &rest[start + 5..];
        let Some(end) = rest.find("</loc>") else {
            break;
        };
        let loc = rest[..end].trim().replace("&amp;", "&");
        rest = &rest[end + 6..];
        // The entry's lastmod, if it comes before the next entry.
        let entry_end = rest.find("<loc>").unwrap_or(rest.len());
        let lastmod = rest[..entry_end].find("<lastmod>").and_then(|at| {
            let value = &rest[at + 9..entry_end];
            w3c_datetime_ms(value[..value.find("</lastmod>")?].trim())
        });
        if !loc.is_empty() && !loc.contains('<') {
            entries.push(Entry { loc, lastmod });
        }
    }
    let limited = entries.over_limit();
    Sitemap {
        index: text.contains("<sitemapindex"),
        entries: entries.kept,
        problem: Some(limited.map_or(why.clone(), |l| format!("{why}; {l}"))),
    }
}

/// A W3C datetime as sitemaps use it (`2024`, `2024-05`, `2024-05-17`,
/// `2024-05-17T10:30+02:00`, `…T10:30:15Z`, `…T10:30:15.5-05:00`) in epoch
/// milliseconds; `None` for anything else.
pub fn w3c_datetime_ms(text: &str) -> Option<i64> {
    let (date, time) = match text.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (text, None),
    };
    let mut parts = date.split('-');
    let year: i64 = number(parts.next()?, 4)?;
    let month: i64 = parts.next().map_or(Some(1), |m| number(m, 2))?;
    let day: i64 = parts.next().map_or(Some(1), |d| number(d, 2))?;
    if parts.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let mut ms = days_from_civil(year, month, day) * 86_400_000;
    if let Some(time) = time {
        let zone_at = time.find(['Z', '+', '-'])?;
        let (clock, zone) = time.split_at(zone_at);
        let mut hms = clock.split(':');
        let hour: i64 = number(hms.next()?, 2)?;
        let minute: i64 = number(hms.next()?, 2)?;
        let second: f64 = match hms.next() {
            // Bytes, not a str slice: a character may straddle byte 2.
            Some(s) if s.len() >= 2 && s.as_bytes()[..2].iter().all(u8::is_ascii_digit) => {
                s.parse().ok()?
            }
            Some(_) => return None,
            None => 0.0,
        };
        if hms.next().is_some() || hour > 23 || minute > 59 || !(0.0..61.0).contains(&second) {
            return None;
        }
        let offset = match zone {
            "Z" => 0,
            _ => {
                let sign = if zone.starts_with('-') { -1 } else { 1 };
                let (h, m) = zone[1..].split_once(':')?;
                sign * (number(h, 2)? * 60 + number(m, 2)?)
            }
        };
        ms += ((hour * 60 + minute - offset) * 60) * 1000 + (second * 1000.0) as i64;
    }
    Some(ms)
}

/// Exactly `digits` ASCII digits.
fn number(text: &str, digits: usize) -> Option<i64> {
    (text.len() == digits && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn problem(why: String) -> Sitemap {
    Sitemap {
        problem: Some(why),
        ..Sitemap::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use std::io::Write;

    fn urlset(locs: &[&str]) -> String {
        let entries: String = locs
            .iter()
            .map(|l| format!("<url><loc>{l}</loc><lastmod>2024-01-01</lastmod></url>"))
            .collect();
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
             <urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">{entries}</urlset>"
        )
    }

    fn locs(s: &Sitemap) -> Vec<&str> {
        s.entries.iter().map(|e| e.loc.as_str()).collect()
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn a_urlset_lists_its_locations() {
        let xml = urlset(&["http://h/a", " http://h/b?x=1&amp;y=2 "]);
        let s = parse(xml.as_bytes());
        assert_eq!(locs(&s), vec!["http://h/a", "http://h/b?x=1&y=2"]);
        assert!(!s.index);
        assert_eq!(s.problem, None);
    }

    #[test]
    fn an_index_lists_sitemaps_and_gzip_is_read() {
        let xml = "<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                   <sitemap><loc>http://h/s1.xml.gz</loc></sitemap>\
                   <sitemap><loc>http://h/s2.xml</loc></sitemap></sitemapindex>";
        let s = parse(&gzip(xml.as_bytes()));
        assert!(s.index);
        assert_eq!(locs(&s), vec!["http://h/s1.xml.gz", "http://h/s2.xml"]);
    }

    #[test]
    fn broken_xml_keeps_what_came_before_and_says_why() {
        let mut xml = urlset(&["http://h/1", "http://h/2"]);
        xml.truncate(xml.len() - 20);
        xml.push_str("<url><loc>http://h/3");
        let s = parse(xml.as_bytes());
        assert_eq!(locs(&s), vec!["http://h/1", "http://h/2"]);
        assert!(s.problem.unwrap().starts_with("sitemap: invalid XML"));
        let s = parse(b"<html><body>not a sitemap</body></html>");
        assert!(s.entries.is_empty());
        assert!(s.problem.unwrap().contains("<html>"));
        let s = parse(&[0x1f, 0x8b, 1, 2, 3]);
        assert!(s.problem.unwrap().contains("gunzip"));
    }

    #[test]
    fn lastmod_goes_with_its_entry() {
        let xml = "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                   <url><loc>http://h/a</loc><lastmod>2024-01-02</lastmod></url>\
                   <url><lastmod>2024-03-04T05:06:07+01:00</lastmod><loc>http://h/b</loc></url>\
                   <url><loc>http://h/c</loc><lastmod>yesterday</lastmod></url>\
                   <url><loc>http://h/d</loc></url></urlset>";
        let s = parse(xml.as_bytes());
        let lastmods: Vec<Option<i64>> = s.entries.iter().map(|e| e.lastmod).collect();
        assert_eq!(
            lastmods,
            vec![Some(1_704_153_600_000), Some(1_709_525_167_000), None, None]
        );
        // Cut off XML keeps each salvaged entry's own lastmod.
        let cut = &xml[..xml.find("<url><loc>http://h/d").unwrap() + 12];
        let s = parse(cut.as_bytes());
        let salvaged: Vec<(&str, Option<i64>)> = s
            .entries
            .iter()
            .map(|e| (e.loc.as_str(), e.lastmod))
            .collect();
        assert_eq!(salvaged[0], ("http://h/a", Some(1_704_153_600_000)));
        assert_eq!(salvaged[2], ("http://h/c", None));
    }

    #[test]
    fn w3c_datetimes_of_every_precision() {
        let day = 86_400_000;
        assert_eq!(w3c_datetime_ms("1970-01-01"), Some(0));
        assert_eq!(w3c_datetime_ms("1970-01-02"), Some(day));
        assert_eq!(w3c_datetime_ms("1970"), Some(0));
        assert_eq!(w3c_datetime_ms("1970-02"), Some(31 * day));
        assert_eq!(w3c_datetime_ms("2000-03-01"), Some(11_017 * day));
        assert_eq!(w3c_datetime_ms("1970-01-01T01:00Z"), Some(3_600_000));
        assert_eq!(w3c_datetime_ms("1970-01-01T01:00+01:00"), Some(0));
        assert_eq!(
            w3c_datetime_ms("1970-01-01T00:00:01.5-00:30"),
            Some(1_801_500)
        );
        for bad in [
            "",
            "24-01-01",
            "2024-13-01",
            "2024-01-01T25:00Z",
            "2024-01-01T10:00",
            "soon",
        ] {
            assert_eq!(w3c_datetime_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_protocols_bounds_hold() {
        let locs: Vec<String> = (0..MAX_URLS + 10)
            .map(|i| format!("http://h/{i}"))
            .collect();
        let refs: Vec<&str> = locs.iter().map(String::as_str).collect();
        let s = parse(urlset(&refs).as_bytes());
        assert_eq!(s.entries.len(), MAX_URLS);
        assert!(s.problem.unwrap().contains("50010 URLs"));
        // A gzip bomb: 60 MB of zeros compress to a few dozen KB.
        let bomb = gzip(&vec![b' '; MAX_BYTES + 10 * 1024 * 1024]);
        assert!(bomb.len() < 1024 * 1024);
        let s = parse(&bomb);
        assert!(s.problem.unwrap().contains("larger than"));
    }

    #[test]
    fn sitemaps_are_told_from_pages() {
        let xml = urlset(&["http://h/a"]);
        assert!(is_sitemap(
            "http://h/sitemap.xml",
            Some("application/xml"),
            xml.as_bytes()
        ));
        assert!(is_sitemap("http://h/any", Some("text/xml"), xml.as_bytes()));
        assert!(is_sitemap(
            "http://h/s.xml.gz",
            Some("application/octet-stream"),
            &gzip(b"x")
        ));
        assert!(!is_sitemap(
            "http://h/feed.xml",
            Some("application/rss+xml"),
            b"<rss></rss>"
        ));
        assert!(!is_sitemap(
            "http://h/page",
            Some("text/html"),
            xml.as_bytes()
        ));
    }
}

#[cfg(test)]
mod proptests;
