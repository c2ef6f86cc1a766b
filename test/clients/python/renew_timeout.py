#!/usr/bin/env python3
"""A renewal whose connection goes silently dead (the server reads it and never answers) is given up after
the client's timeout_s and tried again on a new connection, not waited on until the lease's safe deadline.
Prints one JSON object: the renewals the server received within the window, and when.

    python3 renew_timeout.py
"""
import http.server
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients", "python"))
import keyholder  # noqa: E402

TTL_MS = 6000
renewals = []
started = time.monotonic()


class Silent(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        if self.path.endswith("/renew"):
            renewals.append(round(time.monotonic() - started, 3))
            time.sleep(30)  # never answers within the test: the connection is as good as dead
            return
        now_ms = int(time.time() * 1000)
        body = {
            "key": "k",
            "ownerToken": "AAAAAAAAAAAAAAAAAAAAAA",
            "fencingToken": 1,
            "ttlMs": TTL_MS,
            "expiresAt": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((now_ms + TTL_MS) / 1000)) + ".000Z",
            "holder": None,
        }
        raw = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Silent)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
client = keyholder.Client(f"http://127.0.0.1:{server.server_address[1]}", timeout_s=0.5)
lease = client.acquire("k", ttl_ms=TTL_MS)
# The first renewal is due at about a third of the TTL (2 s); capped at 0.5 s, a second follows well before 4 s.
time.sleep(4.0)
print(json.dumps({"renewals": renewals}), flush=True)
os._exit(0)
