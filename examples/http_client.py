#!/usr/bin/env python3
"""A script talking to a running node's HTTP API, with the standard library only.

Run it against a node started with `--http` (and `--http-token-file` to add URLs):

    web_crawler start --name m --listen 127.0.0.1:9000 --cookie-file cookie \\
        --http 127.0.0.1:8080 --http-token-file token
    python3 examples/http_client.py --node http://127.0.0.1:8080 --token-file token \\
        add https://example.org/
    python3 examples/http_client.py --node http://127.0.0.1:8080 search "rye bread"
    python3 examples/http_client.py --node http://127.0.0.1:8080 --token-file token \\
        add-many 10000 http://127.0.0.1:9/

A refusal carries a stable code (`invalid_url`, `already_known`, `unauthorized`,
...) beside its sentence: a script branches on the code.
"""

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


class Refused(Exception):
    """The node refused a request: its HTTP status, stable code and sentence."""

    def __init__(self, status, code, message):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


def call(node, method, path, body=None, token=None, timeout=60):
    """One request; the answer's JSON. Raises Refused on a 4xx/5xx."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(node.rstrip("/") + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        try:
            error = json.load(e)["error"]
        except (ValueError, KeyError):
            error = {"code": "other", "message": e.reason}
        raise Refused(e.code, error["code"], error["message"]) from None


def add_urls(node, token, urls):
    """Queue URLs in one request; each one's outcome, in order."""
    return call(node, "POST", "/urls", urls, token=token)["results"]


def search(node, query, limit=10):
    """The best pages for `query` over every node's index."""
    q = urllib.parse.urlencode({"q": query, "limit": limit})
    return call(node, "GET", "/search?" + q)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", default="http://127.0.0.1:8080", help="the node's --http address")
    parser.add_argument("--token-file", help="the node's --http-token-file (to add URLs)")
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="queue URLs")
    add.add_argument("urls", nargs="+")
    find = commands.add_parser("search", help="search what the crawl fetched")
    find.add_argument("query")
    many = commands.add_parser("add-many", help="queue N URLs under PREFIX in one request, timed")
    many.add_argument("n", type=int)
    many.add_argument("prefix")
    args = parser.parse_args()
    token = open(args.token_file).read().strip() if args.token_file else None

    try:
        if args.command == "add":
            for r in add_urls(args.node, token, args.urls):
                if r["accepted"]:
                    print("queued", r["normalized"])
                else:
                    print("refused", r["url"], r["error"]["code"], "-", r["error"]["message"])
        elif args.command == "search":
            answer = search(args.node, args.query)
            if answer.get("did_you_mean"):
                print("did you mean:", answer["did_you_mean"])
            nodes = answer.get("nodes") or {}
            if nodes.get("missing"):
                print("not heard from:", ", ".join(nodes["missing"]))
            for i, hit in enumerate(answer["results"], 1):
                print(f"{i:2}. {hit['title'] or '(untitled)'}\n    {hit['url']}\n    {hit['snippet']}")
            if not answer["results"]:
                print("no results")
        else:
            urls = [f"{args.prefix.rstrip('/')}/page/{i}" for i in range(args.n)]
            started = time.monotonic()
            results = add_urls(args.node, token, urls)
            elapsed = time.monotonic() - started
            accepted = sum(r["accepted"] for r in results)
            print(f"{accepted} of {len(urls)} URLs queued in one request: {elapsed:.3f} s")
    except Refused as e:
        print("refused:", e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
