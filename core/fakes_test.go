package core

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/core/clocktest"
)

// memStore is an in-memory IntentStore with the same optimistic semantics
// as the DynamoDB adapter; the IntentStore contract suite (core/storetest)
// runs against both (store_contract_test.go). Reads and writes copy, so a
// caller never shares memory with the store.
type memStore struct {
	mu    sync.Mutex
	items map[string]*Intent
	puts  int
	// pages holds history pages moved out of each intent, as written.
	pages map[string][]HistoryPage
	// The repair index: entries are the intents' RepairAt; one shard, and
	// the checkpoint (due time, id) the sweeper has read up to.
	repairDelay time.Duration
	wmAt        time.Time
	wmID        string
	// onCreate, when set, runs inside every Create (a put's latency, a
	// race at the put).
	onCreate func()
}

func newMemStore() *memStore {
	return &memStore{items: map[string]*Intent{}, pages: map[string][]HistoryPage{}}
}

func (m *memStore) Create(_ context.Context, in *Intent) (*Intent, bool, error) {
	if m.onCreate != nil {
		m.onCreate()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ex, ok := m.items[in.ID]; ok {
		return cloneIntent(ex), false, nil
	}
	in.RepairAt = NextRepairCheck("", in, in.CreatedAt, RepairPolicy{Delay: m.repairDelay})
	m.items[in.ID] = cloneIntent(in)
	m.puts++
	return in, true, nil
}

func (m *memStore) Get(_ context.Context, id string) (*Intent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, ok := m.items[id]
	if !ok {
		return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	return cloneIntent(in), nil
}

func (m *memStore) Update(ctx context.Context, id string, mutate func(*Intent) error) (*Intent, error) {
	cur, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := mutate(cur); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.putIfVersion(cur) {
		return nil, fmt.Errorf("intent %s: %w", id, ErrConflict)
	}
	return cur, nil
}

// putIfVersion stores cur with version+1 if the stored version is still the
// one cur was read at. The caller holds m.mu.
func (m *memStore) putIfVersion(cur *Intent) bool {
	if m.items[cur.ID].Version != cur.Version {
		return false
	}
	if before := m.items[cur.ID].Status; cur.Status != before {
		cur.RepairAt = NextRepairCheck(before, cur, cur.UpdatedAt, RepairPolicy{Delay: m.repairDelay})
	}
	cur.Version++
	m.pages[cur.ID] = append(m.pages[cur.ID], cur.TakeSpill()...)
	m.items[cur.ID] = cloneIntent(cur)
	m.puts++
	return true
}

// HistoryPages returns the moved pages from..to, as written.
func (m *memStore) HistoryPages(_ context.Context, id string, from, to int) ([]HistoryPage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []HistoryPage
	for _, p := range m.pages[id] {
		if p.Seq >= from && p.Seq <= to {
			out = append(out, p)
		}
	}
	return out, nil
}

// Claim is Update: the in-memory store has no backup barrier.
func (m *memStore) Claim(ctx context.Context, id string, mutate func(*Intent) error) (*Intent, error) {
	return m.Update(ctx, id, mutate)
}

func (m *memStore) ListByStatus(_ context.Context, status Status) []*Intent {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Intent
	for _, in := range m.items {
		if in.Status == status {
			out = append(out, cloneIntent(in))
		}
	}
	return out
}

func (m *memStore) RepairShards() int { return 1 }

func repairAfter(at time.Time, id string, wmAt time.Time, wmID string) bool {
	return at.After(wmAt) || (at.Equal(wmAt) && id > wmID)
}

// DueRepairs mirrors the DynamoDB adapter: entries of intents not with a
// human (terminal ones included: dead entries stay) in (due, id) order
// after the checkpoint.
func (m *memStore) DueRepairs(_ context.Context, _ int, upTo time.Time, limit int) ([]*Intent, []string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Intent
	for id, in := range m.items {
		at := in.RepairAt
		if at.IsZero() || at.After(upTo) || !repairAfter(at, id, m.wmAt, m.wmID) || in.Status == StatusNeedsHuman {
			continue
		}
		out = append(out, cloneIntent(in))
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].RepairAt.Equal(out[j].RepairAt) {
			return out[i].RepairAt.Before(out[j].RepairAt)
		}
		return out[i].ID < out[j].ID
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	pos := make([]string, len(out))
	for i, in := range out {
		pos[i] = in.RepairAt.Format(time.RFC3339Nano) + "|" + in.ID
	}
	return out, pos, nil
}

func (m *memStore) AdvanceRepairs(_ context.Context, _ int, pos string) error {
	at, id, _ := strings.Cut(pos, "|")
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if repairAfter(t, id, m.wmAt, m.wmID) {
		m.wmAt, m.wmID = t, id
	}
	return nil
}

// ListPage mirrors the DynamoDB adapter's admin list: needs-human intents
// in (hand-off due time, id) order; the cursor is the last one shown.
func (m *memStore) ListPage(ctx context.Context, status Status, cursor string, limit int) ([]*Intent, string, error) {
	if status != StatusNeedsHuman {
		return nil, "", &ValidationError{Code: CodeInvalidField, Field: "status", Message: "only needs-human intents are listed"}
	}
	var afterAt time.Time
	var afterID string
	if cursor != "" {
		at, id, _ := strings.Cut(cursor, "|")
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return nil, "", InvalidCursor("not valid for this listing")
		}
		afterAt, afterID = t, id
	}
	all := m.ListByStatus(ctx, StatusNeedsHuman)
	sort.Slice(all, func(i, j int) bool {
		if !all[i].RepairAt.Equal(all[j].RepairAt) {
			return all[i].RepairAt.Before(all[j].RepairAt)
		}
		return all[i].ID < all[j].ID
	})
	var out []*Intent
	for _, in := range all {
		if cursor == "" || repairAfter(in.RepairAt, in.ID, afterAt, afterID) {
			out = append(out, in)
		}
	}
	if len(out) <= limit {
		return out, "", nil
	}
	out = out[:limit]
	last := out[len(out)-1]
	return out, last.RepairAt.Format(time.RFC3339Nano) + "|" + last.ID, nil
}

func (m *memStore) CountNeedsHuman(ctx context.Context, bound int) (int, bool, error) {
	return len(m.ListByStatus(ctx, StatusNeedsHuman)), true, nil
}

// cloneIntent is a deep copy.
func cloneIntent(in *Intent) *Intent {
	c := *in
	c.Payload = slices.Clone(in.Payload)
	c.Metadata = slices.Clone(in.Metadata)
	if in.Source != nil {
		s := *in.Source
		c.Source = &s
	}
	c.Deadline = cloneTime(in.Deadline)
	c.FirstAttemptAt = cloneTime(in.FirstAttemptAt)
	c.NextAttemptAt = cloneTime(in.NextAttemptAt)
	if in.Lease != nil {
		l := *in.Lease
		c.Lease = &l
	}
	if in.Attempts != nil {
		c.Attempts = make([]Attempt, len(in.Attempts))
		for i, a := range in.Attempts {
			a.Evidence.Extra = maps.Clone(a.Evidence.Extra)
			if a.Checks != nil {
				ch := *a.Checks
				a.Checks = &ch
			}
			a.NextDueAt = cloneTime(a.NextDueAt)
			c.Attempts[i] = a
		}
	}
	c.Resolutions = slices.Clone(in.Resolutions)
	if in.History != nil {
		h := *in.History
		c.History = &h
	}
	c.Spill = nil
	return &c
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

type sentMsg struct {
	msg   RetryMessage
	delay time.Duration
}

type memQueue struct {
	mu   sync.Mutex
	msgs []sentMsg
}

func (q *memQueue) Enqueue(_ context.Context, msg RetryMessage, delay time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, sentMsg{msg, delay})
	return nil
}

func (q *memQueue) take() []sentMsg {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.msgs
	q.msgs = nil
	return out
}

// fakeProvider answers Send from a script of errors and counts calls.
type fakeProvider struct {
	mu      sync.Mutex
	caps    Capabilities
	script  []error
	sends   int
	lookup  LookupResult
	lookErr error
	lookups int
	// payloads are the payload bytes of every Send, in order.
	payloads [][]byte
}

func (p *fakeProvider) Name() string                 { return "fake" }
func (p *fakeProvider) SupportsAction(a string) bool { return a == "send" }
func (p *fakeProvider) Capabilities(context.Context, string, string) (Capabilities, error) {
	return p.caps, nil
}
func (p *fakeProvider) Send(_ context.Context, r SendRequest) (SendResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sends++
	p.payloads = append(p.payloads, append([]byte(nil), r.Payload...))
	if len(p.script) > 0 {
		err := p.script[0]
		p.script = p.script[1:]
		if err != nil {
			return SendResult{}, err
		}
	}
	return SendResult{ExternalID: fmt.Sprintf("ext-%d", p.sends)}, nil
}
func (p *fakeProvider) Lookup(context.Context, SendRequest) (LookupResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lookups++
	return p.lookup, p.lookErr
}

type fakeClock = clocktest.Clock

// mustAttempt makes one attempt (trigger "stream") and fails the test on an
// error: an attempt's outcome is recorded on the intent, so an error means
// the store or the queue failed.
func mustAttempt(t *testing.T, d *Dispatcher, id string) {
	t.Helper()
	if err := attemptID(context.Background(), d, id, "stream"); err != nil {
		t.Fatalf("attempt %s: %v", id, err)
	}
}

// attemptID makes the attempt of id as trigger asks, through the one entry.
func attemptID(ctx context.Context, d *Dispatcher, id string, trigger Trigger) error {
	_, err := d.Attempt(ctx, AttemptRequest{ID: id, Trigger: trigger})
	return err
}
