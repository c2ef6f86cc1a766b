#!/usr/bin/env python3
"""Drives the watch helpers of clients/python/keyholder.py against a server whose LOCK_MAX_WAIT_MS is below
their default wait; prints one JSON object per step.

    python3 short_max_wait.py http://127.0.0.1:PORT
"""
import json
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients", "python"))
import keyholder  # noqa: E402


def step(name, **fields):
    print(json.dumps({"step": name, **fields}), flush=True)


def held(status):
    return status["held"] if "held" in status else len(status["holders"]) > 0


def watched(name, watch, acquire):
    """The first two states watch() yields with its default wait: the key free, then held by `acquire`."""
    key = f"py-max-wait-{name}-{uuid.uuid4().hex[:8]}"
    states = []
    lease = None
    try:
        for status in watch(key):
            states.append(held(status))
            if len(states) == 2:
                break
            lease = acquire(key)
    except keyholder.KeyholderError as err:
        step(name, error=type(err).__name__, code=err.code, status=err.status)
        return
    finally:
        if lease is not None:
            lease.release()
    step(name, states=states)


def main(url):
    client = keyholder.Client(url, retry_budget_s=5)
    watched("watch", client.watch, lambda k: client.acquire(k, ttl_ms=10000))
    watched("watch_semaphore", client.watch_semaphore, lambda k: client.acquire_semaphore(k, limit=2, ttl_ms=10000))
    watched("watch_rwlock", client.watch_rwlock, lambda k: client.acquire_rwlock(k, mode="read", ttl_ms=10000))
    try:
        states = client.watch(f"py-max-wait-explicit-{uuid.uuid4().hex[:8]}", wait_ms=30000)
        next(states)  # the state now (no wait); the first blocking query is the one refused
        next(states)
        step("explicit", error=None)
    except keyholder.KeyholderError as err:
        step("explicit", error=type(err).__name__, code=err.code, status=err.status)


if __name__ == "__main__":
    main(sys.argv[1])
