package core

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
)

// memWebhooks is an in-memory WebhookStore with the adapter's atomicity:
// the uniqueness item, the intent and the mapping are written together or
// not at all.
type memWebhooks struct {
	mu       sync.Mutex
	intents  *memStore
	events   map[string]EventRecord
	mappings map[string]string
	writes   int
}

func newMemWebhooks(s *memStore) *memWebhooks {
	return &memWebhooks{intents: s, events: map[string]EventRecord{}, mappings: map[string]string{}}
}

func evKey(p, a, id string) string { return p + "\x00" + a + "\x00" + id }

func (m *memWebhooks) SeenEvent(_ context.Context, p, a, id string) (*EventRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.events[evKey(p, a, id)]; ok {
		return &r, nil
	}
	return nil, nil
}

func (m *memWebhooks) RecordEvent(_ context.Context, rec EventRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := evKey(rec.Provider, rec.Account, rec.EventID)
	if _, ok := m.events[k]; ok {
		return ErrDuplicateEvent
	}
	m.events[k] = rec
	m.writes++
	return nil
}

func (m *memWebhooks) BindEvent(ctx context.Context, rec EventRecord, mutate func(*Intent) (BindPlan, error)) (*Intent, error) {
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
			return nil, ErrDuplicateEvent
		}
		mk := evKey(rec.Provider, rec.Account, rec.MessageID)
		if plan.MapMessage {
			if owner, ok := m.mappings[mk]; ok && owner != rec.IntentID {
				m.mu.Unlock()
				return nil, ErrMappingTaken
			}
		}
		if plan.Changed {
			m.intents.mu.Lock()
			ok := m.intents.putIfVersion(cur)
			m.intents.mu.Unlock()
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
	return nil, ErrConflict
}

func (m *memWebhooks) IntentForMessage(_ context.Context, p, a, msg string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.mappings[evKey(p, a, msg)]; ok {
		return id, nil
	}
	return "", ErrNotFound
}

func (m *memWebhooks) ClaimInbound(_ context.Context, rec EventRecord, now, until time.Time) (InboundClaim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := evKey(rec.Provider, rec.Account, rec.EventID)
	old, ok := m.events[k]
	m.writes++
	switch {
	case !ok:
		rec.ClaimUntil = &until
		m.events[k] = rec
		return ClaimNew, nil
	case old.State != EventForwarding:
		return ClaimDone, nil
	case old.ClaimUntil != nil && now.Before(*old.ClaimUntil):
		return ClaimBusy, nil
	}
	old.ClaimUntil = &until
	m.events[k] = old
	return ClaimTakenOver, nil
}

func (m *memWebhooks) MarkForwarded(_ context.Context, rec EventRecord, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := evKey(rec.Provider, rec.Account, rec.EventID)
	old := m.events[k]
	if old.State != EventForwarding {
		return errors.New("not forwarding")
	}
	old.State, old.ClaimUntil = EventForwarded, nil
	m.events[k] = old
	m.writes++
	return nil
}

type memInbox struct {
	mu   sync.Mutex
	msgs []InboxMessage
	fail int // fail this many sends first
}

func (q *memInbox) Forward(_ context.Context, msg InboxMessage) error {
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
	*rig
	wh    *Webhooks
	store *memWebhooks
	inbox *memInbox
	n     int
}

func newWHRig(caps Capabilities, script ...error) *whRig {
	r := newRig(caps, script...)
	ws := newMemWebhooks(r.store)
	inbox := &memInbox{}
	return &whRig{rig: r, store: ws, inbox: inbox,
		wh: &Webhooks{Store: ws, Intents: r.store, Inbox: inbox, Clock: r.clock, Log: slog.New(slog.DiscardHandler)}}
}

func (w *whRig) event(kind EventKind, mutate func(*ProviderEvent)) ProviderEvent {
	w.n++
	ev := ProviderEvent{Provider: "fake", Account: "a1", EventID: fmt.Sprintf("evt_%d", w.n), Kind: kind, Type: "t." + string(kind)}
	if mutate != nil {
		mutate(&ev)
	}
	return ev
}

func (w *whRig) handle(t *testing.T, ev ProviderEvent) WebhookResult {
	t.Helper()
	res, err := w.wh.Handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("handle %s: %v", ev.EventID, err)
	}
	return res
}

func ack(id, msg string) func(*ProviderEvent) {
	return func(ev *ProviderEvent) { ev.IntentID, ev.MessageID = id, msg }
}

func webhookEntries(in *Intent) []Attempt {
	var out []Attempt
	for _, a := range in.Attempts {
		if a.Trigger == TriggerWebhook {
			out = append(out, a)
		}
	}
	return out
}

func TestWebhookAckOnSucceededIntentAppendsOneEntryAndDuplicatesChangeNothing(t *testing.T) {
	w := newWHRig(Capabilities{})
	in := w.submit(t)
	if err := attemptID(context.Background(), w.d, in.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	ev := w.event(EventAck, ack(in.ID, "ext-1"))
	if res := w.handle(t, ev); res.Result != WebhookBound || res.Status != StatusSucceeded {
		t.Fatalf("first: %+v", res)
	}
	after := w.get(t, in.ID)
	writes := w.store.writes
	for i := 0; i < 4; i++ {
		if res := w.handle(t, ev); res.Result != WebhookDuplicate {
			t.Fatalf("replay %d: %+v", i, res)
		}
	}
	again := w.get(t, in.ID)
	if again.Version != after.Version || len(webhookEntries(again)) != 1 || w.store.writes != writes {
		t.Fatalf("replays changed something: version %d->%d entries %d writes %d->%d", after.Version, again.Version, len(webhookEntries(again)), writes, w.store.writes)
	}
	e := webhookEntries(again)[0]
	if e.Result != ResultAck || e.ExternalID != "ext-1" || e.Evidence.Extra["eventId"] != ev.EventID || e.Evidence.Extra["matchedBy"] != "identity" {
		t.Fatalf("entry %+v", e)
	}
	if DeliveryStatus(again) != DeliverySent {
		t.Fatalf("delivery status %q", DeliveryStatus(again))
	}
	// The mapping lets a later echo find the intent by the provider's id.
	echo := w.event(EventEcho, func(ev *ProviderEvent) { ev.MessageID = "ext-1" })
	if res := w.handle(t, echo); res.Result != WebhookBound || res.IntentID != in.ID || res.Status != StatusSucceeded {
		t.Fatalf("echo: %+v", res)
	}
	if got := webhookEntries(w.get(t, in.ID)); len(got) != 2 || got[1].Result != ResultEcho || got[1].Evidence.Extra["matchedBy"] != "external-id" {
		t.Fatalf("entries after echo: %+v", got)
	}
}

func TestWebhookStatusesOnlyMoveForward(t *testing.T) {
	w := newWHRig(Capabilities{})
	in := w.submit(t)
	mustAttempt(t, w.d, in.ID)
	status := func(s string) func(*ProviderEvent) {
		return func(ev *ProviderEvent) { ev.IntentID, ev.MessageID, ev.Status = in.ID, "ext-1", s }
	}
	w.handle(t, w.event(EventStatus, status(DeliveryRead))) // reordered: read before the ack
	w.handle(t, w.event(EventAck, ack(in.ID, "ext-1")))
	w.handle(t, w.event(EventStatus, status(DeliveryDelivered)))
	got := w.get(t, in.ID)
	if DeliveryStatus(got) != DeliveryRead {
		t.Fatalf("delivery status %q, want read", DeliveryStatus(got))
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
	w := newWHRig(Capabilities{Lookup: true}, &UnknownOutcomeError{Err: errors.New("timeout")})
	in := w.submit(t)
	mustAttempt(t, w.d, in.ID)
	if got := w.get(t, in.ID); got.Status != StatusUnknownOutcome {
		t.Fatalf("setup: %s", got.Status)
	}
	res := w.handle(t, w.event(EventAck, ack(in.ID, "ext-9")))
	got := w.get(t, in.ID)
	if res.Status != StatusSucceeded || got.Status != StatusSucceeded || got.ExternalID != "ext-9" || res.Reason == "" {
		t.Fatalf("res %+v intent %s %q", res, got.Status, got.ExternalID)
	}
	w.drain(t) // the reconcile message finds nothing to do
	if w.prov.sends != 1 || w.prov.lookups != 0 {
		t.Fatalf("sends %d lookups %d", w.prov.sends, w.prov.lookups)
	}
}

func TestWebhookAckResolvesNeedsHumanAndKeepsTheEpisode(t *testing.T) {
	w := newWHRig(Capabilities{}, &UnknownOutcomeError{Err: errors.New("reset")})
	in := w.submit(t)
	mustAttempt(t, w.d, in.ID)
	if _, err := (&Resolver{Store: w.d.Store, Reconcile: w.d, Clock: w.d.Clock}).Recommend(context.Background(), Principal{Kind: PrincipalOrchestrator, Name: "o"}, in.ID,
		Recommendation{Decision: DecisionAcceptSuccess, Summary: "looks sent"}); err != nil {
		t.Fatal(err)
	}
	before := w.get(t, in.ID)
	if before.Status != StatusNeedsHuman {
		t.Fatalf("setup: %s", before.Status)
	}
	w.handle(t, w.event(EventAck, ack(in.ID, "ext-1")))
	got := w.get(t, in.ID)
	if got.Status != StatusSucceeded || !strings.Contains(got.StatusReason, "without a human") {
		t.Fatalf("status %s (%s)", got.Status, got.StatusReason)
	}
	// History is appended to, never rewritten.
	if len(got.Attempts) != len(before.Attempts)+1 || got.Attempts[0].Result != ResultUnknownOutcome ||
		len(got.Resolutions) != 1 || !got.Resolutions[0].Recommend {
		t.Fatalf("history: %+v / %+v", got.Attempts, got.Resolutions)
	}
	if w.prov.sends != 1 {
		t.Fatalf("sends %d", w.prov.sends)
	}
}

// hookProvider lets a webhook arrive while the provider call is in flight.
type hookProvider struct {
	*fakeProvider
	during func()
}

func (p *hookProvider) Send(ctx context.Context, r SendRequest) (SendResult, error) {
	if p.during != nil {
		p.during()
	}
	return p.fakeProvider.Send(ctx, r)
}

// summary is the part of the final state that must not depend on arrival order.
func summary(in *Intent) string {
	var parts []string
	for _, a := range in.Attempts {
		parts = append(parts, fmt.Sprintf("%s/%s/%s", a.Trigger, a.Result, a.ExternalID))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%s ext=%s delivery=%s [%s]", in.Status, in.ExternalID, DeliveryStatus(in), strings.Join(parts, " "))
}

func TestWebhookAckBeforeOrAfterTheOutcomeWriteEndsTheSame(t *testing.T) {
	for _, c := range []struct {
		name   string
		script []error
	}{
		{"response arrives", nil},
		{"response lost", []error{&UnknownOutcomeError{Err: errors.New("EOF")}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(early bool) (*Intent, *whRig) {
				w := newWHRig(Capabilities{}, c.script...)
				hp := &hookProvider{fakeProvider: w.prov}
				w.d.Providers = ProviderMap{"fake": hp}
				in := w.submit(t)
				ev := w.event(EventAck, ack(in.ID, "ext-1"))
				if early {
					hp.during = func() {
						if got := w.handle(t, ev); got.Status != StatusInFlight {
							t.Errorf("early ack saw %s", got.Status)
						}
					}
				}
				if err := attemptID(context.Background(), w.d, in.ID, "stream"); err != nil {
					t.Fatal(err)
				}
				if !early {
					w.handle(t, ev)
				}
				w.drain(t)
				return w.get(t, in.ID), w
			}
			before, wb := run(true)
			after, wa := run(false)
			if summary(before) != summary(after) {
				t.Fatalf("ack before the outcome write: %s\nack after it:               %s", summary(before), summary(after))
			}
			if before.Status != StatusSucceeded || wb.prov.sends != 1 || wa.prov.sends != 1 {
				t.Fatalf("%s; sends %d/%d", summary(before), wb.prov.sends, wa.prov.sends)
			}
		})
	}
}

func TestWebhookAckOnPendingIntentStopsTheNextSend(t *testing.T) {
	// A human retried a needs-human intent; then the late ack of the first
	// attempt arrives. The retry must not go out.
	w := newWHRig(Capabilities{}, &UnknownOutcomeError{Err: errors.New("reset")})
	in := w.submit(t)
	mustAttempt(t, w.d, in.ID)
	if _, err := (&Resolver{Store: w.d.Store, Reconcile: w.d, Clock: w.d.Clock}).Resolve(context.Background(), Principal{Kind: PrincipalOperator, Name: "ann"}, in.ID, "",
		Ruling{Decision: DecisionRetry, Reason: "looks lost", AcceptDuplicateRisk: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if res := w.handle(t, w.event(EventAck, ack(in.ID, "ext-1"))); res.Status != StatusPending {
		t.Fatalf("ack on pending: %+v", res)
	}
	if err := attemptID(context.Background(), w.d, in.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	got := w.get(t, in.ID)
	if got.Status != StatusSucceeded || got.ExternalID != "ext-1" || w.prov.sends != 1 {
		t.Fatalf("%s, sends %d", summary(got), w.prov.sends)
	}
}

func TestWebhookUnmatchedEventsAreRecordedUnresolved(t *testing.T) {
	w := newWHRig(Capabilities{})
	in := w.submit(t)
	mustAttempt(t, w.d, in.ID)
	before := w.get(t, in.ID)
	for _, ev := range []ProviderEvent{
		w.event(EventEcho, func(ev *ProviderEvent) { ev.MessageID = "ext-unknown"; ev.Raw = []byte(`{"raw":1}`) }),
		// Another account's identity is not ours to bind.
		w.event(EventAck, func(ev *ProviderEvent) { ev.Account, ev.IntentID, ev.MessageID = "a2", in.ID, "ext-1" }),
		w.event(EventAck, ack("it_nope", "ext-2")),
	} {
		res := w.handle(t, ev)
		if res.Result != WebhookUnresolved || res.IntentID != "" {
			t.Fatalf("%s: %+v", ev.EventID, res)
		}
		rec := w.store.events[evKey(ev.Provider, ev.Account, ev.EventID)]
		if rec.State != EventUnresolved || rec.Reason == "" || rec.Raw != string(ev.Raw) {
			t.Fatalf("record %+v", rec)
		}
		if res := w.handle(t, ev); res.Result != WebhookDuplicate {
			t.Fatalf("replay: %+v", res)
		}
	}
	if got := w.get(t, in.ID); got.Version != before.Version {
		t.Fatal("an unmatched event changed the intent")
	}
	if len(w.inbox.msgs) != 0 || w.prov.sends != 1 {
		t.Fatalf("inbox %d sends %d", len(w.inbox.msgs), w.prov.sends)
	}
}

func TestWebhookEchoNeverProvesSuccess(t *testing.T) {
	w := newWHRig(Capabilities{Lookup: true}, &UnknownOutcomeError{Err: errors.New("timeout")})
	in := w.submit(t)
	mustAttempt(t, w.d, in.ID)
	res := w.handle(t, w.event(EventEcho, func(ev *ProviderEvent) { ev.IntentID, ev.MessageID = in.ID, "ext-1" }))
	if res.Result != WebhookBound || res.Status != StatusUnknownOutcome {
		t.Fatalf("%+v", res)
	}
	if _, ok := ProviderAcknowledged(w.get(t, in.ID)); ok {
		t.Fatal("an echo counted as proof")
	}
}

func TestWebhookInboundForwardedOnceEvenAfterACrash(t *testing.T) {
	w := newWHRig(Capabilities{})
	w.wh.ClaimFor = 10 * time.Second
	ev := w.event(EventInbound, func(ev *ProviderEvent) { ev.Inbound = json.RawMessage(`{"text":"hi"}`) })
	for i := 0; i < 3; i++ {
		res := w.handle(t, ev)
		want := WebhookForwarded
		if i > 0 {
			want = WebhookDuplicate
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
	ev2 := w.event(EventInbound, func(ev *ProviderEvent) { ev.Inbound = json.RawMessage(`{"text":"again"}`) })
	w.inbox.fail = 1
	if _, err := w.wh.Handle(context.Background(), ev2); err == nil {
		t.Fatal("a failed forward must ask for redelivery")
	}
	if _, err := w.wh.Handle(context.Background(), ev2); !errors.Is(err, ErrEventInProgress) {
		t.Fatalf("redelivery inside the claim: %v", err)
	}
	w.clock.Advance(11 * time.Second)
	if res := w.handle(t, ev2); res.Result != WebhookForwarded {
		t.Fatalf("redelivery after the claim: %+v", res)
	}
	if res := w.handle(t, ev2); res.Result != WebhookDuplicate {
		t.Fatalf("after forwarding: %+v", res)
	}
	if len(w.inbox.msgs) != 2 {
		t.Fatalf("inbox %d messages, want 2", len(w.inbox.msgs))
	}
}

func TestWebhookEventValidation(t *testing.T) {
	w := newWHRig(Capabilities{})
	for _, c := range []struct {
		name  string
		ev    ProviderEvent
		field string
	}{
		{"no event id", ProviderEvent{Provider: "fake", Account: "a1", Kind: EventEcho, MessageID: "m"}, "eventId"},
		{"ack without message", ProviderEvent{Provider: "fake", Account: "a1", EventID: "e", Kind: EventAck}, "messageId"},
		{"bad status", ProviderEvent{Provider: "fake", Account: "a1", EventID: "e", Kind: EventStatus, MessageID: "m", Status: "lost"}, "status"},
		{"inbound without body", ProviderEvent{Provider: "fake", Account: "a1", EventID: "e", Kind: EventInbound}, "data"},
		{"long id", ProviderEvent{Provider: "fake", Account: "a1", EventID: strings.Repeat("e", 300), Kind: EventOther}, "eventId"},
	} {
		_, err := w.wh.Handle(context.Background(), c.ev)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if len(w.store.events) != 0 {
		t.Fatal("invalid events were stored")
	}
	if res := w.handle(t, w.event(EventOther, nil)); res.Result != WebhookIgnored {
		t.Fatalf("other: %+v", res)
	}
}

// A failure status (Twilio failed/undelivered, a call's busy/no-answer) is
// evidence on the intent it names and never changes its status; a replay
// changes nothing; a later proof still settles it.
func TestWebhookFailureStatusIsEvidenceOnly(t *testing.T) {
	w := newWHRig(Capabilities{}, &UnknownOutcomeError{Err: errors.New("reset")})
	in := w.submit(t)
	mustAttempt(t, w.d, in.ID)
	before := w.get(t, in.ID)
	if before.Status != StatusNeedsHuman {
		t.Fatalf("setup: %s", before.Status)
	}
	fail := w.event(EventFailure, func(ev *ProviderEvent) { ev.IntentID, ev.MessageID, ev.Status = in.ID, "ext-1", "undelivered" })
	if res := w.handle(t, fail); res.Result != WebhookBound || res.Status != StatusNeedsHuman || res.Reason != "" {
		t.Fatalf("failure: %+v", res)
	}
	got := w.get(t, in.ID)
	e := webhookEntries(got)
	if got.Status != StatusNeedsHuman || got.ExternalID != "" || len(e) != 1 || e[0].Result != ResultFailure || e[0].Evidence.ProviderCode != "undelivered" {
		t.Fatalf("after a failure status: %s ext %q entries %+v", got.Status, got.ExternalID, e)
	}
	if _, ok := ProviderAcknowledged(got); ok || DeliveryStatus(got) != "" {
		t.Fatal("a failure status counted as proof")
	}
	if res := w.handle(t, fail); res.Result != WebhookDuplicate || w.get(t, in.ID).Version != got.Version {
		t.Fatalf("replay: %+v", res)
	}
	// A failure without a status is refused.
	if _, err := w.wh.Handle(context.Background(), w.event(EventFailure, func(ev *ProviderEvent) { ev.MessageID = "ext-1" })); err == nil {
		t.Fatal("a failure status without a status was accepted")
	}
	w.handle(t, w.event(EventStatus, func(ev *ProviderEvent) { ev.IntentID, ev.MessageID, ev.Status = in.ID, "ext-1", DeliveryDelivered }))
	if got := w.get(t, in.ID); got.Status != StatusSucceeded || got.ExternalID != "ext-1" {
		t.Fatalf("proof after the failure: %s %q", got.Status, got.ExternalID)
	}
}
