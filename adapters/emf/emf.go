// Package emf writes CloudWatch Embedded Metric Format records: one JSON line
// per metric to stdout, which CloudWatch Logs turns into metrics.
package emf

import (
	"encoding/json"
	"io"
	"sort"
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

var _ core.LatencyMetrics = (*Writer)(nil)

// DimProvider is the dimension of per-provider metrics (AttemptLatency).
const DimProvider = "Provider"

// Latency emits a duration in milliseconds under the Provider dimension.
func (w *Writer) Latency(name, provider string, d time.Duration) {
	w.write(name, float64(d.Microseconds())/1000, "Milliseconds", map[string]string{DimProvider: provider})
}

func (w *Writer) emit(name string, v int, unit string) { w.write(name, v, unit, nil) }

func (w *Writer) write(name string, v any, unit string, dims map[string]string) {
	names := []string{}
	for k := range dims {
		names = append(names, k)
	}
	sort.Strings(names)
	rec := map[string]any{
		"_aws": map[string]any{
			"Timestamp": w.now().UnixMilli(),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  Namespace,
				"Dimensions": [][]string{names},
				"Metrics":    []any{map[string]string{"Name": name, "Unit": unit}},
			}},
		},
		name: v,
	}
	for k, dv := range dims {
		rec[k] = dv
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.out.Write(append(b, '\n'))
}
