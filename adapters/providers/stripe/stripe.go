// Package stripe is the Stripe provider adapter (provider name "stripe"):
// refunds (https://docs.stripe.com/api/refunds/create), POST /v1/refunds,
// form-encoded, the account's secret key as a Bearer token
// (https://docs.stripe.com/api/authentication).
//
// What makes a retry safe is Stripe's idempotency key
// (https://docs.stripe.com/idempotency): every attempt of an intent carries
// the same Idempotency-Key (the intent's key), and the intent's id goes in
// the refund's metadata (metadata[outbox_intent_id]). Stripe API v1 saves the
// status and body of the first request with a key once the endpoint began
// executing and replays them for the same key, also a 500, so a retry never
// turns a 500 into a success; keys "can be removed after they are at least
// 24 hours old". The adapter therefore declares keys with a 24-hour
// retention and no lookup: Stripe's search of metadata
// (https://docs.stripe.com/search#data-freshness) lags by up to an hour, so
// it is no authoritative "absent". An intent left uncertain (a replayed 500,
// or retries exhausted) is settled by the webhook Stripe sends for the
// refund, matched by our metadata (webhook.go), or by a human.
//
// Error mapping (https://docs.stripe.com/api/errors, https://docs.stripe.com/error-codes,
// https://docs.stripe.com/error-low-level), by HTTP status, error.type and
// error.code, never by message text:
//
//	400 invalid_request_error (parameter_missing, amount_too_large, charge_already_refunded, ...) → rejected
//	400 idempotency_error (the key was used with other parameters)        → unknown (something else holds our key)
//	401 (no valid API key), 403 (key lacks permission)                    → unauthorized
//	402 card_error / request failed                                       → rejected
//	404 resource_missing                                                  → rejected
//	409 idempotency_key_in_use (a request with our key is in flight)      → retry later with the same key
//	409 other conflicts                                                   → unknown
//	424 external dependency failed                                        → unknown
//	429 rate_limit / lock_timeout (no Retry-After is sent)                → rate limited
//	5xx (a replayed one carries Idempotent-Replayed: true)                → unknown
package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

// Name is the provider name bots use.
const Name = "stripe"

// DefaultBaseURL is Stripe's API root.
const DefaultBaseURL = "https://api.stripe.com"

// MetadataIntentKey is the metadata key carrying the intent id on every
// object the adapter creates.
const MetadataIntentKey = "outbox_intent_id"

// KeyRetention is how long Stripe keeps an idempotency key at least ("keys
// can be removed once they are at least 24 hours old").
const KeyRetention = 24 * time.Hour

// Account is one Stripe account.
type Account struct {
	// SecretKey is the API secret key (sk_… or a restricted rk_… with
	// refund write access), sent as a Bearer token.
	SecretKey string `json:"secretKey"`
	// WebhookSecret is the endpoint's signing secret (whsec_…) that
	// verifies Stripe-Signature (webhook side).
	WebhookSecret string `json:"webhookSecret,omitempty"`
}

// LogValue keeps secrets out of structured logs.
func (a Account) LogValue() slog.Value { return slog.StringValue("<stripe account, keys redacted>") }

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
	if err := httpx.RequireTokens(Name, cfg.Accounts, func(a Account) string { return a.SecretKey }); err != nil {
		return nil, fmt.Errorf("%w (secretKey)", err)
	}
	return &Provider{cfg: cfg, client: httpx.Client(client)}, nil
}

func (p *Provider) Name() string { return Name }

func (p *Provider) SupportsAction(action string) bool {
	_, ok := Registration.Declaration(action)
	return ok
}

// Capabilities is the registration's declaration for the action.
func (p *Provider) Capabilities(_ context.Context, account, action string) (core.Capabilities, error) {
	if err := httpx.KnownAccount(Name, p.cfg.Accounts, account); err != nil {
		return core.Capabilities{}, err
	}
	a, ok := Registration.Declaration(action)
	if !ok {
		return core.Capabilities{}, fmt.Errorf("stripe: unknown action %q", action)
	}
	return a.Declared, nil
}

// Account returns the configured account (for the webhook side).
func (p *Provider) Account(name string) (Account, bool) {
	a, ok := p.cfg.Accounts[name]
	return a, ok
}

// FormEncode encodes a JSON object the way Stripe's API takes parameters
// (https://docs.stripe.com/api/expanding_objects, "form-encoded request
// bodies"): scalars as key=value, objects as key[sub]=value, arrays as
// key[0]=value; keys sorted, so every attempt sends the same body.
func FormEncode(args map[string]json.RawMessage) (string, error) {
	var parts []string
	var walk func(prefix string, raw json.RawMessage) error
	walk = func(prefix string, raw json.RawMessage) error {
		raw = json.RawMessage(strings.TrimSpace(string(raw)))
		if len(raw) == 0 {
			return fmt.Errorf("%s: empty value", prefix)
		}
		switch raw[0] {
		case '{':
			var m map[string]json.RawMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				return fmt.Errorf("%s: %w", prefix, err)
			}
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if err := walk(prefix+"["+k+"]", m[k]); err != nil {
					return err
				}
			}
		case '[':
			var a []json.RawMessage
			if err := json.Unmarshal(raw, &a); err != nil {
				return fmt.Errorf("%s: %w", prefix, err)
			}
			for i, v := range a {
				if err := walk(prefix+"["+strconv.Itoa(i)+"]", v); err != nil {
					return err
				}
			}
		case '"':
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("%s: %w", prefix, err)
			}
			parts = append(parts, url.QueryEscape(prefix)+"="+url.QueryEscape(s))
		case 'n':
			return fmt.Errorf("%s: null is not a Stripe parameter value", prefix)
		default: // numbers and booleans, as written
			parts = append(parts, url.QueryEscape(prefix)+"="+url.QueryEscape(string(raw)))
		}
		return nil
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := walk(k, args[k]); err != nil {
			return "", err
		}
	}
	return strings.Join(parts, "&"), nil
}

// targetParam is the refund parameter the intent's target fills: a
// PaymentIntent (pi_…) or a Charge (ch_… / py_…).
func targetParam(target string) (string, error) {
	switch {
	case strings.HasPrefix(target, "pi_"):
		return "payment_intent", nil
	case strings.HasPrefix(target, "ch_"), strings.HasPrefix(target, "py_"):
		return "charge", nil
	}
	return "", errors.New("target must be a PaymentIntent (pi_…) or Charge (ch_…) id")
}

// buildRefund returns the form body of POST /v1/refunds: the payload's
// parameters (amount, reason, metadata, ...), the target as payment_intent
// or charge, and metadata[outbox_intent_id].
func buildRefund(r core.SendRequest) (string, error) {
	args, err := httpx.ObjectArgs(r.Payload, "refund parameters")
	if err != nil {
		return "", err
	}
	param, err := targetParam(r.Target)
	if err != nil {
		return "", err
	}
	for _, other := range []string{"payment_intent", "charge"} {
		if v, ok := args[other]; ok {
			var s string
			if other != param || json.Unmarshal(v, &s) != nil || s != r.Target {
				return "", fmt.Errorf("payload %s differs from the intent target", other)
			}
		}
	}
	args[param], _ = json.Marshal(r.Target)
	meta := map[string]json.RawMessage{}
	if raw, ok := args["metadata"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			return "", errors.New("metadata must be an object")
		}
	}
	if v, ok := meta[MetadataIntentKey]; ok {
		var s string
		if json.Unmarshal(v, &s) != nil || s != r.IntentID {
			return "", fmt.Errorf("metadata.%s is the outbox's", MetadataIntentKey)
		}
	}
	meta[MetadataIntentKey], _ = json.Marshal(r.IntentID)
	args["metadata"], _ = json.Marshal(meta)
	return FormEncode(args)
}

// Send creates the refund.
func (p *Provider) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	a, err := httpx.SendAccount(Name, p.cfg.Accounts, r.Account)
	if err != nil {
		return core.SendResult{}, err
	}
	if !p.SupportsAction(r.Action) {
		return core.SendResult{}, httpx.Rejected(core.Evidence{ProviderCode: "unknown_action"}, "stripe: unknown action %q", r.Action)
	}
	if r.IdempotencyKey == "" || len(r.IdempotencyKey) > 255 {
		return core.SendResult{}, httpx.InvalidPayload(Name, errors.New("the idempotency key must be 1 to 255 characters"))
	}
	body, err := buildRefund(r)
	if err != nil {
		return core.SendResult{}, httpx.InvalidPayload(Name, err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("Authorization", "Bearer "+a.SecretKey)
	h.Set("Idempotency-Key", r.IdempotencyKey)
	resp, err := httpx.Call(ctx, p.client, p.cfg.Timeout, http.MethodPost, p.cfg.BaseURL+"/v1/refunds", h, []byte(body), httpx.DefaultBodyLimit)
	if err != nil {
		return core.SendResult{}, err
	}
	return classify(resp)
}

// ErrorBody is Stripe's error envelope (https://docs.stripe.com/api/errors).
type ErrorBody struct {
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Param   string `json:"param"`
	} `json:"error"`
}

// Refund is the part of a Refund object the adapter reads
// (https://docs.stripe.com/api/refunds/object).
type Refund struct {
	ID       string            `json:"id"`
	Object   string            `json:"object"`
	Status   string            `json:"status"`
	Metadata map[string]string `json:"metadata"`
}

// Classify maps an error answer to a class (see the package comment).
func Classify(status int, errType, code string) core.ErrorClass {
	switch {
	case status == http.StatusTooManyRequests:
		return core.ClassRateLimited
	case status == http.StatusConflict && code == "idempotency_key_in_use":
		return core.ClassTransient
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return core.ClassUnauthorized
	case status == http.StatusBadRequest && errType == "idempotency_error":
		return core.ClassUnknownOutcome
	case status == http.StatusBadRequest || status == http.StatusPaymentRequired || status == http.StatusNotFound:
		return core.ClassRejectedInput
	}
	return core.ClassUnknownOutcome
}

func classify(resp *httpx.Response) (core.SendResult, error) {
	ev := core.Evidence{HTTPStatus: resp.Status}
	if id := resp.Header.Get("Request-Id"); id != "" {
		ev.Extra = map[string]string{"requestId": id}
	}
	replayed := resp.Header.Get("Idempotent-Replayed") == "true"
	if replayed {
		if ev.Extra == nil {
			ev.Extra = map[string]string{}
		}
		ev.Extra["replayed"] = "true"
	}
	if resp.Status >= 200 && resp.Status < 300 {
		var rf Refund
		if resp.ReadErr != nil || json.Unmarshal(resp.Body, &rf) != nil || rf.ID == "" {
			ev.Detail = "2xx without a readable refund id"
			return core.SendResult{}, httpx.Unknown(ev, "stripe: acknowledgement unreadable")
		}
		ev.ProviderCode = rf.Status
		return core.SendResult{ExternalID: rf.ID, Evidence: ev}, nil
	}
	var eb ErrorBody
	_ = json.Unmarshal(resp.Body, &eb)
	ev.ProviderCode = eb.Error.Code
	if ev.ProviderCode == "" {
		ev.ProviderCode = eb.Error.Type
	}
	// The message is Stripe's own error text (it names parameters, never
	// their values); a short excerpt helps the operator.
	ev.Detail = httpx.Excerpt([]byte(eb.Error.Message), 200)
	switch Classify(resp.Status, eb.Error.Type, eb.Error.Code) {
	case core.ClassRateLimited:
		// Stripe sends no Retry-After: the core's backoff decides.
		return core.SendResult{}, httpx.RateLimited(ev, httpx.RetryAfter(resp.Header.Get("Retry-After"), time.Now()), "stripe: rate limited (%s)", ev.ProviderCode)
	case core.ClassTransient:
		return core.SendResult{}, httpx.Transient(ev, "stripe: a request with this idempotency key is in progress; retry with the same key")
	case core.ClassUnauthorized:
		return core.SendResult{}, httpx.Unauthorized(ev, "stripe: %d %s", resp.Status, ev.ProviderCode)
	case core.ClassRejectedInput:
		return core.SendResult{}, httpx.Rejected(ev, "stripe: %d %s", resp.Status, ev.ProviderCode)
	}
	if replayed {
		return core.SendResult{}, httpx.Unknown(ev, "stripe: HTTP %d replayed for this idempotency key (the first attempt's answer; the refund may exist)", resp.Status)
	}
	return core.SendResult{}, httpx.Unknown(ev, "stripe: HTTP %d (the refund may exist)", resp.Status)
}

// Lookup is not declared: Stripe's metadata search lags by up to an hour.
func (p *Provider) Lookup(context.Context, core.SendRequest) (core.LookupResult, error) {
	return core.LookupResult{}, errors.New("stripe: no authoritative lookup (search lags up to an hour)")
}
