//! `page-cost`: what one page costs the crawl's CPU, stage by stage, with
//! no network and no store: the extractor reading links only (what the
//! crawl needs without the trap defence), the extractor also collecting
//! the visible text the trap defence reads, the trap defence's reading of
//! that text (`traps::read_page`: simhashes and sampled shingles), and the
//! master's trap guard over the page and its links (`observe_read`, then
//! `admit_read` of its links, as the master does). Then what an indexed
//! crawl adds: the extractor collecting the text the index takes (up to
//! `INDEX_TEXT_BYTES`, with the page's outline), and the page's way
//! through the index (queued as a record, read back, added to an index
//! of its own, committed). Each stage runs over the same pages in turn,
//! several rounds; the fastest round of each is printed, in µs per page.
//!
//! `--only STAGE` runs one stage alone, for `perf stat -e instructions:u`
//! (a count this shared machine's load does not move; `--only none` is
//! the cost of making the pages, to subtract).

use crate::web::{Preset, Web};
use std::time::Instant;
use web_crawler::actors::traps::{self, ReadLinks, TrapGuard, TrapSettings};
use web_crawler::actors::{
    ExtractedPage, Extractor, FetchedPage, INDEX_TEXT_BYTES, PageIndex, PageText, QueuedPage,
};

/// Rounds per stage; the fastest counts (the machine is shared).
const ROUNDS: usize = 5;

/// The stages, in the order they are printed.
pub const STAGES: [&str; 6] = ["links", "text", "read", "guard", "index-text", "index"];

pub fn run(name: &str, preset: Preset, pages: usize, only: Option<&str>) {
    // Pages made on request: only those measured are made.
    let web = Web::generate(
        Preset {
            streamed: true,
            ..preset
        },
        80,
        42,
    );
    let extractor = web_crawler::extract::HtmlExtractor::new(Default::default());
    let fetched: Vec<(String, FetchedPage)> = web
        .canonical()
        .iter()
        .filter_map(|(h, path)| {
            let response = web.serve(*h, path).1?;
            (response.status == 200 && response.content_type.starts_with("text/html")).then(|| {
                let url = format!("http://{}:{}{path}", web.ips[*h], web.port);
                let page = FetchedPage {
                    status: 200,
                    content_type: Some(response.content_type.to_string()),
                    body: response.body.to_vec(),
                    ..Default::default()
                };
                (url, page)
            })
        })
        .take(pages)
        .collect();
    let n = fetched.len();
    let text_limit = traps::SHINGLE_TEXT_BYTES.max(traps::SIMHASH_TEXT_BYTES);
    let extracted: Vec<ExtractedPage> = fetched
        .iter()
        .map(|(url, page)| extractor.extract(url, page, text_limit))
        .collect();
    let read: Vec<_> = extracted
        .iter()
        .map(|e| traps::read_page(&e.visible_head, &e.text, true))
        .collect();
    let for_index: Vec<ExtractedPage> = fetched
        .iter()
        .map(|(url, page)| extractor.extract(url, page, INDEX_TEXT_BYTES))
        .collect();

    let stage = |which: &str| -> f64 {
        match which {
            "links" => fastest(n, || {
                for (url, page) in &fetched {
                    std::hint::black_box(extractor.extract(url, page, 0));
                }
            }),
            "text" => fastest(n, || {
                for (url, page) in &fetched {
                    std::hint::black_box(extractor.extract(url, page, text_limit));
                }
            }),
            "read" => fastest(n, || {
                for e in &extracted {
                    std::hint::black_box(traps::read_page(&e.visible_head, &e.text, true));
                }
            }),
            "guard" => fastest(n, || {
                // A new guard each round: it learns the pages as a crawl would.
                let mut guard = TrapGuard::new(TrapSettings::default());
                for (((url, _), e), (simhash, shingles)) in
                    fetched.iter().zip(&extracted).zip(&read)
                {
                    let links = ReadLinks::of(e.links.iter().map(url::Url::as_str));
                    std::hint::black_box(guard.observe_read(url, *simhash, shingles, &links, 0));
                    std::hint::black_box(guard.admit_read(&links, 0));
                }
            }),
            "index-text" => fastest(n, || {
                for (url, page) in &fetched {
                    std::hint::black_box(extractor.extract(url, page, INDEX_TEXT_BYTES));
                }
            }),
            "index" => fastest(n, || {
                // A new index each round, as the crawl's first.
                let dir = tempfile::tempdir().expect("a directory for the index");
                let mut index =
                    web_crawler::search::SearchIndex::open(dir.path()).expect("open the index");
                for ((url, _), e) in fetched.iter().zip(&for_index) {
                    let Some(text) = PageText::of(url, e) else {
                        continue;
                    };
                    let queued = QueuedPage::of_record(&text.into_record()).expect("queued");
                    let page = queued.text().expect("read back");
                    PageIndex::add(&mut index, page).expect("add");
                }
                PageIndex::commit(&mut index).expect("commit");
            }),
            _ => 0.0,
        }
    };
    if let Some(only) = only {
        println!("{only}: {:.1} µs per page", stage(only));
        return;
    }
    let [links_only, with_text, reading, guard, index_text, indexing] = STAGES.map(stage);
    let body_kb = fetched.iter().map(|(_, p)| p.body.len()).sum::<usize>() as f64 / n as f64 / 1e3;
    let text_kb = extracted.iter().map(|e| e.text.len()).sum::<usize>() as f64 / n as f64 / 1e3;
    let links = extracted.iter().map(|e| e.links.len()).sum::<usize>() as f64 / n as f64;
    let defence = (with_text - links_only).max(0.0) + reading + guard;
    println!(
        "{n} pages of `{name}`: {body_kb:.1} KB of HTML, {text_kb:.1} KB of text, {links:.0} links each"
    );
    println!("| stage | µs per page |");
    println!("|---|---:|");
    println!("| extract, links only | {links_only:.1} |");
    println!("| extract, links and text | {with_text:.1} |");
    println!("| read the text (simhashes, shingles) | {reading:.1} |");
    println!("| trap guard (observe, admit links) | {guard:.1} |");
    println!(
        "| trap defence in all (text collected, read, guard) | {defence:.1} ({:.0}% of links-only extraction) |",
        100.0 * defence / links_only
    );
    println!("| extract, links and the index's text (outline included) | {index_text:.1} |");
    println!("| index (queued, read back, added, committed) | {indexing:.1} |");
}

/// The fastest of [`ROUNDS`] runs of `round`, in µs per page.
fn fastest(pages: usize, mut round: impl FnMut()) -> f64 {
    (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            round();
            start.elapsed().as_secs_f64() * 1e6 / pages as f64
        })
        .fold(f64::INFINITY, f64::min)
}
