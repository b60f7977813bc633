package core

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// memStore is an in-memory IntentStore with the same optimistic semantics
// as the DynamoDB adapter.
type memStore struct {
	mu    sync.Mutex
	items map[string][]byte
	puts  int
}

func newMemStore() *memStore { return &memStore{items: map[string][]byte{}} }

func (m *memStore) Create(_ context.Context, in *Intent) (*Intent, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.items[in.ID]; ok {
		var ex Intent
		_ = json.Unmarshal(b, &ex)
		return &ex, false, nil
	}
	b, _ := json.Marshal(in)
	m.items[in.ID] = b
	m.puts++
	return in, true, nil
}

func (m *memStore) Get(_ context.Context, id string) (*Intent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.items[id]
	if !ok {
		return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	var in Intent
	_ = json.Unmarshal(b, &in)
	return &in, nil
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
	var now Intent
	_ = json.Unmarshal(m.items[id], &now)
	if now.Version != cur.Version {
		return nil, ErrConflict
	}
	cur.Version++
	b, _ := json.Marshal(cur)
	m.items[id] = b
	m.puts++
	return cur, nil
}

// Claim is Update: the in-memory store has no backup barrier.
func (m *memStore) Claim(ctx context.Context, id string, mutate func(*Intent) error) (*Intent, error) {
	return m.Update(ctx, id, mutate)
}

func (m *memStore) ListByStatus(_ context.Context, status Status, dueBefore time.Time, limit int) ([]*Intent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Intent
	for _, b := range m.items {
		var in Intent
		_ = json.Unmarshal(b, &in)
		if in.Status == status {
			out = append(out, &in)
		}
	}
	return out, nil
}

func (m *memStore) CountByStatus(ctx context.Context, status Status) (int, error) {
	l, err := m.ListByStatus(ctx, status, time.Time{}, 0)
	return len(l), err
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

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
