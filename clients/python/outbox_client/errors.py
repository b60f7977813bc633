"""Typed errors a program branches on with ``except``.

Every one carries the HTTP ``status`` (0 when no answer arrived), the API's
machine-readable ``code`` (the ErrorCode enum of api/openapi.json) and, where
it applies, the ``field`` at fault, the server's ``retry_after`` (seconds) and
the Idempotency-Key the call used (``key``: resubmit later under it).
"""

from __future__ import annotations

from typing import Optional


class OutboxError(Exception):
    """The base class of every error this client raises."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str = "",
        field: Optional[str] = None,
        retry_after: Optional[float] = None,
        key: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field or None
        self.retry_after = retry_after
        self.key = key

    def __str__(self) -> str:
        return self.message


class APIError(OutboxError):
    """An error answer that is none of the more specific classes (401, 403, 404, 409, 410, ...)."""


class ValidationError(APIError):
    """400, 413, and 422 other than a reused key: nothing was written; ``field`` names the field at fault."""


class IdempotencyKeyReusedError(APIError):
    """422 idempotency_key_reused: the key was already used with a different body.

    The key belongs to another logical attempt: never re-send a changed body
    under an old key; use a new key for a new attempt.
    """


class RateLimitedError(APIError):
    """429 until the retries the policy allows ran out; ``retry_after`` is the server's last Retry-After."""

    attempts: int = 1


class RetryError(OutboxError):
    """A call gave up on failures worth retrying (connection errors, timeouts, 5xx).

    Every attempt carried the same Idempotency-Key and the same bytes, so the
    outcome is at most one intent: submit again later with ``key`` to find out.
    """

    def __init__(self, message: str, *, attempts: int, last: Optional[BaseException], **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.attempts = attempts
        self.last = last


def error_for(status: int, code: str, message: str, field: Optional[str], retry_after: Optional[float], key: Optional[str]) -> APIError:
    """The error class for an error answer."""
    kw = dict(status=status, code=code, field=field, retry_after=retry_after, key=key)
    if code == "idempotency_key_reused":
        return IdempotencyKeyReusedError(message, **kw)  # type: ignore[arg-type]
    if status in (400, 413, 422):
        return ValidationError(message, **kw)  # type: ignore[arg-type]
    if status == 429:
        return RateLimitedError(message, **kw)  # type: ignore[arg-type]
    return APIError(message, **kw)  # type: ignore[arg-type]
