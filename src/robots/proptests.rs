//! Property tests of robots.txt: arbitrary bytes never panic, and the
//! answers for a generated group equal those of a plain RFC 9309 matcher
//! written here (longest rule wins, `Allow` wins a tie, `*` and a final
//! `$`).

use super::*;
use crate::proptest_cases::config;
use proptest::prelude::*;

const UA: &str = "web_crawler/0.1 (+https://github.com/web_crawler)";

/// One rule of the reference: allow or not, and its pattern as written.
#[derive(Debug, Clone)]
struct Rule {
    allow: bool,
    pattern: String,
}

/// RFC 9309 2.2.2-2.2.3 as plainly as it can be written: does `pattern`
/// (with `*` for any octets and a final `$` for the end) match a prefix
/// of `path`?
fn pattern_matches(pattern: &[u8], path: &[u8]) -> bool {
    match pattern.split_first() {
        None => true,
        Some((b'$', [])) => path.is_empty(),
        Some((b'*', rest)) => (0..=path.len()).any(|skip| pattern_matches(rest, &path[skip..])),
        Some((&c, rest)) => path.first() == Some(&c) && pattern_matches(rest, &path[1..]),
    }
}

/// The answer of the reference: of the rules that match, the one with the
/// longest pattern decides, `Allow` on a tie; an empty rule matches
/// nothing; no match allows; `/robots.txt` is always allowed.
fn reference_allowed(rules: &[Rule], path: &str) -> bool {
    if path == "/robots.txt" {
        return true;
    }
    rules
        .iter()
        .filter(|r| !r.pattern.is_empty() && pattern_matches(r.pattern.as_bytes(), path.as_bytes()))
        .max_by_key(|r| (r.pattern.len(), r.allow))
        .is_none_or(|r| r.allow)
}

fn rule() -> impl Strategy<Value = Rule> {
    let pattern = prop_oneof![
        1 => Just(String::new()),
        8 => ("[/*]", "[ab/*?=.]{0,6}", prop_oneof![Just(""), Just("$")])
            .prop_map(|(first, body, end)| format!("{first}{body}{end}")),
    ];
    (any::<bool>(), pattern).prop_map(|(allow, pattern)| Rule { allow, pattern })
}

/// A path and query of the letters the rules use (and `*` and `$`, which
/// a URL holds literally and a rule only escaped).
fn target() -> impl Strategy<Value = String> {
    "/[ab/?=*$]{0,10}"
}

fn robots_txt(rules: &[Rule]) -> Vec<u8> {
    let mut txt = String::from("User-agent: *\n");
    for r in rules {
        let key = if r.allow { "Allow" } else { "Disallow" };
        txt.push_str(&format!("{key}: {}\n", r.pattern));
    }
    txt.into_bytes()
}

/// Bodies a hostile or broken server sends: arbitrary bytes; directive
/// lines with arbitrary values (NULs, invalid UTF-8, CRs); huge lines.
fn hostile_body() -> impl Strategy<Value = Vec<u8>> {
    let key = prop::sample::select(vec![
        "User-agent",
        "Disallow",
        "Allow",
        "Crawl-delay",
        "Sitemap",
        "disalow",
        "",
    ]);
    let line = (
        key,
        prop::collection::vec(any::<u8>(), 0..40),
        "[:\t ]{0,2}",
        "(\n|\r\n|\r|\0)",
    )
        .prop_map(|(key, value, sep, end)| {
            [key.as_bytes(), sep.as_bytes(), &value, end.as_bytes()].concat()
        });
    let huge = (
        prop::sample::select(vec!["Disallow: /", "Allow: ", "User-agent: "]),
        prop::sample::select(vec![
            b"a*".to_vec(),
            b"*".to_vec(),
            b"\xff\x00".to_vec(),
            b"%e2%82".to_vec(),
        ]),
        1usize..8_000,
        any::<bool>(),
    )
        .prop_map(|(key, unit, n, anchored)| {
            let mut line = key.as_bytes().to_vec();
            line.extend(unit.iter().cycle().take(n));
            if anchored {
                line.push(b'$');
            }
            line.push(b'\n');
            line
        });
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..2000),
        prop::collection::vec(line, 0..40).prop_map(|l| l.concat()),
        (prop::collection::vec(line_of_rules(), 0..4), huge)
            .prop_map(|(l, h)| [l.concat(), h].concat()),
    ]
}

fn line_of_rules() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(rule(), 0..4).prop_map(|r| robots_txt(&r))
}

proptest! {
    #![proptest_config(config(1500))]

    #[test]
    fn any_body_parses_without_a_panic(body in hostile_body(), path in target(), ua in "\\PC{0,12}") {
        let robots = Robots::parse(&body, &ua);
        let url = Url::parse(&format!("http://example.com{path}")).unwrap();
        let _ = robots.is_allowed(&url);
        let _ = robots.crawl_delay();
        prop_assert!(robots.crawl_delay().is_none_or(|d| d <= MAX_CRAWL_DELAY));
        let _ = web_crawler_actors::RobotsRules::is_allowed(&robots, "http://example.com/\u{0}");
    }

    #[test]
    fn answers_match_a_plain_rfc_9309_matcher(
        rules in prop::collection::vec(rule(), 0..8),
        paths in prop::collection::vec(target(), 1..8),
    ) {
        let robots = Robots::parse(&robots_txt(&rules), UA);
        prop_assert!(robots.warning().is_none(), "{:?}", robots.warning());
        for path in paths {
            let url = Url::parse(&format!("http://example.com{path}")).unwrap();
            let mut checked = url.path().to_string();
            if let Some(query) = url.query() {
                checked.push('?');
                checked.push_str(query);
            }
            prop_assert_eq!(
                robots.is_allowed(&url),
                reference_allowed(&rules, &checked),
                "{} under {:?}", checked, rules
            );
        }
    }

    #[test]
    fn a_longer_allow_wins_over_a_shorter_disallow_and_the_reverse(
        prefix in "/[ab/]{0,6}",
        longer in "[ab/]{1,6}",
        rest in "[ab/]{0,4}",
        allow_first in any::<bool>(),
    ) {
        let full = format!("{prefix}{longer}");
        let url = Url::parse(&format!("http://example.com{full}{rest}")).unwrap();
        let order = |a: &str, b: &str| if allow_first { format!("{a}{b}") } else { format!("{b}{a}") };
        let allows = Robots::parse(
            order(&format!("Disallow: {prefix}\n"), &format!("Allow: {full}\n")).as_bytes(),
            UA,
        );
        prop_assert!(allows.is_allowed(&url), "Allow: {} beats Disallow: {}", full, prefix);
        let refuses = Robots::parse(
            order(&format!("Allow: {prefix}\n"), &format!("Disallow: {full}\n")).as_bytes(),
            UA,
        );
        prop_assert!(!refuses.is_allowed(&url), "Disallow: {} beats Allow: {}", full, prefix);
        let tie = Robots::parse(
            order(&format!("Allow: {full}\n"), &format!("Disallow: {full}\n")).as_bytes(),
            UA,
        );
        prop_assert!(tie.is_allowed(&url), "Allow wins a tie at {}", full);
    }
}

/// Found by `answers_match_a_plain_rfc_9309_matcher`: texting_robots read
/// an empty `Disallow:` as `Allow: /`, which tied with `Disallow: /` and
/// won, so the group allowed everything.
#[test]
fn an_empty_disallow_has_no_effect_beside_a_disallow_of_everything() {
    let url = |path: &str| Url::parse(&format!("http://example.com{path}")).unwrap();
    for body in [
        &b"User-agent: *\nDisallow:\nDisallow: /\n"[..],
        b"User-agent: *\nDisallow: /\ndisalow :   # nothing\n",
        b"User-agent: *\nDisallow:\0Disallow: /\n",
        b"User-agent: *\r\nDisallow \r\nDisallow: /\r\n",
    ] {
        let robots = Robots::parse(body, UA);
        assert!(
            !robots.is_allowed(&url("/")),
            "{:?}",
            String::from_utf8_lossy(body)
        );
        assert!(
            !robots.is_allowed(&url("/page")),
            "{:?}",
            String::from_utf8_lossy(body)
        );
        assert!(robots.is_allowed(&url("/robots.txt")));
    }
    // Alone, an empty Disallow still allows everything, and its group
    // stays a group: the next agent's rules are not ours.
    let robots = Robots::parse(
        b"User-agent: web_crawler\nDisallow:\n\nUser-agent: other\nDisallow: /\n",
        UA,
    );
    assert!(robots.is_allowed(&url("/page")));
}

/// Lines as long as the whole file may be (RFC 9309's 500 KiB), of the
/// units that cost a matcher most: parsed and matched in bounded time.
#[test]
fn lines_of_the_largest_file_parse_and_match_in_bounded_time() {
    let url = Url::parse("http://example.com/aaaa/b").unwrap();
    for key in ["Disallow: /", "Allow: /"] {
        for unit in [&b"a*"[..], b"\xff\x00"] {
            for anchored in [false, true] {
                let mut body = b"User-agent: *\n".to_vec();
                body.extend_from_slice(key.as_bytes());
                body.extend(unit.iter().cycle().take(MAX_ROBOTS_BYTES - body.len() - 2));
                if anchored {
                    body.push(b'$');
                }
                body.push(b'\n');
                let started = std::time::Instant::now();
                let robots = Robots::parse(&body, UA);
                let _ = robots.is_allowed(&url);
                let took = started.elapsed();
                assert!(
                    took < std::time::Duration::from_secs(10),
                    "{key}{:?}… anchored {anchored}: {took:?}",
                    String::from_utf8_lossy(unit)
                );
            }
        }
    }
}
