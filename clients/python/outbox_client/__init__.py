"""The Python client of the outbox's HTTP API (standard library only).

The Go client's surface and discipline: one idempotency key per logical
attempt, retries with the same key and the same bytes, Retry-After honoured,
typed errors, submit_and_wait.

    from outbox_client import Client, base_url_from_env, key_for

    c = Client(base_url_from_env(), os.environ["OUTBOX_BOT_TOKEN"])
    sub = c.submit(body, key=key_for("telegram", str(update_id), "reply"))
"""

from .client import DEFAULT_INLINE_WAIT, Admin, Client, RetryPolicy, Submission, decision_key, parse_retry_after, should_retry
from .env import (
    DEFAULT_BASE_URL,
    ENV_API_URL,
    ENV_BOT_TOKEN,
    ENV_HTTP_ADDR,
    ENV_OPERATOR_TOKEN,
    base_url_from_env,
)
from .errors import APIError, IdempotencyKeyReusedError, OutboxError, RateLimitedError, RetryError, ValidationError
from .keys import check_key, key_for, new_key
from .types import TERMINAL_STATUSES, is_settled, is_terminal
from .webhook import VerifiedWebhook, WebhookVerificationError, verify_webhook

__all__ = [
    "Admin", "APIError", "Client", "DEFAULT_BASE_URL", "DEFAULT_INLINE_WAIT", "ENV_API_URL", "ENV_BOT_TOKEN",
    "ENV_HTTP_ADDR", "ENV_OPERATOR_TOKEN", "IdempotencyKeyReusedError", "OutboxError", "RateLimitedError",
    "RetryError", "RetryPolicy", "Submission", "TERMINAL_STATUSES", "ValidationError", "VerifiedWebhook",
    "WebhookVerificationError", "base_url_from_env", "check_key", "decision_key", "is_settled", "is_terminal",
    "key_for", "new_key", "parse_retry_after", "should_retry", "verify_webhook",
]
