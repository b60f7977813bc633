package httpx_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"": 0, "0": 0, "7": 7 * time.Second, " 12 ": 12 * time.Second, "-3": 0, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
	} {
		if got := httpx.RetryAfter(h, now); got != want {
			t.Errorf("RetryAfter(%q) = %v, want %v", h, got, want)
		}
	}
}

func TestRedact(t *testing.T) {
	err := &url.Error{Op: "Post", URL: "https://api.telegram.org/bot123:SECRET/sendMessage?x=SECRET", Err: errors.New("dial tcp: refused")}
	got := httpx.Redact(err).Error()
	if strings.Contains(got, "SECRET") || !strings.Contains(got, "api.telegram.org") || !strings.Contains(got, "refused") {
		t.Fatalf("Redact = %q", got)
	}
	plain := errors.New("x")
	if httpx.Redact(plain) != plain || httpx.Redact(nil) != nil {
		t.Fatal("non-URL errors pass through")
	}
}

func TestDoClassifiesTransportFailures(t *testing.T) {
	ctx := context.Background()
	c := httpx.Client(nil)

	l, _ := net.Listen("tcp", "127.0.0.1:0")
	refused := "http://" + l.Addr().String()
	_ = l.Close()
	_, err := httpx.Do(ctx, c, http.MethodPost, refused+"/x", nil, []byte("{}"), 0)
	var re *core.RetryableError
	if !errors.As(err, &re) || re.Class != core.ClassTransient {
		t.Fatalf("refused: %T %v", err, err)
	}

	// The server reads the request and closes: it may have acted.
	closer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		_ = conn.Close()
	}))
	defer closer.Close()
	_, err = httpx.Do(ctx, c, http.MethodPost, closer.URL, nil, []byte("{}"), 0)
	var ue *core.UnknownOutcomeError
	if !errors.As(err, &ue) {
		t.Fatalf("closed after reading: %T %v", err, err)
	}

	// The deadline passes while waiting for the response.
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = httpx.Do(tctx, c, http.MethodPost, slow.URL, nil, []byte("{}"), 0)
	if !errors.As(err, &ue) {
		t.Fatalf("timeout after sending: %T %v", err, err)
	}

	// An unbuildable URL never leaves.
	_, err = httpx.Do(ctx, c, http.MethodPost, "http://[::1/bad", nil, nil, 0)
	if core.ClassOf(err) != core.ClassRejectedInput {
		t.Fatalf("bad url: %v", err)
	}
}

func TestDoNeverFollowsRedirectsAndLimitsBody(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer target.Close()
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", target.URL)
		w.WriteHeader(http.StatusTemporaryRedirect)
		_, _ = w.Write([]byte(strings.Repeat("x", 100)))
	}))
	defer redir.Close()
	resp, err := httpx.Do(context.Background(), httpx.Client(&http.Client{}), http.MethodPost, redir.URL, http.Header{"X-A": {"1"}}, []byte("{}"), 10)
	if err != nil || resp.Status != http.StatusTemporaryRedirect || hits.Load() != 0 || len(resp.Body) != 10 {
		t.Fatalf("%+v %v hits=%d", resp, err, hits.Load())
	}
}

// TestMarshalVerbatimKeepsPayloadBytes: a canonical payload goes on the wire
// byte for byte (json.Marshal would escape <, >, &, U+2028 and U+2029).
func TestMarshalVerbatimKeepsPayloadBytes(t *testing.T) {
	payload := json.RawMessage("{\"n\":9007199254740991,\"t\":\"<a&b>\u2028\u2029é\"}")
	b, err := httpx.MarshalVerbatim(struct {
		Payload json.RawMessage `json:"payload"`
	}{payload})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"payload":` + string(payload) + `}`; string(b) != want {
		t.Fatalf("wire bytes %q, want %q", b, want)
	}
}

// TestDefaultAttemptPolicyOutlivesAProviderCall: the default attempt
// policy's durations that must outlast one provider request do, for a
// provider left at DefaultTimeout: the lease (else a live attempt is taken
// for a crashed one, an unknown outcome), reconciliation's settle window
// (else an "absent" lookup is trusted while the request can still land, a
// duplicate) and the breaker's probe lease (else two probes overlap).
func TestDefaultAttemptPolicyOutlivesAProviderCall(t *testing.T) {
	p := core.DefaultAttemptPolicy
	for name, d := range map[string]time.Duration{
		"lease": p.Lease, "reconcile settle": p.Reconcile.Settle, "breaker probe lease": p.Breaker.ProbeLease,
	} {
		if d <= httpx.DefaultTimeout {
			t.Errorf("default %s %v does not outlive a provider request (%v)", name, d, httpx.DefaultTimeout)
		}
	}
}
