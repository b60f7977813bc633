package gate

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
	events []Event
	claims map[string]time.Time // Take: claim -> until
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

// Take is GateStore.Take under the store's lock.
func (m *MemoryGates) Take(_ context.Context, key string, r SlotTake) (time.Time, GateState, bool, error) {
	if err := r.Valid(); err != nil {
		return time.Time{}, GateState{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gate(key)
	if r.Claim != "" {
		if exp, ok := g.claims[r.Claim]; ok && exp.After(r.At) {
			return time.Time{}, copyState(g.st), true, nil
		}
		if g.claims == nil {
			g.claims = map[string]time.Time{}
		}
		for c, exp := range g.claims {
			if !exp.After(r.At) {
				delete(g.claims, c)
			}
		}
		g.claims[r.Claim] = r.Until
	}
	slot := g.tat
	if slot.IsZero() || slot.Before(r.Floor) {
		slot = r.At
	}
	g.tat = slot.Add(r.Interval)
	return slot, copyState(g.st), false, nil
}

func (m *MemoryGates) State(_ context.Context, key string) (GateState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g, ok := m.gates[key]; ok {
		return copyState(g.st), nil
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

func (m *MemoryGates) Open(_ context.Context, key string, until time.Time, reopen bool, ev Event) (bool, error) {
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

func (m *MemoryGates) Close(_ context.Context, key string, ev Event) (bool, error) {
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

func (m *MemoryGates) Events(_ context.Context, key string, limit int) ([]Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.gates[key]
	if !ok {
		return nil, nil
	}
	out := append([]Event(nil), g.events...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
