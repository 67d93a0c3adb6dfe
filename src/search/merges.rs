//! Which segments the index merges: tantivy's log-size tiers, with a cap
//! on what a merge makes. A merge reads every byte of the segments it
//! joins through the page cache mapped into the process (RSS, however
//! briefly), and tantivy's default policy goes on joining until one
//! segment holds the whole index: the index's size, mapped at once, and
//! all of it rewritten again and again as a crawl grows. Capped, a merge
//! touches at most about `max_docs` documents' worth of files, each byte
//! is rewritten a bounded number of times, and a search reads a few more
//! segments.

use tantivy::index::SegmentMeta;
use tantivy::indexer::{MergeCandidate, MergePolicy};

/// Segments of one tier merged at once.
const MERGE_FACTOR: usize = 8;
/// Segments under this many documents are all of the first tier.
const FIRST_TIER_DOCS: u32 = 1_000;
/// A segment with this share of its documents deleted (re-crawled pages)
/// is rewritten without them, however large.
const PURGE_DELETED_SHARE: f64 = 0.3;

/// What the policy knows of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentSize {
    pub(crate) alive: u32,
    pub(crate) deleted: u32,
}

/// The tier of a segment of `docs` documents: tiers grow by
/// [`MERGE_FACTOR`], so merging one tier's segments makes one of the next.
fn tier(docs: u32) -> u32 {
    let mut tier = 0;
    let mut bound = u64::from(FIRST_TIER_DOCS) * MERGE_FACTOR as u64;
    while u64::from(docs) >= bound {
        tier += 1;
        bound *= MERGE_FACTOR as u64;
    }
    tier
}

/// The merges to make of `segments` (their indexes in it): a tier's
/// [`MERGE_FACTOR`] smallest segments at a time while they make at most
/// `max_docs` documents together, or fewer (two at least) when the next
/// would pass `max_docs` (so segments of a commit's size still join under
/// a cap a few times larger), and alone a segment whose deleted share
/// passed [`PURGE_DELETED_SHARE`].
pub(crate) fn merges(segments: &[SegmentSize], max_docs: u32) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut by_tier: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
    for (i, s) in segments.iter().enumerate() {
        let total = f64::from(s.alive) + f64::from(s.deleted);
        if s.deleted > 0 && f64::from(s.deleted) >= PURGE_DELETED_SHARE * total {
            out.push(vec![i]);
        } else if s.alive < max_docs {
            by_tier.entry(tier(s.alive)).or_default().push(i);
        }
    }
    for mut members in by_tier.into_values() {
        members.sort_by_key(|&i| segments[i].alive);
        let mut group: Vec<usize> = Vec::new();
        let mut docs = 0u64;
        for i in members {
            let alive = u64::from(segments[i].alive);
            if docs + alive > u64::from(max_docs) {
                // The group is full: the rest of this tier is larger still.
                if group.len() >= 2 {
                    out.push(std::mem::take(&mut group));
                }
                break;
            }
            group.push(i);
            docs += alive;
            if group.len() == MERGE_FACTOR {
                out.push(std::mem::take(&mut group));
                docs = 0;
            }
        }
    }
    out
}

/// [`merges`] as tantivy's merge policy.
#[derive(Debug)]
pub(crate) struct CappedMerges {
    pub(crate) max_docs: u32,
}

impl MergePolicy for CappedMerges {
    fn compute_merge_candidates(&self, segments: &[SegmentMeta]) -> Vec<MergeCandidate> {
        let sizes: Vec<SegmentSize> = segments
            .iter()
            .map(|s| SegmentSize {
                alive: s.num_docs(),
                deleted: s.num_deleted_docs(),
            })
            .collect();
        merges(&sizes, self.max_docs)
            .into_iter()
            .map(|group| MergeCandidate(group.into_iter().map(|i| segments[i].id()).collect()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(alive: &[u32]) -> Vec<SegmentSize> {
        alive
            .iter()
            .map(|&alive| SegmentSize { alive, deleted: 0 })
            .collect()
    }

    #[test]
    fn tiers_grow_by_the_merge_factor() {
        assert_eq!(tier(0), 0);
        assert_eq!(tier(7_999), 0);
        assert_eq!(tier(8_000), 1);
        assert_eq!(tier(63_999), 1);
        assert_eq!(tier(64_000), 2);
        assert_eq!(tier(u32::MAX), 7);
    }

    #[test]
    fn a_tier_merges_when_it_has_enough_segments() {
        assert!(merges(&sizes(&[2_000; 7]), 20_000).is_empty());
        let m = merges(&sizes(&[2_000; 9]), 20_000);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].len(), MERGE_FACTOR);
        // Each tier on its own: eight small and eight of the next tier.
        let mut mixed = vec![100; 8];
        mixed.extend([9_000; 8]);
        let m = merges(&sizes(&mixed), 1_000_000);
        assert_eq!(m, vec![(0..8).collect::<Vec<_>>(), (8..16).collect()]);
    }

    #[test]
    fn no_merge_makes_more_than_the_cap() {
        // Eight segments of 16,000 would make 128,000: left as they are.
        assert!(merges(&sizes(&[16_000; 8]), 20_000).is_empty());
        // A segment at the cap is never merged again.
        assert!(merges(&sizes(&[20_000; 9]), 20_000).is_empty());
        // The smallest of a tier go first, eight at a time, then as many
        // as fit.
        let mut s = vec![2_000; 8];
        s.extend([7_000; 8]);
        let m = merges(&sizes(&s), 20_000);
        assert_eq!(m, vec![(0..8).collect::<Vec<_>>(), vec![8, 9]]);
    }

    #[test]
    fn fewer_than_eight_join_when_eight_would_pass_the_cap() {
        // Five commits of 2,000 fill a cap of 10,000: they join.
        assert_eq!(
            merges(&sizes(&[2_000; 6]), 10_000),
            vec![(0..5).collect::<Vec<_>>()]
        );
        // Four do not fill it yet: they wait for more.
        assert!(merges(&sizes(&[2_000; 4]), 10_000).is_empty());
        // One segment alone is never "merged".
        assert!(merges(&sizes(&[6_000, 6_000]), 10_000).is_empty());
    }

    #[test]
    fn a_segment_mostly_deleted_is_rewritten_alone() {
        let segments = [
            SegmentSize {
                alive: 50_000,
                deleted: 30_000,
            },
            SegmentSize {
                alive: 50_000,
                deleted: 1_000,
            },
        ];
        assert_eq!(merges(&segments, 20_000), vec![vec![0]]);
    }

    #[test]
    fn a_crawl_ends_with_a_few_segments_none_past_the_cap() {
        for (cap, most) in [(20_000, 14), (10_000, 16)] {
            let segments = crawl(cap);
            assert_eq!(segments.iter().sum::<u32>(), 100_000);
            assert!(segments.iter().all(|&d| d <= cap), "{segments:?}");
            assert!(segments.len() <= most, "{cap}: {segments:?}");
        }
    }

    /// The segments of 100,000 pages committed 2,000 at a time, merged as
    /// the policy says, as tantivy would.
    fn crawl(cap: u32) -> Vec<u32> {
        let mut segments: Vec<u32> = Vec::new();
        for commit in [2_000; 50] {
            segments.push(commit);
            loop {
                let m = merges(&sizes(&segments), cap);
                let Some(group) = m.first() else { break };
                let docs = group.iter().map(|&i| segments[i]).sum();
                let mut keep: Vec<u32> = segments
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !group.contains(i))
                    .map(|(_, &d)| d)
                    .collect();
                keep.push(docs);
                segments = keep;
            }
        }
        segments
    }
}
