package stripe

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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

// SignatureHeader is the header Stripe signs webhook events with
// (https://docs.stripe.com/webhooks#verify-manually).
const SignatureHeader = "Stripe-Signature"

// Tolerance is the default time window a signed timestamp may be away from
// now (Stripe's libraries use five minutes).
const Tolerance = 5 * time.Minute

// Signature errors (never the secret or the expected value).
var (
	ErrNoSignature  = errors.New("stripe signature: header missing or without t= and v1=")
	ErrStale        = errors.New("stripe signature: timestamp outside the tolerance")
	ErrBadSignature = errors.New("stripe signature: no v1 signature matches")
)

// Sign returns a Stripe-Signature value for body at t: "t=<unix>,v1=<hex
// HMAC-SHA256 of "<t>.<body>">". The key is the whole signing secret string
// ("whsec_…" as given, not base64-decoded as in Standard Webhooks).
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + signature(secret, ts, body)
}

func signature(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// VerifySignature checks a Stripe-Signature header: the t= timestamp within
// tolerance of now, and any one of the v1= signatures (there are several
// while a secret is rolled) equal, in constant time, to the HMAC of
// "<t>.<body>". Other schemes (v0) are ignored. An empty secret never verifies.
func VerifySignature(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if secret == "" {
		return ErrBadSignature
	}
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == "" || len(sigs) == 0 {
		return ErrNoSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrNoSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	want := []byte(signature(secret, ts, body))
	for _, s := range sigs {
		if hmac.Equal(want, []byte(s)) {
			return nil
		}
	}
	return ErrBadSignature
}

// Webhook is Stripe's webhook dialect for POST /v1/webhooks/stripe/<account>:
// events (https://docs.stripe.com/api/events/object) signed with the
// account's webhookSecret. The event id (evt_…) is the deduplication key.
//
// refund.created and refund.updated (https://docs.stripe.com/api/events/types#event_types-refund.updated)
// prove our refund exists: an acknowledgement whose message id is the refund
// id and whose intent is the refund's metadata[outbox_intent_id]. Stripe
// advises matching events for objects you created by your own metadata,
// because an event's request.idempotency_key may be null
// (https://docs.stripe.com/idempotency); when there is no metadata the core
// binds by the refund id. A refund in status failed or canceled is recorded
// and ignored (no proof of a refund). Everything else is recorded and ignored.
type Webhook struct {
	// Accounts returns the configured account.
	Accounts func(name string) (Account, bool)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Tolerance defaults to Tolerance.
	Tolerance time.Duration
}

// Verify checks Stripe-Signature with the account's webhook secret. An
// unknown account, or one without a webhook secret, is refused.
func (w *Webhook) Verify(_ context.Context, account string, headers map[string]string, body []byte) error {
	var a Account
	if w.Accounts != nil {
		a, _ = w.Accounts(account)
	}
	now, tol := time.Now, Tolerance
	if w.Now != nil {
		now = w.Now
	}
	if w.Tolerance > 0 {
		tol = w.Tolerance
	}
	if err := VerifySignature(a.WebhookSecret, plugin.Header(headers, SignatureHeader), body, now(), tol); err != nil {
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, err)
	}
	return nil
}

// Event is the part of an Event object the dialect reads.
type Event struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
	Request *struct {
		ID             *string `json:"id"`
		IdempotencyKey *string `json:"idempotency_key"`
	} `json:"request"`
}

// Decode parses a verified event.
func (w *Webhook) Decode(account string, _ map[string]string, body []byte) (webhook.ProviderEvent, error) {
	bad := func(field, msg string) (webhook.ProviderEvent, error) {
		return webhook.ProviderEvent{}, &core.ValidationError{Code: core.CodeInvalidField, Field: field, Message: msg}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var e Event
	if err := dec.Decode(&e); err != nil || dec.More() {
		return webhook.ProviderEvent{}, &core.ValidationError{Code: core.CodeMalformedJSON, Message: "the body is not one JSON object"}
	}
	if e.ID == "" || e.Object != "event" {
		return bad("id", "a Stripe event has an id and object \"event\"")
	}
	if e.Type == "" {
		return bad("type", "type is required")
	}
	ev := webhook.ProviderEvent{Account: account, EventID: e.ID, Type: e.Type, Kind: webhook.EventOther}
	if e.Created > 0 {
		ev.OccurredAt = time.Unix(e.Created, 0).UTC()
	}
	if e.Type != "refund.created" && e.Type != "refund.updated" {
		return ev, nil
	}
	var rf Refund
	if len(e.Data.Object) == 0 || json.Unmarshal(e.Data.Object, &rf) != nil || rf.Object != "refund" || rf.ID == "" {
		return bad("data.object", "a refund event carries the Refund object")
	}
	if rf.Status == "failed" || rf.Status == "canceled" {
		return ev, nil
	}
	ev.Kind, ev.MessageID, ev.IntentID = webhook.EventAck, rf.ID, rf.Metadata[MetadataIntentKey]
	return ev, nil // core validates the rest
}
