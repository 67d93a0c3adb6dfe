//! Property tests of what `POST /urls` reads: any bytes are URLs or a
//! refusal with its reason, never a panic; URLs sent read back as sent; an
//! NDJSON body cut short loses only its last line, which is refused as an
//! item; batches cover every URL once within their bounds.

use super::*;
use crate::proptest_cases::config;
use proptest::prelude::*;

fn urls() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop_oneof![
            "http://h/\\PC{0,30}",
            "\\PC{0,10}",
            Just("\"\\\n".to_string())
        ],
        1..8,
    )
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn any_body_is_urls_or_a_refusal(
        body in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            "[\\[\\]{}\",:\\\\ a-z\n]{0,80}".prop_map(String::into_bytes),
        ],
        ndjson in any::<bool>(),
    ) {
        if let Ok(parsed) = parse_urls(&body, ndjson) {
            let items = match parsed {
                UrlsBody::One(url) => vec![Item::Url(url)],
                UrlsBody::Many(items) => items,
            };
            prop_assert!(!items.is_empty());
            for item in items {
                match item {
                    Item::Url(url) => prop_assert!(url.len() <= MAX_URL_BYTES),
                    Item::Bad { what, why } => {
                        prop_assert!(what.len() <= 200);
                        prop_assert!(!why.is_empty());
                    }
                }
            }
        }
    }

    #[test]
    fn urls_read_back_as_sent_in_every_form(urls in urls()) {
        let expected: Vec<Item> = urls.iter().cloned().map(Item::Url).collect();
        let array = serde_json::to_vec(&urls).unwrap();
        prop_assert_eq!(parse_urls(&array, false), Ok(UrlsBody::Many(expected)));
        let one = serde_json::to_vec(&urls[0]).unwrap();
        prop_assert_eq!(parse_urls(&one, false), Ok(UrlsBody::One(urls[0].clone())));
        let objects: Vec<serde_json::Value> =
            urls.iter().map(|u| serde_json::json!({ "url": u })).collect();
        let ndjson: Vec<String> = objects.iter().map(|o| o.to_string()).collect();
        let parsed = parse_urls(ndjson.join("\n").as_bytes(), true);
        prop_assert_eq!(
            parsed,
            Ok(UrlsBody::Many(urls.iter().cloned().map(Item::Url).collect()))
        );
    }

    #[test]
    fn an_ndjson_body_cut_short_loses_only_its_last_line(urls in urls(), cut in any::<usize>()) {
        let lines: Vec<String> = urls.iter().map(|u| serde_json::to_string(u).unwrap()).collect();
        let body = lines.join("\n");
        let last = lines.last().unwrap();
        // Cut inside the last line, past its first byte and before its end.
        let start = body.len() - last.len();
        let mut at = start + 1 + cut % (last.len() - 1).max(1);
        at = at.min(body.len() - 1);
        while !body.is_char_boundary(at) {
            at -= 1;
        }
        prop_assume!(at > start);
        let Ok(UrlsBody::Many(items)) = parse_urls(&body.as_bytes()[..at], true) else {
            return Err(TestCaseError::fail("a cut body is still many items"));
        };
        prop_assert_eq!(items.len(), urls.len());
        for (item, url) in items.iter().zip(&urls[..urls.len() - 1]) {
            prop_assert_eq!(item, &Item::Url(url.clone()));
        }
        let is_bad = matches!(items.last(), Some(Item::Bad { .. }));
        prop_assert!(is_bad, "{:?}", items.last());
    }

    #[test]
    fn batches_cover_every_url_once_within_their_bounds(
        sizes in prop::collection::vec(0usize..40_000, 0..300),
    ) {
        let urls: Vec<String> = sizes.iter().map(|&n| "a".repeat(n)).collect();
        let ranges = batches(&urls);
        let mut next = 0;
        for range in &ranges {
            prop_assert_eq!(range.start, next);
            prop_assert!(range.end > range.start);
            prop_assert!(range.len() <= MAX_BATCH_URLS);
            let bytes: usize = urls[range.clone()].iter().map(|u| 2 * u.len() + 8).sum();
            prop_assert!(range.len() == 1 || bytes <= MAX_BATCH_BYTES - 64 * 1024, "{}", bytes);
            next = range.end;
        }
        prop_assert_eq!(next, urls.len());
    }
}
