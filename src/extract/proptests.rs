//! Property tests of a page's way through extraction (charset sniffing and
//! decoding, the tokenizer, link and text extraction, the sitemap switch):
//! arbitrary bytes, deep nesting, unclosed tags and mixed encodings never
//! panic, what comes out is bounded by what came in, and every link kept is
//! an absolute http(s) URL.

use super::*;
use crate::proptest_cases::config;
use proptest::prelude::*;
use web_crawler_actors::{Extractor, FetchedPage};

/// Pieces of markup that exercise the tokenizer's states and the
/// extractor's rules: raw text, foreign content, comments, CDATA,
/// entities, links of every kind and scheme, bases, meta tags, stray and
/// unclosed tags, bytes of other encodings.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    let fixed = prop_oneof![
        Just("<a href=\"/x\">x</a>"),
        Just("<a href='//other.example/y?utm_source=z#f'>"),
        Just("<a href=javascript:alert(1)>"),
        Just("<a href=\"mailto:a@b\">"),
        Just("<a href=\"http://[::1\">"),
        Just("<a href=\"http://exa mple.com/\">"),
        Just("<a rel=nofollow href=rel/ative>"),
        Just("<area href=../up>"),
        Just("<link rel=canonical href=/c>"),
        Just("<link rel=alternate href=https://alt.example/>"),
        Just("<iframe src=/frame></iframe>"),
        Just("<frame src=\"\">"),
        Just("<base href=\"https://base.example/dir/\">"),
        Just("<base href=\"ftp://nope/\">"),
        Just("<meta name=robots content=\"noindex, nofollow\">"),
        Just("<meta charset=windows-1251>"),
        Just("<meta http-equiv=Content-Type content=\"text/html; charset=shift_jis\">"),
        Just("<meta charset=utf-16le>"),
        Just("<title>T"),
        Just("</title>"),
        Just("<h1>"),
        Just("</h2>"),
        Just("<script>if (a < b) { document.write('<a href=/s>') }"),
        Just("</script>"),
        Just("<style>a{}</style>"),
        Just("<textarea><a href=/t>"),
        Just("<svg><title>s</title><a href=/svg>"),
        Just("<math><mi>"),
        Just("<![CDATA[ <a href=/cdata> ]]>"),
        Just("<!-- <a href=/comment> -->"),
        Just("<!--"),
        Just("<template><a href=/tpl></template>"),
        Just("<nav><a href=/nav>n</a></nav>"),
        Just("<main><p>"),
        Just("<article>"),
        Just("<footer>"),
        Just("<noscript>"),
        Just("&amp;&lt;&#x0;&#xFFFFFF;&#99999999;&nGt;&notanentity;&"),
        Just("<p"),
        Just("<"),
        Just("</"),
        Just("<a href="),
        Just("\u{0}"),
        Just("<!doctype html>"),
        Just("<plaintext>"),
        Just("<xmp>"),
    ]
    .prop_map(|s| s.as_bytes().to_vec());
    prop_oneof![
        8 => fixed,
        3 => "\\PC{0,12}".prop_map(String::into_bytes),
        1 => prop::collection::vec(any::<u8>(), 0..24),
        // Bytes of windows-1251, Shift_JIS and a BOM in the middle.
        1 => Just(b"\xCF\xF0\xE8\xE2\xE5\xF2 \x82\xA0\xEF\xBB\xBF".to_vec()),
    ]
}

/// Deep nesting: `depth` opening tags of one kind, never closed.
fn nested() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![
            Just("<div>"),
            Just("<a href=/n>"),
            Just("<svg>"),
            Just("<b><i>"),
            Just("<table><tr><td>")
        ],
        0usize..4000,
    )
        .prop_map(|(tag, depth)| tag.repeat(depth).into_bytes())
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::collection::vec(piece(), 0..60).prop_map(|p| p.concat()),
        1 => (prop::collection::vec(piece(), 0..10), nested(), prop::collection::vec(piece(), 0..10))
            .prop_map(|(a, n, b)| [a.concat(), n, b.concat()].concat()),
        1 => prop::collection::vec(any::<u8>(), 0..3000),
    ]
}

fn content_type() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![
        Just("text/html".to_string()),
        Just("text/html; charset=windows-1252".to_string()),
        Just("text/html; charset=\"utf-16\"".to_string()),
        Just("text/html; charset=iso-2022-kr".to_string()),
        Just("application/xhtml+xml; charset=nonsense".to_string()),
        Just("text/plain".to_string()),
        Just("application/xml".to_string()),
        Just("image/png".to_string()),
        "\\PC{0,20}",
    ])
}

fn page_url() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("http://example.com/dir/page.html".to_string()),
        Just("https://example.com/".to_string()),
        Just("http://example.com/sitemap.xml".to_string()),
        Just("not a url".to_string()),
        "http://example\\.com/[a-z/]{0,30}",
    ]
}

/// Everything an extraction holds, in bytes: the memory it costs.
fn held_bytes(e: &web_crawler_actors::ExtractedPage) -> usize {
    e.document.len()
        + e.text.len()
        + e.visible_head.len()
        + e.title.as_ref().map_or(0, String::len)
        + e.headings.iter().map(String::len).sum::<usize>()
        + e.links.iter().map(|l| l.as_str().len()).sum::<usize>()
        + e.anchors.iter().map(String::len).sum::<usize>()
}

/// What an extraction may hold for a body of `body_len` bytes. Decoding
/// may turn a byte into three (U+FFFD); the text, title, headings and
/// anchors each hold at most the decoded document; the links at most twice
/// it and 1 MB (`link_bytes_budget`, and one link of 2 KB past it).
fn held_bound(body_len: usize) -> usize {
    let document = 3 * body_len;
    5 * document + 2 * document + (1 << 20) + 4096
}

fn fetched(body: Vec<u8>, content_type: Option<String>) -> FetchedPage {
    FetchedPage {
        status: 200,
        content_type,
        body,
        ..FetchedPage::default()
    }
}

proptest! {
    #![proptest_config(config(1500))]

    #[test]
    fn any_page_extracts_without_a_panic_within_bounds_and_with_absolute_http_links(
        body in body(),
        content_type in content_type(),
        url in page_url(),
        text_limit in prop_oneof![Just(0usize), Just(100), Just(usize::MAX)],
    ) {
        let extractor = HtmlExtractor::default();
        let body_len = body.len();
        let page = fetched(body, content_type);
        let e = extractor.extract(&url, &page, text_limit);
        for link in &e.links {
            prop_assert!(matches!(link.scheme(), "http" | "https"), "{}", link);
            prop_assert!(link.host_str().is_some_and(|h| !h.is_empty()), "{}", link);
            prop_assert!(link.fragment().is_none(), "{}", link);
        }
        prop_assert!(e.text.len() <= text_limit, "{} > {}", e.text.len(), text_limit);
        prop_assert!(
            e.visible_head.len() <= web_crawler_actors::traps::SIMHASH_TEXT_BYTES,
            "{}", e.visible_head.len()
        );
        prop_assert!(e.links.len() <= e.links_found);
        let bound = held_bound(body_len);
        prop_assert!(held_bytes(&e) <= bound, "{} bytes held for a {}-byte body", held_bytes(&e), body_len);
    }

    #[test]
    fn charset_sniffing_and_decoding_never_panic(
        body in prop::collection::vec(any::<u8>(), 0..2000),
        prefix in prop::sample::select(vec![
            b"".to_vec(),
            b"\xEF\xBB\xBF".to_vec(),
            b"\xFF\xFE".to_vec(),
            b"\xFE\xFF".to_vec(),
            b"<meta charset=\"".to_vec(),
            b"<meta http-equiv=content-type content='text/html;charset=".to_vec(),
            b"<!doctype html><html>".to_vec(),
        ]),
        content_type in content_type(),
    ) {
        let body = [prefix, body].concat();
        let (text, encoding) = decode_body(&body, content_type.as_deref());
        prop_assert!(!encoding.is_empty());
        // No encoding turns one byte into more than three of UTF-8.
        prop_assert!(text.len() <= 3 * body.len() + 3, "{} from {}", text.len(), body.len());
        let _ = is_html(content_type.as_deref(), &body[..body.len().min(512)]);
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// Short relative links on a page with a long URL: each resolves to a
    /// URL as long as the page's.
    #[test]
    fn links_on_a_page_with_a_long_url_are_bounded_by_the_body(
        url_len in 100usize..2000,
        links in 1usize..4000,
    ) {
        let url = format!("http://example.com/{}", "p".repeat(url_len));
        let body: String = (0..links).map(|i| format!("<a href=?{i}>")).collect();
        let body_len = body.len();
        let page = fetched(body.into_bytes(), Some("text/html".into()));
        let e = HtmlExtractor::default().extract(&url, &page, usize::MAX);
        let bound = held_bound(body_len);
        prop_assert!(held_bytes(&e) <= bound, "{} bytes held for a {}-byte body", held_bytes(&e), body_len);
        prop_assert_eq!(e.links_found, links);
        prop_assert!(!e.links.is_empty());
    }
}
