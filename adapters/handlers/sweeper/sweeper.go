// Package sweeper is the scheduled repair function.
package sweeper

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/core"
)

// Handler runs one sweep per scheduled event.
type Handler struct {
	S   *core.Sweeper
	Log *slog.Logger
}

// Handle runs the sweep; an error makes the platform record a failure.
func (h *Handler) Handle(ctx context.Context, _ events.EventBridgeEvent) error {
	rep, err := h.S.Run(ctx)
	log := h.Log
	if log == nil {
		log = slog.Default()
	}
	log.InfoContext(ctx, "sweep", "leasesExpired", rep.LeasesExpired, "retriesQueued", rep.RetriesQueued,
		"reconcilesQueued", rep.Reconciles, "pendingKicked", rep.PendingKicked, "needingHuman", rep.NeedingHuman, "openCountsCorrected", rep.OpenRecounted, "errors", rep.Errors)
	return err
}
