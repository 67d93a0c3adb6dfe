//! Rule 6's look at a page (see the module docs): whether its text is a
//! copy of what its host served, whether it leads anywhere new, and
//! whether its directory still grows.

use super::*;

impl TrapGuard {
    /// Rule 6's look at a page: whether its text is a copy of what its host
    /// served and whether it leads anywhere new; `None` when the page is
    /// not judged (rule off, a re-check, too little text). Learns the
    /// page's shingles and links either way.
    ///
    /// Also says whether the page links a URL the crawl had not seen of
    /// another pattern than its own (a new page, not the next of a series).
    pub(super) fn stale(
        &mut self,
        parts: &Parts,
        shingles: &[u32],
        links: &[(u64, Parts)],
    ) -> (Option<Stale>, bool) {
        let host = key(KEY_HOST, parts.host());
        let directory = parts.directory_key();
        // Each shingle and link is looked up once: what is new is judged
        // on, then learned.
        let keys: Vec<u64> = shingles.iter().map(|&s| text_key(host, s)).collect();
        let new = self.text_seen.unseen(keys.iter().copied());
        let unseen_urls = self.links_seen.unseen(links.iter().map(|(url, _)| *url));
        // Both in the links' order: walk them together.
        let mut next = unseen_urls.iter().peekable();
        let unseen: Vec<(u64, &Parts)> = links
            .iter()
            .filter(|(url, _)| next.next_if_eq(&url).is_some())
            .map(|(url, l)| (*url, l))
            .collect();
        let judged = self.cfg.copy_pct > 0 && shingles.len() >= MIN_JUDGED_SHINGLES;
        // A list of links with snippets (a generator's page, search
        // results) is not where text comes from: its snippets are of the
        // pages it lists, fetched or not yet.
        let listing = links.len() >= LISTING_LINKS
            && shingles.len() * novelty::SAMPLE_ONE_IN < LISTING_WORDS_PER_LINK * links.len();
        let copy = new.len() * 100 <= self.cfg.copy_pct as usize * shingles.len();
        // A list whose snippets are new to the host lists pages not yet
        // fetched: whether it is a copy is not known yet, so it is not
        // judged (counted as fresh, a generator's early pages, quoting
        // what the crawl had not fetched, held its directory open until
        // the crawl knew its every URL).
        let verdict = (judged && (copy || !listing)).then(|| {
            let outward = |l: &Parts| {
                let into = l.directory_key();
                into != directory && !self.copying(into)
            };
            // Distinct URLs: a page may link one twice.
            let new_out = distinct(unseen.iter().filter(|(_, l)| outward(l)).map(|(k, _)| *k));
            let leads_out = leads_out(new_out, || {
                distinct(links.iter().filter(|(_, l)| outward(l)).map(|(k, _)| *k))
            });
            Stale {
                copy,
                leads_out,
                grows: unseen.iter().any(|(_, l)| l.directory_key() == directory),
                // Asked only where it decides: a copy, not a list, leading
                // nowhere.
                siblings: copy
                    && !listing
                    && !leads_out
                    && self.copies_siblings(directory, shingles, &new),
            }
        });
        // Where each shingle was first served: its host, and, when the page
        // is not a list, its directory (see `copies_siblings`): a
        // generator's snippets fetched before the pages they are of would
        // otherwise make its later pages look like copies of its own.
        let mut next = new.iter().peekable();
        let mut learned = Vec::with_capacity(2 * new.len());
        for (&k, &s) in keys.iter().zip(shingles) {
            if next.next_if_eq(&&k).is_some() {
                learned.push(k);
                if !listing {
                    learned.push(text_key(directory, s));
                }
            }
        }
        self.text_seen.insert_new(&learned);
        let new_pages = unseen.iter().any(|(_, l)| l.pattern != parts.pattern);
        let urls: Vec<u64> = unseen.iter().map(|(url, _)| *url).collect();
        self.links_seen.insert_new(&urls);
        (verdict, new_pages)
    }

    /// Whether most of what a page copied (its `shingles` but the `new`
    /// ones' keys) was first served by pages of its own `directory`: the
    /// text its siblings share (a shop's products with shared descriptions,
    /// a thread quoting earlier replies), not excerpts of pages elsewhere,
    /// which is what a generator serves.
    pub(super) fn copies_siblings(&self, directory: u64, shingles: &[u32], new: &[u64]) -> bool {
        let copied = shingles.len() - new.len();
        let elsewhere = self
            .text_seen
            .unseen(shingles.iter().map(|&s| text_key(directory, s)))
            .len()
            .saturating_sub(new.len());
        copied > 0 && elsewhere * 2 < copied
    }

    /// Whether a directory's recent pages are mostly copies (its links
    /// lead nowhere new whatever they point at).
    pub(super) fn copying(&self, directory: u64) -> bool {
        self.patterns.get(&directory).is_some_and(|rec| {
            rec.closed.is_some()
                || (rec.pages >= self.cfg.pattern_window.clamp(1, 64) / 2
                    && share(
                        rec.recent_dups,
                        rec.pages.min(self.cfg.pattern_window.clamp(1, 64)),
                        self.cfg.stale_pct,
                    ))
        })
    }
}

/// Rule 6's verdict on one page.
#[derive(Clone, Copy, Debug)]
pub(super) struct Stale {
    /// Its text is (nearly) all shingles its host had served.
    pub(super) copy: bool,
    /// It links outside its directory to enough URLs not seen before
    /// ([`leads_out`]).
    pub(super) leads_out: bool,
    /// It links a URL of its own directory that the crawl had not seen:
    /// the directory is still growing.
    pub(super) grows: bool,
    /// Most of what it copied was first served by its own directory's
    /// pages ([`TrapGuard::copies_siblings`]; asked of a copy leading
    /// nowhere only).
    pub(super) siblings: bool,
}

/// Whether a page whose links leave its directory to `new` URLs the crawl
/// had not seen (of `links_out()` URLs in all, asked only when it decides)
/// leads anywhere new: at least [`NEW_LINKS_OUT`] new ones, or all of them
/// on a page with fewer. A generator's page links a handful of real pages
/// picked from all of them, so one or two of them are still unseen until
/// nearly every real page is known (with 90% known, 65% of pages that link
/// ten have one unseen, 7% have three): counted, they kept such a
/// directory open for as long, by chance of which fetches came first. A
/// real page that finds new pages (an archive, an index) finds many at once.
pub(super) fn leads_out(new: usize, links_out: impl FnOnce() -> usize) -> bool {
    new >= NEW_LINKS_OUT || (new > 0 && new == links_out())
}

/// See [`leads_out`].
pub(super) const NEW_LINKS_OUT: usize = 3;

/// How many distinct keys `keys` holds.
pub(super) fn distinct(keys: impl Iterator<Item = u64>) -> usize {
    let mut keys: Vec<u64> = keys.collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

/// A list has at least this many links: a short page with a few links
/// (a product, a note) is a page of its own.
pub(super) const LISTING_LINKS: usize = 10;

/// A page with fewer words than this per link (its sampled shingles times
/// the sampling rate) is a list of links: a generator's page, search
/// results, a day's events.
pub(super) const LISTING_WORDS_PER_LINK: usize = 25;

/// Fewer sampled shingles than this (a page of under ~100 words) say too
/// little about a page: rule 6 leaves it unjudged.
pub(super) const MIN_JUDGED_SHINGLES: usize = 8;

/// The text sketch's key of a host's shingle.
pub(super) fn text_key(host: u64, shingle: u32) -> u64 {
    fmix64(host ^ u64::from(shingle).rotate_left(17))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_leads_out_with_a_few_new_links_not_one() {
        // Ten links out: one or two new ones are a generator's chance pick.
        assert!(!leads_out(0, || 10));
        assert!(!leads_out(1, || 10));
        assert!(!leads_out(2, || 10));
        assert!(leads_out(3, || 10));
        assert!(leads_out(10, || 10));
        // A page with fewer links out leads out when they are all new.
        assert!(leads_out(1, || 1));
        assert!(leads_out(2, || 2));
        assert!(!leads_out(1, || 2));
        assert!(!leads_out(0, || 0));
    }

    // Whole crawls of webs whose pages share text, through the guard.
    use crate::traps::harness::*;
    use crate::traps::{TrapGuard, TrapReason, TrapSettings};

    /// A blog as the held-out one: 300 articles of their own text,
    /// an index and 30 archive pages, and three generators whose pages are
    /// excerpts of the articles, each linking to ten of them: tag
    /// intersections, site search with related searches, a calendar.
    pub(super) struct Blog {
        slugs: Vec<String>,
        texts: Vec<String>,
        tags: Vec<String>,
    }

    pub(super) const BLOG: &str = "http://blog.test";

    impl Blog {
        fn new() -> Self {
            let mut rng = Rng(24);
            let vocab = vocabulary(&mut rng, 3000);
            let slugs = (0..300)
                .map(|i| format!("{}-{}", vocab[i], vocab[i + 300]))
                .collect();
            let texts = (0..300)
                .map(|_| {
                    let n = 300 + rng.below(300);
                    words(&mut rng, &vocab, n)
                })
                .collect();
            let tags = vocab[2900..2930].to_vec();
            Self { slugs, texts, tags }
        }

        fn article(&self, i: usize) -> String {
            format!("{BLOG}/post/{}/", self.slugs[i])
        }

        /// A generated page: excerpts of random articles and ten of them
        /// linked, seeded by its URL.
        fn excerpts(&self, url: &str) -> (String, Vec<String>) {
            let mut rng = Rng(fnv1a(FNV_OFFSET, url.as_bytes()) | 1);
            let mut text = String::from("Blog home archive about. ");
            for _ in 0..3 + rng.below(3) {
                let words: Vec<&str> = self.texts[rng.below(300)].split(' ').collect();
                let len = 20 + rng.below(40);
                let at = rng.below(words.len() - len);
                text.push_str(&words[at..at + len].join(" "));
                text.push_str(". ");
            }
            let links = (0..10).map(|_| self.article(rng.below(300))).collect();
            (text, links)
        }

        fn page(&self, url: &str) -> Option<(String, Vec<String>)> {
            let path = url.strip_prefix(BLOG)?;
            let mut rng = Rng(fnv1a(FNV_OFFSET, url.as_bytes()) | 1);
            if path == "/" {
                let mut links: Vec<String> =
                    (1..=30).map(|n| format!("{BLOG}/archive/{n}/")).collect();
                links.push(format!("{BLOG}/search?q={}", self.tags[0]));
                return Some(("Blog home. Recent posts and archives.".into(), links));
            }
            if let Some(n) = path.strip_prefix("/archive/") {
                let n: usize = n.trim_end_matches('/').parse().ok()?;
                let range = (n - 1) * 10..n * 10;
                let text = range
                    .clone()
                    .map(|i| {
                        self.texts[i]
                            .split(' ')
                            .take(30)
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect::<Vec<_>>()
                    .join(". ");
                return Some((text, range.map(|i| self.article(i)).collect()));
            }
            if let Some(slug) = path.strip_prefix("/post/") {
                let i = self
                    .slugs
                    .iter()
                    .position(|s| s == slug.trim_end_matches('/'))?;
                let links = vec![
                    format!("{BLOG}/"),
                    self.article((i + 1) % 300),
                    format!("{BLOG}/tag/{}/", self.tags[rng.below(30)]),
                    format!(
                        "{BLOG}/tag/{}+{}/",
                        self.tags[rng.below(30)],
                        self.tags[rng.below(30)]
                    ),
                    format!(
                        "{BLOG}/day/2024-{:02}-{:02}/",
                        1 + rng.below(12),
                        1 + rng.below(28)
                    ),
                ];
                return Some((self.texts[i].clone(), links));
            }
            let (text, mut links) = self.excerpts(url);
            if let Some(tags) = path.strip_prefix("/tag/") {
                let tags = tags.trim_end_matches('/');
                for _ in 0..5 {
                    links.push(format!("{BLOG}/tag/{tags}+{}/", self.tags[rng.below(30)]));
                }
            } else if let Some(q) = path.strip_prefix("/search?q=") {
                for _ in 0..5 {
                    links.push(format!("{BLOG}/search?q={q}+{}", self.tags[rng.below(30)]));
                }
            } else if let Some(day) = path.strip_prefix("/day/") {
                let day = day.trim_end_matches('/');
                let mut ymd = day.split('-').map(|p| p.parse::<i64>().unwrap_or(1));
                let (y, m, d) = (ymd.next()?, ymd.next()?, ymd.next()?);
                for step in [1, -1, 7] {
                    let n = (y * 12 + m - 1) * 28 + d - 1 + step;
                    let (y, m, d) = (n / (12 * 28), n / 28 % 12 + 1, n % 28 + 1);
                    links.push(format!("{BLOG}/day/{y}-{m:02}-{d:02}/"));
                }
            } else {
                return None;
            }
            Some((text, links))
        }
    }

    pub(super) fn generated(url: &str) -> bool {
        ["/tag/", "/search?", "/day/"]
            .iter()
            .any(|g| url.contains(g))
    }

    #[test]
    fn text_rich_generators_close_and_the_blog_is_crawled_whole() {
        let blog = Blog::new();
        let c = crawl(guard(), &[&format!("{BLOG}/")], |u| blog.page(u));
        let generator_fetches = c.fetched.iter().filter(|u| generated(u)).count();
        for g in ["/tag/", "/search?", "/day/"] {
            let first_real_missing = c.fetched.iter().position(|u| u.contains(g));
            eprintln!(
                "{g}: {} fetched, first at {first_real_missing:?}",
                c.fetched_matching(g)
            );
        }
        eprintln!("closures: {:?}", c.closures);
        let last_real = c.fetched.iter().rposition(|u| !generated(u));
        eprintln!(
            "last real page at fetch {last_real:?} of {}",
            c.fetched.len()
        );
        let real = c.fetched.len() - generator_fetches;
        assert_eq!(real, 331, "every real page");
        assert!(
            generator_fetches <= 331,
            "{generator_fetches} generator pages for 331 real ones"
        );
        let stale: Vec<String> = c
            .closures
            .iter()
            .filter_map(|r| match r {
                TrapReason::Stale { directory, .. } => Some(directory.clone()),
                _ => None,
            })
            .collect();
        for dir in ["blog.test/tag/", "blog.test/search?", "blog.test/day/"] {
            assert!(
                stale.iter().any(|d| d == dir),
                "{dir} closed: {:?}",
                c.closures
            );
        }
        assert!(
            c.refused.iter().all(|(u, _)| generated(u)),
            "only generated pages refused"
        );
    }

    /// The calendar's pages fetched as soon as they are found, before the
    /// articles they quote: their snippets are new to the host then, which
    /// says nothing about whether they are copies. Counted as fresh, they
    /// held `/day/` open until the crawl knew its every linked day, and it
    /// no longer grew.
    #[test]
    fn a_generator_fetched_before_the_pages_it_quotes_still_closes() {
        let blog = Blog::new();
        let c = crawl_interleaving(
            guard(),
            &[&format!("{BLOG}/")],
            |u| blog.page(u),
            |u| u.contains("/day/"),
        );
        let real = c.fetched.iter().filter(|u| !generated(u)).count();
        assert_eq!(real, 331, "every real page");
        let generator_fetches = c.fetched.iter().filter(|u| generated(u)).count();
        assert!(
            generator_fetches <= 331,
            "{generator_fetches} generator pages for 331 real ones ({} calendar pages): {:?}",
            c.fetched_matching("/day/"),
            c.closures
        );
    }

    #[test]
    fn the_same_generators_without_rule_6_do_not_end() {
        let blog = Blog::new();
        let g = TrapGuard::new(TrapSettings {
            copy_pct: 0,
            ..TrapSettings::default()
        });
        let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crawl(g, &[&format!("{BLOG}/")], |u| blog.page(u))
        }));
        assert!(ended.is_err(), "without rule 6 the crawl runs to its bound");
    }

    /// A wiki whose pages quote another page now and then, and a forum
    /// whose replies quote earlier ones: mostly text of their own, so
    /// every page is fetched and nothing is closed.
    #[test]
    fn pages_that_quote_others_stay_open() {
        let mut rng = Rng(7);
        let vocab = vocabulary(&mut rng, 3000);
        let wiki: Vec<String> = (0..500).map(|_| words(&mut rng, &vocab, 250)).collect();
        // Thread t's replies, each of its own text, most quoting an
        // earlier reply of the thread.
        let replies: Vec<Vec<String>> = (0..60)
            .map(|_| {
                let n = 5 + rng.below(36);
                let mut thread: Vec<String> = Vec::new();
                for r in 0..n {
                    let len = 40 + rng.below(60);
                    let own = words(&mut rng, &vocab, len);
                    let reply = if r > 0 && rng.below(3) > 0 {
                        let quoted: Vec<&str> = thread[rng.below(r)].split(' ').collect();
                        let len = quoted.len().min(30 + rng.below(50));
                        format!("{} wrote: {} {own}", r, quoted[..len].join(" "))
                    } else {
                        own
                    };
                    thread.push(reply);
                }
                thread
            })
            .collect();
        let web = |url: &str| -> Option<(String, Vec<String>)> {
            let path = url.strip_prefix("http://q.test")?;
            if path == "/" {
                let mut links: Vec<String> = (0..60)
                    .map(|t| format!("http://q.test/thread/{t}?page=1"))
                    .collect();
                links.push("http://q.test/wiki/0".into());
                return Some(("Wiki and forum.".into(), links));
            }
            if let Some(n) = path.strip_prefix("/wiki/") {
                let n: usize = n.parse().ok()?;
                let mut text = wiki[n].clone();
                if n.is_multiple_of(5) && n > 0 {
                    text = format!("{} As the other page says: {}", text, wiki[n / 2]);
                }
                let links = [1, 2, 7, 50, 123]
                    .iter()
                    .map(|k| format!("http://q.test/wiki/{}", (n * k + k) % 500))
                    .collect();
                return Some((text, links));
            }
            let rest = path.strip_prefix("/thread/")?;
            let (t, page) = rest.split_once("?page=")?;
            let (t, page): (usize, usize) = (t.parse().ok()?, page.parse().ok()?);
            let thread = &replies[t];
            let first = (page - 1) * 5;
            if first >= thread.len() {
                return None;
            }
            let text = thread[first..(first + 5).min(thread.len())].join(" ");
            let mut links = vec!["http://q.test/".to_string()];
            if first + 5 < thread.len() {
                links.push(format!("http://q.test/thread/{t}?page={}", page + 1));
            }
            Some((text, links))
        };
        let c = crawl(guard(), &["http://q.test/"], web);
        assert_eq!(c.fetched_matching("/wiki/"), 500, "{:?}", c.closures);
        let pages: usize = replies.iter().map(|t| t.len().div_ceil(5)).sum();
        assert_eq!(c.fetched_matching("/thread/"), pages, "{:?}", c.closures);
        assert!(
            c.refused.is_empty(),
            "{:?}",
            &c.refused[..c.refused.len().min(3)]
        );
    }

    /// A host whose 1,000 pages are paragraphs from one pool of 300 (as
    /// shops, syndicated news and docs kept for two versions are), in 40
    /// sections of 25 that link each other: the pages are copies of what
    /// the host served from the first hundred on, and their links out are
    /// known long before their own section's. Nothing of it closes, in
    /// either order of fetching.
    #[test]
    fn sections_whose_pages_share_paragraphs_stay_open() {
        let mut rng = Rng(44);
        let vocab = vocabulary(&mut rng, 2000);
        let pool: Vec<String> = (0..300)
            .map(|_| {
                let n = 40 + rng.below(80);
                words(&mut rng, &vocab, n)
            })
            .collect();
        // Half numbered sections, half a manual kept for two versions.
        let section = |k: usize| {
            if k < 20 {
                format!("http://s.test/section-{k}/")
            } else {
                format!(
                    "http://s.test/3.{}/part-{}/",
                    11 + (k - 20) / 10,
                    (k - 20) % 10
                )
            }
        };
        let pages: Vec<(String, Vec<String>)> = (0..1000)
            .map(|i| {
                let (k, n) = (i / 25, i % 25);
                let text = (0..10 + rng.below(20))
                    .map(|_| pool[rng.below(pool.len())].as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                let mut links = vec![
                    "http://s.test/".to_string(),
                    format!("{}{}.html", section(k), (n + 1) % 25),
                    format!("{}{}.html", section(k), (n + 24) % 25),
                ];
                for _ in 0..5 {
                    links.push(format!("{}{}.html", section(k), rng.below(25)));
                }
                for _ in 0..3 {
                    links.push(format!("{}{}.html", section(rng.below(40)), rng.below(25)));
                }
                (text, links)
            })
            .collect();
        let web = |url: &str| -> Option<(String, Vec<String>)> {
            if url == "http://s.test/" {
                let links = (0..40).map(|k| format!("{}0.html", section(k))).collect();
                return Some(("Sections.".into(), links));
            }
            let i = (0..40)
                .find(|&k| url.starts_with(&section(k)))
                .and_then(|k| {
                    let n: usize = url[section(k).len()..]
                        .strip_suffix(".html")?
                        .parse()
                        .ok()?;
                    Some(k * 25 + n)
                })?;
            Some(pages[i].clone())
        };
        let c = crawl(guard(), &["http://s.test/"], web);
        assert_eq!(c.fetched.len(), 1001, "{:?}", c.closures);
        assert!(c.closures.is_empty(), "{:?}", c.closures);
    }

    /// A shop of 2,000 products in one directory, whose descriptions come
    /// from 100 shared ones, each product linking its neighbours and three
    /// related products, listed 50 to a page: its pages are copies linking
    /// new products of their own directory for as long as the crawl is in
    /// it, as a generator's do, and it is crawled whole.
    #[test]
    fn a_shop_whose_products_share_descriptions_is_crawled_whole() {
        let mut rng = Rng(45);
        let vocab = vocabulary(&mut rng, 2000);
        let descriptions: Vec<String> = (0..100)
            .map(|_| {
                let n = 60 + rng.below(80);
                words(&mut rng, &vocab, n)
            })
            .collect();
        let names: Vec<String> = (0..2000).map(|_| words(&mut rng, &vocab, 3)).collect();
        let products: Vec<(String, Vec<String>)> = (0..2000)
            .map(|i| {
                let text = std::iter::once(names[i].as_str())
                    .chain((0..3).map(|_| descriptions[rng.below(100)].as_str()))
                    .collect::<Vec<_>>()
                    .join(" ");
                let mut links = vec![
                    format!("http://shop.test/products/{}", i / 50),
                    format!("http://shop.test/product/{}", (i + 1) % 2000),
                    format!("http://shop.test/product/{}", (i + 1999) % 2000),
                ];
                for _ in 0..3 {
                    links.push(format!("http://shop.test/product/{}", rng.below(2000)));
                }
                (text, links)
            })
            .collect();
        let web = |url: &str| -> Option<(String, Vec<String>)> {
            let path = url.strip_prefix("http://shop.test")?;
            if path == "/" {
                return Some((
                    "The shop.".into(),
                    vec!["http://shop.test/products/0".into()],
                ));
            }
            if let Some(k) = path.strip_prefix("/products/") {
                let k: usize = k.parse().ok()?;
                let mut links: Vec<String> = (k * 50..k * 50 + 50)
                    .map(|i| format!("http://shop.test/product/{i}"))
                    .collect();
                links.push(format!("http://shop.test/products/{}", (k + 1) % 40));
                return Some((names[k * 50..k * 50 + 50].join(" "), links));
            }
            let i: usize = path.strip_prefix("/product/")?.parse().ok()?;
            products.get(i).cloned()
        };
        let c = crawl(guard(), &["http://shop.test/"], web);
        assert_eq!(c.fetched_matching("/product/"), 2000, "{:?}", c.closures);
        assert!(c.closures.is_empty(), "{:?}", c.closures);
    }

    #[test]
    fn rule_6_memory_stays_within_its_cap() {
        let blog = Blog::new();
        let c = crawl(guard(), &[&format!("{BLOG}/")], |u| blog.page(u));
        // A few hundred pages: the first generations of its two sketches
        // (8 and 32 KB each, some 180 KB in all).
        assert!(
            c.guard.sketch_bytes() <= 256 * 1024,
            "{}",
            c.guard.sketch_bytes()
        );
        let cap = TrapSettings::default().sketch_bytes;
        let mut g = TrapGuard::new(TrapSettings {
            sketch_bytes: 64 * 1024,
            ..TrapSettings::default()
        });
        let vocab = vocabulary(&mut Rng(9), 2000);
        let mut rng = Rng(10);
        for n in 0..3000 {
            let text = words(&mut rng, &vocab, 300);
            let links: Vec<String> = (0..20)
                .map(|k| format!("http://m.test/p/{n}/{k}"))
                .collect();
            g.observe(
                &format!("http://m.test/p/{n}"),
                PageSimhash::from(rng.next()),
                &shingles(&text),
                &links,
                T0,
            );
        }
        assert!(g.sketch_bytes() <= 4 * 64 * 1024, "{}", g.sketch_bytes());
        assert!(
            cap <= 8 << 20,
            "the documented bound: 4 x sketch_bytes ≤ 32 MB"
        );
    }
}
