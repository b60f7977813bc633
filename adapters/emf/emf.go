// Package emf writes CloudWatch Embedded Metric Format records: one JSON line
// per metric to stdout, which CloudWatch Logs turns into metrics.
package emf

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/botharness/outbox/core"
)

// Namespace of every outbox metric.
const Namespace = "Outbox"

// Writer emits EMF lines.
type Writer struct {
	mu  sync.Mutex
	out io.Writer
	now func() time.Time
}

var _ core.Metrics = (*Writer)(nil)

// New returns a writer to out.
func New(out io.Writer) *Writer { return &Writer{out: out, now: time.Now} }

// Count emits a counter.
func (w *Writer) Count(name string, n int) { w.emit(name, n, "Count") }

// Gauge emits a point-in-time value.
func (w *Writer) Gauge(name string, v int) { w.emit(name, v, "Count") }

func (w *Writer) emit(name string, v int, unit string) {
	rec := map[string]any{
		"_aws": map[string]any{
			"Timestamp": w.now().UnixMilli(),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  Namespace,
				"Dimensions": [][]string{{}},
				"Metrics":    []any{map[string]string{"Name": name, "Unit": unit}},
			}},
		},
		name: v,
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.out.Write(append(b, '\n'))
}
