// Package notify decides which intent changes an operator must hear about
// (OperatorEventFor: one event per needs-human episode, a failure, an expiry
// after an attempt) and publishes each operator event ID once
// (OperatorNotifier over the OperatorEventLedger port). The event itself and
// the port producers publish to (core.OperatorEvent, core.OperatorEvents)
// stay in core: the dispatcher's gate publishes breaker moves through them.
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/botharness/outbox/core"
)

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
	Claim(ctx context.Context, ev core.OperatorEvent, owner string, now, until time.Time) (ClaimResult, error)
	// MarkPublished completes owner's claim.
	MarkPublished(ctx context.Context, ev core.OperatorEvent, owner string, now time.Time) error
	// Release gives up owner's claim at once (publishing failed), so the next
	// try need not wait for the lease.
	Release(ctx context.Context, ev core.OperatorEvent, owner string, now time.Time) error
	// Unpublished lists claims whose lease ran out before they were published
	// (a crash between claim and publish), oldest first.
	Unpublished(ctx context.Context, now time.Time, limit int) ([]core.OperatorEvent, error)
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
	Subscriber core.OperatorEvents
	// Metrics counts each event under its type with "_" for "." (the
	// stack's alarm watches breaker_opened); Log writes it as a warning.
	Metrics core.Metrics
	Log     *slog.Logger
	Clock   core.Clock
	Owner   string
	// Lease bounds how long a claim blocks other deliveries (default 30s);
	// it must exceed the subscriber's timeout.
	Lease time.Duration
}

var _ core.OperatorEvents = (*OperatorNotifier)(nil)

// ErrOperatorEventHeld: another worker holds the event's claim; retry later.
var ErrOperatorEventHeld = errors.New("operator event is being published by another worker")

// Publish publishes ev unless its ID was already published. A nil error
// means the event is published (now or before); ErrOperatorEventHeld means
// retry.
func (n *OperatorNotifier) Publish(ctx context.Context, ev core.OperatorEvent) error {
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

func (n *OperatorNotifier) publish(ctx context.Context, ev core.OperatorEvent) error {
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

func (n *OperatorNotifier) clock() core.Clock {
	if n.Clock == nil {
		return core.SystemClock
	}
	return n.Clock
}

func (n *OperatorNotifier) lease() time.Duration {
	if n.Lease <= 0 {
		return 30 * time.Second
	}
	return n.Lease
}

// OperatorEventFor decides whether a change of an intent (old may be nil on
// an insert) is an episode an operator must be told about: the intent waits
// in needs-human (one event per episode), or it ended failed, or expired
// after at least one attempt. Safe on duplicate and reordered records: the
// event ID depends only on the episode, never on which record carried it.
func OperatorEventFor(old, cur *core.Intent) (core.OperatorEvent, bool) {
	if cur == nil {
		return core.OperatorEvent{}, false
	}
	ev := core.OperatorEvent{IntentID: cur.ID, Bot: cur.Bot, Provider: cur.Provider, Account: cur.Account,
		Action: cur.Action, Reason: cur.StatusReason, Attempts: cur.AttemptCount}
	entered := old == nil || old.Status != cur.Status
	switch cur.Status {
	case core.StatusNeedsHuman:
		ev.Type = core.OperatorEventNeedsHuman
		ev.ID = cur.ID + ".needs-human." + strconv.Itoa(core.NeedsHumanEpisode(cur))
		ev.At = core.NeedsHumanSince(cur)
	case core.StatusFailed:
		ev.Type = core.OperatorEventFailed
		ev.ID = cur.ID + ".failed"
		ev.At = cur.UpdatedAt
	case core.StatusExpired:
		if cur.AttemptCount == 0 {
			return core.OperatorEvent{}, false // expired before any attempt: nothing was tried, nobody to wake
		}
		ev.Type = core.OperatorEventExpired
		ev.ID = cur.ID + ".expired"
		ev.At = cur.UpdatedAt
	default:
		return core.OperatorEvent{}, false
	}
	if entered && cur.Status == core.StatusNeedsHuman {
		ev.At = cur.UpdatedAt // the transition record knows the exact moment
	}
	return ev, true
}
