//! Typo correction: which query words to replace, and by what.
//!
//! Pure over a [`Vocabulary`] (the index's unstemmed words with their
//! document frequencies; an in-memory map in tests). The rule, in
//! [`choose`]:
//!
//! - Words shorter than 3 letters, and words with digits or other
//!   non-letters (versions, codes), are never corrected.
//! - Candidates are vocabulary words within edit distance 1 (words of up
//!   to 5 letters) or 2 (longer words), a transposition counting as one
//!   edit. The best maximises `ln(1 + df) − EDIT_COST · distance`: a
//!   candidate one edit further must be `e^EDIT_COST` (≈ 50×) as frequent
//!   to win; ties go to the nearer, then the alphabetically first.
//! - A word absent from the vocabulary is replaced by the best candidate.
//! - A word present is kept, unless it is rare (in at most
//!   `max(1, pages / 20,000)` documents), does not occur together with the
//!   query's other words in any document, and a candidate one edit away is
//!   at least [`RARE_RATIO`] times as frequent: the index's own typos
//!   ("pyhton" on one page of thousands about "python"). A correctly spelled
//!   rare word is therefore only ever replaced by a far more common word one
//!   edit away, and never when the rest of the query is found with it.

/// The index's words as the correction rule sees them.
pub(crate) trait Vocabulary {
    /// In how many documents the word occurs.
    fn doc_freq(&self, word: &str) -> u64;
    /// Words within `max_distance` edits (transpositions count one), with
    /// their document frequencies. May include `word` itself.
    fn neighbours(&self, word: &str, max_distance: u8) -> Vec<(String, u64)>;
    /// Whether some document holds `word` and all of `others`.
    fn co_occurs(&self, word: &str, others: &[&str]) -> bool;
    /// Number of pages.
    fn doc_count(&self) -> u64;
}

/// Log-frequency price of one edit.
pub(crate) const EDIT_COST: f64 = 3.9;
/// How much more frequent a candidate must be to replace a rare word.
pub(crate) const RARE_RATIO: u64 = 100;

/// The most edits a correction of `word` may make.
pub(crate) fn max_distance(word: &str) -> u8 {
    match word.chars().count() {
        0..=2 => 0,
        3..=5 => 1,
        _ => 2,
    }
}

/// Whether the rule looks at the word at all.
pub(crate) fn correctable(word: &str) -> bool {
    max_distance(word) > 0 && word.chars().all(char::is_alphabetic)
}

/// How often a word occurs, as the rule needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) doc_freq: u64,
    /// Some document holds it with the query's other words.
    pub(crate) with_the_rest: bool,
}

/// The decision rule (see the module doc): the replacement for `word`, or
/// `None` to keep it. `candidates` are (word, document frequency).
pub(crate) fn choose(
    word: &str,
    seen: Seen,
    candidates: &[(String, u64)],
    doc_count: u64,
) -> Option<String> {
    if !correctable(word) {
        return None;
    }
    let limit = if seen.doc_freq == 0 {
        max_distance(word)
    } else {
        let rare = seen.doc_freq <= (doc_count / 20_000).max(1);
        if !rare || seen.with_the_rest {
            return None;
        }
        1
    };
    let best = candidates
        .iter()
        .filter(|(c, df)| *df > 0 && c != word)
        .map(|(c, df)| (c, *df, edit_distance(word, c)))
        .filter(|(_, _, d)| (1..=u32::from(limit)).contains(d))
        .max_by(|a, b| {
            let score = |(_, df, d): &(&String, u64, u32)| {
                ((1 + df) as f64).ln() - EDIT_COST * f64::from(*d)
            };
            score(a)
                .total_cmp(&score(b))
                .then(b.2.cmp(&a.2))
                .then(b.0.cmp(a.0))
        })?;
    if seen.doc_freq > 0 && best.1 < RARE_RATIO.saturating_mul(seen.doc_freq) {
        return None;
    }
    Some(best.0.clone())
}

/// Corrections for the query's words (`None`: keep), by [`choose`]. A
/// rare word's company is the query's other words found in the index.
pub(crate) fn correct(words: &[&str], vocab: &dyn Vocabulary) -> Vec<Option<String>> {
    let doc_count = vocab.doc_count();
    let freqs: Vec<u64> = words.iter().map(|w| vocab.doc_freq(w)).collect();
    words
        .iter()
        .zip(&freqs)
        .map(|(word, &doc_freq)| {
            let rare = doc_freq <= (doc_count / 20_000).max(1);
            if !correctable(word) || (doc_freq > 0 && !rare) {
                return None;
            }
            let with_the_rest = doc_freq > 0 && {
                let others: Vec<&str> = words
                    .iter()
                    .zip(&freqs)
                    .filter(|(w, df)| *w != word && **df > 0)
                    .map(|(w, _)| *w)
                    .collect();
                !others.is_empty() && vocab.co_occurs(word, &others)
            };
            if with_the_rest {
                return None;
            }
            let seen = Seen {
                doc_freq,
                with_the_rest,
            };
            choose(
                word,
                seen,
                &vocab.neighbours(word, max_distance(word)),
                doc_count,
            )
        })
        .collect()
}

/// Optimal-string-alignment distance (Levenshtein plus adjacent
/// transpositions), over chars.
pub(crate) fn edit_distance(a: &str, b: &str) -> u32 {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0u32; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i as u32;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j as u32;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = u32::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Words with document frequencies; documents as word lists for co-occurrence.
    struct Vocab {
        df: BTreeMap<&'static str, u64>,
        docs: Vec<Vec<&'static str>>,
        pages: u64,
    }

    impl Vocabulary for Vocab {
        fn doc_freq(&self, word: &str) -> u64 {
            self.df.get(word).copied().unwrap_or(0)
        }
        fn neighbours(&self, word: &str, max_distance: u8) -> Vec<(String, u64)> {
            self.df
                .iter()
                .filter(|(w, _)| edit_distance(word, w) <= u32::from(max_distance))
                .map(|(w, df)| ((*w).to_string(), *df))
                .collect()
        }
        fn co_occurs(&self, word: &str, others: &[&str]) -> bool {
            self.docs
                .iter()
                .any(|d| d.contains(&word) && others.iter().all(|o| d.contains(o)))
        }
        fn doc_count(&self) -> u64 {
            self.pages
        }
    }

    fn vocab(df: &[(&'static str, u64)], pages: u64) -> Vocab {
        Vocab {
            df: df.iter().copied().collect(),
            docs: Vec::new(),
            pages,
        }
    }

    fn seen(doc_freq: u64) -> Seen {
        Seen {
            doc_freq,
            with_the_rest: false,
        }
    }

    fn c(list: &[(&str, u64)]) -> Vec<(String, u64)> {
        list.iter().map(|(w, df)| ((*w).to_string(), *df)).collect()
    }

    #[test]
    fn distances_count_transpositions_once() {
        assert_eq!(edit_distance("python", "pyhton"), 1);
        assert_eq!(edit_distance("bread", "bred"), 1);
        assert_eq!(edit_distance("sourdough", "sourdugh"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("été", "ete"), 2);
    }

    #[test]
    fn absent_words_take_the_best_candidate_within_the_length_limit() {
        let cands = c(&[("bread", 40), ("breed", 3), ("brad", 90)]);
        // "bred": "bread" and "brad" are one edit away; "brad" is more frequent.
        assert_eq!(choose("bred", seen(0), &cands, 1000), Some("brad".into()));
        // Short words: one edit at most ("brxxd" is two from everything).
        assert_eq!(choose("brxxd", seen(0), &cands, 1000), None);
        // Long words: two edits.
        let cands = c(&[("sourdough", 12)]);
        assert_eq!(
            choose("surdugh", seen(0), &cands, 1000),
            Some("sourdough".into())
        );
    }

    #[test]
    fn a_further_candidate_must_be_much_more_frequent() {
        let cands = c(&[("baking", 10), ("making", 400), ("taking", 600)]);
        // "bakinq": "baking" one edit; "making" and "taking" two edits, 40x
        // and 60x as frequent: only "taking" clears e^3.9 ≈ 49x.
        assert_eq!(
            choose("bakinq", seen(0), &cands, 10_000),
            Some("taking".into())
        );
        let cands = c(&[("baking", 20), ("making", 400), ("taking", 600)]);
        assert_eq!(
            choose("bakinq", seen(0), &cands, 10_000),
            Some("baking".into())
        );
    }

    #[test]
    fn short_numeric_and_non_letter_words_are_never_corrected() {
        let cands = c(&[("go", 100), ("v2", 100), ("rust", 100)]);
        assert_eq!(choose("gp", seen(0), &cands, 100), None);
        assert_eq!(choose("v3", seen(0), &cands, 100), None);
        assert_eq!(choose("rust2", seen(0), &cands, 100), None);
    }

    #[test]
    fn present_words_are_kept_unless_rare_isolated_and_dwarfed() {
        let cands = c(&[("python", 5000), ("pyhton", 1)]);
        // Rare (1 of 100,000 pages ≤ 5), alone, and 5000x rarer: corrected.
        assert_eq!(
            choose("pyhton", seen(1), &cands, 100_000),
            Some("python".into())
        );
        // Found with the rest of the query: kept.
        let with = Seen {
            doc_freq: 1,
            with_the_rest: true,
        };
        assert_eq!(choose("pyhton", with, &cands, 100_000), None);
        // Not rare: kept.
        assert_eq!(choose("pyhton", seen(50), &cands, 100_000), None);
        // The candidate is not RARE_RATIO times as frequent: kept.
        let cands = c(&[("just", 90), ("rust", 1)]);
        assert_eq!(choose("rust", seen(1), &cands, 100_000), None);
        // Present words are corrected one edit at most.
        let cands = c(&[("sourdough", 90_000)]);
        assert_eq!(choose("surdugh", seen(1), &cands, 100_000), None);
    }

    #[test]
    fn correct_keeps_correct_spellings_and_fixes_typos() {
        let v = vocab(&[("sourdough", 30), ("bread", 50), ("rye", 4)], 100);
        assert_eq!(
            correct(&["sourdough", "bread", "rye"], &v),
            [None, None, None]
        );
        assert_eq!(
            correct(&["sourdugh", "bred", "rye"], &v),
            [Some("sourdough".into()), Some("bread".into()), None]
        );
        assert_eq!(correct(&["zzzzzz"], &v), [None]);
    }

    #[test]
    fn correct_asks_whether_a_rare_word_goes_with_the_rest() {
        let mut v = vocab(&[("python", 5000), ("pyhton", 1), ("snake", 300)], 100_000);
        v.docs = vec![vec!["pyhton", "snake"]];
        assert_eq!(correct(&["pyhton", "snake"], &v), [None, None]);
        v.docs = vec![vec!["pyhton"], vec!["python", "snake"]];
        assert_eq!(
            correct(&["pyhton", "snake"], &v),
            [Some("python".into()), None]
        );
        // Words the index lacks are no company: "pyhton" is alone.
        v.docs = vec![vec!["pyhton"]];
        assert_eq!(
            correct(&["pyhton", "zzzzzz"], &v),
            [Some("python".into()), None]
        );
    }
}
