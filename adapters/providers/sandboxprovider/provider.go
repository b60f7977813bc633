// Package sandboxprovider is the provider adapter for the project's sandbox
// provider (sandbox/, contract in sandbox/README.md). It is also the model
// for real adapters: it classifies every failure into core's structured
// classes and declares capabilities as the provider publishes them.
package sandboxprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

// Name is the provider name bots use.
const Name = "sandbox"

// Actions the sandbox accepts. update_message sets the text of a message an
// earlier send_message created (target: its "sbx_…" id): a set-to-value
// action (sandbox/messages.go).
var Actions = map[string]bool{"send_message": true, "create_booking": true, "charge": true, "update_message": true}

// ValueSubject: update_message sets the text of the message its target
// names, whatever the account declares.
func (p *Provider) ValueSubject(action, target string, _ []byte) string {
	if action == "update_message" {
		return target
	}
	return ""
}

// Config configures the adapter.
type Config struct {
	BaseURL string            `json:"baseUrl"`
	Timeout time.Duration     `json:"-"`
	Tokens  map[string]string `json:"tokens,omitempty"` // per account bearer token
}

// Provider talks to the sandbox over real HTTP.
type Provider struct {
	cfg    Config
	client *http.Client
}

var _ core.Provider = (*Provider)(nil)

// New returns an adapter. client should have no global timeout; the adapter
// applies cfg.Timeout per request.
func New(client *http.Client, cfg Config) *Provider {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	// httpx.Client never follows redirects: a redirect would be a second
	// request nobody decided to make.
	return &Provider{cfg: cfg, client: httpx.Client(client)}
}

func (p *Provider) Name() string                      { return Name }
func (p *Provider) SupportsAction(action string) bool { return Actions[action] }

type capsDoc struct {
	IdempotencyKeys     bool  `json:"idempotencyKeys"`
	KeyRetentionSeconds int64 `json:"keyRetentionSeconds"`
	Lookup              bool  `json:"lookup"`
}

// Capabilities reads what the sandbox publishes for the account.
func (p *Provider) Capabilities(ctx context.Context, account, action string) (core.Capabilities, error) {
	doc, _, err := getDoc[capsDoc](ctx, p, account, p.url(account, "capabilities", nil), "capabilities")
	if err != nil {
		return core.Capabilities{}, err
	}
	return core.Capabilities{
		IdempotencyKeys: doc.IdempotencyKeys,
		KeyRetention:    time.Duration(doc.KeyRetentionSeconds) * time.Second,
		Lookup:          doc.Lookup,
		// Lookup by key finds the update's own commit, which is fine; the
		// set-to-value declaration is what lets it retry without either.
		NaturallyIdempotent: action == "update_message",
	}, nil
}

func (p *Provider) url(account, tail string, q url.Values) string {
	u := p.cfg.BaseURL + "/v1/accounts/" + url.PathEscape(account) + "/" + tail
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

type sendBody struct {
	Action      string          `json:"action"`
	Target      string          `json:"target"`
	Payload     json.RawMessage `json:"payload"`
	PayloadHash string          `json:"payloadHash"`
	IntentID    string          `json:"intentId"`
}

type message struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

type errorDoc struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Committed *bool  `json:"committed"`
	} `json:"error"`
}

// Send posts the message with the intent's stable idempotency key.
func (p *Provider) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	body, err := httpx.MarshalVerbatim(sendBody{Action: r.Action, Target: r.Target, Payload: r.Payload, PayloadHash: r.PayloadHash, IntentID: r.IntentID})
	if err != nil {
		return core.SendResult{}, &core.PermanentError{Class: core.ClassRejectedInput, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {r.IdempotencyKey}}
	if tok := p.cfg.Tokens[r.Account]; tok != "" {
		h.Set("Authorization", "Bearer "+tok)
	}
	// httpx decides transient (nothing left) vs unknown (something may have
	// left) and keeps net/http from replaying the request on its own.
	resp, err := httpx.Do(ctx, p.client, http.MethodPost, p.url(r.Account, "messages", nil), h, body, 64<<10)
	if err != nil {
		return core.SendResult{}, err
	}
	return classify(resp)
}

func classify(resp *httpx.Response) (core.SendResult, error) {
	raw, readErr := resp.Body, resp.ReadErr
	ev := core.Evidence{HTTPStatus: resp.Status}
	var ed errorDoc
	_ = json.Unmarshal(raw, &ed)
	ev.ProviderCode = ed.Error.Code
	switch {
	case resp.Status >= 200 && resp.Status < 300:
		var m message
		if readErr != nil || json.Unmarshal(raw, &m) != nil || m.ID == "" {
			// Accepted, but the proof (the message id) was lost on the way.
			ev.Detail = "2xx without a readable message id"
			return core.SendResult{}, &core.UnknownOutcomeError{Evidence: ev, Err: errors.New("acknowledgement unreadable")}
		}
		ev.ProviderCode = m.Status
		if resp.Header.Get("Idempotent-Replayed") == "true" {
			ev.Extra = map[string]string{"replayed": "true"}
		}
		return core.SendResult{ExternalID: m.ID, Evidence: ev}, nil
	case resp.Status == http.StatusTooManyRequests:
		ra := httpx.RetryAfter(resp.Header.Get("Retry-After"), time.Now())
		ev.RetryAfter = resp.Header.Get("Retry-After")
		return core.SendResult{}, &core.RetryableError{Class: core.ClassRateLimited, RetryAfter: ra, Evidence: ev, Err: errors.New("rate limited")}
	case resp.Status == http.StatusServiceUnavailable && (ed.Error.Committed == nil || !*ed.Error.Committed):
		// The sandbox documents 503 as "not committed, safe to retry".
		return core.SendResult{}, &core.RetryableError{Class: core.ClassTransient, Evidence: ev, Err: errors.New("provider unavailable, not committed")}
	case resp.Status == http.StatusUnauthorized || resp.Status == http.StatusForbidden:
		return core.SendResult{}, &core.PermanentError{Class: core.ClassUnauthorized, Evidence: ev, Err: fmt.Errorf("authorisation refused: %s", ed.Error.Code)}
	case resp.Status == http.StatusBadRequest || resp.Status == http.StatusNotFound || resp.Status == http.StatusUnprocessableEntity:
		return core.SendResult{}, &core.PermanentError{Class: core.ClassRejectedInput, Evidence: ev, Err: fmt.Errorf("rejected: %s", ed.Error.Code)}
	default:
		// 500 and any other status: the provider may have committed.
		return core.SendResult{}, &core.UnknownOutcomeError{Evidence: ev, Err: fmt.Errorf("ambiguous status %d", resp.Status)}
	}
}

// getDoc reads one JSON document (64 KiB at most) of the sandbox's account
// API with the account's token, bounded by the request timeout; what names
// the call in errors.
func getDoc[T any](ctx context.Context, p *Provider, account, rawURL, what string) (doc T, status int, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return doc, 0, err
	}
	if tok := p.cfg.Tokens[account]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return doc, 0, fmt.Errorf("sandbox %s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return doc, resp.StatusCode, fmt.Errorf("sandbox %s: status %d", what, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&doc); err != nil {
		return doc, resp.StatusCode, fmt.Errorf("sandbox %s: %w", what, err)
	}
	return doc, resp.StatusCode, nil
}

type lookupDoc struct {
	State   string  `json:"state"`
	Message message `json:"message"`
}

// Lookup asks the sandbox whether the intent's key took effect.
func (p *Provider) Lookup(ctx context.Context, r core.SendRequest) (core.LookupResult, error) {
	doc, status, err := getDoc[lookupDoc](ctx, p, r.Account, p.url(r.Account, "messages", url.Values{"idempotencyKey": {r.IdempotencyKey}}), "lookup")
	if err != nil {
		return core.LookupResult{}, err
	}
	ev := core.Evidence{HTTPStatus: status, ProviderCode: doc.State}
	switch core.LookupState(doc.State) {
	case core.LookupFound:
		if doc.Message.ID == "" {
			return core.LookupResult{}, errors.New("sandbox lookup: found without a message id")
		}
		return core.LookupResult{State: core.LookupFound, ExternalID: doc.Message.ID, Evidence: ev}, nil
	case core.LookupAbsent, core.LookupPending:
		return core.LookupResult{State: core.LookupState(doc.State), Evidence: ev}, nil
	}
	return core.LookupResult{}, fmt.Errorf("sandbox lookup: unknown state %q", doc.State)
}
