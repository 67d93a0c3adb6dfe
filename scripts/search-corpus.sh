#!/usr/bin/env bash
# The search-quality corpora: real documentation sites nobody here wrote,
# as Debian ships them.
#   scripts/search-corpus.sh            # the PostgreSQL 15 manual (postgresql-doc-15)
#   scripts/search-corpus.sh python     # the Python 3.11 docs (python3.11-doc, Sphinx)
# Installs the package with apt-get if it is absent (non-interactive; needs
# root, as on the project's machines) and prints the HTML directory on
# stdout. Idempotent: when the docs are there it only prints the path.
# Used by the search-quality eval (bench/src/bin/search_quality.rs).
set -euo pipefail
case "${1:-postgresql}" in
    postgresql) package=postgresql-doc-15; dir=/usr/share/doc/postgresql-doc-15/html ;;
    python) package=python3.11-doc; dir=/usr/share/doc/python3.11/html ;;
    *) echo "search-corpus.sh: unknown corpus ${1} (postgresql or python)" >&2; exit 2 ;;
esac
if [[ ! -f $dir/index.html ]]; then
    sudo=()
    if [[ $(id -u) != 0 ]]; then sudo=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache show "$package" >/dev/null 2>&1; then
        "${sudo[@]}" apt-get update -qq >&2
    fi
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$package" >&2 \
        || { "${sudo[@]}" apt-get update -qq >&2 \
             && "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$package" >&2; }
fi
if [[ ! -f $dir/index.html ]]; then
    echo "search-corpus.sh: $dir/index.html is missing after the install" >&2
    exit 1
fi
echo "$dir"
