package whatsapp

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// SignatureHeader is the header Meta signs webhook payloads with
// (https://developers.facebook.com/docs/graph-api/webhooks/getting-started#validate-payloads).
const SignatureHeader = "X-Hub-Signature-256"

// Signature errors (never the secret or the expected value).
var (
	ErrNoSignature  = errors.New("whatsapp signature: X-Hub-Signature-256 missing or not sha256=<hex>")
	ErrBadSignature = errors.New("whatsapp signature: does not match")
)

// Sign returns the X-Hub-Signature-256 value for body: "sha256=" and the hex
// HMAC-SHA256 of the raw body keyed with the app secret.
func Sign(appSecret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(appSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Webhook is WhatsApp's dialect for /v1/webhooks/whatsapp/<account>:
//   - GET: the verification handshake
//     (https://developers.facebook.com/docs/graph-api/webhooks/getting-started#verification-requests):
//     hub.mode=subscribe and hub.verify_token equal to the account's
//     verifyToken are answered with hub.challenge as text/plain; anything
//     else is 403. Nothing is stored.
//   - POST: status webhooks (https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/components#statuses-object)
//     signed with X-Hub-Signature-256 (the app secret). Each status is one
//     event "<wamid>:<status>": sent/delivered/read prove the message
//     (biz_opaque_callback_data names the intent); failed is failure
//     evidence (with its error code). Inbound messages and other fields are
//     recorded and ignored, and so are statuses of other phone numbers of the
//     same app (one webhook URL serves them all; configure an account, and
//     its URL, per number that sends).
type Webhook struct {
	// Accounts returns the configured account.
	Accounts func(name string) (Account, bool)
}

var (
	_ plugin.Handshaker   = (*Webhook)(nil)
	_ plugin.BatchDecoder = (*Webhook)(nil)
)

func (w *Webhook) account(name string) Account {
	var a Account
	if w.Accounts != nil {
		a, _ = w.Accounts(name)
	}
	return a
}

// Handshake answers the verification request.
func (w *Webhook) Handshake(_ context.Context, account string, r plugin.Request) events.APIGatewayV2HTTPResponse {
	q, _ := url.ParseQuery(r.RawQuery)
	a := w.account(account)
	text := func(status int, body string) events.APIGatewayV2HTTPResponse {
		return events.APIGatewayV2HTTPResponse{StatusCode: status, Body: body, Headers: map[string]string{"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"}}
	}
	if a.VerifyToken == "" || q.Get("hub.mode") != "subscribe" || !hmac.Equal([]byte(q.Get("hub.verify_token")), []byte(a.VerifyToken)) || q.Get("hub.challenge") == "" {
		return text(http.StatusForbidden, "forbidden")
	}
	return text(http.StatusOK, q.Get("hub.challenge"))
}

// Verify checks X-Hub-Signature-256 with the account's app secret.
func (w *Webhook) Verify(_ context.Context, account string, headers map[string]string, body []byte) error {
	a := w.account(account)
	sig := plugin.Header(headers, SignatureHeader)
	if !strings.HasPrefix(sig, "sha256=") {
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, ErrNoSignature)
	}
	if a.AppSecret == "" || !hmac.Equal([]byte(Sign(a.AppSecret, body)), []byte(sig)) {
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, ErrBadSignature)
	}
	return nil
}

// Payload is the part of a webhook body the dialect reads.
type Payload struct {
	Object string `json:"object"`
	Entry  []struct {
		ID      string `json:"id"`
		Changes []struct {
			Field string `json:"field"`
			Value struct {
				MessagingProduct string `json:"messaging_product"`
				Metadata         struct {
					PhoneNumberID string `json:"phone_number_id"`
				} `json:"metadata"`
				Statuses []Status         `json:"statuses"`
				Messages []map[string]any `json:"messages"`
			} `json:"value"`
		} `json:"changes"`
	} `json:"entry"`
}

// Status is one status object.
type Status struct {
	ID                    string `json:"id"`
	Status                string `json:"status"`
	Timestamp             string `json:"timestamp"`
	RecipientID           string `json:"recipient_id"`
	BizOpaqueCallbackData string `json:"biz_opaque_callback_data"`
	Errors                []struct {
		Code int `json:"code"`
	} `json:"errors"`
}

// Decode returns the first event of the payload (DecodeAll is what the
// endpoint uses).
func (w *Webhook) Decode(account string, headers map[string]string, body []byte) (webhook.ProviderEvent, error) {
	evs, err := w.DecodeAll(account, headers, body)
	if err != nil {
		return webhook.ProviderEvent{}, err
	}
	return evs[0], nil
}

// DecodeAll turns a verified payload into its events, one per status (at
// least one: a payload without statuses is one ignored event).
func (w *Webhook) DecodeAll(account string, _ map[string]string, body []byte) ([]webhook.ProviderEvent, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var p Payload
	if err := dec.Decode(&p); err != nil || dec.More() {
		return nil, &core.ValidationError{Code: core.CodeMalformedJSON, Message: "the body is not one JSON object"}
	}
	if p.Object != "whatsapp_business_account" {
		return nil, &core.ValidationError{Code: core.CodeInvalidField, Field: "object", Message: "object must be whatsapp_business_account"}
	}
	a := w.account(account)
	var out []webhook.ProviderEvent
	for _, e := range p.Entry {
		for _, c := range e.Changes {
			if c.Field != "messages" {
				continue
			}
			if c.Value.Metadata.PhoneNumberID != a.PhoneNumberID {
				// An app has one webhook URL for all its numbers: another
				// number's statuses are not this account's (refusing the
				// payload would make Meta deliver it again forever).
				continue
			}
			for _, s := range c.Value.Statuses {
				if s.ID == "" || s.Status == "" {
					return nil, &core.ValidationError{Code: core.CodeInvalidField, Field: "statuses", Message: "a status has an id and a status"}
				}
				ev := webhook.ProviderEvent{Account: account, EventID: s.ID + ":" + s.Status, Type: "status." + s.Status, Kind: webhook.EventOther,
					MessageID: s.ID, IntentID: s.BizOpaqueCallbackData}
				if sec, err := strconv.ParseInt(s.Timestamp, 10, 64); err == nil {
					ev.OccurredAt = time.Unix(sec, 0).UTC()
				}
				switch s.Status {
				case core.DeliverySent, core.DeliveryDelivered, core.DeliveryRead:
					ev.Kind, ev.Status = webhook.EventStatus, s.Status
				case "failed":
					ev.Kind, ev.Status = webhook.EventFailure, "failed"
					if len(s.Errors) > 0 {
						ev.Status = "failed (error " + strconv.Itoa(s.Errors[0].Code) + ")"
					}
				}
				out = append(out, ev)
			}
		}
	}
	if len(out) == 0 {
		sum := sha256.Sum256(body)
		out = append(out, webhook.ProviderEvent{Account: account, EventID: "payload:" + hex.EncodeToString(sum[:12]), Type: "other", Kind: webhook.EventOther})
	}
	return out, nil
}
