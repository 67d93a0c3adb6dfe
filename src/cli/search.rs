//! `search`: the pages a crawl indexed, read from the index directory
//! (offline), or asked of a running node's master (`--connect`).

use super::parse::at_least_one;
use super::remote::connect;
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use web_crawler::search::{
    Ranking, SearchAnswer, SearchError, SearchHit, SearchIndex, SearchOptions, index_dir_for,
};
use web_crawler::store::SqliteStore;

/// `search`.
#[derive(Debug, Args)]
pub(super) struct SearchArgs {
    /// The query: words, and "quoted phrases" that must occur.
    query: String,
    /// The crawl's store file; its index is the directory `PATH.index` beside it.
    #[arg(long, value_name = "PATH", default_value = "crawler.db")]
    db: PathBuf,
    /// The index directory itself (instead of --db).
    #[arg(long, value_name = "DIR", conflicts_with = "db")]
    index: Option<PathBuf>,
    /// At most this many results (1 at the least).
    #[arg(long, default_value_t = 10, value_parser = at_least_one)]
    limit: usize,
    /// Print one JSON document: {"results":[{url,title,snippet,score}...],"did_you_mean":...}.
    #[arg(long)]
    json: bool,
    /// The ranking: `full`, `words` (full without the pages' vectors), or
    /// the plain BM25 baseline.
    #[arg(long, value_enum, default_value_t = RankingArg::Full)]
    ranking: RankingArg,
    /// Ask the running node at HOST:PORT (its master's index) instead.
    #[arg(long, value_name = "HOST:PORT", requires = "cookie_file", conflicts_with_all = ["index", "ranking"])]
    connect: Option<String>,
    /// The cluster's cookie file (with --connect).
    #[arg(long)]
    cookie_file: Option<PathBuf>,
    /// Seconds to wait for the node (with --connect).
    #[arg(long, default_value_t = 10)]
    wait: u64,
}

impl SearchArgs {
    pub(super) async fn exec(self) -> Result<ExitCode> {
        let Self {
            query,
            db,
            index,
            limit,
            json,
            ranking,
            connect: remote,
            cookie_file,
            wait,
        } = self;
        if let (Some(addr), Some(cookie_file)) = (remote, cookie_file) {
            let conn = connect(&addr, &cookie_file, Duration::from_secs(wait)).await?;
            let answer = conn.search(&query, limit).await;
            conn.close();
            print_answer(&answer?, &query, json)?;
            return Ok(ExitCode::SUCCESS);
        }
        let dir = index.clone().unwrap_or_else(|| index_dir_for(&db));
        let index = match SearchIndex::open_read_only(&dir) {
            Ok(index) => index.for_one_query(),
            Err(SearchError::NoIndex { .. }) => {
                let store = index.is_none().then(|| (db.as_path(), StorePath::of(&db)));
                bail!("{}", no_index(&dir, store));
            }
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context(format!("cannot open the search index at {}", dir.display())));
            }
        };
        let opts = SearchOptions::default()
            .limit(limit)
            .ranking(ranking.into());
        let answer = index
            .search(&query, &opts)
            .with_context(|| format!("cannot search for {query:?}"))?;
        print_answer(&answer, &query, json)?;
        Ok(ExitCode::SUCCESS)
    }
}

/// `--ranking`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum RankingArg {
    /// Typo correction, anchor text, proximity, link prior, hub penalty,
    /// and the pages' vectors when the crawl made them (`--semantic`).
    Full,
    /// `full` by the words alone, without the pages' vectors.
    Words,
    /// tantivy's BM25 over title and body (the baseline).
    Bm25,
}

impl From<RankingArg> for Ranking {
    fn from(arg: RankingArg) -> Self {
        match arg {
            RankingArg::Full => Ranking::Full,
            RankingArg::Words => Ranking::Words,
            RankingArg::Bm25 => Ranking::PlainBm25,
        }
    }
}

/// What `--db` names, when no index is beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StorePath {
    Missing,
    Directory,
    /// A file, but no store a crawl made (notes, another database).
    NotAStore,
    Store,
}

impl StorePath {
    fn of(db: &Path) -> Self {
        if db.is_dir() {
            Self::Directory
        } else if !db.exists() {
            Self::Missing
        } else if SqliteStore::is_store(db) {
            Self::Store
        } else {
            Self::NotAStore
        }
    }
}

/// Why `search` has no index at `dir`, and the way on. `store` is the
/// crawl's store file the index was looked for beside (with what is
/// there); `None` when `--index` named the directory.
fn no_index(dir: &Path, store: Option<(&Path, StorePath)>) -> String {
    match store {
        Some((db, StorePath::Directory)) => format!(
            "{db} is a directory: --db takes the crawl's store file (such as {file})",
            db = db.display(),
            file = db.join("crawler.db").display()
        ),
        Some((db, StorePath::NotAStore)) => format!(
            "{db} is not a web crawler store: --db takes the file a crawl made \
             (`web_crawler crawl URL --db FILE`)",
            db = db.display()
        ),
        Some((db, StorePath::Store)) => format!(
            "the crawl in {db} has no search index (it ran with --no-index, or {dir} was \
             removed): `web_crawler index rebuild --db {db}` makes one from what it fetched",
            db = db.display(),
            dir = dir.display()
        ),
        Some((db, StorePath::Missing)) => format!(
            "no crawl at {db}, so no search index: crawl first (`web_crawler crawl URL --db \
             {db}`), or give the store with --db",
            db = db.display()
        ),
        None => format!(
            "no search index at {dir}: `web_crawler index rebuild --index {dir}` (with the \
             crawl's --db or --mongodb) makes one from what the crawl fetched",
            dir = dir.display()
        ),
    }
}

/// Print a search answer: numbered results, or one JSON document.
fn print_answer(answer: &SearchAnswer, query: &str, json: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(answer)?)?;
        return Ok(());
    }
    let bold = std::io::stdout().is_terminal();
    if let Some(corrected) = &answer.did_you_mean {
        writeln!(out, "Did you mean: {corrected}  (showing its results)")?;
    }
    if answer.results.is_empty() {
        let searched = answer.did_you_mean.as_deref().unwrap_or(query);
        writeln!(out, "No results for {searched:?}.")?;
    }
    if let Some(line) = answer.nodes.as_ref().and_then(|n| n.missing_line()) {
        writeln!(out, "{line}")?;
    }
    for (i, hit) in answer.results.iter().enumerate() {
        let title = if hit.title.is_empty() {
            "(untitled)"
        } else {
            &hit.title
        };
        writeln!(out, "{:>2}. {title}", i + 1)?;
        writeln!(out, "    {}  (score {:.3})", hit.url, hit.score)?;
        if let Some(line) = section_line(hit) {
            writeln!(out, "    {line}")?;
        }
        if !hit.snippet.is_empty() {
            writeln!(out, "    {}", marked(&hit.snippet, &hit.highlights, bold))?;
        }
    }
    Ok(())
}

/// The section a result's snippet is from, when it is not the page's top:
/// `§ Heading › Subheading  URL#anchor`.
fn section_line(hit: &SearchHit) -> Option<String> {
    let link = hit.section_url.as_deref().filter(|link| *link != hit.url)?;
    Some(if hit.heading_path.is_empty() {
        format!("§ {link}")
    } else {
        format!("§ {}  {link}", hit.heading_path.join(" › "))
    })
}

/// The snippet with its matched terms in bold (on a terminal).
fn marked(snippet: &str, highlights: &[std::ops::Range<usize>], bold: bool) -> String {
    if !bold {
        return snippet.to_string();
    }
    let mut out = String::with_capacity(snippet.len() + 8 * highlights.len());
    let mut at = 0;
    for r in highlights {
        if r.start < at || r.end > snippet.len() {
            continue;
        }
        out.push_str(&snippet[at..r.start]);
        out.push_str("\x1b[1m");
        out.push_str(&snippet[r.clone()]);
        out.push_str("\x1b[0m");
        at = r.end;
    }
    out.push_str(&snippet[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// `search` alone, as the command line gives it its arguments.
    #[derive(Debug, Parser)]
    struct Search {
        #[command(flatten)]
        args: SearchArgs,
    }

    #[test]
    fn search_without_an_index_says_why_and_the_way_on() {
        let dir = Path::new("c.db.index");
        let no_index_crawl = no_index(dir, Some((Path::new("c.db"), StorePath::Store)));
        assert_eq!(
            no_index_crawl,
            "the crawl in c.db has no search index (it ran with --no-index, or c.db.index was \
             removed): `web_crawler index rebuild --db c.db` makes one from what it fetched"
        );
        assert!(
            no_index(dir, Some((Path::new("c.db"), StorePath::Missing)))
                .starts_with("no crawl at c.db")
        );
        assert_eq!(
            no_index(dir, Some((Path::new("notes.txt"), StorePath::NotAStore))),
            "notes.txt is not a web crawler store: --db takes the file a crawl made \
             (`web_crawler crawl URL --db FILE`)"
        );
        assert_eq!(
            no_index(dir, Some((Path::new("crawls"), StorePath::Directory))),
            "crawls is a directory: --db takes the crawl's store file (such as crawls/crawler.db)"
        );
        let named = no_index(Path::new("idx"), None);
        assert!(
            named.starts_with("no search index at idx: `web_crawler index rebuild --index idx`"),
            "{named}"
        );
    }

    #[test]
    fn search_takes_db_or_index_but_not_both() {
        let parse = |args: &[&str]| Search::try_parse_from(args).map(|s| s.args);
        let args = parse(&["search", "rye bread", "--db", "c.db"]).unwrap();
        assert_eq!(args.query, "rye bread");
        assert_eq!(index_dir_for(&args.db), PathBuf::from("c.db.index"));
        assert!(args.index.is_none());
        assert!(parse(&["search", "q", "--db", "c.db", "--index", "i"]).is_err());
        let bm25 = parse(&["search", "q", "--ranking", "bm25", "--limit", "3"]).unwrap();
        assert_eq!(Ranking::from(bm25.ranking), Ranking::PlainBm25);
        assert_eq!(bm25.limit, 3);
    }

    #[test]
    fn marked_bolds_the_highlights_on_a_terminal_only() {
        let bread = [std::ops::Range { start: 4, end: 9 }];
        assert_eq!(marked("rye bread", &bread, false), "rye bread");
        assert_eq!(marked("rye bread", &bread, true), "rye \x1b[1mbread\x1b[0m");
    }

    #[test]
    fn a_section_below_the_pages_top_gets_a_line_of_its_own() {
        let hit = |section_url: Option<&str>, path: &[&str]| SearchHit {
            url: "http://h/f.html".into(),
            title: "Functions".into(),
            snippet: String::new(),
            score: 1.0,
            highlights: Vec::new(),
            section_url: section_url.map(str::to_string),
            heading_path: path.iter().map(|h| h.to_string()).collect(),
        };
        assert_eq!(
            section_line(&hit(Some("http://h/f.html#c"), &["Functions", "COALESCE"])).as_deref(),
            Some("§ Functions › COALESCE  http://h/f.html#c")
        );
        assert_eq!(
            section_line(&hit(Some("http://h/f.html#c"), &[])).as_deref(),
            Some("§ http://h/f.html#c")
        );
        assert_eq!(section_line(&hit(Some("http://h/f.html"), &[])), None);
        assert_eq!(section_line(&hit(None, &[])), None);
    }
}
