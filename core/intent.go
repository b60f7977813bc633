package core

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Kind distinguishes a reply to a source from a proactive action.
type Kind string

const (
	KindReply  Kind = "reply"
	KindAction Kind = "action"
)

// SourceRef names the source revision an intent answers.
type SourceRef struct {
	ID       string `json:"id"`
	Revision int64  `json:"revision"`
}

// GrantRef is the grant snapshot the intent was accepted under.
type GrantRef struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

// Lease marks an in-flight claim: who holds attempt N, since when (the
// claim: the attempt's start) and until when.
type Lease struct {
	Owner string    `json:"owner"`
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until"`
}

// Attempt is one immutable entry of attempt history. Entries are only ever
// appended, never edited: a crash before the outcome is recorded leaves a
// lease, and the sweeper appends the entry that says so.
type Attempt struct {
	N          int           `json:"n"`
	Trigger    Trigger       `json:"trigger"`
	StartedAt  time.Time     `json:"startedAt"`
	EndedAt    time.Time     `json:"endedAt"`
	Result     AttemptResult `json:"result"` // "succeeded", an ErrorClass, a revalidation status or a Result* constant
	ExternalID string        `json:"externalId,omitempty"`
	Evidence   Evidence      `json:"evidence"`
	Checks     *Checks       `json:"checks,omitempty"`
	NextDueAt  *time.Time    `json:"nextDueAt,omitempty"`
}

// Checks records what revalidation saw before an attempt.
type Checks struct {
	Result         string `json:"result"`
	Reason         string `json:"reason,omitempty"`
	SourceRevision int64  `json:"sourceRevision,omitempty"`
	GrantVersion   int64  `json:"grantVersion,omitempty"`
}

// Resolution is a human decision (or an orchestrator's recommendation) about
// an intent that needed one. Append-only, like attempts.
type Resolution struct {
	At        time.Time `json:"at"`
	By        string    `json:"by"`
	ByKind    string    `json:"byKind"`
	Decision  string    `json:"decision"`
	Reason    string    `json:"reason,omitempty"`
	Recommend bool      `json:"recommendationOnly,omitempty"`
	// Key is the Idempotency-Key of the request that made the decision.
	Key string `json:"-"`
	// DuplicateRiskAccepted: a retry the provider cannot deduplicate.
	DuplicateRiskAccepted bool `json:"duplicateRiskAccepted,omitempty"`
}

// Intent is one committed side effect a bot wants done.
type Intent struct {
	ID             string          `json:"id"`
	Bot            string          `json:"bot"`
	IdempotencyKey string          `json:"idempotencyKey"`
	Kind           Kind            `json:"kind"`
	Provider       string          `json:"provider"`
	Account        string          `json:"account"`
	Action         string          `json:"action"`
	Target         string          `json:"target"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	PayloadHash    string          `json:"payloadHash"`
	// PayloadRef names the payload in the PayloadStore when it is too large to
	// keep inline (Payload is then empty); PayloadHash still covers it.
	PayloadRef  string `json:"payloadRef,omitempty"`
	RequestHash string `json:"requestHash"`
	// TraceParent is the W3C traceparent of the intake's span: every
	// attempt, reconciliation and webhook binding continues this trace.
	TraceParent string          `json:"traceParent,omitempty"`
	Source      *SourceRef      `json:"source,omitempty"`
	Grant       GrantRef        `json:"grant"`
	Deadline    *time.Time      `json:"deadline,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`

	Status         Status       `json:"status"`
	StatusReason   string       `json:"statusReason,omitempty"`
	Version        int64        `json:"version"`
	CreatedAt      time.Time    `json:"createdAt"`
	UpdatedAt      time.Time    `json:"updatedAt"`
	AttemptCount   int          `json:"attemptCount"`
	FirstAttemptAt *time.Time   `json:"firstAttemptAt,omitempty"`
	Lease          *Lease       `json:"lease,omitempty"`
	NextAttemptAt  *time.Time   `json:"nextAttemptAt,omitempty"`
	ExternalID     string       `json:"externalId,omitempty"`
	Attempts       []Attempt    `json:"attempts"`
	Resolutions    []Resolution `json:"resolutions,omitempty"`
	// History summarises entries moved to history pages (nil: none moved).
	History *HistorySummary `json:"history,omitempty"`
	// Spill holds pages the current mutation moved out; the store writes them
	// with the intent and clears it. Never stored on the intent item.
	Spill []HistoryPage `json:"-"`
	// RepairAt is when the sweeper must next look at the intent (its repair
	// index entry; see repair.go and NextRepairCheck). Zero: no entry.
	RepairAt time.Time `json:"-"`
	// OpenSlot is 1 + the bot-limit counter shard that counted this intent
	// as open at intake (0: not counted). The write that makes it terminal
	// gives the count back there (see botlimits.go). Never shown.
	OpenSlot int `json:"-"`
	// EndedAt is when the intent became terminal and ExpiresAt when its
	// retention window closes (ApplyRetention; the table's TTL). Both unset
	// while it is not terminal.
	EndedAt   *time.Time `json:"-"`
	ExpiresAt time.Time  `json:"-"`
	// Pruned is set on an intent read back from its tombstone: the window
	// passed, only the identity and first answer are left (see retention.go).
	Pruned *Pruned `json:"pruned,omitempty"`
}

// IntentID derives the intent id from its idempotency identity (bot + key).
// Deriving it (rather than generating one) lets a single conditional put on
// the id decide creation: the same identity always lands on the same item.
func IntentID(bot, key string) string {
	// Length-prefixing the bot name keeps the encoding unambiguous.
	h := sha256.Sum256([]byte(strconv.Itoa(len(bot)) + ":" + bot + key))
	return "it_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:20]))
}

// MoveTo moves the intent to status to, if the state machine allows it.
func (in *Intent) MoveTo(to Status, reason string, now time.Time) error {
	if err := Transition(in.Status, to); err != nil {
		return err
	}
	in.Status = to
	in.StatusReason = reason
	in.UpdatedAt = now
	if to != StatusInFlight {
		in.Lease = nil
	}
	if to != StatusRetryableFailure && to != StatusUnknownOutcome {
		in.NextAttemptAt = nil
	}
	return nil
}

// HeldBy reports whether owner still holds attempt n of in: in flight,
// on that attempt, under owner's lease. Every write that records an
// attempt's end checks it (the sweeper may have declared the lease lost).
func (in *Intent) HeldBy(owner string, n int) bool {
	return in.Status == StatusInFlight && in.AttemptCount == n && in.Lease != nil && in.Lease.Owner == owner
}

// Claimable reports whether an attempt may start now.
func (in *Intent) Claimable(now time.Time) bool {
	switch in.Status {
	case StatusPending:
		return true
	case StatusRetryableFailure:
		return in.NextAttemptAt == nil || !now.Before(*in.NextAttemptAt)
	}
	return false
}
