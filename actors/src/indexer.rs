//! `Indexer`: owns the full-text index writer on the master's node. The
//! master hands it the pages of each batch it has written
//! (`IndexerMsg::Pages`); it adds them to the index and commits by count
//! and by time ([`IndexBatch`]), and only after a commit removes them from
//! the store's [`INDEX_QUEUE`]. At its start (and so at every restart) it
//! first works through whatever the queue still holds: pages processed while
//! it was down, or added but not committed when it crashed.

use crate::behaviour::{Document, Queries, error_chain};
use crate::protocol::IndexerMsg;
use crate::search::{INDEX_QUEUE, IndexError, IndexOpener, PageIndex, PageText};
use crate::types::{Millis, now_ms};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Pages added but not committed, and when a commit is due.
#[derive(Debug)]
pub struct IndexBatch {
    keys: Vec<Document>,
    first_at: Option<Millis>,
    max_pages: usize,
    max_wait_ms: Millis,
}

impl IndexBatch {
    /// Commit after `max_pages` pages, or `max_wait_ms` after the first
    /// uncommitted one, whichever comes first.
    pub fn new(max_pages: usize, max_wait_ms: Millis) -> Self {
        Self {
            keys: Vec::new(),
            first_at: None,
            max_pages: max_pages.max(1),
            max_wait_ms,
        }
    }

    /// A page was added to the index.
    pub fn added(&mut self, url: &str, now: Millis) {
        let mut key = Document::new();
        key.insert("url".into(), url.into());
        self.keys.push(key);
        self.first_at.get_or_insert(now);
    }

    pub fn due(&self, now: Millis) -> bool {
        self.keys.len() >= self.max_pages
            || self
                .first_at
                .is_some_and(|at| now.saturating_sub(at) >= self.max_wait_ms)
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The queue keys of the pages a commit made durable.
    pub fn take(&mut self) -> Vec<Document> {
        self.first_at = None;
        std::mem::take(&mut self.keys)
    }
}

/// Pages handed to the indexer and not yet committed, shared by the master
/// (which counts them in) and the indexer (which counts them out at each
/// commit). Until a commit the index holds its pages' text in memory (the
/// writer's queue takes 10,000 documents before it blocks), so this is the
/// bound on that memory. Beyond [`IndexerLoad::MAX_PAGES`] the master hands
/// no more: the pages wait in the store's queue, and the indexer reads them
/// from there once it has caught up, so a slow index costs time, never
/// memory.
#[derive(Debug, Default)]
pub(crate) struct IndexerLoad {
    pages: AtomicUsize,
    /// Pages were left in the queue only.
    behind: AtomicBool,
}

impl IndexerLoad {
    /// About 40–100 MB of page text at most.
    pub(crate) const MAX_PAGES: usize = 2_000;
    /// The indexer commits once it holds this many handed pages, so that
    /// the master rarely finds the load full.
    const COMMIT_AT: usize = Self::MAX_PAGES / 2;

    /// Whether `n` more pages may be handed over; if not, the indexer is
    /// told to read the queue when it has caught up.
    pub(crate) fn admit(&self, n: usize) -> bool {
        if self.pages.load(Ordering::Acquire) + n > Self::MAX_PAGES {
            self.behind.store(true, Ordering::Release);
            return false;
        }
        self.pages.fetch_add(n, Ordering::AcqRel);
        true
    }

    fn taken(&self, n: usize) {
        let _ = self
            .pages
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                Some(p.saturating_sub(n))
            });
    }

    /// Pages admitted but not delivered (the indexer was gone): the queue
    /// keeps them.
    pub(crate) fn not_delivered(&self, n: usize) {
        self.taken(n);
        self.behind.store(true, Ordering::Release);
    }

    /// A new indexer starts from the queue: what its predecessor was handed
    /// and did not add is there.
    fn restart(&self) {
        self.pages.store(0, Ordering::Release);
        self.behind.store(false, Ordering::Release);
    }

    /// Caught up with what was handed over, after pages were left behind.
    fn left_behind(&self) -> bool {
        self.pages.load(Ordering::Acquire) == 0 && self.behind.swap(false, Ordering::AcqRel)
    }
}

pub(crate) struct IndexerArgs {
    pub(crate) load: Arc<IndexerLoad>,
    pub(crate) opener: Arc<dyn IndexOpener>,
    pub(crate) queries: Arc<dyn Queries>,
    pub(crate) commit_every: Duration,
    pub(crate) commit_pages: usize,
}

impl std::fmt::Debug for IndexerArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexerArgs").finish_non_exhaustive()
    }
}

pub(crate) struct IndexerState {
    load: Arc<IndexerLoad>,
    /// Pages the master handed over since the last commit.
    handed: usize,
    index: Arc<Mutex<Box<dyn PageIndex>>>,
    queries: Arc<dyn Queries>,
    batch: IndexBatch,
}

impl std::fmt::Debug for IndexerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexerState")
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub(crate) struct Indexer;

/// Pages read from the queue at a time while catching up.
const BACKLOG_PAGES: usize = 500;

impl Actor for Indexer {
    type Msg = IndexerMsg;
    type State = IndexerState;
    type Arguments = IndexerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: IndexerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let opener = args.opener.clone();
        let index = tokio::task::spawn_blocking(move || opener.open()).await??;
        myself.send_interval(args.commit_every / 2, || IndexerMsg::Tick);
        args.load.restart();
        let state = IndexerState {
            load: args.load,
            handed: 0,
            index: Arc::new(Mutex::new(index)),
            queries: args.queries,
            batch: IndexBatch::new(args.commit_pages, args.commit_every.as_millis() as Millis),
        };
        // The queue's backlog is read a chunk per message, so pages and
        // queries are answered in between.
        myself.cast(IndexerMsg::Backlog)?;
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            IndexerMsg::Pages(pages) => {
                state.handed += pages.len();
                add(state, pages).await?;
                if state.batch.due(now_ms()) || state.handed >= IndexerLoad::COMMIT_AT {
                    commit(state).await?;
                }
                if state.load.left_behind() {
                    myself.cast(IndexerMsg::Backlog)?;
                }
            }
            IndexerMsg::Tick => {
                if state.batch.due(now_ms()) {
                    commit(state).await?;
                }
                if state.load.left_behind() {
                    myself.cast(IndexerMsg::Backlog)?;
                }
            }
            IndexerMsg::Backlog => {
                if index_queued(state).await? == BACKLOG_PAGES {
                    myself.cast(IndexerMsg::Backlog)?;
                }
            }
            IndexerMsg::CatchUp(reply) => {
                commit(state).await?;
                while index_queued(state).await? > 0 {}
                let _ = reply.send(());
            }
            IndexerMsg::Search {
                query,
                limit,
                reply,
            } => {
                let index = state.index.clone();
                let answer =
                    tokio::task::spawn_blocking(move || lock(&index).search(&query, limit)).await?;
                let _ = reply.send(answer.map_err(|e| error_chain(&e)));
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // What is not committed stays in the queue for the next start.
        if !state.batch.is_empty() {
            commit(state).await?;
        }
        Ok(())
    }
}

fn lock(index: &Mutex<Box<dyn PageIndex>>) -> std::sync::MutexGuard<'_, Box<dyn PageIndex>> {
    // A panic inside the index left it as tantivy leaves a failed writer;
    // the indexer fails on its next error and its restart reopens it.
    index
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn add(state: &mut IndexerState, pages: Vec<PageText>) -> Result<(), ActorProcessingErr> {
    if pages.is_empty() {
        return Ok(());
    }
    let index = state.index.clone();
    let added = tokio::task::spawn_blocking(move || {
        let mut index = lock(&index);
        let mut added = Vec::with_capacity(pages.len());
        for page in pages {
            index.add(&page)?;
            added.push(page.url);
        }
        Ok::<_, IndexError>(added)
    })
    .await??;
    let now = now_ms();
    for url in added {
        state.batch.added(&url, now);
    }
    Ok(())
}

/// Commit the index, then forget the committed pages from the queue.
async fn commit(state: &mut IndexerState) -> Result<(), ActorProcessingErr> {
    if state.batch.is_empty() {
        return Ok(());
    }
    let index = state.index.clone();
    tokio::task::spawn_blocking(move || lock(&index).commit()).await??;
    state.load.taken(std::mem::take(&mut state.handed));
    let keys = state.batch.take();
    state.queries.delete_records(INDEX_QUEUE, &keys).await?;
    Ok(())
}

/// Index the first pages the queue holds and commit them; returns how
/// many were read.
async fn index_queued(state: &mut IndexerState) -> Result<usize, ActorProcessingErr> {
    let docs = state
        .queries
        .first_records(INDEX_QUEUE, BACKLOG_PAGES)
        .await?;
    let read = docs.len();
    let mut pages = Vec::with_capacity(read);
    let mut unreadable = Vec::new();
    for doc in docs {
        let key = doc.get("url").cloned();
        match PageText::from_document(&doc) {
            Ok(page) => pages.push(page),
            Err(why) => {
                tracing::warn!(%why, "a queued page cannot be read; it is dropped");
                let mut k = Document::new();
                if let Some(url) = key {
                    k.insert("url".into(), url);
                }
                unreadable.push(k);
            }
        }
    }
    if !unreadable.is_empty() {
        state
            .queries
            .delete_records(INDEX_QUEUE, &unreadable)
            .await?;
    }
    if !pages.is_empty() {
        tracing::info!(pages = pages.len(), "indexing pages the queue held");
    }
    add(state, pages).await?;
    commit(state).await?;
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_beyond_the_bound_wait_in_the_queue() {
        let load = IndexerLoad::default();
        assert!(load.admit(IndexerLoad::MAX_PAGES - 10));
        assert!(!load.admit(11), "over the bound: left in the queue");
        assert!(load.admit(10));
        load.taken(IndexerLoad::MAX_PAGES - 5);
        assert!(!load.left_behind(), "not caught up yet");
        load.taken(5);
        assert!(load.left_behind(), "caught up: read the queue");
        assert!(!load.left_behind(), "once");
        load.not_delivered(3);
        assert!(
            load.left_behind(),
            "undelivered pages are read from the queue"
        );
        assert!(load.admit(IndexerLoad::MAX_PAGES));
        load.restart();
        assert!(
            load.admit(IndexerLoad::MAX_PAGES),
            "a new indexer starts at 0"
        );
    }

    #[test]
    fn a_batch_commits_by_count_or_by_age() {
        let mut b = IndexBatch::new(3, 1_000);
        assert!(!b.due(0), "nothing to commit");
        b.added("http://h/1", 10);
        b.added("http://h/2", 500);
        assert!(!b.due(1_009));
        assert!(b.due(1_010), "the first page waited a second");
        b.added("http://h/3", 1_010);
        let keys = b.take();
        assert_eq!(keys.len(), 3);
        assert_eq!(keys[2].get("url").unwrap(), "http://h/3");
        assert!(b.is_empty() && !b.due(100_000), "a new batch starts empty");
        for n in 0..3 {
            b.added(&format!("http://h/{n}"), 0);
        }
        assert!(b.due(0), "three pages are a batch");
    }
}
