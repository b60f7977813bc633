package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// Webhook is Slack's Events API dialect (events.go):
// requests signed with the account's signing secret (X-Slack-Signature v0,
// X-Slack-Request-Timestamp, five-minute window), a url_verification
// handshake answered with its challenge, and event_callback envelopes whose
// event_id is the deduplication key.
//
// The route's account is the Slack team id (the key of accounts in
// OUTBOX_PROVIDER_CONFIG); the envelope's team_id must match it, because one
// Slack app (one signing secret) may be installed in several workspaces.
//
// Inner message events mean:
//   - our bot's message (bot_id == the account's botId): an echo, carrying
//     the intent id from our message metadata when present (else core
//     resolves it by the message ts, or records it as unresolved);
//   - a user's message (user set, no bot_id): inbound, forwarded once; the
//     inner event is what reaches the inbox (the envelope's legacy
//     verification token does not);
//   - anything else (another bot's message, edits, deletions, other event
//     types, app_rate_limited): recorded and ignored.
type Webhook struct {
	// Accounts returns the configured account (Provider.Account).
	Accounts func(team string) (Account, bool)
	// Now is the clock for the replay window (default time.Now).
	Now func() time.Time
}

func (s *Webhook) account(team string) (Account, bool) {
	if s.Accounts == nil {
		return Account{}, false
	}
	return s.Accounts(team)
}

// Verify checks the v0 signature with the account's signing secret. An
// unknown account, or one without a signing secret, is refused (fails closed).
func (s *Webhook) Verify(_ context.Context, account string, headers map[string]string, body []byte) error {
	a, ok := s.account(account)
	if !ok || a.SigningSecret == "" {
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, ErrMissingSignature)
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	err := VerifySlackSignature(a.SigningSecret, plugin.Header(headers, HeaderTimestamp), body, plugin.Header(headers, HeaderSignature), now())
	if err != nil {
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, err)
	}
	return nil
}

// Challenge answers a (verified) url_verification request with its challenge.
func (s *Webhook) Challenge(_ string, _ map[string]string, body []byte) (events.APIGatewayV2HTTPResponse, bool) {
	e, err := ParseEvent(body)
	if err != nil || e.Type != TypeURLVerification {
		return events.APIGatewayV2HTTPResponse{}, false
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode: http.StatusOK,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(ChallengeResponse(e.Challenge)),
	}, true
}

// slackRaw is the part of the envelope ParseEvent does not keep.
type slackRaw struct {
	Event             json.RawMessage `json:"event"`
	MinuteRateLimited int64           `json:"minute_rate_limited"`
}

// Decode parses a verified Events API body.
func (s *Webhook) Decode(account string, _ map[string]string, body []byte) (webhook.ProviderEvent, error) {
	var ev webhook.ProviderEvent
	bad := func(field, msg string) (webhook.ProviderEvent, error) {
		return webhook.ProviderEvent{}, &core.ValidationError{Code: core.CodeInvalidField, Field: field, Message: msg}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw slackRaw
	if err := dec.Decode(&raw); err != nil || dec.More() {
		return ev, &core.ValidationError{Code: core.CodeMalformedJSON, Message: "the body is not one JSON object"}
	}
	e, err := ParseEvent(body)
	if err != nil {
		return bad("event", "the body is not a Slack Events API request")
	}
	if e.TeamID != "" && e.TeamID != account {
		return bad("team_id", "team_id must equal the account in the URL")
	}
	ev = webhook.ProviderEvent{Account: account, EventID: e.EventID, Type: e.Type, OccurredAt: e.EventTime, Kind: webhook.EventOther}
	switch e.Type {
	case TypeEventCallback:
	case TypeAppRateLimited:
		// No event_id: the rate-limited minute identifies it.
		ev.EventID = "app_rate_limited:" + strconv.FormatInt(raw.MinuteRateLimited, 10)
		return ev, nil
	case TypeURLVerification:
		// Answered by Challenge; never stored.
		return bad("type", "url_verification is answered, not stored")
	default:
		if ev.EventID == "" {
			return bad("event_id", "event_id is required")
		}
		return ev, nil
	}
	ev.Type = e.Inner.Type
	if e.Inner.Subtype != "" {
		ev.Type += "." + e.Inner.Subtype
	}
	a, _ := s.account(account)
	switch {
	case e.IsOwnEcho(a.BotID):
		if e.ExternalID() == "" {
			return bad("event.ts", "event.ts is required for our own message")
		}
		ev.Kind, ev.MessageID, ev.IntentID = webhook.EventEcho, e.ExternalID(), e.IntentID()
	case e.IsMessage() && e.Inner.Type == "message" && e.Inner.BotID == "" && e.Inner.User != "":
		ev.Kind, ev.MessageID, ev.Inbound = webhook.EventInbound, e.ExternalID(), raw.Event
	}
	return ev, nil // core validates the rest
}
