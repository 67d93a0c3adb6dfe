#!/usr/bin/env bash
# A MongoDB-wire-protocol server for the tests: nx-27017 (SQLite-backed, from
# PyPI), installed into its own virtualenv and started on 127.0.0.1 on a free
# port with its own data directory and pid file — it never touches a mongod
# that already runs on the machine.
#
#   scripts/mongo-server.sh start   install if needed, start (or reuse), print the URI
#   scripts/mongo-server.sh uri     print the URI of the running server (exit 1 if none)
#   scripts/mongo-server.sh stop    stop it and remove its data
#   scripts/mongo-server.sh bin     install if needed, print the nx-27017 executable's path
#                                   (the store-outage tests run servers of their own with it)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${WEB_CRAWLER_MONGO_DIR:-$root/target/mongo-test}
venv=$dir/venv
pidfile=$dir/server.pid
urifile=$dir/uri
version=0.8.1

running() {
    [[ -f $pidfile && -f $urifile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

install() {
    if [[ ! -x $venv/bin/nx-27017 ]]; then
        mkdir -p "$dir"
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install --quiet --disable-pip-version-check "nx-27017==$version" >&2
    fi
}

ping() {
    "$venv/bin/python" - "$1" <<'PY'
import sys
from pymongo import MongoClient
MongoClient(sys.argv[1], serverSelectionTimeoutMS=500).admin.command("ping")
PY
}

start() {
    if running; then
        cat "$urifile"
        return
    fi
    install
    local port
    port=$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$dir/data"
    # Its own pid and log files: nx-27017's defaults are shared by every
    # instance on the machine, and a second one would refuse to start.
    nohup "$venv/bin/nx-27017" --data-dir "$dir/data" --host 127.0.0.1 -p "$port" \
        --pid-file "$dir/nx-27017.pid" --log-file "$dir/nx-27017.log" \
        >"$dir/server.log" 2>&1 &
    echo $! >"$pidfile"
    local uri="mongodb://127.0.0.1:$port"
    for _ in $(seq 1 100); do
        if ping "$uri" 2>/dev/null; then
            echo "$uri" >"$urifile"
            echo "$uri"
            return
        fi
        if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
            break
        fi
        sleep 0.2
    done
    echo "mongo-server: nx-27017 did not start; its log:" >&2
    cat "$dir/server.log" >&2 || true
    stop
    exit 1
}

stop() {
    if [[ -f $pidfile ]]; then
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    fi
    rm -f "$urifile" "$dir/nx-27017.pid"
    rm -rf "$dir/data"
}

case ${1:-} in
    start) start ;;
    bin)
        install
        echo "$venv/bin/nx-27017"
        ;;
    uri) running && cat "$urifile" ;;
    stop) stop ;;
    *)
        echo "usage: $0 start|uri|stop|bin" >&2
        exit 2
        ;;
esac
