#!/usr/bin/python3
"""A destination for the egress proxy's tests, on the host's 127.0.0.1 (outside any sandbox).

usage: egress_server.py LOG [--cert CERT.pem --key KEY.pem] [--root DIR]

Prints "PORT <n>" on stdout once listening; appends one line per request to LOG
("<method> <path> host=<Host header>"). Serves until killed:
  /hello       "hello from the host (host=<Host header>)\n"
  /bytes/N     N bytes of 'x', streamed in 64 KiB chunks
  /stall/S     the headers of a 1-byte body, then S seconds of silence before the byte
  /files/PATH  with --root: the regular file DIR/PATH, or DIR/PATH/index.html (a git
               repository's dumb-HTTP files, a pip index), 404 when there is none
"""

import http.server
import os
import socketserver
import ssl
import sys
import time

sys.dont_write_bytecode = True


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):  # pylint: disable=invalid-name
        host = self.headers.get("Host", "")
        with open(sys.argv[1], "a", encoding="utf-8") as log:
            log.write(f"GET {self.path} host={host}\n")
        if self.path == "/hello":
            body = f"hello from the host (host={host})\n".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path.startswith("/bytes/"):
            size = int(self.path[len("/bytes/"):])
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = b"x" * 65536
            while size > 0:
                n = min(size, len(chunk))
                self.wfile.write(chunk[:n])
                size -= n
        elif self.path.startswith("/stall/"):
            self.send_response(200)
            self.send_header("Content-Length", "1")
            self.end_headers()
            self.wfile.flush()
            time.sleep(float(self.path[len("/stall/"):]))
            self.wfile.write(b"x")
        elif self.path.startswith("/files/") and ROOT:
            self.send_file(self.path[len("/files/"):].split("?")[0])
        else:
            self.send_error(404)

    def send_file(self, relative):
        path = os.path.realpath(os.path.join(ROOT, relative))
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")  # a pip index's project page
        if not path.startswith(ROOT + os.sep) or not os.path.isfile(path):
            self.send_error(404)
            return
        with open(path, "rb") as file:
            body = file.read()
        self.send_response(200)
        if path.endswith(".html"):
            self.send_header("Content-Type", "text/html")  # pip reads no other page
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client the proxy cut off (the byte limit) is expected


ROOT = os.path.realpath(sys.argv[sys.argv.index("--root") + 1]) if "--root" in sys.argv else ""


def main():
    server = Server(("127.0.0.1", 0), Handler)
    if "--cert" in sys.argv:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[sys.argv.index("--cert") + 1], sys.argv[sys.argv.index("--key") + 1])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


main()
