//! The ranker's model: a linear score over a candidate's signals, its
//! weights fitted on the labelled set's tune split by
//! `scripts/train-ranker.py` (coordinate ascent on MRR@10, kept only when
//! they beat the hand-set weights in cross-validation) and pasted here.
//!
//! ```text
//! score = W_TEXT · Σ field weight · field BM25  ÷ the best candidate's
//!       + Σ w_k · signal_k                        (signals(): each 0..=1)
//! ```
//!
//! The text part keeps the shape the cluster's merge relies on (one text
//! score divided by the best over every shard, plus a part of the page's
//! own); only the weights are learned. Pure: `index.rs` measures the
//! [`Features`], this module scores them.
//!
//! For training, `WEB_CRAWLER_RANK_FEATURES=FILE` makes a search append a
//! JSON line per candidate to FILE (its URL, field BM25s and signals): a
//! debugging hook read only by the training script.

use super::rank::{self, Features};

/// The model: field weights inside the text score, the weight of the
/// normalised text score, and one weight per [`signals`] entry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Model {
    /// Title, headings, body, URL words, anchor text, anchor context.
    pub(crate) fields: [f32; FIELDS],
    pub(crate) text: f32,
    pub(crate) signals: [f32; SIGNALS],
}

pub(crate) const FIELDS: usize = 6;
pub(crate) const SIGNALS: usize = 10;

/// Names of the [`signals`], in order (the training script's too).
pub(crate) const SIGNAL_NAMES: [&str; SIGNALS] = [
    "coverage",
    "answers",
    "proximity",
    "prior",
    "hub",
    "title_coverage",
    "headings_coverage",
    "anchor_coverage",
    "length",
    "similarity",
];

/// The hand-set ranking of `rank.rs` before the model was learned, as a
/// model: the starting point of training.
pub(crate) const HAND_SET: Model = Model {
    fields: [
        rank::TITLE,
        rank::HEADINGS,
        rank::BODY,
        rank::URL,
        rank::ANCHOR,
        rank::CONTEXT,
    ],
    text: 0.35,
    signals: [0.20, 0.20, 0.15, 0.05, -0.25, 0.0, 0.0, 0.0, 0.0, 0.2],
};

/// The weights in force: what `scripts/train-ranker.py` prints. Today the
/// hand-set ones: the fitted weights lost its cross-validation on the tune
/// split (0.800 against 0.813 MRR@10; bench/README.md, "A learned ranker").
pub(crate) const LEARNED: Model = HAND_SET;

/// A candidate's field BM25s in [`Model::fields`] order.
pub(crate) fn fields(f: &Features) -> [f32; FIELDS] {
    [f.title, f.headings, f.body, f.url, f.anchor, f.context]
}

/// A candidate's signals, each 0..=1, in [`SIGNAL_NAMES`] order.
pub(crate) fn signals(f: &Features) -> [f32; SIGNALS] {
    [
        f.coverage,
        f.answers,
        f.proximity,
        rank::link_prior(f.in_links),
        rank::hubness(f.out_links, f.words),
        f.title_coverage,
        f.headings_coverage,
        f.anchor_coverage,
        length(f.words),
        f.similarity,
    ]
}

/// Page length, 0..=1: `ln(1 + words) / ln(10,001)`, capped (a stub, a
/// paragraph and a chapter differ; long chapters alike).
pub(crate) fn length(words: u64) -> f32 {
    ((1.0 + words as f32).ln() / 10_001f32.ln()).min(1.0)
}

impl Model {
    /// The field-weighted BM25 sum (divided by the best candidate's in
    /// [`rank::score`]).
    pub(crate) fn text(&self, f: &Features) -> f32 {
        dot(&self.fields, &fields(f))
    }

    /// The part of the score that does not depend on the other candidates.
    pub(crate) fn rest(&self, f: &Features) -> f32 {
        dot(&self.signals, &signals(f))
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The training hook: with `WEB_CRAWLER_RANK_FEATURES` set, one JSON line
/// per candidate appended to that file. Errors are ignored: this is a
/// debugging aid, never part of an answer.
pub(crate) fn dump(urls: &[String], features: &[Features]) {
    if let Some(path) = std::env::var_os("WEB_CRAWLER_RANK_FEATURES") {
        dump_to(path.as_ref(), urls, features);
    }
}

fn dump_to(path: &std::path::Path, urls: &[String], features: &[Features]) {
    use std::io::Write;
    let mut out = String::new();
    for (url, f) in urls.iter().zip(features) {
        let signals: serde_json::Map<String, serde_json::Value> = SIGNAL_NAMES
            .iter()
            .zip(signals(f))
            .map(|(name, v)| (name.to_string(), v.into()))
            .collect();
        let line = serde_json::json!({
            "url": url,
            "fields": fields(f),
            "signals": signals,
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(out.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hand_set_model_scores_as_rank_did() {
        // The old formula, written out: the model reproduces it.
        let f = Features {
            title: 2.0,
            headings: 1.0,
            body: 5.0,
            url: 0.5,
            anchor: 1.5,
            context: 0.7,
            coverage: 1.0,
            answers: 0.5,
            proximity: 0.25,
            in_links: 40,
            out_links: 30,
            words: 200,
            ..Features::default()
        };
        let text = 0.6 * 2.0 + 0.4 * 1.0 + 5.0 + 0.3 * 0.5 + 0.5 * 1.5 + 0.6 * 0.7;
        assert!((HAND_SET.text(&f) - text).abs() < 1e-5);
        let rest = 0.2 * 1.0 + 0.2 * 0.5 + 0.15 * 0.25 + 0.05 * rank::link_prior(40)
            - 0.25 * rank::hubness(30, 200);
        assert!((HAND_SET.rest(&f) - rest).abs() < 1e-6);
    }

    #[test]
    fn signals_stay_within_zero_and_one() {
        let extreme = Features {
            coverage: 1.0,
            answers: 1.0,
            proximity: 1.0,
            title_coverage: 1.0,
            headings_coverage: 1.0,
            anchor_coverage: 1.0,
            in_links: u64::MAX,
            out_links: u64::MAX,
            words: u64::MAX,
            similarity: 1.0,
            ..Features::default()
        };
        for s in signals(&extreme)
            .into_iter()
            .chain(signals(&Features::default()))
        {
            assert!((0.0..=1.0).contains(&s), "{s}");
        }
        assert_eq!(length(0), 0.0);
        assert!(length(100) < length(1000));
        assert_eq!(length(1_000_000), 1.0);
    }

    #[test]
    fn the_dump_writes_a_line_per_candidate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("features.jsonl");
        let f = Features {
            body: 3.0,
            coverage: 0.5,
            ..Features::default()
        };
        dump_to(
            &path,
            &["http://a/".into(), "http://b/".into()],
            &[f.clone(), f],
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["url"], "http://b/");
        assert_eq!(lines[0]["fields"][2], 3.0);
        assert_eq!(lines[0]["signals"]["coverage"], 0.5);
        assert_eq!(lines[0]["signals"].as_object().unwrap().len(), SIGNALS);
    }
}
