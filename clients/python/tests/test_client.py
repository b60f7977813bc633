"""Unit tests of the Python client against a local HTTP server (127.0.0.1) that plays the API."""

from __future__ import annotations

import ast
import base64
import hashlib
import hmac
import json
import os
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List
from unittest import mock

import outbox_client
from outbox_client import (
    APIError,
    Client,
    IdempotencyKeyReusedError,
    RateLimitedError,
    RetryError,
    RetryPolicy,
    ValidationError,
    WebhookVerificationError,
    base_url_from_env,
    decision_key,
    key_for,
    new_key,
    verify_webhook,
)

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "..", "..", "keyvectors.json"), encoding="utf-8") as f:
    VECTORS = json.load(f)

REQ = {"kind": "reply", "provider": "sandbox", "account": "acct-1", "action": "send_message", "target": "chan-1",
       "payload": {"text": "héllo"}, "grant": {"id": "g-1", "version": 1}}
FAST = RetryPolicy(base=0.01, cap=0.02, rand=lambda: 1.0)


def intent(status: str = "pending", **extra: Any) -> Dict[str, Any]:
    return {"id": "it_1", "status": status, "idempotencyKey": "k", "attempts": [], **extra}


class FakeAPI:
    """A scripted API: each request is recorded and answered by the next step."""

    def __init__(self, steps: List[Dict[str, Any]]) -> None:
        self.steps, self.seen = steps, []  # type: ignore[var-annotated]
        api = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def handle_one(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                api.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body, "at": time.monotonic()})
                step = api.steps[min(len(api.seen) - 1, len(api.steps) - 1)]
                if step.get("hang"):
                    time.sleep(step["hang"])
                    return
                data = json.dumps(step.get("body", {})).encode()
                self.send_response(step["status"])
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in step.get("headers", {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class KeysTest(unittest.TestCase):
    def test_key_for_agrees_with_the_shared_vectors(self) -> None:
        self.assertGreaterEqual(len(VECTORS["keyFor"]), 10)
        for v in VECTORS["keyFor"]:
            self.assertEqual(key_for(*v["parts"]), v["key"], v["parts"])

    def test_new_key_format(self) -> None:
        seen = set()
        for _ in range(200):
            k = new_key()
            self.assertRegex(k, VECTORS["newKeyPattern"])
            self.assertNotIn(k, seen)
            seen.add(k)

    def test_base_url_from_env(self) -> None:
        cases = [
            ({}, "http://127.0.0.1:4000"),
            ({"OUTBOX_API_URL": "", "OUTBOX_HTTP_ADDR": ""}, "http://127.0.0.1:4000"),
            ({"OUTBOX_API_URL": "  http://h:1//  "}, "http://h:1"),
            ({"OUTBOX_API_URL": "http://a:1", "OUTBOX_HTTP_ADDR": "b:2"}, "http://a:1"),
            ({"OUTBOX_API_URL": "   ", "OUTBOX_HTTP_ADDR": "127.0.0.1:4100"}, "http://127.0.0.1:4100"),
            ({"OUTBOX_HTTP_ADDR": "https://x:3/"}, "https://x:3"),
        ]
        for env, want in cases:
            self.assertEqual(base_url_from_env(env), want, env)
        with mock.patch.dict(os.environ, {"OUTBOX_API_URL": "http://later:9/"}):
            self.assertEqual(base_url_from_env(), "http://later:9")

    def test_standard_library_only(self) -> None:
        pkg = os.path.dirname(outbox_client.__file__)
        stdlib = {"__future__", "base64", "binascii", "dataclasses", "email", "hashlib", "hmac", "http", "json", "os",
                  "random", "secrets", "socket", "time", "typing", "urllib"}
        for name in os.listdir(pkg):
            if name.endswith(".py"):
                with open(os.path.join(pkg, name), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        mods = [a.name for a in node.names]
                    elif isinstance(node, ast.ImportFrom):
                        mods = [] if node.level else [node.module or ""]
                    else:
                        continue
                    for mod in mods:
                        self.assertIn(mod.split(".")[0], stdlib, f"{name} imports {mod}")


class ClientTest(unittest.TestCase):
    def api(self, steps: List[Dict[str, Any]]) -> FakeAPI:
        a = FakeAPI(steps)
        self.addCleanup(a.close)
        return a

    def test_retries_503_and_a_lost_answer_with_the_same_key_and_bytes(self) -> None:
        api = self.api([{"status": 503}, {"hang": 0.5}, {"status": 201, "body": intent()}])
        c = Client(api.url + "/", "tok", retry=RetryPolicy(base=0.01, cap=0.02, rand=lambda: 1.0, attempt_timeout=0.2))
        sub = c.submit(REQ, key="slack/E1/reply")
        self.assertEqual(sub.key, "slack/E1/reply")
        self.assertFalse(sub.replayed)
        self.assertEqual(sub.intent, intent())
        self.assertEqual(len(api.seen), 3)
        for s in api.seen:
            self.assertEqual(s["headers"]["Idempotency-Key"], "slack/E1/reply")
            self.assertEqual(s["headers"]["Authorization"], "Bearer tok")
            self.assertEqual(s["body"], api.seen[0]["body"])
        self.assertEqual(json.loads(api.seen[0]["body"]), REQ)

    def test_replayed_is_exactly_idempotent_replayed_true(self) -> None:
        api = self.api([{"status": 200, "body": intent("succeeded"), "headers": {"Idempotent-Replayed": "true"}},
                        {"status": 200, "body": intent("succeeded"), "headers": {"Idempotent-Replayed": "TRUE"}}])
        c = Client(api.url, "tok")
        self.assertTrue(c.submit(REQ, key="k1").replayed)
        self.assertFalse(c.submit(REQ, key="k1").replayed)

    def test_429_waits_its_retry_after(self) -> None:
        api = self.api([{"status": 429, "body": {"error": {"code": "rate_limited", "message": "slow"}}, "headers": {"Retry-After": "1"}},
                        {"status": 201, "body": intent()}])
        Client(api.url, "tok", retry=FAST).submit(REQ, key="k2")
        self.assertEqual(len(api.seen), 2)
        self.assertGreaterEqual(api.seen[1]["at"] - api.seen[0]["at"], 0.95)

    def test_429_until_the_attempts_run_out(self) -> None:
        api = self.api([{"status": 429, "body": {"error": {"code": "rate_limited", "message": "slow"}}, "headers": {"Retry-After": "0"}}])
        c = Client(api.url, "tok", retry=RetryPolicy(max_attempts=3, base=0.01, cap=0.02, rand=lambda: 1.0))
        with self.assertRaises(RateLimitedError) as cm:
            c.submit(REQ, key="k3")
        e = cm.exception
        self.assertEqual((e.status, e.code, e.retry_after, e.key, e.attempts), (429, "rate_limited", 0.0, "k3", 3))
        self.assertEqual(len(api.seen), 3)

    def test_4xx_other_than_429_is_never_retried_and_typed(self) -> None:
        api = self.api([{"status": 422, "body": {"error": {"code": "idempotency_key_reused", "message": "other body"}}},
                        {"status": 400, "body": {"error": {"code": "invalid_field", "message": "blank", "field": "target"}}},
                        {"status": 404, "body": {"error": {"code": "not_found", "message": "no"}}}])
        c = Client(api.url, "tok", retry=FAST)
        with self.assertRaises(IdempotencyKeyReusedError) as reused:
            c.submit(REQ, key="k4")
        self.assertNotIsInstance(reused.exception, ValidationError)
        self.assertEqual((reused.exception.status, reused.exception.key), (422, "k4"))
        with self.assertRaises(ValidationError) as invalid:
            c.submit(REQ)
        self.assertEqual((invalid.exception.field, invalid.exception.code), ("target", "invalid_field"))
        self.assertRegex(invalid.exception.key or "", VECTORS["newKeyPattern"])
        with self.assertRaises(APIError) as missing:
            c.get("it_x")
        self.assertEqual(missing.exception.status, 404)
        self.assertEqual(len(api.seen), 3)

    def test_invalid_key_refused_before_sending(self) -> None:
        with self.assertRaises(ValidationError) as cm:
            Client("http://127.0.0.1:9", "tok").submit(REQ, key="naïve")
        self.assertEqual(cm.exception.code, "invalid_idempotency_key")

    def test_5xx_until_the_attempts_run_out_is_a_retry_error(self) -> None:
        api = self.api([{"status": 500, "body": {"error": {"code": "internal", "message": "x"}}}])
        c = Client(api.url, "tok", retry=RetryPolicy(max_attempts=4, base=0.01, cap=0.02, rand=lambda: 1.0))
        with self.assertRaises(RetryError) as cm:
            c.submit(REQ, key="k5")
        self.assertEqual((cm.exception.attempts, cm.exception.key, cm.exception.status), (4, "k5", 500))
        self.assertEqual(len(api.seen), 4)

    def test_refused_connection_is_retried_then_a_retry_error(self) -> None:
        api = FakeAPI([{"status": 201}])
        url = api.url
        api.close()
        c = Client(url, "tok", retry=RetryPolicy(max_attempts=2, base=0.01, cap=0.02, rand=lambda: 1.0))
        with self.assertRaises(RetryError) as cm:
            c.submit(REQ, key="k6")
        self.assertEqual((cm.exception.status, cm.exception.code, cm.exception.attempts), (0, "unreachable", 2))

    def test_submit_and_wait_polls_with_get(self) -> None:
        api = self.api([{"status": 202, "body": intent("pending")}, {"status": 200, "body": intent("in-flight")},
                        {"status": 200, "body": intent("unknown-outcome")}, {"status": 200, "body": intent("succeeded", externalId="m-1")}])
        sub = Client(api.url, "tok", retry=FAST).submit_and_wait(REQ, key="k7", wait=2, interval=0.01)
        self.assertEqual((sub.intent["status"], sub.intent["externalId"]), ("succeeded", "m-1"))
        self.assertEqual(api.seen[0]["headers"]["Prefer"], "wait=2")
        self.assertEqual([s["method"] for s in api.seen], ["POST", "GET", "GET", "GET"])
        self.assertEqual(api.seen[1]["path"], "/v1/intents/it_1")

    def test_wait_stops_at_needs_human(self) -> None:
        api = self.api([{"status": 200, "body": intent("pending")}, {"status": 200, "body": intent("needs-human")}])
        self.assertEqual(Client(api.url, "tok").wait("it_1", interval=0.01)["status"], "needs-human")

    def test_admin_resolve_default_key(self) -> None:
        api = self.api([{"status": 200, "body": intent("succeeded")}])
        Client(api.url, "op").admin.resolve("it_9", "accept-success", "seen in the channel", external_id="m-9")
        s = api.seen[0]
        self.assertEqual(s["path"], "/v1/admin/intents/it_9/resolution")
        self.assertEqual(s["headers"]["Idempotency-Key"], decision_key("it_9", "accept-success", "seen in the channel", "m-9"))
        self.assertRegex(s["headers"]["Idempotency-Key"], r"^cli-[0-9a-f]{32}$")
        self.assertEqual(json.loads(s["body"]), {"decision": "accept-success", "reason": "seen in the channel", "externalId": "m-9"})

    def test_verify_webhook(self) -> None:
        raw = b"operator-events-test-secret"
        secret = "whsec_" + base64.b64encode(raw).decode()
        body = '{"type":"intent.needs_human"}'
        ts = str(int(time.time()))
        sig = base64.b64encode(hmac.new(raw, f"msg_1.{ts}.{body}".encode(), hashlib.sha256).digest()).decode()
        headers = {"Webhook-Id": "msg_1", "webhook-timestamp": ts, "webhook-signature": f"v1,bm9wZQ== v1,{sig}"}
        self.assertEqual(verify_webhook(secret, headers, body).id, "msg_1")
        for bad_headers, bad_body in [(headers, body + " "), ({**headers, "webhook-timestamp": str(int(ts) - 600)}, body),
                                      ({**headers, "webhook-signature": ""}, body)]:
            with self.assertRaises(WebhookVerificationError):
                verify_webhook(secret, bad_headers, bad_body)

    def test_verify_webhook_agrees_with_the_outbox_signer(self) -> None:
        with open(os.path.join(HERE, "..", "..", "webhookvectors.json"), encoding="utf-8") as f:
            doc = json.load(f)
        for c in doc["cases"]:
            if c["valid"]:
                self.assertEqual(verify_webhook(doc["secret"], c["headers"], c["body"], now=c["now"]).id, c["headers"]["webhook-id"], c["name"])
            else:
                with self.assertRaises(WebhookVerificationError, msg=c["name"]):
                    verify_webhook(doc["secret"], c["headers"], c["body"], now=c["now"])


if __name__ == "__main__":
    unittest.main()
