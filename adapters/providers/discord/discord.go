// Package discord is the Discord provider adapter (provider name
// "discord"): Create Message (https://discord.com/developers/docs/resources/message#create-message),
// POST <baseUrl>/channels/{channel.id}/messages with a JSON body, the bot
// token as "Authorization: Bot <token>"
// (https://discord.com/developers/docs/reference#authentication) and the
// User-Agent Discord requires, "DiscordBot ($url, $versionNumber)"
// (https://discord.com/developers/docs/reference#user-agent). The intent's
// target is the channel id; its payload the message (content, embeds, ...).
//
// What makes a retry safe is the nonce: every attempt carries the same
// nonce derived from the intent (at most 25 characters) with
// enforce_nonce: true, and "if another message was created by the same
// author with the same nonce, that message will be returned and no new
// message will be created" — but only "in the past few minutes" (Create
// Message; change log 2024-02-12). "A few minutes" is all Discord promises,
// so the adapter declares a key window of five minutes at most (an operator
// may shorten it with nonceWindowSeconds) and no lookup: a retry inside the
// window is deduplicated by Discord, an ambiguous failure past it goes to a
// human.
//
// Error mapping (https://discord.com/developers/docs/topics/opcodes-and-status-codes#http,
// #json), by HTTP status and the body's JSON error code, never by message:
//
//	400 (50035 invalid form body, 50006 empty message, 50008 non-text channel, 50109 invalid JSON, ...) → rejected
//	401 (token invalid)                                                          → unauthorized
//	403 (50001 missing access, 50013 missing permissions, 50007 cannot DM the user) → unauthorized
//	404 (10003 unknown channel)                                                  → rejected
//	413 (request entity too large)                                               → rejected
//	429 (the body's fractional retry_after; https://discord.com/developers/docs/topics/rate-limits) → rate limited
//	5xx and anything else                                                        → unknown
package discord

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

// Name is the provider name bots use.
const Name = "discord"

// DefaultBaseURL is Discord's API root, version 10.
const DefaultBaseURL = "https://discord.com/api/v10"

// UserAgent is sent on every request, in the form Discord requires.
const UserAgent = "DiscordBot (https://github.com/botharness/outbox, 1.0)"

// NonceWindow is the longest key window the adapter declares: Discord
// checks a nonce's uniqueness "in the past few minutes".
const NonceWindow = 5 * time.Minute

// Account is one bot.
type Account struct {
	// Token is the bot token (Developer Portal → Bot).
	Token string `json:"token"`
}

// LogValue keeps secrets out of structured logs.
func (a Account) LogValue() slog.Value { return slog.StringValue("<discord account, token redacted>") }

// Config configures the adapter.
type Config struct {
	BaseURL  string
	Accounts map[string]Account
	// Window is the declared nonce window (default and at most NonceWindow).
	Window time.Duration
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
	if cfg.Window <= 0 {
		cfg.Window = NonceWindow
	}
	if cfg.Window > NonceWindow {
		return nil, fmt.Errorf("%s: nonceWindowSeconds may only shorten Discord's few minutes (at most %d)", Name, int(NonceWindow/time.Second))
	}
	if err := httpx.RequireTokens(Name, cfg.Accounts, func(a Account) string { return a.Token }); err != nil {
		return nil, err
	}
	return &Provider{cfg: cfg, client: httpx.Client(client)}, nil
}

func (p *Provider) Name() string { return Name }

func (p *Provider) SupportsAction(action string) bool {
	_, ok := Registration.Declaration(action)
	return ok
}

// Capabilities is the registration's declaration, with the configured window.
func (p *Provider) Capabilities(_ context.Context, account, action string) (core.Capabilities, error) {
	if err := httpx.KnownAccount(Name, p.cfg.Accounts, account); err != nil {
		return core.Capabilities{}, err
	}
	a, ok := Registration.Declaration(action)
	if !ok {
		return core.Capabilities{}, fmt.Errorf("discord: unknown action %q", action)
	}
	c := a.Declared
	if c.IdempotencyKeys && p.cfg.Window < c.KeyRetention {
		c.KeyRetention = p.cfg.Window
	}
	return c, nil
}

var nonceEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// Nonce is the nonce of an intent's message: 25 characters (Discord's
// limit) of the base32hex SHA-256 of the intent id, the same on every attempt.
func Nonce(intentID string) string {
	sum := sha256.Sum256([]byte("outbox-intent:" + intentID))
	return nonceEncoding.EncodeToString(sum[:])[:25]
}

func buildBody(r core.SendRequest) ([]byte, error) {
	args, err := httpx.ObjectArgs(r.Payload, "Create Message parameters")
	if err != nil {
		return nil, err
	}
	if r.Target == "" {
		return nil, errors.New("target (channel id) is required")
	}
	for _, k := range []string{"nonce", "enforce_nonce"} {
		if _, ok := args[k]; ok {
			return nil, fmt.Errorf("%s is the outbox's", k)
		}
	}
	args["nonce"], _ = json.Marshal(Nonce(r.IntentID))
	args["enforce_nonce"] = json.RawMessage("true")
	return httpx.MarshalVerbatim(args)
}

// Send creates the message.
func (p *Provider) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	a, err := httpx.SendAccount(Name, p.cfg.Accounts, r.Account)
	if err != nil {
		return core.SendResult{}, err
	}
	if !p.SupportsAction(r.Action) {
		return core.SendResult{}, httpx.Rejected(core.Evidence{ProviderCode: "unknown_action"}, "discord: unknown action %q", r.Action)
	}
	body, err := buildBody(r)
	if err != nil {
		return core.SendResult{}, httpx.InvalidPayload(Name, err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Authorization", "Bot "+a.Token)
	h.Set("User-Agent", UserAgent)
	resp, err := httpx.Call(ctx, p.client, p.cfg.Timeout, http.MethodPost, p.cfg.BaseURL+"/channels/"+url.PathEscape(r.Target)+"/messages", h, body, httpx.DefaultBodyLimit)
	if err != nil {
		return core.SendResult{}, err
	}
	return classify(resp, p.cfg.Now())
}

// ErrorBody is Discord's error answer: {"code": 50035, "message": "Invalid
// Form Body", "errors": {...}}; a 429 adds "retry_after" (seconds, fractional)
// and "global".
type ErrorBody struct {
	Code       int      `json:"code"`
	Message    string   `json:"message"`
	RetryAfter *float64 `json:"retry_after"`
	Global     bool     `json:"global"`
}

// Message is the part of a Message the adapter reads.
type Message struct {
	ID        string          `json:"id"`
	ChannelID string          `json:"channel_id"`
	Nonce     json.RawMessage `json:"nonce"`
}

// Classify maps an error answer to a class.
func Classify(status, code int) core.ErrorClass {
	switch status {
	case http.StatusTooManyRequests:
		return core.ClassRateLimited
	case http.StatusUnauthorized, http.StatusForbidden:
		return core.ClassUnauthorized
	case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge:
		return core.ClassRejectedInput
	}
	return core.ClassUnknownOutcome
}

func classify(resp *httpx.Response, now time.Time) (core.SendResult, error) {
	ev := core.Evidence{HTTPStatus: resp.Status}
	if resp.Status >= 200 && resp.Status < 300 {
		var m Message
		if resp.ReadErr != nil || json.Unmarshal(resp.Body, &m) != nil || m.ID == "" {
			ev.Detail = "2xx without a readable message id"
			return core.SendResult{}, httpx.Unknown(ev, "discord: acknowledgement unreadable")
		}
		ev.ProviderCode = "created"
		ev.Extra = map[string]string{"channelId": m.ChannelID}
		return core.SendResult{ExternalID: m.ID, Evidence: ev}, nil
	}
	var eb ErrorBody
	_ = json.Unmarshal(resp.Body, &eb)
	ev.ProviderCode = strconv.Itoa(eb.Code)
	ev.Detail = httpx.Excerpt([]byte(eb.Message), 200)
	switch Classify(resp.Status, eb.Code) {
	case core.ClassRateLimited:
		var d time.Duration
		if eb.RetryAfter != nil && *eb.RetryAfter > 0 {
			d = time.Duration(math.Ceil(*eb.RetryAfter * float64(time.Second)))
		} else {
			d = httpx.RetryAfter(resp.Header.Get("Retry-After"), now)
		}
		scope := resp.Header.Get("X-RateLimit-Scope")
		if eb.Global {
			scope = "global"
		}
		if scope != "" {
			ev.Extra = map[string]string{"scope": scope}
		}
		return core.SendResult{}, httpx.RateLimited(ev, d, "discord: rate limited")
	case core.ClassUnauthorized:
		return core.SendResult{}, httpx.Unauthorized(ev, "discord: %d (code %d)", resp.Status, eb.Code)
	case core.ClassRejectedInput:
		return core.SendResult{}, httpx.Rejected(ev, "discord: %d (code %d)", resp.Status, eb.Code)
	}
	return core.SendResult{}, httpx.Unknown(ev, "discord: HTTP %d (the message may exist)", resp.Status)
}

// Lookup is not declared: Discord offers no search by nonce.
func (p *Provider) Lookup(context.Context, core.SendRequest) (core.LookupResult, error) {
	return core.LookupResult{}, errors.New("discord: no lookup by nonce")
}
