package lambdahost

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

func TestTickerEventAndTick(t *testing.T) {
	var got events.EventBridgeEvent
	var hadLambdaCtx bool
	tk, err := NewTicker(TickerConfig{Interval: time.Hour, RuleName: "sweeper", Region: "eu-west-1", AccountID: "123456789012", Logger: quietLogger(),
		Handler: func(ctx context.Context, ev events.EventBridgeEvent) error {
			got = ev
			_, hadLambdaCtx = lambdacontext.FromContext(ctx)
			return errors.New("handler error is returned")
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Tick(context.Background()); err == nil {
		t.Fatal("Tick must return the handler's error")
	}
	if got.DetailType != "Scheduled Event" || got.Source != "aws.events" || got.Version != "0" || got.ID == "" ||
		got.AccountID != "123456789012" || got.Region != "eu-west-1" || string(got.Detail) != "{}" ||
		len(got.Resources) != 1 || got.Resources[0] != "arn:aws:events:eu-west-1:123456789012:rule/sweeper" ||
		time.Since(got.Time) > time.Minute || !hadLambdaCtx {
		t.Fatalf("event: %+v", got)
	}
}

func TestTickerRuns(t *testing.T) {
	var n atomic.Int32
	var mu sync.Mutex
	ids := map[string]bool{}
	tk, err := NewTicker(TickerConfig{Interval: 10 * time.Millisecond, RunOnStart: true, Logger: quietLogger(),
		Handler: func(ctx context.Context, ev events.EventBridgeEvent) error {
			mu.Lock()
			ids[ev.ID] = true
			mu.Unlock()
			n.Add(1)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tk.Start(context.Background()); err == nil {
		t.Fatal("double Start must fail")
	}
	waitFor(t, "three ticks", func() bool { return n.Load() >= 3 })
	tk.Stop()
	after := n.Load()
	time.Sleep(40 * time.Millisecond)
	if n.Load() != after {
		t.Fatal("ticker kept running after Stop")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != int(after) {
		t.Fatalf("event IDs not unique: %d ids for %d ticks", len(ids), after)
	}
	if _, err := NewTicker(TickerConfig{Handler: func(context.Context, events.EventBridgeEvent) error { return nil }}); err == nil {
		t.Fatal("zero interval must be rejected")
	}
}
