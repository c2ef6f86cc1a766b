#!/usr/bin/env python3
"""Holds a lock through clients/python/keyholder.py inside a caller's span (opentelemetry's API, no SDK):
the acquire, a renewal from the lease's thread and the release must carry the span's trace context.

    python3 traced.py '{"url": "http://127.0.0.1:3000", "traceId": "<32 hex>", "spanId": "<16 hex>"}'
"""
import json
import os
import sys
import time
import uuid

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients", "python"))
import keyholder  # noqa: E402


def main(arg):
    args = json.loads(arg)
    client = keyholder.Client(args["url"])
    key = f"py-traced-{uuid.uuid4().hex[:8]}"
    caller = SpanContext(int(args["traceId"], 16), int(args["spanId"], 16), is_remote=False, trace_flags=TraceFlags(1))
    with trace.use_span(NonRecordingSpan(caller)):
        with client.lock(key, ttl_ms=1000, holder="py-traced") as lease:
            first = lease.expires_at
            deadline = time.monotonic() + 20
            while lease.expires_at == first:  # until the renew thread has renewed once
                assert time.monotonic() < deadline and not lease.lost.is_set(), "no renewal"
                time.sleep(0.02)
    print(json.dumps({"key": key, "fencingToken": lease.fencing_token}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
