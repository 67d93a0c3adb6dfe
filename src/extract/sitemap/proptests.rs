//! Property tests of the sitemap reader: arbitrary bytes and XML, entity
//! expansion, deep nesting, gzip bombs and huge files are read in bounded
//! time and memory, and what cannot be read is said in `problem`.

use super::*;
use crate::proptest_cases::config;
use flate2::Compression;
use flate2::write::GzEncoder;
use proptest::prelude::*;
use std::io::Write;
use std::time::{Duration, Instant};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// Pieces of sitemap XML, well-formed or not.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => ("[a-z/.:?=&;]{0,20}", prop::option::of("[0-9T:Z+.-]{0,26}")).prop_map(|(loc, lastmod)| {
            let lastmod = lastmod.map_or(String::new(), |m| format!("<lastmod>{m}</lastmod>"));
            format!("<url><loc>http://example.com/{loc}</loc>{lastmod}</url>")
        }),
        1 => Just("<loc>".to_string()),
        1 => Just("</loc>".to_string()),
        1 => Just("<lastmod>".to_string()),
        1 => Just("&amp;&lt;&bogus;&#0;&#x110000;".to_string()),
        1 => Just("<![CDATA[<loc>x</loc>]]>".to_string()),
        1 => Just("<!-- <loc>http://c/</loc> -->".to_string()),
        1 => Just("<sitemap><loc>http://example.com/s.xml</loc></sitemap>".to_string()),
        1 => "\\PC{0,16}",
    ]
}

/// A document: a root, pieces, maybe a DTD declaring entities (billion
/// laughs), maybe cut anywhere.
fn document() -> impl Strategy<Value = Vec<u8>> {
    let root = prop_oneof![Just("urlset"), Just("sitemapindex"), Just("html"), Just("")];
    let dtd = prop_oneof![
        Just(String::new()),
        Just(billion_laughs_dtd()),
        Just("<!DOCTYPE urlset SYSTEM \"file:///etc/passwd\">".to_string()),
    ];
    (root, dtd, prop::collection::vec(piece(), 0..40), any::<bool>(), any::<prop::sample::Index>())
        .prop_map(|(root, dtd, pieces, cut, at)| {
            let mut xml = format!("<?xml version=\"1.0\"?>{dtd}<{root} xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">");
            if !dtd.is_empty() {
                xml.push_str("<url><loc>http://example.com/&lol9;</loc></url>");
            }
            xml.push_str(&pieces.concat());
            xml.push_str(&format!("</{root}>"));
            let mut bytes = xml.into_bytes();
            if cut {
                bytes.truncate(at.index(bytes.len() + 1));
            }
            bytes
        })
}

fn billion_laughs_dtd() -> String {
    let mut dtd = String::from("<!DOCTYPE urlset [<!ENTITY lol0 \"lol\">");
    for i in 1..10 {
        let prev = format!("&lol{};", i - 1);
        dtd.push_str(&format!("<!ENTITY lol{i} \"{}\">", prev.repeat(10)));
    }
    dtd.push_str("]>");
    dtd
}

/// Deeply nested elements, closed or not.
fn nested() -> impl Strategy<Value = Vec<u8>> {
    (0usize..20_000, any::<bool>()).prop_map(|(depth, closed)| {
        let mut xml =
            "<urlset>".to_string() + &"<url>".repeat(depth) + "<loc>http://example.com/deep</loc>";
        if closed {
            xml.push_str(&"</url>".repeat(depth));
            xml.push_str("</urlset>");
        }
        xml.into_bytes()
    })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => document(),
        1 => document().prop_map(|d| gzip(&d)),
        1 => nested(),
        1 => prop::collection::vec(any::<u8>(), 0..2000),
        // A gzip stream cut short.
        1 => (document(), any::<prop::sample::Index>()).prop_map(|(d, at)| {
            let mut gz = gzip(&d);
            gz.truncate(at.index(gz.len() + 1));
            gz
        }),
        // A small gzip bomb: up to a megabyte of one byte from a few KB.
        1 => (1usize..=4, any::<u8>()).prop_map(|(quarters, b)| gzip(&vec![b; quarters << 18])),
    ]
}

/// A debug build on a loaded 2-core machine reads any of these bodies in
/// well under this; a hang or a blow-up does not.
const TIME_BOUND: Duration = Duration::from_secs(5);

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn any_body_is_read_in_bounded_time_with_bounded_entries(body in body()) {
        let started = Instant::now();
        let map = parse(&body);
        prop_assert!(started.elapsed() < TIME_BOUND, "{:?}", started.elapsed());
        prop_assert!(map.entries.len() <= MAX_URLS);
        for entry in &map.entries {
            prop_assert!(!entry.loc.is_empty());
            // No entity was expanded into a location.
            prop_assert!(entry.loc.len() < 1024, "{}", entry.loc.len());
        }
        let _ = is_sitemap("http://example.com/sitemap.xml", Some("application/xml"), &body);
    }

    #[test]
    fn w3c_datetimes_never_panic(text in prop_oneof![
        "\\PC{0,30}",
        "[0-9]{4}(-[0-9]{2}(-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{0,3})?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?)?)?",
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{0,8}\\PC{0,3}[Z+-]\\PC{0,6}",
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{0,2}\\PC{0,2}[Z+-][0-9:]{0,5}\\PC{0,2}",
    ]) {
        if let Some(ms) = w3c_datetime_ms(&text) {
            // Years 0000-9999 with any offset stay far inside i64.
            prop_assert!(ms.abs() < 400_000_000_000_000, "{}", ms);
        }
    }
}

#[test]
fn a_gzip_bomb_over_the_bound_is_refused_with_its_reason() {
    let bomb = gzip(&vec![b' '; MAX_BYTES + 1]);
    assert_refused_as_too_large(&parse_within_a_minute(&bomb));
}

#[test]
fn entity_expansion_is_refused_not_performed() {
    let xml = format!(
        "<?xml version=\"1.0\"?>{}<urlset><url><loc>http://example.com/&lol9;</loc></url></urlset>",
        billion_laughs_dtd()
    );
    let map = parse(xml.as_bytes());
    assert!(map.problem.is_some(), "a DTD is refused and said so");
    assert!(
        map.entries.iter().all(|e| e.loc.len() < 1024),
        "{:?}",
        map.entries
    );
}

/// Found by `w3c_datetimes_never_panic`: the seconds were sliced at byte 2
/// as a str, inside a character that straddles it.
#[test]
fn a_character_straddling_the_seconds_is_no_datetime_not_a_panic() {
    assert_eq!(w3c_datetime_ms("2024-05-17T10:30:𐬿+00:00"), None);
    assert_eq!(w3c_datetime_ms("2024-05-17T10:30:5é+00:00"), None);
    assert!(w3c_datetime_ms("2024-05-17T10:30:15+00:00").is_some());
}

/// A file at the protocol's size bound made of the smallest entries: as
/// a tree it would be millions of nodes (hundreds of MB); it is read by
/// its `<loc>` tags, the protocol's 50,000 kept, and said so.
#[test]
fn a_huge_file_of_small_entries_keeps_the_protocols_count_and_says_why() {
    let entry = "<url><loc>http://h/</loc></url>";
    let mut xml = String::from("<urlset>");
    while xml.len() + entry.len() < MAX_BYTES - 16 {
        xml.push_str(entry);
    }
    xml.push_str("</urlset>");
    let map = parse_within_a_minute(xml.as_bytes());
    assert_eq!(map.entries.len(), MAX_URLS);
    let problem = map.problem.unwrap_or_default();
    assert!(
        problem.contains("XML nodes") && problem.contains("URLs"),
        "{problem}"
    );
}

#[test]
fn a_plain_file_over_the_bound_is_refused_with_its_reason() {
    assert_refused_as_too_large(&parse(&vec![b' '; MAX_BYTES + 1]));
}

/// `body` read, within a minute even on a loaded machine (a file at the
/// size bound, or a bomb over it).
fn parse_within_a_minute(body: &[u8]) -> Sitemap {
    let started = Instant::now();
    let map = parse(body);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    map
}

/// Nothing read, and the size bound named as the reason.
fn assert_refused_as_too_large(map: &Sitemap) {
    assert!(map.entries.is_empty());
    assert!(
        map.problem
            .as_deref()
            .is_some_and(|p| p.contains("larger than")),
        "{:?}",
        map.problem
    );
}
