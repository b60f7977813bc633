package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// memPayloads is an in-memory PayloadStore whose objects a test can tamper with.
type memPayloads struct {
	mu   sync.Mutex
	objs map[string][]byte
	err  error
	gets int
}

func (m *memPayloads) Put(_ context.Context, hash string, b []byte) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ref := "payloads/" + strings.TrimPrefix(hash, "sha256:")
	m.objs[ref] = append([]byte(nil), b...)
	return ref, nil
}

func (m *memPayloads) Get(_ context.Context, ref string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets++
	if m.err != nil {
		return nil, m.err
	}
	b, ok := m.objs[ref]
	if !ok {
		return nil, fmt.Errorf("%s: %w", ref, ErrPayloadMissing)
	}
	return b, nil
}

func largeBody(n int) string {
	return fmt.Sprintf(`{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","payload":{"text":%q},"grant":{"id":"g1","version":1}}`, strings.Repeat("x", n))
}

func TestVerifyPayload(t *testing.T) {
	b := []byte(`{"text":"hi"}`)
	cases := []struct {
		name string
		hash string
		body []byte
		ok   bool
	}{
		{"same bytes", HashBytes(b), b, true},
		{"one byte changed", HashBytes(b), []byte(`{"text":"ho"}`), false},
		{"empty object", HashBytes(b), nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := VerifyPayload(c.hash, c.body)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrPayloadTampered)) {
				t.Fatalf("VerifyPayload = %v, want ok=%v", err, c.ok)
			}
		})
	}
}

func TestOffloadPayload(t *testing.T) {
	for _, c := range []struct {
		n    int
		want bool
	}{{0, false}, {PayloadInlineMax, false}, {PayloadInlineMax + 1, true}, {256 << 10, true}} {
		if got := OffloadPayload(make([]byte, c.n)); got != c.want {
			t.Fatalf("OffloadPayload(%d bytes) = %v", c.n, got)
		}
	}
}

func TestLargePayloadClaimCheck(t *testing.T) {
	cases := []struct {
		name       string
		tamper     bool
		remove     bool
		storeErr   error
		wantStatus Status
		wantSends  int
	}{
		{"verified payload is sent", false, false, nil, StatusSucceeded, 1},
		{"tampered object is never sent", true, false, nil, StatusNeedsHuman, 0},
		{"missing object is never sent", false, true, nil, StatusNeedsHuman, 0},
		{"store unavailable: retried later, nothing sent", false, false, errors.New("503 slow down"), StatusRetryableFailure, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(Capabilities{})
			pl := &memPayloads{objs: map[string][]byte{}}
			r.in.Payloads, r.d.Payloads = pl, pl
			res, err := r.in.Submit(context.Background(), "bot1", "k-large", []byte(largeBody(8<<10)))
			if err != nil {
				t.Fatal(err)
			}
			stored := r.get(t, res.Intent.ID)
			if stored.PayloadRef == "" || len(stored.Payload) != 0 {
				t.Fatalf("a %d-byte payload stayed inline", 8<<10)
			}
			if c.tamper {
				for k, v := range pl.objs {
					pl.objs[k] = append(v[:len(v)-2:len(v)-2], []byte(`!"}`)...)
				}
			}
			if c.remove {
				pl.objs = map[string][]byte{}
			}
			pl.err = c.storeErr
			if err := attemptID(context.Background(), r.d, stored.ID, "stream"); err != nil {
				t.Fatal(err)
			}
			got := r.get(t, stored.ID)
			if got.Status != c.wantStatus || r.prov.sends != c.wantSends {
				t.Fatalf("status %s sends %d, want %s and %d (%s)", got.Status, r.prov.sends, c.wantStatus, c.wantSends, got.StatusReason)
			}
			if c.tamper {
				ev := got.Attempts[len(got.Attempts)-1].Evidence.Detail
				if !strings.Contains(ev, stored.PayloadHash) || !strings.Contains(ev, "does not match") {
					t.Fatalf("evidence does not show the mismatch: %q", ev)
				}
			}
		})
	}
}
