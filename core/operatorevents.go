package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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
// implement it, and so does OperatorNotifier, which puts the once-per-ID
// ledger, the log line and the metric in front of them. Every producer (the
// notifier stream handler, the gate's breaker) publishes to an
// OperatorNotifier. A subscriber may be called more than once for one event
// ID (after a crash between publishing and recording it): the ID is what
// lets subscribers deduplicate.
type OperatorEvents interface {
	Publish(ctx context.Context, ev OperatorEvent) error
}

// ClaimResult is what the ledger says about an event ID.
type ClaimResult int

const (
	// ClaimedToPublish: this caller holds the claim and must publish, then
	// MarkPublished (or Release on a publish error).
	ClaimedToPublish ClaimResult = iota
	// AlreadyPublished: another delivery finished; nothing to do.
	AlreadyPublished
	// HeldByOther: another worker holds a live claim; try again later (its
	// lease expires if it crashed, and then the next try or the sweeper
	// takes over).
	HeldByOther
)

// OperatorEventLedger records which operator events were published, with a
// conditional write on the event ID (adapters/dynamo implements it). A store
// may write an event's record as an unpublished claim whose lease is over in
// the same write as the change it reports (adapters/dynamo.Gates: a breaker
// opening or closing), so the event is stored once and is redriven if the
// producer dies before publishing it.
type OperatorEventLedger interface {
	// Claim records ev as being published by owner until `until`, if no
	// record exists or the existing claim's lease has expired unpublished.
	Claim(ctx context.Context, ev OperatorEvent, owner string, now, until time.Time) (ClaimResult, error)
	// MarkPublished completes owner's claim.
	MarkPublished(ctx context.Context, ev OperatorEvent, owner string, now time.Time) error
	// Release gives up owner's claim at once (publishing failed), so the next
	// try need not wait for the lease.
	Release(ctx context.Context, ev OperatorEvent, owner string, now time.Time) error
	// Unpublished lists claims whose lease ran out before they were published
	// (a crash between claim and publish), oldest first.
	Unpublished(ctx context.Context, now time.Time, limit int) ([]OperatorEvent, error)
}

// OperatorNotifier publishes each operator event ID once: claim in the ledger
// (conditional write), log and count it, hand it to the subscriber, mark it
// published. What that guarantees:
//   - one event ID per episode (OperatorEventFor derives it from the intent,
//     BreakerEvent from the gate's move, which only one worker wins);
//   - duplicate or reordered stream records, and concurrent workers, publish
//     an ID at most once while the ledger says it is published or claimed;
//   - a crash after the claim and before publishing leaves an unpublished
//     claim that the next stream retry (after the lease) or the sweeper
//     (Redrive) publishes: nothing is lost;
//   - a crash after publishing and before MarkPublished re-publishes the
//     same ID once more: subscribers deduplicate by ID (webhook-id header,
//     SNS message attribute eventId). No exactly-once claim across SNS or
//     HTTP is made.
type OperatorNotifier struct {
	Ledger OperatorEventLedger
	// Subscriber receives each event; nil: none is configured, and the
	// events are only logged and counted (and recorded once per episode).
	Subscriber OperatorEvents
	// Metrics counts each event under its type with "_" for "." (the
	// stack's alarm watches breaker_opened); Log writes it as a warning.
	Metrics Metrics
	Log     *slog.Logger
	Clock   Clock
	Owner   string
	// Lease bounds how long a claim blocks other deliveries (default 30s);
	// it must exceed the subscriber's timeout.
	Lease time.Duration
}

var _ OperatorEvents = (*OperatorNotifier)(nil)

// ErrOperatorEventHeld: another worker holds the event's claim; retry later.
var ErrOperatorEventHeld = errors.New("operator event is being published by another worker")

// Publish publishes ev unless its ID was already published. A nil error
// means the event is published (now or before); ErrOperatorEventHeld means
// retry.
func (n *OperatorNotifier) Publish(ctx context.Context, ev OperatorEvent) error {
	if ev.ID == "" {
		return errors.New("operator event without an id")
	}
	now := n.clock().Now()
	res, err := n.Ledger.Claim(ctx, ev, n.Owner, now, now.Add(n.lease()))
	if err != nil {
		return fmt.Errorf("claim operator event %s: %w", ev.ID, err)
	}
	switch res {
	case AlreadyPublished:
		return nil
	case HeldByOther:
		return fmt.Errorf("%w: %s", ErrOperatorEventHeld, ev.ID)
	}
	return n.publish(ctx, ev)
}

func (n *OperatorNotifier) publish(ctx context.Context, ev OperatorEvent) error {
	if n.Log != nil {
		n.Log.WarnContext(ctx, "operator event", "event", ev.ID, "type", ev.Type, "provider", ev.Provider,
			"account", ev.Account, "intent", ev.IntentID, "bot", ev.Bot, "at", ev.At, "detail", ev.Reason)
	}
	if n.Metrics != nil {
		n.Metrics.Count(strings.ReplaceAll(ev.Type, ".", "_"), 1)
	}
	if n.Subscriber != nil {
		if err := n.Subscriber.Publish(ctx, ev); err != nil {
			if rerr := n.Ledger.Release(ctx, ev, n.Owner, n.clock().Now()); rerr != nil {
				err = errors.Join(err, rerr)
			}
			return fmt.Errorf("publish operator event %s: %w", ev.ID, err)
		}
	}
	if err := n.Ledger.MarkPublished(ctx, ev, n.Owner, n.clock().Now()); err != nil {
		return fmt.Errorf("mark operator event %s published: %w", ev.ID, err)
	}
	return nil
}

// Redrive publishes claims a crash left unpublished (the sweeper calls it).
func (n *OperatorNotifier) Redrive(ctx context.Context, limit int) (int, error) {
	now := n.clock().Now()
	evs, err := n.Ledger.Unpublished(ctx, now, limit)
	if err != nil {
		return 0, err
	}
	done := 0
	var errs []error
	for _, ev := range evs {
		if err := n.Publish(ctx, ev); err != nil && !errors.Is(err, ErrOperatorEventHeld) {
			errs = append(errs, err)
			continue
		}
		done++
	}
	return done, errors.Join(errs...)
}

func (n *OperatorNotifier) clock() Clock {
	if n.Clock == nil {
		return SystemClock
	}
	return n.Clock
}

func (n *OperatorNotifier) lease() time.Duration {
	if n.Lease <= 0 {
		return 30 * time.Second
	}
	return n.Lease
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

// OperatorEventFor decides whether a change of an intent (old may be nil on
// an insert) is an episode an operator must be told about: the intent waits
// in needs-human (one event per episode), or it ended failed, or expired
// after at least one attempt. Safe on duplicate and reordered records: the
// event ID depends only on the episode, never on which record carried it.
func OperatorEventFor(old, cur *Intent) (OperatorEvent, bool) {
	if cur == nil {
		return OperatorEvent{}, false
	}
	ev := OperatorEvent{IntentID: cur.ID, Bot: cur.Bot, Provider: cur.Provider, Account: cur.Account,
		Action: cur.Action, Reason: cur.StatusReason, Attempts: cur.AttemptCount}
	entered := old == nil || old.Status != cur.Status
	switch cur.Status {
	case StatusNeedsHuman:
		ev.Type = OperatorEventNeedsHuman
		ev.ID = cur.ID + ".needs-human." + strconv.Itoa(NeedsHumanEpisode(cur))
		ev.At = NeedsHumanSince(cur)
	case StatusFailed:
		ev.Type = OperatorEventFailed
		ev.ID = cur.ID + ".failed"
		ev.At = cur.UpdatedAt
	case StatusExpired:
		if cur.AttemptCount == 0 {
			return OperatorEvent{}, false // expired before any attempt: nothing was tried, nobody to wake
		}
		ev.Type = OperatorEventExpired
		ev.ID = cur.ID + ".expired"
		ev.At = cur.UpdatedAt
	default:
		return OperatorEvent{}, false
	}
	if entered && cur.Status == StatusNeedsHuman {
		ev.At = cur.UpdatedAt // the transition record knows the exact moment
	}
	return ev, true
}

// IntentFilter narrows the operators' queue (and bulk decisions): each set
// field must match exactly; MinWaiting keeps intents that have waited at
// least that long.
type IntentFilter struct {
	Provider   string
	Account    string
	Bot        string
	MinWaiting time.Duration
}

// WaitingSince is when an intent started waiting in its current status: for
// needs-human the start of the episode, otherwise its last change.
func WaitingSince(in *Intent) time.Time {
	if in.Status == StatusNeedsHuman {
		return NeedsHumanSince(in)
	}
	return in.UpdatedAt
}

// Matches decides whether in passes the filter at now.
func (f IntentFilter) Matches(in *Intent, now time.Time) bool {
	switch {
	case f.Provider != "" && in.Provider != f.Provider,
		f.Account != "" && in.Account != f.Account,
		f.Bot != "" && in.Bot != f.Bot:
		return false
	case f.MinWaiting > 0 && now.Sub(WaitingSince(in)) < f.MinWaiting:
		return false
	}
	return true
}

// BreakerEvent is the operator event of an account's circuit breaker opening
// or closing (kind EventBreakerOpened or EventBreakerClosed), with an id
// stable for that move: the gate's conditional write lets one worker make
// each move, and that worker publishes it.
func BreakerEvent(kind, provider, account string, at time.Time, detail string) OperatorEvent {
	return GateOperatorEvent(gate.BreakerEvent(kind, provider, account, at, detail))
}
