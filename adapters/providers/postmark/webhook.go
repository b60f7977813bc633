package postmark

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// ErrBadCredentials: the webhook's basic-auth credentials are missing or wrong.
var ErrBadCredentials = errors.New("postmark webhook: basic-auth credentials missing or wrong")

// Webhook is Postmark's dialect for POST /v1/webhooks/postmark/<account>:
// delivery, bounce, spam complaint, open and click webhooks
// (https://postmarkapp.com/developer/webhooks/webhooks-overview), JSON with
// RecordType, MessageID and the Metadata we set, authenticated by the basic
// auth credentials in the webhook URL configured at Postmark
// (https://postmarkapp.com/developer/webhooks/webhooks-overview#protecting-your-webhook).
//
//	Delivery (https://postmarkapp.com/developer/webhooks/delivery-webhook) → status delivered
//	SpamComplaint (it reached the inbox)                                  → status delivered
//	Open, Click                                                           → status read
//	Bounce (https://postmarkapp.com/developer/webhooks/bounce-webhook)     → failure evidence (no status change)
//	anything else                                                         → recorded and ignored
//
// It binds by Metadata[outbox_intent_id], else by the MessageID.
type Webhook struct {
	// Accounts returns the configured account.
	Accounts func(name string) (Account, bool)
}

// Verify checks the basic-auth credentials, in constant time.
func (w *Webhook) Verify(_ context.Context, account string, headers map[string]string, _ []byte) error {
	var a Account
	if w.Accounts != nil {
		a, _ = w.Accounts(account)
	}
	if a.WebhookUser == "" || a.WebhookPassword == "" {
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, ErrBadCredentials)
	}
	enc, ok := strings.CutPrefix(plugin.Header(headers, "Authorization"), "Basic ")
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	user, pass, found := strings.Cut(string(raw), ":")
	if !ok || err != nil || !found {
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, ErrBadCredentials)
	}
	u := subtle.ConstantTimeCompare([]byte(user), []byte(a.WebhookUser))
	p := subtle.ConstantTimeCompare([]byte(pass), []byte(a.WebhookPassword))
	if u&p != 1 {
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, ErrBadCredentials)
	}
	return nil
}

// Record is the part of a webhook body the dialect reads.
type Record struct {
	RecordType    string            `json:"RecordType"`
	ID            json.Number       `json:"ID"` // bounces, complaints
	MessageID     string            `json:"MessageID"`
	Recipient     string            `json:"Recipient"`
	Email         string            `json:"Email"`
	Type          string            `json:"Type"` // bounce type, e.g. HardBounce
	MessageStream string            `json:"MessageStream"`
	Metadata      map[string]string `json:"Metadata"`
	DeliveredAt   string            `json:"DeliveredAt"`
	BouncedAt     string            `json:"BouncedAt"`
	ReceivedAt    string            `json:"ReceivedAt"`
}

// Decode parses a verified webhook.
func (w *Webhook) Decode(account string, _ map[string]string, body []byte) (webhook.ProviderEvent, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var r Record
	if err := dec.Decode(&r); err != nil || dec.More() {
		return webhook.ProviderEvent{}, &core.ValidationError{Code: core.CodeMalformedJSON, Message: "the body is not one JSON object"}
	}
	if r.RecordType == "" || r.MessageID == "" {
		return webhook.ProviderEvent{}, &core.ValidationError{Code: core.CodeInvalidField, Field: "RecordType", Message: "a Postmark webhook carries RecordType and MessageID"}
	}
	ev := webhook.ProviderEvent{Account: account, Type: r.RecordType, Kind: webhook.EventOther, MessageID: r.MessageID, IntentID: r.Metadata[MetadataIntentKey]}
	who := r.Recipient
	if who == "" {
		who = r.Email
	}
	// One event per record type, message and recipient (a message to
	// several recipients is delivered to each); bounces have their own id.
	ev.EventID = r.RecordType + ":" + r.MessageID + ":" + who
	if id := r.ID.String(); id != "" {
		ev.EventID = r.RecordType + ":" + id
	}
	at := r.DeliveredAt
	switch r.RecordType {
	case "Delivery", "SpamComplaint":
		ev.Kind, ev.Status = webhook.EventStatus, core.DeliveryDelivered
	case "Open", "Click":
		ev.Kind, ev.Status, at = webhook.EventStatus, core.DeliveryRead, r.ReceivedAt
	case "Bounce":
		ev.Kind, ev.Status, at = webhook.EventFailure, "bounce", r.BouncedAt
		if r.Type != "" {
			ev.Status = "bounce: " + r.Type
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
		ev.OccurredAt = t.UTC()
	}
	if len(ev.EventID) > 255 {
		ev.EventID = ev.EventID[:200] + ":" + strconv.Itoa(len(ev.EventID))
	}
	return ev, nil
}
