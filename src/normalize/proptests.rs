//! Property tests of the normalizer: any string in, no panic; what comes out
//! is a fixed point, parses as itself, and is the one form of every spelling
//! that differs only by what normalization removes.

use super::*;
use crate::proptest_cases::config;
use proptest::prelude::*;

/// URL-shaped text: schemes, hosts, ports, paths, queries and fragments
/// drawn from the characters that exercise the parser and the normalizer
/// (escapes good and bad, dot segments, non-ASCII, separators, spaces).
fn url_like() -> impl Strategy<Value = String> {
    let scheme = prop_oneof![
        Just("http://"),
        Just("HTTPS://"),
        Just("https://"),
        Just("hTtp:"),
        Just("//"),
        Just("ftp://"),
        Just("mailto:"),
        Just("javascript:"),
        Just(""),
    ];
    let host = prop_oneof![
        "[a-zA-Z0-9.-]{0,24}",
        "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
        Just("[::1]".to_string()),
        Just("bücher.example".to_string()),
        Just("xn--bcher-kva.example.".to_string()),
        "[a-z%0-9.]{1,12}",
        "\\PC{0,8}",
    ];
    let port = prop_oneof![
        Just(String::new()),
        Just(":80".to_string()),
        Just(":443".to_string()),
        ":[0-9]{0,6}",
    ];
    let path = "(/([a-zA-Z0-9._~!$&'()*+,;=:@-]|%[0-9a-fA-FzZ]{0,2}|\\.|\\.\\.|%2[eE]|é|\\PC| ){0,6}){0,6}";
    let query = prop_oneof![
        Just(String::new()),
        "\\?([a-zA-Z_%0-9=&.~]|utm_[a-z]{0,6}|gclid|\\PC){0,20}",
    ];
    let fragment = prop_oneof![Just(String::new()), "#\\PC{0,10}"];
    (scheme, host, port, path, query, fragment)
        .prop_map(|(s, h, p, path, q, f)| format!("{s}{h}{p}{path}{q}{f}"))
}

/// Any input: arbitrary Unicode, or URL-shaped text, or URL-shaped text
/// with whitespace around and a long tail (the length limit).
fn any_input() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        url_like(),
        (url_like(), "[ \t\n]{0,3}", 0usize..3000)
            .prop_map(|(u, ws, n)| format!("{ws}{u}{}{ws}", "a".repeat(n))),
    ]
}

fn options() -> impl Strategy<Value = NormalizeOptions> {
    (any::<bool>(), any::<bool>()).prop_map(|(strip_tracking_params, sort_query)| {
        NormalizeOptions {
            strip_tracking_params,
            sort_query,
        }
    })
}

/// What every normalized URL must be: http(s), a host, within the length
/// bound, parsing back to itself, and unchanged by a second pass.
fn check_normal_form(url: &Url, opts: &NormalizeOptions) -> Result<(), TestCaseError> {
    prop_assert!(matches!(url.scheme(), "http" | "https"), "{url}");
    prop_assert!(url.host_str().is_some_and(|h| !h.is_empty()), "{url}");
    prop_assert!(url.as_str().len() <= MAX_URL_LEN, "{url}");
    prop_assert!(url.fragment().is_none(), "{url}");
    let reparsed = Url::parse(url.as_str());
    prop_assert_eq!(
        reparsed.as_ref().ok(),
        Some(url),
        "does not parse as itself"
    );
    let again = normalize(url.as_str(), opts);
    prop_assert_eq!(
        again.as_ref().ok(),
        Some(url),
        "normalizing twice changed it"
    );
    Ok(())
}

/// The parts of a URL in normal form, and the spellings of it that only
/// differ by what normalization removes.
#[derive(Debug, Clone)]
struct Spelled {
    https: bool,
    labels: Vec<String>,
    path: Vec<String>,
    query: Vec<(String, String)>,
}

fn spelled() -> impl Strategy<Value = Spelled> {
    (
        any::<bool>(),
        // The last label starts with a letter: `a.0` is an IPv4 address
        // to the URL standard, and a refused one.
        (
            prop::collection::vec("[a-z0-9]{1,8}", 0..3),
            "[a-z][a-z0-9]{0,7}",
        )
            .prop_map(|(mut labels, last)| {
                labels.push(last);
                labels
            }),
        prop::collection::vec("[a-zA-Z0-9._~!$&'()*+,;=:@-]{0,8}", 0..5),
        prop::collection::vec(("[a-z]{1,6}", "[a-zA-Z0-9._~-]{0,6}"), 0..4),
    )
        .prop_map(|(https, labels, path, query)| Spelled {
            https,
            labels,
            path,
            query,
        })
}

/// One spelling of `s`: `variant` bits choose what is added (upper-case
/// scheme and host, a trailing dot, the default port, escapes of
/// unreserved characters with lower-case hex, tracking parameters, an
/// empty query, a fragment, whitespace around).
fn spell(s: &Spelled, variant: u16) -> String {
    let on = |bit: u16| variant & (1 << bit) != 0;
    let mut scheme = if s.https { "https" } else { "http" }.to_string();
    if on(0) {
        scheme = scheme.to_uppercase();
    }
    let mut host = s.labels.join(".");
    if on(1) {
        host = host.to_uppercase();
    }
    if on(2) {
        host.push('.');
    }
    let port = match (on(3), s.https) {
        (false, _) => "",
        (true, false) => ":80",
        (true, true) => ":443",
    };
    // Escapes of unreserved characters (a server must decode them), every
    // other one when bit 4 is set, with lower-case hex when bit 5 is.
    let escape = |text: &str, salt: usize| -> String {
        text.chars()
            .enumerate()
            .map(|(i, c)| {
                let unreserved = c.is_ascii_alphanumeric() || "-._~".contains(c);
                if on(4) && unreserved && (i + salt).is_multiple_of(2) {
                    let hex = format!("%{:02X}", c as u32);
                    if on(5) { hex.to_lowercase() } else { hex }
                } else {
                    c.to_string()
                }
            })
            .collect()
    };
    let path: String = s
        .path
        .iter()
        .enumerate()
        // A segment all dots is a dot segment: escaping it changes nothing
        // the parser does, but keep it literal so the base form is plain.
        .map(|(i, seg)| {
            if seg.chars().all(|c| c == '.') {
                format!("/{seg}")
            } else {
                format!("/{}", escape(seg, i))
            }
        })
        .collect();
    let path = if path.is_empty() {
        "/".to_string()
    } else {
        path
    };
    let mut pairs: Vec<String> = s
        .query
        .iter()
        .enumerate()
        .map(|(i, (k, v))| format!("{}={}", escape(k, i), escape(v, i + 1)))
        .collect();
    if on(6) {
        pairs.insert(pairs.len() / 2, "utm_source=news".to_string());
    }
    if on(7) {
        pairs.push("GCLID=abc".to_string());
    }
    let query = if pairs.is_empty() {
        if on(8) {
            "?".to_string()
        } else {
            String::new()
        }
    } else {
        format!("?{}", pairs.join("&"))
    };
    let fragment = if on(9) { "#section-2" } else { "" };
    let pad = if on(10) { " \t" } else { "" };
    format!("{pad}{scheme}://{host}{port}{path}{query}{fragment}{pad}")
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn normalize_never_panics_and_its_output_is_a_fixed_point(input in any_input(), opts in options()) {
        if let Ok(url) = normalize(&input, &opts) {
            check_normal_form(&url, &opts)?;
        }
    }

    #[test]
    fn resolve_never_panics_and_gives_a_normal_form(href in any_input(), opts in options()) {
        let base = Url::parse("http://example.com/dir/page.html?x=1").unwrap();
        if let Ok(url) = resolve(&base, &href, &opts) {
            check_normal_form(&url, &opts)?;
        }
    }

    #[test]
    fn spellings_that_differ_only_by_what_normalization_removes_give_one_form(
        s in spelled(),
        variant in any::<u16>(),
    ) {
        let opts = NormalizeOptions::default();
        let plain = normalize(&spell(&s, 0), &opts);
        let other = normalize(&spell(&s, variant), &opts);
        prop_assert!(plain.is_ok(), "{:?}", plain);
        prop_assert_eq!(plain, other, "{:?} vs {:?}", spell(&s, 0), spell(&s, variant));
    }
}

/// Found by `normalize_never_panics_and_its_output_is_a_fixed_point`:
/// decoding `%30` after a stray `%a` made the escape `%a0`, which a second
/// pass upper-cased (and a server reads as the byte 0xA0).
#[test]
fn a_decoded_digit_never_completes_an_escape_that_was_not_there() {
    let opts = NormalizeOptions::default();
    for (input, expected) in [
        ("http://[::1]/%a%30", "http://[::1]/%a%30"),
        ("http://h/%%33%30", "http://h/%%330"),
        ("http://h/%a%7e%30", "http://h/%a~0"),
        ("http://h/x?q=%a%30&%61", "http://h/x?q=%a%30&a"),
    ] {
        let once = normalize(input, &opts).unwrap();
        assert_eq!(once.as_str(), expected, "{input}");
        assert_eq!(normalize(once.as_str(), &opts).unwrap(), once, "{input}");
    }
}
