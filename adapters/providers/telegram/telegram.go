// Package telegram is the Telegram Bot API provider adapter (provider name
// "telegram").
//
// Sending is sendMessage (https://core.telegram.org/bots/api#sendmessage):
// POST JSON to <baseUrl>/bot<token>/sendMessage. The Bot API has no
// idempotency key and no way to ask whether a message was sent, so the
// adapter declares neither: an ambiguous failure (timeout after sending,
// connection lost, 5xx) goes straight to a human, and nothing here ever
// re-sends on its own.
//
// Error mapping follows https://core.telegram.org/bots/api#making-requests
// ({"ok":false,"error_code":N,"description":"…","parameters":{…}}), branching
// on error_code (the HTTP status mirrors it) and on parameters, never on the
// description text: 400 rejected (chat not found, text empty, group migrated,
// ...), 401 and 403 authorisation (token revoked; bot blocked by the user,
// kicked from the group), 404 rejected (unknown method or malformed token
// path), 429 rate limited with parameters.retry_after; 5xx and anything else
// unknown.
//
// The external id is "<chat id>:<message_id>": message ids are only unique
// within a chat (https://core.telegram.org/bots/api#message).
package telegram

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

// Name is the provider name bots use.
const Name = "telegram"

// DefaultBaseURL is the Bot API server.
const DefaultBaseURL = "https://api.telegram.org"

// SecretTokenHeader carries the secret_token given to setWebhook on every
// webhook request (https://core.telegram.org/bots/api#setwebhook).
const SecretTokenHeader = "X-Telegram-Bot-Api-Secret-Token"

// Actions the adapter performs: both name sendMessage.
var Actions = map[string]bool{"send_message": true, "sendMessage": true, ActionEditMessage: true}

// Account is one bot.
type Account struct {
	// Token is the bot token from @BotFather. It is part of every request
	// URL, so URLs never reach logs or evidence (see httpx.Redact).
	Token string `json:"token"`
	// WebhookSecret is the secret_token set with setWebhook (webhook side).
	WebhookSecret string `json:"webhookSecret,omitempty"`
}

// LogValue keeps secrets out of structured logs.
func (a Account) LogValue() slog.Value { return slog.StringValue("<telegram account, token redacted>") }

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
	if err := httpx.RequireTokens(Name, cfg.Accounts, func(a Account) string { return a.Token }); err != nil {
		return nil, err
	}
	return &Provider{cfg: cfg, client: httpx.Client(client)}, nil
}

func (p *Provider) Name() string                      { return Name }
func (p *Provider) SupportsAction(action string) bool { return Actions[action] }

// Capabilities: the Bot API offers neither idempotency keys nor lookup.
// edit_message sets a message's text: naturally idempotent (edit.go).
func (p *Provider) Capabilities(_ context.Context, account, action string) (core.Capabilities, error) {
	a, _ := Registration.Declaration(action) // register.go: neither, or set-to-value for edit_message
	return a.Declared, httpx.KnownAccount(Name, p.cfg.Accounts, account)
}

// Account returns the configured account (for the webhook side).
func (p *Provider) Account(name string) (Account, bool) {
	a, ok := p.cfg.Accounts[name]
	return a, ok
}

// chatID encodes the target: an integer chat id as a JSON number, anything
// else (an @channelusername) as a string. The API accepts "Integer or String".
func chatID(target string) json.RawMessage {
	if _, err := strconv.ParseInt(target, 10, 64); err == nil {
		return json.RawMessage(target)
	}
	b, _ := json.Marshal(target)
	return b
}

func buildBody(r core.SendRequest) ([]byte, error) {
	args, err := httpx.ObjectArgs(r.Payload, "sendMessage parameters")
	if err != nil {
		return nil, err
	}
	if r.Target == "" {
		return nil, errors.New("target (chat id) is required")
	}
	if c, ok := args["chat_id"]; ok && !bytes.Equal(bytes.TrimSpace(c), chatID(r.Target)) {
		var s string
		if json.Unmarshal(c, &s) != nil || s != r.Target {
			return nil, errors.New("payload chat_id differs from the intent target")
		}
	}
	args["chat_id"] = chatID(r.Target)
	return json.Marshal(args)
}

// Send calls sendMessage.
func (p *Provider) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	a, err := httpx.SendAccount(Name, p.cfg.Accounts, r.Account)
	if err != nil {
		return core.SendResult{}, err
	}
	if err := httpx.CheckAction(Name, Actions, r.Action); err != nil {
		return core.SendResult{}, err
	}
	body, err := buildBody(r)
	if err != nil {
		return core.SendResult{}, httpx.InvalidPayload(Name, err)
	}
	method, edited := "sendMessage", int64(0)
	if r.Action == ActionEditMessage {
		if edited, err = editMessageID(body); err != nil {
			return core.SendResult{}, httpx.InvalidPayload(Name, err)
		}
		method = "editMessageText"
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	resp, err := httpx.Call(ctx, p.client, p.cfg.Timeout, http.MethodPost, p.cfg.BaseURL+"/bot"+a.Token+"/"+method, h, body, httpx.DefaultBodyLimit)
	if err != nil {
		return core.SendResult{}, err
	}
	if r.Action == ActionEditMessage {
		return classifyEdit(resp, r.Target, edited, p.cfg.Now())
	}
	return classify(resp, r.Target, p.cfg.Now())
}

// APIResponse is the Bot API's answer envelope.
type APIResponse struct {
	OK          *bool           `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  *struct {
		RetryAfter      int   `json:"retry_after"`
		MigrateToChatID int64 `json:"migrate_to_chat_id"`
	} `json:"parameters"`
}

type sentMessage struct {
	MessageID int64 `json:"message_id"`
	Chat      struct {
		ID int64 `json:"id"`
	} `json:"chat"`
}

// Classify maps a Bot API error_code to a structured class.
func Classify(errorCode int) core.ErrorClass {
	switch {
	case errorCode == http.StatusTooManyRequests:
		return core.ClassRateLimited
	case errorCode == http.StatusUnauthorized || errorCode == http.StatusForbidden:
		return core.ClassUnauthorized
	case errorCode == http.StatusBadRequest || errorCode == http.StatusNotFound:
		return core.ClassRejectedInput
	}
	return core.ClassUnknownOutcome
}

func classify(resp *httpx.Response, target string, now time.Time) (core.SendResult, error) {
	ev := core.Evidence{HTTPStatus: resp.Status}
	var ar APIResponse
	if resp.ReadErr != nil || json.Unmarshal(resp.Body, &ar) != nil || ar.OK == nil {
		if resp.Status == http.StatusTooManyRequests {
			ev.RetryAfter = resp.Header.Get("Retry-After")
			return core.SendResult{}, httpx.RateLimited(ev, httpx.RetryAfter(ev.RetryAfter, now), "telegram: rate limited")
		}
		ev.Detail = "answer unreadable"
		return core.SendResult{}, httpx.Unknown(ev, "telegram: HTTP %d without a readable Bot API answer", resp.Status)
	}
	if *ar.OK {
		var m sentMessage
		if json.Unmarshal(ar.Result, &m) != nil || m.MessageID == 0 {
			ev.Detail = "ok without result.message_id"
			return core.SendResult{}, httpx.Unknown(ev, "telegram: acknowledgement without a message id")
		}
		chat := target
		if m.Chat.ID != 0 {
			chat = strconv.FormatInt(m.Chat.ID, 10)
		}
		ev.ProviderCode = "ok"
		ev.Extra = map[string]string{"chatId": chat, "messageId": strconv.FormatInt(m.MessageID, 10)}
		return core.SendResult{ExternalID: chat + ":" + strconv.FormatInt(m.MessageID, 10), Evidence: ev}, nil
	}
	code := ar.ErrorCode
	if code == 0 {
		code = resp.Status
	}
	ev.ProviderCode = strconv.Itoa(code)
	// The description is a provider error text (no request data); keep a
	// short excerpt for the operator.
	ev.Detail = httpx.Excerpt([]byte(ar.Description), 200)
	if ar.Parameters != nil && ar.Parameters.MigrateToChatID != 0 {
		ev.Extra = map[string]string{"migrateToChatId": strconv.FormatInt(ar.Parameters.MigrateToChatID, 10)}
	}
	switch Classify(code) {
	case core.ClassRateLimited:
		var d time.Duration
		if ar.Parameters != nil && ar.Parameters.RetryAfter > 0 {
			d = time.Duration(ar.Parameters.RetryAfter) * time.Second
			ev.RetryAfter = strconv.Itoa(ar.Parameters.RetryAfter)
		} else {
			ev.RetryAfter = resp.Header.Get("Retry-After")
			d = httpx.RetryAfter(ev.RetryAfter, now)
		}
		return core.SendResult{}, httpx.RateLimited(ev, d, "telegram: flood control")
	case core.ClassUnauthorized:
		return core.SendResult{}, httpx.Unauthorized(ev, "telegram: %d", code)
	case core.ClassRejectedInput:
		return core.SendResult{}, httpx.Rejected(ev, "telegram: %d", code)
	}
	return core.SendResult{}, httpx.Unknown(ev, "telegram: error %d (may have been sent)", code)
}

// Lookup is not offered by the Bot API; the core never calls it because
// Capabilities declares no lookup.
func (p *Provider) Lookup(context.Context, core.SendRequest) (core.LookupResult, error) {
	return core.LookupResult{}, errors.New("telegram: the Bot API offers no outcome lookup")
}

// VerifySecretToken checks the X-Telegram-Bot-Api-Secret-Token header of a
// webhook request against the account's secret, in constant time. An empty
// expected secret never verifies.
func VerifySecretToken(expected, got string) bool {
	return expected != "" && subtle.ConstantTimeCompare([]byte(expected), []byte(got)) == 1
}
