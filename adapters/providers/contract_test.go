package providers_test

// The adapter contract suite (package contract) run against every adapter:
//
//   - sandbox: the project's own provider (sandbox/README.md), a real sandbox
//     server, once with keys+lookup and once with neither;
//   - http: a Standard Webhooks receiver fake
//     (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md);
//   - slack: a fake of chat.postMessage (https://api.slack.com/methods/chat.postMessage)
//     and conversations.history (https://docs.slack.dev/reference/methods/conversations.history);
//   - telegram: a fake of sendMessage (https://core.telegram.org/bots/api#sendmessage).

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/contract"
	"github.com/botharness/outbox/adapters/providers/discord"
	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/gcal"
	"github.com/botharness/outbox/adapters/providers/httpsigned"
	"github.com/botharness/outbox/adapters/providers/sandboxprovider"
	"github.com/botharness/outbox/adapters/providers/slack"
	"github.com/botharness/outbox/adapters/providers/stripe"
	"github.com/botharness/outbox/adapters/providers/telegram"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/sandbox"
)

func contractSandbox(t *testing.T) {
	yes, no, day, fiveMin := true, false, 86400, 300
	for _, c := range []struct {
		name   string
		caps   sandbox.CapabilitiesPatch
		doc    core.Capabilities
		chosen bool
	}{
		{"keys+lookup", sandbox.CapabilitiesPatch{IdempotencyKeys: &yes, KeyRetentionSeconds: &day, Lookup: &yes},
			core.Capabilities{IdempotencyKeys: true, KeyRetention: 24 * time.Hour, Lookup: true}, false},
		{"neither", sandbox.CapabilitiesPatch{IdempotencyKeys: &no, Lookup: &no}, core.Capabilities{}, false},
		// Discord's shape: a key window of minutes, no lookup.
		{"short key window", sandbox.CapabilitiesPatch{IdempotencyKeys: &yes, KeyRetentionSeconds: &fiveMin, Lookup: &no},
			core.Capabilities{IdempotencyKeys: true, KeyRetention: 5 * time.Minute}, false},
		// Google Calendar's shape: a client-chosen id (409 on repeat) and lookup.
		{"chosen id+lookup", sandbox.CapabilitiesPatch{ClientChosenIDs: &yes, Lookup: &yes}, core.Capabilities{Lookup: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			contract.Run(t, contract.Subject{
				Name: "sandbox/" + c.name,
				Start: func(t *testing.T) contract.Env {
					sb, url := sandbox.StartTest(t, time.Now)
					// No account token: sandboxprovider.Capabilities does not
					// send the bearer token, so a token-protected account
					// answers its capabilities with 401 (reported to the lead).
					if _, err := sb.Configure(sandbox.Config{Account: "acct", Capabilities: &c.caps}); err != nil {
						t.Fatal(err)
					}
					return contract.Env{Fake: sandboxFake{sb}, BaseURL: url}
				},
				New: func(t *testing.T, baseURL string, timeout time.Duration) core.Provider {
					return sandboxprovider.New(&http.Client{}, sandboxprovider.Config{BaseURL: baseURL, Timeout: timeout, Tokens: map[string]string{"acct": "tok-1"}})
				},
				Request: func(n int) core.SendRequest {
					id := fmt.Sprintf("it_sandbox%d", n)
					return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "acct", Action: "send_message",
						Target: "chan-1", Payload: []byte(`{"text":"hi"}`), PayloadHash: "sha256:x", Attempt: 1}
				},
				Documented:     c.doc,
				ClientChosenID: c.chosen,
			})
		})
	}
}

type sandboxFake struct{ sb *sandbox.Server }

func (f sandboxFake) Inject(x contract.Fault) {
	var fl sandbox.Fault
	switch x.Kind {
	case contract.Reject:
		fl.Kind = sandbox.FaultReject
	case contract.Unauthorized:
		fl.Kind = sandbox.FaultUnauthorized
	case contract.RateLimit:
		fl = sandbox.Fault{Kind: sandbox.FaultRateLimit, RetryAfterSeconds: int(x.RetryAfter / time.Second)}
	case contract.DropAfterCommit:
		fl.Kind = sandbox.FaultDropAfterCommit
	case contract.HangAfterCommit:
		// The sandbox's hang commits when the hold ends (after the client
		// gave up): the effect happens, the caller never learns it.
		fl = sandbox.Fault{Kind: sandbox.FaultHang, DelayMs: 30000}
	}
	if _, err := f.sb.Configure(sandbox.Config{Account: "acct", Faults: []sandbox.Fault{fl}, Append: true}); err != nil {
		panic(err)
	}
}
func (f sandboxFake) Effects(r core.SendRequest) int {
	return f.sb.EffectCount(sandbox.EffectFilter{IntentID: r.IntentID, Account: r.Account})
}
func (f sandboxFake) Release() { f.sb.Release("") }

func newSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func contractHTTP(t *testing.T) {
	for _, c := range []struct {
		name string
		opts fakes.ReceiverOptions
		acct func(base, secret string) httpsigned.Account
		doc  core.Capabilities
	}{
		{"keys+lookup", fakes.ReceiverOptions{HonoursKeys: true, Retention: 24 * time.Hour, Lookup: true},
			func(base, secret string) httpsigned.Account {
				return httpsigned.Account{URL: base + "/hooks", Secret: secret, HonoursKeys: true, KeyRetentionSeconds: 86400, LookupURL: base + "/lookup"}
			},
			core.Capabilities{IdempotencyKeys: true, KeyRetention: 24 * time.Hour, Lookup: true}},
		{"plain", fakes.ReceiverOptions{},
			func(base, secret string) httpsigned.Account {
				return httpsigned.Account{URL: base + "/hooks", Secret: secret}
			},
			core.Capabilities{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			secret := newSecret(t)
			contract.Run(t, contract.Subject{
				Name: "http/" + c.name,
				Start: func(t *testing.T) contract.Env {
					o := c.opts
					o.Secret = secret
					rc := fakes.NewReceiver(t, o)
					return contract.Env{Fake: receiverFake{rc}, BaseURL: strings.TrimSuffix(rc.URL(), "/hooks")}
				},
				New: func(t *testing.T, baseURL string, timeout time.Duration) core.Provider {
					p, err := httpsigned.New(nil, httpsigned.Config{Timeout: timeout, Accounts: map[string]httpsigned.Account{"acct": c.acct(baseURL, secret)}})
					if err != nil {
						t.Fatal(err)
					}
					return p
				},
				Request: func(n int) core.SendRequest {
					id := fmt.Sprintf("it_http%d", n)
					return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "acct", Action: "order.created",
						Target: "orders", Payload: []byte(`{"order":42}`), PayloadHash: "sha256:x", Attempt: 1}
				},
				Documented:         c.doc,
				ConfiguredAccounts: true,
			})
		})
	}
}

type receiverFake struct{ rc *fakes.Receiver }

func (f receiverFake) Inject(x contract.Fault)        { f.rc.Inject(toFault(x)) }
func (f receiverFake) Effects(r core.SendRequest) int { return f.rc.EffectsFor(r.IdempotencyKey) }
func (f receiverFake) Release()                       { f.rc.Release() }

func toFault(x contract.Fault) fakes.Fault {
	switch x.Kind {
	case contract.Reject:
		return fakes.Fault{Kind: fakes.Reject}
	case contract.Unauthorized:
		return fakes.Fault{Kind: fakes.Unauthorized}
	case contract.RateLimit:
		return fakes.Fault{Kind: fakes.RateLimit, RetryAfter: x.RetryAfter}
	case contract.DropAfterCommit:
		return fakes.Fault{Kind: fakes.DropAfterCommit}
	case contract.HangAfterCommit:
		return fakes.Fault{Kind: fakes.Hang}
	}
	panic("unknown contract fault " + string(x.Kind))
}

func contractSlack(t *testing.T) {
	contract.Run(t, contract.Subject{
		Name: "slack",
		Start: func(t *testing.T) contract.Env {
			fk := fakes.NewSlack(t, time.Now)
			fk.AddToken("xoxb-test", "T1", "B1")
			fk.AddChannel("C1")
			return contract.Env{Fake: slackFake{fk}, BaseURL: fk.URL()}
		},
		New: func(t *testing.T, baseURL string, timeout time.Duration) core.Provider {
			p, err := slack.New(nil, slack.Config{BaseURL: baseURL, Timeout: timeout,
				Accounts: map[string]slack.Account{"T1": {Token: "xoxb-test", BotID: "B1"}}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Request: func(n int) core.SendRequest {
			id := fmt.Sprintf("it_slack%d", n)
			return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "T1", Action: "send_message",
				Target: "C1", Payload: []byte(`{"text":"hello"}`), PayloadHash: "sha256:x", Attempt: 1}
		},
		// chat.postMessage has no idempotency key; history is readable.
		Documented:         declared(t, "slack", "send_message"),
		ConfiguredAccounts: true,
	})
}

type slackFake struct{ fk *fakes.Slack }

func (f slackFake) Inject(x contract.Fault) { f.fk.Inject(toFault(x)) }
func (f slackFake) Effects(r core.SendRequest) int {
	return f.fk.PostsWithMetadata("intent_id", r.IntentID)
}
func (f slackFake) Release() { f.fk.Release() }

func contractTelegram(t *testing.T) {
	contract.Run(t, contract.Subject{
		Name: "telegram",
		Start: func(t *testing.T) contract.Env {
			fk := fakes.NewTelegram(t, time.Now)
			fk.AddBot("123456:ABC-test", 123456)
			fk.AddChat(42, "private")
			return contract.Env{Fake: telegramFake{fk}, BaseURL: fk.URL()}
		},
		New: func(t *testing.T, baseURL string, timeout time.Duration) core.Provider {
			p, err := telegram.New(nil, telegram.Config{BaseURL: baseURL, Timeout: timeout,
				Accounts: map[string]telegram.Account{"bot1": {Token: "123456:ABC-test"}}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Request: func(n int) core.SendRequest {
			id := fmt.Sprintf("it_tg%d", n)
			return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "bot1", Action: "send_message",
				Target: "42", Payload: []byte(fmt.Sprintf(`{"text":"hello %s"}`, id)), PayloadHash: "sha256:x", Attempt: 1}
		},
		// The Bot API has neither idempotency keys nor a way to ask.
		Documented:         declared(t, "telegram", "send_message"),
		ConfiguredAccounts: true,
	})
}

type telegramFake struct{ fk *fakes.Telegram }

func (f telegramFake) Inject(x contract.Fault) { f.fk.Inject(toFault(x)) }
func (f telegramFake) Effects(r core.SendRequest) int {
	return f.fk.SendsWith(42, r.IntentID)
}
func (f telegramFake) Release() { f.fk.Release() }

func contractStripe(t *testing.T) {
	contract.Run(t, contract.Subject{
		Name: "stripe",
		Start: func(t *testing.T) contract.Env {
			fk := fakes.NewStripe(t, time.Now)
			fk.AddKey("sk_test_contract")
			for n := 0; n < 20; n++ {
				fk.AddPaymentIntent(fmt.Sprintf("pi_contract%d", n), 5000)
			}
			return contract.Env{Fake: stripeFake{fk}, BaseURL: fk.URL()}
		},
		New: func(t *testing.T, baseURL string, timeout time.Duration) core.Provider {
			p, err := stripe.New(nil, stripe.Config{BaseURL: baseURL, Timeout: timeout,
				Accounts: map[string]stripe.Account{"shop": {SecretKey: "sk_test_contract"}}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Request: func(n int) core.SendRequest {
			id := fmt.Sprintf("it_stripe%d", n)
			return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "shop", Action: "refund",
				Target: fmt.Sprintf("pi_contract%d", n), Payload: []byte(`{"amount":1500,"reason":"requested_by_customer"}`), PayloadHash: "sha256:x", Attempt: 1}
		},
		Documented:         declared(t, "stripe", "refund"),
		ConfiguredAccounts: true,
		NoRetryAfter:       true,
	})
}

type stripeFake struct{ fk *fakes.Stripe }

func (f stripeFake) Inject(x contract.Fault)        { f.fk.Inject(toFault(x)) }
func (f stripeFake) Effects(r core.SendRequest) int { return f.fk.RefundsFor(r.IntentID) }
func (f stripeFake) Release()                       { f.fk.Release() }

func contractGCal(t *testing.T) {
	contract.Run(t, contract.Subject{
		Name: "gcal",
		Start: func(t *testing.T) contract.Env {
			fk := fakes.NewGCal(t, time.Now)
			fk.AddCalendar("team@example.com")
			return contract.Env{Fake: gcalFake{fk}, BaseURL: fk.URL() + "#" + fk.ServiceAccountKey("outbox@proj.iam.gserviceaccount.com")}
		},
		New: func(t *testing.T, baseURL string, timeout time.Duration) core.Provider {
			base, key, _ := strings.Cut(baseURL, "#")
			if key == "" { // the suite's refused-connection URL: any key file shape
				key = `{"type":"service_account","client_email":"x@y","private_key":"k","token_uri":"` + base + `/token"}`
			}
			p, err := gcal.New(nil, gcal.Config{BaseURL: base, Timeout: timeout,
				Accounts: map[string]gcal.Account{"bookings": {ServiceAccount: key}}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Request: func(n int) core.SendRequest {
			id := fmt.Sprintf("it_gcal%d", n)
			return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "bookings", Action: "create_event",
				Target: "team@example.com", Payload: []byte(`{"summary":"Table for 2","start":{"dateTime":"2030-01-01T19:00:00Z"},"end":{"dateTime":"2030-01-01T21:00:00Z"}}`),
				PayloadHash: "sha256:x", Attempt: 1}
		},
		Documented:         declared(t, "gcal", "create_event"),
		ConfiguredAccounts: true,
		ClientChosenID:     true,
		NoRetryAfter:       true,
	})
}

type gcalFake struct{ fk *fakes.GCal }

func (f gcalFake) Inject(x contract.Fault)        { f.fk.Inject(toFault(x)) }
func (f gcalFake) Effects(r core.SendRequest) int { return f.fk.EventsFor(r.IntentID) }
func (f gcalFake) Release()                       { f.fk.Release() }

func contractDiscord(t *testing.T) {
	contract.Run(t, contract.Subject{
		Name: "discord",
		Start: func(t *testing.T) contract.Env {
			fk := fakes.NewDiscord(t, time.Now)
			fk.AddBot("bot-token-contract", "1100")
			fk.AddChannel("1300")
			return contract.Env{Fake: discordFake{fk}, BaseURL: fk.URL()}
		},
		New: func(t *testing.T, baseURL string, timeout time.Duration) core.Provider {
			p, err := discord.New(nil, discord.Config{BaseURL: baseURL, Timeout: timeout,
				Accounts: map[string]discord.Account{"support": {Token: "bot-token-contract"}}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Request: func(n int) core.SendRequest {
			id := fmt.Sprintf("it_discord%d", n)
			return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "support", Action: "send_message",
				Target: "1300", Payload: []byte(`{"content":"hello"}`), PayloadHash: "sha256:x", Attempt: 1}
		},
		Documented:         declared(t, "discord", "send_message"),
		ConfiguredAccounts: true,
	})
}

type discordFake struct{ fk *fakes.Discord }

func (f discordFake) Inject(x contract.Fault) { f.fk.Inject(toFault(x)) }
func (f discordFake) Effects(r core.SendRequest) int {
	return f.fk.MessagesWithNonce(discord.Nonce(r.IntentID))
}
func (f discordFake) Release() { f.fk.Release() }
