#!/usr/bin/env bash
# The independent WARC reader the archive tests (tests/it/archive.rs) check
# the crawler's WARC files with: warcio, from PyPI, in a virtualenv under
# target/. Installs it when missing and prints the virtualenv's python.
#
#   scripts/warc-tools.sh     install if needed; print the python that has warcio
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${WEB_CRAWLER_WARC_TOOLS_DIR:-$root/target/warc-tools}
venv=$dir/venv
warcio=1.7.5

if ! "$venv/bin/python" -c "import warcio" >/dev/null 2>&1; then
    echo "installing warcio $warcio into $venv" >&2
    mkdir -p "$dir"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "warcio==$warcio" >&2
fi
echo "$venv/bin/python"
