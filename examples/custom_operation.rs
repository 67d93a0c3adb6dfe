//! Run with: `cargo run --example custom_operation -- http://127.0.0.1:8080/`
//!
//! Plugging in your own page operation (the paper's `operation` field): every
//! page fetched for a URL carrying `["count_words"]` runs it in its slave.

use std::sync::Arc;
use std::time::Duration;
use web_crawler::actors::{
    Operation, OperationOutput, OperationSpec, PageContext, SearchHit, async_trait,
};
use web_crawler::{Settings, start_embedded};

/// Records every page's visible word count as a search result for the
/// text `"#words"`, whose single position is the count.
struct CountWords;

#[async_trait]
impl Operation for CountWords {
    fn name(&self) -> &str {
        "count_words"
    }

    fn validate(&self, args: &[String]) -> Result<(), String> {
        args.is_empty()
            .then_some(())
            .ok_or_else(|| "count_words takes no arguments".to_string())
    }

    async fn run(
        &self,
        ctx: &PageContext<'_>,
        _args: &[String],
    ) -> Result<OperationOutput, String> {
        let words = ctx.extracted.text.split_whitespace().count() as u64;
        Ok(OperationOutput {
            search_hit: Some(SearchHit {
                url: ctx.job.url.clone(),
                text: "#words".into(),
                positions: vec![words],
            }),
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seed = std::env::args()
        .nth(1)
        .ok_or("usage: custom_operation URL")?;
    let mut settings = Settings::default();
    settings.crawl.node_name = "custom-op".into();
    settings.crawl.max_pages = Some(50);
    settings.operations = settings.operations.clone().with(Arc::new(CountWords));

    let db = std::env::temp_dir().join("web_crawler_custom_op_example.db");
    let app = start_embedded(&db, settings).await?;
    app.add_url_with(&seed, OperationSpec(vec!["count_words".into()]))
        .await?;
    app.wait_idle().await?;
    app.stop(Duration::from_secs(5)).await?;

    let store = web_crawler::store::SqliteStore::open(&db)?;
    use web_crawler::actors::Store;
    for r in store.search_results(Some("#words")).await? {
        println!("{}\t{} words", r.url, r.positions[0]);
    }
    Ok(())
}
