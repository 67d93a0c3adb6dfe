//! `report ...`: listings read from the store (offline; works while a
//! crawl writes).

use super::opts::StoreOpts;
use super::parse::{at_least_one, parse_duration};
use super::rows;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use web_crawler::actors::availability::{FetchHistory, HistoryQuery, availability, changes};
use web_crawler::actors::{PageQuery, TRAP_SAMPLES, now_ms};
use web_crawler::graph;

/// `report ...`: listings read from the store (offline; works while a crawl writes).
#[derive(Debug, Subcommand)]
pub(super) enum Report {
    /// Processed pages: status, type, size, links found, links in and out.
    ///
    /// `links`: the links the page holds, as found (each distinct http(s)
    /// URL, nofollow and off-scope ones included, and each href that is no
    /// http(s) URL, such as mailto:); `in`: processed pages linking to it
    /// or to one of its content duplicates (a copy such as /index.html of
    /// /: its note says how it adds up); `out`: the distinct URLs of its
    /// links the crawl took (in scope, past --allow/--deny, --max-depth and
    /// the trap defence, not nofollow).
    Pages {
        #[command(flatten)]
        list: ListOpts,
    },
    /// 4xx/5xx and failed pages with the pages linking to them.
    BrokenLinks {
        #[command(flatten)]
        list: ListOpts,
    },
    /// Where search-text found its text (the paper's search_results).
    #[command(name = "search-results")]
    TextMatchHits {
        /// Only the results for this text (all texts without it).
        text: Option<String>,
        #[command(flatten)]
        list: ListOpts,
    },
    /// Hosts: robots.txt status, crawl delay, sitemaps, pages processed.
    Hosts {
        #[command(flatten)]
        list: ListOpts,
    },
    /// The families the trap defence closed: host, pattern or directory,
    /// rule, when, pages judged before closing, URLs refused and a few of
    /// them. `crawl --trap-allow FAMILY` (or the console's `reopen_trap`)
    /// reopens one.
    Traps {
        #[command(flatten)]
        list: ListOpts,
    },
    /// Availability of watched URLs: checks, uptime, last failure, p50/p95
    /// response time, per URL (from fetch_history).
    Availability {
        #[command(flatten)]
        history: HistoryOpts,
    },
    /// Changes of watched URLs: down, up, another body (from fetch_history).
    Changes {
        #[command(flatten)]
        history: HistoryOpts,
    },
    /// The site graph: pages (status, depth, host, title, links in and out)
    /// and the links between them, for Graphviz, Gephi or a script.
    Graph {
        #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
        format: GraphFormat,
        /// Same as --format json.
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// Only the pages of this host (`host[:port]`, as `report hosts`
        /// lists it), their links, and the pages those links lead to.
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
        /// Write to this file instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        store: StoreOpts,
    },
}

impl Report {
    pub(super) async fn exec(self) -> Result<ExitCode> {
        self.print().await?;
        Ok(ExitCode::SUCCESS)
    }

    async fn print(self) -> Result<()> {
        match self {
            Report::Pages { list } => report_pages(&list).await,
            Report::BrokenLinks { list } => {
                let mut broken = list.store.open().await?.broken_links().await?;
                list.bound(&mut broken);
                let mut out = std::io::stdout().lock();
                if list.json {
                    writeln!(out, "{}", serde_json::to_string_pretty(&broken)?)?;
                    return Ok(());
                }
                for b in &broken {
                    let why = b
                        .http_returncode
                        .map(|c| format!("HTTP {c}"))
                        .or_else(|| b.error.clone())
                        .unwrap_or_default();
                    writeln!(out, "{}\t{}", b.url, why)?;
                    for r in &b.referral_list {
                        writeln!(out, "\tlinked from {r}")?;
                    }
                }
                Ok(())
            }
            Report::TextMatchHits { text, list } => {
                let store = list.store.open().await?;
                let mut results = store.text_match_hits(text.as_deref()).await?;
                list.bound(&mut results);
                let mut out = std::io::stdout().lock();
                if list.json {
                    writeln!(out, "{}", serde_json::to_string_pretty(&results)?)?;
                    return Ok(());
                }
                writeln!(out, "url\ttext\tpositions")?;
                for r in &results {
                    let positions: Vec<String> = r.positions.iter().map(u64::to_string).collect();
                    writeln!(out, "{}\t{:?}\t{}", r.url, r.text, positions.join(","))?;
                }
                Ok(())
            }
            Report::Hosts { list } => {
                let mut hosts = list.store.open().await?.host_summaries().await?;
                list.bound(&mut hosts);
                table(&hosts, list.json, rows::HOSTS_HEADER, rows::host_row)
            }
            Report::Traps { list } => report_traps(&list).await,
            Report::Availability { history } => {
                let mut rows = availability(&history.read().await?);
                history.list.bound(&mut rows);
                table(
                    &rows,
                    history.list.json,
                    rows::AVAILABILITY_HEADER,
                    rows::availability_row,
                )
            }
            Report::Changes { history } => {
                let mut rows = changes(&history.read().await?);
                history.list.bound(&mut rows);
                table(
                    &rows,
                    history.list.json,
                    rows::CHANGES_HEADER,
                    rows::change_row,
                )
            }
            Report::Graph {
                format,
                json,
                host,
                output,
                store,
            } => {
                let format = if json { GraphFormat::Json } else { format };
                let graph = graph::read_graph(store.open().await?.as_ref()).await?;
                if let Some(host) = &host
                    && !graph.has_host(host)
                {
                    bail!(
                        "no page of host {host} is in the crawl: --host takes `host[:port]` as \
                         `report hosts` lists it"
                    );
                }
                match &output {
                    Some(path) => {
                        let file = std::fs::File::create(path)
                            .with_context(|| format!("cannot create {}", path.display()))?;
                        let mut out = std::io::BufWriter::new(file);
                        graph.write(format.into(), host.as_deref(), &mut out)?;
                        out.flush()
                            .with_context(|| format!("cannot write {}", path.display()))?;
                    }
                    None => {
                        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                        graph.write(format.into(), host.as_deref(), &mut out)?;
                        out.flush()?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Which history a report reads.
#[derive(Debug, Args)]
pub(super) struct HistoryOpts {
    #[command(flatten)]
    list: ListOpts,
    /// Only this host's URLs (`host[:port]`).
    #[arg(long, value_name = "HOST")]
    host: Option<String>,
    /// Only fetches in this last while (`1h`, `7d` is `168h`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    since: Option<Duration>,
}

impl HistoryOpts {
    async fn read(&self) -> Result<Vec<FetchHistory>> {
        let query = HistoryQuery {
            host: self.host.clone(),
            since: self
                .since
                .map(|d| now_ms().saturating_sub(d.as_millis() as i64)),
        };
        Ok(self.list.store.open().await?.fetch_history(query).await?)
    }
}

/// The store and the shape of a listing.
#[derive(Debug, Args)]
pub(super) struct ListOpts {
    #[command(flatten)]
    store: StoreOpts,
    /// Print JSON (one array) instead of a table.
    #[arg(long)]
    json: bool,
    /// At most this many rows (1 at the least).
    #[arg(long, value_parser = at_least_one)]
    limit: Option<usize>,
}

impl ListOpts {
    /// Keep the first `--limit` rows.
    fn bound<T>(&self, rows: &mut Vec<T>) {
        if let Some(limit) = self.limit {
            rows.truncate(limit);
        }
    }
}

/// `report graph --format`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum GraphFormat {
    /// Graphviz DOT (`dot -Tsvg`); node ids are the URLs.
    Dot,
    /// GraphML with typed attributes (Gephi, yEd, networkx).
    Graphml,
    /// {"nodes":[{url,host,status,depth,title,error,fetched,in,out}],"edges":[{source,target}]}.
    Json,
    /// The edge list: Source,Target (Gephi's edges table).
    Csv,
    /// The node table: Id,Label,Host,Status,Depth,Fetched,In,Out,Error (Gephi's nodes table).
    CsvNodes,
}

impl From<GraphFormat> for graph::Format {
    fn from(f: GraphFormat) -> Self {
        match f {
            GraphFormat::Dot => graph::Format::Dot,
            GraphFormat::Graphml => graph::Format::Graphml,
            GraphFormat::Json => graph::Format::Json,
            GraphFormat::Csv => graph::Format::Csv,
            GraphFormat::CsvNodes => graph::Format::CsvNodes,
        }
    }
}

/// `report pages`: each page with its links in (processed pages linking to
/// it or to one of its content duplicates) and out (distinct URLs it links
/// to).
async fn report_pages(list: &ListOpts) -> Result<()> {
    let store = list.store.open().await?;
    let pages = store
        .processed(PageQuery {
            limit: list.limit,
            ..PageQuery::default()
        })
        .await?;
    let urls: Vec<&str> = pages.iter().map(|p| p.record.url.as_str()).collect();
    let counts = graph::link_counts(store.as_ref(), &urls).await?;
    let count = |url: &str| counts.get(url).cloned().unwrap_or_default();
    let mut out = std::io::stdout().lock();
    if list.json {
        let mut rows = Vec::with_capacity(pages.len());
        for p in &pages {
            let mut row = serde_json::to_value(p)?;
            let c = count(&p.record.url);
            row["in"] = c.links_in().into();
            row["in_direct"] = c.in_direct.into();
            row["in_via_duplicates"] = c.in_via_duplicates.into();
            row["duplicates"] = c.duplicates.into();
            row["out"] = c.out.into();
            rows.push(row);
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
    writeln!(out, "status\ttype\tsize\tlinks\tin\tout\turl\tnote")?;
    for p in &pages {
        let r = &p.record;
        let c = count(&r.url);
        let note = r
            .error
            .clone()
            .or_else(|| r.redirect_to.as_ref().map(|t| format!("→ {t}")))
            .or_else(|| p.duplicate_of.as_ref().map(|d| format!("duplicate of {d}")))
            .or_else(|| links_in_note(&c))
            .unwrap_or_default();
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            r.http_returncode.map_or("-".into(), |c| c.to_string()),
            r.content_type.as_deref().unwrap_or("-"),
            r.content_length.map_or("-".into(), |c| c.to_string()),
            r.links_count,
            c.links_in(),
            c.out,
            r.url,
            note
        )?;
    }
    Ok(())
}

/// How a page's `in` adds up when its content duplicates have links of
/// their own: `in 1 + 526 via http://a/index.html`.
fn links_in_note(c: &graph::LinkCounts) -> Option<String> {
    const NAMED: usize = 3;
    if c.in_via_duplicates == 0 {
        return None;
    }
    let mut via = c.duplicates[..c.duplicates.len().min(NAMED)].join(", ");
    if c.duplicates.len() > NAMED {
        via.push_str(&format!(" and {} more", c.duplicates.len() - NAMED));
    }
    Some(format!(
        "in {} + {} via {via}",
        c.in_direct, c.in_via_duplicates
    ))
}

/// `report traps`: each closed family, why and when, and what it refused;
/// then how many URLs are left out in all, by rule.
async fn report_traps(list: &ListOpts) -> Result<()> {
    let store = list.store.open().await?;
    let mut families = store.trap_families(TRAP_SAMPLES).await?;
    list.bound(&mut families);
    if list.json {
        return table(&families, true, rows::TRAPS_HEADER, rows::trap_row);
    }
    table(&families, false, rows::TRAPS_HEADER, rows::trap_row)?;
    let counts = store.counts().await?;
    let mut out = std::io::stdout().lock();
    match rows::trapped_by_rule(&counts) {
        Some(line) => writeln!(out, "left out by the trap defence: {line}")?,
        None => writeln!(out, "no URL is left out by the trap defence")?,
    }
    Ok(())
}

/// Rows to stdout: as a JSON array with `--json`, else the header and one
/// tab-separated line per row (the console renders the same rows).
fn table<T: serde::Serialize>(
    items: &[T],
    json: bool,
    header: &str,
    row: impl Fn(&T) -> String,
) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(items)?)?;
        return Ok(());
    }
    writeln!(out, "{header}")?;
    for item in items {
        writeln!(out, "{}", row(item))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// `report` alone, as the command line gives it its subcommand.
    #[derive(Debug, Parser)]
    struct ReportCommand {
        #[command(subcommand)]
        what: Report,
    }

    #[test]
    fn reports_take_their_own_arguments() {
        let parse = |args: &[&str]| {
            let mut all = vec!["report"];
            all.extend(args);
            ReportCommand::try_parse_from(all).map(|cmd| cmd.what)
        };
        match parse(&["pages", "--db", "c.db", "--json", "--limit", "3"]).unwrap() {
            Report::Pages { list } => {
                assert!(list.json);
                assert_eq!(list.limit, Some(3));
                assert_eq!(list.store.db, PathBuf::from("c.db"));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["search-results", "rye bread", "--json"]).unwrap() {
            Report::TextMatchHits { text, list } => {
                assert_eq!(text.as_deref(), Some("rye bread"));
                assert!(list.json);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["search-results"]).unwrap(),
            Report::TextMatchHits { text: None, .. }
        ));
        assert!(matches!(parse(&["hosts"]).unwrap(), Report::Hosts { .. }));
        match parse(&["traps", "--json", "--limit", "2"]).unwrap() {
            Report::Traps { list } => assert_eq!((list.json, list.limit), (true, Some(2))),
            other => panic!("{other:?}"),
        }
        match parse(&[
            "graph", "--format", "graphml", "--host", "a:8080", "-o", "g.xml",
        ])
        .unwrap()
        {
            Report::Graph {
                format,
                host,
                output,
                json,
                ..
            } => {
                assert_eq!(graph::Format::from(format), graph::Format::Graphml);
                assert_eq!(host.as_deref(), Some("a:8080"));
                assert_eq!(output, Some(PathBuf::from("g.xml")));
                assert!(!json);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["graph"]).unwrap(),
            Report::Graph {
                format: GraphFormat::Dot,
                ..
            }
        ));
        assert!(parse(&["graph", "--format", "gexf"]).is_err());
        assert!(parse(&["graph", "--format", "dot", "--json"]).is_err());
        assert!(parse(&["nothing"]).is_err());
    }

    #[test]
    fn graph_formats_are_the_library_format_names() {
        for arg in GraphFormat::value_variants() {
            let name = arg.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(name.parse::<graph::Format>(), Ok(graph::Format::from(*arg)));
        }
        assert_eq!(
            GraphFormat::value_variants().len(),
            graph::Format::ALL.len()
        );
    }

    #[test]
    fn a_pages_note_says_how_its_in_adds_up() {
        let mut c = graph::LinkCounts {
            in_direct: 1,
            in_via_duplicates: 526,
            duplicates: vec!["http://a/index.html".into()],
            out: 3,
        };
        assert_eq!(
            links_in_note(&c).as_deref(),
            Some("in 1 + 526 via http://a/index.html")
        );
        c.duplicates = (1..=5).map(|i| format!("http://a/{i}")).collect();
        assert_eq!(
            links_in_note(&c).as_deref(),
            Some("in 1 + 526 via http://a/1, http://a/2, http://a/3 and 2 more")
        );
        // Copies nobody links to change nothing.
        c.in_via_duplicates = 0;
        assert_eq!(links_in_note(&c), None);
    }
}
