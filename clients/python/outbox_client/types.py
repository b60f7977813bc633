"""The API's wire types, with the API's own field names.

Each TypedDict is named as its schema in api/openapi.json (components.schemas);
api/clients_test.go checks that every property of the schema is here. They are
total=False (Python 3.9 has no NotRequired): the schema says which are required.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, TypedDict

Status = Literal[
    "pending", "in-flight", "retryable-failure", "unknown-outcome", "needs-human",
    "succeeded", "failed", "source-revised", "grant-revoked", "abandoned", "expired",
]

TERMINAL_STATUSES = ("succeeded", "failed", "source-revised", "grant-revoked", "abandoned", "expired")


def is_terminal(status: str) -> bool:
    """Whether nothing more will happen to an intent in this status."""
    return status in TERMINAL_STATUSES


def is_settled(status: str) -> bool:
    """Whether wait stops at this status: a terminal one, or needs-human."""
    return is_terminal(status) or status == "needs-human"


class GrantRef(TypedDict, total=False):
    """api/openapi.json GrantRef (required: id, version)."""

    id: str
    version: int


class SourceRef(TypedDict, total=False):
    """api/openapi.json SourceRef (required: id, revision)."""

    id: str
    revision: int


class SubmitRequest(TypedDict, total=False):
    """api/openapi.json SubmitRequest (required: account, action, grant, kind, payload, provider, target)."""

    kind: str
    provider: str
    account: str
    action: str
    target: str
    payload: Dict[str, Any]
    source: "SourceRef"
    grant: "GrantRef"
    deadline: str
    metadata: Dict[str, Any]


class Evidence(TypedDict, total=False):
    """api/openapi.json Evidence (required: none)."""

    httpStatus: int
    providerCode: str
    detail: str
    retryAfter: str
    extra: Dict[str, Any]


class Checks(TypedDict, total=False):
    """api/openapi.json Checks (required: result)."""

    result: str
    reason: str
    sourceRevision: int
    grantVersion: int


class Attempt(TypedDict, total=False):
    """api/openapi.json Attempt (required: endedAt, evidence, n, result, startedAt, trigger)."""

    n: int
    trigger: str
    startedAt: str
    endedAt: str
    result: str
    externalId: str
    evidence: "Evidence"
    checks: "Checks"
    nextDueAt: str


class Resolution(TypedDict, total=False):
    """api/openapi.json Resolution (required: at, by, byKind, decision)."""

    at: str
    by: str
    byKind: str
    decision: str
    reason: str
    recommendationOnly: bool
    duplicateRiskAccepted: bool


class Lease(TypedDict, total=False):
    """api/openapi.json Lease (required: owner, until)."""

    owner: str
    since: str
    until: str


class HistorySummary(TypedDict, total=False):
    """api/openapi.json HistorySummary (required: pages, spilledAttempts, spilledResolutions)."""

    pages: int
    spilledAttempts: int
    spilledResolutions: int
    uncertain: bool
    ack: "Attempt"
    delivery: str
    echo: bool
    lastDecision: "Resolution"


class Pruned(TypedDict, total=False):
    """api/openapi.json Pruned (required: endedAt)."""

    endedAt: str
    archive: str


class Intent(TypedDict, total=False):
    """api/openapi.json Intent (required: account, action, attemptCount, attempts, bot, createdAt, grant, id, idempotencyKey, kind, payloadHash, provider, status, target, updatedAt, version)."""

    id: str
    bot: str
    idempotencyKey: str
    kind: str
    provider: str
    account: str
    action: str
    target: str
    payload: Dict[str, Any]
    payloadHash: str
    payloadRef: str
    requestHash: str
    source: "SourceRef"
    grant: "GrantRef"
    deadline: str
    metadata: Dict[str, Any]
    status: "Status"
    statusReason: str
    version: int
    createdAt: str
    updatedAt: str
    attemptCount: int
    firstAttemptAt: str
    lease: "Lease"
    nextAttemptAt: str
    externalId: str
    attempts: List["Attempt"]
    resolutions: List["Resolution"]
    history: "HistorySummary"
    traceParent: str
    pruned: "Pruned"


class HistorySlice(TypedDict, total=False):
    """api/openapi.json HistorySlice (required: attempts, intentId, nextCursor, resolutions)."""

    intentId: str
    attempts: List["Attempt"]
    resolutions: List["Resolution"]
    nextCursor: str


class SourceUpdate(TypedDict, total=False):
    """api/openapi.json SourceUpdate (required: none)."""

    revision: int
    deleted: bool


class SourceResult(TypedDict, total=False):
    """api/openapi.json SourceResult (required: applied, deleted, revision, sourceId, updatedAt)."""

    sourceId: str
    revision: int
    deleted: bool
    updatedAt: str
    applied: bool


class IntentSummary(TypedDict, total=False):
    """api/openapi.json IntentSummary (required: account, action, attemptCount, bot, id, provider, status, target, updatedAt, waitingSince)."""

    id: str
    bot: str
    provider: str
    account: str
    action: str
    target: str
    status: "Status"
    statusReason: str
    attemptCount: int
    lastAttempt: "Attempt"
    updatedAt: str
    recommended: str
    waitingSince: str


class IntentPage(TypedDict, total=False):
    """api/openapi.json IntentPage (required: items, nextCursor)."""

    items: List["IntentSummary"]
    nextCursor: str


class ResolutionRequest(TypedDict, total=False):
    """api/openapi.json ResolutionRequest (required: decision, reason)."""

    decision: str
    reason: str
    externalId: str
    acceptDuplicateRisk: bool


class WhoAmI(TypedDict, total=False):
    """api/openapi.json WhoAmI (required: canDecide, kind, name)."""

    kind: str
    name: str
    canDecide: bool
