"""keyholder client for Python 3.9+, standard library only. Copy this one file into your project.

    import keyholder

    client = keyholder.Client("https://locks.internal:3000", api_key=os.environ.get("KEYHOLDER_API_KEY"),
                              cafile="/etc/keyholder/ca.pem")   # or ssl_context=...; omit for public CAs
    with client.lock("invoice:42", ttl_ms=10000, wait_ms=5000) as lease:
        charge(invoice, fence=lease.fencing_token)   # the resource rejects lower tokens than it has seen
        if lease.lost.is_set():                        # check before each step that must not run unlocked
            raise keyholder.LeaseLostError(lease.key, "deadline")

    with client.semaphore("checkout", limit=5, ttl_ms=30000) as permit: ...     # one of N permits
    with client.rwlock("config", mode="read", ttl_ms=10000) as lease: ...       # many readers or one writer
    with client.lock_set(["account:17", "account:42"], ttl_ms=10000) as held:  # all keys or none
        move(held.fencing_tokens["account:17"], held.fencing_tokens["account:42"])
    for status in client.watch("leader"): ...     # the lock's state now and after every change
    client.inspect("invoice:42", queue=True)["queue"]  # who waits for it: position, holder, waitingSince

Inside a block a background thread renews the lease at about a third of its TTL. `lease.lost` (a
threading.Event) is set the moment a renewal is refused (not_owner, e.g. force-released) or answers with
another fencing token than the lease's (an answer about another lease), or when the
lease's safe deadline passes without a confirmed renewal: the send time of the last confirmed acquire or
renewal on the monotonic clock, plus the TTL, minus a drift margin. The server started the lease no earlier
than that send time, so the lease cannot end on the server before then: stop when `lost` is set and you
stop before anyone else can be granted the lock. Leaving the block releases the lock; if the lease was lost
while the block ran, leaving it raises LeaseLostError (its work may have run without the lock).

503, 429 and 408 answers, a load balancer's 502 and 504, and lost connections are retried with backoff and jitter, never sooner than the
server's Retry-After, until a deadline. Every lock acquire carries an Idempotency-Key, so a retried acquire
whose first answer was lost gets back the same grant instead of locking itself out. (Semaphores, read/write
locks and lock sets have no Idempotency-Key on the server: a retried acquire whose answer was lost may hold a
second lease that nobody renews; it ends by its TTL.)

What the client trusts: only a 200 whose body has the fields keyholder sends, with their types. Redirects
are never followed (following one would send the API key, or an owner token, to whatever host the Location
names, perhaps in clear); a 3xx raises RedirectError. A certificate that does not verify raises TlsError at
once, not retried: trying again meets the same certificate.

Trace context: when the opentelemetry package can be imported, every request carries what its configured
propagator injects from the current context (W3C `traceparent` by default), so the server's spans join the
caller's trace; a lease's renewals and release carry the context it was acquired in. Pass
propagate_trace=False to send none.
"""
import contextvars
import email.utils
import http.client
import json
import math
import random
import re
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import timezone

try:  # optional: trace context for the caller's OpenTelemetry setup, when it has one
    from opentelemetry import propagate as _otel_propagate
except ImportError:
    _otel_propagate = None

__all__ = [
    "Client",
    "Lease",
    "LockSetLease",
    "KeyholderError",
    "LockHeldError",
    "SemaphoreFullError",
    "RwLockHeldError",
    "LimitMismatchError",
    "NotOwnerError",
    "HolderChangedError",
    "UnavailableError",
    "RateLimitedError",
    "InvalidRequestError",
    "TlsError",
    "RedirectError",
    "InvalidResponseError",
    "LeaseLostError",
]


# -- errors -------------------------------------------------------------------------------------------------


class KeyholderError(Exception):
    """An error answer (application/problem+json), or a refusal of the client's own: `code` is the problem's
    code, or "unreachable" (no answer), "tls_failed", "redirected" or "invalid_response"."""

    def __init__(self, message, code, status=None, problem=None, retry_after_ms=None):
        super().__init__(message)
        self.code = code
        self.status = status
        self.problem = problem or {}
        self.retry_after_ms = retry_after_ms

    @property
    def retryable(self):
        # 408: the request did not arrive in time, so the server did nothing with it. 502/504: a load
        # balancer's own answer, which says no more about the call than a lost connection does.
        return self.code == "unreachable" or self.status in (408, 429, 502, 503, 504)


class LockHeldError(KeyholderError):
    """409 lock_held: someone else holds the lock (past wait_ms). retry_after_ms: when their lease ends."""


class SemaphoreFullError(LockHeldError):
    """409 semaphore_full: every permit is held (past wait_ms). retry_after_ms: when the first one ends."""


class RwLockHeldError(LockHeldError):
    """409 rwlock_held: the read/write lock is held in a mode that excludes this one (past wait_ms)."""


class LimitMismatchError(KeyholderError):
    """409 limit_mismatch: the semaphore's live permits were granted with another limit."""


class NotOwnerError(KeyholderError):
    """409 not_owner: this owner token no longer holds the lock (expired, released or force-released)."""


class HolderChangedError(KeyholderError):
    """409 holder_changed: a force release named a lease (fencing_token) that another one has replaced;
    nothing was released."""


class UnavailableError(KeyholderError):
    """503, or no answer: the store could not give a certain answer (store_unavailable), the server is
    shutting down, or it is over its load budget (overloaded). Nothing was granted; retryable."""


class RateLimitedError(KeyholderError):
    """429: rate_limited, quota_exceeded or too_many_waiters."""


class InvalidRequestError(KeyholderError):
    """400/413/415: problem["errors"] names each offending field; 422 idempotency_key_reused."""


class TlsError(KeyholderError):
    """The server's certificate did not verify (untrusted, self-signed, expired, another host's) or the TLS
    handshake failed. Not retried. Trust a private CA with Client(cafile=...) or Client(ssl_context=...)."""


class RedirectError(KeyholderError):
    """A 3xx answer. Never followed; `location` is where it pointed."""

    def __init__(self, message, status, location):
        super().__init__(message, "redirected", status)
        self.location = location


class InvalidResponseError(KeyholderError):
    """A success status whose body is not what keyholder answers, or another 2xx than 200. Nothing is taken
    from it, and it is not retried: whatever answered is not the keyholder API."""


class LeaseLostError(Exception):
    """The lease can no longer be trusted: reason is "not_owner", "deadline" or "renew_failed"."""

    def __init__(self, key, reason, cause=None):
        super().__init__(f'lease on "{key}" was lost ({reason})')
        self.key = key
        self.reason = reason
        self.__cause__ = cause


_ERRORS = {
    "lock_held": LockHeldError,
    "semaphore_full": SemaphoreFullError,
    "rwlock_held": RwLockHeldError,
    "limit_mismatch": LimitMismatchError,
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
    "idempotency_key_reused": InvalidRequestError,
    "holder_changed": HolderChangedError,
}


# -- what an answer must look like ------------------------------------------------------------------------
# A 200 from something that is not keyholder must not become a lease: a grant without an owner token or with
# a TTL that is not a number would be a lock the caller believes it holds and that never times out. Each
# shape lists the fields keyholder always sends (openapi.yaml); extra fields are let through (a newer server).

_INSTANT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def _count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _positive(v):
    return _count(v) and v > 0


def _text(v):
    return isinstance(v, str)


def _token(v):
    return isinstance(v, str) and len(v) > 0


def _instant(v):
    return isinstance(v, str) and _INSTANT.match(v) is not None


def _holder(v):
    return v is None or isinstance(v, str)


def _true(v):
    return v is True


def _each(shape):
    return lambda v: isinstance(v, list) and all(not _mismatches(item, shape) for item in v)


class _Optional:
    """A field keyholder sends only sometimes: checked when present."""

    def __init__(self, ok):
        self.ok = ok


def _mismatches(body, shape):
    if not isinstance(body, dict):
        return ["(body) is not an object"]
    wrong = []
    for name, ok in shape.items():
        if isinstance(ok, _Optional):
            if name in body and not ok.ok(body[name]):
                wrong.append(f"{name}: {body[name]!r}")
        elif name not in body or not ok(body[name]):
            wrong.append(f"{name}: {body.get(name)!r}")
    return wrong


_LEASE = {"fencingToken": _count, "ttlMs": _positive, "expiresAt": _instant}
_LOCK_GRANT = {"key": _text, "ownerToken": _token, "holder": _holder, **_LEASE}
_RENEWAL = {"key": _text, **_LEASE}
_RELEASE = {"key": _text, "released": _true}
_SEMAPHORE_GRANT = {**_LOCK_GRANT, "limit": _positive}
_RWLOCK_GRANT = {**_LOCK_GRANT, "mode": lambda v: v in ("read", "write")}
_SET_LOCKS = {"locks": _each({"key": _text, "fencingToken": _count}), "ttlMs": _positive, "expiresAt": _instant}
_SET_GRANT = {"ownerToken": _token, "holder": _holder, **_SET_LOCKS}
_SET_RELEASE = {"released": _true}
_RELEASE_REQUESTED = {"at": _instant, "by": _text, "reason": _holder}
# A lease's release request, in inspect and watch answers: present only once its holder was asked to let go.
_ASKED = _Optional(lambda v: not _mismatches(v, _RELEASE_REQUESTED))
_LOCK_STATUS = {"key": _text, "held": lambda v: isinstance(v, bool), "index": _count, "releaseRequested": _ASKED}
_PERMIT_HOLDERS = {
    "holder": _holder,
    "fencingToken": _count,
    "expiresAt": _instant,
    "ttlRemainingMs": _count,
    "releaseRequested": _ASKED,
}
_PERMIT_STATUS = {"key": _text, "index": _count, "holders": _each(_PERMIT_HOLDERS), "waiters": _count}
# With ?queue=true: a held key's callers queued, head first (weight and mode only for semaphores and rwlocks).
_QUEUED = {"position": _positive, "holder": _holder, "waitingSince": _instant}
_QUEUE = {"queue": _each(_QUEUED)}
_FORCE_RELEASE = {"key": _text, "released": _true}
_RELEASE_REQUEST = {"key": _text, "fencingToken": _count, "releaseRequested": lambda v: not _mismatches(v, _RELEASE_REQUESTED)}
_HISTORY_EVENT = {"type": _text, "at": _instant, "holder": _holder}
_HISTORY = {
    "key": _text,
    "recording": lambda v: isinstance(v, bool),
    "events": _each(_HISTORY_EVENT),
    "truncated": lambda v: isinstance(v, bool),
}
_ANY_OBJECT = {}


# -- timing -------------------------------------------------------------------------------------------------

# Renew at about a third of the TTL, +-10% so that many leases taken at once do not renew in lockstep.
_RENEW_FRACTION = 1 / 3
_RENEW_JITTER = 0.1


# One watch query's wait when the caller gives none (the server's bound if lower), and how often a watch asks
# again when the server takes no wait at all (LOCK_MAX_WAIT_MS 0).
_DEFAULT_WATCH_WAIT_MS = 30000
_NO_WAIT_POLL_S = 1.0


def _server_wait_bound(err, asked_ms):
    """The server's bound on waitMs when `err` is its refusal of a wait above it (the problem's maxWaitMs) and
    that bound is below `asked_ms`; else None. Only for a wait the client chose: a caller's own wait is never
    shortened behind its back."""
    bound = err.problem.get("maxWaitMs") if err.code == "invalid_request" else None
    if isinstance(bound, int) and not isinstance(bound, bool) and 0 <= bound < asked_ms:
        return bound
    return None


def _retry_delay_s(retry_after_ms, attempt, base_s=0.1, max_s=2.0):
    """Never sooner than Retry-After or the exponential step; plus up to half a step of jitter."""
    step = min(max_s, base_s * 2 ** max(0, attempt - 1))
    return max((retry_after_ms or 0) / 1000, step) + random.random() * step / 2


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Replaces urllib's redirect handler: a 3xx is handed back as an HTTPError instead of followed (urllib
    would resend the Authorization header to the new host, and over http after https)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


# -- the client ---------------------------------------------------------------------------------------------


class Client:
    """Calls a keyholder server. `timeout_s` bounds one answer; `retry_budget_s` bounds one call's retries.

    `cafile` (a PEM file of CA certificates to trust) or `ssl_context` (an ssl.SSLContext of your own) for a
    server whose certificate a private CA signed; by default the system's CAs are trusted.
    """

    def __init__(
        self,
        base_url="http://127.0.0.1:3000",
        api_key=None,
        timeout_s=10.0,
        retry_budget_s=15.0,
        cafile=None,
        ssl_context=None,
        propagate_trace=True,
    ):
        self.base_url = base_url.rstrip("/")
        if urllib.parse.urlsplit(self.base_url).scheme not in ("http", "https"):
            raise ValueError(f"base_url must be http:// or https://, not {base_url!r}")
        if cafile is not None and ssl_context is not None:
            raise ValueError("pass cafile or ssl_context, not both")
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.retry_budget_s = retry_budget_s
        self.propagate_trace = propagate_trace
        context = ssl_context or ssl.create_default_context(cafile=cafile)
        self._opener = urllib.request.build_opener(_NoRedirects(), urllib.request.HTTPSHandler(context=context))

    # -- locks ------------------------------------------------------------------------------------------

    def lock(self, key, ttl_ms, wait_ms=0, holder=None, drift_margin_ms=None):
        """`with client.lock(key, ttl_ms=...) as lease:` holds the lock for the block (see the module doc)."""
        return _Held(lambda: self.acquire(key, ttl_ms, wait_ms, holder, None, drift_margin_ms))

    def acquire(self, key, ttl_ms, wait_ms=0, holder=None, idempotency_key=None, drift_margin_ms=None):
        """Takes the lock and returns a Lease that renews itself until release(). Raises LockHeldError."""
        sent_at = time.monotonic()
        grant = self.acquire_grant(key, ttl_ms, wait_ms, holder, idempotency_key)
        # With the caller's own idempotency key the grant may be an earlier call's lease, replayed as it was
        # (its end unchanged): its age is unknown, so it is renewed before it is handed out.
        return self._lease(Lease, "locks", grant, sent_at, drift_margin_ms, grant_may_be_older=idempotency_key is not None)

    def acquire_grant(self, key, ttl_ms, wait_ms=0, holder=None, idempotency_key=None):
        """One acquire, retried with the same Idempotency-Key; returns the grant dict (nothing renews it)."""
        return self._acquire(
            f"/v1/locks/{_quote(key)}/acquire",
            {"ttlMs": ttl_ms},
            holder,
            wait_ms,
            _LOCK_GRANT,
            headers={"Idempotency-Key": idempotency_key or str(uuid.uuid4())},
            key=key,
        )

    def renew(self, key, owner_token, ttl_ms, timeout_s=None, deadline=None):
        renewal = self._call(
            "POST",
            f"/v1/locks/{_quote(key)}/renew",
            _RENEWAL,
            lambda: {"ownerToken": owner_token, "ttlMs": ttl_ms},
            timeout_s=timeout_s,
            deadline=deadline,
        )
        return _no_longer_than_asked("renew", renewal, ttl_ms)

    def release(self, key, owner_token, deadline=None):
        return self._call(
            "POST", f"/v1/locks/{_quote(key)}/release", _RELEASE, lambda: {"ownerToken": owner_token}, deadline=deadline
        )

    def inspect(self, key, index=None, wait_ms=0, queue=False):
        """Who holds the lock (never the owner token), with its watch `index`. With `index`, a blocking query:
        answers when the lock's index differs from it, at the latest after `wait_ms`. With `queue=True` (not
        with `index`), a held lock's answer also has `queue`: the callers waiting for it, head first (at most
        100), each with `position`, `holder` and `waitingSince`. A held lock whose holder was asked to let go
        (`request_release`) has `releaseRequested` ({at, by, reason}); the request does not change `index`."""
        return self._inspect(f"/v1/locks/{_quote(key)}", _LOCK_STATUS, index, wait_ms, queue)

    def watch(self, key, wait_ms=None, stop=None):
        """The lock's state now and after every change (grant, release, expiry, force release, hand-over),
        by blocking queries: no polling. Ends when `stop` (a threading.Event) is set, checked between queries
        (so up to `wait_ms` later). `wait_ms`, one query's longest wait: by default 30 s, or the server's
        LOCK_MAX_WAIT_MS when that is lower; one given that is above the server's bound raises
        InvalidRequestError, it is never shortened. Changes in quick succession may be seen as one (the latest state). A
        release request shows as `releaseRequested` in the states yielded after it (it is no change of holder,
        so it does not end a wait by itself)."""
        return self._watch(self.inspect, key, wait_ms, stop)

    def force_release(self, key, namespace, fencing_token=None, primitive="locks"):
        """Frees a key whoever holds it (an admin key when the server checks keys). With `fencing_token`,
        only the lease with that token: if no lease of the key has it now (another holds the lock, or that
        permit ended), nothing changes and HolderChangedError (409 holder_changed) is raised.
        `primitive`: "locks", "semaphores" or "rwlocks" (their answer's `evicted` lists every lease evicted)."""
        fields = {"namespace": namespace}
        if fencing_token is not None:
            fields["fencingToken"] = str(fencing_token)
        query = urllib.parse.urlencode(fields)
        return self._call("DELETE", f"/v1/{primitive}/{_quote(key)}?{query}", _FORCE_RELEASE)

    def request_release(self, key, namespace, fencing_token, reason=None, primitive="locks"):
        """Asks the holder of the lease with `fencing_token` to let go, without evicting it (an admin key when
        the server checks keys). The holder's renewals carry it from then on (`Lease.release_requested`, and
        the callbacks given to `Lease.on_release_requested`). If another lease holds the key now, nothing is
        asked and HolderChangedError (409 holder_changed) is raised; NotFoundError when nobody holds it.
        `primitive`: "locks", "semaphores" or "rwlocks"."""
        body = {"fencingToken": fencing_token}
        if reason is not None:
            body["reason"] = reason
        query = urllib.parse.urlencode({"namespace": namespace})
        return self._call("POST", f"/v1/{primitive}/{_quote(key)}/release-request?{query}", _RELEASE_REQUEST, lambda: body)

    def history(self, key, since=None, until=None, limit=None, primitive="locks", namespace=None):
        """The key's recent lease events, oldest first (granted, handed_over, renewed, release_requested with
        `by` and `reason`, released, expired, force_released with `by`, lock_delay), with holder, fencingToken, times, waitedMs and heldMs; never
        owner tokens. `since`/`until`: ISO 8601 strings (or datetimes), keeping every event of a lease live
        in the range. `primitive`: "locks", "semaphores" or "rwlocks". With `namespace`, any namespace's key
        (an admin key when the server checks keys). The answer's `recording` is False when history is off on
        the instance that answered (HISTORY=off): its `events` are then empty because nothing is recorded,
        not because nothing happened."""
        fields = {}
        for name, value in (("since", since), ("until", until)):
            if value is not None:
                # The server takes UTC with a Z only; a naive datetime is local time (datetime's own rule).
                fields[name] = (
                    value
                    if isinstance(value, str)
                    else value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
                )
        if limit is not None:
            fields["limit"] = str(limit)
        if namespace is not None:
            fields["namespace"] = namespace
            path = f"/v1/history/{primitive}/{_quote(key)}"
        else:
            path = f"/v1/{primitive}/{_quote(key)}/history"
        query = urllib.parse.urlencode(fields)
        return self._call("GET", f"{path}?{query}" if query else path, _HISTORY)

    # -- semaphores: at most `limit` holders at once ----------------------------------------------------

    def semaphore(self, key, limit, ttl_ms, wait_ms=0, holder=None, drift_margin_ms=None):
        """`with client.semaphore(key, limit=5, ttl_ms=...) as permit:` holds one permit for the block."""
        return _Held(lambda: self.acquire_semaphore(key, limit, ttl_ms, wait_ms, holder, drift_margin_ms))

    def acquire_semaphore(self, key, limit, ttl_ms, wait_ms=0, holder=None, drift_margin_ms=None):
        """Takes one permit and returns a self-renewing Lease. Raises SemaphoreFullError, LimitMismatchError."""
        sent_at = time.monotonic()
        grant = self._acquire(
            f"/v1/semaphores/{_quote(key)}/acquire", {"limit": limit, "ttlMs": ttl_ms}, holder, wait_ms, _SEMAPHORE_GRANT, key=key
        )
        return self._lease(Lease, "semaphores", grant, sent_at, drift_margin_ms)

    def inspect_semaphore(self, key, index=None, wait_ms=0, queue=False):
        """The semaphore's limit, permits held and holders (never owner tokens); a blocking query with `index`.
        With `queue=True`, also the callers queued while a permit is held (each with its `weight`). A holder
        asked to let go has `releaseRequested`, as for a lock."""
        return self._inspect(f"/v1/semaphores/{_quote(key)}", _PERMIT_STATUS, index, wait_ms, queue)

    def watch_semaphore(self, key, wait_ms=None, stop=None):
        """The semaphore's state now and after every change, as watch() for a lock."""
        return self._watch(self.inspect_semaphore, key, wait_ms, stop)

    # -- read/write locks: many readers or one writer ---------------------------------------------------

    def rwlock(self, key, mode, ttl_ms, wait_ms=0, holder=None, drift_margin_ms=None):
        """`with client.rwlock(key, mode="read" or "write", ttl_ms=...) as lease:` holds it for the block."""
        return _Held(lambda: self.acquire_rwlock(key, mode, ttl_ms, wait_ms, holder, drift_margin_ms))

    def acquire_rwlock(self, key, mode, ttl_ms, wait_ms=0, holder=None, drift_margin_ms=None):
        """Takes the lock in `mode` ("read" or "write"); returns a self-renewing Lease. Raises RwLockHeldError."""
        sent_at = time.monotonic()
        grant = self._acquire(
            f"/v1/rwlocks/{_quote(key)}/acquire", {"mode": mode, "ttlMs": ttl_ms}, holder, wait_ms, _RWLOCK_GRANT, key=key
        )
        return self._lease(Lease, "rwlocks", grant, sent_at, drift_margin_ms)

    def inspect_rwlock(self, key, index=None, wait_ms=0, queue=False):
        """The lock's mode and holders (never owner tokens); a blocking query with `index`. With `queue=True`,
        also the callers queued while it is held (each with the `mode` it waits for). A holder asked to let go
        has `releaseRequested`, as for a lock."""
        return self._inspect(f"/v1/rwlocks/{_quote(key)}", _PERMIT_STATUS, index, wait_ms, queue)

    def watch_rwlock(self, key, wait_ms=None, stop=None):
        """The read/write lock's state now and after every change, as watch() for a lock."""
        return self._watch(self.inspect_rwlock, key, wait_ms, stop)

    # -- lock sets: several locks, all or none ----------------------------------------------------------

    def lock_set(self, keys, ttl_ms, wait_ms=0, holder=None, drift_margin_ms=None):
        """`with client.lock_set([k1, k2], ttl_ms=...) as held:` holds every key for the block."""
        return _Held(lambda: self.acquire_lock_set(keys, ttl_ms, wait_ms, holder, drift_margin_ms))

    def acquire_lock_set(self, keys, ttl_ms, wait_ms=0, holder=None, drift_margin_ms=None):
        """Takes every key or none; returns a self-renewing LockSetLease. Raises LockHeldError if one is busy."""
        keys = list(keys)
        sent_at = time.monotonic()
        grant = self._acquire("/v1/lock-sets/acquire", {"keys": keys, "ttlMs": ttl_ms}, holder, wait_ms, _SET_GRANT)
        returned = [lock["key"] for lock in grant["locks"]]
        if sorted(returned) != sorted(keys):
            raise InvalidResponseError(f"lock set granted {returned}, asked for {keys}", "invalid_response", 200)
        body = {"ownerToken": grant["ownerToken"], "keys": keys}
        lease = LockSetLease(
            keys,
            grant,
            sent_at,
            drift_margin_ms,
            renew=lambda ttl, timeout_s: self._call(
                "POST", "/v1/lock-sets/renew", _SET_LOCKS, lambda: {**body, "ttlMs": ttl}, timeout_s=min(timeout_s, self.timeout_s), deadline=0
            ),
            release=lambda deadline: self._call(
                "POST", "/v1/lock-sets/release", _SET_RELEASE, lambda: body, deadline=deadline
            ),
        )
        lease._start()
        return lease

    # -- shared ------------------------------------------------------------------------------------------

    def _lease(self, cls, kind, grant, sent_at, drift_margin_ms, grant_may_be_older=False):
        path = f"/v1/{kind}/{_quote(grant['key'])}"
        token = grant["ownerToken"]
        lease = cls(
            grant["key"],
            grant,
            sent_at,
            drift_margin_ms,
            renew=lambda ttl, timeout_s: self._call(
                "POST", f"{path}/renew", _RENEWAL, lambda: {"ownerToken": token, "ttlMs": ttl}, timeout_s=min(timeout_s, self.timeout_s), deadline=0
            ),
            release=lambda deadline: self._call(
                "POST", f"{path}/release", _RELEASE, lambda: {"ownerToken": token}, deadline=deadline
            ),
        )
        lease._start(grant_may_be_older)
        return lease

    def _acquire(self, path, fields, holder, wait_ms, shape, headers=None, key=None):
        started = time.monotonic()

        def body():
            b = dict(fields)
            if holder is not None:
                b["holder"] = holder
            if wait_ms:
                # A retry waits only for what is left of the caller's wait.
                b["waitMs"] = max(0, int(wait_ms - (time.monotonic() - started) * 1000))
            return b

        grant = self._call(
            "POST",
            path,
            shape,
            body,
            headers=headers,
            timeout_s=self.timeout_s + wait_ms / 1000,
            deadline=started + wait_ms / 1000 + self.retry_budget_s,
        )
        if key is not None and grant.get("key") != key:
            # Renewed and released under the key it names, a grant of another key would hold that one.
            raise InvalidResponseError(f"POST {path}: a grant of {grant.get('key')!r}, asked for {key!r}", "invalid_response", 200)
        return _no_longer_than_asked(f"POST {path}", grant, fields["ttlMs"])

    def _inspect(self, path, shape, index, wait_ms, queue=False):
        if queue:
            if index is not None:
                raise ValueError("queue=True is not for a blocking query (index)")
            answer = self._call("GET", f"{path}?queue=true", shape)
            # Only a held key's answer lists its queue; a free one has nobody waiting.
            wrong = _mismatches(answer, _QUEUE) if "queue" in answer else []
            if wrong:
                raise InvalidResponseError(
                    f"GET {path}: the queue is not a keyholder answer ({'; '.join(wrong)})", "invalid_response", 200
                )
            return answer
        if index is None:
            return self._call("GET", path, shape)
        query = urllib.parse.urlencode({"index": index, "waitMs": wait_ms})
        # The retry budget is for retries, not for the wait asked for (as an acquire's): a blocking query
        # that waited past it and then met a 503 (its instance shutting down) was not retried.
        return self._call(
            "GET",
            f"{path}?{query}",
            shape,
            timeout_s=self.timeout_s + wait_ms / 1000,
            deadline=time.monotonic() + wait_ms / 1000 + self.retry_budget_s,
        )

    @staticmethod
    def _watch(inspect, key, wait_ms, stop):
        chosen = wait_ms is None
        if chosen:
            wait_ms = _DEFAULT_WATCH_WAIT_MS
        index = None
        while stop is None or not stop.is_set():
            try:
                status = inspect(key, index=index, wait_ms=wait_ms)
            except InvalidRequestError as err:
                bound = _server_wait_bound(err, wait_ms) if chosen else None
                if bound is None:
                    raise
                wait_ms = bound
                continue
            # Compare for inequality only: the index may step down (a free key's state forgotten).
            if status["index"] != index:
                index = status["index"]
                yield status
            elif wait_ms == 0:
                # A server that takes no wait answers at once: ask again after a pause, not in a tight loop.
                if stop is not None:
                    stop.wait(_NO_WAIT_POLL_S)
                else:
                    time.sleep(_NO_WAIT_POLL_S)

    # -- transport ---------------------------------------------------------------------------------------

    def _call(self, method, path, shape, body=None, headers=None, timeout_s=None, deadline=None):
        if deadline is None:
            deadline = time.monotonic() + self.retry_budget_s
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._once(
                    method, path, shape, body() if body else None, headers or {}, timeout_s or self.timeout_s
                )
            except KeyholderError as err:
                if not err.retryable:
                    raise
                delay = _retry_delay_s(err.retry_after_ms, attempt)
                if time.monotonic() + delay >= deadline:
                    raise
                time.sleep(delay)

    def _once(self, method, path, shape, body, headers, timeout_s):
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Accept", "application/json, application/problem+json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.api_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        if self.propagate_trace and _otel_propagate is not None:
            carrier = {}
            _otel_propagate.inject(carrier)
            for name, value in carrier.items():
                request.add_header(name, value)
        for name, value in headers.items():
            request.add_header(name, value)
        try:
            with self._opener.open(request, timeout=max(0.001, timeout_s)) as response:
                status = response.status
                raw = response.read()
        except urllib.error.HTTPError as err:
            raise _error_from(err) from None
        except urllib.error.URLError as err:
            if isinstance(err.reason, ssl.SSLError):
                raise TlsError(f"TLS with {self.base_url} failed: {err.reason}", "tls_failed") from err
            raise UnavailableError(f"no answer from {self.base_url}: {err.reason}", "unreachable") from err
        except ssl.SSLError as err:
            raise TlsError(f"TLS with {self.base_url} failed: {err}", "tls_failed") from err
        except (OSError, http.client.HTTPException) as err:
            # Refused, reset, timed out, or an answer cut short (http.client.IncompleteRead, which is no
            # OSError) or garbled: no certain answer.
            raise UnavailableError(f"no answer from {self.base_url}: {err!r}", "unreachable") from err
        if status != 200:
            raise InvalidResponseError(
                f"{method} {path}: HTTP {status} is not a keyholder answer (it answers 200)", "invalid_response", status
            )
        try:
            answer = json.loads(raw)
        except ValueError:
            raise InvalidResponseError(
                f"{method} {path}: HTTP 200 is not a keyholder answer (not JSON)", "invalid_response", status
            ) from None
        wrong = _mismatches(answer, shape)
        if wrong:
            raise InvalidResponseError(
                f"{method} {path}: HTTP 200 is not a keyholder answer ({'; '.join(wrong)})", "invalid_response", status
            )
        return answer


def _quote(key):
    return urllib.parse.quote(key, safe="")


def _retry_after_ms(header):
    """Retry-After in seconds (what the server sends) or as an HTTP date (a proxy may send one), in ms."""
    if header is None or not header.strip():
        return None
    try:
        seconds = float(header)
    except ValueError:
        try:
            at = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError, IndexError):
            return None
        if at.tzinfo is None:
            at = at.replace(tzinfo=timezone.utc)
        return max(0.0, (at.timestamp() - time.time()) * 1000)
    return seconds * 1000 if math.isfinite(seconds) and seconds >= 0 else None


def _error_from(err):
    if 300 <= err.code < 400:
        location = err.headers.get("Location")
        return RedirectError(f"the server answered {err.code} to {location}; redirects are not followed", err.code, location)
    retry_after_ms = _retry_after_ms(err.headers.get("Retry-After"))
    try:
        raw = err.read()
    except (OSError, http.client.HTTPException) as cut:
        # The answer was cut short: its outcome is unknown, as if none had come (as the Go client reads it).
        return UnavailableError(f"HTTP {err.code}: the answer was cut short: {cut!r}", "unreachable", err.code)
    try:
        problem = json.loads(raw)
    except ValueError:
        problem = {}
    if not isinstance(problem, dict):
        problem = {}
    if isinstance(problem.get("retryAfterMs"), (int, float)):
        # milliseconds: more precise than the header's seconds
        retry_after_ms = max(0, problem["retryAfterMs"])
    # A proxy's or balancer's page for 502, 503 or 504: the service behind it could not answer.
    gateway = err.code in (502, 503, 504)
    code = problem.get("code")
    if not isinstance(code, str) or not code:
        code = "store_unavailable" if gateway else "internal_error"
    cls = _ERRORS.get(code, UnavailableError if gateway else KeyholderError)
    return cls(problem.get("detail") or f"HTTP {err.code}", code, err.code, problem, retry_after_ms)


# -- leases -------------------------------------------------------------------------------------------------


def _tell(callback, request):
    """A release-request callback's failure is its own: it must not stop the renewals that keep the lease."""
    try:
        callback(request)
    except Exception:  # noqa: BLE001 - deliberately swallowed (see Lease.on_release_requested)
        pass


class Lease:
    """A held lock, semaphore permit or read/write lock, renewed by a background thread until release().
    Use `lost` to know when to stop. `mode` (read/write locks) and `limit` (semaphores) are set when given."""

    def __init__(self, key, grant, sent_at, drift_margin_ms, renew, release):
        self.key = key
        self.owner_token = grant["ownerToken"]
        self.fencing_token = grant.get("fencingToken")
        self.holder = grant.get("holder")
        self.mode = grant.get("mode")
        self.limit = grant.get("limit")
        self.ttl_ms = grant["ttlMs"]
        self.expires_at = grant["expiresAt"]
        #: Set when the lease can no longer be trusted; `lost_reason` says why.
        self.lost = _Lost(self)
        self.lost_reason = None
        self._lost_cause = None
        self._renew_call = renew
        self._release_call = release
        # Covers a client clock running slow against the store's and a late timer: 50 ms + 2% of the TTL.
        self._drift_s = (drift_margin_ms if drift_margin_ms is not None else 50 + self.ttl_ms * 0.02) / 1000
        self._lock = threading.Lock()
        # Set for good when renewals end: on release (even one that raises), or loss.
        self._stop = threading.Event()
        # Releases under way: the lease is neither renewed nor watched meanwhile (work done before the release
        # is not made a loss by a slow answer). One that raises puts the watch back.
        self._releasing = 0
        # Set once a release was answered (or needs no answer): release() then sends nothing more.
        self._release_done = False
        self._deadline = sent_at + self.ttl_ms / 1000 - self._drift_s
        self._deadline_timer = None
        self._thread = None
        #: An operator's request that the holder let go (a dict: at, by, reason), as the last renewal said;
        #: None while nobody has asked. Not a loss: the lease stays held until released or not renewed.
        self.release_requested = None
        self._release_listeners = []
        # Armed by _start: until then the caller has not got the lease.

    def on_release_requested(self, callback):
        """Calls `callback(request)` (on the renew thread) when a renewal first carries a release request, and
        again if it is asked anew; at once if one was already seen. An exception in it is ignored: the lease
        goes on renewing."""
        with self._lock:
            self._release_listeners.append(callback)
            known = self.release_requested
        if known is not None:
            _tell(callback, known)

    @property
    def remaining_s(self):
        """Seconds left before the safe deadline (0 once passed)."""
        return max(0.0, self._deadline - time.monotonic())

    def release(self):
        """Gives the lease back and stops renewing; nothing to do if it was already lost. A release that
        raised gave nothing back for sure: calling it again sends the release again (once one succeeded,
        nothing is sent). Until then the lease is not renewed (it was let go of) but is still watched: it is
        lost (`lost`, `lost_reason` "deadline") at its safe deadline."""
        with self._lock:
            if self._release_done:
                return
            # A safe deadline already passed is a loss even if its timer thread has not run yet (this process
            # was frozen or starved past it): the work just done may have run unlocked, and must not look done.
            if not self._done_locked() and time.monotonic() >= self._deadline:
                self._lose_locked("deadline")
            if self._lost_flag():
                self._release_done = True  # nothing to give back
                return
            self._releasing += 1
            self._stop.set()
            if self._deadline_timer:
                self._deadline_timer.cancel()
            deadline = self._deadline
        # The renew thread is not joined: it may be inside a renewal that waits up to the safe deadline, and
        # a renewal that reaches the server after the release is refused (not_owner) and ignored.
        settled = False
        try:
            self._release_call(deadline + self._drift_s)
            settled = True
        except NotOwnerError:
            settled = True  # already not ours (expired, force-released, or an earlier attempt's answer was lost)
        except KeyholderError as err:
            # Unreachable until the lease's own end: the store frees it by TTL.
            if not (err.retryable and time.monotonic() >= deadline):
                raise
            settled = True
        finally:
            with self._lock:
                self._releasing -= 1
                if settled:
                    self._release_done = True
                elif not self._done_locked():
                    # Nothing given back for sure: the lease may still be held, so its safe deadline is
                    # watched again (a loss sets `lost`), though it is no longer renewed.
                    self._arm_deadline()

    def _start(self, grant_may_be_older=False):
        # A grant that took longer than a renewal period to arrive is renewed at once (full safe window), as
        # is one that may be older than the call that got it (a replay for the caller's own idempotency key).
        # Nothing has run under the lease yet: a confirmed renewal starts its safe window afresh from its own
        # send, even when the grant's window has passed (a wait in the queue longer than the TTL: that grant
        # was lost at once, and the lock left held by nobody until its TTL), and waits up to timeout_s. A
        # renewal that fails loses the lease, and the grant is given back (best effort).
        if grant_may_be_older or self.remaining_s < self.ttl_ms / 1000 * (1 - _RENEW_FRACTION):
            self._deadline = float("inf")
            err = self._renew_once()
            if err is not None:
                self._lose("renew_failed", err)
            if self.lost.is_set():
                if self.lost_reason != "not_owner":
                    try:
                        self._release_call(0)  # one attempt: the acquire is not held up by it
                    except KeyholderError:
                        pass
                raise LeaseLostError(self.key, self.lost_reason, self._lost_cause)
        else:
            self._arm_deadline()
        # The renewals run in a copy of the acquiring caller's context, so their trace context is its.
        run = contextvars.copy_context().run
        self._thread = threading.Thread(
            target=run, args=(self._renew_loop,), name=f"keyholder-renew-{self.key}", daemon=True
        )
        self._thread.start()

    def _renew_delay_s(self):
        period = self.ttl_ms / 1000 * _RENEW_FRACTION * (1 - _RENEW_JITTER + random.random() * 2 * _RENEW_JITTER)
        since_send = self.ttl_ms / 1000 - self._drift_s - self.remaining_s
        return max(0.0, period - since_send)

    def _renew_once(self):
        """One renewal attempt; returns the error to retry after, or None.

        Waits at most the client's timeout_s (as the TypeScript client caps it with requestTimeoutMs), never
        until the safe deadline: one renewal whose connection went silently dead would otherwise hold the
        renewal thread until the lease is lost, where a retry on a new connection could have kept it."""
        sent_at = time.monotonic()
        asked = self.ttl_ms
        try:
            renewal = _no_longer_than_asked("renew", self._renew_call(asked, max(0.001, self._deadline - sent_at)), asked)
            self._check_same_lease(renewal)
        except NotOwnerError as err:
            self._lose_renewing("not_owner", err)
            return None
        except KeyholderError as err:
            if err.retryable:
                return err
            self._lose_renewing("renew_failed", err)
            return None
        with self._lock:
            if self._stop.is_set():
                return None
            if time.monotonic() >= self._deadline:
                # Too late: the caller may already have been told to stop.
                self._lose_locked("deadline")
                return None
            self.ttl_ms = renewal["ttlMs"]
            self.expires_at = renewal["expiresAt"]
            self._deadline = sent_at + self.ttl_ms / 1000 - self._drift_s
            self._arm_deadline()
            asked = renewal.get("releaseRequested")
            fresh = asked is not None and asked != self.release_requested
            if fresh:
                self.release_requested = asked
            listeners = list(self._release_listeners) if fresh else []
        for listener in listeners:
            _tell(listener, asked)
        return None

    def _check_same_lease(self, renewal):
        """A renewal never changes the fencing token: one that carries another is an answer about another lease
        (a server or proxy that mixed leases up, or this one replaced), so this lease can no longer be trusted.
        Raised as no keyholder answer, which is not retried: the lease is lost (renew_failed)."""
        if renewal.get("fencingToken") != self.fencing_token:
            raise InvalidResponseError(
                f"renew: fencingToken {renewal.get('fencingToken')}, the lease's is {self.fencing_token}",
                "invalid_response",
                200,
            )

    def _lose_renewing(self, reason, cause):
        # Stopped (released, even by a release that raised, or lost) meanwhile: a renewal sent before is no
        # failure of the lease's.
        with self._lock:
            if not self._stop.is_set():
                self._lose_locked(reason, cause)

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

    def _lost_flag(self):
        # The flag alone, for use under self._lock (lost.is_set() takes the lock to count a passed deadline).
        return threading.Event.is_set(self.lost)

    def _done_locked(self):
        # Nothing is to be renewed or watched any more for now: released, being released, or lost.
        return self._release_done or self._releasing > 0 or self._lost_flag()

    def _lose_if_past_deadline(self):
        with self._lock:
            if not self._done_locked() and time.monotonic() >= self._deadline:
                self._lose_locked("deadline")

    def _check_deadline(self):
        with self._lock:
            if self._done_locked():
                return
            if time.monotonic() >= self._deadline:
                self._lose_locked("deadline")
            else:
                self._arm_deadline()

    def _lose(self, reason, cause=None):
        with self._lock:
            self._lose_locked(reason, cause)

    def _lose_locked(self, reason, cause=None):
        if self._done_locked():
            return
        self.lost_reason = reason
        self._lost_cause = cause
        self._stop.set()
        if self._deadline_timer:
            self._deadline_timer.cancel()
        self.lost.set()


class _Lost(threading.Event):
    """lease.lost: is_set() also counts a safe deadline already passed whose timer thread has not run yet (a
    process frozen or starved past it may run the caller's next step first when it wakes)."""

    def __init__(self, lease):
        super().__init__()
        self._lease = lease

    def is_set(self):
        if not super().is_set():
            self._lease._lose_if_past_deadline()
        return super().is_set()


def _no_longer_than_asked(operation, answer, asked_ttl_ms):
    """A grant or renewal longer than the TTL asked is no keyholder answer (the server grants exactly the TTL
    asked, or refuses): trusted, the lease would count its safe deadline, and ask its renewals, from it."""
    if answer["ttlMs"] > asked_ttl_ms:
        raise InvalidResponseError(
            f"{operation}: ttlMs {answer['ttlMs']} is longer than the {asked_ttl_ms} asked", "invalid_response", 200
        )
    return answer


class LockSetLease(Lease):
    """A held lock set: every key under one owner token, renewed and released together. `keys` in the
    order asked; `fencing_tokens` maps each key to its own fencing token (each key has its own sequence)."""

    def __init__(self, keys, grant, sent_at, drift_margin_ms, renew, release):
        super().__init__(",".join(keys), grant, sent_at, drift_margin_ms, renew, release)
        self.keys = list(keys)
        self.fencing_tokens = {lock["key"]: lock["fencingToken"] for lock in grant["locks"]}

    def _check_same_lease(self, renewal):
        # Each key's token, as for one key's lease (see Lease._check_same_lease).
        renewed = {lock["key"]: lock["fencingToken"] for lock in renewal["locks"]}
        if renewed != self.fencing_tokens:
            raise InvalidResponseError(
                f"renew: fencingTokens {renewed}, the lease's are {self.fencing_tokens}", "invalid_response", 200
            )


class _Held:
    """The `with` block of lock(), semaphore(), rwlock() and lock_set(): releases on the way out, and raises
    LeaseLostError if the lease was lost while the block ran without failing."""

    def __init__(self, acquire):
        self._acquire = acquire
        self._lease = None

    def __enter__(self):
        self._lease = self._acquire()
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
            raise LeaseLostError(lease.key, lease.lost_reason, lease._lost_cause)
        return False
