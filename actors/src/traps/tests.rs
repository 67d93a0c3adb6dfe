//! The trap rules' tests: whole crawls of small webs through a
//! [`TrapGuard`], rule by rule (the helpers and the crawl are in `harness`).

use super::harness::*;
use super::*;
use std::collections::HashSet;

/// Rule 1: a soft-404 pattern (any number answers the same page, each
/// with fresh links elsewhere, so it is never barren) closes after one
/// window of pages.
#[test]
fn near_duplicate_pattern_closes() {
    // Rule 1 alone (rule 3 would close these sooner).
    let mut g = TrapGuard::new(TrapSettings {
        barren_budget: 0,
        ..TrapSettings::default()
    });
    let window = g.settings().pattern_window;
    let text = "Sorry, we could not find that item. Try the search box or browse \
                our categories; the item you are looking for may have moved.";
    for n in 0..window {
        let url = format!("http://soft.test/item/{}", 1000 + n * 7);
        assert_eq!(g.admit(&url, T0), Ok(()), "{url}");
        // More items that do not exist (near-duplicates that lead to new
        // pages of other patterns are not counted: an index's pages read
        // alike too; see `alike_index_pages_leading_to_new_pages_stay_open`).
        let links = [format!("http://soft.test/item/{}", 5000 + n)];
        let closed = g.observe(&url, both(text), &shingles(text), &links, T0);
        assert_eq!(closed.is_some(), n + 1 == window, "page {n}: {closed:?}");
    }
    let err = g.admit("http://soft.test/item/5", T0).unwrap_err();
    assert!(matches!(err, TrapReason::NearDuplicates { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "trap: pattern soft.test/item/{{n}} yields near-duplicate pages ({} of the last {window})",
            window - 1
        )
    );
    // Other patterns of the host are not affected.
    assert_eq!(g.admit("http://soft.test/about", T0), Ok(()));
    assert_eq!(g.admit("http://soft.test/go/anything", T0), Ok(()));
}

/// Rule 2: 10,000 product pages under one pattern, each its own text
/// around a shared template, linking mostly to other products and the
/// same navigation: every one is admitted.
#[test]
fn distinct_pages_keep_a_large_pattern_open() {
    let mut g = guard();
    let mut rng = Rng(11);
    let vocab = vocabulary(&mut rng, 3000);
    let template = "Add to cart. Free delivery on orders over {price}. Reviews from \
                    customers. Questions and answers. Delivery and returns.";
    for n in 0..10_000u32 {
        let url = format!("http://shop.test/product/{n}");
        assert_eq!(g.admit(&url, T0 + i64::from(n)), Ok(()), "{url}");
        let text = format!(
            "{} {template} {}",
            words(&mut rng, &vocab, 8),
            words(&mut rng, &vocab, 40)
        );
        let mut links: Vec<String> = (0..6)
            .map(|_| format!("http://shop.test/product/{}", rng.below(10_000)))
            .collect();
        links.push("http://shop.test/".to_string());
        links.push("http://shop.test/cart".to_string());
        let closed = g.observe(
            &url,
            both(&text),
            &shingles(&text),
            &links,
            T0 + i64::from(n),
        );
        assert_eq!(closed, None, "{url}");
    }
    for n in 0..10_000 {
        assert_eq!(
            g.admit(&format!("http://shop.test/product/{n}"), T0 + 20_000),
            Ok(())
        );
    }
    assert!(g.tracked_patterns() < 10);
}

/// Rule 3: an infinite calendar whose month pages differ in a few words
/// (month, year, weekday, day count) stops well under 100 pages, and
/// the crawl ends by itself.
#[test]
fn calendar_closes_on_barren_pages() {
    // What makes its pages near-duplicates: the same month in another
    // year is within K (only the weekday word differs once numbers are
    // abstracted), other months are not, so a month is novel once.
    let k = TrapSettings::default().near_dup_bits;
    let may = simhash(&calendar_text(2024, 5));
    assert!(hamming(may, simhash(&calendar_text(2023, 5))) <= k);
    assert!(hamming(may, simhash(&calendar_text(2031, 5))) <= k);
    assert!(hamming(may, simhash(&calendar_text(2024, 6))) > k);

    let c = crawl(guard(), &["http://cal.test/"], |url| {
        if let Some((y, m)) = calendar_page(url) {
            return Some((calendar_text(y, m), calendar_links("cal.test", y, m)));
        }
        match url {
            "http://cal.test/" => Some((
                "Welcome to the community site. See what is on this month.".to_string(),
                vec![
                    "http://cal.test/cal/2024/05/".to_string(),
                    "http://cal.test/about".to_string(),
                ],
            )),
            "http://cal.test/about" => Some((
                "About us: volunteers running the community hall since 1971.".to_string(),
                vec!["http://cal.test/".to_string()],
            )),
            _ => None,
        }
    });
    let calendar = c.fetched_matching("/cal/");
    assert!(calendar < 50, "{calendar} calendar pages fetched");
    assert_eq!(c.fetched.len(), calendar + 2, "home and about are fetched");
    let reason = c.closures.first().expect("the calendar closes");
    assert!(matches!(reason, TrapReason::Barren { .. }), "{reason}");
    assert!(
        reason.to_string().starts_with(
            "trap: pattern cal.test/cal/{n}/{n}/ yields near-duplicate pages linking only back into cal.test/cal/ ("
        ),
        "{reason}"
    );
    assert!(!c.refused.is_empty());
    assert!(c.refused.iter().all(|(u, _)| u.contains("/cal/")));
}

/// Rule 3 at its edge: a pattern whose near-duplicate pages keep
/// leading somewhere new outside it is not barren (rule 1 still
/// applies to it).
#[test]
fn pages_that_lead_out_are_not_barren() {
    let mut g = guard();
    let text = calendar_text(2024, 5);
    for n in 0..g.settings().pattern_window - 1 {
        let url = format!("http://h/tag/{n}");
        let links = [format!("http://h/article/{}", words_for(n))];
        assert_eq!(
            g.observe(&url, both(&text), &shingles(&text), &links, T0),
            None
        );
    }
    assert_eq!(g.admit("http://h/tag/99", T0), Ok(()));
}

/// Section index pages that read alike (a heading and a few titles
/// whose numbers differ) under one pattern, `/section-{n}/`, each
/// leading to pages the crawl has not seen: they lead somewhere, so
/// rule 3 does not call them barren, and every page is fetched.
#[test]
fn alike_index_pages_leading_to_new_pages_stay_open() {
    let mut rng = Rng(13);
    let vocab = vocabulary(&mut rng, 2000);
    let articles: Vec<String> = (0..40 * 4).map(|_| words(&mut rng, &vocab, 200)).collect();
    let web = |url: &str| -> Option<(String, Vec<String>)> {
        let path = url.strip_prefix("http://ix.test")?;
        if path == "/" {
            let links = (0..40)
                .map(|k| format!("http://ix.test/section-{k}/"))
                .collect();
            return Some(("Sections of the site.".into(), links));
        }
        let rest = path.strip_prefix("/section-")?;
        let (k, page) = rest.split_once('/')?;
        let k: usize = k.parse().ok()?;
        if page.is_empty() {
            let text = format!("Section {k}. Read more: page 1, page 2, page 3, page 4.");
            let links = (0..4)
                .map(|n| format!("http://ix.test/section-{k}/{n}.html"))
                .collect();
            return Some((text, links));
        }
        let n: usize = page.strip_suffix(".html")?.parse().ok()?;
        Some((
            articles.get(k * 4 + n)?.clone(),
            vec!["http://ix.test/".into()],
        ))
    };
    let c = crawl(guard(), &["http://ix.test/"], web);
    assert_eq!(c.fetched.len(), 1 + 40 + 160, "{:?}", c.closures);
}

/// Rule 4: facets (colour × size × sort, every page linking to more
/// combinations) whose pages only depend on the colour close the path's
/// query space; the bare path, pagination that proved novel, and the
/// products stay open.
#[test]
fn facet_query_space_closes() {
    const COLORS: [&str; 5] = ["red", "blue", "green", "black", "white"];
    const SIZES: [&str; 5] = ["xs", "s", "m", "l", "xl"];
    const SORTS: [&str; 4] = ["price", "name", "new", "rating"];
    let mut rng = Rng(5);
    let vocab = vocabulary(&mut rng, 1000);
    let product_names: Vec<String> = (0..100).map(|_| words(&mut rng, &vocab, 3)).collect();
    let product_texts: Vec<String> = (0..100).map(|_| words(&mut rng, &vocab, 80)).collect();
    let listing = |ids: &mut dyn Iterator<Item = usize>| -> (String, Vec<String>) {
        let mut text = String::from("Our shop. Filter by colour, size; sort by price.");
        let mut links = Vec::new();
        for i in ids {
            text.push_str(&format!(
                " {} only {} euro, in stock.",
                product_names[i],
                10 + i
            ));
            links.push(format!("http://f.test/product/{i}"));
        }
        (text, links)
    };
    let facet_links = |params: &[(&str, &str)]| -> Vec<String> {
        let mut out = Vec::new();
        for (name, values) in [
            ("color", &COLORS[..]),
            ("size", &SIZES[..]),
            ("sort", &SORTS[..]),
        ] {
            for v in values {
                let mut p: Vec<(&str, &str)> =
                    params.iter().filter(|(n, _)| *n != name).copied().collect();
                p.push((name, v));
                let q: Vec<String> = p.iter().map(|(n, v)| format!("{n}={v}")).collect();
                out.push(format!("http://f.test/shop?{}", q.join("&")));
            }
        }
        out
    };
    let c = crawl(guard(), &["http://f.test/shop"], |url| {
        let u = url::Url::parse(url).ok()?;
        if let Some(n) = u.path().strip_prefix("/product/") {
            let n: usize = n.parse().ok()?;
            return Some((
                product_texts.get(n)?.clone(),
                vec!["http://f.test/shop".into()],
            ));
        }
        if u.path() != "/shop" {
            return None;
        }
        let params: Vec<(String, String)> = u.query_pairs().into_owned().collect();
        let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let page: usize = get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
        // A colour shows its 20 products; size and sort change nothing.
        let (text, mut links) = match get("color") {
            Some(color) => {
                let ci = COLORS.iter().position(|c| *c == color)?;
                listing(&mut (ci * 20..ci * 20 + 20))
            }
            None => listing(&mut ((page - 1) * 10..page * 10)),
        };
        let pairs: Vec<(&str, &str)> = params
            .iter()
            .filter(|(n, _)| n != "page")
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        links.extend(facet_links(&pairs));
        if params.is_empty() || get("page").is_some() {
            links.extend((1..=10).map(|p| format!("http://f.test/shop?page={p}")));
        }
        Some((text, links))
    });
    let facets = c
        .fetched
        .iter()
        .filter(|u| u.contains("color=") || u.contains("size=") || u.contains("sort="))
        .count();
    assert!(facets < 60, "{facets} facet pages fetched");
    assert_eq!(c.fetched_matching("/product/"), 100, "every product");
    assert_eq!(c.fetched_matching("?page="), 10, "every listing page");
    assert!(c.fetched.contains(&"http://f.test/shop".to_string()));
    let reason = c
        .closures
        .iter()
        .find(|r| matches!(r, TrapReason::QuerySpace { .. }))
        .expect("the query space closes");
    assert!(
        reason
            .to_string()
            .starts_with("trap: query variants of f.test/shop yield near-duplicate pages ("),
        "{reason}"
    );
    let mut g = c.guard;
    assert_eq!(g.admit("http://f.test/shop", T0 + 10_000_000), Ok(()));
    assert_eq!(
        g.admit("http://f.test/shop?page=11", T0 + 10_000_000),
        Ok(())
    );
    assert!(
        g.admit("http://f.test/shop?color=red&size=xxl", T0 + 10_000_000)
            .is_err()
    );
}

/// Rule 5: a soft-404 host (every unknown path answers the same page
/// with fresh links to more unknown paths, each a new pattern) goes on
/// probation; its real section stays open and the crawl ends.
#[test]
fn soft_404_host_is_bounded() {
    let mut rng = Rng(9);
    let vocab = vocabulary(&mut rng, 2000);
    let real: Vec<String> = (0..50).map(|_| words(&mut rng, &vocab, 120)).collect();
    let slug = |seed: usize| -> String {
        let mut r = Rng((seed as u64).wrapping_mul(2) | 1);
        words(&mut r, &vocab, 2).replace(' ', "-")
    };
    let c = crawl(guard(), &["http://s.test/"], |url| {
        let path = url.strip_prefix("http://s.test")?;
        if path == "/" {
            let mut links: Vec<String> = (0..50).map(|i| format!("http://s.test/p/{i}")).collect();
            links.push(format!("http://s.test/{}", slug(1)));
            return Some(("Welcome to the shop of wonders.".to_string(), links));
        }
        if let Some(i) = path.strip_prefix("/p/") {
            let i: usize = i.parse().ok()?;
            let links = vec![format!("http://s.test/p/{}", (i + 1) % 50)];
            return Some((real.get(i)?.clone(), links));
        }
        // Soft 404: 200, the same text, three fresh paths.
        let h = fmix64(fnv1a(FNV_OFFSET, path.as_bytes())) as usize;
        // Some under one section, as a site's `/help/<anything>` would.
        let mut links: Vec<String> = (0..2)
            .map(|k| format!("http://s.test/{}/{}", slug(h + k), slug(h + k + 7)))
            .collect();
        links.push(format!("http://s.test/help/{}", slug(h + 3)));
        Some((
            "Oops! This page does not exist. Here are some pages you may like.".to_string(),
            links,
        ))
    });
    let soft = c.fetched.len() - c.fetched_matching("/p/") - 1;
    assert!(soft <= 100, "{soft} soft-404 pages fetched");
    assert_eq!(c.fetched_matching("/p/"), 50, "every real page");
    let reason = c.closures.last().expect("the host goes on probation");
    assert!(matches!(reason, TrapReason::Host { .. }), "{reason}");
    assert!(reason.to_string().starts_with("trap: host s.test served "));
    let mut g = c.guard;
    assert_eq!(g.admit("http://s.test/p/123", T0 + 10_000_000), Ok(()));
    assert!(
        g.admit("http://s.test/whatever/else", T0 + 10_000_000)
            .is_err()
    );
    assert!(g.admit("http://s.test/help/me", T0 + 10_000_000).is_err());
}

/// Session ids in the query: every link carries a fresh one, so each
/// page has endless URLs. Each page is fetched, the copies are bounded
/// and the crawl ends.
#[test]
fn session_ids_in_links_are_bounded() {
    let mut rng = Rng(17);
    let vocab = vocabulary(&mut rng, 2000);
    const PAGES: usize = 40;
    let texts: Vec<String> = (0..PAGES).map(|_| words(&mut rng, &vocab, 150)).collect();
    let targets: Vec<Vec<usize>> = (0..PAGES)
        .map(|i| {
            (0..4)
                .map(|_| rng.below(PAGES))
                .chain([(i + 1) % PAGES])
                .collect()
        })
        .collect();
    let c = crawl(guard(), &["http://sid.test/p0?sid=5ea1ed0a11"], |url| {
        let u = url::Url::parse(url).ok()?;
        let i: usize = u.path().strip_prefix("/p")?.parse().ok()?;
        let fresh = fmix64(fnv1a(FNV_OFFSET, url.as_bytes()));
        let links = targets[i]
            .iter()
            .enumerate()
            .map(|(k, t)| {
                format!(
                    "http://sid.test/p{t}?sid={:x}",
                    fresh.wrapping_add(k as u64)
                )
            })
            .collect();
        Some((texts[i].clone(), links))
    });
    let distinct: HashSet<&str> = c
        .fetched
        .iter()
        .map(|u| u.split('?').next().unwrap())
        .collect();
    assert_eq!(distinct.len(), PAGES, "every page");
    assert_eq!(c.fetched.len(), PAGES, "each once");
    assert!(
        c.refused
            .iter()
            .all(|(_, r)| matches!(r, TrapReason::SessionCopy { .. }))
    );
    assert_eq!(
        c.refused[0].1.to_string(),
        "trap: a page already fetched under another session id (sid.test/p{n}?sid={id})"
    );
    let mut g = c.guard;
    // Path parameters are sessions too; a URL without one, or of a page
    // not fetched yet, is not a copy.
    assert!(g.admit("http://sid.test/p3;jsessionid=F00D", T0).is_err());
    assert_eq!(g.admit("http://sid.test/p3", T0), Ok(()));
    assert_eq!(g.admit("http://sid.test/p99?sid=x", T0), Ok(()));
}

/// Copies claimed while the first is still in flight: once one session
/// URL of a page is dispatched, another is refused; the dispatched URL
/// itself (a retry) is not.
#[test]
fn a_dispatched_session_url_refuses_its_copies_before_it_is_fetched() {
    let mut g = guard();
    let first = "http://sid.test/member/7?sid=aa11f3c9d0";
    assert_eq!(g.admit(first, T0), Ok(()));
    g.dispatched(first);
    assert!(matches!(
        g.admit("http://sid.test/member/7?sid=bb22e4d5c6", T0),
        Err(TrapReason::SessionCopy { .. })
    ));
    assert_eq!(g.admit(first, T0), Ok(()), "a retry is no copy");
    assert_eq!(
        g.admit("http://sid.test/member/8?sid=bb22e4d5c6", T0),
        Ok(())
    );
    // Without a session id, dispatching records nothing.
    g.dispatched("http://sid.test/member/9");
    assert_eq!(
        g.admit("http://sid.test/member/9?sid=cc33a7b8e9", T0),
        Ok(())
    );
}

/// The benchmark in miniature: hosts of real pages (benchmark
/// style text, random links), about 1% of them linking into an infinite
/// calendar on their host. Every real page is fetched, the calendars
/// cost well under 100 fetches each, and the crawl ends by itself.
#[test]
fn mini_benchmark_ends_and_loses_nothing() {
    const HOSTS: usize = 3;
    const PAGES: usize = 1000;
    let mut rng = Rng(2024);
    let vocab = vocabulary(&mut rng, 26);
    let mut site: HashMap<String, (String, Vec<String>)> = HashMap::new();
    for h in 0..HOSTS {
        site.insert(
            format!("http://h{h}.test/"),
            ("home".into(), vec![format!("http://h{h}.test/p/0")]),
        );
        for i in 0..PAGES {
            let mut links = vec![format!("http://h{h}.test/p/{}", (i + 1) % PAGES)];
            for _ in 0..10 {
                links.push(format!("http://h{h}.test/p/{}", rng.below(PAGES)));
            }
            links.push(format!(
                "http://h{}.test/p/{}",
                rng.below(HOSTS),
                rng.below(PAGES)
            ));
            if rng.below(100) == 0 {
                let (y, m) = (2000 + rng.below(30) as i64, 1 + rng.below(12) as i64);
                links.push(format!("http://h{h}.test/cal/{y}/{m:02}/"));
            }
            let n = 300 + rng.below(1500);
            let text = words(&mut rng, &vocab, n);
            site.insert(format!("http://h{h}.test/p/{i}"), (text, links));
        }
    }
    let c = crawl(
        guard(),
        &["http://h0.test/", "http://h1.test/", "http://h2.test/"],
        |url| {
            if let Some((y, m)) = calendar_page(url) {
                let host = url::Url::parse(url).ok()?.host_str()?.to_string();
                return Some((calendar_text(y, m), calendar_links(&host, y, m)));
            }
            site.get(url).cloned()
        },
    );
    assert_eq!(
        c.fetched_matching("/p/"),
        HOSTS * PAGES,
        "no real page lost"
    );
    for h in 0..HOSTS {
        let cal = c.fetched_matching(&format!("h{h}.test/cal/"));
        assert!(cal < 60, "host {h}: {cal} calendar pages");
    }
    assert!(
        c.refused
            .iter()
            .all(|(u, r)| u.contains("/cal/") && r.to_string().starts_with("trap: "))
    );
}

#[test]
fn zero_budgets_turn_rules_off() {
    let mut g = TrapGuard::new(TrapSettings {
        near_dup_pct: 0,
        barren_budget: 0,
        facet_budget: 0,
        host_dup_run: 0,
        kept_session_urls: 0,
        copy_pct: 0,
        ..TrapSettings::default()
    });
    // The same few pages again and again, under fresh session ids.
    let text = words(&mut Rng(5), &vocabulary(&mut Rng(6), 300), 400);
    for n in 0..500 {
        let url = format!("http://t.test/item/{}?sid=x{n}&sort=a{n}", n % 5);
        assert_eq!(g.admit(&url, T0), Ok(()));
        assert_eq!(
            g.observe(&url, 42.into(), &shingles(&text), [&url], T0),
            None
        );
    }
}

#[test]
fn every_reason_says_trap() {
    let reasons = [
        TrapReason::NearDuplicates {
            pattern: "h/x/{n}".into(),
            near_dups: 22,
            window: 24,
        },
        TrapReason::Barren {
            pattern: "h/cal/{n}/{n}/".into(),
            family: "h/cal/".into(),
            barren: 16,
            pages: 20,
        },
        TrapReason::QuerySpace {
            path: "h/shop".into(),
            near_dups: 16,
        },
        TrapReason::Host {
            host: "h".into(),
            run: 64,
        },
        TrapReason::SessionCopy {
            pattern: "h/a?sid={id}".into(),
        },
        TrapReason::Soft404 { host: "h".into() },
        TrapReason::Stale {
            directory: "h/tag/".into(),
            stale: 24,
            pages: 30,
        },
    ];
    for r in reasons {
        assert!(r.to_string().starts_with("trap: "), "{r}");
    }
}

#[test]
fn a_probed_soft_404_page_is_recognised_on_its_host_only() {
    let mut g = TrapGuard::new(TrapSettings::default());
    let not_found = both("Sorry, we could not find that page. Try the search box or go home.");
    let real = both("The river runs past the old stone garden and the copper engine works.");
    assert_eq!(
        g.soft_404("http://h/any/", not_found),
        None,
        "not probed yet"
    );
    g.soft_404_probe("http://h/web-crawler-probe-x/", not_found);
    let reason = g.soft_404("http://h/kqzvtabc/", not_found).unwrap();
    assert!(
        reason.to_string().starts_with("trap: soft 404 (h "),
        "{reason}"
    );
    assert_eq!(g.soft_404("http://h/p/1", real), None, "a real page");
    assert_eq!(
        g.soft_404("http://other/x/", not_found),
        None,
        "another host"
    );
    assert_eq!(
        g.soft_404("http://h/", not_found),
        None,
        "a host's root is its home page, whatever unknown paths answer"
    );
}
