#!/usr/bin/env bash
# The project's one test command (README; .ci/run calls it): the whole
# workspace's unit, integration and doc tests, examples compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --all-targets
cargo test --workspace --doc
