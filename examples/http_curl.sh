#!/bin/sh
# The README's curl lines, runnable against a node started with --http:
#
#   NODE=http://127.0.0.1:8080 TOKEN_FILE=token examples/http_curl.sh add https://example.org/
#   NODE=http://127.0.0.1:8080 examples/http_curl.sh search "rye bread"
set -eu
NODE=${NODE:-http://127.0.0.1:8080}
case "${1:-}" in
add)
    shift
    # One URL as a JSON string; several as a JSON array; many as NDJSON
    # (one a line, with -H 'Content-Type: application/x-ndjson').
    urls=$(printf '"%s",' "$@")
    curl -sS -X POST "$NODE/urls" \
        -H "Authorization: Bearer $(cat "$TOKEN_FILE")" \
        -H 'Content-Type: application/json' \
        --data "[${urls%,}]"
    ;;
search)
    curl -sS -G "$NODE/search" --data-urlencode "q=$2" --data-urlencode "limit=10"
    ;;
*)
    echo "usage: $0 add URL... | search QUERY" >&2
    exit 2
    ;;
esac
