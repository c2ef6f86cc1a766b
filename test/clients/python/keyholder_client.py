#!/usr/bin/env python3
"""A keyholder client in Python using only the standard library: no keyholder code, only HTTP + JSON.

Run as a script against a running keyholder, it takes a lock, renews it, inspects it, releases it,
provokes errors, and prints one JSON object per step (the test reads them):

    python3 keyholder_client.py http://127.0.0.1:3000
"""
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid


class KeyholderError(Exception):
    """An application/problem+json answer: `code` is the stable error code to switch on."""

    def __init__(self, status, problem, headers):
        super().__init__(f"{status} {problem.get('code')}: {problem.get('detail')}")
        self.status = status
        self.problem = problem
        self.code = problem.get("code")
        self.retry_after_s = headers.get("Retry-After")


class Keyholder:
    def __init__(self, base_url, timeout_s=5.0):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def acquire(self, key, ttl_ms, holder=None):
        body = {"ttlMs": ttl_ms}
        if holder is not None:
            body["holder"] = holder
        return self._call("POST", f"/v1/locks/{self._key(key)}/acquire", body)

    def renew(self, key, owner_token, ttl_ms):
        return self._call("POST", f"/v1/locks/{self._key(key)}/renew", {"ownerToken": owner_token, "ttlMs": ttl_ms})

    def release(self, key, owner_token):
        return self._call("POST", f"/v1/locks/{self._key(key)}/release", {"ownerToken": owner_token})

    def inspect(self, key):
        return self._call("GET", f"/v1/locks/{self._key(key)}")

    @staticmethod
    def _key(key):
        return urllib.parse.quote(key, safe="")

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Accept", "application/json, application/problem+json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.load(response)
        except urllib.error.HTTPError as err:
            content_type = err.headers.get("Content-Type", "")
            if not content_type.startswith("application/problem+json"):
                raise
            raise KeyholderError(err.code, json.load(err), err.headers) from None


def expect_error(step, status, code, call):
    try:
        call()
    except KeyholderError as err:
        assert err.status == status and err.code == code, f"{step}: got {err.status} {err.code}"
        return {"step": step, "status": err.status, "code": err.code, "retryAfter": err.retry_after_s}
    raise AssertionError(f"{step}: expected {status} {code}, the call succeeded")


def main(base_url):
    kh = Keyholder(base_url)
    key = f"python-{uuid.uuid4()}"
    steps = []

    grant = kh.acquire(key, 5000, holder="python-stdlib")
    steps.append({"step": "acquire", "fencingToken": grant["fencingToken"], "holder": grant["holder"]})
    renewal = kh.renew(key, grant["ownerToken"], 10000)
    assert renewal["fencingToken"] == grant["fencingToken"], "renew must keep the fencing token"
    steps.append({"step": "renew", "fencingToken": renewal["fencingToken"], "ttlMs": renewal["ttlMs"]})
    state = kh.inspect(key)
    assert state["held"] is True and state["holder"] == "python-stdlib", state
    assert "ownerToken" not in state, "inspect must never show the owner token"
    steps.append({"step": "inspect", "held": state["held"], "fencingToken": state["fencingToken"]})

    steps.append(expect_error("acquire-held", 409, "lock_held", lambda: kh.acquire(key, 5000)))
    steps.append(expect_error("renew-bad-ttl", 400, "invalid_request", lambda: kh.renew(key, grant["ownerToken"], 1)))

    released = kh.release(key, grant["ownerToken"])
    assert released == {"key": key, "released": True}, released
    steps.append({"step": "release", "released": released["released"]})
    steps.append(expect_error("release-again", 409, "not_owner", lambda: kh.release(key, grant["ownerToken"])))
    state = kh.inspect(key)
    assert state["held"] is False, state
    steps.append({"step": "inspect-free", "held": state["held"]})

    for step in steps:
        print(json.dumps(step))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: keyholder_client.py BASE_URL")
    main(sys.argv[1])
