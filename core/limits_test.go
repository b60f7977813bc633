package core

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCheckFieldLength(t *testing.T) {
	cases := []struct {
		name, field, value string
		wantField          string // "" = accepted
		wantErr            bool
	}{
		{"reason at the limit", "reason", strings.Repeat("r", FieldLimits["reason"]), "", false},
		{"reason one over", "reason", strings.Repeat("r", FieldLimits["reason"]+1), "reason", true},
		{"summary over", "summary", strings.Repeat("s", FieldLimits["summary"]+1), "summary", true},
		{"externalId over", "externalId", strings.Repeat("e", FieldLimits["externalId"]+1), "externalId", true},
		{"metadata over", "metadata", `{"a":"` + strings.Repeat("m", FieldLimits["metadata"]) + `"}`, "metadata", true},
		{"empty is for the caller to judge", "reason", "", "", false},
		{"invalid UTF-8", "reason", "ok\xff", "reason", true},
		{"undeclared field is a programming error", "nope", "x", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckFieldLength(c.field, c.value)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			var ve *ValidationError
			if c.wantField != "" {
				if !errors.As(err, &ve) || ve.Code != CodeInvalidField || ve.Field != c.wantField {
					t.Fatalf("err = %#v, want invalid_field on %s", err, c.wantField)
				}
			} else if err != nil && errors.As(err, &ve) {
				t.Fatalf("undeclared field must not look like bad input: %v", err)
			}
		})
	}
}

func TestBoundEvidence(t *testing.T) {
	extra := map[string]string{}
	for i := 0; i < 40; i++ {
		extra[string(rune('a'+i%26))+string(rune('a'+i/26))+strings.Repeat("k", 100)] = strings.Repeat("v", 2000)
	}
	cases := []struct {
		name string
		in   Evidence
		want func(Evidence) bool
	}{
		{"small evidence unchanged", Evidence{HTTPStatus: 503, Detail: "down", Extra: map[string]string{"a": "b"}},
			func(e Evidence) bool { return e.Detail == "down" && e.Extra["a"] == "b" && e.HTTPStatus == 503 }},
		{"long detail cut", Evidence{Detail: strings.Repeat("d", 10_000)},
			func(e Evidence) bool { return len(e.Detail) == MaxEvidenceDetail }},
		{"cut on a rune boundary", Evidence{Detail: strings.Repeat("é", 2000)},
			func(e Evidence) bool { return len(e.Detail) <= MaxEvidenceDetail && utf8.ValidString(e.Detail) }},
		{"extra capped in count and size", Evidence{Extra: extra},
			func(e Evidence) bool {
				if len(e.Extra) != MaxEvidenceExtra {
					return false
				}
				for k, v := range e.Extra {
					if len(k) > MaxEvidenceExtraKey || len(v) > MaxEvidenceExtraVal {
						return false
					}
				}
				return true
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := BoundEvidence(c.in); !c.want(got) {
				t.Fatalf("BoundEvidence = %+v", got)
			}
		})
	}
}

func TestSpillHistory(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(n int, result string) Attempt {
		return Attempt{N: n, Trigger: "stream", Result: AttemptResult(result), StartedAt: at.Add(time.Duration(n) * time.Second), EndedAt: at.Add(time.Duration(n) * time.Second)}
	}
	cases := []struct {
		name          string
		attempts      []string // results, oldest first
		resolutions   int
		wantPages     int
		wantInlineA   int
		wantUncertain bool
	}{
		{"under the cap: nothing moves", repeat("transient", MaxInlineAttempts), 0, 0, MaxInlineAttempts, false},
		{"one over: oldest move, newest stay", repeat("transient", MaxInlineAttempts+1), 0, 1, spillKeep, false},
		{"uncertainty among moved entries is kept", append([]string{string(ClassUnknownOutcome)}, repeat("transient", MaxInlineAttempts)...), 0, 1, spillKeep, true},
		{"lookup-absent among moved entries clears it", append([]string{string(ClassUnknownOutcome), "lookup-absent"}, repeat("transient", MaxInlineAttempts)...), 0, 1, spillKeep + 1, false},
		{"resolutions over the cap move too", nil, MaxInlineResolutions + 1, 1, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := &Intent{Attempts: []Attempt{}}
			var pages []HistoryPage
			for i, r := range c.attempts {
				in.AppendAttempt(mk(i+1, r))
				pages = append(pages, in.TakeSpill()...)
			}
			for i := 0; i < c.resolutions; i++ {
				in.AppendResolution(Resolution{At: at.Add(time.Duration(i) * time.Second), Decision: "retry", Reason: "r", Recommend: i%2 == 0})
				pages = append(pages, in.TakeSpill()...)
			}
			if len(pages) != c.wantPages || len(in.Attempts) != c.wantInlineA {
				t.Fatalf("pages %d inline %d, want %d and %d", len(pages), len(in.Attempts), c.wantPages, c.wantInlineA)
			}
			if got := MayHaveTakenEffect(in); got != c.wantUncertain {
				t.Fatalf("MayHaveTakenEffect = %v, want %v", got, c.wantUncertain)
			}
			// Whole history, in order, nothing lost or repeated.
			as, rs := FullHistory(in, reversed(pages))
			if len(as) != len(c.attempts) || len(rs) != c.resolutions {
				t.Fatalf("full history %d attempts %d resolutions", len(as), len(rs))
			}
			for i, a := range as {
				if a.N != i+1 {
					t.Fatalf("attempt %d out of order: N=%d", i, a.N)
				}
			}
			for i := 1; i < len(rs); i++ {
				if rs[i].At.Before(rs[i-1].At) {
					t.Fatalf("resolutions out of order at %d", i)
				}
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func reversed(p []HistoryPage) []HistoryPage {
	out := make([]HistoryPage, len(p))
	for i := range p {
		out[len(p)-1-i] = p[i]
	}
	return out
}

// A webhook acknowledgement and a human retry decision moved to a page still
// count: the rules read them from the summary.
func TestSpilledFactsStillDecide(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := &Intent{Attempts: []Attempt{}}
	in.AppendAttempt(Attempt{N: 1, Trigger: TriggerWebhook, Result: ResultAck, ExternalID: "m1", EndedAt: at, Evidence: Evidence{ProviderCode: DeliveryDelivered, Extra: map[string]string{"eventId": "e1"}}})
	for i := 0; i < MaxInlineAttempts; i++ {
		in.AppendAttempt(Attempt{N: 1, Trigger: TriggerWebhook, Result: ResultEcho, EndedAt: at})
	}
	in.TakeSpill()
	if ack, ok := ProviderAcknowledged(in); !ok || ack.ExternalID != "m1" {
		t.Fatalf("ack lost with the move: %+v %v", ack, ok)
	}
	if DeliveryStatus(in) != DeliveryDelivered {
		t.Fatalf("delivery status %q", DeliveryStatus(in))
	}
	in.AppendResolution(Resolution{At: at.Add(time.Hour), Decision: string(DecisionRetry), Reason: "go"})
	for i := 0; i < MaxInlineResolutions; i++ {
		in.AppendResolution(Resolution{At: at.Add(time.Hour), Decision: string(DecisionAbandon), Reason: "rec", Recommend: true})
	}
	if !humanAuthorisedRetry(in) {
		t.Fatal("the moved retry decision no longer authorises the retry")
	}
}

func TestReconcileVerdict(t *testing.T) {
	end := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rp := ReconcilePolicy{Delay: time.Second, Window: 10 * time.Minute, Settle: time.Minute}
	in := &Intent{Status: StatusUnknownOutcome, AttemptCount: 1, FirstAttemptAt: &end, Attempts: []Attempt{{N: 1, EndedAt: end}}}
	lookup := Capabilities{Lookup: true}
	keys := Capabilities{Lookup: true, IdempotencyKeys: true, KeyRetention: time.Hour}
	cases := []struct {
		name  string
		lr    LookupResult
		err   error
		caps  Capabilities
		after time.Duration
		want  pollVerdict
	}{
		{"found", LookupResult{State: LookupFound}, nil, lookup, time.Second, pollFound},
		{"pending in window", LookupResult{State: LookupPending}, nil, lookup, time.Second, pollAgain},
		{"lookup error in window", LookupResult{}, errors.New("503"), lookup, time.Second, pollAgain},
		{"absent not settled, no key", LookupResult{State: LookupAbsent}, nil, lookup, time.Second, pollAgain},
		{"absent settled", LookupResult{State: LookupAbsent}, nil, lookup, 2 * time.Minute, pollAbsent},
		{"absent under a valid key", LookupResult{State: LookupAbsent}, nil, keys, time.Second, pollAbsent},
		{"pending past window", LookupResult{State: LookupPending}, nil, lookup, 11 * time.Minute, pollExhausted},
		{"no lookup", LookupResult{}, errors.New("none"), Capabilities{}, time.Second, pollExhausted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := reconcileVerdict(in, c.lr, c.err, c.caps, end.Add(c.after), rp); got != c.want {
				t.Fatalf("verdict %s, want %s", got, c.want)
			}
		})
	}
}

// A poll that learns nothing writes nothing and schedules the next poll by
// queue message; one that learns something writes once.
func TestReconcilePollThatLearnsNothingWritesNothing(t *testing.T) {
	r := newRig(Capabilities{Lookup: true}, &UnknownOutcomeError{Err: errors.New("timeout")})
	r.prov.lookup = LookupResult{State: LookupPending}
	in := r.submit(t)
	ctx := context.Background()
	if err := attemptID(ctx, r.d, in.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	stored := r.get(t, in.ID)
	if stored.Status != StatusUnknownOutcome || stored.NextAttemptAt == nil || !stored.NextAttemptAt.Equal(ReconcileDue(stored, r.d.Policy.Reconcile)) {
		t.Fatalf("unknown outcome must carry the sweeper's due time (window end): %+v", stored.NextAttemptAt)
	}
	puts := r.store.puts
	for i := 0; i < 5; i++ {
		msgs := r.queue.take()
		if len(msgs) != 1 || msgs[0].msg.Op != OpReconcile {
			t.Fatalf("poll %d: queue %+v, want one reconcile message", i, msgs)
		}
		r.clock.Advance(msgs[0].delay)
		if err := r.d.HandleRetry(ctx, msgs[0].msg); err != nil {
			t.Fatal(err)
		}
	}
	if r.store.puts != puts || r.prov.lookups != 5 {
		t.Fatalf("%d writes for 5 pending polls (%d lookups), want 0", r.store.puts-puts, r.prov.lookups)
	}
	r.prov.lookup = LookupResult{State: LookupFound, ExternalID: "x"}
	msgs := r.queue.take()
	if err := r.d.HandleRetry(ctx, msgs[0].msg); err != nil {
		t.Fatal(err)
	}
	if r.store.puts != puts+1 || r.get(t, in.ID).Status != StatusSucceeded {
		t.Fatalf("a poll that learns something writes once: %d writes, status %s", r.store.puts-puts, r.get(t, in.ID).Status)
	}
}

// Over-long reason: 400 naming the field, and the intent is unchanged.
func TestOverLongReasonChangesNothing(t *testing.T) {
	r := newRig(Capabilities{}, &UnknownOutcomeError{Err: errors.New("timeout")})
	in := r.submit(t)
	ctx := context.Background()
	mustAttempt(t, r.d, in.ID)
	before := r.get(t, in.ID)
	res := newResolver(ResolverDeps{Store: r.d.Store, Reconcile: r.d, Clock: r.d.Clock})
	op := Principal{Kind: PrincipalOperator, Name: "op"}
	for _, c := range []struct {
		field string
		call  func() error
	}{
		{"reason", func() error {
			_, err := res.Resolve(ctx, op, in.ID, "", Ruling{Decision: DecisionAbandon, Reason: strings.Repeat("x", FieldLimits["reason"]+1)})
			return err
		}},
		{"externalId", func() error {
			_, err := res.Resolve(ctx, op, in.ID, "", Ruling{Decision: DecisionAcceptSuccess, Reason: "ok", ExternalID: strings.Repeat("x", FieldLimits["externalId"]+1)})
			return err
		}},
		{"summary", func() error {
			_, err := res.Recommend(ctx, op, in.ID, Recommendation{Decision: DecisionAbandon, Summary: strings.Repeat("x", FieldLimits["summary"]+1)})
			return err
		}},
	} {
		var ve *ValidationError
		if err := c.call(); !errors.As(err, &ve) || ve.Field != c.field || ve.Code != CodeInvalidField {
			t.Fatalf("%s: err %v", c.field, err)
		}
	}
	after := r.get(t, in.ID)
	if after.Version != before.Version || len(after.Resolutions) != 0 || after.Status != StatusNeedsHuman {
		t.Fatalf("refused decision changed the intent: v%d -> v%d", before.Version, after.Version)
	}
}
