//! [`IndexQueueLog`]: a node's durable queue of pages for its index shard,
//! an append-only log on the node's disk (`DIR.queue/` beside the shard
//! `DIR`). The node's pool appends each page before it reports it; the
//! indexer reads the log in order and, once its index has committed what
//! it read, marks it done. A node killed with -9 and started again reads
//! on from the first entry not done: nothing fetched is lost, nothing
//! committed is read again.
//!
//! Pages are a crawl's largest writes, made on the fetch path and read
//! once. A log takes them for the cost of a `write`: no B-tree, no second
//! copy in a WAL, no delete per page (whole files go once they are done).
//!
//! On disk: segment files named by the position of their first byte
//! (`00000000000000000000.log`; positions count bytes over all segments
//! ever written), each a run of frames `[length u32][crc32 u32][payload]`,
//! and `head`, the position of the first entry not done. A frame cut short
//! by a crash (or failing its checksum) ends the log: it is cut off at the
//! next open.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use web_crawler_actors::{IndexQueue, QueueEntry, QueuePos, QueueRead, QueuedPage, StoreError};

/// A segment is closed and a new one begun past this size; a segment is
/// deleted once every entry in it is done.
const SEGMENT_BYTES: u64 = 64 << 20;
/// Frame header: payload length and its CRC-32.
const HEADER: usize = 8;
/// No entry is larger (a page's text is at most 256 KB before compression).
const MAX_PAYLOAD: u32 = 64 << 20;
const KIND_PAGE: u8 = 1;
const KIND_FORGET: u8 = 2;

/// The queue directory of the shard in `index_dir`: `DIR.queue` beside it
/// (so that `index rebuild`, which makes the directory anew, leaves it).
pub fn queue_dir_for(index_dir: &Path) -> PathBuf {
    let mut path = index_dir.as_os_str().to_owned();
    path.push(".queue");
    PathBuf::from(path)
}

/// Bytes of the queue in `dir` not done yet, read from its files without
/// opening it (another process may be writing it): 0 for no queue.
pub fn queue_waiting_bytes(dir: &Path) -> Result<u64, StoreError> {
    let fail = |e: io::Error| refused(dir, e);
    let segments = match segment_starts(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        other => other.map_err(fail)?,
    };
    let Some(&last) = segments.last() else {
        return Ok(0);
    };
    let end = last + fs::metadata(segment_path(dir, last)).map_err(fail)?.len();
    Ok(end.saturating_sub(head_in(dir)?.unwrap_or(0)))
}

/// A shard's queue (see the module doc).
#[derive(Debug, Clone)]
pub struct IndexQueueLog {
    dir: PathBuf,
    log: Arc<Mutex<Log>>,
}

#[derive(Debug)]
struct Log {
    /// Start positions of the segments, oldest first; the last is written.
    segments: Vec<QueuePos>,
    /// The segment being written, open for appending.
    writer: File,
    /// The position after the last whole frame.
    end: QueuePos,
    /// The first entry not done.
    head: QueuePos,
    /// Closed with nothing waiting: the files are gone until a push.
    closed: bool,
    /// URLs forgotten by entries not done yet, with the position after
    /// the last such entry: a page queued before it is read and left out
    /// (see [`QueueRead::skipped`]). In memory only: after a restart such a
    /// page is added and then removed, as it would be without this.
    forgotten: HashMap<String, QueuePos>,
}

impl IndexQueueLog {
    /// Open (or create) the queue in `dir`, cutting off a frame a crash
    /// left half written.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let fail = |e: io::Error| refused(dir, e);
        fs::create_dir_all(dir).map_err(fail)?;
        let mut segments = segment_starts(dir).map_err(fail)?;
        let head = match head_in(dir)? {
            Some(head) => head,
            None => segments.first().copied().unwrap_or(0),
        };
        if segments.is_empty() {
            segments.push(head);
        }
        let last = *segments.last().unwrap_or(&head);
        let path = segment_path(dir, last);
        let writer = open_segment(dir, last).map_err(fail)?;
        let whole = whole_frames(&writer).map_err(fail)?;
        if whole < writer.metadata().map_err(fail)?.len() {
            tracing::warn!(path = %path.display(), "the index queue ends in a frame cut short; it is cut off");
            writer.set_len(whole).map_err(fail)?;
        }
        let mut log = Log {
            segments,
            writer,
            end: last + whole,
            head: head.min(last + whole),
            closed: false,
            forgotten: HashMap::new(),
        };
        log.drop_done(dir).map_err(fail)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            log: Arc::new(Mutex::new(log)),
        })
    }

    fn lock(&self) -> Result<MutexGuard<'_, Log>, StoreError> {
        self.log
            .lock()
            .map_err(|_| StoreError::backend("the index queue's lock", "poisoned"))
    }

    fn error(&self, e: io::Error) -> StoreError {
        StoreError::backend(format!("the index queue {}", self.dir.display()), e)
    }

    /// Append `frames`; those that forget pages forget `forgotten`.
    fn append(&self, frames: &[u8], forgotten: Vec<String>) -> Result<(), StoreError> {
        if frames.is_empty() {
            return Ok(());
        }
        let mut log = self.lock()?;
        if log.closed {
            fs::create_dir_all(&self.dir).map_err(|e| self.error(e))?;
            log.segments.clear();
            log.roll(&self.dir).map_err(|e| self.error(e))?;
            log.closed = false;
        }
        if log.end - log.segments.last().copied().unwrap_or(0) >= SEGMENT_BYTES {
            log.roll(&self.dir).map_err(|e| self.error(e))?;
        }
        // One write: a crash keeps a prefix of it, whose whole frames count.
        log.writer.write_all(frames).map_err(|e| self.error(e))?;
        log.end += frames.len() as u64;
        let end = log.end;
        log.forgotten
            .extend(forgotten.into_iter().map(|url| (url, end)));
        Ok(())
    }

    fn read_from(&self, from: Option<QueuePos>, limit: usize) -> Result<QueueRead, StoreError> {
        let (segments, end, head) = {
            let log = self.lock()?;
            (log.segments.clone(), log.end, log.head)
        };
        let mut at = from.unwrap_or(head).max(head);
        // Each frame with its position, read without the lock (appends go on).
        let mut frames = Vec::new();
        while frames.len() < limit && at < end {
            // The segment holding `at`: the last that starts at or before it.
            let i = segments.partition_point(|&s| s <= at).saturating_sub(1);
            let start = segments[i];
            let seg_end = segments.get(i + 1).copied().unwrap_or(end);
            if at >= seg_end {
                at = seg_end;
                continue;
            }
            let file = File::open(segment_path(&self.dir, start)).map_err(|e| self.error(e))?;
            while frames.len() < limit && at < seg_end {
                let (entry, len) = read_frame(&file, at - start, seg_end - start)
                    .map_err(|e| self.error(e))?
                    .map_err(|why| {
                        StoreError::Corrupt(format!(
                            "the index queue {} at {at}: {why}",
                            self.dir.display()
                        ))
                    })?;
                frames.push((at, entry));
                at += len;
            }
        }
        // Then, under the lock once, the pages a later entry forgets.
        let log = self.lock()?;
        let forgotten_later = |at: QueuePos, entry: &QueueEntry| match entry {
            QueueEntry::Page(page) => log.forgotten.get(&page.url).is_some_and(|&f| f > at),
            QueueEntry::Forget(_) => false,
        };
        let read = frames.len();
        let entries: Vec<QueueEntry> = frames
            .into_iter()
            .filter(|(at, entry)| !forgotten_later(*at, entry))
            .map(|(_, entry)| entry)
            .collect();
        Ok(QueueRead {
            skipped: read - entries.len(),
            entries,
            next: at,
        })
    }

    /// Remove the queue's files if nothing waits (see [`IndexQueue::close`]).
    fn close_if_empty(&self) -> Result<(), StoreError> {
        let mut log = self.lock()?;
        if log.closed || log.head < log.end {
            return Ok(());
        }
        fs::remove_dir_all(&self.dir).map_err(|e| self.error(e))?;
        log.closed = true;
        Ok(())
    }

    fn mark_done(&self, upto: QueuePos) -> Result<(), StoreError> {
        let mut log = self.lock()?;
        if log.closed || upto <= log.head {
            return Ok(());
        }
        log.head = upto.min(log.end);
        let head = log.head;
        log.forgotten.retain(|_, &mut after| after > head);
        let tmp = self.dir.join("head.tmp");
        fs::write(&tmp, log.head.to_le_bytes()).map_err(|e| self.error(e))?;
        fs::rename(&tmp, self.dir.join("head")).map_err(|e| self.error(e))?;
        // A written segment that is all done is closed, so it can go.
        if log.head == log.end && log.end > log.segments.last().copied().unwrap_or(0) {
            log.roll(&self.dir).map_err(|e| self.error(e))?;
        }
        log.drop_done(&self.dir).map_err(|e| self.error(e))
    }
}

impl Log {
    /// Close the segment being written and begin one at `end`.
    fn roll(&mut self, dir: &Path) -> io::Result<()> {
        self.writer = open_segment(dir, self.end)?;
        self.segments.push(self.end);
        Ok(())
    }

    /// Delete the closed segments every entry of which is done.
    fn drop_done(&mut self, dir: &Path) -> io::Result<()> {
        while self.segments.len() > 1 && self.segments[1] <= self.head {
            let start = self.segments.remove(0);
            match fs::remove_file(segment_path(dir, start)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

fn segment_path(dir: &Path, start: QueuePos) -> PathBuf {
    dir.join(format!("{start:020}.log"))
}

/// The segment starting at `start`, open for appending (created if absent).
fn open_segment(dir: &Path, start: QueuePos) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(segment_path(dir, start))
}

/// The start positions of the segments in `dir`, oldest first.
fn segment_starts(dir: &Path) -> io::Result<Vec<QueuePos>> {
    let mut starts = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        if let Some(start) = name
            .to_string_lossy()
            .strip_suffix(".log")
            .and_then(|n| n.parse().ok())
        {
            starts.push(start);
        }
    }
    starts.sort_unstable();
    Ok(starts)
}

/// The first entry not done, as the `head` file in `dir` says (`None`:
/// none marked done yet).
fn head_in(dir: &Path) -> Result<Option<QueuePos>, StoreError> {
    match fs::read(dir.join("head")) {
        Ok(bytes) => bytes
            .try_into()
            .map(|b| Some(QueuePos::from_le_bytes(b)))
            .map_err(|_| StoreError::Corrupt(format!("{}: head is not 8 bytes", dir.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(refused(dir, e)),
    }
}

fn refused(dir: &Path, e: io::Error) -> StoreError {
    StoreError::refused(format!("the index queue {}", dir.display()), e)
}

/// Append the frame of one entry to `out`.
fn frame(out: &mut Vec<u8>, kind: u8, url: &str, packed: &[u8]) {
    let mut payload = Vec::with_capacity(1 + 4 + url.len() + packed.len());
    payload.push(kind);
    payload.extend_from_slice(&(url.len() as u32).to_le_bytes());
    payload.extend_from_slice(url.as_bytes());
    payload.extend_from_slice(packed);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
}

/// The frame at `offset` of a segment whose whole frames end at or
/// before `size`: its entry and its length, or why it is not one.
fn read_frame(
    file: &File,
    offset: u64,
    size: u64,
) -> io::Result<Result<(QueueEntry, u64), String>> {
    Ok(match intact_payload(file, offset, size)? {
        Some(payload) => {
            let len = (HEADER + payload.len()) as u64;
            entry_of(payload).map(|entry| (entry, len))
        }
        None => Err("a frame cut short or failing its checksum".into()),
    })
}

/// The payload of the frame at `offset`, if the frame is whole (ends at
/// or before `size`) and passes its checksum.
fn intact_payload(file: &File, offset: u64, size: u64) -> io::Result<Option<Vec<u8>>> {
    if offset + HEADER as u64 > size {
        return Ok(None);
    }
    let mut header = [0u8; HEADER];
    file.read_exact_at(&mut header, offset)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if len > MAX_PAYLOAD || offset + HEADER as u64 + u64::from(len) > size {
        return Ok(None);
    }
    let mut payload = vec![0u8; len as usize];
    file.read_exact_at(&mut payload, offset + HEADER as u64)?;
    Ok((crc32fast::hash(&payload) == crc).then_some(payload))
}

/// An entry's kind and URL, read from its payload (the packed page, if
/// any, follows the URL).
fn kind_and_url(payload: &[u8]) -> Result<(u8, &str), String> {
    let (&kind, rest) = payload.split_first().ok_or("an empty frame")?;
    let (len, rest) = rest
        .split_first_chunk::<4>()
        .ok_or("a frame without its URL")?;
    let len = u32::from_le_bytes(*len) as usize;
    if rest.len() < len {
        return Err("a frame shorter than its URL".into());
    }
    let url = std::str::from_utf8(&rest[..len]).map_err(|_| "a URL that is not UTF-8")?;
    if !matches!(kind, KIND_PAGE | KIND_FORGET) {
        return Err(format!("an entry of unknown kind {kind}"));
    }
    Ok((kind, url))
}

fn entry_of(mut payload: Vec<u8>) -> Result<QueueEntry, String> {
    let (kind, url) = kind_and_url(&payload)?;
    let url = url.to_string();
    if kind == KIND_FORGET {
        return Ok(QueueEntry::Forget(url));
    }
    // The packed page is the payload's tail: moved to its front in place
    // rather than copied into a buffer of its own.
    payload.drain(..1 + 4 + url.len());
    Ok(QueueEntry::Page(QueuedPage {
        url,
        packed: payload,
    }))
}

/// The length of the run of whole, intact frames at the start of `file`.
/// A frame must also hold an entry: zeros a file system left after a
/// power cut pass as a frame of no payload (whose CRC-32 is 0), and would
/// otherwise stop every later read.
fn whole_frames(file: &File) -> io::Result<u64> {
    let size = file.metadata()?.len();
    let mut at = 0;
    while let Some(payload) = intact_payload(file, at, size)? {
        if kind_and_url(&payload).is_err() {
            break;
        }
        at += (HEADER + payload.len()) as u64;
    }
    Ok(at)
}

#[web_crawler_actors::async_trait]
impl IndexQueue for IndexQueueLog {
    async fn push(&self, pages: Vec<QueuedPage>) -> Result<(), StoreError> {
        let mut frames = Vec::with_capacity(
            pages
                .iter()
                .map(|p| 13 + p.url.len() + p.packed.len())
                .sum(),
        );
        for page in &pages {
            frame(&mut frames, KIND_PAGE, &page.url, &page.packed);
        }
        // A write of a few KB to the page cache: not worth a thread hop.
        self.append(&frames, Vec::new())
    }

    async fn forget(&self, urls: Vec<String>) -> Result<(), StoreError> {
        let mut frames = Vec::new();
        for url in &urls {
            frame(&mut frames, KIND_FORGET, url, &[]);
        }
        self.append(&frames, urls)
    }

    async fn read(&self, from: Option<QueuePos>, limit: usize) -> Result<QueueRead, StoreError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.read_from(from, limit))
            .await
            .map_err(|e| StoreError::backend("the index queue's thread", e))?
    }

    async fn done(&self, upto: QueuePos) -> Result<(), StoreError> {
        self.mark_done(upto)
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.close_if_empty()
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;
    use web_crawler_actors::PageText;

    fn page(url: &str, body: &str) -> QueuedPage {
        let text = PageText {
            url: url.into(),
            title: "t".into(),
            body: body.into(),
            ..Default::default()
        };
        QueuedPage::of_record(&text.into_record()).unwrap()
    }

    fn urls(read: &QueueRead) -> Vec<String> {
        read.entries
            .iter()
            .map(|e| match e {
                QueueEntry::Page(p) => p.url.clone(),
                QueueEntry::Forget(url) => format!("forget {url}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn entries_are_read_in_order_and_done_ones_are_not_read_again_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = queue_dir_for(&dir.path().join("w1.index"));
        let queue = IndexQueueLog::open(&path).unwrap();
        queue
            .push(vec![page("http://h/b", "one"), page("http://h/a", "two")])
            .await
            .unwrap();
        queue.forget(vec!["http://h/b".into()]).await.unwrap();
        queue.push(vec![page("http://h/b", "again")]).await.unwrap();
        let first = queue.read(None, 2).await.unwrap();
        assert_eq!(urls(&first), ["http://h/a"]);
        assert_eq!(
            first.skipped, 1,
            "the first b is forgotten by a later entry"
        );
        let rest = queue.read(Some(first.next), 10).await.unwrap();
        assert_eq!(urls(&rest), ["forget http://h/b", "http://h/b"]);
        let QueueEntry::Page(last) = &rest.entries[1] else {
            unreachable!()
        };
        assert_eq!(last.text().unwrap().body, "again");
        assert_eq!(last.text().unwrap().url, "http://h/b");
        queue.done(first.next).await.unwrap();
        drop(queue);
        let queue = IndexQueueLog::open(&path).unwrap();
        let again = queue.read(None, 10).await.unwrap();
        assert_eq!(
            urls(&again),
            urls(&rest),
            "a reopened queue reads on from the first not done"
        );
        assert_eq!(again.next, rest.next);
        assert!(queue_waiting_bytes(&path).unwrap() > 0);
        queue.done(again.next).await.unwrap();
        assert_eq!(queue_waiting_bytes(&path).unwrap(), 0);
        assert!(queue.read(None, 10).await.unwrap().entries.is_empty());
    }

    #[tokio::test]
    async fn a_page_a_later_entry_forgets_is_left_out_while_the_queue_remembers_it() {
        let dir = tempfile::tempdir().unwrap();
        let queue = IndexQueueLog::open(dir.path()).unwrap();
        queue
            .push(vec![page("http://h/early", "read")])
            .await
            .unwrap();
        let early = queue.read(None, 10).await.unwrap();
        assert_eq!(urls(&early), ["http://h/early"]);
        queue
            .push(vec![
                page("http://h/dup", "one"),
                page("http://h/kept", "two"),
            ])
            .await
            .unwrap();
        queue
            .forget(vec!["http://h/early".into(), "http://h/dup".into()])
            .await
            .unwrap();
        queue
            .push(vec![page("http://h/dup", "again")])
            .await
            .unwrap();
        let rest = queue.read(Some(early.next), 10).await.unwrap();
        assert_eq!(
            urls(&rest),
            [
                "http://h/kept",
                "forget http://h/early",
                "forget http://h/dup",
                "http://h/dup"
            ],
            "the page read before its forget is removed by it; the one not read yet is left out; the one queued after stays"
        );
        assert_eq!(rest.skipped, 1);
        drop(queue);
        // A restart forgets what was forgotten: the page is read (and its
        // removal after it), as it was before the queue left pages out.
        let queue = IndexQueueLog::open(dir.path()).unwrap();
        let again = queue.read(None, 10).await.unwrap();
        assert_eq!(again.skipped, 0);
        assert_eq!(
            urls(&again)[..3],
            ["http://h/early", "http://h/dup", "http://h/kept"]
        );
        queue.forget(vec!["http://h/kept".into()]).await.unwrap();
        queue.done(again.next).await.unwrap();
        assert_eq!(
            queue.lock().unwrap().forgotten.len(),
            1,
            "a forget not done yet is remembered"
        );
        let last = queue.read(None, 10).await.unwrap();
        queue.done(last.next).await.unwrap();
        assert!(
            queue.lock().unwrap().forgotten.is_empty(),
            "done forgets are let go"
        );
    }

    #[tokio::test]
    async fn a_closed_queue_with_nothing_waiting_leaves_no_files_until_a_push() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.index.queue");
        let queue = IndexQueueLog::open(&path).unwrap();
        queue.push(vec![page("http://h/1", "one")]).await.unwrap();
        queue.close().await.unwrap();
        assert!(path.exists(), "a page waits: the files stay");
        let read = queue.read(None, 10).await.unwrap();
        queue.done(read.next).await.unwrap();
        queue.close().await.unwrap();
        assert!(!path.exists(), "nothing waits: no files");
        queue.push(vec![page("http://h/2", "two")]).await.unwrap();
        drop(queue);
        let queue = IndexQueueLog::open(&path).unwrap();
        assert_eq!(urls(&queue.read(None, 10).await.unwrap()), ["http://h/2"]);
    }

    #[tokio::test]
    async fn a_frame_cut_short_by_a_crash_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let queue = IndexQueueLog::open(dir.path()).unwrap();
        queue.push(vec![page("http://h/1", "kept")]).await.unwrap();
        let whole = queue.read(None, 10).await.unwrap().next;
        queue.push(vec![page("http://h/2", "cut")]).await.unwrap();
        drop(queue);
        // A crash in the middle of the second write.
        let segment = segment_path(dir.path(), 0);
        let len = fs::metadata(&segment).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&segment)
            .unwrap()
            .set_len(len - 5)
            .unwrap();
        let queue = IndexQueueLog::open(dir.path()).unwrap();
        let read = queue.read(None, 10).await.unwrap();
        assert_eq!(urls(&read), ["http://h/1"]);
        assert_eq!(read.next, whole);
        queue.push(vec![page("http://h/3", "after")]).await.unwrap();
        let read = queue.read(None, 10).await.unwrap();
        assert_eq!(
            urls(&read),
            ["http://h/1", "http://h/3"],
            "appends go on after the cut"
        );
    }

    #[tokio::test]
    async fn a_damaged_frame_is_an_error_not_a_page() {
        let dir = tempfile::tempdir().unwrap();
        let queue = IndexQueueLog::open(dir.path()).unwrap();
        queue
            .push(vec![page("http://h/1", "one"), page("http://h/2", "two")])
            .await
            .unwrap();
        // Flip a byte of the first frame's payload.
        let segment = segment_path(dir.path(), 0);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&segment)
            .unwrap();
        let mut byte = [0u8; 1];
        file.read_exact_at(&mut byte, 12).unwrap();
        file.write_all_at(&[byte[0] ^ 0xff], 12).unwrap();
        let err = queue.read(None, 10).await.unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    }

    #[tokio::test]
    async fn segments_roll_over_and_go_once_done() {
        let dir = tempfile::tempdir().unwrap();
        let queue = IndexQueueLog::open(dir.path()).unwrap();
        queue.push(vec![page("http://h/1", "one")]).await.unwrap();
        let one = queue.read(None, 10).await.unwrap().next;
        queue.push(vec![page("http://h/2", "two")]).await.unwrap();
        queue.done(one).await.unwrap();
        let segments = || {
            let mut names: Vec<String> = fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".log"))
                .collect();
            names.sort();
            names
        };
        assert_eq!(
            segments().len(),
            1,
            "a segment with an entry not done stays"
        );
        let all = queue.read(None, 10).await.unwrap();
        assert_eq!(urls(&all), ["http://h/2"]);
        queue.done(all.next).await.unwrap();
        assert_eq!(
            segments(),
            [format!("{:020}.log", all.next)],
            "all done: a new segment, the old one gone"
        );
        queue.push(vec![page("http://h/3", "three")]).await.unwrap();
        drop(queue);
        let queue = IndexQueueLog::open(dir.path()).unwrap();
        assert_eq!(urls(&queue.read(None, 10).await.unwrap()), ["http://h/3"]);
    }
}
