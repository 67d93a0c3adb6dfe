//! A page's sections: the parts of its text between its headings (see
//! `extract::outline`), what a long page is ranked by and linked to, a
//! part at a time. A question's words meet in one section of a reference
//! page that covers twenty things; over the whole page they are spread
//! thin.
//!
//! The index keeps two things of a page with sections: where each starts
//! as a word position of the body (a fast field, [`pack_starts`]), so a
//! query measures each section from the body's postings it reads anyway;
//! and the outline (stored, packed by [`pack_outline`]), read for the
//! results shown: their headings, anchors, and the opening of each
//! section beyond the stored start of the body, for its snippet. Both are
//! made in passes the page's indexing has anyway: the positions while its
//! words are counted (`word_count::body_words`), the outline as bytes
//! copied from the page's own strings.
//!
//! Section 0 is the text before the first heading (the page's lead);
//! section `i` ≥ 1 starts at outline entry `i - 1`.

use super::SectionStart;
use std::ops::Range;

/// Bytes of a section's opening kept in the outline when the section
/// starts beyond the body's stored start (its snippet comes from there):
/// a snippet's length.
pub(super) const OPENING_BYTES: usize = 200;

/// One section in a page's stored outline, as read back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct OutlineEntry {
    /// Byte offset in the body.
    pub(super) offset: u32,
    pub(super) level: u8,
    pub(super) heading: String,
    pub(super) anchor: String,
    /// The section's first [`OPENING_BYTES`], when the stored start of the
    /// body does not hold it.
    pub(super) opening: String,
}

/// A stored outline that does not read back (a damaged index).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a page's stored outline ends inside an entry, or holds a string that is not UTF-8")]
pub(super) struct DamagedOutline;

/// The sections of `body` that start inside it (a body cut by the index's
/// limit loses those past the cut).
pub(super) fn inside<'s>(body: &str, sections: &'s [SectionStart]) -> Vec<&'s SectionStart> {
    sections
        .iter()
        .filter(|s| (s.offset as usize) < body.len() && body.is_char_boundary(s.offset as usize))
        .collect()
}

/// The outline of `body`'s sections (from [`inside`]) as stored: for each,
/// its offset (a varint), its level (a byte), then its heading, its anchor
/// and its opening (each a varint length and the bytes; the opening is
/// empty unless the section starts at or past `stored`, the bytes of the
/// body stored for snippets). A few bytes a section besides its strings.
pub(super) fn pack_outline(body: &str, sections: &[&SectionStart], stored: usize) -> Vec<u8> {
    let strings: usize = sections
        .iter()
        .map(|s| s.heading.len() + s.anchor.len())
        .sum();
    let mut out = Vec::with_capacity(strings + 8 * sections.len());
    for (i, s) in sections.iter().enumerate() {
        let at = s.offset as usize;
        let opening = if at >= stored {
            let end = sections
                .get(i + 1)
                .map_or(body.len(), |n| n.offset as usize);
            let text = &body[at..end.max(at)];
            &text[..text.floor_char_boundary(OPENING_BYTES)]
        } else {
            ""
        };
        push_varint(&mut out, s.offset);
        out.push(s.level);
        for text in [s.heading.as_str(), s.anchor.as_str(), opening] {
            push_varint(&mut out, u32::try_from(text.len()).unwrap_or(u32::MAX));
            out.extend_from_slice(text.as_bytes());
        }
    }
    out
}

/// The entries [`pack_outline`] packed.
pub(super) fn unpack_outline(mut bytes: &[u8]) -> Result<Vec<OutlineEntry>, DamagedOutline> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let offset = take_varint(&mut bytes)?;
        let (&level, rest) = bytes.split_first().ok_or(DamagedOutline)?;
        bytes = rest;
        let heading = take_string(&mut bytes)?;
        let anchor = take_string(&mut bytes)?;
        let opening = take_string(&mut bytes)?;
        out.push(OutlineEntry {
            offset,
            level,
            heading,
            anchor,
            opening,
        });
    }
    Ok(out)
}

/// LEB128: seven bits a byte, the low ones first, the high bit set on
/// all bytes but the last.
fn push_varint(out: &mut Vec<u8>, mut n: u32) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn take_varint(bytes: &mut &[u8]) -> Result<u32, DamagedOutline> {
    let mut n = 0u32;
    for shift in (0..35).step_by(7) {
        let (&b, rest) = bytes.split_first().ok_or(DamagedOutline)?;
        *bytes = rest;
        // A fifth byte's bits past 32 are lost: only damage makes them.
        n |= u32::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(n);
        }
    }
    Err(DamagedOutline)
}

fn take_string(bytes: &mut &[u8]) -> Result<String, DamagedOutline> {
    let len = take_varint(bytes)? as usize;
    if len > bytes.len() {
        return Err(DamagedOutline);
    }
    let (text, rest) = bytes.split_at(len);
    *bytes = rest;
    String::from_utf8(text.to_vec()).map_err(|_| DamagedOutline)
}

/// The sections' word positions (`word_count::body_words`) as the fast
/// field holds them.
pub(super) fn pack_starts(positions: &[u32]) -> Vec<u8> {
    positions.iter().flat_map(|p| p.to_le_bytes()).collect()
}

/// The word positions of [`pack_starts`]: each section's start (from
/// section 1 on), then the body's word count. Empty for a page without
/// sections.
pub(super) fn unpack_starts(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// The sections' word ranges from [`unpack_starts`]: the lead (0 up to
/// the first start), then each section; one section of `0..u32::MAX`
/// without any.
pub(super) fn word_ranges(starts: &[u32]) -> Vec<Range<u32>> {
    let Some((&words, starts)) = starts.split_last() else {
        return vec![Range {
            start: 0,
            end: u32::MAX,
        }];
    };
    std::iter::once(0)
        .chain(starts.iter().copied())
        .zip(starts.iter().copied().chain(std::iter::once(words)))
        .map(|(from, to)| from..to.max(from))
        .collect()
}

/// How often each term (its positions, sorted) occurs in each section.
pub(super) fn term_counts(ranges: &[Range<u32>], positions: &[Vec<u32>]) -> Vec<Vec<u32>> {
    ranges
        .iter()
        .map(|r| {
            positions
                .iter()
                .map(|ps| {
                    let from = ps.partition_point(|p| *p < r.start);
                    let to = ps.partition_point(|p| *p < r.end);
                    (to - from) as u32
                })
                .collect()
        })
        .collect()
}

/// The best of the sections, each measured as (query slots it holds,
/// its BM25): most slots, then the best BM25, then the earliest; empty
/// sections are never best. `None` when every one is empty.
pub(super) fn best(measured: &[(usize, f32)], ranges: &[Range<u32>]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, (held, score)) in measured.iter().enumerate() {
        if ranges[i].is_empty() {
            continue;
        }
        let better = best.is_none_or(|b| {
            let (b_held, b_score) = measured[b];
            *held > b_held || (*held == b_held && *score > b_score)
        });
        if better {
            best = Some(i);
        }
    }
    best
}

/// The headings above and of entry `i` of an outline given as each
/// entry's (level, heading): each earlier heading of a higher level
/// (smaller number) than the one after it, from the top down. A
/// `<section>` without a heading (level 0) has its parent's path.
pub(super) fn heading_path<'a>(
    outline: impl IntoIterator<Item = (u8, &'a str)>,
    i: usize,
) -> Vec<&'a str> {
    let mut path: Vec<(u8, &str)> = Vec::new();
    for (level, heading) in outline.into_iter().take(i + 1).filter(|e| e.0 > 0) {
        while path.last().is_some_and(|top| top.0 >= level) {
            path.pop();
        }
        path.push((level, heading));
    }
    path.into_iter().map(|e| e.1).collect()
}

/// The link to a section: the page's URL with `anchor` as its fragment
/// (percent-encoded where a URL needs it); the page itself without one.
pub(super) fn section_url(page: &str, anchor: &str) -> String {
    if anchor.is_empty() {
        return page.to_string();
    }
    match url::Url::parse(page) {
        Ok(mut url) => {
            url.set_fragment(Some(anchor));
            url.into()
        }
        Err(_) => format!("{page}#{anchor}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(offset: u32, level: u8, heading: &str, anchor: &str) -> OutlineEntry {
        OutlineEntry {
            offset,
            level,
            heading: heading.into(),
            anchor: anchor.into(),
            opening: String::new(),
        }
    }

    #[test]
    fn section_starts_pack_into_the_word_ranges_of_the_sections() {
        // Sections at words 2 and 6 of 10.
        let starts = [2, 6, 10];
        assert_eq!(unpack_starts(&pack_starts(&starts)), starts);
        assert_eq!(word_ranges(&starts), [0..2, 2..6, 6..10]);
        let whole = Range {
            start: 0,
            end: u32::MAX,
        };
        assert_eq!(word_ranges(&[]), [whole]);
    }

    #[test]
    fn the_outline_reads_back_with_openings_of_sections_past_the_stored_text_only() {
        let body = format!(
            "{} Late heading {}",
            "early ".repeat(10),
            "late ".repeat(200)
        );
        let late = body.find("Late").unwrap() as u32;
        let sections = [
            SectionStart {
                offset: 0,
                level: 2,
                heading: "Early".into(),
                anchor: "early".into(),
            },
            SectionStart {
                offset: late,
                level: 2,
                heading: "Late heading — über".into(),
                anchor: String::new(),
            },
            // Past the body (cut by the index's limit): left out.
            SectionStart {
                offset: body.len() as u32 + 5,
                level: 2,
                heading: "Gone".into(),
                anchor: String::new(),
            },
        ];
        let inside = inside(&body, &sections);
        assert_eq!(inside.len(), 2);
        let packed = pack_outline(&body, &inside, 30);
        let outline = unpack_outline(&packed).unwrap();
        assert_eq!(
            outline[0],
            entry(0, 2, "Early", "early"),
            "no opening: the stored text holds it"
        );
        assert_eq!(outline[1].offset, late);
        assert_eq!(outline[1].heading, "Late heading — über");
        assert!(outline[1].opening.starts_with("Late heading late late"));
        assert_eq!(outline[1].opening.len(), OPENING_BYTES);
        // A few bytes a section besides its strings.
        let strings = "Earlyearly".len() + "Late heading — über".len() + OPENING_BYTES;
        assert!(packed.len() <= strings + 2 * 6, "{}", packed.len());
        // Cut anywhere but between its entries, it is damaged, never misread.
        let reads: Vec<usize> = (1..packed.len())
            .filter(|&cut| unpack_outline(&packed[..cut]).is_ok())
            .collect();
        assert_eq!(reads.len(), 1, "{reads:?}");
        assert_eq!(unpack_outline(&packed[..reads[0]]).unwrap(), outline[..1]);
        assert_eq!(unpack_outline(&[]), Ok(Vec::new()));
    }

    #[test]
    fn terms_are_counted_per_section_and_the_best_holds_most_of_the_query() {
        // Sections from words 0 (the lead is empty), 10 and 30, of 40.
        let ranges = word_ranges(&[0, 10, 30, 40]);
        assert_eq!(ranges, [0..0, 0..10, 10..30, 30..40]);
        // Term a at 12 and 35; b at 15: both in section 2, only a in 3.
        let counts = term_counts(&ranges, &[vec![12, 35], vec![15]]);
        assert_eq!(counts, [vec![0, 0], vec![0, 0], vec![1, 1], vec![1, 0]]);
        // Slots held beat a higher BM25; BM25 breaks a tie; the lead,
        // empty, is never best, even when nothing matched.
        assert_eq!(
            best(&[(0, 0.0), (0, 0.0), (2, 1.0), (1, 3.0)], &ranges),
            Some(2)
        );
        assert_eq!(
            best(&[(0, 0.0), (0, 0.0), (1, 1.0), (1, 3.0)], &ranges),
            Some(3)
        );
        assert_eq!(best(&[(0, 0.0); 4], &ranges), Some(1));
        assert_eq!(best(&[(0, 0.0)], &[Range { start: 0, end: 0 }]), None);
    }

    #[test]
    fn the_heading_path_runs_from_the_top_level_down() {
        let outline = [
            entry(0, 1, "Functions", "f"),
            entry(10, 2, "Conditional", "c"),
            entry(20, 3, "CASE", "case"),
            entry(30, 3, "COALESCE", "coalesce"),
            entry(40, 0, "", "bare"),
            entry(50, 2, "Strings", "s"),
        ];
        let heading_path = |outline: &[OutlineEntry], i| -> Vec<String> {
            heading_path(outline.iter().map(|e| (e.level, e.heading.as_str())), i)
                .into_iter()
                .map(str::to_string)
                .collect()
        };
        assert_eq!(heading_path(&outline, 0), ["Functions"]);
        assert_eq!(
            heading_path(&outline, 3),
            ["Functions", "Conditional", "COALESCE"]
        );
        assert_eq!(
            heading_path(&outline, 4),
            ["Functions", "Conditional", "COALESCE"],
            "a bare section is in its parent's"
        );
        assert_eq!(heading_path(&outline, 5), ["Functions", "Strings"]);
    }

    #[test]
    fn a_section_url_is_the_page_with_the_anchor_as_fragment() {
        assert_eq!(
            section_url("http://h/f.html", "FUNCTIONS-COALESCE"),
            "http://h/f.html#FUNCTIONS-COALESCE"
        );
        assert_eq!(section_url("http://h/f.html", ""), "http://h/f.html");
        assert_eq!(
            section_url("http://h/f.html", "a b"),
            "http://h/f.html#a%20b"
        );
    }
}
