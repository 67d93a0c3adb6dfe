//! Re-ranking: the features of a candidate page and the score made of them.
//!
//! Pure: the index module measures each candidate ([`Features`]) and this
//! module scores them, so every rule here is tested on numbers.
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
//! URL words 0.3. Each field's BM25 is normalised by that
//! field's own average length, so a short title already scores high per
//! term; weights below the body's keep a title (or a URL) from deciding
//! alone, and `answers` rewards the page whose text holds the terms.

use super::learned;

/// Field boosts of candidate generation (and the hand-set field weights of
/// `text` before the weights were learned, see [`learned`]).
pub(crate) const BODY: f32 = 1.0;
pub(crate) const TITLE: f32 = 0.6;
pub(crate) const ANCHOR: f32 = 0.5;
pub(crate) const HEADINGS: f32 = 0.4;
pub(crate) const URL: f32 = 0.3;
/// The words around the links to the page (anchor context).
pub(crate) const CONTEXT: f32 = 0.6;

/// What is known of one candidate page for one query.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Features {
    /// BM25 of the query terms in each field (anchor: the best matching
    /// anchor text pointing at the page).
    pub(crate) title: f32,
    pub(crate) headings: f32,
    pub(crate) body: f32,
    pub(crate) url: f32,
    pub(crate) anchor: f32,
    /// BM25 of the query terms in the words around the links to the page
    /// (the best matching link).
    pub(crate) context: f32,
    /// Share of the query's terms found in any field or anchor, 0..=1.
    pub(crate) coverage: f32,
    /// Share of the query's terms found in the body, 0..=1.
    pub(crate) answers: f32,
    /// [`proximity`] of the terms, best field, 0..=1.
    pub(crate) proximity: f32,
    pub(crate) in_links: u64,
    pub(crate) out_links: u64,
    /// Words of the page's own text.
    pub(crate) words: u64,
    /// Share of the query's terms in the title, the headings, the links'
    /// text or context, 0..=1.
    pub(crate) title_coverage: f32,
    pub(crate) headings_coverage: f32,
    pub(crate) anchor_coverage: f32,
    /// The best cosine between the query's vector and the page's passages'
    /// (0 without vectors).
    pub(crate) similarity: f32,
}

impl Features {
    /// The field-weighted BM25 sum, weighted by the learned model.
    pub(crate) fn text(&self) -> f32 {
        learned::LEARNED.text(self)
    }
}

/// The weight of the text score, which is divided by the best
/// candidate's ([`score`]).
pub(crate) const TEXT_WEIGHT: f32 = learned::LEARNED.text;

/// Scores of the candidates of one query, in order (higher is better).
#[cfg(test)]
pub(crate) fn score_all(candidates: &[Features]) -> Vec<f32> {
    let best_text = best_text(candidates);
    candidates
        .iter()
        .map(|f| score(f.text(), best_text, rest(f)))
        .collect()
}

/// The best text score of the candidates.
pub(crate) fn best_text(candidates: &[Features]) -> f32 {
    candidates.iter().map(Features::text).fold(0.0f32, f32::max)
}

/// A candidate's score of its text score, the best candidate's (over
/// every shard, in a query across the cluster) and the [`rest`].
pub(crate) fn score(text: f32, best_text: f32, rest: f32) -> f32 {
    let text = if best_text > 0.0 {
        text / best_text
    } else {
        0.0
    };
    TEXT_WEIGHT * text + rest
}

/// The part of a candidate's score that does not depend on the others.
pub(crate) fn rest(f: &Features) -> f32 {
    learned::LEARNED.rest(f)
}

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

    fn page() -> Features {
        Features {
            words: 400,
            out_links: 8,
            ..Features::default()
        }
    }

    fn ranked_first(a: &Features, b: &Features) -> bool {
        let s = score_all(&[a.clone(), b.clone()]);
        s[0] > s[1]
    }

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
    fn more_query_terms_covered_ranks_higher() {
        // Same text score, one page holds both terms, the other one term twice.
        let both = Features {
            body: 4.0,
            coverage: 1.0,
            answers: 1.0,
            ..page()
        };
        let one = Features {
            body: 4.0,
            coverage: 0.5,
            answers: 0.5,
            ..page()
        };
        assert!(ranked_first(&both, &one));
    }

    #[test]
    fn a_how_to_title_does_not_beat_the_page_that_answers() {
        // Query "how to bake sourdough bread" → terms bake, sourdough, bread.
        // A: title "How to bake sourdough bread", body a sign-in wall.
        let title_only = Features {
            title: 9.0,
            coverage: 1.0,
            answers: 0.0,
            proximity: 0.5, // adjacent in the title; title proximity counts half
            words: 30,
            ..page()
        };
        // B: "Our starter, day by day", a body that explains baking it.
        let answers = Features {
            body: 7.5,
            coverage: 1.0,
            answers: 1.0,
            proximity: 0.4,
            ..page()
        };
        assert!(ranked_first(&answers, &title_only));
        // Even with a weaker body match than the title match.
        let weak = Features {
            body: 4.0,
            ..answers
        };
        assert!(ranked_first(&weak, &title_only));
    }

    #[test]
    fn a_hub_ranks_below_the_page_it_links_to() {
        // Hub: "Recipes A–Z", 300 links, 900 words (link labels), every query
        // term in a label, many in-links from the site's navigation.
        let hub = Features {
            title: 2.0,
            body: 5.0,
            coverage: 1.0,
            answers: 1.0,
            proximity: 1.0,
            in_links: 800,
            out_links: 300,
            words: 900,
            ..Features::default()
        };
        // The recipe page it links to, named by the hub's anchor text.
        let target = Features {
            title: 4.0,
            body: 4.5,
            anchor: 3.0,
            coverage: 1.0,
            answers: 1.0,
            proximity: 1.0,
            in_links: 3,
            ..page()
        };
        assert!(ranked_first(&target, &hub));
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

    #[test]
    fn in_links_are_a_small_saturating_prior() {
        assert_eq!(link_prior(0), 0.0);
        assert!(link_prior(10) < link_prior(100));
        assert_eq!(link_prior(1_000_000), 1.0);
        // A popular page with a worse match does not beat a better match.
        let popular = Features {
            body: 2.0,
            coverage: 0.5,
            answers: 0.5,
            in_links: 100_000,
            ..page()
        };
        let relevant = Features {
            body: 3.0,
            coverage: 1.0,
            answers: 1.0,
            ..page()
        };
        assert!(ranked_first(&relevant, &popular));
        // Between equal matches, it decides.
        let equal = Features {
            in_links: 0,
            ..popular.clone()
        };
        assert!(ranked_first(&popular, &equal));
    }

    #[test]
    fn title_and_url_weights_stay_below_the_body() {
        const {
            assert!(
                TITLE < BODY && HEADINGS < BODY && URL < BODY && ANCHOR < BODY && CONTEXT < BODY
            )
        };
        let text = Features {
            title: 1.0,
            headings: 1.0,
            body: 1.0,
            url: 1.0,
            anchor: 1.0,
            context: 1.0,
            ..Features::default()
        }
        .text();
        assert!((text - (BODY + TITLE + HEADINGS + URL + ANCHOR + CONTEXT)).abs() < 1e-6);
    }

    #[test]
    fn no_text_scores_at_all_is_not_a_division_by_zero() {
        let s = score_all(&[Features::default(), page()]);
        assert!(s.iter().all(|x| x.is_finite()));
        assert!(score_all(&[]).is_empty());
    }
}
