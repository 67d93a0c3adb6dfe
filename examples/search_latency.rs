//! Run with: `cargo run --release --example search_latency -- [PAGES] [DIR]`
//!
//! In-process query latency of the search engine over a synthetic web
//! (default 100,000 pages, Zipf-distributed words, five anchors per page,
//! a few hub pages): builds the index in DIR (a temporary directory if
//! none; an existing index in DIR is searched as it is), then prints p50,
//! p95 and max latency per ranking over a fixed query mix (one to four
//! words, phrases, typos). The target is p95 ≤ 20 ms for `full`.
//!
//! Each ranking's queries are run once untimed first (a warmed, already-open
//! reader is what is timed). `PER_QUERY=1` prints each query's median time.
//! `RESULTS=FILE` writes every query's results (URL, score, title, snippet,
//! highlights, correction) to FILE if it does not exist, and otherwise
//! compares them with FILE and fails on any difference: run it before and
//! after a change to the engine to show the answers are the same.
//! `QUERIES=FILE` takes the queries from a labelled set instead
//! (`bench/search/queries.tsv`: the fourth tab-separated column), to time
//! them over a real crawl's index given as DIR (e.g. one made with
//! `crawl --semantic`: `full` then embeds each query; `words` does not).

use std::time::{Duration, Instant};
use web_crawler::search::{AnchorDoc, PageDoc, Ranking, SearchIndex, SearchOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pages: usize = std::env::args().nth(1).map_or(Ok(100_000), |a| a.parse())?;
    let tmp = tempfile::tempdir()?;
    let dir = std::env::args()
        .nth(2)
        .map_or_else(|| tmp.path().join("index"), Into::into);
    let words = vocabulary(20_000);
    let mut rng = fastrand::Rng::with_seed(7);
    let mut context_rng = fastrand::Rng::with_seed(8);
    // Zipf-ish: word rank r drawn with probability ∝ 1/r.
    let text = |rng: &mut fastrand::Rng, n: usize| {
        (0..n)
            .map(|_| {
                let r = (words.len() as f64).powf(rng.f64()) as usize;
                words[r.min(words.len() - 1)].as_str()
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut index = SearchIndex::open(&dir)?;
    if index.page_count() == 0 {
        let started = Instant::now();
        for p in 0..pages {
            let hub = p % 1000 == 0;
            let doc = PageDoc {
                url: url(p),
                title: text(&mut rng, 5),
                headings: vec![text(&mut rng, 3), text(&mut rng, 4)],
                body: text(&mut rng, if hub { 200 } else { 300 }),
                out_links: if hub { 150 } else { 20 },
                ..PageDoc::default()
            };
            index.add_page(&doc)?;
            let links: Vec<AnchorDoc> = (0..5)
                .map(|_| AnchorDoc {
                    target: url(rng.usize(..pages)),
                    text: text(&mut rng, 3),
                    // From its own generator: the pages and links stay
                    // those of the runs before anchors had a context.
                    context: text(&mut context_rng, 24),
                })
                .collect();
            index.set_anchors(&doc.url, &links)?;
            if p % 20_000 == 19_999 {
                index.commit()?;
            }
        }
        index.commit()?;
        eprintln!("indexed {pages} pages in {:.1?}", started.elapsed());
    }
    let q = |i: usize| words[i].clone();
    let labelled = std::env::var_os("QUERIES")
        .map(std::fs::read_to_string)
        .transpose()?;
    let queries: Vec<String> = match &labelled {
        Some(tsv) => tsv
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split('\t').nth(3))
            .map(str::to_string)
            .collect(),
        None => vec![
            q(3),
            q(40),
            q(900),
            format!("{} {}", q(10), q(200)),
            format!("{} {} {}", q(5), q(50), q(500)),
            format!("{} {} {} {}", q(2), q(30), q(300), q(3000)),
            format!("\"{} {}\"", q(1), q(2)),
            format!("{} \"{} {}\"", q(100), q(4), q(6)),
            typo(&q(120)),
            format!("{} {}", typo(&q(60)), q(700)),
            q(15_000),
            "zzzzqqqq".to_string(),
        ],
    };
    let mut dump = String::new();
    for ranking in [Ranking::Full, Ranking::Words, Ranking::PlainBm25] {
        let opts = SearchOptions::default().ranking(ranking);
        for query in &queries {
            let answer = index.search(query, &opts)?;
            dump.push_str(&format!(
                "{ranking:?} {query:?} did_you_mean={:?}\n",
                answer.did_you_mean
            ));
            for hit in &answer.results {
                dump.push_str(&format!(
                    "  {:.5} {} {:?} {:?} {:?}\n",
                    hit.score, hit.url, hit.title, hit.snippet, hit.highlights
                ));
            }
        }
        let mut times: Vec<Duration> = Vec::new();
        for _round in 0..20 {
            for query in &queries {
                let t = Instant::now();
                let answer = index.search(query, &opts)?;
                times.push(t.elapsed());
                std::hint::black_box(answer);
            }
        }
        if std::env::var_os("PER_QUERY").is_some() {
            for (i, query) in queries.iter().enumerate() {
                let mut own: Vec<Duration> = times
                    .iter()
                    .skip(i)
                    .step_by(queries.len())
                    .copied()
                    .collect();
                own.sort();
                println!("  {:>9.2?}  {query}", own[own.len() / 2]);
            }
        }
        times.sort();
        let at = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
        println!(
            "{ranking:?}: {} queries over {} pages: p50 {:.2?}  p95 {:.2?}  max {:.2?}",
            times.len(),
            index.page_count(),
            at(0.5),
            at(0.95),
            at(1.0)
        );
    }
    if let Some(file) = std::env::var_os("RESULTS").map(std::path::PathBuf::from) {
        match std::fs::read_to_string(&file) {
            Ok(before) if before == dump => println!("results: same as {}", file.display()),
            Ok(before) => {
                let first = before
                    .lines()
                    .zip(dump.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or(before.lines().count().min(dump.lines().count()));
                return Err(format!(
                    "results differ from {} at line {}:\n  before: {:?}\n  now:    {:?}",
                    file.display(),
                    first + 1,
                    before.lines().nth(first),
                    dump.lines().nth(first)
                )
                .into());
            }
            Err(_) => {
                std::fs::write(&file, &dump)?;
                println!("results: written to {}", file.display());
            }
        }
    }
    Ok(())
}

fn url(page: usize) -> String {
    format!("https://site{}.example/page/{page}", page % 500)
}

/// `n` distinct pronounceable words.
fn vocabulary(n: usize) -> Vec<String> {
    const C: &[u8] = b"bcdfghklmnprstvz";
    const V: &[u8] = b"aeiou";
    (0..n)
        .map(|mut i| {
            let mut w = String::new();
            loop {
                w.push(C[i % C.len()] as char);
                i /= C.len();
                w.push(V[i % V.len()] as char);
                i /= V.len();
                if i == 0 {
                    break;
                }
            }
            w.push('n');
            w
        })
        .collect()
}

/// The word with two letters swapped.
fn typo(word: &str) -> String {
    let mut c: Vec<char> = word.chars().collect();
    if c.len() > 2 {
        c.swap(1, 2);
    }
    c.into_iter().collect()
}
