//! The site graph: what a crawl learned about the structure of the web it
//! visited, for Graphviz, Gephi and scripts (`web_crawler report graph`).
//!
//! Nodes are the processed pages (URL, host, HTTP status, depth, title,
//! error) and the pages their links lead to that were never fetched (still
//! pending, out of budget); edges are each processed page's stored
//! `out_links` — the links it holds that the link policy admitted (scope,
//! filters, robots.txt do not remove a link from this list; links refused
//! by scope or filters were never stored). A page linking twice to one URL
//! is one edge. A node's `in` is the number of processed pages linking to
//! it, its `out` the number of distinct URLs it links to, both over the
//! whole crawl.
//!
//! [`Graph`] is plain data: [`Graph::add_page`] takes pages one at a time
//! and [`Graph::write`] streams a format to any writer, so memory stays
//! linear in pages and links (URLs are kept once; an edge is two integers)
//! and nothing quadratic is built. [`read_graph`] fills one from a store in
//! batches of [`BATCH`] pages.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::{self, Write};
use std::sync::Arc;
use web_crawler_actors::{PageQuery, PageRecord, Queries, StoreError};

/// Pages read per store query by [`read_graph`] and [`link_counts`].
pub const BATCH: usize = 1000;

/// An output format of [`Graph::write`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Graphviz DOT: a `digraph` whose node ids are the URLs.
    Dot,
    /// GraphML (XML) with typed attributes, as Gephi, yEd and networkx read it.
    Graphml,
    /// One JSON document: `{"nodes":[...],"edges":[{"source","target"}]}`.
    Json,
    /// The edge list, `Source,Target` (URLs): Gephi's edges table.
    Csv,
    /// The node table, `Id,Label,Host,...` (Id is the URL): Gephi's nodes table.
    CsvNodes,
}

impl Format {
    pub const ALL: [Format; 5] = [
        Format::Dot,
        Format::Graphml,
        Format::Json,
        Format::Csv,
        Format::CsvNodes,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Dot => "dot",
            Format::Graphml => "graphml",
            Format::Json => "json",
            Format::Csv => "csv",
            Format::CsvNodes => "csv-nodes",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| {
                format!("{s:?} is not a graph format (dot, graphml, json, csv, csv-nodes)")
            })
    }
}

/// What a processed page tells about its node.
#[derive(Debug)]
struct Facts {
    host: Arc<str>,
    status: Option<u16>,
    depth: u32,
    title: Option<Box<str>>,
    error: Option<Box<str>>,
}

/// One node, as [`Graph::node`] shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Node<'g> {
    pub url: &'g str,
    /// `host[:port]`, as the store keys hosts.
    pub host: String,
    /// HTTP status; `None` when no response was had or the page was not fetched.
    pub status: Option<u16>,
    /// Links from a seed; `None` for a page not fetched.
    pub depth: Option<u32>,
    pub title: Option<&'g str>,
    pub error: Option<&'g str>,
    /// Whether the page is processed (else only linked to).
    pub fetched: bool,
    /// Processed pages linking to it.
    #[serde(rename = "in")]
    pub in_links: u32,
    /// Distinct URLs it links to.
    #[serde(rename = "out")]
    pub out_links: u32,
}

/// The site graph of a crawl (see the module docs).
#[derive(Debug, Default)]
pub struct Graph {
    urls: Vec<Arc<str>>,
    ids: HashMap<Arc<str>, u32>,
    hosts: HashSet<Arc<str>>,
    /// By node id; `None`: a URL only linked to.
    facts: Vec<Option<Facts>>,
    in_links: Vec<u32>,
    out_links: Vec<u32>,
    edges: Vec<(u32, u32)>,
}

/// The distinct URLs a page links to, in order: what counts as its
/// out-links here and in [`link_counts`].
pub fn distinct_targets(page: &PageRecord) -> Vec<&str> {
    let mut targets: Vec<&str> = page
        .out_links
        .iter()
        .map(String::as_str)
        .filter(|u| !u.is_empty())
        .collect();
    targets.sort_unstable();
    targets.dedup();
    targets
}

impl Graph {
    pub fn new() -> Self {
        Self::default()
    }

    fn intern(&mut self, url: &str) -> u32 {
        if let Some(&id) = self.ids.get(url) {
            return id;
        }
        let id = u32::try_from(self.urls.len()).expect("fewer than 2^32 URLs");
        let url: Arc<str> = Arc::from(url);
        self.urls.push(url.clone());
        self.ids.insert(url, id);
        self.facts.push(None);
        self.in_links.push(0);
        self.out_links.push(0);
        id
    }

    fn host(&mut self, host: &str) -> Arc<str> {
        if let Some(h) = self.hosts.get(host) {
            return h.clone();
        }
        let h: Arc<str> = Arc::from(host);
        self.hosts.insert(h.clone());
        h
    }

    /// Add a processed page and its out-links. A page given twice counts once.
    pub fn add_page(&mut self, page: &PageRecord) {
        let id = self.intern(&page.url);
        if self.facts[id as usize].is_some() {
            return;
        }
        let host = self.host(&page.host);
        self.facts[id as usize] = Some(Facts {
            host,
            status: page.http_returncode,
            depth: page.depth,
            title: page
                .title
                .as_deref()
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(Box::from),
            error: page.error.as_deref().map(Box::from),
        });
        let targets = distinct_targets(page);
        self.out_links[id as usize] = targets.len() as u32;
        for target in targets {
            let to = self.intern(target);
            self.in_links[to as usize] += 1;
            self.edges.push((id, to));
        }
    }

    /// Nodes (processed pages and the URLs they link to).
    pub fn node_count(&self) -> usize {
        self.urls.len()
    }

    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }

    /// The node of `url`, if the graph has it.
    pub fn node(&self, url: &str) -> Option<Node<'_>> {
        self.ids.get(url).map(|&id| self.node_at(id))
    }

    fn node_at(&self, id: u32) -> Node<'_> {
        let i = id as usize;
        let url = &*self.urls[i];
        let facts = self.facts[i].as_ref();
        Node {
            url,
            host: self.host_of(id),
            status: facts.and_then(|f| f.status),
            depth: facts.map(|f| f.depth),
            title: facts.and_then(|f| f.title.as_deref()),
            error: facts.and_then(|f| f.error.as_deref()),
            fetched: facts.is_some(),
            in_links: self.in_links[i],
            out_links: self.out_links[i],
        }
    }

    /// Whether any node is on `host` (`host[:port]`, as [`Node::host`]).
    pub fn has_host(&self, host: &str) -> bool {
        self.hosts.contains(host) || (0..self.urls.len() as u32).any(|id| self.host_of(id) == host)
    }

    /// The stored host of a processed page; the URL's `host[:port]` otherwise.
    fn host_of(&self, id: u32) -> String {
        match &self.facts[id as usize] {
            Some(f) => f.host.to_string(),
            None => url::Url::parse(&self.urls[id as usize])
                .map(|u| crate::policy::host_key(&u))
                .unwrap_or_default(),
        }
    }

    /// The nodes and edges to write, both in URL order. With `host`: the
    /// pages of that host, the links they hold, and the pages those links
    /// lead to on other hosts; links into the host from other hosts are left out.
    fn select(&self, host: Option<&str>) -> Selection {
        let n = self.urls.len();
        let mut keep: Vec<bool> = match host {
            None => vec![true; n],
            Some(h) => (0..n as u32).map(|id| self.host_of(id) == h).collect(),
        };
        let edges: Vec<(u32, u32)> = match host {
            None => self.edges.clone(),
            Some(_) => {
                let from_host: Vec<(u32, u32)> = self
                    .edges
                    .iter()
                    .copied()
                    .filter(|&(from, _)| keep[from as usize])
                    .collect();
                for &(_, to) in &from_host {
                    keep[to as usize] = true;
                }
                from_host
            }
        };
        let mut order: Vec<u32> = (0..n as u32).filter(|&id| keep[id as usize]).collect();
        order.sort_unstable_by(|&a, &b| self.urls[a as usize].cmp(&self.urls[b as usize]));
        let mut position = vec![u32::MAX; n];
        for (pos, &id) in order.iter().enumerate() {
            position[id as usize] = pos as u32;
        }
        let mut edges: Vec<(u32, u32)> = edges
            .into_iter()
            .map(|(from, to)| (position[from as usize], position[to as usize]))
            .collect();
        edges.sort_unstable();
        Selection { order, edges }
    }

    /// Write the graph as `format`, nodes and edges in URL order; the output
    /// is written as it is made. With `host`: that host's pages, the links
    /// they hold and the pages those lead to on any host (links into it from
    /// other hosts are left out); `in` and `out` stay the whole crawl's.
    pub fn write(&self, format: Format, host: Option<&str>, out: &mut dyn Write) -> io::Result<()> {
        let sel = self.select(host);
        match format {
            Format::Dot => self.write_dot(&sel, out),
            Format::Graphml => self.write_graphml(&sel, out),
            Format::Json => self.write_json(&sel, out),
            Format::Csv => self.write_csv_edges(&sel, out),
            Format::CsvNodes => self.write_csv_nodes(&sel, out),
        }
    }

    fn url_at(&self, sel: &Selection, pos: u32) -> &str {
        &self.urls[sel.order[pos as usize] as usize]
    }

    fn write_dot(&self, sel: &Selection, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "digraph crawl {{")?;
        writeln!(out, "  node [shape=box, fontsize=10];")?;
        for &id in &sel.order {
            let node = self.node_at(id);
            write!(
                out,
                "  {} [label={}, URL={}, host={}",
                dot_quoted(node.url),
                dot_quoted(node.title.unwrap_or(node.url)),
                dot_quoted(node.url),
                dot_quoted(&node.host)
            )?;
            if let Some(status) = node.status {
                write!(out, ", status=\"{status}\"")?;
            }
            if let Some(depth) = node.depth {
                write!(out, ", depth=\"{depth}\"")?;
            }
            if let Some(error) = node.error {
                write!(out, ", error={}", dot_quoted(error))?;
            }
            write!(
                out,
                ", fetched=\"{}\", in=\"{}\", out=\"{}\"",
                node.fetched, node.in_links, node.out_links
            )?;
            if is_broken(&node) {
                write!(out, ", color=\"red\"")?;
            } else if !node.fetched {
                write!(out, ", style=\"dashed\"")?;
            }
            writeln!(out, "];")?;
        }
        for &(from, to) in &sel.edges {
            writeln!(
                out,
                "  {} -> {};",
                dot_quoted(self.url_at(sel, from)),
                dot_quoted(self.url_at(sel, to))
            )?;
        }
        writeln!(out, "}}")
    }

    fn write_graphml(&self, sel: &Selection, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
        writeln!(
            out,
            r#"<graphml xmlns="http://graphml.graphdrawing.org/xmlns" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">"#
        )?;
        for (key, ty) in GRAPHML_KEYS {
            writeln!(
                out,
                r#"  <key id="{key}" for="node" attr.name="{key}" attr.type="{ty}"/>"#
            )?;
        }
        writeln!(out, r#"  <graph id="crawl" edgedefault="directed">"#)?;
        for (pos, &id) in sel.order.iter().enumerate() {
            let node = self.node_at(id);
            writeln!(out, r#"    <node id="n{pos}">"#)?;
            let mut data = |key: &str, value: &str| {
                writeln!(out, r#"      <data key="{key}">{}</data>"#, xml_text(value))
            };
            data("label", node.title.unwrap_or(node.url))?;
            data("url", node.url)?;
            data("host", &node.host)?;
            if let Some(status) = node.status {
                data("status", &status.to_string())?;
            }
            if let Some(depth) = node.depth {
                data("depth", &depth.to_string())?;
            }
            if let Some(title) = node.title {
                data("title", title)?;
            }
            if let Some(error) = node.error {
                data("error", error)?;
            }
            data("fetched", if node.fetched { "true" } else { "false" })?;
            data("in", &node.in_links.to_string())?;
            data("out", &node.out_links.to_string())?;
            writeln!(out, "    </node>")?;
        }
        for &(from, to) in &sel.edges {
            writeln!(out, r#"    <edge source="n{from}" target="n{to}"/>"#)?;
        }
        writeln!(out, "  </graph>")?;
        writeln!(out, "</graphml>")
    }

    fn write_json(&self, sel: &Selection, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(b"{\"nodes\":[")?;
        for (i, &id) in sel.order.iter().enumerate() {
            out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
            serde_json::to_writer(&mut *out, &self.node_at(id))?;
        }
        out.write_all(b"\n],\"edges\":[")?;
        for (i, &(from, to)) in sel.edges.iter().enumerate() {
            out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
            serde_json::to_writer(
                &mut *out,
                &Edge {
                    source: self.url_at(sel, from),
                    target: self.url_at(sel, to),
                },
            )?;
        }
        out.write_all(b"\n]}\n")
    }

    fn write_csv_edges(&self, sel: &Selection, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "Source,Target")?;
        for &(from, to) in &sel.edges {
            writeln!(
                out,
                "{},{}",
                csv_field(self.url_at(sel, from)),
                csv_field(self.url_at(sel, to))
            )?;
        }
        Ok(())
    }

    fn write_csv_nodes(&self, sel: &Selection, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "Id,Label,Host,Status,Depth,Fetched,In,Out,Error")?;
        for &id in &sel.order {
            let node = self.node_at(id);
            writeln!(
                out,
                "{},{},{},{},{},{},{},{},{}",
                csv_field(node.url),
                csv_field(node.title.unwrap_or(node.url)),
                csv_field(&node.host),
                node.status.map(|s| s.to_string()).unwrap_or_default(),
                node.depth.map(|d| d.to_string()).unwrap_or_default(),
                node.fetched,
                node.in_links,
                node.out_links,
                csv_field(node.error.unwrap_or(""))
            )?;
        }
        Ok(())
    }
}

/// Which nodes to write (ids, in URL order) and the edges between them
/// (positions in `order`, sorted).
#[derive(Debug)]
struct Selection {
    order: Vec<u32>,
    edges: Vec<(u32, u32)>,
}

#[derive(serde::Serialize)]
struct Edge<'a> {
    source: &'a str,
    target: &'a str,
}

/// GraphML's node attributes and their types.
const GRAPHML_KEYS: [(&str, &str); 10] = [
    ("label", "string"),
    ("url", "string"),
    ("host", "string"),
    ("status", "int"),
    ("depth", "int"),
    ("title", "string"),
    ("error", "string"),
    ("fetched", "boolean"),
    ("in", "int"),
    ("out", "int"),
];

/// A 4xx/5xx answer or a failure to fetch (robots.txt refusals are not broken).
fn is_broken(node: &Node<'_>) -> bool {
    node.status.is_some_and(|s| s >= 400)
        || (node.fetched
            && node.status.is_none()
            && node
                .error
                .is_some_and(|e| e != web_crawler_actors::ROBOTS_BLOCKED))
}

/// A DOT quoted string: `"` and `\` escaped (so a label's `\n`, `\N`, ...
/// stay literal text, and no `\` can swallow the closing quote), line
/// breaks as `\n`, other control characters as spaces. The DOT language
/// keeps `\\` as two characters outside labels, so a URL with a backslash
/// (only a query can hold one) reads back with it doubled, the same in
/// every node and edge.
fn dot_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// XML character data and attribute text: the five entities escaped, and
/// the characters XML 1.0 cannot hold (control characters but tab and line
/// breaks) as spaces.
fn xml_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// An RFC 4180 field: quoted, with quotes doubled, when it holds a comma,
/// a quote or a line break.
fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// The whole crawl's graph, read from the store [`BATCH`] pages at a time.
pub async fn read_graph(queries: &dyn Queries) -> Result<Graph, StoreError> {
    let mut graph = Graph::new();
    each_page(queries, |page| graph.add_page(page)).await?;
    Ok(graph)
}

/// How many links lead to a page and leave it, as `report pages` counts
/// them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkCounts {
    /// Processed pages linking to the page itself (its `in` in [`Graph`]).
    pub in_direct: u32,
    /// Processed pages linking to one of its content duplicates and not to
    /// it: a link to a copy (`/index.html` for `/`) leads to the page kept.
    pub in_via_duplicates: u32,
    /// Its content duplicates: the pages whose `duplicate_of` it is, by URL.
    pub duplicates: Vec<String>,
    /// Distinct URLs it links to.
    pub out: u32,
}

impl LinkCounts {
    /// Processed pages linking to the page or to any of its duplicates,
    /// each counted once.
    pub fn links_in(&self) -> u32 {
        self.in_direct + self.in_via_duplicates
    }
}

/// The [`LinkCounts`] of some pages, taken one linking page at a time.
#[derive(Debug)]
struct LinkCounter {
    counts: HashMap<String, LinkCounts>,
    /// The page each duplicate of a counted page copies.
    original_of: HashMap<String, String>,
}

impl LinkCounter {
    /// Counts for `urls`; `duplicates` are `(duplicate, original)` pairs,
    /// of which those of the pages counted are kept.
    fn new(urls: &[&str], duplicates: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut counts: HashMap<String, LinkCounts> = urls
            .iter()
            .map(|u| (u.to_string(), LinkCounts::default()))
            .collect();
        let mut original_of = HashMap::new();
        for (duplicate, original) in duplicates {
            if let Some(c) = counts.get_mut(&original) {
                c.duplicates.push(duplicate.clone());
                original_of.insert(duplicate, original);
            }
        }
        for c in counts.values_mut() {
            c.duplicates.sort_unstable();
        }
        Self {
            counts,
            original_of,
        }
    }

    fn add_page(&mut self, page: &PageRecord) {
        let targets = distinct_targets(page);
        if let Some(c) = self.counts.get_mut(page.url.as_str()) {
            c.out = targets.len() as u32;
        }
        let mut via: Vec<&str> = Vec::new();
        for &target in &targets {
            if let Some(c) = self.counts.get_mut(target) {
                c.in_direct += 1;
            }
            if let Some(original) = self.original_of.get(target) {
                via.push(original);
            }
        }
        via.sort_unstable();
        via.dedup();
        for original in via {
            // `targets` is sorted: a page linking to both counts once.
            if targets.binary_search(&original).is_err()
                && let Some(c) = self.counts.get_mut(original)
            {
                c.in_via_duplicates += 1;
            }
        }
    }
}

/// The [`LinkCounts`] of these URLs only, by one pass over the store that
/// keeps nothing but the counts asked for (and the URLs of their content
/// duplicates, read first).
pub async fn link_counts(
    queries: &dyn Queries,
    urls: &[&str],
) -> Result<HashMap<String, LinkCounts>, StoreError> {
    if urls.is_empty() {
        return Ok(HashMap::new());
    }
    let duplicates = queries
        .processed(PageQuery {
            only_duplicates: true,
            ..PageQuery::default()
        })
        .await?;
    let pairs = (duplicates.into_iter()).filter_map(|p| Some((p.record.url, p.duplicate_of?)));
    let mut counter = LinkCounter::new(urls, pairs);
    each_page(queries, |page| counter.add_page(page)).await?;
    Ok(counter.counts)
}

/// Every processed page, in URL order, in batches.
async fn each_page(
    queries: &dyn Queries,
    mut visit: impl FnMut(&PageRecord),
) -> Result<(), StoreError> {
    let mut after: Option<String> = None;
    // Each batch starts strictly after the last URL of the one before, so
    // the pass ends; a store that does not keep that order is refused.
    loop {
        let batch = queries.processed_after(after.as_deref(), BATCH).await?;
        for page in &batch {
            if after.as_deref().is_some_and(|a| page.url.as_str() <= a) {
                return Err(StoreError::Corrupt(format!(
                    "processed pages out of URL order at {}",
                    page.url
                )));
            }
            visit(page);
            after = Some(page.url.clone());
        }
        if batch.len() < BATCH {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(url: &str, status: Option<u16>, links: &[&str]) -> PageRecord {
        PageRecord {
            url: url.to_string(),
            host: url::Url::parse(url)
                .map(|u| crate::policy::host_key(&u))
                .unwrap(),
            depth: 1,
            http_returncode: status,
            title: Some(format!("title of {url}")),
            out_links: links.iter().map(|l| l.to_string()).collect(),
            ..PageRecord::default()
        }
    }

    fn site() -> Graph {
        let mut g = Graph::new();
        g.add_page(&page(
            "http://a/",
            Some(200),
            &[
                "http://a/x",
                "http://a/gone",
                "http://a/x",
                "http://b:8080/",
            ],
        ));
        g.add_page(&page("http://a/x", Some(200), &["http://a/", "http://a/x"]));
        g.add_page(&page("http://a/gone", Some(404), &[]));
        g.add_page(&page(
            "http://b:8080/",
            Some(200),
            &["http://a/", "http://b:8080/later"],
        ));
        g
    }

    fn written(g: &Graph, format: Format, host: Option<&str>) -> String {
        let mut out = Vec::new();
        g.write(format, host, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn counts_are_distinct_links_and_linking_pages() {
        let g = site();
        assert_eq!(g.node_count(), 5);
        assert_eq!(g.edge_count(), 7, "the repeated link is one edge");
        let home = g.node("http://a/").unwrap();
        assert_eq!((home.in_links, home.out_links), (2, 3));
        let x = g.node("http://a/x").unwrap();
        assert_eq!((x.in_links, x.out_links), (2, 2), "a self-link counts");
        let later = g.node("http://b:8080/later").unwrap();
        assert!(!later.fetched);
        assert_eq!(later.host, "b:8080");
        assert_eq!((later.status, later.depth, later.in_links), (None, None, 1));
        // A page given again changes nothing.
        let mut again = site();
        again.add_page(&page("http://a/", Some(200), &["http://a/x"]));
        assert_eq!(again.edge_count(), 7);
    }

    #[test]
    fn a_pages_links_in_count_those_to_its_duplicates_once_each() {
        let duplicates = [
            ("http://a/index.html", "http://a/"),
            ("http://a/home", "http://a/"),
            ("http://a/copy-of-x", "http://a/x"),
        ]
        .map(|(d, o)| (d.to_string(), o.to_string()));
        let mut counter = LinkCounter::new(&["http://a/", "http://a/index.html"], duplicates);
        counter.add_page(&page("http://a/1", Some(200), &["http://a/"]));
        // Both copies and the page itself: one linking page.
        counter.add_page(&page(
            "http://a/2",
            Some(200),
            &["http://a/index.html", "http://a/home", "http://a/"],
        ));
        counter.add_page(&page("http://a/3", Some(200), &["http://a/index.html"]));
        counter.add_page(&page(
            "http://a/4",
            Some(200),
            &["http://a/index.html", "http://a/home"],
        ));
        // A copy of a page not counted counts for nothing.
        counter.add_page(&page("http://a/5", Some(200), &["http://a/copy-of-x"]));
        let home = &counter.counts["http://a/"];
        assert_eq!(
            (home.in_direct, home.in_via_duplicates, home.links_in()),
            (2, 2, 4)
        );
        assert_eq!(home.duplicates, ["http://a/home", "http://a/index.html"]);
        // A duplicate's own row: the pages linking to it.
        let copy = &counter.counts["http://a/index.html"];
        assert_eq!((copy.in_direct, copy.in_via_duplicates), (3, 0));
        assert!(copy.duplicates.is_empty());
        assert_eq!(
            counter.original_of.len(),
            2,
            "only the counted page's copies"
        );
    }

    #[test]
    fn json_lists_nodes_and_edges_in_url_order() {
        let text = written(&site(), Format::Json, None);
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let urls: Vec<&str> = doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["url"].as_str().unwrap())
            .collect();
        assert_eq!(
            urls,
            [
                "http://a/",
                "http://a/gone",
                "http://a/x",
                "http://b:8080/",
                "http://b:8080/later"
            ]
        );
        assert_eq!(doc["nodes"][0]["in"], 2);
        assert_eq!(doc["nodes"][0]["out"], 3);
        assert_eq!(doc["nodes"][1]["status"], 404);
        assert_eq!(doc["nodes"][4]["status"], serde_json::Value::Null);
        assert_eq!(doc["edges"].as_array().unwrap().len(), 7);
        assert_eq!(doc["edges"][0]["source"], "http://a/");
        assert_eq!(doc["edges"][0]["target"], "http://a/gone");
    }

    #[test]
    fn a_host_keeps_its_pages_their_links_and_where_they_lead() {
        let g = site();
        let doc: serde_json::Value =
            serde_json::from_str(&written(&g, Format::Json, Some("a"))).unwrap();
        let urls: Vec<&str> = doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["url"].as_str().unwrap())
            .collect();
        assert_eq!(
            urls,
            ["http://a/", "http://a/gone", "http://a/x", "http://b:8080/"]
        );
        assert_eq!(doc["edges"].as_array().unwrap().len(), 5, "not b's links");
        // Counts stay the whole crawl's.
        assert_eq!(doc["nodes"][0]["in"], 2);
        let b = written(&g, Format::Csv, Some("b:8080"));
        assert_eq!(
            b,
            "Source,Target\nhttp://b:8080/,http://a/\nhttp://b:8080/,http://b:8080/later\n"
        );
        assert_eq!(written(&g, Format::Csv, Some("nowhere")), "Source,Target\n");
    }

    #[test]
    fn a_host_is_in_the_graph_by_its_fetched_or_linked_pages() {
        let g = site();
        assert!(g.has_host("a"));
        assert!(g.has_host("b:8080"));
        assert!(!g.has_host("b"), "the port is part of the host");
        assert!(!g.has_host("nowhere"));
        let mut linked_only = Graph::new();
        linked_only.add_page(&page("http://a/", Some(200), &["http://c/"]));
        assert!(linked_only.has_host("c"));
    }

    fn awkward() -> Graph {
        let mut g = Graph::new();
        let mut p = page("http://a/q?x=\"1\"&y=<2>,3", Some(200), &["http://a/b\\c"]);
        p.title = Some("Tom & \"Jerry\" <b>\\N</b>\nline\u{1}".to_string());
        g.add_page(&p);
        g
    }

    #[test]
    fn dot_quotes_ids_and_escapes_labels() {
        let text = written(&awkward(), Format::Dot, None);
        assert!(text.starts_with("digraph crawl {\n"), "{text}");
        assert!(
            text.contains(
                r#"  "http://a/q?x=\"1\"&y=<2>,3" [label="Tom & \"Jerry\" <b>\\N</b>\nline ", "#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"  "http://a/q?x=\"1\"&y=<2>,3" -> "http://a/b\\c";"#),
            "{text}"
        );
        assert!(text.contains(r#"status="200", depth="1""#), "{text}");
        assert!(text.contains(r#"fetched="false", in="1", out="0", style="dashed""#));
        assert!(text.ends_with("}\n"));
        let broken = written(&site(), Format::Dot, None);
        assert!(broken.contains(r#"status="404""#) && broken.contains(r#"color="red""#));
    }

    #[test]
    fn graphml_escapes_text_and_types_its_keys() {
        let text = written(&awkward(), Format::Graphml, None);
        assert!(
            text.contains(r#"<key id="status" for="node" attr.name="status" attr.type="int"/>"#)
        );
        assert!(
            text.contains(r#"<key id="host" for="node" attr.name="host" attr.type="string"/>"#)
        );
        assert!(
            text.contains(r#"<data key="url">http://a/q?x=&quot;1&quot;&amp;y=&lt;2&gt;,3</data>"#)
        );
        assert!(text.contains(
            "<data key=\"title\">Tom &amp; &quot;Jerry&quot; &lt;b&gt;\\N&lt;/b&gt;\nline </data>"
        ));
        assert!(
            text.contains(r#"<edge source="n1" target="n0"/>"#),
            "{text}"
        );
        // Well formed: what it opens, it closes, and no raw markup slipped in.
        let doc = roxmltree::Document::parse(&text).expect("valid XML");
        let graph = doc.descendants().find(|n| n.has_tag_name("graph")).unwrap();
        assert_eq!(
            graph.children().filter(|n| n.has_tag_name("node")).count(),
            2
        );
        let title = doc
            .descendants()
            .find(|n| n.attribute("key") == Some("title"))
            .unwrap();
        assert_eq!(title.text(), Some("Tom & \"Jerry\" <b>\\N</b>\nline "));
    }

    #[test]
    fn csv_quotes_fields_that_need_it() {
        let g = awkward();
        assert_eq!(
            written(&g, Format::Csv, None),
            "Source,Target\n\"http://a/q?x=\"\"1\"\"&y=<2>,3\",http://a/b\\c\n"
        );
        let nodes = written(&g, Format::CsvNodes, None);
        let mut lines = nodes.lines();
        assert_eq!(
            lines.next(),
            Some("Id,Label,Host,Status,Depth,Fetched,In,Out,Error")
        );
        assert_eq!(
            lines.next(),
            Some("http://a/b\\c,http://a/b\\c,a,,,false,1,0,")
        );
        assert!(nodes.contains(",a,200,1,true,0,1,\n"), "{nodes}");
    }

    /// A large crawl builds and writes in time linear in pages and links:
    /// 10,000 pages with 8 links each, every format, in seconds even
    /// unoptimized (a pass over the pages per page would take minutes).
    #[test]
    fn a_large_crawl_writes_in_linear_time() {
        let n = 10_000;
        let mut g = Graph::new();
        for i in 0..n {
            let links: Vec<String> = (1..=8)
                .map(|k| format!("http://h{}/p/{}", (i * k) % 7, (i * 31 + k * 997) % n))
                .collect();
            let links: Vec<&str> = links.iter().map(String::as_str).collect();
            g.add_page(&page(
                &format!("http://h{}/p/{i}", i % 7),
                Some(200),
                &links,
            ));
        }
        assert!(g.node_count() >= n);
        for format in Format::ALL {
            let mut counted = CountingSink(0);
            g.write(format, None, &mut counted).unwrap();
            assert!(counted.0 > n, "{format}");
        }
        let mut counted = CountingSink(0);
        g.write(Format::Csv, Some("h3"), &mut counted).unwrap();
        assert!(counted.0 > 0);
    }

    struct CountingSink(usize);

    impl Write for CountingSink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn formats_have_names() {
        for f in Format::ALL {
            assert_eq!(f.as_str().parse::<Format>(), Ok(f));
        }
        assert!("gexf".parse::<Format>().is_err());
    }
}
