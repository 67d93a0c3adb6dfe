//! Run with: `cargo run --example embed -- http://127.0.0.1:8080/ [QUERY]`
//!
//! Embedding web_crawler in your own tokio program, as an Erlang team embeds
//! an OTP application: start the tree, send it messages, wait, read, search
//! what it crawled, stop.

use std::time::Duration;
use web_crawler::actors::{AppError, RefusalCode};
use web_crawler::search::index_dir_for;
use web_crawler::{Settings, start_embedded};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let seed = args
        .next()
        .ok_or("usage: embed URL [QUERY] (e.g. a site on your own machine)")?;
    let query = args.next().unwrap_or_else(|| "crawler".into());

    let db = std::env::temp_dir().join("web_crawler_embed_example.db");
    let mut settings = Settings::default();
    settings.crawl.node_name = "embedded".into();
    settings.crawl.max_pages = Some(200);
    // A full-text index beside the store, where the command keeps it
    // (there is none unless asked for).
    settings.index_dir = Some(index_dir_for(&db));

    // App::start under the hood: web_crawler_sup with a pool, a master
    // and an indexer.
    let app = start_embedded(&db, settings).await?;

    // add_url/1 and search_text/2, as the paper's master exports them. A
    // second run on this store finds them processed by the first: refused
    // as `already_known`, which is no failure here.
    let known = |e: &AppError| e.code() == Some(RefusalCode::AlreadyKnown);
    match app.add_url(&seed).await {
        Ok(queued) => println!("queued {}", queued.url),
        Err(e) if known(&e) => println!("{e}"),
        Err(e) => return Err(e.into()),
    }
    match app.search_text(&seed, &query).await {
        Err(e) if !known(&e) => return Err(e.into()),
        _ => {}
    }

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
    for found in control.text_match_hits(Some(&query), 3).await?.items {
        println!(
            "{:?} at {} in {}",
            found.text,
            found.positions.len(),
            found.url
        );
    }
    // Ranked search over what was crawled: index what is queued first.
    app.flush_index().await?;
    let answer = app.search(&query, 5).await?;
    if let Some(better) = &answer.did_you_mean {
        println!("searched for {better:?} instead");
    }
    for hit in &answer.results {
        println!(
            "{:.2} {} ({}): {}",
            hit.score, hit.url, hit.title, hit.snippet
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
