package main

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/localstack/system"
)

// idleSweeps is how many scheduled sweeps the idle phase measures.
const idleSweeps = 20

// idle (issue 50): what one scheduled sweep costs when nothing happens, the
// part of the stack's idle cost its every-minute schedule pays (make cost
// prices it, bench/cmd/outbox-cost). The sweeper's handler runs as the
// schedule runs it, on a table with no intents, nothing else polling (no
// stream or queue consumer), and the meter counts its DynamoDB capacity and
// SQS requests; its metric lines (EMF, CloudWatch Logs in AWS) are counted
// in bytes.
func (r *runner) idle() error {
	var metrics metricSink
	st, _, stop, err := r.startStack(system.Options{DisableStream: true, DisableQueue: true,
		DisableNotifier: true, Config: wire.Config{MetricsOut: &metrics}})
	if err != nil {
		return err
	}
	defer stop()
	// One unmeasured sweep: a first run may create what later runs read.
	if err := st.Sweeper.Handle(r.ctx, events.EventBridgeEvent{}); err != nil {
		return err
	}
	r.meter.reset()
	metrics.reset()
	took := make([]float64, 0, idleSweeps)
	for i := 0; i < idleSweeps; i++ {
		t0 := time.Now()
		if err := st.Sweeper.Handle(r.ctx, events.EventBridgeEvent{}); err != nil {
			return err
		}
		took = append(took, float64(time.Since(t0).Microseconds())/1000)
	}
	c := r.meter.snapshot()
	n := float64(idleSweeps)
	var requests int64
	rru := 0.0
	for label, v := range c.Ops {
		requests += v
		if isRead(label) {
			// DynamoDB Local reports no capacity for a query that finds
			// nothing; DynamoDB bills every read request at least half a
			// read unit (eventually consistent, 4 KB).
			rru += max(c.CU[label], minRRUPerRead*float64(v))
		}
	}
	sort.Float64s(took)
	bytes, names := metrics.snapshot()
	r.set("idle_sweep_rcu", round(c.RCU/n, 3))
	r.set("idle_sweep_rru", round(rru/n, 3))
	r.set("idle_sweep_metric_names", names)
	r.set("idle_sweep_wcu", round(c.WCU/n, 3))
	r.set("idle_sweep_sqs_requests", round(float64(c.sqsRequests())/n, 3))
	r.set("idle_sweep_aws_requests", round(float64(requests)/n, 3))
	r.set("idle_sweep_metric_bytes", round(float64(bytes)/n, 1))
	r.set("idle_sweep_ms_p50", round(took[len(took)/2], 2))
	r.set("idle_sweep_requests_by_op", opsPer(c.Ops, n))
	return nil
}

func opsPer(ops map[string]int64, n float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range ops {
		out[k] = round(float64(v)/n, 3)
	}
	return out
}

// minRRUPerRead is the least a DynamoDB read request is billed: half a
// read request unit (an eventually consistent read of up to 4 KB).
const minRRUPerRead = 0.5

// isRead: a meter label of a DynamoDB read ("<caller> Query:gsi1", ...).
func isRead(label string) bool {
	for _, op := range []string{"GetItem", "Query", "BatchGetItem", "Scan", "TransactGetItems"} {
		if strings.Contains(label, " "+op+":") || strings.HasSuffix(label, " "+op) || strings.HasPrefix(label, op+":") {
			return true
		}
	}
	return false
}

// metricSink takes the sweeper's Embedded Metric Format lines: their bytes
// (CloudWatch Logs ingestion in AWS) and the metric names (custom metrics).
type metricSink struct {
	mu    sync.Mutex
	bytes int64
	names map[string]bool
}

func (m *metricSink) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bytes += int64(len(p))
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		var rec struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Metrics []struct{ Name string }
				}
			} `json:"_aws"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		for _, cw := range rec.AWS.CloudWatchMetrics {
			for _, mt := range cw.Metrics {
				if m.names == nil {
					m.names = map[string]bool{}
				}
				m.names[mt.Name] = true
			}
		}
	}
	return len(p), nil
}

func (m *metricSink) reset() {
	m.mu.Lock()
	m.bytes, m.names = 0, nil
	m.mu.Unlock()
}

func (m *metricSink) snapshot() (int64, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.names))
	for n := range m.names {
		names = append(names, n)
	}
	sort.Strings(names)
	return m.bytes, names
}
