//! Page operations shipped with the crawler.

use async_trait::async_trait;
use web_crawler_actors::{
    Document, Operation, OperationError, OperationOutput, OperationSpec, Operations, PageContext,
    Record, SEARCH_RESULTS, TEXT_MATCH_EXACT as EXACT, TEXT_MATCH_OPERATION,
};

/// The paper's `search_text(URL, Text)` (listing 13): records where `Text`
/// occurs in each page's visible text (what a reader sees: no markup,
/// scripts or navigation) in the `search_results` collection (listing 3):
/// positions as character offsets into that text, and a short context
/// around the first matches. Case-insensitive unless the operation carries
/// the `exact` argument ([`OperationSpec::search_text_exact`]).
///
/// [`OperationSpec::search_text_exact`]: web_crawler_actors::OperationSpec::search_text_exact
#[derive(Clone, Copy, Debug, Default)]
pub struct TextMatch;

/// The longest text `search_text` looks for, in bytes: a phrase, not a
/// document (it travels with every URL the crawl reaches).
pub const MAX_MATCH_TEXT: usize = 1024;

/// Positions kept per page at most, and matches shown with their context.
const MAX_POSITIONS: usize = 1_000;
const MAX_CONTEXTS: usize = 5;
/// Characters of context on each side of a match.
const CONTEXT_CHARS: usize = 40;

/// Character offsets of the non-overlapping occurrences of `needle` in
/// `haystack`, left to right; case-insensitive unless `exact`.
pub fn find_positions(haystack: &str, needle: &str, exact: bool) -> Vec<u64> {
    let fold = |c: char| -> Vec<char> {
        if exact {
            vec![c]
        } else {
            c.to_lowercase().collect()
        }
    };
    let needle: Vec<char> = needle.chars().flat_map(fold).collect();
    if needle.is_empty() {
        return Vec::new();
    }
    // The folded text, each char with the offset of the char it came from.
    let folded: Vec<(usize, char)> = haystack
        .chars()
        .enumerate()
        .flat_map(|(i, c)| fold(c).into_iter().map(move |f| (i, f)))
        .collect();
    let mut positions = Vec::new();
    let mut at = 0;
    while at + needle.len() <= folded.len() {
        if folded[at..at + needle.len()]
            .iter()
            .map(|(_, c)| *c)
            .eq(needle.iter().copied())
        {
            positions.push(folded[at].0 as u64);
            at += needle.len();
        } else {
            at += 1;
        }
    }
    positions
}

/// The text around a match at character `position` of length `len` chars.
fn context(haystack: &[char], position: usize, len: usize) -> String {
    let start = position.saturating_sub(CONTEXT_CHARS);
    let end = (position + len + CONTEXT_CHARS).min(haystack.len());
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(&haystack[start..end]);
    if end < haystack.len() {
        out.push('…');
    }
    out
}

#[async_trait]
impl Operation for TextMatch {
    fn name(&self) -> &str {
        TEXT_MATCH_OPERATION
    }

    fn validate(&self, args: &[String]) -> Result<(), OperationError> {
        match args {
            [text] | [text, _] if text.len() > MAX_MATCH_TEXT => {
                Err(OperationError::BadArguments(format!(
                    "the search text is {} bytes long; the limit is {MAX_MATCH_TEXT}",
                    text.len()
                )))
            }
            [text] if !text.trim().is_empty() => Ok(()),
            [text, exact] if !text.trim().is_empty() && exact == EXACT => Ok(()),
            _ => Err(OperationError::BadArguments(format!(
                "search takes one non-empty text, and optionally {EXACT:?}"
            ))),
        }
    }

    async fn run(
        &self,
        ctx: &PageContext<'_>,
        args: &[String],
    ) -> Result<OperationOutput, OperationError> {
        self.validate(args)?;
        let text = &args[0];
        let exact = args.get(1).is_some_and(|a| a == EXACT);
        let visible = &ctx.extracted.text;
        let mut positions = find_positions(visible, text, exact);
        // Only pages where the text occurs get a hit.
        if positions.is_empty() {
            return Ok(OperationOutput::none());
        }
        positions.truncate(MAX_POSITIONS);
        let chars: Vec<char> = visible.chars().collect();
        let len = text.chars().count();
        let contexts: Vec<String> = positions
            .iter()
            .take(MAX_CONTEXTS)
            .map(|&p| context(&chars, p as usize, len))
            .collect();
        let mut key = Document::new();
        key.insert("url".into(), ctx.job.url.clone().into());
        key.insert("text".into(), text.clone().into());
        let mut fields = Document::new();
        fields.insert("positions".into(), positions.into());
        fields.insert("contexts".into(), contexts.into());
        Ok(OperationOutput::records(vec![Record {
            collection: SEARCH_RESULTS.to_string(),
            key,
            fields,
            stamp: Some("d_search".to_string()),
        }]))
    }
}

/// The name of the [`Mirror`] operation.
pub const MIRROR_OPERATION: &str = "mirror";

/// A URL's operation spec for [`Mirror`].
pub fn mirror() -> OperationSpec {
    OperationSpec(vec![MIRROR_OPERATION.to_string()])
}

/// `mirror`: every response fetched for the URL and the pages its crawl
/// reaches (redirects and errors too) is written to the node's archive
/// (WARC files, see [`crate::archive`]). It stores nothing else; a node
/// without an archive fails its pages.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mirror;

#[async_trait]
impl Operation for Mirror {
    fn name(&self) -> &str {
        MIRROR_OPERATION
    }

    fn validate(&self, args: &[String]) -> Result<(), OperationError> {
        match args {
            [] => Ok(()),
            _ => Err(OperationError::BadArguments(
                "mirror takes no arguments".to_string(),
            )),
        }
    }

    fn reads_text(&self) -> bool {
        false
    }

    fn archives(&self) -> bool {
        true
    }

    async fn run(
        &self,
        _ctx: &PageContext<'_>,
        _args: &[String],
    ) -> Result<OperationOutput, OperationError> {
        // The slave has archived the response already.
        Ok(OperationOutput::none())
    }
}

/// The operations every node knows.
pub fn builtin_operations() -> Operations {
    Operations::new()
        .with(std::sync::Arc::new(TextMatch))
        .with(std::sync::Arc::new(Mirror))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_char_offsets_of_non_overlapping_matches() {
        assert_eq!(find_positions("abcabcab", "ab", true), vec![0, 3, 6]);
        assert_eq!(find_positions("aaaa", "aa", true), vec![0, 2]);
        assert_eq!(find_positions("héllo héllo", "llo", true), vec![2, 8]);
        assert!(find_positions("abc", "x", true).is_empty());
        assert!(find_positions("abc", "", false).is_empty());
    }

    #[test]
    fn matching_ignores_case_unless_exact() {
        assert_eq!(
            find_positions("Needle and NEEDLE", "needle", false),
            vec![0, 11]
        );
        assert_eq!(
            find_positions("Needle and NEEDLE", "needle", true),
            Vec::<u64>::new()
        );
        assert_eq!(find_positions("Straße STRASSE", "ß", false), vec![4]);
        // A char that lowercases to two still counts as one offset.
        assert_eq!(find_positions("İx ix", "x", false), vec![1, 4]);
    }

    #[test]
    fn contexts_show_the_text_around_a_match() {
        let text: Vec<char> = format!("{}needle{}", "a".repeat(50), "b".repeat(50))
            .chars()
            .collect();
        let c = context(&text, 50, 6);
        assert_eq!(c, format!("…{}needle{}…", "a".repeat(40), "b".repeat(40)));
        let short: Vec<char> = "a needle".chars().collect();
        assert_eq!(context(&short, 2, 6), "a needle");
    }

    #[test]
    fn search_needs_one_text() {
        assert!(TextMatch.validate(&["x".into()]).is_ok());
        assert!(TextMatch.validate(&[]).is_err());
        assert!(TextMatch.validate(&["".into()]).is_err());
        assert!(TextMatch.validate(&["a".into(), "b".into()]).is_err());
        assert!(TextMatch.validate(&["a".into(), "exact".into()]).is_ok());
        assert!(TextMatch.validate(&["  ".into()]).is_err());
        let long = "x".repeat(MAX_MATCH_TEXT + 1);
        let err = TextMatch.validate(&[long]).unwrap_err().to_string();
        assert!(err.contains("the limit is 1024"), "{err}");
        assert!(
            builtin_operations()
                .validate(&web_crawler_actors::OperationSpec::search_text("x"))
                .is_ok()
        );
        assert!(
            builtin_operations()
                .validate(&web_crawler_actors::OperationSpec(vec!["nope".into()]))
                .is_err()
        );
    }
}
