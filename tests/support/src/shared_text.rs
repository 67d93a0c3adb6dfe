//! The shared-text web (issue #44): many hosts whose real pages share
//! their paragraphs, as shops, syndicated news and documentation kept for
//! several versions do, beside the text-rich URL generators real blogs
//! have. A trap defence that takes "this page's text is a copy of what the
//! host already served" for a generator would close these hosts' real
//! sections; this web is where that shows.
//!
//! - `hosts` × `pages_per_host` content pages, in sections of about 25
//!   (directories), named in one of four styles by host (`h % 4`):
//!   numbered `/section-{k}/{n}.html`; documentation kept for two
//!   versions, `/{major}.{minor}/{word}/{slug}.html`, each version holding
//!   half the sections under the same words and slugs; word sections
//!   `/{word}/{word}-{word}-{n}`; a catalogue
//!   `/catalog/{word}-{k}/item-{n}`. Numbered, versioned and catalogue
//!   sections are one URL pattern once numbers are abstracted.
//! - `/` links every section's index `/{section}/`. On docs-like hosts
//!   (`h / 4` even) an index lists all its pages; on blog-like ones its
//!   first page and three others, so most pages are found only through
//!   their section's prev/next chain and its pages' links.
//! - A content page has a title of its own (a few words and its number),
//!   then 8–40 KB of paragraphs drawn from ONE pool of [`POOL_PARAGRAPHS`]
//!   paragraphs (40–120 made-up words each): every paragraph of a page
//!   stands on several other pages of its host. Its links: prev/next in
//!   its section, the section's index, home, 3–8 pages of its section,
//!   2–6 of other sections, 1–3 pages of other hosts, in varied textual
//!   forms (absolute, root-relative, relative, with fragments); at low
//!   rates a robots-disallowed `/private/N` and a broken `/missing/N`.
//! - On a tenth of the hosts (`h % 10 == 5`) three generators
//!   ([`crate::text_traps`]) answer any URL of their shape: tag
//!   intersections `/tag/a+b/`, site search `/search?q=w1+w2`, days
//!   `/day/YYYY-MM-DD/`. Each of their pages is
//!   3–5 excerpts (20–60 consecutive words of a paragraph of one of the
//!   host's content pages, under a link to it), links to ten content pages,
//!   and the family's own links. Every real page of such a host links its
//!   day and two tags; page `n % 100 == 11` of every host links a trap
//!   host's generator ("see also").
//!
//! Real pages (roots, section indexes, content pages) are made once, when
//! the web is generated; generator pages are computed from their URL on
//! each request, the same every time. Everything is drawn from the seed.

use crate::Page;
use crate::text_traps::{FIRST_DAY, Generated, Quotes, TAGS, day_path, post_meta, two_tags};
use bytes::Bytes;
use std::collections::HashMap;
use std::fmt::Write as _;

/// Paragraphs in the one pool every page draws from.
pub const POOL_PARAGRAPHS: usize = 3_000;
/// Made-up words the paragraphs, titles and slugs are written in.
pub const VOCABULARY: usize = 2_000;
/// Pages per section, about.
pub const SECTION_PAGES: usize = 25;
/// The robots.txt of every host.
pub const ROBOTS_TXT: &str = "User-agent: *\nDisallow: /private/\n";

/// A host draws its pages' paragraphs from this many paragraphs of the
/// pool per content page (all of the pool at most): with ~40 paragraphs a
/// page, each paragraph stands on about eight pages of its host.
const PALETTE_PER_PAGE: usize = 5;

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "bra", "cle", "dri", "fo", "gu", "ha",
    "jo", "ki", "lu", "mo", "nu", "pe", "qua", "ri", "so", "tu", "vi", "wa", "xe", "yo", "zu",
    "ar", "el", "in", "on", "us",
];

/// How a host names its sections and pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// `/section-{k}/{n}.html`
    Numbered,
    /// `/{major}.{minor}/{word}/{slug}.html`, two versions of the same sections.
    Versioned,
    /// `/{word}/{word}-{word}-{n}`
    Words,
    /// `/catalog/{word}-{k}/item-{n}`
    Catalog,
}

/// What a section's index lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Listing {
    /// Every page of the section (documentation).
    All,
    /// Its first page and three others (a blog): the rest are found
    /// through the prev/next chain and the pages' own links.
    Sample,
}

/// What a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A real page: a root, a section index or a content page.
    Real,
    /// A generator's page.
    Trap,
    /// Anything else: robots.txt, disallowed pages, 404s.
    Other,
}

/// One response.
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Bytes,
}

impl Answer {
    fn html(body: String) -> Answer {
        Answer {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: Bytes::from(body),
        }
    }

    fn not_found() -> Answer {
        Answer {
            status: 404,
            content_type: "text/plain",
            body: Bytes::from_static(b"not found"),
        }
    }
}

impl From<Answer> for Page {
    fn from(a: Answer) -> Page {
        Page::new(
            a.status,
            &[("content-type", a.content_type)],
            a.body.to_vec(),
        )
    }
}

/// A content page the generators quote: its path, title and paragraphs
/// (indexes into the pool).
#[derive(Debug)]
struct Source {
    path: String,
    title: String,
    paragraphs: Vec<u32>,
}

#[derive(Debug)]
struct Host {
    style: Style,
    listing: Listing,
    trap: bool,
    /// Real pages by target.
    pages: HashMap<String, Bytes>,
    /// Their targets: `/`, then each section's index and pages.
    real: Vec<String>,
    sources: Vec<Source>,
}

/// The web: see the module docs.
#[derive(Debug)]
pub struct SharedTextWeb {
    origins: Vec<String>,
    seed: u64,
    words: Vec<String>,
    paragraphs: Vec<String>,
    hosts: Vec<Host>,
}

/// A page's main text: headings and paragraphs of the pool.
#[derive(Clone, Debug)]
enum Block {
    Heading(String),
    Paragraph(u32),
}

#[derive(Debug)]
struct PagePlan {
    path: String,
    title: String,
    blocks: Vec<Block>,
}

#[derive(Debug)]
struct SectionPlan {
    /// The index's path, `/…/`.
    index: String,
    name: String,
    pages: Vec<PagePlan>,
}

#[derive(Debug)]
struct HostPlan {
    site: String,
    intro: Vec<u32>,
    sections: Vec<SectionPlan>,
}

impl HostPlan {
    fn content(&self) -> impl Iterator<Item = &PagePlan> {
        self.sections.iter().flat_map(|s| &s.pages)
    }
}

impl SharedTextWeb {
    /// The web of `hosts` hosts served at `origins` (`http://ip:port`, one
    /// a host, which absolute links name), `pages_per_host` content pages
    /// each, drawn from `seed`.
    pub fn generate(
        hosts: usize,
        pages_per_host: usize,
        origins: Vec<String>,
        seed: u64,
    ) -> SharedTextWeb {
        assert_eq!(origins.len(), hosts, "one origin a host");
        assert!(pages_per_host > 0, "at least one page a host");
        let mut rng = fastrand::Rng::with_seed(mix(seed, &[0], "pool"));
        let words = vocabulary(&mut rng);
        let paragraphs: Vec<String> = (0..POOL_PARAGRAPHS)
            .map(|_| paragraph(&mut rng, &words))
            .collect();
        let mut web = SharedTextWeb {
            origins,
            seed,
            words,
            paragraphs,
            hosts: Vec::with_capacity(hosts),
        };
        let plans: Vec<HostPlan> = (0..hosts).map(|h| web.plan(h, pages_per_host)).collect();
        for (h, plan) in plans.iter().enumerate() {
            let host = web.render(h, plan, &plans);
            web.hosts.push(host);
        }
        web
    }

    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }

    /// `http://ip:port` of host `h`.
    pub fn origin(&self, h: usize) -> &str {
        &self.origins[h]
    }

    pub fn style(&self, h: usize) -> Style {
        self.hosts[h].style
    }

    pub fn listing(&self, h: usize) -> Listing {
        self.hosts[h].listing
    }

    /// Hosts with the generators: every tenth, from host 5.
    pub fn trap_hosts(&self) -> Vec<usize> {
        (0..self.hosts.len())
            .filter(|h| self.hosts[*h].trap)
            .collect()
    }

    /// Every real page, as (host, target): what a crawl must fetch.
    pub fn real_targets(&self) -> Vec<(usize, String)> {
        self.hosts
            .iter()
            .enumerate()
            .flat_map(|(h, host)| host.real.iter().map(move |t| (h, t.clone())))
            .collect()
    }

    /// Real pages of the web.
    pub fn real_count(&self) -> usize {
        self.hosts.iter().map(|h| h.real.len()).sum()
    }

    pub fn is_real(&self, h: usize, target: &str) -> bool {
        self.hosts[h].pages.contains_key(target)
    }

    /// Whether `target` is a generator's page on host `h`.
    pub fn is_trap(&self, h: usize, target: &str) -> bool {
        self.hosts[h].trap && Generated::parse(target).is_some()
    }

    pub fn kind(&self, h: usize, target: &str) -> Kind {
        if self.is_real(h, target) {
            Kind::Real
        } else if self.is_trap(h, target) {
            Kind::Trap
        } else {
            Kind::Other
        }
    }

    /// An absolute URL of the web as (host, target), if it is on the web.
    pub fn locate(&self, url: &str) -> Option<(usize, String)> {
        self.origins.iter().enumerate().find_map(|(h, origin)| {
            let rest = url.strip_prefix(origin.as_str())?;
            let target = rest.split('#').next().unwrap_or_default();
            match target {
                "" => Some((h, "/".to_string())),
                t if t.starts_with('/') => Some((h, t.to_string())),
                _ => None,
            }
        })
    }

    /// What host `h` answers for `target` (path and query): a real page, a
    /// generator's page, robots.txt, a page robots.txt disallows, or 404.
    pub fn answer(&self, h: usize, target: &str) -> Answer {
        let host = &self.hosts[h];
        if let Some(body) = host.pages.get(target) {
            return Answer {
                status: 200,
                content_type: "text/html; charset=utf-8",
                body: body.clone(),
            };
        }
        if target == "/robots.txt" {
            return Answer {
                status: 200,
                content_type: "text/plain",
                body: Bytes::from_static(ROBOTS_TXT.as_bytes()),
            };
        }
        if let Some(n) = target.strip_prefix("/private/")
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
        {
            return Answer::html(format!(
                "<!doctype html><html><head><title>Private {n}</title></head>\
                 <body><p>Disallowed by robots.txt.</p></body></html>"
            ));
        }
        if host.trap
            && let Some(body) = self.generated(h, target)
        {
            return Answer::html(body);
        }
        Answer::not_found()
    }

    /// Draws host `h`'s sections, titles and paragraphs.
    fn plan(&self, h: usize, pages: usize) -> HostPlan {
        let mut rng = fastrand::Rng::with_seed(mix(self.seed, &[h as u64], "plan"));
        let style = style_of(h);
        let site = format!(
            "{} {}",
            capitalized(&self.word(&mut rng)),
            match style {
                Style::Numbered => "Journal",
                Style::Versioned => "Documentation",
                Style::Words => "Notes",
                Style::Catalog => "Shop",
            }
        );
        // The paragraphs this host's pages share, dealt from a shuffled
        // deck so that each stands on about as many pages as the others.
        let mut palette: Vec<u32> = (0..POOL_PARAGRAPHS as u32).collect();
        rng.shuffle(&mut palette);
        palette.truncate((pages * PALETTE_PER_PAGE).clamp(50, POOL_PARAGRAPHS));
        let mut deck = Deck {
            cards: Vec::new(),
            palette,
        };
        let intro = (0..2).map(|_| deck.deal(&mut rng, &[])).collect();

        let count = pages.div_ceil(SECTION_PAGES).max(1);
        let sizes: Vec<usize> = (0..count)
            .map(|k| pages / count + usize::from(k < pages % count))
            .collect();
        // Distinct words for the sections, the slugs and the catalogue.
        let mut used = std::collections::HashSet::new();
        let mut fresh = |rng: &mut fastrand::Rng| loop {
            let w = self.word(rng);
            if used.insert(w.clone()) {
                return w;
            }
        };
        let (major, minor) = (2 + h % 3, 8 + h % 5);
        let versions = [format!("{major}.{minor}"), format!("{major}.{}", minor + 1)];
        let half = count.div_ceil(2);
        let section_words: Vec<String> = (0..count).map(|_| fresh(&mut rng)).collect();
        let mut slugs: Vec<Vec<String>> = Vec::new();
        let mut running = 100 + rng.usize(..900);
        let mut sections = Vec::with_capacity(count);
        for (k, size) in sizes.iter().enumerate() {
            let (index, name) = match style {
                Style::Numbered => (format!("/section-{}/", k + 1), format!("Section {}", k + 1)),
                Style::Versioned => {
                    let (v, w) = if k < half {
                        (&versions[0], &section_words[k])
                    } else {
                        (&versions[1], &section_words[k - half])
                    };
                    (format!("/{v}/{w}/"), format!("{} ({v})", capitalized(w)))
                }
                Style::Words => (
                    format!("/{}/", section_words[k]),
                    capitalized(&section_words[k]),
                ),
                Style::Catalog => (
                    format!("/catalog/{}-{}/", section_words[k], k + 1),
                    format!("{} {}", capitalized(&section_words[k]), k + 1),
                ),
            };
            let mut plans = Vec::with_capacity(*size);
            for n in 1..=*size {
                let (path, number) = match style {
                    Style::Numbered => (format!("{index}{n}.html"), n),
                    Style::Versioned => {
                        // The second version has the first's pages, by the
                        // same names, as documentation kept for two does.
                        let j = if k < half { k } else { k - half };
                        if slugs.len() <= j {
                            slugs.push(Vec::new());
                        }
                        while slugs[j].len() < n {
                            let slug = format!("{}-{}", fresh(&mut rng), self.word(&mut rng));
                            slugs[j].push(slug);
                        }
                        (format!("{index}{}.html", slugs[j][n - 1]), n)
                    }
                    Style::Words => {
                        running += 1;
                        let (a, b) = (self.word(&mut rng), self.word(&mut rng));
                        (format!("{index}{a}-{b}-{running}"), running)
                    }
                    Style::Catalog => {
                        running += 1;
                        (format!("{index}item-{running}"), running)
                    }
                };
                let title = format!("{} {number}", capitalized(&self.words_of(&mut rng, 2..5)));
                let blocks = self.blocks(&mut rng, &mut deck);
                plans.push(PagePlan {
                    path,
                    title,
                    blocks,
                });
            }
            sections.push(SectionPlan {
                index,
                name,
                pages: plans,
            });
        }
        HostPlan {
            site,
            intro,
            sections,
        }
    }

    /// 8–40 KB of paragraphs dealt from the host's deck, a heading every
    /// few paragraphs.
    fn blocks(&self, rng: &mut fastrand::Rng, deck: &mut Deck) -> Vec<Block> {
        let target = 8 * 1024 + rng.usize(..=32 * 1024);
        let mut size = 0;
        let mut blocks = Vec::new();
        let mut on_page: Vec<u32> = Vec::new();
        let mut until_heading = 2 + rng.usize(..4);
        while size < target {
            if until_heading == 0 {
                let heading = capitalized(&self.words_of(rng, 2..5));
                size += heading.len();
                blocks.push(Block::Heading(heading));
                until_heading = 3 + rng.usize(..4);
            }
            let p = deck.deal(rng, &on_page);
            on_page.push(p);
            size += self.paragraphs[p as usize].len() + 1;
            blocks.push(Block::Paragraph(p));
            until_heading -= 1;
        }
        blocks
    }

    /// Host `h`'s real pages, from the plans of all hosts (for links out).
    fn render(&self, h: usize, plan: &HostPlan, plans: &[HostPlan]) -> Host {
        let mut rng = fastrand::Rng::with_seed(mix(self.seed, &[h as u64], "render"));
        let trap = h % 10 == 5;
        let listing = if (h / 4).is_multiple_of(2) {
            Listing::All
        } else {
            Listing::Sample
        };
        let trap_hosts: Vec<usize> = (0..plans.len()).filter(|t| t % 10 == 5).collect();
        let mut pages = HashMap::new();
        let mut real = Vec::new();
        let mut sources = Vec::new();
        // Day of a trap host's real page: its place on the host.
        let mut day = FIRST_DAY;
        let mut meta = |rng: &mut fastrand::Rng| -> String {
            day += 1;
            if trap {
                post_meta(day, &two_tags(|n| rng.usize(..n)))
            } else {
                String::new()
            }
        };

        // `/`: a welcome and every section's index.
        let mut main = format!("<h1>{}</h1>", plan.site);
        for p in &plan.intro {
            write!(main, "<p>{}</p>", self.paragraphs[*p as usize]).unwrap();
        }
        main.push_str("<h2>Sections</h2><ul>");
        for s in &plan.sections {
            let href = self.href(&mut rng, h, "/", &s.index);
            write!(main, "<li><a href=\"{href}\">{}</a></li>", s.name).unwrap();
        }
        main.push_str("</ul>");
        main.push_str(&meta(&mut rng));
        pages.insert("/".to_string(), page("Home", &plan.site, &main, "").into());
        real.push("/".to_string());

        let mut number = 0;
        for (k, section) in plan.sections.iter().enumerate() {
            // The index: an introduction and its pages, all or a few.
            let mut main = format!("<h1>{}</h1>", section.name);
            let intro = plan.intro[k % plan.intro.len()];
            write!(main, "<p>{}</p><ul>", self.paragraphs[intro as usize]).unwrap();
            let listed: Vec<usize> = match listing {
                Listing::All => (0..section.pages.len()).collect(),
                Listing::Sample => {
                    let mut listed = vec![0];
                    let others = 3.min(section.pages.len() - 1);
                    while listed.len() < 1 + others {
                        let i = 1 + rng.usize(..section.pages.len() - 1);
                        if !listed.contains(&i) {
                            listed.push(i);
                        }
                    }
                    listed
                }
            };
            for i in listed {
                let p = &section.pages[i];
                let href = self.href(&mut rng, h, &section.index, &p.path);
                write!(main, "<li><a href=\"{href}\">{}</a></li>", p.title).unwrap();
            }
            main.push_str("</ul>");
            main.push_str(&meta(&mut rng));
            pages.insert(
                section.index.clone(),
                page(&section.name, &plan.site, &main, "").into(),
            );
            real.push(section.index.clone());

            for (i, p) in section.pages.iter().enumerate() {
                let from = p.path.as_str();
                let mut main = format!(
                    "<nav><a href=\"{}\">{}</a> › <a href=\"{}\">{}</a></nav><h1>{}</h1>",
                    self.href(&mut rng, h, from, "/"),
                    plan.site,
                    self.href(&mut rng, h, from, &section.index),
                    section.name,
                    p.title
                );
                let mut paragraphs = Vec::new();
                for block in &p.blocks {
                    match block {
                        Block::Heading(text) => write!(main, "<h2>{text}</h2>").unwrap(),
                        Block::Paragraph(n) => {
                            write!(main, "<p>{}</p>", self.paragraphs[*n as usize]).unwrap();
                            paragraphs.push(*n);
                        }
                    }
                }
                main.push_str("<p class=\"pager\">");
                if i > 0 {
                    let prev = &section.pages[i - 1];
                    let href = self.href(&mut rng, h, from, &prev.path);
                    write!(
                        main,
                        "<a rel=\"prev\" href=\"{href}\">← {}</a> ",
                        prev.title
                    )
                    .unwrap();
                }
                if i + 1 < section.pages.len() {
                    let next = &section.pages[i + 1];
                    let href = self.href(&mut rng, h, from, &next.path);
                    write!(main, "<a rel=\"next\" href=\"{href}\">{} →</a>", next.title).unwrap();
                }
                main.push_str("</p>");
                main.push_str(&meta(&mut rng));
                let mut aside = String::new();
                let mut links: Vec<(usize, &str, &str)> = Vec::new();
                write!(aside, "<h2>More in {}</h2><ul>", section.name).unwrap();
                if section.pages.len() > 1 {
                    for _ in 0..3 + rng.usize(..6) {
                        let j = rng.usize(..section.pages.len());
                        if j != i {
                            let q = &section.pages[j];
                            links.push((h, &q.path, &q.title));
                        }
                    }
                }
                self.link_list(&mut rng, h, from, &mut links, &mut aside);
                aside.push_str("<h2>Elsewhere on the site</h2><ul>");
                if plan.sections.len() > 1 {
                    for _ in 0..2 + rng.usize(..5) {
                        let other = loop {
                            let o = rng.usize(..plan.sections.len());
                            if o != k {
                                break o;
                            }
                        };
                        let s = &plan.sections[other];
                        let q = &s.pages[rng.usize(..s.pages.len())];
                        links.push((h, &q.path, &q.title));
                    }
                }
                self.link_list(&mut rng, h, from, &mut links, &mut aside);
                aside.push_str("<h2>Around the web</h2><ul>");
                if plans.len() > 1 {
                    for _ in 0..1 + rng.usize(..3) {
                        let o = (h + 1 + rng.usize(..plans.len() - 1)) % plans.len();
                        let others: Vec<&PagePlan> = plans[o].content().collect();
                        let q = others[rng.usize(..others.len())];
                        links.push((o, &q.path, &q.title));
                    }
                }
                self.link_list(&mut rng, h, from, &mut links, &mut aside);
                // The noise of real sites: a page robots.txt keeps out,
                // a broken link.
                if rng.usize(..25) == 0 {
                    let n = rng.usize(..1000);
                    write!(aside, "<p><a href=\"/private/{n}\">Members only</a></p>").unwrap();
                }
                if rng.usize(..30) == 0 {
                    let n = rng.usize(..1000);
                    write!(aside, "<p><a href=\"/missing/{n}\">An old page</a></p>").unwrap();
                }
                if number % 100 == 11
                    && let Some(entry) = self.see_also(&mut rng, h, &trap_hosts, number / 100)
                {
                    write!(aside, "<p><a href=\"{entry}\">See also</a></p>").unwrap();
                }
                pages.insert(
                    p.path.clone(),
                    page(&p.title, &plan.site, &main, &aside).into(),
                );
                real.push(p.path.clone());
                sources.push(Source {
                    path: p.path.clone(),
                    title: p.title.clone(),
                    paragraphs,
                });
                number += 1;
            }
        }
        Host {
            style: style_of(h),
            listing,
            trap,
            pages,
            real,
            sources,
        }
    }

    /// `links` (host, path, text) as list items, then the list closed.
    fn link_list(
        &self,
        rng: &mut fastrand::Rng,
        h: usize,
        from: &str,
        links: &mut Vec<(usize, &str, &str)>,
        out: &mut String,
    ) {
        for (to, path, text) in links.drain(..) {
            let href = if to == h {
                self.href(rng, h, from, path)
            } else {
                format!("{}{path}", self.origins[to])
            };
            write!(out, "<li><a href=\"{href}\">{text}</a></li>").unwrap();
        }
        out.push_str("</ul>");
    }

    /// A same-host link to `to` from the page at `from`, in one of the
    /// forms real pages write: absolute, root-relative, relative, with a
    /// fragment.
    fn href(&self, rng: &mut fastrand::Rng, h: usize, from: &str, to: &str) -> String {
        match rng.usize(..6) {
            0 => format!("{}{to}", self.origins[h]),
            1 | 2 => to.to_string(),
            3 => format!("{to}#top"),
            _ => relative(from, to),
        }
    }

    /// The "see also" of page `slot * 100 + 11` of host `h`: on a trap
    /// host one of its own generators, elsewhere a trap host's, in turn.
    fn see_also(
        &self,
        rng: &mut fastrand::Rng,
        h: usize,
        trap_hosts: &[usize],
        slot: usize,
    ) -> Option<String> {
        if trap_hosts.is_empty() {
            return None;
        }
        let n = h + slot;
        let entry = match n % 3 {
            0 => {
                let [a, b] = two_tags(|n| rng.usize(..n));
                format!("/tag/{}+{}/", TAGS[a], TAGS[b])
            }
            1 => format!(
                "/search?q={}+{}",
                self.word(&mut *rng),
                self.word(&mut *rng)
            ),
            _ => day_path(FIRST_DAY + rng.usize(..365) as i64),
        };
        if h % 10 == 5 {
            return Some(entry);
        }
        let t = trap_hosts[n % trap_hosts.len()];
        Some(format!("{}{entry}", self.origins[t]))
    }

    fn word(&self, rng: &mut fastrand::Rng) -> String {
        self.words[rng.usize(..self.words.len())].clone()
    }

    /// A number of words drawn from `count`.
    fn words_of(&self, rng: &mut fastrand::Rng, count: std::ops::Range<usize>) -> String {
        (0..rng.usize(count))
            .map(|_| self.words[rng.usize(..self.words.len())].as_str())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A generator's page for `target` on trap host `h`, if it has that shape.
    fn generated(&self, h: usize, target: &str) -> Option<String> {
        let generated = Generated::parse(target)?;
        let mut rng = fastrand::Rng::with_seed(mix(self.seed, &[h as u64], target));
        let links = generated.links(&self.words, |n| rng.usize(..n));
        let sources = &self.hosts[h].sources;
        let quotes = Quotes::draw(&mut rng, sources.len(), |i| {
            (sources[i].paragraphs.iter())
                .map(|p| self.paragraphs[*p as usize].as_str())
                .collect()
        });
        let source = |i: usize| (sources[i].path.as_str(), sources[i].title.as_str());
        let text = quotes.html(source, "More pages", generated.heading(), &links);
        let title = generated.title();
        let main = format!("<h1>{title}</h1>{text}");
        Some(page(&title, "Search and archives", &main, ""))
    }
}

/// Paragraphs dealt from a shuffled deck of a host's palette, reshuffled
/// when used up: each stands on about as many pages as the others.
struct Deck {
    cards: Vec<u32>,
    palette: Vec<u32>,
}

impl Deck {
    /// A paragraph not in `not`, if one comes within a few tries.
    fn deal(&mut self, rng: &mut fastrand::Rng, not: &[u32]) -> u32 {
        let mut card = 0;
        for _ in 0..8 {
            if self.cards.is_empty() {
                self.cards = self.palette.clone();
                rng.shuffle(&mut self.cards);
            }
            card = self.cards.pop().expect("a non-empty palette");
            if !not.contains(&card) {
                break;
            }
        }
        card
    }
}

fn style_of(h: usize) -> Style {
    [
        Style::Numbered,
        Style::Versioned,
        Style::Words,
        Style::Catalog,
    ][h % 4]
}

/// A page: its title, the site's name, its main text and its aside (the
/// link lists around the text).
fn page(title: &str, site: &str, main: &str, aside: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title} | {site}</title></head>\
         <body><main>{main}</main><aside>{aside}</aside>\
         <footer>{site}. All rights reserved.</footer></body></html>"
    )
}

/// `to` relative to the page at `from` (both absolute paths).
fn relative(from: &str, to: &str) -> String {
    let from_dir: Vec<&str> = from.split('/').collect();
    let from_dir = &from_dir[1..from_dir.len() - 1];
    let to_parts: Vec<&str> = to.split('/').collect();
    let to_parts = &to_parts[1..];
    let (to_dir, to_last) = to_parts.split_at(to_parts.len() - 1);
    let common = from_dir
        .iter()
        .zip(to_dir)
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = "../".repeat(from_dir.len() - common);
    for segment in &to_dir[common..] {
        out.push_str(segment);
        out.push('/');
    }
    out.push_str(to_last[0]);
    if out.is_empty() {
        "./".to_string()
    } else {
        out
    }
}

/// [`VOCABULARY`] distinct made-up words of 2–3 syllables.
fn vocabulary(rng: &mut fastrand::Rng) -> Vec<String> {
    let reserved = [
        "section", "catalog", "private", "missing", "tag", "search", "day", "item",
    ];
    let mut words = Vec::with_capacity(VOCABULARY);
    let mut seen = std::collections::HashSet::new();
    while words.len() < VOCABULARY {
        let word: String = (0..2 + rng.usize(..2))
            .map(|_| SYLLABLES[rng.usize(..SYLLABLES.len())])
            .collect();
        if !reserved.contains(&word.as_str()) && seen.insert(word.clone()) {
            words.push(word);
        }
    }
    words
}

/// 40–120 words in sentences of 6–18.
fn paragraph(rng: &mut fastrand::Rng, words: &[String]) -> String {
    let n = 40 + rng.usize(..=80);
    let mut out = String::new();
    let mut left_in_sentence = 0;
    for i in 0..n {
        let w = &words[rng.usize(..words.len())];
        if i > 0 {
            out.push(' ');
        }
        if left_in_sentence == 0 {
            out.push_str(&capitalized(w));
            left_in_sentence = 6 + rng.usize(..13);
        } else {
            out.push_str(w);
        }
        left_in_sentence -= 1;
        if left_in_sentence == 0 || i + 1 == n {
            out.push('.');
            left_in_sentence = 0;
        }
    }
    out
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// FNV-1a over `numbers` and `text`, then splitmix64: a stable hash (std's
/// may change between releases), so the web is the same in every build.
fn mix(seed: u64, numbers: &[u64], text: &str) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet, VecDeque};
    use url::Url;

    /// Eight hosts: every style, both listings, one trap host (5).
    fn web(seed: u64) -> SharedTextWeb {
        let origins = (0..8)
            .map(|h| format!("http://127.0.44.{}:8080", h + 1))
            .collect();
        SharedTextWeb::generate(8, 100, origins, seed)
    }

    fn text(a: &Answer) -> String {
        String::from_utf8(a.body.to_vec()).unwrap()
    }

    fn hrefs(body: &str) -> Vec<String> {
        body.split("href=\"")
            .skip(1)
            .map(|rest| rest[..rest.find('"').unwrap()].to_string())
            .collect()
    }

    /// `href` on the page at `target` of host `h`, resolved and located.
    fn resolve(web: &SharedTextWeb, h: usize, target: &str, href: &str) -> (usize, String) {
        let base = Url::parse(&format!("{}{target}", web.origin(h))).unwrap();
        let url = base.join(href).unwrap();
        web.locate(url.as_str())
            .unwrap_or_else(|| panic!("{href} on {target} leaves the web: {url}"))
    }

    #[test]
    fn every_real_page_is_reachable_from_the_first_root() {
        let web = web(1);
        let real: HashSet<(usize, String)> = web.real_targets().into_iter().collect();
        assert_eq!(real.len(), web.real_count(), "no real page twice");
        assert_eq!(web.real_count(), 8 * (1 + 4 + 100));
        let mut reached = HashSet::from([(0, "/".to_string())]);
        let mut queue = VecDeque::from([(0, "/".to_string())]);
        let (mut generators, mut disallowed, mut broken) = (0, 0, 0);
        let mut forms: HashMap<&str, usize> = HashMap::new();
        while let Some((h, target)) = queue.pop_front() {
            let answer = web.answer(h, &target);
            assert_eq!(answer.status, 200, "{target} on host {h}");
            for href in hrefs(&text(&answer)) {
                let form = if href.starts_with("http://") {
                    "absolute"
                } else if href.starts_with('/') {
                    "root-relative"
                } else {
                    "relative"
                };
                *forms.entry(form).or_default() += 1;
                let (to, t) = resolve(&web, h, &target, &href);
                match web.kind(to, &t) {
                    Kind::Real => {
                        if reached.insert((to, t.clone())) {
                            queue.push_back((to, t));
                        }
                    }
                    Kind::Trap => {
                        assert_eq!(web.answer(to, &t).status, 200, "{t}");
                        generators += 1;
                    }
                    Kind::Other if t.starts_with("/private/") => disallowed += 1,
                    Kind::Other => {
                        assert!(t.starts_with("/missing/"), "{href} on {target}");
                        assert_eq!(web.answer(to, &t).status, 404);
                        broken += 1;
                    }
                }
            }
        }
        let missing: Vec<_> = real.difference(&reached).take(5).collect();
        assert!(missing.is_empty(), "not reachable: {missing:?}");
        assert!(generators > 100, "{generators} links into the generators");
        assert!(disallowed > 5 && broken > 5, "{disallowed} {broken}");
        assert!(
            forms.values().all(|n| *n > 500) && forms.len() == 3,
            "{forms:?}"
        );
        assert!(ROBOTS_TXT.contains("Disallow: /private/"));
        assert_eq!(web.answer(3, "/robots.txt").status, 200);
        assert_eq!(web.kind(3, "/private/7"), Kind::Other);
    }

    #[test]
    fn hosts_name_their_sections_in_every_style() {
        let web = web(1);
        let paths = |h: usize| -> Vec<String> {
            web.real_targets()
                .into_iter()
                .filter(|(g, _)| *g == h)
                .map(|(_, t)| t)
                .collect()
        };
        // Runs of digits as `{n}`.
        let numbers = |s: &str| {
            let mut out = String::new();
            for c in s.chars() {
                if !c.is_ascii_digit() {
                    out.push(c);
                } else if !out.ends_with("{n}") {
                    out.push_str("{n}");
                }
            }
            out
        };
        for h in 0..8 {
            let paths = paths(h);
            let content: Vec<&String> = paths.iter().filter(|p| !p.ends_with('/')).collect();
            assert_eq!(content.len(), 100);
            let indexes = paths.len() - 1 - content.len();
            assert_eq!(indexes, 4, "host {h}");
            match web.style(h) {
                Style::Numbered => {
                    assert!(paths.contains(&"/section-2/".to_string()));
                    assert!(paths.contains(&"/section-4/25.html".to_string()));
                }
                Style::Versioned => {
                    // Two versions, the same section words and page names.
                    let mut by_version: HashMap<&str, Vec<String>> = HashMap::new();
                    for p in &content {
                        let (version, rest) = p[1..].split_once('/').unwrap();
                        by_version
                            .entry(version)
                            .or_default()
                            .push(rest.to_string());
                        assert!(p.ends_with(".html"), "{p}");
                    }
                    assert_eq!(by_version.len(), 2, "{by_version:?}");
                    let mut versions: Vec<_> = by_version.into_values().collect();
                    versions[0].sort();
                    versions[1].sort();
                    assert_eq!(versions[0], versions[1]);
                }
                Style::Words => {
                    for p in &content {
                        let parts: Vec<&str> = p.split('/').collect();
                        assert_eq!(parts.len(), 3, "{p}");
                        assert_eq!(parts[2].split('-').count(), 3, "{p}");
                    }
                }
                Style::Catalog => {
                    assert!(content.iter().all(|p| p.starts_with("/catalog/")));
                    assert!(content.iter().all(|p| p.contains("/item-")));
                }
            }
            // Numbered, versioned and catalogue pages are one URL pattern
            // once numbers are abstracted: all of a numbered host's, a
            // catalogue section's, a documented page's two versions.
            let patterns: HashSet<String> = content.iter().map(|p| numbers(p)).collect();
            let expected = match web.style(h) {
                Style::Numbered => 1,
                Style::Catalog => 4,
                Style::Versioned => 50,
                Style::Words => 100,
            };
            assert_eq!(patterns.len(), expected, "host {h}: {patterns:?}");
            // A blog's index lists its first page and three others.
            let index = paths
                .iter()
                .find(|p| p.ends_with('/') && *p != "/")
                .unwrap();
            let listed = hrefs(&text(&web.answer(h, index)))
                .iter()
                .filter(|l| web.kind(h, &resolve(&web, h, index, l).1) == Kind::Real)
                .count();
            match web.listing(h) {
                Listing::All => assert_eq!(listed, 25, "host {h}"),
                Listing::Sample => assert_eq!(listed, 4, "host {h}"),
            }
        }
        assert_eq!(web.trap_hosts(), vec![5]);
        assert_eq!(
            (0..8).map(|h| web.listing(h)).collect::<HashSet<_>>().len(),
            2
        );
    }

    #[test]
    fn paragraphs_are_shared_across_each_hosts_pages() {
        let web = web(1);
        for (h, host) in web.hosts.iter().enumerate() {
            let mut pages_of: HashMap<u32, usize> = HashMap::new();
            for s in &host.sources {
                let size: usize = s
                    .paragraphs
                    .iter()
                    .map(|p| web.paragraphs[*p as usize].len() + 1)
                    .sum();
                assert!((8 * 1024..48 * 1024).contains(&size), "{size}");
                let distinct: HashSet<&u32> = s.paragraphs.iter().collect();
                assert_eq!(distinct.len(), s.paragraphs.len(), "{}", s.path);
                for p in distinct {
                    *pages_of.entry(*p).or_default() += 1;
                }
            }
            let fewest = pages_of.values().min().unwrap();
            assert!(*fewest >= 3, "host {h}: a paragraph on {fewest} pages only");
        }
        for p in &web.paragraphs {
            assert!((40..=120).contains(&p.split(' ').count()), "{p}");
        }
        assert_eq!(web.paragraphs.len(), POOL_PARAGRAPHS);
        assert_eq!(web.words.len(), VOCABULARY);
    }

    #[test]
    fn generators_answer_any_url_of_their_shape_with_verbatim_excerpts() {
        let web = web(1);
        let h = 5;
        for target in [
            "/tag/python/",
            "/tag/python+rust+web/",
            "/tag/python%2Brust/",
            "/search?q=kalo+mine",
            "/day/2024-03-05/",
            "/day/2024-02-29/",
            "/day/1999-12-31/",
        ] {
            assert!(web.is_trap(h, target), "{target}");
            let answer = web.answer(h, target);
            assert_eq!(answer.status, 200, "{target}");
            let body = text(&answer);
            assert_eq!(text(&web.answer(h, target)), body, "the same every time");
            let links = hrefs(&body);
            let real: HashSet<&String> = links.iter().filter(|l| web.is_real(h, l)).collect();
            assert_eq!(real.len(), 10, "{target}");
            let family: Vec<&String> = links.iter().filter(|l| web.is_trap(h, l)).collect();
            assert!(family.len() >= 4, "{target}: {family:?}");
            let mut excerpts = 0;
            for part in body.split("<article><h2><a href=\"").skip(1) {
                let linked = &part[..part.find('"').unwrap()];
                let at = part.find("<p>… ").unwrap() + "<p>… ".len();
                let excerpt = &part[at..at + part[at..].find(" …</p>").unwrap()];
                assert!((20..=60).contains(&excerpt.split(' ').count()), "{excerpt}");
                let source = text(&web.answer(h, linked));
                assert!(
                    source.contains(excerpt),
                    "verbatim from {linked}: {excerpt}"
                );
                excerpts += 1;
            }
            assert!((3..=5).contains(&excerpts), "{target}: {excerpts}");
        }
        assert_ne!(
            text(&web.answer(h, "/tag/rust/")),
            text(&web.answer(h, "/tag/web/"))
        );
        let next = hrefs(&text(&web.answer(h, "/day/2024-12-31/")));
        assert!(next.contains(&"/day/2025-01-01/".to_string()));
        assert!(next.contains(&"/day/2025-01-28/".to_string()));
        // A long walk through one family never runs dry.
        let mut seen = HashSet::from(["/search?q=kalo".to_string()]);
        let mut queue = VecDeque::from(["/search?q=kalo".to_string()]);
        while let Some(t) = queue.pop_front()
            && seen.len() < 300
        {
            for l in hrefs(&text(&web.answer(h, &t))) {
                if web.is_trap(h, &l) && seen.insert(l.clone()) {
                    queue.push_back(l);
                }
            }
        }
        assert!(seen.len() >= 300);
        for bad in [
            "/tag/",
            "/tag/python+python/",
            "/tag/nosuchtag/",
            "/tag/python",
            "/search?q=",
            "/search?q=Kalo",
            "/day/2023-02-29/",
            "/day/2024-3-05/",
            "/day/2024-03-05",
            "/nowhere",
            "/missing/3",
        ] {
            assert_eq!(web.answer(h, bad).status, 404, "{bad}");
            assert_eq!(web.kind(h, bad), Kind::Other, "{bad}");
        }
        // Only on the trap hosts.
        assert_eq!(web.answer(3, "/tag/python/").status, 404);
        assert!(!web.is_trap(3, "/tag/python/"));
    }

    #[test]
    fn trap_hosts_pages_link_their_day_and_tags_and_one_page_in_a_hundred_sees_also() {
        let web = web(1);
        for (h, target) in web.real_targets() {
            let body = text(&web.answer(h, &target));
            let meta = body.contains("<p class=\"meta\">");
            assert_eq!(meta, h == 5, "{target} on host {h}");
        }
        for h in 0..8 {
            let see_also: Vec<String> = web
                .real_targets()
                .into_iter()
                .filter(|(g, _)| *g == h)
                .filter_map(|(_, t)| {
                    let body = text(&web.answer(h, &t));
                    let at = body.find("\">See also</a>")?;
                    let href = &body[body[..at].rfind('"').unwrap() + 1..at];
                    Some(href.to_string())
                })
                .collect();
            assert_eq!(see_also.len(), 1, "host {h}: page 11 of 100");
            let (to, t) = resolve(&web, h, "/", &see_also[0]);
            assert_eq!(to, 5);
            assert_eq!(web.kind(to, &t), Kind::Trap, "{t}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_web() {
        let (a, b, c) = (web(7), web(7), web(8));
        assert_eq!(a.real_targets(), b.real_targets());
        for (h, t) in a.real_targets().into_iter().step_by(37) {
            assert_eq!(a.answer(h, &t).body, b.answer(h, &t).body, "{t}");
        }
        assert_eq!(a.answer(5, "/tag/art/").body, b.answer(5, "/tag/art/").body);
        assert_ne!(a.answer(0, "/").body, c.answer(0, "/").body);
    }

    #[test]
    fn relative_links_resolve_to_their_target() {
        for (from, to) in [
            ("/a/b.html", "/a/c.html"),
            ("/a/b.html", "/a/"),
            ("/a/b.html", "/"),
            ("/", "/a/"),
            ("/a/", "/a/b"),
            ("/3.11/x/y.html", "/3.12/x/y.html"),
            ("/catalog/x-1/item-3", "/catalog/y-2/"),
            ("/a/b/", "/a/"),
        ] {
            let base = Url::parse(&format!("http://h{from}")).unwrap();
            let href = relative(from, to);
            assert!(!href.starts_with('/'), "{href}");
            assert_eq!(
                base.join(&href).unwrap().path(),
                to,
                "{from} → {to}: {href}"
            );
        }
    }
}
