//! The synthetic web: deterministic hosts and pages with realistic HTML,
//! same-host and cross-host links in many textual forms of one URL,
//! robots.txt-disallowed pages, 404s, redirects and duplicate pages.
//!
//! The `-traps` presets add crawler traps, the URL spaces real sites have
//! that never end (calendars, faceted navigation, session ids, relative
//! links that repeat path segments, soft 404s), answered by computing the
//! page from its path, and one host with a large legitimate numbered
//! section (`/product/N`) that a trap defence must not cut.
//!
//! The `-text-traps` presets have the same product section, but their trap
//! hosts carry text-rich generators instead (issue #24): tag intersections,
//! site search and an events calendar, whose every page is excerpts copied
//! from the host's real pages and links to ten of them, so no two are
//! near-duplicates; and every real page of a trap host links, as a blog's
//! articles do, its day and two tags.

use bytes::Bytes;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};

/// Size of a web, and whether it has traps.
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub hosts: usize,
    pub pages: usize,
    /// Trap families on about a tenth of the hosts, and the product section.
    pub traps: bool,
    /// With `traps`: the trap families are the text-rich generators
    /// ([`TEXT_FAMILIES`]), all three on every trap host, instead of
    /// [`FAMILIES`].
    pub text: bool,
}

/// The presets `bench run` takes.
pub const PRESETS: &[&str] = &[
    "small",
    "large",
    "small-traps",
    "large-traps",
    "small-text-traps",
    "large-text-traps",
    "xlarge",
];

impl Preset {
    pub fn named(name: &str) -> Option<Preset> {
        let (size, traps, text) = if let Some(size) = name.strip_suffix("-text-traps") {
            (size, true, true)
        } else if let Some(size) = name.strip_suffix("-traps") {
            (size, true, false)
        } else {
            (name, false, false)
        };
        let (hosts, pages) = match size {
            "small" => (20, 250),
            "large" => (100, 1000),
            // Three times large, deeper hosts: for memory as a crawl grows.
            "xlarge" => (100, 3000),
            _ => return None,
        };
        Some(Preset {
            hosts,
            pages,
            traps,
            text,
        })
    }

    /// Pages of the product section (twice a host's `/p/` pages), 0 without traps.
    pub fn products(&self) -> usize {
        if self.traps && self.hosts > PRODUCT_HOST {
            2 * self.pages
        } else {
            0
        }
    }

    /// List pages of the product section.
    pub fn product_lists(&self) -> usize {
        self.products().div_ceil(PRODUCTS_PER_LIST)
    }

    /// Hosts that carry trap families: every tenth host, from host 5.
    pub fn trap_hosts(&self) -> Vec<usize> {
        if !self.traps {
            return Vec::new();
        }
        (0..self.hosts).filter(|h| h % 10 == 5).collect()
    }

    /// The trap families of host `h` (none on most hosts). With five or
    /// more trap hosts each has one family, in turn; with fewer, each
    /// carries several, so every family is on the web. With text traps
    /// every trap host carries the three generators, as one blog would.
    pub fn families(&self, h: usize) -> Vec<Family> {
        let trap_hosts = self.trap_hosts();
        let Some(j) = trap_hosts.iter().position(|t| *t == h) else {
            return Vec::new();
        };
        if self.text {
            return TEXT_FAMILIES.to_vec();
        }
        let m = trap_hosts.len().min(FAMILIES.len());
        FAMILIES
            .iter()
            .enumerate()
            .filter(|(f, _)| f % m == j % m)
            .map(|(_, f)| *f)
            .collect()
    }
}

/// The host with the product section (not a trap host).
pub const PRODUCT_HOST: usize = 2;
/// Product links per list page.
const PRODUCTS_PER_LIST: usize = 50;
/// Pages of the session-id family (`/s/0` .. `/s/19`), whatever their ids.
const SESSION_PAGES: usize = 20;

/// What the server gave for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A page a correct crawl must reach (see [`Web::canonical`]).
    Real,
    /// A page of a trap family.
    Trap,
    /// Anything else: robots.txt, 404s, redirects, duplicates, disallowed pages.
    Other,
}

/// A kind of crawler trap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// `/cal/YYYY/MM/`, linking the months and years around it; any date answers.
    Calendar,
    /// `/shop?color=..&size=..`: six facets of five values, each page
    /// linking more combinations (in the order they were added).
    Facets,
    /// `/s/N;jsessionid=HEX` and `/s/N?sid=HEX`: 20 pages, whose links carry
    /// a fresh session id on every view.
    Session,
    /// `/docs/guide/` linking `guide/`, `api/`, ... relatively, at any depth.
    Relative,
    /// Any unknown path answers 200 with one template and new links.
    Soft404,
    /// `/tag/a+b/`: any set of [`TAGS`], each page linking narrower sets
    /// (one tag appended) and broader ones (one dropped).
    Tags,
    /// `/search?q=a+b`: any words, each page linking related searches (one
    /// word appended).
    Search,
    /// `/day/YYYY-MM-DD/`: any date, each page linking the day and week
    /// before and after, and the next month.
    Days,
}

pub const FAMILIES: [Family; 5] = [
    Family::Calendar,
    Family::Facets,
    Family::Session,
    Family::Relative,
    Family::Soft404,
];

/// The text-rich generators: every page is 3–5 excerpts (20–60 words of a
/// paragraph) copied from the host's real pages, each under a link to its
/// page, ten real pages linked in all, and the family's own links.
pub const TEXT_FAMILIES: [Family; 3] = [Family::Tags, Family::Search, Family::Days];

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Calendar => "calendar",
            Family::Facets => "facets",
            Family::Session => "session ids",
            Family::Relative => "relative repeats",
            Family::Soft404 => "soft 404",
            Family::Tags => "tag intersections",
            Family::Search => "site search",
            Family::Days => "calendar days",
        }
    }

    /// The path real pages link the family by (`salt` varies the session id).
    fn entry(self, salt: u64) -> String {
        match self {
            Family::Calendar => "/cal/2024/06/".to_string(),
            Family::Facets => "/shop".to_string(),
            Family::Session => format!("/s/0;jsessionid={}", hex(salt)),
            Family::Relative => "/docs/guide/".to_string(),
            Family::Soft404 => "/archive/old-news".to_string(),
            Family::Tags => format!(
                "/tag/{}+{}/",
                TAGS[(salt % 15) as usize],
                TAGS[15 + (salt >> 8) as usize % 15]
            ),
            Family::Search => format!(
                "/search?q={}+{}",
                WORDS[(salt % WORDS.len() as u64) as usize],
                WORDS[((salt >> 8) % WORDS.len() as u64) as usize]
            ),
            Family::Days => day_path(DAY_ONE + (salt % 365) as i64),
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

/// The generated web: per host, its pages by path; trap pages are
/// computed from their path when asked for ([`Web::serve`]).
pub struct Web {
    pub port: u16,
    pub ips: Vec<Ipv4Addr>,
    pub pages: Vec<HashMap<String, Response>>,
    pub preset: Preset,
    seed: u64,
    /// Trap families per host.
    families: Vec<Vec<Family>>,
    /// Views of session-family pages: each gets fresh session ids.
    views: AtomicU64,
}

pub fn host_ip(h: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 20 + (h / 250) as u8, (h % 250 + 1) as u8)
}

/// The words of every real page's text (title, headings, paragraphs, anchors).
pub const WORDS: &[&str] = &[
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
            let products = if h == PRODUCT_HOST && preset.products() > 0 {
                " <a href=\"/products/1\">products</a>"
            } else {
                ""
            };
            site.insert(
                "/".to_string(),
                html(format!(
                    "<!doctype html><html><head><title>host {h}</title></head><body>\
                     <nav><a href=\"/p/0\">start</a>{products}</nav><a href=\"{next}/\">next host</a></body></html>"
                )),
            );
            for i in 0..preset.pages {
                // Drawn apart from `rng`, so the real web is the same with traps or without.
                let trap_link = trap_entry(preset, &origins, seed, h, i);
                let meta = text_trap_meta(preset, seed, h, i);
                let body = page_html(
                    &mut rng,
                    h,
                    i,
                    preset,
                    &origins,
                    trap_link.as_deref(),
                    meta.as_deref(),
                );
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
            if h == PRODUCT_HOST {
                add_products(&mut site, preset, seed);
            }
            pages.push(site);
        }
        let families = (0..preset.hosts).map(|h| preset.families(h)).collect();
        Web {
            port,
            ips,
            pages,
            preset,
            seed,
            families,
            views: AtomicU64::new(0),
        }
    }

    pub fn seed_url(&self) -> String {
        format!("http://{}:{}/", self.ips[0], self.port)
    }

    /// Pages a correct crawl reaches: every root and every `/p/N`; with
    /// traps also the product section, `/products/K` and `/product/N`.
    pub fn canonical(&self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for h in 0..self.preset.hosts {
            out.push((h, "/".to_string()));
            for i in 0..self.preset.pages {
                out.push((h, format!("/p/{i}")));
            }
        }
        for k in 1..=self.preset.product_lists() {
            out.push((PRODUCT_HOST, format!("/products/{k}")));
        }
        for n in 1..=self.preset.products() {
            out.push((PRODUCT_HOST, format!("/product/{n}")));
        }
        out
    }

    /// The trap families of host `h`.
    pub fn families(&self, h: usize) -> &[Family] {
        &self.families[h]
    }

    /// What a request for `path` (resolved, with its query) on host `h` is.
    pub fn classify(&self, h: usize, path: &str) -> Class {
        match self.pages[h].get(path) {
            Some(page) if page.status == 200 && is_real_path(path) => Class::Real,
            Some(_) => Class::Other,
            None if self.parse_trap(h, path).is_some() => Class::Trap,
            None => Class::Other,
        }
    }

    /// The answer to `path` on host `h` (`None`: 404) and what it is.
    pub fn serve(&self, h: usize, path: &str) -> (Class, Option<Response>) {
        if let Some(page) = self.pages[h].get(path) {
            return (self.classify(h, path), Some(page.clone()));
        }
        match self.parse_trap(h, path) {
            Some(trap) => (Class::Trap, Some(html(self.render_trap(h, &trap)))),
            None => (Class::Other, None),
        }
    }

    /// The trap page `path` is on host `h`, if any: the host's families
    /// first, then its soft 404 (any other path).
    fn parse_trap(&self, h: usize, path: &str) -> Option<TrapPage> {
        let families = &self.families[h];
        for family in families {
            let page = match family {
                Family::Calendar => parse_calendar(path).map(|(y, m)| TrapPage::Calendar(y, m)),
                Family::Facets => parse_facets(path).map(TrapPage::Facets),
                Family::Session => parse_session(path).map(TrapPage::Session),
                Family::Relative => parse_relative(path).map(TrapPage::Relative),
                Family::Soft404 => None,
                Family::Tags => parse_tags(path).map(TrapPage::Tags),
                Family::Search => parse_search(path).map(TrapPage::Search),
                Family::Days => parse_day(path).map(TrapPage::Day),
            };
            if page.is_some() {
                return page;
            }
        }
        families
            .contains(&Family::Soft404)
            .then(|| TrapPage::Soft404(path.to_string()))
    }

    fn render_trap(&self, h: usize, trap: &TrapPage) -> String {
        let pages = self.preset.pages;
        let salt = hash(self.seed, &[h as u64], "");
        match trap {
            TrapPage::Calendar(y, m) => {
                let (py, pm) = if *m == 1 { (y - 1, 12) } else { (*y, m - 1) };
                let (ny, nm) = if *m == 12 { (y + 1, 1) } else { (*y, m + 1) };
                let mut links = Vec::new();
                if py > 0 {
                    links.push((format!("/cal/{py}/{pm:02}/"), "previous month".to_string()));
                }
                links.push((format!("/cal/{ny}/{nm:02}/"), "next month".to_string()));
                if *y > 1 {
                    links.push((
                        format!("/cal/{}/{m:02}/", y - 1),
                        "previous year".to_string(),
                    ));
                }
                links.push((format!("/cal/{}/{m:02}/", y + 1), "next year".to_string()));
                links.push(("/".to_string(), "home".to_string()));
                // A calendar repeats its template: a month's page says what
                // the same month said the year before, but for the dates.
                let title = format!("Events of {y}-{m:02}");
                trap_html(&title, &links, hash(salt, &[u64::from(*m)], "calendar"))
            }
            TrapPage::Facets(set) => {
                let key = hash(salt, &[], &facets_query(set));
                let mut links = Vec::new();
                for (f, (name, values)) in FACETS.iter().enumerate() {
                    match set.iter().position(|(g, _)| *g == f) {
                        None => {
                            // Two values of this facet, added after the others.
                            let v1 = (hash(key, &[f as u64], "") % 5) as usize;
                            for v in [v1, (v1 + 2) % 5] {
                                let mut next = set.clone();
                                next.push((f, v));
                                links.push((shop_href(&next), format!("{name}: {}", values[v])));
                            }
                        }
                        Some(at) => {
                            let mut other = set.clone();
                            other[at].1 = (other[at].1 + 1) % 5;
                            links.push((
                                shop_href(&other),
                                format!("{name}: {}", values[other[at].1]),
                            ));
                            let mut fewer = set.clone();
                            fewer.remove(at);
                            links.push((shop_href(&fewer), format!("any {name}")));
                        }
                    }
                }
                links.push(("/".to_string(), "home".to_string()));
                let title = if set.is_empty() {
                    "Shop: all items".to_string()
                } else {
                    format!("Shop: {}", facets_query(set).replace('&', ", "))
                };
                // Filters reorder and trim one listing: the same items' text
                // whatever the query.
                trap_html(&title, &links, hash(salt, &[], "shop"))
            }
            TrapPage::Session(n) => {
                // The same page whatever its session id; the ids in its links
                // are new on every view.
                let view = self.views.fetch_add(1, Ordering::Relaxed);
                let key = hash(salt, &[*n as u64], "");
                let mut links = Vec::new();
                for k in 0..6u64 {
                    let m = (hash(key, &[k], "") % SESSION_PAGES as u64) as usize;
                    let id = hex(hash(salt, &[view, k], "session"));
                    let href = if k % 2 == 0 {
                        format!("/s/{m};jsessionid={id}")
                    } else {
                        format!("/s/{m}?sid={id}")
                    };
                    links.push((href, format!("account page {m}")));
                }
                links.push((format!("/p/{}", (key % pages as u64)), "news".to_string()));
                links.push(("/".to_string(), "home".to_string()));
                trap_html(&format!("Your account, page {n}"), &links, key)
            }
            TrapPage::Relative(segments) => {
                // A server that ignores the path before the last segment:
                // every depth is the same page, and its relative links go one deeper.
                let last = *segments.last().unwrap_or(&0);
                let mut links: Vec<(String, String)> = DOC_SEGMENTS
                    .iter()
                    .map(|s| (format!("{s}/"), format!("the {s}")))
                    .collect();
                links.push(("/".to_string(), "home".to_string()));
                let title = format!("Documentation: {}", DOC_SEGMENTS[last]);
                trap_html(&title, &links, hash(salt, &[last as u64], "docs"))
            }
            TrapPage::Soft404(path) => {
                // One template; only the links differ, new ones for every path.
                let key = hash(salt, &[], path);
                let mut links = Vec::new();
                for k in 0..5u64 {
                    let r = hash(key, &[k], "");
                    let a = WORDS[(r % WORDS.len() as u64) as usize];
                    let b = WORDS[((r >> 16) % WORDS.len() as u64) as usize];
                    links.push((
                        format!("/{a}/{b}-{}", (r >> 32) % 100_000),
                        format!("{a} {b}"),
                    ));
                }
                links.push(("/".to_string(), "home".to_string()));
                trap_html("Sorry, we could not find that page", &links, salt)
            }
            TrapPage::Tags(set) => {
                let names: Vec<&str> = set.iter().map(|t| TAGS[*t]).collect();
                let key = hash(salt, &[], &names.join("+"));
                let mut links = Vec::new();
                for k in 0..5u64 {
                    let t = (hash(key, &[k], "") % TAGS.len() as u64) as usize;
                    if !set.contains(&t) {
                        let narrower = format!("{}+{}", names.join("+"), TAGS[t]);
                        links.push((format!("/tag/{narrower}/"), narrower.replace('+', " + ")));
                    }
                }
                if set.len() > 1 {
                    for t in &names {
                        let broader: Vec<&str> = names.iter().copied().filter(|u| u != t).collect();
                        links.push((format!("/tag/{}/", broader.join("+")), broader.join(" + ")));
                    }
                }
                let title = format!("Posts tagged {}", names.join(" + "));
                self.excerpts_html(h, key, &title, "Narrow down", &links)
            }
            TrapPage::Search(query) => {
                let key = hash(salt, &[], &query.join("+"));
                let links: Vec<(String, String)> = (0..5u64)
                    .map(|k| {
                        let w = WORDS[(hash(key, &[k], "") % WORDS.len() as u64) as usize];
                        (
                            format!("/search?q={}+{w}", query.join("+")),
                            format!("{} {w}", query.join(" ")),
                        )
                    })
                    .collect();
                let title = format!("Search results for {}", query.join(" "));
                self.excerpts_html(h, key, &title, "Related searches", &links)
            }
            TrapPage::Day(day) => {
                let key = hash(salt, &[*day as u64], "day");
                let (y, m, d) = civil_from_days(*day);
                let next_month = if m == 12 {
                    days_from_civil(y + 1, 1, d.min(28))
                } else {
                    days_from_civil(y, m + 1, d.min(28))
                };
                let links = [
                    (day - 1, "previous day"),
                    (day + 1, "next day"),
                    (day - 7, "previous week"),
                    (day + 7, "next week"),
                    (next_month, "next month"),
                ]
                .map(|(day, text)| (day_path(day), text.to_string()));
                let title = format!("Events on {y:04}-{m:02}-{d:02}");
                self.excerpts_html(h, key, &title, "Other days", &links)
            }
        }
    }

    /// A text-rich generator's page on host `h`, drawn from `key`: 3–5
    /// excerpts copied from real pages of the host (each under a link to
    /// its page), links to ten real pages in all, then `heading` over the
    /// family's own `links`.
    fn excerpts_html(
        &self,
        h: usize,
        key: u64,
        title: &str,
        heading: &str,
        links: &[(String, String)],
    ) -> String {
        let mut rng = fastrand::Rng::with_seed(key);
        let pages = self.preset.pages;
        let mut s = format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
             <body><nav><a href=\"/\">home</a> <a href=\"/p/0\">first</a></nav><h1>{title}</h1>"
        );
        let mut linked = Vec::new();
        for _ in 0..3 + rng.usize(..3) {
            let k = rng.usize(..pages);
            let text = excerpt(&self.pages[h][&format!("/p/{k}")].body, &mut rng);
            s.push_str(&format!(
                "<h2><a href=\"/p/{k}\">Page {k}</a></h2><p>… {text} …</p>"
            ));
            if !linked.contains(&k) {
                linked.push(k);
            }
        }
        s.push_str("<h2>More pages</h2><ul>");
        while linked.len() < 10.min(pages) {
            let k = rng.usize(..pages);
            if !linked.contains(&k) {
                linked.push(k);
                s.push_str(&format!("<li><a href=\"/p/{k}\">Page {k}</a></li>"));
            }
        }
        s.push_str(&format!("</ul><h2>{heading}</h2><ul>"));
        for (href, text) in links {
            s.push_str(&format!("<li><a href=\"{href}\">{text}</a></li>"));
        }
        s.push_str("</ul><footer>© the synthetic web</footer></body></html>");
        s
    }
}

/// 20–60 consecutive words of the visible text of one paragraph of a real
/// page (its words and link texts, tags left out), as a reader sees them.
fn excerpt(body: &[u8], rng: &mut fastrand::Rng) -> String {
    let page = std::str::from_utf8(body).unwrap_or_default();
    let paragraphs: Vec<&str> = page
        .split("<p class=\"c\">")
        .skip(1)
        .filter_map(|p| p.find("</p>").map(|end| &p[..end]))
        .collect();
    if paragraphs.is_empty() {
        return String::new();
    }
    let paragraph = paragraphs[rng.usize(..paragraphs.len())];
    let mut visible = String::with_capacity(paragraph.len());
    let mut in_tag = false;
    for c in paragraph.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                visible.push(' ');
            }
            c if !in_tag => visible.push(c),
            _ => {}
        }
    }
    let words: Vec<&str> = visible.split_whitespace().collect();
    let n = (20 + rng.usize(..41)).min(words.len());
    let at = rng.usize(..=words.len() - n);
    words[at..at + n].join(" ")
}

/// A page of a trap family, parsed from its path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum TrapPage {
    /// Year, month.
    Calendar(u32, u32),
    /// (facet, value) in the order of the query.
    Facets(Vec<(usize, usize)>),
    /// The page number; any session id.
    Session(usize),
    /// The segments after `/docs/`.
    Relative(Vec<usize>),
    /// The path.
    Soft404(String),
    /// Indexes into [`TAGS`], in the order of the path.
    Tags(Vec<usize>),
    /// The query's words.
    Search(Vec<String>),
    /// A day number (days since 1970-01-01).
    Day(i64),
}

impl TrapPage {
    #[cfg(test)]
    fn family(&self) -> Family {
        match self {
            TrapPage::Calendar(..) => Family::Calendar,
            TrapPage::Facets(_) => Family::Facets,
            TrapPage::Session(_) => Family::Session,
            TrapPage::Relative(_) => Family::Relative,
            TrapPage::Soft404(_) => Family::Soft404,
            TrapPage::Tags(_) => Family::Tags,
            TrapPage::Search(_) => Family::Search,
            TrapPage::Day(_) => Family::Days,
        }
    }
}

/// Static paths that are real pages when they answer 200.
fn is_real_path(path: &str) -> bool {
    path == "/"
        || path.starts_with("/p/")
        || path.starts_with("/product/")
        || path.starts_with("/products/")
}

/// `/cal/YYYY/MM/`, any year from 1, months `01`..`12`.
fn parse_calendar(path: &str) -> Option<(u32, u32)> {
    let (y, m) = path
        .strip_prefix("/cal/")?
        .strip_suffix('/')?
        .split_once('/')?;
    let year: u32 = y.parse().ok()?;
    let month: u32 = m.parse().ok()?;
    // One spelling per date (no `+`, no leading zeros; months in two digits),
    // and years stay far from overflow.
    ((1..1_000_000).contains(&year)
        && year.to_string() == y
        && (1..=12).contains(&month)
        && format!("{month:02}") == m)
        .then_some((year, month))
}

const FACETS: [(&str, [&str; 5]); 6] = [
    ("color", ["red", "blue", "green", "black", "white"]),
    ("size", ["xs", "s", "m", "l", "xl"]),
    ("sort", ["price", "name", "newest", "rating", "popular"]),
    ("brand", ["acme", "globex", "initech", "umbrella", "hooli"]),
    ("material", ["cotton", "wool", "linen", "silk", "denim"]),
    ("page", ["1", "2", "3", "4", "5"]),
];

/// `/shop` with any known facets, each at most once, in any order.
fn parse_facets(path: &str) -> Option<Vec<(usize, usize)>> {
    let (p, q) = path.split_once('?').unwrap_or((path, ""));
    if p != "/shop" {
        return None;
    }
    let mut set: Vec<(usize, usize)> = Vec::new();
    for pair in q.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=')?;
        let f = FACETS.iter().position(|(name, _)| *name == k)?;
        if set.iter().any(|(g, _)| *g == f) {
            return None;
        }
        set.push((f, FACETS[f].1.iter().position(|x| *x == v)?));
    }
    Some(set)
}

fn facets_query(set: &[(usize, usize)]) -> String {
    set.iter()
        .map(|(f, v)| format!("{}={}", FACETS[*f].0, FACETS[*f].1[*v]))
        .collect::<Vec<_>>()
        .join("&")
}

/// A link to a facet set as a page writes it (`&` escaped in the attribute).
fn shop_href(set: &[(usize, usize)]) -> String {
    if set.is_empty() {
        "/shop".to_string()
    } else {
        format!("/shop?{}", facets_query(set).replace('&', "&amp;"))
    }
}

/// `/s/N`, `/s/N;jsessionid=HEX`, `/s/N?sid=HEX` (or both), N < 20.
fn parse_session(path: &str) -> Option<usize> {
    let (p, q) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    if let Some(q) = q {
        is_hex(q.strip_prefix("sid=")?).then_some(())?;
    }
    let segment = p.strip_prefix("/s/")?;
    let n = match segment.split_once(';') {
        Some((n, id)) => {
            is_hex(id.strip_prefix("jsessionid=")?).then_some(())?;
            n
        }
        None => segment,
    };
    let page: usize = n.parse().ok()?;
    (page < SESSION_PAGES && page.to_string() == n).then_some(page)
}

fn is_hex(s: &str) -> bool {
    (1..=32).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

const DOC_SEGMENTS: [&str; 4] = ["guide", "intro", "api", "faq"];

/// `/docs/` then any number (at least one) of the doc segments, each with its `/`.
fn parse_relative(path: &str) -> Option<Vec<usize>> {
    path.strip_prefix("/docs/")?
        .strip_suffix('/')?
        .split('/')
        .map(|s| DOC_SEGMENTS.iter().position(|d| *d == s))
        .collect()
}

/// The tags of the text-rich generators.
const TAGS: [&str; 30] = [
    "python", "rust", "web", "cache", "index", "search", "linux", "network", "database", "testing",
    "design", "security", "cloud", "mobile", "audio", "games", "travel", "cooking", "garden",
    "music", "books", "photo", "math", "physics", "history", "art", "film", "health", "news",
    "river",
];

/// `/tag/a+b+…/`: one or more distinct tags.
fn parse_tags(path: &str) -> Option<Vec<usize>> {
    let list = path.strip_prefix("/tag/")?.strip_suffix('/')?;
    let mut set = Vec::new();
    for name in list.split('+') {
        let t = TAGS.iter().position(|x| *x == name)?;
        if set.contains(&t) {
            return None;
        }
        set.push(t);
    }
    Some(set)
}

/// `/search?q=a+b+…`: one or more lowercase words.
fn parse_search(path: &str) -> Option<Vec<String>> {
    let words: Vec<String> = path
        .strip_prefix("/search?q=")?
        .split('+')
        .map(str::to_string)
        .collect();
    words
        .iter()
        .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase()))
        .then_some(words)
}

/// `/day/YYYY-MM-DD/`, any date of the years 1000–9999, as a day number.
fn parse_day(path: &str) -> Option<i64> {
    let date = path.strip_prefix("/day/")?.strip_suffix('/')?;
    let b = date.as_bytes();
    if b.len() != 10
        || b[4] != b'-'
        || b[7] != b'-'
        || !date
            .bytes()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
    {
        return None;
    }
    let (y, m, d): (i64, i64, i64) = (
        date[..4].parse().ok()?,
        date[5..7].parse().ok()?,
        date[8..].parse().ok()?,
    );
    if y < 1000 || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let day = days_from_civil(y, m, d);
    (civil_from_days(day) == (y, m, d)).then_some(day)
}

fn day_path(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("/day/{y:04}-{m:02}-{d:02}/")
}

/// The day of page 0 of a text-trap host; page N is N days later.
const DAY_ONE: i64 = days_from_civil(2023, 6, 1);

/// Days since 1970-01-01 of a proleptic Gregorian date.
const fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// What every real page of a text-trap host carries, as a blog's article
/// does: its day and two tags (`None` elsewhere).
fn text_trap_meta(preset: Preset, seed: u64, h: usize, i: usize) -> Option<String> {
    if !preset.text || preset.families(h).is_empty() {
        return None;
    }
    let key = hash(seed, &[h as u64, i as u64], "tags");
    let a = (key % TAGS.len() as u64) as usize;
    let b = (a + 1 + ((key >> 8) % (TAGS.len() as u64 - 1)) as usize) % TAGS.len();
    let day = day_path(DAY_ONE + i as i64);
    Some(format!(
        "<p class=\"meta\">Posted on <a href=\"{day}\">{}</a>, tagged \
         <a href=\"/tag/{}/\">{}</a>, <a href=\"/tag/{}/\">{}</a></p>",
        &day[5..15],
        TAGS[a],
        TAGS[a],
        TAGS[b],
        TAGS[b]
    ))
}

/// The link a page of the 1% carries to a trap (`None` on the others):
/// pages `i % 100 == 11` of every host. A trap host links its own
/// families, in turn; other hosts link a trap host's, in turn.
fn trap_entry(preset: Preset, origins: &[String], seed: u64, h: usize, i: usize) -> Option<String> {
    if i % 100 != 11 {
        return None;
    }
    let trap_hosts = preset.trap_hosts();
    if trap_hosts.is_empty() {
        return None;
    }
    let slot = i / 100;
    let salt = hash(seed, &[h as u64, i as u64], "entry");
    if !preset.families(h).is_empty() {
        let families = preset.families(h);
        return Some(families[slot % families.len()].entry(salt));
    }
    let n = h + slot;
    let t = trap_hosts[n % trap_hosts.len()];
    let families = preset.families(t);
    let entry = families[n / trap_hosts.len() % families.len()].entry(salt);
    Some(format!("{}{entry}", origins[t]))
}

/// The product section of the product host: list pages `/products/1..=L`
/// of 50 links each, and `/product/1..=N`, each with words of its own.
fn add_products(site: &mut HashMap<String, Response>, preset: Preset, seed: u64) {
    let n = preset.products();
    let lists = preset.product_lists();
    let name = |i: usize| {
        let mut rng = fastrand::Rng::with_seed(hash(seed, &[i as u64], "product"));
        made_up_word(&mut rng)
    };
    for k in 1..=lists {
        let mut s = format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>Catalogue, page {k} of {lists}</title></head>\
             <body><nav><a href=\"/\">home</a> <a href=\"/products/1\">first</a>"
        );
        if k > 1 {
            s.push_str(&format!(" <a href=\"/products/{}\">previous</a>", k - 1));
        }
        for j in k.saturating_sub(3).max(1)..=(k + 3).min(lists) {
            s.push_str(&format!(" <a href=\"/products/{j}\">{j}</a>"));
        }
        if k < lists {
            s.push_str(&format!(" <a href=\"/products/{}\">next</a>", k + 1));
        }
        s.push_str(&format!(
            " <a href=\"/products/{lists}\">last</a></nav><h1>Catalogue, page {k}</h1><ul>"
        ));
        for i in (k - 1) * PRODUCTS_PER_LIST + 1..=(k * PRODUCTS_PER_LIST).min(n) {
            s.push_str(&format!(
                "<li><a href=\"/product/{i}\">{}</a></li>",
                name(i)
            ));
        }
        s.push_str("</ul></body></html>");
        site.insert(format!("/products/{k}"), html(s));
    }
    for i in 1..=n {
        let mut rng = fastrand::Rng::with_seed(hash(seed, &[i as u64], "product"));
        let title = made_up_word(&mut rng);
        // A vocabulary of its own: no two product pages read alike.
        let vocabulary: Vec<String> = (0..40).map(|_| made_up_word(&mut rng)).collect();
        let list = (i - 1) / PRODUCTS_PER_LIST + 1;
        let mut s = format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}, product {i}</title></head>\
             <body><nav><a href=\"/\">home</a> <a href=\"/products/{list}\">catalogue</a>"
        );
        if i > 1 {
            s.push_str(&format!(" <a href=\"/product/{}\">previous</a>", i - 1));
        }
        if i < n {
            s.push_str(&format!(" <a href=\"/product/{}\">next</a>", i + 1));
        }
        s.push_str(&format!("</nav><h1>{title}</h1>"));
        for _ in 0..3 + rng.usize(..5) {
            s.push_str("<p>");
            for w in 0..40 + rng.usize(..60) {
                if w > 0 {
                    s.push(' ');
                }
                s.push_str(&vocabulary[rng.usize(..vocabulary.len())]);
            }
            s.push_str("</p>");
        }
        s.push_str("<h2>Related</h2><ul>");
        for _ in 0..3 {
            let r = 1 + rng.usize(..n);
            s.push_str(&format!(
                "<li><a href=\"/product/{r}\">{}</a></li>",
                name(r)
            ));
        }
        s.push_str(&format!(
            "</ul><p><a href=\"/p/{}\">news</a></p></body></html>",
            rng.usize(..preset.pages)
        ));
        site.insert(format!("/product/{i}"), html(s));
    }
}

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "bra", "cle", "dri", "fo", "gu", "ha",
    "jo", "ki", "lu", "mo", "nu", "pe", "qua", "ri", "so", "tu", "vi", "wa", "xe", "yo", "zu",
    "ar", "el", "in", "on", "us",
];

fn made_up_word(rng: &mut fastrand::Rng) -> String {
    (0..2 + rng.usize(..3))
        .map(|_| SYLLABLES[rng.usize(..SYLLABLES.len())])
        .collect()
}

/// A trap page: a title, its links, and 3–5 KB of words drawn from `key`.
fn trap_html(title: &str, links: &[(String, String)], key: u64) -> String {
    let mut rng = fastrand::Rng::with_seed(key);
    let mut s = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body><nav><a href=\"/\">home</a></nav><h1>{title}</h1>"
    );
    let target = s.len() + 3 * 1024 + rng.usize(..2 * 1024);
    let mut links = links.iter();
    while s.len() < target || !links.as_slice().is_empty() {
        s.push_str("<p>");
        let n = 40 + rng.usize(..40);
        words(&mut rng, n, &mut s);
        if let Some((href, text)) = links.next() {
            s.push_str(&format!(" <a href=\"{href}\">{text}</a>"));
        }
        s.push_str("</p>");
    }
    s.push_str("<footer>© the synthetic web</footer></body></html>");
    s
}

/// FNV-1a over `numbers` and `text`, then splitmix64: a stable hash (std's
/// may change between releases).
fn hash(seed: u64, numbers: &[u64], text: &str) -> u64 {
    let mut x: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    let bytes = numbers
        .iter()
        .flat_map(|n| n.to_le_bytes())
        .chain(text.bytes());
    for b in bytes {
        x ^= u64::from(b);
        x = x.wrapping_mul(0x0100_0000_01b3);
    }
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn hex(x: u64) -> String {
    format!("{x:016X}")
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
    trap_link: Option<&str>,
    meta: Option<&str>,
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
    if let Some(link) = trap_link {
        s.push_str(&format!("<p><a href=\"{link}\">see also</a></p>"));
    }
    if let Some(meta) = meta {
        s.push_str(meta);
    }
    s.push_str("<footer><a href=\"/\">home</a> © the synthetic web</footer></body></html>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashSet, VecDeque};

    const SEED: u64 = 42;
    const PORT: u16 = 8080;

    /// Big enough for two trap hosts (5 and 15), the product host and two
    /// pages of the 1% per host; small enough for a debug build.
    fn preset(traps: bool) -> Preset {
        Preset {
            hosts: 16,
            pages: 120,
            traps,
            text: false,
        }
    }

    /// Five trap hosts (5, 15, .., 45), one family each.
    fn one_family_each() -> Web {
        let preset = Preset {
            hosts: 50,
            pages: 20,
            traps: true,
            text: false,
        };
        Web::generate(preset, PORT, SEED)
    }

    fn body(r: &Response) -> String {
        String::from_utf8(r.body.to_vec()).unwrap()
    }

    fn get(web: &Web, h: usize, path: &str) -> (Class, Option<String>) {
        let (class, page) = web.serve(h, path);
        (class, page.as_ref().map(body))
    }

    /// Every href of a page, entities decoded.
    fn hrefs(body: &str) -> Vec<String> {
        body.split("href=\"")
            .skip(1)
            .map(|rest| rest[..rest.find('"').unwrap()].replace("&amp;", "&"))
            .collect()
    }

    /// A link resolved against the page it is on, as (host, path?query).
    fn target(web: &Web, h: usize, path: &str, href: &str) -> Option<(usize, String)> {
        let origin = |h: usize| format!("http://{}:{}", web.ips[h], web.port);
        let base = url::Url::parse(&format!("{}{path}", origin(h))).unwrap();
        let url = base.join(href).ok()?;
        let to = format!("http://{}:{}", url.host_str()?, url.port()?);
        let host = (0..web.preset.hosts).find(|h| origin(*h) == to)?;
        let mut p = url.path().to_string();
        if let Some(q) = url.query().filter(|q| !q.is_empty()) {
            p.push('?');
            p.push_str(q);
        }
        Some((host, p))
    }

    fn host_with(web: &Web, family: Family) -> usize {
        (0..web.preset.hosts)
            .find(|h| web.families(*h).contains(&family))
            .unwrap()
    }

    /// Walks same-host links breadth first from `start`, at most `limit`
    /// pages; every page reached must answer, as a trap or a real page.
    fn walk(web: &Web, h: usize, start: &str, limit: usize) -> HashSet<String> {
        let mut seen = HashSet::from([start.to_string()]);
        let mut queue = VecDeque::from([start.to_string()]);
        let mut traps = HashSet::new();
        while let Some(path) = queue.pop_front() {
            let (class, page) = get(web, h, &path);
            assert_ne!(class, Class::Other, "{path} on host {h}");
            assert_eq!(class, web.classify(h, &path), "{path}");
            if class != Class::Trap {
                continue;
            }
            traps.insert(path.clone());
            if traps.len() >= limit {
                break;
            }
            for href in hrefs(&page.unwrap()) {
                if let Some((th, tp)) = target(web, h, &path, &href)
                    && th == h
                    && seen.insert(tp.clone())
                {
                    queue.push_back(tp);
                }
            }
        }
        traps
    }

    #[test]
    fn presets() {
        let small = Preset::named("small").unwrap();
        assert_eq!((small.hosts, small.pages, small.traps), (20, 250, false));
        assert_eq!(small.products(), 0);
        assert!(small.trap_hosts().is_empty());
        let st = Preset::named("small-traps").unwrap();
        assert_eq!((st.hosts, st.pages, st.traps), (20, 250, true));
        assert_eq!((st.products(), st.product_lists()), (500, 10));
        assert_eq!(st.trap_hosts(), vec![5, 15]);
        use Family::*;
        assert_eq!(st.families(5), vec![Calendar, Session, Soft404]);
        assert_eq!(st.families(15), vec![Facets, Relative]);
        assert!(st.families(PRODUCT_HOST).is_empty());
        let lt = Preset::named("large-traps").unwrap();
        assert_eq!((lt.products(), lt.product_lists()), (2000, 40));
        assert_eq!(lt.trap_hosts().len(), 10);
        for (j, h) in lt.trap_hosts().into_iter().enumerate() {
            assert_eq!(lt.families(h), vec![FAMILIES[j % 5]]);
        }
        assert!(!st.text && !lt.text);
        let stt = Preset::named("small-text-traps").unwrap();
        assert_eq!(
            (stt.hosts, stt.pages, stt.traps, stt.text),
            (20, 250, true, true)
        );
        assert_eq!((stt.products(), stt.product_lists()), (500, 10));
        assert_eq!(stt.trap_hosts(), vec![5, 15]);
        assert_eq!(stt.families(5), vec![Tags, Search, Days]);
        assert_eq!(stt.families(15), vec![Tags, Search, Days]);
        assert!(stt.families(PRODUCT_HOST).is_empty());
        let ltt = Preset::named("large-text-traps").unwrap();
        assert_eq!(
            (ltt.hosts, ltt.pages, ltt.traps, ltt.text),
            (100, 1000, true, true)
        );
        assert_eq!(ltt.trap_hosts().len(), 10);
        assert!(Preset::named("medium").is_none());
        assert!(Preset::named("large-traps-traps").is_none());
        assert!(Preset::named("text-traps").is_none());
        for name in PRESETS {
            assert!(Preset::named(name).is_some(), "{name}");
        }
    }

    /// The traps add one link to 1% of the pages and a link on the product
    /// host's root; the rest of the real web is byte for byte the same.
    #[test]
    fn real_web_unchanged_by_traps() {
        let plain = Web::generate(preset(false), PORT, SEED);
        let traps = Web::generate(preset(true), PORT, SEED);
        let mut with_link = 0;
        for h in 0..plain.preset.hosts {
            for (path, page) in &plain.pages[h] {
                let other = traps.pages[h].get(path).unwrap();
                assert_eq!(page.status, other.status);
                assert_eq!(page.location, other.location);
                let (a, b) = (body(page), body(other));
                if a == b {
                    continue;
                }
                if path == "/" {
                    assert_eq!(h, PRODUCT_HOST);
                    assert_eq!(b.replace(" <a href=\"/products/1\">products</a>", ""), a);
                    continue;
                }
                let start = b.find("<p><a href=\"").unwrap();
                let end = start + b[start..].find("</p>").unwrap() + 4;
                assert!(b[start..end].ends_with(">see also</a></p>"));
                assert_eq!(format!("{}{}", &b[..start], &b[end..]), a, "{path}");
                with_link += 1;
            }
        }
        // Pages 11 and 111 of each of the 16 hosts.
        assert_eq!(with_link, 32);
    }

    #[test]
    fn canonical_pages_are_real() {
        let web = Web::generate(preset(true), PORT, SEED);
        let canonical = web.canonical();
        assert_eq!(canonical.len(), 16 * 121 + 240 + 5);
        for (h, path) in &canonical {
            let (class, page) = get(&web, *h, path);
            assert_eq!(class, Class::Real, "{path} on host {h}");
            assert!(page.is_some());
        }
        let real = (0..16)
            .flat_map(|h| web.pages[h].keys().map(move |p| (h, p)))
            .filter(|(h, p)| web.classify(*h, p) == Class::Real)
            .count();
        assert_eq!(real, canonical.len());
        // Everything else static is other: robots.txt, redirects, duplicates, disallowed.
        for path in ["/robots.txt", "/r/3", "/dup/7", "/private/1"] {
            assert_eq!(web.classify(3, path), Class::Other, "{path}");
        }
        assert_eq!(web.classify(3, "/missing/1"), Class::Other);
        assert_eq!(get(&web, 3, "/missing/1").1, None);
    }

    #[test]
    fn trap_links_from_one_percent_of_pages() {
        let web = Web::generate(preset(true), PORT, SEED);
        let mut entries = HashSet::new();
        for h in 0..16 {
            for i in 0..120 {
                let path = format!("/p/{i}");
                let page = body(&web.pages[h][&path]);
                let see_also = page.rfind("<p><a href=\"").and_then(|at| {
                    let rest = &page[at + 12..];
                    let href = &rest[..rest.find('"').unwrap()];
                    rest.contains("\">see also</a>").then(|| href.to_string())
                });
                assert_eq!(see_also.is_some(), i % 100 == 11, "{path} on host {h}");
                if let Some(href) = &see_also {
                    let (th, tp) = target(&web, h, &path, href).unwrap();
                    let trap = web.parse_trap(th, &tp).expect("a trap page");
                    assert_eq!(web.classify(th, &tp), Class::Trap);
                    if web.families(h).is_empty() {
                        assert_ne!(th, h);
                    } else {
                        assert_eq!(th, h);
                    }
                    entries.insert((th, trap.family()));
                }
                // Its other links reach no trap, but broken links on the soft-404 host.
                for href in hrefs(&page)
                    .into_iter()
                    .filter(|l| Some(l) != see_also.as_ref())
                {
                    if let Some((th, tp)) = target(&web, h, &path, &href) {
                        assert!(
                            web.classify(th, &tp) != Class::Trap
                                || web.families(th).contains(&Family::Soft404),
                            "{href} on {path} of host {h}"
                        );
                    }
                }
            }
        }
        // Every family of both trap hosts is linked.
        assert_eq!(entries.len(), 5);
        // Robots.txt disallows none of them.
        let robots = body(&web.pages[5]["/robots.txt"]);
        for entry in ["/cal/", "/shop", "/s/", "/docs/", "/archive/"] {
            assert!(!robots.contains(entry));
        }
    }

    #[test]
    fn calendar_answers_any_month() {
        let web = one_family_each();
        let h = host_with(&web, Family::Calendar);
        let (class, page) = get(&web, h, "/cal/2024/06/");
        assert_eq!(class, Class::Trap);
        let links: Vec<_> = hrefs(&page.unwrap());
        for l in [
            "/cal/2024/05/",
            "/cal/2024/07/",
            "/cal/2023/06/",
            "/cal/2025/06/",
        ] {
            assert!(links.contains(&l.to_string()), "{l}");
        }
        // Generated on the fly, far from the entry.
        assert!(!web.pages[h].contains_key("/cal/9999/12/"));
        let links = hrefs(&get(&web, h, "/cal/9999/12/").1.unwrap());
        assert!(links.contains(&"/cal/10000/01/".to_string()));
        assert_eq!(get(&web, h, "/cal/1/01/").0, Class::Trap);
        for bad in [
            "/cal/2024/13/",
            "/cal/2024/6/",
            "/cal/02024/06/",
            "/cal/0/01/",
            "/cal/2024/06",
        ] {
            assert_eq!(web.classify(h, bad), Class::Other, "{bad}");
            assert!(web.serve(h, bad).1.is_none(), "{bad}");
        }
        // Only on its host.
        assert_eq!(web.classify(3, "/cal/2024/06/"), Class::Other);
        // Where the host also answers soft 404s, a bad date is one.
        let both = Web::generate(preset(true), PORT, SEED);
        assert_eq!(
            both.families(5),
            [Family::Calendar, Family::Session, Family::Soft404]
        );
        assert_eq!(both.classify(5, "/cal/2024/06/"), Class::Trap);
        assert_eq!(both.classify(5, "/cal/2024/13/"), Class::Trap);
        assert!(matches!(
            both.parse_trap(5, "/cal/2024/13/"),
            Some(TrapPage::Soft404(_))
        ));
        assert_eq!(walk(&web, h, "/cal/2024/06/", 300).len(), 300);
    }

    #[test]
    fn facets_combine() {
        let web = one_family_each();
        let h = host_with(&web, Family::Facets);
        assert_eq!(web.classify(h, "/shop"), Class::Trap);
        assert_eq!(web.classify(h, "/shop?size=m&color=red"), Class::Trap);
        assert_eq!(web.classify(h, "/shop?color=red&size=m"), Class::Trap);
        for bad in [
            "/shop?color=pink",
            "/shop?color=red&color=blue",
            "/shop?x=1",
            "/shops",
        ] {
            assert_eq!(web.classify(h, bad), Class::Other, "{bad}");
        }
        let page = get(&web, h, "/shop?color=red").1.unwrap();
        assert!(page.contains("href=\"/shop?color=red&amp;size="));
        let links = hrefs(&page);
        assert!(links.contains(&"/shop".to_string()));
        assert!(links.contains(&"/shop?color=blue".to_string()));
        assert_eq!(walk(&web, h, "/shop", 500).len(), 500);
        // Bounded: only known facets, each once.
        let all: Vec<(usize, usize)> = (0..6).map(|f| (f, 4)).collect();
        let full = format!("/shop?{}", facets_query(&all));
        assert_eq!(web.classify(h, &full), Class::Trap);
        for href in hrefs(&get(&web, h, &full).1.unwrap()) {
            let (_, p) = target(&web, h, &full, &href).unwrap();
            assert!(p == "/" || parse_facets(&p).unwrap().len() <= 6);
        }
    }

    #[test]
    fn session_ids_fresh_on_every_view() {
        let web = one_family_each();
        let h = host_with(&web, Family::Session);
        for path in [
            "/s/3",
            "/s/3;jsessionid=0123ABCDEF",
            "/s/3?sid=ab12",
            "/s/3;jsessionid=FF?sid=ab12",
            "/s/19",
        ] {
            assert_eq!(web.classify(h, path), Class::Trap, "{path}");
        }
        for bad in [
            "/s/20",
            "/s/03",
            "/s/3;jsessionid=xyz",
            "/s/3?sid=",
            "/s/3?page=1",
        ] {
            assert_eq!(web.classify(h, bad), Class::Other, "{bad}");
        }
        let a = get(&web, h, "/s/3;jsessionid=AA").1.unwrap();
        let b = get(&web, h, "/s/3;jsessionid=AA").1.unwrap();
        let c = get(&web, h, "/s/3?sid=bb").1.unwrap();
        let (la, lb) = (hrefs(&a), hrefs(&b));
        assert_ne!(la, lb);
        assert!(la.iter().any(|l| l.contains(";jsessionid=")));
        assert!(la.iter().any(|l| l.contains("?sid=")));
        // Otherwise the same page.
        let strip = |s: &str| {
            let mut out = String::new();
            let mut rest = s;
            while let Some(at) = rest.find([';', '?']) {
                out.push_str(&rest[..at]);
                rest = &rest[at + rest[at..].find('"').unwrap()..];
            }
            out + rest
        };
        assert_eq!(strip(&a), strip(&b));
        assert_eq!(strip(&a), strip(&c));
        assert_eq!(walk(&web, h, "/s/0;jsessionid=1", 300).len(), 300);
    }

    #[test]
    fn relative_links_repeat_segments() {
        let web = one_family_each();
        let h = host_with(&web, Family::Relative);
        let page = get(&web, h, "/docs/guide/").1.unwrap();
        let targets: Vec<_> = hrefs(&page)
            .iter()
            .filter_map(|l| target(&web, h, "/docs/guide/", l))
            .map(|(_, p)| p)
            .collect();
        assert!(targets.contains(&"/docs/guide/guide/".to_string()));
        assert!(targets.contains(&"/docs/guide/api/".to_string()));
        let deep = "/docs/guide/guide/guide/guide/guide/api/";
        assert_eq!(web.classify(h, deep), Class::Trap);
        // The same page at any depth.
        assert_eq!(get(&web, h, deep).1, get(&web, h, "/docs/api/").1);
        for bad in ["/docs/", "/docs/guide", "/docs/blog/"] {
            assert_eq!(web.classify(h, bad), Class::Other, "{bad}");
        }
        assert_eq!(walk(&web, h, "/docs/guide/", 300).len(), 300);
    }

    #[test]
    fn soft_404_answers_everything() {
        let web = one_family_each();
        let h = host_with(&web, Family::Soft404);
        for path in [
            "/missing/3",
            "/anything/at/all",
            "/p/99999",
            "/archive/old-news",
        ] {
            let (class, page) = get(&web, h, path);
            assert_eq!(class, Class::Trap, "{path}");
            assert!(page.is_some());
        }
        let a = get(&web, h, "/x/1").1.unwrap();
        let b = get(&web, h, "/x/2").1.unwrap();
        assert_ne!(hrefs(&a), hrefs(&b));
        // One template: the text without the links is the same.
        let text = |s: &str| {
            s.split("<a ")
                .map(|p| &p[p.find("</a>").map_or(0, |e| e + 4)..])
                .collect::<String>()
        };
        assert_eq!(text(&a), text(&b));
        // Static pages keep their class.
        assert_eq!(web.classify(h, "/p/1"), Class::Real);
        assert_eq!(web.classify(h, "/robots.txt"), Class::Other);
        assert_eq!(web.classify(h, "/r/3"), Class::Other);
        assert_eq!(walk(&web, h, "/archive/old-news", 300).len(), 300);
    }

    #[test]
    fn products_are_distinct_and_linked() {
        let web = Web::generate(preset(true), PORT, SEED);
        let n = web.preset.products();
        let site = &web.pages[PRODUCT_HOST];
        // Every product is linked from a list page, every list page from the first.
        let mut listed = HashSet::new();
        let mut lists = HashSet::from(["/products/1".to_string()]);
        let mut queue = vec!["/products/1".to_string()];
        while let Some(list) = queue.pop() {
            for href in hrefs(&body(&site[&list])) {
                if href.starts_with("/products/") && lists.insert(href.clone()) {
                    queue.push(href);
                } else if href.starts_with("/product/") {
                    listed.insert(href);
                }
            }
        }
        assert_eq!(lists.len(), web.preset.product_lists());
        assert_eq!(listed.len(), n);
        // Different words: any two products share few.
        let words = |i: usize| -> HashSet<String> {
            let b = body(&site[&format!("/product/{i}")]);
            b.split("<p>")
                .skip(1)
                .flat_map(|p| {
                    p[..p.find("</p>").unwrap()]
                        .split(' ')
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        for (i, j) in [(1, 2), (1, 200), (17, 18), (100, 240)] {
            let (a, b) = (words(i), words(j));
            let shared = a.intersection(&b).count();
            assert!(
                shared * 5 < a.len().min(b.len()),
                "{i} and {j} share {shared}"
            );
        }
        // Not on the other hosts.
        assert_eq!(web.classify(3, "/product/1"), Class::Other);
    }

    #[test]
    fn without_traps_nothing_is_a_trap() {
        let web = Web::generate(preset(false), PORT, SEED);
        for h in 0..16 {
            assert!(web.families(h).is_empty());
            for path in [
                "/cal/2024/06/",
                "/shop",
                "/s/0",
                "/docs/guide/",
                "/missing/1",
            ] {
                assert_eq!(web.serve(h, path).0, Class::Other);
            }
        }
        assert_eq!(web.canonical().len(), 16 * 121);
    }

    fn text_preset() -> Preset {
        Preset {
            text: true,
            ..preset(true)
        }
    }

    /// The visible words of a page, tags left out.
    fn visible(page: &str) -> String {
        let mut out = String::new();
        let mut in_tag = false;
        for c in page.chars() {
            match c {
                '<' => in_tag = true,
                '>' => {
                    in_tag = false;
                    out.push(' ');
                }
                c if !in_tag => out.push(c),
                _ => {}
            }
        }
        out.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// Text traps change the real web only by their links: the 1% "see
    /// also" and, on the trap hosts, every page's day and two tags.
    #[test]
    fn text_traps_only_add_links_to_the_real_web() {
        let plain = Web::generate(preset(false), PORT, SEED);
        let text = Web::generate(text_preset(), PORT, SEED);
        let mut with_meta = 0;
        for h in 0..plain.preset.hosts {
            for (path, page) in &plain.pages[h] {
                let mut b = body(&text.pages[h][path]);
                if let Some(start) = b.find("<p class=\"meta\">") {
                    let end = start + b[start..].find("</p>").unwrap() + 4;
                    let meta = b[start..end].to_string();
                    let links = hrefs(&meta);
                    assert_eq!(links.len(), 3, "{meta}");
                    assert!(links[0].starts_with("/day/") && links[1].starts_with("/tag/"));
                    assert_ne!(links[1], links[2]);
                    for l in &links {
                        assert_eq!(text.classify(h, l), Class::Trap, "{l}");
                    }
                    b.replace_range(start..end, "");
                    with_meta += 1;
                }
                if path == "/" && h == PRODUCT_HOST {
                    b = b.replace(" <a href=\"/products/1\">products</a>", "");
                }
                if b != body(page) {
                    let start = b.find("<p><a href=\"").unwrap();
                    let end = start + b[start..].find("</p>").unwrap() + 4;
                    assert!(b[start..end].ends_with(">see also</a></p>"));
                    let href = &hrefs(&b[start..end])[0];
                    let (th, tp) = target(&text, h, path, href).unwrap();
                    assert_eq!(text.classify(th, &tp), Class::Trap, "{href}");
                    b.replace_range(start..end, "");
                }
                assert_eq!(body(page), b, "{path} on host {h}");
            }
        }
        // Every /p/ page of the two trap hosts, and their duplicates.
        assert_eq!(with_meta, 2 * (120 + 3));
        assert_eq!(text.canonical().len(), 16 * 121 + 240 + 5);
        for (h, path) in text.canonical() {
            assert_eq!(text.classify(h, &path), Class::Real);
        }
    }

    #[test]
    fn text_generators_copy_real_pages() {
        let web = Web::generate(text_preset(), PORT, SEED);
        let h = 5;
        let texts: HashMap<String, String> = (0..web.preset.pages)
            .map(|k| {
                let path = format!("/p/{k}");
                let text = visible(&body(&web.pages[h][&path]));
                (path, text)
            })
            .collect();
        for path in [
            "/tag/python/",
            "/tag/python+rust+web/",
            "/search?q=crawler+erlang",
            "/day/2024-03-05/",
            "/day/2024-02-29/",
        ] {
            let (class, page) = get(&web, h, path);
            assert_eq!(class, Class::Trap, "{path}");
            let page = page.unwrap();
            assert_eq!(get(&web, h, path).1.unwrap(), page, "the same every time");
            // Past the nav, which links `/` and `/p/0` as every page's does.
            let links = hrefs(&page[page.find("</nav>").unwrap()..]);
            let real: HashSet<&String> = links.iter().filter(|l| l.starts_with("/p/")).collect();
            assert_eq!(real.len(), 10, "{path}");
            let family: Vec<&String> = links.iter().filter(|l| l.starts_with(&path[..5])).collect();
            assert!(family.len() >= 4, "{path}: {family:?}");
            for l in family {
                assert_eq!(web.classify(h, l), Class::Trap, "{l} from {path}");
            }
            // Each excerpt is 20-60 words of the page its heading links.
            let mut excerpts = 0;
            for part in page.split("<h2><a href=\"").skip(1) {
                let linked = &part[..part.find('"').unwrap()];
                let Some(at) = part.find("<p>… ") else {
                    continue;
                };
                let excerpt = &part[at + "<p>… ".len()..part.find(" …</p>").unwrap()];
                let words = excerpt.split(' ').count();
                assert!((20..=60).contains(&words), "{words} words");
                assert!(texts[linked].contains(excerpt), "verbatim from {linked}");
                excerpts += 1;
            }
            assert!((3..=5).contains(&excerpts), "{path}: {excerpts}");
        }
        assert_ne!(get(&web, h, "/tag/rust/").1, get(&web, h, "/tag/web/").1);
        let next = hrefs(&get(&web, h, "/day/2024-12-31/").1.unwrap());
        assert!(next.contains(&"/day/2025-01-01/".to_string()));
        assert!(next.contains(&"/day/2025-01-28/".to_string()));
        for bad in [
            "/tag/",
            "/tag/python+python/",
            "/tag/nosuchtag/",
            "/tag/python",
            "/search?q=",
            "/search?q=Crawler",
            "/day/2023-02-29/",
            "/day/2024-3-05/",
            "/day/2024-03-05",
        ] {
            assert_eq!(web.classify(h, bad), Class::Other, "{bad}");
            assert!(web.serve(h, bad).1.is_none(), "{bad}");
        }
        // Only on the trap hosts.
        assert_eq!(web.classify(3, "/tag/python/"), Class::Other);
        for entry in ["/tag/python/", "/search?q=crawler", "/day/2024-03-05/"] {
            assert_eq!(walk(&web, h, entry, 300).len(), 300, "{entry}");
        }
    }
}
