"""keyholder client for Python 3.9+, standard library only. Copy this one file into your project.

    import keyholder

    client = keyholder.Client("http://127.0.0.1:3000", api_key=os.environ.get("KEYHOLDER_API_KEY"))
    with client.lock("invoice:42", ttl_ms=10000, wait_ms=5000) as lease:
        charge(invoice, fence=lease.fencing_token)   # the resource rejects lower tokens than it has seen
        if lease.lost.is_set():                        # check before each step that must not run unlocked
            raise keyholder.LeaseLostError(lease.key, "deadline")

Inside the block a background thread renews the lease at about a third of its TTL. `lease.lost` (a
threading.Event) is set the moment a renewal is refused (not_owner, e.g. force-released) or when the
lease's safe deadline passes without a confirmed renewal: the send time of the last confirmed acquire or
renewal on the monotonic clock, plus the TTL, minus a drift margin. The server started the lease no earlier
than that send time, so the lease cannot end on the server before then: stop when `lost` is set and you
stop before anyone else can be granted the lock. Leaving the block releases the lock; if the lease was lost
while the block ran, leaving it raises LeaseLostError (its work may have run without the lock).

503 and 429 answers and lost connections are retried with backoff and jitter, never sooner than the
server's Retry-After, until a deadline. Every acquire carries an Idempotency-Key, so a retried acquire
whose first answer was lost gets back the same grant instead of locking itself out.
"""
import json
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

__all__ = [
    "Client",
    "Lease",
    "KeyholderError",
    "LockHeldError",
    "NotOwnerError",
    "UnavailableError",
    "RateLimitedError",
    "InvalidRequestError",
    "LeaseLostError",
]


class KeyholderError(Exception):
    """An error answer (application/problem+json) or no answer at all (code "unreachable")."""

    def __init__(self, message, code, status=None, problem=None, retry_after_ms=None):
        super().__init__(message)
        self.code = code
        self.status = status
        self.problem = problem or {}
        self.retry_after_ms = retry_after_ms

    @property
    def retryable(self):
        return self.code == "unreachable" or self.status in (429, 503)


class LockHeldError(KeyholderError):
    """409 lock_held: someone else holds the lock (past wait_ms). retry_after_ms: when their lease ends."""


class NotOwnerError(KeyholderError):
    """409 not_owner: this owner token no longer holds the lock (expired, released or force-released)."""


class UnavailableError(KeyholderError):
    """503, or no answer: the store could not give a certain answer (store_unavailable), the server is
    shutting down, or it is over its load budget (overloaded). Nothing was granted; retryable."""


class RateLimitedError(KeyholderError):
    """429: rate_limited, quota_exceeded or too_many_waiters."""


class InvalidRequestError(KeyholderError):
    """400/413/415: problem["errors"] names each offending field."""


class LeaseLostError(Exception):
    """The lease can no longer be trusted: reason is "not_owner", "deadline" or "renew_failed"."""

    def __init__(self, key, reason, cause=None):
        super().__init__(f'lease on "{key}" was lost ({reason})')
        self.key = key
        self.reason = reason
        self.__cause__ = cause


_ERRORS = {
    "lock_held": LockHeldError,
    "not_owner": NotOwnerError,
    "store_unavailable": UnavailableError,
    "shutting_down": UnavailableError,
    "overloaded": UnavailableError,
    "rate_limited": RateLimitedError,
    "quota_exceeded": RateLimitedError,
    "too_many_waiters": RateLimitedError,
    "invalid_request": InvalidRequestError,
    "payload_too_large": InvalidRequestError,
    "unsupported_media_type": InvalidRequestError,
}

# Renew at about a third of the TTL, +-10% so that many leases taken at once do not renew in lockstep.
_RENEW_FRACTION = 1 / 3
_RENEW_JITTER = 0.1


def _retry_delay_s(retry_after_ms, attempt, base_s=0.1, max_s=2.0):
    """Never sooner than Retry-After or the exponential step; plus up to half a step of jitter."""
    step = min(max_s, base_s * 2 ** max(0, attempt - 1))
    return max((retry_after_ms or 0) / 1000, step) + random.random() * step / 2


class Client:
    """Calls a keyholder server. `timeout_s` bounds one answer; `retry_budget_s` bounds one call's retries."""

    def __init__(self, base_url="http://127.0.0.1:3000", api_key=None, timeout_s=10.0, retry_budget_s=15.0):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.retry_budget_s = retry_budget_s

    # -- leases ---------------------------------------------------------------------------------------

    def lock(self, key, ttl_ms, wait_ms=0, holder=None, drift_margin_ms=None):
        """`with client.lock(key, ttl_ms=...) as lease:` holds the lock for the block (see the module doc)."""
        return _LockContext(self, key, ttl_ms, wait_ms, holder, drift_margin_ms)

    def acquire(self, key, ttl_ms, wait_ms=0, holder=None, idempotency_key=None, drift_margin_ms=None):
        """Takes the lock and returns a Lease that renews itself until release(). Raises LockHeldError."""
        sent_at = time.monotonic()
        grant = self.acquire_grant(key, ttl_ms, wait_ms, holder, idempotency_key)
        lease = Lease(self, grant, sent_at, drift_margin_ms)
        lease._start()
        return lease

    # -- single calls (retried while retryable) --------------------------------------------------------

    def acquire_grant(self, key, ttl_ms, wait_ms=0, holder=None, idempotency_key=None):
        """One acquire, retried with the same Idempotency-Key; returns the grant dict (nothing renews it)."""
        idempotency_key = idempotency_key or str(uuid.uuid4())
        started = time.monotonic()

        def body():
            b = {"ttlMs": ttl_ms}
            if holder is not None:
                b["holder"] = holder
            if wait_ms:
                # A retry waits only for what is left of the caller's wait.
                b["waitMs"] = max(0, int(wait_ms - (time.monotonic() - started) * 1000))
            return b

        return self._call(
            "POST",
            f"/v1/locks/{self._key(key)}/acquire",
            body,
            headers={"Idempotency-Key": idempotency_key},
            timeout_s=self.timeout_s + wait_ms / 1000,
            deadline=started + wait_ms / 1000 + self.retry_budget_s,
        )

    def renew(self, key, owner_token, ttl_ms, timeout_s=None, deadline=None):
        return self._call(
            "POST",
            f"/v1/locks/{self._key(key)}/renew",
            lambda: {"ownerToken": owner_token, "ttlMs": ttl_ms},
            timeout_s=timeout_s,
            deadline=deadline,
        )

    def release(self, key, owner_token, deadline=None):
        return self._call(
            "POST", f"/v1/locks/{self._key(key)}/release", lambda: {"ownerToken": owner_token}, deadline=deadline
        )

    def inspect(self, key):
        return self._call("GET", f"/v1/locks/{self._key(key)}")

    def force_release(self, key, namespace):
        """Frees a lock whoever holds it (an admin key when the server checks keys)."""
        query = urllib.parse.urlencode({"namespace": namespace})
        return self._call("DELETE", f"/v1/locks/{self._key(key)}?{query}")

    # -- transport --------------------------------------------------------------------------------------

    @staticmethod
    def _key(key):
        return urllib.parse.quote(key, safe="")

    def _call(self, method, path, body=None, headers=None, timeout_s=None, deadline=None):
        if deadline is None:
            deadline = time.monotonic() + self.retry_budget_s
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._once(method, path, body() if body else None, headers or {}, timeout_s or self.timeout_s)
            except KeyholderError as err:
                if not err.retryable:
                    raise
                delay = _retry_delay_s(err.retry_after_ms, attempt)
                if time.monotonic() + delay >= deadline:
                    raise
                time.sleep(delay)

    def _once(self, method, path, body, headers, timeout_s):
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Accept", "application/json, application/problem+json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.api_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        for name, value in headers.items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=max(0.001, timeout_s)) as response:
                return json.load(response)
        except urllib.error.HTTPError as err:
            raise _error_from(err) from None
        except (urllib.error.URLError, OSError, ValueError) as err:
            # Refused, reset, timed out, or an answer cut short: no certain answer.
            raise UnavailableError(f"no answer from {self.base_url}: {err}", "unreachable") from err


def _error_from(err):
    header = err.headers.get("Retry-After")
    try:
        retry_after_ms = float(header) * 1000 if header else None
    except ValueError:
        retry_after_ms = None
    try:
        problem = json.load(err)
    except ValueError:
        problem = {}
    if not isinstance(problem, dict):
        problem = {}
    if isinstance(problem.get("retryAfterMs"), (int, float)):
        retry_after_ms = problem["retryAfterMs"]  # milliseconds: more precise than the header's seconds
    code = problem.get("code") or ("store_unavailable" if err.code == 503 else "internal_error")
    cls = _ERRORS.get(code, UnavailableError if err.code == 503 else KeyholderError)
    return cls(problem.get("detail") or f"HTTP {err.code}", code, err.code, problem, retry_after_ms)


class Lease:
    """A held lock, renewed by a background thread until release(). Use `lost` to know when to stop."""

    def __init__(self, client, grant, sent_at, drift_margin_ms=None):
        self.key = grant["key"]
        self.owner_token = grant["ownerToken"]
        self.fencing_token = grant["fencingToken"]
        self.holder = grant.get("holder")
        self.ttl_ms = grant["ttlMs"]
        self.expires_at = grant["expiresAt"]
        #: Set when the lease can no longer be trusted; `lost_reason` says why.
        self.lost = threading.Event()
        self.lost_reason = None
        self._client = client
        # Covers a client clock running slow against the store's and a late timer: 50 ms + 2% of the TTL.
        self._drift_s = (drift_margin_ms if drift_margin_ms is not None else 50 + self.ttl_ms * 0.02) / 1000
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._released = False
        self._deadline = sent_at + self.ttl_ms / 1000 - self._drift_s
        self._deadline_timer = None
        self._thread = None
        self._arm_deadline()

    @property
    def remaining_s(self):
        """Seconds left before the safe deadline (0 once passed)."""
        return max(0.0, self._deadline - time.monotonic())

    def release(self):
        """Gives the lock back and stops renewing; nothing to do if the lease was already lost."""
        with self._lock:
            if self._released:
                return
            self._released = True
            self._stop.set()
            if self._deadline_timer:
                self._deadline_timer.cancel()
        # The renew thread is not joined: it may be inside a renewal that waits up to the safe deadline, and
        # a renewal that reaches the server after the release is refused (not_owner) and ignored.
        if self.lost.is_set():
            return
        try:
            self._client.release(self.key, self.owner_token, deadline=self._deadline + self._drift_s)
        except NotOwnerError:
            pass  # already not ours (expired, force-released, or an earlier attempt's answer was lost)
        except KeyholderError as err:
            # Unreachable until the lease's own end: the store frees it by TTL.
            if not (err.retryable and time.monotonic() >= self._deadline):
                raise

    def _start(self):
        # A grant that took longer than a renewal period to arrive is renewed at once (full safe window).
        if self.remaining_s < self.ttl_ms / 1000 * (1 - _RENEW_FRACTION):
            self._renew_once()
            if self.lost.is_set():
                raise LeaseLostError(self.key, self.lost_reason)
        self._thread = threading.Thread(target=self._renew_loop, name=f"keyholder-renew-{self.key}", daemon=True)
        self._thread.start()

    def _renew_delay_s(self):
        period = self.ttl_ms / 1000 * _RENEW_FRACTION * (1 - _RENEW_JITTER + random.random() * 2 * _RENEW_JITTER)
        since_send = self.ttl_ms / 1000 - self._drift_s - self.remaining_s
        return max(0.0, period - since_send)

    def _renew_once(self):
        """One renewal attempt; returns the error to retry after, or None."""
        sent_at = time.monotonic()
        try:
            renewal = self._client.renew(
                self.key, self.owner_token, self.ttl_ms, timeout_s=max(0.001, self._deadline - sent_at), deadline=0
            )
        except NotOwnerError as err:
            self._lose("not_owner", err)
            return None
        except KeyholderError as err:
            if err.retryable:
                return err
            self._lose("renew_failed", err)
            return None
        with self._lock:
            if self._released or self.lost.is_set():
                return None
            if time.monotonic() >= self._deadline:
                # Too late: the caller may already have been told to stop.
                self._lose_locked("deadline")
                return None
            self.ttl_ms = renewal["ttlMs"]
            self.expires_at = renewal["expiresAt"]
            self._deadline = sent_at + self.ttl_ms / 1000 - self._drift_s
            self._arm_deadline()
        return None

    def _renew_loop(self):
        failures = 0
        delay = self._renew_delay_s()
        while not self._stop.wait(delay):
            if self.lost.is_set():
                return
            err = self._renew_once()
            if err is None:
                failures = 0
                delay = self._renew_delay_s()
            else:
                failures += 1
                # Retry-After is honoured, but never past half of what is left before the safe deadline:
                # a renewal is the one call whose delay costs the lease, so one more attempt must still fit.
                delay = max(0.01, min(_retry_delay_s(err.retry_after_ms, failures), self.remaining_s / 2))

    def _arm_deadline(self):
        if self._deadline_timer:
            self._deadline_timer.cancel()
        timer = threading.Timer(max(0.0, self._deadline - time.monotonic()), self._check_deadline)
        timer.daemon = True
        self._deadline_timer = timer
        timer.start()

    def _check_deadline(self):
        with self._lock:
            if self._released or self.lost.is_set():
                return
            if time.monotonic() >= self._deadline:
                self._lose_locked("deadline")
            else:
                self._arm_deadline()

    def _lose(self, reason, cause=None):
        with self._lock:
            self._lose_locked(reason, cause)

    def _lose_locked(self, reason, cause=None):
        if self._released or self.lost.is_set():
            return
        self.lost_reason = reason
        self._lost_cause = cause
        self._stop.set()
        if self._deadline_timer:
            self._deadline_timer.cancel()
        self.lost.set()


class _LockContext:
    def __init__(self, client, key, ttl_ms, wait_ms, holder, drift_margin_ms):
        self._args = (key, ttl_ms, wait_ms, holder, None, drift_margin_ms)
        self._client = client
        self._lease = None

    def __enter__(self):
        self._lease = self._client.acquire(*self._args)
        return self._lease

    def __exit__(self, exc_type, exc, tb):
        lease = self._lease
        if exc_type is not None:
            try:
                lease.release()
            except KeyholderError:
                pass  # the block's own error is the one to see
            return False
        lease.release()
        if lease.lost.is_set():
            raise LeaseLostError(lease.key, lease.lost_reason, getattr(lease, "_lost_cause", None))
        return False
