#!/usr/bin/env bash
# The readers the site-graph tests (tests/it/reports.rs) check the exports
# with: Graphviz's `dot` (Debian's graphviz package, installed with apt-get
# when missing) and networkx's GraphML reader (from PyPI, in a virtualenv
# under target/). Installs what is missing and prints the virtualenv's python.
#
#   scripts/graph-tools.sh     install if needed; print the python that has networkx
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${WEB_CRAWLER_GRAPH_TOOLS_DIR:-$root/target/graph-tools}
venv=$dir/venv
networkx=3.4.2

if ! command -v dot >/dev/null 2>&1; then
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || { echo "graphviz is missing and this user cannot apt-get install it" >&2; exit 1; }
        sudo=(sudo)
    fi
    echo "installing graphviz (apt-get)" >&2
    "${sudo[@]}" apt-get update -qq >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends graphviz >&2
fi
command -v dot >/dev/null 2>&1 || { echo "graphviz was installed but dot is not on PATH" >&2; exit 1; }

if ! "$venv/bin/python" -c "import networkx" >/dev/null 2>&1; then
    echo "installing networkx $networkx into $venv" >&2
    mkdir -p "$dir"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "networkx==$networkx" >&2
fi
echo "$venv/bin/python"
