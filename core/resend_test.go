package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestDecideResendMatrix covers the whole matrix of the decision "may a send
// go out after an uncertain attempt" (docs/decisions.md, "Sends after
// uncertainty"): capabilities × the key's first use × history (uncertain,
// operator's retry) × when the send can last arrive. The expected verdicts
// are written out, so changing any branch of DecideResend or KeyCovers
// (including the strict end of the retention) fails it.
func TestDecideResendMatrix(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	caps := map[string]Capabilities{
		"none":       {},
		"lookup":     {Lookup: true},
		"keys1h":     {IdempotencyKeys: true, KeyRetention: time.Hour},
		"keys1h+lkp": {IdempotencyKeys: true, KeyRetention: time.Hour, Lookup: true},
		"keys0":      {IdempotencyKeys: true},
	}
	firsts := map[string]*time.Time{"nil": nil, "-30m": ptr(t0.Add(-30 * time.Minute)), "-2h": ptr(t0.Add(-2 * time.Hour))}
	// Send-by times: well inside a 1h retention counted from -30m, exactly
	// at its end (not covered: the end is exclusive), and past it.
	sendBys := []time.Time{t0, t0.Add(30 * time.Minute), t0.Add(31 * time.Minute)}
	// Columns: certain, certain + operator retry, uncertain, uncertain +
	// operator retry; each for the three send-by times.
	// s safe, c covered, a authorised, k key expired, n no key.
	golden := map[string]string{
		"none/nil":        "sss sss nnn aaa",
		"none/-30m":       "sss sss nnn aaa",
		"none/-2h":        "sss sss nnn aaa",
		"lookup/nil":      "sss sss nnn aaa",
		"lookup/-30m":     "sss sss nnn aaa",
		"lookup/-2h":      "sss sss nnn aaa",
		"keys1h/nil":      "sss sss kkk aaa",
		"keys1h/-30m":     "sss sss ckk caa",
		"keys1h/-2h":      "sss sss kkk aaa",
		"keys1h+lkp/nil":  "sss sss kkk aaa",
		"keys1h+lkp/-30m": "sss sss ckk caa",
		"keys1h+lkp/-2h":  "sss sss kkk aaa",
		"keys0/nil":       "sss sss kkk aaa",
		"keys0/-30m":      "sss sss kkk aaa",
		"keys0/-2h":       "sss sss kkk aaa",
	}
	letter := map[Resend]byte{ResendSafe: 's', ResendCovered: 'c', ResendAuthorised: 'a', ResendKeyExpired: 'k', ResendNoKey: 'n'}
	rows := 0
	for cn, c := range caps {
		for fn, first := range firsts {
			var got strings.Builder
			for i, h := range []struct{ uncertain, human bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
				if i > 0 {
					got.WriteByte(' ')
				}
				for _, by := range sendBys {
					v := DecideResend(ResendCase{Uncertain: h.uncertain, HumanAuthorised: h.human, Caps: c, First: first, SendBy: by})
					got.WriteByte(letter[v])
					if v.Allowed() != (v == ResendSafe || v == ResendCovered || v == ResendAuthorised) {
						t.Errorf("%v.Allowed() = %v", v, v.Allowed())
					}
					if (v.Reason() == "") != v.Allowed() {
						t.Errorf("%v: reason %q does not match Allowed %v", v, v.Reason(), v.Allowed())
					}
				}
			}
			key := cn + "/" + fn
			if want, ok := golden[key]; !ok || got.String() != want {
				t.Errorf("%s: got %q, want %q", key, got.String(), want)
			}
			rows++
		}
	}
	if rows != len(golden) {
		t.Fatalf("matrix has %d rows, golden %d", rows, len(golden))
	}
}

// TestMayHaveTakenEffectByResult: which recorded results leave an attempt's
// effect uncertain, and which later result proves it absent.
func TestMayHaveTakenEffectByResult(t *testing.T) {
	uncertain := map[AttemptResult]bool{
		ResultUnknownOutcome: true, ResultLeaseExpired: true, ResultInFlightAtCutoff: true, ResultPossiblySentAfterCutoff: true,
		ResultSucceeded: false, ResultLookupFound: false, ResultLookupAbsent: false, ResultReconcileExhausted: false,
		AttemptResult(ClassTransient): false, AttemptResult(ClassRateLimited): false, AttemptResult(ClassRejectedInput): false,
		AttemptResult(ClassUnauthorized): false, AttemptResult(StatusGrantRevoked): false, AttemptResult(StatusSourceRevised): false,
		AttemptResult(StatusNeedsHuman): false, ResultAck: false, ResultStatus: false, ResultEcho: false,
	}
	for r, want := range uncertain {
		if got := r.MayHaveTakenEffect(); got != want {
			t.Errorf("%s.MayHaveTakenEffect() = %v, want %v", r, got, want)
		}
		// A lookup-absent after it clears it; another result after it does not.
		in := &Intent{Attempts: []Attempt{{Result: r}, {Result: AttemptResult(ClassTransient)}}}
		if got := MayHaveTakenEffect(in); got != want {
			t.Errorf("history %s, transient: %v, want %v", r, got, want)
		}
		in.Attempts = append(in.Attempts, Attempt{Result: ResultLookupAbsent})
		if MayHaveTakenEffect(in) {
			t.Errorf("history %s, transient, lookup-absent: still uncertain", r)
		}
	}
}

// TestResendCaseFromHistory: the case a send is judged by comes from the
// intent's history: an operator's retry counts only when it is the newest
// decision and made after the last attempt.
func TestResendCaseFromHistory(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	unknown := Attempt{Result: ResultUnknownOutcome, EndedAt: t0}
	retry := func(at time.Duration) Resolution {
		return Resolution{At: t0.Add(at), Decision: string(DecisionRetry)}
	}
	for _, c := range []struct {
		name  string
		res   []Resolution
		human bool
	}{
		{"no decision", nil, false},
		{"retry after the attempt", []Resolution{retry(time.Minute)}, true},
		{"retry before the attempt", []Resolution{retry(-time.Minute)}, false},
		{"retry, then a recommendation", []Resolution{retry(time.Minute), {At: t0.Add(2 * time.Minute), Decision: string(DecisionAbandon), Recommend: true}}, true},
		{"retry, then reconcile", []Resolution{retry(time.Minute), {At: t0.Add(2 * time.Minute), Decision: string(DecisionReconcile)}}, false},
	} {
		in := &Intent{Attempts: []Attempt{unknown}, Resolutions: c.res, FirstAttemptAt: ptr(t0)}
		rc := resendCase(in, Capabilities{}, t0)
		if !rc.Uncertain || rc.HumanAuthorised != c.human || rc.First != in.FirstAttemptAt {
			t.Errorf("%s: case %+v, want uncertain, human=%v", c.name, rc, c.human)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func (r Resend) GoString() string { return fmt.Sprintf("Resend(%s)", r) }

// TestRetryRiskAccepted: an operator's retry goes ahead without an answer
// where nothing can be duplicated or the provider deduplicates it; where only
// an operator can authorise it, only an explicit true does (a field left out
// is not a deliberate choice: issue 50).
func TestRetryRiskAccepted(t *testing.T) {
	for _, c := range []struct {
		v      Resend
		accept *bool
		want   bool
	}{
		{ResendSafe, nil, true},
		{ResendCovered, nil, true},
		{ResendCovered, ptr(false), true},
		{ResendAuthorised, nil, false},
		{ResendAuthorised, ptr(false), false},
		{ResendAuthorised, ptr(true), true},
	} {
		if got := RetryRiskAccepted(c.v, c.accept); got != c.want {
			t.Errorf("RetryRiskAccepted(%s, %v) = %v, want %v", c.v, c.accept, got, c.want)
		}
	}
}

// TestOperatorRetryNeedsTheRiskAcceptedOnlyWhereItCanDuplicate: at a provider
// with neither keys nor lookup a retry without acceptDuplicateRisk: true is
// refused with nothing changed; within a key's retention it needs no answer.
func TestOperatorRetryNeedsTheRiskAcceptedOnlyWhereItCanDuplicate(t *testing.T) {
	op := Principal{Kind: PrincipalOperator, Name: "ann"}
	rejected := &PermanentError{Class: ClassRejectedInput, Err: errors.New("bad channel")}
	for _, c := range []struct {
		name     string
		caps     Capabilities
		script   []error
		accept   *bool
		wantErr  error
		wantRisk bool
	}{
		{"neither, left out", Capabilities{}, []error{&UnknownOutcomeError{Err: errors.New("reset")}}, nil, ErrDuplicateRiskNotAccepted, false},
		{"neither, false", Capabilities{}, []error{&UnknownOutcomeError{Err: errors.New("reset")}}, ptr(false), ErrDuplicateRiskNotAccepted, false},
		{"neither, accepted", Capabilities{}, []error{&UnknownOutcomeError{Err: errors.New("reset")}}, ptr(true), nil, true},
		{"keys within retention, left out", Capabilities{IdempotencyKeys: true, KeyRetention: 24 * time.Hour},
			[]error{&UnknownOutcomeError{Err: errors.New("reset")}, rejected}, nil, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(c.caps, c.script...)
			in := r.submit(t)
			mustAttempt(t, r.d, in.ID)
			r.drain(t)
			if got := r.get(t, in.ID); got.Status != StatusNeedsHuman {
				t.Fatalf("set-up: %s (%s)", got.Status, got.StatusReason)
			}
			res := newResolver(ResolverDeps{Store: r.d.Store, Reconcile: r.d, Clock: r.d.Clock})
			_, err := res.Resolve(context.Background(), op, in.ID, "d1", Ruling{Decision: DecisionRetry, Reason: "asked", AcceptDuplicateRisk: c.accept})
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			got := r.get(t, in.ID)
			if c.wantErr != nil {
				if got.Status != StatusNeedsHuman || len(got.Resolutions) != 0 {
					t.Fatalf("a refused retry changed the intent: %s, %d resolutions", got.Status, len(got.Resolutions))
				}
				return
			}
			if got.Status != StatusPending || got.Resolutions[0].DuplicateRiskAccepted != c.wantRisk || got.Resolutions[0].By != "ann" {
				t.Fatalf("after the retry: %s %+v", got.Status, got.Resolutions)
			}
		})
	}
}
