// The pure rules of provider webhooks: what an event is, whether it is valid,
// and what it does to an intent (applyProviderEvent). Webhooks (webhook.go)
// orchestrates them against the stores.
package core

import (
	"encoding/json"
	"fmt"
	"time"
)

// EventKind classifies a provider event.
type EventKind string

const (
	EventAck     EventKind = "acknowledgement" // the provider accepted our message
	EventStatus  EventKind = "status"          // a later delivery status of our message
	EventEcho    EventKind = "echo"            // our own message, reflected back by the channel
	EventInbound EventKind = "inbound"         // someone else wrote to the bot
	// EventFailure: the provider reports that our message failed (Twilio
	// failed/undelivered, a call busy/no-answer/canceled, an email bounce).
	// It is evidence for the person deciding, never proof that nothing
	// happened (the phone may have rung): it is recorded on the intent it
	// names and changes no status.
	EventFailure EventKind = "failure-status"
	EventOther   EventKind = "other" // anything else: recorded and ignored
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
	Status     string    // sent | delivered | read (acknowledgement defaults to sent); a failure status: the provider's own
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
		{"messageId", ev.MessageID, ev.Kind == EventAck || ev.Kind == EventStatus || ev.Kind == EventEcho || ev.Kind == EventFailure},
		{"intentId", ev.IntentID, false}, {"type", ev.Type, false}, {"status", ev.Status, ev.Kind == EventFailure},
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
	case EventEcho, EventOther, EventFailure:
	case EventInbound:
		if len(ev.Inbound) == 0 || !json.Valid(ev.Inbound) {
			return &ValidationError{Code: CodeInvalidField, Field: "data", Message: "an inbound event needs a JSON body to forward"}
		}
	default:
		return &ValidationError{Code: CodeInvalidField, Field: "type", Message: "unknown event kind"}
	}
	return nil
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
	// A failure status is appended once per event (the uniqueness item
	// stops a replay); it never moves the status.
	appendEntry := to != "" || d.mismatch || (proves && (!hadProof || forward)) || (ev.Kind == EventEcho && !hadEcho) || ev.Kind == EventFailure
	if !appendEntry {
		return d
	}
	result := ResultEcho
	switch ev.Kind {
	case EventAck:
		result = ResultAck
	case EventStatus:
		result = ResultStatus
	case EventFailure:
		result = ResultFailure
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
