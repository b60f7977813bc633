package discord_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/discord"
	"github.com/botharness/outbox/adapters/providers/providertest"
	"github.com/botharness/outbox/core"
)

var ctx = context.Background()

func newProvider(t *testing.T, base string) *discord.Provider {
	t.Helper()
	p, err := discord.New(nil, discord.Config{BaseURL: base, Timeout: 2 * time.Second, Accounts: map[string]discord.Account{"support": {Token: "tok"}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func request(id string) core.SendRequest {
	return core.SendRequest{IntentID: id, IdempotencyKey: id, Account: "support", Action: "send_message", Target: "1300", Payload: []byte(`{"content":"hi"}`), Attempt: 1}
}

// Each documented answer maps by status and JSON error code
// (https://discord.com/developers/docs/topics/opcodes-and-status-codes).
func TestSendMapsDocumentedAnswers(t *testing.T) {
	for _, c := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		class      core.ErrorClass
		retryAfter time.Duration
	}{
		{"created", 200, nil, `{"id":"1200000000000000001","channel_id":"1300","nonce":"x"}`, "", 0},
		{"2xx without id", 200, nil, `{}`, core.ClassUnknownOutcome, 0},
		{"50035 invalid form body", 400, nil, `{"code":50035,"message":"Invalid Form Body","errors":{}}`, core.ClassRejectedInput, 0},
		{"50006 empty message", 400, nil, `{"code":50006,"message":"Cannot send an empty message"}`, core.ClassRejectedInput, 0},
		{"50008 non-text channel", 400, nil, `{"code":50008,"message":"Cannot send messages in a non-text channel"}`, core.ClassRejectedInput, 0},
		{"50109 invalid JSON", 400, nil, `{"code":50109,"message":"The request body contains invalid JSON."}`, core.ClassRejectedInput, 0},
		{"401 unauthorized", 401, nil, `{"message":"401: Unauthorized","code":0}`, core.ClassUnauthorized, 0},
		{"50001 missing access", 403, nil, `{"code":50001,"message":"Missing Access"}`, core.ClassUnauthorized, 0},
		{"50013 missing permissions", 403, nil, `{"code":50013,"message":"Missing Permissions"}`, core.ClassUnauthorized, 0},
		{"50007 cannot message user", 403, nil, `{"code":50007,"message":"Cannot send messages to this user"}`, core.ClassUnauthorized, 0},
		{"10003 unknown channel", 404, nil, `{"code":10003,"message":"Unknown Channel"}`, core.ClassRejectedInput, 0},
		{"413 too large", 413, nil, `{"code":40005,"message":"Request entity too large"}`, core.ClassRejectedInput, 0},
		{"429 fractional retry_after", 429, map[string]string{"Retry-After": "2", "X-RateLimit-Scope": "user"}, `{"message":"You are being rate limited.","retry_after":1.337,"global":false}`, core.ClassRateLimited, 1337 * time.Millisecond},
		{"429 global", 429, map[string]string{"Retry-After": "1"}, `{"message":"You are being rate limited.","retry_after":0.5,"global":true}`, core.ClassRateLimited, 500 * time.Millisecond},
		{"429 without body: header", 429, map[string]string{"Retry-After": "3"}, ``, core.ClassRateLimited, 3 * time.Second},
		{"500", 500, nil, `{"message":"500: Internal Server Error","code":0}`, core.ClassUnknownOutcome, 0},
		{"502 gateway", 502, nil, `{"message":"502: Bad Gateway","code":0}`, core.ClassUnknownOutcome, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newProvider(t, providertest.Canned(t, c.status, c.header, c.body))
			res, err := p.Send(ctx, request("it_1"))
			providertest.Outcome(t, res, err, c.class, "1200000000000000001", c.retryAfter)
		})
	}
}

// The request is Discord's: Bot token, the required User-Agent, JSON with
// the same nonce (at most 25 characters) and enforce_nonce on every attempt.
func TestSendWireFormat(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, r.URL.Path+"|"+r.Header.Get("Authorization")+"|"+r.Header.Get("User-Agent")+"|"+string(b))
		_, _ = w.Write([]byte(`{"id":"1","channel_id":"1300"}`))
	}))
	t.Cleanup(srv.Close)
	p := newProvider(t, srv.URL)
	for i := 0; i < 2; i++ {
		if _, err := p.Send(ctx, request("it_wire")); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 2 || seen[0] != seen[1] {
		t.Fatalf("attempts differ: %q", seen)
	}
	if !regexp.MustCompile(`^/channels/1300/messages\|Bot tok\|DiscordBot \(https://[^,]+, [0-9.]+\)\|`).MatchString(seen[0]) {
		t.Fatalf("request %q", seen[0])
	}
	var body struct {
		Content      string
		Nonce        string
		EnforceNonce bool `json:"enforce_nonce"`
	}
	_ = json.Unmarshal([]byte(seen[0][len(regexp.MustCompile(`^[^{]*`).FindString(seen[0])):]), &body)
	n := discord.Nonce("it_wire")
	if body.Content != "hi" || body.Nonce != n || !body.EnforceNonce || len(n) != 25 || discord.Nonce("it_wirf") == n {
		t.Fatalf("body %+v (nonce %q)", body, n)
	}
	for _, payload := range []string{`{"content":"x","nonce":"mine"}`, `{"content":"x","enforce_nonce":false}`, `[]`} {
		r := request("it_bad")
		r.Payload = []byte(payload)
		if _, err := p.Send(ctx, r); core.ClassOf(err) != core.ClassRejectedInput {
			t.Errorf("%s: %v", payload, err)
		}
	}
	if len(seen) != 2 {
		t.Fatal("refused input reached Discord")
	}
}

func TestWindowIsAtMostFiveMinutes(t *testing.T) {
	p, err := discord.New(nil, discord.Config{Window: 30 * time.Second, Accounts: map[string]discord.Account{"a": {Token: "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := p.Capabilities(ctx, "a", "send_message")
	if !c.IdempotencyKeys || c.KeyRetention != 30*time.Second || c.Lookup {
		t.Fatalf("shortened window: %+v", c)
	}
	p, _ = discord.New(nil, discord.Config{Accounts: map[string]discord.Account{"a": {Token: "t"}}})
	if c, _ := p.Capabilities(ctx, "a", "send_message"); c.KeyRetention != 5*time.Minute {
		t.Fatalf("default window: %+v", c)
	}
	if _, err := discord.New(nil, discord.Config{Window: 10 * time.Minute}); err == nil {
		t.Fatal("a window longer than Discord's few minutes was accepted")
	}
}
