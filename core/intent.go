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
	ID       string `json:"id" dynamodbav:"id"`
	Revision int64  `json:"revision" dynamodbav:"revision"`
}

// GrantRef is the grant snapshot the intent was accepted under.
type GrantRef struct {
	ID      string `json:"id" dynamodbav:"id"`
	Version int64  `json:"version" dynamodbav:"version"`
}

// Lease marks an in-flight claim: who holds attempt N and until when.
type Lease struct {
	Owner string    `json:"owner" dynamodbav:"owner"`
	Until time.Time `json:"until" dynamodbav:"until"`
}

// Attempt is one immutable entry of attempt history. Entries are only ever
// appended, never edited: a crash before the outcome is recorded leaves a
// lease, and the sweeper appends the entry that says so.
type Attempt struct {
	N          int        `json:"n" dynamodbav:"n"`
	Trigger    string     `json:"trigger" dynamodbav:"trigger"`
	StartedAt  time.Time  `json:"startedAt" dynamodbav:"startedAt"`
	EndedAt    time.Time  `json:"endedAt" dynamodbav:"endedAt"`
	Result     string     `json:"result" dynamodbav:"result"` // "succeeded" or an ErrorClass or a revalidation outcome
	ExternalID string     `json:"externalId,omitempty" dynamodbav:"externalId,omitempty"`
	Evidence   Evidence   `json:"evidence" dynamodbav:"evidence"`
	Checks     *Checks    `json:"checks,omitempty" dynamodbav:"checks,omitempty"`
	NextDueAt  *time.Time `json:"nextDueAt,omitempty" dynamodbav:"nextDueAt,omitempty"`
}

// Checks records what revalidation saw before an attempt.
type Checks struct {
	Result         string `json:"result" dynamodbav:"result"`
	Reason         string `json:"reason,omitempty" dynamodbav:"reason,omitempty"`
	SourceRevision int64  `json:"sourceRevision,omitempty" dynamodbav:"sourceRevision,omitempty"`
	GrantVersion   int64  `json:"grantVersion,omitempty" dynamodbav:"grantVersion,omitempty"`
}

// Resolution is a human decision (or an orchestrator's recommendation) about
// an intent that needed one. Append-only, like attempts.
type Resolution struct {
	At        time.Time `json:"at" dynamodbav:"at"`
	By        string    `json:"by" dynamodbav:"by"`
	ByKind    string    `json:"byKind" dynamodbav:"byKind"`
	Decision  string    `json:"decision" dynamodbav:"decision"`
	Reason    string    `json:"reason,omitempty" dynamodbav:"reason,omitempty"`
	Recommend bool      `json:"recommendationOnly,omitempty" dynamodbav:"recommendationOnly,omitempty"`
	// Key is the Idempotency-Key of the request that made the decision.
	Key string `json:"-" dynamodbav:"key,omitempty"`
	// DuplicateRiskAccepted: a retry the provider cannot deduplicate.
	DuplicateRiskAccepted bool `json:"duplicateRiskAccepted,omitempty" dynamodbav:"duplicateRiskAccepted,omitempty"`
}

// Intent is one committed side effect a bot wants done.
type Intent struct {
	ID             string          `json:"id" dynamodbav:"id"`
	Bot            string          `json:"bot" dynamodbav:"bot"`
	IdempotencyKey string          `json:"idempotencyKey" dynamodbav:"idempotencyKey"`
	Kind           Kind            `json:"kind" dynamodbav:"kind"`
	Provider       string          `json:"provider" dynamodbav:"provider"`
	Account        string          `json:"account" dynamodbav:"account"`
	Action         string          `json:"action" dynamodbav:"action"`
	Target         string          `json:"target" dynamodbav:"target"`
	Payload        json.RawMessage `json:"payload" dynamodbav:"payload"`
	PayloadHash    string          `json:"payloadHash" dynamodbav:"payloadHash"`
	RequestHash    string          `json:"requestHash" dynamodbav:"requestHash"`
	Source         *SourceRef      `json:"source,omitempty" dynamodbav:"source,omitempty"`
	Grant          GrantRef        `json:"grant" dynamodbav:"grant"`
	Deadline       *time.Time      `json:"deadline,omitempty" dynamodbav:"deadline,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty" dynamodbav:"metadata,omitempty"`

	Status         Status       `json:"status" dynamodbav:"status"`
	StatusReason   string       `json:"statusReason,omitempty" dynamodbav:"statusReason,omitempty"`
	Version        int64        `json:"version" dynamodbav:"version"`
	CreatedAt      time.Time    `json:"createdAt" dynamodbav:"createdAt"`
	UpdatedAt      time.Time    `json:"updatedAt" dynamodbav:"updatedAt"`
	AttemptCount   int          `json:"attemptCount" dynamodbav:"attemptCount"`
	FirstAttemptAt *time.Time   `json:"firstAttemptAt,omitempty" dynamodbav:"firstAttemptAt,omitempty"`
	Lease          *Lease       `json:"lease,omitempty" dynamodbav:"lease,omitempty"`
	NextAttemptAt  *time.Time   `json:"nextAttemptAt,omitempty" dynamodbav:"nextAttemptAt,omitempty"`
	ExternalID     string       `json:"externalId,omitempty" dynamodbav:"externalId,omitempty"`
	Attempts       []Attempt    `json:"attempts" dynamodbav:"attempts"`
	Resolutions    []Resolution `json:"resolutions,omitempty" dynamodbav:"resolutions,omitempty"`
}

// IntentID derives the intent id from its idempotency identity (bot + key).
// Deriving it (rather than generating one) lets a single conditional put on
// the id decide creation: the same identity always lands on the same item.
func IntentID(bot, key string) string {
	// Length-prefixing the bot name keeps the encoding unambiguous.
	h := sha256.Sum256([]byte(strconv.Itoa(len(bot)) + ":" + bot + key))
	return "it_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:20]))
}

// moveTo moves the intent to status to, if the state machine allows it.
func (in *Intent) moveTo(to Status, reason string, now time.Time) error {
	if err := Transition(in.Status, to); err != nil {
		return err
	}
	in.Status = to
	in.StatusReason = reason
	in.UpdatedAt = now
	if to != StatusInFlight {
		in.Lease = nil
	}
	if to != StatusRetryableFailure {
		in.NextAttemptAt = nil
	}
	return nil
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
