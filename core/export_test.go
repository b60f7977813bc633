package core

import (
	"context"
	"testing"

	"github.com/botharness/outbox/core/clocktest"
)

// What core's in-memory test doubles offer to the external tests in this
// directory (package core_test): the contract suites in
// store_contract_test.go, and the tests of the packages built on core
// (core/webhook, ...) that drive the real Dispatcher over these fakes. The
// fakes stay test-only: nothing outside core's tests can import them.

func NewMemStoreForContract() IntentStore { return newMemStore() }

func NewMemRegistryForContract() *memRegistry { return newMemRegistry() }

// MemRegistry is the in-memory grant, capability and source store.
type MemRegistry = memRegistry

// Reads counts ReadFacts calls.
func (m *memRegistry) Reads() int { m.mu.Lock(); defer m.mu.Unlock(); return m.reads }

// SetFail makes every registry read fail with err (nil: none fail).
func (m *memRegistry) SetFail(err error) { m.mu.Lock(); defer m.mu.Unlock(); m.fail = err }

// MemStore is the in-memory IntentStore of core's tests.
type MemStore = memStore

// PutIfVersionLocked stores cur if its version is still the stored one (see
// putIfVersion), taking the store's lock.
func (m *memStore) PutIfVersionLocked(cur *Intent) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.putIfVersion(cur)
}

// Puts counts the store's writes.
func (m *memStore) Puts() int { m.mu.Lock(); defer m.mu.Unlock(); return m.puts }

// FakeProvider is the scripted provider of core's tests.
type FakeProvider = fakeProvider

// Sends and Lookups count the provider's calls.
func (p *fakeProvider) Sends() int   { p.mu.Lock(); defer p.mu.Unlock(); return p.sends }
func (p *fakeProvider) Lookups() int { p.mu.Lock(); defer p.mu.Unlock(); return p.lookups }

// Caps is what the provider claims.
func (p *fakeProvider) Caps() Capabilities { return p.caps }

// Rig is newRig for external tests: an Intake and a Dispatcher over the
// in-memory store, queue and provider, on a test clock.
type Rig struct {
	D     *Dispatcher
	In    *Intake
	Store *MemStore
	Prov  *FakeProvider
	Clock *clocktest.Clock
	r     *rig
}

func NewRig(caps Capabilities, script ...error) *Rig {
	r := newRig(caps, script...)
	return &Rig{D: r.d, In: r.in, Store: r.store, Prov: r.prov, Clock: r.clock, r: r}
}

func (r *Rig) Submit(t *testing.T) *Intent         { return r.r.submit(t) }
func (r *Rig) Get(t *testing.T, id string) *Intent { return r.r.get(t, id) }
func (r *Rig) Drain(t *testing.T)                  { r.r.drain(t) }

var MustAttempt = mustAttempt

// The operators' Resolver lives in core/resolve, which imports core, so
// core's internal tests (the model test, history, limits, resend) reach it
// through newResolver, which resolve_hook_test.go (package core_test, same
// test binary) sets before any test runs.
type testResolver interface {
	Resolve(ctx context.Context, p Principal, id, key string, req Ruling) (*Intent, error)
	Recommend(ctx context.Context, p Principal, id string, req Recommendation) (*Intent, error)
}

// ResolverDeps are the Resolver's fields the internal tests set.
type ResolverDeps struct {
	Store     IntentStore
	Pages     HistoryPages
	Reconcile *Dispatcher
	Clock     Clock
}

var newResolver func(ResolverDeps) testResolver

// SetNewResolver installs the Resolver constructor for the internal tests.
func SetNewResolver[R testResolver](f func(ResolverDeps) R) {
	newResolver = func(d ResolverDeps) testResolver { return f(d) }
}
