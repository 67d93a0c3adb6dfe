#!/usr/bin/env bash
# The search-quality corpus: the PostgreSQL 15 manual as Debian ships it
# (postgresql-doc-15), a real documentation site nobody here wrote.
#   scripts/search-corpus.sh
# Installs the package with apt-get if it is absent (non-interactive; needs
# root, as on the project's machines) and prints the HTML directory on
# stdout. Idempotent: when the manual is there it only prints the path.
# Used by the search-quality eval (bench/src/bin/search_quality.rs).
set -euo pipefail
dir=/usr/share/doc/postgresql-doc-15/html
if [[ ! -f $dir/index.html ]]; then
    sudo=()
    if [[ $(id -u) != 0 ]]; then sudo=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache show postgresql-doc-15 >/dev/null 2>&1; then
        "${sudo[@]}" apt-get update -qq >&2
    fi
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends postgresql-doc-15 >&2 \
        || { "${sudo[@]}" apt-get update -qq >&2 \
             && "${sudo[@]}" apt-get install -y -qq --no-install-recommends postgresql-doc-15 >&2; }
fi
if [[ ! -f $dir/index.html ]]; then
    echo "search-corpus.sh: $dir/index.html is missing after the install" >&2
    exit 1
fi
echo "$dir"
