"""The environment every program of the project reads."""

from __future__ import annotations

import os
from typing import Mapping, Optional

ENV_API_URL = "OUTBOX_API_URL"
ENV_HTTP_ADDR = "OUTBOX_HTTP_ADDR"
ENV_BOT_TOKEN = "OUTBOX_BOT_TOKEN"
ENV_OPERATOR_TOKEN = "OUTBOX_OPERATOR_TOKEN"
DEFAULT_BASE_URL = "http://127.0.0.1:4000"


def base_url_from_env(env: Optional[Mapping[str, str]] = None) -> str:
    """The API base URL, read at call time as the Go client's BaseURLFromEnv.

    $OUTBOX_API_URL (trimmed, without a trailing "/"), else
    http://$OUTBOX_HTTP_ADDR, else http://127.0.0.1:4000; an empty variable
    counts as unset.
    """
    e = os.environ if env is None else env
    url = (e.get(ENV_API_URL) or "").strip()
    if url:
        return url.rstrip("/")
    addr = (e.get(ENV_HTTP_ADDR) or "").strip()
    if addr:
        if "://" not in addr:
            addr = "http://" + addr
        return addr.rstrip("/")
    return DEFAULT_BASE_URL
