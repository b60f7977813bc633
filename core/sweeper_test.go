package core

import (
	"context"
	"errors"
	"testing"
	"time"
)

type fakeRecounter struct {
	at  []time.Time
	n   int
	err error
}

func (f *fakeRecounter) RecountOpen(_ context.Context, now time.Time) (int, error) {
	f.at = append(f.at, now)
	return f.n, f.err
}

// TestSweeperRecountsOpenCounts: every sweep asks the recount (at the
// sweeper's clock), reports what it corrected and fails on its error.
func TestSweeperRecountsOpenCounts(t *testing.T) {
	r := newRig(Capabilities{})
	f := &fakeRecounter{n: 2}
	s := &Sweeper{D: r.d, Index: r.store, OpenCounts: f}
	rep, err := s.Run(context.Background())
	if err != nil || rep.OpenRecounted != 2 || len(f.at) != 1 || !f.at[0].Equal(r.d.Clock.Now()) {
		t.Fatalf("sweep: %+v %v, recount asked at %v", rep, err, f.at)
	}
	f.err = errors.New("table unavailable")
	if _, err := s.Run(context.Background()); !errors.Is(err, f.err) {
		t.Fatalf("a failed recount must fail the sweep: %v", err)
	}
}
