#!/usr/bin/env python3
"""One flash through a running `kopiru gui`, as its page does it: a POST
to /api/flash, then the event stream until the job's result (what the
page shows as "verified"). For scripts/bench/gui.sh: the time from
"Flash" to "verified" is this process's wall time.

usage: gui-flash.py SESSION IMAGE DEVICE...
SESSION: a JSON file {"port": N, "cookie": "kopiru_session=..."}.
Exits 0 when every device was written and verified, else 1."""
import json
import socket
import sys

session = json.load(open(sys.argv[1]))
port, cookie = session["port"], session["cookie"]
origin = f"http://127.0.0.1:{port}"
body = json.dumps({"image": sys.argv[2], "devices": sys.argv[3:]}).encode()
s = socket.create_connection(("127.0.0.1", port))
s.sendall((f"POST /api/flash HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {origin}\r\n"
           f"Cookie: {cookie}\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
answer = b""
while chunk := s.recv(65536):
    answer += chunk
s.close()
head, _, data = answer.partition(b"\r\n\r\n")
if not head.startswith(b"HTTP/1.1 200"):
    sys.exit(f"gui-flash: not started: {answer.decode(errors='replace')}")
job = json.loads(data)["job"]
s = socket.create_connection(("127.0.0.1", port))
s.sendall((f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
           f"Cookie: {cookie}\r\n\r\n").encode())
buf = b""
head = None
while True:
    chunk = s.recv(1 << 20)
    if not chunk:
        sys.exit("gui-flash: the event stream ended")
    buf += chunk
    if head is None:
        if b"\r\n\r\n" not in buf:
            continue
        head, buf = buf.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 200"):
            sys.exit(f"gui-flash: no event stream: {head.decode(errors='replace')}")
    while b"\n\n" in buf:
        event, buf = buf.split(b"\n\n", 1)
        if not event.startswith(b"data: "):
            continue
        state = json.loads(event[6:])
        j = next((x for x in state["jobs"] if x["id"] == job), None)
        if j and (j["result"] or j["refused"]):
            ok = j["result"] and j["result"]["exit_code"] == 0
            if not ok:
                print(json.dumps(j), file=sys.stderr)
            sys.exit(0 if ok else 1)
