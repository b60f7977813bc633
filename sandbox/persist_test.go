package sandbox

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestPersistentSandboxSurvivesRestart: a sandbox opened on a state file and
// opened again after Close keeps its effects, key records, capabilities,
// consumed fault queue and webhook sender, and continues its message and
// event ids instead of reissuing them.
func TestPersistentSandboxSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandbox", "state.json")
	clock := newFakeClock()
	var mu sync.Mutex
	seen := map[string]int{} // webhook-id -> deliveries
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("webhook-id")]++
		mu.Unlock()
	}))
	defer recv.Close()
	events := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }

	open := func() *env {
		t.Helper()
		sb, err := Open(path, clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(sb)
		t.Cleanup(func() { sb.Close(); ts.Close() })
		return &env{t: t, sb: sb, url: ts.URL, clock: clock, client: &http.Client{Timeout: 20 * time.Second}}
	}
	e := open()
	cfg := honour("acct-p", 3600, Fault{Kind: FaultReject})
	cfg.Webhook = &WebhookConfig{URL: recv.URL, Secret: "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ="}
	e.configure(cfg)
	e.mustSend("acct-p", "k1", "chan-1", http.StatusBadRequest) // consumes the reject fault
	first := e.mustSend("acct-p", "k1", "chan-1", http.StatusCreated).message(t)
	waitFor(t, "the first acknowledgement", func() bool { return events() == 1 })
	e.sb.Close()

	e = open()
	st := e.sb.State("acct-p")
	if !st.Capabilities.IdempotencyKeys || !st.Capabilities.Lookup || st.Capabilities.KeyRetentionSeconds != 3600 || len(st.Faults) != 0 || st.Webhook == nil || st.Webhook.URL != recv.URL {
		t.Fatalf("account after restart: %+v; want keys+lookup, retention 3600, the consumed fault gone, the webhook kept", st)
	}
	if n := e.count("?account=acct-p"); n != 1 {
		t.Fatalf("effects after restart: %d, want 1", n)
	}
	if code, lk := e.lookup("acct-p", "k1"); code != http.StatusOK || lk.State != "found" {
		t.Fatalf("lookup after restart: %d %+v, want found", code, lk)
	}
	rr := e.send("acct-p", "k1", "chan-1", sendOpts{})
	if rr.err != nil || rr.status/100 != 2 {
		t.Fatalf("replay after restart: %d %v %s", rr.status, rr.err, rr.body)
	}
	replay := rr.message(t)
	if replay.ID != first.ID || e.count("?account=acct-p") != 1 {
		t.Fatalf("replay after restart: %s (first %s), %d effects; want the same message and one effect", replay.ID, first.ID, e.count("?account=acct-p"))
	}
	second := e.mustSend("acct-p", "k2", "chan-1", http.StatusCreated).message(t)
	if second.ID == first.ID {
		t.Fatalf("message id %s issued twice across a restart", second.ID)
	}
	waitFor(t, "the second acknowledgement, under a new event id", func() bool { return events() == 2 })
	mu.Lock()
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event id %s delivered %d times, want once (ids are never reissued)", id, n)
		}
	}
	mu.Unlock()

	// A state file that cannot be read is an error, never a silent fresh start.
	e.sb.Close()
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, clock.Now); err == nil {
		t.Fatal("Open accepted a corrupt state file")
	}
}
