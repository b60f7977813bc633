"""Idempotency keys, byte-identical to the Go client's KeyFor and NewKey."""

from __future__ import annotations

import base64
import hashlib
import secrets

from .errors import ValidationError


def check_key(key: str) -> None:
    """Raise ValidationError unless key is 1 to 255 printable ASCII characters (the server's rule)."""
    b = key.encode("utf-8", "surrogatepass")
    if not 1 <= len(b) <= 255:
        raise ValidationError(
            "an idempotency key has 1 to 255 printable ASCII characters (checked before sending)",
            status=400, code="invalid_idempotency_key", field="Idempotency-Key",
        )
    for i, c in enumerate(b):
        if c < 0x20 or c > 0x7E:
            raise ValidationError(
                f"the idempotency key has a non-printable or non-ASCII byte at {i} (checked before sending)",
                status=400, code="invalid_idempotency_key", field="Idempotency-Key",
            )


def _valid(key: str) -> bool:
    try:
        check_key(key)
    except ValidationError:
        return False
    return True


def key_for(*parts: str) -> str:
    """A stable idempotency key derived from a logical attempt's identity.

    ``key_for("telegram", str(update.update_id), "reply")``: the same parts
    always give the same key, and the same key as the Go and TypeScript
    clients. The parts joined by "/" when that is 1-255 printable ASCII bytes
    and no part holds a "/", else "obx-" + hex(sha256 of "<UTF-8 byte
    length>:<part>" for each part).
    """
    joined = "/".join(parts)
    if _valid(joined) and not any("/" in p for p in parts):
        return joined
    h = hashlib.sha256()
    for p in parts:
        b = p.encode("utf-8")
        h.update(f"{len(b)}:".encode("ascii"))
        h.update(b)
    return "obx-" + h.hexdigest()


def new_key() -> str:
    """A fresh random key ("obx-" + 32 base32 characters).

    Persist it with the work it belongs to before the first submit, and reuse
    it for every retry of that work, even after a restart.
    """
    return "obx-" + base64.b32encode(secrets.token_bytes(20)).decode("ascii").rstrip("=").lower()
