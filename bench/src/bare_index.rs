//! (i) bare tantivy: the indexing ceiling, as (a') is the fetching one. The
//! same pages' visible text (web_crawler's extractor, title included) into
//! one positional text field with tantivy's default tokenizer, one writer
//! thread, committed at the end, on disk. Only the indexing is timed (the
//! web's generation and the extraction are not): its CPU and the text's
//! size are printed as the child's last stderr line, which the benchmark
//! reads.

use crate::web::{Preset, Web};
use nix::sys::resource::UsageWho;
use std::time::Duration;
use tantivy::schema::{Schema, TEXT};
use tantivy::{Index, TantivyDocument};
use web_crawler::actors::INDEX_TEXT_BYTES;
use web_crawler::actors::{PageIndex, PageText};

/// tantivy's own examples' writer arena.
const WRITER_BYTES: usize = 50_000_000;

fn cpu() -> Duration {
    crate::cpu_of(UsageWho::RUSAGE_SELF)
}

/// Every canonical HTML page of the web as web_crawler's extractor reads
/// it: its visible text (title first: what (i) indexes) and what
/// web_crawler's index gets of it.
pub fn pages(preset: Preset) -> Vec<(String, PageText)> {
    use web_crawler::actors::Extractor;
    let web = Web::generate(preset, 80, 42);
    let extractor = web_crawler::extract::HtmlExtractor::new(Default::default());
    web.canonical()
        .iter()
        .filter_map(|(h, path)| {
            let (_, response) = web.serve(*h, path);
            let response = response?;
            if response.status != 200 || !response.content_type.starts_with("text/html") {
                return None;
            }
            let url = format!("http://{}:{}{path}", web.ips[*h], web.port);
            let fetched = web_crawler::actors::FetchedPage {
                status: 200,
                content_type: Some(response.content_type.to_string()),
                body: response.body.to_vec(),
                ..Default::default()
            };
            let page = extractor.extract(&url, &fetched, INDEX_TEXT_BYTES);
            let text = PageText::of(&url, &page)?;
            Some((page.text, text))
        })
        .collect()
}

/// What the child indexes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Indexed {
    /// (i): the visible text into one field.
    Bare,
    /// web_crawler's own index: title, headings, body, URL words, and the
    /// links (their text and context).
    Ours,
    /// web_crawler's own index of the pages alone: what the links cost is
    /// `Ours` less this.
    OursWithoutLinks,
}

/// Child: index the pages as `what` says; print
/// `bare-index TEXT_BYTES CPU_SECONDS`.
pub fn run(preset: Preset, dir: &std::path::Path, what: Indexed) {
    let (texts, pages): (Vec<String>, Vec<PageText>) = pages(preset).into_iter().unzip();
    let bytes: usize = texts.iter().map(String::len).sum();
    if what != Indexed::Bare {
        drop(texts);
        let before = cpu();
        let mut index = web_crawler::search::SearchIndex::open(dir).expect("open the index");
        for mut page in pages {
            if what == Indexed::OursWithoutLinks {
                page.anchors.clear();
            }
            PageIndex::add(&mut index, page).expect("add");
        }
        PageIndex::commit(&mut index).expect("commit");
        drop(index);
        let spent = cpu().saturating_sub(before);
        eprintln!("bare-index {bytes} {:.3}", spent.as_secs_f64());
        return;
    }
    drop(pages);
    let mut schema = Schema::builder();
    let body = schema.add_text_field("body", TEXT);
    let index = Index::create_in_dir(dir, schema.build()).expect("create the index");
    let before = cpu();
    let mut writer = index
        .writer_with_num_threads(1, WRITER_BYTES)
        .expect("a writer");
    for text in texts {
        let mut doc = TantivyDocument::new();
        doc.add_text(body, text);
        writer.add_document(doc).expect("add");
    }
    writer.commit().expect("commit");
    writer.wait_merging_threads().expect("merges");
    let spent = cpu().saturating_sub(before);
    eprintln!("bare-index {bytes} {:.3}", spent.as_secs_f64());
}
