package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

// Registry is everything core reads and writes about grants, capabilities
// and sources.
type Registry interface {
	core.GrantStore
	core.CapabilityStore
	core.SourceStore
	core.FactReader
}

func rev(n int64) *int64 { return &n }

// RunRegistry runs the registry contract.
func RunRegistry(t *testing.T, newRegistry func(t *testing.T) Registry) {
	ctx := context.Background()
	grant := func(id, bot string, v int64) *core.Grant {
		return &core.Grant{ID: id, Version: v, Bot: bot, Provider: "sandbox", Account: "acct-*", Actions: []string{"send_message", "edit*"},
			Targets: []string{"chan-1", "chan-*"}, ExpiresAt: tp(time.Hour), CreatedAt: T0, UpdatedAt: T0.Add(time.Second), UpdatedBy: "op"}
	}

	t.Run("grants: versioned conditional writes, every field kept", func(t *testing.T) {
		r := newRegistry(t)
		if _, err := r.GetGrant(ctx, "g-none"); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("missing grant: %v, want ErrNotFound", err)
		}
		g1 := grant("g-1", "bot-a", 1)
		if err := r.PutGrant(ctx, g1, 0); err != nil {
			t.Fatal(err)
		}
		if err := r.PutGrant(ctx, grant("g-1", "bot-b", 1), 0); !errors.Is(err, core.ErrConflict) {
			t.Fatalf("create over an existing grant: %v, want ErrConflict", err)
		}
		g2 := grant("g-1", "bot-a", 2)
		g2.RevokedAt, g2.RevokedBy, g2.RevokeReason = tp(time.Minute), "op2", "compromised"
		if err := r.PutGrant(ctx, g2, 5); !errors.Is(err, core.ErrConflict) {
			t.Fatalf("write with a stale expected version: %v, want ErrConflict", err)
		}
		got, err := r.GetGrant(ctx, "g-1")
		if err != nil || !reflect.DeepEqual(got, g1) {
			t.Fatalf("after refused writes: %+v (%v), want %+v", got, err, g1)
		}
		if err := r.PutGrant(ctx, g2, 1); err != nil {
			t.Fatal(err)
		}
		if got, err := r.GetGrant(ctx, "g-1"); err != nil || !reflect.DeepEqual(got, g2) {
			t.Fatalf("round trip: %+v (%v), want %+v", got, err, g2)
		}
	})

	t.Run("grants: pages by id, filtered by bot, each once", func(t *testing.T) {
		r := newRegistry(t)
		want := map[string][]string{"": {}, "bot-a": {}}
		for i := 0; i < 7; i++ {
			bot := []string{"bot-a", "bot-b"}[i%2]
			id := fmt.Sprintf("g-%02d", i)
			if err := r.PutGrant(ctx, grant(id, bot, 1), 0); err != nil {
				t.Fatal(err)
			}
			want[""] = append(want[""], id)
			if bot == "bot-a" {
				want["bot-a"] = append(want["bot-a"], id)
			}
		}
		for bot, ids := range want {
			var got []string
			cursor := ""
			for page := 0; ; page++ {
				if page > 10 {
					t.Fatal("paging does not end")
				}
				items, next, err := r.ListGrants(ctx, bot, cursor, 2)
				if err != nil {
					t.Fatal(err)
				}
				if len(items) > 2 {
					t.Fatalf("page of %d items over limit 2", len(items))
				}
				for _, g := range items {
					got = append(got, g.ID)
				}
				if next == "" {
					break
				}
				cursor = next
			}
			if !reflect.DeepEqual(got, ids) {
				t.Fatalf("bot %q: listed %v, want %v", bot, got, ids)
			}
		}
	})

	t.Run("capabilities: versioned conditional writes, every field kept", func(t *testing.T) {
		r := newRegistry(t)
		if _, err := r.GetCapability(ctx, "sandbox", "acct-1"); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("missing capability: %v, want ErrNotFound", err)
		}
		w := core.Withdrawal{Reason: "maintenance", At: T0, By: "op"}
		c1 := &core.Capability{Provider: "sandbox", Account: "acct-1", AccountWithdrawal: &w, Version: 1, UpdatedAt: T0, UpdatedBy: "op"}
		if err := r.PutCapability(ctx, c1, 0); err != nil {
			t.Fatal(err)
		}
		c2 := &core.Capability{Provider: "sandbox", Account: "acct-1", Actions: map[string]core.Withdrawal{"send_message": w}, Version: 2, UpdatedAt: T0.Add(time.Second)}
		if err := r.PutCapability(ctx, c2, 0); !errors.Is(err, core.ErrConflict) {
			t.Fatalf("create over an existing capability: %v, want ErrConflict", err)
		}
		if err := r.PutCapability(ctx, c2, 2); !errors.Is(err, core.ErrConflict) {
			t.Fatalf("stale expected version: %v, want ErrConflict", err)
		}
		if got, err := r.GetCapability(ctx, "sandbox", "acct-1"); err != nil || !reflect.DeepEqual(got, c1) {
			t.Fatalf("after refused writes: %+v (%v), want %+v", got, err, c1)
		}
		if err := r.PutCapability(ctx, c2, 1); err != nil {
			t.Fatal(err)
		}
		if got, err := r.GetCapability(ctx, "sandbox", "acct-1"); err != nil || !reflect.DeepEqual(got, c2) {
			t.Fatalf("round trip: %+v (%v), want %+v", got, err, c2)
		}
		if _, err := r.GetCapability(ctx, "sandbox", "acct-2"); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("another account: %v, want ErrNotFound", err)
		}
	})

	t.Run("sources: revisions only move forward, deletion is sticky, bots are apart", func(t *testing.T) {
		r := newRegistry(t)
		steps := []struct {
			bot      string
			revision *int64
			deleted  bool
			at       time.Duration
			want     core.SourceState
			applied  bool
		}{
			{"bot-a", rev(5), false, 0, core.SourceState{Bot: "bot-a", ID: "m1", Revision: 5, UpdatedAt: T0}, true},
			{"bot-a", rev(3), false, 1, core.SourceState{Bot: "bot-a", ID: "m1", Revision: 5, UpdatedAt: T0}, false},
			{"bot-a", rev(5), false, 2, core.SourceState{Bot: "bot-a", ID: "m1", Revision: 5, UpdatedAt: T0}, false},
			{"bot-b", rev(1), false, 3, core.SourceState{Bot: "bot-b", ID: "m1", Revision: 1, UpdatedAt: T0.Add(3 * time.Second)}, true},
			{"bot-a", rev(2), true, 4, core.SourceState{Bot: "bot-a", ID: "m1", Revision: 5, Deleted: true, UpdatedAt: T0.Add(4 * time.Second)}, true},
			{"bot-a", rev(9), false, 5, core.SourceState{Bot: "bot-a", ID: "m1", Revision: 9, Deleted: true, UpdatedAt: T0.Add(5 * time.Second)}, true},
			{"bot-a", nil, true, 6, core.SourceState{Bot: "bot-a", ID: "m1", Revision: 9, Deleted: true, UpdatedAt: T0.Add(5 * time.Second)}, false},
		}
		for i, s := range steps {
			got, applied, err := r.AdvanceSource(ctx, s.bot, "m1", s.revision, s.deleted, T0.Add(s.at*time.Second))
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if applied != s.applied || !reflect.DeepEqual(*got, s.want) {
				t.Fatalf("step %d: %+v applied=%v, want %+v applied=%v", i, *got, applied, s.want, s.applied)
			}
		}
	})

	t.Run("facts: grant, capability and the bot's source in one read", func(t *testing.T) {
		r := newRegistry(t)
		in := PendingIntent("it_f", "bot-a")
		in.Source = &core.SourceRef{ID: "m1", Revision: 1}
		f, err := r.ReadFacts(ctx, in)
		if err != nil || f.Grant != nil || f.Capability != nil || f.Source != nil {
			t.Fatalf("nothing stored: %+v (%v), want no facts", f, err)
		}
		g := grant("g-1", "bot-a", 1)
		c := &core.Capability{Provider: "sandbox", Account: "acct-1", Version: 1, UpdatedAt: T0,
			Actions: map[string]core.Withdrawal{"x": {Reason: "r", At: T0, By: "op"}}}
		if err := r.PutGrant(ctx, g, 0); err != nil {
			t.Fatal(err)
		}
		if err := r.PutCapability(ctx, c, 0); err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.AdvanceSource(ctx, "bot-b", "m1", rev(4), false, T0); err != nil {
			t.Fatal(err)
		}
		f, err = r.ReadFacts(ctx, in)
		if err != nil || !reflect.DeepEqual(f.Grant, g) || !reflect.DeepEqual(f.Capability, c) || f.Source != nil {
			t.Fatalf("facts %+v (%v); want the grant, the capability and no source (another bot's)", f, err)
		}
		if _, _, err := r.AdvanceSource(ctx, "bot-a", "m1", rev(2), false, T0); err != nil {
			t.Fatal(err)
		}
		f, err = r.ReadFacts(ctx, in)
		if err != nil || f.Source == nil || f.Source.Revision != 2 || f.Source.Bot != "bot-a" {
			t.Fatalf("source fact %+v (%v), want bot-a's revision 2", f.Source, err)
		}
		in.Source = nil
		if f, err = r.ReadFacts(ctx, in); err != nil || f.Source != nil {
			t.Fatalf("intent without a source: source fact %+v (%v), want none", f.Source, err)
		}
	})
}
