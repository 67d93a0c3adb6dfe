//! The results as shown: each ranked page's title, URL and snippet (the
//! window of its text holding the most different query words, with them
//! highlighted), and for a page with headings the section the snippet is
//! from, as a link and a heading path.

use super::candidates::{Ranked, RankedPage};
use super::query::{ParsedQuery, QueryAnalyzers};
use super::searchers::Searchers;
use super::sections::{self, OutlineEntry};
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

/// A ranked page to show.
pub(super) struct Shown {
    pub(super) score: f32,
    pub(super) addr: DocAddress,
    /// Its section that best holds the query (see `sections`); `None`:
    /// the one its snippet over the whole page falls in.
    pub(super) section: Option<usize>,
}

impl Shown {
    pub(super) fn of(page: &RankedPage) -> Self {
        Self {
            score: page.score,
            addr: page.addr,
            section: page.section,
        }
    }

    /// Every ranked page, best first.
    pub(super) fn all(ranked: &Ranked) -> Vec<Self> {
        ranked.pages.iter().map(Self::of).collect()
    }
}

impl Searchers<'_> {
    /// Title, URL, snippet and section of the ranked pages.
    pub(super) fn hits(
        &self,
        q: &ParsedQuery,
        ranked: &[Shown],
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
            let shown = &ranked[k];
            let doc: TantivyDocument = self.pages.doc(shown.addr).map_err(err("read a page"))?;
            let text = |f: Field| {
                doc.get_first(f)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let url = text(pf.url);
            let body = text(pf.body_start.unwrap_or(pf.body));
            let scan = truncate(&body, SNIPPET_SCAN_BYTES);
            // A damaged outline costs the result its section, not its page.
            let outline: Vec<OutlineEntry> = pf
                .outline
                .and_then(|f| doc.get_first(f))
                .and_then(|v| v.as_bytes())
                .and_then(|packed| sections::unpack_outline(packed).ok())
                .unwrap_or_default();
            let cut = |text: &str| {
                let found = generator.snippet(text);
                let at = found.fragment_range().start;
                let marks: Vec<Range<usize>> = found
                    .highlighted()
                    .iter()
                    .map(|r| r.start + at..r.end + at)
                    .collect();
                if marks.is_empty() {
                    return (truncate_chars(text, SNIPPET_CHARS), Vec::new(), None);
                }
                let w = snippet_window(text, &marks, SNIPPET_CHARS);
                let inside = marks
                    .iter()
                    .filter(|m| m.start >= w.start && m.end <= w.end)
                    .map(|m| m.start - w.start..m.end - w.start)
                    .collect();
                // Where the shown matches start: the window may open in
                // the section before.
                let first = marks.iter().find(|m| m.start >= w.start).map(|m| m.start);
                (text[w].to_string(), inside, first)
            };
            let (snippet, highlights, section) = match shown.section {
                _ if outline.is_empty() => {
                    let (snippet, highlights, _) = cut(scan);
                    (snippet, highlights, None)
                }
                Some(i) => {
                    let (snippet, highlights, _) = cut(section_text(scan, &outline, i));
                    (snippet, highlights, Some(i))
                }
                None => {
                    let (snippet, highlights, at) = cut(scan);
                    let at = at.unwrap_or(0);
                    let i = outline.iter().filter(|e| e.offset as usize <= at).count();
                    (snippet, highlights, Some(i))
                }
            };
            let (section_url, heading_path) = match section {
                Some(i) if i > 0 => (
                    Some(sections::section_url(&url, &outline[i - 1].anchor)),
                    sections::heading_path(
                        outline.iter().map(|e| (e.level, e.heading.as_str())),
                        i - 1,
                    )
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
                ),
                Some(_) => (Some(url.clone()), Vec::new()),
                None => (None, Vec::new()),
            };
            let (snippet, highlights) = collapse_whitespace(&snippet, &highlights);
            Ok(SearchHit {
                url,
                title: collapse_whitespace(&text(pf.title), &[]).0,
                snippet,
                score: shown.score,
                highlights,
                section_url,
                heading_path,
            })
        })
        .into_iter()
        .collect()
    }
}

/// The text of section `i` of a page (0: its lead; `i` ≥ 1: outline
/// entry `i - 1`'s) out of the stored start of its body, `scan`, or the
/// opening the outline keeps of a section beyond it.
fn section_text<'t>(scan: &'t str, outline: &'t [OutlineEntry], i: usize) -> &'t str {
    let start = match i {
        0 => 0,
        i => outline.get(i - 1).map_or(scan.len(), |e| e.offset as usize),
    };
    let end = outline
        .get(i)
        .map_or(scan.len(), |e| (e.offset as usize).min(scan.len()));
    match outline.get(i.wrapping_sub(1)) {
        Some(entry) if start >= scan.len() => &entry.opening,
        _ if start < end => &scan[start..end],
        _ => "",
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
