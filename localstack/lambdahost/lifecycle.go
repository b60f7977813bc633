package lambdahost

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// lifecycle is the start/stop state the host's background loops (SQS and
// stream pollers, the ticker) share: one run at a time, cancelled by Stop,
// which waits for the run's goroutines. mu also guards the owner's state.
type lifecycle struct {
	mu      sync.Mutex
	running bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// beginLocked marks a run started (mu held) and returns its context. The
// cancel is in place before mu is released, so a Stop during the rest of
// Start aborts the start rather than missing it.
func (l *lifecycle) beginLocked(ctx context.Context, what string) (context.Context, error) {
	if l.running {
		return nil, fmt.Errorf("host: %s already running", what)
	}
	runCtx, cancel := context.WithCancel(ctx)
	l.running, l.cancel = true, cancel
	return runCtx, nil
}

// begin is beginLocked taking mu; abort undoes the start after a failure
// and returns err.
func (l *lifecycle) begin(ctx context.Context, what string) (runCtx context.Context, abort func(error) error, err error) {
	l.mu.Lock()
	runCtx, err = l.beginLocked(ctx, what)
	cancel := l.cancel
	l.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	return runCtx, func(err error) error {
		cancel()
		l.mu.Lock()
		l.running, l.cancel = false, nil
		l.mu.Unlock()
		return err
	}, nil
}

// stop cancels the run, waits for its goroutines and marks it stopped;
// reset, when set, runs with mu held at that moment.
func (l *lifecycle) stop(reset func()) {
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	l.wg.Wait()
	l.mu.Lock()
	l.running, l.cancel = false, nil
	if reset != nil {
		reset()
	}
	l.mu.Unlock()
}

// every calls f each interval (and on each signal of wake, which may be nil)
// until ctx is done.
func every(ctx context.Context, interval time.Duration, wake <-chan struct{}, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		f()
	}
}
