//! Sitemaps (sitemaps.org protocol 0.9): a `<urlset>` lists pages, a
//! `<sitemapindex>` lists more sitemaps; both may come gzip-compressed.
//! Their `<loc>` URLs are links like any other, so they enter the frontier
//! under the same scope, filters and robots rules.

use flate2::read::GzDecoder;
use std::io::Read;

/// The protocol's bounds: at most this many URLs in one file...
pub const MAX_URLS: usize = 50_000;
/// ...and at most this many bytes, uncompressed.
pub const MAX_BYTES: usize = 50 * 1024 * 1024;

/// What a sitemap file held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sitemap {
    /// `<loc>` values, in order, at most [`MAX_URLS`].
    pub locs: Vec<String>,
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
    let doc = match roxmltree::Document::parse(&text) {
        Ok(doc) => doc,
        Err(e) => return salvage(&text, format!("sitemap: invalid XML: {e}")),
    };
    let root = doc.root_element();
    let index = match root.tag_name().name() {
        "urlset" => false,
        "sitemapindex" => true,
        other => return problem(format!("sitemap: root element <{other}> is not a sitemap")),
    };
    let mut locs: Vec<String> = root
        .descendants()
        .filter(|n| n.tag_name().name() == "loc")
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect();
    let problem = over_limit(&mut locs);
    Sitemap {
        locs,
        index,
        problem,
    }
}

/// A file that is not well-formed XML (cut off, a stray `&`): the `<loc>`
/// entries before the error are still worth following, as sitemaps are
/// often truncated by a server that gave up.
fn salvage(text: &str, why: String) -> Sitemap {
    let mut locs = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<loc>") {
        rest = &rest[start + 5..];
        let Some(end) = rest.find("</loc>") else {
            break;
        };
        let loc = rest[..end].trim().replace("&amp;", "&");
        if !loc.is_empty() && !loc.contains('<') {
            locs.push(loc);
        }
        rest = &rest[end + 6..];
    }
    let limited = over_limit(&mut locs);
    Sitemap {
        index: text.contains("<sitemapindex"),
        locs,
        problem: Some(limited.map_or(why.clone(), |l| format!("{why}; {l}"))),
    }
}

fn over_limit(locs: &mut Vec<String>) -> Option<String> {
    (locs.len() > MAX_URLS).then(|| {
        let n = locs.len();
        locs.truncate(MAX_URLS);
        format!("sitemap: {n} URLs, the protocol's {MAX_URLS} were read")
    })
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

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn a_urlset_lists_its_locations() {
        let xml = urlset(&["http://h/a", " http://h/b?x=1&amp;y=2 "]);
        let s = parse(xml.as_bytes());
        assert_eq!(s.locs, vec!["http://h/a", "http://h/b?x=1&y=2"]);
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
        assert_eq!(s.locs, vec!["http://h/s1.xml.gz", "http://h/s2.xml"]);
    }

    #[test]
    fn broken_xml_keeps_what_came_before_and_says_why() {
        let mut xml = urlset(&["http://h/1", "http://h/2"]);
        xml.truncate(xml.len() - 20);
        xml.push_str("<url><loc>http://h/3");
        let s = parse(xml.as_bytes());
        assert_eq!(s.locs, vec!["http://h/1", "http://h/2"]);
        assert!(s.problem.unwrap().starts_with("sitemap: invalid XML"));
        let s = parse(b"<html><body>not a sitemap</body></html>");
        assert!(s.locs.is_empty());
        assert!(s.problem.unwrap().contains("<html>"));
        let s = parse(&[0x1f, 0x8b, 1, 2, 3]);
        assert!(s.problem.unwrap().contains("gunzip"));
    }

    #[test]
    fn the_protocols_bounds_hold() {
        let locs: Vec<String> = (0..MAX_URLS + 10)
            .map(|i| format!("http://h/{i}"))
            .collect();
        let refs: Vec<&str> = locs.iter().map(String::as_str).collect();
        let s = parse(urlset(&refs).as_bytes());
        assert_eq!(s.locs.len(), MAX_URLS);
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
