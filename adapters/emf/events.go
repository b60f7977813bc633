package emf

import (
	"context"
	"log/slog"
	"strings"

	"github.com/botharness/outbox/core"
)

// OperatorEvents publishes operator events (a circuit breaker opening or
// closing) as a structured log line and an EMF metric, until the console's
// operator-event channel takes them.
type OperatorEvents struct {
	Log     *slog.Logger
	Metrics *Writer
}

var _ core.OperatorEvents = (*OperatorEvents)(nil)

// Publish writes the event.
func (o *OperatorEvents) Publish(ctx context.Context, ev core.OperatorEvent) {
	if o.Log != nil {
		o.Log.WarnContext(ctx, "operator event", slog.String("event", ev.Kind), slog.String("provider", ev.Provider),
			slog.String("account", ev.Account), slog.Time("at", ev.At), slog.String("detail", ev.Detail))
	}
	if o.Metrics != nil {
		o.Metrics.Count("OperatorEvent_"+strings.ReplaceAll(ev.Kind, ".", "_"), 1)
	}
}
