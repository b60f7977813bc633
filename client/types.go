package client

import (
	"encoding/json"
	"time"
)

// Status is an intent's delivery state (the API's Status enum).
type Status string

// The statuses of an intent.
const (
	StatusPending          Status = "pending"
	StatusInFlight         Status = "in-flight"
	StatusRetryableFailure Status = "retryable-failure"
	StatusUnknownOutcome   Status = "unknown-outcome"
	StatusNeedsHuman       Status = "needs-human"
	StatusSucceeded        Status = "succeeded"
	StatusFailed           Status = "failed"
	StatusSourceRevised    Status = "source-revised"
	StatusGrantRevoked     Status = "grant-revoked"
	StatusAbandoned        Status = "abandoned"
	StatusExpired          Status = "expired"
)

// Terminal reports whether nothing more will happen to the intent.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusSourceRevised, StatusGrantRevoked, StatusAbandoned, StatusExpired:
		return true
	}
	return false
}

// Settled reports whether Wait stops at s: a terminal status, or
// needs-human (nothing more happens until a person decides).
func (s Status) Settled() bool { return s.Terminal() || s == StatusNeedsHuman }

// GrantRef names the grant (and its version) an intent is submitted under.
type GrantRef struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

// SourceRef names the source revision an intent answers.
type SourceRef struct {
	ID       string `json:"id"`
	Revision int64  `json:"revision"`
}

// IntentRequest is what a bot submits (the body of POST /v1/intents).
type IntentRequest struct {
	Kind     string          `json:"kind"` // "reply" or "action"
	Provider string          `json:"provider"`
	Account  string          `json:"account"`
	Action   string          `json:"action"`
	Target   string          `json:"target"`
	Payload  json.RawMessage `json:"payload"` // a JSON object
	Source   *SourceRef      `json:"source,omitempty"`
	Grant    GrantRef        `json:"grant"`
	Deadline *time.Time      `json:"deadline,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"` // a JSON object
}

// Evidence is what an attempt observed.
type Evidence struct {
	HTTPStatus   int               `json:"httpStatus,omitempty"`
	ProviderCode string            `json:"providerCode,omitempty"`
	Detail       string            `json:"detail,omitempty"`
	RetryAfter   string            `json:"retryAfter,omitempty"`
	Extra        map[string]string `json:"extra,omitempty"`
}

// Checks is what revalidation saw before an attempt.
type Checks struct {
	Result         string `json:"result"`
	Reason         string `json:"reason,omitempty"`
	SourceRevision int64  `json:"sourceRevision,omitempty"`
	GrantVersion   int64  `json:"grantVersion,omitempty"`
}

// HistorySummary is what an intent keeps about older history entries moved
// out of it.
type HistorySummary struct {
	Pages              int         `json:"pages"`
	SpilledAttempts    int         `json:"spilledAttempts"`
	SpilledResolutions int         `json:"spilledResolutions"`
	Uncertain          bool        `json:"uncertain,omitempty"`
	Ack                *Attempt    `json:"ack,omitempty"`
	Delivery           string      `json:"delivery,omitempty"`
	Echo               bool        `json:"echo,omitempty"`
	LastDecision       *Resolution `json:"lastDecision,omitempty"`
}

// HistorySlice is one slice of an intent's whole history, oldest first
// (History, Admin.History).
type HistorySlice struct {
	IntentID    string       `json:"intentId"`
	Attempts    []Attempt    `json:"attempts"`
	Resolutions []Resolution `json:"resolutions"`
	// NextCursor continues the read; "" after the last slice.
	NextCursor string `json:"nextCursor"`
}

// Attempt is one entry of an intent's append-only attempt history.
type Attempt struct {
	N          int        `json:"n"`
	Trigger    string     `json:"trigger"`
	StartedAt  time.Time  `json:"startedAt"`
	EndedAt    time.Time  `json:"endedAt"`
	Result     string     `json:"result"`
	ExternalID string     `json:"externalId,omitempty"`
	Evidence   Evidence   `json:"evidence"`
	Checks     *Checks    `json:"checks,omitempty"`
	NextDueAt  *time.Time `json:"nextDueAt,omitempty"`
}

// Resolution is a human decision or an orchestrator's recommendation.
type Resolution struct {
	At                    time.Time `json:"at"`
	By                    string    `json:"by"`
	ByKind                string    `json:"byKind"`
	Decision              string    `json:"decision"`
	Reason                string    `json:"reason,omitempty"`
	RecommendationOnly    bool      `json:"recommendationOnly,omitempty"`
	DuplicateRiskAccepted bool      `json:"duplicateRiskAccepted,omitempty"`
}

// Lease marks an in-flight claim: who holds it, since when (the claim, the
// attempt's start) and until when.
type Lease struct {
	Owner string    `json:"owner"`
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until"`
}

// Intent is an accepted intent with its whole history.
type Intent struct {
	ID             string          `json:"id"`
	Bot            string          `json:"bot"`
	IdempotencyKey string          `json:"idempotencyKey"`
	Kind           string          `json:"kind"`
	Provider       string          `json:"provider"`
	Account        string          `json:"account"`
	Action         string          `json:"action"`
	Target         string          `json:"target"`
	Payload        json.RawMessage `json:"payload,omitempty"` // absent when PayloadRef is set
	PayloadHash    string          `json:"payloadHash"`
	// PayloadRef: the payload (over 4 KiB) is kept out of the intent, in the
	// payload store, under this content address.
	PayloadRef     string          `json:"payloadRef,omitempty"`
	RequestHash    string          `json:"requestHash,omitempty"`
	TraceParent    string          `json:"traceParent,omitempty"` // W3C traceparent: one trace per intent
	Source         *SourceRef      `json:"source,omitempty"`
	Grant          GrantRef        `json:"grant"`
	Deadline       *time.Time      `json:"deadline,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	Status         Status          `json:"status"`
	StatusReason   string          `json:"statusReason,omitempty"`
	Version        int64           `json:"version"`
	CreatedAt      time.Time       `json:"createdAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
	AttemptCount   int             `json:"attemptCount"`
	FirstAttemptAt *time.Time      `json:"firstAttemptAt,omitempty"`
	Lease          *Lease          `json:"lease,omitempty"`
	NextAttemptAt  *time.Time      `json:"nextAttemptAt,omitempty"`
	ExternalID     string          `json:"externalId,omitempty"`
	Attempts       []Attempt       `json:"attempts"`
	Resolutions    []Resolution    `json:"resolutions,omitempty"`
	// History counts older entries moved out of the intent (only the newest
	// attempts and resolutions are listed inline).
	History *HistorySummary `json:"history,omitempty"`
	// Pruned is set when the intent was answered from its tombstone: it
	// ended, its retention window passed, and only its identity, final
	// status, external id and end are left (Attempts is empty; its history
	// answers ErrPruned). A Submit replay of a pruned key still reports the
	// original outcome this way.
	Pruned *Pruned `json:"pruned,omitempty"`
}

// Pruned marks an intent answered from its tombstone.
type Pruned struct {
	// EndedAt is when the intent reached its final status.
	EndedAt time.Time `json:"endedAt"`
	// Archive locates the full archived record ("<key>#<line>" in the
	// archive bucket); empty when the archive is off.
	Archive string `json:"archive,omitempty"`
}

// SourceState is a source's recorded revision (the answer of PutSource).
type SourceState struct {
	SourceID  string    `json:"sourceId"`
	Revision  int64     `json:"revision"`
	Deleted   bool      `json:"deleted"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Applied is false when the update was older than the recorded revision.
	Applied bool `json:"applied"`
}

// IntentSummary is one row of the operators' list.
type IntentSummary struct {
	ID           string    `json:"id"`
	Bot          string    `json:"bot"`
	Provider     string    `json:"provider"`
	Account      string    `json:"account"`
	Action       string    `json:"action"`
	Target       string    `json:"target"`
	Status       Status    `json:"status"`
	StatusReason string    `json:"statusReason,omitempty"`
	AttemptCount int       `json:"attemptCount"`
	LastAttempt  *Attempt  `json:"lastAttempt,omitempty"`
	UpdatedAt    time.Time `json:"updatedAt"`
	// WaitingSince: when it started waiting in its status (needs-human: the
	// start of the episode).
	WaitingSince time.Time `json:"waitingSince"`
	Recommended  string    `json:"recommended,omitempty"`
}

// IntentPage is one page of the operators' list.
type IntentPage struct {
	Items      []IntentSummary `json:"items"`
	NextCursor string          `json:"nextCursor"` // "" on the last page
}

// Manifest is a verified profile backup.
type Manifest struct {
	Format           int            `json:"format"`
	BackupID         string         `json:"backupId"`
	Profile          string         `json:"profile"`
	Table            string         `json:"table"`
	BarrierAt        time.Time      `json:"barrierAt"`
	CompletedAt      time.Time      `json:"completedAt"`
	ItemsObject      string         `json:"itemsObject"`
	ItemCount        int            `json:"itemCount"`
	ItemsBytes       int64          `json:"itemsBytes"`
	ItemsSHA256      string         `json:"itemsSha256"`
	StatusCounts     map[string]int `json:"statusCounts"`
	InFlightAtCutoff []string       `json:"inFlightAtCutoff"`
	// Payloads kept out of intent items (claim-check) travel with the
	// snapshot: one gzip JSON line per object, {ref, hash, data} (absent
	// when none).
	PayloadsObject  string `json:"payloadsObject,omitempty"`
	PayloadCount    int    `json:"payloadCount,omitempty"`
	PayloadsBytes   int64  `json:"payloadsBytes,omitempty"`
	PayloadsSHA256  string `json:"payloadsSha256,omitempty"`
	PayloadsMissing int    `json:"payloadsMissing,omitempty"`
	// ManifestSHA256 covers every other field (computed with it and
	// Signature empty).
	ManifestSHA256 string `json:"manifestSha256"`
	// Signature is HMAC-SHA256, under the deployment's backup key, of the
	// manifest with Signature empty (so it covers the checksums of the items
	// and payloads objects). Without the key nobody can make a snapshot
	// restore accepts (docs/decisions.md "Backup and restore").
	Signature string `json:"signature,omitempty"`
}

// RestoreReport says what a restore wrote.
type RestoreReport struct {
	BackupID     string         `json:"backupId"`
	Profile      string         `json:"profile"`
	Items        int            `json:"items"`
	Written      int            `json:"written"`
	KeptExisting int            `json:"keptExisting"`
	Outcomes     map[string]int `json:"outcomes"`
	Reconciled   []string       `json:"reconciled"`
}

// WhoAmI is the calling principal as the admin API sees it (operators and
// orchestrators; a bot's token is refused with 403).
type WhoAmI struct {
	Kind      string `json:"kind"` // "operator" or "orchestrator"
	Name      string `json:"name"`
	CanDecide bool   `json:"canDecide"`
}
