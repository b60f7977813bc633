// Package ttlcache keeps read-mostly lookups on the request path (the bearer
// token's principal, the intent's grant at intake) in memory for a few
// seconds. Only paths that a later, authoritative check covers are cached:
// the dispatcher re-reads the grant with a strongly consistent read before
// every attempt, so a grant revoked within the TTL can still be accepted at
// intake but never sent.
package ttlcache

import (
	"context"
	"sync"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
)

// Cache is a small TTL map. Entries are only added on success, so failures
// and "not found" are always asked again.
type Cache[K comparable, V any] struct {
	mu      sync.Mutex
	ttl     time.Duration
	now     func() time.Time
	entries map[K]entry[V]
	max     int
}

type entry[V any] struct {
	v   V
	exp time.Time
}

// New returns a cache holding at most max entries for ttl each.
func New[K comparable, V any](ttl time.Duration, max int, now func() time.Time) *Cache[K, V] {
	if now == nil {
		now = time.Now
	}
	return &Cache[K, V]{ttl: ttl, now: now, entries: map[K]entry[V]{}, max: max}
}

// Get returns the value for k, loading it on a miss or after expiry.
func (c *Cache[K, V]) Get(k K, load func() (V, error)) (V, error) {
	now := c.now()
	c.mu.Lock()
	if e, ok := c.entries[k]; ok && now.Before(e.exp) {
		c.mu.Unlock()
		return e.v, nil
	}
	c.mu.Unlock()
	v, err := load()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if len(c.entries) >= c.max {
		// Crude but bounded: drop everything expired, else everything.
		for key, e := range c.entries {
			if !now.Before(e.exp) {
				delete(c.entries, key)
			}
		}
		if len(c.entries) >= c.max {
			c.entries = map[K]entry[V]{}
		}
	}
	c.entries[k] = entry[V]{v: v, exp: now.Add(c.ttl)}
	c.mu.Unlock()
	return v, nil
}

// Tokens caches token records by token hash. The record carries its
// expiry, which auth.AuthenticateAt checks on every request, so a cached
// token expires on time; a revocation is seen once the entry is read again,
// at most TTL after it was cached.
type Tokens struct {
	auth.TokenStore
	cache *Cache[string, auth.Token]
}

var _ auth.TokenStore = (*Tokens)(nil)

// NewTokens wraps a token store.
func NewTokens(inner auth.TokenStore, ttl time.Duration) *Tokens {
	return &Tokens{TokenStore: inner, cache: New[string, auth.Token](ttl, 10000, nil)}
}

// LookupToken answers from the cache when it can.
func (t *Tokens) LookupToken(ctx context.Context, hash string) (auth.Token, error) {
	return t.cache.Get(hash, func() (auth.Token, error) { return t.TokenStore.LookupToken(ctx, hash) })
}

// Grants caches grant reads for intake.
type Grants struct {
	inner core.GrantReader
	cache *Cache[string, *core.Grant]
}

var _ core.GrantReader = (*Grants)(nil)

// NewGrants wraps a grant reader.
func NewGrants(inner core.GrantReader, ttl time.Duration) *Grants {
	return &Grants{inner: inner, cache: New[string, *core.Grant](ttl, 10000, nil)}
}

// GetGrant answers from the cache when it can.
func (g *Grants) GetGrant(ctx context.Context, id string) (*core.Grant, error) {
	return g.cache.Get(id, func() (*core.Grant, error) { return g.inner.GetGrant(ctx, id) })
}
