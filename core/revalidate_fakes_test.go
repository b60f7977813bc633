package core

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// memRegistry is an in-memory GrantStore, CapabilityStore, SourceStore and
// FactReader with the adapter's conditional semantics.
type memRegistry struct {
	mu      sync.Mutex
	grants  map[string]Grant
	caps    map[string]Capability
	sources map[string]SourceState
	reads   int // ReadFacts calls (one BatchGetItem each in the adapter)
	fail    error
}

func newMemRegistry() *memRegistry {
	return &memRegistry{grants: map[string]Grant{}, caps: map[string]Capability{}, sources: map[string]SourceState{}}
}

func (m *memRegistry) GetGrant(_ context.Context, id string) (*Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.grants[id]
	if !ok {
		return nil, fmt.Errorf("grant %s: %w", id, ErrNotFound)
	}
	return &g, nil
}

func (m *memRegistry) PutGrant(_ context.Context, g *Grant, expected int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grants[g.ID].Version != expected {
		return ErrConflict
	}
	m.grants[g.ID] = *g
	return nil
}

// ListGrants pages by id; the cursor is the last id of the previous page.
func (m *memRegistry) ListGrants(_ context.Context, bot, cursor string, limit int) ([]*Grant, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := slices.Sorted(maps.Keys(m.grants))
	var out []*Grant
	for _, id := range ids {
		g := m.grants[id]
		if id <= cursor || (bot != "" && g.Bot != bot) {
			continue
		}
		if len(out) == limit {
			return out, out[len(out)-1].ID, nil
		}
		out = append(out, &g)
	}
	return out, "", nil
}

func (m *memRegistry) GetCapability(_ context.Context, provider, account string) (*Capability, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.caps[provider+"/"+account]
	if !ok {
		return nil, ErrNotFound
	}
	return &c, nil
}

func (m *memRegistry) PutCapability(_ context.Context, c *Capability, expected int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := c.Provider + "/" + c.Account
	if m.caps[k].Version != expected {
		return ErrConflict
	}
	m.caps[k] = *c
	return nil
}

func (m *memRegistry) AdvanceSource(_ context.Context, bot, id string, revision *int64, deleted bool, now time.Time) (*SourceState, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := bot + "#" + id
	cur, exists := m.sources[k]
	applied := false
	if revision != nil && (!exists || cur.Revision < *revision) {
		cur = SourceState{Bot: bot, ID: id, Revision: *revision, Deleted: cur.Deleted || deleted, UpdatedAt: now}
		applied = true
	}
	if deleted && !cur.Deleted {
		cur.Bot, cur.ID, cur.Deleted, cur.UpdatedAt = bot, id, true, now
		applied = true
	}
	if applied {
		m.sources[k] = cur
	}
	return &cur, applied, nil
}

func (m *memRegistry) ReadFacts(_ context.Context, in *Intent) (RevalidationFacts, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.fail != nil {
		return RevalidationFacts{}, m.fail
	}
	var f RevalidationFacts
	if g, ok := m.grants[in.Grant.ID]; ok {
		f.Grant = &g
	}
	if c, ok := m.caps[in.Provider+"/"+in.Account]; ok {
		f.Capability = &c
	}
	if in.Source != nil {
		if s, ok := m.sources[in.Bot+"#"+in.Source.ID]; ok {
			f.Source = &s
		}
	}
	return f, nil
}
