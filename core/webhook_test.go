package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/resolve"
	"github.com/botharness/outbox/core/webhook"
)

// memWebhooks is an in-memory WebhookStore with the adapter's atomicity:
// the uniqueness item, the intent and the mapping are written together or
// not at all.
type memWebhooks struct {
	mu       sync.Mutex
	intents  *core.MemStore
	events   map[string]webhook.EventRecord
	mappings map[string]string
	writes   int
}

func newMemWebhooks(s *core.MemStore) *memWebhooks {
	return &memWebhooks{intents: s, events: map[string]webhook.EventRecord{}, mappings: map[string]string{}}
}

func evKey(p, a, id string) string { return p + "\x00" + a + "\x00" + id }

func (m *memWebhooks) SeenEvent(_ context.Context, p, a, id string) (*webhook.EventRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.events[evKey(p, a, id)]; ok {
		return &r, nil
	}
	return nil, nil
}

func (m *memWebhooks) RecordEvent(_ context.Context, rec webhook.EventRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := evKey(rec.Provider, rec.Account, rec.EventID)
	if _, ok := m.events[k]; ok {
		return webhook.ErrDuplicateEvent
	}
	m.events[k] = rec
	m.writes++
	return nil
}

func (m *memWebhooks) BindEvent(ctx context.Context, rec webhook.EventRecord, mutate func(*core.Intent) (webhook.BindPlan, error)) (*core.Intent, error) {
	for i := 0; i < 10; i++ {
		cur, err := m.intents.Get(ctx, rec.IntentID)
		if err != nil {
			return nil, err
		}
		plan, err := mutate(cur)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		k := evKey(rec.Provider, rec.Account, rec.EventID)
		if _, ok := m.events[k]; ok {
			m.mu.Unlock()
			return nil, webhook.ErrDuplicateEvent
		}
		mk := evKey(rec.Provider, rec.Account, rec.MessageID)
		if plan.MapMessage {
			if owner, ok := m.mappings[mk]; ok && owner != rec.IntentID {
				m.mu.Unlock()
				return nil, webhook.ErrMappingTaken
			}
		}
		if plan.Changed {
			ok := m.intents.PutIfVersionLocked(cur)
			if !ok {
				m.mu.Unlock()
				continue
			}
		}
		if plan.MapMessage {
			m.mappings[mk] = rec.IntentID
		}
		m.events[k] = rec
		m.writes++
		m.mu.Unlock()
		return cur, nil
	}
	return nil, core.ErrConflict
}

func (m *memWebhooks) IntentForMessage(_ context.Context, p, a, msg string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.mappings[evKey(p, a, msg)]; ok {
		return id, nil
	}
	return "", core.ErrNotFound
}

func (m *memWebhooks) ClaimInbound(_ context.Context, rec webhook.EventRecord, now, until time.Time) (webhook.InboundClaim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := evKey(rec.Provider, rec.Account, rec.EventID)
	old, ok := m.events[k]
	m.writes++
	switch {
	case !ok:
		rec.ClaimUntil = &until
		m.events[k] = rec
		return webhook.ClaimNew, nil
	case old.State != webhook.EventForwarding:
		return webhook.ClaimDone, nil
	case old.ClaimUntil != nil && now.Before(*old.ClaimUntil):
		return webhook.ClaimBusy, nil
	}
	old.ClaimUntil = &until
	m.events[k] = old
	return webhook.ClaimTakenOver, nil
}

func (m *memWebhooks) MarkForwarded(_ context.Context, rec webhook.EventRecord, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := evKey(rec.Provider, rec.Account, rec.EventID)
	old := m.events[k]
	if old.State != webhook.EventForwarding {
		return errors.New("not forwarding")
	}
	old.State, old.ClaimUntil = webhook.EventForwarded, nil
	m.events[k] = old
	m.writes++
	return nil
}

type memInbox struct {
	mu   sync.Mutex
	msgs []webhook.InboxMessage
	fail int // fail this many sends first
}

func (q *memInbox) Forward(_ context.Context, msg webhook.InboxMessage) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail > 0 {
		q.fail--
		return errors.New("inbox unavailable")
	}
	q.msgs = append(q.msgs, msg)
	return nil
}

type whRig struct {
	*core.Rig
	wh    *webhook.Webhooks
	store *memWebhooks
	inbox *memInbox
	n     int
}

func newWHRig(caps core.Capabilities, script ...error) *whRig {
	r := core.NewRig(caps, script...)
	ws := newMemWebhooks(r.Store)
	inbox := &memInbox{}
	return &whRig{Rig: r, store: ws, inbox: inbox,
		wh: &webhook.Webhooks{Store: ws, Intents: r.Store, Inbox: inbox, Clock: r.Clock, Log: slog.New(slog.DiscardHandler)}}
}

func (w *whRig) event(kind webhook.EventKind, mutate func(*webhook.ProviderEvent)) webhook.ProviderEvent {
	w.n++
	ev := webhook.ProviderEvent{Provider: "fake", Account: "a1", EventID: fmt.Sprintf("evt_%d", w.n), Kind: kind, Type: "t." + string(kind)}
	if mutate != nil {
		mutate(&ev)
	}
	return ev
}

func (w *whRig) handle(t *testing.T, ev webhook.ProviderEvent) webhook.WebhookResult {
	t.Helper()
	res, err := w.wh.Handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("handle %s: %v", ev.EventID, err)
	}
	return res
}

func ack(id, msg string) func(*webhook.ProviderEvent) {
	return func(ev *webhook.ProviderEvent) { ev.IntentID, ev.MessageID = id, msg }
}

func webhookEntries(in *core.Intent) []core.Attempt {
	var out []core.Attempt
	for _, a := range in.Attempts {
		if a.Trigger == core.TriggerWebhook {
			out = append(out, a)
		}
	}
	return out
}

func TestWebhookAckOnSucceededIntentAppendsOneEntryAndDuplicatesChangeNothing(t *testing.T) {
	w := newWHRig(core.Capabilities{})
	in := w.Submit(t)
	if _, err := w.D.Attempt(context.Background(), core.AttemptRequest{ID: in.ID, Trigger: core.TriggerStream}); err != nil {
		t.Fatal(err)
	}
	ev := w.event(webhook.EventAck, ack(in.ID, "ext-1"))
	if res := w.handle(t, ev); res.Result != webhook.WebhookBound || res.Status != core.StatusSucceeded {
		t.Fatalf("first: %+v", res)
	}
	after := w.Get(t, in.ID)
	writes := w.store.writes
	for i := 0; i < 4; i++ {
		if res := w.handle(t, ev); res.Result != webhook.WebhookDuplicate {
			t.Fatalf("replay %d: %+v", i, res)
		}
	}
	again := w.Get(t, in.ID)
	if again.Version != after.Version || len(webhookEntries(again)) != 1 || w.store.writes != writes {
		t.Fatalf("replays changed something: version %d->%d entries %d writes %d->%d", after.Version, again.Version, len(webhookEntries(again)), writes, w.store.writes)
	}
	e := webhookEntries(again)[0]
	if e.Result != core.ResultAck || e.ExternalID != "ext-1" || e.Evidence.Extra["eventId"] != ev.EventID || e.Evidence.Extra["matchedBy"] != "identity" {
		t.Fatalf("entry %+v", e)
	}
	if core.DeliveryStatus(again) != core.DeliverySent {
		t.Fatalf("delivery status %q", core.DeliveryStatus(again))
	}
	// The mapping lets a later echo find the intent by the provider's id.
	echo := w.event(webhook.EventEcho, func(ev *webhook.ProviderEvent) { ev.MessageID = "ext-1" })
	if res := w.handle(t, echo); res.Result != webhook.WebhookBound || res.IntentID != in.ID || res.Status != core.StatusSucceeded {
		t.Fatalf("echo: %+v", res)
	}
	if got := webhookEntries(w.Get(t, in.ID)); len(got) != 2 || got[1].Result != core.ResultEcho || got[1].Evidence.Extra["matchedBy"] != "external-id" {
		t.Fatalf("entries after echo: %+v", got)
	}
}

func TestWebhookStatusesOnlyMoveForward(t *testing.T) {
	w := newWHRig(core.Capabilities{})
	in := w.Submit(t)
	core.MustAttempt(t, w.D, in.ID)
	status := func(s string) func(*webhook.ProviderEvent) {
		return func(ev *webhook.ProviderEvent) { ev.IntentID, ev.MessageID, ev.Status = in.ID, "ext-1", s }
	}
	w.handle(t, w.event(webhook.EventStatus, status(core.DeliveryRead))) // reordered: read before the ack
	w.handle(t, w.event(webhook.EventAck, ack(in.ID, "ext-1")))
	w.handle(t, w.event(webhook.EventStatus, status(core.DeliveryDelivered)))
	got := w.Get(t, in.ID)
	if core.DeliveryStatus(got) != core.DeliveryRead {
		t.Fatalf("delivery status %q, want read", core.DeliveryStatus(got))
	}
	// Only the first proof moved anything; the later, backward ones are on
	// their uniqueness items only.
	if n := len(webhookEntries(got)); n != 1 {
		t.Fatalf("webhook entries = %d, want 1: %+v", n, webhookEntries(got))
	}
	if len(w.store.events) != 3 {
		t.Fatalf("uniqueness items = %d, want 3", len(w.store.events))
	}
}

func TestWebhookAckResolvesUnknownOutcomeWithoutSending(t *testing.T) {
	w := newWHRig(core.Capabilities{Lookup: true}, &core.UnknownOutcomeError{Err: errors.New("timeout")})
	in := w.Submit(t)
	core.MustAttempt(t, w.D, in.ID)
	if got := w.Get(t, in.ID); got.Status != core.StatusUnknownOutcome {
		t.Fatalf("setup: %s", got.Status)
	}
	res := w.handle(t, w.event(webhook.EventAck, ack(in.ID, "ext-9")))
	got := w.Get(t, in.ID)
	if res.Status != core.StatusSucceeded || got.Status != core.StatusSucceeded || got.ExternalID != "ext-9" || res.Reason == "" {
		t.Fatalf("res %+v intent %s %q", res, got.Status, got.ExternalID)
	}
	w.Drain(t) // the reconcile message finds nothing to do
	if w.Prov.Sends() != 1 || w.Prov.Lookups() != 0 {
		t.Fatalf("sends %d lookups %d", w.Prov.Sends(), w.Prov.Lookups())
	}
}

func TestWebhookAckResolvesNeedsHumanAndKeepsTheEpisode(t *testing.T) {
	w := newWHRig(core.Capabilities{}, &core.UnknownOutcomeError{Err: errors.New("reset")})
	in := w.Submit(t)
	core.MustAttempt(t, w.D, in.ID)
	if _, err := (&resolve.Resolver{Store: w.D.Store, Reconcile: w.D, Clock: w.D.Clock}).Recommend(context.Background(), core.Principal{Kind: core.PrincipalOrchestrator, Name: "o"}, in.ID,
		core.Recommendation{Decision: core.DecisionAcceptSuccess, Summary: "looks sent"}); err != nil {
		t.Fatal(err)
	}
	before := w.Get(t, in.ID)
	if before.Status != core.StatusNeedsHuman {
		t.Fatalf("setup: %s", before.Status)
	}
	w.handle(t, w.event(webhook.EventAck, ack(in.ID, "ext-1")))
	got := w.Get(t, in.ID)
	if got.Status != core.StatusSucceeded || !strings.Contains(got.StatusReason, "without a human") {
		t.Fatalf("status %s (%s)", got.Status, got.StatusReason)
	}
	// History is appended to, never rewritten.
	if len(got.Attempts) != len(before.Attempts)+1 || got.Attempts[0].Result != core.ResultUnknownOutcome ||
		len(got.Resolutions) != 1 || !got.Resolutions[0].Recommend {
		t.Fatalf("history: %+v / %+v", got.Attempts, got.Resolutions)
	}
	if w.Prov.Sends() != 1 {
		t.Fatalf("sends %d", w.Prov.Sends())
	}
}

// hookProvider lets a webhook arrive while the provider call is in flight.
type hookProvider struct {
	*core.FakeProvider
	during func()
}

func (p *hookProvider) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	if p.during != nil {
		p.during()
	}
	return p.FakeProvider.Send(ctx, r)
}

// summary is the part of the final state that must not depend on arrival order.
func summary(in *core.Intent) string {
	var parts []string
	for _, a := range in.Attempts {
		parts = append(parts, fmt.Sprintf("%s/%s/%s", a.Trigger, a.Result, a.ExternalID))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%s ext=%s delivery=%s [%s]", in.Status, in.ExternalID, core.DeliveryStatus(in), strings.Join(parts, " "))
}

func TestWebhookAckBeforeOrAfterTheOutcomeWriteEndsTheSame(t *testing.T) {
	for _, c := range []struct {
		name   string
		script []error
	}{
		{"response arrives", nil},
		{"response lost", []error{&core.UnknownOutcomeError{Err: errors.New("EOF")}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(early bool) (*core.Intent, *whRig) {
				w := newWHRig(core.Capabilities{}, c.script...)
				hp := &hookProvider{FakeProvider: w.Prov}
				w.D.Providers = core.ProviderMap{"fake": hp}
				in := w.Submit(t)
				ev := w.event(webhook.EventAck, ack(in.ID, "ext-1"))
				if early {
					hp.during = func() {
						if got := w.handle(t, ev); got.Status != core.StatusInFlight {
							t.Errorf("early ack saw %s", got.Status)
						}
					}
				}
				if _, err := w.D.Attempt(context.Background(), core.AttemptRequest{ID: in.ID, Trigger: core.TriggerStream}); err != nil {
					t.Fatal(err)
				}
				if !early {
					w.handle(t, ev)
				}
				w.Drain(t)
				return w.Get(t, in.ID), w
			}
			before, wb := run(true)
			after, wa := run(false)
			if summary(before) != summary(after) {
				t.Fatalf("ack before the outcome write: %s\nack after it:               %s", summary(before), summary(after))
			}
			if before.Status != core.StatusSucceeded || wb.Prov.Sends() != 1 || wa.Prov.Sends() != 1 {
				t.Fatalf("%s; sends %d/%d", summary(before), wb.Prov.Sends(), wa.Prov.Sends())
			}
		})
	}
}

func TestWebhookAckOnPendingIntentStopsTheNextSend(t *testing.T) {
	// A human retried a needs-human intent; then the late ack of the first
	// attempt arrives. The retry must not go out.
	w := newWHRig(core.Capabilities{}, &core.UnknownOutcomeError{Err: errors.New("reset")})
	in := w.Submit(t)
	core.MustAttempt(t, w.D, in.ID)
	if _, err := (&resolve.Resolver{Store: w.D.Store, Reconcile: w.D, Clock: w.D.Clock}).Resolve(context.Background(), core.Principal{Kind: core.PrincipalOperator, Name: "ann"}, in.ID, "",
		core.Ruling{Decision: core.DecisionRetry, Reason: "looks lost", AcceptDuplicateRisk: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if res := w.handle(t, w.event(webhook.EventAck, ack(in.ID, "ext-1"))); res.Status != core.StatusPending {
		t.Fatalf("ack on pending: %+v", res)
	}
	if _, err := w.D.Attempt(context.Background(), core.AttemptRequest{ID: in.ID, Trigger: core.TriggerStream}); err != nil {
		t.Fatal(err)
	}
	got := w.Get(t, in.ID)
	if got.Status != core.StatusSucceeded || got.ExternalID != "ext-1" || w.Prov.Sends() != 1 {
		t.Fatalf("%s, sends %d", summary(got), w.Prov.Sends())
	}
}

func TestWebhookUnmatchedEventsAreRecordedUnresolved(t *testing.T) {
	w := newWHRig(core.Capabilities{})
	in := w.Submit(t)
	core.MustAttempt(t, w.D, in.ID)
	before := w.Get(t, in.ID)
	for _, ev := range []webhook.ProviderEvent{
		w.event(webhook.EventEcho, func(ev *webhook.ProviderEvent) { ev.MessageID = "ext-unknown"; ev.Raw = []byte(`{"raw":1}`) }),
		// Another account's identity is not ours to bind.
		w.event(webhook.EventAck, func(ev *webhook.ProviderEvent) { ev.Account, ev.IntentID, ev.MessageID = "a2", in.ID, "ext-1" }),
		w.event(webhook.EventAck, ack("it_nope", "ext-2")),
	} {
		res := w.handle(t, ev)
		if res.Result != webhook.WebhookUnresolved || res.IntentID != "" {
			t.Fatalf("%s: %+v", ev.EventID, res)
		}
		rec := w.store.events[evKey(ev.Provider, ev.Account, ev.EventID)]
		if rec.State != webhook.EventUnresolved || rec.Reason == "" || rec.Raw != string(ev.Raw) {
			t.Fatalf("record %+v", rec)
		}
		if res := w.handle(t, ev); res.Result != webhook.WebhookDuplicate {
			t.Fatalf("replay: %+v", res)
		}
	}
	if got := w.Get(t, in.ID); got.Version != before.Version {
		t.Fatal("an unmatched event changed the intent")
	}
	if len(w.inbox.msgs) != 0 || w.Prov.Sends() != 1 {
		t.Fatalf("inbox %d sends %d", len(w.inbox.msgs), w.Prov.Sends())
	}
}

func TestWebhookEchoNeverProvesSuccess(t *testing.T) {
	w := newWHRig(core.Capabilities{Lookup: true}, &core.UnknownOutcomeError{Err: errors.New("timeout")})
	in := w.Submit(t)
	core.MustAttempt(t, w.D, in.ID)
	res := w.handle(t, w.event(webhook.EventEcho, func(ev *webhook.ProviderEvent) { ev.IntentID, ev.MessageID = in.ID, "ext-1" }))
	if res.Result != webhook.WebhookBound || res.Status != core.StatusUnknownOutcome {
		t.Fatalf("%+v", res)
	}
	if _, ok := core.ProviderAcknowledged(w.Get(t, in.ID)); ok {
		t.Fatal("an echo counted as proof")
	}
}

func TestWebhookInboundForwardedOnceEvenAfterACrash(t *testing.T) {
	w := newWHRig(core.Capabilities{})
	w.wh.ClaimFor = 10 * time.Second
	ev := w.event(webhook.EventInbound, func(ev *webhook.ProviderEvent) { ev.Inbound = json.RawMessage(`{"text":"hi"}`) })
	for i := 0; i < 3; i++ {
		res := w.handle(t, ev)
		want := webhook.WebhookForwarded
		if i > 0 {
			want = webhook.WebhookDuplicate
		}
		if res.Result != want {
			t.Fatalf("delivery %d: %+v", i, res)
		}
	}
	if len(w.inbox.msgs) != 1 || w.inbox.msgs[0].EventID != ev.EventID || string(w.inbox.msgs[0].Event) != `{"text":"hi"}` {
		t.Fatalf("inbox %+v", w.inbox.msgs)
	}

	// Crash between dedupe and send: the claim is written, the send fails
	// (as if the handler died). A redelivery inside the claim is told to come
	// back; one after it takes over and forwards.
	ev2 := w.event(webhook.EventInbound, func(ev *webhook.ProviderEvent) { ev.Inbound = json.RawMessage(`{"text":"again"}`) })
	w.inbox.fail = 1
	if _, err := w.wh.Handle(context.Background(), ev2); err == nil {
		t.Fatal("a failed forward must ask for redelivery")
	}
	if _, err := w.wh.Handle(context.Background(), ev2); !errors.Is(err, webhook.ErrEventInProgress) {
		t.Fatalf("redelivery inside the claim: %v", err)
	}
	w.Clock.Advance(11 * time.Second)
	if res := w.handle(t, ev2); res.Result != webhook.WebhookForwarded {
		t.Fatalf("redelivery after the claim: %+v", res)
	}
	if res := w.handle(t, ev2); res.Result != webhook.WebhookDuplicate {
		t.Fatalf("after forwarding: %+v", res)
	}
	if len(w.inbox.msgs) != 2 {
		t.Fatalf("inbox %d messages, want 2", len(w.inbox.msgs))
	}
}

func TestWebhookEventValidation(t *testing.T) {
	w := newWHRig(core.Capabilities{})
	for _, c := range []struct {
		name  string
		ev    webhook.ProviderEvent
		field string
	}{
		{"no event id", webhook.ProviderEvent{Provider: "fake", Account: "a1", Kind: webhook.EventEcho, MessageID: "m"}, "eventId"},
		{"ack without message", webhook.ProviderEvent{Provider: "fake", Account: "a1", EventID: "e", Kind: webhook.EventAck}, "messageId"},
		{"bad status", webhook.ProviderEvent{Provider: "fake", Account: "a1", EventID: "e", Kind: webhook.EventStatus, MessageID: "m", Status: "lost"}, "status"},
		{"inbound without body", webhook.ProviderEvent{Provider: "fake", Account: "a1", EventID: "e", Kind: webhook.EventInbound}, "data"},
		{"long id", webhook.ProviderEvent{Provider: "fake", Account: "a1", EventID: strings.Repeat("e", 300), Kind: webhook.EventOther}, "eventId"},
	} {
		_, err := w.wh.Handle(context.Background(), c.ev)
		var ve *core.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if len(w.store.events) != 0 {
		t.Fatal("invalid events were stored")
	}
	if res := w.handle(t, w.event(webhook.EventOther, nil)); res.Result != webhook.WebhookIgnored {
		t.Fatalf("other: %+v", res)
	}
}

// A failure status (Twilio failed/undelivered, a call's busy/no-answer) is
// evidence on the intent it names and never changes its status; a replay
// changes nothing; a later proof still settles it.
func TestWebhookFailureStatusIsEvidenceOnly(t *testing.T) {
	w := newWHRig(core.Capabilities{}, &core.UnknownOutcomeError{Err: errors.New("reset")})
	in := w.Submit(t)
	core.MustAttempt(t, w.D, in.ID)
	before := w.Get(t, in.ID)
	if before.Status != core.StatusNeedsHuman {
		t.Fatalf("setup: %s", before.Status)
	}
	fail := w.event(webhook.EventFailure, func(ev *webhook.ProviderEvent) { ev.IntentID, ev.MessageID, ev.Status = in.ID, "ext-1", "undelivered" })
	if res := w.handle(t, fail); res.Result != webhook.WebhookBound || res.Status != core.StatusNeedsHuman || res.Reason != "" {
		t.Fatalf("failure: %+v", res)
	}
	got := w.Get(t, in.ID)
	e := webhookEntries(got)
	if got.Status != core.StatusNeedsHuman || got.ExternalID != "" || len(e) != 1 || e[0].Result != core.ResultFailure || e[0].Evidence.ProviderCode != "undelivered" {
		t.Fatalf("after a failure status: %s ext %q entries %+v", got.Status, got.ExternalID, e)
	}
	if _, ok := core.ProviderAcknowledged(got); ok || core.DeliveryStatus(got) != "" {
		t.Fatal("a failure status counted as proof")
	}
	if res := w.handle(t, fail); res.Result != webhook.WebhookDuplicate || w.Get(t, in.ID).Version != got.Version {
		t.Fatalf("replay: %+v", res)
	}
	// A failure without a status is refused.
	if _, err := w.wh.Handle(context.Background(), w.event(webhook.EventFailure, func(ev *webhook.ProviderEvent) { ev.MessageID = "ext-1" })); err == nil {
		t.Fatal("a failure status without a status was accepted")
	}
	w.handle(t, w.event(webhook.EventStatus, func(ev *webhook.ProviderEvent) {
		ev.IntentID, ev.MessageID, ev.Status = in.ID, "ext-1", core.DeliveryDelivered
	}))
	if got := w.Get(t, in.ID); got.Status != core.StatusSucceeded || got.ExternalID != "ext-1" {
		t.Fatalf("proof after the failure: %s %q", got.Status, got.ExternalID)
	}
}
func ptr[T any](v T) *T { return &v }
