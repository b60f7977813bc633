// Package twilio is the Twilio provider adapter (provider name "twilio"):
// SMS through the Messages resource (action send_sms,
// https://www.twilio.com/docs/messaging/api/message-resource#create-a-message-resource)
// and voice calls through the Calls resource (action place_call,
// https://www.twilio.com/docs/voice/api/call-resource#create-a-call-resource),
// POST /2010-04-01/Accounts/{AccountSid}/Messages.json and …/Calls.json,
// form-encoded, HTTP basic auth with the account SID and auth token (or an
// API key SID and secret, https://www.twilio.com/docs/usage/requests-to-twilio).
//
// Twilio has neither an idempotency key nor a lookup by an id we choose (the
// Messages and Calls lists filter by number and date only), and retrying a
// create after a 500 or a lost answer can send the SMS again or ring the
// phone twice. So the adapter declares neither: an ambiguous failure goes to
// needs-human at once. Every create carries a StatusCallback URL
// (https://www.twilio.com/docs/messaging/guides/track-outbound-message-status,
// https://www.twilio.com/docs/voice/api/call-resource#statuscallback)
// pointing at the outbox's /v1/webhooks/twilio/<account>?intent=<intent id>,
// built from the configured public base URL, so a status callback names the
// intent even when the create's answer was lost (webhook.go settles it).
//
// Error mapping (https://www.twilio.com/docs/usage/twilios-response#response-formats-exceptions,
// https://www.twilio.com/docs/api/errors), by Twilio's error code first and
// the HTTP status second, never by message text (which quotes numbers):
//
//	20429 Too Many Requests (HTTP 429)                         → rate limited (Retry-After if sent, else backoff)
//	20003 Authenticate, 20005 account not active; HTTP 401/403  → unauthorized
//	21211 invalid To, 21212 invalid From, 21210 From not verified,
//	21215 geo permissions (calls), 21408 region not enabled (SMS),
//	21602 body required, 21606 From not SMS-capable, 21610 recipient
//	unsubscribed, 21614 not a mobile number, 21617 body too long,
//	20404 not found; any other HTTP 400/404/422                → rejected (nothing was created)
//	20500 internal error, 20503 unavailable, any other 5xx      → unknown (the message or call may exist)
package twilio

import (
	"context"
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
const Name = "twilio"

// DefaultBaseURL is Twilio's REST API root.
const DefaultBaseURL = "https://api.twilio.com"

// Actions.
const (
	ActionSMS  = "send_sms"
	ActionCall = "place_call"
)

// IntentParam is the StatusCallback query parameter carrying the intent id.
const IntentParam = "intent"

// WebhookPath is the outbox's callback path for an account, under the
// public base URL.
func WebhookPath(account string) string {
	return "/v1/webhooks/" + Name + "/" + url.PathEscape(account)
}

// Account is one Twilio account.
type Account struct {
	// AccountSID is the account (AC…): the path of every request and the
	// basic-auth user unless an API key is set.
	AccountSID string `json:"accountSid"`
	// AuthToken authenticates requests (without an API key) and verifies
	// X-Twilio-Signature on callbacks (always: Twilio signs with it).
	AuthToken string `json:"authToken"`
	// APIKeySID and APIKeySecret, when set, authenticate requests instead
	// of the auth token (https://www.twilio.com/docs/iam/api-keys).
	APIKeySID    string `json:"apiKeySid,omitempty"`
	APIKeySecret string `json:"apiKeySecret,omitempty"`
	// From is the sending number (E.164) for SMS and the caller id of calls.
	From string `json:"from,omitempty"`
	// MessagingServiceSID (MG…) sends SMS through a Messaging Service
	// instead of From.
	MessagingServiceSID string `json:"messagingServiceSid,omitempty"`
}

// LogValue keeps secrets out of structured logs.
func (a Account) LogValue() slog.Value {
	return slog.StringValue("<twilio account " + a.AccountSID + ", secrets redacted>")
}

// Config configures the adapter.
type Config struct {
	BaseURL string
	// StatusCallbackBaseURL is the outbox's public API URL as Twilio must
	// call it (scheme, host and any base path); the status callback of an
	// intent is StatusCallbackBaseURL + WebhookPath(account) + "?intent=<id>".
	StatusCallbackBaseURL string
	Accounts              map[string]Account
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
	cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	if err := checkCallbackBase(cfg.StatusCallbackBaseURL); err != nil {
		return nil, err
	}
	cfg.StatusCallbackBaseURL = strings.TrimSuffix(cfg.StatusCallbackBaseURL, "/")
	for name, a := range cfg.Accounts {
		switch {
		case !sidRE.MatchString(a.AccountSID) || !strings.HasPrefix(a.AccountSID, "AC"):
			return nil, fmt.Errorf("twilio: account %q: accountSid must be an account SID (AC followed by 32 hex digits)", name)
		case a.AuthToken == "":
			return nil, fmt.Errorf("twilio: account %q has no authToken (it verifies the status callbacks)", name)
		case (a.APIKeySID == "") != (a.APIKeySecret == ""):
			return nil, fmt.Errorf("twilio: account %q: apiKeySid and apiKeySecret go together", name)
		case a.From == "" && a.MessagingServiceSID == "":
			return nil, fmt.Errorf("twilio: account %q needs from or messagingServiceSid", name)
		case a.From != "" && !e164.MatchString(a.From):
			return nil, fmt.Errorf("twilio: account %q: from must be an E.164 number (+ and up to 15 digits)", name)
		}
	}
	return &Provider{cfg: cfg, client: httpx.Client(client)}, nil
}

func checkCallbackBase(base string) error {
	u, err := url.Parse(base)
	if base == "" || err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("twilio: statusCallbackBaseUrl must be the outbox's public API URL (http(s)://host[/base path]); every create carries a status callback")
	}
	return nil
}

var (
	sidRE = regexp.MustCompile(`^[A-Z]{2}[0-9a-fA-F]{32}$`)
	// e164 is an E.164 number (https://www.twilio.com/docs/glossary/what-e164).
	e164 = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)
)

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
		return core.Capabilities{}, fmt.Errorf("twilio: unknown action %q", action)
	}
	return a.Declared, nil
}

// StatusCallback is the callback URL the adapter sends for an intent.
func StatusCallback(base, account, intentID string) string {
	return strings.TrimSuffix(base, "/") + WebhookPath(account) + "?" + IntentParam + "=" + url.QueryEscape(intentID)
}

// smsPayload is send_sms's payload: the message body and/or media URLs.
type smsPayload struct {
	Body     string   `json:"body"`
	MediaURL []string `json:"mediaUrl"`
}

// callPayload is place_call's payload: the TwiML the call runs
// (https://www.twilio.com/docs/voice/twiml) and, optionally, how long to
// let it ring.
type callPayload struct {
	TwiML   string `json:"twiml"`
	Timeout *int   `json:"timeout"`
}

func strictDecode(payload []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	if dec.More() {
		return errors.New("payload: one JSON object expected")
	}
	return nil
}

// buildForm returns the create request's path suffix and form for r.
func (p *Provider) buildForm(a Account, r core.SendRequest) (string, url.Values, error) {
	if !e164.MatchString(r.Target) {
		return "", nil, errors.New("target must be an E.164 number (+ and up to 15 digits)")
	}
	f := url.Values{}
	f.Set("To", r.Target)
	f.Set("StatusCallback", StatusCallback(p.cfg.StatusCallbackBaseURL, r.Account, r.IntentID))
	switch r.Action {
	case ActionSMS:
		var pl smsPayload
		if err := strictDecode(r.Payload, &pl); err != nil {
			return "", nil, err
		}
		if pl.Body == "" && len(pl.MediaURL) == 0 {
			return "", nil, errors.New("payload needs body or mediaUrl")
		}
		if len(pl.MediaURL) > 10 {
			return "", nil, errors.New("payload.mediaUrl: at most 10 URLs")
		}
		if a.MessagingServiceSID != "" {
			f.Set("MessagingServiceSid", a.MessagingServiceSID)
		} else {
			f.Set("From", a.From)
		}
		if pl.Body != "" {
			f.Set("Body", pl.Body)
		}
		for _, m := range pl.MediaURL {
			f.Add("MediaUrl", m)
		}
		return "/Messages.json", f, nil
	case ActionCall:
		var pl callPayload
		if err := strictDecode(r.Payload, &pl); err != nil {
			return "", nil, err
		}
		if strings.TrimSpace(pl.TwiML) == "" {
			return "", nil, errors.New("payload.twiml is required (the TwiML the call runs)")
		}
		if a.From == "" {
			return "", nil, errors.New("the account has no from number to call from")
		}
		f.Set("From", a.From)
		f.Set("Twiml", pl.TwiML)
		if pl.Timeout != nil {
			if *pl.Timeout < 5 || *pl.Timeout > 600 {
				return "", nil, errors.New("payload.timeout must be 5 to 600 seconds")
			}
			f.Set("Timeout", strconv.Itoa(*pl.Timeout))
		}
		// answered (in-progress) and completed prove the call happened; the
		// final status also reports busy, no-answer, failed and canceled.
		f.Add("StatusCallbackEvent", "answered")
		f.Add("StatusCallbackEvent", "completed")
		f.Set("StatusCallbackMethod", http.MethodPost)
		return "/Calls.json", f, nil
	}
	return "", nil, fmt.Errorf("unknown action %q", r.Action)
}

// Send creates the message or the call.
func (p *Provider) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	a, err := httpx.SendAccount(Name, p.cfg.Accounts, r.Account)
	if err != nil {
		return core.SendResult{}, err
	}
	if !p.SupportsAction(r.Action) {
		return core.SendResult{}, httpx.Rejected(core.Evidence{ProviderCode: "unknown_action"}, "twilio: unknown action %q", r.Action)
	}
	suffix, form, err := p.buildForm(a, r)
	if err != nil {
		return core.SendResult{}, httpx.InvalidPayload(Name, err)
	}
	user, pass := a.AccountSID, a.AuthToken
	if a.APIKeySID != "" {
		user, pass = a.APIKeySID, a.APIKeySecret
	}
	h := http.Header{}
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("Accept", "application/json")
	endpoint := p.cfg.BaseURL + "/2010-04-01/Accounts/" + url.PathEscape(a.AccountSID) + suffix
	resp, err := httpx.Call(ctx, p.client, p.cfg.Timeout, http.MethodPost, endpoint, h, []byte(form.Encode()), httpx.DefaultBodyLimit)
	if err != nil {
		return core.SendResult{}, err
	}
	return classify(resp, p.cfg.Now())
}

// ErrorBody is Twilio's error answer
// (https://www.twilio.com/docs/usage/twilios-response#response-formats-exceptions).
type ErrorBody struct {
	Code     int    `json:"code"`
	Message  string `json:"message"`
	MoreInfo string `json:"more_info"`
	Status   int    `json:"status"`
}

// Resource is the part of a Message or Call resource the adapter reads.
type Resource struct {
	SID    string `json:"sid"`
	Status string `json:"status"`
}

// Documented error codes (https://www.twilio.com/docs/api/errors/<code>).
const (
	CodeAuthenticate      = 20003
	CodeAccountNotActive  = 20005
	CodeNotFound          = 20404
	CodeTooManyRequests   = 20429
	CodeInternal          = 20500
	CodeUnavailable       = 20503
	CodeFromNotVerified   = 21210
	CodeInvalidTo         = 21211
	CodeInvalidFrom       = 21212
	CodeGeoPermissionCall = 21215
	CodeRegionNotEnabled  = 21408
	CodeBodyRequired      = 21602
	CodeFromNotSMSCapable = 21606
	CodeUnsubscribed      = 21610
	CodeNotMobile         = 21614
	CodeBodyTooLong       = 21617
)

// Classify maps an error answer to a class (see the package comment): the
// code first, the HTTP status when the code is not one we know.
func Classify(status, code int) core.ErrorClass {
	switch code {
	case CodeTooManyRequests:
		return core.ClassRateLimited
	case CodeAuthenticate, CodeAccountNotActive:
		return core.ClassUnauthorized
	case CodeFromNotVerified, CodeInvalidTo, CodeInvalidFrom, CodeGeoPermissionCall, CodeRegionNotEnabled,
		CodeBodyRequired, CodeFromNotSMSCapable, CodeUnsubscribed, CodeNotMobile, CodeBodyTooLong, CodeNotFound:
		return core.ClassRejectedInput
	case CodeInternal, CodeUnavailable:
		return core.ClassUnknownOutcome
	}
	switch status {
	case http.StatusTooManyRequests:
		return core.ClassRateLimited
	case http.StatusUnauthorized, http.StatusForbidden:
		return core.ClassUnauthorized
	case http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity:
		return core.ClassRejectedInput
	}
	return core.ClassUnknownOutcome
}

func classify(resp *httpx.Response, now time.Time) (core.SendResult, error) {
	ev := core.Evidence{HTTPStatus: resp.Status}
	if id := resp.Header.Get("Twilio-Request-Id"); id != "" {
		ev.Extra = map[string]string{"requestId": id}
	}
	if resp.Status >= 200 && resp.Status < 300 {
		var res Resource
		if resp.ReadErr != nil || json.Unmarshal(resp.Body, &res) != nil || res.SID == "" {
			ev.Detail = "2xx without a readable sid"
			return core.SendResult{}, httpx.Unknown(ev, "twilio: acknowledgement unreadable")
		}
		ev.ProviderCode = res.Status
		return core.SendResult{ExternalID: res.SID, Evidence: ev}, nil
	}
	var eb ErrorBody
	_ = json.Unmarshal(resp.Body, &eb)
	if eb.Code != 0 {
		ev.ProviderCode = strconv.Itoa(eb.Code)
		// Twilio's messages quote phone numbers: only the code and its
		// documentation link go into evidence.
		ev.Detail = "https://www.twilio.com/docs/api/errors/" + ev.ProviderCode
	}
	switch Classify(resp.Status, eb.Code) {
	case core.ClassRateLimited:
		// Twilio documents no Retry-After; honour one when sent.
		return core.SendResult{}, httpx.RateLimited(ev, httpx.RetryAfter(resp.Header.Get("Retry-After"), now), "twilio: rate limited (%d)", eb.Code)
	case core.ClassUnauthorized:
		return core.SendResult{}, httpx.Unauthorized(ev, "twilio: HTTP %d error %d", resp.Status, eb.Code)
	case core.ClassRejectedInput:
		return core.SendResult{}, httpx.Rejected(ev, "twilio: HTTP %d error %d", resp.Status, eb.Code)
	}
	return core.SendResult{}, httpx.Unknown(ev, "twilio: HTTP %d error %d (the message or call may exist)", resp.Status, eb.Code)
}

// Lookup is not declared: Twilio lists filter by number and date only.
func (p *Provider) Lookup(context.Context, core.SendRequest) (core.LookupResult, error) {
	return core.LookupResult{}, errors.New("twilio: no lookup by an id the outbox chooses")
}
