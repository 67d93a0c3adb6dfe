//! How the trap rules read a page's text: its words, hashed as they are
//! read, and the simhashes near-duplicate rules compare.

use super::{FNV_OFFSET, SHINGLE_TEXT_BYTES, fmix64, fnv1a, novelty};

/// What the near-duplicate rules compare of a page: the [`simhash`] of
/// what it shows (the start of its visible text, menus and link lists
/// included: a catalogue's list pages differ by their lists) and of its own
/// words (its main text, chrome left out: pages that open with one large
/// menu differ there). Two pages are alike only when both are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PageSimhash {
    pub shown: u64,
    pub own: u64,
}

#[cfg(test)]
impl From<u64> for PageSimhash {
    /// The same hash for both (a test's page whose text is all its own).
    fn from(x: u64) -> Self {
        Self { shown: x, own: x }
    }
}

impl PageSimhash {
    /// The simhashes of a page's `shown` text (see
    /// `ExtractedPage::visible_head`) and of the start of its own text.
    pub fn of(shown: &str, own: &str) -> Self {
        read_page(shown, own, false).0
    }

    /// Both within `bits` of `other`'s.
    pub fn near(self, other: Self, bits: u32) -> bool {
        hamming(self.shown, other.shown) <= bits && hamming(self.own, other.own) <= bits
    }
}

/// Words per shingle: three keep word order without making one changed
/// word disturb more than three features.
pub(super) const SHINGLE: usize = 3;

/// A 64-bit similarity hash (Charikar) of a page's visible text: words are
/// lower-cased runs of letters and digits, any word with a digit counts as
/// the same word (dates, counters and prices are what a generated page
/// changes), features are the distinct 3-word shingles (a bottom-k sample
/// of at most `MAX_FEATURES` of them), each bit the
/// majority of the features' bits. Near-identical texts are a few bits
/// apart ([`hamming`]), unrelated ones about 32. Empty text hashes to 0.
pub fn simhash(text: &str) -> u64 {
    simhash_of_words(&words_of(text))
}

/// A page's text as the trap rules read it, from one reading of its own
/// words: its [`PageSimhash`] and, when `shingles` is asked for (a first
/// fetch, which rule 6 judges), its sampled shingles
/// ([`novelty::shingles`]). The own simhash takes the words that start in
/// the first [`SIMHASH_TEXT_BYTES`] of `own`.
pub fn read_page(shown: &str, own: &str, shingles: bool) -> (PageSimhash, Vec<u32>) {
    let limit = if shingles {
        SHINGLE_TEXT_BYTES.max(SIMHASH_TEXT_BYTES)
    } else {
        SIMHASH_TEXT_BYTES
    };
    thread_local! {
        // A page's words, up to 64 KB of text's worth (about 90 KB): one
        // buffer a thread, not an allocation of that size a page, which
        // glibc's arenas served at a lock and a search of their free lists.
        static WORDS: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    WORDS.with_borrow_mut(|words| {
        let head = words_until(
            &own[..own.floor_char_boundary(limit)],
            SIMHASH_TEXT_BYTES,
            words,
        );
        read_words(shown, own, words, head, shingles)
    })
}

/// [`read_page`] once its own text's words are read: `head` of them start
/// in the first [`SIMHASH_TEXT_BYTES`].
fn read_words(
    shown: &str,
    own: &str,
    words: &[u64],
    head: usize,
    shingles: bool,
) -> (PageSimhash, Vec<u32>) {
    let own_simhash = simhash_of_words(&words[..head]);
    // A page without chrome shows its own text first: the same words, one
    // simhash (the last word cut at the limit aside).
    let simhash = PageSimhash {
        shown: if own.starts_with(shown) {
            own_simhash
        } else {
            simhash(shown)
        },
        own: own_simhash,
    };
    let sampled = if shingles {
        novelty::shingles_of_words(words)
    } else {
        Vec::new()
    };
    (simhash, sampled)
}

/// [`simhash`] of a text's words.
pub(super) fn simhash_of_words(words: &[u64]) -> u64 {
    let shingle = |ws: &[u64]| {
        ws.iter()
            .fold(FNV_OFFSET, |h, &w| fmix64(h.rotate_left(23) ^ w))
    };
    let mut features: Vec<u64> = if words.len() < SHINGLE {
        if words.is_empty() {
            return 0;
        }
        vec![shingle(words)]
    } else {
        words.windows(SHINGLE).map(shingle).collect()
    };
    // A bottom-k sample of the features: a long page costs no more than a
    // short one, and near-identical pages sample nearly the same shingles.
    if features.len() > 2 * MAX_FEATURES {
        features.select_nth_unstable(2 * MAX_FEATURES);
        features.truncate(2 * MAX_FEATURES);
    }
    features.sort_unstable();
    features.dedup();
    features.truncate(MAX_FEATURES);
    let ones = bit_counts(&features);
    let n = features.len() as u32;
    ones.iter()
        .enumerate()
        .filter(|(_, one)| 2 * **one > n)
        .fold(0, |h, (bit, _)| h | 1 << bit)
}

/// Bytes of a page's visible text its simhash is taken over, at most: the
/// start of a page is where a template shows, and a bound keeps the cost
/// of a long page that of a short one.
pub const SIMHASH_TEXT_BYTES: usize = 4 * 1024;

/// Features a simhash votes with at most (see [`simhash`]).
pub(super) const MAX_FEATURES: usize = 256;

/// The hashes of a text's words: lower-cased runs of letters and digits,
/// hashed as they are read (no string per word); a word with a digit in it
/// is the one number word.
pub(super) fn words_of(text: &str) -> Vec<u64> {
    let mut words = Vec::new();
    words_until(text, usize::MAX, &mut words);
    words
}

/// For each bit of a 64-bit hash, how many of `hashes` have it set.
/// Eight bits at a time: a table spreads a byte's bits over the bytes of a
/// word, so one add counts eight bits (a byte counts up to 255 hashes).
pub(super) fn bit_counts(hashes: &[u64]) -> [u32; 64] {
    const SPREAD: [u64; 256] = {
        let mut table = [0u64; 256];
        let mut v = 0;
        while v < 256 {
            let mut bit = 0;
            while bit < 8 {
                if (v >> bit) & 1 == 1 {
                    table[v] |= 1 << (8 * bit);
                }
                bit += 1;
            }
            v += 1;
        }
        table
    };
    let mut ones = [0u32; 64];
    for chunk in hashes.chunks(255) {
        let mut packed = [0u64; 8];
        for h in chunk {
            for (byte, sum) in packed.iter_mut().enumerate() {
                *sum += SPREAD[((h >> (8 * byte)) & 0xff) as usize];
            }
        }
        for (byte, sum) in packed.iter().enumerate() {
            for bit in 0..8 {
                ones[8 * byte + bit] += ((sum >> (8 * bit)) & 0xff) as u32;
            }
        }
    }
    ones
}

/// [`words_of`] into `words` (cleared first); returns how many of the
/// words start before byte `mark`.
pub(super) fn words_until(text: &str, mark: usize, words: &mut Vec<u64>) -> usize {
    let number = fmix64(fnv1a(FNV_OFFSET, b"#"));
    words.clear();
    words.reserve(text.len() / 6);
    let mut before_mark = None;
    let bytes = text.as_bytes();
    let mut i = 0;
    // Where the block reader may try again: past a block it found a
    // non-ASCII byte in, the word-at-a-time reading below goes on.
    let mut scalar_until = 0;
    while i < bytes.len() {
        if i >= scalar_until {
            match ascii_block(text, i, mark, number, words, &mut before_mark) {
                BlockRead::Done(next) => {
                    i = next;
                    continue;
                }
                BlockRead::NotAscii => scalar_until = i + BLOCK,
                BlockRead::LongWord => {}
            }
        }
        if i >= mark && before_mark.is_none() {
            before_mark = Some(words.len());
        }
        // Most words are a few ASCII letters between ASCII separators: one
        // eight-byte load gives the word, its kinds and the separators
        // after it, and the word is hashed from the same load, with no
        // branch on its length (word lengths are random, and branches on
        // them were most of the cost).
        let x = load_padded(bytes, i);
        let Kinds { letter, digit } = Kinds::of(x);
        let alnum = letter | digit;
        let non_ascii = x & HIGH_BITS;
        let n = ((!alnum & HIGH_BITS).trailing_zeros() / 8) as usize;
        if n < 8 && (x >> (8 * n)) & 0x80 == 0 {
            // Bytes i..i+n are the word (none when i is a separator), and
            // byte i+n an ASCII separator or the end.
            let mut skip = n;
            if n > 0 {
                let word = (1u64 << (8 * n)) - 1;
                if digit & word != 0 {
                    words.push(number);
                } else {
                    // Capitals to small letters: 0x20 set where the flag
                    // is 0x80 (small letters have it).
                    let small = (x | ((letter & word) >> 2)) & word;
                    words.push(hash_short(small, n));
                }
            }
            // Past the separators that follow, to the next letter, digit or
            // non-ASCII byte (or past the end: the padding is zeros).
            let next = (alnum | non_ascii) >> (8 * skip);
            skip += if next == 0 {
                8 - skip
            } else {
                (next.trailing_zeros() / 8) as usize
            };
            i += skip;
            continue;
        }
        if n == 8
            && let Some(next) = medium_word(bytes, i, x, letter, digit, number, words)
        {
            i = next;
            continue;
        }
        i = long_word(text, i, number, words);
    }
    before_mark.unwrap_or(words.len())
}

/// Bytes [`ascii_block`] reads at once: a bit each in a `u64`.
const BLOCK: usize = 64;

/// What [`ascii_block`] did.
enum BlockRead {
    /// Read every word that starts in the block and ends in it; the next
    /// block starts here (a word that runs past the block starts it).
    Done(usize),
    /// The block has a non-ASCII byte: read it word by word.
    NotAscii,
    /// A word fills the whole block: read it the long way.
    LongWord,
}

/// Read the words of the `BLOCK` bytes at `at` (which is not inside a
/// word) when they are all ASCII. Which bytes are letters or digits is
/// found for the whole block first, as two 64-bit masks, and the words
/// are then taken from the masks: a word costs two counts of trailing
/// zeros, a load and its hash, and no branch on the separators after it
/// (reading a page's text took 10% less). The hashes are the
/// word-at-a-time reading's.
fn ascii_block(
    text: &str,
    at: usize,
    mark: usize,
    number: u64,
    words: &mut Vec<u64>,
    before_mark: &mut Option<usize>,
) -> BlockRead {
    let bytes = text.as_bytes();
    let mut alnum = 0u64;
    let mut digits = 0u64;
    let mut high = 0u64;
    for k in 0..BLOCK / 8 {
        let x = load_padded(bytes, at + 8 * k);
        let Kinds { letter, digit } = Kinds::of(x);
        alnum |= bit_per_byte(letter | digit) << (8 * k);
        digits |= bit_per_byte(digit) << (8 * k);
        high |= x;
    }
    if high & HIGH_BITS != 0 {
        return BlockRead::NotAscii;
    }
    // `at` is not inside a word: a letter at bit 0 starts one.
    let mut starts = alnum & !(alnum << 1);
    while starts != 0 {
        let s = starts.trailing_zeros() as usize;
        let n = (!(alnum >> s)).trailing_zeros() as usize;
        if s + n == BLOCK {
            // Runs to the block's end, and maybe past it: the next block
            // starts with it.
            return if s == 0 {
                BlockRead::LongWord
            } else {
                BlockRead::Done(at + s)
            };
        }
        let start = at + s;
        if start >= mark && before_mark.is_none() {
            *before_mark = Some(words.len());
        }
        // Letters and digits only, so setting 0x20 in each byte makes
        // capitals small and leaves small letters and digits as they are.
        let small = |x: u64| x | (LOW_BITS * 0x20);
        if (digits >> s) & ((1u64 << n) - 1) != 0 {
            words.push(number);
        } else if n < 8 {
            let word = (1u64 << (8 * n)) - 1;
            words.push(hash_short(small(load_padded(bytes, start)) & word, n));
        } else if n < 16 {
            let tail = (1u64 << (8 * (n - 8))) - 1;
            let head = small(load_padded(bytes, start));
            let rest = small(load_padded(bytes, start + 8)) & tail;
            words.push(hash_medium(head, rest, n - 8));
        } else {
            long_word(text, start, number, words);
        }
        starts &= starts - 1;
    }
    BlockRead::Done(at + BLOCK)
}

/// The high bit of each byte of `flags` as one bit a byte: byte k's at
/// bit k (one multiply gathers the eight into the top byte).
#[inline]
fn bit_per_byte(flags: u64) -> u64 {
    ((flags & HIGH_BITS).wrapping_mul(0x0002_0408_1020_4081)) >> 56
}

/// A word of 8 to 15 ASCII letters and digits at `i` (whose first eight
/// bytes, all letters or digits, are `x`) followed by an ASCII separator or
/// the end: push its hash and return where the next word may start, from
/// one more eight-byte load; `None` for any other word (one in five
/// English words is this long: the long way was a tenth of the crawl's
/// text work).
#[inline]
pub(super) fn medium_word(
    bytes: &[u8],
    i: usize,
    x: u64,
    letter: u64,
    digit: u64,
    number: u64,
    words: &mut Vec<u64>,
) -> Option<usize> {
    let y = load_padded(bytes, i + 8);
    let Kinds {
        letter: letter_y,
        digit: digit_y,
    } = Kinds::of(y);
    let alnum_y = letter_y | digit_y;
    let m = ((!alnum_y & HIGH_BITS).trailing_zeros() / 8) as usize;
    if m == 8 || (y >> (8 * m)) & 0x80 != 0 {
        return None;
    }
    let tail = (1u64 << (8 * m)) - 1;
    if digit != 0 || digit_y & tail != 0 {
        words.push(number);
    } else {
        let head = x | (letter >> 2);
        let rest = (y | ((letter_y & tail) >> 2)) & tail;
        words.push(hash_medium(head, rest, m));
    }
    let next = (alnum_y | (y & HIGH_BITS)) >> (8 * m);
    Some(
        i + 8
            + if next == 0 {
                8
            } else {
                m + (next.trailing_zeros() / 8) as usize
            },
    )
}

/// Read the word or separator at `i` the long way (a word of eight bytes or
/// more, or with non-ASCII letters, or a non-ASCII separator), push the
/// word's hash, and return where it ends.
#[cold]
pub(super) fn long_word(text: &str, start: usize, number: u64, words: &mut Vec<u64>) -> usize {
    let bytes = text.as_bytes();
    let mut i = start;
    let mut kinds = ascii_run(bytes, &mut i);
    let mut unicode = false;
    while i < bytes.len() && !bytes[i].is_ascii() {
        let c = text[i..].chars().next().unwrap_or(' ');
        if !c.is_alphanumeric() {
            break;
        }
        unicode = true;
        i += c.len_utf8();
        kinds |= ascii_run(bytes, &mut i);
    }
    if i == start {
        // A separator (ASCII or not).
        return start
            + if bytes[i].is_ascii() {
                1
            } else {
                text[i..].chars().next().map_or(1, char::len_utf8)
            };
    }
    if kinds & DIGIT != 0 {
        words.push(number);
    } else if !unicode && kinds & UPPER == 0 {
        words.push(word_hash(&bytes[start..i]));
    } else {
        let mut word = Vec::with_capacity(i - start + 8);
        if unicode {
            for c in text[start..i].chars().flat_map(char::to_lowercase) {
                let mut buf = [0u8; 4];
                word.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        } else {
            word.extend(bytes[start..i].iter().map(u8::to_ascii_lowercase));
        }
        words.push(word_hash(&word));
    }
    i
}

/// Read ASCII letters and digits from `*i` on: the kinds met, or'd. Eight
/// bytes at a time: each byte's kind comes from range tests on the whole
/// word at once (a table look-up and a branch a byte were most of
/// [`words_of`]).
#[inline]
pub(super) fn ascii_run(bytes: &[u8], i: &mut usize) -> u8 {
    let mut kinds = 0;
    loop {
        let x = load_padded(bytes, *i);
        let Kinds { letter, digit } = Kinds::of(x);
        let upper = between(x, b'A' - 1, b'Z' + 1);
        let lower = letter & !upper;
        // The first byte that is none of them (a separator, a non-ASCII
        // byte, or the zeros past the end) ends the run.
        let stop = !(letter | digit) & HIGH_BITS;
        let n = (stop.trailing_zeros() / 8) as usize;
        let run = if n == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * n)) - 1
        };
        for (kind, flags) in [(LOWER, lower), (UPPER, upper), (DIGIT, digit)] {
            if flags & run != 0 {
                kinds |= kind;
            }
        }
        *i += n;
        if n < 8 {
            return kinds;
        }
    }
}

/// The high bit of each byte of an eight-byte load that is a letter or a
/// digit (ASCII; neither for a non-ASCII byte).
pub(super) struct Kinds {
    pub(super) letter: u64,
    pub(super) digit: u64,
}

impl Kinds {
    #[inline]
    pub(super) fn of(x: u64) -> Self {
        Self {
            // 0x20 set makes capitals small letters and moves no other
            // ASCII byte into a..z: one range test for both cases.
            letter: between(x | (LOW_BITS * 0x20), b'a' - 1, b'z' + 1),
            digit: between(x, b'0' - 1, b'9' + 1),
        }
    }
}

pub(super) const LOW_BITS: u64 = 0x0101_0101_0101_0101;
pub(super) const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The eight bytes from `at` as a little-endian word, zeros past the end.
#[inline]
pub(super) fn load_padded(bytes: &[u8], at: usize) -> u64 {
    match bytes.get(at..at + 8) {
        Some(b) => u64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
        None => {
            let mut b = [0u8; 8];
            let rest = bytes.get(at..).unwrap_or_default();
            b[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(b)
        }
    }
}

/// The high bit of each byte of `x` that is ASCII and strictly between `lo`
/// and `hi` (`lo` < 128, `hi` ≤ 128): exact per byte, no carry crosses one
/// (Bit Twiddling Hacks' `hasbetween`).
#[inline]
pub(super) fn between(x: u64, lo: u8, hi: u8) -> u64 {
    let low7 = x & !HIGH_BITS;
    (LOW_BITS * (127 + u64::from(hi))).wrapping_sub(low7)
        & !x
        & low7.wrapping_add(LOW_BITS * (127 - u64::from(lo)))
        & HIGH_BITS
}

/// Kinds of ASCII byte in [`words_of`]: a separator (and any byte of a
/// non-ASCII character) is none of them.
pub(super) const LOWER: u8 = 1;
pub(super) const UPPER: u8 = 2;
pub(super) const DIGIT: u8 = 4;

/// A word's hash: its bytes eight at a time, the last under-eight of
/// them zero-padded, fully mixed at the end.
pub(super) fn word_hash(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET ^ bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        h = (h ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
    h = (h ^ le_tail(chunks.remainder())).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    fmix64(h)
}

/// [`word_hash`] of a word of `n` < 8 bytes given as its zero-padded
/// little-endian word (the same hash: no whole chunk, the tail only).
#[inline]
pub(super) fn hash_short(word: u64, n: usize) -> u64 {
    fmix64(((FNV_OFFSET ^ n as u64) ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// [`word_hash`] of a word of 8 + `m` bytes (`m` < 8): its first eight
/// bytes, and the rest zero-padded (one whole chunk, then the tail).
#[inline]
fn hash_medium(head: u64, rest: u64, m: usize) -> u64 {
    let h = ((FNV_OFFSET ^ (8 + m) as u64) ^ head)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(29);
    fmix64((h ^ rest).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// The last under-eight bytes of a word as a little-endian `u64`, zero
/// above them: what copying them into a zeroed `[u8; 8]` gives, without
/// the copy (a `memcpy` call a word, and the wide load after the narrow
/// stores stalling, were three quarters of [`words_of`]).
pub(super) fn le_tail(rest: &[u8]) -> u64 {
    let n = rest.len();
    if n >= 4 {
        // Two four-byte loads that overlap when n < 8: the second's bytes
        // land where they are, the overlap ORs a byte with itself.
        let lo = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let hi = u32::from_le_bytes([rest[n - 4], rest[n - 3], rest[n - 2], rest[n - 1]]);
        u64::from(lo) | u64::from(hi) << (8 * (n - 4))
    } else if n > 0 {
        u64::from(rest[0])
            | u64::from(rest[n / 2]) << (8 * (n / 2))
            | u64::from(rest[n - 1]) << (8 * (n - 1))
    } else {
        0
    }
}

/// Bits in which two simhashes differ.
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traps::harness::{Rng, vocabulary, words};
    use crate::traps::{TrapSettings, shingles};

    #[test]
    fn words_are_read_whatever_their_case_script_or_separators() {
        assert_eq!(
            words_of("Ünïcode CAFÉ Straße x9"),
            words_of("ünïcode café straße 7")
        );
        assert_ne!(words_of("café"), words_of("cafe"));
        assert_eq!(words_of(" a,b — c\u{a0}d ").len(), 4);
        assert_eq!(words_of("a-b"), words_of("A B"));
        assert!(words_of(" ,; ").is_empty());
    }

    /// The eight-bytes-at-a-time reading gives what splitting on
    /// everything but letters and digits does, over generated mixes of
    /// short and long words, capitals, digits, punctuation, runs of
    /// separators and non-ASCII letters and spaces, at every alignment.
    /// Each word of `text` with where it starts: what splitting on
    /// everything but letters and digits gives.
    fn reference_words(text: &str) -> Vec<(usize, u64)> {
        let number = fmix64(fnv1a(FNV_OFFSET, b"#"));
        let mut out = Vec::new();
        let mut start = None;
        for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
            match (c.is_alphanumeric(), start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    let w = &text[s..i];
                    let hash = if w.bytes().any(|b| b.is_ascii_digit()) {
                        number
                    } else {
                        let lower: String = w.chars().flat_map(char::to_lowercase).collect();
                        word_hash(lower.as_bytes())
                    };
                    out.push((s, hash));
                    start = None;
                }
                _ => {}
            }
        }
        out
    }

    /// `count` of [`PIECES`] drawn by `x`, a seed that moves on.
    fn mix_of_pieces(x: &mut u64, count: usize) -> String {
        let mut text = String::new();
        for _ in 0..count {
            *x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            text.push_str(PIECES[(*x >> 33) as usize % PIECES.len()]);
        }
        text
    }

    #[test]
    fn words_read_eight_bytes_at_a_time_as_split_words() {
        let reference = |text: &str| -> Vec<u64> {
            reference_words(text).into_iter().map(|(_, h)| h).collect()
        };
        let mut x = 7u64;
        for round in 0..5000 {
            let text = mix_of_pieces(&mut x, round % 40);
            assert_eq!(words_of(&text), reference(&text), "{text:?}");
        }
    }

    /// Texts of many blocks, ASCII only (read a block at a time) or with
    /// non-ASCII pieces now and then (blocks read word by word between
    /// blocks read at once), and words of every length across the blocks'
    /// edges: the same words, and the same count of those that start
    /// before a mark, as splitting gives.
    #[test]
    fn long_texts_read_in_blocks_as_split_words() {
        let mut x = 11u64;
        let mut words = Vec::new();
        for round in 0..600 {
            let mut text = mix_of_pieces(&mut x, 20 + round % 300);
            if round % 2 == 0 {
                text.retain(|c| c.is_ascii());
            }
            let want = reference_words(&text);
            for mark in [0, 1, 63, 64, 65, text.len() / 2, text.len(), usize::MAX] {
                let before = words_until(&text, mark, &mut words);
                assert_eq!(
                    words,
                    want.iter().map(|&(_, h)| h).collect::<Vec<_>>(),
                    "{text:?}"
                );
                let want_before = want.iter().filter(|&&(at, _)| at < mark).count();
                assert_eq!(before, want_before, "mark {mark} in {text:?}");
            }
        }
    }

    /// Words, separators and their mixes that the readings must agree on.
    const PIECES: [&str; 33] = [
        "a",
        "to",
        "the",
        "Crawl",
        "fetches",
        "frontier",
        "CRAWLERS",
        "indexation",
        "supercalifragilistic",
        "x9",
        "2024",
        "café",
        "Straße",
        "naïve",
        "日本語",
        " ",
        "  ",
        ", ",
        ".",
        "—",
        "\u{a0}",
        "/",
        "-",
        "\n",
        "(",
        ")",
        "'s",
        "e.g.",
        "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnop",
        "Internationalization",
        "CamelCaseIdentifierName",
        "ok",
        "a9b",
    ];

    #[test]
    fn a_words_tail_reads_as_its_zero_padded_bytes() {
        let bytes: Vec<u8> = (1..=16).map(|b| b * 15).collect();
        for start in 0..8 {
            for n in 0..8 {
                let rest = &bytes[start..start + n];
                let mut padded = [0u8; 8];
                padded[..n].copy_from_slice(rest);
                assert_eq!(le_tail(rest), u64::from_le_bytes(padded), "{n} bytes");
            }
        }
    }

    #[test]
    fn near_identical_texts_are_a_few_bits_apart() {
        let mut rng = Rng(7);
        let vocab = vocabulary(&mut rng, 2000);
        let mut near = Vec::new();
        let mut far = Vec::new();
        for _ in 0..100 {
            let text: Vec<String> = (0..200)
                .map(|_| vocab[rng.below(vocab.len())].clone())
                .collect();
            let mut edited = text.clone();
            edited[rng.below(200)] = "changed".to_string();
            near.push(hamming(
                simhash(&text.join(" ")),
                simhash(&edited.join(" ")),
            ));
            let other = words(&mut rng, &vocab, 200);
            far.push(hamming(simhash(&text.join(" ")), simhash(&other)));
        }
        near.sort_unstable();
        far.sort_unstable();
        let k = TrapSettings::default().near_dup_bits;
        assert!(near[50] <= 4, "median {}", near[50]);
        assert!(near[95] <= k, "95th percentile {} > K", near[95]);
        assert!(far[0] >= 20, "closest unrelated pair {}", far[0]);
        assert!((28..=36).contains(&far[50]), "median unrelated {}", far[50]);
    }

    /// Pages that open with one large menu show alike and are not; list
    /// pages whose own words are alike ("Catalogue, page N") show their
    /// lists and are not either. Alike means both.
    #[test]
    fn pages_are_alike_only_when_what_they_show_and_their_own_words_are() {
        let mut rng = Rng(12);
        let vocab = vocabulary(&mut rng, 2000);
        let menu = words(&mut rng, &vocab, 1500);
        let own = [words(&mut rng, &vocab, 200), words(&mut rng, &vocab, 200)];
        let shown = |own: &str| format!("{menu} {own}");
        let a = PageSimhash::of(&shown(&own[0]), &own[0]);
        let b = PageSimhash::of(&shown(&own[1]), &own[1]);
        assert!(
            hamming(a.shown, b.shown) <= 8,
            "the menu is what they show first"
        );
        assert!(!a.near(b, 8));
        let lists = [words(&mut rng, &vocab, 300), words(&mut rng, &vocab, 300)];
        let c = PageSimhash::of(&lists[0], "Catalogue, page 1");
        let d = PageSimhash::of(&lists[1], "Catalogue, page 2");
        assert!(hamming(c.own, d.own) <= 8);
        assert!(!c.near(d, 8));
        let e = PageSimhash::of(&format!("{} 2024", lists[0]), "Catalogue, page 3");
        assert!(c.near(e, 8), "the same list under another number");
    }

    #[test]
    fn bit_counts_count_each_bit() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for n in [0, 1, 7, 254, 255, 256, 600] {
            let hashes: Vec<u64> = (0..n)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    // Some all-ones, so a byte's count passes 255.
                    if rng.is_multiple_of(5) { u64::MAX } else { rng }
                })
                .collect();
            let mut want = [0u32; 64];
            for h in &hashes {
                for (bit, one) in want.iter_mut().enumerate() {
                    *one += ((h >> bit) & 1) as u32;
                }
            }
            assert_eq!(bit_counts(&hashes), want, "{n} hashes");
        }
    }

    #[test]
    fn one_reading_of_a_page_gives_what_the_parts_give() {
        let own: String = (0..3_000)
            .map(|i| format!("word{} Alpha beta, gamma. ", i % 97))
            .collect::<String>()
            .replace("word1 ", "Ünïcode ");
        let shown = format!("Menu Home About {}", &own[..500]);
        let (hash, sampled) = read_page(&shown, &own, true);
        assert_eq!(hash.shown, simhash(&shown));
        assert_eq!(sampled, shingles(&own));
        assert!(!sampled.is_empty());
        // The own simhash reads the words that start in the first 4 KB:
        // the same as the first 4 KB cut at a word's start.
        let cut = own[..SIMHASH_TEXT_BYTES]
            .rfind(' ')
            .expect("a space in the first 4 KB");
        assert_eq!(hash.own, simhash(&own[..cut]));
        let (alone, none) = read_page(&shown, &own, false);
        assert_eq!(alone, hash);
        assert!(none.is_empty());
        // A page without chrome shows its own text first: one simhash
        // serves both, within a bit or two of the shown text's own.
        let chromeless = read_page(&own[..SIMHASH_TEXT_BYTES], &own, false).0;
        assert_eq!(chromeless.shown, chromeless.own);
        assert!(hamming(chromeless.shown, simhash(&own[..SIMHASH_TEXT_BYTES])) <= 2);
    }

    #[test]
    fn simhash_ignores_numbers_case_and_punctuation() {
        assert_eq!(
            simhash("Page 12 of the archive, posted 2024-05-01."),
            simhash("page 9876 of the ARCHIVE; posted 1999-12-31")
        );
        assert_eq!(simhash(""), 0);
        assert_eq!(simhash("  ,;  "), 0);
        assert_ne!(simhash("two words"), 0);
        // Same input, same hash: nothing seeded per process.
        assert_eq!(simhash("a stable text"), simhash("a stable text"));
    }

    #[test]
    fn bench_like_random_pages_are_not_near_duplicates() {
        // The benchmark web draws its text from a 26-word vocabulary.
        let mut rng = Rng(3);
        let vocab = vocabulary(&mut rng, 26);
        let k = TrapSettings::default().near_dup_bits;
        for _ in 0..100 {
            let (na, nb) = (400 + rng.below(2000), 400 + rng.below(2000));
            let a = simhash(&words(&mut rng, &vocab, na));
            let b = simhash(&words(&mut rng, &vocab, nb));
            assert!(hamming(a, b) > k + 4, "{}", hamming(a, b));
        }
    }
}
