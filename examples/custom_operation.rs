//! Run with: `cargo run --example custom_operation -- http://127.0.0.1:8080/`
//!
//! Plugging in your own page operation (the paper's `operation` field): every
//! page fetched for a URL carrying `["count_words"]` runs it in its slave,
//! and what it returns is stored in a collection of its own, `word_counts`
//! (a MongoDB collection of that name; rows of the embedded store's
//! `records` table), next to the crawl's own collections.

use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use web_crawler::actors::{
    Document, Operation, OperationError, OperationOutput, OperationSpec, PageContext, Queries,
    Record, RefusalCode, async_trait,
};
use web_crawler::{Settings, start_embedded};

/// Counts the words of every page's visible text.
struct CountWords;

#[async_trait]
impl Operation for CountWords {
    fn name(&self) -> &str {
        "count_words"
    }

    fn validate(&self, args: &[String]) -> Result<(), OperationError> {
        match args {
            [] => Ok(()),
            _ => Err(OperationError::BadArguments(
                "count_words takes no arguments".into(),
            )),
        }
    }

    async fn run(
        &self,
        ctx: &PageContext<'_>,
        _args: &[String],
    ) -> Result<OperationOutput, OperationError> {
        let words = ctx.extracted.text.split_whitespace().count();
        let mut key = Document::new();
        key.insert("url".into(), json!(ctx.job.url));
        let mut fields = Document::new();
        fields.insert("words".into(), json!(words));
        fields.insert("title".into(), json!(ctx.extracted.title));
        // One record per page: processing the page again replaces it.
        Ok(OperationOutput::records(vec![Record {
            collection: "word_counts".into(),
            key,
            fields,
            stamp: Some("d_counted".into()),
        }]))
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
    let count_words = OperationSpec(vec!["count_words".into()]);
    match app.add_url_with(&seed, count_words).await {
        // A second run on this store: the first counted the seed's words.
        Err(e) if e.code() == Some(RefusalCode::AlreadyKnown) => println!("{e}"),
        answer => drop(answer?),
    }
    app.wait_idle().await?;
    app.stop(Duration::from_secs(5)).await?;

    let store = web_crawler::store::SqliteStore::open(&db)?;
    for page in store.records("word_counts", &Document::new()).await? {
        println!("{}\t{} words", page["url"], page["words"]);
    }
    Ok(())
}
