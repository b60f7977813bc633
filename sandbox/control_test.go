package sandbox

import (
	"net/http"
	"strings"
	"testing"
)

func TestEffectsFilters(t *testing.T) {
	e := newEnv(t)
	e.send("a1", "k1", "t1", sendOpts{intentID: "i1"})
	e.send("a1", "k2", "t2", sendOpts{intentID: "i2"})
	e.send("a2", "k1", "t1", sendOpts{intentID: "i3"})
	e.send("a2", "k1", "t1", sendOpts{intentID: "i3"})
	cases := map[string]int{
		"":                              4,
		"?account=a1":                   2,
		"?account=a2":                   2,
		"?account=zz":                   0,
		"?idempotencyKey=k1":            3,
		"?idempotencyKey=k2":            1,
		"?account=a2&idempotencyKey=k1": 2,
		"?account=a1&idempotencyKey=k1": 1,
		"?intentId=i3":                  2,
		"?target=t1":                    3,
	}
	for q, want := range cases {
		er := e.effects(q)
		if er.Count != want {
			t.Errorf("%q: count %d want %d", q, er.Count, want)
		}
	}
	// Commit order and an empty list (not null) when nothing matches.
	er := e.effects("")
	for i, eff := range er.Effects {
		if want := "sbx_" + string(rune('1'+i)); eff.MessageID != want {
			t.Fatalf("effect %d id %s want %s", i, eff.MessageID, want)
		}
	}
	r := e.do(nil, http.MethodGet, "/_sandbox/effects?account=zz", nil, "")
	mustJSONEqual(t, r.body, `{"count":0,"effects":[]}`)
	if got := e.sb.Effects(EffectFilter{Account: "a2"}); len(got) != 2 || got[0].IntentID != "i3" {
		t.Fatalf("Go API effects %+v", got)
	}
}

func TestGetFaults(t *testing.T) {
	e := newEnv(t)
	r := e.do(nil, http.MethodGet, "/_sandbox/faults?account=a1", nil, "")
	mustJSONEqual(t, r.body, `{"account":"a1","capabilities":{"idempotencyKeys":false,"keyRetentionSeconds":86400,"lookup":false,"concurrentKeyPolicy":"wait"},"tokenSet":false,"faults":[],"held":0}`)
	e.configure(Config{Account: "a1", Token: ptr("tok"), Capabilities: &CapabilitiesPatch{IdempotencyKeys: ptr(true)},
		Faults: []Fault{{Kind: FaultRateLimit, RetryAfterSeconds: 3}, {Kind: FaultHang, DelayMs: 10, Match: &FaultMatch{Target: "x"}}}})
	e.send("a1", "k", "t", sendOpts{token: "tok"}) // consumes the rate_limit
	r = e.do(nil, http.MethodGet, "/_sandbox/faults?account=a1", nil, "")
	mustJSONEqual(t, r.body, `{"account":"a1","capabilities":{"idempotencyKeys":true,"keyRetentionSeconds":86400,"lookup":false,"concurrentKeyPolicy":"wait"},"tokenSet":true,"faults":[{"kind":"hang","delayMs":10,"match":{"target":"x"}}],"held":0}`)
	e.configure(Config{Account: "b", Faults: []Fault{}})
	r = e.do(nil, http.MethodGet, "/_sandbox/faults", nil, "")
	var all struct {
		Accounts []AccountState `json:"accounts"`
	}
	r.json(t, &all)
	if len(all.Accounts) != 2 || all.Accounts[0].Account != "a1" || all.Accounts[1].Account != "b" {
		t.Fatalf("accounts %+v", all.Accounts)
	}
	if strings.Contains(string(r.body), "tok\"") {
		t.Fatal("token leaked by the control API")
	}
}

func TestBadConfigRejected(t *testing.T) {
	e := newEnv(t)
	for _, body := range []string{
		`{"faults":[]}`,
		`{"account":"a1","faults":[{"kind":"explode"}]}`,
		`{"account":"a1","faults":[{"kind":"hang","delayMs":-1}]}`,
		`{"account":"a1","faults":[{"kind":"rate_limit","retryAfterSeconds":-1}]}`,
		`{"account":"a1","capabilities":{"keyRetentionSeconds":-5}}`,
		`{"account":"a1","capabilities":{"concurrentKeyPolicy":"sometimes"}}`,
		`{"account":"a1","capabilites":{"lookup":true}}`,
		`{"account":"a1","faults":[{"kind":"hang","delay":5}]}`,
		`not json`,
	} {
		r := e.do(nil, http.MethodPost, "/_sandbox/faults", map[string]string{"Content-Type": "application/json"}, body)
		if r.status != http.StatusBadRequest || r.errorCode(t) != "invalid_request" {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
	if len(e.sb.States()) != 0 {
		t.Fatalf("rejected config changed state: %+v", e.sb.States())
	}
}

func TestReset(t *testing.T) {
	e := newEnv(t)
	e.configure(Config{Account: "a1", Token: ptr("tok")})
	e.configure(honour("a1", 3600, Fault{Kind: FaultUnavailable}))
	e.send("a1", "k0", "t", sendOpts{token: "tok"}) // consumes the fault
	if r := e.send("a1", "k1", "t", sendOpts{token: "tok"}); r.status != http.StatusCreated {
		t.Fatalf("%d", r.status)
	}
	e.configure(Config{Account: "a1", Faults: []Fault{{Kind: FaultReject}}})

	r := e.do(nil, http.MethodPost, "/_sandbox/reset", nil, "")
	if r.status != http.StatusOK {
		t.Fatalf("reset %d", r.status)
	}
	if n := e.count(""); n != 0 {
		t.Fatalf("effects after reset %d", n)
	}
	if st := e.sb.State("a1"); st.TokenSet || len(st.Faults) != 0 || st.Capabilities != DefaultCapabilities() {
		t.Fatalf("state after reset %+v", st)
	}
	if len(e.sb.States()) != 0 {
		t.Fatal("accounts survived reset")
	}
	// No token, no fault, keys forgotten: the same key is a new effect, and ids keep counting.
	m := e.mustSend("a1", "k1", "t", http.StatusCreated).message(t)
	if m.ID != "sbx_2" {
		t.Fatalf("id after reset %s, want sbx_2 (ids are unique per server)", m.ID)
	}
	// Go API reset too.
	e.sb.Reset()
	if e.sb.EffectCount(EffectFilter{}) != 0 {
		t.Fatal("Reset kept effects")
	}
}

func TestHealthAndRouting(t *testing.T) {
	e := newEnv(t)
	r := e.do(nil, http.MethodGet, "/_sandbox/health", nil, "")
	mustJSONEqual(t, r.body, `{"ok":true}`)
	if r := e.do(nil, http.MethodDelete, "/v1/accounts/a1/messages", nil, ""); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: %d", r.status)
	}
	if r := e.do(nil, http.MethodGet, "/nope", nil, ""); r.status != http.StatusNotFound {
		t.Fatalf("unknown path: %d", r.status)
	}
	if r := e.do(nil, http.MethodPost, "/_sandbox/release", nil, ""); r.status != http.StatusOK {
		t.Fatalf("release: %d", r.status)
	}
}
