package sandbox

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/core/clocktest"
)

// fakeClock is an injectable, manually advanced clock.
type fakeClock = clocktest.Clock

func newFakeClock() *fakeClock {
	return clocktest.New(time.Date(2026, 3, 2, 9, 0, 0, 123456789, time.UTC))
}

type env struct {
	t      *testing.T
	sb     *Server
	url    string
	clock  *fakeClock
	client *http.Client // keep-alives off: a dropped connection is never retried by net/http
}

func newEnv(t *testing.T, opts ...Option) *env {
	t.Helper()
	clock := newFakeClock()
	sb, url := StartTest(t, clock.Now, opts...)
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &env{t: t, sb: sb, url: url, clock: clock, client: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
}

type result struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (r result) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
}

func (r result) errorCode(t *testing.T) string {
	t.Helper()
	var b errorBody
	r.json(t, &b)
	return b.Error.Code
}

func (r result) message(t *testing.T) Message {
	t.Helper()
	var m Message
	r.json(t, &m)
	return m
}

type sendOpts struct {
	client      *http.Client
	token       string
	contentType string
	body        string // raw body overrides the generated one
	action      string
	payloadHash string
	intentID    string
}

func (e *env) do(client *http.Client, method, path string, hdr map[string]string, body string) result {
	e.t.Helper()
	if client == nil {
		client = e.client
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

func (e *env) send(account, key, target string, o sendOpts) result {
	e.t.Helper()
	body := o.body
	if body == "" {
		action := o.action
		if action == "" {
			action = "send_message"
		}
		b, _ := json.Marshal(map[string]any{
			"action":      action,
			"target":      target,
			"payload":     map[string]any{"text": "hello"},
			"payloadHash": o.payloadHash,
			"intentId":    o.intentID,
		})
		body = string(b)
	}
	hdr := map[string]string{"Content-Type": "application/json"}
	if o.contentType != "" {
		hdr["Content-Type"] = o.contentType
	}
	if key != "" {
		hdr["Idempotency-Key"] = key
	}
	if o.token != "" {
		hdr["Authorization"] = "Bearer " + o.token
	}
	return e.do(o.client, http.MethodPost, "/v1/accounts/"+account+"/messages", hdr, body)
}

func (e *env) mustSend(account, key, target string, wantStatus int) result {
	e.t.Helper()
	r := e.send(account, key, target, sendOpts{})
	if r.err != nil || r.status != wantStatus {
		e.t.Fatalf("send %s/%s: status %d err %v body %s; want %d", account, key, r.status, r.err, r.body, wantStatus)
	}
	return r
}

func (e *env) configure(c Config) AccountState {
	e.t.Helper()
	b, _ := json.Marshal(c)
	r := e.do(nil, http.MethodPost, "/_sandbox/faults", map[string]string{"Content-Type": "application/json"}, string(b))
	if r.err != nil || r.status != http.StatusOK {
		e.t.Fatalf("configure: %d %v %s", r.status, r.err, r.body)
	}
	var st AccountState
	r.json(e.t, &st)
	return st
}

func (e *env) lookup(account, key string) (int, LookupResponse) {
	e.t.Helper()
	r := e.do(nil, http.MethodGet, "/v1/accounts/"+account+"/messages?idempotencyKey="+key, nil, "")
	if r.err != nil {
		e.t.Fatal(r.err)
	}
	var lr LookupResponse
	if r.status == http.StatusOK {
		r.json(e.t, &lr)
	}
	return r.status, lr
}

// getOK reads path, which must answer 200, into v.
func (e *env) getOK(path string, v any) {
	e.t.Helper()
	r := e.do(nil, http.MethodGet, path, nil, "")
	if r.err != nil || r.status != http.StatusOK {
		e.t.Fatalf("GET %s: %d %v %s", path, r.status, r.err, r.body)
	}
	r.json(e.t, v)
}

func (e *env) effects(query string) EffectsResponse {
	e.t.Helper()
	var er EffectsResponse
	e.getOK("/_sandbox/effects"+query, &er)
	if er.Count != len(er.Effects) {
		e.t.Fatalf("count %d != len(effects) %d", er.Count, len(er.Effects))
	}
	return er
}

func (e *env) count(query string) int {
	e.t.Helper()
	return e.effects(query).Count
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// honour returns a config for account a with keys honoured and lookup on.
func honour(a string, retention int, faults ...Fault) Config {
	t := true
	return Config{
		Account:      a,
		Capabilities: &CapabilitiesPatch{IdempotencyKeys: &t, KeyRetentionSeconds: &retention, Lookup: &t},
		Faults:       faults,
	}
}

func ptr[T any](v T) *T { return &v }

func mustJSONEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("decode %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("body = %s, want %s", gb, wb)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers (log handlers).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// wantCount fails the test unless want effects match query; why, when set,
// says what a wrong count means.
func (e *env) wantCount(query string, want int, why string) {
	e.t.Helper()
	if n := e.count(query); n != want {
		if why != "" {
			e.t.Fatalf("effects %d, want %d: %s", n, want, why)
		}
		e.t.Fatalf("effects %d, want %d", n, want)
	}
}

// sendAsync sends in the background; the result comes on the channel.
func (e *env) sendAsync(account, key string) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- e.send(account, key, "t", sendOpts{}) }()
	return ch
}

// sendHeld is sendAsync, waiting until the account holds the request (a
// Hang fault); what names the wait.
func (e *env) sendHeld(account, key, what string) <-chan result {
	e.t.Helper()
	ch := e.sendAsync(account, key)
	waitFor(e.t, what, func() bool { return e.sb.Held(account) == 1 })
	return ch
}
