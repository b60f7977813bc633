// Command outbox-cost prints what the outbox stack costs a month at zero
// traffic, item by item (make cost; make bench runs it last), and writes
// usd_per_month_idle and idle_cost into the bench's results.json, keeping
// every key already there:
//
//	outbox-cost -template build/cost/cdk.out/Outbox.template.json -prices bench/prices.json -out build/bench/results.json
//
// One scheduled sweep of an empty table is priced from results.json's
// idle_sweep_* keys (make bench's idle phase) when they are there, else
// from prices.json's idle.sweep.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/botharness/outbox/bench/idlecost"
)

func main() {
	template := flag.String("template", "build/cost/cdk.out/Outbox.template.json", "the synthesized stack (make cost synthesizes it)")
	prices := flag.String("prices", "bench/prices.json", "the price table")
	out := flag.String("out", "build/bench/results.json", "results file: usd_per_month_idle and idle_cost are set, every other key kept")
	flag.Parse()
	if err := run(*template, *prices, *out); err != nil {
		fmt.Fprintln(os.Stderr, "outbox-cost:", err)
		os.Exit(1)
	}
}

func run(templatePath, pricesPath, outPath string) error {
	tb, err := os.ReadFile(templatePath)
	if err != nil {
		return fmt.Errorf("%w (run `make cost`, which synthesizes it)", err)
	}
	pb, err := os.ReadFile(pricesPath)
	if err != nil {
		return err
	}
	p, err := idlecost.ParsePrices(pb)
	if err != nil {
		return fmt.Errorf("%s: %w", pricesPath, err)
	}
	results := map[string]any{}
	if b, err := os.ReadFile(outPath); err == nil {
		if err := json.Unmarshal(b, &results); err != nil {
			return fmt.Errorf("%s: %w", outPath, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if sw, ok := measuredSweep(results); ok {
		p.Idle.Sweep = sw
	}
	rep, err := idlecost.Compute(tb, p)
	if err != nil {
		return err
	}
	results["usd_per_month_idle"] = rep.USDPerMonth
	results["idle_cost"] = map[string]any{
		"items": rep.Items, "template": templatePath,
		"prices": map[string]any{"file": pricesPath, "date": p.Date, "region": p.Region},
		"sweep":  p.Idle.Sweep, "hours_per_month": p.Idle.HoursPerMonth,
	}
	if err := os.MkdirAll(filepath.Dir(outPath), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(outPath, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("Idle cost of the stack (zero traffic, %s list prices of %s, %g h a month):\n\n%s\nusd_per_month_idle = %.2f  -> %s\n",
		p.Region, p.Date, p.Idle.HoursPerMonth, rep.Table(), rep.USDPerMonth, outPath)
	return nil
}

// measuredSweep is the bench's idle phase's figures, when results.json has them.
func measuredSweep(res map[string]any) (idlecost.Sweep, bool) {
	f := func(k string) (float64, bool) {
		v, ok := res[k].(float64)
		return v, ok && !math.IsNaN(v)
	}
	rru, ok1 := f("idle_sweep_rru")
	ms, ok2 := f("idle_sweep_ms_p50")
	if !ok1 || !ok2 {
		return idlecost.Sweep{}, false
	}
	wcu, _ := f("idle_sweep_wcu")
	sqs, _ := f("idle_sweep_sqs_requests")
	bytes, _ := f("idle_sweep_metric_bytes")
	var names []string
	if l, ok := res["idle_sweep_metric_names"].([]any); ok {
		for _, n := range l {
			if s, ok := n.(string); ok {
				names = append(names, s)
			}
		}
	}
	return idlecost.Sweep{RRU: rru, WRU: wcu, SQSRequests: sqs, BilledMS: ms, MetricBytes: bytes, MetricNames: names,
		From: "measured by make bench's idle phase (results.json idle_sweep_*)"}, true
}
