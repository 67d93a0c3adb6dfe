//! Anchor context: the words around a link in the text of the page that
//! has it. "To cancel a running query, send SIGINT … See also
//! pg_cancel_backend in [Section 9.27.2]": the link's own text names
//! nothing, the sentence around it says what the target is for.
//!
//! Pure: the page's visible text and its links' texts in, one context per
//! link out. The extractor keeps no positions, so each link's text is
//! looked for in the page's text, in page order (from where the previous
//! one was found, then before it), within a bounded stretch.

/// Bytes of text searched for a link's text on each side of where the
/// previous link's text was found: bounds the work per page.
const SEARCH_BYTES: usize = 16 * 1024;
/// Bytes read on each side of a link's text to take the context's words.
const BYTES_PER_WORD: usize = 24;

/// For each link text of `texts` (in page order), up to `words` words of
/// `body` before and after it, joined with single spaces; `""` for an
/// empty text or one not found near the previous one.
pub(crate) fn anchor_contexts(body: &str, texts: &[&str], words: usize) -> Vec<String> {
    let mut cursor = 0;
    texts
        .iter()
        .map(|text| {
            let text = text.trim();
            if text.is_empty() || words == 0 {
                return String::new();
            }
            let Some(at) = find_near(body, text, cursor) else {
                return String::new();
            };
            let end = at + text.len();
            if at >= cursor {
                cursor = end;
            }
            let reach = words * BYTES_PER_WORD;
            let before = &body[body.floor_char_boundary(at.saturating_sub(reach))..at];
            let after = &body[end..body.floor_char_boundary(end + reach)];
            // Words are read outward from the link and only as many as are
            // kept (one more tells whether the stretch ran out): a link's
            // context costs its own length, not the reach's.
            let mut out: Vec<&str> = before.split_whitespace().rev().take(words + 1).collect();
            if out.len() > words {
                out.pop();
            } else if at > reach && !before.starts_with(char::is_whitespace) {
                // The first word may be cut by the reach: leave it out.
                out.pop();
            }
            out.reverse();
            let from = out.len();
            out.extend(after.split_whitespace().take(words + 1));
            if out.len() - from > words {
                out.pop();
            } else if out.len() > from
                && end + reach < body.len()
                && !after.ends_with(char::is_whitespace)
            {
                // The last word may be cut by the reach.
                out.pop();
            }
            out.join(" ")
        })
        .collect()
}

/// Where `text` is in `body`: its first occurrence within
/// [`SEARCH_BYTES`] after `cursor`, else the last within that many before it.
fn find_near(body: &str, text: &str, cursor: usize) -> Option<usize> {
    let cursor = body.floor_char_boundary(cursor.min(body.len()));
    let ahead = body.floor_char_boundary((cursor + SEARCH_BYTES + text.len()).min(body.len()));
    if let Some(i) = body[cursor..ahead].find(text) {
        return Some(cursor + i);
    }
    let back = body.floor_char_boundary(cursor.saturating_sub(SEARCH_BYTES));
    let until = body.floor_char_boundary((cursor + text.len()).min(body.len()));
    body[back..until].rfind(text).map(|i| back + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_gets_the_words_around_it() {
        let body = "To cancel a running query, send SIGINT. See also \
                    pg_cancel_backend in Section 9.27.2 for the SQL way.";
        let got = anchor_contexts(body, &["Section 9.27.2"], 4);
        assert_eq!(got, ["See also pg_cancel_backend in for the SQL way."]);
        let wide = anchor_contexts(body, &["Section 9.27.2"], 50);
        assert!(wide[0].starts_with("To cancel a running query"), "{wide:?}");
    }

    #[test]
    fn links_are_found_in_page_order() {
        // "here" twice: the second link gets the second occurrence.
        let body = "Install it from here and read the manual first. \
                    The changelog is here as well.";
        let got = anchor_contexts(body, &["here", "manual", "here"], 2);
        assert_eq!(got[0], "it from and read");
        assert_eq!(got[1], "read the first. The");
        assert_eq!(got[2], "changelog is as well.");
    }

    #[test]
    fn a_link_out_of_order_or_absent_still_works() {
        let body = "alpha beta gamma delta epsilon";
        // "delta" first moves the cursor; "beta" is found before it.
        let got = anchor_contexts(body, &["delta", "beta", "zeta", ""], 1);
        assert_eq!(got, ["gamma epsilon", "alpha gamma", "", ""]);
        assert_eq!(anchor_contexts("", &["x"], 3), [""]);
        assert_eq!(anchor_contexts(body, &["beta"], 0), [""]);
    }

    #[test]
    fn words_cut_by_the_reach_are_left_out_and_chars_kept_whole() {
        let body = format!(
            "{}émigré link {}",
            "wörd ".repeat(200),
            "ünïcode ".repeat(200)
        );
        let got = anchor_contexts(&body, &["link"], 3);
        assert_eq!(got, ["wörd wörd émigré ünïcode ünïcode ünïcode"]);
    }

    #[test]
    fn a_long_stretch_of_spaces_keeps_the_words_before() {
        let body = format!("one two link{}three", " ".repeat(2000));
        assert_eq!(anchor_contexts(&body, &["link"], 3), ["one two"]);
    }

    #[test]
    fn far_links_are_not_searched_for() {
        let body = format!("start {} needle", "x ".repeat(SEARCH_BYTES));
        assert_eq!(anchor_contexts(&body, &["needle"], 1), [""]);
        assert_eq!(anchor_contexts(&body, &["start", "x"], 1), ["x", "start x"]);
    }
}
