package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// WebhookFixture builds a fresh webhook store and the intent store it binds
// evidence to.
type WebhookFixture func(t *testing.T) (webhook.WebhookStore, core.IntentStore)

func event(id string) webhook.EventRecord {
	return webhook.EventRecord{Provider: "sandbox", Account: "acct-1", EventID: id, Kind: webhook.EventAck, Type: "message.sent",
		State: webhook.EventBound, IntentID: "it_w", MessageID: "msg-1", Reason: "r", ReceivedAt: T0, BodyHash: "bh"}
}

// RunWebhookStore runs the WebhookStore contract.
func RunWebhookStore(t *testing.T, newStores WebhookFixture) {
	ctx := context.Background()
	appendNote := func(plan webhook.BindPlan) func(*core.Intent) (webhook.BindPlan, error) {
		return func(in *core.Intent) (webhook.BindPlan, error) {
			in.Attempts = append(in.Attempts, core.Attempt{N: 0, Trigger: core.TriggerWebhook, StartedAt: T0, EndedAt: T0, Result: "acknowledged"})
			return plan, nil
		}
	}
	setup := func(t *testing.T) (webhook.WebhookStore, core.IntentStore) {
		w, s := newStores(t)
		for _, id := range []string{"it_w", "it_other"} {
			if _, _, err := s.Create(ctx, PendingIntent(id, "bot-a")); err != nil {
				t.Fatal(err)
			}
		}
		return w, s
	}
	version := func(t *testing.T, s core.IntentStore, id string) (int64, int) {
		t.Helper()
		in, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return in.Version, len(in.Attempts)
	}

	t.Run("record: one item per event, every field kept", func(t *testing.T) {
		w, _ := setup(t)
		if got, err := w.SeenEvent(ctx, "sandbox", "acct-1", "e1"); err != nil || got != nil {
			t.Fatalf("unseen event: %+v (%v), want nil", got, err)
		}
		rec := event("e1")
		rec.State, rec.Raw, rec.ClaimUntil = webhook.EventUnresolved, `{"raw":true}`, tp(time.Minute)
		if err := w.RecordEvent(ctx, rec); err != nil {
			t.Fatal(err)
		}
		second := event("e1")
		second.Reason = "second"
		if err := w.RecordEvent(ctx, second); !errors.Is(err, webhook.ErrDuplicateEvent) {
			t.Fatalf("second record: %v, want ErrDuplicateEvent", err)
		}
		got, err := w.SeenEvent(ctx, "sandbox", "acct-1", "e1")
		if err != nil || got == nil || !reflect.DeepEqual(*got, rec) {
			t.Fatalf("seen %+v (%v), want %+v", got, err, rec)
		}
		if got, _ := w.SeenEvent(ctx, "sandbox", "acct-2", "e1"); got != nil {
			t.Fatalf("the same event id on another account is another event, got %+v", got)
		}
	})

	t.Run("bind: event, intent and mapping together", func(t *testing.T) {
		w, s := setup(t)
		if _, err := w.IntentForMessage(ctx, "sandbox", "acct-1", "msg-1"); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("unmapped message: %v, want ErrNotFound", err)
		}
		stored, err := w.BindEvent(ctx, event("e1"), appendNote(webhook.BindPlan{Changed: true, MapMessage: true}))
		if err != nil {
			t.Fatal(err)
		}
		if stored.Version != 2 || len(stored.Attempts) != 1 {
			t.Fatalf("bind returned version %d with %d entries, want 2 and 1", stored.Version, len(stored.Attempts))
		}
		if v, n := version(t, s, "it_w"); v != 2 || n != 1 {
			t.Fatalf("stored version %d with %d entries, want 2 and 1", v, n)
		}
		if id, err := w.IntentForMessage(ctx, "sandbox", "acct-1", "msg-1"); err != nil || id != "it_w" {
			t.Fatalf("mapping: %q (%v), want it_w", id, err)
		}
		if seen, err := w.SeenEvent(ctx, "sandbox", "acct-1", "e1"); err != nil || seen == nil || seen.State != webhook.EventBound {
			t.Fatalf("event after bind: %+v (%v)", seen, err)
		}
		// The same event again: refused, nothing written.
		if _, err := w.BindEvent(ctx, event("e1"), appendNote(webhook.BindPlan{Changed: true})); !errors.Is(err, webhook.ErrDuplicateEvent) {
			t.Fatalf("duplicate bind: %v, want ErrDuplicateEvent", err)
		}
		if v, n := version(t, s, "it_w"); v != 2 || n != 1 {
			t.Fatalf("after a duplicate: version %d with %d entries, want 2 and 1", v, n)
		}
		// A bind that changes nothing on the intent still records the event.
		if _, err := w.BindEvent(ctx, event("e2"), func(*core.Intent) (webhook.BindPlan, error) { return webhook.BindPlan{}, nil }); err != nil {
			t.Fatal(err)
		}
		if v, _ := version(t, s, "it_w"); v != 2 {
			t.Fatalf("an unchanged bind wrote the intent (version %d)", v)
		}
		if seen, _ := w.SeenEvent(ctx, "sandbox", "acct-1", "e2"); seen == nil {
			t.Fatal("an unchanged bind did not record its event")
		}
	})

	t.Run("bind: a message mapped to another intent, or a mutate error, writes nothing", func(t *testing.T) {
		w, s := setup(t)
		if _, err := w.BindEvent(ctx, event("e1"), appendNote(webhook.BindPlan{Changed: true, MapMessage: true})); err != nil {
			t.Fatal(err)
		}
		other := event("e2")
		other.IntentID = "it_other"
		if _, err := w.BindEvent(ctx, other, appendNote(webhook.BindPlan{Changed: true, MapMessage: true})); !errors.Is(err, webhook.ErrMappingTaken) {
			t.Fatalf("bind to a message mapped elsewhere: %v, want ErrMappingTaken", err)
		}
		errStop := errors.New("stop")
		third := event("e3")
		third.IntentID = "it_other"
		if _, err := w.BindEvent(ctx, third, func(in *core.Intent) (webhook.BindPlan, error) {
			in.Status = core.StatusSucceeded
			return webhook.BindPlan{Changed: true}, errStop
		}); !errors.Is(err, errStop) {
			t.Fatalf("mutate error: %v, want it returned", err)
		}
		if v, n := version(t, s, "it_other"); v != 1 || n != 0 {
			t.Fatalf("refused binds wrote the intent: version %d, %d entries", v, n)
		}
		for _, id := range []string{"e2", "e3"} {
			if seen, err := w.SeenEvent(ctx, "sandbox", "acct-1", id); err != nil || seen != nil {
				t.Fatalf("refused bind recorded event %s: %+v (%v)", id, seen, err)
			}
		}
		if id, _ := w.IntentForMessage(ctx, "sandbox", "acct-1", "msg-1"); id != "it_w" {
			t.Fatalf("mapping moved to %q", id)
		}
	})

	t.Run("inbound: claim, busy, take over after expiry, done once forwarded", func(t *testing.T) {
		w, _ := setup(t)
		rec := webhook.EventRecord{Provider: "sandbox", Account: "acct-1", EventID: "in-1", Kind: webhook.EventInbound, State: webhook.EventForwarding, ReceivedAt: T0}
		steps := []struct {
			now, until time.Duration
			want       webhook.InboundClaim
		}{
			{0, time.Minute, webhook.ClaimNew},
			{30 * time.Second, 2 * time.Minute, webhook.ClaimBusy},
			{90 * time.Second, 3 * time.Minute, webhook.ClaimTakenOver},
			{100 * time.Second, 4 * time.Minute, webhook.ClaimBusy},
		}
		for i, s := range steps {
			got, err := w.ClaimInbound(ctx, rec, T0.Add(s.now), T0.Add(s.until))
			if err != nil || got != s.want {
				t.Fatalf("step %d: claim %v (%v), want %v", i, got, err, s.want)
			}
		}
		if err := w.MarkForwarded(ctx, rec, T0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got, err := w.ClaimInbound(ctx, rec, T0.Add(time.Hour), T0.Add(2*time.Hour)); err != nil || got != webhook.ClaimDone {
			t.Fatalf("after forwarding: %v (%v), want ClaimDone", got, err)
		}
		if seen, err := w.SeenEvent(ctx, "sandbox", "acct-1", "in-1"); err != nil || seen == nil || seen.State != webhook.EventForwarded {
			t.Fatalf("forwarded event: %+v (%v)", seen, err)
		}
	})
}
