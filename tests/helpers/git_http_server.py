#!/usr/bin/python3
"""git's smart HTTP (git http-backend as CGI) behind a small server on 127.0.0.1, for tests.

usage: git_http_server.py PROJECT_ROOT [--cert CERT.pem --key KEY.pem] [--auth-log FILE]
                          [--redirect PREFIX=URL]...

Requires HTTP basic auth when SANDGATE_TEST_TOKEN is set in the environment (any user name,
the token as password); answers 401 otherwise. Prints "PORT <n>" on stdout once listening,
and logs one line per request (method, path, status; never the Authorization header) to
stderr. Serves until killed.

--auth-log FILE appends one line per request, "<path> <password or ->", the password being the
one a Basic Authorization header carried (tests assert which paths ever saw the token).
--redirect PREFIX=URL answers 302 to URL + the rest of the path for paths under PREFIX.
"""

import http.server
import os
import ssl
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (read-only in the wrap)
import git_cgi  # beside this file  # pylint: disable=wrong-import-position


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("http: " + (fmt % args) + "\n")

    def password(self):
        return git_cgi.basic_password(self.headers)

    def authorised(self):
        token = os.environ.get("SANDGATE_TEST_TOKEN")
        return not token or self.password() == token

    def record(self):
        log = option("--auth-log")
        if log:
            with open(log, "a", encoding="utf-8") as out:
                out.write(f"{self.path} {self.password() or '-'}\n")

    def redirect(self):
        for rule in options("--redirect"):
            prefix, _, target = rule.partition("=")
            if self.path.startswith(prefix):
                self.send_response(302)
                self.send_header("Location", target + self.path[len(prefix):])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return True
        return False

    def serve(self):
        self.record()
        if self.redirect():
            return
        if not self.authorised():
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="sandgate-test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = git_cgi.read_body(self.rfile, self.headers) if self.command == "POST" else b""
        path, _, query = self.path.partition("?")
        git_cgi.answer_with_backend(self, sys.argv[1], self.command, path, query, body)

    do_GET = serve
    do_POST = serve


def options(name):
    return [sys.argv[i + 1] for i, arg in enumerate(sys.argv[:-1]) if arg == name]


def option(name):
    found = options(name)
    return found[0] if found else None


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if option("--cert"):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(option("--cert"), option("--key"))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print("PORT", server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
