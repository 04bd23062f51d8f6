"""The API's gate: headers, authentication, token scope and body validation, then the operation
(an `op_<method>_<template>` method of a mixin)."""

import json
import re
import urllib.parse

from .state import MAX_ANNOTATION_BLOB, MAX_ANNOTATION_TITLE


class Api:
    """Header checks, authentication and body validation before an operation runs."""

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
