//! The results as shown: each ranked page's title, URL and snippet (the
//! window of its text holding the most different query words, with them
//! highlighted).

use super::query::{ParsedQuery, QueryAnalyzers};
use super::searchers::Searchers;
use super::{SearchError, SearchHit, err, on_two_threads, truncate};
use std::collections::BTreeMap;
use std::ops::Range;
use tantivy::schema::{Field, TantivyDocument, Value};
use tantivy::snippet::SnippetGenerator;
use tantivy::{DocAddress, Term};

/// Snippets are looked for in the first this-many bytes of the body, and
/// only those are stored (`body_start`).
pub(super) const SNIPPET_SCAN_BYTES: usize = 24 * 1024;

const SNIPPET_CHARS: usize = 200;

impl Searchers<'_> {
    /// Title, URL and snippet of the ranked pages.
    pub(super) fn hits(
        &self,
        q: &ParsedQuery,
        ranked: &[(f32, DocAddress)],
        analyzers: &mut QueryAnalyzers,
    ) -> Result<Vec<SearchHit>, SearchError> {
        if ranked.is_empty() {
            return Ok(Vec::new());
        }
        let pf = self.pf;
        let mut terms = BTreeMap::new();
        for t in q.terms() {
            let df = self
                .pages
                .doc_freq(&Term::from_field_text(pf.body, t))
                .map_err(err("read"))?;
            if df > 0 {
                terms.insert(t.to_string(), 1.0 / (1.0 + df as f32));
            }
        }
        // One fragment over the scanned text: every match, to choose from.
        let generator = SnippetGenerator::new(
            terms,
            analyzers.english.clone(),
            pf.body,
            SNIPPET_SCAN_BYTES,
        );
        // Reading a stored page and cutting its snippet: ten at once on two threads.
        on_two_threads(ranked.len(), |k| {
            let (score, addr) = &ranked[k];
            let doc: TantivyDocument = self.pages.doc(*addr).map_err(err("read a page"))?;
            let text = |f: Field| {
                doc.get_first(f)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let body = text(pf.body_start.unwrap_or(pf.body));
            let scan = truncate(&body, SNIPPET_SCAN_BYTES);
            let found = generator.snippet(scan);
            let at = found.fragment_range().start;
            let marks: Vec<Range<usize>> = found
                .highlighted()
                .iter()
                .map(|r| r.start + at..r.end + at)
                .collect();
            let (snippet, highlights) = if marks.is_empty() {
                (truncate_chars(&body, SNIPPET_CHARS), Vec::new())
            } else {
                let w = snippet_window(scan, &marks, SNIPPET_CHARS);
                let inside = marks
                    .iter()
                    .filter(|m| m.start >= w.start && m.end <= w.end)
                    .map(|m| m.start - w.start..m.end - w.start)
                    .collect();
                (scan[w].to_string(), inside)
            };
            let (snippet, highlights) = collapse_whitespace(&snippet, &highlights);
            Ok(SearchHit {
                url: text(pf.url),
                title: collapse_whitespace(&text(pf.title), &[]).0,
                snippet,
                score: *score,
                highlights,
            })
        })
        .into_iter()
        .collect()
    }
}

/// The part of `text` (about `max` bytes, cut at words) to show: the
/// window holding the most different matched words (`marks`, sorted), then
/// the tightest such, the earliest on ties; a third of the spare room
/// before the first match, the rest after.
fn snippet_window(text: &str, marks: &[Range<usize>], max: usize) -> Range<usize> {
    let mut best = (0, std::cmp::Reverse(usize::MAX), 0..0);
    for (i, m) in marks.iter().enumerate() {
        let inside: Vec<&Range<usize>> = marks[i..]
            .iter()
            .take_while(|r| r.end <= m.start + max)
            .collect();
        let mut words: Vec<String> = inside
            .iter()
            .map(|r| text[(*r).clone()].to_lowercase())
            .collect();
        words.sort_unstable();
        words.dedup();
        let last = inside.last().map_or(m.end, |r| r.end);
        // The tightest span holding these words ends at the first mark
        // completing them.
        let mut seen: Vec<String> = Vec::new();
        let mut end = last;
        for r in &inside {
            let w = text[(*r).clone()].to_lowercase();
            if !seen.contains(&w) {
                seen.push(w);
                if seen.len() == words.len() {
                    end = r.end;
                    break;
                }
            }
        }
        let key = (words.len(), std::cmp::Reverse(end - m.start));
        if (key.0, key.1) > (best.0, best.1) {
            best = (key.0, key.1, m.start..end);
        }
    }
    let (first, last) = (best.2.start, best.2.end);
    let lead = max.saturating_sub(last - first) / 3;
    let mut start = first.saturating_sub(lead);
    if start + max > text.len() {
        // Near the end: use the room before instead.
        start = text.len().saturating_sub(max).min(first);
    }
    start = text.ceil_char_boundary(start);
    if start > 0 {
        // Begin at a word: after the first whitespace, if before the match.
        if let Some(ws) = text[start..first].find(char::is_whitespace) {
            start += ws + 1;
        } else if !text[..start].ends_with(char::is_whitespace) {
            start = first;
        }
    }
    let mut end = text.floor_char_boundary((start + max).min(text.len()).max(last));
    if end < text.len()
        && let Some(ws) = text[last..end].rfind(char::is_whitespace)
    {
        end = last + ws;
    }
    start..end
}

/// The first `max` chars of `text`, cut at a word boundary when there is one.
fn truncate_chars(text: &str, max: usize) -> String {
    let text = text.trim_start();
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => {
            let cut = text[..end].rfind(char::is_whitespace).unwrap_or(end);
            text[..cut].to_string()
        }
    }
}

/// `text` with runs of whitespace (and control characters) made one space
/// and ends trimmed; `ranges` (byte ranges of `text`) mapped onto it.
fn collapse_whitespace(text: &str, ranges: &[Range<usize>]) -> (String, Vec<Range<usize>>) {
    let mut out = String::with_capacity(text.len());
    // map[i]: position in `out` of byte i of `text` (and of its end).
    let mut map = vec![0usize; text.len() + 1];
    let mut pending_space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() || c.is_control() {
            pending_space = !out.is_empty();
        } else {
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            map[i..i + c.len_utf8()].fill(out.len());
            out.push(c);
            map[i + c.len_utf8()] = out.len();
            continue;
        }
        map[i..i + c.len_utf8()].fill(out.len());
        map[i + c.len_utf8()] = out.len();
    }
    let ranges = ranges
        .iter()
        .filter(|r| r.end <= text.len() && r.start < r.end)
        .map(|r| map[r.start]..map[r.end].max(map[r.start]))
        .filter(|r| r.start < r.end)
        .collect();
    (out, ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapse_whitespace_maps_highlights() {
        let text = "  bake\n\n the   bread\t";
        let (out, ranges) = collapse_whitespace(text, &[2..6, 15..20]);
        assert_eq!(out, "bake the bread");
        let marked: Vec<&str> = ranges.iter().map(|r| &out[r.clone()]).collect();
        assert_eq!(marked, ["bake", "bread"]);
        assert_eq!(collapse_whitespace("", &[]).0, "");
        let (out, ranges) = collapse_whitespace("é  ü", &[0..2, 4..6]);
        assert_eq!(out, "é ü");
        assert_eq!(ranges, [0..2, 3..5]);
    }

    #[test]
    fn the_snippet_window_holds_the_most_different_matches() {
        let text =
            "bread here. ".repeat(30) + "then the starter and the bread, then more filler words";
        let starter = text.find("starter").unwrap();
        let bread = text.rfind("bread").unwrap();
        let mut marks: Vec<Range<usize>> = text
            .match_indices("bread")
            .map(|(i, w)| i..i + w.len())
            .collect();
        marks.push(starter..starter + 7);
        marks.sort_by_key(|r| r.start);
        let w = snippet_window(&text, &marks, 60);
        assert!(
            w.start <= starter && bread + 5 <= w.end,
            "{:?}",
            &text[w.clone()]
        );
        assert!(w.end - w.start <= 60);
        let shown = &text[w];
        assert!(
            !shown.starts_with(' ') && !shown.ends_with(' '),
            "{shown:?}"
        );
        // A match at the very start.
        let first = [Range { start: 0, end: 5 }];
        assert_eq!(snippet_window("bread is good", &first, 60), 0..13);
        // A short text is shown whole.
        let short = "Feed the starter, then bake the sourdough bread.";
        let at = short.find("sourdough").unwrap();
        let marks = [Range {
            start: at,
            end: at + 9,
        }];
        assert_eq!(snippet_window(short, &marks, 60), 0..short.len());
    }

    #[test]
    fn truncate_keeps_char_and_word_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
        assert_eq!(truncate_chars("one two three", 9), "one two");
        assert_eq!(truncate_chars("short", 200), "short");
    }
}
