#!/usr/bin/env python3
"""Drives history() and the inspect answers' releaseRequested of clients/python/keyholder.py against a
server with history on, one with it off, and a stand-in server that answers like a keyholder gone wrong;
prints one JSON object per step.

    python3 history_and_watch.py '{"on": "http://...", "off": "http://..."}'
"""
import http.server
import json
import os
import sys
import threading
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients", "python"))
import keyholder  # noqa: E402


def step(name, **fields):
    print(json.dumps({"step": name, **fields}), flush=True)


def refused(call):
    """What the client did with an answer: the error's class and code, or "accepted"."""
    try:
        call()
    except keyholder.KeyholderError as err:
        return {"error": type(err).__name__, "code": err.code}
    return "accepted"


# What the stand-in answers on each path: a 200 whose body a keyholder would never send.
STAND_IN = {
    "/v1/locks/no-recording/history": {"key": "no-recording", "events": [], "truncated": False},
    "/v1/locks/recording-text/history": {"key": "recording-text", "recording": "yes", "events": [], "truncated": False},
    "/v1/locks/recorded/history": {"key": "recorded", "recording": True, "events": [], "truncated": False},
    "/v1/locks/bad-request": {"key": "bad-request", "held": True, "index": 2, "releaseRequested": {"by": "ops"}},
    "/v1/semaphores/bad-request": {
        "key": "bad-request",
        "index": 2,
        "waiters": 0,
        "holders": [{"holder": None, "fencingToken": 1, "expiresAt": "2026-01-01T00:00:00.000Z", "ttlRemainingMs": 5, "releaseRequested": 1}],
    },
}


class StandIn(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the name http.server calls
        body = json.dumps(STAND_IN.get(self.path.split("?")[0], {})).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main(servers):
    on = keyholder.Client(servers["on"])
    off = keyholder.Client(servers["off"])
    key = f"hist-{uuid.uuid4().hex[:8]}"
    for client in (on, off):
        with client.lock(key, ttl_ms=10000):
            pass
    recorded = on.history(key)
    step("on", recording=recorded["recording"], types=[e["type"] for e in recorded["events"]])
    unrecorded = off.history(key)
    step("off", recording=unrecorded["recording"], events=unrecorded["events"])

    # A release request shows in inspect (and so in watch) answers, on the lease asked only.
    lease = off.acquire(key, ttl_ms=10000, holder="asked")
    try:
        off.request_release(key, "default", lease.fencing_token, reason="drain")
        status = off.inspect(key)
        step("lock-asked", releaseRequested=status.get("releaseRequested"))
    finally:
        lease.release()
    sem = f"sem-{key}"
    first = off.acquire_semaphore(sem, limit=2, ttl_ms=10000)
    second = off.acquire_semaphore(sem, limit=2, ttl_ms=10000)
    try:
        off.request_release(sem, "default", second.fencing_token, primitive="semaphores")
        holders = off.inspect_semaphore(sem)["holders"]
        shown = {h["fencingToken"]: h.get("releaseRequested") for h in holders}
        step("semaphore-asked", first=shown[first.fencing_token], second=shown[second.fencing_token])
        # Evicting the lease asked only: the other permit stays its holder's.
        evicted = off.force_release(sem, "default", fencing_token=second.fencing_token, primitive="semaphores")
        left = [h["fencingToken"] for h in off.inspect_semaphore(sem)["holders"]]
        step("semaphore-evicted", evicted=[e["fencingToken"] for e in evicted["evicted"]], left=left, second=second.fencing_token, first=first.fencing_token)
    finally:
        first.release()
        second.release()

    stand_in = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    threading.Thread(target=stand_in.serve_forever, daemon=True).start()
    try:
        fake = keyholder.Client(f"http://127.0.0.1:{stand_in.server_address[1]}", retry_budget_s=0)
        step(
            "stand-in",
            noRecording=refused(lambda: fake.history("no-recording")),
            recordingText=refused(lambda: fake.history("recording-text")),
            recorded=refused(lambda: fake.history("recorded")),
            lockBadRequest=refused(lambda: fake.inspect("bad-request")),
            semaphoreBadRequest=refused(lambda: fake.inspect_semaphore("bad-request")),
        )
    finally:
        stand_in.shutdown()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
