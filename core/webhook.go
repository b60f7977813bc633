package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Provider webhooks.
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

// EventKind classifies a provider event.
type EventKind string

const (
	EventAck     EventKind = "acknowledgement" // the provider accepted our message
	EventStatus  EventKind = "status"          // a later delivery status of our message
	EventEcho    EventKind = "echo"            // our own message, reflected back by the channel
	EventInbound EventKind = "inbound"         // someone else wrote to the bot
	EventOther   EventKind = "other"           // anything else: recorded and ignored
)

// Delivery statuses, in the only order they may move.
const (
	DeliverySent      = "sent"
	DeliveryDelivered = "delivered"
	DeliveryRead      = "read"
)

// DeliveryRank orders delivery statuses; 0 for anything unknown.
func DeliveryRank(s string) int {
	switch s {
	case DeliverySent:
		return 1
	case DeliveryDelivered:
		return 2
	case DeliveryRead:
		return 3
	}
	return 0
}

// Webhook history entries (Attempt.Trigger / Attempt.Result).
const (
	TriggerWebhook               = "webhook"
	ResultAck      AttemptResult = "provider-ack"
	ResultStatus   AttemptResult = "provider-status"
	ResultEcho     AttemptResult = "provider-echo"
)

// Event uniqueness item states.
const (
	EventBound      = "bound"      // evidence attached to an intent
	EventUnresolved = "unresolved" // matched no intent: kept for operators
	EventIgnored    = "ignored"    // a type we do not act on
	EventForwarding = "forwarding" // inbound: claimed, being sent to the inbox
	EventForwarded  = "forwarded"  // inbound: in the inbox queue
)

// Limits on provider-supplied identifiers (they become key material).
const maxIdentLen = 255

// ProviderEvent is a verified, decoded provider callback. The provider's
// webhook adapter builds it; core decides what it means.
type ProviderEvent struct {
	Provider   string
	Account    string
	EventID    string    // the provider's event id (Standard Webhooks: webhook-id)
	Kind       EventKind // what core does with it
	Type       string    // the provider's own type name, kept as evidence
	OccurredAt time.Time // the provider's timestamp (zero if none)
	MessageID  string    // the provider's (external) message id
	IntentID   string    // our identity echoed back (intent id == Idempotency-Key we sent)
	Status     string    // sent | delivered | read (acknowledgement defaults to sent)
	// Inbound is the event as forwarded to the inbox (EventInbound only).
	Inbound json.RawMessage
	// BodyHash is "sha256:<hex>" of the verified raw body.
	BodyHash string
	// Raw is the verified raw body; kept on unresolved records only.
	Raw []byte
}

// Validate checks what core relies on. Adapters produce friendlier,
// provider-specific errors first; this is the last line.
func (ev *ProviderEvent) Validate() error {
	check := func(field, v string, required bool) error {
		if required && v == "" {
			return &ValidationError{Code: CodeInvalidField, Field: field, Message: field + " is required"}
		}
		if len(v) > maxIdentLen {
			return &ValidationError{Code: CodeInvalidField, Field: field, Message: fmt.Sprintf("%s must be at most %d bytes", field, maxIdentLen)}
		}
		return nil
	}
	for _, c := range []struct {
		field, v string
		req      bool
	}{
		{"provider", ev.Provider, true}, {"account", ev.Account, true}, {"eventId", ev.EventID, true},
		{"messageId", ev.MessageID, ev.Kind == EventAck || ev.Kind == EventStatus || ev.Kind == EventEcho},
		{"intentId", ev.IntentID, false}, {"type", ev.Type, false},
	} {
		if err := check(c.field, c.v, c.req); err != nil {
			return err
		}
	}
	switch ev.Kind {
	case EventAck:
		if ev.Status == "" {
			ev.Status = DeliverySent
		}
		fallthrough
	case EventStatus:
		if DeliveryRank(ev.Status) == 0 {
			return &ValidationError{Code: CodeInvalidField, Field: "status", Message: "status must be sent, delivered or read"}
		}
	case EventEcho, EventOther:
	case EventInbound:
		if len(ev.Inbound) == 0 || !json.Valid(ev.Inbound) {
			return &ValidationError{Code: CodeInvalidField, Field: "data", Message: "an inbound event needs a JSON body to forward"}
		}
	default:
		return &ValidationError{Code: CodeInvalidField, Field: "type", Message: "unknown event kind"}
	}
	return nil
}

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
	BindEvent(ctx context.Context, rec EventRecord, mutate func(*Intent) (BindPlan, error)) (*Intent, error)
	// IntentForMessage resolves a provider message id through the mapping; ErrNotFound if none.
	IntentForMessage(ctx context.Context, provider, account, messageID string) (string, error)
	// ClaimInbound creates rec in state forwarding with a claim until until,
	// or takes over an expired claim.
	ClaimInbound(ctx context.Context, rec EventRecord, now, until time.Time) (InboundClaim, error)
	// MarkForwarded moves a forwarding item to forwarded.
	MarkForwarded(ctx context.Context, rec EventRecord, now time.Time) error
}

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

// Inbox wakes the bot: it carries inbound events to the bot's inbox queue.
type Inbox interface {
	Forward(ctx context.Context, msg InboxMessage) error
}

// WebhookResult is the answer to one delivery.
type WebhookResult struct {
	// Result is bound, duplicate, unresolved, forwarded or ignored.
	Result   string `json:"result"`
	EventID  string `json:"eventId"`
	IntentID string `json:"intentId,omitempty"`
	Status   Status `json:"status,omitempty"`
	Reason   string `json:"reason,omitempty"`
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
	Intents IntentStore
	Inbox   Inbox
	Clock   Clock
	// ClaimFor is how long an inbound claim protects a forward in progress;
	// it must exceed the webhook function's timeout. Default 30s.
	ClaimFor time.Duration
	Metrics  Metrics
	Log      *slog.Logger
}

func (w *Webhooks) log() *slog.Logger {
	if w.Log == nil {
		return slog.Default()
	}
	return w.Log
}

func (w *Webhooks) metrics() Metrics {
	if w.Metrics == nil {
		return noMetrics{}
	}
	return w.Metrics
}

func (w *Webhooks) now() time.Time {
	if w.Clock == nil {
		return SystemClock.Now()
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
		case !errors.Is(err, ErrNotFound):
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
		stored, err := w.Store.BindEvent(ctx, rec, func(in *Intent) (BindPlan, error) {
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
		case errors.Is(err, ErrNotFound), errors.Is(err, errForeignIntent):
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

type bindDecision struct {
	plan        BindPlan
	resolved    string // non-empty: the status change it made
	contradicts bool   // proof of effect for a terminal non-success intent
	mismatch    bool   // a message id other than the one we know
}

// applyProviderEvent decides, purely, what a matched event does to in and
// mutates it accordingly. matchedBy is "identity" or "external-id".
func applyProviderEvent(in *Intent, ev ProviderEvent, matchedBy string, now time.Time) bindDecision {
	var d bindDecision
	for _, a := range in.Attempts {
		if a.Trigger == TriggerWebhook && a.Evidence.Extra["eventId"] == ev.EventID {
			return d // already applied (the uniqueness item makes this unreachable)
		}
	}
	proves := ev.Kind == EventAck || ev.Kind == EventStatus
	_, hadProof := ProviderAcknowledged(in)
	firstForMessage := ev.MessageID != ""
	hadEcho := in.History != nil && in.History.Echo
	for _, a := range in.Attempts {
		if a.Trigger != TriggerWebhook {
			continue
		}
		if a.ExternalID == ev.MessageID {
			firstForMessage = false
		}
		if a.Result == ResultEcho {
			hadEcho = true
		}
	}
	d.mismatch = in.ExternalID != "" && ev.MessageID != "" && in.ExternalID != ev.MessageID
	forward := proves && DeliveryRank(ev.Status) > DeliveryRank(DeliveryStatus(in))

	var to Status
	if proves {
		switch in.Status {
		case StatusUnknownOutcome, StatusNeedsHuman:
			// Provider evidence proves the effect, so a needs-human intent
			// becomes succeeded without a human too (as from unknown-outcome).
			// The episode stays in history: the attempts that led to
			// needs-human, any resolutions or recommendations, and the webhook
			// entry that resolved it.
			to = StatusSucceeded
		case StatusFailed, StatusAbandoned, StatusExpired, StatusSourceRevised, StatusGrantRevoked:
			d.contradicts = !hadProof
		}
	}
	appendEntry := to != "" || d.mismatch || (proves && (!hadProof || forward)) || (ev.Kind == EventEcho && !hadEcho)
	if !appendEntry {
		return d
	}
	result := ResultEcho
	switch ev.Kind {
	case EventAck:
		result = ResultAck
	case EventStatus:
		result = ResultStatus
	}
	started := now
	if !ev.OccurredAt.IsZero() {
		started = ev.OccurredAt.UTC()
	}
	extra := map[string]string{"eventId": ev.EventID, "matchedBy": matchedBy}
	if ev.Type != "" {
		extra["eventType"] = ev.Type
	}
	if d.mismatch {
		extra["knownExternalId"] = in.ExternalID
	}
	entry := Attempt{
		N: in.AttemptCount, Trigger: TriggerWebhook, StartedAt: started, EndedAt: now,
		Result: result, ExternalID: ev.MessageID,
		Evidence: Evidence{ProviderCode: ev.Status, Detail: "provider webhook " + ev.Type, Extra: extra},
	}
	in.appendAttempt(entry)
	in.UpdatedAt = now
	if proves && in.ExternalID == "" && ev.MessageID != "" {
		in.ExternalID = ev.MessageID
	}
	if to != "" {
		from := in.Status
		reason := fmt.Sprintf("provider %s (webhook %s) proves the effect", ev.Kind, ev.EventID)
		if from == StatusNeedsHuman {
			reason += "; resolved without a human decision, the episode stays in history"
		}
		if err := in.moveTo(to, reason, now); err == nil {
			d.resolved = fmt.Sprintf("%s -> %s by provider evidence", from, to)
		}
	}
	d.plan = BindPlan{Changed: true, MapMessage: proves && firstForMessage && !d.mismatch}
	return d
}

// ProviderAcknowledged returns the first webhook entry that proves the
// intent's effect (a matched acknowledgement or status), if any.
func ProviderAcknowledged(in *Intent) (Attempt, bool) {
	if in.History != nil && in.History.Ack != nil {
		return *in.History.Ack, true
	}
	for _, a := range in.Attempts {
		if provesEffect(a) {
			return a, true
		}
	}
	return Attempt{}, false
}

// DeliveryStatus is the furthest delivery status the provider reported for
// the intent ("" if none). It only ever moves forward.
func DeliveryStatus(in *Intent) string {
	best := ""
	if in.History != nil {
		best = in.History.Delivery
	}
	for _, a := range in.Attempts {
		if provesEffect(a) &&
			DeliveryRank(a.Evidence.ProviderCode) > DeliveryRank(best) {
			best = a.Evidence.ProviderCode
		}
	}
	return best
}
