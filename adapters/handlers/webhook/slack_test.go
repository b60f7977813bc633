package webhook

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/providers/slack"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"

func slackProvider() *slack.Webhook {
	accounts := map[string]slack.Account{"T1": {Token: "xoxb", BotID: "B1", SigningSecret: slackSecret}, "T2": {Token: "xoxb"}}
	return &slack.Webhook{
		Accounts: func(team string) (slack.Account, bool) { a, ok := accounts[team]; return a, ok },
		Now:      func() time.Time { return now },
	}
}

func slackHandler(st *stubStore, inbox *stubInbox) *Handler {
	return &Handler{
		Webhooks:  &webhook.Webhooks{Store: st, Inbox: inbox, Clock: core.ClockFunc(func() time.Time { return now }), Log: slog.New(slog.DiscardHandler)},
		Providers: map[string]Provider{"slack": slackProvider()},
		Log:       slog.New(slog.DiscardHandler),
	}
}

func slackRequest(account, body string, at time.Time, secret string) events.APIGatewayV2HTTPRequest {
	ts := strconv.FormatInt(at.Unix(), 10)
	return events.APIGatewayV2HTTPRequest{
		PathParameters: map[string]string{"provider": "slack", "account": account},
		Headers:        map[string]string{"x-slack-request-timestamp": ts, "x-slack-signature": slack.SignSlack(secret, ts, []byte(body))},
		Body:           body,
	}
}

const (
	slackUserMsg   = `{"type":"event_callback","team_id":"T1","event_id":"Ev1","event_time":1772442000,"token":"legacy","event":{"type":"message","channel":"C1","user":"U1","text":"hi","ts":"1772442000.000100"}}`
	slackOwnEcho   = `{"type":"event_callback","team_id":"T1","event_id":"Ev2","event":{"type":"message","subtype":"bot_message","channel":"C1","bot_id":"B1","text":"hello","ts":"1772442001.000200","metadata":{"event_type":"outbox_intent","event_payload":{"intent_id":"it_42"}}}}`
	slackBareEcho  = `{"type":"event_callback","team_id":"T1","event_id":"Ev3","event":{"type":"message","channel":"C1","bot_id":"B1","text":"hello","ts":"1772442002.000300"}}`
	slackOtherBot  = `{"type":"event_callback","team_id":"T1","event_id":"Ev4","event":{"type":"message","channel":"C1","bot_id":"B9","text":"spam","ts":"1772442003.000400"}}`
	slackChallenge = `{"token":"legacy","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
)

func TestSlackHandler(t *testing.T) {
	ctx := context.Background()
	st, inbox := &stubStore{}, &stubInbox{}
	h := slackHandler(st, inbox)

	// url_verification: answered with the challenge, nothing stored.
	r, _ := h.Handle(ctx, slackRequest("T1", slackChallenge, now, slackSecret))
	var ch struct{ Challenge string }
	if r.StatusCode != 200 || json.Unmarshal([]byte(r.Body), &ch) != nil || ch.Challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("challenge: %d %s", r.StatusCode, r.Body)
	}
	if st.calls != 0 || inbox.n != 0 {
		t.Fatalf("url_verification stored something (%d calls, %d forwarded)", st.calls, inbox.n)
	}

	// A valid signature is accepted; a user's message is forwarded once.
	r, _ = h.Handle(ctx, slackRequest("T1", slackUserMsg, now.Add(-4*time.Minute), slackSecret))
	if r.StatusCode != 200 || !strings.Contains(r.Body, `"result":"forwarded"`) || inbox.n != 1 {
		t.Fatalf("user message: %d %s", r.StatusCode, r.Body)
	}

	// Our own echo reaches core (bound or, with the stub store, unresolved).
	r, _ = h.Handle(ctx, slackRequest("T1", slackOwnEcho, now, slackSecret))
	if r.StatusCode != 200 || !strings.Contains(r.Body, `"result":"unresolved"`) || inbox.n != 1 {
		t.Fatalf("own echo: %d %s", r.StatusCode, r.Body)
	}

	calls := st.calls
	forged := slackRequest("T1", slackUserMsg, now, slackSecret)
	forged.Body = strings.Replace(forged.Body, "hi", "ho", 1)
	for name, req := range map[string]events.APIGatewayV2HTTPRequest{
		"forged":             forged,
		"wrong secret":       slackRequest("T1", slackUserMsg, now, "not-the-secret"),
		"stale":              slackRequest("T1", slackUserMsg, now.Add(-6*time.Minute), slackSecret),
		"future":             slackRequest("T1", slackUserMsg, now.Add(6*time.Minute), slackSecret),
		"unknown account":    slackRequest("T9", slackUserMsg, now, slackSecret),
		"account w/o secret": slackRequest("T2", slackUserMsg, now, ""),
		"forged challenge":   slackRequest("T1", slackChallenge, now, "not-the-secret"),
		"no headers":         {PathParameters: map[string]string{"provider": "slack", "account": "T1"}, Body: slackUserMsg},
	} {
		wantRefused(t, h, name, req, 401, "invalid_signature")
	}
	for name, req := range map[string]events.APIGatewayV2HTTPRequest{
		"other team": slackRequest("T1", strings.Replace(slackUserMsg, `"T1"`, `"T2"`, 1), now, slackSecret),
		"not json":   slackRequest("T1", `{"type":`, now, slackSecret),
		"no type":    slackRequest("T1", `{"event_id":"Ev9"}`, now, slackSecret),
	} {
		wantRefused(t, h, name, req, 400, "")
	}
	wantNothingStored(t, st, inbox, calls)
}

func TestSlackDecode(t *testing.T) {
	s := slackProvider()
	ev, err := s.Decode("T1", nil, []byte(slackOwnEcho))
	if err != nil || ev.Kind != webhook.EventEcho || ev.IntentID != "it_42" || ev.MessageID != "1772442001.000200" || ev.EventID != "Ev2" {
		t.Fatalf("own echo: %+v %v", ev, err)
	}
	ev, err = s.Decode("T1", nil, []byte(slackBareEcho))
	if err != nil || ev.Kind != webhook.EventEcho || ev.IntentID != "" || ev.MessageID != "1772442002.000300" {
		t.Fatalf("echo without metadata: %+v %v", ev, err)
	}
	ev, err = s.Decode("T1", nil, []byte(slackUserMsg))
	if err != nil || ev.Kind != webhook.EventInbound || ev.EventID != "Ev1" || ev.IntentID != "" || !ev.OccurredAt.Equal(time.Unix(1772442000, 0)) {
		t.Fatalf("user message: %+v %v", ev, err)
	}
	var inner map[string]any
	if json.Unmarshal(ev.Inbound, &inner) != nil || inner["text"] != "hi" || inner["token"] != nil {
		t.Fatalf("inbound payload is not the inner event: %s", ev.Inbound)
	}
	ev, err = s.Decode("T1", nil, []byte(slackOtherBot))
	if err != nil || ev.Kind != webhook.EventOther || ev.EventID != "Ev4" {
		t.Fatalf("other bot: %+v %v", ev, err)
	}
	// Metadata naming an intent on a user's message is not an echo.
	spoof := strings.Replace(slackUserMsg, `"text":"hi"`, `"text":"hi","metadata":{"event_type":"outbox_intent","event_payload":{"intent_id":"it_42"}}`, 1)
	ev, err = s.Decode("T1", nil, []byte(spoof))
	if err != nil || ev.Kind != webhook.EventInbound || ev.IntentID != "" {
		t.Fatalf("user message with metadata: %+v %v", ev, err)
	}
	// Edits are recorded and ignored.
	ev, err = s.Decode("T1", nil, []byte(`{"type":"event_callback","team_id":"T1","event_id":"Ev5","event":{"type":"message","subtype":"message_changed","channel":"C1","ts":"1.2"}}`))
	if err != nil || ev.Kind != webhook.EventOther || ev.Type != "message.message_changed" {
		t.Fatalf("edit: %+v %v", ev, err)
	}
	ev, err = s.Decode("T1", nil, []byte(`{"token":"x","type":"app_rate_limited","team_id":"T1","minute_rate_limited":1518467820,"api_app_id":"A1"}`))
	if err != nil || ev.Kind != webhook.EventOther || ev.EventID != "app_rate_limited:1518467820" {
		t.Fatalf("app_rate_limited: %+v %v", ev, err)
	}
	// Challenge only answers url_verification.
	if _, ok := s.Challenge("T1", nil, []byte(slackUserMsg)); ok {
		t.Fatal("challenge answered an event_callback")
	}
}
