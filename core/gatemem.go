package core

import (
	"context"
	"sort"
	"sync"
	"time"
)

// MemoryGates is an in-process GateStore: the fake for core's tests and the
// reference the DynamoDB adapter's contract test holds it to. Every worker
// that shares one value shares its gates.
type MemoryGates struct {
	mu    sync.Mutex
	gates map[string]*memGate
}

type memGate struct {
	tat    time.Time
	st     GateState
	events []OperatorEvent
	claims map[string]time.Time // ReserveOnce: claim -> until
}

var _ GateStore = (*MemoryGates)(nil)

// NewMemoryGates returns an empty store.
func NewMemoryGates() *MemoryGates { return &MemoryGates{gates: map[string]*memGate{}} }

func (m *MemoryGates) gate(key string) *memGate {
	g, ok := m.gates[key]
	if !ok {
		g = &memGate{}
		m.gates[key] = g
	}
	return g
}

func tp(t time.Time) *time.Time { return &t }

func copyState(st GateState) GateState {
	out := st
	if st.Override != nil {
		o := *st.Override
		out.Override = &o
	}
	return out
}

func (m *MemoryGates) Reserve(_ context.Context, key string, interval time.Duration) (time.Time, GateState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gate(key)
	slot := g.tat
	if slot.IsZero() {
		slot = time.Unix(0, 0)
	}
	g.tat = slot.Add(interval)
	return slot, copyState(g.st), nil
}

func (m *MemoryGates) ReserveOnce(ctx context.Context, key string, interval time.Duration, claim string, now, until time.Time) (time.Time, GateState, bool, error) {
	m.mu.Lock()
	g := m.gate(key)
	if exp, ok := g.claims[claim]; ok && exp.After(now) {
		st := copyState(g.st)
		m.mu.Unlock()
		return time.Time{}, st, true, nil
	}
	if g.claims == nil {
		g.claims = map[string]time.Time{}
	}
	for c, exp := range g.claims {
		if !exp.After(now) {
			delete(g.claims, c)
		}
	}
	g.claims[claim] = until
	m.mu.Unlock()
	slot, st, err := m.Reserve(ctx, key, interval)
	return slot, st, false, err
}

func (m *MemoryGates) CatchUp(_ context.Context, key string, now, next time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gate(key)
	if g.tat.After(now) {
		return false, nil
	}
	g.tat = next
	return true, nil
}

func (m *MemoryGates) State(_ context.Context, key string) (GateState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g, ok := m.gates[key]; ok {
		st := copyState(g.st)
		if !g.tat.IsZero() {
			st.NextSlot = tp(g.tat)
		}
		return st, nil
	}
	return GateState{}, nil
}

// StateFor is State: one store, no replicas.
func (m *MemoryGates) StateFor(ctx context.Context, key, _ string, _ time.Time) (GateState, error) {
	return m.State(ctx, key)
}

func (m *MemoryGates) Pause(_ context.Context, key string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gate(key)
	if g.st.PausedUntil == nil || g.st.PausedUntil.Before(until) {
		g.st.PausedUntil = tp(until)
	}
	if g.tat.Before(until) {
		g.tat = until
	}
	return nil
}

func (m *MemoryGates) Failure(_ context.Context, key string) (GateState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gate(key)
	g.st.Breaker.Failures++
	return copyState(g.st), nil
}

func (m *MemoryGates) Open(_ context.Context, key string, until time.Time, reopen bool, ev OperatorEvent) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gate(key)
	b := &g.st.Breaker
	if b.Open != reopen {
		return false, nil
	}
	b.Opens++
	b.OpenUntil, b.ProbeUntil = tp(until), nil
	if !reopen {
		b.Open, b.OpenedAt = true, tp(ev.At)
		g.events = append(g.events, ev)
	}
	return true, nil
}

func (m *MemoryGates) TakeProbe(_ context.Context, key string, now, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &m.gate(key).st.Breaker
	if !b.Open || (b.OpenUntil != nil && now.Before(*b.OpenUntil)) || (b.ProbeUntil != nil && now.Before(*b.ProbeUntil)) {
		return false, nil
	}
	b.ProbeUntil = tp(until)
	return true, nil
}

func (m *MemoryGates) Close(_ context.Context, key string, ev OperatorEvent) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gate(key)
	b := &g.st.Breaker
	b.Failures = 0
	if !b.Open {
		return false, nil
	}
	b.Open, b.Opens, b.OpenUntil, b.ProbeUntil, b.ClosedAt = false, 0, nil, nil, tp(ev.At)
	g.events = append(g.events, ev)
	return true, nil
}

func (m *MemoryGates) SetOverride(_ context.Context, key string, o *PaceOverride) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o != nil {
		c := *o
		o = &c
	}
	m.gate(key).st.Override = o
	return nil
}

func (m *MemoryGates) Events(_ context.Context, key string, limit int) ([]OperatorEvent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.gates[key]
	if !ok {
		return nil, nil
	}
	out := append([]OperatorEvent(nil), g.events...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
