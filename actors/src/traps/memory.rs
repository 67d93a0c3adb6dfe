//! What the trap rules remember of patterns, directories and hosts: their
//! recent pages as bit windows, kept simhashes, closures; all bounded.

use super::*;

/// A closed pattern, query space or host probation, and when it lifts.
#[derive(Debug)]
pub(super) struct Closure {
    pub(super) reason: TrapReason,
    pub(super) until: Option<Millis>,
}

impl Closure {
    pub(super) fn new(reason: TrapReason, now: Millis, reopen_after: Option<Millis>) -> Self {
        Self {
            reason,
            until: reopen_after.map(|d| now.saturating_add(d)),
        }
    }

    pub(super) fn expired(&self, now: Millis) -> bool {
        self.until.is_some_and(|until| now >= until)
    }
}

/// What the rules remember of one pattern or one path's query space.
#[derive(Debug, Default)]
pub(super) struct Tracked {
    /// Simhashes of the novel pages (one per kind of page).
    pub(super) kept: Ring<PageSimhash>,
    /// Outward link patterns already yielded.
    pub(super) outward: Ring<u64>,
    pub(super) pages: u32,
    pub(super) novel: u32,
    pub(super) near_dups: u32,
    pub(super) barren: u32,
    /// Bit i: the page i pages ago was a near-duplicate / barren.
    pub(super) recent_dups: u64,
    pub(super) recent_barren: u64,
    /// Rule 6: bit i, the page i pages ago linked a URL of its directory
    /// the crawl had not seen.
    pub(super) recent_new: u64,
    pub(super) closed: Option<Closure>,
    pub(super) used: u64,
}

impl Tracked {
    pub(super) fn record(&mut self, near_dup: bool, barren: bool) {
        self.pages = self.pages.saturating_add(1);
        self.near_dups = self.near_dups.saturating_add(near_dup as u32);
        self.barren = self.barren.saturating_add(barren as u32);
        self.recent_dups = self.recent_dups << 1 | near_dup as u64;
        self.recent_barren = self.recent_barren << 1 | barren as u64;
    }

    pub(super) fn close(&mut self, reason: TrapReason, now: Millis, reopen_after: Option<Millis>) {
        self.closed = Some(Closure::new(reason, now, reopen_after));
    }

    /// Lift an expired closure and start counting afresh; the kept hashes
    /// stay, so a trap is recognised again within a window.
    pub(super) fn expire(&mut self, now: Millis) {
        if self.closed.as_ref().is_some_and(|c| c.expired(now)) {
            self.lift();
        }
    }

    /// Lift its closure and start counting afresh.
    pub(super) fn lift(&mut self) {
        self.closed = None;
        self.pages = 0;
        self.near_dups = 0;
        self.barren = 0;
        self.recent_dups = 0;
        self.recent_barren = 0;
        self.recent_new = 0;
    }
}

#[derive(Debug, Default)]
pub(super) struct HostState {
    pub(super) kept: Ring<PageSimhash>,
    /// Sections, by how many pages new to the host they yielded.
    pub(super) sections: Counts,
    /// Fetched URLs that had a session id, by their key without it.
    pub(super) session_urls: SessionUrls,
    /// Near-duplicate pages in a row.
    pub(super) run: u32,
    pub(super) probation: Option<Closure>,
    pub(super) used: u64,
}

impl HostState {
    pub(super) fn expire(&mut self, now: Millis) {
        if self.probation.as_ref().is_some_and(|c| c.expired(now)) {
            self.probation = None;
            self.run = 0;
        }
    }
}

/// A bounded set, replacing the oldest when full.
#[derive(Debug)]
pub(super) struct Ring<T> {
    pub(super) items: Vec<T>,
    pub(super) next: usize,
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            next: 0,
        }
    }
}

impl<T: Copy + PartialEq> Ring<T> {
    pub(super) fn contains(&self, x: T) -> bool {
        self.items.contains(&x)
    }

    pub(super) fn push(&mut self, x: T, cap: usize) {
        if self.items.len() < cap {
            self.items.push(x);
        } else if cap > 0 {
            self.items[self.next % cap] = x;
            self.next = (self.next + 1) % cap;
        }
    }
}

impl Ring<PageSimhash> {
    pub(super) fn near(&self, hash: PageSimhash, bits: u32) -> bool {
        self.items.iter().any(|&h| h.near(hash, bits))
    }
}

/// A host's pages with a session id: the key of the URL without it, and
/// of the URL that took it first (which is not a copy of itself). When
/// full, the oldest is replaced.
#[derive(Debug, Default)]
pub(super) struct SessionUrls {
    pub(super) items: Vec<(u64, u64)>,
    pub(super) next: usize,
}

impl SessionUrls {
    pub(super) fn holder(&self, plain: u64) -> Option<u64> {
        self.items
            .iter()
            .find(|(p, _)| *p == plain)
            .map(|(_, url)| *url)
    }

    pub(super) fn push(&mut self, plain: u64, url: u64, cap: usize) {
        if self.items.len() < cap {
            self.items.push((plain, url));
        } else if cap > 0 {
            self.items[self.next % cap] = (plain, url);
            self.next = (self.next + 1) % cap;
        }
    }
}

/// Bounded counters by key; when full, the oldest key is replaced.
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) items: Vec<(u64, u32)>,
    pub(super) next: usize,
}

impl Counts {
    pub(super) fn count(&self, x: u64) -> u32 {
        self.items
            .iter()
            .find(|(k, _)| *k == x)
            .map_or(0, |(_, n)| *n)
    }

    pub(super) fn bump(&mut self, x: u64, cap: usize) {
        if let Some((_, n)) = self.items.iter_mut().find(|(k, _)| *k == x) {
            *n = n.saturating_add(1);
        } else if self.items.len() < cap {
            self.items.push((x, 1));
        } else if cap > 0 {
            self.items[self.next % cap] = (x, 1);
            self.next = (self.next + 1) % cap;
        }
    }
}

/// The low `n` bits (n ≤ 64).
pub(super) fn mask(n: u32) -> u64 {
    if n >= 64 { u64::MAX } else { (1 << n) - 1 }
}

/// Whether at least `pct` percent of the last `n` bits of `recent` are set.
pub(super) fn share(recent: u64, n: u32, pct: u32) -> bool {
    n > 0 && u64::from((recent & mask(n)).count_ones()) * 100 >= u64::from(pct) * u64::from(n)
}

/// Drop the least recently used eighth when over `max`.
pub(super) fn evict<V>(map: &mut HashMap<u64, V>, max: usize, used: impl Fn(&V) -> u64) {
    let max = max.max(1);
    if map.len() <= max {
        return;
    }
    let keep = max - max / 8;
    let mut ticks: Vec<u64> = map.values().map(&used).collect();
    ticks.sort_unstable();
    // Ticks are unique, so exactly len - keep entries are at or below it.
    let cutoff = ticks[map.len() - keep - 1];
    map.retain(|_, v| used(v) > cutoff);
}

#[cfg(test)]
mod tests {
    use super::super::harness::*;
    use super::*;

    #[test]
    fn memory_is_bounded_and_a_used_trap_stays_closed() {
        let mut g = TrapGuard::new(TrapSettings {
            max_patterns: 64,
            max_hosts: 8,
            kept_hashes: 4,
            kept_links: 4,
            ..TrapSettings::default()
        });
        // Close one pattern.
        close_items(&mut g);
        assert!(g.admit("http://t.test/item/1", T0).is_err());
        let mut rng = Rng(1);
        for i in 0..2_000u64 {
            let url = format!("http://h{}.test/{}/x", i % 100, words_for(i as u32));
            let links: Vec<String> = (0..8)
                .map(|k| format!("http://o.test/{}", words_for(k * 1000 + i as u32)))
                .collect();
            g.observe(&url, PageSimhash::from(rng.next()), &[], &links, T0);
            // The trap keeps being linked to, so it keeps being asked about.
            assert!(g.admit("http://t.test/item/77", T0).is_err());
            assert!(g.tracked_patterns() <= 64);
            assert!(g.tracked_hosts() <= 8);
        }
        assert!(
            g.patterns
                .values()
                .all(|t| t.kept.items.len() <= 4 && t.outward.items.len() <= 4)
        );
        assert!(g.hosts.values().all(|h| h.kept.items.len() <= 4));
    }

    #[test]
    fn closures_lift_after_the_reopen_time() {
        let mut g = guard();
        let day = g.settings().reopen_after_ms.unwrap();
        close_items(&mut g);
        assert!(g.admit("http://t.test/item/1", T0 + day - 1).is_err());
        assert_eq!(g.admit("http://t.test/item/1", T0 + day), Ok(()));
        // Its kept page is remembered: it closes again within a window.
        let later = T0 + day;
        let closes = (0..24).position(|n| {
            g.observe(
                &format!("http://t.test/item/{}", 100 + n),
                42.into(),
                &[],
                [] as [&str; 0],
                later,
            )
            .is_some()
        });
        assert!(closes.is_some_and(|n| n < 24), "{closes:?}");

        let mut g = TrapGuard::new(TrapSettings {
            reopen_after_ms: None,
            ..TrapSettings::default()
        });
        close_items(&mut g);
        assert!(g.admit("http://t.test/item/1", Millis::MAX).is_err());
    }
}
