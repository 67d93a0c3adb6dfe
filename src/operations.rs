//! Page operations shipped with the crawler.

use async_trait::async_trait;
use web_crawler_actors::{
    Operation, OperationOutput, Operations, PageContext, SEARCH_OPERATION, SearchHit,
};

/// The paper's `search_text(URL, Text)` (listing 13): records where `Text`
/// occurs in each page, as byte offsets into the page decoded to UTF-8.
#[derive(Clone, Copy, Debug, Default)]
pub struct SearchText;

/// Byte offsets of the non-overlapping occurrences of `needle`, left to right
/// (as Erlang's `binary:matches/2`).
pub fn find_positions(haystack: &str, needle: &str) -> Vec<u64> {
    if needle.is_empty() {
        return Vec::new();
    }
    haystack
        .match_indices(needle)
        .map(|(i, _)| i as u64)
        .collect()
}

#[async_trait]
impl Operation for SearchText {
    fn name(&self) -> &str {
        SEARCH_OPERATION
    }

    fn validate(&self, args: &[String]) -> Result<(), String> {
        match args {
            [text] if !text.is_empty() => Ok(()),
            _ => Err("search takes exactly one non-empty text".to_string()),
        }
    }

    async fn run(&self, ctx: &PageContext<'_>, args: &[String]) -> Result<OperationOutput, String> {
        self.validate(args)?;
        let text = &args[0];
        let positions = find_positions(&ctx.extracted.document, text);
        // Only pages where the text occurs get a search result.
        let search_hit = (!positions.is_empty()).then(|| SearchHit {
            url: ctx.job.url.clone(),
            text: text.clone(),
            positions,
        });
        Ok(OperationOutput { search_hit })
    }
}

/// The operations every node knows.
pub fn builtin_operations() -> Operations {
    Operations::new().with(std::sync::Arc::new(SearchText))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_byte_offsets_of_non_overlapping_matches() {
        assert_eq!(find_positions("abcabcab", "ab"), vec![0, 3, 6]);
        assert_eq!(find_positions("aaaa", "aa"), vec![0, 2]);
        assert_eq!(find_positions("héllo héllo", "llo"), vec![3, 10]);
        assert!(find_positions("abc", "x").is_empty());
        assert!(find_positions("abc", "").is_empty());
    }

    #[test]
    fn search_needs_one_text() {
        assert!(SearchText.validate(&["x".into()]).is_ok());
        assert!(SearchText.validate(&[]).is_err());
        assert!(SearchText.validate(&["".into()]).is_err());
        assert!(SearchText.validate(&["a".into(), "b".into()]).is_err());
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
