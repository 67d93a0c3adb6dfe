//! `Indexer`: keeps this node's shard of the full-text index. Pages wait
//! in the node's [`IndexQueue`]: on the master's node the store's
//! [`INDEX_QUEUE`] (written with their processed rows, one commit), on a
//! worker a backlog file beside its shard (pushed by the pool before it
//! reports the pages); only a note that some were queued reaches the
//! indexer (`IndexerMsg::Queued`). The indexer reads the queue a chunk at a time,
//! adds the pages on a thread of its own at a low OS priority
//! (`IndexThread`: indexing takes the CPU that fetching leaves, and
//! catches up when the crawl is done), commits by count and by time
//! ([`IndexCycle`]), and only after a commit removes the committed pages
//! from the queue. At its start (so at every restart) it reads the queue
//! from its head: pages processed while it was down, or added but not
//! committed when it crashed. Memory is one chunk of pages and the index
//! writer's arena, however far behind the index is.
//!
//! The actor never waits for the index: reads, adds and commits run as
//! tasks that report back, so queries (answered by a read handle, at
//! normal priority) and catch-up requests are taken at once. It is in the
//! process group [`SHARD_GROUP`], where a query across the cluster finds
//! every node's shard (`IndexerMsg::Shard`, a call from any node).

use crate::behaviour::index::{
    INDEX_QUEUE, IndexError, IndexOpener, IndexQueue, PageIndex, PageSearch, PageText,
};
use crate::behaviour::{Document, Queries, StoreError, error_chain};
use crate::protocol::{IndexerMsg, SHARD_GROUP, ShardAnswer, ShardRequest, ShardStep};
use crate::types::{IndexCounts, Millis, now_ms};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Pages read from the queue and added at a time: a few MB of text.
const CHUNK_PAGES: usize = 100;

/// Pages queued for the index and pages it has committed, shared by the
/// master (which counts pages in as it writes them to the queue) and the
/// indexer (which counts them out at each commit): "indexed N of M".
#[derive(Debug, Default)]
pub(crate) struct IndexProgress {
    queued: AtomicU64,
    indexed: AtomicU64,
}

impl IndexProgress {
    pub(crate) fn queued(&self, pages: u64) {
        self.queued.fetch_add(pages, Ordering::Relaxed);
    }

    fn indexed(&self, pages: u64) {
        self.indexed.fetch_add(pages, Ordering::Relaxed);
        // Pages of a backlog found at start were queued by an earlier run.
        self.queued
            .fetch_max(self.indexed.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    pub(crate) fn counts(&self) -> IndexCounts {
        IndexCounts {
            indexed: self.indexed.load(Ordering::Relaxed),
            queued: self.queued.load(Ordering::Relaxed),
        }
    }
}

/// Pages added but not committed, and when a commit is due.
#[derive(Debug)]
pub struct IndexBatch {
    keys: Vec<Document>,
    /// Pages removed (no queue key to delete for them).
    removed: usize,
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
            removed: 0,
            first_at: None,
            max_pages: max_pages.max(1),
            max_wait_ms,
        }
    }

    /// A page was added to the index.
    pub fn added(&mut self, key: Document, now: Millis) {
        self.keys.push(key);
        self.first_at.get_or_insert(now);
    }

    /// Pages were removed from the index.
    pub fn removed(&mut self, pages: usize, now: Millis) {
        self.removed += pages;
        self.first_at.get_or_insert(now);
    }

    pub fn due(&self, now: Millis) -> bool {
        self.keys.len() + self.removed >= self.max_pages
            || self
                .first_at
                .is_some_and(|at| now.saturating_sub(at) >= self.max_wait_ms)
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.removed == 0
    }

    /// The queue keys of the pages a commit made durable.
    pub fn take(&mut self) -> Vec<Document> {
        self.first_at = None;
        self.removed = 0;
        std::mem::take(&mut self.keys)
    }
}

/// What the indexer does next.
#[derive(Clone, Debug, PartialEq)]
pub enum IndexStep {
    /// Read the next chunk of the queue, after this key (from its head
    /// with `None`), and add it.
    Read { after: Option<Document> },
    /// Commit what was added, then remove it from the queue.
    Commit,
    /// Remove the pages this shard was told to drop, from the queue and
    /// from the index (between reads: a page read is added before).
    Remove,
}

/// The indexer's rules, pure: where its read of the queue is, what is
/// added and not committed, whether a step is running, and whether it was
/// asked to catch up. One step runs at a time.
#[derive(Debug)]
pub struct IndexCycle {
    batch: IndexBatch,
    /// The last key read since the last commit: reads go on after it.
    cursor: Option<Document>,
    /// The queue may hold pages not read yet.
    more: bool,
    running: bool,
    /// Asked to index everything queued: commit as soon as the queue is read.
    catching_up: bool,
    /// Pages to drop wait.
    removing: bool,
}

impl IndexCycle {
    /// A new indexer reads the queue from its head.
    pub fn new(batch: IndexBatch) -> Self {
        Self {
            batch,
            cursor: None,
            more: true,
            running: false,
            catching_up: false,
            removing: false,
        }
    }

    /// Pages are to be dropped: the next step removes them.
    pub fn forget(&mut self) {
        self.removing = true;
    }

    /// The master queued pages.
    pub fn queued(&mut self) {
        self.more = true;
    }

    /// Asked to make everything queued searchable.
    pub fn catch_up(&mut self) {
        self.catching_up = true;
        self.more = true;
    }

    /// The step to start now, if any (it is then running).
    pub fn next(&mut self, now: Millis) -> Option<IndexStep> {
        if self.running {
            return None;
        }
        let drained = !self.more && (self.catching_up || self.batch.due(now));
        let step = if self.removing {
            self.removing = false;
            IndexStep::Remove
        } else if !self.batch.is_empty() && (self.batch.due(now) || drained) {
            IndexStep::Commit
        } else if self.more {
            IndexStep::Read {
                after: self.cursor.clone(),
            }
        } else {
            return None;
        };
        self.running = true;
        Some(step)
    }

    /// A read returned `read` pages and added those keyed `added` (a page
    /// that could not be read is not added, and is removed at the commit).
    pub fn read_done(&mut self, keys: Vec<Document>, read: usize, now: Millis) {
        self.running = false;
        self.more = read >= CHUNK_PAGES;
        if let Some(last) = keys.last() {
            self.cursor = Some(last.clone());
        }
        for key in keys {
            self.batch.added(key, now);
        }
    }

    /// A removal is done: `pages` were removed from the index (a commit
    /// makes it durable).
    pub fn removed(&mut self, pages: usize, now: Millis) {
        self.running = false;
        self.batch.removed(pages, now);
    }

    /// The keys a commit is about to make durable.
    pub fn to_commit(&mut self) -> Vec<Document> {
        self.batch.take()
    }

    /// A commit is done: the next read starts at the queue's head again
    /// (pages queued behind the cursor meanwhile are there).
    pub fn commit_done(&mut self) {
        self.running = false;
        self.cursor = None;
        self.more = true;
    }

    /// Nothing queued is left unindexed and nothing runs: answer those
    /// waiting for a catch-up.
    pub fn caught_up(&mut self) -> bool {
        let done = self.catching_up && !self.running && !self.more && self.batch.is_empty();
        if done {
            self.catching_up = false;
        }
        done
    }
}

type Job = Box<dyn FnOnce(&mut dyn PageIndex) + Send>;

/// The thread that owns the index writer, at a low OS priority (Erlang's
/// `process_flag(priority, low)`): it and the threads the index
/// library starts from it (tokenizing, merging) run on what fetching
/// leaves of the CPU. The thread ends, dropping the writer and its lock,
/// once every [`JobSender`] is dropped.
struct IndexThread {
    jobs: JobSender,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Sends work to the index thread.
#[derive(Clone)]
struct JobSender(Option<std::sync::mpsc::Sender<Job>>);

/// The index thread is gone (a panic there): the indexer fails and its
/// restart opens the index again.
#[derive(Debug, thiserror::Error)]
#[error("the index thread is gone")]
struct IndexThreadGone;

impl IndexThread {
    /// Start the thread and open the index on it.
    async fn start(
        opener: Arc<dyn IndexOpener>,
    ) -> Result<(Self, Arc<dyn PageSearch>), ActorProcessingErr> {
        let (jobs, inbox) = std::sync::mpsc::channel::<Job>();
        let (opened, open) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("indexer".into())
            .spawn(move || {
                lower_priority();
                let mut index = match opener.open() {
                    Ok(index) => {
                        let _ = opened.send(Ok(index.searcher()));
                        index
                    }
                    Err(e) => {
                        let _ = opened.send(Err(e));
                        return;
                    }
                };
                for job in inbox {
                    job(index.as_mut());
                }
            })?;
        let searcher = open.await.map_err(|_| IndexThreadGone)??;
        Ok((
            Self {
                jobs: JobSender(Some(jobs)),
                thread: Some(thread),
            },
            searcher,
        ))
    }

    fn run_handle(&self) -> JobSender {
        self.jobs.clone()
    }

    /// End the thread once the jobs sent are done, and wait until the
    /// writer (and its lock) is dropped.
    async fn stop(&mut self) {
        self.jobs = JobSender(None);
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl JobSender {
    /// Run `job` on the index thread and wait for its answer.
    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut dyn PageIndex) -> T + Send + 'static,
    ) -> Result<T, IndexThreadGone> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |index| {
            let _ = tx.send(job(index));
        });
        self.0
            .as_ref()
            .ok_or(IndexThreadGone)?
            .send(job)
            .map_err(|_| IndexThreadGone)?;
        rx.await.map_err(|_| IndexThreadGone)
    }
}

/// This thread (and the threads it starts) at nice 10: low enough that
/// fetching wins a core whenever it wants one, not so low (`SCHED_IDLE`)
/// that a busy machine starves the index for minutes. Where that is
/// refused, it stays as it is (indexing then competes with fetching, as
/// any thread does).
fn lower_priority() {
    use thread_priority::{
        NormalThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id,
    };
    // The crate maps 0..=99 onto nice 19..=-20: 22 is nice 10.
    let Ok(value) = ThreadPriorityValue::try_from(22u8) else {
        return;
    };
    let policy = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other);
    if let Err(e) = set_thread_priority_and_policy(
        thread_native_id(),
        ThreadPriority::Crossplatform(value),
        policy,
    ) {
        tracing::debug!(error = ?e, "the index thread keeps its priority");
    }
}

/// The master's node's [`IndexQueue`]: the store's [`INDEX_QUEUE`]
/// collection, which the master writes with the pages' processed rows.
#[derive(Debug)]
pub(crate) struct StoreQueue(pub(crate) Arc<dyn Queries>);

#[async_trait::async_trait]
impl IndexQueue for StoreQueue {
    async fn first(
        &self,
        after: Option<&Document>,
        limit: usize,
    ) -> Result<Vec<Document>, StoreError> {
        self.0.first_records(INDEX_QUEUE, after, limit).await
    }

    async fn delete(&self, keys: &[Document]) -> Result<u64, StoreError> {
        self.0.delete_records(INDEX_QUEUE, keys).await
    }
}

pub(crate) struct IndexerArgs {
    pub(crate) progress: Arc<IndexProgress>,
    pub(crate) opener: Arc<dyn IndexOpener>,
    pub(crate) queue: Arc<dyn IndexQueue>,
    pub(crate) commit_every: Duration,
    pub(crate) commit_pages: usize,
}

impl std::fmt::Debug for IndexerArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexerArgs").finish_non_exhaustive()
    }
}

pub(crate) struct IndexerState {
    progress: Arc<IndexProgress>,
    thread: IndexThread,
    searcher: Arc<dyn PageSearch>,
    queue: Arc<dyn IndexQueue>,
    cycle: IndexCycle,
    waiting: Vec<RpcReplyPort<()>>,
    /// Pages this shard was told to drop, for the next removal.
    forgotten: Vec<String>,
}

impl std::fmt::Debug for IndexerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexerState")
            .field("cycle", &self.cycle)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub(crate) struct Indexer;

impl Actor for Indexer {
    type Msg = IndexerMsg;
    type State = IndexerState;
    type Arguments = IndexerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: IndexerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let (thread, searcher) = IndexThread::start(args.opener).await?;
        myself.send_interval(args.commit_every / 2, || IndexerMsg::Tick);
        let batch = IndexBatch::new(args.commit_pages, args.commit_every.as_millis() as Millis);
        // The queue is read from its head: what an earlier indexer left.
        myself.cast(IndexerMsg::Tick)?;
        // Queries across the cluster find this node's shard in the group.
        ractor::pg::join(SHARD_GROUP.to_string(), vec![myself.get_cell()]);
        Ok(IndexerState {
            progress: args.progress,
            thread,
            searcher,
            queue: args.queue,
            cycle: IndexCycle::new(batch),
            waiting: Vec::new(),
            forgotten: Vec::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            IndexerMsg::Queued => state.cycle.queued(),
            IndexerMsg::Tick => {}
            IndexerMsg::Read(read) => {
                let (keys, count) = read.map_err(|e| -> ActorProcessingErr { e.into() })?;
                state.cycle.read_done(keys, count, now_ms());
            }
            IndexerMsg::Committed(keys) => {
                let keys = keys.map_err(|e| -> ActorProcessingErr { e.into() })?;
                state.queue.delete(&keys).await?;
                state.progress.indexed(keys.len() as u64);
                state.cycle.commit_done();
            }
            IndexerMsg::CatchUp(reply) => {
                state.waiting.push(reply);
                state.cycle.catch_up();
            }
            IndexerMsg::Forget(urls) => {
                state.forgotten.extend(urls);
                state.cycle.forget();
            }
            IndexerMsg::Removed(removed) => {
                let count = removed.map_err(|e| -> ActorProcessingErr { e.into() })?;
                state.cycle.removed(count, now_ms());
            }
            IndexerMsg::Shard { request, reply } => {
                let searcher = state.searcher.clone();
                tokio::spawn(async move {
                    let answer =
                        tokio::task::spawn_blocking(move || answer(searcher.as_ref(), request))
                            .await
                            .unwrap_or_else(|e| Err(format!("the search failed: {e}")));
                    let _ = reply.send(answer);
                });
            }
        }
        drive(&myself, state);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // A step still running finishes on the index thread before it
        // ends; what is not committed stays in the queue for the next start.
        state.thread.stop().await;
        Ok(())
    }
}

/// This shard's answer to one step of a query across the cluster.
fn answer(searcher: &dyn PageSearch, request: ShardRequest) -> Result<ShardAnswer, String> {
    let done = match request.step {
        ShardStep::Stats { phase, known } => searcher
            .stats(&request.query, phase, &known)
            .map(ShardAnswer::Stats),
        ShardStep::Top { stats } => searcher
            .top(&request.query, request.limit, &stats)
            .map(ShardAnswer::Top),
    };
    done.map_err(|e| error_chain(&e))
}

/// Start the cycle's next step as a task that reports back, and answer
/// the catch-up waiters once everything queued is searchable.
fn drive(myself: &ActorRef<IndexerMsg>, state: &mut IndexerState) {
    match state.cycle.next(now_ms()) {
        Some(IndexStep::Read { after }) => {
            let queue = state.queue.clone();
            let myself = myself.clone();
            let job = state.thread.run_handle();
            tokio::spawn(async move {
                let read = read_and_add(queue.as_ref(), &job, after).await;
                let _ = myself.cast(IndexerMsg::Read(read));
            });
        }
        Some(IndexStep::Remove) => {
            let urls = std::mem::take(&mut state.forgotten);
            let queue = state.queue.clone();
            let myself = myself.clone();
            let job = state.thread.run_handle();
            tokio::spawn(async move {
                let removed = remove(queue.as_ref(), &job, urls).await;
                let _ = myself.cast(IndexerMsg::Removed(removed));
            });
        }
        Some(IndexStep::Commit) => {
            let keys = state.cycle.to_commit();
            let myself = myself.clone();
            let job = state.thread.run_handle();
            tokio::spawn(async move {
                let done = match job.run(|index| index.commit()).await {
                    Ok(Ok(())) => Ok(keys),
                    Ok(Err(e)) => Err(error_chain(&e)),
                    Err(gone) => Err(gone.to_string()),
                };
                let _ = myself.cast(IndexerMsg::Committed(done));
            });
        }
        None => {}
    }
    if state.cycle.caught_up() {
        for reply in state.waiting.drain(..) {
            let _ = reply.send(());
        }
    }
}

/// Drop `urls` from the queue (a page not read yet is never added) and
/// from the index: how many.
async fn remove(
    queue: &dyn IndexQueue,
    job: &JobSender,
    urls: Vec<String>,
) -> Result<usize, String> {
    let keys: Vec<Document> = urls
        .iter()
        .map(|url| {
            let mut key = Document::new();
            key.insert("url".into(), url.as_str().into());
            key
        })
        .collect();
    queue.delete(&keys).await.map_err(|e| error_chain(&e))?;
    let count = urls.len();
    job.run(move |index| urls.iter().try_for_each(|url| index.remove(url)))
        .await
        .map_err(|gone| gone.to_string())?
        .map_err(|e| error_chain(&e))?;
    Ok(count)
}

/// Read the queue's next chunk after `after` and add its pages on the
/// index thread: the keys of the pages read (unreadable ones included, so
/// that the commit removes them), and how many records were read.
async fn read_and_add(
    queue: &dyn IndexQueue,
    job: &JobSender,
    after: Option<Document>,
) -> Result<(Vec<Document>, usize), String> {
    let docs = queue
        .first(after.as_ref(), CHUNK_PAGES)
        .await
        .map_err(|e| error_chain(&e))?;
    let read = docs.len();
    if read == 0 {
        return Ok((Vec::new(), 0));
    }
    let keys = job
        .run(move |index| {
            let mut keys = Vec::with_capacity(docs.len());
            for doc in docs {
                let mut key = Document::new();
                if let Some(url) = doc.get("url") {
                    key.insert("url".into(), url.clone());
                }
                match PageText::from_document(&doc) {
                    Ok(page) => index.add(&page)?,
                    Err(why) => {
                        tracing::warn!(%why, "a queued page cannot be read; it is dropped");
                    }
                }
                keys.push(key);
            }
            Ok::<_, IndexError>(keys)
        })
        .await
        .map_err(|gone| gone.to_string())?
        .map_err(|e| error_chain(&e))?;
    Ok((keys, read))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(url: &str) -> Document {
        let mut k = Document::new();
        k.insert("url".into(), url.into());
        k
    }

    fn keys(n: usize) -> Vec<Document> {
        (0..n).map(|i| key(&format!("http://h/{i:04}"))).collect()
    }

    #[test]
    fn a_batch_commits_by_count_or_by_age() {
        let mut b = IndexBatch::new(3, 1_000);
        assert!(!b.due(0), "nothing to commit");
        b.added(key("http://h/1"), 10);
        b.added(key("http://h/2"), 500);
        assert!(!b.due(1_009));
        assert!(b.due(1_010), "the first page waited a second");
        b.added(key("http://h/3"), 1_010);
        let keys = b.take();
        assert_eq!(keys.len(), 3);
        assert_eq!(keys[2].get("url").unwrap(), "http://h/3");
        assert!(b.is_empty() && !b.due(100_000), "a new batch starts empty");
        for n in 0..3 {
            b.added(key(&format!("http://h/{n}")), 0);
        }
        assert!(b.due(0), "three pages are a batch");
    }

    #[test]
    fn the_queue_is_read_on_from_the_last_key_until_a_commit() {
        let mut c = IndexCycle::new(IndexBatch::new(10_000, 2_000));
        assert_eq!(c.next(0), Some(IndexStep::Read { after: None }));
        assert_eq!(c.next(0), None, "one step at a time");
        let chunk = keys(CHUNK_PAGES);
        let last = chunk.last().cloned();
        c.read_done(chunk, CHUNK_PAGES, 0);
        assert_eq!(
            c.next(10),
            Some(IndexStep::Read { after: last }),
            "a full chunk: read on after its last key"
        );
        c.read_done(keys(3), 3, 10);
        assert_eq!(c.next(1_000), None, "read to the end; no commit due yet");
        assert_eq!(
            c.next(2_000),
            Some(IndexStep::Commit),
            "due two seconds after the first page"
        );
        assert_eq!(c.to_commit().len(), CHUNK_PAGES + 3);
        c.commit_done();
        assert_eq!(
            c.next(2_001),
            Some(IndexStep::Read { after: None }),
            "after a commit the queue is read from its head again"
        );
        c.read_done(Vec::new(), 0, 2_001);
        assert_eq!(c.next(5_000), None, "nothing queued, nothing to commit");
        c.queued();
        assert!(matches!(c.next(5_000), Some(IndexStep::Read { .. })));
    }

    #[test]
    fn a_catch_up_commits_once_the_queue_is_read() {
        let mut c = IndexCycle::new(IndexBatch::new(10_000, 60_000));
        c.catch_up();
        assert!(!c.caught_up());
        assert!(matches!(c.next(0), Some(IndexStep::Read { .. })));
        c.read_done(keys(5), 5, 0);
        assert!(!c.caught_up(), "added, not committed");
        assert_eq!(c.next(1), Some(IndexStep::Commit), "no wait for the age");
        c.to_commit();
        c.commit_done();
        assert!(!c.caught_up(), "the queue is read once more after a commit");
        assert!(matches!(c.next(2), Some(IndexStep::Read { after: None })));
        c.read_done(Vec::new(), 0, 2);
        assert_eq!(c.next(3), None);
        assert!(c.caught_up(), "everything queued is committed");
        assert!(!c.caught_up(), "answered once");
    }

    #[test]
    fn pages_removed_are_committed_by_age_with_no_queue_key() {
        let mut c = IndexCycle::new(IndexBatch::new(10_000, 2_000));
        assert!(matches!(c.next(0), Some(IndexStep::Read { .. })));
        c.forget();
        assert_eq!(
            c.next(50),
            None,
            "after the read running: its pages are added first"
        );
        c.read_done(Vec::new(), 0, 50);
        assert_eq!(c.next(100), Some(IndexStep::Remove));
        assert_eq!(c.next(100), None, "one step at a time");
        c.removed(1, 100);
        assert_eq!(c.next(2_099), None, "not due yet");
        assert_eq!(c.next(2_100), Some(IndexStep::Commit));
        assert!(c.to_commit().is_empty(), "nothing to delete from the queue");
        c.commit_done();
        c.next(2_101);
        c.read_done(Vec::new(), 0, 2_101);
        assert_eq!(c.next(10_000), None, "committed: nothing left");
    }

    #[test]
    fn a_full_batch_commits_between_reads() {
        let mut c = IndexCycle::new(IndexBatch::new(CHUNK_PAGES, 60_000));
        c.next(0);
        c.read_done(keys(CHUNK_PAGES), CHUNK_PAGES, 0);
        assert_eq!(
            c.next(1),
            Some(IndexStep::Commit),
            "by count, before reading on"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_index_thread_runs_at_its_nice_value() {
        let nice = std::thread::spawn(|| {
            lower_priority();
            let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
            // The fields after the command's closing parenthesis; nice is
            // the 19th field of the line, the 17th of these.
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            rest.split(' ').nth(16).unwrap().parse::<i32>().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(nice, 10);
    }

    #[test]
    fn progress_counts_an_earlier_runs_backlog_once_indexed() {
        let p = IndexProgress::default();
        p.queued(10);
        p.indexed(4);
        assert_eq!(
            p.counts(),
            IndexCounts {
                indexed: 4,
                queued: 10
            }
        );
        assert_eq!(p.counts().backlog(), 6);
        p.indexed(20);
        assert_eq!(p.counts().backlog(), 0, "more indexed than this run queued");
    }
}
