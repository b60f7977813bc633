// Package sandboxprovider is the provider adapter for the project's sandbox
// provider (sandbox/, contract in sandbox/README.md). It is also the model
// for real adapters: it classifies every failure into core's structured
// classes and declares capabilities as the provider publishes them.
package sandboxprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/botharness/outbox/core"
)

// Name is the provider name bots use.
const Name = "sandbox"

// Actions the sandbox accepts.
var Actions = map[string]bool{"send_message": true, "create_booking": true, "charge": true}

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
	c := *client
	// A redirect would be a second request we did not decide to make.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Provider{cfg: cfg, client: &c}
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
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url(account, "capabilities", nil), nil)
	if err != nil {
		return core.Capabilities{}, err
	}
	if tok := p.cfg.Tokens[account]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return core.Capabilities{}, fmt.Errorf("sandbox capabilities: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return core.Capabilities{}, fmt.Errorf("sandbox capabilities: status %d", resp.StatusCode)
	}
	var doc capsDoc
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&doc); err != nil {
		return core.Capabilities{}, fmt.Errorf("sandbox capabilities: %w", err)
	}
	return core.Capabilities{
		IdempotencyKeys: doc.IdempotencyKeys,
		KeyRetention:    time.Duration(doc.KeyRetentionSeconds) * time.Second,
		Lookup:          doc.Lookup,
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
	body, err := json.Marshal(sendBody{Action: r.Action, Target: r.Target, Payload: r.Payload, PayloadHash: r.PayloadHash, IntentID: r.IntentID})
	if err != nil {
		return core.SendResult{}, &core.PermanentError{Class: core.ClassRejectedInput, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	// wrote becomes true once any byte of the request may have left: from then
	// on a failure without a response is an unknown outcome, not a retry.
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteHeaderField: func(string, []string) { wrote.Store(true) },
		WroteHeaders:     func() { wrote.Store(true) },
		WroteRequest:     func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, p.url(r.Account, "messages", nil), bytes.NewReader(body))
	if err != nil {
		return core.SendResult{}, &core.PermanentError{Class: core.ClassRejectedInput, Err: err}
	}
	// net/http silently replays a request carrying an Idempotency-Key on a
	// reused connection that failed; only we may decide to resend, so make the
	// request non-replayable.
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", r.IdempotencyKey)
	if tok := p.cfg.Tokens[r.Account]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		ev := core.Evidence{Detail: err.Error()}
		if !wrote.Load() {
			return core.SendResult{}, &core.RetryableError{Class: core.ClassTransient, Evidence: ev, Err: fmt.Errorf("request never left: %w", err)}
		}
		return core.SendResult{}, &core.UnknownOutcomeError{Evidence: ev, Err: fmt.Errorf("no response after sending: %w", err)}
	}
	defer resp.Body.Close()
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return classify(resp, raw, readErr)
}

func classify(resp *http.Response, raw []byte, readErr error) (core.SendResult, error) {
	ev := core.Evidence{HTTPStatus: resp.StatusCode}
	var ed errorDoc
	_ = json.Unmarshal(raw, &ed)
	ev.ProviderCode = ed.Error.Code
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
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
	case resp.StatusCode == http.StatusTooManyRequests:
		ra := retryAfter(resp.Header.Get("Retry-After"))
		ev.RetryAfter = resp.Header.Get("Retry-After")
		return core.SendResult{}, &core.RetryableError{Class: core.ClassRateLimited, RetryAfter: ra, Evidence: ev, Err: errors.New("rate limited")}
	case resp.StatusCode == http.StatusServiceUnavailable && (ed.Error.Committed == nil || !*ed.Error.Committed):
		// The sandbox documents 503 as "not committed, safe to retry".
		return core.SendResult{}, &core.RetryableError{Class: core.ClassTransient, Evidence: ev, Err: errors.New("provider unavailable, not committed")}
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return core.SendResult{}, &core.PermanentError{Class: core.ClassUnauthorized, Evidence: ev, Err: fmt.Errorf("authorisation refused: %s", ed.Error.Code)}
	case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusUnprocessableEntity:
		return core.SendResult{}, &core.PermanentError{Class: core.ClassRejectedInput, Evidence: ev, Err: fmt.Errorf("rejected: %s", ed.Error.Code)}
	default:
		// 500 and any other status: the provider may have committed.
		return core.SendResult{}, &core.UnknownOutcomeError{Evidence: ev, Err: fmt.Errorf("ambiguous status %d", resp.StatusCode)}
	}
}

func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

type lookupDoc struct {
	State   string  `json:"state"`
	Message message `json:"message"`
}

// Lookup asks the sandbox whether the intent's key took effect.
func (p *Provider) Lookup(ctx context.Context, r core.SendRequest) (core.LookupResult, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url(r.Account, "messages", url.Values{"idempotencyKey": {r.IdempotencyKey}}), nil)
	if err != nil {
		return core.LookupResult{}, err
	}
	if tok := p.cfg.Tokens[r.Account]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return core.LookupResult{}, fmt.Errorf("sandbox lookup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return core.LookupResult{}, fmt.Errorf("sandbox lookup: status %d", resp.StatusCode)
	}
	var doc lookupDoc
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&doc); err != nil {
		return core.LookupResult{}, fmt.Errorf("sandbox lookup: %w", err)
	}
	ev := core.Evidence{HTTPStatus: resp.StatusCode, ProviderCode: doc.State}
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
