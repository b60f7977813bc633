package telegram_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/providertest"
	"github.com/botharness/outbox/adapters/providers/telegram"
	"github.com/botharness/outbox/core"
)

var ctx = context.Background()

const token = "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11"

func newProvider(t *testing.T, base string) *telegram.Provider {
	t.Helper()
	p, err := telegram.New(nil, telegram.Config{BaseURL: base, Timeout: 2 * time.Second, Accounts: map[string]telegram.Account{"bot1": {Token: token}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func request(id, target, payload string) core.SendRequest {
	return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot", Account: "bot1", Action: "send_message", Target: target, Payload: []byte(payload), Attempt: 1}
}

// Each documented Bot API answer maps to the right class. Shapes:
// https://core.telegram.org/bots/api#making-requests ("ok", "result",
// "error_code", "description", "parameters"),
// https://core.telegram.org/bots/api#responseparameters (retry_after,
// migrate_to_chat_id), https://core.telegram.org/bots/api#sendmessage. The
// description texts are those the Bot API returns for sendMessage (as
// collected in https://github.com/TelegramBotAPI/errors).
func TestSendMapsDocumentedAnswers(t *testing.T) {
	tgErr := func(code int, desc string) string {
		return fmt.Sprintf(`{"ok":false,"error_code":%d,"description":%q}`, code, desc)
	}
	cases := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		class      core.ErrorClass
		external   string
		retryAfter time.Duration
	}{
		{"sent", 200, nil, `{"ok":true,"result":{"message_id":7,"from":{"id":123456,"is_bot":true,"first_name":"Outbox"},"chat":{"id":42,"first_name":"A","type":"private"},"date":1700000000,"text":"hi"}}`, "", "42:7", 0},
		{"sent to a channel by username", 200, nil, `{"ok":true,"result":{"message_id":3,"chat":{"id":-1001234567890,"type":"channel"},"date":1,"text":"hi"}}`, "", "-1001234567890:3", 0},
		{"chat not found", 400, nil, tgErr(400, "Bad Request: chat not found"), core.ClassRejectedInput, "", 0},
		{"text empty", 400, nil, tgErr(400, "Bad Request: message text is empty"), core.ClassRejectedInput, "", 0},
		{"can't parse entities", 400, nil, tgErr(400, "Bad Request: can't parse entities: Unsupported start tag \"foo\" at byte offset 0"), core.ClassRejectedInput, "", 0},
		{"group migrated", 400, nil, `{"ok":false,"error_code":400,"description":"Bad Request: group chat was upgraded to a supergroup chat","parameters":{"migrate_to_chat_id":-1001234567890}}`, core.ClassRejectedInput, "", 0},
		{"token revoked", 401, nil, tgErr(401, "Unauthorized"), core.ClassUnauthorized, "", 0},
		{"bot blocked", 403, nil, tgErr(403, "Forbidden: bot was blocked by the user"), core.ClassUnauthorized, "", 0},
		{"bot kicked", 403, nil, tgErr(403, "Forbidden: bot was kicked from the group chat"), core.ClassUnauthorized, "", 0},
		{"user deactivated", 403, nil, tgErr(403, "Forbidden: user is deactivated"), core.ClassUnauthorized, "", 0},
		{"can't initiate conversation", 403, nil, tgErr(403, "Forbidden: bot can't initiate conversation with a user"), core.ClassUnauthorized, "", 0},
		{"not found (bad method/token path)", 404, nil, tgErr(404, "Not Found"), core.ClassRejectedInput, "", 0},
		{"flood control", 429, nil, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 34","parameters":{"retry_after":34}}`, core.ClassRateLimited, "", 34 * time.Second},
		{"429 without parameters uses Retry-After", 429, map[string]string{"Retry-After": "5"}, tgErr(429, "Too Many Requests"), core.ClassRateLimited, "", 5 * time.Second},
		{"internal server error", 500, nil, tgErr(500, "Internal Server Error"), core.ClassUnknownOutcome, "", 0},
		{"bad gateway html", 502, nil, `<html><body>502 Bad Gateway</body></html>`, core.ClassUnknownOutcome, "", 0},
		{"conflict", 409, nil, tgErr(409, "Conflict: terminated by other getUpdates request"), core.ClassUnknownOutcome, "", 0},
		{"ok without message id", 200, nil, `{"ok":true,"result":true}`, core.ClassUnknownOutcome, "", 0},
		{"empty 200", 200, nil, ``, core.ClassUnknownOutcome, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProvider(t, providertest.Canned(t, c.status, c.header, c.body))
			res, err := p.Send(ctx, request("it_1", "42", `{"text":"hi"}`))
			if providertest.Outcome(t, res, err, c.class, c.external, c.retryAfter) {
				return
			}
			if strings.Contains(fmt.Sprintf("%v %+v", err, core.EvidenceOf(err)), token) {
				t.Fatal("bot token leaked into the error or evidence")
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for code, want := range map[int]core.ErrorClass{400: core.ClassRejectedInput, 401: core.ClassUnauthorized, 403: core.ClassUnauthorized,
		404: core.ClassRejectedInput, 429: core.ClassRateLimited, 500: core.ClassUnknownOutcome, 502: core.ClassUnknownOutcome, 0: core.ClassUnknownOutcome} {
		if got := telegram.Classify(code); got != want {
			t.Errorf("Classify(%d) = %s, want %s", code, got, want)
		}
	}
}

// The request: POST JSON to /bot<token>/sendMessage with chat_id = target.
func TestSendRequestShape(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var bodies []map[string]json.RawMessage
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var b map[string]json.RawMessage
		_ = json.NewDecoder(r.Body).Decode(&b)
		paths, bodies = append(paths, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")), append(bodies, b)
		_, _ = w.Write([]byte(`{"ok":true,"result":{"message_id":1,"chat":{"id":42,"type":"private"}}}`))
	}))
	defer srv.Close()
	p := newProvider(t, srv.URL)
	for _, target := range []string{"42", "-1001234567890", "@mychannel"} {
		if _, err := p.Send(ctx, request("it_1", target, `{"text":"hi","parse_mode":"HTML"}`)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if paths[0] != "POST /bot"+token+"/sendMessage application/json" {
		t.Fatalf("request line %q", paths[0])
	}
	for i, want := range []string{`42`, `-1001234567890`, `"@mychannel"`} {
		if string(bodies[i]["chat_id"]) != want || string(bodies[i]["text"]) != `"hi"` || string(bodies[i]["parse_mode"]) != `"HTML"` {
			t.Fatalf("body %d: %v", i, bodies[i])
		}
	}
}

func TestSendAgainstFake(t *testing.T) {
	fk := fakes.NewTelegram(t, time.Now)
	fk.AddBot(token, 123456)
	for id, kind := range map[int64]string{42: "private", 43: "private", -100: "group", -200: "group"} {
		fk.AddChat(id, kind)
	}
	fk.BlockBot(43)
	fk.KickBot(-100)
	fk.MigrateChat(-200, -1009999)
	p := newProvider(t, fk.URL())
	check := func(name string, r core.SendRequest, want core.ErrorClass, code string) {
		t.Helper()
		_, err := p.Send(ctx, r)
		if core.ClassOf(err) != want || core.EvidenceOf(err).ProviderCode != code {
			t.Errorf("%s: %v %+v, want %s/%s", name, err, core.EvidenceOf(err), want, code)
		}
	}
	check("blocked", request("a", "43", `{"text":"x"}`), core.ClassUnauthorized, "403")
	check("kicked", request("b", "-100", `{"text":"x"}`), core.ClassUnauthorized, "403")
	check("chat not found", request("c", "77", `{"text":"x"}`), core.ClassRejectedInput, "400")
	check("empty text", request("d", "42", `{"text":" "}`), core.ClassRejectedInput, "400")
	check("too long", request("e", "42", fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", 4097))), core.ClassRejectedInput, "400")
	_, err := p.Send(ctx, request("f", "-200", `{"text":"x"}`))
	if core.ClassOf(err) != core.ClassRejectedInput || core.EvidenceOf(err).Extra["migrateToChatId"] != "-1009999" {
		t.Errorf("migrated: %v %+v", err, core.EvidenceOf(err))
	}
	fk.Inject(fakes.Fault{Kind: fakes.ErrorAfterCommit})
	check("500 after commit", request("g", "42", `{"text":"x"}`), core.ClassUnknownOutcome, "500")
	if fk.Sends() != 1 {
		t.Fatalf("%d sends, want 1 (only the 500-after-commit one)", fk.Sends())
	}
	fk.RevokeBot(token)
	check("revoked token", request("h", "42", `{"text":"x"}`), core.ClassUnauthorized, "401")
	for name, payload := range map[string]string{"not an object": `[1]`, "other chat": `{"text":"x","chat_id":99}`} {
		if _, err := p.Send(ctx, request("i", "42", payload)); core.ClassOf(err) != core.ClassRejectedInput {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The token is in the URL path; transport errors must not carry it.
func TestTokenNeverInTransportErrors(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	_ = l.Close()
	p := newProvider(t, "http://"+addr)
	_, err := p.Send(ctx, request("it_1", "42", `{"text":"hi"}`))
	if core.ClassOf(err) != core.ClassTransient {
		t.Fatalf("refused: %v", err)
	}
	if s := fmt.Sprintf("%v %+v", err, core.EvidenceOf(err)); strings.Contains(s, token) || strings.Contains(s, "/bot") {
		t.Fatalf("token leaked: %s", s)
	}
}

func TestCapabilitiesAndLookup(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1:1")
	c, err := p.Capabilities(ctx, "bot1", "send_message")
	if err != nil || c != (core.Capabilities{}) {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := p.Capabilities(ctx, "nope", "send_message"); err == nil {
		t.Fatal("unknown account")
	}
	if _, err := p.Lookup(ctx, request("x", "42", `{}`)); err == nil {
		t.Fatal("lookup must fail: the Bot API has none")
	}
	if !p.SupportsAction("send_message") || p.SupportsAction("deleteMessage") {
		t.Fatal("actions")
	}
}

// https://core.telegram.org/bots/api#setwebhook: "X-Telegram-Bot-Api-Secret-Token".
func TestVerifySecretToken(t *testing.T) {
	if !telegram.VerifySecretToken("s3cr3t_-A", "s3cr3t_-A") || telegram.VerifySecretToken("s3cr3t", "s3cr3T") ||
		telegram.VerifySecretToken("", "") || telegram.VerifySecretToken("s3cr3t", "") {
		t.Fatal("VerifySecretToken")
	}
}
