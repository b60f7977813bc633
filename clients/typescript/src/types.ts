// The API's wire types, with the API's own field names (api/openapi.json
// components.schemas; each interface is named as its schema, and
// api/clients_test.go checks that every schema's properties are here).

/** An intent's delivery state. */
export type Status =
  | "pending" | "in-flight" | "retryable-failure" | "unknown-outcome" | "needs-human"
  | "succeeded" | "failed" | "source-revised" | "grant-revoked" | "abandoned" | "expired";

export const TERMINAL_STATUSES: readonly Status[] = ["succeeded", "failed", "source-revised", "grant-revoked", "abandoned", "expired"];

/** Whether nothing more will happen to an intent in this status. */
export function isTerminal(s: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(s);
}

/** Whether wait stops at this status: a terminal one, or needs-human. */
export function isSettled(s: string): boolean {
  return isTerminal(s) || s === "needs-human";
}

export interface GrantRef { id: string; version: number }
export interface SourceRef { id: string; revision: number }

/** The body of POST /v1/intents. */
export interface SubmitRequest {
  kind: "reply" | "action" | string;
  provider: string;
  account: string;
  action: string;
  target: string;
  payload: Record<string, unknown>;
  source?: SourceRef;
  grant: GrantRef;
  deadline?: string;
  metadata?: Record<string, unknown>;
}

export interface Evidence {
  httpStatus?: number;
  providerCode?: string;
  detail?: string;
  retryAfter?: string;
  extra?: Record<string, string>;
}

export interface Checks {
  result: string;
  reason?: string;
  sourceRevision?: number;
  grantVersion?: number;
}

export interface Attempt {
  n: number;
  trigger: string;
  startedAt: string;
  endedAt: string;
  result: string;
  externalId?: string;
  evidence: Evidence;
  checks?: Checks;
  nextDueAt?: string;
}

export interface Resolution {
  at: string;
  by: string;
  byKind: string;
  decision: string;
  reason?: string;
  recommendationOnly?: boolean;
  duplicateRiskAccepted?: boolean;
}

export interface Lease { owner: string; since?: string; until: string }

export interface HistorySummary {
  pages: number;
  spilledAttempts: number;
  spilledResolutions: number;
  uncertain?: boolean;
  ack?: Attempt;
  delivery?: string;
  echo?: boolean;
  lastDecision?: Resolution;
}

export interface Pruned { endedAt: string; archive?: string }

/** An accepted intent with its history, exactly as the API answers it. */
export interface Intent {
  id: string;
  bot: string;
  idempotencyKey: string;
  kind: string;
  provider: string;
  account: string;
  action: string;
  target: string;
  payload?: Record<string, unknown>;
  payloadHash: string;
  payloadRef?: string;
  requestHash?: string;
  traceParent?: string;
  source?: SourceRef;
  grant: GrantRef;
  deadline?: string;
  metadata?: Record<string, unknown>;
  status: Status;
  statusReason?: string;
  version: number;
  createdAt: string;
  updatedAt: string;
  attemptCount: number;
  firstAttemptAt?: string;
  lease?: Lease;
  nextAttemptAt?: string;
  externalId?: string;
  attempts: Attempt[];
  resolutions?: Resolution[];
  history?: HistorySummary;
  pruned?: Pruned;
}

export interface HistorySlice {
  intentId: string;
  attempts: Attempt[];
  resolutions: Resolution[];
  nextCursor: string;
}

export interface SourceUpdate { revision: number; deleted?: boolean }

/** The answer of putSource. */
export interface SourceResult {
  sourceId: string;
  revision: number;
  deleted: boolean;
  updatedAt: string;
  applied: boolean;
}

export interface IntentSummary {
  id: string;
  bot: string;
  provider: string;
  account: string;
  action: string;
  target: string;
  status: Status;
  statusReason?: string;
  attemptCount: number;
  lastAttempt?: Attempt;
  updatedAt: string;
  waitingSince: string;
  recommended?: string;
}

export interface IntentPage { items: IntentSummary[]; nextCursor: string }

export type Decision = "reconcile" | "retry" | "accept-success" | "abandon";

/** A human decision on a needs-human intent. */
export interface ResolutionRequest {
  decision: Decision;
  reason: string;
  externalId?: string;
  acceptDuplicateRisk?: boolean;
}

export interface WhoAmI { kind: string; name: string; canDecide: boolean }
