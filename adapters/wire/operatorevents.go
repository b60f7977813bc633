package wire

import (
	"context"
	"net/http"
	"time"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/admin"
	"github.com/botharness/outbox/adapters/operatorevents"
	"github.com/botharness/outbox/adapters/webhooksig"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
	"github.com/botharness/outbox/core/notify"
	"github.com/botharness/outbox/core/overview"
)

// wireOperatorEvents builds the once-per-id operator event notifier (it logs
// and counts each event too) and gives it the gate's breaker moves: its
// subscriber is SNS when OUTBOX_OPERATOR_TOPIC_ARN is set (AWS), else a
// Standard Webhooks-signed POST when OUTBOX_OPERATOR_WEBHOOK_URL is set
// (locally), else none. The sweeper redrives what a crash left unpublished.
func wireOperatorEvents(a *App) error {
	c := a.Config
	var sub core.OperatorEvents
	switch {
	case c.OperatorTopicArn != "" && a.Clients.SNS != nil:
		sub = &operatorevents.SNS{Client: a.Clients.SNS, TopicArn: c.OperatorTopicArn, ConsoleBase: c.ConsoleURL}
	case c.OperatorWebhookURL != "":
		if c.OperatorWebhookSecret == "" {
			return operatorevents.ErrNoSecret
		}
		if err := webhooksig.CheckSecret(c.OperatorWebhookSecret); err != nil {
			return err
		}
		sub = &operatorevents.Webhook{URL: c.OperatorWebhookURL, Secret: c.OperatorWebhookSecret, ConsoleBase: c.ConsoleURL,
			Client: &http.Client{Timeout: 10 * time.Second}}
	}
	a.OperatorEvents = &notify.OperatorNotifier{
		Ledger:     dynamo.NewOperatorEventLedger(a.Clients.DynamoDB, c.Table),
		Subscriber: sub,
		Metrics:    a.Metrics,
		Log:        a.Log,
		Clock:      c.Clock,
		Owner:      c.Owner,
		Lease:      30 * time.Second,
	}
	if a.Gate != nil {
		notifier := a.OperatorEvents
		a.Gate.Notify = func(ctx context.Context, ev gate.Event) error {
			return notifier.Publish(ctx, core.GateOperatorEvent(ev))
		}
	}
	// With or without a subscriber: the gate's transaction stores each
	// breaker move as an unpublished record, and publishing it (the log
	// line, the metric the alarm watches, the record's expiry) is left to
	// the sweeper when the worker that moved the gate dies first
	// (e2e TestUnsubscribedBreakerEventIsRedrivenBySweeper).
	a.Sweeper.OperatorEvents = a.OperatorEvents
	wireOverview(a, sub != nil)
	return nil
}

// wireOverview adds GET /v1/admin/overview: the needs-human listing, the
// ledger's timeline (only recorded while operator events have a
// subscriber) and the account gates (when pacing is on).
func wireOverview(a *App, recorded bool) {
	o := &overview.Overviewer{Intents: a.Store, Clock: a.Config.Clock, Gate: a.Gate}
	if tl, ok := a.OperatorEvents.Ledger.(overview.EpisodeTimeline); ok && recorded {
		o.Timeline = tl
	}
	if a.Gate != nil {
		if l, ok := a.Gate.Store.(overview.GateLister); ok {
			o.Gates = l
		}
		o.Declared = a.pacedAccounts
	}
	for k, f := range admin.OverviewRoutes(o) {
		a.AdminExtra[k] = f
	}
}
