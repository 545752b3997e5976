#!/usr/bin/env python3
"""A file server on 127.0.0.1 for the flash-from-a-URL tests: Range, ETag
and Last-Modified, and faults chosen by the query string.

    http_server.py DIR LOG [--tls CERT KEY]

Prints the port on its first line, then serves DIR. Each request is one
line in LOG: "METHOD PATH range=... if-range=... -> STATUS".

Faults (?fault=a,b,...), counted per path and query:
  drop40      the first answer stops after 40% of the file (connection cut)
  stall40     the first answer sends 40%, then nothing for 30 s (longer
              than any stall timeout the tests give), then cuts the
              connection; "STALL-BEGIN PATH" and "STALL-END PATH" in LOG
              mark the stall
  norange     Range is ignored (200 and the whole file every time)
  etagchange  after the first answer the file has another ETag (as if it
              changed on the server): If-Range no longer matches
  status=N    answers N (404, 500, ...) with a small HTML body
  redirect    answers 302 to the same path without this fault
  rate=N      sends at most N KiB a second (every answer): a slow mirror

It is also a proxy, for the proxy tests: a request in absolute form
("GET http://any.host/path") is answered from DIR, and CONNECT to
127.0.0.1:PORT is tunnelled (logged as "CONNECT 127.0.0.1:PORT ...").
"""

import os
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ROOT = sys.argv[1]
LOG = sys.argv[2]
SEEN = {}
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def mark(self, what):
        with LOCK:
            with open(LOG, "a") as f:
                f.write("%s %s\n" % (what, self.path))

    def note(self, status):
        line = "%s %s range=%s if-range=%s -> %d\n" % (
            self.command,
            self.path,
            self.headers.get("Range", "-"),
            self.headers.get("If-Range", "-"),
            status,
        )
        with LOCK:
            with open(LOG, "a") as f:
                f.write(line)

    def do_CONNECT(self):
        host, _, port = self.path.rpartition(":")
        try:
            if host != "127.0.0.1":
                raise OSError("only 127.0.0.1 is tunnelled")
            upstream = socket.create_connection((host, int(port)), timeout=10)
        except (OSError, ValueError):
            self.note(502)
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.note(200)
        self.send_response(200, "Connection established")
        self.end_headers()
        self.close_connection = True
        down = self.connection

        def pump(a, b):
            try:
                while True:
                    chunk = a.recv(64 << 10)
                    if not chunk:
                        break
                    b.sendall(chunk)
            except OSError:
                pass
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        t = threading.Thread(target=pump, args=(upstream, down), daemon=True)
        t.start()
        pump(down, upstream)
        t.join()
        upstream.close()

    def do_GET(self):
        url = urlsplit(self.path)
        q = parse_qs(url.query)
        faults = set(",".join(q.get("fault", [])).split(",")) - {""}
        key = self.path
        with LOCK:
            n = SEEN.get(key, 0)
            SEEN[key] = n + 1
        first = n == 0
        status = [f for f in faults if f.startswith("status=")]
        if status:
            code = int(status[0].split("=")[1])
            body = b"<!DOCTYPE html><html><body><h1>%d</h1></body></html>\n" % code
            self.note(code)
            self.send_response(code)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if "redirect" in faults:
            self.note(302)
            self.send_response(302)
            self.send_header("Location", url.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = os.path.join(ROOT, url.path.lstrip("/"))
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            self.note(404)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        st = os.stat(path)
        etag = '"%x-%x"' % (st.st_size, int(st.st_mtime))
        if "etagchange" in faults and not first:
            etag = '"changed-%d"' % n
        last_modified = self.date_time_string(int(st.st_mtime))
        start = 0
        rng = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        partial = False
        if rng and "norange" not in faults and (if_range is None or if_range in (etag, last_modified)):
            spec = rng.split("=", 1)[1]
            a, b = spec.split("-", 1)
            start = int(a)
            end = int(b) if b else len(data) - 1
            if start >= len(data):
                self.note(416)
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            end = min(end, len(data) - 1)
            partial = True
        else:
            end = len(data) - 1
        body = data[start : end + 1]
        code = 206 if partial else 200
        self.note(code)
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", last_modified)
        self.send_header("Accept-Ranges", "none" if "norange" in faults else "bytes")
        if partial:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, len(data)))
        self.end_headers()
        cut = None
        # The faults hit the first whole-file answer only.
        if first and start == 0 and len(body) == len(data):
            if "drop40" in faults or "stall40" in faults:
                cut = len(data) * 4 // 10
        rate = [int(f.split("=")[1]) << 10 for f in faults if f.startswith("rate=")]
        began = time.monotonic()
        sent = 0
        while sent < len(body):
            if rate:
                ahead = sent / rate[0] - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)
            if cut is not None and sent >= cut:
                if "stall40" in faults:
                    self.mark("STALL-BEGIN")
                    time.sleep(30)
                    self.mark("STALL-END")
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.close_connection = True
                return
            k = min(64 << 10, len(body) - sent)
            if cut is not None:
                k = min(k, cut - sent)
            try:
                self.wfile.write(body[sent : sent + k])
            except OSError:
                return
            sent += k


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    if len(sys.argv) > 3 and sys.argv[3] == "--tls":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[4], sys.argv[5])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
