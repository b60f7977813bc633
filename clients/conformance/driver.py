"""The Python client's conformance driver: one step of a scenario of clients/conformance/scenarios.json.

The step is JSON in argv[1]:
  {baseUrl, token, retry, op: "submit"|"submitAndWait", body, key?, keyFile?, wait?, intervalMs?, timeoutMs?}
It prints one JSON line: {ok: true, key, replayed, intent} or
{ok: false, error: {class, status, code, key, field, retryAfter}}.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from outbox_client import Client, OutboxError, RetryPolicy, new_key  # noqa: E402

step = json.loads(sys.argv[1])
key = step.get("key")
if step.get("keyFile"):
    # Persist the key before the first send; a restarted process reads it back.
    if os.path.exists(step["keyFile"]):
        with open(step["keyFile"], encoding="utf-8") as f:
            key = f.read().strip()
    else:
        key = new_key()
        with open(step["keyFile"], "w", encoding="utf-8") as f:
            f.write(key + "\n")
r = step.get("retry") or {}
policy = RetryPolicy()
if r.get("maxAttempts"):
    policy.max_attempts = r["maxAttempts"]
if r.get("baseMs"):
    policy.base = r["baseMs"] / 1000
if r.get("capMs"):
    policy.cap = r["capMs"] / 1000
if r.get("attemptTimeoutMs"):
    policy.attempt_timeout = r["attemptTimeoutMs"] / 1000
client = Client(step["baseUrl"], step["token"], retry=policy)
try:
    if step["op"] == "submitAndWait":
        sub = client.submit_and_wait(step["body"], key=key, wait=step.get("wait") or 10,
                                     interval=(step.get("intervalMs") or 500) / 1000,
                                     timeout=(step["timeoutMs"] / 1000) if step.get("timeoutMs") else None)
    else:
        sub = client.submit(step["body"], key=key)
    print(json.dumps({"ok": True, "key": sub.key, "replayed": sub.replayed, "intent": sub.intent}))
except OutboxError as e:
    print(json.dumps({"ok": False, "error": {"class": type(e).__name__, "status": e.status, "code": e.code, "key": e.key,
                                             "field": e.field, "retryAfter": e.retry_after, "message": str(e)}}))
