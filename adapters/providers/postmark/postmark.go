// Package postmark is the Postmark provider adapter (provider name
// "postmark"): email through POST /email
// (https://postmarkapp.com/developer/api/email-api#send-a-single-email),
// JSON, the server token in X-Postmark-Server-Token
// (https://postmarkapp.com/developer/api/overview#authentication).
//
// Postmark has no idempotency key, but it stores every sent message with the
// Metadata the client set and can search them by it
// (https://postmarkapp.com/developer/api/messages-api#outbound-message-search:
// metadata_<key>=<value>, one metadata filter per search). The adapter puts
// the intent id in Metadata[outbox_intent_id] and declares lookup: an
// ambiguous send is reconciled by that search (found: succeeded with the
// MessageID; authoritatively absent: the core retries, only after its settle
// window, since a message submitted a moment ago may not be searchable yet).
// Delivery and bounce webhooks (webhook.go) bind by the same metadata.
//
// Error mapping (https://postmarkapp.com/developer/api/overview#http-response-codes,
// https://postmarkapp.com/developer/api/overview#error-codes), by HTTP status
// and the body's ErrorCode, never by Message text:
//
//	401, ErrorCode 10 (bad or missing server token)                → unauthorized
//	422 ErrorCode 405 (not allowed to send), 412 (account pending),
//	    413 (account may not send)                                  → unauthorized (the account cannot send)
//	422 any other ErrorCode (300 invalid request, 400 sender signature
//	    not found, 401 not confirmed, 406 inactive recipient, ...)  → rejected
//	404, 413 (payload too large), 415                               → rejected
//	429 (rate limit exceeded)                                       → rate limited (Retry-After if sent, else backoff)
//	500, 503, anything else                                         → unknown (the search decides)
package postmark

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/mail"
	"net/url"
	"strconv"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

// Name is the provider name bots use.
const Name = "postmark"

// DefaultBaseURL is Postmark's API root.
const DefaultBaseURL = "https://api.postmarkapp.com"

// ActionEmail sends one email.
const ActionEmail = "send_email"

// MetadataIntentKey is the Metadata key carrying the intent id.
const MetadataIntentKey = "outbox_intent_id"

// DefaultStream is Postmark's default transactional message stream.
const DefaultStream = "outbound"

// Account is one Postmark server.
type Account struct {
	// ServerToken is the server's API token (X-Postmark-Server-Token).
	ServerToken string `json:"serverToken"`
	// From is the sender (a confirmed sender signature or a verified
	// domain's address).
	From string `json:"from"`
	// MessageStream defaults to "outbound".
	MessageStream string `json:"messageStream,omitempty"`
	// WebhookUser and WebhookPassword are the basic-auth credentials put in
	// the webhook URL configured at Postmark
	// (https://user:password@…/v1/webhooks/postmark/<account>); a webhook
	// without them is refused.
	WebhookUser     string `json:"webhookUser,omitempty"`
	WebhookPassword string `json:"webhookPassword,omitempty"`
}

func (a Account) stream() string {
	if a.MessageStream == "" {
		return DefaultStream
	}
	return a.MessageStream
}

// LogValue keeps secrets out of structured logs.
func (a Account) LogValue() slog.Value {
	return slog.StringValue("<postmark account, tokens redacted>")
}

// Config configures the adapter.
type Config struct {
	BaseURL  string
	Accounts map[string]Account
	// Timeout bounds each request (default 10s).
	Timeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Provider is the adapter.
type Provider struct {
	cfg    Config
	client *http.Client
}

var _ core.Provider = (*Provider)(nil)

// New returns the adapter. client may be nil.
func New(client *http.Client, cfg Config) (*Provider, error) {
	if err := httpx.Settings(Name, &cfg.BaseURL, DefaultBaseURL, &cfg.Timeout, &cfg.Now); err != nil {
		return nil, err
	}
	if err := httpx.RequireTokens(Name, cfg.Accounts, func(a Account) string { return a.ServerToken }); err != nil {
		return nil, fmt.Errorf("%w (serverToken)", err)
	}
	for name, a := range cfg.Accounts {
		if _, err := mail.ParseAddress(a.From); err != nil {
			return nil, fmt.Errorf("postmark: account %q: from must be an email address", name)
		}
		if (a.WebhookUser == "") != (a.WebhookPassword == "") {
			return nil, fmt.Errorf("postmark: account %q: webhookUser and webhookPassword go together", name)
		}
	}
	return &Provider{cfg: cfg, client: httpx.Client(client)}, nil
}

func (p *Provider) Name() string { return Name }

func (p *Provider) SupportsAction(action string) bool {
	_, ok := Registration.Declaration(action)
	return ok
}

// Capabilities is the registration's declaration: lookup, no keys.
func (p *Provider) Capabilities(_ context.Context, account, action string) (core.Capabilities, error) {
	if err := httpx.KnownAccount(Name, p.cfg.Accounts, account); err != nil {
		return core.Capabilities{}, err
	}
	a, ok := Registration.Declaration(action)
	if !ok {
		return core.Capabilities{}, fmt.Errorf("postmark: unknown action %q", action)
	}
	return a.Declared, nil
}

// outboxFields are the message fields the outbox sets: the target, the
// account's sender and stream.
var outboxFields = []string{"From", "To", "MessageStream"}

// buildEmail returns the POST /email body: the payload's fields (Subject,
// TextBody, HtmlBody, Tag, ReplyTo, Cc, Bcc, Headers, TrackOpens,
// TrackLinks, Metadata, Attachments, as Postmark names them), To from the
// target, From and MessageStream from the account, and
// Metadata[outbox_intent_id].
func buildEmail(a Account, r core.SendRequest) ([]byte, error) {
	args, err := httpx.ObjectArgs(r.Payload, "email fields (Subject, TextBody, HtmlBody, ...)")
	if err != nil {
		return nil, err
	}
	for _, f := range outboxFields {
		if _, ok := args[f]; ok {
			return nil, fmt.Errorf("payload.%s is the outbox's (the target, the account's from and messageStream)", f)
		}
	}
	if _, err := mail.ParseAddressList(r.Target); err != nil {
		return nil, errors.New("target must be an email address (or a comma-separated list)")
	}
	if _, ok := args["TextBody"]; !ok {
		if _, ok := args["HtmlBody"]; !ok {
			return nil, errors.New("payload needs TextBody or HtmlBody")
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := args["Metadata"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			return nil, errors.New("payload.Metadata must be an object")
		}
	}
	if v, ok := meta[MetadataIntentKey]; ok {
		var s string
		if json.Unmarshal(v, &s) != nil || s != r.IntentID {
			return nil, fmt.Errorf("payload.Metadata.%s is the outbox's", MetadataIntentKey)
		}
	}
	meta[MetadataIntentKey], _ = json.Marshal(r.IntentID)
	args["Metadata"], _ = json.Marshal(meta)
	args["To"], _ = json.Marshal(r.Target)
	args["From"], _ = json.Marshal(a.From)
	args["MessageStream"], _ = json.Marshal(a.stream())
	return httpx.MarshalVerbatim(args)
}

func headers(a Account) http.Header {
	h := http.Header{}
	h.Set("Accept", "application/json")
	h.Set("X-Postmark-Server-Token", a.ServerToken)
	return h
}

// Send sends the email.
func (p *Provider) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	a, err := httpx.SendAccount(Name, p.cfg.Accounts, r.Account)
	if err != nil {
		return core.SendResult{}, err
	}
	if !p.SupportsAction(r.Action) {
		return core.SendResult{}, httpx.Rejected(core.Evidence{ProviderCode: "unknown_action"}, "postmark: unknown action %q", r.Action)
	}
	body, err := buildEmail(a, r)
	if err != nil {
		return core.SendResult{}, httpx.InvalidPayload(Name, err)
	}
	h := headers(a)
	h.Set("Content-Type", "application/json")
	resp, err := httpx.Call(ctx, p.client, p.cfg.Timeout, http.MethodPost, p.cfg.BaseURL+"/email", h, body, httpx.DefaultBodyLimit)
	if err != nil {
		return core.SendResult{}, err
	}
	return classify(resp, p.cfg.Now())
}

// SendResponse is POST /email's answer (errors carry ErrorCode and Message).
type SendResponse struct {
	To          string `json:"To"`
	SubmittedAt string `json:"SubmittedAt"`
	MessageID   string `json:"MessageID"`
	ErrorCode   int    `json:"ErrorCode"`
	Message     string `json:"Message"`
}

// Documented API error codes (https://postmarkapp.com/developer/api/overview#error-codes).
const (
	CodeBadToken            = 10
	CodeInvalidRequest      = 300
	CodeSenderNotFound      = 400
	CodeSenderNotConfirmed  = 401
	CodeInvalidJSON         = 402
	CodeIncompatibleJSON    = 403
	CodeNotAllowedToSend    = 405
	CodeInactiveRecipient   = 406
	CodeJSONRequired        = 409
	CodeForbiddenAttachment = 411
	CodeAccountPending      = 412
	CodeAccountMayNotSend   = 413
)

// Classify maps an error answer to a class (see the package comment).
func Classify(status, code int) core.ErrorClass {
	switch {
	case status == http.StatusTooManyRequests:
		return core.ClassRateLimited
	case status == http.StatusUnauthorized || code == CodeBadToken:
		return core.ClassUnauthorized
	case status == http.StatusUnprocessableEntity && (code == CodeNotAllowedToSend || code == CodeAccountPending || code == CodeAccountMayNotSend):
		return core.ClassUnauthorized
	case status == http.StatusUnprocessableEntity, status == http.StatusNotFound, status == http.StatusRequestEntityTooLarge, status == http.StatusUnsupportedMediaType:
		return core.ClassRejectedInput
	}
	return core.ClassUnknownOutcome
}

func classify(resp *httpx.Response, now time.Time) (core.SendResult, error) {
	ev := core.Evidence{HTTPStatus: resp.Status}
	var sr SendResponse
	_ = json.Unmarshal(resp.Body, &sr)
	if resp.Status == http.StatusOK {
		if resp.ReadErr != nil || sr.MessageID == "" || sr.ErrorCode != 0 {
			ev.Detail = "200 without a readable MessageID"
			return core.SendResult{}, httpx.Unknown(ev, "postmark: acknowledgement unreadable")
		}
		ev.ProviderCode = strconv.Itoa(sr.ErrorCode)
		return core.SendResult{ExternalID: sr.MessageID, Evidence: ev}, nil
	}
	if sr.ErrorCode != 0 {
		ev.ProviderCode = strconv.Itoa(sr.ErrorCode)
		ev.Detail = "https://postmarkapp.com/developer/api/overview#error-codes (" + ev.ProviderCode + ")"
	}
	switch Classify(resp.Status, sr.ErrorCode) {
	case core.ClassRateLimited:
		return core.SendResult{}, httpx.RateLimited(ev, httpx.RetryAfter(resp.Header.Get("Retry-After"), now), "postmark: rate limited")
	case core.ClassUnauthorized:
		return core.SendResult{}, httpx.Unauthorized(ev, "postmark: HTTP %d ErrorCode %d", resp.Status, sr.ErrorCode)
	case core.ClassRejectedInput:
		return core.SendResult{}, httpx.Rejected(ev, "postmark: HTTP %d ErrorCode %d", resp.Status, sr.ErrorCode)
	}
	return core.SendResult{}, httpx.Unknown(ev, "postmark: HTTP %d (the email may have been sent; the search decides)", resp.Status)
}

// SearchResponse is the outbound message search's answer.
type SearchResponse struct {
	TotalCount int `json:"TotalCount"`
	Messages   []struct {
		MessageID     string            `json:"MessageID"`
		MessageStream string            `json:"MessageStream"`
		Status        string            `json:"Status"`
		ReceivedAt    string            `json:"ReceivedAt"`
		Metadata      map[string]string `json:"Metadata"`
	} `json:"Messages"`
}

// Lookup searches the sent messages of the account's stream for
// Metadata[outbox_intent_id] = the intent id: GET /messages/outbound with
// count, offset, messagestream and metadata_outbox_intent_id.
func (p *Provider) Lookup(ctx context.Context, r core.SendRequest) (core.LookupResult, error) {
	a, err := httpx.SendAccount(Name, p.cfg.Accounts, r.Account)
	if err != nil {
		return core.LookupResult{}, err
	}
	q := url.Values{}
	q.Set("count", "50")
	q.Set("offset", "0")
	q.Set("messagestream", a.stream())
	q.Set("metadata_"+MetadataIntentKey, r.IntentID)
	resp, err := httpx.Call(ctx, p.client, p.cfg.Timeout, http.MethodGet, p.cfg.BaseURL+"/messages/outbound?"+q.Encode(), headers(a), nil, httpx.DefaultBodyLimit)
	if err != nil {
		return core.LookupResult{}, err
	}
	ev := core.Evidence{HTTPStatus: resp.Status}
	if resp.Status != http.StatusOK {
		var sr SendResponse
		_ = json.Unmarshal(resp.Body, &sr)
		return core.LookupResult{}, fmt.Errorf("postmark search: HTTP %d ErrorCode %d", resp.Status, sr.ErrorCode)
	}
	var sr SearchResponse
	dec := json.NewDecoder(bytes.NewReader(resp.Body))
	if resp.ReadErr != nil || dec.Decode(&sr) != nil || sr.TotalCount < len(sr.Messages) {
		return core.LookupResult{}, errors.New("postmark search: unreadable answer")
	}
	var found []string
	for _, m := range sr.Messages {
		if m.Metadata[MetadataIntentKey] == r.IntentID && m.MessageID != "" {
			found = append(found, m.MessageID)
		}
	}
	switch {
	case len(found) > 0:
		ev.ProviderCode = "found"
		if len(found) > 1 {
			ev.Extra = map[string]string{"matches": strconv.Itoa(len(found))}
		}
		// Messages come newest first: the oldest is the first send.
		return core.LookupResult{State: core.LookupFound, ExternalID: found[len(found)-1], Evidence: ev}, nil
	case sr.TotalCount == 0:
		ev.ProviderCode = "absent"
		return core.LookupResult{State: core.LookupAbsent, Evidence: ev}, nil
	}
	// Matches counted but none of ours on the page: never "absent".
	return core.LookupResult{}, fmt.Errorf("postmark search: %d matches, none carrying the intent id", sr.TotalCount)
}
