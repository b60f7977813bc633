// Package whatsapp is the WhatsApp Cloud API provider adapter (provider name
// "whatsapp"): POST /{version}/{phone-number-id}/messages
// (https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages),
// JSON, the access token as a Bearer token.
//
// The Cloud API has no idempotency key and no GET for a sent message, so the
// adapter declares neither: an ambiguous failure goes to needs-human at
// once. Every message carries the intent id in biz_opaque_callback_data,
// which WhatsApp echoes in the status webhooks
// (https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/payload-examples#message-status-updates):
// a signed sent/delivered/read status settles an uncertain intent with the
// wamid; failed is recorded as evidence (webhook.go).
//
// Error mapping (https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes),
// by error.code, never by the HTTP status alone (the rate-limit codes arrive
// as HTTP 400) nor by message text:
//
//	4 (API too many calls), 80007 (WABA rate limit), 130429 (throughput),
//	131056 (pair rate limit)                                         → rate limited (Retry-After if sent, else backoff)
//	0 (AuthException), 3 (capability), 10 (permission), 190 (token
//	expired), 200-299 (permission), 131005 (access denied), 131031
//	(account locked), 368 (temporarily blocked)                      → unauthorized
//	100 (invalid parameter), 131008 (parameter missing), 131009
//	(parameter invalid), 131021 (recipient is the sender), 131026
//	(undeliverable), 131047 (outside the 24-hour window), 131051
//	(unsupported type), 131052/131053 (media), 132000-132069
//	(templates), 133010 (number not registered)                     → rejected (nothing was sent)
//	1 (unknown), 2 (service), 131000 (something went wrong), 131016
//	(service unavailable), any other code, 5xx                        → unknown
package whatsapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

// Name is the provider name bots use.
const Name = "whatsapp"

// DefaultBaseURL is the Graph API root.
const DefaultBaseURL = "https://graph.facebook.com"

// DefaultAPIVersion is the Graph API version used when none is configured.
const DefaultAPIVersion = "v21.0"

// ActionSend sends one message.
const ActionSend = "send_message"

// Account is one business phone number.
type Account struct {
	// PhoneNumberID is the business phone number's id (the path of sends;
	// webhooks name it in metadata.phone_number_id).
	PhoneNumberID string `json:"phoneNumberId"`
	// AccessToken is a system user's access token (Bearer).
	AccessToken string `json:"accessToken"`
	// AppSecret verifies X-Hub-Signature-256 on webhooks.
	AppSecret string `json:"appSecret,omitempty"`
	// VerifyToken answers the webhook's verification handshake.
	VerifyToken string `json:"verifyToken,omitempty"`
}

// LogValue keeps secrets out of structured logs.
func (a Account) LogValue() slog.Value {
	return slog.StringValue("<whatsapp phone number " + a.PhoneNumberID + ", secrets redacted>")
}

// Config configures the adapter.
type Config struct {
	BaseURL    string
	APIVersion string
	Accounts   map[string]Account
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

var (
	versionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+$`)
	idRE      = regexp.MustCompile(`^[0-9]{1,32}$`)
	// phoneRE: WhatsApp takes the number with or without "+".
	phoneRE = regexp.MustCompile(`^\+?[1-9][0-9]{6,14}$`)
)

// New returns the adapter. client may be nil.
func New(client *http.Client, cfg Config) (*Provider, error) {
	if err := httpx.Settings(Name, &cfg.BaseURL, DefaultBaseURL, &cfg.Timeout, &cfg.Now); err != nil {
		return nil, err
	}
	if cfg.APIVersion == "" {
		cfg.APIVersion = DefaultAPIVersion
	}
	if !versionRE.MatchString(cfg.APIVersion) {
		return nil, errors.New("whatsapp: apiVersion must look like v21.0")
	}
	if err := httpx.RequireTokens(Name, cfg.Accounts, func(a Account) string { return a.AccessToken }); err != nil {
		return nil, fmt.Errorf("%w (accessToken)", err)
	}
	for name, a := range cfg.Accounts {
		if !idRE.MatchString(a.PhoneNumberID) {
			return nil, fmt.Errorf("whatsapp: account %q: phoneNumberId must be the numeric phone number id", name)
		}
	}
	return &Provider{cfg: cfg, client: httpx.Client(client)}, nil
}

func (p *Provider) Name() string { return Name }

func (p *Provider) SupportsAction(action string) bool {
	_, ok := Registration.Declaration(action)
	return ok
}

// Capabilities is the registration's declaration: neither.
func (p *Provider) Capabilities(_ context.Context, account, action string) (core.Capabilities, error) {
	if err := httpx.KnownAccount(Name, p.cfg.Accounts, account); err != nil {
		return core.Capabilities{}, err
	}
	a, ok := Registration.Declaration(action)
	if !ok {
		return core.Capabilities{}, fmt.Errorf("whatsapp: unknown action %q", action)
	}
	return a.Declared, nil
}

// ours are the message fields the outbox sets.
var ours = []string{"messaging_product", "recipient_type", "to", "biz_opaque_callback_data"}

// buildMessage returns the send body: the payload (the message object: type
// and its member, e.g. {"type": "text", "text": {"body": "hi"}}, or a
// template), with messaging_product, recipient_type, to (the target) and
// biz_opaque_callback_data (the intent id).
func buildMessage(r core.SendRequest) ([]byte, error) {
	args, err := httpx.ObjectArgs(r.Payload, "the message (type and its object)")
	if err != nil {
		return nil, err
	}
	for _, f := range ours {
		if _, ok := args[f]; ok {
			return nil, fmt.Errorf("payload.%s is the outbox's", f)
		}
	}
	var typ string
	if raw, ok := args["type"]; !ok || json.Unmarshal(raw, &typ) != nil || typ == "" {
		return nil, errors.New("payload.type is required (text, template, image, ...)")
	}
	if _, ok := args[typ]; !ok {
		return nil, fmt.Errorf("payload.%s is required for type %q", typ, typ)
	}
	if !phoneRE.MatchString(r.Target) {
		return nil, errors.New("target must be the recipient's phone number (digits, with or without +)")
	}
	args["messaging_product"], _ = json.Marshal("whatsapp")
	args["recipient_type"], _ = json.Marshal("individual")
	args["to"], _ = json.Marshal(r.Target)
	args["biz_opaque_callback_data"], _ = json.Marshal(r.IntentID)
	return httpx.MarshalVerbatim(args)
}

// Send sends the message.
func (p *Provider) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	a, err := httpx.SendAccount(Name, p.cfg.Accounts, r.Account)
	if err != nil {
		return core.SendResult{}, err
	}
	if !p.SupportsAction(r.Action) {
		return core.SendResult{}, httpx.Rejected(core.Evidence{ProviderCode: "unknown_action"}, "whatsapp: unknown action %q", r.Action)
	}
	body, err := buildMessage(r)
	if err != nil {
		return core.SendResult{}, httpx.InvalidPayload(Name, err)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+a.AccessToken)
	h.Set("Content-Type", "application/json")
	endpoint := p.cfg.BaseURL + "/" + p.cfg.APIVersion + "/" + url.PathEscape(a.PhoneNumberID) + "/messages"
	resp, err := httpx.Call(ctx, p.client, p.cfg.Timeout, http.MethodPost, endpoint, h, body, httpx.DefaultBodyLimit)
	if err != nil {
		return core.SendResult{}, err
	}
	return classify(resp, p.cfg.Now())
}

// SendResponse is the messages endpoint's answer.
type SendResponse struct {
	Messages []struct {
		ID            string `json:"id"`
		MessageStatus string `json:"message_status"`
	} `json:"messages"`
}

// ErrorBody is the Graph API's error envelope.
type ErrorBody struct {
	Error struct {
		Message   string `json:"message"`
		Type      string `json:"type"`
		Code      int    `json:"code"`
		Subcode   int    `json:"error_subcode"`
		FBTraceID string `json:"fbtrace_id"`
	} `json:"error"`
}

// Documented codes.
const (
	CodeAuth              = 0
	CodeUnknown           = 1
	CodeService           = 2
	CodeCapability        = 3
	CodeTooManyCalls      = 4
	CodePermission        = 10
	CodeInvalidParameter  = 100
	CodeTokenExpired      = 190
	CodeBlocked           = 368
	CodeWABARateLimit     = 80007
	CodeThroughput        = 130429
	CodeSomethingWrong    = 131000
	CodeAccessDenied      = 131005
	CodeParamMissing      = 131008
	CodeParamInvalid      = 131009
	CodeServiceUnavail    = 131016
	CodeRecipientIsSender = 131021
	CodeUndeliverable     = 131026
	CodeAccountLocked     = 131031
	CodeReengagement      = 131047
	CodeUnsupportedType   = 131051
	CodeMediaDownload     = 131052
	CodeMediaUpload       = 131053
	CodePairRateLimit     = 131056
	CodeNotRegistered     = 133010
)

// Classify maps an error code to a class (see the package comment). status
// only matters when the body carries no error object.
func Classify(status int, hasCode bool, code int) core.ErrorClass {
	if !hasCode {
		switch status {
		case http.StatusTooManyRequests:
			return core.ClassRateLimited
		case http.StatusUnauthorized, http.StatusForbidden:
			return core.ClassUnauthorized
		}
		return core.ClassUnknownOutcome
	}
	switch {
	case code == CodeTooManyCalls, code == CodeWABARateLimit, code == CodeThroughput, code == CodePairRateLimit:
		return core.ClassRateLimited
	case code == CodeAuth, code == CodeCapability, code == CodePermission, code == CodeTokenExpired, code >= 200 && code <= 299,
		code == CodeAccessDenied, code == CodeAccountLocked, code == CodeBlocked:
		return core.ClassUnauthorized
	case code == CodeInvalidParameter, code == CodeParamMissing, code == CodeParamInvalid, code == CodeRecipientIsSender,
		code == CodeUndeliverable, code == CodeReengagement, code == CodeUnsupportedType, code == CodeMediaDownload,
		code == CodeMediaUpload, code >= 132000 && code <= 132069, code == CodeNotRegistered:
		return core.ClassRejectedInput
	}
	return core.ClassUnknownOutcome
}

func classify(resp *httpx.Response, now time.Time) (core.SendResult, error) {
	ev := core.Evidence{HTTPStatus: resp.Status}
	if resp.Status >= 200 && resp.Status < 300 {
		var sr SendResponse
		if resp.ReadErr != nil || json.Unmarshal(resp.Body, &sr) != nil || len(sr.Messages) != 1 || sr.Messages[0].ID == "" {
			ev.Detail = "2xx without a readable message id"
			return core.SendResult{}, httpx.Unknown(ev, "whatsapp: acknowledgement unreadable")
		}
		ev.ProviderCode = sr.Messages[0].MessageStatus
		return core.SendResult{ExternalID: sr.Messages[0].ID, Evidence: ev}, nil
	}
	var eb ErrorBody
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(resp.Body, &probe)
	hasCode := len(probe.Error) > 0 && json.Unmarshal(resp.Body, &eb) == nil
	if hasCode {
		ev.ProviderCode = strconv.Itoa(eb.Error.Code)
		ev.Detail = "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes (" + ev.ProviderCode + ")"
		if eb.Error.FBTraceID != "" {
			ev.Extra = map[string]string{"fbtraceId": eb.Error.FBTraceID}
		}
	}
	switch Classify(resp.Status, hasCode, eb.Error.Code) {
	case core.ClassRateLimited:
		return core.SendResult{}, httpx.RateLimited(ev, httpx.RetryAfter(resp.Header.Get("Retry-After"), now), "whatsapp: rate limited (code %d)", eb.Error.Code)
	case core.ClassUnauthorized:
		return core.SendResult{}, httpx.Unauthorized(ev, "whatsapp: HTTP %d code %d", resp.Status, eb.Error.Code)
	case core.ClassRejectedInput:
		return core.SendResult{}, httpx.Rejected(ev, "whatsapp: HTTP %d code %d", resp.Status, eb.Error.Code)
	}
	return core.SendResult{}, httpx.Unknown(ev, "whatsapp: HTTP %d code %d (the message may have been sent)", resp.Status, eb.Error.Code)
}

// Lookup is not declared: the Cloud API has no GET for a sent message.
func (p *Provider) Lookup(context.Context, core.SendRequest) (core.LookupResult, error) {
	return core.LookupResult{}, errors.New("whatsapp: no lookup (the Cloud API cannot read a sent message back)")
}
