package pacing

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
)

func TestPacingAdminOverride(t *testing.T) {
	gates := gate.NewMemoryGates()
	g := &gate.Gate{Store: gates, Declared: func(string, string) (gate.Pace, bool) { return gate.Pace{Rate: 20, Per: time.Second, Burst: 1}, true }}
	p := &Pacing{Gate: g, Clock: core.SystemClock}
	ctx := context.Background()
	op := core.Principal{Kind: core.PrincipalOperator, Name: "ann"}
	if _, err := p.Set(ctx, core.Principal{Kind: core.PrincipalBot, Name: "b"}, "fake", "a1", PaceChange{Pace: &gate.Pace{Rate: 1, Per: time.Second}, Reason: "x"}); !errors.Is(err, core.ErrForbidden) {
		t.Fatalf("bot: %v", err)
	}
	if _, err := p.Set(ctx, op, "fake", "a1", PaceChange{Pace: &gate.Pace{Rate: 1, Per: time.Second}}); err == nil {
		t.Fatal("no reason accepted")
	}
	var ve *core.ValidationError
	if _, err := p.Set(ctx, op, "fake", "a1", PaceChange{Pace: &gate.Pace{Rate: 0, Per: time.Second}, Reason: "x"}); !errors.As(err, &ve) || ve.Field != "pace.rate" {
		t.Fatalf("rate 0: %v", err)
	}
	got, err := p.Set(ctx, op, "fake", "a1", PaceChange{Pace: &gate.Pace{Rate: 2, Per: time.Second}, Reason: "provider asked us to slow down"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Effective == nil || got.Effective.Rate != 2 || got.Declared.Rate != 20 || got.Override.Reason != "provider asked us to slow down" || got.Override.By != "ann" {
		t.Fatalf("%+v", got)
	}
	st, _ := gates.State(ctx, gate.GateKey("fake", "a1"))
	if pc, _ := g.PaceFor("fake", "a1", &st); pc.Rate != 2 {
		t.Fatalf("effective pace %+v", pc)
	}
	got, err = p.Set(ctx, op, "fake", "a1", PaceChange{Reason: "back to normal"})
	if err != nil || got.Override != nil || got.Effective.Rate != 20 {
		t.Fatalf("%+v %v", got, err)
	}
}
