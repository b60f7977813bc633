package emf

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestCountWritesOneEMFRecord(t *testing.T) {
	var buf bytes.Buffer
	w := New(&buf)
	w.now = func() time.Time { return time.UnixMilli(1700000000000) }
	w.Count("NeedsHuman", 2)
	var rec struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		NeedsHuman int
	}
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	cw := rec.AWS.CloudWatchMetrics
	if rec.AWS.Timestamp != 1700000000000 || len(cw) != 1 || cw[0].Namespace != "Outbox" || cw[0].Metrics[0].Name != "NeedsHuman" || rec.NeedsHuman != 2 {
		t.Fatalf("record %s", buf.String())
	}
	// The alarms match the metric without dimensions; adding one would detach them.
	if len(cw[0].Dimensions) != 1 || len(cw[0].Dimensions[0]) != 0 {
		t.Fatalf("dimensions %v", cw[0].Dimensions)
	}
}

// AttemptLatency carries the Provider dimension the dashboard's p50/p99
// widgets select on, in milliseconds.
func TestLatencyCarriesTheProviderDimension(t *testing.T) {
	var buf bytes.Buffer
	w := New(&buf)
	w.Latency("AttemptLatency", "sandbox", 1500*time.Microsecond)
	var rec struct {
		AWS struct {
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		AttemptLatency float64
		Provider       string
	}
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	cw := rec.AWS.CloudWatchMetrics
	if len(cw) != 1 || cw[0].Namespace != Namespace || len(cw[0].Dimensions) != 1 || len(cw[0].Dimensions[0]) != 1 || cw[0].Dimensions[0][0] != DimProvider ||
		cw[0].Metrics[0].Unit != "Milliseconds" || rec.Provider != "sandbox" || rec.AttemptLatency != 1.5 {
		t.Fatalf("record %s", buf.String())
	}
}
