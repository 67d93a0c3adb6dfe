//! What a crawl has already read: sampled word shingles of pages' text and
//! the URLs pages linked to, each in a bounded sketch. Rule 6 of the trap
//! defence asks them whether a page brings anything new.
//!
//! **Shingles.** A page's text is cut into overlapping runs of
//! [`TEXT_SHINGLE`] words; one shingle in [`SAMPLE_ONE_IN`] is kept, chosen
//! by its hash, so a passage samples the same shingles on whatever page it
//! is copied to (an excerpt of an article samples what the article did).
//! Only where two excerpts meet are shingles new: with five-word shingles,
//! four per seam.
//!
//! **Sketches.** A [`SeenSketch`] is a Bloom filter (two bits per key, both
//! in one 64-bit word) in
//! generations: when the newest holds one key per sixteen bits (under 2%
//! false positives), a new one four times as large (up to the cap) takes the
//! keys from then on; a key is seen when any generation holds it. While
//! they grow nothing is forgotten; at the cap the oldest generations go,
//! so memory is bounded by twice the cap, a small crawl uses tens of KB, and
//! what was read long ago is forgotten first. A false positive makes a
//! page look less new than it is, never more.

use super::{fmix64, words_of};
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// Words per text shingle.
const TEXT_SHINGLE: usize = 5;
/// One shingle in this many is kept (those whose hash is 0 modulo it).
pub(super) const SAMPLE_ONE_IN: usize = 8;
/// Sampled shingles kept per page, at most (the first in text order).
const MAX_PAGE_SHINGLES: usize = 1024;
/// Bytes of a page's visible text its shingles are taken from, at most:
/// all of a long article, since a generator may excerpt any paragraph of
/// it (the first 8 KB left later excerpts looking new).
pub const SHINGLE_TEXT_BYTES: usize = 64 * 1024;

/// The sampled shingles of `text` (distinct, in text order): what a page
/// reports for rule 6. Words are read as [`super::simhash`] reads them.
pub fn shingles(text: &str) -> Vec<u32> {
    shingles_of_words(&words_of(
        &text[..text.floor_char_boundary(SHINGLE_TEXT_BYTES)],
    ))
}

/// [`shingles`] of a text's words.
pub(super) fn shingles_of_words(words: &[u64]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    let mut seen: HashSet<u32, BuildHasherDefault<SpreadU32>> =
        HashSet::with_capacity_and_hasher(MAX_PAGE_SHINGLES, Default::default());
    for key in shingle_keys(words) {
        // One multiply spreads the bits.
        let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        if h % SAMPLE_ONE_IN as u64 == 0 {
            // The high half: the low bits are all zero here.
            let s = (h >> 32) as u32;
            if seen.insert(s) {
                out.push(s);
                if out.len() == MAX_PAGE_SHINGLES {
                    break;
                }
            }
        }
    }
    out
}

/// Each shingle's key, in text order: its words' hashes (already mixed),
/// the j-th rotated left by 13j, xor'd (rotations keep the order). The
/// keys roll: the next is this one without its first word, rotated right
/// by 13, with the new word at the last place (a fold over five words a
/// shingle was a fifth of reading a page).
fn shingle_keys(words: &[u64]) -> impl Iterator<Item = u64> + '_ {
    let last = 13 * (TEXT_SHINGLE as u32 - 1);
    let first = words
        .iter()
        .take(TEXT_SHINGLE)
        .enumerate()
        .fold(0u64, |h, (i, &w)| h ^ w.rotate_left(13 * i as u32));
    let mut key = first;
    let rest = words
        .iter()
        .zip(words.get(TEXT_SHINGLE..).unwrap_or_default())
        .map(move |(&gone, &new)| {
            key = (key ^ gone).rotate_right(13) ^ new.rotate_left(last);
            key
        });
    (words.len() >= TEXT_SHINGLE)
        .then_some(first)
        .into_iter()
        .chain(rest)
}

/// A shingle is a hash already: one multiply spreads it over the 64 bits a
/// hash table reads (its high bits pick the tag, its low the slot), where
/// SipHash cost more than the sampling itself.
#[derive(Default)]
struct SpreadU32(u64);

impl Hasher for SpreadU32 {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, i: u32) {
        self.0 = (self.0 ^ u64::from(i)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The first generation's size: 8 KB.
const FIRST_WORDS: usize = 1024;
/// Each generation is this many times the last one's size, up to the cap.
const GROWTH: usize = 4;
/// Keys a generation takes before it is full: one per this many bits.
const BITS_PER_KEY: usize = 16;

/// A set of 64-bit keys that may answer "seen" for a key it never got
/// (rarely), never "not seen" for one it got recently; see the module docs.
#[derive(Debug)]
pub(super) struct SeenSketch {
    /// Oldest first; a key goes into the last.
    generations: std::collections::VecDeque<Bits>,
    max_words: usize,
}

/// A key's two hashes, the same in every generation (taken once a
/// lookup, not once a generation).
fn hashes_of(key: u64) -> [u64; 2] {
    [key, fmix64(key ^ 0x9e37_79b9_7f4a_7c15)]
}

#[derive(Debug, Default)]
struct Bits {
    words: Vec<u64>,
    keys: usize,
}

impl Bits {
    fn with_words(n: usize) -> Self {
        Self {
            words: vec![0; n],
            keys: 0,
        }
    }

    /// A key's word and its two bits in it (a blocked Bloom filter: one
    /// cache line a look-up, where two bits anywhere cost two misses in a
    /// sketch of megabytes); the length is a power of two.
    fn position(&self, hashes: [u64; 2]) -> (usize, u64) {
        let word = (hashes[0] as usize) & (self.words.len() - 1);
        let bits = 1u64 << (hashes[1] & 63) | 1u64 << ((hashes[1] >> 6) & 63);
        (word, bits)
    }

    fn contains(&self, hashes: [u64; 2]) -> bool {
        if self.words.is_empty() {
            return false;
        }
        let (w, bits) = self.position(hashes);
        self.words[w] & bits == bits
    }

    fn set(&mut self, hashes: [u64; 2]) {
        let (w, bits) = self.position(hashes);
        self.words[w] |= bits;
        self.keys += 1;
    }

    fn full(&self) -> bool {
        self.room() == 0
    }

    /// Keys it takes before it is full.
    fn room(&self) -> usize {
        (self.words.len() * 64 / BITS_PER_KEY).saturating_sub(self.keys)
    }
}

impl SeenSketch {
    /// A sketch whose generations grow to `max_bytes` each (at least 8 KB);
    /// it holds at most twice that.
    pub(super) fn new(max_bytes: usize) -> Self {
        let max_words = (max_bytes / 8).max(FIRST_WORDS).next_power_of_two();
        Self {
            generations: std::collections::VecDeque::new(),
            max_words,
        }
    }

    #[cfg(test)]
    pub(super) fn contains(&self, key: u64) -> bool {
        self.unseen([key]).is_empty()
    }

    /// The keys it does not hold, in their order. Asked for a page's keys
    /// at once, generation by generation (newest first: a key seen lately
    /// is found at once), so the look-ups into one generation are
    /// independent and their cache misses overlap.
    pub(super) fn unseen(&self, keys: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let mut pending: Vec<(u64, [u64; 2])> =
            keys.into_iter().map(|k| (k, hashes_of(k))).collect();
        for g in self.generations.iter().rev() {
            if pending.is_empty() {
                break;
            }
            pending.retain(|&(_, h)| !g.contains(h));
        }
        pending.into_iter().map(|(k, _)| k).collect()
    }

    #[cfg(test)]
    pub(super) fn insert(&mut self, key: u64) {
        if !self.contains(key) {
            self.insert_new(&[key]);
        }
    }

    /// Add keys [`Self::unseen`] just said are not there (a link seen
    /// twice on one page is added twice: harmless). A page's keys at once:
    /// each goes to a random word of megabytes, and a tight loop lets those
    /// misses overlap (one call a key was a twentieth of the crawl's CPU).
    pub(super) fn insert_new(&mut self, keys: &[u64]) {
        let mut rest = keys;
        while !rest.is_empty() {
            if self.generations.back().is_none_or(Bits::full) {
                self.grow();
            }
            let newest = self
                .generations
                .back_mut()
                .expect("a generation was just made");
            let (now, later) = rest.split_at(newest.room().clamp(1, rest.len()));
            for &key in now {
                newest.set(hashes_of(key));
            }
            rest = later;
        }
    }

    /// A new newest generation, four times the last one's size: while they
    /// grow nothing is forgotten (the sizes sum to under 4/3 of the
    /// newest), and a look-up of a new key probes six generations on the
    /// way to 8 MB, not eleven; at the cap, the oldest generations go.
    fn grow(&mut self) {
        let words = self
            .generations
            .back()
            .map_or(FIRST_WORDS, |g| g.words.len() * GROWTH)
            .min(self.max_words);
        self.generations.push_back(Bits::with_words(words));
        while self.words() > 2 * self.max_words {
            self.generations.pop_front();
        }
    }

    fn words(&self) -> usize {
        self.generations.iter().map(|g| g.words.len()).sum()
    }

    /// Bytes held now.
    pub(super) fn bytes(&self) -> usize {
        self.words() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolled_shingle_keys_are_the_folds_of_their_words() {
        let words: Vec<u64> = (0..40u64).map(|i| fmix64(i + 1)).collect();
        for n in 0..words.len() {
            let folds: Vec<u64> = words[..n]
                .windows(TEXT_SHINGLE)
                .map(|run| {
                    run.iter()
                        .enumerate()
                        .fold(0, |h, (j, &w)| h ^ w.rotate_left(13 * j as u32))
                })
                .collect();
            assert_eq!(
                shingle_keys(&words[..n]).collect::<Vec<_>>(),
                folds,
                "{n} words"
            );
        }
    }

    /// `words` three-letter words, seeded (letters only: a word with a
    /// digit is the one number word).
    fn text(seed: u64, words: usize) -> String {
        (0..words)
            .map(|i| {
                let mut v = fmix64(seed ^ (i as u64).wrapping_mul(0x100_0000_01b3));
                let mut w = String::new();
                for _ in 0..3 {
                    w.push(char::from(b'a' + (v % 26) as u8));
                    v /= 26;
                }
                w
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn an_excerpt_samples_what_its_source_did() {
        let article = text(1, 2000);
        let whole = shingles(&article);
        assert!(!whole.is_empty());
        // A 400-word excerpt from the middle, inside other text.
        let words: Vec<&str> = article.split(' ').collect();
        let excerpt = words[500..900].join(" ");
        let page = format!("{} {excerpt} {}", text(2, 50), text(3, 50));
        let sampled = shingles(&page);
        let all_of_article: std::collections::HashSet<u32> = {
            let mut all = Vec::new();
            for chunk in words.chunks(1000) {
                all.extend(shingles(&chunk.join(" ")));
            }
            all.into_iter().collect()
        };
        let from_excerpt = sampled
            .iter()
            .filter(|s| all_of_article.contains(s))
            .count();
        // ~400/8 sampled shingles come from the excerpt; the rest are the
        // other text's and the two seams'.
        assert!(from_excerpt >= 30, "{from_excerpt} of {}", sampled.len());
    }

    #[test]
    fn a_page_reports_a_bounded_sample() {
        let long = text(4, 50_000);
        let s = shingles(&long);
        assert!(s.len() <= MAX_PAGE_SHINGLES);
        assert!(s.len() >= MAX_PAGE_SHINGLES / 2, "{}", s.len());
        // An excerpt from deep in a long article samples what it did.
        let article = text(5, 8_000);
        let learned: std::collections::HashSet<u32> = shingles(&article).into_iter().collect();
        let words: Vec<&str> = article.split(' ').collect();
        let deep = shingles(&words[7_000..7_400].join(" "));
        assert!(!deep.is_empty() && deep.iter().all(|s| learned.contains(s)));
        assert!(shingles("too short").is_empty());
        let mut sorted = s.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), s.len(), "distinct");
    }

    #[test]
    fn the_sketch_remembers_recent_keys_and_grows_to_its_cap() {
        let mut seen = SeenSketch::new(64 * 1024);
        assert_eq!(seen.bytes(), 0, "nothing allocated before the first key");
        for k in 0..20_000u64 {
            seen.insert(fmix64(k));
        }
        assert!(seen.bytes() <= 2 * 64 * 1024, "{}", seen.bytes());
        // The last generation's keys are all there.
        assert!((19_000..20_000u64).all(|k| seen.contains(fmix64(k))));
        let false_positives = (1_000_000..1_010_000u64)
            .filter(|&k| seen.contains(fmix64(k)))
            .count();
        assert!(false_positives < 400, "{false_positives} of 10,000");
        // Far more keys than it holds: the oldest are forgotten.
        for k in 20_000..400_000u64 {
            seen.insert(fmix64(k));
        }
        let remembered = (0..1000u64).filter(|&k| seen.contains(fmix64(k))).count();
        assert!(remembered < 100, "{remembered}");
        assert!(seen.bytes() <= 2 * 64 * 1024);
    }
}
