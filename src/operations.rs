//! Page operations shipped with the crawler.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use web_crawler_actors::{
    Document, Millis, Operation, OperationError, OperationOutput, Operations, PageContext, Queries,
    Record, SEARCH_OPERATION, SEARCH_RESULTS, StoreError,
};

/// The paper's `search_text(URL, Text)` (listing 13): records where `Text`
/// occurs in each page, as byte offsets into the page decoded to UTF-8, in
/// the `search_results` collection (listing 3).
#[derive(Clone, Copy, Debug, Default)]
pub struct SearchText;

/// A `search_results` document, as [`search_results`] reads it back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchResult {
    pub url: String,
    pub text: String,
    pub positions: Vec<u64>,
    pub d_search: Millis,
}

/// The search results stored for `text` (all of them with `None`), by URL.
pub async fn search_results(
    queries: &dyn Queries,
    text: Option<&str>,
) -> Result<Vec<SearchResult>, StoreError> {
    let mut filter = Document::new();
    if let Some(text) = text {
        filter.insert("text".into(), text.into());
    }
    let mut results = queries
        .records(SEARCH_RESULTS, &filter)
        .await?
        .into_iter()
        .map(|doc| {
            serde_json::from_value(serde_json::Value::Object(doc))
                .map_err(|e| StoreError::Corrupt(format!("a search result: {e}")))
        })
        .collect::<Result<Vec<SearchResult>, _>>()?;
    results.sort_by(|a, b| (&a.url, &a.text).cmp(&(&b.url, &b.text)));
    Ok(results)
}

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

    fn validate(&self, args: &[String]) -> Result<(), OperationError> {
        match args {
            [text] if !text.is_empty() => Ok(()),
            _ => Err(OperationError::BadArguments(
                "search takes exactly one non-empty text".to_string(),
            )),
        }
    }

    /// It reads the whole decoded page, not the visible text.
    fn reads_text(&self) -> bool {
        false
    }

    async fn run(
        &self,
        ctx: &PageContext<'_>,
        args: &[String],
    ) -> Result<OperationOutput, OperationError> {
        self.validate(args)?;
        let text = &args[0];
        let positions = find_positions(&ctx.extracted.document, text);
        // Only pages where the text occurs get a search result.
        if positions.is_empty() {
            return Ok(OperationOutput::none());
        }
        let mut key = Document::new();
        key.insert("url".into(), ctx.job.url.clone().into());
        key.insert("text".into(), text.clone().into());
        let mut fields = Document::new();
        fields.insert("positions".into(), positions.into());
        Ok(OperationOutput::records(vec![Record {
            collection: SEARCH_RESULTS.to_string(),
            key,
            fields,
            stamp: Some("d_search".to_string()),
        }]))
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
