package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The idle cost joins the bench's results: every key already in
// results.json stays, usd_per_month_idle and idle_cost are added, and the
// sweep is priced from the idle phase's measurement when it is there.
func TestRunKeepsTheBenchKeysAndUsesTheMeasuredSweep(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "Outbox.template.json")
	if err := os.WriteFile(tmpl, []byte(`{"Resources": {
  "Dash": {"Type": "AWS::CloudWatch::Dashboard", "Properties": {}},
  "Sweeper": {"Type": "AWS::Lambda::Function", "Properties": {"MemorySize": 1024}},
  "Rule": {"Type": "AWS::Events::Rule", "Properties": {"ScheduleExpression": "rate(1 hour)",
    "Targets": [{"Arn": {"Fn::GetAtt": ["Sweeper", "Arn"]}}]}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results.json")
	// A measured sweep: 1,000 RRU and 1,000 ms a run.
	if err := os.WriteFile(out, []byte(`{"usd_per_million_delivered_async": 1.23, "writes_per_delivered_intent": 3,
  "idle_sweep_rru": 1000, "idle_sweep_ms_p50": 1000, "idle_sweep_metric_names": ["G"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(tmpl, "../../prices.json", out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res["usd_per_million_delivered_async"] != 1.23 || res["writes_per_delivered_intent"] != 3.0 {
		t.Errorf("the bench's keys were not kept: %v", res)
	}
	// 730 runs: dashboard 3.00 + requests 0.000146 + 730 GB-s 0.00973 + 730,000 RRU 0.09125
	// + one gauge 0.30 + logs (730 x 350 B) ~0.0001 = 3.40.
	if res["usd_per_month_idle"] != 3.4 {
		t.Errorf("usd_per_month_idle %v, want 3.4", res["usd_per_month_idle"])
	}
	sweep := res["idle_cost"].(map[string]any)["sweep"].(map[string]any)
	if sweep["rru"] != 1000.0 || sweep["billed_ms"] != 1000.0 {
		t.Errorf("the measured sweep was not used: %v", sweep)
	}
}
