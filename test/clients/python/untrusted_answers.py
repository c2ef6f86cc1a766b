#!/usr/bin/env python3
"""Drives clients/python/keyholder.py against servers that answer like a keyholder gone wrong (started by
the test, see test/helpers/hostile-servers.ts); prints one JSON object per case: what the acquire did.

    python3 untrusted_answers.py '{"http": ..., "https": ..., "other": ..., "cafile": ...}'
"""
import json
import os
import ssl
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients", "python"))
import keyholder  # noqa: E402

API_KEY = "kh_secret_that_must_stay_home"


def attempt(case, client):
    try:
        lease = client.acquire("k", ttl_ms=10000)
    except keyholder.KeyholderError as err:
        result = {"error": type(err).__name__, "code": err.code, "status": err.status, "retryable": err.retryable}
        if isinstance(err, keyholder.RedirectError):
            result["location"] = err.location
        result["message"] = str(err)
        print(json.dumps({"case": case, **result}), flush=True)
        return
    lease.release()
    grant = {"ownerToken": lease.owner_token, "fencingToken": lease.fencing_token, "ttlMs": lease.ttl_ms}
    print(json.dumps({"case": case, "lease": grant}), flush=True)


def lost_on_renewal(case, acquire):
    """A lease whose renewals carry another fencing token than its grant: prints how it was lost."""
    try:
        lease = acquire()
    except keyholder.LeaseLostError as err:  # the renewal before a replayed grant is handed out
        print(json.dumps({"case": case, "lost": err.reason, "when": "acquire", "message": str(err.__cause__)}), flush=True)
        return
    # The first renewal comes at about a third of the TTL; the lease may not outlive the TTL it was granted.
    if lease.lost.wait(5):
        result = {"lost": lease.lost_reason, "when": "renewal", "message": str(lease._lost_cause)}
    else:
        result = {"held": True}
    lease.release()
    print(json.dumps({"case": case, **result}), flush=True)


def main(servers):
    def client(base, **options):
        return keyholder.Client(base, api_key=API_KEY, retry_budget_s=5, **options)

    trusting = ssl.create_default_context(cafile=servers["cafile"])
    attempt("grant", client(servers["http"] + "/grant"))
    attempt("grant-https-cafile", client(servers["https"] + "/grant", cafile=servers["cafile"]))
    attempt("grant-https-context", client(servers["https"] + "/grant", ssl_context=trusting))
    attempt("redirect-other", client(servers["http"] + "/redirect-other"))
    attempt("to-http", client(servers["https"] + "/to-http", cafile=servers["cafile"]))
    for behaviour in ("empty-200", "wrong-types", "not-json", "created", "no-content"):
        attempt(behaviour, client(servers["http"] + "/" + behaviour))
    attempt("untrusted-certificate", client(servers["https"] + "/grant"))
    swapper = client(servers["http"] + "/other-token")
    lost_on_renewal("other-token-lock", lambda: swapper.acquire("k", ttl_ms=600))
    lost_on_renewal("other-token-semaphore", lambda: swapper.acquire_semaphore("k", limit=1, ttl_ms=600))
    lost_on_renewal("other-token-rwlock", lambda: swapper.acquire_rwlock("k", mode="write", ttl_ms=600))
    lost_on_renewal("other-token-lock-set", lambda: swapper.acquire_lock_set(["a", "b"], ttl_ms=600))
    lost_on_renewal("other-token-replayed", lambda: swapper.acquire("k", ttl_ms=10000, idempotency_key="replayed"))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
