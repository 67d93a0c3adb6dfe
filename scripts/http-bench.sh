#!/usr/bin/env bash
# How long the HTTP API takes to queue 10,000 URLs sent in one request by
# examples/http_client.py (issue 45: under 2 s on the project's machine).
# Starts a node of its own on loopback (the release build, unless
# WEB_CRAWLER_BIN names another binary), paused so that the time is the
# API's and the master's admission and write alone, runs the script
# RUNS times (default 5) with fresh URLs each time, prints each time, and
# stops the node.
#
#   scripts/http-bench.sh            # build --release if needed, then measure
#   RUNS=3 N=10000 scripts/http-bench.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin=${WEB_CRAWLER_BIN:-}
if [[ -z $bin ]]; then
    cargo build --release --quiet
    bin=$root/target/release/web_crawler
fi
runs=${RUNS:-5}
n=${N:-10000}
dir=$(mktemp -d)
node=
cleanup() {
    [[ -n $node ]] && kill "$node" 2>/dev/null && wait "$node" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
listen=127.0.0.1:$(free_port)
http=127.0.0.1:$(free_port)
echo "bench-cookie" > "$dir/cookie"
echo "bench-token" > "$dir/token"
RUST_LOG=error "$bin" start --name bench --listen "$listen" --cookie-file "$dir/cookie" \
    --db "$dir/bench.db" --http "$http" --http-token-file "$dir/token" 2>"$dir/node.log" &
node=$!
for _ in $(seq 100); do
    curl -sf "http://$http/status" >/dev/null && break
    sleep 0.1
done
curl -sf -X POST -H "Authorization: Bearer bench-token" "http://$http/pause" >/dev/null
echo "$("$bin" --version), $(nproc) cores; $n URLs in one POST /urls, $runs runs:"
for run in $(seq "$runs"); do
    # Fresh URLs each run: a host that refuses connections (port 9), never fetched (paused).
    python3 examples/http_client.py --node "http://$http" --token-file "$dir/token" \
        add-many "$n" "http://127.0.0.$((run + 1)):9/run$run"
done
