// Package gcal is the Google Calendar provider adapter (provider name
// "gcal"): events.insert (https://developers.google.com/workspace/calendar/api/v3/reference/events/insert),
// POST <baseUrl>/calendar/v3/calendars/{calendarId}/events with the Event
// as JSON; the intent's target is the calendar id and its payload the Event
// resource (summary, start, end, attendees, ...).
//
// What makes a retry safe is an id the client chooses: the adapter sets the
// event's id (https://developers.google.com/workspace/calendar/api/v3/reference/events#id:
// "characters allowed in the ID are those used in base32hex encoding, i.e.
// lowercase letters a-v and digits 0-9", 5 to 1024 characters, unique per
// calendar) to the base32hex encoding of the intent id, the same on every
// attempt, and the intent id in extendedProperties.private. A second insert
// with the id is 409 duplicate, but Google "cannot guarantee that ID
// collisions will be detected at event creation time", so a 409 is a hint,
// not proof: the adapter declares lookup (events.get by the same id,
// https://developers.google.com/workspace/calendar/api/v3/reference/events/get),
// and an ambiguous insert is reconciled by it. A lost response ends with one
// event and succeeded, never with a human.
//
// Authentication: the account's service-account key file (JSON), exchanged
// for an access token with golang.org/x/oauth2/google at the key file's
// token_uri (RFC 7523 JWT bearer grant), cached and refreshed by the library.
//
// Error mapping (https://developers.google.com/workspace/calendar/api/guides/errors),
// by HTTP status and error.errors[].reason, never by message text:
//
//	400 (invalid, required, timeRangeEmpty, ...)                    → rejected
//	401 authError                                                   → unauthorized
//	403 rateLimitExceeded, userRateLimitExceeded                    → rate limited
//	403 dailyLimitExceeded, quotaExceeded                           → rate limited
//	403 forbiddenForNonOrganizer, requiredAccessLevel, other 403    → unauthorized
//	404 notFound (the calendar)                                     → rejected
//	409 duplicate (our id exists, or may: not proof)                → unknown, reconciled by lookup
//	412 conditionNotMet                                             → rejected
//	429 rateLimitExceeded                                           → rate limited
//	5xx backendError                                                → unknown, reconciled by lookup
package gcal

import (
	"context"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

// Name is the provider name bots use.
const Name = "gcal"

// DefaultBaseURL is Google's API root.
const DefaultBaseURL = "https://www.googleapis.com"

// Scope is the OAuth scope the adapter asks for: events, read and write
// (https://developers.google.com/workspace/calendar/api/auth).
const Scope = "https://www.googleapis.com/auth/calendar.events"

// PropertyIntentKey is the private extended property carrying the intent id.
const PropertyIntentKey = "outbox_intent_id"

// Account is one service account (and, with domain-wide delegation, the user
// it acts as).
type Account struct {
	// ServiceAccount is the service account's key file, the JSON document
	// Google Cloud gives (type service_account, client_email, private_key,
	// token_uri, ...).
	ServiceAccount string `json:"serviceAccount"`
	// Subject, with domain-wide delegation, is the user to act as.
	Subject string `json:"subject,omitempty"`
}

// LogValue keeps secrets out of structured logs.
func (a Account) LogValue() slog.Value { return slog.StringValue("<gcal account, key redacted>") }

// Config configures the adapter.
type Config struct {
	BaseURL  string
	Accounts map[string]Account
	// Timeout bounds each request, token requests too (default 10s).
	Timeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Provider is the adapter.
type Provider struct {
	cfg    Config
	client *http.Client
	tokens map[string]oauth2.TokenSource
}

var _ core.Provider = (*Provider)(nil)

// New returns the adapter; each account's key file must parse. client may be nil.
func New(client *http.Client, cfg Config) (*Provider, error) {
	if err := httpx.Settings(Name, &cfg.BaseURL, DefaultBaseURL, &cfg.Timeout, &cfg.Now); err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, client: httpx.Client(client), tokens: map[string]oauth2.TokenSource{}}
	// Token requests go through their own client (bounded, no redirects
	// followed); the library caches the token and refreshes it when expired.
	tokenClient := &http.Client{Timeout: cfg.Timeout, Transport: p.client.Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tctx := context.WithValue(context.Background(), oauth2.HTTPClient, tokenClient)
	for name, a := range cfg.Accounts {
		if a.ServiceAccount == "" {
			return nil, fmt.Errorf("%s: account %q has no serviceAccount", Name, name)
		}
		jc, err := google.JWTConfigFromJSON([]byte(a.ServiceAccount), Scope)
		if err != nil || jc.Email == "" || len(jc.PrivateKey) == 0 || jc.TokenURL == "" {
			// Not err itself: a JSON error could quote the key file.
			return nil, fmt.Errorf("%s: account %q: serviceAccount is not a service-account key file (type service_account with client_email, private_key, token_uri)", Name, name)
		}
		jc.Subject = a.Subject
		p.tokens[name] = jc.TokenSource(tctx)
	}
	return p, nil
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
		return core.Capabilities{}, fmt.Errorf("gcal: unknown action %q", action)
	}
	return a.Declared, nil
}

var idEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// EventID is the event id of an intent: the base32hex (lowercase, no
// padding) encoding of the intent id, the same on every attempt and at
// least 5 characters.
func EventID(intentID string) string {
	id := idEncoding.EncodeToString([]byte(intentID))
	for len(id) < 5 {
		id += "0"
	}
	return id
}

func (p *Provider) eventsURL(calendar string) string {
	return p.cfg.BaseURL + "/calendar/v3/calendars/" + url.PathEscape(calendar) + "/events"
}

// token returns "Bearer <access token>" for the account; a failure to get
// one means nothing was sent to Calendar.
func (p *Provider) token(account string) (string, error) {
	ts := p.tokens[account]
	t, err := ts.Token()
	if err != nil {
		var re *oauth2.RetrieveError
		ev := core.Evidence{ProviderCode: "token_error"}
		if errors.As(err, &re) && re.Response != nil {
			ev.HTTPStatus = re.Response.StatusCode
			ev.ProviderCode = re.ErrorCode
			if re.Response.StatusCode == http.StatusBadRequest || re.Response.StatusCode == http.StatusUnauthorized {
				// invalid_grant, invalid_client: the key was revoked or deleted.
				return "", httpx.Unauthorized(ev, "gcal: the token endpoint refused the service account (%s)", re.ErrorCode)
			}
		}
		return "", httpx.Transient(ev, "gcal: no access token (nothing sent): %v", httpx.Redact(err))
	}
	return "Bearer " + t.AccessToken, nil
}

// buildEvent returns the Event with our id and the intent id in a private
// extended property.
func buildEvent(r core.SendRequest) ([]byte, error) {
	ev, err := httpx.ObjectArgs(r.Payload, "Event fields")
	if err != nil {
		return nil, err
	}
	if r.Target == "" {
		return nil, errors.New("target (calendar id) is required")
	}
	id := EventID(r.IntentID)
	if raw, ok := ev["id"]; ok {
		var s string
		if json.Unmarshal(raw, &s) != nil || s != id {
			return nil, errors.New("the event id is the outbox's (derived from the intent)")
		}
	}
	ev["id"], _ = json.Marshal(id)
	var xp struct {
		Private map[string]string `json:"private"`
		Shared  json.RawMessage   `json:"shared,omitempty"`
	}
	if raw, ok := ev["extendedProperties"]; ok {
		if err := json.Unmarshal(raw, &xp); err != nil {
			return nil, errors.New("extendedProperties must be an object of string maps")
		}
	}
	if xp.Private == nil {
		xp.Private = map[string]string{}
	}
	if v, ok := xp.Private[PropertyIntentKey]; ok && v != r.IntentID {
		return nil, fmt.Errorf("extendedProperties.private.%s is the outbox's", PropertyIntentKey)
	}
	xp.Private[PropertyIntentKey] = r.IntentID
	ev["extendedProperties"], _ = json.Marshal(xp)
	return httpx.MarshalVerbatim(ev)
}

// Send inserts the event.
func (p *Provider) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	if _, err := httpx.SendAccount(Name, p.cfg.Accounts, r.Account); err != nil {
		return core.SendResult{}, err
	}
	if !p.SupportsAction(r.Action) {
		return core.SendResult{}, httpx.Rejected(core.Evidence{ProviderCode: "unknown_action"}, "gcal: unknown action %q", r.Action)
	}
	body, err := buildEvent(r)
	if err != nil {
		return core.SendResult{}, httpx.InvalidPayload(Name, err)
	}
	auth, err := p.token(r.Account)
	if err != nil {
		return core.SendResult{}, err
	}
	h := http.Header{"Content-Type": {"application/json"}, "Authorization": {auth}}
	resp, err := httpx.Call(ctx, p.client, p.cfg.Timeout, http.MethodPost, p.eventsURL(r.Target), h, body, httpx.DefaultBodyLimit)
	if err != nil {
		return core.SendResult{}, err
	}
	return classify(resp, EventID(r.IntentID), p.cfg.Now())
}

// ErrorBody is Google's error envelope.
type ErrorBody struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Errors  []struct {
			Domain string `json:"domain"`
			Reason string `json:"reason"`
		} `json:"errors"`
	} `json:"error"`
}

// Reason is the first error reason.
func (e ErrorBody) Reason() string {
	if len(e.Error.Errors) > 0 {
		return e.Error.Errors[0].Reason
	}
	return ""
}

// Event is the part of an Event the adapter reads.
type Event struct {
	ID                 string `json:"id"`
	Status             string `json:"status"`
	HTMLLink           string `json:"htmlLink"`
	ExtendedProperties struct {
		Private map[string]string `json:"private"`
	} `json:"extendedProperties"`
}

// Classify maps an error answer (status and reason) to a class.
func Classify(status int, reason string) core.ErrorClass {
	switch {
	case status == http.StatusTooManyRequests:
		return core.ClassRateLimited
	case status == http.StatusForbidden && (reason == "rateLimitExceeded" || reason == "userRateLimitExceeded" || reason == "dailyLimitExceeded" || reason == "quotaExceeded"):
		return core.ClassRateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return core.ClassUnauthorized
	case status == http.StatusBadRequest || status == http.StatusNotFound || status == http.StatusPreconditionFailed:
		return core.ClassRejectedInput
	}
	return core.ClassUnknownOutcome // 409 duplicate, 5xx: the lookup decides
}

func classify(resp *httpx.Response, id string, now time.Time) (core.SendResult, error) {
	ev := core.Evidence{HTTPStatus: resp.Status}
	if resp.Status >= 200 && resp.Status < 300 {
		var e Event
		if resp.ReadErr != nil || json.Unmarshal(resp.Body, &e) != nil || e.ID == "" {
			ev.Detail = "2xx without a readable event"
			return core.SendResult{}, httpx.Unknown(ev, "gcal: acknowledgement unreadable")
		}
		if e.ID != id {
			ev.Detail = "the answer names another event id"
			return core.SendResult{}, httpx.Unknown(ev, "gcal: inserted event id differs from ours")
		}
		ev.ProviderCode = e.Status
		return core.SendResult{ExternalID: e.ID, Evidence: ev}, nil
	}
	var eb ErrorBody
	_ = json.Unmarshal(resp.Body, &eb)
	ev.ProviderCode = eb.Reason()
	ev.Detail = httpx.Excerpt([]byte(eb.Error.Message), 200)
	switch Classify(resp.Status, eb.Reason()) {
	case core.ClassRateLimited:
		return core.SendResult{}, httpx.RateLimited(ev, httpx.RetryAfter(resp.Header.Get("Retry-After"), now), "gcal: rate limited (%s)", ev.ProviderCode)
	case core.ClassUnauthorized:
		return core.SendResult{}, httpx.Unauthorized(ev, "gcal: %d %s", resp.Status, ev.ProviderCode)
	case core.ClassRejectedInput:
		return core.SendResult{}, httpx.Rejected(ev, "gcal: %d %s", resp.Status, ev.ProviderCode)
	}
	if resp.Status == http.StatusConflict {
		return core.SendResult{}, httpx.Unknown(ev, "gcal: 409 %s: an event with our id may exist (not proof; the lookup decides)", ev.ProviderCode)
	}
	return core.SendResult{}, httpx.Unknown(ev, "gcal: HTTP %d (the event may exist)", resp.Status)
}

// ErrForeignEvent: an event with our id exists but does not carry our
// intent id (a collision Google did not detect): neither found nor absent.
var ErrForeignEvent = errors.New("gcal lookup: an event with the intent's id belongs to something else")

// Lookup reads the event by its id (events.get): found (also when it was
// cancelled since: the insert took effect), absent on 404.
func (p *Provider) Lookup(ctx context.Context, r core.SendRequest) (core.LookupResult, error) {
	if _, err := httpx.SendAccount(Name, p.cfg.Accounts, r.Account); err != nil {
		return core.LookupResult{}, err
	}
	auth, err := p.token(r.Account)
	if err != nil {
		return core.LookupResult{}, err
	}
	id := EventID(r.IntentID)
	h := http.Header{"Authorization": {auth}}
	resp, err := httpx.Call(ctx, p.client, p.cfg.Timeout, http.MethodGet, p.eventsURL(r.Target)+"/"+url.PathEscape(id), h, nil, httpx.DefaultBodyLimit)
	if err != nil {
		return core.LookupResult{}, err
	}
	ev := core.Evidence{HTTPStatus: resp.Status}
	switch {
	case resp.Status == http.StatusOK:
		var e Event
		if resp.ReadErr != nil || json.Unmarshal(resp.Body, &e) != nil || e.ID != id {
			return core.LookupResult{}, errors.New("gcal lookup: unreadable event")
		}
		if got := e.ExtendedProperties.Private[PropertyIntentKey]; got != r.IntentID {
			return core.LookupResult{}, ErrForeignEvent
		}
		ev.ProviderCode = e.Status
		return core.LookupResult{State: core.LookupFound, ExternalID: e.ID, Evidence: ev}, nil
	case resp.Status == http.StatusNotFound:
		var eb ErrorBody
		_ = json.Unmarshal(resp.Body, &eb)
		ev.ProviderCode = eb.Reason()
		return core.LookupResult{State: core.LookupAbsent, Evidence: ev}, nil
	}
	return core.LookupResult{}, fmt.Errorf("gcal lookup: HTTP %d", resp.Status)
}
