package providers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
)

// OUTBOX_PROVIDER_CONFIG builds every adapter, with base URLs pointing at
// the fakes, and the adapters work through the wiring.
func TestWireProvidersFromConfig(t *testing.T) {
	sec := newSecret(t)
	rc := fakes.NewReceiver(t, fakes.ReceiverOptions{Secret: sec, HonoursKeys: true, Retention: time.Hour, Lookup: true})
	sl := fakes.NewSlack(t, time.Now)
	sl.AddToken("xoxb-wired", "T1", "B1")
	sl.AddChannel("C1")
	tg := fakes.NewTelegram(t, time.Now)
	tg.AddBot("999:wired", 999)
	tg.AddChat(42, "private")
	st := fakes.NewStripe(t, time.Now)
	st.AddKey("sk_test_wired")
	st.AddPaymentIntent("pi_wired", 1000)
	dc := fakes.NewDiscord(t, time.Now)
	dc.AddBot("discord-wired", "1100")
	dc.AddChannel("1300")
	gc := fakes.NewGCal(t, time.Now)
	gc.AddCalendar("cal@example.com")
	t.Setenv("TEST_GCAL_KEY", gc.ServiceAccountKey("wired@proj.iam.gserviceaccount.com"))
	t.Setenv("TEST_SLACK_TOKEN", "xoxb-wired")
	t.Setenv("TEST_HTTP_SECRET", sec)

	cfg := fmt.Sprintf(`{
	  "sandbox": {"baseUrl": "http://127.0.0.1:1", "timeoutMs": 500},
	  "http": {"timeoutMs": 2000, "accounts": {"acct": {"url": %q, "secret": "env:TEST_HTTP_SECRET", "honoursKeys": true,
	           "keyRetentionSeconds": 3600, "lookupUrl": %q, "conflictMeans": "duplicate"}}},
	  "slack": {"baseUrl": %q, "lookbackSeconds": 3600, "accounts": {"T1": {"token": "env:TEST_SLACK_TOKEN", "botId": "B1"}}},
	  "telegram": {"baseUrl": %q, "accounts": {"bot1": {"token": "999:wired"}}},
	  "stripe": {"baseUrl": %q, "accounts": {"shop": {"secretKey": "sk_test_wired"}}},
	  "discord": {"baseUrl": %q, "nonceWindowSeconds": 120, "accounts": {"d": {"token": "discord-wired"}}},
	  "gcal": {"baseUrl": %q, "accounts": {"cal": {"serviceAccount": "env:TEST_GCAL_KEY"}}}
	}`, rc.URL(), rc.LookupURL(), sl.URL(), tg.URL(), st.URL(), dc.URL(), gc.URL())
	m, err := wire.Providers(cfg, &http.Client{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, c := range map[string]struct {
		account, action, target, payload string
		caps                             core.Capabilities
	}{
		"http":     {"acct", "order.created", "orders", `{"n":1}`, core.Capabilities{IdempotencyKeys: true, KeyRetention: time.Hour, Lookup: true}},
		"slack":    {"T1", "send_message", "C1", `{"text":"hi"}`, core.Capabilities{Lookup: true}},
		"telegram": {"bot1", "send_message", "42", `{"text":"hi"}`, core.Capabilities{}},
		"stripe":   {"shop", "refund", "pi_wired", `{"amount":100}`, core.Capabilities{IdempotencyKeys: true, KeyRetention: 24 * time.Hour}},
		"discord":  {"d", "send_message", "1300", `{"content":"hi"}`, core.Capabilities{IdempotencyKeys: true, KeyRetention: 2 * time.Minute}},
		"gcal":     {"cal", "create_event", "cal@example.com", `{"start":{"date":"2030-01-01"},"end":{"date":"2030-01-02"}}`, core.Capabilities{Lookup: true}},
	} {
		p, ok := m.Provider(name)
		if !ok {
			t.Fatalf("provider %s not wired", name)
		}
		caps, err := p.Capabilities(ctx, c.account, c.action)
		if err != nil || caps != c.caps {
			t.Fatalf("%s capabilities %+v %v", name, caps, err)
		}
		id := "it_wire_" + name
		res, err := p.Send(ctx, core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "b", Account: c.account, Action: c.action,
			Target: c.target, Payload: []byte(c.payload), Attempt: 1})
		if err != nil || res.ExternalID == "" {
			t.Fatalf("%s send: %+v %v", name, res, err)
		}
	}
	if _, ok := m.Provider("sandbox"); !ok {
		t.Fatal("sandbox not wired")
	}
	if rc.Effects() != 1 || sl.Posts() != 1 || tg.Sends() != 1 || st.Refunds() != 1 || dc.Messages() != 1 || gc.Events() != 1 {
		t.Fatalf("effects http %d slack %d telegram %d stripe %d discord %d gcal %d", rc.Effects(), sl.Posts(), tg.Sends(), st.Refunds(), dc.Messages(), gc.Events())
	}
}

func TestWireProvidersRejectsBadConfigWithoutSecrets(t *testing.T) {
	sec := newSecret(t)
	for name, cfg := range map[string]string{
		"missing env":             `{"slack":{"accounts":{"T1":{"token":"env:TEST_NOT_SET_ANYWHERE"}}}}`,
		"slack no token":          `{"slack":{"accounts":{"T1":{"botId":"B1"}}}}`,
		"telegram no token":       `{"telegram":{"accounts":{"b":{}}}}`,
		"http keys no retention":  fmt.Sprintf(`{"http":{"accounts":{"a":{"url":"https://x.example/h","secret":%q,"honoursKeys":true}}}}`, sec),
		"http bad secret":         `{"http":{"accounts":{"a":{"url":"https://x.example/h","secret":"xoxb-not-a-whsec"}}}}`,
		"slack bad base url":      `{"slack":{"baseUrl":"::","accounts":{"T1":{"token":"xoxb-1"}}}}`,
		"not json":                `{"slack":`,
		"sandbox no url":          `{"sandbox":{}}`,
		"stripe no key":           `{"stripe":{"accounts":{"s":{}}}}`,
		"discord window too long": `{"discord":{"nonceWindowSeconds":600,"accounts":{"d":{"token":"t"}}}}`,
		"gcal not a key file":     `{"gcal":{"accounts":{"c":{"serviceAccount":"{\"type\":\"authorized_user\"}"}}}}`,
	} {
		_, err := wire.Providers(cfg, &http.Client{})
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), sec) || strings.Contains(err.Error(), "xoxb-") {
			t.Errorf("%s: secret in error %q", name, err)
		}
	}
	m, err := wire.Providers("", &http.Client{})
	if err != nil || len(m) != 0 {
		t.Fatalf("empty config: %v %v", m, err)
	}
}
