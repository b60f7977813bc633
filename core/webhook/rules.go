// The pure rules of provider webhooks: what an event is, whether it is valid,
// and what it does to an intent (applyProviderEvent). Webhooks (webhook.go)
// orchestrates them against the stores.

package webhook

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/botharness/outbox/core"
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
			return &core.ValidationError{Code: core.CodeInvalidField, Field: field, Message: field + " is required"}
		}
		if len(v) > maxIdentLen {
			return &core.ValidationError{Code: core.CodeInvalidField, Field: field, Message: fmt.Sprintf("%s must be at most %d bytes", field, maxIdentLen)}
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
			ev.Status = core.DeliverySent
		}
		fallthrough
	case EventStatus:
		if core.DeliveryRank(ev.Status) == 0 {
			return &core.ValidationError{Code: core.CodeInvalidField, Field: "status", Message: "status must be sent, delivered or read"}
		}
	case EventEcho, EventOther, EventFailure:
	case EventInbound:
		if len(ev.Inbound) == 0 || !json.Valid(ev.Inbound) {
			return &core.ValidationError{Code: core.CodeInvalidField, Field: "data", Message: "an inbound event needs a JSON body to forward"}
		}
	default:
		return &core.ValidationError{Code: core.CodeInvalidField, Field: "type", Message: "unknown event kind"}
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
func applyProviderEvent(in *core.Intent, ev ProviderEvent, matchedBy string, now time.Time) bindDecision {
	var d bindDecision
	for _, a := range in.Attempts {
		if a.Trigger == core.TriggerWebhook && a.Evidence.Extra["eventId"] == ev.EventID {
			return d // already applied (the uniqueness item makes this unreachable)
		}
	}
	proves := ev.Kind == EventAck || ev.Kind == EventStatus
	_, hadProof := core.ProviderAcknowledged(in)
	firstForMessage := ev.MessageID != ""
	hadEcho := in.History != nil && in.History.Echo
	for _, a := range in.Attempts {
		if a.Trigger != core.TriggerWebhook {
			continue
		}
		if a.ExternalID == ev.MessageID {
			firstForMessage = false
		}
		if a.Result == core.ResultEcho {
			hadEcho = true
		}
	}
	d.mismatch = in.ExternalID != "" && ev.MessageID != "" && in.ExternalID != ev.MessageID
	forward := proves && core.DeliveryRank(ev.Status) > core.DeliveryRank(core.DeliveryStatus(in))

	var to core.Status
	if proves {
		switch in.Status {
		case core.StatusUnknownOutcome, core.StatusNeedsHuman:
			// Provider evidence proves the effect, so a needs-human intent
			// becomes succeeded without a human too (as from unknown-outcome).
			// The episode stays in history: the attempts that led to
			// needs-human, any resolutions or recommendations, and the webhook
			// entry that resolved it.
			to = core.StatusSucceeded
		case core.StatusFailed, core.StatusAbandoned, core.StatusExpired, core.StatusSourceRevised, core.StatusGrantRevoked:
			d.contradicts = !hadProof
		}
	}
	// A failure status is appended once per event (the uniqueness item
	// stops a replay); it never moves the status.
	appendEntry := to != "" || d.mismatch || (proves && (!hadProof || forward)) || (ev.Kind == EventEcho && !hadEcho) || ev.Kind == EventFailure
	if !appendEntry {
		return d
	}
	result := core.ResultEcho
	switch ev.Kind {
	case EventAck:
		result = core.ResultAck
	case EventStatus:
		result = core.ResultStatus
	case EventFailure:
		result = core.ResultFailure
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
	entry := core.Attempt{
		N: in.AttemptCount, Trigger: core.TriggerWebhook, StartedAt: started, EndedAt: now,
		Result: result, ExternalID: ev.MessageID,
		Evidence: core.Evidence{ProviderCode: ev.Status, Detail: "provider webhook " + ev.Type, Extra: extra},
	}
	in.AppendAttempt(entry)
	in.UpdatedAt = now
	if proves && in.ExternalID == "" && ev.MessageID != "" {
		in.ExternalID = ev.MessageID
	}
	if to != "" {
		from := in.Status
		reason := fmt.Sprintf("provider %s (webhook %s) proves the effect", ev.Kind, ev.EventID)
		if from == core.StatusNeedsHuman {
			reason += "; resolved without a human decision, the episode stays in history"
		}
		if err := in.MoveTo(to, reason, now); err == nil {
			d.resolved = fmt.Sprintf("%s -> %s by provider evidence", from, to)
		}
	}
	d.plan = BindPlan{Changed: true, MapMessage: proves && firstForMessage && !d.mismatch}
	return d
}
