//! The embedded store's bounded window of recently seen URL keys: what the
//! store knows of a key (pending with its row and credit, or processed when),
//! so that the links of a page that point at known URLs cost a hash lookup
//! instead of SQL. The file stays the source of truth: a key not in the window
//! is looked up there, and any failed transaction clears the window.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use web_crawler_actors::frontier::credit_due;
use web_crawler_actors::{Millis, OperationSpec};
use xxhash_rust::xxh3::Xxh3;

/// What the store holds for one (url, operation) key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Seen {
    Pending(PendingRow),
    Processed { at: Millis },
}

/// A pending_urls row as the window knows it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PendingRow {
    pub(crate) id: i64,
    /// Credit as written in the row.
    pub(crate) stored: f64,
    /// Credit merged in since, not yet written (see `frontier::credit_due`).
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
            Seen::Pending(row) if row.unsaved > 0.0 => Some((row.id, row.unsaved)),
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
/// young one; when it is full the old one is dropped (its entries are handed
/// back so unsaved credit can be written) and the young one becomes old.
#[derive(Debug)]
pub(crate) struct SeenWindow {
    young: Map,
    old: Map,
    half: usize,
}

impl SeenWindow {
    pub(crate) fn new(capacity: usize) -> Self {
        let half = (capacity / 2).max(1);
        Self {
            young: generation(half),
            old: Map::default(),
            half,
        }
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

    /// Record `seen` for `key`; returns the generation that fell out of the
    /// window, if this insert filled the young one.
    pub(crate) fn insert(&mut self, key: u64, seen: Seen) -> Option<Map> {
        if let Some(slot) = self.old.get_mut(&key) {
            *slot = seen;
            return None;
        }
        self.young.insert(key, seen);
        if self.young.len() < self.half {
            return None;
        }
        let young = std::mem::replace(&mut self.young, generation(self.half));
        Some(std::mem::replace(&mut self.old, young))
    }

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
        let mut w = SeenWindow::new(4);
        assert!(w.insert(1, pending(1)).is_none());
        let first = w.insert(2, pending(2)).expect("young generation full");
        assert!(first.is_empty(), "nothing was old yet");
        assert_eq!(w.len(), 2);
        assert!(w.insert(3, pending(3)).is_none());
        let dropped = w.insert(4, pending(4)).expect("full again");
        let mut keys: Vec<u64> = dropped.keys().copied().collect();
        keys.sort();
        assert_eq!(keys, vec![1, 2]);
        assert!(w.get_mut(1).is_none());
        assert!(w.get_mut(3).is_some() && w.get_mut(4).is_some());
        assert!(w.len() <= 4);
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

    #[test]
    fn updating_an_old_key_does_not_grow_the_window() {
        let mut w = SeenWindow::new(4);
        w.insert(1, pending(1));
        w.insert(2, pending(2));
        assert!(w.insert(1, Seen::Processed { at: 5 }).is_none());
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
