package sandbox

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fire sends n POSTs with the same key at once and returns their results.
func fire(e *env, n int, account, key string) []result {
	var wg sync.WaitGroup
	start := make(chan struct{})
	out := make([]result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = e.send(account, key, "t", sendOpts{})
		}()
	}
	close(start)
	wg.Wait()
	return out
}

func TestConcurrentSameKeyHonoured(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			e := newEnv(t)
			e.configure(honour("a1", 3600))
			results := fire(e, 50, "a1", "k1")
			created, replayed := 0, 0
			ids := map[string]bool{}
			for _, r := range results {
				switch {
				case r.err != nil:
					t.Fatalf("transport error: %v", r.err)
				case r.status == http.StatusCreated:
					created++
				case r.status == http.StatusOK && r.header.Get("Idempotent-Replayed") == "true":
					replayed++
				default:
					t.Fatalf("status %d body %s", r.status, r.body)
				}
				ids[r.message(t).ID] = true
			}
			if created != 1 || replayed != 49 || len(ids) != 1 {
				t.Fatalf("created %d replayed %d ids %v", created, replayed, ids)
			}
			if n := e.count(""); n != 1 {
				t.Fatalf("effects %d want exactly 1", n)
			}
		})
	}
}

func TestConcurrentSameKeyNotHonoured(t *testing.T) {
	e := newEnv(t)
	results := fire(e, 50, "a1", "k1")
	ids := map[string]bool{}
	for _, r := range results {
		if r.status != http.StatusCreated {
			t.Fatalf("status %d %v", r.status, r.err)
		}
		ids[r.message(t).ID] = true
	}
	if len(ids) != 50 {
		t.Fatalf("distinct ids %d", len(ids))
	}
	e.wantCount("?idempotencyKey=k1", 50, "")
}

// A request with the same key as a held (in-progress) one waits for it and then replays.
func TestConcurrentWaitsForHeldOwner(t *testing.T) {
	e := newEnv(t)
	e.configure(honour("a1", 3600, Fault{Kind: FaultHang, DelayMs: 60000}))
	first := e.sendHeld("a1", "k1", "owner held")
	second := e.sendAsync("a1", "k1")
	select {
	case r := <-second:
		t.Fatalf("second request did not wait: %d %s", r.status, r.body)
	case <-time.After(100 * time.Millisecond):
	}
	e.wantCount("", 0, "")
	e.sb.Release("a1")
	r1, r2 := <-first, <-second
	if r1.status != http.StatusCreated || r2.status != http.StatusOK || r2.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("first %d second %d", r1.status, r2.status)
	}
	if r1.message(t) != r2.message(t) {
		t.Fatalf("different messages %s vs %s", r1.body, r2.body)
	}
	e.wantCount("", 1, "")
}

// ownerHeldWithoutCommit starts a sandbox logging into logs and sends key
// k1 on account a1 as an owner whose request is held and never commits.
func ownerHeldWithoutCommit(t *testing.T) (e *env, logs *syncBuffer, first <-chan result) {
	t.Helper()
	logs = &syncBuffer{}
	e = newEnv(t, WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	e.configure(honour("a1", 3600, Fault{Kind: FaultHangNoCommit, DelayMs: 60000}))
	return e, logs, e.sendHeld("a1", "k1", "owner held")
}

// If the owner ends without committing, a waiter goes on and commits itself.
func TestConcurrentWaiterCommitsWhenOwnerDoesNot(t *testing.T) {
	e, _, first := ownerHeldWithoutCommit(t)
	second := e.sendAsync("a1", "k1")
	time.Sleep(50 * time.Millisecond)
	e.sb.Release("a1")
	if r := <-first; r.status != http.StatusServiceUnavailable {
		t.Fatalf("first %d", r.status)
	}
	if r := <-second; r.status != http.StatusCreated {
		t.Fatalf("second %d", r.status)
	}
	e.wantCount("", 1, "")
}

func TestConcurrentConflictPolicy(t *testing.T) {
	e := newEnv(t)
	c := honour("a1", 3600, Fault{Kind: FaultHang, DelayMs: 60000})
	c.Capabilities.ConcurrentKeyPolicy = ptr(PolicyConflict)
	e.configure(c)
	first := e.sendHeld("a1", "k1", "owner held")
	r := e.send("a1", "k1", "t", sendOpts{})
	if r.status != http.StatusConflict || r.errorCode(t) != "request_in_progress" {
		t.Fatalf("second: %d %s", r.status, r.body)
	}
	e.mustSend("a1", "k2", "t", http.StatusCreated) // other keys are not blocked
	e.sb.Release("a1")
	if r := <-first; r.status != http.StatusCreated {
		t.Fatalf("first %d", r.status)
	}
	e.mustSend("a1", "k1", "t", http.StatusOK)
	e.wantCount("?idempotencyKey=k1", 1, "")
}

// A waiter whose client gives up leaves without an effect. The owner does
// not commit, so a waiter that wrongly stayed would go on and commit one.
func TestConcurrentWaiterClientGivesUp(t *testing.T) {
	e, logs, first := ownerHeldWithoutCommit(t)
	impatient := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 50 * time.Millisecond}
	if r := e.send("a1", "k1", "t", sendOpts{client: impatient}); r.err == nil {
		t.Fatalf("expected timeout, got %d", r.status)
	}
	// Release only once the server has seen the waiter's client go: the
	// departure, not the owner's end, must be what ends its wait.
	waitFor(t, "waiter saw its client leave", func() bool {
		return strings.Contains(logs.String(), "client_gone_while_waiting")
	})
	e.sb.Release("a1")
	if r := <-first; r.status != http.StatusServiceUnavailable {
		t.Fatalf("first %d", r.status)
	}
	time.Sleep(100 * time.Millisecond) // give a wrongly remaining waiter time to commit
	e.wantCount("", 0, "the waiter whose client left still committed")
}

// Mixed traffic on several accounts, for the race detector and for the
// invariant: on key-honouring accounts each key has at most one effect per
// retention window (the fake clock does not move here, so exactly one).
func TestConcurrentMixedTraffic(t *testing.T) {
	e := newEnv(t)
	e.configure(honour("h", 3600, Fault{Kind: FaultErrorAfterCommit}, Fault{Kind: FaultUnavailable},
		Fault{Kind: FaultRateLimit}, Fault{Kind: FaultHang, DelayMs: 5}, Fault{Kind: FaultDropAfterCommit}))
	e.configure(Config{Account: "n", Capabilities: &CapabilitiesPatch{Lookup: ptr(true)}})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				key := fmt.Sprintf("k%d", i%5)
				switch (g + i) % 6 {
				case 0, 1:
					e.send("h", key, "t", sendOpts{})
				case 2:
					e.send("n", key, "t", sendOpts{})
				case 3:
					e.lookup("h", key)
				case 4:
					e.effects("?account=h")
				case 5:
					e.configure(Config{Account: "h", Faults: []Fault{{Kind: FaultHang, DelayMs: 2}}, Append: true})
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, "holds over", func() bool { return e.sb.Held("") == 0 })
	for i := range 5 {
		key := fmt.Sprintf("k%d", i)
		if n := e.count("?account=h&idempotencyKey=" + key); n > 1 {
			t.Fatalf("key %s has %d effects on a key-honouring account", key, n)
		}
	}
}
