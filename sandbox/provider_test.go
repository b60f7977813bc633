package sandbox

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSendCommitsOneEffect(t *testing.T) {
	e := newEnv(t)
	r := e.send("a1", "k1", "chan-1", sendOpts{payloadHash: "h1", intentID: "i1", action: "post"})
	if r.err != nil || r.status != http.StatusCreated {
		t.Fatalf("status %d err %v body %s", r.status, r.err, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content-type %q", ct)
	}
	if r.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("first commit must not be marked replayed")
	}
	var raw map[string]any
	r.json(t, &raw)
	if len(raw) != 4 {
		t.Fatalf("unexpected fields: %v", raw)
	}
	m := r.message(t)
	wantAt := e.clock.Now().UTC().Format(time.RFC3339Nano)
	if m.ID != "sbx_1" || m.Status != "delivered" || m.IdempotencyKey != "k1" || m.CommittedAt != wantAt {
		t.Fatalf("message %+v, want sbx_1 delivered k1 %s", m, wantAt)
	}
	er := e.effects("")
	if er.Count != 1 {
		t.Fatalf("count %d", er.Count)
	}
	got := er.Effects[0]
	want := Effect{Account: "a1", Action: "post", Target: "chan-1", IdempotencyKey: "k1", PayloadHash: "h1",
		IntentID: "i1", MessageID: "sbx_1", At: e.clock.Now().UTC()}
	if got != want {
		t.Fatalf("effect %+v, want %+v", got, want)
	}
	if e.sb.EffectCount(EffectFilter{}) != 1 {
		t.Fatal("Go API count disagrees")
	}
}

func TestMessageIDsAreSequential(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 5; i++ {
		m := e.mustSend("a1", "k"+string(rune('0'+i)), "t", http.StatusCreated).message(t)
		if want := "sbx_" + string(rune('0'+i)); m.ID != want {
			t.Fatalf("id %s want %s", m.ID, want)
		}
	}
}

func TestValidationHasNoEffectAndConsumesNoFault(t *testing.T) {
	e := newEnv(t, WithMaxBodyBytes(512))
	e.configure(Config{Account: "a1", Faults: []Fault{{Kind: FaultUnavailable}}})
	long := strings.Repeat("x", 256)
	cases := []struct {
		name   string
		key    string
		target string
		o      sendOpts
		status int
		code   string
	}{
		{"missing key", "", "t", sendOpts{}, 400, "invalid_request"},
		{"key too long", long, "t", sendOpts{}, 400, "invalid_request"},
		{"wrong content type", "k", "t", sendOpts{contentType: "text/plain"}, 400, "invalid_request"},
		{"not json", "k", "t", sendOpts{body: "{nope"}, 400, "invalid_request"},
		{"not an object", "k", "t", sendOpts{body: `[1,2]`}, 400, "invalid_request"},
		{"missing action", "k", "t", sendOpts{body: `{"target":"t"}`}, 400, "invalid_request"},
		{"missing target", "k", "", sendOpts{}, 400, "invalid_request"},
		{"invalid target", "k", "invalid-chan", sendOpts{}, 400, "invalid_target"},
		{"too large", "k", "t", sendOpts{body: `{"action":"a","target":"t","payload":"` + strings.Repeat("p", 600) + `"}`}, 413, "payload_too_large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.send("a1", c.key, c.target, c.o)
			if r.err != nil || r.status != c.status {
				t.Fatalf("status %d err %v body %s, want %d", r.status, r.err, r.body, c.status)
			}
			if got := r.errorCode(t); got != c.code {
				t.Fatalf("code %q want %q", got, c.code)
			}
		})
	}
	e.wantCount("", 0, "after invalid requests")
	if st := e.sb.State("a1"); len(st.Faults) != 1 {
		t.Fatalf("invalid requests consumed faults: %+v", st.Faults)
	}
	// Boundary: exactly 255 characters is accepted; charset parameter is fine.
	if r := e.send("a1", strings.Repeat("é", 255), "t", sendOpts{contentType: "application/json; charset=utf-8"}); r.status != http.StatusServiceUnavailable {
		t.Fatalf("255-char key: status %d body %s (want the queued 503)", r.status, r.body)
	}
	e.mustSend("a1", strings.Repeat("y", 255), "t", http.StatusCreated)
}

func TestAuthToken(t *testing.T) {
	e := newEnv(t)
	// No token configured: any token, or none, is accepted.
	e.mustSend("a1", "k0", "t", http.StatusCreated)
	if r := e.send("a1", "k00", "t", sendOpts{token: "whatever"}); r.status != http.StatusCreated {
		t.Fatalf("any token: %d", r.status)
	}

	st := e.configure(Config{Account: "a1", Token: ptr("s3cret"), Capabilities: &CapabilitiesPatch{Lookup: ptr(true)}})
	if !st.TokenSet {
		t.Fatal("tokenSet false")
	}
	for _, tok := range []string{"", "wrong", "s3cre"} {
		r := e.send("a1", "k1", "t", sendOpts{token: tok})
		if r.status != http.StatusUnauthorized || r.errorCode(t) != "invalid_auth" {
			t.Fatalf("token %q: %d %s", tok, r.status, r.body)
		}
	}
	r := e.do(nil, http.MethodPost, "/v1/accounts/a1/messages", map[string]string{
		"Content-Type": "application/json", "Idempotency-Key": "k1", "Authorization": "Basic s3cret"},
		`{"action":"a","target":"t"}`)
	if r.status != http.StatusUnauthorized {
		t.Fatalf("basic scheme: %d", r.status)
	}
	if n := e.count("?idempotencyKey=k1"); n != 0 {
		t.Fatalf("unauthorised requests made %d effects", n)
	}
	if r := e.send("a1", "k1", "t", sendOpts{token: "s3cret"}); r.status != http.StatusCreated {
		t.Fatalf("right token: %d %s", r.status, r.body)
	}
	// The token also guards lookup and capabilities.
	if r := e.do(nil, http.MethodGet, "/v1/accounts/a1/capabilities", nil, ""); r.status != http.StatusUnauthorized {
		t.Fatalf("capabilities without token: %d", r.status)
	}
	if r := e.do(nil, http.MethodGet, "/v1/accounts/a1/capabilities", map[string]string{"Authorization": "bearer s3cret"}, ""); r.status != http.StatusOK {
		t.Fatalf("capabilities with token (lower-case scheme): %d", r.status)
	}
	if r := e.do(nil, http.MethodGet, "/v1/accounts/a1/messages?idempotencyKey=k1", nil, ""); r.status != http.StatusUnauthorized {
		t.Fatalf("lookup without token: %d", r.status)
	}
	// Other accounts are unaffected; "" removes the token.
	e.mustSend("a2", "k1", "t", http.StatusCreated)
	e.configure(Config{Account: "a1", Token: ptr("")})
	e.mustSend("a1", "k2", "t", http.StatusCreated)
}

func TestReplayWithinRetention(t *testing.T) {
	e := newEnv(t)
	e.configure(honour("a1", 60))
	first := e.mustSend("a1", "k1", "t", http.StatusCreated)
	e.clock.Advance(59 * time.Second)
	second := e.mustSend("a1", "k1", "t", http.StatusOK)
	if second.header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("replay not marked")
	}
	if !bytes.Equal(first.body, second.body) {
		t.Fatalf("replay body %s != %s", second.body, first.body)
	}
	e.wantCount("", 1, "")
	// A different key is a different effect.
	e.mustSend("a1", "k2", "t", http.StatusCreated)
	e.wantCount("", 2, "")
}

func TestRetentionExpiry(t *testing.T) {
	e := newEnv(t)
	e.configure(honour("a1", 60))
	first := e.mustSend("a1", "k1", "t", http.StatusCreated).message(t)
	e.clock.Advance(50 * time.Second)
	e.mustSend("a1", "k1", "t", http.StatusOK) // a replay does not extend the window
	e.clock.Advance(10 * time.Second)          // exactly 60s after the first commit: forgotten
	second := e.mustSend("a1", "k1", "t", http.StatusCreated).message(t)
	if second.ID == first.ID || second.ID != "sbx_2" {
		t.Fatalf("after retention got %s (first %s), want a new message sbx_2", second.ID, first.ID)
	}
	e.wantCount("?idempotencyKey=k1", 2, "the duplicate the product must avoid")
	// The new commit opens a new window.
	e.clock.Advance(59 * time.Second)
	if m := e.mustSend("a1", "k1", "t", http.StatusOK).message(t); m.ID != second.ID {
		t.Fatalf("replayed %s want %s", m.ID, second.ID)
	}
	// Lookup keeps records forever and reports the duplication.
	e.clock.Advance(1000 * time.Hour)
	_, lr := e.lookup("a1", "k1")
	if lr.State != "found" || lr.EffectCount != 2 {
		t.Fatalf("lookup %+v", lr)
	}
	var m Message
	if err := json.Unmarshal(lr.Message, &m); err != nil || m != first {
		t.Fatalf("lookup message %+v want first %+v (%v)", m, first, err)
	}
}

func TestRetentionChangeAppliesToExistingKeys(t *testing.T) {
	e := newEnv(t)
	e.configure(honour("a1", 3600))
	e.mustSend("a1", "k1", "t", http.StatusCreated)
	e.clock.Advance(120 * time.Second)
	e.mustSend("a1", "k1", "t", http.StatusOK)
	e.configure(Config{Account: "a1", Capabilities: &CapabilitiesPatch{KeyRetentionSeconds: ptr(60)}})
	e.mustSend("a1", "k1", "t", http.StatusCreated)
	// Retention 0: keys are forgotten at once.
	e.configure(Config{Account: "a1", Capabilities: &CapabilitiesPatch{KeyRetentionSeconds: ptr(0)}})
	e.mustSend("a1", "k9", "t", http.StatusCreated)
	e.mustSend("a1", "k9", "t", http.StatusCreated)
	e.wantCount("", 4, "")
}

func TestKeysNotHonoured(t *testing.T) {
	e := newEnv(t) // default account: keys not honoured
	a := e.mustSend("a1", "k1", "t", http.StatusCreated).message(t)
	b := e.mustSend("a1", "k1", "t", http.StatusCreated).message(t)
	if a.ID == b.ID {
		t.Fatal("same id for two effects")
	}
	e.wantCount("?idempotencyKey=k1", 2, "")
	// Commits made while keys were not honoured are not replayed after switching keys on.
	e.configure(honour("a1", 60))
	e.mustSend("a1", "k1", "t", http.StatusCreated)
	e.mustSend("a1", "k1", "t", http.StatusOK)
	e.wantCount("?idempotencyKey=k1", 3, "")
}

func TestLookup(t *testing.T) {
	e := newEnv(t)
	// Not offered by default.
	st, _ := e.lookup("a1", "k1")
	if st != http.StatusNotFound {
		t.Fatalf("lookup on default account: %d", st)
	}
	r := e.do(nil, http.MethodGet, "/v1/accounts/a1/messages?idempotencyKey=k1", nil, "")
	if r.errorCode(t) != "lookup_not_supported" {
		t.Fatalf("body %s", r.body)
	}

	e.configure(Config{Account: "a1", Capabilities: &CapabilitiesPatch{Lookup: ptr(true)}})
	if _, lr := e.lookup("a1", "k1"); lr.State != "absent" || lr.Message != nil {
		t.Fatalf("lookup before send: %+v", lr)
	}
	if r := e.do(nil, http.MethodGet, "/v1/accounts/a1/messages", nil, ""); r.status != http.StatusBadRequest {
		t.Fatalf("lookup without key: %d", r.status)
	}
	sent := e.mustSend("a1", "k1", "t", http.StatusCreated)
	status, lr := e.lookup("a1", "k1")
	if status != http.StatusOK || lr.State != "found" || lr.EffectCount != 1 {
		t.Fatalf("lookup after send: %d %+v", status, lr)
	}
	mustJSONEqual(t, lr.Message, string(sent.body))
	// Keys are per account.
	e.configure(Config{Account: "a2", Capabilities: &CapabilitiesPatch{Lookup: ptr(true)}})
	if _, lr := e.lookup("a2", "k1"); lr.State != "absent" {
		t.Fatalf("other account: %+v", lr)
	}
	// A rejected or failed-before-commit request leaves no record.
	e.configure(Config{Account: "a1", Faults: []Fault{{Kind: FaultUnavailable}, {Kind: FaultRateLimit}, {Kind: FaultReject}}})
	for range 3 {
		if r := e.send("a1", "k2", "t", sendOpts{}); r.status < 400 {
			t.Fatalf("fault not applied: %d", r.status)
		}
	}
	if _, lr := e.lookup("a1", "k2"); lr.State != "absent" {
		t.Fatalf("after failed sends: %+v", lr)
	}
}

func TestLookupPendingWhileHeld(t *testing.T) {
	for _, honoured := range []bool{true, false} {
		t.Run(map[bool]string{true: "keys honoured", false: "keys not honoured"}[honoured], func(t *testing.T) {
			e := newEnv(t)
			e.configure(Config{Account: "a1",
				Capabilities: &CapabilitiesPatch{Lookup: ptr(true), IdempotencyKeys: ptr(honoured)},
				Faults:       []Fault{{Kind: FaultHang, DelayMs: 60000}}})
			done := make(chan result, 1)
			go func() { done <- e.send("a1", "k1", "t", sendOpts{}) }()
			waitFor(t, "request held", func() bool { return e.sb.Held("a1") == 1 })
			if _, lr := e.lookup("a1", "k1"); lr.State != "pending" {
				t.Fatalf("lookup while held: %+v", lr)
			}
			if _, lr := e.lookup("a1", "other"); lr.State != "absent" {
				t.Fatalf("unrelated key: %+v", lr)
			}
			if n := e.count(""); n != 0 {
				t.Fatalf("effect before commit: %d", n)
			}
			rel := e.do(nil, http.MethodPost, "/_sandbox/release?account=a1", nil, "")
			mustJSONEqual(t, rel.body, `{"released":1}`)
			r := <-done
			if r.status != http.StatusCreated {
				t.Fatalf("released request: %d %v %s", r.status, r.err, r.body)
			}
			if _, lr := e.lookup("a1", "k1"); lr.State != "found" {
				t.Fatalf("lookup after release: %+v", lr)
			}
			if n := e.count(""); n != 1 {
				t.Fatalf("effects %d", n)
			}
		})
	}
}

func TestCapabilitiesEndpoint(t *testing.T) {
	e := newEnv(t)
	r := e.do(nil, http.MethodGet, "/v1/accounts/new/capabilities", nil, "")
	mustJSONEqual(t, r.body, `{"idempotencyKeys":false,"keyRetentionSeconds":86400,"lookup":false,"concurrentKeyPolicy":"wait"}`)
	// Reading capabilities does not create the account.
	if len(e.sb.States()) != 0 {
		t.Fatal("GET created an account")
	}
	e.configure(honour("a1", 120))
	r = e.do(nil, http.MethodGet, "/v1/accounts/a1/capabilities", nil, "")
	mustJSONEqual(t, r.body, `{"idempotencyKeys":true,"keyRetentionSeconds":120,"lookup":true,"concurrentKeyPolicy":"wait"}`)
	// Omitted fields keep their values.
	e.configure(Config{Account: "a1", Capabilities: &CapabilitiesPatch{Lookup: ptr(false)}})
	r = e.do(nil, http.MethodGet, "/v1/accounts/a1/capabilities", nil, "")
	mustJSONEqual(t, r.body, `{"idempotencyKeys":true,"keyRetentionSeconds":120,"lookup":false,"concurrentKeyPolicy":"wait"}`)
}

func TestLogsCarryNoPayload(t *testing.T) {
	var buf syncBuffer
	e := newEnv(t, WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	e.send("a1", "k1", "t", sendOpts{body: `{"action":"a","target":"t","payload":{"secret":"TOP-SECRET-BODY"}}`})
	e.send("a1", "k1", "invalid-x", sendOpts{body: `{"action":"a","target":"invalid-x","payload":"TOP-SECRET-BODY"}`})
	out := buf.String()
	if strings.Contains(out, "TOP-SECRET-BODY") {
		t.Fatalf("payload logged: %s", out)
	}
	if !strings.Contains(out, `"msg":"send"`) || !strings.Contains(out, `"messageId":"sbx_1"`) {
		t.Fatalf("missing send log: %s", out)
	}
}

// clientChosenIds: the key names the message; a repeat of a committed key is
// 409 duplicate with no effect (at any age), a failed first send leaves the
// id free, and lookup finds the one message.
func TestClientChosenIDs(t *testing.T) {
	e := newEnv(t)
	e.configure(Config{Account: "a1", Capabilities: &CapabilitiesPatch{ClientChosenIDs: ptr(true), Lookup: ptr(true)}})
	e.configure(Config{Account: "a1", Faults: []Fault{{Kind: FaultReject}}})
	if r := e.send("a1", "id1", "t", sendOpts{}); r.status != http.StatusBadRequest {
		t.Fatalf("rejected first send: %d", r.status)
	}
	first := e.mustSend("a1", "id1", "t", http.StatusCreated).message(t)
	e.clock.Advance(1000 * time.Hour)
	r := e.send("a1", "id1", "t", sendOpts{})
	if r.status != http.StatusConflict || r.errorCode(t) != "duplicate" {
		t.Fatalf("repeat: %d %s", r.status, r.body)
	}
	e.wantCount("?idempotencyKey=id1", 1, "a chosen id's repeat has no effect")
	if _, lr := e.lookup("a1", "id1"); lr.State != "found" || lr.EffectCount != 1 {
		t.Fatalf("lookup %+v", lr)
	}
	var m Message
	if _, lr := e.lookup("a1", "id1"); json.Unmarshal(lr.Message, &m) != nil || m.ID != first.ID {
		t.Fatalf("lookup message %+v, want %s", m, first.ID)
	}
	// Exclusive with idempotency keys.
	if _, err := e.sb.Configure(Config{Account: "a1", Capabilities: &CapabilitiesPatch{IdempotencyKeys: ptr(true)}}); err == nil {
		t.Fatal("keys and chosen ids together were accepted")
	}
}
