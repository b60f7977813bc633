// Package httpsigned is the generic signed-HTTP provider (provider name
// "http"): it POSTs each intent as JSON to a per-account URL, signed with the
// Standard Webhooks scheme, and carries the intent's stable identity as
// Idempotency-Key.
//
// What the receiver promises is configuration, because a generic endpoint
// can promise anything or nothing. Per account the operator declares:
//
//   - honoursKeys + keyRetentionSeconds: the receiver deduplicates by
//     Idempotency-Key (and by webhook-id, which is the same value) for at
//     least that long. Declared as core.Capabilities.IdempotencyKeys.
//   - lookupUrl: GET <lookupUrl>?key=<key> answers authoritatively
//     {"state":"found","id":"..."} | {"state":"absent"} | {"state":"pending"}.
//     Declared as core.Capabilities.Lookup.
//   - conflictMeans: what a 409 on a keyed request means: "duplicate" (the
//     key was already processed: success, nothing new happened) or
//     "in-progress" (another request with this key is being processed; this
//     one had no effect). Anything else: unknown outcome.
//   - unavailableIsSafe: a 503 is documented as "not processed".
//
// Status mapping: 2xx success (external id: JSON "id", else the header named
// by idHeader, else the idempotency key); 400/404/422 rejected; 401/403/410
// authorisation; 409 per conflictMeans; 429 rate limited (Retry-After);
// 503 transient only when declared safe; every other status, and any
// failure after the request may have left, unknown outcome.
//
// The request body is deterministic for an intent (no per-attempt fields), so
// a receiver that compares the body of a reused key sees the same bytes every
// time; only webhook-timestamp and the signature change per attempt.
package httpsigned

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

// Name is the provider name bots use.
const Name = "http"

// 409 contracts a receiver can declare.
const (
	ConflictDuplicate  = "duplicate"
	ConflictInProgress = "in-progress"
)

// Header names.
const (
	HeaderID             = "webhook-id"
	HeaderTimestamp      = "webhook-timestamp"
	HeaderSignature      = "webhook-signature"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderAttempt        = "Outbox-Attempt"
)

// Account is one receiver endpoint.
type Account struct {
	URL string `json:"url"`
	// Secret is the Standard Webhooks signing secret, "whsec_" + base64.
	Secret string `json:"secret"`
	// PreviousSecret, during a rotation, adds a second signature.
	PreviousSecret      string `json:"previousSecret,omitempty"`
	HonoursKeys         bool   `json:"honoursKeys,omitempty"`
	KeyRetentionSeconds int64  `json:"keyRetentionSeconds,omitempty"`
	LookupURL           string `json:"lookupUrl,omitempty"`
	ConflictMeans       string `json:"conflictMeans,omitempty"`
	UnavailableIsSafe   bool   `json:"unavailableIsSafe,omitempty"`
	// IDHeader names a response header carrying the receiver's id for the
	// effect, used when the body has no "id".
	IDHeader string `json:"idHeader,omitempty"`
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token string `json:"token,omitempty"`
}

// LogValue keeps secrets out of structured logs.
func (a Account) LogValue() slog.Value {
	return slog.GroupValue(slog.String("url", httpx.RedactURL(a.URL)), slog.Bool("honoursKeys", a.HonoursKeys),
		slog.Bool("lookup", a.LookupURL != ""), slog.String("secret", "<redacted>"))
}

// Config configures the adapter.
type Config struct {
	Accounts map[string]Account
	// Actions restricts the accepted actions; empty accepts any action that
	// is a plain name (letters, digits, '_', '-', '.').
	Actions []string
	// Timeout bounds each request (default 10s).
	Timeout time.Duration
	// Now is the clock for webhook-timestamp (default time.Now).
	Now func() time.Time
}

// Provider is the adapter.
type Provider struct {
	cfg     Config
	client  *http.Client
	keys    map[string][][]byte // account -> signing keys (current first)
	actions map[string]bool
}

var _ core.Provider = (*Provider)(nil)

var actionName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}$`)

// New validates cfg and returns the adapter. client may be nil.
func New(client *http.Client, cfg Config) (*Provider, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Provider{cfg: cfg, client: httpx.Client(client), keys: map[string][][]byte{}}
	if len(cfg.Actions) > 0 {
		p.actions = map[string]bool{}
		for _, a := range cfg.Actions {
			p.actions[a] = true
		}
	}
	for name, a := range cfg.Accounts {
		if err := validateAccount(a); err != nil {
			return nil, fmt.Errorf("http provider account %q: %w", name, err)
		}
		k, _ := DecodeSecret(a.Secret)
		keys := [][]byte{k}
		if a.PreviousSecret != "" {
			pk, _ := DecodeSecret(a.PreviousSecret)
			keys = append(keys, pk)
		}
		p.keys[name] = keys
	}
	return p, nil
}

func validateAccount(a Account) error {
	if u, err := url.Parse(a.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("url must be an absolute http(s) URL")
	}
	if _, err := DecodeSecret(a.Secret); err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	if a.PreviousSecret != "" {
		if _, err := DecodeSecret(a.PreviousSecret); err != nil {
			return fmt.Errorf("previousSecret: %w", err)
		}
	}
	if a.HonoursKeys && a.KeyRetentionSeconds <= 0 {
		return errors.New("honoursKeys needs keyRetentionSeconds > 0 (how long the receiver remembers a key)")
	}
	if a.KeyRetentionSeconds < 0 {
		return errors.New("keyRetentionSeconds must not be negative")
	}
	if a.LookupURL != "" {
		if u, err := url.Parse(a.LookupURL); err != nil || u.Host == "" {
			return errors.New("lookupUrl must be an absolute URL")
		}
	}
	switch a.ConflictMeans {
	case "":
	case ConflictDuplicate, ConflictInProgress:
		if !a.HonoursKeys {
			return fmt.Errorf("conflictMeans %q only makes sense for a receiver that honours keys", a.ConflictMeans)
		}
	default:
		return fmt.Errorf("conflictMeans must be %q or %q", ConflictDuplicate, ConflictInProgress)
	}
	return nil
}

// DecodeSecret decodes a Standard Webhooks symmetric secret ("whsec_" +
// base64; the prefix is optional). The spec asks for 24 to 64 bytes.
func DecodeSecret(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
	if err != nil {
		return nil, errors.New("not whsec_<base64>")
	}
	if len(k) < 24 || len(k) > 64 {
		return nil, fmt.Errorf("key is %d bytes; Standard Webhooks asks for 24 to 64", len(k))
	}
	return k, nil
}

// Sign returns the webhook-signature value "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>" for each key, space-separated.
func Sign(keys [][]byte, id string, ts int64, body []byte) string {
	sigs := make([]string, 0, len(keys))
	for _, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write([]byte(strconv.FormatInt(ts, 10)))
		m.Write([]byte{'.'})
		m.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}

func (p *Provider) Name() string { return Name }

func (p *Provider) SupportsAction(action string) bool {
	if p.actions != nil {
		return p.actions[action]
	}
	return actionName.MatchString(action)
}

// Capabilities declares what the account's receiver promises (see package doc).
func (p *Provider) Capabilities(_ context.Context, account, action string) (core.Capabilities, error) {
	a, ok := p.cfg.Accounts[account]
	if !ok {
		return core.Capabilities{}, fmt.Errorf("http provider: unknown account %q", account)
	}
	c := core.Capabilities{Lookup: a.LookupURL != ""}
	if a.HonoursKeys {
		c.IdempotencyKeys = true
		c.KeyRetention = time.Duration(a.KeyRetentionSeconds) * time.Second
	}
	return c, nil
}

// Envelope is the JSON body POSTed for an intent (Standard Webhooks payload
// structure: type + data).
type Envelope struct {
	Type string       `json:"type"`
	Data EnvelopeData `json:"data"`
}

// EnvelopeData carries the intent.
type EnvelopeData struct {
	IntentID    string          `json:"intentId"`
	Bot         string          `json:"bot"`
	Account     string          `json:"account"`
	Action      string          `json:"action"`
	Target      string          `json:"target"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	PayloadHash string          `json:"payloadHash,omitempty"`
}

// EventType is the envelope type for an action.
func EventType(action string) string { return "outbox." + action }

func (p *Provider) headers(keys [][]byte, key string, body []byte, a Account) http.Header {
	ts := p.cfg.Now().Unix()
	h := http.Header{}
	// webhook-id is the intent identity: Standard Webhooks requires it to stay
	// the same on every retry of the same message, which is exactly what lets
	// the receiver deduplicate.
	h.Set(HeaderID, key)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Sign(keys, key, ts, body))
	if a.Token != "" {
		h.Set("Authorization", "Bearer "+a.Token)
	}
	h.Set("User-Agent", "botharness-outbox/1")
	return h
}

func (p *Provider) account(name string) (Account, [][]byte, error) {
	a, ok := p.cfg.Accounts[name]
	if !ok {
		return Account{}, nil, httpx.Rejected(core.Evidence{ProviderCode: "unknown_account"}, "http provider: account %q is not configured", name)
	}
	return a, p.keys[name], nil
}

func validKey(k string) bool {
	// The spec forbids '.' in the id (it delimits the signed content).
	return k != "" && len(k) <= 255 && !strings.ContainsAny(k, ". \t\r\n")
}

// Send POSTs the intent.
func (p *Provider) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	a, keys, err := p.account(r.Account)
	if err != nil {
		return core.SendResult{}, err
	}
	if !validKey(r.IdempotencyKey) {
		return core.SendResult{}, httpx.Rejected(core.Evidence{ProviderCode: "invalid_key"}, "idempotency key unusable as webhook-id")
	}
	body, err := httpx.MarshalVerbatim(Envelope{Type: EventType(r.Action), Data: EnvelopeData{
		IntentID: r.IntentID, Bot: r.Bot, Account: r.Account, Action: r.Action, Target: r.Target,
		Payload: json.RawMessage(r.Payload), PayloadHash: r.PayloadHash,
	}})
	if err != nil {
		return core.SendResult{}, httpx.Rejected(core.Evidence{ProviderCode: "invalid_payload"}, "encode envelope: %v", err)
	}
	h := p.headers(keys, r.IdempotencyKey, body, a)
	h.Set("Content-Type", "application/json")
	h.Set(HeaderIdempotencyKey, r.IdempotencyKey)
	h.Set(HeaderAttempt, strconv.Itoa(r.Attempt))
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	resp, err := httpx.Do(ctx, p.client, http.MethodPost, a.URL, h, body, 64<<10)
	if err != nil {
		return core.SendResult{}, err
	}
	return classify(resp, a, r.IdempotencyKey, p.cfg.Now())
}

type ackDoc struct {
	ID    json.RawMessage `json:"id"`
	Code  string          `json:"code"`
	Error json.RawMessage `json:"error"`
}

// idFrom reads "id" as a string or a number.
func idFrom(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// errorCode extracts a machine-readable code from common error shapes:
// {"code":"x"}, {"error":"x"}, {"error":{"code":"x"}}.
func errorCode(d ackDoc) string {
	if d.Code != "" {
		return d.Code
	}
	var s string
	if json.Unmarshal(d.Error, &s) == nil {
		return s
	}
	var o struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(d.Error, &o) == nil {
		return o.Code
	}
	return ""
}

func classify(resp *httpx.Response, a Account, key string, now time.Time) (core.SendResult, error) {
	var doc ackDoc
	_ = json.Unmarshal(resp.Body, &doc)
	ev := core.Evidence{HTTPStatus: resp.Status, ProviderCode: errorCode(doc)}
	externalID := func() string {
		if id := idFrom(doc.ID); id != "" {
			return id
		}
		if a.IDHeader != "" {
			if id := resp.Header.Get(a.IDHeader); id != "" {
				return id
			}
		}
		return key
	}
	s := resp.Status
	switch {
	case s >= 200 && s < 300:
		// The status line is the receiver's acknowledgement; a body cut short
		// after it does not make the acknowledgement less true.
		if resp.ReadErr != nil {
			ev.Detail = "acknowledged; body unreadable: " + resp.ReadErr.Error()
		}
		return core.SendResult{ExternalID: externalID(), Evidence: ev}, nil
	case s == http.StatusConflict:
		switch a.ConflictMeans {
		case ConflictDuplicate:
			ev.Extra = map[string]string{"conflict": ConflictDuplicate}
			ev.Detail = "receiver reports the key as already processed"
			return core.SendResult{ExternalID: externalID(), Evidence: ev}, nil
		case ConflictInProgress:
			// This request had no effect; the one in progress may. A retry
			// with the same key is deduplicated by the receiver.
			return core.SendResult{}, httpx.Transient(ev, "another request with this key is in progress")
		}
		return core.SendResult{}, httpx.Unknown(ev, "409 without a declared meaning")
	case s == http.StatusTooManyRequests:
		ev.RetryAfter = resp.Header.Get("Retry-After")
		return core.SendResult{}, httpx.RateLimited(ev, httpx.RetryAfter(ev.RetryAfter, now), "rate limited")
	case s == http.StatusUnauthorized || s == http.StatusForbidden || s == http.StatusGone:
		return core.SendResult{}, httpx.Unauthorized(ev, "receiver refused authorisation (%d)", s)
	case s == http.StatusBadRequest || s == http.StatusNotFound || s == http.StatusUnprocessableEntity:
		return core.SendResult{}, httpx.Rejected(ev, "receiver rejected the request (%d)", s)
	case s == http.StatusServiceUnavailable && a.UnavailableIsSafe:
		ev.RetryAfter = resp.Header.Get("Retry-After")
		return core.SendResult{}, &core.RetryableError{Class: core.ClassTransient, RetryAfter: httpx.RetryAfter(ev.RetryAfter, now), Evidence: ev,
			Err: errors.New("receiver unavailable; declared as not processed")}
	default:
		return core.SendResult{}, httpx.Unknown(ev, "ambiguous status %d", s)
	}
}

type lookupDoc struct {
	State string          `json:"state"`
	ID    json.RawMessage `json:"id"`
}

// Lookup asks the receiver's lookup endpoint about the key. The GET is signed
// like a delivery (empty body) so the receiver can authenticate it.
func (p *Provider) Lookup(ctx context.Context, r core.SendRequest) (core.LookupResult, error) {
	a, keys, err := p.account(r.Account)
	if err != nil {
		return core.LookupResult{}, err
	}
	if a.LookupURL == "" {
		return core.LookupResult{}, errors.New("http provider: account declares no lookup")
	}
	u, err := url.Parse(a.LookupURL)
	if err != nil {
		return core.LookupResult{}, errors.New("http provider: bad lookupUrl")
	}
	q := u.Query()
	q.Set("key", r.IdempotencyKey)
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	resp, err := httpx.Do(ctx, p.client, http.MethodGet, u.String(), p.headers(keys, r.IdempotencyKey, nil, a), nil, 64<<10)
	if err != nil {
		return core.LookupResult{}, fmt.Errorf("http lookup: %w", err)
	}
	if resp.Status != http.StatusOK || resp.ReadErr != nil {
		return core.LookupResult{}, fmt.Errorf("http lookup: status %d", resp.Status)
	}
	var doc lookupDoc
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		return core.LookupResult{}, fmt.Errorf("http lookup: %w", err)
	}
	ev := core.Evidence{HTTPStatus: resp.Status, ProviderCode: doc.State}
	switch core.LookupState(doc.State) {
	case core.LookupFound:
		id := idFrom(doc.ID)
		if id == "" {
			id = r.IdempotencyKey
		}
		return core.LookupResult{State: core.LookupFound, ExternalID: id, Evidence: ev}, nil
	case core.LookupAbsent, core.LookupPending:
		return core.LookupResult{State: core.LookupState(doc.State), Evidence: ev}, nil
	}
	return core.LookupResult{}, fmt.Errorf("http lookup: unknown state %q", doc.State)
}
