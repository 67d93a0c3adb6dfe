//! A page's words counted in one pass over its text, two ways at once:
//! runs between ASCII white space (the `words` fast field, what the hub
//! penalty and the length signal read) and runs of alphanumeric chars,
//! the positions the body's analyzer gives (see `schema::next_word`),
//! which is where each section of the body starts (see `sections`).
//!
//! Both are counted as the bytes that start a run, in pieces of at most
//! [`PIECE`] bytes with a byte-sized sum each, which the compiler turns
//! into vector code; a piece holding non-ASCII chars is read char by
//! char. A loop carrying "in a word" from byte to byte went at 0.5 GB/s,
//! one count this way at 4.5; on the bench's pages one count takes about
//! 3 instructions a byte, both about 7 (valgrind), where the analyzer's
//! own `next_word` took about 35.

/// Bytes counted into one `u8` sum: at most 255 run starts.
const PIECE: usize = 255;

/// What one pass over a page's body counts.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct BodyWords {
    /// Runs between ASCII white space.
    pub(super) spaced: u64,
    /// The body analyzer's word position at each offset asked for (of the
    /// first word starting there or after), then its word count.
    pub(super) positions: Vec<u32>,
}

/// Words of `text`, split at ASCII white space (other white space is rare
/// in page text, and the count only feeds the hub penalty and the length
/// signal). One count alone vectorizes better than the two of
/// [`body_words`]: this one runs again for each page's links' contexts.
pub(super) fn word_count(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let Some(&first) = bytes.first() else {
        return 0;
    };
    let mut starts = u64::from(!space(first));
    for (before, at) in bytes.chunks(PIECE).zip(bytes[1..].chunks(PIECE)) {
        let mut run = 0u8;
        for (&b, &a) in before.iter().zip(at) {
            run += u8::from(space(b) & !space(a));
        }
        starts += u64::from(run);
    }
    starts
}

/// `body`'s words between spaces, and the analyzer's word position at each
/// of `offsets` (char boundaries of `body`, in order), then its word count:
/// one pass over the body.
pub(super) fn body_words(body: &str, offsets: impl IntoIterator<Item = usize>) -> BodyWords {
    let mut counter = Counter::default();
    let mut positions = Vec::new();
    let mut at = 0;
    for offset in offsets {
        let to = offset.clamp(at, body.len());
        counter.add(&body[at..to]);
        positions.push(counter.alnum);
        at = to;
    }
    counter.add(&body[at..]);
    if !positions.is_empty() {
        positions.push(counter.alnum);
    }
    BodyWords {
        spaced: counter.spaced,
        positions,
    }
}

/// Run starts counted so far, and what the last char counted was.
struct Counter {
    spaced: u64,
    alnum: u32,
    after_space: bool,
    after_alnum: bool,
}

impl Default for Counter {
    fn default() -> Self {
        // The text's start is as after a space and not after a word.
        Self {
            spaced: 0,
            alnum: 0,
            after_space: true,
            after_alnum: false,
        }
    }
}

fn space(b: u8) -> bool {
    (b == b' ') | (b == b'\n') | (b == b'\t') | (b == b'\r') | (b == 0x0C)
}

fn ascii_alnum(b: u8) -> bool {
    ((b | 0x20).wrapping_sub(b'a') < 26) | (b.wrapping_sub(b'0') < 10)
}

impl Counter {
    /// Count `text`, which follows what was counted so far.
    fn add(&mut self, text: &str) {
        let mut at = 0;
        while at < text.len() {
            let end = if at + PIECE >= text.len() {
                text.len()
            } else {
                text.floor_char_boundary(at + PIECE)
            };
            let piece = &text[at..end];
            if piece.is_ascii() {
                self.add_ascii(piece.as_bytes());
            } else {
                self.add_chars(piece);
            }
            at = end;
        }
    }

    /// `bytes`: ASCII, at most [`PIECE`] of them.
    fn add_ascii(&mut self, bytes: &[u8]) {
        let Some((&first, _)) = bytes.split_first() else {
            return;
        };
        let mut spaced = u8::from(self.after_space & !space(first));
        let mut alnum = u8::from(!self.after_alnum & ascii_alnum(first));
        for (&b, &a) in bytes.iter().zip(&bytes[1..]) {
            spaced += u8::from(space(b) & !space(a));
            alnum += u8::from(!ascii_alnum(b) & ascii_alnum(a));
        }
        self.spaced += u64::from(spaced);
        self.alnum += u32::from(alnum);
        let last = bytes[bytes.len() - 1];
        self.after_space = space(last);
        self.after_alnum = ascii_alnum(last);
    }

    fn add_chars(&mut self, text: &str) {
        for c in text.chars() {
            let (is_space, is_alnum) = match u8::try_from(c) {
                Ok(b) if b.is_ascii() => (space(b), ascii_alnum(b)),
                _ => (false, c.is_alphanumeric()),
            };
            self.spaced += u64::from(self.after_space & !is_space);
            self.alnum += u32::from(!self.after_alnum & is_alnum);
            self.after_space = is_space;
            self.after_alnum = is_alnum;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::schema::next_word;

    /// A text of `parts` picked at random, at least `len` bytes long.
    fn mixed(parts: &[&str], len: usize) -> String {
        let mut seed = 7_u64;
        let mut text = String::new();
        while text.len() < len {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            text.push_str(parts[(seed >> 33) as usize % parts.len()]);
        }
        text
    }

    /// The analyzer's words of `text`, one `next_word` at a time.
    fn analyzer_words(text: &str) -> Vec<usize> {
        let mut starts = Vec::new();
        let mut next = next_word(text, 0);
        while let Some((from, to)) = next {
            starts.push(from);
            next = next_word(text, to);
        }
        starts
    }

    #[test]
    fn words_are_counted_between_spaces() {
        assert_eq!(word_count(""), 0);
        assert_eq!(word_count("  one\ttwo\n three  "), 3);
        assert_eq!(word_count("héllo wörld"), 2);
        assert_eq!(
            word_count("a\u{b}b\u{c}c\rd"),
            3,
            "vertical tab is not ASCII white space"
        );
        // As splitting does, over texts longer than a piece and cut anywhere.
        let text = mixed(
            &["alpha", " ", "\n\t", "délta", "x", "  ", "\r", "\u{c}"],
            3_000,
        );
        for start in (0..600).map(|i| text.floor_char_boundary(i * 3)) {
            for len in [0, 1, 254, 255, 256, 511, 2_000] {
                let piece = &text[start..text.floor_char_boundary(start + len)];
                let split = piece.split_ascii_whitespace().count() as u64;
                assert_eq!(word_count(piece), split, "{piece:?}");
            }
        }
    }

    #[test]
    fn positions_are_the_analyzers_at_each_offset() {
        let body = "Lead words. CASE the case-expression. COALESCE returns ¶ the first";
        let offsets = ["CASE", "COALESCE"].map(|h| body.find(h).unwrap());
        let words = body_words(body, offsets);
        // "Lead words." is words 0-1; "CASE the case-expression." 2-5;
        // "COALESCE returns ¶ the first" 6-9 (¶ is no word).
        assert_eq!(words.positions, [2, 6, 10]);
        assert_eq!(words.spaced, 10);
        // An offset inside a word counts that word before it.
        assert_eq!(body_words("abc def", [1]).positions, [1, 2]);
        // Without offsets, no positions: the page has no sections.
        assert_eq!(body_words(body, []).positions, Vec::<u32>::new());
    }

    #[test]
    fn positions_match_the_analyzer_over_mixed_texts_cut_anywhere() {
        let text = mixed(
            &[
                "alpha",
                " ",
                "naïve",
                "—",
                "x1",
                "-",
                "日本語",
                ".",
                "\n",
                "Ω",
                "é",
                "¶ ",
                "🦀",
            ],
            4_000,
        );
        let starts = analyzer_words(&text);
        for step in [1, 7, 100, 254, 255, 256, 1_000] {
            let offsets: Vec<usize> = (0..text.len())
                .step_by(step)
                .map(|i| text.floor_char_boundary(i))
                .collect();
            let words = body_words(&text, offsets.iter().copied());
            let expected: Vec<u32> = offsets
                .iter()
                .map(|&o| starts.iter().filter(|&&s| s < o).count() as u32)
                .chain([starts.len() as u32])
                .collect();
            assert_eq!(words.positions, expected, "every {step} bytes");
            assert_eq!(words.spaced, word_count(&text));
            assert_eq!(words.spaced, text.split_ascii_whitespace().count() as u64);
        }
    }
}
