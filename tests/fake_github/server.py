#!/usr/bin/python3
"""A local stand-in for the GitHub REST API, for sandgate's github/ tests.

Run:  /usr/bin/python3 server.py --schema github-openapi-subset.json --token TOKEN [--token ...]
             [--port N] [--git-root DIR] [--cert CERT.pem --key KEY.pem]
It listens on 127.0.0.1 on a free port (or --port) and prints `PORT <n>` on its first stdout line.
With --cert/--key it speaks https. The code lives in fakehub/, one module per concern: schemas
(body validation), auth (tokens), check_runs, repos (what the agent polls), git_http, faults,
control, plumbing, state.

What it does, like api.github.com (API version 2022-11-28):
- validates every request body against the OpenAPI subset (its $refs resolved, `nullable`
  honoured, date-time checked) and answers 422 with GitHub's error shape to anything rejected,
  plus the documented limits the schema only states in prose (annotation title <= 255
  characters, message and raw_details <= 64 KB);
- checks the headers (Accept, X-GitHub-Api-Version, User-Agent, Content-Type on bodies) and the
  token (401 "Bad credentials"); /app/ endpoints take a JWT, the rest a configured token or an
  installation token it issued. An installation token asked for with `repositories` or
  `permissions` (apps/create-installation-access-token's body) is held to them: another
  repository's endpoints answer 404, a write it lacks the permission for 403; permissions the
  App was not granted (APP_PERMISSIONS) or more than 500 repositories are refused with 422;
- keeps check runs (annotations appended across PATCHes), commit statuses and issued tokens in
  memory and answers GETs from that state (filter=latest|all, check_name, paging + Link);
- serves the same API under /api/v3 (Enterprise Server's base path);
- lists pull requests (GET /repos/{o}/{r}/pulls, in the subset: state, per_page, page, Link)
  and git references (GET /repos/{o}/{r}/git/matching-refs/{ref}, the git refs API, not in
  the subset) from what /_control/repo set, each with an ETag: a request whose If-None-Match
  matches it gets 304 with no body and leaves X-RateLimit-Remaining alone, as GitHub does;
- with --git-root DIR, serves DIR/OWNER/NAME.git read-only over git's smart HTTP at
  /OWNER/NAME.git, to a Basic password that is a configured token or an unexpired installation
  token covering the repository with contents:read (fakehub/git_http.py); 401 otherwise.

Control endpoints for the tests (no auth), under /_control/:
  POST /_control/faults    {"faults": [{"kind": K, "match": SUBSTR, "count": N, ...}]}
        K: 500 | 502 | 429 (retry_after) | secondary (403, retry_after optional) |
           primary (403, x-ratelimit-remaining 0, reset_in seconds) | slow (delay seconds,
           then answered normally) | reset (the connection is reset) | 401 | 404 | 422
        {"replace": true} drops the faults still queued first.
  POST /_control/config    {"token_ttl": seconds, "tokens": [...], "ignore_token_scope": bool,
                            "clock_offset": seconds, "advance_clock": seconds}
        token_ttl: installation tokens' lifetime (expires_at = the server's now + token_ttl);
        clock_offset / advance_clock: set / move the server's clock, by which installation
        tokens are issued and expire (an expired one gets 401 "Bad credentials", as GitHub);
        ignore_token_scope: issue installation tokens as if no body was sent (a broken server)
  POST /_control/repo      {"repo": "OWNER/NAME", "pulls": [...], "refs": [...],
                            "clone_url": URL} sets (replaces) what the listing endpoints
        serve for that repository; each key is optional. A pull:
        {"number": N, "sha": SHA, "ref": BRANCH, "base": BRANCH, "labels": [NAME...],
         "state": "open", "draft": false}; a ref: {"ref": "refs/heads/...", "sha": SHA}.
  GET  /_control/state     check runs, statuses, issued tokens
  GET  /_control/requests  every raw request (line, headers, body) and the status answered
  POST /_control/clear     forget all state, faults and requests
"""

import argparse
import http.server
import os
import ssl
import sys

# git_cgi (the smart-HTTP pieces shared with tests/helpers/git_http_server.py) lives there.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (read-only in the wrap)

# pylint: disable=wrong-import-position
from fakehub.api import Api
from fakehub.auth import Auth
from fakehub.check_runs import CheckRuns
from fakehub.control import Control
from fakehub.faults import Faults
from fakehub.git_http import GitHttp
from fakehub.plumbing import Plumbing
from fakehub.repos import Repos
from fakehub.schemas import Schemas
from fakehub.state import State


class Handler(Plumbing, Faults, Control, Api, Auth, CheckRuns, Repos, GitHttp,
              http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-github/1.0"


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schema", required=True)
    parser.add_argument("--token", action="append", default=[])
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--git-root", help="serve the bare repositories OWNER/NAME.git under it")
    parser.add_argument("--cert", help="PEM certificate: speak https")
    parser.add_argument("--key", help="PEM key of --cert")
    arguments = parser.parse_args()
    server = Server(("127.0.0.1", arguments.port), Handler)
    if arguments.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(arguments.cert, arguments.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.schemas = Schemas(arguments.schema)
    server.state = State(arguments.token)
    server.git_root = arguments.git_root
    sys.stdout.write("PORT %d\n" % server.server_address[1])
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
