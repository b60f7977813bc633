// Package providertest holds what the provider adapters' mapping-table tests
// share: a server with one canned answer and the check of a Send outcome.
package providertest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

// Canned answers every request with one fixed HTTP response and returns the
// server's URL; the server closes with the test.
func Canned(t testing.TB, status int, header map[string]string, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Outcome checks one Send against a mapping-table row. An empty class wants
// success with the external id; otherwise the error must be of that class
// and, when retryable, carry retryAfter. It reports whether the send
// succeeded (the row's other checks are about failures).
func Outcome(t testing.TB, res core.SendResult, err error, class core.ErrorClass, external string, retryAfter time.Duration) (sent bool) {
	t.Helper()
	if class == "" {
		if err != nil || res.ExternalID != external {
			t.Fatalf("Send = %+v, %v; want success %q", res, err, external)
		}
		return true
	}
	if got := core.ClassOf(err); got != class {
		t.Fatalf("class = %s (%v), want %s", got, err, class)
	}
	var re *core.RetryableError
	if errors.As(err, &re) && re.RetryAfter != retryAfter {
		t.Fatalf("RetryAfter = %v, want %v", re.RetryAfter, retryAfter)
	}
	return false
}
