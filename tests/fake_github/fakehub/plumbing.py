"""Reading requests, answering them (rate-limit headers counted), recording them, routing them
to the control endpoints, the faults, git's smart HTTP or the API."""

import json
import socket
import struct
import time
import urllib.parse

import git_cgi  # tests/helpers, put on sys.path by server.py

from .state import DOCS

API_PREFIXES = ("/api/v3", "")


class Plumbing:
    """Reading requests, answering them, recording them, routing them."""

    def log_message(self, fmt, *args):  # quiet: the tests read /_control/requests instead
        pass

    def read_body(self):
        return git_cgi.read_body(self.rfile, self.headers)  # chunked too: git may send it

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
        if self.is_git_path(parsed.path):
            return self.git(method, parsed, body)
        if self.apply_fault(parsed.path):
            return
        path = parsed.path
        for prefix in API_PREFIXES:
            if prefix and path.startswith(prefix + "/"):
                path = path[len(prefix):]
                break
        self.api(method, path, urllib.parse.parse_qs(parsed.query), body)
