"""Standard Webhooks (https://www.standardwebhooks.com) verification of operator events.

Headers webhook-id, webhook-timestamp and webhook-signature; the signature is
base64 HMAC-SHA256, under the base64 key of a "whsec_" secret, of
"<id>.<timestamp>.<body>", sent as space-separated "v1,<base64>" entries.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from dataclasses import dataclass
from typing import Mapping, Optional, Union


class WebhookVerificationError(Exception):
    """Why a delivery was refused."""


@dataclass
class VerifiedWebhook:
    id: str
    """The delivery's id: deduplicate by it."""
    timestamp: int


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: Union[bytes, str],
    *,
    tolerance: float = 300,
    now: Optional[float] = None,
) -> VerifiedWebhook:
    """Verify an operator event delivery; raise WebhookVerificationError unless it is genuine and fresh.

    Pass the raw body exactly as received.
    """
    h = {k.lower(): v for k, v in headers.items()}
    wid, ts, sig = h.get("webhook-id", ""), h.get("webhook-timestamp", ""), h.get("webhook-signature", "")
    if not wid or not ts or not sig:
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    if not ts.isdigit():
        raise WebhookVerificationError("webhook-timestamp is not a unix time")
    secs = int(ts)
    if abs((time.time() if now is None else now) - secs) > tolerance:
        raise WebhookVerificationError("webhook-timestamp outside the tolerance")
    if not secret.startswith("whsec_"):
        raise WebhookVerificationError('a secret must start with "whsec_"')
    try:
        key = base64.b64decode(secret[len("whsec_"):], validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        raise WebhookVerificationError("a secret must be whsec_ followed by standard base64 of a non-empty key")
    raw = body.encode("utf-8") if isinstance(body, str) else body
    mac = hmac.new(key, f"{wid}.{ts}.".encode("utf-8") + raw, hashlib.sha256).digest()
    for entry in sig.split(" "):
        version, _, value = entry.partition(",")
        if version != "v1" or not value:
            continue
        try:
            offered = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            continue
        if hmac.compare_digest(offered, mac):
            return VerifiedWebhook(id=wid, timestamp=secs)
    raise WebhookVerificationError("no signature matches")
