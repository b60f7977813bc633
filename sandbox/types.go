package sandbox

import (
	"encoding/json"
	"time"
)

// Default values for a newly seen account and for fault parameters.
const (
	DefaultKeyRetentionSeconds = 86400
	DefaultHangDelay           = 30 * time.Second
	DefaultRetryAfterSeconds   = 1
	DefaultMaxBodyBytes        = 1 << 20
	MaxIdempotencyKeyLength    = 255
)

// Concurrent-request policies for a key-honouring account while another
// request with the same key is still being processed.
const (
	// PolicyWait makes the later request wait for the earlier one and then
	// replay its result (or proceed, if the earlier one did not commit).
	PolicyWait = "wait"
	// PolicyConflict makes the later request fail at once with
	// 409 {"error":{"code":"request_in_progress"}} (no effect).
	PolicyConflict = "conflict"
)

// Capabilities are what an account of the provider offers.
type Capabilities struct {
	IdempotencyKeys     bool   `json:"idempotencyKeys"`
	KeyRetentionSeconds int    `json:"keyRetentionSeconds"`
	Lookup              bool   `json:"lookup"`
	ConcurrentKeyPolicy string `json:"concurrentKeyPolicy"`
	// ClientChosenIDs: the Idempotency-Key names the message, as a
	// client-chosen id does (Google Calendar's event id): a second POST with
	// a committed key is refused with 409 duplicate and no effect, for as
	// long as the message exists. Exclusive with IdempotencyKeys.
	ClientChosenIDs bool `json:"clientChosenIds,omitempty"`
}

// DefaultCapabilities are those of an account the sandbox has not been told about.
func DefaultCapabilities() Capabilities {
	return Capabilities{
		IdempotencyKeys:     false,
		KeyRetentionSeconds: DefaultKeyRetentionSeconds,
		Lookup:              false,
		ConcurrentKeyPolicy: PolicyWait,
	}
}

// CapabilitiesPatch changes some capabilities; a nil field keeps the current value.
type CapabilitiesPatch struct {
	IdempotencyKeys     *bool   `json:"idempotencyKeys,omitempty"`
	KeyRetentionSeconds *int    `json:"keyRetentionSeconds,omitempty"`
	Lookup              *bool   `json:"lookup,omitempty"`
	ConcurrentKeyPolicy *string `json:"concurrentKeyPolicy,omitempty"`
	ClientChosenIDs     *bool   `json:"clientChosenIds,omitempty"`
}

// FaultKind names an injected fault.
type FaultKind string

// The fault kinds. See README.md for their exact behaviour.
const (
	FaultDropAfterCommit  FaultKind = "drop_after_commit"
	FaultHang             FaultKind = "hang"
	FaultHangNoCommit     FaultKind = "hang_no_commit"
	FaultRateLimit        FaultKind = "rate_limit"
	FaultUnavailable      FaultKind = "unavailable"
	FaultErrorAfterCommit FaultKind = "error_after_commit"
	FaultReject           FaultKind = "reject"
	FaultUnauthorized     FaultKind = "unauthorized"
)

func (k FaultKind) valid() bool {
	switch k {
	case FaultDropAfterCommit, FaultHang, FaultHangNoCommit, FaultRateLimit,
		FaultUnavailable, FaultErrorAfterCommit, FaultReject, FaultUnauthorized:
		return true
	}
	return false
}

// Fault is one entry of an account's FIFO fault queue.
type Fault struct {
	Kind              FaultKind   `json:"kind"`
	RetryAfterSeconds int         `json:"retryAfterSeconds,omitempty"`
	DelayMs           int         `json:"delayMs,omitempty"`
	Match             *FaultMatch `json:"match,omitempty"`
}

// FaultMatch restricts a fault to matching requests; empty fields match anything.
type FaultMatch struct {
	Target string `json:"target,omitempty"`
}

func (f Fault) matches(target string) bool {
	return f.Match == nil || f.Match.Target == "" || f.Match.Target == target
}

// Config is the body of POST /_sandbox/faults.
type Config struct {
	Account      string             `json:"account"`
	Capabilities *CapabilitiesPatch `json:"capabilities,omitempty"`
	// Token: nil keeps the current token, "" removes it (any bearer token is
	// then accepted), anything else is required as "Authorization: Bearer <token>".
	Token *string `json:"token,omitempty"`
	// Faults: nil (field omitted or null) keeps the queue; a list (even empty)
	// replaces it, or is appended to it when Append is true.
	Faults []Fault `json:"faults"`
	Append bool    `json:"append,omitempty"`
	// Webhook: nil keeps the account's webhook; an object with an empty url
	// turns it off; otherwise it replaces it (see webhooks.go).
	Webhook *WebhookConfig `json:"webhook,omitempty"`
	// RateLimit: nil keeps the account's rate-limit mode; requestsPerSecond 0 turns it off (modes.go).
	RateLimit *RateLimitMode `json:"rateLimit,omitempty"`
	// Outage: nil keeps the current outage; otherwise 503 for durationMs from now (0 ends it).
	Outage *OutageMode `json:"outage,omitempty"`
}

// AccountState is what GET /_sandbox/faults reports for an account.
type AccountState struct {
	Account      string       `json:"account"`
	Capabilities Capabilities `json:"capabilities"`
	TokenSet     bool         `json:"tokenSet"`
	Faults       []Fault      `json:"faults"`
	// Held is the number of requests currently held by a hang or
	// hang_no_commit fault.
	Held int `json:"held"`
	// Webhook is the account's webhook sender, if configured (no secret).
	Webhook *WebhookState `json:"webhook,omitempty"`
	// RateLimit is the account's rate-limit mode (requestsPerSecond 0: off).
	RateLimit *RateLimitMode `json:"rateLimit,omitempty"`
	// OutageUntil is when the account's last outage ends (omitted: none configured).
	OutageUntil *time.Time `json:"outageUntil,omitempty"`
}

// Effect is one side effect the sandbox really performed.
type Effect struct {
	Account        string    `json:"account"`
	Action         string    `json:"action"`
	Target         string    `json:"target"`
	IdempotencyKey string    `json:"idempotencyKey"`
	PayloadHash    string    `json:"payloadHash"`
	IntentID       string    `json:"intentId"`
	MessageID      string    `json:"messageId"`
	At             time.Time `json:"at"`
}

// EffectFilter selects effects; empty fields match anything.
type EffectFilter struct {
	Account        string
	IdempotencyKey string
	IntentID       string
	Target         string
}

func (f EffectFilter) match(e Effect) bool {
	return (f.Account == "" || f.Account == e.Account) &&
		(f.IdempotencyKey == "" || f.IdempotencyKey == e.IdempotencyKey) &&
		(f.IntentID == "" || f.IntentID == e.IntentID) &&
		(f.Target == "" || f.Target == e.Target)
}

// MessageRequest is the body of POST /v1/accounts/{account}/messages.
type MessageRequest struct {
	Action      string          `json:"action"`
	Target      string          `json:"target"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	PayloadHash string          `json:"payloadHash"`
	IntentID    string          `json:"intentId"`
}

// Message is the success body of POST /v1/accounts/{account}/messages, and the
// "message" of a found lookup.
type Message struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	IdempotencyKey string `json:"idempotencyKey"`
	CommittedAt    string `json:"committedAt"`
}

// LookupResponse is the body of GET /v1/accounts/{account}/messages?idempotencyKey=K.
type LookupResponse struct {
	State string `json:"state"` // "found", "pending" or "absent"
	// Message is the first effect committed with the key (state "found" only).
	Message json.RawMessage `json:"message,omitempty"`
	// EffectCount is how many effects carry the key (state "found" only); more
	// than one means the key was not deduplicated (keys not honoured, or reused
	// after its retention ran out).
	EffectCount int `json:"effectCount,omitempty"`
}

// EffectsResponse is the body of GET /_sandbox/effects.
type EffectsResponse struct {
	Count   int      `json:"count"`
	Effects []Effect `json:"effects"`
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message,omitempty"`
	Committed *bool  `json:"committed,omitempty"`
}
