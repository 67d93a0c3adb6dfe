//! `index rebuild`: a new full-text index from what the store holds, read
//! from the archive where it has the page, fetched again otherwise.

use super::opts::{StoreOpts, TuningOpts};
use super::signals::StopSignals;
use anyhow::{Context, Result, bail};
use clap::Subcommand;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use web_crawler::actors::{OperationSpec, PageQuery};
use web_crawler::archive::ArchiveReader;
use web_crawler::search::SearchIndex;
use web_crawler::{Settings, start};

#[derive(Debug, Subcommand)]
pub(super) enum IndexAction {
    /// Build the index again from what the store holds: every HTML page
    /// processed with success is fetched again (politely, with the tuning
    /// flags) and indexed; nothing new is crawled. For a lost or damaged index.
    Rebuild {
        #[command(flatten)]
        store: StoreOpts,
        /// Rebuild one node's shard: the pages the store says this node
        /// fetched (give its `--index DIR`, and its archive with `--warc`);
        /// pages fetched again are recorded as this node's.
        #[arg(long, value_name = "NAME")]
        node: Option<String>,
        #[command(flatten)]
        tuning: TuningOpts,
    },
}

impl IndexAction {
    pub(super) async fn exec(self) -> Result<ExitCode> {
        match self {
            IndexAction::Rebuild {
                store,
                node,
                tuning,
            } => rebuild_index(&store, node.as_deref(), &tuning).await,
        }
    }
}

/// `index rebuild`: every successful HTML page (`node`'s only, for one
/// node's shard) into a new index, read from the archive when it holds the
/// page, fetched again otherwise.
async fn rebuild_index(
    store_opts: &StoreOpts,
    node: Option<&str>,
    tuning: &TuningOpts,
) -> Result<ExitCode> {
    let dir = store_opts.index_dir();
    if store_opts.mongodb.is_none() && !store_opts.db.exists() {
        bail!("no crawl database at {}", store_opts.db.display());
    }
    let store = store_opts.open_for_crawl().await?;
    let pages = store
        .processed(PageQuery {
            limit: None,
            offset: 0,
            only_failed: false,
            only_duplicates: false,
            newest_first: false,
        })
        .await?;
    let urls: Vec<String> = pages
        .into_iter()
        .filter(|p| {
            p.duplicate_of.is_none()
                && node.is_none_or(|n| p.record.node == n)
                && p.record.error.is_none()
                && p.record
                    .http_returncode
                    .is_some_and(|c| (200..300).contains(&c))
                && p.record
                    .content_type
                    .as_deref()
                    .is_some_and(|t| t.to_ascii_lowercase().contains("html"))
        })
        .map(|p| p.record.url)
        .collect();
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove the old index at {}", dir.display()))?;
    }
    let archive_dir = tuning
        .archive
        .warc
        .clone()
        .unwrap_or_else(|| store_opts.archive_dir());
    let started = Instant::now();
    // Made once: with --semantic they hold the sentence model, loaded once.
    let mut settings = tuning.settings()?;
    let (from_archive, urls) = index_from_archive(&archive_dir, &dir, urls, &settings)?;
    if from_archive > 0 {
        eprintln!(
            "{from_archive} pages read from the archive at {}",
            archive_dir.display()
        );
    }
    if let Some(node) = node {
        settings.crawl.node_name = node.to_string();
    }
    settings.crawl.index_pages = true;
    settings.crawl.sitemaps = false;
    // The pages again, and no page they link to.
    settings.policy.max_depth = Some(0);
    settings.index_dir = Some(dir.clone());
    if urls.is_empty() && from_archive > 0 {
        eprintln!(
            "index rebuilt: {from_archive} pages in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let app = start(store, settings).await?;
    eprintln!("fetching {} pages again into {}", urls.len(), dir.display());
    for chunk in urls.chunks(512) {
        let queued = futures_util::future::join_all(
            chunk
                .iter()
                .map(|url| app.add_url_again(url, OperationSpec::crawl())),
        )
        .await;
        if let Some(e) = queued.into_iter().find_map(Result::err) {
            app.stop(Duration::from_secs(1)).await.ok();
            bail!("{e}");
        }
    }
    let mut signals = StopSignals::new()?;
    let mut idle = tokio::select! {
        r = app.wait_idle() => Ok(r?),
        code = signals.first() => Err(code),
    };
    // A stop gives the index 2 s, not its backlog: the pages fetched are
    // indexed first (a signal stops at once; the rest stays queued on disk).
    if idle.is_ok() {
        tokio::select! {
            r = super::index_caught_up(&app) => r?,
            code = signals.first() => idle = Err(code),
        }
    }
    app.stop(Duration::from_secs(30)).await?;
    let indexed = SearchIndex::open_read_only(&dir)?.page_count();
    eprintln!(
        "index rebuilt: {indexed} pages in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(match idle {
        Ok(_) => ExitCode::SUCCESS,
        Err(code) => code,
    })
}

/// Index the pages of `urls` that the archive at `archive_dir` holds (a
/// 2xx response) into the index at `index_dir`; returns how many, and the
/// URLs left to fetch.
fn index_from_archive(
    archive_dir: &Path,
    index_dir: &Path,
    urls: Vec<String>,
    settings: &Settings,
) -> Result<(usize, Vec<String>)> {
    use web_crawler::actors::INDEX_TEXT_BYTES;
    use web_crawler::actors::{Extractor, PageIndex, PageText};
    let archive = ArchiveReader::open(archive_dir)?;
    if archive.skipped() > 0 {
        eprintln!(
            "{} index lines in {} cannot be read and are skipped; their pages are fetched again",
            archive.skipped(),
            archive_dir.display()
        );
    }
    if archive.is_empty() {
        return Ok((0, urls));
    }
    let extractor = web_crawler::extract::HtmlExtractor::new(settings.policy.normalize.clone());
    let mut index = SearchIndex::open(index_dir)
        .with_context(|| format!("cannot create the index at {}", index_dir.display()))?;
    if let Some(embedder) = &settings.embedder {
        index = index.with_embedder(embedder.clone());
    }
    let (mut indexed, mut missing) = (0, Vec::new());
    for url in urls {
        let page = match archive.page(&url) {
            Ok(Some(page)) if (200..300).contains(&page.status) => page,
            Ok(_) => {
                missing.push(url);
                continue;
            }
            Err(e) => {
                let why = web_crawler::actors::error_chain(&e);
                eprintln!("{why}; fetching {url} again");
                missing.push(url);
                continue;
            }
        };
        let extracted = extractor.extract(&url, &page, INDEX_TEXT_BYTES);
        if let Some(text) = PageText::of(&url, &extracted) {
            index.add(text)?;
        }
        indexed += 1;
    }
    PageIndex::commit(&mut index)?;
    Ok((indexed, missing))
}
