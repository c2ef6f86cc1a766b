#!/usr/bin/env python3
"""Drives clients/python/keyholder.py against a running server; prints one JSON object per step.

    python3 lock_flow.py http://127.0.0.1:3000
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


def main(url):
    client = keyholder.Client(url)
    other = keyholder.Client(url, retry_budget_s=0)
    key = f"python-lock-{uuid.uuid4()}"

    # A 1 s lease held for 3 s: the background thread renews it; others are refused meanwhile.
    with client.lock(key, ttl_ms=1000, holder="py") as lease:
        first_token = lease.fencing_token
        held_checks = 0
        started = time.monotonic()
        while time.monotonic() - started < 3:
            state = client.inspect(key)
            assert state["held"] and state["fencingToken"] == first_token, state
            assert not lease.lost.is_set(), lease.lost_reason
            held_checks += 1
            time.sleep(0.2)
        try:
            other.acquire_grant(key, ttl_ms=1000)
            raise AssertionError("a second acquire succeeded while the lock was held")
        except keyholder.LockHeldError as err:
            step("held-elsewhere", code=err.code, status=err.status, retryAfterMs=err.retry_after_ms)
        step("held", fencingToken=first_token, checks=held_checks, lost=lease.lost.is_set())
    step("released", held=client.inspect(key)["held"])

    # An error inside the block: released on the way out, the block's error propagates.
    try:
        with client.lock(key, ttl_ms=5000) as lease:
            second_token = lease.fencing_token
            raise ValueError("boom")
    except ValueError as err:
        step("raised", error=str(err), fencingToken=second_token, held=client.inspect(key)["held"])

    # wait_ms: queued behind a holder that lets go after a moment.
    holder = client.acquire(key, ttl_ms=5000)
    threading.Timer(0.5, holder.release).start()
    with client.lock(key, ttl_ms=5000, wait_ms=20000) as lease:
        step("waited", fencingToken=lease.fencing_token, previous=holder.fencing_token)

    # Force-released while held: `lost` is set, and leaving the block raises LeaseLostError.
    try:
        with client.lock(key, ttl_ms=3000) as lease:
            client.force_release(key, "default")
            lost_in_time = lease.lost.wait(10)
            step("lost", set=lost_in_time, reason=lease.lost_reason)
    except keyholder.LeaseLostError as err:
        step("lease-lost-error", reason=err.reason)
    step("end", held=client.inspect(key)["held"])

    # Single calls, no lease: what the API answers, as typed errors.
    grant = client.acquire_grant(key, ttl_ms=5000, holder="py")
    renewal = client.renew(key, grant["ownerToken"], 10000)
    state = client.inspect(key)
    try:
        client.renew(key, grant["ownerToken"], 1)
        raise AssertionError("a TTL of 1 ms was accepted")
    except keyholder.InvalidRequestError as err:
        bad_ttl = {"code": err.code, "status": err.status, "fields": [e["field"] for e in err.problem["errors"]]}
    released = client.release(key, grant["ownerToken"])
    try:
        client.release(key, grant["ownerToken"])
        raise AssertionError("a second release succeeded")
    except keyholder.NotOwnerError as err:
        again = {"code": err.code, "status": err.status}
    step(
        "single-calls",
        renewedToken=renewal["fencingToken"] == grant["fencingToken"],
        renewedTtlMs=renewal["ttlMs"],
        ownerTokenShown="ownerToken" in state,
        holder=state["holder"],
        badTtl=bad_ttl,
        released=released["released"],
        releaseAgain=again,
    )

    # A force release naming the lease it means: a newer holder is left alone, the named one goes.
    old = client.acquire_grant(key, ttl_ms=5000, holder="old")
    client.release(key, old["ownerToken"])
    new = client.acquire_grant(key, ttl_ms=5000, holder="new")
    try:
        client.force_release(key, "default", fencing_token=old["fencingToken"])
        raise AssertionError("the newer holder was evicted")
    except keyholder.HolderChangedError as err:
        changed = {"code": err.code, "status": err.status}
    kept = client.inspect(key)["holder"]
    evicted = client.force_release(key, "default", fencing_token=new["fencingToken"])
    step(
        "conditional-force-release",
        changed=changed,
        kept=kept,
        evicted=evicted["evicted"]["fencingToken"] == new["fencingToken"],
        held=client.inspect(key)["held"],
    )

    # A release request: the lease's next renewal sets release_requested and calls the callback once.
    heard = []
    with client.lock(key, ttl_ms=3000, holder="asked") as lease:
        lease.on_release_requested(heard.append)
        before = lease.release_requested
        asked = client.request_release(key, "default", lease.fencing_token, reason="deploy")
        started = time.monotonic()
        while lease.release_requested is None and time.monotonic() - started < 10:
            time.sleep(0.02)
        seen = lease.release_requested
        # Another renewal carries the same request: no second call.
        expires = lease.expires_at
        while lease.expires_at == expires and time.monotonic() - started < 20:
            time.sleep(0.02)
        try:
            client.request_release(key, "default", lease.fencing_token + 1)
            changed = None
        except keyholder.HolderChangedError as err:
            changed = err.code
        step(
            "release-request",
            before=before,
            asked=asked["releaseRequested"],
            seen=seen == asked["releaseRequested"],
            heard=len(heard),
            lost=lease.lost.is_set(),
            changed=changed,
        )

    # A safe deadline passed while its timer thread had not run (as in a process frozen past it): leaving
    # the block reports the loss, it does not pass for work done under the lock.
    key = f"py-frozen-{uuid.uuid4().hex[:8]}"
    try:
        with client.lock(key, ttl_ms=60000) as lease:
            lease._deadline_timer.cancel()
            lease._deadline = time.monotonic() - 0.001
        step("deadline-passed-unseen", raised=None)
    except keyholder.LeaseLostError as err:
        step("deadline-passed-unseen", raised=err.reason, lost=lease.lost.is_set())


if __name__ == "__main__":
    main(sys.argv[1])
