package webhook

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/providers/telegram"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

const tgSecret = "tg-secret_token-0123456789"

func telegramProvider() *telegram.Webhook {
	accounts := map[string]telegram.Account{"bot1": {Token: "123:abc", WebhookSecret: tgSecret}, "bot2": {Token: "456:def"}}
	return &telegram.Webhook{Accounts: func(name string) (telegram.Account, bool) { a, ok := accounts[name]; return a, ok }}
}

func tgRequest(account, body, secret string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		PathParameters: map[string]string{"provider": "telegram", "account": account},
		Headers:        map[string]string{"x-telegram-bot-api-secret-token": secret},
		Body:           body,
	}
}

const (
	tgUserMsg = `{"update_id":10001,"message":{"message_id":7,"date":1772442000,"chat":{"id":42,"type":"private"},"from":{"id":42,"is_bot":false,"first_name":"Ann"},"text":"hi"}}`
	tgBotMsg  = `{"update_id":10002,"message":{"message_id":8,"date":1772442000,"chat":{"id":-100,"type":"group"},"from":{"id":99,"is_bot":true,"first_name":"Other"},"text":"beep"}}`
	tgEdited  = `{"update_id":10003,"edited_message":{"message_id":7,"date":1772442000,"edit_date":1772442100,"chat":{"id":42,"type":"private"},"from":{"id":42,"is_bot":false},"text":"hi!"}}`
)

func TestTelegramHandler(t *testing.T) {
	ctx := context.Background()
	st, inbox := &stubStore{}, &stubInbox{}
	h := &Handler{
		Webhooks:  &webhook.Webhooks{Store: st, Inbox: inbox, Clock: core.ClockFunc(func() time.Time { return now }), Log: slog.New(slog.DiscardHandler)},
		Providers: map[string]Provider{"telegram": telegramProvider()},
		Log:       slog.New(slog.DiscardHandler),
	}
	r, _ := h.Handle(ctx, tgRequest("bot1", tgUserMsg, tgSecret))
	if r.StatusCode != 200 || !strings.Contains(r.Body, `"result":"forwarded"`) || inbox.n != 1 {
		t.Fatalf("user message: %d %s", r.StatusCode, r.Body)
	}
	r, _ = h.Handle(ctx, tgRequest("bot1", tgEdited, tgSecret))
	if r.StatusCode != 200 || !strings.Contains(r.Body, `"result":"ignored"`) || inbox.n != 1 {
		t.Fatalf("edited message: %d %s", r.StatusCode, r.Body)
	}

	calls := st.calls
	for name, req := range map[string]events.APIGatewayV2HTTPRequest{
		"wrong secret":       tgRequest("bot1", tgUserMsg, "guess"),
		"secret prefix":      tgRequest("bot1", tgUserMsg, tgSecret[:10]),
		"no header":          {PathParameters: map[string]string{"provider": "telegram", "account": "bot1"}, Body: tgUserMsg},
		"unknown account":    tgRequest("bot9", tgUserMsg, tgSecret),
		"account w/o secret": tgRequest("bot2", tgUserMsg, ""),
	} {
		wantRefused(t, h, name, req, 401, "invalid_signature")
	}
	for name, body := range map[string]string{
		"not json":        `{"update_id":`,
		"no update_id":    `{"message":{"message_id":1}}`,
		"string id":       `{"update_id":"1"}`,
		"message not obj": `{"update_id":5,"message":[1]}`,
		"trailing data":   `{"update_id":5} {}`,
	} {
		wantRefused(t, h, name, tgRequest("bot1", body, tgSecret), 400, "")
	}
	wantNothingStored(t, st, inbox, calls)
}

func TestTelegramDecode(t *testing.T) {
	tg := telegramProvider()
	ev, err := tg.Decode("bot1", nil, []byte(tgUserMsg))
	if err != nil || ev.Kind != webhook.EventInbound || ev.EventID != "update:10001" || ev.Type != "message" || !ev.OccurredAt.Equal(time.Unix(1772442000, 0)) {
		t.Fatalf("user message: %+v %v", ev, err)
	}
	var m map[string]any
	if json.Unmarshal(ev.Inbound, &m) != nil || m["text"] != "hi" {
		t.Fatalf("inbound payload is not the message: %s", ev.Inbound)
	}
	ev, err = tg.Decode("bot1", nil, []byte(tgBotMsg))
	if err != nil || ev.Kind != webhook.EventOther || ev.EventID != "update:10002" {
		t.Fatalf("bot message: %+v %v", ev, err)
	}
	ev, err = tg.Decode("bot1", nil, []byte(tgEdited))
	if err != nil || ev.Kind != webhook.EventOther || ev.Type != "edited_message" || ev.EventID != "update:10003" {
		t.Fatalf("edited message: %+v %v", ev, err)
	}
}
