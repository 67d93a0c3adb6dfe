//! Query latency over the index the (b) row wrote (`DB.index`, beside its
//! store): a fixed, seeded set of queries drawn from the web's own words
//! ([`web::WORDS`], the text of every real page), searched in-process with
//! the library (`SearchIndex::open_read_only`, then `search` with limit 10,
//! each timed with `Instant` after one untimed pass over the whole set) and
//! through the CLI (`web_crawler search Q --db DB --json --limit 10`, the
//! whole process timed, start-up included, after one untimed run).

use crate::web;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::process::Command;
use web_crawler::search::{SearchIndex, SearchOptions};

/// Results asked for, in-process and from the CLI.
const LIMIT: usize = 10;
/// Queries of each kind, in-process (200 in all).
const MIX: [(Kind, usize); 5] = [
    (Kind::OneWord, 40),
    (Kind::TwoWords, 50),
    (Kind::ThreeWords, 50),
    (Kind::Typo, 30),
    (Kind::Phrase, 30),
];
/// Every this-many-th query of the (shuffled) set also goes through the CLI: 50.
const CLI_EVERY: usize = 4;
/// Time limit of one CLI search.
const CLI_TIMEOUT: Duration = Duration::from_secs(30);
/// The targets (issue #12): p95 at 100,000 pages.
const TARGET_IN_PROCESS_MS: f64 = 20.0;
const TARGET_CLI_MS: f64 = 60.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    OneWord,
    TwoWords,
    ThreeWords,
    /// One or two words, one of them misspelled (one edit).
    Typo,
    /// A quoted two-word phrase.
    Phrase,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::OneWord => "1 word",
            Kind::TwoWords => "2 words",
            Kind::ThreeWords => "3 words",
            Kind::Typo => "with a typo",
            Kind::Phrase => "\"quoted phrase\"",
        }
    }
}

pub struct Query {
    pub text: String,
    pub kind: Kind,
}

/// `n` different words of the web.
fn distinct(rng: &mut fastrand::Rng, n: usize) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    while out.len() < n {
        let w = web::WORDS[rng.usize(..web::WORDS.len())];
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// `word` with one edit inside it (a letter dropped, two swapped, or one
/// replaced), never the first letter, never another word of the web.
fn misspell(rng: &mut fastrand::Rng, word: &str) -> String {
    let chars: Vec<char> = word.chars().collect();
    loop {
        let mut c = chars.clone();
        match rng.usize(..3) {
            0 => {
                c.remove(1 + rng.usize(..c.len() - 1));
            }
            1 => {
                let at = 1 + rng.usize(..c.len() - 2);
                c.swap(at, at + 1);
            }
            _ => {
                let at = 1 + rng.usize(..c.len() - 1);
                c[at] = rng.lowercase();
            }
        }
        let typo: String = c.into_iter().collect();
        if typo != word && !web::WORDS.contains(&typo.as_str()) {
            return typo;
        }
    }
}

/// The query set: [`MIX`], shuffled, from `seed`.
pub fn queries(seed: u64) -> Vec<Query> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = Vec::new();
    for (kind, n) in MIX {
        for _ in 0..n {
            let text = match kind {
                Kind::OneWord => distinct(&mut rng, 1).join(" "),
                Kind::TwoWords => distinct(&mut rng, 2).join(" "),
                Kind::ThreeWords => distinct(&mut rng, 3).join(" "),
                Kind::Typo => {
                    let n = 1 + rng.usize(..2);
                    let mut words: Vec<String> = distinct(&mut rng, n)
                        .into_iter()
                        .map(String::from)
                        .collect();
                    // Misspell a word long enough to stay recognisable.
                    let long: Vec<usize> =
                        (0..words.len()).filter(|i| words[*i].len() >= 5).collect();
                    let at = if long.is_empty() {
                        words[0] = "supervisor".to_string();
                        0
                    } else {
                        long[rng.usize(..long.len())]
                    };
                    words[at] = misspell(&mut rng, &words[at]);
                    words.join(" ")
                }
                Kind::Phrase => format!("\"{}\"", distinct(&mut rng, 2).join(" ")),
            };
            out.push(Query { text, kind });
        }
    }
    rng.shuffle(&mut out);
    out
}

/// One in-process search.
pub struct Timed {
    pub query: usize,
    pub took: Duration,
    pub results: usize,
    pub corrected: bool,
}

pub struct InProcess {
    pub pages: u64,
    pub open: Duration,
    pub timed: Vec<Timed>,
    pub errors: Vec<String>,
}

/// Search every query once untimed, then once timed (blocking).
pub fn in_process(dir: &Path, queries: &[Query]) -> Result<InProcess, String> {
    let started = Instant::now();
    let index =
        SearchIndex::open_read_only(dir).map_err(|e| format!("open {}: {e}", dir.display()))?;
    let open = started.elapsed();
    let opts = SearchOptions::default().limit(LIMIT);
    for q in queries {
        let _ = index.search(&q.text, &opts);
    }
    let mut timed = Vec::new();
    let mut errors = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let started = Instant::now();
        let answer = index.search(&q.text, &opts);
        let took = started.elapsed();
        match answer {
            Ok(a) => timed.push(Timed {
                query: i,
                took,
                results: a.results.len(),
                corrected: a.did_you_mean.is_some(),
            }),
            Err(e) => errors.push(format!("{:?}: {e}", q.text)),
        }
    }
    Ok(InProcess {
        pages: index.page_count(),
        open,
        timed,
        errors,
    })
}

pub struct Cli {
    pub took: Vec<Duration>,
    pub errors: Vec<String>,
}

/// One `crawler search` run, timed whole.
async fn cli_once(crawler: &Path, db: &Path, q: &str) -> Result<Duration, String> {
    let mut cmd = Command::new(crawler);
    cmd.arg("search")
        .arg(q)
        .arg("--db")
        .arg(db)
        .arg("--json")
        .args(["--limit", &LIMIT.to_string()])
        .env("RUST_LOG", "error")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let started = Instant::now();
    let out = tokio::time::timeout(CLI_TIMEOUT, cmd.output()).await;
    let took = started.elapsed();
    match out {
        Err(_) => Err(format!("{q:?}: timed out after {CLI_TIMEOUT:?}")),
        Ok(Err(e)) => Err(format!("{q:?}: cannot run: {e}")),
        Ok(Ok(o)) if !o.status.success() => Err(format!(
            "{q:?}: {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(Ok(o)) => match serde_json::from_slice::<serde_json::Value>(&o.stdout) {
            Ok(v) if v["results"].is_array() => Ok(took),
            _ => Err(format!("{q:?}: not a JSON answer")),
        },
    }
}

/// Every [`CLI_EVERY`]-th query through `crawler search`, after one untimed run.
pub async fn cli(crawler: &Path, db: &Path, queries: &[Query]) -> Cli {
    let picked: Vec<&Query> = queries.iter().step_by(CLI_EVERY).collect();
    let mut took = Vec::new();
    let mut errors = Vec::new();
    if let Some(first) = picked.first() {
        let _ = cli_once(crawler, db, &first.text).await;
    }
    for q in picked {
        match cli_once(crawler, db, &q.text).await {
            Ok(t) => took.push(t),
            Err(e) => errors.push(e),
        }
    }
    Cli { took, errors }
}

/// Nearest-rank percentile of sorted durations, in ms.
pub fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let k = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    ms(sorted[k])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn row(name: &str, mut took: Vec<Duration>, target: &str) {
    took.sort();
    println!(
        "| {name} | {} | {:.1} | {:.1} | {:.1} | {target} |",
        took.len(),
        pct(&took, 0.50),
        pct(&took, 0.95),
        took.last().map_or(f64::NAN, |d| ms(*d)),
    );
}

/// The latency table, and what else was seen (corrections, empty answers,
/// errors, the slowest queries).
pub fn print(queries: &[Query], inp: &Result<InProcess, String>, cli: Option<&Cli>) {
    println!();
    let inp = match inp {
        Ok(inp) => inp,
        Err(e) => {
            println!("query latency: not measured: {e}");
            return;
        }
    };
    println!(
        "| query latency, index of (b): {} pages, limit {LIMIT} | queries | p50 ms | p95 ms | max ms | target p95 |",
        inp.pages
    );
    println!("|---|---:|---:|---:|---:|---|");
    let all: Vec<Duration> = inp.timed.iter().map(|t| t.took).collect();
    row(
        "in-process (`SearchIndex::search`), all",
        all.clone(),
        &format!("≤ {TARGET_IN_PROCESS_MS} ms"),
    );
    for (kind, _) in MIX {
        let took = inp
            .timed
            .iter()
            .filter(|t| queries[t.query].kind == kind)
            .map(|t| t.took)
            .collect();
        row(&format!("in-process, {}", kind.name()), took, "");
    }
    if let Some(cli) = cli {
        row(
            "CLI (`web_crawler search --json`), whole process",
            cli.took.clone(),
            &format!("≤ {TARGET_CLI_MS} ms"),
        );
    }
    println!();
    println!(
        "index opened read-only in {:.1} ms; warm-up: one untimed pass over the set{}",
        ms(inp.open),
        if cli.is_some() {
            " (the CLI: one untimed run)"
        } else {
            ""
        }
    );
    let typos: Vec<&Timed> = inp
        .timed
        .iter()
        .filter(|t| queries[t.query].kind == Kind::Typo)
        .collect();
    println!(
        "typo queries corrected (did_you_mean set): {}/{}; other queries corrected: {}; queries with no results: {}",
        typos.iter().filter(|t| t.corrected).count(),
        typos.len(),
        inp.timed
            .iter()
            .filter(|t| t.corrected && queries[t.query].kind != Kind::Typo)
            .count(),
        inp.timed.iter().filter(|t| t.results == 0).count()
    );
    let mut slow: Vec<&Timed> = inp.timed.iter().collect();
    slow.sort_by_key(|t| std::cmp::Reverse(t.took));
    let slowest: Vec<String> = slow
        .iter()
        .take(5)
        .map(|t| format!("{} {:.1} ms", queries[t.query].text, ms(t.took)))
        .collect();
    println!("slowest in-process: {}", slowest.join("; "));
    for e in &inp.errors {
        println!("in-process error: {e}");
    }
    for e in cli.map_or(&[][..], |c| &c.errors[..]) {
        println!("CLI error: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_is_fixed_and_mixed() {
        let a = queries(7);
        let b = queries(7);
        assert_eq!(a.len(), 200);
        assert!(a.iter().zip(&b).all(|(x, y)| x.text == y.text));
        let of = |k| a.iter().filter(|q| q.kind == k).count();
        assert_eq!(of(Kind::Typo), 30);
        assert_eq!(of(Kind::Phrase), 30);
        for q in &a {
            let words: Vec<&str> = q.text.trim_matches('"').split(' ').collect();
            let known = words.iter().filter(|w| web::WORDS.contains(w)).count();
            match q.kind {
                Kind::Typo => assert_eq!(known, words.len() - 1, "{}", q.text),
                Kind::Phrase => {
                    assert!(q.text.starts_with('"') && q.text.ends_with('"'));
                    assert_eq!(known, 2);
                }
                _ => assert_eq!(known, words.len()),
            }
        }
        // The CLI's share mixes the kinds.
        let cli: Vec<_> = a.iter().step_by(CLI_EVERY).collect();
        assert_eq!(cli.len(), 50);
        assert!(cli.iter().any(|q| q.kind == Kind::Typo));
        assert!(cli.iter().any(|q| q.kind == Kind::Phrase));
    }
}
