package sandboxprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/adapters/webhooksig"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// Webhook is the sandbox provider's webhook dialect (sandbox/webhooks.go):
// Standard Webhooks signatures, and a body
//
//	{"type": "message.acknowledged", "timestamp": "<RFC 3339>", "data": {
//	   "eventId": "<= webhook-id>", "account": "<= path account>",
//	   "messageId": "sbx_7", "idempotencyKey": "<our key>", "intentId": "<our id>",
//	   "status": "sent|delivered|read", ...}}
//
// with types message.acknowledged, message.status, message.echo (the bot's
// own message seen on the channel) and message.received (a user wrote).
type Webhook struct {
	Name     string // provider name in the route (default "sandbox")
	Verifier *webhooksig.Verifier
}

// Verify checks the Standard Webhooks signature with the account's secrets.
func (s *Webhook) Verify(ctx context.Context, account string, headers map[string]string, body []byte) error {
	name := s.Name
	if name == "" {
		name = "sandbox"
	}
	_, err := s.Verifier.Verify(ctx, name, account, headers, body)
	switch {
	case err == nil:
		return nil
	case isSigError(err):
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, err)
	}
	return err
}

func isSigError(err error) bool {
	for _, e := range []error{webhooksig.ErrMissingHeaders, webhooksig.ErrBadTimestamp, webhooksig.ErrStale, webhooksig.ErrNoSecret, webhooksig.ErrBadSignature} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

type sandboxEvent struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

type sandboxData struct {
	EventID        string `json:"eventId"`
	Account        string `json:"account"`
	MessageID      string `json:"messageId"`
	IdempotencyKey string `json:"idempotencyKey"`
	IntentID       string `json:"intentId"`
	Status         string `json:"status"`
}

// Sandbox event types.
const (
	SandboxAck      = "message.acknowledged"
	SandboxStatus   = "message.status"
	SandboxEcho     = "message.echo"
	SandboxReceived = "message.received"
)

// Decode parses a verified sandbox event.
func (s *Webhook) Decode(account string, headers map[string]string, body []byte) (webhook.ProviderEvent, error) {
	var ev webhook.ProviderEvent
	bad := func(field, msg string) (webhook.ProviderEvent, error) {
		return ev, &core.ValidationError{Code: core.CodeInvalidField, Field: field, Message: msg}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var se sandboxEvent
	if err := dec.Decode(&se); err != nil || dec.More() {
		return ev, &core.ValidationError{Code: core.CodeMalformedJSON, Message: "the body is not one JSON object"}
	}
	if se.Type == "" {
		return bad("type", "type is required")
	}
	if len(se.Data) == 0 || se.Data[0] != '{' {
		return bad("data", "data must be an object")
	}
	var d sandboxData
	if err := json.Unmarshal(se.Data, &d); err != nil {
		return bad("data", "data has a field of the wrong type")
	}
	if d.EventID == "" {
		return bad("data.eventId", "data.eventId is required")
	}
	if d.EventID != plugin.Header(headers, webhooksig.HeaderID) {
		return bad("data.eventId", "data.eventId must equal the webhook-id header")
	}
	if d.Account != account {
		return bad("data.account", "data.account must equal the account in the URL")
	}
	ev = webhook.ProviderEvent{Account: account, EventID: d.EventID, Type: se.Type, MessageID: d.MessageID, Status: d.Status, IntentID: d.IntentID}
	if ev.IntentID == "" {
		ev.IntentID = d.IdempotencyKey // our Idempotency-Key is the intent id
	}
	if se.Timestamp != "" {
		t, err := time.Parse(time.RFC3339Nano, se.Timestamp)
		if err != nil {
			return bad("timestamp", "timestamp must be RFC 3339")
		}
		ev.OccurredAt = t.UTC()
	}
	switch se.Type {
	case SandboxAck:
		ev.Kind = webhook.EventAck
	case SandboxStatus:
		ev.Kind = webhook.EventStatus
		switch d.Status {
		case "":
			return bad("data.status", "data.status is required")
		case "failed", "undelivered":
			// Evidence for the person deciding, never proof of no effect.
			ev.Kind = webhook.EventFailure
		}
	case SandboxEcho:
		ev.Kind, ev.Status = webhook.EventEcho, ""
	case SandboxReceived:
		ev.Kind, ev.Inbound, ev.IntentID, ev.Status = webhook.EventInbound, se.Data, "", ""
	default:
		ev.Kind = webhook.EventOther
	}
	if (ev.Kind == webhook.EventAck || ev.Kind == webhook.EventStatus || ev.Kind == webhook.EventEcho || ev.Kind == webhook.EventFailure) && ev.MessageID == "" {
		return bad("data.messageId", "data.messageId is required for "+se.Type)
	}
	return ev, nil // core validates the rest
}
