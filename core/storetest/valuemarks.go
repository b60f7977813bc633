package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

// RunValueMarks is the contract of core.ValueMarks: a mark only moves
// forward, answers the newest, and concurrent marks of one key leave the
// greatest.
func RunValueMarks(t *testing.T, newMarks func(t *testing.T) core.ValueMarks) {
	ctx := context.Background()
	t.Run("empty, then forward only", func(t *testing.T) {
		m := newMarks(t)
		if got, err := m.Newest(ctx, "k1"); err != nil || got != "" {
			t.Fatalf("unmarked: %q %v", got, err)
		}
		for _, c := range []struct{ seq, want string }{{"b", "b"}, {"a", "b"}, {"c", "c"}, {"c", "c"}} {
			got, err := m.MarkSent(ctx, "k1", c.seq, T0)
			if err != nil || got != c.want {
				t.Fatalf("MarkSent(%s) = %q %v, want %q", c.seq, got, err, c.want)
			}
			if n, err := m.Newest(ctx, "k1"); err != nil || n != c.want {
				t.Fatalf("Newest after %s = %q %v, want %q", c.seq, n, err, c.want)
			}
		}
		if got, _ := m.Newest(ctx, "k2"); got != "" {
			t.Fatalf("another key sees %q", got)
		}
	})
	t.Run("concurrent marks keep the greatest", func(t *testing.T) {
		m := newMarks(t)
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				if _, err := m.MarkSent(ctx, "k|c", time.Unix(int64(i), 0).UTC().Format(time.RFC3339), T0); err != nil {
					t.Error(err)
				}
			}(i)
		}
		wg.Wait()
		if got, _ := m.Newest(ctx, "k|c"); got != time.Unix(7, 0).UTC().Format(time.RFC3339) {
			t.Fatalf("newest %q", got)
		}
	})
}

// MemValueMarks is a core.ValueMarks in memory (the contract's reference).
type MemValueMarks struct {
	mu    sync.Mutex
	marks map[string]string
}

func (m *MemValueMarks) MarkSent(_ context.Context, key, seq string, _ time.Time) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marks == nil {
		m.marks = map[string]string{}
	}
	if seq > m.marks[key] {
		m.marks[key] = seq
	}
	return m.marks[key], nil
}

func (m *MemValueMarks) Newest(_ context.Context, key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.marks[key], nil
}
