package httpsigned_test

// Standard Webhooks spec:
// https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
// (webhook-id "remains the same no matter how many times a webhook that has
// failed is retried"; signed content "{msg_id}.{timestamp}.{payload}";
// "v1,<base64>" space-delimited; whsec_ base64 secrets). Signatures are
// checked with the reference Go library.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/httpsigned"
	"github.com/botharness/outbox/adapters/providers/providertest"
	"github.com/botharness/outbox/core"
)

var ctx = context.Background()

func secret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func request(id string) core.SendRequest {
	return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "acct", Action: "order.created", Target: "orders",
		Payload: []byte(`{"order":42}`), PayloadHash: "sha256:abc", Attempt: 1}
}

func newProvider(t *testing.T, a httpsigned.Account, now func() time.Time) *httpsigned.Provider {
	t.Helper()
	p, err := httpsigned.New(nil, httpsigned.Config{Accounts: map[string]httpsigned.Account{"acct": a}, Timeout: 2 * time.Second, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type capture struct {
	mu      sync.Mutex
	headers []http.Header
	bodies  [][]byte
}

func (c *capture) server(t *testing.T, status int, hdr map[string]string, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.headers, c.bodies = append(c.headers, r.Header.Clone()), append(c.bodies, b)
		c.mu.Unlock()
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSignedDeliveryIsStablePerIntent(t *testing.T) {
	sec, old := secret(t), secret(t)
	var c capture
	url := c.server(t, 201, nil, `{"id":"rcv_1"}`)
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	p := newProvider(t, httpsigned.Account{URL: url, Secret: sec, PreviousSecret: old}, clock)
	r := request("it_stable")
	if _, err := p.Send(ctx, r); err != nil {
		t.Fatal(err)
	}
	now = now.Add(90 * time.Second)
	r.Attempt = 2
	if _, err := p.Send(ctx, r); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h1, h2 := c.headers[0], c.headers[1]
	if h1.Get("webhook-id") != "it_stable" || h2.Get("webhook-id") != "it_stable" || h1.Get("Idempotency-Key") != "it_stable" {
		t.Fatalf("ids %q %q key %q", h1.Get("webhook-id"), h2.Get("webhook-id"), h1.Get("Idempotency-Key"))
	}
	if h1.Get("webhook-timestamp") == h2.Get("webhook-timestamp") || h2.Get("webhook-timestamp") != strconv.FormatInt(now.Unix(), 10) {
		t.Fatalf("timestamps %q %q", h1.Get("webhook-timestamp"), h2.Get("webhook-timestamp"))
	}
	if string(c.bodies[0]) != string(c.bodies[1]) {
		t.Fatalf("body changed between attempts:\n%s\n%s", c.bodies[0], c.bodies[1])
	}
	if h1.Get("Outbox-Attempt") != "1" || h2.Get("Outbox-Attempt") != "2" || !strings.HasPrefix(h1.Get("Content-Type"), "application/json") {
		t.Fatalf("headers %v", h1)
	}
	want := `{"type":"outbox.order.created","data":{"intentId":"it_stable","bot":"bot-1","account":"acct","action":"order.created","target":"orders","payload":{"order":42},"payloadHash":"sha256:abc"}}`
	if string(c.bodies[0]) != want {
		t.Fatalf("body %s\nwant %s", c.bodies[0], want)
	}
	// Both the current and the previous secret verify (rotation), with the
	// reference library.
	if n := len(strings.Split(h2.Get("webhook-signature"), " ")); n != 2 {
		t.Fatalf("%d signatures, want 2", n)
	}
	for _, s := range []string{sec, old} {
		wh, _ := standardwebhooks.NewWebhook(s)
		if err := wh.VerifyIgnoringTimestamp(c.bodies[1], h2); err != nil {
			t.Fatalf("reference library rejects the signature: %v", err)
		}
		ref, _ := wh.Sign("it_stable", now, c.bodies[1])
		if !strings.Contains(h2.Get("webhook-signature"), ref) {
			t.Fatalf("signature %q does not contain the reference %q", h2.Get("webhook-signature"), ref)
		}
	}
	wh, _ := standardwebhooks.NewWebhook(secret(t))
	if err := wh.VerifyIgnoringTimestamp(c.bodies[1], h2); err == nil {
		t.Fatal("a foreign secret verified")
	}
}

// The status mapping of the package doc, one row per documented answer.
func TestStatusMapping(t *testing.T) {
	cases := []struct {
		name       string
		acct       func(*httpsigned.Account)
		status     int
		hdr        map[string]string
		body       string
		class      core.ErrorClass
		external   string
		retryAfter time.Duration
	}{
		{"201 with id", nil, 201, nil, `{"id":"rcv_9"}`, "", "rcv_9", 0},
		{"200 numeric id", nil, 200, nil, `{"id":17}`, "", "17", 0},
		{"202 no body: the key", nil, 202, nil, ``, "", "it_1", 0},
		{"204 id header", func(a *httpsigned.Account) { a.IDHeader = "X-Message-Id" }, 204, map[string]string{"X-Message-Id": "m-5"}, ``, "", "m-5", 0},
		{"400", nil, 400, nil, `{"error":{"code":"invalid_request"}}`, core.ClassRejectedInput, "", 0},
		{"404", nil, 404, nil, ``, core.ClassRejectedInput, "", 0},
		{"422", nil, 422, nil, `{"code":"invalid_target"}`, core.ClassRejectedInput, "", 0},
		{"401", nil, 401, nil, `{"error":"invalid_signature"}`, core.ClassUnauthorized, "", 0},
		{"403", nil, 403, nil, ``, core.ClassUnauthorized, "", 0},
		{"410 endpoint gone", nil, 410, nil, ``, core.ClassUnauthorized, "", 0},
		{"409 undeclared", nil, 409, nil, `{"code":"conflict"}`, core.ClassUnknownOutcome, "", 0},
		{"409 declared duplicate", func(a *httpsigned.Account) {
			a.HonoursKeys, a.KeyRetentionSeconds, a.ConflictMeans = true, 60, "duplicate"
		},
			409, nil, `{"code":"duplicate","id":"rcv_1"}`, "", "rcv_1", 0},
		{"409 declared in-progress", func(a *httpsigned.Account) {
			a.HonoursKeys, a.KeyRetentionSeconds, a.ConflictMeans = true, 60, "in-progress"
		},
			409, nil, `{"code":"request_in_progress"}`, core.ClassTransient, "", 0},
		{"429 seconds", nil, 429, map[string]string{"Retry-After": "12"}, ``, core.ClassRateLimited, "", 12 * time.Second},
		{"429 http-date", nil, 429, map[string]string{"Retry-After": time.Unix(1_700_000_030, 0).UTC().Format(http.TimeFormat)}, ``, core.ClassRateLimited, "", 30 * time.Second},
		{"503 undeclared", nil, 503, nil, ``, core.ClassUnknownOutcome, "", 0},
		{"503 declared safe", func(a *httpsigned.Account) { a.UnavailableIsSafe = true }, 503, map[string]string{"Retry-After": "4"}, ``, core.ClassTransient, "", 4 * time.Second},
		{"500", nil, 500, nil, ``, core.ClassUnknownOutcome, "", 0},
		{"302 not followed", nil, 302, map[string]string{"Location": "http://127.0.0.1:1/elsewhere"}, ``, core.ClassUnknownOutcome, "", 0},
	}
	now := func() time.Time { return time.Unix(1_700_000_000, 0) }
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cp capture
			a := httpsigned.Account{URL: cp.server(t, c.status, c.hdr, c.body), Secret: secret(t)}
			if c.acct != nil {
				c.acct(&a)
			}
			p := newProvider(t, a, now)
			res, err := p.Send(ctx, request("it_1"))
			if providertest.Outcome(t, res, err, c.class, c.external, c.retryAfter) {
				return
			}
			if len(cp.headers) != 1 {
				t.Fatalf("%d requests, want exactly 1", len(cp.headers))
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	good := secret(t)
	for name, a := range map[string]httpsigned.Account{
		"no url":                 {Secret: good},
		"relative url":           {URL: "/hooks", Secret: good},
		"bad secret":             {URL: "https://x.example/h", Secret: "whsec_!!!"},
		"short secret":           {URL: "https://x.example/h", Secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("short"))},
		"keys without retention": {URL: "https://x.example/h", Secret: good, HonoursKeys: true},
		"conflict without keys":  {URL: "https://x.example/h", Secret: good, ConflictMeans: "duplicate"},
		"unknown conflict":       {URL: "https://x.example/h", Secret: good, HonoursKeys: true, KeyRetentionSeconds: 1, ConflictMeans: "maybe"},
		"bad lookup url":         {URL: "https://x.example/h", Secret: good, LookupURL: "nope"},
		"bad previous secret":    {URL: "https://x.example/h", Secret: good, PreviousSecret: "x"},
		"negative retention":     {URL: "https://x.example/h", Secret: good, KeyRetentionSeconds: -1},
	} {
		_, err := httpsigned.New(nil, httpsigned.Config{Accounts: map[string]httpsigned.Account{"acct": a}})
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), good) {
			t.Errorf("%s: secret in error", name)
		}
	}
}

func TestCapabilitiesAndActions(t *testing.T) {
	sec := secret(t)
	p, err := httpsigned.New(nil, httpsigned.Config{Accounts: map[string]httpsigned.Account{
		"keys":  {URL: "https://x.example/h", Secret: sec, HonoursKeys: true, KeyRetentionSeconds: 3600, LookupURL: "https://x.example/l"},
		"plain": {URL: "https://x.example/h", Secret: sec},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := p.Capabilities(ctx, "keys", "a"); c != (core.Capabilities{IdempotencyKeys: true, KeyRetention: time.Hour, Lookup: true}) {
		t.Fatalf("keys: %+v", c)
	}
	if c, _ := p.Capabilities(ctx, "plain", "a"); c != (core.Capabilities{}) {
		t.Fatalf("plain: %+v", c)
	}
	if _, err := p.Capabilities(ctx, "nope", "a"); err == nil {
		t.Fatal("unknown account")
	}
	for a, want := range map[string]bool{"order.created": true, "send_message": true, "": false, "a b": false, "x/y": false} {
		if p.SupportsAction(a) != want {
			t.Errorf("SupportsAction(%q) != %v", a, want)
		}
	}
	q, _ := httpsigned.New(nil, httpsigned.Config{Actions: []string{"only"}})
	if !q.SupportsAction("only") || q.SupportsAction("other") {
		t.Fatal("configured actions")
	}
	// A key that cannot be a webhook-id (the spec forbids '.') is refused.
	p2 := newProvider(t, httpsigned.Account{URL: "http://127.0.0.1:1/h", Secret: sec}, nil)
	r := request("it.with.dots")
	if _, err := p2.Send(ctx, r); core.ClassOf(err) != core.ClassRejectedInput {
		t.Fatalf("dotted key: %v", err)
	}
}

func TestLookup(t *testing.T) {
	sec := secret(t)
	rc := fakes.NewReceiver(t, fakes.ReceiverOptions{Secret: sec, HonoursKeys: true, Retention: time.Hour, Lookup: true})
	a := httpsigned.Account{URL: rc.URL(), Secret: sec, HonoursKeys: true, KeyRetentionSeconds: 3600, LookupURL: rc.LookupURL()}
	p := newProvider(t, a, nil)

	lr, err := p.Lookup(ctx, request("it_none"))
	if err != nil || lr.State != core.LookupAbsent {
		t.Fatalf("absent: %+v %v", lr, err)
	}
	res, err := p.Send(ctx, request("it_sent"))
	if err != nil {
		t.Fatal(err)
	}
	lr, err = p.Lookup(ctx, request("it_sent"))
	if err != nil || lr.State != core.LookupFound || lr.ExternalID != res.ExternalID {
		t.Fatalf("found: %+v %v (send said %s)", lr, err, res.ExternalID)
	}
	// While a request with the key is held (not committed): pending.
	rc.Inject(fakes.Fault{Kind: fakes.HangNoCommit})
	done := make(chan error, 1)
	go func() { _, err := p.Send(ctx, request("it_held")); done <- err }()
	deadline := time.Now().Add(2 * time.Second)
	for {
		lr, err = p.Lookup(ctx, request("it_held"))
		if (err == nil && lr.State == core.LookupPending) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || lr.State != core.LookupPending {
		t.Fatalf("pending: %+v %v", lr, err)
	}
	rc.Release()
	if err := <-done; core.ClassOf(err) != core.ClassUnknownOutcome {
		t.Fatalf("held send: %v (503 not declared safe)", err)
	}
	if lr, err := p.Lookup(ctx, request("it_held")); err != nil || lr.State != core.LookupAbsent {
		t.Fatalf("after release: %+v %v", lr, err)
	}
	if rc.BadSignatures() != 0 {
		t.Fatalf("%d bad signatures", rc.BadSignatures())
	}
}

func TestLookupErrors(t *testing.T) {
	sec := secret(t)
	for name, c := range map[string]struct {
		status int
		body   string
	}{
		"500":           {500, `{"state":"absent"}`},
		"404":           {404, ``},
		"not json":      {200, `absent`},
		"unknown state": {200, `{"state":"maybe"}`},
	} {
		var cp capture
		url := cp.server(t, c.status, nil, c.body)
		p := newProvider(t, httpsigned.Account{URL: url, Secret: sec, LookupURL: url}, nil)
		if lr, err := p.Lookup(ctx, request("k")); err == nil {
			t.Errorf("%s: %+v, want error", name, lr)
		}
	}
	p := newProvider(t, httpsigned.Account{URL: "http://127.0.0.1:1/h", Secret: sec}, nil)
	if _, err := p.Lookup(ctx, request("k")); err == nil {
		t.Fatal("lookup without lookupUrl")
	}
}

// A receiver that answers 409 "duplicate" for a key it already processed,
// declared as such: the retry after a lost response is a success, one effect.
func TestConflictMeansDuplicateAgainstReceiver(t *testing.T) {
	sec := secret(t)
	rc := fakes.NewReceiver(t, fakes.ReceiverOptions{Secret: sec, HonoursKeys: true, Retention: time.Hour, ConflictOnDuplicate: true})
	p := newProvider(t, httpsigned.Account{URL: rc.URL(), Secret: sec, HonoursKeys: true, KeyRetentionSeconds: 3600, ConflictMeans: "duplicate"}, nil)
	rc.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
	if _, err := p.Send(ctx, request("it_dup")); core.ClassOf(err) != core.ClassUnknownOutcome {
		t.Fatalf("first: %v", err)
	}
	res, err := p.Send(ctx, request("it_dup"))
	if err != nil || res.ExternalID != "rcv_1" || res.Evidence.Extra["conflict"] != "duplicate" {
		t.Fatalf("retry: %+v %v", res, err)
	}
	if rc.EffectsFor("it_dup") != 1 {
		t.Fatalf("%d effects", rc.EffectsFor("it_dup"))
	}
	// Undeclared, the same 409 is an unknown outcome.
	q := newProvider(t, httpsigned.Account{URL: rc.URL(), Secret: sec, HonoursKeys: true, KeyRetentionSeconds: 3600}, nil)
	if _, err := q.Send(ctx, request("it_dup")); core.ClassOf(err) != core.ClassUnknownOutcome {
		t.Fatalf("undeclared 409: %v", err)
	}
}

// Redirects are never followed: the Location target sees no request.
func TestRedirectNotFollowed(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer target.Close()
	var cp capture
	url := cp.server(t, 307, map[string]string{"Location": target.URL}, ``)
	p := newProvider(t, httpsigned.Account{URL: url, Secret: secret(t)}, nil)
	_, err := p.Send(ctx, request("it_r"))
	if core.ClassOf(err) != core.ClassUnknownOutcome || hits.Load() != 0 {
		t.Fatalf("%v, %d hits on the redirect target", err, hits.Load())
	}
}
