// Package slack is the Slack provider adapter (provider name "slack").
//
// Sending is chat.postMessage (https://docs.slack.dev/reference/methods/chat.postMessage)
// with message metadata (https://docs.slack.dev/messaging/message-metadata)
// that carries the intent id:
//
//	"metadata": {"event_type": "outbox_intent", "event_payload": {"intent_id": "it_…"}}
//
// Slack has no idempotency key, so the adapter declares IdempotencyKeys=false
// and Lookup=true: after an unknown outcome, Lookup reads the channel's
// history (conversations.history with include_all_metadata=true; for a thread
// reply, conversations.replies) over a bounded window and looks for a message
// of our bot whose metadata names the intent. Found -> the message ts is the
// external id. Absent is reported only when the whole window was read
// (has_more=false); a window cut short by paging limits is an error, never
// "absent", because "absent" lets the core send again.
//
// The adapter also verifies Events API requests (signature.go) and parses
// their envelopes (events.go) for the webhook function.
package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

// Name is the provider name bots use.
const Name = "slack"

// EventType is the metadata event_type of every message the outbox posts.
const EventType = "outbox_intent"

// DefaultBaseURL is Slack's Web API.
const DefaultBaseURL = "https://slack.com/api"

// Actions the adapter performs: send_message and chat.postMessage both name
// chat.postMessage; update_message is chat.update and add_reaction is
// reactions.add, both set-to-value actions (edit.go).
var Actions = map[string]bool{"send_message": true, "chat.postMessage": true, ActionUpdateMessage: true, ActionAddReaction: true}

// Account is one workspace installation (keyed by team id in Config).
type Account struct {
	// Token is the bot token (xoxb-…).
	Token string `json:"token"`
	// BotID is the bot's id (B…); when set, Lookup only accepts messages
	// posted by this bot, and the webhook side recognises our own echoes.
	BotID string `json:"botId,omitempty"`
	// SigningSecret verifies Events API requests (webhook side).
	SigningSecret string `json:"signingSecret,omitempty"`
}

// LogValue keeps secrets out of structured logs.
func (a Account) LogValue() slog.Value {
	return slog.GroupValue(slog.String("botId", a.BotID), slog.String("token", "<redacted>"))
}

// Config configures the adapter.
type Config struct {
	BaseURL  string
	Accounts map[string]Account
	// Timeout bounds each request (default 10s).
	Timeout time.Duration
	// Lookback is how far back Lookup reads history when the request does
	// not say when the attempt started (default 24h). With
	// SendRequest.AttemptStartedAt the window starts a minute before it.
	Lookback time.Duration
	// MaxHistoryPages bounds one Lookup (default 10 pages of HistoryPageSize).
	MaxHistoryPages int
	// HistoryPageSize is the "limit" of each history call (default 200).
	// Slack's 2025 limits for new non-Marketplace apps cap history at 15
	// messages per call (https://docs.slack.dev/apis/web-api/rate-limits).
	HistoryPageSize int
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
	if cfg.Lookback <= 0 {
		cfg.Lookback = 24 * time.Hour
	}
	if cfg.MaxHistoryPages <= 0 {
		cfg.MaxHistoryPages = 10
	}
	if cfg.HistoryPageSize <= 0 {
		cfg.HistoryPageSize = 200
	}
	if err := httpx.RequireTokens(Name, cfg.Accounts, func(a Account) string { return a.Token }); err != nil {
		return nil, err
	}
	return &Provider{cfg: cfg, client: httpx.Client(client)}, nil
}

func (p *Provider) Name() string                      { return Name }
func (p *Provider) SupportsAction(action string) bool { return Actions[action] }

// Capabilities: no idempotency key exists in the Web API; lookup through
// history is available for every account.
func (p *Provider) Capabilities(_ context.Context, account, action string) (core.Capabilities, error) {
	if err := httpx.KnownAccount(Name, p.cfg.Accounts, account); err != nil {
		return core.Capabilities{}, err
	}
	// The registration's declaration (register.go): set-to-value for
	// update_message and add_reaction, lookup for posting.
	if a, ok := Registration.Declaration(action); ok {
		return a.Declared, nil
	}
	return declared, nil
}

// Account returns the configured account (for the webhook side).
func (p *Provider) Account(team string) (Account, bool) {
	a, ok := p.cfg.Accounts[team]
	return a, ok
}

func (p *Provider) account(name string) (Account, error) {
	return httpx.SendAccount(Name, p.cfg.Accounts, name)
}

// Metadata is Slack message metadata.
type Metadata struct {
	EventType    string          `json:"event_type"`
	EventPayload json.RawMessage `json:"event_payload"`
}

type intentPayload struct {
	IntentID string `json:"intent_id"`
}

// IntentID returns the intent id carried by outbox metadata, or "".
func (m *Metadata) IntentID() string {
	if m == nil || m.EventType != EventType {
		return ""
	}
	var p intentPayload
	if json.Unmarshal(m.EventPayload, &p) != nil {
		return ""
	}
	return p.IntentID
}

// reserved arguments the bot's payload may not set: the adapter owns them.
var reserved = []string{"metadata", "token", "as_user"}

// buildBody turns the intent payload (chat.postMessage arguments as a JSON
// object) into the request body. It returns the thread_ts, if any.
func buildBody(r core.SendRequest) ([]byte, string, error) {
	args, err := httpx.ObjectArgs(r.Payload, "chat.postMessage arguments")
	if err != nil {
		return nil, "", err
	}
	for _, k := range reserved {
		if _, ok := args[k]; ok {
			return nil, "", fmt.Errorf("payload must not set %q: the outbox owns it", k)
		}
	}
	if r.Target == "" {
		return nil, "", errors.New("target (channel id) is required")
	}
	if ch, ok := args["channel"]; ok {
		var s string
		if json.Unmarshal(ch, &s) != nil || s != r.Target {
			return nil, "", errors.New("payload channel differs from the intent target")
		}
	}
	var thread string
	if t, ok := args["thread_ts"]; ok {
		if json.Unmarshal(t, &thread) != nil {
			return nil, "", errors.New("thread_ts must be a string")
		}
	}
	args["channel"], _ = json.Marshal(r.Target)
	md, _ := json.Marshal(struct {
		EventType    string        `json:"event_type"`
		EventPayload intentPayload `json:"event_payload"`
	}{EventType, intentPayload{IntentID: r.IntentID}})
	args["metadata"] = md
	body, err := json.Marshal(args)
	return body, thread, err
}

// Send posts the message with chat.postMessage.
func (p *Provider) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	a, err := p.account(r.Account)
	if err != nil {
		return core.SendResult{}, err
	}
	if err := httpx.CheckAction(Name, Actions, r.Action); err != nil {
		return core.SendResult{}, err
	}
	if setsValue(r.Action) {
		return p.edit(ctx, a, r)
	}
	body, _, err := buildBody(r)
	if err != nil {
		return core.SendResult{}, httpx.InvalidPayload(Name, err)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+a.Token)
	h.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := httpx.Call(ctx, p.client, p.cfg.Timeout, http.MethodPost, p.cfg.BaseURL+"/chat.postMessage", h, body, httpx.DefaultBodyLimit)
	if err != nil {
		return core.SendResult{}, err
	}
	return classify(resp, p.cfg.Now())
}

type apiResponse struct {
	OK      *bool  `json:"ok"`
	Error   string `json:"error"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// Classify maps a Slack Web API error code (the "error" of an ok:false
// answer) to a structured class. Codes are from the chat.postMessage page
// and the Web API's common errors. Anything not listed is an unknown
// outcome: an unrecognised code is no proof that nothing was posted.
func Classify(code string) core.ErrorClass {
	switch code {
	// The input is wrong; nothing was posted.
	case "message_not_found", "cant_update_message", "edit_window_closed", "bad_timestamp", "invalid_name",
		"no_item_specified", "too_many_emoji", "too_many_reactions", "thread_locked", "is_inactive",
		"update_failed", "block_mismatch":
		// chat.update and reactions.add (edit.go): nothing was changed.
		return core.ClassRejectedInput
	case "channel_not_found", "is_archived", "msg_too_long", "no_text", "invalid_blocks", "invalid_blocks_format",
		"msg_blocks_too_long", "too_many_attachments", "not_in_channel", "restricted_action",
		"restricted_action_read_only_channel", "restricted_action_thread_only_channel",
		"restricted_action_non_threadable_channel", "invalid_metadata_format", "invalid_metadata_schema",
		"metadata_too_large", "metadata_must_be_sent_from_app", "as_user_not_supported", "invalid_arguments",
		"invalid_arg_name", "invalid_array_arg", "invalid_charset", "invalid_form_data", "invalid_post_type",
		"missing_post_type", "invalid_json", "json_not_object", "duplicate_channel_not_found", "cannot_reply_to_message",
		"channel_type_not_supported", "slack_connect_file_link_sharing_blocked", "deprecated_endpoint", "unknown_method":
		return core.ClassRejectedInput
	// The credentials or the app's standing are the problem.
	case "invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive", "missing_scope",
		"no_permission", "not_allowed_token_type", "ekm_access_denied", "access_denied", "enterprise_is_restricted",
		"team_access_not_granted", "two_factor_setup_required", "accesslimited":
		return core.ClassUnauthorized
	case "ratelimited", "rate_limited":
		return core.ClassRateLimited
	// Refused before processing: the body arrived incomplete, or the
	// workspace is migrating and refuses calls.
	case "request_timeout", "team_added_to_org", "org_login_required":
		return core.ClassTransient
	}
	// fatal_error / internal_error are documented as "It's possible some
	// aspect of the operation succeeded before the error was raised";
	// service_unavailable and anything unknown give no proof either way.
	return core.ClassUnknownOutcome
}

func classify(resp *httpx.Response, now time.Time) (core.SendResult, error) {
	ev := core.Evidence{HTTPStatus: resp.Status}
	if resp.Status == http.StatusTooManyRequests {
		// https://docs.slack.dev/apis/web-api/rate-limits: HTTP 429 with a
		// Retry-After header (seconds); the call was not processed.
		ev.ProviderCode = "ratelimited"
		ev.RetryAfter = resp.Header.Get("Retry-After")
		return core.SendResult{}, httpx.RateLimited(ev, httpx.RetryAfter(ev.RetryAfter, now), "slack: rate limited")
	}
	var ar apiResponse
	if resp.ReadErr != nil || json.Unmarshal(resp.Body, &ar) != nil || ar.OK == nil {
		switch {
		case resp.Status >= 200 && resp.Status < 300:
			ev.Detail = "2xx without a readable Web API answer"
			return core.SendResult{}, httpx.Unknown(ev, "slack: acknowledgement unreadable")
		case resp.Status == http.StatusUnauthorized || resp.Status == http.StatusForbidden:
			return core.SendResult{}, httpx.Unauthorized(ev, "slack: HTTP %d", resp.Status)
		case resp.Status >= 400 && resp.Status < 500 && resp.Status != http.StatusRequestTimeout:
			return core.SendResult{}, httpx.Rejected(ev, "slack: HTTP %d", resp.Status)
		}
		return core.SendResult{}, httpx.Unknown(ev, "slack: HTTP %d without a Web API answer", resp.Status)
	}
	if *ar.OK {
		if ar.TS == "" {
			ev.Detail = "ok without ts"
			return core.SendResult{}, httpx.Unknown(ev, "slack: acknowledgement without a message ts")
		}
		ev.ProviderCode = "ok"
		ev.Extra = map[string]string{"channel": ar.Channel, "ts": ar.TS}
		return core.SendResult{ExternalID: ar.TS, Evidence: ev}, nil
	}
	ev.ProviderCode = ar.Error
	switch Classify(ar.Error) {
	case core.ClassRejectedInput:
		return core.SendResult{}, httpx.Rejected(ev, "slack: %s", ar.Error)
	case core.ClassUnauthorized:
		return core.SendResult{}, httpx.Unauthorized(ev, "slack: %s", ar.Error)
	case core.ClassRateLimited:
		ev.RetryAfter = resp.Header.Get("Retry-After")
		return core.SendResult{}, httpx.RateLimited(ev, httpx.RetryAfter(ev.RetryAfter, now), "slack: %s", ar.Error)
	case core.ClassTransient:
		return core.SendResult{}, httpx.Transient(ev, "slack: %s", ar.Error)
	}
	return core.SendResult{}, httpx.Unknown(ev, "slack: %s (may have been posted)", ar.Error)
}

// HistoryMessage is the part of a history message Lookup reads.
type HistoryMessage struct {
	Type     string    `json:"type"`
	Subtype  string    `json:"subtype"`
	TS       string    `json:"ts"`
	ThreadTS string    `json:"thread_ts"`
	BotID    string    `json:"bot_id"`
	User     string    `json:"user"`
	Metadata *Metadata `json:"metadata"`
}

type historyResponse struct {
	OK               bool             `json:"ok"`
	Error            string           `json:"error"`
	Messages         []HistoryMessage `json:"messages"`
	HasMore          bool             `json:"has_more"`
	ResponseMetadata struct {
		NextCursor string `json:"next_cursor"`
	} `json:"response_metadata"`
}

// ErrNotAuthoritative is returned by Lookup when the window could not be
// read completely; it is never reported as "absent".
var ErrNotAuthoritative = errors.New("slack lookup: history window not read completely")

// FormatTS renders a time as a Slack timestamp ("1503435956.000247").
func FormatTS(t time.Time) string {
	return fmt.Sprintf("%d.%06d", t.Unix(), t.Nanosecond()/1000)
}

// Lookup reads the target channel's history (or the thread's replies) since
// the attempt started and looks for our message carrying the intent id.
func (p *Provider) Lookup(ctx context.Context, r core.SendRequest) (core.LookupResult, error) {
	a, err := p.account(r.Account)
	if err != nil {
		return core.LookupResult{}, err
	}
	_, thread, err := buildBody(r)
	if err != nil {
		// The intent could never have been posted: nothing to find.
		return core.LookupResult{State: core.LookupAbsent, Evidence: core.Evidence{ProviderCode: "absent", Detail: "payload not postable: " + err.Error()}}, nil
	}
	from := p.cfg.Now().Add(-p.cfg.Lookback)
	if !r.AttemptStartedAt.IsZero() {
		// Anchor at the attempt (minus clock skew), however long ago it was:
		// a reconciliation days later must still see the message.
		from = r.AttemptStartedAt.Add(-time.Minute)
	}
	oldest := FormatTS(from)
	method := "conversations.history"
	q := url.Values{}
	q.Set("channel", r.Target)
	q.Set("oldest", oldest)
	q.Set("inclusive", "true")
	q.Set("include_all_metadata", "true")
	q.Set("limit", strconv.Itoa(p.cfg.HistoryPageSize))
	if thread != "" {
		// Thread replies are not part of conversations.history.
		method = "conversations.replies"
		q.Set("ts", thread)
	}
	ev := core.Evidence{Extra: map[string]string{"method": method, "oldest": oldest, "channel": r.Target}}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+a.Token)
	for page := 1; page <= p.cfg.MaxHistoryPages; page++ {
		hr, status, err := p.history(ctx, method, q, h)
		ev.HTTPStatus = status
		ev.Extra["pages"] = strconv.Itoa(page)
		if err != nil {
			return core.LookupResult{}, err
		}
		for _, m := range hr.Messages {
			if r.IntentID == "" || m.Metadata.IntentID() != r.IntentID {
				continue
			}
			if a.BotID != "" && m.BotID != a.BotID {
				// Our intent id, another poster: a spoof, or a misconfigured
				// botId. Neither proves the effect, and calling it "absent"
				// could cause a duplicate; leave it to a human.
				return core.LookupResult{}, fmt.Errorf("%w: message %s carries the intent id but was posted by bot %q, not %q",
					ErrNotAuthoritative, m.TS, m.BotID, a.BotID)
			}
			ev.ProviderCode = string(core.LookupFound)
			ev.Extra["ts"] = m.TS
			return core.LookupResult{State: core.LookupFound, ExternalID: m.TS, Evidence: ev}, nil
		}
		if !hr.HasMore {
			ev.ProviderCode = string(core.LookupAbsent)
			return core.LookupResult{State: core.LookupAbsent, Evidence: ev}, nil
		}
		if hr.ResponseMetadata.NextCursor == "" {
			return core.LookupResult{}, fmt.Errorf("%w: has_more without a cursor", ErrNotAuthoritative)
		}
		q.Set("cursor", hr.ResponseMetadata.NextCursor)
	}
	return core.LookupResult{}, fmt.Errorf("%w: more than %d pages", ErrNotAuthoritative, p.cfg.MaxHistoryPages)
}

func (p *Provider) history(ctx context.Context, method string, q url.Values, h http.Header) (historyResponse, int, error) {
	resp, err := httpx.Call(ctx, p.client, p.cfg.Timeout, http.MethodGet, p.cfg.BaseURL+"/"+method+"?"+q.Encode(), h, nil, 4<<20)
	if err != nil {
		return historyResponse{}, 0, fmt.Errorf("slack %s: %w", method, err)
	}
	if resp.Status == http.StatusTooManyRequests {
		return historyResponse{}, resp.Status, fmt.Errorf("slack %s: rate limited (Retry-After %s)", method, resp.Header.Get("Retry-After"))
	}
	var hr historyResponse
	if resp.ReadErr != nil || json.Unmarshal(resp.Body, &hr) != nil {
		return historyResponse{}, resp.Status, fmt.Errorf("slack %s: HTTP %d, unreadable answer", method, resp.Status)
	}
	if !hr.OK {
		return historyResponse{}, resp.Status, fmt.Errorf("slack %s: %s", method, hr.Error)
	}
	return hr, resp.Status, nil
}
