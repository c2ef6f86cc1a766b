#!/usr/bin/env python3
"""watch() across a rolling restart. Prints one JSON line per state seen, then how it ended.

    python3 watch_rolling.py http://...
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients", "python"))
import keyholder  # noqa: E402

client = keyholder.Client(sys.argv[1], retry_budget_s=2.5)
try:
    for status in client.watch("rolling-py", wait_ms=10000):
        print(json.dumps({"held": status["held"], "holder": status.get("holder")}), flush=True)
        if status["held"]:
            break
    print(json.dumps({"end": "ok"}), flush=True)
except keyholder.KeyholderError as err:
    print(json.dumps({"end": "error", "code": err.code}), flush=True)
