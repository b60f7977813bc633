package sandbox

import (
	"bufio"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RateLimitMode makes an account enforce a request rate, like a real
// provider: at most RequestsPerSecond requests in any sliding 1 s window are
// served; every request beyond it gets 429 with Retry-After (the whole
// seconds until a request leaves the window, or RetryAfterSeconds when set)
// and has no effect. Rate-limited requests do not count against the window.
type RateLimitMode struct {
	// RequestsPerSecond: 0 turns the mode off.
	RequestsPerSecond int `json:"requestsPerSecond"`
	// RetryAfterSeconds, when > 0, is sent instead of the computed value.
	RetryAfterSeconds int `json:"retryAfterSeconds,omitempty"`
}

// OutageMode makes every send to the account answer 503 unavailable (not
// committed, no effect) for DurationMs from when it is configured (0 ends an
// outage at once). It applies after auth and validation, before faults.
type OutageMode struct {
	DurationMs int `json:"durationMs"`
}

// RequestRecord is one authorised, valid POST to an account's messages
// endpoint, whatever its answer: the sandbox's view of what the outbox sent.
type RequestRecord struct {
	Account        string    `json:"account"`
	Target         string    `json:"target"`
	IdempotencyKey string    `json:"idempotencyKey"`
	IntentID       string    `json:"intentId"`
	At             time.Time `json:"at"` // arrival, sandbox clock
	Status         int       `json:"status"`
	// TraceParent is the request's W3C traceparent header, if any.
	TraceParent string `json:"traceParent,omitempty"`
}

// RequestsResponse is the body of GET /_sandbox/requests.
type RequestsResponse struct {
	Count    int             `json:"count"`
	Requests []RequestRecord `json:"requests"`
}

func (m *RateLimitMode) validate() error {
	if m.RequestsPerSecond < 0 || m.RetryAfterSeconds < 0 {
		return fmt.Errorf("%w: rateLimit: requestsPerSecond and retryAfterSeconds must be >= 0", ErrInvalidConfig)
	}
	return nil
}

func (m *OutageMode) validate() error {
	if m.DurationMs < 0 {
		return fmt.Errorf("%w: outage: durationMs must be >= 0", ErrInvalidConfig)
	}
	return nil
}

// modeState is an account's rate-limit window and outage; guarded by Server.mu.
type modeState struct {
	rate        RateLimitMode
	window      []time.Time // served requests within the last second
	outageUntil time.Time
}

func (m modeState) rateState() *RateLimitMode {
	if m.rate.RequestsPerSecond <= 0 {
		return nil
	}
	r := m.rate
	return &r
}

func (m modeState) outageState() *time.Time {
	if m.outageUntil.IsZero() {
		return nil
	}
	t := m.outageUntil
	return &t
}

func (a *account) configureModes(c Config, now time.Time) {
	if c.RateLimit != nil {
		a.modes.rate = *c.RateLimit
		a.modes.window = nil
	}
	if c.Outage != nil {
		a.modes.outageUntil = now.Add(time.Duration(c.Outage.DurationMs) * time.Millisecond)
	}
}

// admitLocked applies the outage and the rate limit to one request arriving
// at now. It returns 0 to serve the request, or the status to answer and,
// for 429, the Retry-After seconds.
func (a *account) admitLocked(now time.Time) (status, retryAfter int) {
	if now.Before(a.modes.outageUntil) {
		return http.StatusServiceUnavailable, 0
	}
	r := a.modes.rate.RequestsPerSecond
	if r <= 0 {
		return 0, 0
	}
	w := a.modes.window
	for len(w) > 0 && !w[0].After(now.Add(-time.Second)) {
		w = w[1:]
	}
	if len(w) >= r {
		a.modes.window = w
		ra := a.modes.rate.RetryAfterSeconds
		if ra == 0 {
			ra = max(1, int(math.Ceil(w[len(w)-r].Add(time.Second).Sub(now).Seconds())))
		}
		return http.StatusTooManyRequests, ra
	}
	a.modes.window = append(w, now)
	return 0, 0
}

// Requests returns the request log of the account ("" = every account), in arrival order.
func (s *Server) Requests(account string) []RequestRecord {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	out := []RequestRecord{}
	for _, r := range s.requests {
		if account == "" || r.Account == account {
			out = append(out, r)
		}
	}
	return out
}

// handleRequests is GET /_sandbox/requests[?account=a1].
func (s *Server) handleRequests(w http.ResponseWriter, r *http.Request) {
	reqs := s.Requests(r.URL.Query().Get("account"))
	writeJSON(w, http.StatusOK, RequestsResponse{Count: len(reqs), Requests: reqs})
}

// requestLog keeps the request records apart from Server.mu, so the log of a
// request held by a fault does not wait for it.
type requestLog struct {
	reqMu    sync.Mutex
	requests []RequestRecord
}

func (s *Server) logRequest(rec RequestRecord) {
	s.reqMu.Lock()
	s.requests = append(s.requests, rec)
	s.reqMu.Unlock()
}

func (s *Server) resetRequests() {
	s.reqMu.Lock()
	s.requests = nil
	s.reqMu.Unlock()
}

// statusWriter remembers the status a handler wrote (0 = none: the
// connection was dropped).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Hijack keeps drop_after_commit working through the wrapper.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	return hj.Hijack()
}

func writeRateLimited(w http.ResponseWriter, retryAfter int, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	writeError(w, http.StatusTooManyRequests, "rate_limited", msg, nil)
}
