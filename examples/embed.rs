//! Run with: `cargo run --example embed -- http://127.0.0.1:8080/`
//!
//! Embedding web_crawler in your own tokio program, as an Erlang team embeds
//! an OTP application: start the tree, send it messages, wait, read, stop.

use std::time::Duration;
use web_crawler::{Settings, start_embedded};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seed = std::env::args()
        .nth(1)
        .ok_or("usage: embed URL (e.g. a site on your own machine)")?;

    let mut settings = Settings::default();
    settings.crawl.node_name = "embedded".into();
    settings.crawl.max_pages = Some(200);

    // App::start under the hood: web_crawler_sup with a pool and a master.
    let db = std::env::temp_dir().join("web_crawler_embed_example.db");
    let app = start_embedded(&db, settings).await?;

    // add_url/1 and search_text/2, as the paper's master exports them.
    let normalized = app.add_url(&seed).await?;
    println!("queued {normalized}");
    app.search_text(&seed, "crawler").await?;

    let reason = app.wait_idle().await?;
    let status = app.status().await?;
    println!(
        "{reason:?}: {} pages processed, {} failed, {} search results",
        status.store.processed, status.store.failed, status.store.search_results
    );
    // What the console lists, typed (the same calls as a cluster `Remote`).
    let control = app.control();
    for page in control.processed(3).await? {
        println!(
            "processed {} ({:?})",
            page.record.url, page.record.http_returncode
        );
    }
    for found in control.search_results(Some("crawler"), 3).await?.items {
        println!(
            "{:?} at {} in {}",
            found.text,
            found.positions.len(),
            found.url
        );
    }
    for child in app.which_children().await? {
        println!(
            "child {} ({:?}), restarts {}",
            child.name, child.role, child.restarts
        );
    }
    app.stop(Duration::from_secs(5)).await?;
    println!("results are in {}", db.display());
    Ok(())
}
