//! `Indexer`: keeps this node's shard of the full-text index. Pages wait
//! in the node's [`IndexQueue`], an append-only log on the node's disk
//! that its pool writes before it reports the pages; only a note that
//! some were queued reaches the indexer (`IndexerMsg::Queued`). The
//! indexer reads the queue in order, a chunk at a time, applies it on a
//! thread of its own at a low OS priority (`IndexThread`: indexing takes
//! the CPU that fetching leaves, and catches up when the crawl is done),
//! commits by count and by time ([`IndexCycle`]), and only after a commit
//! marks the committed entries done in the queue. At its start (so at
//! every restart) it reads the queue from the first entry not done: pages
//! processed while it was down, or added but not committed when it
//! crashed. Memory is one chunk of pages and the index writer's arena,
//! however far behind the index is.
//!
//! The actor never waits for the index: reads, adds and commits run as
//! tasks that report back, so queries (answered by a read handle, at
//! normal priority) and catch-up requests are taken at once. It is in the
//! process group [`SHARD_GROUP`], where a query across the cluster finds
//! every node's shard (`IndexerMsg::Shard`, a call from any node).

use crate::behaviour::index::{
    INDEX_QUEUE, IndexError, IndexOpener, IndexQueue, PageIndex, PageSearch, QueueEntry, QueuePos,
    QueuedPage,
};
use crate::behaviour::{Record, StoreError, error_chain};
use crate::fetch_load::{FetchLoad, fetching_cpu_ms};
use crate::protocol::{IndexerMsg, ReadChunk, SHARD_GROUP, ShardAnswer, ShardRequest, ShardStep};
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

/// A node's index queue as its pool and master see it: where they queue
/// pages, the counts `status` gives ("indexed N of M"), which they count
/// in and the node's indexer counts out, and the indexer they tell.
#[derive(Clone, Debug)]
pub(crate) struct IndexFeed {
    pub(crate) queue: Arc<dyn IndexQueue>,
    pub(crate) progress: Arc<IndexProgress>,
    /// The registered name of the node's indexer.
    pub(crate) indexer: String,
}

impl IndexFeed {
    /// Queue the pages that the [`INDEX_QUEUE`] records among `records`
    /// carry (one that cannot be read is left out, with a warning), count
    /// them in and tell the node's indexer.
    pub(crate) async fn push_records<'a>(
        &self,
        records: impl IntoIterator<Item = &'a Record>,
    ) -> Result<(), StoreError> {
        let pages: Vec<QueuedPage> = records
            .into_iter()
            .filter(|r| r.collection == INDEX_QUEUE)
            .filter_map(|r| {
                QueuedPage::of_record(r)
                    .map_err(|why| tracing::warn!(%why, "a page's text cannot be read; it is not indexed"))
                    .ok()
            })
            .collect();
        if pages.is_empty() {
            return Ok(());
        }
        let queued = pages.len() as u64;
        self.queue.push(pages).await?;
        self.progress.queued(queued);
        self.tell_indexer();
        Ok(())
    }

    /// Queue the drop of `urls` from this node's shard, behind the pages
    /// queued before; the indexer, up or not yet, reads it in turn.
    pub(crate) async fn forget(&self, urls: Vec<String>) -> Result<(), StoreError> {
        if urls.is_empty() {
            return Ok(());
        }
        self.queue.forget(urls).await?;
        self.tell_indexer();
        Ok(())
    }

    fn tell_indexer(&self) {
        if let Some(actor) = ActorRef::<IndexerMsg>::where_is(self.indexer.clone()) {
            let _ = actor.cast(IndexerMsg::Queued);
        }
    }
}

/// Entries applied but not committed, and when a commit is due.
#[derive(Debug)]
pub struct IndexBatch {
    entries: usize,
    pages: u64,
    /// Where the entries applied end: what a commit marks done.
    upto: Option<QueuePos>,
    first_at: Option<Millis>,
    max_pages: usize,
    max_wait_ms: Millis,
}

impl IndexBatch {
    /// Commit after `max_pages` entries, or `max_wait_ms` after the first
    /// uncommitted one, whichever comes first.
    pub fn new(max_pages: usize, max_wait_ms: Millis) -> Self {
        Self {
            entries: 0,
            pages: 0,
            upto: None,
            first_at: None,
            max_pages: max_pages.max(1),
            max_wait_ms,
        }
    }

    /// A read applied its entries.
    fn applied(&mut self, read: ReadChunk, now: Millis) {
        if read.entries == 0 {
            return;
        }
        self.entries += read.entries;
        self.pages += read.pages;
        self.upto = Some(read.next);
        self.first_at.get_or_insert(now);
    }

    pub fn due(&self, now: Millis) -> bool {
        self.entries >= self.max_pages
            || self
                .first_at
                .is_some_and(|at| now.saturating_sub(at) >= self.max_wait_ms)
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// What a commit makes durable: the pages added, and where the
    /// queue's entries it holds end.
    fn take(&mut self) -> Option<(u64, QueuePos)> {
        self.first_at = None;
        self.entries = 0;
        let pages = std::mem::take(&mut self.pages);
        self.upto.take().map(|upto| (pages, upto))
    }
}

/// What the indexer does next.
#[derive(Clone, Debug, PartialEq)]
pub enum IndexStep {
    /// Read the queue's next chunk from this position (from the first
    /// entry not done with `None`) and apply it.
    Read { from: Option<QueuePos> },
    /// Commit what was applied, then mark it done in the queue.
    Commit,
}

/// The indexer's rules, pure: where its read of the queue is, what is
/// applied and not committed, whether a step is running, and whether it
/// was asked to catch up. One step runs at a time.
#[derive(Debug)]
pub struct IndexCycle {
    batch: IndexBatch,
    /// Where the next read starts (`None`: where the queue says the
    /// entries not done start, as at a restart).
    cursor: Option<QueuePos>,
    /// The queue may hold entries not read yet (cleared when a read
    /// starts: what is queued while it runs sets it again).
    more: bool,
    running: bool,
    /// Asked to index everything queued: commit as soon as the queue is read.
    catching_up: bool,
}

impl IndexCycle {
    /// A new indexer reads the queue from its first entry not done.
    pub fn new(batch: IndexBatch) -> Self {
        Self {
            batch,
            cursor: None,
            more: true,
            running: false,
            catching_up: false,
        }
    }

    /// Entries were queued.
    pub fn queued(&mut self) {
        self.more = true;
    }

    /// Asked to make everything queued searchable.
    pub fn catch_up(&mut self) {
        self.catching_up = true;
        self.more = true;
    }

    /// The step to start now, if any (it is then running). While fetching
    /// is `yielded_to` (it keeps the machine busy), nothing more is read:
    /// the pages wait in the queue until it calms down or a catch-up is
    /// asked for.
    pub fn next(&mut self, now: Millis, yielded_to: bool) -> Option<IndexStep> {
        if self.running {
            return None;
        }
        let drained = !self.more && (self.catching_up || self.batch.due(now));
        let step = if !self.batch.is_empty() && (self.batch.due(now) || drained) {
            IndexStep::Commit
        } else if self.more && (self.catching_up || !yielded_to) {
            self.more = false;
            IndexStep::Read { from: self.cursor }
        } else {
            return None;
        };
        self.running = true;
        Some(step)
    }

    /// A read is done (a page that could not be read is not added, and is
    /// done at the commit all the same).
    pub(crate) fn read_done(&mut self, read: ReadChunk, now: Millis) {
        self.running = false;
        self.more |= read.entries >= CHUNK_PAGES;
        self.cursor = Some(read.next);
        self.batch.applied(read, now);
    }

    /// What a commit is about to make durable: the pages added and where
    /// the entries it holds end.
    pub fn to_commit(&mut self) -> Option<(u64, QueuePos)> {
        self.batch.take()
    }

    /// A commit is done. Reads go on from where they were: the queue is
    /// read in order, and what is queued meanwhile comes after.
    pub fn commit_done(&mut self) {
        self.running = false;
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

pub(crate) struct IndexerArgs {
    pub(crate) progress: Arc<IndexProgress>,
    pub(crate) opener: Arc<dyn IndexOpener>,
    pub(crate) queue: Arc<dyn IndexQueue>,
    pub(crate) commit_every: Duration,
    pub(crate) commit_pages: usize,
    /// Read nothing more while fetching keeps the machine busy.
    pub(crate) yield_to_fetching: bool,
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
    /// Sampled each tick when the indexer yields to fetching.
    load: Option<FetchLoad>,
    waiting: Vec<RpcReplyPort<()>>,
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
        // The queue is read from its first entry not done: what an earlier
        // indexer left.
        myself.cast(IndexerMsg::Tick)?;
        // Queries across the cluster find this node's shard in the group.
        ractor::pg::join(SHARD_GROUP.to_string(), vec![myself.get_cell()]);
        Ok(IndexerState {
            progress: args.progress,
            thread,
            searcher,
            queue: args.queue,
            cycle: IndexCycle::new(batch),
            load: args.yield_to_fetching.then(|| {
                FetchLoad::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
            }),
            waiting: Vec::new(),
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
            IndexerMsg::Tick => {
                if let Some(load) = &mut state.load {
                    let was = load.busy();
                    match (was, load.observe(fetching_cpu_ms(), now_ms())) {
                        (false, true) => tracing::info!(
                            "fetching keeps the machine busy: the index waits (its pages wait in its queue)"
                        ),
                        (true, false) => {
                            tracing::info!("fetching leaves CPU: the index catches up")
                        }
                        _ => {}
                    }
                }
            }
            IndexerMsg::Read(read) => {
                let read = read.map_err(|e| -> ActorProcessingErr { e.into() })?;
                state.cycle.read_done(read, now_ms());
            }
            IndexerMsg::Committed(pages) => {
                let pages = pages.map_err(|e| -> ActorProcessingErr { e.into() })?;
                state.progress.indexed(pages);
                state.cycle.commit_done();
            }
            IndexerMsg::CatchUp(reply) => {
                state.waiting.push(reply);
                state.cycle.catch_up();
            }
            IndexerMsg::Forget(urls) => {
                // Queued behind the pages queued before (a page read later
                // is removed after it is added), before a catch-up asked
                // after this is answered.
                match state.queue.forget(urls).await {
                    Ok(()) => state.cycle.queued(),
                    Err(e) => tracing::warn!(
                        error = %error_chain(&e),
                        "pages this shard was told to drop stay in it"
                    ),
                }
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
    let yielded_to = state.load.as_ref().is_some_and(FetchLoad::busy);
    match state.cycle.next(now_ms(), yielded_to) {
        Some(IndexStep::Read { from }) => {
            let queue = state.queue.clone();
            let myself = myself.clone();
            let job = state.thread.run_handle();
            tokio::spawn(async move {
                let read = read_and_apply(queue.as_ref(), &job, from).await;
                let _ = myself.cast(IndexerMsg::Read(read));
            });
        }
        Some(IndexStep::Commit) => {
            let commit = state.cycle.to_commit();
            let queue = state.queue.clone();
            let myself = myself.clone();
            let job = state.thread.run_handle();
            tokio::spawn(async move {
                let done = commit_and_mark(queue.as_ref(), &job, commit).await;
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

/// Commit what was applied, then mark its entries done in the queue: the
/// pages committed.
async fn commit_and_mark(
    queue: &dyn IndexQueue,
    job: &JobSender,
    commit: Option<(u64, QueuePos)>,
) -> Result<u64, String> {
    job.run(|index| index.commit())
        .await
        .map_err(|gone| gone.to_string())?
        .map_err(|e| error_chain(&e))?;
    let Some((pages, upto)) = commit else {
        return Ok(0);
    };
    queue.done(upto).await.map_err(|e| error_chain(&e))?;
    Ok(pages)
}

/// Read the queue's next chunk from `from` and apply it on the index
/// thread, in order: pages added, pages to forget removed.
async fn read_and_apply(
    queue: &dyn IndexQueue,
    job: &JobSender,
    from: Option<QueuePos>,
) -> Result<ReadChunk, String> {
    let read = queue
        .read(from, CHUNK_PAGES)
        .await
        .map_err(|e| error_chain(&e))?;
    let (skipped, next) = (read.skipped, read.next);
    // Entries read, those left out among them.
    let entries = read.entries.len() + skipped;
    if entries == 0 {
        return Ok(ReadChunk {
            entries,
            pages: 0,
            next,
        });
    }
    let pages = job
        .run(move |index| {
            // A page left out is done with, as one added is.
            let mut pages = skipped as u64;
            for entry in read.entries {
                match entry {
                    QueueEntry::Page(page) => match page.text() {
                        Ok(text) => {
                            index.add(text)?;
                            pages += 1;
                        }
                        Err(why) => {
                            tracing::warn!(url = %page.url, %why, "a queued page cannot be read; it is dropped");
                        }
                    },
                    QueueEntry::Forget(url) => index.remove(&url)?,
                }
            }
            Ok::<_, IndexError>(pages)
        })
        .await
        .map_err(|gone| gone.to_string())?
        .map_err(|e| error_chain(&e))?;
    Ok(ReadChunk {
        entries,
        pages,
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read of `entries` entries, all pages, ending at `next`.
    fn chunk(entries: usize, next: QueuePos) -> ReadChunk {
        ReadChunk {
            entries,
            pages: entries as u64,
            next,
        }
    }

    #[test]
    fn a_batch_commits_by_count_or_by_age() {
        let mut b = IndexBatch::new(3, 1_000);
        assert!(!b.due(0), "nothing to commit");
        b.applied(chunk(1, 100), 10);
        b.applied(chunk(1, 200), 500);
        assert!(!b.due(1_009));
        assert!(b.due(1_010), "the first page waited a second");
        b.applied(chunk(0, 200), 1_010);
        assert_eq!(b.take(), Some((2, 200)), "an empty read adds nothing");
        assert!(b.is_empty() && !b.due(100_000), "a new batch starts empty");
        b.applied(chunk(3, 500), 0);
        assert!(b.due(0), "three entries are a batch");
        let forgets = ReadChunk {
            entries: 2,
            pages: 0,
            next: 600,
        };
        let mut b = IndexBatch::new(10, 1_000);
        b.applied(forgets, 0);
        assert_eq!(
            b.take(),
            Some((0, 600)),
            "removals are committed and done like pages"
        );
    }

    #[test]
    fn the_queue_is_read_on_in_order_across_commits() {
        let mut c = IndexCycle::new(IndexBatch::new(10_000, 2_000));
        assert_eq!(c.next(0, false), Some(IndexStep::Read { from: None }));
        assert_eq!(c.next(0, false), None, "one step at a time");
        c.read_done(chunk(CHUNK_PAGES, 1_000), 0);
        assert_eq!(
            c.next(10, false),
            Some(IndexStep::Read { from: Some(1_000) }),
            "a full chunk: read on from where it ended"
        );
        c.read_done(chunk(3, 1_030), 10);
        assert_eq!(
            c.next(1_000, false),
            None,
            "read to the end; no commit due yet"
        );
        assert_eq!(
            c.next(2_000, false),
            Some(IndexStep::Commit),
            "due two seconds after the first page"
        );
        assert_eq!(c.to_commit(), Some((CHUNK_PAGES as u64 + 3, 1_030)));
        c.commit_done();
        assert_eq!(c.next(2_001, false), None, "nothing queued since");
        c.queued();
        assert_eq!(
            c.next(2_002, false),
            Some(IndexStep::Read { from: Some(1_030) }),
            "after a commit the queue is read on, not again from the start"
        );
        c.read_done(chunk(0, 1_030), 2_002);
        assert_eq!(
            c.next(5_000, false),
            None,
            "nothing queued, nothing to commit"
        );
    }

    #[test]
    fn a_catch_up_commits_once_the_queue_is_read() {
        let mut c = IndexCycle::new(IndexBatch::new(10_000, 60_000));
        c.catch_up();
        assert!(!c.caught_up());
        assert!(matches!(c.next(0, false), Some(IndexStep::Read { .. })));
        c.read_done(chunk(5, 50), 0);
        assert!(!c.caught_up(), "added, not committed");
        assert_eq!(
            c.next(1, false),
            Some(IndexStep::Commit),
            "no wait for the age"
        );
        c.to_commit();
        assert!(!c.caught_up(), "the commit runs");
        c.commit_done();
        assert_eq!(c.next(2, false), None);
        assert!(c.caught_up(), "everything queued is committed");
        assert!(!c.caught_up(), "answered once");
    }

    #[test]
    fn while_fetching_is_busy_nothing_is_read_but_a_catch_up_reads_all() {
        let mut c = IndexCycle::new(IndexBatch::new(10_000, 2_000));
        assert_eq!(c.next(0, true), None, "fetching first");
        assert_eq!(c.next(0, false), Some(IndexStep::Read { from: None }));
        c.read_done(chunk(CHUNK_PAGES, 1_000), 0);
        assert_eq!(
            c.next(2_000, true),
            Some(IndexStep::Commit),
            "what was read is committed"
        );
        c.to_commit();
        c.commit_done();
        assert_eq!(c.next(2_001, true), None);
        c.catch_up();
        assert_eq!(
            c.next(2_002, true),
            Some(IndexStep::Read { from: Some(1_000) }),
            "a catch-up does not wait"
        );
    }

    #[test]
    fn pages_queued_while_a_read_runs_are_read_next() {
        let mut c = IndexCycle::new(IndexBatch::new(10_000, 2_000));
        assert!(matches!(c.next(0, false), Some(IndexStep::Read { .. })));
        // The read took its look at the queue; a page is queued after it.
        c.queued();
        c.read_done(chunk(3, 30), 10);
        assert_eq!(
            c.next(20, false),
            Some(IndexStep::Read { from: Some(30) }),
            "a short read does not hide what was queued while it ran"
        );
        c.read_done(chunk(1, 40), 20);
        assert_eq!(c.next(30, false), None, "now read to the end");
    }

    #[test]
    fn a_full_batch_commits_between_reads() {
        let mut c = IndexCycle::new(IndexBatch::new(CHUNK_PAGES, 60_000));
        c.next(0, false);
        c.read_done(chunk(CHUNK_PAGES, 10), 0);
        assert_eq!(
            c.next(1, false),
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
            crate::fetch_load::cpu_and_nice(&stat).unwrap().1
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
