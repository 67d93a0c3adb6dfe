//! A page's outline: where the sections of its own text start (headings
//! `h1`–`h4`, and `<section>`s with an `id`), each with the fragment that
//! links to it. Recorded as the tokens stream by, as offsets into the
//! visible text, then mapped onto the page's own text (the content blocks
//! `boilerplate` keeps): a heading in the site's chrome starts no section.

use web_crawler_actors::SectionStart;

/// Headings down to this level start sections: `h5` and `h6` head
/// paragraphs more than parts a reader is sent to.
const SECTION_LEVELS: u8 = 4;

/// Section starts, as read so far.
#[derive(Debug, Default)]
pub(super) struct Outline {
    starts: Vec<Start>,
    /// The last `id` (or `<a name>`) seen: the nearest anchor before
    /// what comes next.
    last_anchor: String,
    /// The last start is a heading whose text is still being read.
    heading_open: bool,
}

#[derive(Debug)]
struct Start {
    /// Visible text's length where the section starts, and where its
    /// heading's text ends.
    at: usize,
    heading_end: usize,
    level: u8,
    heading: String,
    anchor: String,
    /// `anchor` is the section's own `id` (its heading's or its
    /// `<section>`'s), not one before it.
    own: bool,
}

/// A part of the visible text that the page's own text holds: `len`
/// bytes from `visible` in the one, from `own` in the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Kept {
    pub(super) visible: usize,
    pub(super) own: usize,
    pub(super) len: usize,
}

impl Outline {
    /// An element with this `id` (or an `<a name>`) opened.
    pub(super) fn anchor(&mut self, id: &str) {
        let id = id.trim();
        if id.is_empty() {
            return;
        }
        // `<h2><a id="x"></a>Title</h2>`: the heading's own.
        if self.heading_open
            && let Some(start) = self.starts.last_mut()
            && !start.own
        {
            start.anchor = id.to_string();
            start.own = true;
        }
        self.last_anchor.clear();
        self.last_anchor.push_str(id);
    }

    /// A `<section id>` opened where the visible text is `at` bytes long.
    pub(super) fn section(&mut self, at: usize, id: &str) {
        let id = id.trim();
        if id.is_empty() {
            return;
        }
        // A `<section>` directly inside another with no text between:
        // the inner one is where the reader is sent.
        if let Some(last) = self.starts.last_mut()
            && last.at == at
            && last.level == 0
        {
            last.anchor = id.to_string();
        } else {
            self.starts.push(Start {
                at,
                heading_end: at,
                level: 0,
                heading: String::new(),
                anchor: id.to_string(),
                own: true,
            });
        }
        self.last_anchor.clear();
        self.last_anchor.push_str(id);
    }

    /// A heading `h<level>` opened where the visible text is `at` bytes
    /// long, with its own `id` if it has one.
    pub(super) fn open_heading(&mut self, at: usize, level: u8, id: Option<&str>) {
        let id = id.map(str::trim).filter(|id| !id.is_empty());
        if !(1..=SECTION_LEVELS).contains(&level) {
            // An `h5`'s id is still an anchor a later section may take.
            if let Some(id) = id {
                self.anchor(id);
            }
            return;
        }
        match self.starts.last_mut() {
            // The heading of a `<section id>` with no text before it.
            Some(last) if last.level == 0 && last.at == at => {
                last.level = level;
                if let Some(id) = id {
                    id.clone_into(&mut last.anchor);
                }
            }
            _ => self.starts.push(Start {
                at,
                heading_end: at,
                level,
                heading: String::new(),
                anchor: id.unwrap_or(&self.last_anchor).to_string(),
                own: id.is_some(),
            }),
        }
        if let Some(id) = id {
            self.last_anchor.clear();
            self.last_anchor.push_str(id);
        }
        self.heading_open = true;
    }

    /// The open heading (if any) ended with this text, where the visible
    /// text is `end` bytes long.
    pub(super) fn close_heading(&mut self, text: &str, end: usize) {
        if !std::mem::take(&mut self.heading_open) {
            return;
        }
        if let Some(start) = self.starts.last_mut() {
            let text = without_permalink(text);
            text.clone_into(&mut start.heading);
            start.heading_end = end;
            if text.is_empty() {
                // An empty heading heads nothing; its `<section id>`, if
                // any, still starts a section.
                start.level = 0;
            }
        }
    }

    /// The sections of the page's own text, given which parts of the
    /// visible text it kept (in order): a section is kept when its
    /// heading's text is (a `<section>` without a heading: when any of its
    /// text is), at the offset its start maps to.
    pub(super) fn sections(mut self, kept: &[Kept]) -> Vec<SectionStart> {
        let mut out = Vec::with_capacity(self.starts.len());
        for i in 0..self.starts.len() {
            let next_at = self.starts.get(i + 1).map_or(usize::MAX, |next| next.at);
            let start = &mut self.starts[i];
            if start.level == 0 && !start.own {
                continue;
            }
            let until = if start.level == 0 {
                next_at
            } else {
                start.heading_end
            };
            // The kept parts are in order and apart: the first ending past
            // the start is the only one that can hold it (a binary search,
            // not a scan a section: a long page has hundreds of each).
            let first = kept.partition_point(|k| k.visible + k.len <= start.at);
            let Some(part) = kept
                .get(first)
                .filter(|k| k.visible < until.max(start.at + 1))
            else {
                continue;
            };
            let into = start.at.saturating_sub(part.visible).min(part.len);
            let Ok(offset) = u32::try_from(part.own + into) else {
                break;
            };
            out.push(SectionStart {
                offset,
                level: start.level,
                // Each start is read once: its strings move.
                heading: std::mem::take(&mut start.heading),
                anchor: std::mem::take(&mut start.anchor),
            });
        }
        out
    }
}

/// A heading's text without the permalink sign documentation generators
/// put at its end (Sphinx's and MkDocs' `¶`, `§`, a zero-width space, or
/// a `#` apart from the words: "C#" is a heading).
fn without_permalink(heading: &str) -> &str {
    let text = heading
        .trim_end_matches(|c: char| matches!(c, '¶' | '§' | '\u{200b}') || c.is_whitespace());
    match text.strip_suffix(" #") {
        Some(rest) => rest.trim_end(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_kept(len: usize) -> Vec<Kept> {
        vec![Kept {
            visible: 0,
            own: 0,
            len,
        }]
    }

    /// `o`'s sections over a text of `len` kept bytes are `want`, each as
    /// (offset, level, heading, anchor).
    fn assert_sections(o: Outline, len: usize, want: &[(u32, u8, &str, &str)]) {
        let s = o.sections(&all_kept(len));
        let got: Vec<(u32, u8, &str, &str)> = s
            .iter()
            .map(|s| (s.offset, s.level, s.heading.as_str(), s.anchor.as_str()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn headings_take_their_own_id_or_the_nearest_before() {
        let mut o = Outline::default();
        o.anchor("FUNCTIONS-CASE");
        o.open_heading(10, 3, None);
        o.close_heading("9.18.1. CASE", 22);
        o.open_heading(100, 3, Some("coalesce"));
        o.close_heading("COALESCE", 108);
        o.open_heading(200, 2, None);
        o.anchor("inner");
        o.close_heading("Inner anchor", 212);
        assert_sections(
            o,
            300,
            &[
                (10, 3, "9.18.1. CASE", "FUNCTIONS-CASE"),
                (100, 3, "COALESCE", "coalesce"),
                (200, 2, "Inner anchor", "inner"),
            ],
        );
    }

    #[test]
    fn permalink_signs_are_not_part_of_a_heading() {
        assert_eq!(without_permalink("Dialects¶"), "Dialects");
        assert_eq!(without_permalink("Usage #"), "Usage");
        assert_eq!(without_permalink("Setup\u{200b}"), "Setup");
        assert_eq!(without_permalink("C#"), "C#");
        assert_eq!(without_permalink("9.18.2. COALESCE"), "9.18.2. COALESCE");
    }

    #[test]
    fn a_section_id_joins_the_heading_it_opens_with() {
        let mut o = Outline::default();
        o.section(0, "intro");
        o.open_heading(0, 2, None);
        o.close_heading("Intro", 5);
        // A section with no heading of its own, then one whose heading has
        // an id of its own.
        o.section(50, "bare");
        o.section(90, "outer");
        o.open_heading(90, 3, Some("own"));
        o.close_heading("Own", 93);
        // Headings below h4 start nothing (their ids are anchors still);
        // an empty one heads nothing.
        o.open_heading(120, 5, Some("h5"));
        o.close_heading("Small", 125);
        o.open_heading(130, 2, None);
        o.close_heading("", 130);
        o.open_heading(140, 3, None);
        o.close_heading("After the h5", 152);
        assert_sections(
            o,
            200,
            &[
                (0, 2, "Intro", "intro"),
                (50, 0, "", "bare"),
                (90, 3, "Own", "own"),
                (140, 3, "After the h5", "h5"),
            ],
        );
    }

    #[test]
    fn only_headings_of_the_kept_text_start_sections_at_their_offsets_there() {
        let mut o = Outline::default();
        // A sidebar's heading (not kept), then two in the content.
        o.open_heading(0, 3, Some("nav"));
        o.close_heading("Navigation", 10);
        o.open_heading(40, 2, Some("a"));
        o.close_heading("First", 45);
        o.open_heading(80, 2, Some("b"));
        o.close_heading("Second", 86);
        // The content is visible bytes 40..70 and 80..120, kept at 0 and 31.
        let kept = [
            Kept {
                visible: 40,
                own: 0,
                len: 30,
            },
            Kept {
                visible: 80,
                own: 31,
                len: 40,
            },
        ];
        let s = o.sections(&kept);
        let got: Vec<(u32, &str)> = s.iter().map(|s| (s.offset, s.anchor.as_str())).collect();
        assert_eq!(got, [(0, "a"), (31, "b")]);
        // Nothing kept: no sections.
        let mut o = Outline::default();
        o.open_heading(0, 1, None);
        o.close_heading("Alone", 5);
        assert!(o.sections(&[]).is_empty());
    }
}
