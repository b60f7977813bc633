package core_test

import (
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/resolve"
)

// core's internal tests decide through the real Resolver (core/resolve),
// which they cannot import: it imports core. See export_test.go.
func init() {
	core.SetNewResolver(func(d core.ResolverDeps) *resolve.Resolver {
		return &resolve.Resolver{Store: d.Store, Pages: d.Pages, Reconcile: d.Reconcile, Clock: d.Clock}
	})
}
