package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/client"
	"github.com/botharness/outbox/core"
)

// faultProxy sits between the Go client and the real API and misbehaves on
// POST /v1/intents, one scripted fault per request: "drop" (forward, let
// the server commit, then cut the connection before answering), "hang"
// (forward only after the client's attempt timed out), "503", "429" (with
// Retry-After: 1); "" forwards normally. It records every submission the
// client sent, so a test can prove every attempt carried one key and one
// body.
type faultProxy struct {
	t        *testing.T
	upstream string
	srv      *httptest.Server

	mu     sync.Mutex
	faults []string
	sent   []sentSubmit
	late   sync.WaitGroup
}

type sentSubmit struct {
	key, bodySHA string
	at           time.Time
}

func newFaultProxy(t *testing.T, upstream string, faults ...string) *faultProxy {
	p := &faultProxy{t: t, upstream: upstream, faults: faults}
	p.srv = httptest.NewServer(p)
	t.Cleanup(func() {
		p.srv.Close()
		p.late.Wait()
	})
	return p
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fault := ""
	if r.Method == http.MethodPost && r.URL.Path == "/v1/intents" {
		sum := sha256.Sum256(body)
		p.mu.Lock()
		p.sent = append(p.sent, sentSubmit{key: r.Header.Get("Idempotency-Key"), bodySHA: hex.EncodeToString(sum[:]), at: time.Now()})
		if len(p.faults) > 0 {
			fault, p.faults = p.faults[0], p.faults[1:]
		}
		p.mu.Unlock()
	}
	switch fault {
	case "503":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"message":"Service Unavailable"}`)
		return
	case "429":
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"message":"Too Many Requests"}`)
		return
	case "hang":
		// The server gets this attempt after the client gave up on it.
		late := r.Clone(context.WithoutCancel(r.Context())) // r is not ours after we return
		p.late.Add(1)
		go func() {
			defer p.late.Done()
			time.Sleep(1700 * time.Millisecond)
			_, _, _ = p.forward(late, body)
		}()
		<-r.Context().Done()
		return
	}
	status, h, respBody := p.forward(r, body)
	if fault == "drop" {
		// The server committed; the client never hears of it.
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			p.t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
		return
	}
	for k, vs := range h {
		w.Header()[k] = vs
	}
	w.WriteHeader(status)
	w.Write(respBody)
}

func (p *faultProxy) forward(r *http.Request, body []byte) (int, http.Header, []byte) {
	req, _ := http.NewRequest(r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return http.StatusBadGateway, http.Header{}, []byte(`{"message":"Bad Gateway"}`)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// assertOneKeyOneBody fails if any two submissions the client sent differ in
// Idempotency-Key or body bytes: a retry under a new key protects nothing.
// minAttempts: attempts may be more under load (an attempt that outlives
// its timeout is retried too), never fewer.
func (p *faultProxy) assertOneKeyOneBody(t *testing.T, minAttempts int) sentSubmit {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sent) < minAttempts {
		t.Fatalf("the client sent %d submissions, want at least %d", len(p.sent), minAttempts)
	}
	for i, s := range p.sent[1:] {
		if s.key != p.sent[0].key {
			t.Fatalf("retry %d used Idempotency-Key %q, the first attempt %q: a retry must reuse the key", i+1, s.key, p.sent[0].key)
		}
		if s.bodySHA != p.sent[0].bodySHA {
			t.Fatalf("retry %d sent a different body (sha256 %s vs %s): a retry must be byte-identical", i+1, s.bodySHA, p.sent[0].bodySHA)
		}
	}
	return p.sent[0]
}

func clientRequest(account, target, text string) client.IntentRequest {
	payload, _ := json.Marshal(map[string]string{"text": text})
	return client.IntentRequest{Kind: "reply", Provider: "sandbox", Account: account, Action: testAction, Target: target,
		Payload: payload, Grant: client.GrantRef{ID: "g-1", Version: 1}}
}

// fastRetry keeps backoff short; the attempt timeout stays generous so a
// loaded machine does not turn slow answers into extra attempts.
func fastRetry() client.RetryPolicy {
	return client.RetryPolicy{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond, AttemptTimeout: 10 * time.Second}
}

// The client retries through a dropped connection (the server committed, the
// client never heard), a timeout, a 503 and a 429 with Retry-After — always
// with the key it generated once and the same bytes — and the server holds
// one intent, delivered once.
func TestClientRetriesThroughDroppedConnectionOneIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := newFaultProxy(t, e.api.URL, "drop", "hang", "503", "429")
	policy := fastRetry()
	// The "hang" attempt times out; the real attempts must not: on a loaded
	// make test both real attempts once took over 1.5 s (the client gave up).
	policy.AttemptTimeout = 4 * time.Second
	c := client.New(p.srv.URL, botToken, client.WithRetry(policy))
	start := time.Now()
	sub, err := c.Submit(context.Background(), clientRequest("acct-cl1", "chan-1", "hello through faults"), client.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := p.assertOneKeyOneBody(t, 5)
	if sub.Key == "" || sub.Key != first.key {
		t.Fatalf("Submit returned key %q, sent %q", sub.Key, first.key)
	}
	if !sub.Replayed || sub.Intent.ID != core.IntentID(testBot, sub.Key) {
		t.Fatalf("want the replay of the intent the dropped attempt committed: replayed=%v id=%s", sub.Replayed, sub.Intent.ID)
	}
	p.mu.Lock()
	gap := p.sent[len(p.sent)-1].at.Sub(p.sent[len(p.sent)-2].at)
	p.mu.Unlock()
	if gap < time.Second {
		t.Fatalf("the retry after 429 came %v later; Retry-After said 1s", gap)
	}
	if n := e.itemCount(); n != 1 {
		t.Fatalf("the server holds %d intents, want 1", n)
	}
	in, err := c.Wait(context.Background(), sub.Intent.ID, client.WaitOptions{Interval: 50 * time.Millisecond})
	if err != nil || in.Status != client.StatusSucceeded {
		t.Fatalf("wait: %v %+v", err, in)
	}
	e.assertEffectsStay(sub.Intent.ID, 1, 300*time.Millisecond)
	if time.Since(start) > 20*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
}

// A key reused with a different body is its own typed error, not a
// validation error, and is not retried; a validation error is typed too.
func TestClientKeyReuseWithDifferentBodyIsTypedError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := newFaultProxy(t, e.api.URL)
	c := client.New(p.srv.URL, botToken, client.WithRetry(fastRetry()))
	ctx := context.Background()
	key := client.KeyFor("chat", "evt-42", "reply") // the caller's logical-attempt id
	sub, err := c.Submit(ctx, clientRequest("acct-cl2", "chan-1", "first"), client.SubmitOptions{Key: key})
	if err != nil || sub.Key != key || sub.Replayed {
		t.Fatalf("submit: %v %+v", err, sub)
	}
	again, err := c.Submit(ctx, clientRequest("acct-cl2", "chan-1", "first"), client.SubmitOptions{Key: key})
	if err != nil || !again.Replayed || again.Intent.ID != sub.Intent.ID {
		t.Fatalf("the same attempt again must replay: %v %+v", err, again)
	}

	_, err = c.Submit(ctx, clientRequest("acct-cl2", "chan-1", "a different text"), client.SubmitOptions{Key: key})
	var se *client.SubmitError
	var ae *client.APIError
	if !errors.Is(err, client.ErrIdempotencyKeyReused) || errors.Is(err, client.ErrValidation) ||
		!errors.As(err, &se) || se.Key != key || !errors.As(err, &ae) || ae.Status != 422 || ae.Code != "idempotency_key_reused" {
		t.Fatalf("want the typed key-reuse error, got %#v", err)
	}
	bad := clientRequest("acct-cl2", "chan-1", "x")
	bad.Provider = "carrier-pigeon"
	_, err = c.Submit(ctx, bad, client.SubmitOptions{Key: "other-key"})
	if !errors.Is(err, client.ErrValidation) || errors.Is(err, client.ErrIdempotencyKeyReused) || !errors.As(err, &ae) || ae.Code != "unknown_provider" || ae.Field != "provider" {
		t.Fatalf("want a validation error naming the provider, got %#v", err)
	}
	_, err = c.Submit(ctx, bad, client.SubmitOptions{Key: "bad\nkey"})
	if !errors.Is(err, client.ErrValidation) {
		t.Fatalf("an invalid key is refused before sending: %v", err)
	}
	p.mu.Lock()
	sent := len(p.sent)
	p.mu.Unlock()
	if sent != 4 { // first, replay, reused key, unknown provider: none retried, the bad key never sent
		t.Fatalf("sent %d submissions, want 4 (4xx answers are not retried)", sent)
	}
	if n := e.itemCount(); n != 1 {
		t.Fatalf("the server holds %d intents, want 1", n)
	}
	if _, err := client.New(e.api.URL, bot2Token).Get(ctx, sub.Intent.ID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("another bot's intent: %v", err)
	}
	if _, err := client.New(e.api.URL, "no-such-token").Get(ctx, sub.Intent.ID); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("a refused token: %v", err)
	}
	if _, err := client.New(e.api.URL, "").Get(ctx, sub.Intent.ID); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("no token: %v", err)
	}
}

// Wait returns for each end state: succeeded, failed, needs-human,
// abandoned (after an operator's decision through the admin sub-client),
// source-revised and grant-revoked; expired in the next test.
func TestClientWaitReturnsForEachEndState(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := client.New(e.api.URL, botToken, client.WithRetry(fastRetry()))
	op := client.New(e.api.URL, opToken).Admin()
	wait := client.WaitOptions{Interval: 50 * time.Millisecond}

	submit := func(key string, req client.IntentRequest) string {
		t.Helper()
		sub, err := c.Submit(ctx, req, client.SubmitOptions{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		return sub.Intent.ID
	}
	expect := func(id string, want client.Status) *client.Intent {
		t.Helper()
		in, err := c.Wait(ctx, id, wait)
		if err != nil || in.Status != want {
			t.Fatalf("Wait(%s) = %v, %+v; want %s", id, err, in, want)
		}
		return in
	}

	e.faults(`{"account":"acct-w-fail","faults":[{"kind":"reject"}]}`)
	e.faults(`{"account":"acct-w-nh","capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"}]}`)
	if st, err := c.PutSource(ctx, "msg-w", client.SourceUpdate{Revision: 2}); err != nil || !st.Applied || st.Revision != 2 {
		t.Fatalf("PutSource: %v %+v", err, st)
	}
	if r := e.do("PUT", "/v1/admin/capabilities/sandbox/acct-w-cap", opToken, nil, `{"withdrawn":true,"reason":"maintenance"}`); r.status != 200 {
		t.Fatalf("withdraw: %d %s", r.status, r.body)
	}
	ok := submit("w-ok", clientRequest("acct-w-ok", "chan-1", "ok"))
	failed := submit("w-fail", clientRequest("acct-w-fail", "chan-1", "rejected"))
	nh := submit("w-nh", clientRequest("acct-w-nh", "chan-1", "uncertain"))
	stale := clientRequest("acct-w-src", "chan-1", "answer to revision 1")
	stale.Source = &client.SourceRef{ID: "msg-w", Revision: 1}
	revised := submit("w-src", stale)
	revoked := submit("w-cap", clientRequest("acct-w-cap", "chan-1", "withdrawn account"))

	expect(ok, client.StatusSucceeded)
	expect(failed, client.StatusFailed)
	expect(revised, client.StatusSourceRevised)
	expect(revoked, client.StatusGrantRevoked)
	expect(nh, client.StatusNeedsHuman)

	// The operator sub-client: list, show, recommend, resolve.
	page, err := op.List(ctx, client.ListOptions{Status: client.StatusNeedsHuman, Limit: 100})
	if err != nil || !listed(page, nh) {
		t.Fatalf("list: %v %+v", err, page)
	}
	if in, err := op.Show(ctx, nh); err != nil || in.Status != client.StatusNeedsHuman || len(in.Attempts) == 0 {
		t.Fatalf("show: %v %+v", err, in)
	}
	if _, err := client.New(e.api.URL, orchToken).Admin().Recommend(ctx, nh, client.DecisionAbandon, "the customer was told by phone"); err != nil {
		t.Fatal(err)
	}
	in, err := op.Resolve(ctx, nh, client.ResolutionRequest{Decision: client.DecisionAbandon, Reason: "told by phone"})
	if err != nil || in.Status != client.StatusAbandoned {
		t.Fatalf("resolve: %v %+v", err, in)
	}
	// The same decision again is the same decision; another one conflicts.
	if _, err := op.Resolve(ctx, nh, client.ResolutionRequest{Decision: client.DecisionAbandon, Reason: "told by phone"}); err != nil {
		t.Fatalf("repeat: %v", err)
	}
	if _, err := op.Resolve(ctx, nh, client.ResolutionRequest{Decision: client.DecisionRetry, Reason: "changed my mind"}); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("a second decision: %v", err)
	}
	if _, err := c.Admin().List(ctx, client.ListOptions{}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("a bot on the admin API: %v", err)
	}
	abandoned := expect(nh, client.StatusAbandoned)
	if len(abandoned.Resolutions) != 2 || !abandoned.Resolutions[0].RecommendationOnly {
		t.Fatalf("want the recommendation then the decision: %+v", abandoned.Resolutions)
	}
	for id, n := range map[string]int{ok: 1, failed: 0, nh: 1, revised: 0, revoked: 0} {
		if got := e.effectsFor(id); got != n {
			t.Errorf("%s: %d effects, want %d", id, got, n)
		}
	}
}

func listed(p *client.IntentPage, id string) bool {
	for _, it := range p.Items {
		if it.ID == id {
			return true
		}
	}
	return false
}

// Wait returns expired; Wait on an intent that stays pending returns the
// caller's deadline error with the last intent seen, and leaves no
// goroutine of the client behind.
func TestClientWaitExpiredAndDeadline(t *testing.T) {
	// Not parallel: it counts the client package's goroutines process-wide.
	e := newEnv(t, options{DisableStream: true})
	c := client.New(e.api.URL, botToken, client.WithRetry(fastRetry()))
	ctx := context.Background()
	req := clientRequest("acct-w-late", "chan-1", "call back")
	deadline := time.Now().Add(1500 * time.Millisecond)
	req.Deadline = &deadline
	sub, err := c.Submit(ctx, req, client.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pending, err := c.Submit(ctx, clientRequest("acct-w-late", "chan-1", "stays pending"), client.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Long enough for the first poll to be answered on a loaded machine
	// (300 ms was not, beside chaos): the intent stays pending whatever the
	// wait, as nothing dispatches it.
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	in, err := c.Wait(short, pending.Intent.ID, client.WaitOptions{Interval: 50 * time.Millisecond})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || in == nil || in.Status != client.StatusPending {
		t.Fatalf("want the deadline error and the pending intent: %v %+v", err, in)
	}

	done := make(chan struct{})
	var got *client.Intent
	go func() {
		defer close(done)
		got, err = c.Wait(ctx, sub.Intent.ID, client.WaitOptions{Interval: 50 * time.Millisecond})
	}()
	for time.Now().Before(deadline.Add(200 * time.Millisecond)) {
		time.Sleep(50 * time.Millisecond)
	}
	e.sweep()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after the intent expired")
	}
	if err != nil || got.Status != client.StatusExpired || got.AttemptCount != 0 {
		t.Fatalf("Wait = %v %+v, want expired with no attempt", err, got)
	}
	if n := clientGoroutines(); n != 0 {
		t.Fatalf("%d goroutines of the client package still run after every call returned", n)
	}
}

// clientGoroutines counts goroutines with a frame in the client package.
func clientGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/botharness/outbox/client.") {
			n++
		}
	}
	return n
}

// The example bot, built and run as a user would against the API: three
// replies delivered; run again, it submits the same logical attempts and
// nothing is sent twice.
func TestExampleBot(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t, "examples/bot")
	e := newEnv(t, options{})
	run := func() string {
		t.Helper()
		return runExample(t, e, bin, "acct-example")
	}
	// The bot submits with SubmitAndWait: each reply is delivered inline
	// (or, where the attempt cannot be made now, accepted and waited for).
	if out := run(); strings.Count(out, "succeeded") != 3 || strings.Count(out, "delivered inline")+strings.Count(out, " accepted") != 3 {
		t.Fatalf("first run:\n%s", out)
	}
	if out := run(); strings.Count(out, "replayed") != 3 {
		t.Fatalf("second run must replay the same three replies:\n%s", out)
	}
	if n := e.effects("?account=acct-example"); n != 3 {
		t.Fatalf("the sandbox performed %d effects, want 3", n)
	}
}

// The caller's deadline wins over a server's Retry-After: Submit gives up at
// once instead of sleeping past it, and says which key to submit again with.
func TestClientRespectsContextDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := newFaultProxy(t, e.api.URL, "429", "429")
	c := client.New(p.srv.URL, botToken, client.WithRetry(fastRetry()))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Submit(ctx, clientRequest("acct-cl3", "chan-1", "later"), client.SubmitOptions{})
	var re *client.RetryError
	var se *client.SubmitError
	if !errors.As(err, &re) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, client.ErrRateLimited) || !errors.As(err, &se) || se.Key == "" {
		t.Fatalf("want a RetryError past the deadline carrying the key, got %#v", err)
	}
	if took := time.Since(start); took > 900*time.Millisecond { // sleeping for Retry-After would take over 1s
		t.Fatalf("Submit took %v: it slept toward a Retry-After past the caller's deadline", took)
	}
	sent := p.assertOneKeyOneBody(t, 1)
	// Later, the same logical attempt under the same key goes through once.
	sub, err := c.Submit(context.Background(), clientRequest("acct-cl3", "chan-1", "later"), client.SubmitOptions{Key: se.Key})
	if err != nil || sub.Key != sent.key {
		t.Fatalf("resubmit: %v", err)
	}
	p.assertOneKeyOneBody(t, 3) // the second 429, then through
	if n := e.itemCount(); n != 1 {
		t.Fatalf("%d intents, want 1", n)
	}
}
