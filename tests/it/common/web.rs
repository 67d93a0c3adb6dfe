//! A generated multi-host web: deterministic pages with same-host and
//! cross-host links in many textual forms of the same URL (normalization
//! traps), robots.txt-disallowed pages, 404s, and a chain that makes every
//! page reachable from the first host's root.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use web_crawler_testsupport::{Page, TestServer, prose_of, reserve};

/// The web, served.
pub struct GeneratedWeb {
    pub servers: Vec<TestServer>,
    pub pages_per_host: usize,
}

impl GeneratedWeb {
    /// `hosts` servers on 127.0.1.1, 127.0.1.2, ... each with `pages_per_host`
    /// pages `/p/0..` plus a root `/`.
    pub async fn start(hosts: usize, pages_per_host: usize, seed: u64) -> GeneratedWeb {
        Self::start_with(hosts, pages_per_host, seed, std::time::Duration::ZERO).await
    }

    /// As [`GeneratedWeb::start`], every page answering after `delay`.
    pub async fn start_with(
        hosts: usize,
        pages_per_host: usize,
        seed: u64,
        delay: std::time::Duration,
    ) -> GeneratedWeb {
        let listeners: Vec<std::net::TcpListener> = (0..hosts)
            .map(|h| reserve(Ipv4Addr::new(127, 0, 1, (h + 1) as u8)))
            .collect();
        let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        // Seeded: the web is the same on every run.
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut servers = Vec::new();
        for (h, listener) in listeners.into_iter().enumerate() {
            let pages = host_pages(h, &addrs, pages_per_host, &mut rng)
                .into_iter()
                .map(|(k, v)| (k, v.delay(delay)))
                .collect();
            servers.push(TestServer::serve(listener, pages).await);
        }
        GeneratedWeb {
            servers,
            pages_per_host,
        }
    }

    pub fn seed_url(&self) -> String {
        self.servers[0].url("/")
    }

    /// Every page a correct crawl must fetch: `(host index, target)`.
    pub fn canonical_targets(&self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for h in 0..self.servers.len() {
            out.push((h, "/".to_string()));
            for i in 0..self.pages_per_host {
                out.push((h, format!("/p/{i}")));
            }
        }
        out
    }
}

/// Textual variants of one URL that all normalize to `http://addr/p/{i}`.
fn variant(rng: &mut fastrand::Rng, from_host: SocketAddr, to: SocketAddr, i: usize) -> String {
    let same = from_host == to;
    let abs = |host: &str| format!("http://{host}/p/{i}");
    let forms = if same { 9 } else { 3 };
    match rng.usize(..forms) {
        0 => abs(&to.to_string()),
        1 => format!("HTTP://{}:{}/p/{i}#frag", to.ip(), to.port()),
        2 => format!("http://{}/p/./{i}?", to),
        3 => format!("/p/{i}"),
        4 => format!("{i}"),
        5 => format!("../p/{i}#section-{}", rng.usize(..5)),
        6 => format!("/%70/{i}"),
        7 => format!("/p/x/../{i}"),
        _ => format!("./{i}"),
    }
}

fn host_pages(
    h: usize,
    addrs: &[SocketAddr],
    n: usize,
    rng: &mut fastrand::Rng,
) -> HashMap<String, Page> {
    let me = addrs[h];
    let next_host = addrs[(h + 1) % addrs.len()];
    let mut pages = HashMap::new();
    pages.insert(
        "/robots.txt".to_string(),
        Page::text(
            "text/plain",
            "User-agent: *\nDisallow: /private/\n\nUser-agent: otherbot\nDisallow: /\n",
        ),
    );
    pages.insert(
        "/".to_string(),
        Page::html(format!(
            "<!doctype html><title>host {h}</title><nav><a href=\"/p/0\">start</a></nav>\
             <p>Root of host {h}.</p><a href=\"http://{next_host}/\">next host</a>"
        )),
    );
    for i in 0..n {
        let mut links = Vec::new();
        // The chain makes every page reachable.
        links.push(format!("/p/{}", (i + 1) % n));
        for _ in 0..9 {
            let roll = rng.usize(..100);
            let link = if roll < 10 {
                let other = addrs[rng.usize(..addrs.len())];
                let target = rng.usize(..n);
                variant(rng, me, other, target)
            } else if roll < 15 {
                format!("/private/{}", rng.usize(..n))
            } else if roll < 18 {
                format!("/missing/{}", rng.usize(..20))
            } else {
                let target = rng.usize(..n);
                variant(rng, me, me, target)
            };
            links.push(link);
        }
        // Text of its own, as a real page has.
        let prose = prose_of(&format!("host {h} page {i}"));
        let mut body = format!(
            "<!doctype html><html><head><title>host {h} page {i}</title>\
             <style>p {{ margin: 0 }}</style><script>var x = \"<a href='/p/0'>\";</script></head>\
             <body><nav><a href=\"/\">home</a></nav><h1>Page {i}</h1><p>{}</p>",
            prose
        );
        for (k, link) in links.iter().enumerate() {
            body.push_str(&format!(
                "<p>Paragraph {k} of page {i} on host {h} with some words to index. \
                 <a href=\"{link}\">link {k}</a></p>"
            ));
        }
        body.push_str("<footer>footer text</footer></body></html>");
        pages.insert(format!("/p/{i}"), Page::html(body));
        pages.insert(
            format!("/private/{i}"),
            Page::html("<p>private: a crawler obeying robots.txt never sees this</p>"),
        );
    }
    pages
}
