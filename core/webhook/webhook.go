// Package webhook decides what a provider's callback means (provider
// webhooks). It consumes core; the adapters verify and decode callbacks
// into a ProviderEvent and implement its ports (WebhookStore, Inbox).
//
// A provider calls back with facts about messages we sent (an acknowledgement
// with its message id, later delivery and read statuses, an echo of the bot's
// own message as it appears on the channel) and with inbound traffic (a user
// writing to the bot). The first kind is evidence about an existing intent,
// never a new delivery; the second kind wakes the bot through its inbox.
//
// Rules, in one place (the adapters only make them atomic):
//
//   - Every verified event leaves exactly one uniqueness item keyed by
//     (provider, account, event id), written with a conditional put. A replay
//     of an event id changes nothing and is answered 200.
//   - Acknowledgements and statuses bind to the intent named by our identity
//     echoed back (intent id = the Idempotency-Key we sent), or else by the
//     provider's message id through the external-id mapping item. The intent
//     must belong to the webhook's provider and account. Binding appends one
//     "webhook" entry to the intent's append-only history and writes the
//     uniqueness item in the same transaction, so a crash can never leave a
//     recorded event without its evidence (or the reverse).
//   - A bound acknowledgement or status is provider evidence of the effect:
//     unknown-outcome -> succeeded, and needs-human -> succeeded (see
//     applyProviderEvent). While the intent is in flight the evidence is only
//     recorded; the dispatcher's own outcome write then honours it (see
//     decide), so the final state does not depend on which arrives first.
//   - Delivery statuses only move forward (sent < delivered < read). An event
//     that moves nothing forward and changes no status is recorded on its
//     uniqueness item only, so an intent's history stays small and bounded.
//   - Failure statuses (EventFailure: Twilio failed/undelivered, a call
//     busy/no-answer, a bounce) bind the same way and are appended as
//     evidence for the person deciding; they never change a status, because
//     they do not prove that nothing happened.
//   - Echoes never change an intent's status. An echo (or any event) that
//     matches no intent of the account is recorded as unresolved, with the
//     raw event, for operators; it wakes nobody and causes no send.
//   - Inbound messages are forwarded to the inbox queue once per event id:
//     the uniqueness item is a claim with a short lease (state "forwarding")
//     and becomes "forwarded" after the send. A redelivery that finds an
//     expired claim (the previous handler crashed between claim and send, or
//     between send and mark) takes it over and forwards. So the crash between
//     dedupe and send loses nothing; the crash between send and mark may
//     forward a second copy, which carries the same event id for the
//     consumer to drop (on a FIFO inbox SQS drops it itself).
package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/botharness/outbox/core"
)

// Event uniqueness item states.
const (
	EventBound      = "bound"      // evidence attached to an intent
	EventUnresolved = "unresolved" // matched no intent: kept for operators
	EventIgnored    = "ignored"    // a type we do not act on
	EventForwarding = "forwarding" // inbound: claimed, being sent to the inbox
	EventForwarded  = "forwarded"  // inbound: in the inbox queue
)

// EventRecord is the uniqueness item of one provider event.
type EventRecord struct {
	Provider   string     `json:"provider"`
	Account    string     `json:"account"`
	EventID    string     `json:"eventId"`
	Kind       EventKind  `json:"kind"`
	Type       string     `json:"type,omitempty"`
	State      string     `json:"state"`
	IntentID   string     `json:"intentId,omitempty"`
	MessageID  string     `json:"messageId,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	ReceivedAt time.Time  `json:"receivedAt"`
	BodyHash   string     `json:"bodyHash,omitempty"`
	Raw        string     `json:"raw,omitempty"` // unresolved records only
	ClaimUntil *time.Time `json:"claimUntil,omitempty"`
}

// InboundClaim is the answer of WebhookStore.ClaimInbound.
type InboundClaim int

const (
	ClaimNew       InboundClaim = iota // first delivery: forward it
	ClaimTakenOver                     // an earlier handler's claim expired: forward it
	ClaimBusy                          // another handler holds a live claim
	ClaimDone                          // already forwarded (or not an inbound event)
)

// BindPlan is what a bind decided to write besides the uniqueness item.
type BindPlan struct {
	// Changed: write the intent (one entry appended, maybe a status change).
	Changed bool
	// MapMessage: also write the external-id -> intent mapping item.
	MapMessage bool
}

// Errors of the webhook store.
var (
	ErrDuplicateEvent  = errors.New("provider event already recorded")
	ErrMappingTaken    = errors.New("external message id is mapped to another intent")
	ErrEventInProgress = errors.New("another delivery of this event is being processed")
)

// InboxMessage is what the bot's inbox queue receives for an inbound event.
type InboxMessage struct {
	EventID    string          `json:"eventId"`
	Provider   string          `json:"provider"`
	Account    string          `json:"account"`
	Type       string          `json:"type"`
	OccurredAt *time.Time      `json:"occurredAt,omitempty"`
	ReceivedAt time.Time       `json:"receivedAt"`
	Event      json.RawMessage `json:"event"`
}

// WebhookResult is the answer to one delivery.
type WebhookResult struct {
	// Result is bound, duplicate, unresolved, forwarded or ignored.
	Result   string      `json:"result"`
	EventID  string      `json:"eventId"`
	IntentID string      `json:"intentId,omitempty"`
	Status   core.Status `json:"status,omitempty"`
	Reason   string      `json:"reason,omitempty"`
}

// Webhook results.
const (
	WebhookBound      = "bound"
	WebhookDuplicate  = "duplicate"
	WebhookUnresolved = "unresolved"
	WebhookForwarded  = "forwarded"
	WebhookIgnored    = "ignored"
)

// Webhooks applies verified provider events.
type Webhooks struct {
	Store   WebhookStore
	Intents core.IntentStore
	Inbox   Inbox
	Clock   core.Clock
	// ClaimFor is how long an inbound claim protects a forward in progress;
	// it must exceed the webhook function's timeout. Default 30s.
	ClaimFor time.Duration
	Metrics  core.Metrics
	Log      *slog.Logger
	// Tracer continues the bound intent's trace (nil: no spans).
	Tracer core.Tracer
}

func (w *Webhooks) log() *slog.Logger { return cmp.Or(w.Log, slog.Default()) }

type noMetrics struct{}

func (noMetrics) Count(string, int) {}

func (w *Webhooks) metrics() core.Metrics {
	if w.Metrics == nil {
		return noMetrics{}
	}
	return w.Metrics
}

func (w *Webhooks) now() time.Time {
	if w.Clock == nil {
		return core.SystemClock.Now()
	}
	return w.Clock.Now()
}

// Handle applies one verified event. It returns ErrEventInProgress when the
// provider should deliver again later, a *ValidationError for a malformed
// event, and other errors when storage failed (the provider retries; nothing
// half-done is left behind).
func (w *Webhooks) Handle(ctx context.Context, ev ProviderEvent) (WebhookResult, error) {
	if err := ev.Validate(); err != nil {
		return WebhookResult{}, err
	}
	res := WebhookResult{EventID: ev.EventID}
	log := w.log().With("provider", ev.Provider, "account", ev.Account, "eventId", ev.EventID, "kind", string(ev.Kind))
	// Fast path for replays: one read, no write. Uniqueness itself is the
	// conditional write below, so a race between two deliveries is safe.
	seen, err := w.Store.SeenEvent(ctx, ev.Provider, ev.Account, ev.EventID)
	if err != nil {
		return res, err
	}
	if seen != nil && seen.State != EventForwarding {
		return w.duplicate(res, seen, log), nil
	}
	now := w.now()
	rec := EventRecord{
		Provider: ev.Provider, Account: ev.Account, EventID: ev.EventID, Kind: ev.Kind, Type: ev.Type,
		MessageID: ev.MessageID, ReceivedAt: now, BodyHash: ev.BodyHash,
	}
	switch ev.Kind {
	case EventInbound:
		return w.forward(ctx, ev, rec, res, log)
	case EventOther:
		rec.State, rec.Reason = EventIgnored, "event type not acted upon"
		if err := w.Store.RecordEvent(ctx, rec); errors.Is(err, ErrDuplicateEvent) {
			return w.duplicate(res, nil, log), nil
		} else if err != nil {
			return res, err
		}
		res.Result = WebhookIgnored
		log.InfoContext(ctx, "webhook event ignored", "type", ev.Type)
		return res, nil
	}
	return w.bind(ctx, ev, rec, res, log)
}

func (w *Webhooks) duplicate(res WebhookResult, seen *EventRecord, log *slog.Logger) WebhookResult {
	res.Result = WebhookDuplicate
	if seen != nil {
		res.IntentID = seen.IntentID
	}
	w.metrics().Count("WebhookDuplicate", 1)
	log.Debug("duplicate webhook event")
	return res
}

// bind attaches acknowledgements, statuses and echoes to their intent: the
// one named by our identity if the event carries it and it belongs to this
// provider account, else the one the provider's message id is mapped to.
// Anything else is recorded unresolved.
func (w *Webhooks) bind(ctx context.Context, ev ProviderEvent, rec EventRecord, res WebhookResult, log *slog.Logger) (WebhookResult, error) {
	reason := "no intent is bound to this provider message id"
	if ev.IntentID != "" {
		out, ok, err := w.bindTo(ctx, ev, rec, res, ev.IntentID, "identity", log)
		if err != nil || ok {
			return out, err
		}
		// An identity we do not know (or another account's): fall back to
		// the message id, which is scoped to the account.
		reason = "the event names no intent of this provider account"
	}
	if ev.MessageID != "" {
		id, err := w.Store.IntentForMessage(ctx, ev.Provider, ev.Account, ev.MessageID)
		switch {
		case err == nil:
			out, ok, err := w.bindTo(ctx, ev, rec, res, id, "external-id", log)
			if err != nil || ok {
				return out, err
			}
		case !errors.Is(err, core.ErrNotFound):
			return res, err
		}
	}
	return w.unresolved(ctx, ev, rec, res, reason, log)
}

var errForeignIntent = errors.New("intent belongs to another provider account")

// bindTo binds the event to intent id. ok is false when that intent does not
// exist for this provider account (nothing was written).
func (w *Webhooks) bindTo(ctx context.Context, ev ProviderEvent, rec EventRecord, res WebhookResult, id, matchedBy string, log *slog.Logger) (WebhookResult, bool, error) {
	rec.State, rec.IntentID = EventBound, id
	mapping := true
	for {
		var decided bindDecision
		stored, err := w.Store.BindEvent(ctx, rec, func(in *core.Intent) (BindPlan, error) {
			if in.Provider != ev.Provider || in.Account != ev.Account {
				return BindPlan{}, errForeignIntent
			}
			decided = applyProviderEvent(in, ev, matchedBy, w.now())
			if !mapping {
				decided.plan.MapMessage = false
			}
			return decided.plan, nil
		})
		switch {
		case errors.Is(err, ErrDuplicateEvent):
			return w.duplicate(res, nil, log), true, nil
		case errors.Is(err, ErrMappingTaken) && mapping:
			// The provider reused a message id across intents: keep the
			// first mapping, still record this evidence.
			log.WarnContext(ctx, "external message id already mapped to another intent", "messageId", ev.MessageID, "intent", id)
			w.metrics().Count("WebhookMappingConflict", 1)
			mapping = false
			continue
		case errors.Is(err, core.ErrNotFound), errors.Is(err, errForeignIntent):
			return res, false, nil
		case err != nil:
			return res, false, err
		}
		res.Result, res.IntentID, res.Status = WebhookBound, stored.ID, stored.Status
		if decided.resolved != "" {
			res.Reason = decided.resolved
			w.metrics().Count("WebhookResolved", 1)
		}
		if decided.contradicts {
			log.WarnContext(ctx, "provider evidence for an intent in a terminal non-success status", "intent", stored.ID, "status", string(stored.Status))
			w.metrics().Count("WebhookContradictsStatus", 1)
		}
		if decided.mismatch {
			log.WarnContext(ctx, "provider reports another message id for the intent: possible duplicate effect",
				"intent", stored.ID, "externalId", stored.ExternalID, "messageId", ev.MessageID)
			w.metrics().Count("WebhookExternalIdMismatch", 1)
		}
		w.metrics().Count("WebhookBound", 1)
		// The binding continues the intent's trace (known only now).
		if w.Tracer != nil {
			_, span := w.Tracer.Start(ctx, "outbox.webhook", stored.TraceParent, webhookAttrs(stored, ev))
			span.SetOutcome(string(stored.Status))
			span.End()
		}
		log.InfoContext(ctx, "webhook evidence bound", "intent", stored.ID, "status", string(stored.Status),
			"matchedBy", matchedBy, "appended", decided.plan.Changed)
		return res, true, nil
	}
}

func (w *Webhooks) unresolved(ctx context.Context, ev ProviderEvent, rec EventRecord, res WebhookResult, reason string, log *slog.Logger) (WebhookResult, error) {
	rec.State, rec.IntentID, rec.Reason, rec.Raw = EventUnresolved, "", reason, string(ev.Raw)
	if err := w.Store.RecordEvent(ctx, rec); errors.Is(err, ErrDuplicateEvent) {
		return w.duplicate(res, nil, log), nil
	} else if err != nil {
		return res, err
	}
	res.Result, res.Reason = WebhookUnresolved, reason
	w.metrics().Count("WebhookUnresolved", 1)
	log.InfoContext(ctx, "webhook event unresolved; recorded for operators, nobody woken", "messageId", ev.MessageID, "reason", reason)
	return res, nil
}

// forward sends an inbound event to the inbox exactly once per event id,
// barring a crash between the send and the mark (see the package comment).
func (w *Webhooks) forward(ctx context.Context, ev ProviderEvent, rec EventRecord, res WebhookResult, log *slog.Logger) (WebhookResult, error) {
	now := w.now()
	claimFor := w.ClaimFor
	if claimFor <= 0 {
		claimFor = 30 * time.Second
	}
	rec.State = EventForwarding
	until := now.Add(claimFor)
	rec.ClaimUntil = &until
	claim, err := w.Store.ClaimInbound(ctx, rec, now, until)
	if err != nil {
		return res, err
	}
	switch claim {
	case ClaimDone:
		return w.duplicate(res, nil, log), nil
	case ClaimBusy:
		return res, ErrEventInProgress
	case ClaimTakenOver:
		log.WarnContext(ctx, "taking over an expired inbound claim: an earlier delivery did not finish")
		w.metrics().Count("WebhookInboundTakeover", 1)
	}
	msg := InboxMessage{EventID: ev.EventID, Provider: ev.Provider, Account: ev.Account, Type: ev.Type, ReceivedAt: now, Event: ev.Inbound}
	if !ev.OccurredAt.IsZero() {
		t := ev.OccurredAt
		msg.OccurredAt = &t
	}
	if err := w.Inbox.Forward(ctx, msg); err != nil {
		// Not forwarded: the claim expires and the provider's redelivery forwards.
		return res, fmt.Errorf("forward %s to the inbox: %w", ev.EventID, err)
	}
	if err := w.Store.MarkForwarded(ctx, rec, w.now()); err != nil {
		// It is in the inbox; answering an error would make the provider
		// redeliver and forward it again.
		log.ErrorContext(ctx, "forwarded, but marking the event failed; a redelivery after the claim expires may forward a copy", "err", err.Error())
	}
	res.Result = WebhookForwarded
	w.metrics().Count("WebhookForwarded", 1)
	log.InfoContext(ctx, "inbound event forwarded to the inbox")
	return res, nil
}

func webhookAttrs(in *core.Intent, ev ProviderEvent) map[string]string {
	a := core.IntentSpanAttrs(in)
	a["outbox.webhook_event"] = ev.EventID
	return a
}

// WebhookStore persists event uniqueness items, the external-id mapping and
// binds evidence to intents. Uniqueness is always a conditional write; reads
// are only a fast path.
type WebhookStore interface {
	// SeenEvent returns the event's uniqueness item, or nil if there is none.
	SeenEvent(ctx context.Context, provider, account, eventID string) (*EventRecord, error)
	// RecordEvent puts rec if no item exists for its event id; else ErrDuplicateEvent.
	RecordEvent(ctx context.Context, rec EventRecord) error
	// BindEvent reads intent rec.IntentID, lets mutate decide, and writes in
	// one transaction: rec (only if absent, else ErrDuplicateEvent), the intent
	// if plan.Changed (only if its version is unchanged; a lost race re-reads
	// and calls mutate again) and, if plan.MapMessage, the mapping
	// rec.MessageID -> rec.IntentID (only if absent or the same intent, else
	// ErrMappingTaken). It returns the intent as stored.
	BindEvent(ctx context.Context, rec EventRecord, mutate func(*core.Intent) (BindPlan, error)) (*core.Intent, error)
	// IntentForMessage resolves a provider message id through the mapping; ErrNotFound if none.
	IntentForMessage(ctx context.Context, provider, account, messageID string) (string, error)
	// ClaimInbound creates rec in state forwarding with a claim until until,
	// or takes over an expired claim.
	ClaimInbound(ctx context.Context, rec EventRecord, now, until time.Time) (InboundClaim, error)
	// MarkForwarded moves a forwarding item to forwarded.
	MarkForwarded(ctx context.Context, rec EventRecord, now time.Time) error
}

// Inbox wakes the bot: it carries inbound events to the bot's inbox queue.
type Inbox interface {
	Forward(ctx context.Context, msg InboxMessage) error
}
