package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/botharness/outbox/core/clocktest"
)

// Fuzz targets for intake body parsing and canonicalisation. A short run is
// part of `make test` (the seed corpus); `make fuzz` runs each for longer.

const fuzzBody = `{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","payload":{"text":"hi","n":[1,2.50,{"z":null,"a":true}]},"grant":{"id":"g1","version":1}}`

func fuzzIntake() *Intake {
	return &Intake{Store: newMemStore(), Providers: ProviderMap{"fake": &fakeProvider{}},
		Clock: clocktest.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}
}

// effective is what an accepted request means: two bodies that replay each
// other must mean the same thing.
func effective(t *testing.T, in *Intent) string {
	t.Helper()
	b, err := json.Marshal(struct {
		Kind                              Kind
		Provider, Account, Action, Target string
		Payload, Metadata                 json.RawMessage
		Source                            *SourceRef
		Grant                             GrantRef
		Deadline                          *time.Time
	}{in.Kind, in.Provider, in.Account, in.Action, in.Target, in.Payload, in.Metadata, in.Source, in.Grant, in.Deadline})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// acceptedOrInvalid submits body: it returns the stored intent, or false
// when the body was refused, which must be with a ValidationError.
func acceptedOrInvalid(t *testing.T, in *Intake, bot, key string, body []byte) (*Intent, bool) {
	t.Helper()
	res, err := in.Submit(context.Background(), bot, key, body)
	if err != nil {
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("a refused body must be a ValidationError, got %T %v", err, err)
		}
		return nil, false
	}
	return res.Intent, true
}

func FuzzIntakeSubmit(f *testing.F) {
	f.Add([]byte(fuzzBody), "k1", []byte(`{ "grant":{"version":1,"id":"g1"},"target":"c1","payload":{"n":[1,2.5,{"a":true,"z":null}],"text":"hi"},"action":"send","account":"a1","provider":"fake","kind":"reply" }`))
	f.Add([]byte(fuzzBody), "k1", []byte(`{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","target":"c2","payload":{"text":"hi","n":[1,2.50,{"z":null,"a":true}]},"grant":{"id":"g1","version":1}}`))
	f.Add([]byte(`{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","payload":{"text":"\u00e9","n":1e2},"grant":{"id":"g1","version":1}}`), "k2", []byte(`{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","payload":{"text":"é","n":100},"grant":{"id":"g1","version":1}}`))
	f.Add([]byte(`{"kind":"action","provider":"fake","account":"a1","action":"send","target":"c1","payload":{},"grant":{"id":"g1","version":2},"source":{"id":"s","revision":3},"deadline":"2031-01-01T00:00:00Z","metadata":{"b":1,"a":2}}`), "k3", []byte(`[]`))
	f.Add([]byte(`{"kind":"reply","payload":{"a":1,"a":2}}`), "k4", []byte(`null`))
	f.Add([]byte(`{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","payload":{"x":1e400},"grant":{"id":"g1","version":1}}`), "k5", []byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte, key string, body2 []byte) {
		in := fuzzIntake()
		ctx := context.Background()
		stored, ok := acceptedOrInvalid(t, in, "bot", key, body)
		if !ok {
			return
		}
		// The stored payload is canonical and its hash is its hash.
		canon, err := Canonicalize(stored.Payload)
		if err != nil || !bytes.Equal(canon, stored.Payload) {
			t.Fatalf("stored payload is not canonical: %s vs %s (%v)", stored.Payload, canon, err)
		}
		if stored.PayloadHash != HashBytes(stored.Payload) {
			t.Fatalf("payload hash mismatch")
		}
		// The same body replays.
		again, err := in.Submit(ctx, "bot", key, body)
		if err != nil || !again.Replayed || again.Intent.ID != stored.ID {
			t.Fatalf("identical resubmission: %+v %v", again, err)
		}
		// Its canonical form is the same request: it replays too.
		if cb, err := Canonicalize(body); err == nil {
			r, err := in.Submit(ctx, "bot", key, cb)
			if err != nil || !r.Replayed {
				t.Fatalf("canonical form of an accepted body was not replayed: %s: %+v %v", cb, r, err)
			}
		}
		// Another body under the same key: either it means exactly the same
		// (replay) or it is refused as a conflicting reuse. Never a replay of
		// a different request.
		r2, err := in.Submit(ctx, "bot", key, body2)
		if err == nil && r2.Replayed {
			other, berr := fuzzIntake().Submit(ctx, "bot", key, body2)
			if berr != nil {
				t.Fatalf("body2 replayed body1 but is not valid on its own: %v\nbody1=%s\nbody2=%s", berr, body, body2)
			}
			if effective(t, other.Intent) != effective(t, stored) {
				t.Fatalf("a different request was replayed as the stored one:\nbody1=%s\nbody2=%s\n%s\n%s", body, body2, effective(t, stored), effective(t, other.Intent))
			}
		}
		if err != nil && !errors.Is(err, ErrIdempotencyKeyReused) {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("unexpected error for a second body: %T %v", err, err)
			}
		}
	})
}

// FuzzCanonicalize: the canonical form is valid JSON, a fixed point, and
// means what the input means to Go's decoder (otherwise two different
// requests could share a hash, or one request get two).
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,2,{"d":null,"c":"\u00e9"}]}`, `1.0`, `-0`, `1e21`, `0.000001`, `"\ud83d\ude00"`, `{"a":1,"a":2}`, `[1e400]`, `"\u2028"`, `{"":{"":[]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		out, err := Canonicalize(doc)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("canonical form is not JSON: %q -> %q", doc, out)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: %q -> %q -> %q (%v)", doc, out, again, err)
		}
		var a, b any
		if json.Unmarshal(doc, &a) != nil {
			t.Fatalf("Canonicalize accepted what Go's decoder rejects: %q", doc)
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("the canonical form means something else:\n in  %q -> %#v\n out %q -> %#v", doc, a, out, b)
		}
	})
}

// FuzzIntakeIdentity: over intake bodies whose payloads are fuzzed, the
// same hash (a replay) exactly when the two payloads parse to equal values,
// and the bytes delivered to the provider are the bytes that were hashed.
func FuzzIntakeIdentity(f *testing.F) {
	for _, p := range [][2]string{
		{`{"orderId":12345678901234567891}`, `{"orderId":12345678901234567892}`},
		{`{"orderId":9007199254740992}`, `{"orderId":9007199254740993}`},
		{`{"n":1E2,"t":"\u00e9"}`, `{ "t" : "é", "n" : 100.0 }`},
		{`{"n":-0}`, `{"n":0}`},
		{`{"n":0.1}`, `{"n":0.10000000000000001}`},
		{`{"n":1e400}`, `{"n":1}`},
		{`{"t":"<a&b>\u2028","x":[1,2.5e-7,{"z":null}]}`, `{"x":[1,2.5E-7,{"z":null}],"t":"<a&b>\u2028"}`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`{"t":"\ud800"}`, `{"t":"\ufffd"}`},
		{`{"big":18446744073709551616}`, `{"big":18446744073709552000}`},
	} {
		f.Add([]byte(p[0]), []byte(p[1]))
	}
	envelope := func(p []byte) []byte {
		return []byte(`{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","grant":{"id":"g1","version":1},"payload":` + string(p) + `}`)
	}
	f.Fuzz(func(t *testing.T, p1, p2 []byte) {
		if !json.Valid(p1) || !json.Valid(p2) || !utf8.Valid(p1) || !utf8.Valid(p2) {
			return
		}
		r := newRig(Capabilities{})
		ctx := context.Background()
		stored, ok := acceptedOrInvalid(t, r.in, "bot1", "k", envelope(p1))
		if !ok {
			return
		}
		// Hashed == stored == sent.
		canonical, err := Canonicalize(envelope(p1))
		if err != nil || EffectHash(stored) != stored.RequestHash || stored.PayloadHash != HashBytes(stored.Payload) {
			t.Fatalf("request hash is not the effect hash of the canonical payload (%v)", err)
		}
		if !bytes.Contains(canonical, append([]byte(`"payload":`), stored.Payload...)) || stored.PayloadHash != HashBytes(stored.Payload) {
			t.Fatalf("stored payload %s is not the payload that was hashed in %s", stored.Payload, canonical)
		}
		if !jsonEqual(t, stored.Payload, p1) {
			t.Fatalf("stored payload %s means something else than %s", stored.Payload, p1)
		}
		mustAttempt(t, r.d, stored.ID)
		if len(r.prov.payloads) != 1 || !bytes.Equal(r.prov.payloads[0], stored.Payload) || HashBytes(r.prov.payloads[0]) != stored.PayloadHash {
			t.Fatalf("delivered %q, hashed and stored %q", r.prov.payloads, stored.Payload)
		}
		// Same key, second body: a replay exactly when the values are equal.
		res2, err := r.in.Submit(ctx, "bot1", "k", envelope(p2))
		var ve *ValidationError
		switch {
		case errors.As(err, &ve):
			return // not I-JSON on its own
		case errors.Is(err, ErrIdempotencyKeyReused):
			if jsonEqual(t, p1, p2) {
				t.Fatalf("equal payloads refused as a key reuse:\np1=%s\np2=%s", p1, p2)
			}
		case err != nil:
			t.Fatalf("second submission: %v", err)
		default:
			if !res2.Replayed {
				t.Fatal("a second submission under one key created a second intent")
			}
			if !jsonEqual(t, p1, p2) {
				t.Fatalf("different payloads share one identity (replayed):\np1=%s\np2=%s", p1, p2)
			}
		}
	})
}
