package wire

import (
	"github.com/botharness/outbox/adapters/handlers/admin"
	"github.com/botharness/outbox/adapters/handlers/authorizer"
	"github.com/botharness/outbox/adapters/handlers/dispatcher"
	"github.com/botharness/outbox/adapters/handlers/intake"
	"github.com/botharness/outbox/adapters/handlers/notifier"
	"github.com/botharness/outbox/adapters/handlers/pruner"
	"github.com/botharness/outbox/adapters/handlers/retrier"
	"github.com/botharness/outbox/adapters/handlers/sweeper"
)

// The Lambda handlers, each assembled in one place: functions/* and the
// local system (localstack/system) and the chaos harness use these, so what
// runs locally is what is deployed.

// IntakeHandler serves the bot API.
func (a *App) IntakeHandler() *intake.Handler {
	return &intake.Handler{Intake: a.Intake, Store: a.Store, History: a.Store, Sources: a.Sources, Log: a.Log, Metrics: a.Metrics, Tracer: a.Tracer}
}

// AdminHandler serves the operators' API, with every extra admin route.
func (a *App) AdminHandler() *admin.Handler {
	return &admin.Handler{Store: a.Store, List: a.Store, Resolver: a.Resolver, History: a.Store, Extra: a.AdminExtra, Log: a.Log}
}

// AuthorizerHandler is the API's Lambda authorizer.
func (a *App) AuthorizerHandler() *authorizer.Handler {
	return &authorizer.Handler{Tokens: a.Authn, Log: a.Log}
}

// DispatcherHandler is the stream-triggered dispatcher.
func (a *App) DispatcherHandler() *dispatcher.Handler {
	return &dispatcher.Handler{D: a.Dispatcher, Log: a.Log}
}

// RetrierHandler consumes the retry queue.
func (a *App) RetrierHandler() *retrier.Handler {
	// A batch's bot-limit give-backs are one write per counter shard.
	return &retrier.Handler{D: a.Dispatcher, Coalesce: a.Store.CoalesceGiveBacks, Log: a.Log}
}

// SweeperHandler is the scheduled sweeper.
func (a *App) SweeperHandler() *sweeper.Handler {
	return &sweeper.Handler{S: a.Sweeper, Log: a.Log}
}

// NotifierHandler publishes operator events from the table stream.
func (a *App) NotifierHandler() *notifier.Handler {
	return &notifier.Handler{N: a.OperatorEvents, Log: a.Log}
}

// PrunerHandler turns TTL deletes of ended intents into tombstones and
// archived records (its own stream mapping, pruner.StreamFilterPattern).
func (a *App) PrunerHandler() *pruner.Handler {
	return &pruner.Handler{Store: a.Store, Archive: a.Archive, TombstoneRetention: a.Config.TombstoneRetention, Clock: a.Config.Clock, Log: a.Log}
}
