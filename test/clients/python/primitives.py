#!/usr/bin/env python3
"""Drives semaphores, read/write locks, lock sets and watch of clients/python/keyholder.py against a running
server; prints one JSON object per step.

    python3 primitives.py http://127.0.0.1:3000
"""
import json
import os
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients", "python"))
import keyholder  # noqa: E402


def step(name, **fields):
    print(json.dumps({"step": name, **fields}), flush=True)


def refused(call):
    """The class name and code of the KeyholderError `call` raises (it must raise one)."""
    try:
        call()
    except keyholder.KeyholderError as err:
        return {"error": type(err).__name__, "code": err.code, "retryAfterMs": err.retry_after_ms}
    raise AssertionError("the call succeeded")


def held_past(lease):
    """Holds `lease` for two and a half TTLs: its renew thread must keep it."""
    time.sleep(lease.ttl_ms / 1000 * 2.5)
    return not lease.lost.is_set()


def short_ttl_ms(client, key):
    """A TTL that a renewal comes back well within: 1 s on a quiet machine, stretched to eight times the
    slowest of ten round trips measured here on a busy one (renewals come at a third of the TTL)."""
    slowest = 0.0
    for _ in range(10):
        sent = time.monotonic()
        client.inspect(key)
        slowest = max(slowest, time.monotonic() - sent)
    return min(10000, max(1000, int(slowest * 8000)))


def main(url):
    client = keyholder.Client(url)
    once = keyholder.Client(url, retry_budget_s=0)
    run = uuid.uuid4().hex[:8]
    ttl_ms = short_ttl_ms(client, f"py-probe-{run}")

    # Semaphore of 2: two permits, a third refused; another limit refused; a permit renews past its TTL.
    sem = f"py-sem-{run}"
    with client.semaphore(sem, limit=2, ttl_ms=ttl_ms, holder="a") as first:
        second = client.acquire_semaphore(sem, limit=2, ttl_ms=5000, holder="b")
        full = refused(lambda: once.acquire_semaphore(sem, limit=2, ttl_ms=1000))
        mismatch = refused(lambda: once.acquire_semaphore(sem, limit=3, ttl_ms=1000))
        state = client.inspect_semaphore(sem)
        kept = held_past(first)
        step(
            "semaphore",
            permitsHeld=state["permitsHeld"],
            holders=sorted(h["holder"] for h in state["holders"]),
            full=full,
            mismatch=mismatch,
            kept=kept,
            limit=first.limit,
            tokens=[first.fencing_token, second.fencing_token],
        )
        second.release()
    step("semaphore-released", permitsHeld=client.inspect_semaphore(sem)["permitsHeld"])

    # Read/write lock: two readers share it, a writer is refused, then waits and gets it once both leave.
    rw = f"py-rw-{run}"
    reader1 = client.acquire_rwlock(rw, "read", ttl_ms=5000)
    reader2 = client.acquire_rwlock(rw, "read", ttl_ms=5000)
    writer_refused = refused(lambda: once.acquire_rwlock(rw, "write", ttl_ms=1000))
    threading.Timer(0.3, reader1.release).start()
    threading.Timer(0.6, reader2.release).start()
    with client.rwlock(rw, "write", ttl_ms=5000, wait_ms=20000) as writer:
        state = client.inspect_rwlock(rw)
        step(
            "rwlock",
            readers=[reader1.mode, reader2.mode],
            writerRefused=writer_refused,
            mode=state["mode"],
            writerToken=writer.fencing_token,
            readerTokens=[reader1.fencing_token, reader2.fencing_token],
        )

    # Lock set: all keys held under one token, each with its own fencing token; a member is refused to a
    # plain acquire; renewed past its TTL; released whole.
    keys = [f"py-set-{run}-a", f"py-set-{run}-b"]
    with client.lock_set(keys, ttl_ms=ttl_ms, holder="set") as held:
        member = refused(lambda: once.acquire_grant(keys[1], ttl_ms=1000))
        overlapping = refused(lambda: once.acquire_lock_set([keys[0], f"py-set-{run}-c"], ttl_ms=1000))
        kept = held_past(held)
        step(
            "lock-set",
            keys=held.keys,
            tokens=sorted(held.fencing_tokens),
            member=member,
            overlapping=overlapping,
            kept=kept,
            holders=[client.inspect(k).get("holder") for k in keys],
        )
    step("lock-set-released", held=[client.inspect(k)["held"] for k in keys])

    # Watch: a follower sees the lock taken and given back, without polling.
    key = f"py-watch-{run}"
    seen = []
    stop = threading.Event()
    ready = threading.Event()

    def follow():
        for status in client.watch(key, wait_ms=2000, stop=stop):
            seen.append(status["held"])
            ready.set()

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    ready.wait(10)
    with client.lock(key, ttl_ms=5000):
        deadline = time.monotonic() + 10
        while seen[-1:] != [True] and time.monotonic() < deadline:
            time.sleep(0.02)
    deadline = time.monotonic() + 10
    while seen[-1:] != [False] and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    follower.join(10)
    step("watch", seen=seen, stopped=not follower.is_alive())

    # A blocking query on a semaphore: answered once a permit is taken (or at once, if it already was).
    status = client.inspect_semaphore(sem)
    permit = None

    def take():
        nonlocal permit
        permit = client.acquire_semaphore(sem, limit=2, ttl_ms=5000)

    taker = threading.Timer(0.3, take)
    taker.start()
    changed = client.inspect_semaphore(sem, index=status["index"], wait_ms=10000)
    step("watch-semaphore", before=status["permitsHeld"], after=changed["permitsHeld"])
    taker.join(10)  # the answer can come before acquire_semaphore has returned in the other thread
    permit.release()


if __name__ == "__main__":
    main(sys.argv[1])
