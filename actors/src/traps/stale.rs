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
        for (&k, &s) in keys.iter().zip(shingles) {
            if next.next_if_eq(&&k).is_some() {
                self.text_seen.insert_new(k);
                if !listing {
                    self.text_seen.insert_new(text_key(directory, s));
                }
            }
        }
        let new_pages = unseen.iter().any(|(_, l)| l.pattern != parts.pattern);
        for (url, _) in unseen {
            self.links_seen.insert_new(url);
        }
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
}
