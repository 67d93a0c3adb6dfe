//! `report graph|pages|search-results|hosts` and the console's `results`
//! and `hosts`, on a two-host loopback web whose link structure is known;
//! the DOT and GraphML exports read back by Graphviz and networkx.

use crate::common::backend::Backend;
use crate::common::coverage::{assert_all_fetched, assert_all_real_fetched};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use web_crawler_testsupport::{Page, TestServer, reserve};

use crate::common::bin;

async fn run(args: &[String]) -> Output {
    tokio::time::timeout(Duration::from_secs(120), bin().args(args).output())
        .await
        .expect("the command finishes")
        .expect("the command runs")
}

fn args(words: &[&str], backend: &Backend) -> Vec<String> {
    let mut all: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    all.extend(backend.cli_args());
    all
}

/// A successful command's standard output.
async fn ok(words: &[&str], backend: &Backend) -> String {
    let out = run(&args(words, backend)).await;
    assert!(
        out.status.success(),
        "{words:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Two hosts; every link and what it leads to is known.
struct Web {
    a: TestServer,
    b: TestServer,
}

impl Web {
    async fn start() -> Web {
        let la = reserve(Ipv4Addr::new(127, 0, 14, 1));
        let lb = reserve(Ipv4Addr::new(127, 0, 14, 2));
        let (a, b) = (la.local_addr().unwrap(), lb.local_addr().unwrap());
        let html = |title: &str, body: &str, links: &[String]| {
            let links: String = links
                .iter()
                .map(|l| format!("<p><a href=\"{l}\">a link</a></p>"))
                .collect();
            Page::html(format!(
                "<!doctype html><html><head><title>{title}</title></head>\
                 <body><p>{body}</p>{links}</body></html>"
            ))
        };
        let a_pages = HashMap::from([
            (
                "/".to_string(),
                html(
                    "Home &amp; &lt;Garden&gt; \"quoted\"",
                    "a garden of pages",
                    &[
                        "/a".into(),
                        "/gone".into(),
                        format!("http://{b}/"),
                        "/a#again".into(),
                        "/a".into(),
                    ],
                ),
            ),
            (
                "/a".to_string(),
                html("A", "first", &["/".into(), "/b?x=1&amp;y=2".into()]),
            ),
            (
                "/b?x=1&y=2".to_string(),
                html("B", "second", &["/".into(), "/b?x=1&amp;y=2".into()]),
            ),
        ]);
        let b_pages = HashMap::from([
            (
                "/robots.txt".to_string(),
                Page::text(
                    "text/plain",
                    format!("User-agent: *\nCrawl-delay: 0.2\nSitemap: http://{b}/sitemap.xml\n"),
                ),
            ),
            (
                "/".to_string(),
                html(
                    "Other",
                    "other host",
                    &[format!("http://{a}/a"), "/c".into()],
                ),
            ),
            (
                "/c".to_string(),
                html("C", "a garden again", &[format!("http://{a}/gone")]),
            ),
            (
                "/sitemap.xml".to_string(),
                Page::text(
                    "application/xml",
                    format!(
                        "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                         <url><loc>http://{b}/orphan</loc></url></urlset>"
                    ),
                ),
            ),
            (
                "/orphan".to_string(),
                html("Orphan", "alone", &["/".into()]),
            ),
        ]);
        Web {
            a: TestServer::serve(la, a_pages).await,
            b: TestServer::serve(lb, b_pages).await,
        }
    }

    fn host_a(&self) -> String {
        self.a.origin().trim_start_matches("http://").to_string()
    }

    fn host_b(&self) -> String {
        self.b.origin().trim_start_matches("http://").to_string()
    }

    /// Every processed page: (in, out) link counts.
    fn counts(&self) -> BTreeMap<String, (u64, u64)> {
        let (a, b) = (|p: &str| self.a.url(p), |p: &str| self.b.url(p));
        BTreeMap::from([
            (a("/"), (2, 3)),
            (a("/a"), (2, 2)),
            (a("/b?x=1&y=2"), (2, 2)),
            (a("/gone"), (2, 0)),
            (b("/"), (2, 2)),
            (b("/c"), (1, 1)),
            (b("/sitemap.xml"), (0, 1)),
            (b("/orphan"), (1, 1)),
        ])
    }

    fn edges(&self) -> BTreeSet<(String, String)> {
        let (a, b) = (|p: &str| self.a.url(p), |p: &str| self.b.url(p));
        [
            (a("/"), a("/a")),
            (a("/"), a("/gone")),
            (a("/"), b("/")),
            (a("/a"), a("/")),
            (a("/a"), a("/b?x=1&y=2")),
            (a("/b?x=1&y=2"), a("/")),
            (a("/b?x=1&y=2"), a("/b?x=1&y=2")),
            (b("/"), a("/a")),
            (b("/"), b("/c")),
            (b("/c"), a("/gone")),
            (b("/sitemap.xml"), b("/orphan")),
            (b("/orphan"), b("/")),
        ]
        .into_iter()
        .collect()
    }
}

fn edges_of(doc: &Value) -> BTreeSet<(String, String)> {
    doc["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["source"].as_str().unwrap().to_string(),
                e["target"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn crawl(web: &Web, backend: &Backend) {
    let summary = ok(
        &[
            "search-text",
            &web.a.url("/"),
            "garden",
            "--scope",
            "any",
            "--delay-ms",
            "0",
            "--no-index",
            "--quiet",
        ],
        backend,
    )
    .await;
    assert!(
        summary.contains("2 page(s) contain \"garden\""),
        "{summary}"
    );
    // The real pages of both hosts (not a's 404 nor b's sitemap).
    let a = ["/", "/a", "/b?x=1&y=2"].map(|t| (&web.a, t));
    assert_all_fetched(
        a.into_iter()
            .chain(["/", "/c", "/orphan"].map(|t| (&web.b, t))),
    );
}

async fn the_graph_and_reports_of_a_two_host_crawl(backend: Backend) {
    let web = Web::start().await;
    crawl(&web, &backend).await;
    let home = web.a.url("/");

    // JSON: every page and link, with the counts.
    let doc: Value =
        serde_json::from_str(&ok(&["report", "graph", "--format", "json"], &backend).await)
            .expect("one JSON document");
    let nodes: BTreeMap<String, &Value> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["url"].as_str().unwrap().to_string(), n))
        .collect();
    let counts: BTreeMap<String, (u64, u64)> = nodes
        .iter()
        .map(|(url, n)| {
            (
                url.clone(),
                (n["in"].as_u64().unwrap(), n["out"].as_u64().unwrap()),
            )
        })
        .collect();
    assert_eq!(counts, web.counts(), "{doc:#}");
    assert_eq!(edges_of(&doc), web.edges());
    let root = nodes[&home];
    assert_eq!(root["status"], 200);
    assert_eq!(root["depth"], 0);
    assert_eq!(root["host"], web.host_a());
    assert_eq!(root["title"], "Home & <Garden> \"quoted\"");
    assert_eq!(nodes[&web.a.url("/gone")]["status"], 404);
    assert_eq!(nodes[&web.a.url("/a")]["depth"], 1);
    assert_eq!(nodes[&web.b.url("/")]["host"], web.host_b());
    assert!(nodes.values().all(|n| n["fetched"] == true));
    let json_flag: Value =
        serde_json::from_str(&ok(&["report", "graph", "--json"], &backend).await).unwrap();
    assert_eq!(json_flag, doc);

    // --host: B's pages, their links, and where those lead on A.
    let host_b = web.host_b();
    let part: Value = serde_json::from_str(
        &ok(&["report", "graph", "--json", "--host", &host_b], &backend).await,
    )
    .unwrap();
    let part_edges = edges_of(&part);
    let b_edges: BTreeSet<(String, String)> = web
        .edges()
        .into_iter()
        .filter(|(from, _)| from.starts_with(&web.b.origin()))
        .collect();
    assert_eq!(part_edges, b_edges);
    let part_nodes: BTreeSet<&str> = part["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["url"].as_str().unwrap())
        .collect();
    assert_eq!(part_nodes.len(), 6, "{part_nodes:?}");
    assert!(part_nodes.contains(web.a.url("/gone").as_str()));
    assert!(!part_nodes.contains(home.as_str()));
    // A host the crawl never saw is an error, not an empty graph.
    let nosuch = run(&args(
        &["report", "graph", "--host", "nosuch.example"],
        &backend,
    ))
    .await;
    assert_eq!(nosuch.status.code(), Some(1));
    assert!(nosuch.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&nosuch.stderr).trim_end(),
        "error: no page of host nosuch.example is in the crawl: --host takes `host[:port]` \
         as `report hosts` lists it"
    );

    // CSV: the edge list, Gephi's columns; the node table beside it.
    let csv = ok(&["report", "graph", "--format", "csv"], &backend).await;
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("Source,Target"));
    assert_eq!(lines.count(), web.edges().len());
    let dir = tempfile::tempdir().unwrap();
    let nodes_csv = dir.path().join("nodes.csv");
    ok(
        &[
            "report",
            "graph",
            "--format",
            "csv-nodes",
            "--output",
            nodes_csv.to_str().unwrap(),
        ],
        &backend,
    )
    .await;
    let table = std::fs::read_to_string(&nodes_csv).unwrap();
    assert!(table.starts_with("Id,Label,Host,Status,Depth,Fetched,In,Out,Error\n"));
    assert!(
        table.contains(&format!(
            "{home},\"Home & <Garden> \"\"quoted\"\"\",{},200,0,true,2,3,\n",
            web.host_a()
        )),
        "{table}"
    );

    // DOT, read by Graphviz.
    let dot_file = dir.path().join("site.dot");
    ok(
        &["report", "graph", "-o", dot_file.to_str().unwrap()],
        &backend,
    )
    .await;
    let read = graphviz_reads(&dot_file);
    assert_eq!(
        read.0.keys().cloned().collect::<BTreeSet<_>>(),
        web.counts().keys().cloned().collect()
    );
    assert_eq!(read.0[&home]["label"], "Home & <Garden> \"quoted\"");
    assert_eq!(read.0[&home]["status"], "200");
    assert_eq!(read.0[&web.a.url("/gone")]["color"], "red");
    assert_eq!(read.1, web.edges());

    // GraphML, read by networkx, with typed attributes.
    let graphml = dir.path().join("site.graphml");
    ok(
        &[
            "report",
            "graph",
            "--format",
            "graphml",
            "--output",
            graphml.to_str().unwrap(),
        ],
        &backend,
    )
    .await;
    let read = networkx_reads(&graphml);
    let nx_counts: BTreeMap<String, (u64, u64)> = read["nodes"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(url, n)| {
            (
                url.clone(),
                (n["in"].as_u64().unwrap(), n["out"].as_u64().unwrap()),
            )
        })
        .collect();
    assert_eq!(nx_counts, web.counts());
    let nx_edges: BTreeSet<(String, String)> = read["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e[0].as_str().unwrap().to_string(),
                e[1].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(nx_edges, web.edges());
    assert_eq!(read["nodes"][&home]["title"], "Home & <Garden> \"quoted\"");
    assert_eq!(read["nodes"][&home]["host"], web.host_a());
    for key in ["status", "depth", "in", "out"] {
        assert_eq!(read["types"][key], "int", "{key}: {read}");
    }
    assert_eq!(read["types"]["fetched"], "bool");

    // report pages: the same counts, as columns and in the JSON.
    let pages: Value =
        serde_json::from_str(&ok(&["report", "pages", "--json"], &backend).await).unwrap();
    let page_counts: BTreeMap<String, (u64, u64)> = pages
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["url"].as_str().unwrap().to_string(),
                (p["in"].as_u64().unwrap(), p["out"].as_u64().unwrap()),
            )
        })
        .collect();
    assert_eq!(page_counts, web.counts());
    let table = ok(&["report", "pages"], &backend).await;
    assert!(
        table.starts_with("status\ttype\tsize\tlinks\tin\tout\turl\tnote\n"),
        "{table}"
    );
    assert!(table.contains(&format!("\t2\t3\t{home}\t")), "{table}");
    let limited: Value =
        serde_json::from_str(&ok(&["report", "pages", "--json", "--limit", "1"], &backend).await)
            .unwrap();
    assert_eq!(limited.as_array().unwrap().len(), 1);
    assert_eq!(limited[0]["in"], 2);

    // report search-results [TEXT].
    let results: Value = serde_json::from_str(
        &ok(&["report", "search-results", "garden", "--json"], &backend).await,
    )
    .unwrap();
    let found: Vec<&str> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["url"].as_str().unwrap())
        .collect();
    let mut want = vec![home.clone(), web.b.url("/c")];
    want.sort();
    assert_eq!(found, want);
    assert!(
        results[0]["positions"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
    );
    let all = ok(&["report", "search-results"], &backend).await;
    assert!(all.starts_with("url\ttext\tpositions\n"), "{all}");
    assert!(all.contains(&format!("{home}\t\"garden\"\t")), "{all}");
    let none: Value = serde_json::from_str(
        &ok(&["report", "search-results", "absent", "--json"], &backend).await,
    )
    .unwrap();
    assert_eq!(none, serde_json::json!([]));

    // report hosts.
    let hosts: Value =
        serde_json::from_str(&ok(&["report", "hosts", "--json"], &backend).await).unwrap();
    let by_host: BTreeMap<&str, &Value> = hosts
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["host"].as_str().unwrap(), h))
        .collect();
    let (a, b) = (by_host[web.host_a().as_str()], by_host[host_b.as_str()]);
    assert_eq!(
        (a["robots_status"].as_str(), a["pages"].as_u64()),
        (Some("not_found"), Some(4))
    );
    assert_eq!(
        (b["robots_status"].as_str(), b["pages"].as_u64()),
        (Some("fetched"), Some(4))
    );
    assert_eq!(b["crawl_delay_ms"], 200);
    assert_eq!(
        b["sitemaps"],
        serde_json::json!([web.b.url("/sitemap.xml")])
    );
    let table = ok(&["report", "hosts"], &backend).await;
    assert!(
        table.starts_with("host\trobots\tcrawl_delay_ms\tpages\tsitemaps\n"),
        "{table}"
    );
    assert!(
        table.contains(&format!(
            "{host_b}\tfetched (200)\t200\t4\t{}",
            web.b.url("/sitemap.xml")
        )),
        "{table}"
    );
}

/// Nodes by id with their attributes, and edges, as Graphviz read the file.
fn graphviz_reads(file: &Path) -> (BTreeMap<String, Value>, BTreeSet<(String, String)>) {
    // Installs Graphviz too when the tests run without scripts/test.sh.
    graph_python();
    let out = std::process::Command::new("dot")
        .args(["-Tjson0"])
        .arg(file)
        .output()
        .expect(
            "Graphviz's dot runs: scripts/graph-tools.sh installs it (scripts/test.sh calls it)",
        );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "dot: {stderr}"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("dot -Tjson0 prints JSON");
    let objects = doc["objects"].as_array().expect("nodes");
    let names: Vec<String> = objects
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect();
    let nodes = objects
        .iter()
        .map(|o| (o["name"].as_str().unwrap().to_string(), o.clone()))
        .collect();
    let edges = doc["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| {
            let end = |k: &str| names[e[k].as_u64().unwrap() as usize].clone();
            (end("tail"), end("head"))
        })
        .collect();
    (nodes, edges)
}

/// The python that has networkx: `WEB_CRAWLER_TEST_GRAPH_PYTHON` (set by
/// scripts/test.sh), or scripts/graph-tools.sh run now. Never skipped.
fn graph_python() -> String {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            crate::common::from_env_or_script(
                "WEB_CRAWLER_TEST_GRAPH_PYTHON",
                &["graph-tools.sh"],
                "these tests need Graphviz and networkx and they could not be installed",
            )
        })
        .clone()
}

const NETWORKX_READ: &str = r#"
import json, sys
import networkx as nx
g = nx.read_graphml(sys.argv[1])
nodes = {d["url"]: d for _, d in g.nodes(data=True)}
edges = [[g.nodes[a]["url"], g.nodes[b]["url"]] for a, b in g.edges()]
types = {}
for d in nodes.values():
    for k, v in d.items():
        types[k] = type(v).__name__
print(json.dumps({"nodes": nodes, "edges": edges, "types": types}))
"#;

/// What networkx reads from a GraphML file: nodes by URL, edges, and the
/// Python type of each attribute.
fn networkx_reads(file: &Path) -> Value {
    let python = graph_python();
    let out = std::process::Command::new(&python)
        .args(["-c", NETWORKX_READ])
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{python} runs: {e}"));
    assert!(
        out.status.success(),
        "networkx cannot read the GraphML: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The console's `results [TEXT]` and `hosts`, on a node started over the
/// crawled store.
async fn the_console_lists_search_results_and_hosts(backend: Backend) {
    let web = Web::start().await;
    crawl(&web, &backend).await;
    let dir = tempfile::tempdir().unwrap();
    let cookie = dir.path().join("cookie");
    std::fs::write(&cookie, "graph-reports-cookie\n").unwrap();
    let listen = {
        let l = std::net::TcpListener::bind((Ipv4Addr::new(127, 0, 14, 9), 0)).unwrap();
        l.local_addr().unwrap().to_string()
    };
    let mut node = bin()
        .args(args(
            &[
                "start",
                "--name",
                "reports",
                "--listen",
                &listen,
                "--cookie-file",
                cookie.to_str().unwrap(),
                "--no-index",
            ],
            &backend,
        ))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let remote = |cmd: &str| {
        let mut c = bin();
        c.args([
            cmd,
            "--connect",
            listen.as_str(),
            "--wait",
            "5",
            "--cookie-file",
        ])
        .arg(&cookie);
        c
    };
    let mut up = false;
    for _ in 0..100 {
        if remote("status").output().await.unwrap().status.success() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "the node answers");
    let mut console = remote("console")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = console.stdin.take().unwrap();
    stdin
        .write_all(b"results garden\nresults absent\nhosts\nhosts 1\nquit\n")
        .await
        .unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(60), console.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    node.start_kill().unwrap();
    let _ = node.wait().await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for url in [web.a.url("/"), web.b.url("/c")] {
        assert!(text.contains(&format!("{url}\t\"garden\"\t")), "{text}");
    }
    assert!(text.contains("(none)"), "no results for absent: {text}");
    assert!(
        text.contains(
            "host\tnode\tqueued\tin_flight\trobots\tbackoff\tcrawl_delay_ms\tpages\tsitemaps"
        ),
        "{text}"
    );
    // Nothing of them in a pool: the store's facts only.
    assert!(
        text.contains(&format!(
            "{}\t-\t-\t-\tnot_found (404)\t-\t-\t4\t-",
            web.host_a()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{}\t-\t-\t-\tfetched (200)\t-\t200\t4\t{}",
            web.host_b(),
            web.b.url("/sitemap.xml")
        )),
        "{text}"
    );
    assert!(text.contains("... 1 more (2 in all)"), "hosts 1: {text}");
}

/// #49: a home page whose links mostly go to its copy `/index.html`
/// (the same bytes, so recorded as its content duplicate) counts them in
/// `report pages`: `in` is every page linking to it or to its copy, once
/// each, and the note and `--json` say how that adds up.
async fn report_pages_counts_links_to_a_pages_duplicates(backend: Backend) {
    let listener = reserve(Ipv4Addr::new(127, 0, 28, 41));
    let home = "<html><head><title>home</title></head><body><p>the home page</p>\
                <a href=\"/a\">a</a> <a href=\"/b\">b</a> <a href=\"/c\">c</a> \
                <a href=\"/d\">d</a></body></html>";
    let linking = |links: &[&str]| {
        let links: String = (links.iter())
            .map(|l| format!("<a href=\"{l}\">home</a> "))
            .collect();
        Page::html(format!("<html><body><p>{links}</p></body></html>"))
    };
    let site = TestServer::serve(
        listener,
        HashMap::from([
            ("/".to_string(), Page::html(home)),
            ("/index.html".to_string(), Page::html(home)),
            // Only /a links to / itself, and to its copy too.
            ("/a".to_string(), linking(&["/", "/index.html"])),
            ("/b".to_string(), linking(&["/index.html"])),
            ("/c".to_string(), linking(&["/index.html"])),
            ("/d".to_string(), linking(&["/index.html"])),
        ]),
    )
    .await;
    ok(
        &[
            "crawl",
            &site.url("/"),
            "--delay-ms",
            "0",
            "--no-index",
            "--quiet",
        ],
        &backend,
    )
    .await;
    assert_all_real_fetched(&site, ["/", "/index.html", "/a", "/b", "/c", "/d"]);
    let (root, copy) = (site.url("/"), site.url("/index.html"));
    let pages: Value =
        serde_json::from_str(&ok(&["report", "pages", "--json"], &backend).await).unwrap();
    let row = |url: &str| {
        (pages.as_array().unwrap().iter())
            .find(|p| p["url"] == url)
            .unwrap_or_else(|| panic!("{url} in {pages:#}"))
            .clone()
    };
    let kept = row(&root);
    assert_eq!(
        (
            &kept["in"],
            &kept["in_direct"],
            &kept["in_via_duplicates"],
            &kept["duplicates"]
        ),
        (
            &serde_json::json!(4),
            &serde_json::json!(1),
            &serde_json::json!(3),
            &serde_json::json!([copy])
        ),
        "/ is linked by /a, and through its copy by /b, /c and /d: {kept:#}"
    );
    let duplicate = row(&copy);
    assert_eq!(duplicate["duplicate_of"], root, "{duplicate:#}");
    assert_eq!(duplicate["in"], 4, "the copy's own links in: {duplicate:#}");
    let table = ok(&["report", "pages"], &backend).await;
    let line = |url: &str| {
        let columns: Vec<String> = (table.lines())
            .map(|l| l.split('\t').map(str::to_string).collect::<Vec<_>>())
            .find(|c| c.get(6).map(String::as_str) == Some(url))
            .unwrap_or_else(|| panic!("{url} in {table}"));
        columns
    };
    let kept = line(&root);
    assert_eq!(kept[4], "4", "in: {table}");
    assert_eq!(kept[7], format!("in 1 + 3 via {copy}"), "note: {table}");
    assert_eq!(line(&copy)[7], format!("duplicate of {root}"), "{table}");
}

on_both_backends!(
    pages_in_through_duplicates,
    report_pages_counts_links_to_a_pages_duplicates
);

on_both_backends!(graph_and_reports, the_graph_and_reports_of_a_two_host_crawl);
on_both_backends!(
    console_results_and_hosts,
    the_console_lists_search_results_and_hosts
);

/// #27 item 14: `report pages`' `links` column is every link the page
/// holds as found (nofollow, off-scope and non-http ones included), `out`
/// the distinct URLs of them the crawl took; `--help` says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_pages_links_counts_what_the_page_holds() {
    let site = TestServer::start(
        Ipv4Addr::new(127, 0, 28, 40),
        HashMap::from([
            (
                "/".to_string(),
                Page::html(
                    "<html><head><title>t</title><link rel=canonical href=\"/\"></head><body>\
                     <p>some text</p><a href=\"/a\">a</a> <a href=\"/a#x\">a again</a> \
                     <a href=\"/b\" rel=nofollow>b</a> <a href=\"http://other.example/\">o</a> \
                     <a href=\"mailto:x@y.z\">m</a> <a href=\"javascript:void(0)\">j</a> \
                     <a href=\"mailto:x@y.z\">m again</a></body></html>",
                ),
            ),
            ("/a".to_string(), Page::html("<p>page a</p>")),
            ("/b".to_string(), Page::html("<p>page b</p>")),
        ]),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db").display().to_string();
    let crawled = run(&[
        "crawl".into(),
        site.url("/"),
        "--db".into(),
        db.clone(),
        "--delay-ms".into(),
        "0".into(),
        "--quiet".into(),
    ])
    .await;
    assert!(crawled.status.success(), "{crawled:?}");
    // Its real pages: /b is linked only with rel=nofollow.
    assert_all_real_fetched(&site, ["/", "/a"]);
    let table = run(&["report".into(), "pages".into(), "--db".into(), db]).await;
    let table = String::from_utf8_lossy(&table.stdout);
    let home = table
        .lines()
        .find(|l| l.contains(&format!("\t{}\t", site.url("/"))))
        .unwrap_or_else(|| panic!("{table}"));
    let columns: Vec<&str> = home.split('\t').collect();
    // links: /, /a (its #x is the same URL), /b (nofollow), other.example
    // (off the host), and each non-http href: mailto twice, javascript.
    // out: / and /a, the URLs the crawl took. in: / links to itself.
    assert_eq!(&columns[3..6], ["7", "1", "2"], "links, in, out: {table}");
    let help = run(&["report".into(), "pages".into(), "--help".into()]).await;
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("`links`: the links the page holds") && help.contains("nofollow"),
        "{help}"
    );
}
