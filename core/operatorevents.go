package core

import (
	"context"
	"time"

	"github.com/botharness/outbox/core/gate"
)

// Operator event types. An operator event tells a person that something now
// waits for them (or gave up) or that a provider account's circuit breaker
// moved; subscribers (email, Slack, a pager) attach to the SNS topic in AWS
// or to the signed webhook locally.
const (
	OperatorEventNeedsHuman = "intent.needs_human"
	OperatorEventFailed     = "intent.failed"
	OperatorEventExpired    = "intent.expired"
	EventBreakerOpened      = gate.EventBreakerOpened
	EventBreakerClosed      = gate.EventBreakerClosed
)

// OperatorEvent is one episode an operator must hear about exactly once. ID
// is stable per episode, so every (re)delivery of the same episode carries the
// same ID and subscribers can drop repeats. Its JSON is the breaker history
// GET .../pace lists (kind, provider, account, at, detail); subscribers get
// adapters/operatorevents.Payload.
type OperatorEvent struct {
	ID   string `json:"-"`
	Type string `json:"kind"`
	// At is when the episode began (entered needs-human, ended failed/expired,
	// the breaker opened or closed).
	At       time.Time `json:"at"`
	IntentID string    `json:"-"`
	Bot      string    `json:"-"`
	Provider string    `json:"provider"`
	Account  string    `json:"account"`
	Action   string    `json:"-"`
	Reason   string    `json:"detail"`
	Attempts int       `json:"-"`
	// Fields carries extra facts for event types without an intent: short
	// strings, never payload bodies.
	Fields map[string]string `json:"-"`
}

// OperatorEvents is the one port operator events go through: the
// subscribers (SNS in AWS, a Standard Webhooks-signed POST locally)
// implement it, and so does notify.OperatorNotifier, which puts the once-per-ID
// ledger, the log line and the metric in front of them. Every producer (the
// notifier stream handler, the gate's breaker) publishes to an
// notify.OperatorNotifier. A subscriber may be called more than once for one event
// ID (after a crash between publishing and recording it): the ID is what
// lets subscribers deduplicate.
type OperatorEvents interface {
	Publish(ctx context.Context, ev OperatorEvent) error
}

// NeedsHumanEpisode numbers the needs-human episodes of an intent: 1 for the
// first time it waits for a person, +1 after each human decision. Every way
// out of needs-human that is not terminal is a human decision (retry,
// reconcile), which appends a resolution, so the number stays the same for
// every stream record of one episode and changes for the next.
func NeedsHumanEpisode(in *Intent) int {
	n := 1
	for _, r := range in.Resolutions {
		if !r.Recommend {
			n++
		}
	}
	return n
}

// NeedsHumanSince is when the current needs-human episode began, as far as the
// intent itself tells: the later of its last attempt's end and its last human
// decision (a recommendation does not restart the wait).
func NeedsHumanSince(in *Intent) time.Time {
	t := in.CreatedAt
	if n := len(in.Attempts); n > 0 && in.Attempts[n-1].EndedAt.After(t) {
		t = in.Attempts[n-1].EndedAt
	}
	for _, r := range in.Resolutions {
		if !r.Recommend && r.At.After(t) {
			t = r.At
		}
	}
	return t
}

// BreakerEvent is the operator event of an account's circuit breaker opening
// or closing (kind EventBreakerOpened or EventBreakerClosed), with an id
// stable for that move: the gate's conditional write lets one worker make
// each move, and that worker publishes it.
func BreakerEvent(kind, provider, account string, at time.Time, detail string) OperatorEvent {
	return GateOperatorEvent(gate.BreakerEvent(kind, provider, account, at, detail))
}

// Redriver publishes operator events whose claim a crash left unpublished
// (notify.OperatorNotifier implements it); the sweeper calls it.
type Redriver interface {
	Redrive(ctx context.Context, limit int) (int, error)
}
