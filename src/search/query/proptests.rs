//! Property tests of the query parser, and of a whole search on a small
//! index: arbitrary strings, operators, quotes straight and curly, and
//! Unicode of every general category. Nothing panics; a parsed query's
//! words sit on character boundaries of the query, in order; an error is
//! the one the query deserves.

use super::super::{PageDoc, SearchError, SearchIndex, SearchOptions};
use super::*;
use crate::proptest_cases::config;
use proptest::prelude::*;
use std::sync::OnceLock;

/// Text from each Unicode general category, the query syntax people try
/// (`+`, `-`, `:`, `AND`, brackets, `*`), and quotes of every kind.
fn query() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => "[a-z]{1,8}",
        1 => "\\p{Lu}{1,4}",
        1 => "\\p{Lo}{1,4}",
        1 => "\\p{M}{1,3}",
        1 => "\\p{N}{1,4}",
        1 => "\\p{P}{1,2}",
        1 => "\\p{S}{1,2}",
        1 => "\\p{Z}",
        1 => "\\p{Cc}",
        1 => "\\p{Cf}",
        1 => "\\p{Co}",
        1 => prop::sample::select(vec![
            "\"", "\u{201C}", "\u{201D}", "\u{201E}", "'", "+", "-", ":", "(", ")", "*", "AND", "OR",
            "NOT", "site:", "title:", "~2", "^3", "\\", "the", "and", "how", "é", "e\u{301}",
            "\u{1F468}\u{200D}\u{1F469}", "\u{202E}", "\u{FEFF}", "ﬁ", "ß", "İ",
        ]).prop_map(str::to_string),
    ];
    prop::collection::vec((piece, prop_oneof![Just(""), Just(" ")]), 0..24)
        .prop_map(|parts| parts.into_iter().map(|(p, sep)| p + sep).collect())
}

fn any_query() -> impl Strategy<Value = String> {
    prop_oneof![4 => query(), 1 => any::<String>(), 1 => "\\PC{1000,1100}"]
}

/// A small index, built once for all cases.
fn index() -> &'static SearchIndex {
    static INDEX: OnceLock<(tempfile::TempDir, SearchIndex)> = OnceLock::new();
    &INDEX
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let mut index = SearchIndex::open(&dir.path().join("idx")).unwrap();
            for (i, (title, body)) in [
                (
                    "Sourdough bread",
                    "Feed the starter, fold the dough, bake at 250 degrees.",
                ),
                (
                    "Crème brûlée",
                    "Caramelise the sugar; the custard sets in the fridge.",
                ),
                ("東京の天気", "今日は晴れです。明日は雨が降るでしょう。"),
                (
                    "Rust ownership",
                    "Borrowing rules: one mutable reference or many shared ones.",
                ),
            ]
            .into_iter()
            .enumerate()
            {
                let page = PageDoc {
                    url: format!("https://h.example/{i}"),
                    title: title.into(),
                    body: body.into(),
                    ..PageDoc::default()
                };
                index.add_page(&page).unwrap();
            }
            index.commit().unwrap();
            (dir, index)
        })
        .1
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn any_query_parses_or_is_refused_with_its_reason(q in any_query()) {
        let mut an = QueryAnalyzers::new();
        let quotes = q.chars().filter(|&c| is_quote(c)).count();
        match parse(&q, &mut an) {
            Ok(parsed) => {
                prop_assert!(q.len() <= MAX_QUERY_BYTES);
                prop_assert!(quotes % 2 == 0);
                let terms = parsed.terms().len();
                prop_assert!((1..=MAX_TERMS).contains(&terms), "{}", terms);
                let mut after = 0;
                for (i, word) in parsed.words.iter().enumerate() {
                    prop_assert!(word.span.start >= after && word.span.start < word.span.end);
                    prop_assert!(q.is_char_boundary(word.span.start) && q.is_char_boundary(word.span.end));
                    prop_assert_eq!(word.position as usize, i);
                    after = word.span.end;
                }
                // What spelling correction does with the spans.
                let replaced: Vec<(Range<usize>, String)> = parsed
                    .words
                    .iter()
                    .map(|w| (w.span.clone(), w.text.clone()))
                    .collect();
                let _ = replace_spans(&q, &replaced);
                let _ = parsed.phrases();
                let _ = parsed.required_terms();
                let _ = parsed.compound_candidates();
                let _ = RankTerms::of(&parsed);
            }
            Err(QueryError::Empty) => {}
            Err(QueryError::TooLong { len, max }) => prop_assert!(len > max && len == q.len()),
            Err(QueryError::UnbalancedQuote) => prop_assert!(quotes % 2 == 1),
            Err(QueryError::TooManyTerms { count, max }) => prop_assert!(count > max),
            Err(QueryError::OnlyStopWords) => {}
        }
    }
}

proptest! {
    // A whole search (parse, spelling, ranking) costs more than a parse.
    #![proptest_config(config(500))]

    #[test]
    fn any_query_searches_or_is_refused_without_a_panic(q in any_query(), limit in 0usize..20) {
        let opts = SearchOptions { limit, ..SearchOptions::default() };
        match index().search(&q, &opts) {
            Ok(answer) => {
                prop_assert!(answer.results.len() <= limit.max(1), "{} > {}", answer.results.len(), limit);
                if let Some(suggestion) = &answer.did_you_mean {
                    prop_assert_ne!(suggestion, &q);
                }
            }
            Err(SearchError::Query(_)) => {}
            Err(e) => prop_assert!(false, "{}", e),
        }
    }
}
