//! The engine over real on-disk indexes in temporary directories.

use super::candidates::PHRASE_POOL;
use super::*;
use std::collections::BTreeMap;
use tempfile::TempDir;

fn page(url: &str, title: &str, body: &str) -> PageDoc {
    PageDoc {
        url: url.into(),
        title: title.into(),
        body: body.into(),
        out_links: 3,
        ..PageDoc::default()
    }
}

/// A link on `source`: (source, its anchor).
fn anchor(source: &str, target: &str, text: &str) -> (String, AnchorDoc) {
    let link = AnchorDoc {
        target: target.into(),
        text: text.into(),
        context: String::new(),
    };
    (source.into(), link)
}

fn index_with(pages: &[PageDoc], anchors: &[(String, AnchorDoc)]) -> (TempDir, SearchIndex) {
    let dir = tempfile::tempdir().unwrap();
    let mut index = SearchIndex::open(&dir.path().join("idx")).unwrap();
    for p in pages {
        index.add_page(p).unwrap();
    }
    let mut by_source: BTreeMap<&str, Vec<AnchorDoc>> = BTreeMap::new();
    for (source, link) in anchors {
        by_source.entry(source).or_default().push(link.clone());
    }
    for (source, links) in by_source {
        index.set_anchors(source, &links).unwrap();
    }
    index.commit().unwrap();
    (dir, index)
}

fn search(index: &SearchIndex, q: &str) -> SearchAnswer {
    index.search(q, &SearchOptions::default()).unwrap()
}

fn urls(answer: &SearchAnswer) -> Vec<&str> {
    answer.results.iter().map(|h| h.url.as_str()).collect()
}

fn bakery() -> Vec<PageDoc> {
    vec![
        page(
            "https://bake.example/sourdough",
            "Sourdough bread",
            "Feed the starter the night before. Mix flour, water and starter, \
             fold the dough, let it rise, then bake the sourdough bread at 250 degrees.",
        ),
        page(
            "https://bake.example/rye",
            "Rye loaves",
            "Rye flour holds little gluten; a rye loaf is dense and keeps for a week.",
        ),
        page(
            "https://bake.example/cakes",
            "Cakes",
            "Butter, sugar and eggs beaten together make a sponge. Bake it for twenty minutes.",
        ),
    ]
}

#[test]
fn a_page_indexed_again_replaces_the_old_one() {
    let url = "https://zoo.example/animal";
    let (_dir, mut index) = index_with(&[page(url, "Zebras", "Striped zebras graze.")], &[]);
    assert_eq!(urls(&search(&index, "zebras")), [url]);
    index
        .add_page(&page(url, "Giraffes", "Tall giraffes eat leaves."))
        .unwrap();
    index.commit().unwrap();
    assert_eq!(index.page_count(), 1);
    assert_eq!(urls(&search(&index, "giraffes")), [url]);
    let plain = SearchOptions::default().ranking(Ranking::PlainBm25);
    assert!(index.search("zebras", &plain).unwrap().results.is_empty());
    assert_eq!(search(&index, "giraffes").results[0].title, "Giraffes");
}

#[test]
fn anchor_text_finds_a_page_that_never_names_itself() {
    let target = "https://corp.example/q3.pdf.html";
    let pages = [
        page(target, "Q3", "Revenue rose four percent; margins held."),
        page(
            "https://corp.example/",
            "Investors",
            "News and documents for investors.",
        ),
    ];
    let anchors = [anchor(
        "https://corp.example/",
        target,
        "quarterly earnings report",
    )];
    let (_dir, index) = index_with(&pages, &anchors);
    assert_eq!(urls(&search(&index, "quarterly earnings")), [target]);
    // The baseline sees the page's own text only.
    let plain = SearchOptions::default().ranking(Ranking::PlainBm25);
    assert!(
        index
            .search("quarterly earnings", &plain)
            .unwrap()
            .results
            .is_empty()
    );
}

#[test]
fn a_word_of_most_links_finds_no_page_through_them() {
    // 1,200 pages, each with a "next" link to the following one; one of
    // them also links to the report as "quarterly earnings".
    let n = 1_200;
    let url = |i: usize| format!("https://site.example/p/{i}");
    let report = "https://site.example/q3";
    let mut pages: Vec<PageDoc> = (0..n)
        .map(|i| page(&url(i), &format!("Page {i}"), "Plain words of a page."))
        .collect();
    pages.push(page(report, "Q3", "Revenue rose four percent."));
    let mut anchors: Vec<(String, AnchorDoc)> = (0..n)
        .map(|i| anchor(&url(i), &url((i + 1) % n), "next"))
        .collect();
    anchors.push(anchor(&url(7), report, "quarterly earnings"));
    let (_dir, index) = index_with(&pages, &anchors);
    // "next" is the text of nearly every link: it names no page, and the
    // pages it leads to are not results for it.
    assert!(search(&index, "next").results.is_empty());
    // Nor when the links must hold it (quoted) beside a rarer word.
    assert!(search(&index, "\"next\" quarterly").results.is_empty());
    // A word of one link still finds the page it leads to.
    assert_eq!(urls(&search(&index, "quarterly earnings")), [report]);
}

#[test]
fn a_pages_new_anchors_replace_its_old_ones() {
    let target = "https://corp.example/q3";
    let source = "https://corp.example/";
    let pages = [page(target, "Q3", "Revenue rose four percent.")];
    let (_dir, mut index) = index_with(&pages, &[anchor(source, target, "quarterly earnings")]);
    assert_eq!(urls(&search(&index, "earnings")), [target]);
    index
        .set_anchors(source, &[anchor(source, target, "annual summary").1])
        .unwrap();
    index.commit().unwrap();
    assert_eq!(urls(&search(&index, "summary")), [target]);
    let plain = SearchOptions::default();
    let answer = index.search("earnings", &plain).unwrap();
    assert!(answer.results.is_empty(), "{answer:?}");
    // A page that no longer links leaves no anchors.
    index.set_anchors(source, &[]).unwrap();
    index.commit().unwrap();
    assert!(search(&index, "summary").results.is_empty());
}

#[test]
fn typos_are_corrected_and_correct_spellings_are_not() {
    let (_dir, index) = index_with(&bakery(), &[]);
    let fixed = search(&index, "sourdugh bred");
    assert_eq!(fixed.did_you_mean.as_deref(), Some("sourdough bread"));
    assert_eq!(urls(&fixed)[0], "https://bake.example/sourdough");

    let right = search(&index, "sourdough bread");
    assert_eq!(right.did_you_mean, None);
    assert_eq!(right.results, fixed.results);
    // Case, quotes and other words of the query are kept.
    let phrase = search(&index, "Rye \"flour holds\" glutten");
    assert_eq!(
        phrase.did_you_mean.as_deref(),
        Some("Rye \"flour holds\" gluten")
    );
    // The baseline does not correct.
    let plain = SearchOptions::default().ranking(Ranking::PlainBm25);
    let answer = index.search("sourdugh", &plain).unwrap();
    assert_eq!(answer.did_you_mean, None);
    assert!(answer.results.is_empty());
}

#[test]
fn a_rare_misspelling_is_corrected_unless_the_rest_of_the_query_is_with_it() {
    let mut pages: Vec<PageDoc> = (0..120)
        .map(|i| {
            page(
                &format!("https://py.example/{i}"),
                &format!("Python lesson {i}"),
                "Python lists, loops and functions.",
            )
        })
        .collect();
    pages.push(page(
        "https://py.example/typo",
        "Snakes",
        "A pyhton is a snake (sic).",
    ));
    // A rare correct word near a more common one (ratio below 100): kept.
    pages.extend((0..15).map(|i| page(&format!("https://just.example/{i}"), "Just", "just words")));
    pages.push(page("https://rust.example/", "Rust", "rust on iron"));
    let (_dir, index) = index_with(&pages, &[]);
    assert_eq!(
        search(&index, "pyhton").did_you_mean.as_deref(),
        Some("python")
    );
    assert_eq!(search(&index, "pyhton snake").did_you_mean, None);
    assert_eq!(
        urls(&search(&index, "pyhton snake"))[0],
        "https://py.example/typo"
    );
    assert_eq!(search(&index, "rust").did_you_mean, None);
    assert_eq!(urls(&search(&index, "rust")), ["https://rust.example/"]);
}

#[test]
fn snippets_hold_the_matched_terms_as_plain_text() {
    let filler = "Words about nothing in particular fill this page. ".repeat(40);
    let body = format!("{filler}\n\nTo keep a <starter> alive,\n   feed it flour daily.\n{filler}");
    let (_dir, index) = index_with(&[page("https://bake.example/starter", "Care", &body)], &[]);
    let hit = &search(&index, "feed starter").results[0];
    assert!(
        hit.snippet.contains("<starter> alive, feed it flour"),
        "{hit:?}"
    );
    assert!(!hit.snippet.contains('\n') && !hit.snippet.contains("  "));
    assert!(hit.snippet.chars().count() <= 220, "{}", hit.snippet);
    let marked: Vec<&str> = hit
        .highlights
        .iter()
        .map(|r| &hit.snippet[r.clone()])
        .collect();
    assert!(
        marked.contains(&"starter") && marked.contains(&"feed"),
        "{marked:?}"
    );
}

#[test]
fn a_page_matched_by_title_only_gets_the_start_of_its_body_as_snippet() {
    let (_dir, index) = index_with(
        &[page(
            "https://x.example/",
            "Glossary",
            "Terms used on this site.",
        )],
        &[],
    );
    let hit = &search(&index, "glossary").results[0];
    assert_eq!(hit.snippet, "Terms used on this site.");
    assert!(hit.highlights.is_empty());
}

#[test]
fn a_page_beyond_the_stored_start_is_found_by_all_its_words() {
    // Only the body's first 24 KB are stored (snippets read no further);
    // every word of it is indexed.
    let filler = "Words about nothing in particular fill this page. ".repeat(600);
    let body = format!("Sourdough starts here. {filler} The rye crumb ends it.");
    let (_dir, index) = index_with(&[page("https://bake.example/long", "Long", &body)], &[]);
    let hit = &search(&index, "rye crumb").results[0];
    assert_eq!(hit.url, "https://bake.example/long");
    assert!(hit.snippet.starts_with("Sourdough starts here."), "{hit:?}");
    let hit = &search(&index, "sourdough").results[0];
    assert!(hit.snippet.contains("Sourdough starts"), "{hit:?}");
}

#[test]
fn an_index_made_with_the_body_stored_whole_gives_snippets_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("idx");
    // The pages index as versions before `body_start` made it.
    let old = schema::pages_schema_with_the_body_stored();
    std::fs::create_dir_all(root.join("pages")).unwrap();
    tantivy::Index::create_in_dir(root.join("pages"), old).unwrap();
    let mut index = SearchIndex::open(&root).unwrap();
    for p in bakery() {
        index.add_page(&p).unwrap();
    }
    index.commit().unwrap();
    let hit = &search(&index, "sourdough starter").results[0];
    assert_eq!(hit.url, "https://bake.example/sourdough");
    assert!(hit.snippet.contains("starter"), "{hit:?}");
}

#[test]
fn an_empty_index_and_a_query_matching_nothing_answer_no_results() {
    let dir = tempfile::tempdir().unwrap();
    let index = SearchIndex::open(dir.path()).unwrap();
    assert_eq!(index.page_count(), 0);
    for ranking in [Ranking::Full, Ranking::PlainBm25] {
        let answer = index
            .search(
                "anything at all",
                &SearchOptions::default().ranking(ranking),
            )
            .unwrap();
        assert_eq!(answer, SearchAnswer::default());
    }
    let (_dir, index) = index_with(&bakery(), &[]);
    let answer = search(&index, "xylophone quartet");
    assert!(answer.results.is_empty() && answer.did_you_mean.is_none());
    let none = SearchOptions::default().limit(0);
    assert!(index.search("bread", &none).unwrap().results.is_empty());
    let one = SearchOptions::default().limit(1);
    assert_eq!(index.search("bake", &one).unwrap().results.len(), 1);
}

#[test]
fn bad_queries_are_typed_errors_for_both_rankings() {
    let (_dir, index) = index_with(&bakery(), &[]);
    for ranking in [Ranking::Full, Ranking::PlainBm25] {
        let opts = SearchOptions::default().ranking(ranking);
        let err = |q: &str| match index.search(q, &opts) {
            Err(SearchError::Query(e)) => e,
            other => panic!("{q:?}: {other:?}"),
        };
        assert_eq!(err(""), QueryError::Empty);
        assert_eq!(err("how to do it"), QueryError::OnlyStopWords);
        assert_eq!(err("\"bake the"), QueryError::UnbalancedQuote);
        assert!(matches!(
            err(&"bread ".repeat(2000)),
            QueryError::TooLong { .. }
        ));
        // Query syntax of other engines is just words here.
        assert!(
            index
                .search("title:bread AND (rye OR -cake)", &opts)
                .is_ok()
        );
    }
}

#[test]
fn quoted_phrases_must_occur() {
    let pages = [
        page("https://a.example/", "A", "Bake the bread slowly."),
        page("https://b.example/", "B", "Bread you bake at home."),
    ];
    let (_dir, index) = index_with(&pages, &[]);
    assert_eq!(
        urls(&search(&index, "\"bake the bread\"")),
        ["https://a.example/"]
    );
    assert_eq!(search(&index, "bake bread").results.len(), 2);
    assert_eq!(urls(&search(&index, "\"bread\" cake")).len(), 2);
}

#[test]
fn a_phrase_is_found_beyond_the_pages_its_words_rank_first() {
    // More pages with both words, and more of them, than the phrase's
    // first pass takes: the few with the phrase rank low on the words.
    let mut pages: Vec<PageDoc> = (0..PHRASE_POOL + 50)
        .map(|i| {
            page(
                &format!("https://w.example/{i}"),
                "Words",
                "Panel solar. Solar is big and the panel is small. Panel, panel, solar.",
            )
        })
        .collect();
    let phrase_pages = ["https://p.example/1", "https://p.example/2"];
    for url in phrase_pages {
        pages.push(page(
            url,
            "Roofs",
            "A long page about roofs, tiles, gutters and weather, where one \
             line mentions a solar panel once among many other words.",
        ));
    }
    let (_dir, index) = index_with(&pages, &[]);
    let answer = search(&index, "\"solar panel\"");
    let mut found = urls(&answer);
    found.sort_unstable();
    assert_eq!(found, phrase_pages);
}

#[test]
fn a_how_to_title_does_not_beat_the_page_that_answers() {
    let pages = [
        page(
            "https://news.example/how-to-bake-sourdough-bread",
            "How to bake sourdough bread",
            "Subscribe to keep reading. Already a member? Sign in.",
        ),
        page(
            "https://blog.example/starter-diary",
            "My starter diary",
            "Day one: the sourdough starter bubbles. Day five: I shape the dough \
             and bake it at 250 degrees; the sourdough bread comes out with a dark crust. \
             Let the bread cool before slicing.",
        ),
    ];
    let (_dir, index) = index_with(&pages, &[]);
    let answer = search(&index, "how to bake sourdough bread");
    assert_eq!(
        urls(&answer)[0],
        "https://blog.example/starter-diary",
        "{answer:#?}"
    );
}

#[test]
fn a_hub_ranks_below_the_page_it_links_to() {
    let target = "https://recipes.example/sourdough-bread";
    let hub_url = "https://recipes.example/index";
    let names = [
        "Sourdough bread rolls",
        "Banana bread",
        "Sourdough bread",
        "Rye sourdough bread",
        "Corn bread",
        "Spelt sourdough bread",
        "Flat bread",
        "Sourdough bread crackers",
    ];
    let labels: Vec<String> = (0..60)
        .map(|i| names[i % names.len()].to_string())
        .collect();
    let mut hub = page(
        hub_url,
        "Recipe index: bread, cakes and pies",
        &labels.join("\n"),
    );
    hub.out_links = 60;
    let mut pages = vec![
        hub,
        page(
            target,
            "Sourdough",
            "A slow loaf: the starter leavens the bread overnight, and the long \
             fermentation gives sourdough bread its sour taste and open crumb. \
             Bake it in a hot covered pot for forty minutes.",
        ),
    ];
    // Every page of the site links to the index.
    let mut anchors = vec![anchor(hub_url, target, "Sourdough bread")];
    for i in 0..30 {
        let url = format!("https://recipes.example/r{i}");
        pages.push(page(&url, &format!("Recipe {i}"), "Mix, knead and wait."));
        anchors.push(anchor(&url, hub_url, "All recipes"));
    }
    let (_dir, index) = index_with(&pages, &anchors);
    let position = |ranking: Ranking| {
        let opts = SearchOptions::default().ranking(ranking);
        let answer = index.search("sourdough bread", &opts).unwrap();
        let order = urls(&answer);
        let pos = |u: &str| order.iter().position(|x| *x == u).unwrap();
        (pos(target), pos(hub_url))
    };
    // Plain BM25 puts the hub first (its labels repeat the words) ...
    let (target_at, hub_at) = position(Ranking::PlainBm25);
    assert!(hub_at < target_at);
    // ... the full ranking does not.
    let (target_at, hub_at) = position(Ranking::Full);
    assert!(target_at < hub_at);
}

#[test]
fn read_only_opens_beside_the_writer_and_a_second_writer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        SearchIndex::open_read_only(dir.path()),
        Err(SearchError::NoIndex { .. })
    ));
    let mut writer = SearchIndex::open(dir.path()).unwrap();
    assert!(matches!(
        SearchIndex::open(dir.path()),
        Err(SearchError::Locked { .. })
    ));
    writer.add_page(&bakery()[0]).unwrap();
    writer.commit().unwrap();
    let mut reader = SearchIndex::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.page_count(), 1);
    assert_eq!(search(&reader, "sourdough").results.len(), 1);
    writer.add_page(&bakery()[1]).unwrap();
    writer.commit().unwrap();
    reader.reload().unwrap();
    assert_eq!(urls(&search(&reader, "rye")), ["https://bake.example/rye"]);
    assert!(matches!(
        reader.add_page(&bakery()[2]),
        Err(SearchError::ReadOnly)
    ));
    assert!(matches!(reader.commit(), Err(SearchError::ReadOnly)));
    // The writer's lock goes with it.
    drop(writer);
    drop(reader);
    let mut again = SearchIndex::open(dir.path()).unwrap();
    again.add_page(&bakery()[2]).unwrap();
    again.commit().unwrap();
    assert_eq!(again.page_count(), 3);
}

#[test]
fn the_answer_serializes_to_the_documented_json() {
    let (_dir, index) = index_with(&bakery(), &[]);
    let json = serde_json::to_value(search(&index, "rye")).unwrap();
    let mut keys: Vec<&String> = json.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["did_you_mean", "results"]);
    let hit = json["results"][0].as_object().unwrap();
    let mut keys: Vec<&String> = hit.keys().collect();
    keys.sort();
    assert_eq!(keys, ["highlights", "score", "snippet", "title", "url"]);
    let (start, end) = (
        hit["highlights"][0]["start"].as_u64(),
        hit["highlights"][0]["end"].as_u64(),
    );
    let snippet = hit["snippet"].as_str().unwrap();
    let marked = &snippet[start.unwrap() as usize..end.unwrap() as usize];
    assert_eq!(marked.to_lowercase(), "rye", "{hit:?}");
    assert!(json["did_you_mean"].is_null());
    // A page with headings adds its section; `url` stays the page's.
    let (_dir, index) = index_with(&[conditional_expressions()], &[]);
    let json = serde_json::to_value(search(&index, "coalesce")).unwrap();
    let hit = json["results"][0].as_object().unwrap();
    let mut keys: Vec<&String> = hit.keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "heading_path",
            "highlights",
            "score",
            "section_url",
            "snippet",
            "title",
            "url"
        ]
    );
    assert_eq!(hit["url"], "https://pg.example/functions-conditional.html");
}

/// A reference page of `parts` (heading, anchor, text) in order, as the
/// extractor gives it: each heading starts its part of the body.
fn page_with_sections(url: &str, title: &str, parts: &[(&str, &str, &str)]) -> PageDoc {
    let mut body = String::new();
    let mut sections = Vec::new();
    for (heading, anchor, text) in parts {
        if !body.is_empty() {
            body.push(' ');
        }
        sections.push(SectionStart {
            offset: body.len() as u32,
            level: if sections.is_empty() { 2 } else { 3 },
            heading: (*heading).into(),
            anchor: (*anchor).into(),
        });
        body.push_str(&format!("{heading} {text}"));
    }
    PageDoc {
        headings: parts.iter().map(|p| p.0.to_string()).collect(),
        sections,
        ..page(url, title, &body)
    }
}

fn conditional_expressions() -> PageDoc {
    let filler = "Words about other conditional forms and their evaluation order. ".repeat(30);
    page_with_sections(
        "https://pg.example/functions-conditional.html",
        "9.18. Conditional Expressions",
        &[
            (
                "9.18. Conditional Expressions",
                "FUNCTIONS-CONDITIONAL",
                "This section describes the conditional expressions.",
            ),
            (
                "9.18.1. CASE",
                "FUNCTIONS-CASE",
                &format!("The CASE expression is a generic conditional. {filler}"),
            ),
            (
                "9.18.2. COALESCE",
                "FUNCTIONS-COALESCE",
                &format!(
                    "COALESCE returns the first of its arguments that is not null; it is often used to substitute a default value for null values. {filler}"
                ),
            ),
            (
                "9.18.3. NULLIF",
                "FUNCTIONS-NULLIF",
                &format!("NULLIF returns a null value if its two arguments are equal. {filler}"),
            ),
        ],
    )
}

#[test]
fn a_result_links_to_the_section_its_words_meet_in_with_a_snippet_from_it() {
    let (_dir, index) = index_with(&[conditional_expressions()], &[]);
    let hit = &search(&index, "substitute a default value for null").results[0];
    assert_eq!(hit.url, "https://pg.example/functions-conditional.html");
    assert_eq!(
        hit.section_url.as_deref(),
        Some("https://pg.example/functions-conditional.html#FUNCTIONS-COALESCE")
    );
    assert_eq!(
        hit.heading_path,
        ["9.18. Conditional Expressions", "9.18.2. COALESCE"]
    );
    assert!(
        hit.snippet.contains("substitute a default value"),
        "{hit:?}"
    );
    assert!(!hit.snippet.contains("CASE"), "{hit:?}");
    // The section's own heading counts for it: its first word is the
    // section's first position.
    let hit = &search(&index, "nullif").results[0];
    assert_eq!(
        hit.heading_path.last().map(String::as_str),
        Some("9.18.3. NULLIF")
    );
    assert!(hit.snippet.starts_with("9.18.3. NULLIF"), "{hit:?}");
    // A match in the title alone: the first section with text.
    let hit = &search(&index, "expressions").results[0];
    assert!(hit.section_url.is_some(), "{hit:?}");
    // The plain ranking links to the section its snippet is from.
    let plain = SearchOptions::default().ranking(Ranking::PlainBm25);
    let hit = &index.search("nullif", &plain).unwrap().results[0];
    assert_eq!(
        hit.heading_path.last().map(String::as_str),
        Some("9.18.3. NULLIF")
    );
}

#[test]
fn a_sections_start_is_the_body_position_of_its_first_word() {
    use tantivy::postings::Postings;
    let (_dir, index) = index_with(&[conditional_expressions()], &[]);
    let searcher = index.pages.reader.searcher();
    let segment = &searcher.segment_readers()[0];
    let column = segment
        .fast_fields()
        .bytes("section_starts")
        .unwrap()
        .unwrap();
    let mut packed = Vec::new();
    let ord = column.ords().first(0).unwrap();
    column.ord_to_bytes(ord, &mut packed).unwrap();
    let starts = sections::unpack_starts(&packed);
    assert_eq!(starts.len(), 5, "four sections and the body's length");
    // "9.18.3. NULLIF": its fourth word, in the analyzer's positions.
    let body = index.pages.fields.body;
    let mut postings = segment
        .inverted_index(body)
        .unwrap()
        .read_postings(
            &tantivy::Term::from_field_text(body, "nullif"),
            tantivy::schema::IndexRecordOption::WithFreqsAndPositions,
        )
        .unwrap()
        .unwrap();
    let mut positions = Vec::new();
    postings.positions(&mut positions);
    assert_eq!(positions[0], starts[3] + 3, "{positions:?} {starts:?}");
}

#[test]
fn a_section_past_the_stored_text_has_its_snippet_from_its_opening() {
    let filler = "Words about nothing in particular fill this page. ".repeat(600);
    let page = page_with_sections(
        "https://bake.example/long",
        "Long",
        &[
            ("Start", "start", &filler),
            (
                "Rye crumb",
                "rye",
                "The rye crumb is dense and keeps for a week.",
            ),
        ],
    );
    let (_dir, index) = index_with(&[page], &[]);
    let hit = &search(&index, "rye crumb").results[0];
    assert_eq!(
        hit.section_url.as_deref(),
        Some("https://bake.example/long#rye")
    );
    assert!(
        hit.snippet.starts_with("Rye crumb The rye crumb"),
        "{hit:?}"
    );
    let marked: Vec<&str> = hit
        .highlights
        .iter()
        .map(|r| &hit.snippet[r.clone()])
        .collect();
    assert!(
        marked.iter().any(|m| m.eq_ignore_ascii_case("crumb")),
        "{hit:?}"
    );
}

#[test]
fn a_page_without_headings_answers_as_before() {
    let (_dir, index) = index_with(&bakery(), &[]);
    let hit = &search(&index, "rye").results[0];
    assert_eq!(hit.section_url, None);
    assert!(hit.heading_path.is_empty());
}

#[test]
fn the_index_lives_beside_the_store() {
    assert_eq!(
        index_dir_for(Path::new("/data/crawl.db")),
        Path::new("/data/crawl.db.index")
    );
    assert_eq!(
        index_dir_for(Path::new("crawler.db")),
        Path::new("crawler.db.index")
    );
}

#[test]
fn a_page_is_found_by_the_words_around_the_links_to_it() {
    // The admin page never says "kill"; the page that links to it does,
    // around a link whose own text says nothing.
    let admin = page(
        "https://db.example/admin",
        "Administration functions",
        "pg_cancel_backend cancels the current query of a backend; \
         pg_terminate_backend ends the session.",
    );
    let shutdown = page(
        "https://db.example/shutdown",
        "Shutting the server down",
        "Send SIGTERM to stop the server. To kill a running query without \
         stopping the server, see Section 9.27 for the functions to call.",
    );
    let mut links = vec![AnchorDoc {
        target: admin.url.clone(),
        text: "Section 9.27".into(),
        context: String::new(),
    }];
    add_contexts(&shutdown, &mut links);
    assert!(
        links[0].context.contains("kill a running query"),
        "{links:?}"
    );
    let (_dir, index) = index_with(
        &[admin.clone(), shutdown.clone()],
        &[(shutdown.url.clone(), links[0].clone())],
    );
    let answer = search(&index, "kill");
    let found = urls(&answer);
    assert!(found.contains(&admin.url.as_str()), "{found:?}");
    // Without the context, only the page with the word is found.
    let (_dir, index) = index_with(
        &[admin.clone(), shutdown.clone()],
        &[anchor(&shutdown.url, &admin.url, "Section 9.27")],
    );
    assert_eq!(urls(&search(&index, "kill")), [shutdown.url.as_str()]);
}

#[test]
fn a_page_with_many_links_in_its_text_gives_each_a_shorter_context() {
    let words: Vec<String> = (0..4000).map(|i| format!("w{i}")).collect();
    let link_at = |i: usize| i * 100 + 50;
    let body = |links: usize| {
        let mut text = words.clone();
        for l in 0..links {
            text[link_at(l)] = format!("link{l}");
        }
        text.join(" ")
    };
    let contexts = |links: usize| {
        let p = page("https://x.example/", "Essay", &body(links));
        let mut docs: Vec<AnchorDoc> = (0..links)
            .map(|l| AnchorDoc {
                target: format!("https://x.example/{l}"),
                text: format!("link{l}"),
                context: String::new(),
            })
            .collect();
        add_contexts(&p, &mut docs);
        docs.into_iter().map(|d| d.context).collect::<Vec<_>>()
    };
    let sides = |context: &str| context.split_whitespace().count() / 2;
    // Sixteen links: 25 words a side each, 800 in all.
    let few = contexts(16);
    assert!(few.iter().all(|c| sides(c) == 25), "{:?}", few[0]);
    // Forty: 800 / 80 = 10 words a side each.
    let many = contexts(40);
    assert!(many.iter().all(|c| sides(c) == 10), "{:?}", many[0]);
    assert_eq!(
        many[3],
        (340..350)
            .chain(351..361)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert!(
        many.iter()
            .map(|c| c.split_whitespace().count())
            .sum::<usize>()
            <= 800
    );
}

#[test]
fn a_hub_gives_its_links_no_context() {
    let mut hub = page(
        "https://db.example/toc",
        "Contents",
        &"Chapter one Chapter two ".repeat(20),
    );
    hub.out_links = 80;
    let mut links = vec![AnchorDoc {
        target: "https://db.example/one".into(),
        text: "Chapter one".into(),
        context: String::new(),
    }];
    add_contexts(&hub, &mut links);
    assert_eq!(links[0].context, "");
}

/// A query across `shards` as the cluster asks it: each phase's
/// statistics merged and handed on, then each shard's best pages merged.
fn sharded_search(shards: &[&SearchIndex], q: &str) -> SearchAnswer {
    let mut stats = ShardStats::default();
    for phase in ShardPhase::ALL {
        let mut merged = ShardStats::default();
        for s in shards {
            merged.merge(s.shard_stats(q, phase, &stats).unwrap());
        }
        stats.merge(merged);
    }
    let tops = shards
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("n{i}"), s.shard_top(q, 20, &stats).unwrap()))
        .collect();
    web_crawler_actors::cluster_query::merge_tops(tops, 10, &Default::default())
}

/// Pages of three sites, about overlapping things in varied words; each
/// site links to the others' pages with words of their own.
fn three_sites() -> (Vec<PageDoc>, Vec<(String, AnchorDoc)>) {
    let topics = [
        (
            "logs",
            "rotate the server logs daily and compress old log files",
        ),
        (
            "backup",
            "back up the database with a dump and restore it later",
        ),
        (
            "index",
            "create an index on a column to speed up slow queries",
        ),
        (
            "vacuum",
            "vacuum reclaims storage held by dead rows after updates",
        ),
        (
            "replica",
            "a replica follows the primary server by streaming its log",
        ),
        (
            "locks",
            "locks keep two writers from changing one row at once",
        ),
        (
            "tuning",
            "tune the memory settings of the server for faster queries",
        ),
    ];
    let mut pages = Vec::new();
    let mut anchors = Vec::new();
    for (s, site) in ["a.example", "b.example", "c.example"].iter().enumerate() {
        for (t, (name, text)) in topics.iter().enumerate() {
            if (s + t) % 3 == 0 && t > 0 {
                continue;
            }
            let url = format!("https://{site}/{name}");
            let body = format!(
                "{text}. {} {}",
                topics[(t + s + 1) % topics.len()].1,
                "This page is part of the manual.".repeat(s + 1)
            );
            pages.push(page(&url, &format!("{name} on {site}"), &body));
            let next = format!(
                "https://{}/{}",
                ["a.example", "b.example", "c.example"][(s + 1) % 3],
                topics[(t + 2) % topics.len()].0
            );
            anchors.push(anchor(
                &url,
                &next,
                &format!("how to {name} {}", topics[(t + 2) % topics.len()].0),
            ));
        }
    }
    (pages, anchors)
}

#[test]
fn shards_answer_as_one_index_over_their_pages() {
    let (pages, anchors) = three_sites();
    let (_all_dir, all) = index_with(&pages, &anchors);
    let site_of = |url: &str| url.split('/').nth(2).unwrap_or_default().to_string();
    let mut dirs = Vec::new();
    let mut shards = Vec::new();
    for site in ["a.example", "b.example", "c.example"] {
        let mine: Vec<PageDoc> = pages
            .iter()
            .filter(|p| site_of(&p.url) == site)
            .cloned()
            .collect();
        let links: Vec<(String, AnchorDoc)> = anchors
            .iter()
            .filter(|(s, _)| site_of(s) == site)
            .cloned()
            .collect();
        let (dir, index) = index_with(&mine, &links);
        dirs.push(dir);
        shards.push(index);
    }
    let shards: Vec<&SearchIndex> = shards.iter().collect();
    for q in [
        "rotate logs",
        "database backup restore",
        "slow queries",
        "how do I reclaim storage",
        "\"primary server\"",
        "memory settings",
        "replca streaming",
    ] {
        let one = search(&all, q);
        let many = sharded_search(&shards, q);
        assert_eq!(many.did_you_mean, one.did_you_mean, "{q}");
        assert_eq!(
            urls(&many),
            urls(&one),
            "{q}: the same pages in the same order"
        );
        for (a, b) in many.results.iter().zip(&one.results) {
            assert!(
                (a.score - b.score).abs() < 1e-4,
                "{q}: {} {} vs {}",
                a.url,
                a.score,
                b.score
            );
        }
    }
    // One shard alone is asked for its best pages at once, with no
    // statistics: it answers as the index does.
    for q in ["rotate logs", "replca streaming", "how to locks"] {
        let top = all.shard_top(q, 10, &ShardStats::default()).unwrap();
        let alone = web_crawler_actors::cluster_query::merge_tops(
            vec![("n".to_string(), top)],
            10,
            &Default::default(),
        );
        assert_eq!(alone.results, search(&all, q).results, "{q}");
        assert_eq!(alone.did_you_mean, search(&all, q).did_you_mean, "{q}");
    }
    // A page found only by the words of a link on another shard.
    let q = "how to locks";
    let many = sharded_search(&shards, q);
    assert_eq!(urls(&many), urls(&search(&all, q)));
}

#[test]
fn a_page_removed_is_gone_with_its_links_after_the_commit() {
    let pages = bakery();
    let anchors = [anchor(
        "https://bake.example/rye",
        "https://bake.example/cakes",
        "sponge recipes",
    )];
    let (_dir, mut index) = index_with(&pages, &anchors);
    assert_eq!(
        urls(&search(&index, "sponge recipes"))[0],
        "https://bake.example/cakes"
    );
    index.remove_page("https://bake.example/rye").unwrap();
    assert_eq!(index.page_count(), 3, "seen after the commit only");
    index.commit().unwrap();
    assert_eq!(index.page_count(), 2);
    assert!(urls(&search(&index, "rye")).is_empty());
    assert!(
        !urls(&search(&index, "recipes")).contains(&"https://bake.example/cakes"),
        "its links went with it"
    );
}
