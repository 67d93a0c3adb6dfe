#!/usr/bin/env python3
"""Fit the learned ranker's weights (src/search/learned.rs) on the tune split.

Python 3 standard library only. Steps:

1. For every query of the labelled set's tune split, run
   `web_crawler search QUERY --db DB --json` with WEB_CRAWLER_RANK_FEATURES
   set: the search appends one JSON line per candidate it measured (URL,
   field BM25s, signals). A candidate is right when its file name is one
   of the query's answers. Cached in --features (delete it to measure again).
2. Coordinate ascent on MRR@10 (ties broken by the mean reciprocal rank over
   the whole candidate list, which moves before MRR@10 does): one weight at
   a time, each tried over a ladder of values, kept when the objective
   rises; rounds until none does. Starts from the hand-set weights. A small
   L1 pull towards the hand-set weights keeps a weight no data speaks for
   where it was.
3. Cross-validates that procedure on the tune split alone (3 folds, two
   shuffles: trained on two thirds, measured on the third) against the
   hand-set weights on the same folds. Only a procedure that beats them
   there is trusted: the printed `LEARNED` constant (to paste into
   src/search/learned.rs) is the weights fitted on the whole tune split
   when it does, the hand-set weights when it does not.
4. With --report SPLIT (holdout), prints that split's MRR@10 of both weight
   sets, from the same candidate dump: a report, never an input to 1-3.

Usage (a crawl made by search_quality --db):
  scripts/train-ranker.py --db /tmp/pg.db [--crawler target/release/web_crawler]
      [--queries bench/search/queries.tsv] [--features /tmp/pg.features.json]
      [--report holdout]
"""

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import urllib.parse

FIELDS = ["title", "headings", "body", "url", "anchor", "context", "section"]
SIGNALS = [
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
    "section_coverage",
]
# learned.rs's HAND_SET: rank.rs's weights before any were learned.
HAND_SET = {
    "fields": [0.6, 0.4, 1.0, 0.3, 0.5, 0.6, 0.1],
    "text": 0.35,
    "signals": [0.20, 0.20, 0.15, 0.05, -0.25, 0.0, 0.0, 0.0, 0.0, 0.2, 0.0],
}
# The body's field weight stays 1: the text score is divided by the best
# candidate's, so only the field weights' ratios matter.
FIXED_FIELD = FIELDS.index("body")
L1_PULL = 0.01


def read_queries(path, split):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            qid, category, qsplit, query, answers = line.split("\t")
            if split == "all" or qsplit == split:
                out.append((qid, category, query, set(answers.split())))
    return out


def url_file(url):
    path = urllib.parse.urlparse(url).path
    last = path.rsplit("/", 1)[-1]
    return urllib.parse.unquote(last) if last else "index.html"


def measure(crawler, db, queries):
    """Each query's candidates: [(fields, signals, url, right)]."""
    out = {}
    for qid, _, query, answers in queries:
        with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as tmp:
            path = tmp.name
        env = dict(os.environ, WEB_CRAWLER_RANK_FEATURES=path)
        subprocess.run(
            [crawler, "search", query, "--db", db, "--json", "--limit", "10"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
            timeout=60,
        )
        rows = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                c = json.loads(line)
                rows.append(
                    (
                        c["fields"],
                        [c["signals"][name] for name in SIGNALS],
                        c["url"],
                        url_file(c["url"]) in answers,
                    )
                )
        os.unlink(path)
        out[qid] = rows
    return out


def reciprocal_ranks(model, rows):
    """(RR@10, RR over the whole list) of one query's candidates."""
    fw, tw, sw = model["fields"], model["text"], model["signals"]
    texts = [sum(w * x for w, x in zip(fw, f)) for f, _, _, _ in rows]
    best = max(texts, default=0.0)
    scored = []
    for t, (_, s, url, right) in zip(texts, rows):
        norm = t / best if best > 0 else 0.0
        score = tw * norm + sum(w * x for w, x in zip(sw, s))
        scored.append((-score, url, right))
    scored.sort()
    for rank, (_, _, right) in enumerate(scored, 1):
        if right:
            return (1.0 / rank if rank <= 10 else 0.0), 1.0 / rank
    return 0.0, 0.0


def evaluate(model, data):
    at10 = full = 0.0
    for rows in data.values():
        a, b = reciprocal_ranks(model, rows)
        at10 += a
        full += b
    n = max(len(data), 1)
    return at10 / n, full / n


def objective(model, data):
    at10, full = evaluate(model, data)
    pull = sum(abs(a - b) for a, b in zip(model["fields"], HAND_SET["fields"]))
    pull += abs(model["text"] - HAND_SET["text"])
    pull += sum(abs(a - b) for a, b in zip(model["signals"], HAND_SET["signals"]))
    return at10 + 0.1 * full - L1_PULL * pull


def params(model):
    """(get, set) of every weight trained."""
    out = []
    for i in range(len(FIELDS)):
        if i != FIXED_FIELD:
            out.append(("fields", i))
    out.append(("text", None))
    for i in range(len(SIGNALS)):
        out.append(("signals", i))
    return out


def get(model, p):
    key, i = p
    return model[key] if i is None else model[key][i]


def put(model, p, value):
    key, i = p
    m = {"fields": list(model["fields"]), "text": model["text"], "signals": list(model["signals"])}
    if i is None:
        m[key] = value
    else:
        m[key][i] = value
    return m


def train(data, rounds=20, quiet=False):
    model = {k: (list(v) if isinstance(v, list) else v) for k, v in HAND_SET.items()}
    best = objective(model, data)
    for r in range(rounds):
        improved = False
        for p in params(model):
            now = get(model, p)
            tries = {now + d for d in (-0.4, -0.2, -0.1, -0.05, -0.02, 0.02, 0.05, 0.1, 0.2, 0.4)}
            tries |= {now * m for m in (0.0, 0.5, 1.5, 2.0)}
            if p[0] == "fields":
                tries = {t for t in tries if t >= 0.0}
            for value in sorted(tries):
                trial = put(model, p, round(value, 4))
                score = objective(trial, data)
                if score > best + 1e-9:
                    model, best, improved = trial, score, True
        at10, full = evaluate(model, data)
        if not quiet:
            print(f"round {r + 1}: MRR@10 {at10:.3f}, MRR {full:.3f}", file=sys.stderr)
        if not improved:
            break
    return model


def cross_validate(data, folds=3, shuffles=2):
    """Mean held-out-fold MRR@10 of (hand-set, trained) over the folds."""
    keys = sorted(data)
    hand = learned = 0.0
    for seed in range(shuffles):
        random.Random(seed).shuffle(keys)
        for k in range(folds):
            test = {q: data[q] for i, q in enumerate(keys) if i % folds == k}
            train_part = {q: data[q] for i, q in enumerate(keys) if i % folds != k}
            model = train(train_part, quiet=True)
            hand += evaluate(HAND_SET, test)[0]
            learned += evaluate(model, test)[0]
    n = folds * shuffles
    return hand / n, learned / n


def rust(model):
    fields = ", ".join(f"{w:.3f}" for w in model["fields"])
    signals = ", ".join(f"{w:.3f}" for w in model["signals"])
    return (
        "pub(crate) const LEARNED: Model = Model {\n"
        f"    fields: [{fields}],\n"
        f"    text: {model['text']:.3f},\n"
        f"    signals: [{signals}],\n"
        "};"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True, help="a crawl made by search_quality --db")
    ap.add_argument("--crawler", default="target/release/web_crawler")
    ap.add_argument("--queries", default="bench/search/queries.tsv")
    ap.add_argument("--features", help="cache of the measured candidates (JSON)")
    ap.add_argument("--report", choices=["holdout"], help="also report this split")
    args = ap.parse_args()

    def load(split, cache):
        if cache and os.path.exists(cache):
            with open(cache, encoding="utf-8") as f:
                return json.load(f)
        out = measure(args.crawler, args.db, read_queries(args.queries, split))
        if cache:
            with open(cache, "w", encoding="utf-8") as f:
                json.dump(out, f)
        return out

    data = load("tune", args.features)
    pooled = sum(any(r[3] for r in rows) for rows in data.values())
    print(f"{len(data)} tune queries, a right page among the candidates of {pooled}", file=sys.stderr)
    before = evaluate(HAND_SET, data)
    model = train(data)
    after = evaluate(model, data)
    print(f"tune MRR@10: hand-set {before[0]:.3f}, learned {after[0]:.3f}", file=sys.stderr)
    for name, w, h in zip(FIELDS, model["fields"], HAND_SET["fields"]):
        print(f"  field {name:<18} {h:6.3f} -> {w:6.3f}", file=sys.stderr)
    print(f"  text               {HAND_SET['text']:6.3f} -> {model['text']:6.3f}", file=sys.stderr)
    for name, w, h in zip(SIGNALS, model["signals"], HAND_SET["signals"]):
        print(f"  signal {name:<17} {h:6.3f} -> {w:6.3f}", file=sys.stderr)
    hand_cv, learned_cv = cross_validate(data)
    trusted = learned_cv > hand_cv
    print(
        f"tune cross-validated MRR@10: hand-set {hand_cv:.3f}, learned {learned_cv:.3f}: "
        + ("the learned weights are kept" if trusted else "the hand-set weights stay"),
        file=sys.stderr,
    )
    if args.report:
        cache = args.features and args.features + "." + args.report
        held = load(args.report, cache)
        print(
            f"{args.report} MRR@10 (a report): hand-set {evaluate(HAND_SET, held)[0]:.3f}, "
            f"learned {evaluate(model, held)[0]:.3f}",
            file=sys.stderr,
        )
    print(rust(model if trusted else HAND_SET))


if __name__ == "__main__":
    main()
