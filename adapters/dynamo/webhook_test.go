package dynamo

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

func webhooksForTest(t *testing.T) (*Webhooks, *Store) {
	t.Helper()
	db, table := testTable(t, "wh")
	return NewWebhooks(db, table), New(db, table)
}

var whNow = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func testIntent(t *testing.T, s *Store, id string) {
	t.Helper()
	in := &core.Intent{ID: id, Bot: "b", Provider: "sandbox", Account: "a1", Status: core.StatusSucceeded, CreatedAt: whNow, UpdatedAt: whNow, Attempts: []core.Attempt{}}
	if _, created, err := s.Create(context.Background(), in); err != nil || !created {
		t.Fatalf("create %s: %v", id, err)
	}
}

func appendEntry(eventID string, mapMsg bool) func(*core.Intent) (webhook.BindPlan, error) {
	return func(in *core.Intent) (webhook.BindPlan, error) {
		in.Attempts = append(in.Attempts, core.Attempt{Trigger: core.TriggerWebhook, Result: core.ResultAck, Evidence: core.Evidence{Extra: map[string]string{"eventId": eventID}}})
		return webhook.BindPlan{Changed: true, MapMessage: mapMsg}, nil
	}
}

func TestWebhookBindIsAtomicAndUnique(t *testing.T) {
	t.Parallel()
	w, s := webhooksForTest(t)
	ctx := context.Background()
	testIntent(t, s, "it_1")
	testIntent(t, s, "it_2")
	rec := webhook.EventRecord{Provider: "sandbox", Account: "a1", EventID: "evt_1", Kind: webhook.EventAck, State: webhook.EventBound, IntentID: "it_1", MessageID: "sbx_1", ReceivedAt: whNow}
	got, err := w.BindEvent(ctx, rec, appendEntry("evt_1", true))
	if err != nil || got.Version != 1 || len(got.Attempts) != 1 {
		t.Fatalf("bind: %v %+v", err, got)
	}
	if id, err := w.IntentForMessage(ctx, "sandbox", "a1", "sbx_1"); err != nil || id != "it_1" {
		t.Fatalf("mapping: %q %v", id, err)
	}
	if _, err := w.IntentForMessage(ctx, "sandbox", "a2", "sbx_1"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("mapping is per account: %v", err)
	}
	if seen, err := w.SeenEvent(ctx, "sandbox", "a1", "evt_1"); err != nil || seen == nil || seen.State != webhook.EventBound || seen.IntentID != "it_1" {
		t.Fatalf("seen %+v %v", seen, err)
	}
	// The same event again: refused, intent untouched.
	if _, err := w.BindEvent(ctx, rec, appendEntry("evt_1", true)); !errors.Is(err, webhook.ErrDuplicateEvent) {
		t.Fatalf("replay: %v", err)
	}
	// Another intent claiming the same provider message id: nothing written at all.
	rec2 := rec
	rec2.EventID, rec2.IntentID = "evt_2", "it_2"
	if _, err := w.BindEvent(ctx, rec2, appendEntry("evt_2", true)); !errors.Is(err, webhook.ErrMappingTaken) {
		t.Fatalf("mapping conflict: %v", err)
	}
	if seen, _ := w.SeenEvent(ctx, "sandbox", "a1", "evt_2"); seen != nil {
		t.Fatal("a cancelled transaction left the uniqueness item")
	}
	if in, _ := s.Get(ctx, "it_2"); in.Version != 0 {
		t.Fatal("a cancelled transaction changed the intent")
	}
	// A lost version race re-reads and decides again.
	calls := 0
	rec3 := rec
	rec3.EventID = "evt_3"
	got, err = w.BindEvent(ctx, rec3, func(in *core.Intent) (webhook.BindPlan, error) {
		calls++
		if calls == 1 {
			if _, err := s.Update(ctx, "it_1", func(in *core.Intent) error { in.StatusReason = "someone else"; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		return appendEntry("evt_3", false)(in)
	})
	if err != nil || calls != 2 || got.StatusReason != "someone else" || len(got.Attempts) != 2 {
		t.Fatalf("race: %v calls=%d %+v", err, calls, got)
	}
	// Nothing to change: only the uniqueness item is written.
	rec4 := rec
	rec4.EventID = "evt_4"
	if _, err := w.BindEvent(ctx, rec4, func(*core.Intent) (webhook.BindPlan, error) { return webhook.BindPlan{}, nil }); err != nil {
		t.Fatal(err)
	}
	if in, _ := s.Get(ctx, "it_1"); in.Version != 3 {
		t.Fatalf("version %d, want 3", in.Version)
	}
}

func TestWebhookInboundClaim(t *testing.T) {
	t.Parallel()
	w, _ := webhooksForTest(t)
	ctx := context.Background()
	rec := webhook.EventRecord{Provider: "sandbox", Account: "a1", EventID: "evt_in", Kind: webhook.EventInbound, ReceivedAt: whNow}
	claim := func(now time.Time) webhook.InboundClaim {
		t.Helper()
		c, err := w.ClaimInbound(ctx, rec, now, now.Add(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := claim(whNow); c != webhook.ClaimNew {
		t.Fatalf("first claim %v", c)
	}
	if c := claim(whNow.Add(10 * time.Second)); c != webhook.ClaimBusy {
		t.Fatalf("inside the claim %v", c)
	}
	if c := claim(whNow.Add(31 * time.Second)); c != webhook.ClaimTakenOver {
		t.Fatalf("after the claim %v", c)
	}
	if c := claim(whNow.Add(40 * time.Second)); c != webhook.ClaimBusy {
		t.Fatalf("inside the new claim %v", c)
	}
	if err := w.MarkForwarded(ctx, rec, whNow.Add(41*time.Second)); err != nil {
		t.Fatal(err)
	}
	if c := claim(whNow.Add(time.Hour)); c != webhook.ClaimDone {
		t.Fatalf("after forwarding %v", c)
	}
	if err := w.MarkForwarded(ctx, rec, whNow); err == nil {
		t.Fatal("marking twice must fail its condition")
	}
}

func TestWebhookUnresolvedListAndKeys(t *testing.T) {
	t.Parallel()
	w, _ := webhooksForTest(t)
	ctx := context.Background()
	for i, id := range []string{"evt_a", "evt_b", "evt_c"} {
		rec := webhook.EventRecord{Provider: "sandbox", Account: "a1", EventID: id, Kind: webhook.EventEcho, State: webhook.EventUnresolved,
			MessageID: "sbx_x", Reason: "no match", Raw: `{"n":` + string(rune('0'+i)) + `}`, ReceivedAt: whNow.Add(time.Duration(i) * time.Second)}
		if err := w.RecordEvent(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.RecordEvent(ctx, webhook.EventRecord{Provider: "sandbox", Account: "a1", EventID: "evt_a", State: webhook.EventUnresolved, ReceivedAt: whNow}); !errors.Is(err, webhook.ErrDuplicateEvent) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := w.RecordEvent(ctx, webhook.EventRecord{Provider: "sandbox", Account: "a1", EventID: "evt_ign", State: webhook.EventIgnored, ReceivedAt: whNow}); err != nil {
		t.Fatal(err)
	}
	page, next, err := w.ListUnresolved(ctx, "", 2)
	if err != nil || len(page) != 2 || next == "" || page[0].EventID != "evt_a" || page[0].Raw != `{"n":0}` {
		t.Fatalf("page 1: %+v %q %v", page, next, err)
	}
	page, next, err = w.ListUnresolved(ctx, next, 2)
	if err != nil || len(page) != 1 || page[0].EventID != "evt_c" {
		t.Fatalf("page 2: %+v %q %v", page, next, err)
	}
	if _, _, err := w.ListUnresolved(ctx, "bm9wZQ", 2); err == nil {
		t.Fatal("bad cursor accepted")
	}
	if EventPK("p", "a#b", "c") == EventPK("p", "a", "b#c") || MappingPK("p", "a%23b", "c") == MappingPK("p", "a#b", "c") {
		t.Fatal("key parts are ambiguous")
	}
}

// A webhook that rewrites an open intent keeps its repair entry on the
// store's own shards: keyed by the default count under another sharding,
// the sweeper (which reads the configured shards) would never see it and
// an intent left in flight would stay there.
func TestWebhookBindKeepsTheStoresRepairSharding(t *testing.T) {
	t.Parallel()
	db, table := testTable(t, "whsh")
	sh := Sharding{Repair: 4}
	s := New(db, table)
	s.Shards = sh
	w := NewWebhooks(db, table)
	w.Shards = sh
	ctx := context.Background()
	lease := whNow.Add(time.Minute)
	// Eight intents: under the default 64 shards most of their ids fall on
	// a shard number of 4 or more, which a 4-shard sweeper never reads.
	want := map[string]bool{}
	for i := range 8 {
		id := fmt.Sprintf("it_open%d", i)
		want[id] = true
		in := &core.Intent{ID: id, Bot: "b", Provider: "sandbox", Account: "a1", Status: core.StatusInFlight, CreatedAt: whNow, UpdatedAt: whNow,
			Attempts: []core.Attempt{}, AttemptCount: 1, Lease: &core.Lease{Owner: "w", Until: lease}, RepairAt: lease}
		if _, created, err := s.Create(ctx, in); err != nil || !created {
			t.Fatalf("create: %v", err)
		}
		rec := webhook.EventRecord{Provider: "sandbox", Account: "a1", EventID: "evt_" + id, Kind: webhook.EventStatus, State: webhook.EventBound, IntentID: id, MessageID: "sbx_" + id, ReceivedAt: whNow}
		if _, err := w.BindEvent(ctx, rec, appendEntry("evt_"+id, true)); err != nil {
			t.Fatal(err)
		}
	}
	for shard := 0; shard < sh.Repair; shard++ {
		due, _, err := s.DueRepairs(ctx, shard, lease.Add(time.Hour), 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range due {
			delete(want, d.ID)
		}
	}
	if len(want) > 0 {
		t.Fatalf("after the webhook's write these intents are on no repair shard the sweeper reads: %v", want)
	}
}
