package twilio

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// SignatureHeader is the header Twilio signs its requests with
// (https://www.twilio.com/docs/usage/webhooks/webhooks-security).
const SignatureHeader = "X-Twilio-Signature"

// Signature errors (never the token or the expected value).
var (
	ErrNoSignature  = errors.New("twilio signature: header missing")
	ErrBadSignature = errors.New("twilio signature: does not match")
	ErrNotRequest   = errors.New("twilio signature: covers the request URL; verified through VerifyRequest only")
)

// Sign returns the X-Twilio-Signature of a request Twilio makes to fullURL
// (exactly as it was given to Twilio: scheme, host, path and query) with the
// form parameters params: base64 of HMAC-SHA1, keyed with the auth token,
// over fullURL followed by every parameter name and value, sorted by name,
// with no delimiters (https://www.twilio.com/docs/usage/webhooks/webhooks-security#validating-signatures-from-twilio).
func Sign(authToken, fullURL string, params url.Values) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(fullURL)
	for _, k := range keys {
		vs := append([]string(nil), params[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			b.WriteString(k)
			b.WriteString(v)
		}
	}
	m := hmac.New(sha1.New, []byte(authToken))
	m.Write([]byte(b.String()))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Webhook is Twilio's dialect for POST /v1/webhooks/twilio/<account>: the
// status callbacks of the messages and calls the adapter created, form
// encoded (https://www.twilio.com/docs/messaging/guides/track-outbound-message-status,
// https://www.twilio.com/docs/voice/api/call-resource#statuscallback), signed
// with the account's auth token over the exact URL Twilio was given: the
// configured public base URL plus the path and raw query as received, never
// one rebuilt from Host or X-Forwarded-Proto.
//
// What a status proves:
//
//	message sent, delivered, read         → status (sent/delivered/read): settles unknown or needs-human as succeeded
//	call in-progress (answered), completed → status delivered: the phone rang and was answered
//	message failed, undelivered;
//	call busy, no-answer, failed, canceled → failure evidence (the phone may have rung): no status change
//	queued, accepted, sending, initiated, ringing, ... → recorded and ignored
//
// The event id is "<sid>:<status>" (Twilio sends each status of a message or
// call once; a replay is a duplicate). The intent is the StatusCallback's
// intent parameter (signed, since it is part of the URL).
type Webhook struct {
	// Accounts returns the configured account.
	Accounts func(name string) (Account, bool)
	// PublicBaseURL is the configured statusCallbackBaseUrl.
	PublicBaseURL string
}

var _ plugin.RequestWebhook = (*Webhook)(nil)

// Verify refuses: Twilio's signature covers the URL, so only VerifyRequest
// can check it.
func (w *Webhook) Verify(context.Context, string, map[string]string, []byte) error {
	return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, ErrNotRequest)
}

// Decode refuses for the same reason (the intent is in the query).
func (w *Webhook) Decode(string, map[string]string, []byte) (webhook.ProviderEvent, error) {
	return webhook.ProviderEvent{}, &core.ValidationError{Code: core.CodeInvalidField, Message: "a Twilio callback is decoded with its URL"}
}

// CallbackURL is the URL Twilio called, as it was given to Twilio: the
// configured public base URL, then the raw path and query as received. When
// the base URL has a path (a stage, or a custom domain's base path mapping)
// and the raw path already starts with it (a stage is in API Gateway's
// rawPath), it is not repeated.
func (w *Webhook) CallbackURL(r plugin.Request) string {
	base := strings.TrimSuffix(w.PublicBaseURL, "/")
	if u, err := url.Parse(base); err == nil && u.Path != "" && strings.HasPrefix(r.RawPath, u.EscapedPath()+"/") {
		base = u.Scheme + "://" + u.Host
	}
	u := base + r.RawPath
	if r.RawQuery != "" {
		u += "?" + r.RawQuery
	}
	return u
}

// VerifyRequest checks X-Twilio-Signature with the account's auth token. An
// unknown account, one without a token, or a body that is not form encoded
// is refused.
func (w *Webhook) VerifyRequest(_ context.Context, account string, r plugin.Request) error {
	var a Account
	if w.Accounts != nil {
		a, _ = w.Accounts(account)
	}
	sig := plugin.Header(r.Headers, SignatureHeader)
	if sig == "" {
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, ErrNoSignature)
	}
	params, err := url.ParseQuery(string(r.Body))
	if a.AuthToken == "" || w.PublicBaseURL == "" || err != nil {
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, ErrBadSignature)
	}
	want := Sign(a.AuthToken, w.CallbackURL(r), params)
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, ErrBadSignature)
	}
	return nil
}

// DecodeRequest turns a verified callback into an event.
func (w *Webhook) DecodeRequest(account string, r plugin.Request) (webhook.ProviderEvent, error) {
	bad := func(field, msg string) (webhook.ProviderEvent, error) {
		return webhook.ProviderEvent{}, &core.ValidationError{Code: core.CodeInvalidField, Field: field, Message: msg}
	}
	params, err := url.ParseQuery(string(r.Body))
	if err != nil {
		return bad("body", "the body is not form encoded")
	}
	query, _ := url.ParseQuery(r.RawQuery)
	var a Account
	if w.Accounts != nil {
		a, _ = w.Accounts(account)
	}
	if got := params.Get("AccountSid"); got != a.AccountSID {
		return bad("AccountSid", "the callback is for another Twilio account")
	}
	kind, sid, status := "message", params.Get("MessageSid"), params.Get("MessageStatus")
	if sid == "" {
		kind, sid, status = "call", params.Get("CallSid"), params.Get("CallStatus")
	}
	if sid == "" || status == "" {
		return bad("MessageSid", "a status callback carries MessageSid and MessageStatus, or CallSid and CallStatus")
	}
	ev := webhook.ProviderEvent{Account: account, EventID: sid + ":" + status, Type: kind + "." + status,
		Kind: webhook.EventOther, MessageID: sid, IntentID: query.Get(IntentParam)}
	switch kind + "." + status {
	case "message.sent", "message.delivered", "message.read":
		ev.Kind, ev.Status = webhook.EventStatus, status
	case "call.in-progress", "call.completed":
		ev.Kind, ev.Status = webhook.EventStatus, core.DeliveryDelivered
	case "message.failed", "message.undelivered", "call.busy", "call.no-answer", "call.failed", "call.canceled":
		ev.Kind, ev.Status = webhook.EventFailure, status
		if code := params.Get("ErrorCode"); code != "" {
			ev.Status = status + " (error " + code + ")"
		}
	}
	return ev, nil
}
