package lambdahost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// TickerConfig configures a Ticker.
type TickerConfig struct {
	// Interval between invocations (required), like rate(...) schedules.
	Interval time.Duration
	// RunOnStart invokes once right after Start instead of waiting a full
	// interval.
	RunOnStart bool
	Handler    ScheduledHandler
	// RuleName names the schedule in the event's resources (default
	// "local-schedule").
	RuleName string
	// Detail is the event detail (default {}).
	Detail          json.RawMessage
	Region          string // default DefaultRegion
	AccountID       string // default DefaultAccountID
	FunctionName    string
	FunctionTimeout time.Duration
	Logger          *slog.Logger
}

// Ticker plays an EventBridge schedule: it invokes a ScheduledHandler every
// Interval with a "Scheduled Event" from "aws.events". Invocations do not
// overlap; a tick that comes while the previous invocation still runs is
// skipped (EventBridge would invoke concurrently; handlers must tolerate
// both).
type Ticker struct {
	cfg TickerConfig
	log *slog.Logger

	lifecycle
	invoke sync.Mutex
}

// NewTicker validates cfg and returns a stopped ticker.
func NewTicker(cfg TickerConfig) (*Ticker, error) {
	if cfg.Handler == nil {
		return nil, errors.New("host: TickerConfig.Handler is required")
	}
	if cfg.Interval <= 0 {
		return nil, errors.New("host: TickerConfig.Interval must be positive")
	}
	cfg.RuleName = orDefault(cfg.RuleName, "local-schedule")
	cfg.Region = orDefault(cfg.Region, DefaultRegion)
	cfg.AccountID = orDefault(cfg.AccountID, DefaultAccountID)
	if len(cfg.Detail) == 0 {
		cfg.Detail = json.RawMessage(`{}`)
	}
	return &Ticker{cfg: cfg, log: loggerOr(cfg.Logger).With("component", "ticker", "rule", cfg.RuleName)}, nil
}

// Event builds the event the next invocation would receive.
func (t *Ticker) Event(now time.Time) events.EventBridgeEvent {
	return events.EventBridgeEvent{
		Version:    "0",
		ID:         newID(),
		DetailType: "Scheduled Event",
		Source:     "aws.events",
		AccountID:  t.cfg.AccountID,
		Time:       now.UTC().Truncate(time.Second),
		Region:     t.cfg.Region,
		Resources:  []string{fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", t.cfg.Region, t.cfg.AccountID, t.cfg.RuleName)},
		Detail:     append(json.RawMessage(nil), t.cfg.Detail...),
	}
}

// Tick invokes the handler once, synchronously, and returns its error.
func (t *Ticker) Tick(ctx context.Context) error {
	t.invoke.Lock()
	defer t.invoke.Unlock()
	ev, _, err := roundTrip(t.Event(time.Now()))
	if err != nil {
		return err
	}
	ictx, cancel, _ := invocationContext(ctx, t.cfg.FunctionTimeout, functionArn(t.cfg.Region, t.cfg.AccountID, t.cfg.FunctionName))
	defer cancel()
	start := time.Now()
	err = callSafely(func() error { return t.cfg.Handler(ictx, ev) })
	if err != nil {
		t.log.Warn("scheduled handler failed", "event_id", ev.ID, "duration", time.Since(start), "error", err)
	} else {
		t.log.Debug("scheduled handler ran", "event_id", ev.ID, "duration", time.Since(start))
	}
	return err
}

// Start begins ticking in the background until ctx is done or Stop is called.
func (t *Ticker) Start(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	runCtx, err := t.beginLocked(ctx, "ticker")
	if err != nil {
		return err
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		if t.cfg.RunOnStart {
			_ = t.Tick(runCtx)
		}
		every(runCtx, t.cfg.Interval, nil, func() { _ = t.Tick(runCtx) })
	}()
	t.log.Info("ticker started", "interval", t.cfg.Interval)
	return nil
}

// Stop stops ticking and waits for an invocation in flight.
func (t *Ticker) Stop() { t.stop(nil) }
