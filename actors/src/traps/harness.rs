//! What the trap tests share: seeded texts and calendars of small test
//! webs, and a crawl through a [`TrapGuard`] wired as the master wires it.

use super::*;
use std::collections::{HashSet, VecDeque};

/// A test page's hashes: all its text is its own.
pub(super) fn both(text: &str) -> PageSimhash {
    PageSimhash::of(text, text)
}

/// xorshift64*: seeded, so generated texts are the same on every run.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Pronounceable pseudo-words, all distinct.
pub(super) fn vocabulary(rng: &mut Rng, n: usize) -> Vec<String> {
    const C: &[u8] = b"bcdfghklmnprstvz";
    const V: &[u8] = b"aeiou";
    let mut seen = HashSet::new();
    while seen.len() < n {
        let syllables = 2 + rng.below(3);
        let w: String = (0..syllables)
            .flat_map(|_| [C[rng.below(C.len())], V[rng.below(V.len())]])
            .map(char::from)
            .collect();
        seen.insert(w);
    }
    let mut v: Vec<String> = seen.into_iter().collect();
    v.sort();
    v
}

pub(super) fn words(rng: &mut Rng, vocab: &[String], n: usize) -> String {
    (0..n)
        .map(|_| vocab[rng.below(vocab.len())].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
pub(super) const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

pub(super) fn days_in(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Monday = 0 (Sakamoto's method).
pub(super) fn weekday(year: i64, month: i64, day: i64) -> usize {
    const T: [i64; 12] = [0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4];
    let y = if month < 3 { year - 1 } else { year };
    let sunday0 = (y + y / 4 - y / 100 + y / 400 + T[(month - 1) as usize] + day).rem_euclid(7);
    ((sunday0 + 6) % 7) as usize
}

pub(super) fn shift(year: i64, month: i64, by: i64) -> (i64, i64) {
    let m = year * 12 + (month - 1) + by;
    (m.div_euclid(12), m.rem_euclid(12) + 1)
}

/// The visible text of a month page of an events calendar: the month
/// and year words, the weekday it starts on and its day numbers change.
pub(super) fn calendar_text(year: i64, month: i64) -> String {
    let name = MONTHS[(month - 1) as usize];
    let (py, pm) = shift(year, month, -1);
    let (ny, nm) = shift(year, month, 1);
    let days: Vec<String> = (1..=days_in(year, month)).map(|d| d.to_string()).collect();
    format!(
        "Community events calendar. {name} {year}. Previous month: {} {py}. \
         Next month: {} {ny}. Previous year: {name} {}. Next year: {name} {}. \
         {name} {year} starts on a {}. Monday Tuesday Wednesday Thursday Friday \
         Saturday Sunday {}. There are no events in {name} {year} yet. Organisers \
         can submit an event with the form on the community page; events are \
         reviewed by volunteers within a few days and appear on this calendar \
         with their time, place and a short description.",
        MONTHS[(pm - 1) as usize],
        MONTHS[(nm - 1) as usize],
        year - 1,
        year + 1,
        WEEKDAYS[weekday(year, month, 1)],
        days.join(" "),
    )
}

/// 24 identical pages under `t.test/item/{n}`: that pattern closes.
pub(super) fn close_items(g: &mut TrapGuard) {
    for n in 0..24 {
        g.observe(
            &format!("http://t.test/item/{n}"),
            42.into(),
            &[],
            [] as [&str; 0],
            T0,
        );
    }
}

pub(super) fn guard() -> TrapGuard {
    TrapGuard::new(TrapSettings::default())
}

pub(super) const T0: Millis = 1_700_000_000_000;

/// A breadth-first crawl through a simulated web, with the guard wired
/// as the master would: candidate links and claimed URLs go through
/// `admit`, fetched pages through `observe`.
pub(super) struct Crawl {
    pub(super) guard: TrapGuard,
    pub(super) fetched: Vec<String>,
    pub(super) refused: Vec<(String, TrapReason)>,
    pub(super) closures: Vec<TrapReason>,
}

/// `web(url)`: the page's visible text and links, or None (404).
pub(super) fn crawl(
    guard: TrapGuard,
    seeds: &[&str],
    web: impl Fn(&str) -> Option<(String, Vec<String>)>,
) -> Crawl {
    crawl_interleaving(guard, seeds, web, |_| false)
}

/// [`crawl`], but the URLs `apart` picks wait in a queue of their own,
/// served in turn with the others: as soon as found, not behind
/// everything found before them (a frontier whose order a loaded host
/// or a scheduler decided).
pub(super) fn crawl_interleaving(
    guard: TrapGuard,
    seeds: &[&str],
    web: impl Fn(&str) -> Option<(String, Vec<String>)>,
    apart: impl Fn(&str) -> bool,
) -> Crawl {
    let mut c = Crawl {
        guard,
        fetched: Vec::new(),
        refused: Vec::new(),
        closures: Vec::new(),
    };
    let mut seen: HashSet<String> = seeds.iter().map(|s| s.to_string()).collect();
    let mut queue: VecDeque<String> = seeds.iter().map(|s| s.to_string()).collect();
    let mut set_apart: VecDeque<String> = VecDeque::new();
    let mut now = T0;
    while let Some(url) = if c.fetched.len().is_multiple_of(2) {
        set_apart.pop_front().or_else(|| queue.pop_front())
    } else {
        queue.pop_front().or_else(|| set_apart.pop_front())
    } {
        now += 100;
        if let Err(reason) = c.guard.admit(&url, now) {
            c.refused.push((url, reason));
            continue;
        }
        let Some((text, links)) = web(&url) else {
            continue;
        };
        c.fetched.push(url.clone());
        assert!(c.fetched.len() < 50_000, "the crawl does not end");
        if let Some(reason) = c
            .guard
            .observe(&url, both(&text), &shingles(&text), &links, now)
        {
            c.closures.push(reason);
        }
        for link in links {
            if seen.insert(link.clone()) {
                match c.guard.admit(&link, now) {
                    Ok(()) if apart(&link) => set_apart.push_back(link),
                    Ok(()) => queue.push_back(link),
                    Err(reason) => c.refused.push((link, reason)),
                }
            }
        }
    }
    c
}

impl Crawl {
    pub(super) fn fetched_matching(&self, needle: &str) -> usize {
        self.fetched.iter().filter(|u| u.contains(needle)).count()
    }
}

/// A distinct word slug per number, so each link is a new pattern.
pub(super) fn words_for(n: u32) -> String {
    const W: [&str; 10] = [
        "alpha", "bravo", "charlie", "delta", "echo", "fox", "golf", "hotel", "india", "juliet",
    ];
    n.to_string()
        .bytes()
        .map(|d| W[(d - b'0') as usize])
        .collect::<Vec<_>>()
        .join("-")
}

pub(super) fn calendar_page(url: &str) -> Option<(i64, i64)> {
    let rest = url.split("/cal/").nth(1)?;
    let mut it = rest.trim_end_matches('/').split('/');
    let year: i64 = it.next()?.parse().ok()?;
    let month: i64 = it.next()?.parse().ok()?;
    (1..=12).contains(&month).then_some((year, month))
}

pub(super) fn calendar_links(host: &str, year: i64, month: i64) -> Vec<String> {
    let mut links: Vec<String> = [shift(year, month, -1), shift(year, month, 1)]
        .into_iter()
        .chain([(year - 1, month), (year + 1, month)])
        .map(|(y, m)| format!("http://{host}/cal/{y}/{m:02}/"))
        .collect();
    // The site navigation, on every page.
    links.push(format!("http://{host}/"));
    links.push(format!("http://{host}/about"));
    links
}
