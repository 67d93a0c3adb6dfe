//! Text-rich traps (issue #24): URL generators whose pages are built from
//! excerpts copied verbatim from the host's real pages, so no two of them
//! are near-duplicates, and whose links lead nowhere new outside their own
//! family. Three shapes real sites have, beside a blog of 331 real pages:
//!
//! - tag intersections, `/tag/python+rust/`, whose "narrow down" links
//!   append a tag (`/tag/python+rust+web/`) and "broaden" links drop one;
//! - site search with related searches, `/search?q=cache+index` linking
//!   `/search?q=cache+index+river` …;
//! - an events calendar, `/day/2024-03-05/`, linking the previous and next
//!   day, week and month.
//!
//! Any URL of those shapes answers 200: each page is three to five
//! excerpts (20–60 words of one paragraph of a real page, each under its
//! page's title and linking it), links to ten real pages in all, and the
//! family's own links. With no page budget a crawl must end by itself with
//! every real page and at most as many generator requests as real pages
//! (on the larger webs, plus the generator pages real pages link: each
//! article links its day, and once the crawl knows the links of those
//! 300 days, nothing tells them from a real date archive, which they are;
//! what must stay bounded is what the generators mint beyond them).
//!
//! Real families that also repeat text must be crawled whole beside the
//! same generators: ten thousand products sharing a template sentence, a
//! wiki whose pages quote each other, a forum whose replies quote earlier
//! replies (the generators quote and link those pages too, as a site's
//! tag pages and search would), and a paginated archive whose pages are
//! excerpts of older posts reachable only through it.
//!
//! Each web is one host on 127.0.24.x, built deterministically from a seed.
//! The generators are `web_crawler_testsupport::text_traps`, which the
//! shared-text web and the benchmark's `-text-traps` presets serve too.

use crate::hostile_web::{hits_under, settings, trapped};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use web_crawler::actors::Store;
use web_crawler::store::SqliteStore;
use web_crawler::{IdleReason, Settings, start};
use web_crawler_testsupport::text_traps::{
    FIRST_DAY, GENERATORS, Generated, Quotes, TAGS, post_meta,
};
use web_crawler_testsupport::{Page, TestServer, reserve};

/// A crawl that has not ended by then has failed. The largest web here
/// (10,431 real pages) had every real page within 30 s even with its
/// generators open; half the deadline of `hostile_web`, so a failure does
/// not hold the suite for long.
const DEADLINE: Duration = Duration::from_secs(120);

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "bra", "cle", "dri", "fo", "gu", "ha",
    "jo", "ki", "lu", "mo", "nu", "pe", "qua", "ri", "so", "tu", "vi", "wa", "xe", "yo", "zu",
    "ar", "el", "in", "on", "us",
];

/// Blog articles, and articles per archive page.
const ARTICLES: usize = 300;
const PER_ARCHIVE: usize = 10;
/// The blog's real pages: its articles, its archive pages and `/`.
const BLOG_PAGES: usize = ARTICLES + ARTICLES / PER_ARCHIVE + 1;

/// A real page whose paragraphs the generators copy excerpts of.
struct Source {
    path: String,
    title: String,
    paragraphs: Vec<String>,
}

/// One host: its real pages (static), and the three generators, which
/// answer any URL of their shape from `sources`.
struct Site {
    pages: HashMap<String, Page>,
    /// Targets of the real pages, which a crawl must all fetch.
    real: Vec<String>,
    sources: Vec<Source>,
    words: Vec<String>,
    slugs: HashSet<String>,
    /// The blog's latest articles as `/` lists them.
    front: String,
    /// Links `/` gives to the host's other sections.
    entries: Vec<(String, String)>,
    rng: fastrand::Rng,
}

/// A page with the site's chrome: a nav of home, archive and a few tags,
/// and a footer.
fn page(title: &str, main: &str) -> Page {
    Page::html(format!(
        "<!doctype html><html><head><title>{title} | The Syllable Blog</title></head><body>\
         <nav><a href=\"/\">Home</a> <a href=\"/archive/1/\">Archive</a> \
         <a href=\"/tag/python/\">python</a> <a href=\"/tag/rust/\">rust</a> \
         <a href=\"/tag/web/\">web</a></nav><main><h1>{title}</h1>{main}</main>\
         <footer>The Syllable Blog, written by hand since 2009. All rights reserved.</footer>\
         </body></html>"
    ))
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// The first `n` words of `text`.
fn first_words(text: &str, n: usize) -> String {
    text.split(' ').take(n).collect::<Vec<_>>().join(" ")
}

fn paragraphs_html(paragraphs: &[String]) -> String {
    paragraphs.iter().map(|p| format!("<p>{p}</p>")).collect()
}

impl Site {
    /// The blog: 300 articles `/post/<slug>/` of 300–600 words each, and
    /// 30 archive pages `/archive/<n>/` listing ten articles with a short
    /// excerpt; `/` comes with [`Site::finish`].
    fn blog(seed: u64) -> Site {
        let mut rng = fastrand::Rng::with_seed(seed);
        // A vocabulary of 400 made-up words: 8-word sequences are unique.
        let mut words = Vec::new();
        let mut seen = HashSet::new();
        while words.len() < 400 {
            let word: String = (0..2 + rng.usize(..2))
                .map(|_| SYLLABLES[rng.usize(..SYLLABLES.len())])
                .collect();
            if seen.insert(word.clone()) {
                words.push(word);
            }
        }
        let mut site = Site {
            pages: HashMap::new(),
            real: Vec::new(),
            sources: Vec::new(),
            words,
            slugs: HashSet::new(),
            front: String::new(),
            entries: Vec::new(),
            rng,
        };
        let articles: Vec<(String, String, Vec<String>)> =
            (0..ARTICLES).map(|_| site.post(300..601)).collect();
        for (slug, title, paragraphs) in &articles {
            site.sources.push(Source {
                path: format!("/post/{slug}/"),
                title: title.clone(),
                paragraphs: paragraphs.clone(),
            });
        }
        for (i, (slug, title, paragraphs)) in articles.iter().enumerate() {
            let mut main = site.post_meta(FIRST_DAY + i as i64);
            main.push_str(&paragraphs_html(paragraphs));
            main.push_str("<p>");
            if i > 0 {
                write!(
                    main,
                    "<a href=\"/post/{}/\">Previous post</a> ",
                    articles[i - 1].0
                )
                .unwrap();
            }
            if i + 1 < ARTICLES {
                write!(
                    main,
                    "<a href=\"/post/{}/\">Next post</a>",
                    articles[i + 1].0
                )
                .unwrap();
            }
            main.push_str("</p>");
            site.add_real(format!("/post/{slug}/"), title, &main);
        }
        // Newest first: archive 1 lists articles 299..290.
        let listing = |range: std::ops::Range<usize>| -> String {
            range
                .rev()
                .map(|i| {
                    let (slug, title, paragraphs) = &articles[i];
                    format!(
                        "<article><h2><a href=\"/post/{slug}/\">{title}</a></h2><p>{} …</p></article>",
                        first_words(&paragraphs[0], 25)
                    )
                })
                .collect()
        };
        let archives = ARTICLES / PER_ARCHIVE;
        for n in 1..=archives {
            let mut main = listing(ARTICLES - n * PER_ARCHIVE..ARTICLES - (n - 1) * PER_ARCHIVE);
            main.push_str("<p>");
            if n > 1 {
                write!(main, "<a href=\"/archive/{}/\">Newer posts</a> ", n - 1).unwrap();
            }
            if n < archives {
                write!(main, "<a href=\"/archive/{}/\">Older posts</a> ", n + 1).unwrap();
            }
            for k in 1..=archives {
                write!(main, "<a href=\"/archive/{k}/\">{k}</a> ").unwrap();
            }
            main.push_str("</p>");
            site.add_real(
                format!("/archive/{n}/"),
                &format!("Archive, page {n}"),
                &main,
            );
        }
        site.front = listing(ARTICLES - PER_ARCHIVE..ARTICLES);
        site
    }

    /// `/`: a welcome of its own, the latest articles, a search, popular
    /// tag pairs and the host's other sections.
    fn finish(mut self) -> Site {
        let mut main = format!("<p>{}</p>", self.prose(60));
        main.push_str(&self.front);
        let (a, b) = (self.words[3].clone(), self.words[17].clone());
        write!(
            main,
            "<p><a href=\"/archive/1/\">All posts</a> <a href=\"/search?q={a}+{b}\">Search: {a} {b}</a></p>\
             <p>Popular: <a href=\"/tag/python+rust/\">python + rust</a> \
             <a href=\"/tag/cache+index/\">cache + index</a> <a href=\"/tag/cooking+travel/\">cooking + travel</a></p>"
        )
        .unwrap();
        main.push_str("<ul>");
        for (href, text) in &self.entries {
            write!(main, "<li><a href=\"{href}\">{text}</a></li>").unwrap();
        }
        main.push_str("</ul>");
        self.pages
            .insert("/".into(), page("The Syllable Blog", &main));
        self.real.push("/".into());
        self
    }

    fn add_real(&mut self, path: String, title: &str, main: &str) {
        self.pages.insert(path.clone(), page(title, main));
        self.real.push(path);
    }

    fn word(&mut self) -> String {
        self.words[self.rng.usize(..self.words.len())].clone()
    }

    fn prose(&mut self, n: usize) -> String {
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }

    /// Prose of a length drawn from `words`.
    fn prose_of(&mut self, words: std::ops::Range<usize>) -> String {
        let n = self.rng.usize(words);
        self.prose(n)
    }

    /// A slug of made-up words no other page of the host has.
    fn slug(&mut self, separator: &str, capitals: bool) -> String {
        loop {
            let parts: Vec<String> = (0..2 + self.rng.usize(..2))
                .map(|_| {
                    let w = self.word();
                    if capitals { capitalized(&w) } else { w }
                })
                .collect();
            let slug = parts.join(separator);
            if self.slugs.insert(slug.clone()) {
                return slug;
            }
        }
    }

    /// A post's slug, title and 3–6 paragraphs of `words` words in all.
    fn post(&mut self, words: std::ops::Range<usize>) -> (String, String, Vec<String>) {
        let slug = self.slug("-", false);
        let title = capitalized(&slug.replace('-', " "));
        let total = self.rng.usize(words);
        let count = 3 + self.rng.usize(..4);
        let paragraphs: Vec<String> = (0..count)
            .map(|k| self.prose(total / count + usize::from(k < total % count)))
            .collect();
        (slug, title, paragraphs)
    }

    /// A post's date and tags, linking its day and 2–3 tag pages.
    fn post_meta(&mut self, day: i64) -> String {
        let count = 2 + self.rng.usize(..2);
        let mut tags = Vec::new();
        while tags.len() < count {
            let t = self.rng.usize(..TAGS.len());
            if !tags.contains(&t) {
                tags.push(t);
            }
        }
        post_meta(day, &tags)
    }

    /// The generator pages the real pages link (the tag, search and day
    /// pages a reader reaches in one click).
    fn linked_generator_pages(&self) -> usize {
        let mut linked = HashSet::new();
        for path in &self.real {
            for href in hrefs(&self.pages[path].body) {
                if is_generated(&href) {
                    linked.insert(href);
                }
            }
        }
        linked.len()
    }

    /// What the host answers for `target`: a real page, a generator's
    /// page, or 404.
    fn answer(&self, target: &str) -> Page {
        if let Some(page) = self.pages.get(target) {
            return page.clone();
        }
        let Some(generated) = Generated::parse(target) else {
            return Page::not_found();
        };
        let mut rng = fastrand::Rng::with_seed(stable_hash(target));
        let links = generated.links(&self.words, |n| rng.usize(..n));
        // The excerpts from a generator of their own.
        let mut rng = fastrand::Rng::with_seed(stable_hash(target) ^ 0x5eed);
        let sources = &self.sources;
        let quotes = Quotes::draw(&mut rng, sources.len(), |i| {
            sources[i].paragraphs.iter().map(String::as_str).collect()
        });
        let source = |i: usize| (sources[i].path.as_str(), sources[i].title.as_str());
        let main = quotes.html(source, "More posts", generated.heading(), &links);
        page(&generated.title(), &main)
    }

    /// (a) `count` products `/product/<n>`, each with a text of its own and
    /// a template sentence, listed `per_list` to a page from `/products/<l>/`.
    fn products(&mut self, count: usize, per_list: usize) {
        let lists = count.div_ceil(per_list);
        let names: Vec<String> = (0..count).map(|_| self.slug(" ", true)).collect();
        for (n, name) in names.iter().enumerate() {
            let text = self.prose_of(40..101);
            let list = n / per_list + 1;
            let mut main = format!(
                "<p>{text}</p><p>Free shipping on orders over fifty dollars, and returns \
                 within thirty days.</p><p><a href=\"/products/{list}/\">Back to the catalogue</a>"
            );
            if n > 0 {
                write!(main, " <a href=\"/product/{}\">Previous</a>", n - 1).unwrap();
            }
            if n + 1 < count {
                write!(main, " <a href=\"/product/{}\">Next</a>", n + 1).unwrap();
            }
            main.push_str("</p>");
            self.add_real(format!("/product/{n}"), name, &main);
            self.sources.push(Source {
                path: format!("/product/{n}"),
                title: name.clone(),
                paragraphs: vec![text],
            });
        }
        for l in 1..=lists {
            let mut main = String::from("<ul>");
            let first = (l - 1) * per_list;
            for (n, name) in names.iter().enumerate().skip(first).take(per_list) {
                write!(main, "<li><a href=\"/product/{n}\">{name}</a></li>").unwrap();
            }
            main.push_str("</ul><p>");
            for k in [1, l.saturating_sub(1).max(1), l + 1, lists] {
                if k != l && k <= lists {
                    write!(main, "<a href=\"/products/{k}/\">Page {k}</a> ").unwrap();
                }
            }
            main.push_str("</p>");
            self.add_real(
                format!("/products/{l}/"),
                &format!("Catalogue, page {l}"),
                &main,
            );
        }
        self.entries.push(("/products/1/".into(), "Shop".into()));
    }

    /// (b) `pages` archive pages `/archive/page/<n>/` listing `per_page`
    /// older posts each (newest first, an excerpt of each), the posts
    /// (150–300 words, tagged and dated like the blog's) reachable only
    /// through them: the generators neither quote nor link them.
    fn older_posts(&mut self, pages: usize, per_page: usize) {
        for n in 1..=pages {
            let mut main = String::new();
            for k in 0..per_page {
                let (slug, title, paragraphs) = self.post(150..301);
                let day = FIRST_DAY - ((n - 1) * per_page + k + 1) as i64;
                let mut post = self.post_meta(day);
                post.push_str(&paragraphs_html(&paragraphs));
                write!(
                    post,
                    "<p><a href=\"/archive/page/{n}/\">In the archive</a></p>"
                )
                .unwrap();
                self.add_real(format!("/post/{slug}/"), &title, &post);
                write!(
                    main,
                    "<article><h2><a href=\"/post/{slug}/\">{title}</a></h2><p>{} …</p></article>",
                    first_words(&paragraphs[0], 30)
                )
                .unwrap();
            }
            main.push_str("<p>");
            let mut around: Vec<usize> = vec![1, n.saturating_sub(1).max(1)];
            around.extend(n.saturating_sub(2).max(1)..=(n + 2).min(pages));
            around.extend([n + 1, pages]);
            let mut seen = HashSet::new();
            for k in around {
                if k != n && k <= pages && seen.insert(k) {
                    write!(main, "<a href=\"/archive/page/{k}/\">{k}</a> ").unwrap();
                }
            }
            main.push_str("</p>");
            self.add_real(
                format!("/archive/page/{n}/"),
                &format!("Older posts, page {n}"),
                &main,
            );
        }
        self.entries
            .push(("/archive/page/1/".into(), "Older posts".into()));
    }

    /// (c) A wiki of `count` pages `/wiki/<Title>` and `/wiki/Main_Page`:
    /// each 3–6 paragraphs of its own, one in five quoting a paragraph of
    /// another page, linking 15–30 others and the next one.
    fn wiki(&mut self, count: usize) {
        let titles: Vec<String> = (0..count).map(|_| self.slug("_", true)).collect();
        let texts: Vec<Vec<String>> = (0..count)
            .map(|_| {
                (0..3 + self.rng.usize(..4))
                    .map(|_| self.prose_of(50..121))
                    .collect()
            })
            .collect();
        for i in 0..count {
            let mut paragraphs = paragraphs_html(&texts[i]);
            if self.rng.usize(..5) == 0 {
                let j = (i + 1 + self.rng.usize(..count - 1)) % count;
                let quoted = &texts[j][self.rng.usize(..texts[j].len())];
                write!(
                    paragraphs,
                    "<p>As <a href=\"/wiki/{}\">{}</a> puts it:</p><blockquote>{quoted}</blockquote>",
                    titles[j],
                    titles[j].replace('_', " ")
                )
                .unwrap();
            }
            paragraphs.push_str("<h2>See also</h2><ul>");
            let mut links = vec![(i + 1) % count];
            links.extend((0..15 + self.rng.usize(..16)).map(|_| self.rng.usize(..count)));
            for j in links {
                write!(
                    paragraphs,
                    "<li><a href=\"/wiki/{}\">{}</a></li>",
                    titles[j],
                    titles[j].replace('_', " ")
                )
                .unwrap();
            }
            paragraphs.push_str("</ul>");
            self.add_real(
                format!("/wiki/{}", titles[i]),
                &titles[i].replace('_', " "),
                &paragraphs,
            );
            self.sources.push(Source {
                path: format!("/wiki/{}", titles[i]),
                title: titles[i].replace('_', " "),
                paragraphs: texts[i].clone(),
            });
        }
        let mut main = format!("<p>{}</p><ul>", self.prose(80));
        for title in titles.iter().take(40) {
            write!(main, "<li><a href=\"/wiki/{title}\">{title}</a></li>").unwrap();
        }
        main.push_str("</ul>");
        self.add_real("/wiki/Main_Page".into(), "Main Page", &main);
        self.entries.push(("/wiki/Main_Page".into(), "Wiki".into()));
    }

    /// (d) A forum `/forum/` of `threads` threads `/thread/<n>?page=<m>`,
    /// 1–8 pages of six replies; half the replies quote 30–80 words of an
    /// earlier reply of their thread before their own 30–120 words.
    fn forum(&mut self, threads: usize) {
        const PER_PAGE: usize = 6;
        let mut index = String::from("<ul>");
        for t in 0..threads {
            let title = capitalized(&self.prose(5));
            let pages = 1 + self.rng.usize(..8);
            let replies = (pages - 1) * PER_PAGE + 1 + self.rng.usize(..PER_PAGE);
            let own: Vec<String> = (0..replies).map(|_| self.prose_of(30..121)).collect();
            let authors: Vec<String> = (0..replies).map(|_| self.word()).collect();
            let mut html: Vec<String> = vec![String::new(); pages];
            for r in 0..replies {
                let mut reply = format!("<div class=\"reply\"><p>{} wrote:</p>", authors[r]);
                if r > 0 && self.rng.bool() {
                    let q = self.rng.usize(..r);
                    let words: Vec<&str> = own[q].split(' ').collect();
                    let n = (30 + self.rng.usize(..51)).min(words.len());
                    let at = self.rng.usize(..=words.len() - n);
                    write!(
                        reply,
                        "<blockquote>{} said: {}</blockquote>",
                        authors[q],
                        words[at..at + n].join(" ")
                    )
                    .unwrap();
                }
                write!(reply, "<p>{}</p></div>", own[r]).unwrap();
                html[r / PER_PAGE].push_str(&reply);
            }
            for (m, replies_html) in html.iter().enumerate() {
                let mut main = replies_html.clone();
                main.push_str("<p><a href=\"/forum/\">Forum</a> ");
                for k in 1..=pages {
                    write!(main, "<a href=\"/thread/{t}?page={k}\">{k}</a> ").unwrap();
                }
                main.push_str("</p>");
                let path = format!("/thread/{t}?page={}", m + 1);
                self.add_real(path.clone(), &title, &main);
                self.sources.push(Source {
                    path,
                    title: title.clone(),
                    paragraphs: own[m * PER_PAGE..((m + 1) * PER_PAGE).min(replies)].to_vec(),
                });
            }
            write!(
                index,
                "<li><a href=\"/thread/{t}?page=1\">{title}</a> ({pages} pages, \
                 <a href=\"/thread/{t}?page={pages}\">last</a>)</li>"
            )
            .unwrap();
        }
        index.push_str("</ul>");
        self.add_real("/forum/".into(), "Forum", &index);
        self.entries.push(("/forum/".into(), "Forum".into()));
    }
}

/// FNV-1a: a generator page is drawn from its target, the same in every run.
fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn is_generated(target: &str) -> bool {
    GENERATORS.iter().any(|g| target.starts_with(g))
}

/// The hrefs of a page's HTML.
fn hrefs(body: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(body)
        .split("href=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_string())
        .collect()
}

/// Serve `site` on `ip`, crawl it from `/` with no page budget, and check:
/// every real page fetched, only generator pages recorded as trapped, the
/// crawl ended by itself (within [`DEADLINE`]), and the generators were
/// asked at most `bound` times. Prints what it saw first, so a failure
/// says where.
async fn crawl_site(name: &str, ip: Ipv4Addr, site: Site, s: Settings, bound: u32) {
    let real = site.real.clone();
    let site = Arc::new(site);
    let server = TestServer::serve_fn(reserve(ip), move |req| {
        site.answer(req.uri().path_and_query().map_or("/", |p| p.as_str()))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("t.db")).unwrap());
    let started = Instant::now();
    let app = start(store.clone(), s).await.unwrap();
    app.add_url(&server.url("/")).await.unwrap();
    let idle = tokio::time::timeout(DEADLINE, app.wait_idle())
        .await
        .ok()
        .map(Result::unwrap);
    let elapsed = started.elapsed();
    let refused = app.status().await.unwrap().store.trapped;
    app.stop(Duration::from_secs(5)).await.unwrap();

    let per_family: Vec<(&str, u32)> = GENERATORS
        .iter()
        .map(|g| (*g, hits_under(&server, g)))
        .collect();
    let generated: u32 = per_family.iter().map(|(_, n)| n).sum();
    let missing: Vec<&String> = real.iter().filter(|p| server.hits_of(p) == 0).collect();
    let left_out = trapped(store.as_ref()).await;
    let origin = server.origin();
    let target_of = |url: &str| url.strip_prefix(origin.as_str()).unwrap_or(url).to_string();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for (_, why) in &left_out {
        let kind = why.split(" (").next().unwrap_or(why);
        *reasons.entry(kind.to_string()).or_default() += 1;
    }
    eprintln!(
        "{name}: {} after {:.1} s; {} of {} real pages fetched; generator requests {generated} \
         ({per_family:?}) for {} real pages; {} requests in all; {refused} URLs refused; \
         recorded as trapped: {reasons:#?}",
        match idle {
            Some(reason) => format!("ended ({reason:?})"),
            None => "did not end".into(),
        },
        elapsed.as_secs_f64(),
        real.len() - missing.len(),
        real.len(),
        real.len(),
        server.total_hits(),
    );
    assert!(
        missing.is_empty(),
        "{name}: {} real pages not fetched: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    let real_trapped: Vec<&(String, String)> = left_out
        .iter()
        .filter(|(url, _)| !is_generated(&target_of(url)))
        .collect();
    assert!(
        real_trapped.is_empty(),
        "{name}: real pages recorded as trapped: {:?}",
        &real_trapped[..real_trapped.len().min(10)]
    );
    assert_eq!(
        idle,
        Some(IdleReason::FrontierEmpty),
        "{name}: the crawl ends by itself within {DEADLINE:?}"
    );
    assert!(
        generated <= bound,
        "{name}: {generated} generator requests ({per_family:?}), at most {bound}"
    );
}

/// The blog's crawl settings: as in the issue, no delay and four requests
/// in flight on the host.
fn blog_settings() -> Settings {
    let mut s = settings();
    s.crawl.per_host = 4;
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blog_with_text_rich_generators_ends_with_every_real_page() {
    let site = Site::blog(24).finish();
    assert_eq!(site.real.len(), BLOG_PAGES);
    let bound = BLOG_PAGES as u32;
    crawl_site(
        "blog",
        Ipv4Addr::new(127, 0, 24, 1),
        site,
        blog_settings(),
        bound,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_products_beside_text_rich_generators_are_all_crawled() {
    let mut site = Site::blog(25);
    site.products(10_000, 100);
    let site = site.finish();
    assert_eq!(site.real.len(), BLOG_PAGES + 10_100);
    let mut s = blog_settings();
    s.crawl.concurrency = 32;
    s.crawl.per_host = 16;
    // The generators link products until the crawl has seen them all: the
    // real pages bound them.
    let bound = (site.real.len() + site.linked_generator_pages()) as u32;
    crawl_site("products", Ipv4Addr::new(127, 0, 24, 2), site, s, bound).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_paginated_archive_beside_text_rich_generators_is_crawled_whole() {
    let mut site = Site::blog(26);
    site.older_posts(300, 10);
    let site = site.finish();
    assert_eq!(site.real.len(), BLOG_PAGES + 3_300);
    let bound = (site.real.len() + site.linked_generator_pages()) as u32;
    crawl_site(
        "archive",
        Ipv4Addr::new(127, 0, 24, 3),
        site,
        blog_settings(),
        bound,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiki_whose_pages_quote_each_other_is_crawled_whole() {
    let mut site = Site::blog(27);
    site.wiki(500);
    let site = site.finish();
    assert_eq!(site.real.len(), BLOG_PAGES + 501);
    let bound = (site.real.len() + site.linked_generator_pages()) as u32;
    crawl_site(
        "wiki",
        Ipv4Addr::new(127, 0, 24, 4),
        site,
        blog_settings(),
        bound,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forum_whose_replies_quote_earlier_replies_is_crawled_whole() {
    let mut site = Site::blog(28);
    site.forum(60);
    let site = site.finish();
    let bound = (site.real.len() + site.linked_generator_pages()) as u32;
    crawl_site(
        "forum",
        Ipv4Addr::new(127, 0, 24, 5),
        site,
        blog_settings(),
        bound,
    )
    .await;
}

/// The webs above are as described: every real page is reachable from `/`
/// through real pages alone, the generators answer any URL of their
/// shapes with excerpts copied verbatim and ten real links, and nothing
/// else answers.
#[test]
fn the_test_webs_are_as_described() {
    let mut site = Site::blog(24);
    site.wiki(50);
    site.forum(6);
    site.older_posts(5, 10);
    site.products(200, 100);
    let site = site.finish();
    let real: HashSet<&str> = site.real.iter().map(String::as_str).collect();
    assert_eq!(real.len(), site.real.len(), "no real page twice");
    let mut reached = HashSet::from(["/".to_string()]);
    let mut queue = VecDeque::from(["/".to_string()]);
    let mut generator_entries = HashSet::new();
    while let Some(path) = queue.pop_front() {
        for href in hrefs(&site.pages[&path].body) {
            if real.contains(href.as_str()) {
                if reached.insert(href.clone()) {
                    queue.push_back(href);
                }
            } else {
                assert!(is_generated(&href), "{href} on {path}");
                assert_eq!(site.answer(&href).status, 200, "{href}");
                generator_entries.insert(href);
            }
        }
    }
    assert_eq!(reached.len(), real.len(), "every real page reachable");
    assert!(generator_entries.len() > 100, "{}", generator_entries.len());

    let texts: Vec<String> = site
        .sources
        .iter()
        .flat_map(|s| s.paragraphs.iter().cloned())
        .collect();
    for target in [
        "/tag/python/",
        "/tag/python+rust+web/",
        "/search?q=cache+index",
        "/day/2024-03-05/",
        "/day/2024-02-29/",
    ] {
        let page = site.answer(target);
        assert_eq!(page.status, 200, "{target}");
        let body = String::from_utf8(page.body.clone()).unwrap();
        let links = hrefs(&page.body);
        let real_links: HashSet<&String> = links
            .iter()
            .filter(|l| {
                real.contains(l.as_str()) && l.as_str() != "/" && !l.starts_with("/archive/")
            })
            .collect();
        assert_eq!(real_links.len(), 10, "{target}");
        let family: Vec<&String> = links
            .iter()
            .filter(|l| l.starts_with(&target[..5]) && *l != target)
            .collect();
        assert!(family.len() >= 4, "{target}: {family:?}");
        for l in family {
            assert_eq!(site.answer(l).status, 200, "{l} from {target}");
        }
        let excerpts: Vec<&str> = body
            .split("<p>… ")
            .skip(1)
            .map(|e| &e[..e.find(" …</p>").unwrap()])
            .collect();
        assert!((3..=5).contains(&excerpts.len()), "{target}");
        for e in excerpts {
            assert!(e.split(' ').count() >= 20, "{e}");
            assert!(texts.iter().any(|t| t.contains(e)), "verbatim: {e}");
        }
        assert_eq!(site.answer(target).body, page.body, "the same every time");
    }
    assert_ne!(
        site.answer("/tag/rust/").body,
        site.answer("/tag/web/").body
    );
    let next = hrefs(&site.answer("/day/2024-12-31/").body);
    assert!(next.contains(&"/day/2025-01-01/".to_string()));
    assert!(next.contains(&"/day/2025-01-28/".to_string()));
    for target in [
        "/tag/",
        "/tag/python+python/",
        "/tag/nosuchtag/",
        "/tag/python",
        "/search?q=",
        "/search?q=Cache",
        "/day/2023-02-29/",
        "/day/2024-3-05/",
        "/day/2024-03-05",
        "/nowhere",
    ] {
        assert_eq!(site.answer(target).status, 404, "{target}");
    }
}
