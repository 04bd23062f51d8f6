"""What the test HTTP servers share: the request pieces git's smart HTTP needs (a Basic
password, a body sent chunked or with Content-Length) and `git http-backend` run as a CGI.
Used by tests/helpers/git_http_server.py and the fake GitHub's git route
(tests/fake_github/fakehub/git_http.py)."""

import base64
import os
import subprocess


def basic_password(headers):
    """The password of a Basic Authorization header, or None (absent, not Basic, undecodable)."""
    header = headers.get("Authorization", "")
    if not header.startswith("Basic "):
        return None
    try:
        return base64.b64decode(header[6:]).decode().partition(":")[2]
    except ValueError:
        return None


def read_body(rfile, headers):
    """The request body: chunked (git sends large pushes and fetch negotiations so) or by
    Content-Length; empty when there is none."""
    if headers.get("Transfer-Encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(rfile.readline().strip().split(b";")[0], 16)
            if size == 0:
                rfile.readline()
                return body
            body += rfile.read(size)
            rfile.readline()
    length = int(headers.get("Content-Length") or 0)
    return rfile.read(length) if length else b""


def answer_with_backend(handler, project_root, method, path, query, body, before_send=None):
    """Answers the request `handler` (a BaseHTTPRequestHandler) holds with what `git
    http-backend` says for it under project_root (every repository exported). before_send, if
    given, is called with the status before anything is sent (a server that records requests
    records it there, so a client that has the answer finds it)."""
    headers = handler.headers
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "GIT_PROJECT_ROOT": project_root, "GIT_HTTP_EXPORT_ALL": "1",
           "REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query,
           "CONTENT_TYPE": headers.get("Content-Type", ""),
           "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": "127.0.0.1",
           "GATEWAY_INTERFACE": "CGI/1.1"}
    if headers.get("Content-Encoding"):
        env["HTTP_CONTENT_ENCODING"] = headers["Content-Encoding"]
    if headers.get("Git-Protocol"):
        env["GIT_PROTOCOL"] = headers["Git-Protocol"]
    done = subprocess.run(["git", "http-backend"], input=body, env=env,
                          capture_output=True, check=False)
    head, _, payload = done.stdout.partition(b"\r\n\r\n")
    status, answer_headers = 200, []
    for line in head.split(b"\r\n"):
        name, _, value = line.decode().partition(":")
        if name.lower() == "status":
            status = int(value.strip().split()[0])
        elif name:
            answer_headers.append((name, value.strip()))
    if before_send is not None:
        before_send(status)
    handler.send_response(status)
    for name, value in answer_headers:
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)
