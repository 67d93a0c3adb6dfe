//! The text-rich URL generators real sites have (issue #24), which three
//! webs serve: the integration tests' blog (`tests/it/text_traps.rs`), the
//! shared-text web ([`crate::shared_text`]) and the benchmark's
//! `-text-traps` presets. Any URL of their shapes answers:
//!
//! - tag intersections, `/tag/python+rust/`, whose "narrow down" links
//!   append a tag (`/tag/python+rust+web/`) and "broaden" links drop one;
//! - site search, `/search?q=cache+index`, linking related searches (a
//!   word appended);
//! - an events calendar, `/day/2024-03-05/`, linking the day and week
//!   before and after, and the next month.
//!
//! Each page is 3–5 excerpts (20–60 consecutive words of a paragraph of
//! one of the host's real pages, each under a link to its page), links to
//! ten real pages in all, and the family's own links. Here are what is a
//! generator's page ([`Generated::parse`]), its title and links, the real
//! pages it quotes ([`Quotes`]) and the day and tags a real page links; a
//! web draws the randomness (from the URL, so a page is the same every
//! time) and writes the page around them.

use std::fmt::Write as _;

/// The tags of the tag generator.
pub const TAGS: [&str; 30] = [
    "python", "rust", "web", "cache", "index", "search", "linux", "network", "database", "testing",
    "design", "security", "cloud", "mobile", "audio", "games", "travel", "cooking", "garden",
    "music", "books", "photo", "math", "physics", "history", "art", "film", "health", "news",
    "river",
];

/// Where the generators answer (targets starting so).
pub const GENERATORS: [&str; 3] = ["/tag/", "/search?", "/day/"];

/// The date a trap host's real pages count from, as a day number.
pub const FIRST_DAY: i64 = days_from_civil(2023, 6, 1);

/// A generator's page, parsed from its target (path and query).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Generated {
    /// Indexes into [`TAGS`], distinct, in the order of the path.
    Tags(Vec<usize>),
    /// The query's words.
    Search(Vec<String>),
    /// A day number (days since 1970-01-01).
    Day(i64),
}

impl Generated {
    /// `/tag/a+b+…/`: one or more distinct tags of [`TAGS`];
    /// `/search?q=a+b+…`: one or more lowercase words; `/day/YYYY-MM-DD/`:
    /// any real date of the years 1000–9999. A `+` may be written `%2B` in
    /// a tag list and `%20` in a query.
    pub fn parse(target: &str) -> Option<Generated> {
        parse_tags(target)
            .map(Generated::Tags)
            .or_else(|| parse_search(target).map(Generated::Search))
            .or_else(|| parse_day(target).map(Generated::Day))
    }

    pub fn title(&self) -> String {
        match self {
            Generated::Tags(tags) => format!("Posts tagged {}", names(tags).join(" + ")),
            Generated::Search(query) => format!("Search results for {}", query.join(" ")),
            Generated::Day(day) => {
                let (y, m, d) = civil_from_days(*day);
                format!("Events on {y:04}-{m:02}-{d:02}")
            }
        }
    }

    /// The heading over the family's own links.
    pub fn heading(&self) -> &'static str {
        match self {
            Generated::Tags(_) => "Narrow down",
            Generated::Search(_) => "Related searches",
            Generated::Day(_) => "Other days",
        }
    }

    /// The family's own links, as (href, text): five narrower tag sets (a
    /// tag appended, each drawn by `below(TAGS.len())`; one already in the
    /// set is left out) and, of two tags or more, every broader set; five
    /// related searches (a word of `words` appended, drawn by
    /// `below(words.len())`); the day and week before and after, and the
    /// next month.
    pub fn links<S: AsRef<str>>(
        &self,
        words: &[S],
        mut below: impl FnMut(usize) -> usize,
    ) -> Vec<(String, String)> {
        match self {
            Generated::Tags(tags) => {
                let names = names(tags);
                let mut links = Vec::new();
                for _ in 0..5 {
                    let t = below(TAGS.len());
                    if !tags.contains(&t) {
                        let narrower = format!("{}+{}", names.join("+"), TAGS[t]);
                        links.push((format!("/tag/{narrower}/"), narrower.replace('+', " + ")));
                    }
                }
                if tags.len() > 1 {
                    for t in &names {
                        let broader: Vec<&str> = names.iter().copied().filter(|u| u != t).collect();
                        links.push((format!("/tag/{}/", broader.join("+")), broader.join(" + ")));
                    }
                }
                links
            }
            Generated::Search(query) => (0..5)
                .map(|_| {
                    let w = words[below(words.len())].as_ref();
                    (
                        format!("/search?q={}+{w}", query.join("+")),
                        format!("{} {w}", query.join(" ")),
                    )
                })
                .collect(),
            Generated::Day(day) => {
                let (y, m, d) = civil_from_days(*day);
                let next_month = if m == 12 {
                    days_from_civil(y + 1, 1, d.min(28))
                } else {
                    days_from_civil(y, m + 1, d.min(28))
                };
                [
                    (day - 1, "Previous day"),
                    (day + 1, "Next day"),
                    (day - 7, "Previous week"),
                    (day + 7, "Next week"),
                    (next_month, "Next month"),
                ]
                .map(|(day, text)| (day_path(day), text.to_string()))
                .to_vec()
            }
        }
    }
}

/// What a generator's page quotes of the host's real pages (its
/// sources): 3–5 excerpts, each 20–60 consecutive words of one paragraph,
/// then more sources, ten linked in all (every one, of fewer).
#[derive(Debug, PartialEq, Eq)]
pub struct Quotes {
    /// (source, excerpt), in the page's order.
    pub excerpts: Vec<(usize, String)>,
    /// The sources linked after the excerpts: each once, none quoted.
    pub more: Vec<usize>,
}

impl Quotes {
    /// Drawn from `rng` among `sources` real pages; `paragraphs(i)`: source
    /// `i`'s paragraphs, as text or as HTML (the excerpt is of the words a
    /// reader sees, tags left out).
    pub fn draw<P: AsRef<str>>(
        rng: &mut fastrand::Rng,
        sources: usize,
        paragraphs: impl Fn(usize) -> Vec<P>,
    ) -> Quotes {
        let mut excerpts = Vec::new();
        let mut linked: Vec<usize> = Vec::new();
        for _ in 0..3 + rng.usize(..3) {
            let i = rng.usize(..sources);
            excerpts.push((i, excerpt(rng, &paragraphs(i))));
            if !linked.contains(&i) {
                linked.push(i);
            }
        }
        let quoted = linked.len();
        while linked.len() < 10.min(sources) {
            let i = rng.usize(..sources);
            if !linked.contains(&i) {
                linked.push(i);
            }
        }
        Quotes {
            excerpts,
            more: linked.split_off(quoted),
        }
    }

    /// The page's text as the test webs write it: each excerpt an article
    /// under its source's linked title, `more` over the other sources'
    /// links, and `heading` over the family's `links`. `source(i)`: the
    /// href and title of source `i`.
    pub fn html<'a>(
        &self,
        source: impl Fn(usize) -> (&'a str, &'a str),
        more: &str,
        heading: &str,
        links: &[(String, String)],
    ) -> String {
        let mut html = String::new();
        for (i, text) in &self.excerpts {
            let (href, title) = source(*i);
            write!(
                html,
                "<article><h2><a href=\"{href}\">{title}</a></h2><p>… {text} …</p></article>"
            )
            .unwrap();
        }
        write!(html, "<h2>{more}</h2><ul>").unwrap();
        for i in &self.more {
            let (href, title) = source(*i);
            write!(html, "<li><a href=\"{href}\">{title}</a></li>").unwrap();
        }
        write!(html, "</ul><h2>{heading}</h2><ul>").unwrap();
        for (href, text) in links {
            write!(html, "<li><a href=\"{href}\">{text}</a></li>").unwrap();
        }
        html.push_str("</ul>");
        html
    }
}

/// 20–60 consecutive words a reader sees of one of `paragraphs` (nothing
/// of none).
fn excerpt<P: AsRef<str>>(rng: &mut fastrand::Rng, paragraphs: &[P]) -> String {
    if paragraphs.is_empty() {
        return String::new();
    }
    let visible = visible_text(paragraphs[rng.usize(..paragraphs.len())].as_ref());
    let words: Vec<&str> = visible.split(' ').filter(|w| !w.is_empty()).collect();
    let n = (20 + rng.usize(..41)).min(words.len());
    let at = rng.usize(..=words.len() - n);
    words[at..at + n].join(" ")
}

/// The words a reader sees of `html` (tags left out), one space apart.
pub fn visible_text(html: &str) -> String {
    let mut text = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What a real page of a trap host carries, as a blog's article does: its
/// day and its tags (indexes into [`TAGS`]), each linked.
pub fn post_meta(day: i64, tags: &[usize]) -> String {
    let path = day_path(day);
    let tags: Vec<String> = names(tags)
        .iter()
        .map(|t| format!("<a href=\"/tag/{t}/\">{t}</a>"))
        .collect();
    format!(
        "<p class=\"meta\">Posted on <a href=\"{path}\">{}</a>, tagged {}</p>",
        &path[5..15],
        tags.join(", ")
    )
}

/// Two distinct tags, as a real page of a trap host carries: the first
/// drawn by `below(TAGS.len())`, the second among the others by
/// `below(TAGS.len() - 1)`.
pub fn two_tags(mut below: impl FnMut(usize) -> usize) -> [usize; 2] {
    let a = below(TAGS.len());
    [a, (a + 1 + below(TAGS.len() - 1)) % TAGS.len()]
}

fn names(tags: &[usize]) -> Vec<&'static str> {
    tags.iter().map(|t| TAGS[*t]).collect()
}

fn parse_tags(target: &str) -> Option<Vec<usize>> {
    let list = target.strip_prefix("/tag/")?.strip_suffix('/')?;
    let list = list.replace("%2B", "+").replace("%2b", "+");
    let mut tags = Vec::new();
    for name in list.split('+') {
        let t = TAGS.iter().position(|x| *x == name)?;
        if tags.contains(&t) {
            return None;
        }
        tags.push(t);
    }
    Some(tags)
}

fn parse_search(target: &str) -> Option<Vec<String>> {
    let query = target.strip_prefix("/search?q=")?.replace("%20", "+");
    let words: Vec<String> = query.split('+').map(str::to_string).collect();
    words
        .iter()
        .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase()))
        .then_some(words)
}

fn parse_day(target: &str) -> Option<i64> {
    let date = target.strip_prefix("/day/")?.strip_suffix('/')?;
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

/// `/day/YYYY-MM-DD/` of a day number.
pub fn day_path(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("/day/{y:04}-{m:02}-{d:02}/")
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub const fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of a day number.
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_pages_are_parsed_from_their_one_spelling() {
        assert_eq!(
            Generated::parse("/tag/python+rust/"),
            Some(Generated::Tags(vec![0, 1]))
        );
        assert_eq!(
            Generated::parse("/tag/python%2Brust/"),
            Generated::parse("/tag/python+rust/")
        );
        assert_eq!(
            Generated::parse("/search?q=cache+index"),
            Some(Generated::Search(vec!["cache".into(), "index".into()]))
        );
        let leap = Generated::parse("/day/2024-02-29/").unwrap();
        assert_eq!(leap, Generated::Day(days_from_civil(2024, 2, 29)));
        assert_eq!(leap.title(), "Events on 2024-02-29");
        for other in [
            "/tag/",
            "/tag/python+python/",
            "/tag/nosuchtag/",
            "/tag/python",
            "/search?q=",
            "/search?q=Crawler",
            "/day/2023-02-29/",
            "/day/2024-3-05/",
            "/day/2024-03-05",
            "/day/0999-01-01/",
            "/p/1",
        ] {
            assert_eq!(Generated::parse(other), None, "{other}");
        }
    }

    #[test]
    fn each_family_links_more_of_itself() {
        let tags = Generated::parse("/tag/python+rust/").unwrap();
        let mut draws = [0, 2, 3, 4, 5].into_iter();
        let links = tags.links(&[] as &[&str], |_| draws.next().unwrap());
        let hrefs: Vec<&str> = links.iter().map(|(href, _)| href.as_str()).collect();
        assert_eq!(
            hrefs,
            [
                "/tag/python+rust+web/",
                "/tag/python+rust+cache/",
                "/tag/python+rust+index/",
                "/tag/python+rust+search/",
                "/tag/rust/",
                "/tag/python/"
            ]
        );
        assert_eq!(links[0].1, "python + rust + web");
        let search = Generated::parse("/search?q=cache").unwrap();
        let links = search.links(&["river", "stone"], |n| n - 1);
        assert_eq!(
            links[0],
            ("/search?q=cache+stone".into(), "cache stone".into())
        );
        assert_eq!(links.len(), 5);
        let new_year = Generated::parse("/day/2024-12-31/").unwrap();
        let hrefs: Vec<String> = (new_year.links(&[] as &[&str], |_| 0))
            .into_iter()
            .map(|(href, _)| href)
            .collect();
        assert!(hrefs.contains(&"/day/2025-01-01/".to_string()));
        assert!(hrefs.contains(&"/day/2025-01-28/".to_string()));
        for href in hrefs
            .iter()
            .chain(["/tag/python+rust+web/".to_string()].iter())
        {
            assert!(Generated::parse(href).is_some(), "{href}");
        }
    }

    #[test]
    fn quotes_are_three_to_five_excerpts_and_ten_pages_linked() {
        let paragraph = |i: usize| -> Vec<String> {
            vec![
                (0..80)
                    .map(|w| format!("w{i}x{w}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        };
        for seed in 0..50 {
            let quotes = Quotes::draw(&mut fastrand::Rng::with_seed(seed), 40, paragraph);
            assert!((3..=5).contains(&quotes.excerpts.len()));
            for (i, text) in &quotes.excerpts {
                let words = text.split(' ').count();
                assert!((20..=60).contains(&words), "{words} words");
                assert!(paragraph(*i)[0].contains(text.as_str()), "verbatim");
            }
            assert_eq!(linked(&quotes), 10, "ten pages, each once: {quotes:?}");
            let again = Quotes::draw(&mut fastrand::Rng::with_seed(seed), 40, paragraph);
            assert_eq!(again, quotes, "the same from the same seed");
        }
        // Tags are not words, and a host of few pages links them all.
        let html = |_: usize| vec!["<a href=\"/x\">one</a> two".to_string()];
        let quotes = Quotes::draw(&mut fastrand::Rng::with_seed(1), 3, html);
        assert!(quotes.excerpts.iter().all(|(_, text)| text == "one two"));
        assert_eq!(linked(&quotes), 3);
    }

    /// The distinct sources `quotes` links, once each.
    fn linked(quotes: &Quotes) -> usize {
        let mut quoted: Vec<usize> = quotes.excerpts.iter().map(|(i, _)| *i).collect();
        quoted.sort_unstable();
        quoted.dedup();
        assert!(quotes.more.iter().all(|i| !quoted.contains(i)));
        let mut more = quotes.more.clone();
        more.sort_unstable();
        more.dedup();
        assert_eq!(more.len(), quotes.more.len());
        quoted.len() + more.len()
    }

    #[test]
    fn a_post_links_its_day_and_tags() {
        assert_eq!(
            post_meta(FIRST_DAY + 1, &[0, 29]),
            "<p class=\"meta\">Posted on <a href=\"/day/2023-06-02/\">2023-06-02</a>, tagged \
             <a href=\"/tag/python/\">python</a>, <a href=\"/tag/river/\">river</a></p>"
        );
    }
}
