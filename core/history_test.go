package core

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestKeyRecorded(t *testing.T) {
	in := &Intent{Resolutions: []Resolution{{Key: "inline"}, {Key: ""}}}
	pages := []HistoryPage{{Seq: 1, Resolutions: []Resolution{{Key: "moved"}}}, {Seq: 2}}
	cases := []struct {
		name  string
		key   string
		pages []HistoryPage
		want  bool
	}{
		{"inline key", "inline", nil, true},
		{"moved key, pages read", "moved", pages, true},
		{"moved key, pages not read", "moved", nil, false},
		{"unknown key", "new", pages, false},
		{"no key is never a replay", "", pages, false},
	}
	for _, c := range cases {
		if got := KeyRecorded(in, c.pages, c.key); got != c.want {
			t.Errorf("%s: got %v want %v", c.name, got, c.want)
		}
	}
}

func TestHistoryCursor(t *testing.T) {
	cases := []struct {
		cursor string
		pages  int
		seq    int
		inline bool
		bad    bool
	}{
		{"", 0, 1, true, false},
		{"", 2, 1, false, false},
		{"2", 2, 2, false, false},
		{"3", 2, 3, true, false},
		{"4", 2, 0, false, true},
		{"0", 2, 0, false, true},
		{"-1", 2, 0, false, true},
		{"01", 2, 0, false, true},
		{"x", 2, 0, false, true},
	}
	for _, c := range cases {
		seq, inline, err := historyCursor(c.cursor, c.pages)
		var ve *ValidationError
		if c.bad {
			if !errors.As(err, &ve) || ve.Field != "cursor" || ve.Code != CodeInvalidCursor {
				t.Errorf("cursor %q of %d pages: err %v, want invalid_cursor", c.cursor, c.pages, err)
			}
			continue
		}
		if err != nil || seq != c.seq || inline != c.inline {
			t.Errorf("cursor %q of %d pages: seq %d inline %v err %v, want %d %v", c.cursor, c.pages, seq, inline, err, c.seq, c.inline)
		}
	}
}

// needsHuman is an intent the rig sent to a human (unknown outcome, no
// lookup, no keys), and a resolver over the rig's store.
func needsHuman(t *testing.T) (*rig, *Intent, testResolver) {
	t.Helper()
	r := newRig(Capabilities{}, &UnknownOutcomeError{Err: errors.New("timeout")})
	in := r.submit(t)
	mustAttempt(t, r.d, in.ID)
	if got := r.get(t, in.ID); got.Status != StatusNeedsHuman {
		t.Fatalf("status %s, want needs-human", got.Status)
	}
	return r, in, newResolver(ResolverDeps{Store: r.store, Pages: r.store, Reconcile: r.d, Clock: r.d.Clock})
}

// An operator's decision whose resolution was moved to a history page is
// still recognised when its request is replayed: the replay decides nothing.
func TestReplayOfAMovedDecisionDecidesNothing(t *testing.T) {
	r, in, res := needsHuman(t)
	ctx := context.Background()
	op := Principal{Kind: PrincipalOperator, Name: "op"}
	// "reconcile" under key op-1: with no lookup the intent is back with a human at once.
	if _, err := res.Resolve(ctx, op, in.ID, "op-1", Ruling{Decision: DecisionReconcile, Reason: "look again"}); err != nil {
		t.Fatal(err)
	}
	if got := r.get(t, in.ID); got.Status != StatusNeedsHuman {
		t.Fatalf("after the reconcile decision: %s, want needs-human", got.Status)
	}
	for i := 0; i < MaxInlineResolutions; i++ {
		if _, err := res.Recommend(ctx, op, in.ID, Recommendation{Decision: DecisionAbandon, Summary: fmt.Sprint("rec ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	before := r.get(t, in.ID)
	if KeyRecorded(before, nil, "op-1") || before.History == nil || before.History.SpilledResolutions == 0 {
		t.Fatalf("the decision was not moved to a page (history %+v)", before.History)
	}
	lookups := r.prov.lookups
	got, err := res.Resolve(ctx, op, in.ID, "op-1", Ruling{Decision: DecisionReconcile, Reason: "look again"})
	if err != nil {
		t.Fatal(err)
	}
	after := r.get(t, in.ID)
	if after.Version != before.Version || len(after.Resolutions) != len(before.Resolutions) || r.prov.lookups != lookups || got.Version != before.Version {
		t.Fatalf("the replay decided again: v%d -> v%d, %d -> %d resolutions, %d -> %d lookups",
			before.Version, after.Version, len(before.Resolutions), len(after.Resolutions), lookups, r.prov.lookups)
	}
	// A new key still decides.
	if _, err := res.Resolve(ctx, op, in.ID, "op-2", Ruling{Decision: DecisionAbandon, Reason: "done"}); err != nil {
		t.Fatal(err)
	}
	if got := r.get(t, in.ID); got.Status != StatusAbandoned {
		t.Fatalf("a new key's decision: %s, want abandoned", got.Status)
	}
}

// The whole history reads back in order through the cursor, pages first,
// then the inline entries.
func TestReadHistoryPagesThroughEveryEntryInOrder(t *testing.T) {
	r, in, res := needsHuman(t)
	ctx := context.Background()
	op := Principal{Kind: PrincipalOperator, Name: "op"}
	const n = 3*MaxInlineResolutions + 5
	for i := 0; i < n; i++ {
		if _, err := res.Recommend(ctx, op, in.ID, Recommendation{Decision: DecisionAbandon, Summary: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	cur := r.get(t, in.ID)
	if cur.History == nil || cur.History.Pages < 2 {
		t.Fatalf("want at least two pages, history %+v", cur.History)
	}
	var got []Resolution
	var attempts int
	cursor, slices := "", 0
	for {
		s, err := ReadHistory(ctx, r.store, cur, cursor)
		if err != nil {
			t.Fatal(err)
		}
		slices++
		got, attempts = append(got, s.Resolutions...), attempts+len(s.Attempts)
		if s.Next == "" {
			break
		}
		cursor = s.Next
	}
	if slices != cur.History.Pages+1 || len(got) != n || attempts != 1 {
		t.Fatalf("%d slices, %d resolutions, %d attempts; want %d, %d, 1", slices, len(got), attempts, cur.History.Pages+1, n)
	}
	for i, rs := range got {
		if rs.Reason != fmt.Sprint(i) {
			t.Fatalf("entry %d is %q: out of order", i, rs.Reason)
		}
	}
}
