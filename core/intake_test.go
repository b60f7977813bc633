package core

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestSubmitReplayAndConflict(t *testing.T) {
	r := newRig(Capabilities{})
	first := r.submit(t)
	reordered := `{ "grant":{"version":1,"id":"g1"},"payload":{"text":"hi"},"target":"c1","action":"send","account":"a1","provider":"fake","kind":"reply" }`
	res, err := r.in.Submit(context.Background(), "bot1", "k1", []byte(reordered))
	if err != nil || !res.Replayed || res.Intent.ID != first.ID {
		t.Fatalf("reordered body: %+v %v", res, err)
	}
	changed := strings.Replace(body, `"hi"`, `"bye"`, 1)
	_, err = r.in.Submit(context.Background(), "bot1", "k1", []byte(changed))
	if !errors.Is(err, ErrIdempotencyKeyReused) {
		t.Fatalf("changed body: %v", err)
	}
	other, err := r.in.Submit(context.Background(), "bot2", "k1", []byte(body))
	if err != nil || other.Replayed || other.Intent.ID == first.ID {
		t.Fatalf("second bot same key: %+v %v", other, err)
	}
	if r.store.puts != 2 {
		t.Fatalf("writes = %d, want 2", r.store.puts)
	}
}

func TestSubmitValidation(t *testing.T) {
	r := newRig(Capabilities{})
	cases := []struct {
		name, key, body, code, field string
	}{
		{"empty key", "", body, CodeInvalidIdempotencyKey, "Idempotency-Key"},
		{"long key", strings.Repeat("k", 256), body, CodeInvalidIdempotencyKey, "Idempotency-Key"},
		{"non-ascii key", "kë", body, CodeInvalidIdempotencyKey, "Idempotency-Key"},
		{"malformed", "k", `{"kind":`, CodeMalformedJSON, ""},
		{"array body", "k", `[1]`, CodeMalformedJSON, ""},
		{"bad kind", "k", strings.Replace(body, `"reply"`, `"shout"`, 1), CodeInvalidField, "kind"},
		{"missing target", "k", strings.Replace(body, `"target":"c1",`, ``, 1), CodeInvalidField, "target"},
		{"payload not object", "k", strings.Replace(body, `{"text":"hi"}`, `"hi"`, 1), CodeInvalidField, "payload"},
		{"missing grant", "k", strings.Replace(body, `,"grant":{"id":"g1","version":1}`, ``, 1), CodeInvalidField, "grant.id"},
		{"unknown field", "k", strings.Replace(body, `"kind"`, `"colour":"red","kind"`, 1), CodeInvalidField, "colour"},
		{"wrong type", "k", strings.Replace(body, `"target":"c1"`, `"target":5`, 1), CodeInvalidField, "target"},
		{"bad deadline", "k", strings.Replace(body, `"grant"`, `"deadline":"tomorrow","grant"`, 1), CodeInvalidField, "deadline"},
		{"past deadline", "k", strings.Replace(body, `"grant"`, `"deadline":"2020-01-01T00:00:00Z","grant"`, 1), CodeDeadlinePassed, "deadline"},
		{"unknown provider", "k", strings.Replace(body, `"fake"`, `"pigeon"`, 1), CodeUnknownProvider, "provider"},
		{"unknown action", "k", strings.Replace(body, `"send"`, `"shout"`, 1), CodeUnknownAction, "action"},
		{"too large", "k", `{"x":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, CodePayloadTooLarge, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.in.Submit(context.Background(), "bot1", c.key, []byte(c.body))
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Code != c.code || ve.Field != c.field {
				t.Fatalf("got %v, want code %s field %q", err, c.code, c.field)
			}
		})
	}
	if r.store.puts != 0 {
		t.Fatalf("bad input wrote %d items", r.store.puts)
	}
}
