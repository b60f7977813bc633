package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/sandbox"
)

// Issue 24, finding 1: one identity per request.

// TestInexactNumberIsRefusedNotReplayed reproduces finding 1 over real HTTP:
// on main, "orderId": 12345678901234567891 was accepted and stored (and
// sent) as 12345678901234567000, and the same key with ...567892 was
// answered 200 Idempotent-Replayed. Now a number a double cannot hold is
// 400 invalid_field naming its JSON pointer, and nothing is stored.
func TestInexactNumberIsRefusedNotReplayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	order := func(n string) string {
		return `{"kind":"reply","provider":"sandbox","account":"acct-id","action":"send_message","target":"chan-1",` +
			`"payload":{"text":"pay","orderId":` + n + `},"grant":{"id":"g-1","version":1}}`
	}
	for _, n := range []string{"12345678901234567891", "12345678901234567892"} {
		r := e.submit(botToken, "order-1", order(n))
		var b struct {
			Error struct{ Code, Field string }
		}
		r.json(t, &b)
		if r.status != http.StatusBadRequest || b.Error.Code != "invalid_field" || b.Error.Field != "/payload/orderId" {
			t.Fatalf("orderId %s: %d %s, want 400 invalid_field at /payload/orderId", n, r.status, r.body)
		}
		if r.headers.Get("Idempotent-Replayed") != "" {
			t.Fatalf("orderId %s was answered as a replay", n)
		}
	}
	if n := e.itemCount(); n != 0 {
		t.Fatalf("refused submissions stored %d intents", n)
	}
	// The same key with an exact number is a new intent: nothing was kept.
	if r := e.submit(botToken, "order-1", order("9007199254740991")); r.status != http.StatusCreated {
		t.Fatalf("exact orderId: %d %s", r.status, r.body)
	}
	e.expectRefused("a neighbouring exact orderId under the same key", "order-1", order("9007199254740992"), http.StatusUnprocessableEntity, "idempotency_key_reused")
}

// wireRecorder is a reverse proxy in front of the sandbox that keeps the
// body of every request the outbox sends it: what the provider really got.
type wireRecorder struct {
	mu     sync.Mutex
	bodies [][]byte
	url    string
}

func startWireRecorder(t *testing.T, target string) *wireRecorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	w := &wireRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages") {
			w.mu.Lock()
			w.bodies = append(w.bodies, b)
			w.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		proxy.ServeHTTP(rw, r)
	})
	// Loopback, on a port of this helper's range (below 32768).
	var ln net.Listener
	for p := 20160; p < 20200 && ln == nil; p++ {
		ln, _ = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	}
	if ln == nil {
		t.Fatal("no free port in 20160-20199 for the wire recorder")
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	w.url = "http://" + ln.Addr().String()
	return w
}

func (w *wireRecorder) sent() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]byte(nil), w.bodies...)
}

// TestExactBodyIsDeliveredAsHashed: a body whose numbers are exact is
// delivered to the provider byte for byte as intake hashed and stored it
// (canonical RFC 8785 form; '<', '&' and U+2028 are not re-escaped on the
// way out, which json.Marshal would do).
func TestExactBodyIsDeliveredAsHashed(t *testing.T) {
	t.Parallel()
	sb, sbURL := sandbox.StartTest(t, time.Now)
	rec := startWireRecorder(t, sbURL)
	e := startEnv(t, options{}, sb, rec.url)
	payload := "{ \"text\": \"<b>a & b</b>\u2028\", \"orderId\": 9007199254740991, \"price\": 1.50, \"qty\": 1E2, \"zero\": -0, \"tiny\": 5e-324, \"list\": [0.1, 1e21] }"
	body := `{"kind":"reply","provider":"sandbox","account":"acct-wire","action":"send_message","target":"chan-1","payload":` + payload + `,"grant":{"id":"g-1","version":1}}`
	id := e.mustSubmit("wire-1", body)
	in := e.waitStatus(id, 10*time.Second, core.StatusSucceeded)

	want, err := core.Canonicalize([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	canonBody, err := core.Canonicalize([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if in.RequestHash != core.HashBytes(canonBody) || !bytes.Contains(canonBody, append([]byte(`"payload":`), want...)) {
		t.Fatalf("the stored request hash is not the hash of the canonical body holding the payload")
	}
	if !bytes.Equal(in.Payload, want) || in.PayloadHash != core.HashBytes(want) {
		t.Fatalf("stored payload %s (%s), want the hashed bytes %s", in.Payload, in.PayloadHash, want)
	}
	sent := rec.sent()
	if len(sent) != 1 {
		t.Fatalf("%d sends reached the provider, want 1", len(sent))
	}
	var wire struct {
		Payload     json.RawMessage `json:"payload"`
		PayloadHash string          `json:"payloadHash"`
	}
	if err := json.Unmarshal(sent[0], &wire); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wire.Payload, want) {
		t.Fatalf("the provider received payload bytes\n %q\nthe outbox hashed\n %q", wire.Payload, want)
	}
	if wire.PayloadHash != in.PayloadHash || core.HashBytes(wire.Payload) != in.PayloadHash {
		t.Fatalf("payload hash on the wire %s, of the wire bytes %s, stored %s", wire.PayloadHash, core.HashBytes(wire.Payload), in.PayloadHash)
	}
	if n := e.effectsFor(id); n != 1 {
		t.Fatalf("%d effects at the sandbox, want 1", n)
	}
}

// Issue 50, finding 3: the identity compares the effect. A worker re-runs
// after its operator re-applied the grant: the same effect under the same
// key, now naming grant version 2, is a replay of the stored intent (which
// keeps its own grant snapshot) with no new effect; another payload under
// the key is still refused. A grant PUT whose body is unchanged keeps its
// version.
func TestReplayDifferingOnlyInItsGrantIsAReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	acct := "acct-eff"
	grant := rvGrant(testBot, acct, "chan-*")
	if g := e.rvPutGrant("g-eff", grant, http.StatusCreated); g.Version != 1 {
		t.Fatalf("new grant at version %d", g.Version)
	}
	if g := e.rvPutGrant("g-eff", grant, http.StatusOK); g.Version != 1 {
		t.Fatalf("an unchanged PUT moved the grant to version %d", g.Version)
	}
	body := func(version int, text string) string {
		return fmt.Sprintf(`{"kind":"reply","provider":"sandbox","account":%q,"action":%q,"target":"chan-1","payload":{"text":%q},"grant":{"id":"g-eff","version":%d}}`,
			acct, testAction, text, version)
	}
	id := e.mustSubmit("eff-1", body(1, "your order shipped"))
	e.waitStatus(id, 10*time.Second, core.StatusSucceeded)

	// The operator changes the grant (a new target): version 2.
	grant["targets"] = []string{"chan-*", "ops-*"}
	if g := e.rvPutGrant("g-eff", grant, http.StatusOK); g.Version != 2 {
		t.Fatalf("a changed PUT: version %d, want 2", g.Version)
	}
	for _, version := range []int{2, 1} {
		r := e.submit(botToken, "eff-1", body(version, "your order shipped"))
		var in core.Intent
		r.json(t, &in)
		if r.status != http.StatusOK || r.headers.Get("Idempotent-Replayed") != "true" || in.ID != id || in.Grant.Version != 1 {
			t.Fatalf("re-run naming grant version %d: %d %s", version, r.status, r.body)
		}
	}
	e.assertEffectsStay(id, 1, 300*time.Millisecond)
	r := e.submit(botToken, "eff-1", body(2, "your order was cancelled"))
	if r.status != http.StatusUnprocessableEntity || r.errorCode() != "idempotency_key_reused" || !strings.Contains(string(r.body), "original body under the same key") {
		t.Fatalf("another payload under the key: %d %s", r.status, r.body)
	}
	e.assertEffectsStay(id, 1, 0)
}
