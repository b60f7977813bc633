package core

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// valueProvider is fakeProvider whose "send" sets a value.
type valueProvider struct{ *fakeProvider }

func (valueProvider) ValueSubject(action, target string, _ []byte) string {
	if action == "send" {
		return target
	}
	return ""
}

// memMarks is a ValueMarks in memory.
type memMarks struct {
	mu    sync.Mutex
	marks map[string]string
}

func (m *memMarks) MarkSent(_ context.Context, key, seq string, _ time.Time) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marks == nil {
		m.marks = map[string]string{}
	}
	if seq > m.marks[key] {
		m.marks[key] = seq
	}
	return m.marks[key], nil
}

func (m *memMarks) Newest(_ context.Context, key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.marks[key], nil
}

func newValueRig(script ...error) *rig {
	r := newRig(Capabilities{NaturallyIdempotent: true}, script...)
	provs := ProviderMap{"fake": valueProvider{r.prov}}
	r.in.Providers, r.d.Providers = provs, provs
	r.d.Marks = &memMarks{}
	return r
}

func (r *rig) submitText(t *testing.T, key, text string) *Intent {
	t.Helper()
	res, err := r.in.Submit(context.Background(), "bot1", key, []byte(strings.Replace(body, `"hi"`, `"`+text+`"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return res.Intent
}

// TestDecideResendHarmless: after an uncertain attempt a set-to-value action
// may go out again without keys or a human (repeating it changes nothing);
// a key that still covers the send stays the stronger answer.
func TestDecideResendHarmless(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		caps Capabilities
		want Resend
	}{
		{"set-to-value", Capabilities{NaturallyIdempotent: true}, ResendHarmless},
		{"set-to-value with a live key", Capabilities{NaturallyIdempotent: true, IdempotencyKeys: true, KeyRetention: time.Hour}, ResendCovered},
		{"set-to-value past the key", Capabilities{NaturallyIdempotent: true, IdempotencyKeys: true, KeyRetention: time.Second}, ResendHarmless},
		{"neither", Capabilities{}, ResendNoKey},
	} {
		v := DecideResend(ResendCase{Uncertain: true, Caps: c.caps, First: &t0, SendBy: t0.Add(time.Minute)})
		if v != c.want || v.Allowed() != (c.want != ResendNoKey) {
			t.Errorf("%s: %s (allowed %v), want %s", c.name, v, v.Allowed(), c.want)
		}
	}
	if !RetryRiskAccepted(ResendHarmless, nil) {
		t.Error("an operator's retry of a set-to-value action needs no accepted risk")
	}
}

// TestSetToValueUnknownOutcomeIsRetried: an ambiguous failure of a
// set-to-value action at a provider with neither keys nor lookup is retried
// under the backoff instead of going to a human, and the reason says why.
func TestSetToValueUnknownOutcomeIsRetried(t *testing.T) {
	r := newValueRig(&UnknownOutcomeError{Err: errors.New("reset")})
	in := r.submit(t)
	mustAttempt(t, r.d, in.ID)
	got := r.get(t, in.ID)
	if got.Status != StatusRetryableFailure || !strings.Contains(got.StatusReason, "sets a value") {
		t.Fatalf("after the ambiguous failure: %s (%s)", got.Status, got.StatusReason)
	}
	r.drain(t)
	if got := r.get(t, in.ID); got.Status != StatusSucceeded || r.prov.sends != 2 {
		t.Fatalf("after the retry: %s with %d sends", got.Status, r.prov.sends)
	}
	// Exhausted retries of a set-to-value action still stop at a human.
	r = newValueRig(&UnknownOutcomeError{Err: errors.New("a")}, &UnknownOutcomeError{Err: errors.New("b")}, &UnknownOutcomeError{Err: errors.New("c")})
	in = r.submit(t)
	mustAttempt(t, r.d, in.ID)
	r.drain(t)
	if got := r.get(t, in.ID); got.Status != StatusNeedsHuman || r.prov.sends != 3 {
		t.Fatalf("exhausted: %s with %d sends", got.Status, r.prov.sends)
	}
}

// TestOlderSetToValueRetryIsSupersededByANewerSend: an older update whose
// first send was ambiguous is retried only while no newer update of the same
// target has gone out; once one has, the older one ends source-revised
// (superseded) without sending, never in needs-human. Without the marks the
// older value would be sent again after the newer one.
func TestOlderSetToValueRetryIsSupersededByANewerSend(t *testing.T) {
	for _, marks := range []bool{true, false} {
		r := newValueRig(&UnknownOutcomeError{Err: errors.New("reset")})
		if !marks {
			r.d.Marks = nil
		}
		older := r.submitText(t, "k-old", "v1")
		mustAttempt(t, r.d, older.ID) // ambiguous: retry scheduled
		r.clock.Advance(time.Millisecond)
		newer := r.submitText(t, "k-new", "v2")
		mustAttempt(t, r.d, newer.ID)
		if got := r.get(t, newer.ID); got.Status != StatusSucceeded {
			t.Fatalf("newer: %s", got.Status)
		}
		r.drain(t) // the older one's retry
		got := r.get(t, older.ID)
		last := string(r.prov.payloads[len(r.prov.payloads)-1])
		switch {
		case marks && (got.Status != StatusSourceRevised || !strings.Contains(got.StatusReason, "superseded") || r.prov.sends != 2 || !strings.Contains(last, "v2")):
			t.Fatalf("with marks: older %s (%s), %d sends, last sent %s", got.Status, got.StatusReason, r.prov.sends, last)
		case !marks && (r.prov.sends != 3 || !strings.Contains(last, "v1")):
			t.Fatalf("without marks the older value should go out last (the test's premise): %d sends, last %s", r.prov.sends, last)
		}
	}
}

// TestSupersededAndWentOut: the two pure rules the ordering is made of.
func TestSupersededAndWentOut(t *testing.T) {
	a := &Intent{ID: "it_a", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 5, time.UTC)}
	b := &Intent{ID: "it_b", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 40, time.UTC)}
	c := &Intent{ID: "it_c", CreatedAt: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)}
	for _, x := range []struct {
		newest string
		in     *Intent
		want   bool
	}{
		{"", a, false}, {ValueSeq(a), a, false}, {ValueSeq(b), a, true}, {ValueSeq(c), b, true}, {ValueSeq(a), c, false},
	} {
		if got := Superseded(x.newest, ValueSeq(x.in)); got != x.want {
			t.Errorf("Superseded(%q, %s) = %v", x.newest, x.in.ID, got)
		}
	}
	for _, x := range []struct {
		err  error
		want bool
	}{
		{nil, true},
		{&UnknownOutcomeError{Err: errors.New("x")}, true},
		{errors.New("anything else"), true},
		{&RetryableError{Class: ClassTransient, Err: errors.New("503")}, false},
		{&RetryableError{Class: ClassRateLimited, Err: errors.New("429")}, false},
		{&PermanentError{Class: ClassRejectedInput, Err: errors.New("400")}, false},
	} {
		if got := WentOut(x.err); got != x.want {
			t.Errorf("WentOut(%v) = %v", x.err, got)
		}
	}
}
