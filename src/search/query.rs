//! Query parsing: words and quoted phrases, checked before any index work.
//!
//! Pure over the two analyzers (no index): a query is cut into free text
//! and `"quoted phrases"` (straight or curly quotes), each cut into words;
//! every word keeps its byte span (to write `did_you_mean`), its surface
//! form (for spelling) and its index term (stemmed; `None` for a stop word).
//! Words are all the query syntax there is: `+`, `-`, `:` and brackets are
//! punctuation, so no query is a syntax error except an unclosed quote.

use super::QueryError;
use std::ops::Range;
use tantivy::tokenizer::TextAnalyzer;

/// Longer queries are refused ([`QueryError::TooLong`]): no one types
/// them, and each term costs index work.
pub(crate) const MAX_QUERY_BYTES: usize = 1024;
/// At most this many distinct terms ([`QueryError::TooManyTerms`]).
pub(crate) const MAX_TERMS: usize = 32;

/// One word of the query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word {
    /// Byte range in the query text.
    pub(crate) span: Range<usize>,
    /// Lower-cased, ASCII-folded surface form.
    pub(crate) text: String,
    /// The index term (stemmed); `None` for a stop word.
    pub(crate) term: Option<String>,
    /// Index among the query's words, stop words included (as in the index).
    pub(crate) position: u32,
    /// Which quoted phrase the word is in.
    pub(crate) phrase: Option<usize>,
}

/// A checked query: at least one term, at most [`MAX_TERMS`].
#[derive(Clone, Debug)]
pub(crate) struct ParsedQuery {
    pub(crate) words: Vec<Word>,
}

impl ParsedQuery {
    /// Distinct index terms, in query order.
    pub(crate) fn terms(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for t in self.words.iter().filter_map(|w| w.term.as_deref()) {
            if !out.contains(&t) {
                out.push(t);
            }
        }
        out
    }

    /// Quoted phrases of two terms or more, each as (offset from the
    /// phrase's first term, term); stop words leave gaps in the offsets,
    /// as they do in the index.
    pub(crate) fn phrases(&self) -> Vec<Vec<(usize, &str)>> {
        self.phrase_terms()
            .into_iter()
            .filter(|p| p.len() > 1)
            .collect()
    }

    /// Terms quoted alone (`"rust"`): they must occur.
    pub(crate) fn required_terms(&self) -> Vec<&str> {
        self.phrase_terms()
            .into_iter()
            .filter(|p| p.len() == 1)
            .map(|p| p[0].1)
            .collect()
    }

    /// Adjacent pairs of words that may be one word written apart ("back
    /// up" → `backup`, "data base" → `database`, "log in" → `login`): the
    /// index in `words` of the pair's first word and the two joined. Both
    /// words alphabetic, in the same quoted phrase or both unquoted, at
    /// least one a term; the joined word has at least 4 letters.
    pub(crate) fn compound_candidates(&self) -> Vec<(usize, String)> {
        self.words
            .windows(2)
            .enumerate()
            .filter(|(_, p)| {
                let alpha = |w: &Word| w.text.chars().all(char::is_alphabetic);
                p[0].phrase == p[1].phrase
                    && p[0].position + 1 == p[1].position
                    && (p[0].term.is_some() || p[1].term.is_some())
                    && alpha(&p[0])
                    && alpha(&p[1])
                    && p[0].text.chars().count() + p[1].text.chars().count() >= 4
            })
            .map(|(i, p)| (i, format!("{}{}", p[0].text, p[1].text)))
            .collect()
    }

    pub(crate) fn phrase_terms(&self) -> Vec<Vec<(usize, &str)>> {
        let count = self
            .words
            .iter()
            .filter_map(|w| w.phrase)
            .max()
            .map_or(0, |m| m + 1);
        (0..count)
            .map(|i| {
                let words: Vec<&Word> = self
                    .words
                    .iter()
                    .filter(|w| w.phrase == Some(i) && w.term.is_some())
                    .collect();
                let first = words.first().map_or(0, |w| w.position);
                words
                    .iter()
                    .map(|w| {
                        (
                            (w.position - first) as usize,
                            w.term.as_deref().unwrap_or(""),
                        )
                    })
                    .collect()
            })
            .collect()
    }
}

/// The terms a query is ranked by. The query's own distinct terms are
/// its slots (`terms[..slots]`, in query order); alternatives follow
/// (a compound of two adjacent words), each standing for the slots it
/// fills: a page holding `backup` holds both "back" and "up".
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RankTerms {
    pub(crate) terms: Vec<String>,
    /// `fills[t]`: the slots term t stands for.
    pub(crate) fills: Vec<Vec<usize>>,
    pub(crate) slots: usize,
}

impl RankTerms {
    /// The query's terms, each its own slot, no alternatives.
    pub(crate) fn of(q: &ParsedQuery) -> Self {
        let terms: Vec<String> = q.terms().into_iter().map(str::to_string).collect();
        Self {
            fills: (0..terms.len()).map(|s| vec![s]).collect(),
            slots: terms.len(),
            terms,
        }
    }

    /// Add `term` (an index term) as an alternative for the query words
    /// `words[first]` and `words[first + 1]`; nothing if it is one of the
    /// terms already or stands for no slot (both words stop words).
    pub(crate) fn add_compound(&mut self, q: &ParsedQuery, first: usize, term: String) {
        if self.terms.contains(&term) {
            return;
        }
        let fills: Vec<usize> = q.words[first..first + 2]
            .iter()
            .filter_map(|w| {
                let t = w.term.as_deref()?;
                self.terms[..self.slots].iter().position(|s| s == t)
            })
            .collect();
        if !fills.is_empty() {
            self.terms.push(term);
            self.fills.push(fills);
        }
    }

    pub(crate) fn as_strs(&self) -> Vec<&str> {
        self.terms.iter().map(String::as_str).collect()
    }

    /// Which slots are held, given which terms are (`held[t]`).
    pub(crate) fn held_slots(&self, held: impl Fn(usize) -> bool) -> Vec<bool> {
        let mut out = vec![false; self.slots];
        for (t, fills) in self.fills.iter().enumerate() {
            if held(t) {
                for &s in fills {
                    out[s] = true;
                }
            }
        }
        out
    }

    /// Per slot, the positions of the terms standing for it (`of[t]`), sorted.
    pub(crate) fn slot_positions(&self, of: &[Vec<u32>]) -> Vec<Vec<u32>> {
        let mut out = vec![Vec::new(); self.slots];
        for (t, fills) in self.fills.iter().enumerate() {
            for &s in fills {
                out[s].extend_from_slice(&of[t]);
            }
        }
        for p in &mut out {
            p.sort_unstable();
            p.dedup();
        }
        out
    }
}

/// The analyzers a query is cut with: the index's word tokenizer and its
/// English analyzer (see `schema`).
#[derive(Clone)]
pub(crate) struct QueryAnalyzers {
    pub(crate) words: TextAnalyzer,
    pub(crate) english: TextAnalyzer,
}

impl QueryAnalyzers {
    pub(crate) fn new() -> Self {
        Self {
            words: super::schema::words_analyzer(),
            english: super::schema::english_analyzer(),
        }
    }

    /// The index term of one word, `None` for a stop word.
    pub(crate) fn term(&mut self, word: &str) -> Option<String> {
        let mut stream = self.english.token_stream(word);
        stream.next().map(|t| t.text.clone())
    }
}

fn is_quote(c: char) -> bool {
    matches!(c, '"' | '\u{201C}' | '\u{201D}' | '\u{201E}')
}

/// Parse and check a query.
pub(crate) fn parse(query: &str, an: &mut QueryAnalyzers) -> Result<ParsedQuery, QueryError> {
    if query.trim().is_empty() {
        return Err(QueryError::Empty);
    }
    if query.len() > MAX_QUERY_BYTES {
        return Err(QueryError::TooLong {
            len: query.len(),
            max: MAX_QUERY_BYTES,
        });
    }
    // Free-text and quoted segments, as byte ranges.
    let mut segments: Vec<(Range<usize>, bool)> = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, c) in query.char_indices().filter(|(_, c)| is_quote(*c)) {
        segments.push((start..i, quoted));
        quoted = !quoted;
        start = i + c.len_utf8();
    }
    if quoted {
        return Err(QueryError::UnbalancedQuote);
    }
    segments.push((start..query.len(), false));

    let mut words = Vec::new();
    let mut phrases = 0;
    for (range, is_phrase) in segments {
        let phrase = is_phrase.then(|| {
            phrases += 1;
            phrases - 1
        });
        let mut found = Vec::new();
        {
            let mut stream = an.words.token_stream(&query[range.clone()]);
            while let Some(t) = stream.next() {
                found.push((
                    range.start + t.offset_from..range.start + t.offset_to,
                    t.text.clone(),
                ));
            }
        }
        for (span, text) in found {
            let term = an.term(&text);
            let position = words.len() as u32;
            words.push(Word {
                span,
                text,
                term,
                position,
                phrase,
            });
        }
    }
    if words.is_empty() {
        return Err(QueryError::Empty);
    }
    let parsed = ParsedQuery { words };
    let terms = parsed.terms().len();
    if terms == 0 {
        return Err(QueryError::OnlyStopWords);
    }
    if terms > MAX_TERMS {
        return Err(QueryError::TooManyTerms {
            count: terms,
            max: MAX_TERMS,
        });
    }
    Ok(parsed)
}

/// `query` with the byte ranges replaced (ranges sorted, not overlapping).
pub(crate) fn replace_spans(query: &str, replacements: &[(Range<usize>, String)]) -> String {
    let mut out = String::with_capacity(query.len() + 8);
    let mut at = 0;
    for (span, with) in replacements {
        out.push_str(&query[at..span.start]);
        out.push_str(with);
        at = span.end;
    }
    out.push_str(&query[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(q: &str) -> Result<ParsedQuery, QueryError> {
        parse(q, &mut QueryAnalyzers::new())
    }

    #[test]
    fn words_get_stems_positions_and_spans() {
        let q = parse_str("How to BAKE breads").unwrap();
        assert_eq!(q.terms(), ["bake", "bread"]);
        let bake = &q.words[2];
        assert_eq!((bake.text.as_str(), bake.position), ("bake", 2));
        assert_eq!(&"How to BAKE breads"[bake.span.clone()], "BAKE");
        assert_eq!(q.words[0].term, None, "'how' is a stop word");
        assert!(q.phrases().is_empty());
    }

    #[test]
    fn quoted_phrases_keep_stop_word_gaps() {
        let q = parse_str(r#"recipe "bake the bread" “rye”"#).unwrap();
        assert_eq!(q.phrases(), vec![vec![(0, "bake"), (2, "bread")]]);
        assert_eq!(q.required_terms(), ["rye"]);
        assert_eq!(q.terms(), ["recip", "bake", "bread", "rye"]);
    }

    #[test]
    fn duplicate_terms_count_once() {
        assert_eq!(parse_str("bread Bread breads").unwrap().terms(), ["bread"]);
    }

    #[test]
    fn bad_queries_are_typed_errors() {
        assert_eq!(parse_str("").unwrap_err(), QueryError::Empty);
        assert_eq!(parse_str("  \t\n").unwrap_err(), QueryError::Empty);
        assert_eq!(parse_str("!!! ??? --").unwrap_err(), QueryError::Empty);
        assert_eq!(parse_str(r#""""#).unwrap_err(), QueryError::Empty);
        assert_eq!(
            parse_str("how to do it").unwrap_err(),
            QueryError::OnlyStopWords
        );
        assert_eq!(
            parse_str(r#"bake "the bread"#).unwrap_err(),
            QueryError::UnbalancedQuote
        );
        let huge = "bread ".repeat(10 * 1024 / 6);
        assert!(matches!(
            parse_str(&huge).unwrap_err(),
            QueryError::TooLong {
                max: MAX_QUERY_BYTES,
                ..
            }
        ));
        let many: String = (0..40).map(|i| format!("w{i} ")).collect();
        assert!(matches!(
            parse_str(&many).unwrap_err(),
            QueryError::TooManyTerms { count: 40, .. }
        ));
    }

    #[test]
    fn a_phrase_of_stop_words_beside_terms_is_dropped() {
        let q = parse_str(r#"hamlet "to be or not to be""#).unwrap();
        assert_eq!(q.terms(), ["hamlet"]);
        assert!(q.phrases().is_empty());
        assert!(q.required_terms().is_empty());
    }

    #[test]
    fn syntax_characters_are_punctuation() {
        let q = parse_str("title:rust +fast -slow (c++)").unwrap();
        assert_eq!(q.terms(), ["titl", "rust", "fast", "slow", "c"]);
    }

    #[test]
    fn adjacent_words_are_compound_candidates() {
        let q = parse_str(r#"how to back up a data base "log in" x1 y"#).unwrap();
        let found: Vec<String> = q
            .compound_candidates()
            .into_iter()
            .map(|(_, c)| c)
            .collect();
        // Not "howto" (two stop words), "upa" (3 letters), "baselog" (across
        // a quote), "x1y" (a digit).
        assert_eq!(found, ["toback", "backup", "adata", "database", "login"]);
    }

    #[test]
    fn a_compound_stands_for_the_slots_of_its_words() {
        let mut an = QueryAnalyzers::new();
        let q = parse("back up one table", &mut an).unwrap();
        let mut rt = RankTerms::of(&q);
        assert_eq!(rt.as_strs(), ["back", "up", "one", "tabl"]);
        rt.add_compound(&q, 0, "backup".into());
        rt.add_compound(&q, 1, "tabl".into()); // already a term: ignored
        assert_eq!(rt.as_strs(), ["back", "up", "one", "tabl", "backup"]);
        assert_eq!(rt.fills[4], [0, 1]);
        assert_eq!(rt.slots, 4);
        // A page with "backup" and "table" holds slots 0, 1 and 3.
        let held = rt.held_slots(|t| t == 4 || t == 3);
        assert_eq!(held, [true, true, false, true]);
        let pos = rt.slot_positions(&[vec![9], vec![], vec![], vec![5], vec![4, 2]]);
        assert_eq!(pos, [vec![2, 4, 9], vec![2, 4], vec![], vec![5]]);
        // A compound of two stop words stands for nothing.
        let q = parse("bake in to it", &mut an).unwrap();
        let mut rt = RankTerms::of(&q);
        rt.add_compound(&q, 1, "into".into());
        assert_eq!(rt.as_strs(), ["bake"]);
    }

    #[test]
    fn replace_spans_rewrites_only_the_spans() {
        let q = "Sourdugh \"rye bred\"";
        let out = replace_spans(q, &[(0..8, "sourdough".into()), (14..18, "bread".into())]);
        assert_eq!(out, "sourdough \"rye bread\"");
        assert_eq!(replace_spans(q, &[]), q);
    }
}

#[cfg(test)]
mod proptests;
