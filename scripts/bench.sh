#!/usr/bin/env bash
# The benchmark:
#   scripts/bench.sh [small|large][-traps|-text-traps|-shared-text] [extra flags for `bench run`]
# Builds web_crawler and the benchmark (its own workspace, with the peer
# crawler spider-rs) in release mode, starts the MongoDB-wire test server,
# and prints the table: besides speed and memory, the trap pages each
# contender fetched (trap reqs, trap %), when it had every real page (all
# real at s) and when it finished (wall s). The -traps presets are the same
# webs with crawler traps (-text-traps: text-rich ones, whose pages are
# excerpts of the host's real pages; -shared-text: another web, whose real
# pages share their paragraphs, beside the same); give them a shorter --timeout
# (spider-rs never finishes there). Loopback only; every run is bounded.
#   --cluster adds the row (b3): web_crawler as a three-node cluster on this
#   machine (`start` with the embedded store + two `node --join` workers),
#   run until its master reports the crawl idle, then stopped with SIGTERM;
#   e.g. scripts/bench.sh small-traps --cluster --no-spider --timeout 300
# Search: (b) crawls with the full-text index on (the default); the row (b-)
# is the same crawl with --no-index, and the line under the table is the
# indexing cost (1 - pages/s with the index / pages/s without). A second
# table gives query latency p50/p95 over (b)'s index: ~200 seeded queries
# in-process (the library) and 50 through `web_crawler search --json`
# (process start included). --no-index-cost and --no-query-latency skip them.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-small}
shift || true
cargo build --release --bin web_crawler
cargo build --release --manifest-path bench/Cargo.toml
uri=$(scripts/mongo-server.sh start)
trap 'scripts/mongo-server.sh stop' EXIT
mongo_args=()
# The MongoDB row is report-only (the wire server serialises commands); on
# the large preset it would take most of an hour, so it runs on small only.
if [[ $preset == small ]]; then
    mongo_args=(--mongodb "$uri")
fi
bench/target/release/web_crawler_bench run "$preset" \
    --crawler target/release/web_crawler "${mongo_args[@]}" "$@"
