//! Re-ranking's rules: the field boosts and the signals each candidate is
//! measured by (coverage, proximity, in-link prior, hubness). Pure, so
//! every rule here is tested on numbers; `learned.rs` holds the features
//! a candidate is measured into and the score made of them, by these rules.
//!
//! ```text
//! score = 0.35 · text        weighted per-field BM25, ÷ the best candidate's
//!       + 0.20 · coverage    share of query terms the page, its anchors or their context hold
//!       + 0.20 · answers     share of query terms in the page's own body
//!       + 0.15 · proximity   how tightly the terms sit together
//!       + 0.05 · prior       log in-links, saturating at 1,000
//!       − 0.25 · hub         many links, little text of its own
//!       + 0.20 · similarity  the query's vector and the page's best passage's (with vectors)
//! ```
//!
//! (The weights in force are `learned::LEARNED`; these are its values.)
//!
//! Field weights inside `text`: body 1.0, title 0.6, anchor context (the
//! words around the links to the page) 0.6, anchor text 0.5, headings 0.4,
//! URL words 0.3, and the page's best section 0.1 (the section that holds
//! most of the query, scored as a document of its own length, so a long
//! page whose words meet in one section gains on one that spreads them). Each field's BM25 is normalised by that
//! field's own average length, so a short title already scores high per
//! term; weights below the body's keep a title (or a URL) from deciding
//! alone, and `answers` rewards the page whose text holds the terms.

/// Field boosts of candidate generation (and the hand-set field weights of
/// `text` before the weights were learned, see `learned.rs`).
pub(crate) const BODY: f32 = 1.0;
pub(crate) const TITLE: f32 = 0.6;
pub(crate) const ANCHOR: f32 = 0.5;
pub(crate) const HEADINGS: f32 = 0.4;
pub(crate) const URL: f32 = 0.3;
/// The words around the links to the page (anchor context).
pub(crate) const CONTEXT: f32 = 0.6;
/// The page's best section (see `sections`): its BM25 beside the whole
/// body's. Chosen on the tune split (0.1, 0.25 and 0.5 all won its
/// cross-validation against none, 0.1 most on the whole split).
pub(crate) const SECTION: f32 = 0.1;

/// Share of `n` query terms matched.
pub(crate) fn coverage(matched: usize, n: usize) -> f32 {
    if n == 0 {
        0.0
    } else {
        matched.min(n) as f32 / n as f32
    }
}

/// In-link prior, 0..=1: `ln(1 + in_links) / ln(1001)`, capped.
pub(crate) fn link_prior(in_links: u64) -> f32 {
    ((1.0 + in_links as f32).ln() / 1001f32.ln()).min(1.0)
}

/// Hub-ness, 0..=1: an index, table of contents or generated listing has
/// many links and few words of its own per link. Nothing below 10 links;
/// full from 50 links. Ordinary text has well over 12 words per link;
/// a listing's link labels are 2–4 words each (`≤ 4` words per link: full).
pub(crate) fn hubness(out_links: u64, words: u64) -> f32 {
    if out_links < 10 {
        return 0.0;
    }
    let many = ((out_links as f32 - 10.0) / 40.0).clamp(0.0, 1.0);
    let per_link = words as f32 / out_links as f32;
    let thin = ((12.0 - per_link) / 8.0).clamp(0.0, 1.0);
    many * thin
}

/// How tightly the matched terms sit: `positions[i]` holds term i's
/// positions in one field (empty when absent), `n` the query's term count.
///
/// With m ≥ 2 terms present, the shortest window holding one occurrence of
/// each spans `s` positions; proximity is `(m / n) · min(1, 2(m − 1) / s)`:
/// adjacent terms, or terms one word apart (a stop word between), score
/// full. With fewer than two terms present it is 0.
pub(crate) fn proximity(positions: &[&[u32]], n: usize) -> f32 {
    let present: Vec<&[u32]> = positions
        .iter()
        .copied()
        .filter(|p| !p.is_empty())
        .collect();
    let m = present.len();
    if m < 2 || n == 0 {
        return 0.0;
    }
    // Each term's positions in order; then the window moves on by its
    // first position, as a k-way merge does, with no list built or sorted.
    let sorted: Vec<std::borrow::Cow<'_, [u32]>> = present
        .iter()
        .map(|ps| {
            if ps.is_sorted() {
                std::borrow::Cow::Borrowed(*ps)
            } else {
                let mut owned = ps.to_vec();
                owned.sort_unstable();
                std::borrow::Cow::Owned(owned)
            }
        })
        .collect();
    // A window this tight already scores full: no need to look further.
    let full = 2 * (m as u32 - 1);
    let mut next = vec![0usize; m];
    let mut best = u32::MAX;
    loop {
        let (mut first, mut low, mut high) = (0, u32::MAX, 0);
        for (t, ps) in sorted.iter().enumerate() {
            let p = ps[next[t]];
            if p < low {
                (first, low) = (t, p);
            }
            high = high.max(p);
        }
        best = best.min(high - low);
        next[first] += 1;
        if best <= full || next[first] == sorted[first].len() {
            break;
        }
    }
    let span = best.max(1) as f32;
    coverage(m, n) * (2.0 * (m as f32 - 1.0) / span).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn proximity_finds_the_tightest_window() {
        // "bake bread": adjacent somewhere in the body.
        assert_eq!(proximity(&[&[3, 40], &[90, 41]], 2), 1.0);
        // One word between (a stop word): still full.
        assert_eq!(proximity(&[&[3], &[5]], 2), 1.0);
        // Far apart: 2 / 20.
        assert!((proximity(&[&[0], &[20]], 2) - 0.1).abs() < 1e-6);
        // Two of three terms present and adjacent: 2/3.
        assert!((proximity(&[&[7], &[8], &[]], 3) - 2.0 / 3.0).abs() < 1e-6);
        // Fewer than two terms: nothing to measure.
        assert_eq!(proximity(&[&[1, 2, 3], &[]], 2), 0.0);
        assert_eq!(proximity(&[], 0), 0.0);
        // Three terms: window from 10 to 14 holds all three: 4/4.
        assert_eq!(proximity(&[&[0, 10], &[12, 30], &[14]], 3), 1.0);
    }

    #[test]
    fn coverage_is_a_share() {
        assert_eq!(coverage(2, 4), 0.5);
        assert_eq!(coverage(0, 3), 0.0);
        assert_eq!(coverage(5, 3), 1.0);
        assert_eq!(coverage(1, 0), 0.0);
    }

    #[test]
    fn proximity_agrees_with_every_window_tried() {
        // The tightest window by brute force: every pair of one position of
        // each term, for small random position lists (a fixed LCG).
        let mut seed = 7u64;
        let mut next = |below: u32| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % u64::from(below)) as u32
        };
        for _ in 0..500 {
            let terms = 2 + next(3) as usize;
            let lists: Vec<Vec<u32>> = (0..terms)
                .map(|_| (0..1 + next(6)).map(|_| next(60)).collect())
                .collect();
            let mut best = u32::MAX;
            let mut pick = vec![0usize; terms];
            'all: loop {
                let chosen = lists.iter().zip(&pick).map(|(l, &i)| l[i]);
                let (lo, hi) = chosen.fold((u32::MAX, 0), |(lo, hi), p| (lo.min(p), hi.max(p)));
                best = best.min(hi - lo);
                for (t, i) in pick.iter_mut().enumerate() {
                    *i += 1;
                    if *i < lists[t].len() {
                        continue 'all;
                    }
                    *i = 0;
                }
                break;
            }
            let want = (2.0 * (terms as f32 - 1.0) / best.max(1) as f32).min(1.0);
            let refs: Vec<&[u32]> = lists.iter().map(Vec::as_slice).collect();
            assert_eq!(proximity(&refs, terms), want, "{lists:?}");
        }
    }

    #[test]
    fn hubness_needs_many_links_and_little_text() {
        assert_eq!(hubness(5, 10), 0.0, "few links");
        assert_eq!(hubness(300, 900), 1.0, "3 words per link");
        assert_eq!(hubness(300, 6000), 0.0, "20 words per link: an article");
        let some = hubness(30, 240);
        assert!(some > 0.0 && some < 1.0, "{some}");
        assert_eq!(hubness(100, 0), 1.0);
    }
}
