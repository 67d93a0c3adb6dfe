//! Property tests of the index queue's log read back after a crash: its
//! last segment cut anywhere, extended with zeros (what a file system may
//! leave after a power cut) or with garbage, or with a byte flipped in its
//! last frames. Reopened, the log is cut back to its last whole, intact
//! entry; every entry before that reads back as written; appends go on.

use super::*;
use crate::proptest_cases::config;
use proptest::prelude::*;

/// One entry to append: a page (its packed bytes as they are) or a forget.
#[derive(Debug, Clone)]
enum Written {
    Page(String, Vec<u8>),
    Forget(String),
}

fn written() -> impl Strategy<Value = Written> {
    prop_oneof![
        3 => ("http://h/[a-z0-9é]{0,12}", prop::collection::vec(any::<u8>(), 0..200))
            .prop_map(|(url, packed)| Written::Page(url, packed)),
        1 => "http://h/[a-z]{0,8}".prop_map(Written::Forget),
    ]
}

#[derive(Debug, Clone)]
enum Tail {
    /// Cut to this many bytes (modulo the length).
    Cut(usize),
    Zeros(usize),
    Garbage(Vec<u8>),
    /// A byte of the last frames flipped: (position back from the end, mask).
    Flip(usize, u8),
}

fn tail() -> impl Strategy<Value = Tail> {
    prop_oneof![
        any::<usize>().prop_map(Tail::Cut),
        (1usize..64).prop_map(Tail::Zeros),
        prop::collection::vec(any::<u8>(), 1..64).prop_map(Tail::Garbage),
        (1usize..64, 1..=255u8).prop_map(|(back, mask)| Tail::Flip(back, mask)),
    ]
}

fn frames_of(entries: &[Written]) -> Vec<u8> {
    let mut frames = Vec::new();
    for entry in entries {
        match entry {
            Written::Page(url, packed) => frame(&mut frames, KIND_PAGE, url, packed),
            Written::Forget(url) => frame(&mut frames, KIND_FORGET, url, &[]),
        }
    }
    frames
}

/// How an entry reads back.
fn as_written(entry: &QueueEntry) -> Written {
    match entry {
        QueueEntry::Page(page) => Written::Page(page.url.clone(), page.packed.clone()),
        QueueEntry::Forget(url) => Written::Forget(url.clone()),
    }
}

fn same(a: &[Written], b: &[Written]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|pair| match pair {
            (Written::Page(u1, p1), Written::Page(u2, p2)) => u1 == u2 && p1 == p2,
            (Written::Forget(u1), Written::Forget(u2)) => u1 == u2,
            _ => false,
        })
}

/// Entries read from the head on; forgets are read as entries too (the
/// pages they forget are in memory only, gone after a reopen).
fn read_all(queue: &IndexQueueLog) -> Result<Vec<Written>, StoreError> {
    Ok(queue
        .read_from(None, usize::MAX)?
        .entries
        .iter()
        .map(as_written)
        .collect())
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn a_damaged_tail_is_cut_back_to_the_last_intact_entry(
        entries in prop::collection::vec(written(), 1..8),
        tail in tail(),
        after in written(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let frames = frames_of(&entries);
        // Where each entry's frame ends.
        let mut ends = Vec::new();
        let mut end = 0;
        for entry in &entries {
            end += frames_of(std::slice::from_ref(entry)).len();
            ends.push(end);
        }
        {
            let queue = IndexQueueLog::open(tmp.path()).unwrap();
            queue.append(&frames, Vec::new()).unwrap();
        }
        let segment = segment_path(tmp.path(), 0);
        let mut bytes = fs::read(&segment).unwrap();
        // The first byte that is not as written, if any.
        let damaged_at = match &tail {
            Tail::Cut(n) => {
                let keep = n % (bytes.len() + 1);
                bytes.truncate(keep);
                keep
            }
            Tail::Zeros(n) => {
                bytes.extend(std::iter::repeat_n(0, *n));
                frames.len()
            }
            Tail::Garbage(garbage) => {
                bytes.extend_from_slice(garbage);
                frames.len()
            }
            Tail::Flip(back, mask) => {
                let at = bytes.len().saturating_sub(*back);
                bytes[at] ^= mask;
                at
            }
        };
        fs::write(&segment, &bytes).unwrap();
        let queue = IndexQueueLog::open(tmp.path()).unwrap();
        let read = read_all(&queue).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        // The entries whose frames end before the damage are all there;
        // one the damage touched is not (a flip cannot pass the checksum).
        let whole = ends.iter().filter(|&&e| e <= damaged_at).count();
        prop_assert!(same(&read, &entries[..whole]), "read {:?}, wrote {:?}", read, &entries[..whole]);
        // Appends go on after the cut, and a reopen reads the same.
        queue.append(&frames_of(std::slice::from_ref(&after)), Vec::new()).unwrap();
        let mut expected = entries[..whole].to_vec();
        expected.push(after);
        let read = read_all(&queue).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert!(same(&read, &expected), "after an append: {:?}", read);
        drop(queue);
        let reopened = IndexQueueLog::open(tmp.path()).unwrap();
        let read = read_all(&reopened).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert!(same(&read, &expected), "after a reopen: {:?}", read);
    }
}

/// Found by `a_damaged_tail_is_cut_back_to_the_last_intact_entry`: eight
/// zero bytes after the last frame are a frame of no payload with a right
/// checksum (CRC-32 of nothing is 0). The open kept them, and every read
/// after failed with "an empty frame": the indexer could not go on.
#[test]
fn zeros_after_the_last_frame_are_cut_off_not_read_as_an_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let entry = Written::Page("http://h/".into(), Vec::new());
    {
        let queue = IndexQueueLog::open(tmp.path()).unwrap();
        queue
            .append(&frames_of(std::slice::from_ref(&entry)), Vec::new())
            .unwrap();
    }
    let segment = segment_path(tmp.path(), 0);
    let mut bytes = fs::read(&segment).unwrap();
    bytes.extend([0; 8]);
    fs::write(&segment, &bytes).unwrap();
    let queue = IndexQueueLog::open(tmp.path()).unwrap();
    assert!(same(&read_all(&queue).unwrap(), &[entry]));
    assert_eq!(
        fs::metadata(&segment).unwrap().len() as usize,
        bytes.len() - 8
    );
}
