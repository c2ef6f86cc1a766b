#!/usr/bin/env python3
"""Drives inspect(queue=True) of clients/python/keyholder.py for a lock, a semaphore and a read/write lock
against a running server; prints one JSON object per step.

    python3 queues.py http://127.0.0.1:3000
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


def wait_until(what, cond, timeout_s=20.0):
    """Polls cond until it holds: the test waits on the server's state, never a fixed sleep."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def queue_one_by_one(inspect, key, acquires):
    """Starts each acquire in a thread once the one before is queued, so the queue's order is known.
    Returns the threads' grants (filled in as they are granted) and the threads."""
    grants = {}
    threads = []
    for i, (label, acquire) in enumerate(acquires):
        t = threading.Thread(target=lambda label=label, acquire=acquire: grants.__setitem__(label, acquire()), daemon=True)
        t.start()
        threads.append(t)
        wait_until(f"{label} queued", lambda n=i + 1: inspect(key)["waiters"] == n)
    return grants, threads


def view(queue):
    return [{k: v for k, v in q.items() if k != "waitingSince"} for q in queue]


def main(url):
    client = keyholder.Client(url)
    run = uuid.uuid4().hex[:8]

    # A lock: its holder, then two callers waiting in the order they came.
    key = f"py-queue-{run}"
    holder = client.acquire_grant(key, ttl_ms=10000, holder="holder")
    grants, threads = queue_one_by_one(
        client.inspect,
        key,
        [(label, lambda label=label: client.acquire_grant(key, ttl_ms=10000, wait_ms=20000, holder=label)) for label in ("w1", "w2")],
    )
    status = client.inspect(key, queue=True)
    plain = client.inspect(key)
    try:
        client.inspect(key, index=status["index"], wait_ms=100, queue=True)
        blocking = "accepted"
    except ValueError:
        blocking = "refused"
    client.release(key, holder["ownerToken"])
    wait_until("w1 granted", lambda: "w1" in grants)
    after = client.inspect(key, queue=True)
    client.release(key, grants["w1"]["ownerToken"])
    threads[1].join(20)
    client.release(key, grants["w2"]["ownerToken"])
    step(
        "lock",
        queue=view(status["queue"]),
        waitingSince=all(isinstance(q["waitingSince"], str) for q in status["queue"]),
        ownerTokenShown=holder["ownerToken"] in json.dumps(status),
        plainHasQueue="queue" in plain,
        blocking=blocking,
        after={"holder": after["holder"], "queue": view(after["queue"])},
        free="queue" in client.inspect(key, queue=True),
    )

    # A semaphore of 1: a permit held, one caller queued (with its weight).
    sem = f"py-queue-sem-{run}"
    permit = client.acquire_semaphore(sem, limit=1, ttl_ms=10000, holder="permit")
    grants, threads = queue_one_by_one(
        client.inspect_semaphore,
        sem,
        [("s1", lambda: client.acquire_semaphore(sem, limit=1, ttl_ms=10000, wait_ms=20000, holder="s1"))],
    )
    sem_status = client.inspect_semaphore(sem, queue=True)
    permit.release()
    threads[0].join(20)
    grants["s1"].release()
    step("semaphore", queue=view(sem_status["queue"]))

    # A read/write lock held by a writer: a reader queued, then a writer (each with its mode).
    rw = f"py-queue-rw-{run}"
    writer = client.acquire_rwlock(rw, mode="write", ttl_ms=10000, holder="writer")
    grants, threads = queue_one_by_one(
        client.inspect_rwlock,
        rw,
        [
            ("r1", lambda: client.acquire_rwlock(rw, mode="read", ttl_ms=10000, wait_ms=20000, holder="r1")),
            ("w2", lambda: client.acquire_rwlock(rw, mode="write", ttl_ms=10000, wait_ms=20000, holder="w2")),
        ],
    )
    rw_status = client.inspect_rwlock(rw, queue=True)
    writer.release()
    threads[0].join(20)
    grants["r1"].release()
    threads[1].join(20)
    grants["w2"].release()
    step("rwlock", queue=view(rw_status["queue"]))


if __name__ == "__main__":
    main(sys.argv[1])
