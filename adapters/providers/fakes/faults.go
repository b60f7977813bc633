// Package fakes holds local HTTP fakes of the providers the outbox talks to
// (Slack Web API, Telegram Bot API, a Standard Webhooks receiver). Each fake
// reproduces the request and response shapes of the provider's documentation
// (cited beside each handler), keeps an exact count of the side effects it
// really performed, and injects faults: rejections, revoked authorisation,
// rate limits, and the dangerous ones, where the effect happens but the
// caller never learns it (response dropped after commit, response held past
// the caller's timeout).
//
// The fakes bind 127.0.0.1 only and are meant for tests and local runs; they
// are not part of the deployed system.
package fakes

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"
)

// Kind names an injected fault.
type Kind string

const (
	// Reject: the provider refuses the input; nothing happens.
	Reject Kind = "reject"
	// Unauthorized: the credentials were revoked; nothing happens.
	Unauthorized Kind = "unauthorized"
	// RateLimit: 429 with Retry-After (RetryAfter); nothing happens.
	RateLimit Kind = "rate_limit"
	// Unavailable: a 5xx before anything is committed.
	Unavailable Kind = "unavailable"
	// DropAfterCommit: the effect happens, then the connection is closed
	// without any response.
	DropAfterCommit Kind = "drop_after_commit"
	// ErrorAfterCommit: the effect happens, then the provider answers with
	// its documented "internal error, it may have partly succeeded" error.
	ErrorAfterCommit Kind = "error_after_commit"
	// Hang: the effect happens, then the response is held until the client
	// gives up (or Release / the end of the test).
	Hang Kind = "hang"
	// HangNoCommit: the response is held until the client gives up; nothing
	// is ever committed.
	HangNoCommit Kind = "hang_no_commit"
	// ProviderError: answer with the provider-specific error in Code /
	// Status / Description; nothing happens.
	ProviderError Kind = "provider_error"
)

// Fault is one queued fault; it applies to the next write request (send)
// that passes authentication and validation.
type Fault struct {
	Kind       Kind
	RetryAfter time.Duration
	// ProviderError fields (their meaning is per provider).
	Code        string
	Status      int
	Description string
}

// faultQueue is a FIFO of faults plus the machinery to hold responses.
type faultQueue struct {
	mu      sync.Mutex
	q       []Fault
	release chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func newFaultQueue() *faultQueue {
	return &faultQueue{release: make(chan struct{}), closed: make(chan struct{})}
}

func (f *faultQueue) push(fs ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.q = append(f.q, fs...)
}

func (f *faultQueue) pop() (Fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.q) == 0 {
		return Fault{}, false
	}
	x := f.q[0]
	f.q = f.q[1:]
	return x, true
}

// Release lets every currently held response go.
func (f *faultQueue) Release() {
	f.mu.Lock()
	close(f.release)
	f.release = make(chan struct{})
	f.mu.Unlock()
}

func (f *faultQueue) close() { f.once.Do(func() { close(f.closed) }) }

// hold blocks until the client goes away, Release, or close. It reports
// whether the client is still there.
func (f *faultQueue) hold(r *http.Request) bool {
	f.mu.Lock()
	rel := f.release
	f.mu.Unlock()
	select {
	case <-r.Context().Done():
		return false
	case <-rel:
		return true
	case <-f.closed:
		return false
	}
}

// drop closes the connection without writing a response.
// afterCommit plays a fault that strikes once the effect is committed: the
// connection dropped (DropAfterCommit), an error answer written by fail
// (ErrorAfterCommit), or the response held until Release (Hang). It
// reports whether the request is settled, so the handler writes no success.
func (f *faultQueue) afterCommit(w http.ResponseWriter, r *http.Request, fault Fault, hasFault bool, fail func()) bool {
	if !hasFault {
		return false
	}
	switch fault.Kind {
	case DropAfterCommit:
		drop(w)
		return true
	case ErrorAfterCommit:
		fail()
		return true
	case Hang:
		return !f.hold(r)
	}
	return false
}

// errorStatus is a ProviderError fault's status (def when the fault sets
// none); the fault's RetryAfter, when set, goes out as a Retry-After header.
func errorStatus(w http.ResponseWriter, f Fault, def int) int {
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
	}
	if f.Status == 0 {
		return def
	}
	return f.Status
}

func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// TB is the part of testing.TB the fakes need.
type TB interface {
	Helper()
	Cleanup(func())
}

// start serves h on a loopback port and cleans up in the right order
// (release holds first, or the server would wait for them).
func start(tb TB, h http.Handler, fq *faultQueue) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(func() {
		fq.close()
		srv.Close()
	})
	return srv
}
