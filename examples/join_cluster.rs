//! Run with: `cargo run --example join_cluster -- 127.0.0.1:4370 cookie-file URL`
//!
//! A Rust program joining a running cluster (started with `web_crawler start
//! --listen 127.0.0.1:4370 --cookie-file cookie-file ...`) and sending it
//! add_url, as an Erlang node would `gen_server:cast` to a remote master.

use std::time::Duration;
use web_crawler::actors::OperationSpec;
use web_crawler::actors::Remote;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(node), Some(cookie_file), Some(url)) = (args.next(), args.next(), args.next()) else {
        return Err("usage: join_cluster HOST:PORT COOKIE_FILE URL".into());
    };
    let cookie = std::fs::read_to_string(cookie_file)?.trim().to_string();

    let cluster = Remote::connect(&node, &cookie, Duration::from_secs(10)).await?;
    let queued = cluster.add_url(&url, OperationSpec::crawl()).await?;
    let waiting = if queued.already_queued {
        " (waiting already)"
    } else {
        ""
    };
    println!("queued {}{waiting}", queued.url);
    let status = cluster.status().await?;
    println!(
        "{} processed, {} pending on {} node(s)",
        status.store.processed,
        status.store.pending,
        status.nodes.len()
    );
    cluster.close();
    Ok(())
}
