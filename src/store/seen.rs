//! The embedded store's bounded window of recently seen URL keys: what the
//! store knows of a key (pending with its row and credit, or processed when),
//! so that the links of a page that point at known URLs cost a hash lookup
//! instead of SQL. The file stays the source of truth: a key not in the window
//! is looked up there, and any failed transaction clears the window.
//!
//! Behind the window, [`FileKeys`] answers whether the file may hold a key at
//! all, so a link to a URL never seen before (every new URL of a crawl) costs
//! no lookup either.

use fastbloom::BloomFilter;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use web_crawler_actors::frontier_rules::credit_due;
use web_crawler_actors::{Millis, OperationSpec};
use xxhash_rust::xxh3::Xxh3;

/// What the store holds for one (url, operation) key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Seen {
    Pending(PendingRow),
    /// A pending_urls row the trap defence refused (status `trapped`): a
    /// link it admits makes it pending again. One the store released
    /// since (an operator reopened its family) may still be known here
    /// as trapped: making it pending again then changes nothing.
    Trapped(PendingRow),
    Processed {
        at: Millis,
    },
}

/// A pending_urls row as the window knows it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PendingRow {
    pub(crate) id: i64,
    /// Credit as written in the row.
    pub(crate) stored: f64,
    /// Credit merged in since, not yet written (see `frontier_rules::credit_due`).
    pub(crate) unsaved: f64,
    pub(crate) depth: u32,
    pub(crate) redirect_hops: u32,
}

impl PendingRow {
    /// Merge one more inbound link. Returns the credit to add to the row now
    /// when it is due, or when the link is a shorter path (the row then takes
    /// the smaller depth and hop count too); the window is updated as written.
    pub(crate) fn merge(&mut self, priority: f64, depth: u32, redirect_hops: u32) -> Option<f64> {
        self.unsaved += priority;
        let shorter = depth < self.depth || redirect_hops < self.redirect_hops;
        if !credit_due(self.stored, self.unsaved) && !shorter {
            return None;
        }
        let credit = std::mem::take(&mut self.unsaved);
        self.stored += credit;
        self.depth = self.depth.min(depth);
        self.redirect_hops = self.redirect_hops.min(redirect_hops);
        Some(credit)
    }
}

impl Seen {
    /// The row and the credit merged into it but not yet written, if any.
    pub(crate) fn unsaved(&self) -> Option<(i64, f64)> {
        match self {
            Seen::Pending(row) | Seen::Trapped(row) if row.unsaved > 0.0 => {
                Some((row.id, row.unsaved))
            }
            _ => None,
        }
    }
}

/// 64-bit hash of a unit of work's key. Collisions (about 1 in 10^8 for a
/// million keys) would merge two URLs; the window only lives in memory.
pub(crate) fn key_hash(url: &str, operation: &OperationSpec) -> u64 {
    let mut h = Xxh3::new();
    h.update(url.as_bytes());
    for part in &operation.0 {
        h.update(&[0]);
        h.update(part.as_bytes());
    }
    h.digest()
}

/// The keys are already hashes: the maps use them as they are.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Map = HashMap<u64, Seen, BuildHasherDefault<Prehashed>>;

/// A generation's table at its full size from the start: growing by
/// doubling would hold the old and the new table at once.
fn generation(keys: usize) -> Map {
    Map::with_capacity_and_hasher(keys, BuildHasherDefault::default())
}

/// Two generations of at most `capacity / 2` keys each: new keys go to the
/// young one; when it is full the old one is emptied (its unsaved credit
/// handed back to be written) and the two swap, so the emptied table is the
/// next young one: a fresh table at each turn was allocated and its pages
/// faulted in again (about 13 MB a turn at the store's window size).
#[derive(Debug)]
pub(crate) struct SeenWindow {
    young: Map,
    old: Map,
    half: usize,
    in_file: FileKeys,
}

impl SeenWindow {
    /// `in_file` must know every key the file holds.
    pub(crate) fn new(capacity: usize, in_file: FileKeys) -> Self {
        let half = (capacity / 2).max(1);
        Self {
            young: generation(half),
            old: Map::default(),
            half,
            in_file,
        }
    }

    /// Whether the file may hold `key`; `false` is certain.
    pub(crate) fn may_be_in_file(&self, key: u64) -> bool {
        self.in_file.may_hold(key)
    }

    /// The key filter is over its size (it would answer "maybe" too often):
    /// the caller rebuilds it from the file with [`SeenWindow::refill`].
    pub(crate) fn filter_is_full(&self) -> bool {
        self.in_file.is_full()
    }

    pub(crate) fn refill(&mut self, in_file: FileKeys) {
        self.in_file = in_file;
    }

    pub(crate) fn get(&self, key: u64) -> Option<&Seen> {
        self.young.get(&key).or_else(|| self.old.get(&key))
    }

    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut Seen> {
        match self.young.get_mut(&key) {
            Some(seen) => Some(seen),
            None => self.old.get_mut(&key),
        }
    }

    /// Record `seen` for `key`; returns the unsaved credit of the keys that
    /// fell out of the window (`(row id, credit)`, to be written), if this
    /// insert filled the young generation.
    pub(crate) fn insert(&mut self, key: u64, seen: Seen) -> Vec<(i64, f64)> {
        self.in_file.insert(key);
        if let Some(slot) = self.old.get_mut(&key) {
            *slot = seen;
            return Vec::new();
        }
        self.young.insert(key, seen);
        if self.young.len() < self.half {
            return Vec::new();
        }
        let unsaved = self.old.values().filter_map(Seen::unsaved).collect();
        // `clear` keeps the table; the first turn finds the old one empty
        // and sizes it once.
        self.old.clear();
        if self.old.capacity() < self.half {
            self.old = generation(self.half);
        }
        std::mem::swap(&mut self.young, &mut self.old);
        unsaved
    }

    /// Forget the window. The key filter stays: keys it learnt in a rolled
    /// back transaction only make it answer "maybe" where "no" was true.
    pub(crate) fn clear(&mut self) {
        self.young.clear();
        self.old.clear();
    }

    /// Pending rows and the credit merged into them but not yet written.
    pub(crate) fn unsaved_credit(&self) -> impl Iterator<Item = (i64, f64)> + '_ {
        self.young
            .values()
            .chain(self.old.values())
            .filter_map(Seen::unsaved)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.young.len() + self.old.len()
    }
}

/// Every key the file may hold, as a Bloom filter over the key hashes: a
/// "no" is certain, a "maybe" (about 1 in 100 for keys it never saw) costs
/// the lookup the window would have cost anyway.
#[derive(Debug)]
pub(crate) struct FileKeys {
    filter: BloomFilter,
    /// Keys it was sized for; past that it answers "maybe" more often.
    capacity: usize,
    len: usize,
}

impl FileKeys {
    /// Empty, sized for at least `at_least` keys and twice `held` (the keys
    /// the file holds, inserted next).
    pub(crate) fn new(held: usize, at_least: usize) -> Self {
        let capacity = (held * 2).max(at_least).max(1);
        Self {
            filter: BloomFilter::with_false_pos(0.01).expected_items(capacity),
            capacity,
            len: 0,
        }
    }

    pub(crate) fn insert(&mut self, key: u64) {
        // A key it wrongly thought present is not counted: the filter is
        // rebuilt a little late at worst.
        if !self.filter.insert_hash(key) {
            self.len += 1;
        }
    }

    fn may_hold(&self, key: u64) -> bool {
        self.filter.contains_hash(key)
    }

    fn is_full(&self) -> bool {
        self.len > self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(id: i64) -> Seen {
        Seen::Pending(PendingRow {
            id,
            stored: 1.0,
            unsaved: 0.0,
            depth: 0,
            redirect_hops: 0,
        })
    }

    #[test]
    fn key_hash_separates_operations_and_argument_boundaries() {
        let crawl = OperationSpec::default();
        let a = key_hash(
            "http://a/",
            &OperationSpec(vec!["search_text".into(), "ab".into()]),
        );
        let b = key_hash("http://a/", &OperationSpec(vec!["search_textab".into()]));
        assert_ne!(a, b);
        assert_ne!(key_hash("http://a/", &crawl), a);
        assert_eq!(key_hash("http://a/", &crawl), key_hash("http://a/", &crawl));
    }

    #[test]
    fn window_is_bounded_and_hands_back_what_falls_out() {
        let mut w = SeenWindow::new(4, FileKeys::new(0, 16));
        assert!(w.insert(1, pending(1)).is_empty());
        assert!(w.insert(2, pending(2)).is_empty(), "nothing was old yet");
        assert_eq!(w.len(), 2);
        if let Some(Seen::Pending(row)) = w.get_mut(1) {
            row.unsaved = 0.25;
        }
        let table = w.young.capacity();
        assert!(w.insert(3, pending(3)).is_empty());
        let dropped = w.insert(4, pending(4));
        assert_eq!(dropped, vec![(1, 0.25)], "the credit of what fell out");
        assert!(w.get_mut(1).is_none() && w.get_mut(2).is_none());
        assert!(w.get_mut(3).is_some() && w.get_mut(4).is_some());
        assert_eq!(w.len(), 2);
        assert_eq!(
            w.young.capacity(),
            table,
            "the young table at its full size from the first turn on"
        );
    }

    #[test]
    fn a_row_is_written_when_its_credit_doubles_or_a_shorter_path_arrives() {
        let Seen::Pending(mut row) = pending(7) else {
            unreachable!()
        };
        row.depth = 3;
        assert_eq!(row.merge(0.5, 3, 0), None, "0.5 unsaved < 1.0 stored");
        assert_eq!(row.merge(0.5, 4, 0), Some(1.0));
        assert_eq!((row.stored, row.unsaved, row.depth), (2.0, 0.0, 3));
        assert_eq!(row.merge(0.25, 1, 0), Some(0.25), "a shorter path");
        assert_eq!((row.stored, row.depth), (2.25, 1));
        assert_eq!(Seen::Pending(row).unsaved(), None);
        row.merge(0.125, 1, 0);
        assert_eq!(Seen::Pending(row).unsaved(), Some((7, 0.125)));
    }

    /// A filter of `keys`, as the store builds it at open.
    fn file_keys(keys: impl Iterator<Item = u64> + Clone, at_least: usize) -> FileKeys {
        let mut filter = FileKeys::new(keys.clone().count(), at_least);
        keys.for_each(|key| filter.insert(key));
        filter
    }

    #[test]
    fn the_file_key_filter_never_forgets_and_reports_when_full() {
        let mut w = SeenWindow::new(4, file_keys([100, 200].into_iter(), 8));
        assert!(
            w.may_be_in_file(100) && w.may_be_in_file(200),
            "keys at open"
        );
        for key in 1..=6 {
            w.insert(key, pending(key.cast_signed()));
        }
        // Keys that fell out of the window, and a cleared window, are still
        // known to the filter: only the window forgets.
        w.clear();
        assert!((1..=6).all(|key| w.may_be_in_file(key)));
        assert!(!w.filter_is_full(), "8 keys of room, 8 held");
        w.insert(7, pending(7));
        assert!(w.filter_is_full());
        w.refill(file_keys((1..=7).chain([100, 200]), 8));
        assert!(!w.filter_is_full(), "room for twice the file");
        assert!(w.may_be_in_file(7) && w.may_be_in_file(200));
        // "No" is the common answer for keys it never saw.
        let strangers = (1_000u64..11_000)
            .filter(|k| w.may_be_in_file(k.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
            .count();
        assert!(
            strangers < 500,
            "{strangers} of 10000 unknown keys reported maybe"
        );
    }

    #[test]
    fn the_store_window_fills_its_tables_without_slack() {
        let half = crate::store::sqlite::SEEN_WINDOW / 2;
        let table = generation(half);
        assert_eq!(table.capacity(), half, "no bucket paid for and unused");
        let mut w = SeenWindow::new(crate::store::sqlite::SEEN_WINDOW, FileKeys::new(0, 16));
        for key in 0..half as u64 - 1 {
            w.insert(key, Seen::Processed { at: 1 });
        }
        assert_eq!(w.young.capacity(), half, "a full generation never grew");
    }

    #[test]
    fn updating_an_old_key_does_not_grow_the_window() {
        let mut w = SeenWindow::new(4, FileKeys::new(0, 16));
        w.insert(1, pending(1));
        w.insert(2, pending(2));
        assert!(w.insert(1, Seen::Processed { at: 5 }).is_empty());
        assert_eq!(w.get_mut(1), Some(&mut Seen::Processed { at: 5 }));
        assert_eq!(w.len(), 2);
        if let Some(Seen::Pending(row)) = w.get_mut(2) {
            row.unsaved = 0.5;
        }
        assert_eq!(w.unsaved_credit().collect::<Vec<_>>(), vec![(2, 0.5)]);
        w.clear();
        assert_eq!(w.len(), 0);
    }
}
