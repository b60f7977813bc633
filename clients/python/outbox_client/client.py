"""The client: submit, submit_and_wait, get, wait, put_source and the admin calls."""

from __future__ import annotations

import email.utils
import hashlib
import http.client
import json
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, cast

from .errors import APIError, OutboxError, RateLimitedError, RetryError, ValidationError, error_for
from .keys import check_key, new_key
from .types import HistorySlice, Intent, IntentPage, SourceResult, WhoAmI, is_settled

DEFAULT_INLINE_WAIT = 10
"""The Prefer: wait submit_and_wait asks for by default, in seconds."""

_PREFER_SLACK = 5.0


@dataclass
class RetryPolicy:
    """How a call is retried (the Go client's RetryPolicy); durations in seconds.

    Every retry of a call re-sends the same bytes under the same Idempotency-Key.
    """

    max_attempts: int = 6
    """Attempts per call, the first included."""
    base: float = 0.2
    cap: float = 10.0
    """Exponential backoff, full jitter: uniform in [0, min(cap, base*2^(n-1))]."""
    attempt_timeout: float = 15.0
    """Bounds one attempt; a timed-out attempt is retried like a dropped connection."""
    max_retry_after: float = 60.0
    """Caps how long a server's Retry-After is honoured."""
    rand: Callable[[], float] = random.random

    def backoff(self, n: int, retry_after: Optional[float] = None) -> float:
        """The delay before retry number n (1 for the first); a server's Retry-After wins, capped."""
        if retry_after is not None and retry_after > 0:
            return min(retry_after, self.max_retry_after)
        d = self.base
        i = 1
        while i < n and d < self.cap:
            d *= 2
            i += 1
        return self.rand() * min(d, self.cap)


@dataclass
class Submission:
    """The answer of submit and submit_and_wait."""

    key: str
    """The Idempotency-Key used."""
    intent: Intent
    """The API's intent JSON, unchanged (the API's own field names)."""
    replayed: bool
    """Exactly when the API answered Idempotent-Replayed: true."""
    wait_applied: bool = False
    """The API honoured the Prefer: wait (Preference-Applied)."""


def parse_retry_after(v: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """delta-seconds or an HTTP date, as seconds; None when absent or unreadable."""
    if not v:
        return None
    v = v.strip()
    if v.isdigit():
        return float(v)
    try:
        t = email.utils.parsedate_to_datetime(v).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    now = time.time() if now is None else now
    return t - now if t > now else None


def should_retry(idempotent: bool, status: int, transport: Optional[BaseException] = None) -> bool:
    """Whether a failed attempt is tried again (the Go client's shouldRetry)."""
    if status == 0:
        if idempotent:
            return True
        # Not idempotent: only when the connection was never made.
        reason = getattr(transport, "reason", transport)
        return isinstance(reason, ConnectionRefusedError)
    if status == 429:
        return True
    if status >= 500:
        return idempotent
    return False


class _Answer:
    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


class Client:
    """A client of the outbox's HTTP API, for bots and for operators.

    ``submit`` sends each logical attempt under one Idempotency-Key (yours, or
    one generated once and returned) and retries connection errors, timeouts,
    5xx and 429 (honouring Retry-After) with that same key and byte-identical
    body, so a retry can never create a second intent.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        retry: Optional[RetryPolicy] = None,
        key_generator: Callable[[], str] = new_key,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.retry = retry or RetryPolicy()
        self._new_key = key_generator
        # Proxies from the environment (HTTPS_PROXY, NO_PROXY), as Go's
        # ProxyFromEnvironment, which never proxies a loopback address.
        host = urllib.parse.urlsplit(self.base_url).hostname or ""
        loopback = host in ("localhost", "127.0.0.1", "::1")
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({} if loopback else None))

    # --- transport ---------------------------------------------------------

    def _once(self, method: str, path: str, body: Optional[bytes], headers: Dict[str, str], timeout: float) -> _Answer:
        h = {"Accept": "application/json", "User-Agent": "outbox-python-client/1", **headers}
        if self._token:
            h["Authorization"] = "Bearer " + self._token
        if body is not None:
            h["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base_url + path, data=body, headers=h, method=method)
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                return _Answer(resp.status, resp.headers, resp.read())
        except urllib.error.HTTPError as e:
            try:
                data = e.read()
            except (OSError, http.client.HTTPException):
                data = b""
            return _Answer(e.code, e.headers, data)

    def _do(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        *,
        key: Optional[str] = None,
        prefer: Optional[str] = None,
        wait: float = 0,
        idempotent: bool = True,
        deadline: Optional[float] = None,
    ) -> Tuple[Any, Mapping[str, str]]:
        headers: Dict[str, str] = {}
        if key:
            headers["Idempotency-Key"] = key
        if prefer:
            headers["Prefer"] = prefer
        timeout = max(self.retry.attempt_timeout, wait + _PREFER_SLACK) if wait else self.retry.attempt_timeout
        last: Optional[BaseException] = None
        attempt = 0
        while True:
            attempt += 1
            status = 0
            retry_after: Optional[float] = None
            err: BaseException
            t = timeout if deadline is None else max(0.001, min(timeout, deadline - time.monotonic()))
            try:
                a = self._once(method, path, body, headers, t)
                if a.status < 300:
                    try:
                        return json.loads(a.body), a.headers
                    except ValueError as e:
                        raise APIError(f"outbox: {a.status} answer is not the documented JSON: {e}", status=a.status, key=key) from None
                status = a.status
                err = _decode_error(a, key)
                retry_after = cast(OutboxError, err).retry_after
            except OutboxError:
                raise
            except (OSError, http.client.HTTPException, socket.timeout) as e:
                # URLError (refused, reset), timeouts, a cut-off answer: no answer arrived.
                err = e
            if not should_retry(idempotent, status, err if status == 0 else None):
                if status == 0:
                    raise self._give_up(attempt, err, key, "not retried: the request may have been acted on")
                raise err  # after a retry too: the server's answer is the answer
            last = err
            if attempt >= self.retry.max_attempts:
                raise self._give_up(attempt, last, key)
            pause = self.retry.backoff(attempt, retry_after)
            if deadline is not None and time.monotonic() + pause > deadline:
                raise self._give_up(attempt, last, key, "the deadline would pass")
            time.sleep(pause)

    @staticmethod
    def _give_up(attempts: int, last: Optional[BaseException], key: Optional[str], why: str = "") -> OutboxError:
        suffix = f" ({why})" if why else ""
        if isinstance(last, RateLimitedError):
            e = RateLimitedError(
                f"outbox: gave up after {attempts} attempts{suffix}, rate limited: {last.message}",
                status=429, code=last.code, field=last.field, retry_after=last.retry_after, key=key,
            )
            e.attempts = attempts
            return e
        if isinstance(last, OutboxError):
            return RetryError(
                f"outbox: gave up after {attempts} attempts{suffix}; last failure: {last}",
                attempts=attempts, last=last, status=last.status, code=last.code, field=last.field, retry_after=last.retry_after, key=key,
            )
        reason = getattr(last, "reason", last)
        code = "timeout" if isinstance(reason, (socket.timeout, TimeoutError)) else "unreachable"
        return RetryError(f"outbox: gave up after {attempts} attempts{suffix}; last failure: {last!r}", attempts=attempts, last=last, code=code, key=key)

    # --- the bot API -----------------------------------------------------------

    def submit(self, body: Mapping[str, Any], *, key: Optional[str] = None, prefer_wait: float = 0, deadline: Optional[float] = None) -> Submission:
        """Commit an intent under one idempotency key.

        ``key`` is the idempotency key of this logical attempt: your own id for
        it (see key_for), or a key from new_key persisted before sending;
        absent, one is generated and returned (and set on a raised error's
        ``key``). Connection errors, timeouts, 5xx and 429 are retried with
        the same key and the same bytes; a 200 replay is a success like 201
        (``replayed`` True). An unknown outcome is the intent's status, not an
        exception. ``deadline`` is a time.monotonic() value bounding the retries.
        """
        k = key if key is not None else self._new_key()
        try:
            check_key(k)
            try:
                data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")  # once: every attempt sends these bytes
            except (TypeError, ValueError) as e:
                raise ValidationError(f"outbox: the intent is not JSON: {e}", status=400, code="malformed_json") from None
            prefer, wait = None, 0.0
            if prefer_wait and prefer_wait > 0:
                s = max(1, int(prefer_wait))
                prefer, wait = f"wait={s}", float(s)
            value, headers = self._do("POST", "/v1/intents", data, key=k, prefer=prefer, wait=wait, deadline=deadline)
        except OutboxError as e:
            e.key = k
            raise
        return Submission(
            key=k,
            intent=cast(Intent, value),
            replayed=headers.get("Idempotent-Replayed") == "true",
            wait_applied=prefer is not None and (headers.get("Preference-Applied") or "").strip().startswith("wait"),
        )

    def submit_and_wait(
        self,
        body: Mapping[str, Any],
        *,
        key: Optional[str] = None,
        wait: float = DEFAULT_INLINE_WAIT,
        interval: float = 0.5,
        max_interval: float = 5.0,
        timeout: Optional[float] = None,
    ) -> Submission:
        """Submit asking the server to attempt inline (Prefer: wait) and return the intent settled.

        When the answer is not settled yet it polls with GET (never posts
        again) until it is, for at most ``timeout`` seconds (None: no bound).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        sub = self.submit(body, key=key, prefer_wait=max(1, int(wait or DEFAULT_INLINE_WAIT)), deadline=deadline)
        if is_settled(sub.intent.get("status", "")):
            return sub
        try:
            sub.intent = self._wait(sub.intent["id"], interval, max_interval, deadline)
        except OutboxError as e:
            e.key = sub.key
            raise
        return sub

    def get(self, intent_id: str) -> Intent:
        """Read one of this bot's intents."""
        return cast(Intent, self._do("GET", "/v1/intents/" + _q(intent_id))[0])

    def history(self, intent_id: str, cursor: str = "") -> HistorySlice:
        """One slice of an intent's whole history, oldest first (cursor "" first, then next_cursor until "")."""
        q = "?" + urllib.parse.urlencode({"cursor": cursor}) if cursor else ""
        return cast(HistorySlice, self._do("GET", "/v1/intents/" + _q(intent_id) + "/history" + q)[0])

    def wait(self, intent_id: str, *, interval: float = 0.5, max_interval: float = 5.0, timeout: Optional[float] = None) -> Intent:
        """Poll the intent until it is settled (a terminal status, or needs-human) and return it.

        Raises TimeoutError when ``timeout`` seconds pass first.
        """
        return self._wait(intent_id, interval, max_interval, None if timeout is None else time.monotonic() + timeout)

    def _wait(self, intent_id: str, interval: float, max_interval: float, deadline: Optional[float]) -> Intent:
        interval = interval if interval > 0 else 0.5
        if max_interval < interval:
            max_interval = max(5.0, interval)
        while True:
            intent = self.get(intent_id)
            if is_settled(intent.get("status", "")):
                return intent
            if deadline is not None and time.monotonic() + interval > deadline:
                raise TimeoutError(f"outbox: wait for {intent_id}: still {intent.get('status')} at the deadline")
            time.sleep(interval)
            interval = min(interval * 1.5, max_interval)

    def put_source(self, source_id: str, revision: int, deleted: bool = False) -> SourceResult:
        """Record the current revision of a source the bot answers; an older one answers applied False."""
        body: Dict[str, Any] = {"revision": revision}
        if deleted:
            body["deleted"] = True
        return cast(SourceResult, self._do("PUT", "/v1/sources/" + _q(source_id), json.dumps(body).encode())[0])

    @property
    def admin(self) -> "Admin":
        """The operators' API (operator or orchestrator token)."""
        return Admin(self)


def decision_key(intent_id: str, decision: str, reason: str, external_id: str = "") -> str:
    """The default Idempotency-Key of a decision (the Go client's DecisionKey)."""
    s = hashlib.sha256("\x00".join([intent_id, decision, reason, external_id]).encode("utf-8")).hexdigest()
    return "cli-" + s[:32]


class Admin:
    """The operators' API: list, show, history, resolve, recommend, whoami."""

    def __init__(self, c: Client) -> None:
        self._c = c

    def list(self, status: str = "", limit: int = 0, cursor: str = "") -> IntentPage:
        """Page through intents by status (default needs-human)."""
        q = {k: v for k, v in (("status", status), ("limit", str(limit) if limit else ""), ("cursor", cursor)) if v}
        path = "/v1/admin/intents" + ("?" + urllib.parse.urlencode(q) if q else "")
        return cast(IntentPage, self._c._do("GET", path)[0])

    def show(self, intent_id: str) -> Intent:
        """An intent with every attempt, recommendation and decision."""
        return cast(Intent, self._c._do("GET", "/v1/admin/intents/" + _q(intent_id))[0])

    def history(self, intent_id: str, cursor: str = "") -> HistorySlice:
        q = "?" + urllib.parse.urlencode({"cursor": cursor}) if cursor else ""
        return cast(HistorySlice, self._c._do("GET", "/v1/admin/intents/" + _q(intent_id) + "/history" + q)[0])

    def resolve(
        self,
        intent_id: str,
        decision: str,
        reason: str,
        *,
        external_id: str = "",
        accept_duplicate_risk: Optional[bool] = None,
        key: Optional[str] = None,
    ) -> Intent:
        """Record a human decision, with its reason, on a needs-human intent.

        Retried like submit: same key (default decision_key), same bytes.
        """
        body: Dict[str, Any] = {"decision": decision, "reason": reason}
        if external_id:
            body["externalId"] = external_id
        if accept_duplicate_risk is not None:
            body["acceptDuplicateRisk"] = accept_duplicate_risk
        k = key or decision_key(intent_id, decision, reason, external_id)
        check_key(k)
        path = "/v1/admin/intents/" + _q(intent_id) + "/resolution"
        return cast(Intent, self._c._do("POST", path, json.dumps(body).encode(), key=k)[0])

    def recommend(self, intent_id: str, decision: str, summary: str) -> Intent:
        """Attach a recommendation (changes no state); retried only when the server provably did not act."""
        body = json.dumps({"decision": decision, "summary": summary}).encode()
        return cast(Intent, self._c._do("POST", "/v1/admin/intents/" + _q(intent_id) + "/recommendation", body, idempotent=False)[0])

    def whoami(self) -> WhoAmI:
        """The calling principal (a bot's token is refused with 403)."""
        return cast(WhoAmI, self._c._do("GET", "/v1/admin/whoami")[0])


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _decode_error(a: _Answer, key: Optional[str]) -> APIError:
    retry_after = parse_retry_after(a.headers.get("Retry-After") if a.headers else None)
    code, message, field = "", "", None
    try:
        b = json.loads(a.body)
        if isinstance(b, dict):
            e = b.get("error")
            if isinstance(e, dict):
                code, message, field = str(e.get("code") or ""), str(e.get("message") or ""), e.get("field")
            elif isinstance(b.get("message"), str):
                message = b["message"]
    except ValueError:
        pass
    if not message:
        message = a.body.decode("utf-8", "replace").strip()[:200]
    return error_for(a.status, code, f"outbox: {a.status} {code or 'error'}: {message}", field, retry_after, key)
