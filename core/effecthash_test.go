package core

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestEffectHashCoversTheEffect: one row per field of a submission, saying
// whether a repeat under the same key that differs only in that field is the
// same operation (a replay: 200, the stored intent) or another one (422
// idempotency_key_reused). The effect (kind, provider, account, action,
// target, payload) and the source revision it answers decide; the grant
// reference, the deadline and metadata are context (issue 50).
func TestEffectHashCoversTheEffect(t *testing.T) {
	const base = `{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","payload":{"text":"hi","n":1},` +
		`"source":{"id":"msg-1","revision":3},"grant":{"id":"g1","version":1},"deadline":"2030-01-01T00:00:00Z","metadata":{"run":"r1"}}`
	for _, c := range []struct {
		field, from, to string
		replay          bool
	}{
		{"nothing", "", "", true},
		{"payload key order and spacing", `{"text":"hi","n":1}`, `{ "n":1, "text":"hi" }`, true},
		{"grant version", `"version":1`, `"version":2`, true},
		{"grant id", `"id":"g1"`, `"id":"g2"`, true},
		{"deadline", `2030-01-01T00:00:00Z`, `2031-06-01T00:00:00Z`, true},
		{"metadata", `{"run":"r1"}`, `{"run":"r2","trace":"t"}`, true},
		{"kind", `"reply"`, `"action"`, false},
		{"provider", `"fake"`, `"other"`, false},
		{"account", `"a1"`, `"a2"`, false},
		{"action", `"send"`, `"edit"`, false},
		{"target", `"c1"`, `"c2"`, false},
		{"payload", `"hi"`, `"hello"`, false},
		{"source id", `"msg-1"`, `"msg-2"`, false},
		{"source revision", `"revision":3`, `"revision":4`, false},
	} {
		t.Run(c.field, func(t *testing.T) {
			r := newRig(Capabilities{})
			first, err := r.in.Submit(context.Background(), "bot1", "k1", []byte(base))
			if err != nil {
				t.Fatal(err)
			}
			again := strings.Replace(base, c.from, c.to, 1)
			if c.from != "" && again == base {
				t.Fatalf("the row changes nothing: %s", c.from)
			}
			res, err := r.in.Submit(context.Background(), "bot1", "k1", []byte(again))
			switch {
			case c.replay && (err != nil || !res.Replayed || res.Intent.ID != first.Intent.ID || res.Intent.Grant.Version != 1):
				t.Fatalf("want a replay of the stored intent (its own grant kept): %+v, %v", res, err)
			case !c.replay && !errors.Is(err, ErrIdempotencyKeyReused):
				t.Fatalf("want idempotency_key_reused, got %+v, %v", res, err)
			}
		})
	}
}

// TestOlderIntentsReplayByTheWholeRequest: an intent stored before the effect
// hash (its RequestHash covers the whole canonical request) answers replays
// exactly as before: the same body replays, a body that differs in its grant
// reference is another request.
func TestOlderIntentsReplayByTheWholeRequest(t *testing.T) {
	r := newRig(Capabilities{})
	first, err := r.in.Submit(context.Background(), "bot1", "k1", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := Canonicalize([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Update(context.Background(), first.Intent.ID, func(in *Intent) error {
		in.RequestHash = HashBytes(canonical) // as stored before issue 50
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.in.Submit(context.Background(), "bot1", "k1", []byte(body)); err != nil || !res.Replayed {
		t.Fatalf("the same body: %+v, %v", res, err)
	}
	other := strings.Replace(body, `"version":1`, `"version":2`, 1)
	if _, err := r.in.Submit(context.Background(), "bot1", "k1", []byte(other)); !errors.Is(err, ErrIdempotencyKeyReused) {
		t.Fatalf("another grant reference on an older intent: %v", err)
	}
}
