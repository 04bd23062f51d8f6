#!/usr/bin/python3
"""A local stand-in for the GitHub REST API, for sandgate's github/ tests.

Run:  /usr/bin/python3 server.py --schema github-openapi-subset.json --token TOKEN [--token ...]
It listens on 127.0.0.1 on a free port (or --port) and prints `PORT <n>` on its first stdout line.

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
  matches it gets 304 with no body and leaves X-RateLimit-Remaining alone, as GitHub does.

Control endpoints for the tests (no auth), under /_control/:
  POST /_control/faults    {"faults": [{"kind": K, "match": SUBSTR, "count": N, ...}]}
        K: 500 | 502 | 429 (retry_after) | secondary (403, retry_after optional) |
           primary (403, x-ratelimit-remaining 0, reset_in seconds) | slow (delay seconds,
           then answered normally) | reset (the connection is reset) | 401 | 404 | 422
        {"replace": true} drops the faults still queued first.
  POST /_control/config    {"token_ttl": seconds, "tokens": [...], "ignore_token_scope": bool}
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
import copy
import datetime
import hashlib
import http.server
import json
import re
import socket
import struct
import sys
import threading
import time
import urllib.parse

import jsonschema

API_PREFIXES = ("/api/v3", "")
DOCS = "https://docs.github.com/rest"
MAX_ANNOTATION_TITLE = 255
MAX_ANNOTATION_BLOB = 64 * 1024
MAX_TOKEN_REPOSITORIES = 500
# What the fake App's installation was granted; an installation token gets all of it unless
# its request narrows it.
APP_PERMISSIONS = {"checks": "write", "statuses": "write", "contents": "read",
                   "metadata": "read", "pull_requests": "read"}
LEVELS = {"read": 1, "write": 2, "admin": 3}
# The permission a write needs, by path template (what reporting uses).
WRITE_PERMISSIONS = {"check_run": "checks", "check_runs": "checks", "statuses": "statuses"}
DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def openapi_to_jsonschema(node):
    """OpenAPI 3.0 `nullable: true` becomes a JSON Schema type union with null."""
    if isinstance(node, list):
        return [openapi_to_jsonschema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: openapi_to_jsonschema(value) for key, value in node.items()}
    if out.pop("nullable", False):
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif "enum" in out:
            out["enum"] = list(out["enum"]) + [None]
        elif any(key in out for key in ("oneOf", "anyOf", "allOf", "$ref")):
            out = {"anyOf": [{"type": "null"}, out]}
    return out


class Schemas:
    """Request-body validators per (method, path template)."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as handle:
            self.document = openapi_to_jsonschema(json.load(handle))
        self.resolver = jsonschema.RefResolver.from_schema(self.document)
        self.formats = jsonschema.FormatChecker(formats=())
        self.formats.checks("date-time")(lambda value: not isinstance(value, str)
                                         or bool(DATE_TIME.match(value)))
        self.routes = []
        for template, operations in self.document["paths"].items():
            pattern = self.template_regex(template)
            for method, operation in operations.items():
                body = operation.get("requestBody", {})
                schema = body.get("content", {}).get("application/json", {}).get("schema")
                validator = None
                if schema is not None:
                    validator = jsonschema.Draft4Validator(
                        schema, resolver=self.resolver, format_checker=self.formats)
                self.routes.append((method.upper(), re.compile("^" + pattern + "$"),
                                    validator, body.get("required", False),
                                    operation.get("externalDocs", {}).get("url", DOCS)))

    @staticmethod
    def template_regex(template):
        # Multi-segment parameters (ref, sha) may hold slashes; the others may not.
        pieces = re.split(r"\{(\w+)\}", template)
        out = ""
        for index, piece in enumerate(pieces):
            if index % 2 == 0:
                out += re.escape(piece)
            else:
                out += "(?P<%s>%s)" % (piece, ".+?" if piece in ("ref", "sha") else "[^/]+")
        return out

    def match(self, method, path):
        for route_method, pattern, validator, required, docs in self.routes:
            found = pattern.match(path)
            if found and route_method == method:
                return found.groupdict(), validator, required, docs
        return None


class State:
    def __init__(self, tokens):
        self.lock = threading.Lock()
        self.tokens = set(tokens)
        self.token_ttl = 3600
        self.ignore_token_scope = False
        self.clear()

    def clear(self):
        self.check_runs = {}
        self.statuses = []
        self.issued = []
        self.repos = {}  # "owner/name" -> {"pulls": [...], "refs": [...], "clone_url": URL}
        self.rate_remaining = 5000
        self.faults = []
        self.requests = []
        self.next_id = 4000000000  # beyond 2^31: ids are int64 on GitHub


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-github/1.0"

    def log_message(self, fmt, *args):  # quiet: the tests read /_control/requests instead
        pass

    # -- plumbing ---------------------------------------------------------------------------
    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def answer(self, status, document=None, headers=None, raw=None, counted=True):
        payload = raw if raw is not None else (
            b"" if document is None else json.dumps(document).encode("utf-8"))
        state = self.server.state
        with state.lock:
            if counted and state.rate_remaining > 0:
                state.rate_remaining -= 1
            remaining = state.rate_remaining
        # Recorded before the answer leaves: a client that reads /_control/requests as soon as
        # it has the answer must find the status there (it raced the write before).
        self.record["status"] = status
        self.send_response(status)
        self.send_header("Content-Type", "text/html" if raw is not None
                         else "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("X-GitHub-Media-Type", "github.v3; format=json")
        self.send_header("X-RateLimit-Limit", "5000")
        self.send_header("X-RateLimit-Remaining", str(remaining))
        self.send_header("X-RateLimit-Reset", str(int(time.time()) + 3600))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def error(self, status, message, docs=DOCS, errors=None, headers=None):
        document = {"message": message, "documentation_url": docs, "status": str(status)}
        if errors is not None:
            document["errors"] = errors
        self.answer(status, document, headers)

    def reset_connection(self):
        self.record["status"] = "reset"
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()  # with linger 0: an RST, not a FIN

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):  # the connection was reset on purpose
            pass

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def dispatch(self, method):
        state = self.server.state
        body = self.read_body()
        self.record = {"method": method, "target": self.path, "request_line": self.requestline,
                       "headers": {key: value for key, value in self.headers.items()},
                       "body": body.decode("utf-8", "replace"), "status": None}
        with state.lock:
            state.requests.append(self.record)
        parsed = urllib.parse.urlsplit(self.path)
        if parsed.path.startswith("/_control/"):
            return self.control(method, parsed.path, body)
        if self.apply_fault(parsed.path):
            return
        path = parsed.path
        for prefix in API_PREFIXES:
            if prefix and path.startswith(prefix + "/"):
                path = path[len(prefix):]
                break
        self.api(method, path, urllib.parse.parse_qs(parsed.query), body)

    # -- faults -----------------------------------------------------------------------------
    def apply_fault(self, path):
        state = self.server.state
        with state.lock:
            fault = None
            for candidate in state.faults:
                if candidate.get("match", "") in path and candidate.get("count", 1) > 0:
                    candidate["count"] = candidate.get("count", 1) - 1
                    fault = dict(candidate)
                    break
            state.faults = [f for f in state.faults if f.get("count", 1) > 0]
        if fault is None:
            return False
        kind = str(fault["kind"])
        self.record["fault"] = kind
        if kind == "500":
            self.error(500, "Server Error")
        elif kind == "502":
            self.answer(502, raw=b"<html><body><h1>502 Bad Gateway</h1></body></html>")
        elif kind == "429":
            self.error(429, "Too Many Requests",
                       headers={"Retry-After": str(fault.get("retry_after", 1))})
        elif kind == "secondary":
            headers = {}
            if "retry_after" in fault:
                headers["Retry-After"] = str(fault["retry_after"])
            self.error(403, "You have exceeded a secondary rate limit. Please wait a few "
                       "minutes before you try again.",
                       docs="https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
                       "#about-secondary-rate-limits", headers=headers)
        elif kind == "primary":
            reset = int(time.time()) + int(fault.get("reset_in", 2))
            self.error(403, "API rate limit exceeded for installation ID 1.",
                       headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)})
        elif kind == "slow":
            time.sleep(float(fault.get("delay", 5)))
            return False
        elif kind == "reset":
            self.reset_connection()
        elif kind == "401":
            self.error(401, "Bad credentials")
        elif kind == "404":
            self.error(404, "Not Found")
        elif kind == "422":
            self.error(422, "Validation Failed", errors=[{"resource": "CheckRun", "code": "invalid",
                                                          "field": "output"}])
        else:
            self.error(500, "unknown fault kind " + kind)
        return True

    # -- control ----------------------------------------------------------------------------
    def control(self, method, path, body):
        state = self.server.state
        document = json.loads(body) if body else {}
        with state.lock:
            if method == "POST" and path == "/_control/faults":
                if document.get("replace"):
                    state.faults = []
                state.faults.extend(document.get("faults", []))
                reply = {"faults": len(state.faults)}
            elif method == "POST" and path == "/_control/config":
                if "token_ttl" in document:
                    state.token_ttl = int(document["token_ttl"])
                state.ignore_token_scope = bool(document.get("ignore_token_scope", False))
                state.tokens.update(document.get("tokens", []))
                reply = {"ok": True}
            elif method == "POST" and path == "/_control/repo":
                repo = state.repos.setdefault(document["repo"], {
                    "pulls": [], "refs": [], "clone_url": "https://github.example/%s.git" %
                    document["repo"]})
                for key in ("pulls", "refs", "clone_url"):
                    if key in document:
                        repo[key] = document[key]
                reply = {"ok": True}
            elif method == "GET" and path == "/_control/state":
                reply = {"check_runs": [copy.deepcopy(run) for run in
                                        sorted(state.check_runs.values(),
                                               key=lambda run: run["id"])],
                         "statuses": copy.deepcopy(state.statuses),
                         "issued_tokens": copy.deepcopy(state.issued)}
            elif method == "GET" and path == "/_control/requests":
                reply = {"requests": [dict(r) for r in state.requests
                                      if not r["target"].startswith("/_control/")]}
            elif method == "POST" and path == "/_control/clear":
                state.clear()
                reply = {"ok": True}
            else:
                reply = None
        if reply is None:
            self.error(404, "Not Found")
        else:
            self.answer(200, reply)

    # -- the API ----------------------------------------------------------------------------
    def check_headers(self, method, body):
        accept = self.headers.get("Accept", "")
        if "application/vnd.github+json" not in accept:
            return 415, "Unsupported 'Accept' header: " + accept
        if self.headers.get("X-GitHub-Api-Version") != "2022-11-28":
            return 400, "Missing or unsupported X-GitHub-Api-Version"
        if not self.headers.get("User-Agent"):
            return 403, ("Request forbidden by administrative rules. Please make sure your "
                         "request has a User-Agent header")
        if body and "application/json" not in self.headers.get("Content-Type", ""):
            return 415, "Unsupported Media Type: a JSON body needs Content-Type application/json"
        return None

    def bearer(self):
        header = self.headers.get("Authorization", "")
        return header[len("Bearer "):] if header.startswith("Bearer ") else None

    def issued_token(self):
        token = self.bearer()
        state = self.server.state
        with state.lock:
            for issued in state.issued:
                if issued["token"] == token:
                    return issued
        return None

    def scope_problem(self, method, path):
        """(status, message) when an installation token's scope does not cover the request."""
        issued = self.issued_token()
        repo = re.match(r"^/repos/([^/]+)/([^/]+)", path)
        if issued is None or repo is None:
            return None
        names = issued.get("repositories")
        if names is not None and repo.group(2).lower() not in [n.lower() for n in names]:
            return 404, "Not Found"
        needed = WRITE_PERMISSIONS.get(self.template_of(path))
        if method in ("POST", "PATCH", "PUT", "DELETE") and needed:
            if LEVELS.get(issued["permissions"].get(needed), 0) < LEVELS["write"]:
                return 403, "Resource not accessible by integration"
        return None

    def token_scope_problem(self, document):
        """The 422 message for an access-token body GitHub refuses beyond its schema, or None."""
        names = document.get("repositories") or []
        ids = document.get("repository_ids") or []
        if len(names) + len(ids) > MAX_TOKEN_REPOSITORIES:
            return "repositories: more than %d repositories" % MAX_TOKEN_REPOSITORIES
        for name, level in (document.get("permissions") or {}).items():
            if LEVELS.get(level, 0) > LEVELS.get(APP_PERMISSIONS.get(name), 0):
                return ("The permissions requested are not granted to this installation "
                        "(%s: %s)" % (name, level))
        return None

    def token_ok(self, path):
        token = self.bearer()
        if token is None:
            return False
        if path.startswith("/app/"):
            return token.count(".") == 2  # a JWT; the C++ test verifies its signature
        state = self.server.state
        with state.lock:
            if token in state.tokens:
                return True
            for issued in state.issued:
                if issued["token"] == token and issued["expires_epoch"] > time.time():
                    return True
        return False

    def api(self, method, path, query, body):
        problem = self.check_headers(method, body)
        if problem:
            return self.error(problem[0], problem[1])
        if not self.token_ok(path):
            return self.error(401, "Bad credentials")
        scope = self.scope_problem(method, path)
        if scope:
            return self.error(scope[0], scope[1])
        refs = re.match(r"^/repos/([^/]+)/([^/]+)/git/matching-refs/(.+)$", path)
        if method == "GET" and refs:  # the git refs API: outside the subset, no body
            return self.op_get_matching_refs(refs.group(1) + "/" + refs.group(2),
                                             urllib.parse.unquote(refs.group(3)))
        route = self.server.schemas.match(method, path)
        if route is None:
            return self.error(404, "Not Found")
        params, validator, required, docs = route
        document = None
        if body:
            try:
                document = json.loads(body)
            except ValueError as problem:
                return self.error(400, "Problems parsing JSON: " + str(problem), docs)
        elif required:
            return self.error(400, "Problems parsing JSON", docs)
        if validator is not None and document is not None:
            errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
            message = None
            if errors:
                message = "; ".join(
                    "/".join(str(p) for p in e.path) + ": " + e.message[:200] for e in errors)
            else:
                message = self.prose_limits(document)
            if message:
                return self.error(422, "Invalid request.\n\n" + message, docs,
                                  errors=[{"resource": "Request", "code": "invalid",
                                           "message": message[:1000]}])
        handler = getattr(self, "op_" + method.lower() + "_" +
                          re.sub(r"\W+", "_", self.template_of(path)), None)
        if handler is None:
            return self.error(404, "Not Found")
        handler(params, query, document or {})

    @staticmethod
    def template_of(path):
        if path.startswith("/app/installations/"):
            return "access_tokens"
        if re.match(r"^/repos/[^/]+/[^/]+/check-runs/\d+$", path):
            return "check_run"
        if re.match(r"^/repos/[^/]+/[^/]+/check-runs$", path):
            return "check_runs"
        if re.match(r"^/repos/[^/]+/[^/]+/commits/.+/check-runs$", path):
            return "ref_check_runs"
        if re.match(r"^/repos/[^/]+/[^/]+/statuses/.+$", path):
            return "statuses"
        if re.match(r"^/repos/[^/]+/[^/]+/pulls$", path):
            return "pulls"
        return "unknown"

    @staticmethod
    def prose_limits(document):
        output = document.get("output") if isinstance(document, dict) else None
        for index, note in enumerate((output or {}).get("annotations") or []):
            if len(note.get("title", "")) > MAX_ANNOTATION_TITLE:
                return "output/annotations/%d/title: longer than 255 characters" % index
            for key in ("message", "raw_details"):
                if len(note.get(key, "").encode("utf-8")) > MAX_ANNOTATION_BLOB:
                    return "output/annotations/%d/%s: larger than 64 KB" % (index, key)
            if note["start_line"] != note["end_line"] and (
                    "start_column" in note or "end_column" in note):
                return ("output/annotations/%d: start_column and end_column are only "
                        "allowed on a single line" % index)
        if isinstance(document, dict) and "description" in document:
            description = document["description"] or ""
            if len(description) > 140:
                return "description: longer than 140 characters"
        return None

    def base_url(self):
        return "http://%s:%d" % self.server.server_address[:2]

    def run_view(self, run):
        view = {key: value for key, value in run.items() if key not in ("annotations", "repo", "updates")}
        output = run["output"]
        view["output"] = {"title": output.get("title"), "summary": output.get("summary"),
                          "text": output.get("text"),
                          "annotations_count": len(run["annotations"]),
                          "annotations_url": view["url"] + "/annotations"}
        return view

    def op_post_access_tokens(self, params, query, document):
        problem = self.token_scope_problem(document)
        if problem:
            return self.error(422, problem, DOCS + "/apps/apps#create-an-installation-access-token-for-an-app")
        requested = document
        if self.server.state.ignore_token_scope:
            document = {}
        permissions = dict(document.get("permissions") or APP_PERMISSIONS)
        permissions.setdefault("metadata", "read")  # GitHub adds it to every token
        names = document.get("repositories")
        state = self.server.state
        with state.lock:
            state.next_id += 1
            token = "ghs_fake%dinstallation%s" % (state.next_id, params["installation_id"])
            expires = time.time() + state.token_ttl
            state.issued.append({"token": token, "installation_id": params["installation_id"],
                                 "expires_epoch": expires, "jwt": self.bearer(),
                                 "permissions": permissions, "repositories": names,
                                 "request": requested})
        expires_at = datetime.datetime.fromtimestamp(expires, datetime.timezone.utc)
        answer = {"token": token, "expires_at": expires_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "permissions": permissions,
                  "repository_selection": "selected" if names is not None or
                  document.get("repository_ids") is not None else "all"}
        if names is not None:
            answer["repositories"] = [{"name": name} for name in names]
        self.answer(201, answer)

    def op_post_check_runs(self, params, query, document):
        state = self.server.state
        with state.lock:
            state.next_id += 1
            run_id = state.next_id
            status = document.get("status", "queued")
            if "conclusion" in document:
                status = "completed"
            url = "%s/repos/%s/%s/check-runs/%d" % (self.base_url(), params["owner"],
                                                    params["repo"], run_id)
            run = {"id": run_id, "node_id": "CR_%d" % run_id, "head_sha": document["head_sha"],
                   "external_id": document.get("external_id", ""), "url": url,
                   "html_url": "https://github.example/%s/%s/runs/%d" % (
                       params["owner"], params["repo"], run_id),
                   "details_url": document.get("details_url"), "status": status,
                   "conclusion": document.get("conclusion"),
                   "started_at": document.get("started_at", now_iso()),
                   "completed_at": document.get("completed_at") or (
                       now_iso() if status == "completed" else None),
                   "output": {}, "name": document["name"], "check_suite": {"id": 1},
                   "app": None, "pull_requests": [], "annotations": [],
                   "repo": params["owner"] + "/" + params["repo"], "updates": 0}
            self.apply_output(run, document.get("output"))
            state.check_runs[run_id] = run
            view = self.run_view(run)
        self.answer(201, view)

    @staticmethod
    def apply_output(run, output):
        if not output:
            return
        for key in ("title", "summary", "text"):
            if key in output:
                run["output"][key] = output[key]
        run["annotations"].extend(output.get("annotations") or [])

    def op_patch_check_run(self, params, query, document):
        state = self.server.state
        with state.lock:
            run = state.check_runs.get(int(params["check_run_id"]))
            if run is None or run["repo"] != params["owner"] + "/" + params["repo"]:
                run = None
            else:
                for key in ("name", "details_url", "external_id", "started_at", "status",
                            "conclusion", "completed_at"):
                    if key in document:
                        run[key] = document[key]
                if "conclusion" in document:
                    run["status"] = "completed"
                    run.setdefault("completed_at", None)
                    run["completed_at"] = document.get("completed_at") or now_iso()
                elif document.get("status") in ("queued", "in_progress"):
                    run["conclusion"] = None
                    run["completed_at"] = None
                self.apply_output(run, document.get("output"))
                run["updates"] += 1
                view = self.run_view(run)
        if run is None:
            return self.error(404, "Not Found")
        self.answer(200, view)

    def op_get_ref_check_runs(self, params, query, document):
        state = self.server.state
        name = query.get("check_name", [None])[0]
        status = query.get("status", [None])[0]
        latest = query.get("filter", ["latest"])[0] != "all"
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = max(int(query.get("page", ["1"])[0]), 1)
        ref = urllib.parse.unquote(params["ref"])
        repo = params["owner"] + "/" + params["repo"]
        with state.lock:
            runs = [run for run in sorted(state.check_runs.values(), key=lambda r: -r["id"])
                    if run["repo"] == repo and run["head_sha"] == ref
                    and (name is None or run["name"] == name)
                    and (status is None or run["status"] == status)]
            if latest:
                seen, kept = set(), []
                for run in runs:
                    if run["name"] not in seen:
                        seen.add(run["name"])
                        kept.append(run)
                runs = kept
            chunk = [self.run_view(run) for run in runs[(page - 1) * per_page:page * per_page]]
        headers = {}
        if page * per_page < len(runs):
            nxt = dict((k, v[0]) for k, v in query.items())
            nxt["page"] = str(page + 1)
            headers["Link"] = '<%s%s?%s>; rel="next"' % (
                self.base_url(), urllib.parse.urlsplit(self.path).path,
                urllib.parse.urlencode(nxt))
        self.answer(200, {"total_count": len(runs), "check_runs": chunk}, headers)

    def answer_conditional(self, document, headers=None):
        """200 with an ETag, or 304 (no body, not counted) when If-None-Match names it."""
        etag = 'W/"%s"' % hashlib.sha256(json.dumps(document, sort_keys=True)
                                          .encode("utf-8")).hexdigest()[:40]
        headers = dict(headers or {})
        headers["ETag"] = etag
        wanted = [tag.strip() for tag in self.headers.get("If-None-Match", "").split(",")]
        if etag in wanted or "*" in wanted:
            self.record["not_modified"] = True
            return self.answer(304, None, headers, counted=False)
        self.answer(200, document, headers)

    def repo_of(self, full_name):
        with self.server.state.lock:
            repo = self.server.state.repos.get(full_name)
            return copy.deepcopy(repo) if repo is not None else None

    def pull_view(self, full_name, repo, pull):
        owner, name = full_name.split("/", 1)
        number = int(pull["number"])
        base = self.base_url()
        repository = {"id": 1, "name": name, "full_name": full_name,
                      "clone_url": repo["clone_url"], "owner": {"login": owner}}
        return {"url": "%s/repos/%s/pulls/%d" % (base, full_name, number),
                "id": 1000 + number, "node_id": "PR_%d" % number, "number": number,
                "state": pull.get("state", "open"), "locked": False,
                "title": pull.get("title", "pull request %d" % number),
                "user": {"login": "octocat"}, "draft": bool(pull.get("draft", False)),
                "labels": [{"id": index + 1, "name": label, "color": "ededed",
                            "default": False} for index, label in
                           enumerate(pull.get("labels", []))],
                "head": {"label": owner + ":" + pull.get("ref", "topic"),
                         "ref": pull.get("ref", "topic"), "sha": pull["sha"],
                         "repo": repository, "user": {"login": owner}},
                "base": {"label": owner + ":" + pull.get("base", "main"),
                         "ref": pull.get("base", "main"),
                         "sha": pull.get("base_sha", "0" * 40), "repo": repository,
                         "user": {"login": owner}},
                "html_url": "https://github.example/%s/pull/%d" % (full_name, number)}

    def op_get_pulls(self, params, query, document):
        full_name = params["owner"] + "/" + params["repo"]
        repo = self.repo_of(full_name)
        if repo is None:
            return self.error(404, "Not Found")
        wanted = query.get("state", ["open"])[0]
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = max(int(query.get("page", ["1"])[0]), 1)
        pulls = [pull for pull in sorted(repo["pulls"], key=lambda p: -int(p["number"]))
                 if wanted == "all" or pull.get("state", "open") == wanted]
        chunk = [self.pull_view(full_name, repo, pull)
                 for pull in pulls[(page - 1) * per_page:page * per_page]]
        headers = {}
        if page * per_page < len(pulls):
            nxt = dict((k, v[0]) for k, v in query.items())
            nxt["page"] = str(page + 1)
            headers["Link"] = '<%s%s?%s>; rel="next"' % (
                self.base_url(), urllib.parse.urlsplit(self.path).path,
                urllib.parse.urlencode(nxt))
        self.answer_conditional(chunk, headers)

    def op_get_matching_refs(self, full_name, prefix):
        repo = self.repo_of(full_name)
        if repo is None:
            return self.error(404, "Not Found")
        base = self.base_url()
        refs = [{"ref": ref["ref"], "node_id": "REF_" + ref["ref"],
                 "url": "%s/repos/%s/git/%s" % (base, full_name, ref["ref"]),
                 "object": {"type": "commit", "sha": ref["sha"],
                            "url": "%s/repos/%s/git/commits/%s" % (base, full_name, ref["sha"])}}
                for ref in sorted(repo["refs"], key=lambda r: r["ref"])
                if ref["ref"].startswith("refs/" + prefix)]
        self.answer_conditional(refs)

    def op_post_statuses(self, params, query, document):
        state = self.server.state
        with state.lock:
            state.next_id += 1
            stamp = now_iso()
            status = {"url": "%s/repos/%s/%s/statuses/%s" % (self.base_url(), params["owner"],
                                                             params["repo"], params["sha"]),
                      "avatar_url": None, "id": state.next_id, "node_id": "SC_%d" % state.next_id,
                      "state": document["state"], "description": document.get("description"),
                      "target_url": document.get("target_url"),
                      "context": document.get("context", "default"), "created_at": stamp,
                      "updated_at": stamp, "creator": None, "sha": params["sha"],
                      "repo": params["owner"] + "/" + params["repo"]}
            state.statuses.append(status)
        self.answer(201, {k: v for k, v in status.items() if k not in ("sha", "repo")})


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schema", required=True)
    parser.add_argument("--token", action="append", default=[])
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    arguments = parser.parse_args()
    server = Server(("127.0.0.1", arguments.port), Handler)
    server.schemas = Schemas(arguments.schema)
    server.state = State(arguments.token)
    sys.stdout.write("PORT %d\n" % server.server_address[1])
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
