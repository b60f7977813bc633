package slack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/providertest"
	"github.com/botharness/outbox/adapters/providers/slack"
	"github.com/botharness/outbox/core"
)

var ctx = context.Background()

func newProvider(t *testing.T, base string, mod ...func(*slack.Config)) *slack.Provider {
	t.Helper()
	cfg := slack.Config{BaseURL: base, Timeout: 2 * time.Second, Accounts: map[string]slack.Account{"T1": {Token: "xoxb-secret-token", BotID: "B1"}}}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := slack.New(nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func request(id, payload string) core.SendRequest {
	return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot", Account: "T1", Action: "send_message", Target: "C1", Payload: []byte(payload), Attempt: 1}
}

// Every documented chat.postMessage answer maps to the right class.
// Sources:
//   - https://api.slack.com/methods/chat.postMessage (response examples and the
//     errors table: channel_not_found, is_archived, msg_too_long, no_text,
//     too_many_attachments, not_in_channel, rate_limited, invalid_auth,
//     not_authed, account_inactive, token_revoked, missing_scope,
//     ekm_access_denied, request_timeout, team_added_to_org, fatal_error)
//   - https://docs.slack.dev/apis/web-api/rate-limits (HTTP 429 + Retry-After,
//     body {"ok":false,"error":"ratelimited"})
//   - common errors: internal_error / fatal_error "It's possible some aspect
//     of the operation succeeded before the error was raised";
//     service_unavailable.
func TestSendMapsDocumentedAnswers(t *testing.T) {
	okBody := `{"ok":true,"channel":"C123ABC456","ts":"1503435956.000247","message":{"text":"Here's a message for you","username":"ecto1","bot_id":"B123ABC456","type":"message","subtype":"bot_message","ts":"1503435956.000247"}}`
	errBody := func(code string) string { return fmt.Sprintf(`{"ok":false,"error":%q}`, code) }
	cases := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		class      core.ErrorClass // "" = success
		external   string
		retryAfter time.Duration
	}{
		{"ok", 200, nil, okBody, "", "1503435956.000247", 0},
		{"ok with warning", 200, nil, `{"ok":true,"channel":"C1","ts":"1.000001","warning":"missing_charset","response_metadata":{"warnings":["missing_charset"]}}`, "", "1.000001", 0},
		{"channel_not_found", 200, nil, errBody("channel_not_found"), core.ClassRejectedInput, "", 0},
		{"is_archived", 200, nil, errBody("is_archived"), core.ClassRejectedInput, "", 0},
		{"msg_too_long", 200, nil, errBody("msg_too_long"), core.ClassRejectedInput, "", 0},
		{"no_text", 200, nil, errBody("no_text"), core.ClassRejectedInput, "", 0},
		{"invalid_blocks", 200, nil, errBody("invalid_blocks"), core.ClassRejectedInput, "", 0},
		{"too_many_attachments (documented example)", 200, nil, "{\n    \"ok\": false,\n    \"error\": \"too_many_attachments\"\n}", core.ClassRejectedInput, "", 0},
		{"not_in_channel", 200, nil, errBody("not_in_channel"), core.ClassRejectedInput, "", 0},
		{"restricted_action", 200, nil, errBody("restricted_action"), core.ClassRejectedInput, "", 0},
		{"invalid_metadata_format", 200, nil, errBody("invalid_metadata_format"), core.ClassRejectedInput, "", 0},
		{"invalid_auth", 200, nil, errBody("invalid_auth"), core.ClassUnauthorized, "", 0},
		{"not_authed", 200, nil, errBody("not_authed"), core.ClassUnauthorized, "", 0},
		{"token_revoked", 200, nil, errBody("token_revoked"), core.ClassUnauthorized, "", 0},
		{"account_inactive", 200, nil, errBody("account_inactive"), core.ClassUnauthorized, "", 0},
		{"missing_scope", 200, nil, `{"ok":false,"error":"missing_scope","needed":"chat:write","provided":"channels:read"}`, core.ClassUnauthorized, "", 0},
		{"ekm_access_denied", 200, nil, errBody("ekm_access_denied"), core.ClassUnauthorized, "", 0},
		{"HTTP 429 ratelimited", 429, map[string]string{"Retry-After": "30"}, errBody("ratelimited"), core.ClassRateLimited, "", 30 * time.Second},
		{"HTTP 429 without body", 429, map[string]string{"Retry-After": "3"}, "", core.ClassRateLimited, "", 3 * time.Second},
		{"rate_limited in a 200", 200, nil, errBody("rate_limited"), core.ClassRateLimited, "", 0},
		{"request_timeout (POST data truncated)", 200, nil, errBody("request_timeout"), core.ClassTransient, "", 0},
		{"team_added_to_org", 200, nil, errBody("team_added_to_org"), core.ClassTransient, "", 0},
		{"internal_error may have succeeded", 200, nil, errBody("internal_error"), core.ClassUnknownOutcome, "", 0},
		{"fatal_error may have succeeded", 200, nil, errBody("fatal_error"), core.ClassUnknownOutcome, "", 0},
		{"service_unavailable 503", 503, nil, errBody("service_unavailable"), core.ClassUnknownOutcome, "", 0},
		{"undocumented code", 200, nil, errBody("something_new"), core.ClassUnknownOutcome, "", 0},
		{"ok without ts", 200, nil, `{"ok":true,"channel":"C1"}`, core.ClassUnknownOutcome, "", 0},
		{"garbage 200", 200, nil, `<html>hi</html>`, core.ClassUnknownOutcome, "", 0},
		{"502 from a proxy", 502, nil, `<html>Bad Gateway</html>`, core.ClassUnknownOutcome, "", 0},
		{"404 unknown_method", 404, nil, errBody("unknown_method"), core.ClassRejectedInput, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProvider(t, providertest.Canned(t, c.status, c.header, c.body))
			res, err := p.Send(ctx, request("it_1", `{"text":"hi"}`))
			if providertest.Outcome(t, res, err, c.class, c.external, c.retryAfter) {
				return
			}
			if strings.Contains(fmt.Sprintf("%v %+v", err, core.EvidenceOf(err)), "xoxb-secret-token") {
				t.Fatal("token leaked into the error or evidence")
			}
		})
	}
}

func TestClassifyCodes(t *testing.T) {
	for code, want := range map[string]core.ErrorClass{
		"channel_not_found": core.ClassRejectedInput, "is_archived": core.ClassRejectedInput, "msg_too_long": core.ClassRejectedInput,
		"no_text": core.ClassRejectedInput, "invalid_blocks": core.ClassRejectedInput,
		"invalid_auth": core.ClassUnauthorized, "token_revoked": core.ClassUnauthorized, "account_inactive": core.ClassUnauthorized,
		"not_authed": core.ClassUnauthorized, "missing_scope": core.ClassUnauthorized,
		"ratelimited": core.ClassRateLimited, "rate_limited": core.ClassRateLimited,
		"fatal_error": core.ClassUnknownOutcome, "internal_error": core.ClassUnknownOutcome, "service_unavailable": core.ClassUnknownOutcome,
		"": core.ClassUnknownOutcome,
	} {
		if got := slack.Classify(code); got != want {
			t.Errorf("Classify(%q) = %s, want %s", code, got, want)
		}
	}
}

// The request the adapter sends: chat.postMessage arguments as JSON, the
// bearer token, and our metadata
// (https://docs.slack.dev/messaging/message-metadata).
func TestSendRequestShape(t *testing.T) {
	var mu sync.Mutex
	var got map[string]any
	var auth, ctype string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		auth, ctype = r.Header.Get("Authorization"), r.Header.Get("Content-Type")
		_ = json.NewDecoder(r.Body).Decode(&got)
		if r.URL.Path != "/api/chat.postMessage" || r.Method != http.MethodPost {
			t.Errorf("%s %s", r.Method, r.URL.Path)
		}
		_, _ = w.Write([]byte(`{"ok":true,"channel":"C1","ts":"1.000001"}`))
	}))
	defer srv.Close()
	p := newProvider(t, srv.URL+"/api")
	if _, err := p.Send(ctx, request("it_shape", `{"text":"hello","unfurl_links":false,"channel":"C1"}`)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if auth != "Bearer xoxb-secret-token" || !strings.HasPrefix(ctype, "application/json") {
		t.Fatalf("auth %q content-type %q", auth, ctype)
	}
	want := map[string]any{"channel": "C1", "text": "hello", "unfurl_links": false,
		"metadata": map[string]any{"event_type": "outbox_intent", "event_payload": map[string]any{"intent_id": "it_shape"}}}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Fatalf("body %s\nwant %s", gb, wb)
	}
}

func TestSendRejectsBadPayloadWithoutCalling(t *testing.T) {
	fk := fakes.NewSlack(t, time.Now)
	fk.AddToken("xoxb-secret-token", "T1", "B1")
	fk.AddChannel("C1")
	p := newProvider(t, fk.URL())
	for name, payload := range map[string]string{
		"not an object":     `"hello"`,
		"metadata reserved": `{"text":"x","metadata":{"event_type":"mine","event_payload":{}}}`,
		"token in body":     `{"text":"x","token":"xoxb-other"}`,
		"other channel":     `{"text":"x","channel":"C2"}`,
		"thread_ts number":  `{"text":"x","thread_ts":1}`,
	} {
		_, err := p.Send(ctx, request("it_bad", payload))
		if core.ClassOf(err) != core.ClassRejectedInput {
			t.Errorf("%s: %v", name, err)
		}
	}
	r := request("it_bad", `{"text":"x"}`)
	r.Account = "T-unknown"
	if _, err := p.Send(ctx, r); core.ClassOf(err) != core.ClassRejectedInput {
		t.Errorf("unknown account: %v", err)
	}
	if fk.Posts() != 0 {
		t.Fatalf("%d posts", fk.Posts())
	}
}

// The fake's own documented errors, end to end through the adapter.
func TestSendAgainstFakeErrors(t *testing.T) {
	fk := fakes.NewSlack(t, time.Now)
	fk.AddToken("xoxb-secret-token", "T1", "B1")
	fk.AddToken("xoxb-revoked", "T2", "B2")
	fk.RevokeToken("xoxb-revoked")
	fk.AddChannel("C1")
	fk.AddChannel("CARCH")
	fk.ArchiveChannel("CARCH")
	p := newProvider(t, fk.URL(), func(c *slack.Config) { c.Accounts["T2"] = slack.Account{Token: "xoxb-revoked"} })
	check := func(name string, r core.SendRequest, want core.ErrorClass, code string) {
		t.Helper()
		_, err := p.Send(ctx, r)
		if core.ClassOf(err) != want || core.EvidenceOf(err).ProviderCode != code {
			t.Errorf("%s: %v (%+v), want %s/%s", name, err, core.EvidenceOf(err), want, code)
		}
	}
	r := request("it_a", `{"text":"x"}`)
	r.Target = "CNOPE"
	check("unknown channel", r, core.ClassRejectedInput, "channel_not_found")
	r.Target = "CARCH"
	check("archived", r, core.ClassRejectedInput, "is_archived")
	check("no text", request("it_b", `{}`), core.ClassRejectedInput, "no_text")
	check("too long", request("it_c", fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", 40001))), core.ClassRejectedInput, "msg_too_long")
	check("blocks not an array", request("it_d", `{"blocks":{"type":"section"}}`), core.ClassRejectedInput, "invalid_blocks")
	r = request("it_e", `{"text":"x"}`)
	r.Account = "T2"
	check("revoked token", r, core.ClassUnauthorized, "token_revoked")
	fk.Inject(fakes.Fault{Kind: fakes.ErrorAfterCommit})
	check("internal_error after commit", request("it_f", `{"text":"x"}`), core.ClassUnknownOutcome, "internal_error")
	if n := fk.PostsWithMetadata("intent_id", "it_f"); n != 1 {
		t.Fatalf("internal_error case: %d posts, want 1 (the reason it is unknown, not retryable)", n)
	}
	if fk.Posts() != 1 {
		t.Fatalf("%d posts, want 1", fk.Posts())
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Lookup reads conversations.history
// (https://docs.slack.dev/reference/methods/conversations.history) with
// include_all_metadata=true, a bounded oldest, following next_cursor.
func TestLookupHistory(t *testing.T) {
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	setup := func(t *testing.T, mod ...func(*slack.Config)) (*fakes.Slack, *slack.Provider) {
		fk := fakes.NewSlack(t, clk.Now)
		fk.AddToken("xoxb-secret-token", "T1", "B1")
		fk.AddChannel("C1")
		mod = append([]func(*slack.Config){func(c *slack.Config) { c.Now = clk.Now; c.HistoryPageSize = 2 }}, mod...)
		return fk, newProvider(t, fk.URL(), mod...)
	}

	t.Run("found past the first pages", func(t *testing.T) {
		fk, p := setup(t)
		r := request("it_deep", `{"text":"ours"}`)
		res, err := p.Send(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			fk.AddMessage("C1", fakes.SlackMessage{Text: "chatter", User: "U9"})
		}
		lr, err := p.Lookup(ctx, r)
		if err != nil || lr.State != core.LookupFound || lr.ExternalID != res.ExternalID {
			t.Fatalf("Lookup = %+v, %v; want found %s", lr, err, res.ExternalID)
		}
		if fk.HistoryCalls() != 3 {
			t.Fatalf("%d history calls, want 3 (pages of 2, ours is 6th newest)", fk.HistoryCalls())
		}
		q := fk.LastHistoryQuery()
		if q["include_all_metadata"] != "true" || q["channel"] != "C1" || q["cursor"] == "" ||
			q["oldest"] != slack.FormatTS(clk.Now().Add(-24*time.Hour)) || q["inclusive"] != "true" {
			t.Fatalf("history query %v", q)
		}
	})
	t.Run("absent only when the window was read to the end", func(t *testing.T) {
		fk, p := setup(t)
		for i := 0; i < 3; i++ {
			fk.AddMessage("C1", fakes.SlackMessage{Text: "chatter", User: "U9"})
		}
		lr, err := p.Lookup(ctx, request("it_never", `{"text":"x"}`))
		if err != nil || lr.State != core.LookupAbsent {
			t.Fatalf("Lookup = %+v, %v; want absent", lr, err)
		}
	})
	t.Run("a truncated window is not absent", func(t *testing.T) {
		fk, p := setup(t, func(c *slack.Config) { c.MaxHistoryPages = 2 })
		for i := 0; i < 7; i++ {
			fk.AddMessage("C1", fakes.SlackMessage{Text: "chatter", User: "U9"})
		}
		lr, err := p.Lookup(ctx, request("it_never", `{"text":"x"}`))
		if !errors.Is(err, slack.ErrNotAuthoritative) || lr.State != "" {
			t.Fatalf("Lookup = %+v, %v; want ErrNotAuthoritative", lr, err)
		}
	})
	t.Run("another bot's message with our intent id is neither found nor absent", func(t *testing.T) {
		fk, p := setup(t)
		fk.AddMessage("C1", fakes.SlackMessage{Text: "spoof", BotID: "B999",
			Metadata: &fakes.SlackMetadata{EventType: "outbox_intent", EventPayload: json.RawMessage(`{"intent_id":"it_x"}`)}})
		lr, err := p.Lookup(ctx, request("it_x", `{"text":"x"}`))
		if !errors.Is(err, slack.ErrNotAuthoritative) || lr.State != "" {
			t.Fatalf("Lookup = %+v, %v; want ErrNotAuthoritative", lr, err)
		}
		// Other event types with the same field are not ours at all.
		fk.AddMessage("C1", fakes.SlackMessage{Text: "x", BotID: "B1",
			Metadata: &fakes.SlackMetadata{EventType: "task_created", EventPayload: json.RawMessage(`{"intent_id":"it_y"}`)}})
		if lr, err := p.Lookup(ctx, request("it_y", `{"text":"x"}`)); err != nil || lr.State != core.LookupAbsent {
			t.Fatalf("Lookup(other event type) = %+v, %v; want absent", lr, err)
		}
	})
	t.Run("a thread reply is looked up with conversations.replies", func(t *testing.T) {
		fk, p := setup(t)
		parent := fk.AddMessage("C1", fakes.SlackMessage{Text: "question", User: "U9"})
		r := request("it_reply", fmt.Sprintf(`{"text":"answer","thread_ts":%q}`, parent))
		res, err := p.Send(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		lr, err := p.Lookup(ctx, r)
		if err != nil || lr.State != core.LookupFound || lr.ExternalID != res.ExternalID {
			t.Fatalf("Lookup = %+v, %v; want found %s", lr, err, res.ExternalID)
		}
		if q := fk.LastHistoryQuery(); q["ts"] != parent {
			t.Fatalf("query %v: want conversations.replies with ts=%s", q, parent)
		}
	})
	t.Run("history errors are errors, never absent", func(t *testing.T) {
		fk, p := setup(t)
		fk.InjectHistory(fakes.Fault{Kind: fakes.RateLimit, RetryAfter: 20 * time.Second})
		if lr, err := p.Lookup(ctx, request("it_rl", `{"text":"x"}`)); err == nil {
			t.Fatalf("rate limited lookup = %+v, want error", lr)
		}
		fk.InjectHistory(fakes.Fault{Kind: fakes.ProviderError, Code: "missing_scope"})
		if lr, err := p.Lookup(ctx, request("it_ms", `{"text":"x"}`)); err == nil {
			t.Fatalf("missing_scope lookup = %+v, want error", lr)
		}
		r := request("it_nc", `{"text":"x"}`)
		r.Target = "CNOPE"
		if lr, err := p.Lookup(ctx, r); err == nil {
			t.Fatalf("channel_not_found lookup = %+v, want error", lr)
		}
	})
	// The lookback window (one hour here) against the attempt's own time.
	for _, c := range []struct {
		name        string
		id          string
		attemptTime bool
		later       time.Duration
		want        core.LookupState
	}{
		{"without an attempt time, a post older than the lookback is not seen", "it_old", false, 2 * time.Hour, core.LookupAbsent},
		{"with the attempt time, a reconciliation days later still finds the post", "it_days", true, 72 * time.Hour, core.LookupFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			fk, p := setup(t, func(c *slack.Config) { c.Lookback = time.Hour })
			r := request(c.id, `{"text":"x"}`)
			if c.attemptTime {
				r.AttemptStartedAt = clk.Now()
			}
			if _, err := p.Send(ctx, r); err != nil {
				t.Fatal(err)
			}
			clk.Add(c.later)
			defer clk.Add(-c.later)
			lr, err := p.Lookup(ctx, r)
			if err != nil || lr.State != c.want || fk.Posts() != 1 {
				t.Fatalf("Lookup = %+v, %v", lr, err)
			}
		})
	}
}
