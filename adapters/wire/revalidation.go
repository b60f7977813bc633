package wire

import (
	"context"
	"fmt"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/admin"
	"github.com/botharness/outbox/adapters/handlers/intake"
	"github.com/botharness/outbox/adapters/ttlcache"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/registry"
)

// wireRevalidation installs source/grant/capability revalidation (issue 4):
// the dispatcher revalidates before every attempt, intake refuses intents
// their grant does not cover, a human retry is refused up front when
// revalidation would block it, bots report source revisions, and operators
// manage grants and capabilities through the admin API.
func wireRevalidation(a *App) error {
	if a.Clients.DynamoDB == nil {
		return fmt.Errorf("revalidation: no DynamoDB client")
	}
	reg := dynamo.NewRegistry(a.Clients.DynamoDB, a.Config.Table)
	rv := &core.Revalidation{Facts: reg, Grants: reg, Clock: a.Config.Clock}
	if a.Config.RequestCacheTTL > 0 {
		// Only intake reads grants through this; every attempt re-reads them
		// consistently (Facts), so a cached grant can never cause a send.
		rv.Grants = ttlcache.NewGrants(reg, a.Config.RequestCacheTTL)
	}
	a.Dispatcher.Revalidator = rv
	a.Intake.Inline.Preflight = reg // facts, barrier and gate replica in one BatchGetItem
	a.Intake.Grants = rv
	a.Resolver.Gate = rv
	a.Sources = &intake.Sources{Sources: &registry.Sources{Store: reg, Clock: a.Config.Clock}}
	routes := (&admin.Grants{
		Authority: &registry.Authority{Grants: reg, Capabilities: reg, Providers: a.Providers, Clock: a.Config.Clock},
		Pacing:    a.pacing, // nil with the gate off
		Log:       a.Log,
	}).Routes()
	for k, f := range routes {
		a.AdminExtra[k] = f
	}
	return nil
}

// SeedGrants creates each grant that does not exist yet (an existing grant
// with the same id is left exactly as it is, whatever its version or state).
// Local stacks and tests use it for dev grants; production grants are managed
// through the admin API.
func (a *App) SeedGrants(ctx context.Context, grants []core.Grant) error {
	reg := dynamo.NewRegistry(a.Clients.DynamoDB, a.Config.Table)
	for _, g := range grants {
		if err := registry.ValidateGrantID(g.ID); err != nil {
			return fmt.Errorf("seed grant %q: %w", g.ID, err)
		}
		if _, err := reg.SeedGrant(ctx, g); err != nil {
			return fmt.Errorf("seed grant %s: %w", g.ID, err)
		}
	}
	return nil
}
