package providers_test

// End-to-end at the core level: core.Dispatcher with an in-memory store and
// queue, the real adapters, and their provider fakes. The assertions count
// the side effects the fake provider really performed, not local calls.
//
// Provider documentation the fakes reproduce:
//   - Slack chat.postMessage: https://api.slack.com/methods/chat.postMessage
//   - Slack conversations.history: https://docs.slack.dev/reference/methods/conversations.history
//   - Slack message metadata: https://docs.slack.dev/messaging/message-metadata
//   - Telegram sendMessage: https://core.telegram.org/bots/api#sendmessage
//   - Standard Webhooks: https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/httpsigned"
	"github.com/botharness/outbox/adapters/providers/slack"
	"github.com/botharness/outbox/adapters/providers/telegram"
	"github.com/botharness/outbox/core"

	"github.com/botharness/outbox/core/clocktest"
)

// memStore is an IntentStore in memory; every read and write copies through
// JSON so the dispatcher never shares memory with the store.
type memStore struct {
	mu    sync.Mutex
	items map[string][]byte
}

func newMemStore() *memStore { return &memStore{items: map[string][]byte{}} }

func decode(b []byte) *core.Intent {
	var in core.Intent
	if err := json.Unmarshal(b, &in); err != nil {
		panic(err)
	}
	return &in
}

func (m *memStore) Create(_ context.Context, in *core.Intent) (*core.Intent, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.items[in.ID]; ok {
		return decode(b), false, nil
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, false, err
	}
	m.items[in.ID] = b
	return nil, true, nil
}

func (m *memStore) Get(_ context.Context, id string) (*core.Intent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.items[id]
	if !ok {
		return nil, fmt.Errorf("intent %s: %w", id, core.ErrNotFound)
	}
	return decode(b), nil
}

func (m *memStore) Claim(ctx context.Context, id string, mutate func(*core.Intent) error) (*core.Intent, error) {
	return m.Update(ctx, id, mutate)
}

func (m *memStore) Update(_ context.Context, id string, mutate func(*core.Intent) error) (*core.Intent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.items[id]
	if !ok {
		return nil, fmt.Errorf("intent %s: %w", id, core.ErrNotFound)
	}
	in := decode(b)
	if err := mutate(in); err != nil {
		return nil, err
	}
	in.Version++
	nb, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	m.items[id] = nb
	return decode(nb), nil
}

// memQueue records retry-queue messages.
type memQueue struct {
	mu   sync.Mutex
	msgs []queued
}

type queued struct {
	msg   core.RetryMessage
	delay time.Duration
}

func (q *memQueue) Enqueue(_ context.Context, msg core.RetryMessage, delay time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, queued{msg, delay})
	return nil
}

// pop takes the oldest message.
func (q *memQueue) pop(t *testing.T) queued {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) == 0 {
		t.Fatal("retry queue is empty")
	}
	m := q.msgs[0]
	q.msgs = q.msgs[1:]
	return m
}

func (q *memQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}

type fakeClock = clocktest.Clock

type world struct {
	clock *fakeClock
	store *memStore
	queue *memQueue
	d     *core.Dispatcher
}

func newWorld(t *testing.T, clock *fakeClock, p core.Provider) *world {
	t.Helper()
	w := &world{clock: clock, store: newMemStore(), queue: &memQueue{}}
	w.d = &core.Dispatcher{
		Store: w.store, Queue: w.queue, Providers: core.ProviderMap{p.Name(): p}, Clock: core.ClockFunc(clock.Now),
		Policy: core.AttemptPolicy{Lease: time.Minute,
			Backoff:   core.BackoffPolicy{Base: 2 * time.Second, Cap: time.Minute, MaxAttempts: 5, MaxAge: time.Hour},
			Reconcile: core.ReconcilePolicy{Delay: 5 * time.Second, Window: 15 * time.Minute, Settle: 2 * time.Minute}},
		Owner: "worker-1",
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	return w
}

func (w *world) intent(t *testing.T, provider, account, action, target, payload string) *core.Intent {
	t.Helper()
	now := w.clock.Now()
	key := fmt.Sprintf("key-%s-%d", provider, now.UnixNano())
	in := &core.Intent{
		ID: core.IntentID("bot-1", key), Bot: "bot-1", IdempotencyKey: key, Kind: core.KindAction,
		Provider: provider, Account: account, Action: action, Target: target,
		Payload: json.RawMessage(payload), PayloadHash: core.HashBytes([]byte(payload)),
		Status: core.StatusPending, Version: 1, CreatedAt: now, UpdatedAt: now, Attempts: []core.Attempt{},
	}
	if _, created, err := w.store.Create(context.Background(), in); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	return in
}

// attempt makes the stream's attempt of the intent.
func (w *world) attempt(t *testing.T, id string) {
	t.Helper()
	if _, err := w.d.Attempt(context.Background(), core.AttemptRequest{ID: id, Trigger: "stream"}); err != nil {
		t.Fatal(err)
	}
}

// newSlackFake is the fake Slack with workspace T1's bot token (bot B1) and
// channel C1, on a fake clock.
func newSlackFake(t *testing.T) (*fakeClock, *fakes.Slack) {
	clock := clocktest.New(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	fk := fakes.NewSlack(t, clock.Now)
	fk.AddToken("xoxb-e2e", "T1", "B1")
	fk.AddChannel("C1")
	return clock, fk
}

// slackWorld is the core wired to the Slack adapter on fk's workspace T1.
func slackWorld(t *testing.T, clock *fakeClock, fk *fakes.Slack) *world {
	t.Helper()
	p, err := slack.New(nil, slack.Config{BaseURL: fk.URL(), Now: clock.Now, Timeout: 2 * time.Second,
		Accounts: map[string]slack.Account{"T1": {Token: "xoxb-e2e", BotID: "B1"}}})
	if err != nil {
		t.Fatal(err)
	}
	return newWorld(t, clock, p)
}

func (w *world) get(t *testing.T, id string) *core.Intent {
	t.Helper()
	in, err := w.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// runQueue delivers queued messages (advancing the clock by each delay) until
// the queue is empty or max messages were handled.
func (w *world) runQueue(t *testing.T, max int) {
	t.Helper()
	for i := 0; i < max && w.queue.len() > 0; i++ {
		m := w.queue.pop(t)
		w.clock.Advance(m.delay)
		if err := w.d.HandleRetry(context.Background(), m.msg); err != nil {
			t.Fatalf("HandleRetry: %v", err)
		}
	}
}

func results(in *core.Intent) []string {
	var out []string
	for _, a := range in.Attempts {
		out = append(out, fmt.Sprintf("%d:%s:%s", a.N, a.Trigger, a.Result))
	}
	return out
}

// Slack: the response to chat.postMessage is lost after Slack posted the
// message. The core routes the attempt to unknown-outcome, reconciles through
// conversations.history, finds the message by its metadata, and records
// success with the message ts. Slack saw exactly one chat.postMessage effect.
func TestE2ESlackLostResponseReconciledThroughHistory(t *testing.T) {
	clock, fk := newSlackFake(t)
	fk.AddMessage("C1", fakes.SlackMessage{Text: "earlier chatter", User: "U7"})
	w := slackWorld(t, clock, fk)
	in := w.intent(t, slack.Name, "T1", "send_message", "C1", `{"text":"deploy finished"}`)

	fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
	w.attempt(t, in.ID)
	got := w.get(t, in.ID)
	if got.Status != core.StatusUnknownOutcome {
		t.Fatalf("after the lost response: %s (%s)", got.Status, got.StatusReason)
	}
	if fk.Posts() != 1 {
		t.Fatalf("%d posts after the attempt, want 1", fk.Posts())
	}
	w.runQueue(t, 10)
	got = w.get(t, in.ID)
	msgs := fk.Messages("C1")
	ours := msgs[len(msgs)-1]
	if got.Status != core.StatusSucceeded || got.ExternalID != ours.TS {
		t.Fatalf("final %s external %q (want succeeded %q); attempts %v", got.Status, got.ExternalID, ours.TS, results(got))
	}
	if fk.Posts() != 1 || fk.PostsWithMetadata("intent_id", in.ID) != 1 {
		t.Fatalf("Slack performed %d posts (%d for the intent), want exactly 1", fk.Posts(), fk.PostsWithMetadata("intent_id", in.ID))
	}
	if fk.HistoryCalls() == 0 {
		t.Fatal("no history read")
	}
	if r := results(got); len(r) != 2 || r[0] != "1:stream:unknown-outcome" || r[1] != "1:reconcile:lookup-found" {
		t.Fatalf("attempt history %v", r)
	}
}

// Slack: a 503 service_unavailable is ambiguous (it may have been posted),
// but here nothing was. History says absent, which is only trusted once the
// original request can no longer land (ReconcilePolicy.Settle); then the
// core sends again and succeeds. One post in total.
func TestE2ESlackAmbiguousFailureAbsentThenRetried(t *testing.T) {
	clock, fk := newSlackFake(t)
	w := slackWorld(t, clock, fk)
	in := w.intent(t, slack.Name, "T1", "send_message", "C1", `{"text":"hello"}`)
	fk.Inject(fakes.Fault{Kind: fakes.Unavailable})
	w.attempt(t, in.ID)
	if got := w.get(t, in.ID); got.Status != core.StatusUnknownOutcome || fk.Posts() != 0 {
		t.Fatalf("after 503: %s, %d posts", got.Status, fk.Posts())
	}
	// Poll until settled, then retry: the queue drives it.
	w.runQueue(t, 100)
	got := w.get(t, in.ID)
	if got.Status != core.StatusSucceeded || fk.Posts() != 1 || got.ExternalID == "" {
		t.Fatalf("final %s, %d posts, external %q; attempts %v", got.Status, fk.Posts(), got.ExternalID, results(got))
	}
	if got.AttemptCount != 2 {
		t.Fatalf("attempts %d, want 2", got.AttemptCount)
	}
}

// Telegram: the same lost response. The Bot API offers neither idempotency
// keys nor lookup, so the core stops: needs-human with the evidence, nothing
// queued, and Telegram sent exactly one message.
func TestE2ETelegramLostResponseNeedsHuman(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	fk := fakes.NewTelegram(t, clock.Now)
	fk.AddBot("123456:e2e", 123456)
	fk.AddChat(42, "private")
	p, err := telegram.New(nil, telegram.Config{BaseURL: fk.URL(), Now: clock.Now, Timeout: 2 * time.Second,
		Accounts: map[string]telegram.Account{"bot1": {Token: "123456:e2e"}}})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, clock, p)
	in := w.intent(t, telegram.Name, "bot1", "send_message", "42", `{"text":"your order shipped"}`)
	fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
	w.attempt(t, in.ID)
	got := w.get(t, in.ID)
	if got.Status != core.StatusNeedsHuman {
		t.Fatalf("status %s (%s), want needs-human", got.Status, got.StatusReason)
	}
	if w.queue.len() != 0 {
		t.Fatalf("%d queued messages; nothing may be retried automatically", w.queue.len())
	}
	if fk.Sends() != 1 {
		t.Fatalf("Telegram sent %d messages, want exactly 1", fk.Sends())
	}
	if r := results(got); len(r) != 1 || r[0] != "1:stream:unknown-outcome" || got.Attempts[0].Evidence.Detail == "" {
		t.Fatalf("attempt history %v, evidence %+v", r, got.Attempts[0].Evidence)
	}
	// A redelivered stream record or a stale retry message does nothing.
	w.attempt(t, in.ID)
	if err := w.d.HandleRetry(context.Background(), core.RetryMessage{IntentID: in.ID, Attempt: 1, Op: core.OpAttempt}); err != nil {
		t.Fatal(err)
	}
	if fk.Sends() != 1 || w.get(t, in.ID).Status != core.StatusNeedsHuman {
		t.Fatalf("after duplicate triggers: %d sends, %s", fk.Sends(), w.get(t, in.ID).Status)
	}
}

// Generic signed HTTP to a receiver that declares idempotency keys: the lost
// response is retried with the same key and replayed by the receiver. One
// effect.
func TestE2EHTTPLostResponseRetriedUnderKey(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	sec := newSecret(t)
	rc := fakes.NewReceiver(t, fakes.ReceiverOptions{Secret: sec, HonoursKeys: true, Retention: 24 * time.Hour, Now: clock.Now})
	p, err := httpsigned.New(nil, httpsigned.Config{Now: clock.Now, Timeout: 2 * time.Second, Accounts: map[string]httpsigned.Account{
		"acct": {URL: rc.URL(), Secret: sec, HonoursKeys: true, KeyRetentionSeconds: 86400}}})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, clock, p)
	in := w.intent(t, httpsigned.Name, "acct", "order.created", "orders", `{"order":42}`)
	rc.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
	w.attempt(t, in.ID)
	if got := w.get(t, in.ID); got.Status != core.StatusRetryableFailure {
		t.Fatalf("after the lost response: %s (%s)", got.Status, got.StatusReason)
	}
	w.runQueue(t, 10)
	got := w.get(t, in.ID)
	if got.Status != core.StatusSucceeded || got.ExternalID != "rcv_1" || rc.EffectsFor(in.ID) != 1 || rc.Effects() != 1 {
		t.Fatalf("final %s external %q, %d effects; attempts %v", got.Status, got.ExternalID, rc.Effects(), results(got))
	}
	if rc.BadSignatures() != 0 {
		t.Fatalf("%d deliveries failed signature verification", rc.BadSignatures())
	}
}
