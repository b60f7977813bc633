package sandbox

import (
	"net/http"
	"testing"
	"time"
)

func (e *env) requests(account string) RequestsResponse {
	e.t.Helper()
	var rr RequestsResponse
	e.getOK("/_sandbox/requests?account="+account, &rr)
	return rr
}

func TestRateLimitModeAnswers429BeyondTheRateWithNoEffect(t *testing.T) {
	e := newEnv(t)
	st := e.configure(Config{Account: "rl", RateLimit: &RateLimitMode{RequestsPerSecond: 3}})
	if st.RateLimit == nil || st.RateLimit.RequestsPerSecond != 3 {
		t.Fatalf("state %+v", st)
	}
	for i, k := range []string{"k1", "k2", "k3"} {
		e.mustSend("rl", k, "c", http.StatusCreated)
		e.clock.Advance(100 * time.Millisecond)
		_ = i
	}
	// 4th within the same second: 429, Retry-After until the first leaves the window.
	r := e.mustSend("rl", "k4", "c", http.StatusTooManyRequests)
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q, want 1", got)
	}
	if r.errorCode(t) != "rate_limited" {
		t.Fatalf("code %s", r.body)
	}
	e.wantCount("?account=rl", 3, "the 429 has none")
	// Other accounts are not limited.
	e.mustSend("other", "k5", "c", http.StatusCreated)
	// Once the first request leaves the window, one more is served.
	e.clock.Advance(701 * time.Millisecond)
	e.mustSend("rl", "k4", "c", http.StatusCreated)
	e.mustSend("rl", "k6", "c", http.StatusTooManyRequests)
	rr := e.requests("rl")
	if rr.Count != 6 {
		t.Fatalf("request log has %d requests for rl, want 6: %+v", rr.Count, rr.Requests)
	}
	var limited int
	for _, q := range rr.Requests {
		if q.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited != 2 {
		t.Fatalf("%d logged 429s, want 2", limited)
	}
	// Off again.
	e.configure(Config{Account: "rl", RateLimit: &RateLimitMode{}})
	e.mustSend("rl", "k7", "c", http.StatusCreated)
}

func TestRateLimitModeFixedRetryAfter(t *testing.T) {
	e := newEnv(t)
	e.configure(Config{Account: "rl", RateLimit: &RateLimitMode{RequestsPerSecond: 1, RetryAfterSeconds: 5}})
	e.mustSend("rl", "k1", "c", http.StatusCreated)
	if got := e.mustSend("rl", "k2", "c", http.StatusTooManyRequests).header.Get("Retry-After"); got != "5" {
		t.Fatalf("Retry-After %q, want 5", got)
	}
}

func TestOutageModeAnswers503ForItsDuration(t *testing.T) {
	e := newEnv(t)
	st := e.configure(Config{Account: "out", Outage: &OutageMode{DurationMs: 60_000}})
	if st.OutageUntil == nil || !st.OutageUntil.Equal(e.clock.Now().Add(time.Minute)) {
		t.Fatalf("outageUntil %v", st.OutageUntil)
	}
	r := e.mustSend("out", "k1", "c", http.StatusServiceUnavailable)
	if r.errorCode(t) != "unavailable" {
		t.Fatalf("body %s", r.body)
	}
	e.clock.Advance(59 * time.Second)
	e.mustSend("out", "k1", "c", http.StatusServiceUnavailable)
	if n := e.count("?account=out"); n != 0 {
		t.Fatalf("effects during the outage: %d", n)
	}
	e.clock.Advance(time.Second)
	e.mustSend("out", "k1", "c", http.StatusCreated)
	if n := e.requests("out").Count; n != 3 {
		t.Fatalf("request log %d, want 3", n)
	}
	// durationMs 0 ends an outage at once.
	e.configure(Config{Account: "out", Outage: &OutageMode{DurationMs: 60_000}})
	e.mustSend("out", "k2", "c", http.StatusServiceUnavailable)
	e.configure(Config{Account: "out", Outage: &OutageMode{}})
	e.mustSend("out", "k2", "c", http.StatusCreated)
}

func TestModesRejectNegativeValues(t *testing.T) {
	e := newEnv(t)
	for _, body := range []string{`{"account":"a","rateLimit":{"requestsPerSecond":-1}}`, `{"account":"a","outage":{"durationMs":-5}}`} {
		r := e.do(nil, http.MethodPost, "/_sandbox/faults", map[string]string{"Content-Type": "application/json"}, body)
		if r.status != http.StatusBadRequest {
			t.Fatalf("%s: %d", body, r.status)
		}
	}
}

func TestRequestLogRecordsDroppedConnections(t *testing.T) {
	e := newEnv(t)
	e.configure(Config{Account: "d", Faults: []Fault{{Kind: FaultDropAfterCommit}}})
	r := e.send("d", "k1", "c", sendOpts{})
	if r.err == nil {
		t.Fatalf("want a dropped connection, got %d", r.status)
	}
	waitFor(t, "the dropped request is logged", func() bool { return e.requests("d").Count == 1 })
	if st := e.requests("d").Requests[0].Status; st != 0 {
		t.Fatalf("a dropped request logs status 0, got %d", st)
	}
}
