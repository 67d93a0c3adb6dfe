//! The synthetic web: deterministic hosts and pages with realistic HTML,
//! same-host and cross-host links in many textual forms of one URL,
//! robots.txt-disallowed pages, 404s, redirects and duplicate pages.

use bytes::Bytes;
use std::collections::HashMap;
use std::net::Ipv4Addr;

/// Size of a web.
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub hosts: usize,
    pub pages: usize,
}

impl Preset {
    pub fn named(name: &str) -> Option<Preset> {
        match name {
            "small" => Some(Preset {
                hosts: 20,
                pages: 250,
            }),
            "large" => Some(Preset {
                hosts: 100,
                pages: 1000,
            }),
            _ => None,
        }
    }
}

/// One response the server can give.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub location: Option<String>,
    pub body: Bytes,
}

/// The generated web: per host, its pages by path.
pub struct Web {
    pub port: u16,
    pub ips: Vec<Ipv4Addr>,
    pub pages: Vec<HashMap<String, Response>>,
    pub preset: Preset,
}

pub fn host_ip(h: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 20 + (h / 250) as u8, (h % 250 + 1) as u8)
}

const WORDS: &[&str] = &[
    "crawler",
    "erlang",
    "actor",
    "supervisor",
    "message",
    "frontier",
    "politeness",
    "robots",
    "index",
    "search",
    "mongodb",
    "store",
    "lease",
    "node",
    "cluster",
    "tokenizer",
    "page",
    "link",
    "host",
    "delay",
    "budget",
    "trap",
    "credit",
    "queue",
    "batch",
    "restart",
];

fn words(rng: &mut fastrand::Rng, n: usize, out: &mut String) {
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(WORDS[rng.usize(..WORDS.len())]);
    }
}

/// Textual variants of one same-host URL, all normalizing to `/p/{i}`.
fn same_host_form(rng: &mut fastrand::Rng, base: &str, i: usize) -> String {
    match rng.usize(..8) {
        0 => format!("{base}/p/{i}"),
        1 => format!("/p/{i}"),
        2 => format!("{i}"),
        3 => format!("../p/{i}#s{}", rng.usize(..9)),
        4 => format!("/%70/{i}"),
        5 => format!("/p/x/../{i}"),
        6 => format!("./{i}?"),
        _ => format!("/p/{i}#top"),
    }
}

impl Web {
    pub fn generate(preset: Preset, port: u16, seed: u64) -> Web {
        let mut rng = fastrand::Rng::with_seed(seed);
        let ips: Vec<Ipv4Addr> = (0..preset.hosts).map(host_ip).collect();
        let origins: Vec<String> = ips.iter().map(|ip| format!("http://{ip}:{port}")).collect();
        let mut pages = Vec::with_capacity(preset.hosts);
        for h in 0..preset.hosts {
            let mut site = HashMap::new();
            site.insert(
                "/robots.txt".to_string(),
                Response {
                    status: 200,
                    content_type: "text/plain",
                    location: None,
                    body: Bytes::from_static(
                        b"User-agent: *\nDisallow: /private/\nDisallow: /%7Eadmin/\n",
                    ),
                },
            );
            let next = &origins[(h + 1) % preset.hosts];
            site.insert(
                "/".to_string(),
                html(format!(
                    "<!doctype html><html><head><title>host {h}</title></head><body>\
                     <nav><a href=\"/p/0\">start</a></nav><a href=\"{next}/\">next host</a></body></html>"
                )),
            );
            for i in 0..preset.pages {
                let body = page_html(&mut rng, h, i, preset, &origins);
                if i % 50 == 7 {
                    // A duplicate of this page under another URL.
                    site.insert(format!("/dup/{i}"), html(body.clone()));
                }
                if i % 40 == 3 {
                    site.insert(
                        format!("/r/{i}"),
                        Response {
                            status: 301,
                            content_type: "text/html",
                            location: Some(format!("/p/{i}")),
                            body: Bytes::new(),
                        },
                    );
                }
                site.insert(format!("/p/{i}"), html(body));
                site.insert(
                    format!("/private/{i}"),
                    html("<p>disallowed by robots.txt</p>".to_string()),
                );
            }
            pages.push(site);
        }
        Web {
            port,
            ips,
            pages,
            preset,
        }
    }

    pub fn seed_url(&self) -> String {
        format!("http://{}:{}/", self.ips[0], self.port)
    }

    /// Pages a correct crawl reaches: every root and every `/p/N`.
    pub fn canonical(&self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for h in 0..self.preset.hosts {
            out.push((h, "/".to_string()));
            for i in 0..self.preset.pages {
                out.push((h, format!("/p/{i}")));
            }
        }
        out
    }
}

fn html(body: String) -> Response {
    Response {
        status: 200,
        content_type: "text/html; charset=utf-8",
        location: None,
        body: Bytes::from(body),
    }
}

fn page_html(
    rng: &mut fastrand::Rng,
    h: usize,
    i: usize,
    preset: Preset,
    origins: &[String],
) -> String {
    let base = &origins[h];
    let target_size = 8 * 1024 + rng.usize(..32 * 1024);
    let n_links = 10 + rng.usize(..51);
    let mut links = vec![format!("/p/{}", (i + 1) % preset.pages)];
    while links.len() < n_links {
        let roll = rng.usize(..100);
        let link = if roll < 10 {
            let other = rng.usize(..preset.hosts);
            format!("{}/p/{}", origins[other], rng.usize(..preset.pages))
        } else if roll < 13 {
            format!("/private/{}", rng.usize(..preset.pages))
        } else if roll < 15 {
            format!("/missing/{}", rng.usize(..50))
        } else if roll < 17 {
            format!("/r/{}", (rng.usize(..preset.pages) / 40) * 40 + 3)
        } else if roll < 18 {
            format!("/dup/{}", (rng.usize(..preset.pages) / 50) * 50 + 7)
        } else {
            let target = rng.usize(..preset.pages);
            same_host_form(rng, base, target)
        };
        links.push(link);
    }
    let mut s = String::with_capacity(target_size + 1024);
    s.push_str("<!doctype html><html><head><meta charset=\"utf-8\"><title>");
    words(rng, 5, &mut s);
    s.push_str(&format!(" — host {h} page {i}</title>"));
    s.push_str("<style>body{font-family:sans-serif}nav a{margin:0 4px}.c{color:#333}</style>");
    s.push_str("<script>window.analytics={track:function(e){return e}};var s='<a href=\"/p/0\">';</script>");
    s.push_str("</head><body><nav><a href=\"/\">home</a> <a href=\"/p/0\">first</a></nav>");
    s.push_str(&format!("<h1>Page {i} of host {h}</h1>"));
    let per_paragraph = links.len().div_ceil(8);
    let mut link_iter = links.iter().peekable();
    while s.len() < target_size || link_iter.peek().is_some() {
        s.push_str("<h2>");
        words(rng, 3, &mut s);
        s.push_str("</h2><p class=\"c\">");
        for _ in 0..per_paragraph {
            let n = 30 + rng.usize(..40);
            words(rng, n, &mut s);
            if let Some(link) = link_iter.next() {
                s.push_str(&format!(" <a href=\"{link}\">"));
                words(rng, 2, &mut s);
                s.push_str("</a> ");
            }
        }
        s.push_str("</p>");
    }
    s.push_str("<footer><a href=\"/\">home</a> © the synthetic web</footer></body></html>");
    s
}
