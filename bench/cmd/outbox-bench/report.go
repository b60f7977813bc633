package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// coreBench is one `go test -bench` result line.
type coreBench struct {
	NsPerOp     float64 `json:"ns_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	MBPerS      float64 `json:"mb_per_s,omitempty"`
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

// coreBenchmarks folds the core package's testing.B results (run by
// bench/run.sh before the emulators start) into the results.
func (r *runner) coreBenchmarks() error {
	fh, err := os.Open(r.f.coreBench)
	if err != nil {
		return err
	}
	defer fh.Close()
	out := map[string]coreBench{}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		var b coreBench
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				b.NsPerOp = v
			case "B/op":
				b.BytesPerOp = v
			case "allocs/op":
				b.AllocsPerOp = v
			case "MB/s":
				b.MBPerS = v
			}
		}
		out[strings.TrimPrefix(m[1], "Benchmark")] = b
	}
	if len(out) == 0 {
		return fmt.Errorf("no benchmark lines in %s", r.f.coreBench)
	}
	r.set("core_benchmarks", out)
	return nil
}

// allocBudget is the allocation budget of each core hot path: the pure
// decisions (transition, backoff) must not allocate at all; the id and the
// canonical hash are bounded.
var allocBudget = map[string]float64{
	"Transition":         0,
	"BackoffNext":        0,
	"IntentID":           4,
	"CanonicalHash1KiB":  64,
	"CanonicalHash64KiB": 2048,
	"IntakeBuild1KiB":    160,
}

func (r *runner) goals() {
	g := map[string]any{}
	num := func(k string) (float64, bool) {
		switch v := r.res[k].(type) {
		case float64:
			return v, true
		case int64:
			return float64(v), true
		case int:
			return float64(v), true
		}
		return 0, false
	}
	add := func(name, key, cmp string, target float64) {
		v, ok := num(key)
		if !ok {
			g[name] = map[string]any{"met": nil, "why": key + " not measured"}
			return
		}
		met := v <= target
		if cmp == ">=" {
			met = v >= target
		}
		g[name] = map[string]any{"value": v, "target": cmp + " " + strconv.FormatFloat(target, 'f', -1, 64), "met": met}
	}
	add("intake_vs_raw_c8", "intake_vs_raw_c8", ">=", 0.8)
	add("intake_traced_vs_raw_c8", "intake_traced_vs_raw_c8", ">=", 0.8)
	add("writes_per_delivered_intent", "writes_per_delivered_intent", "<=", 3)
	// Issue 27 (retention).
	add("bytes_at_rest_per_intent_after_window", "bytes_at_rest_per_intent_after_window", "<=", 300)
	add("archive_s3_puts_per_1000_pruned", "archive_s3_puts_per_1000_pruned", "<=", 10)
	if p, ok := num("e2e_poll_interval_ms"); ok {
		add("e2e_p99_ms", "e2e_p99_ms", "<=", p+50)
	}
	add("lambda_zip_bytes_max", "lambda_zip_bytes_max", "<=", 10_000_000)
	add("pace_max_rate_ratio", "pace_max_rate_ratio", "<=", 1.1)
	add("pace_throughput_ratio", "pace_throughput_ratio", ">=", 0.8)
	add("pace_429s", "pace_429s", "<=", 0)
	add("writes_per_unchanged_reconcile_poll", "writes_per_unchanged_reconcile_poll", "<=", 0)
	add("wcu_per_delivered_intent_256k", "wcu_per_delivered_intent_256k", "<=", 24)
	add("s3_requests_per_delivered_intent_256k", "s3_requests_per_delivered_intent_256k", "<=", 2)
	// Issue 13 (scale) and the data-model half of issue 17 (write units).
	add("hot_bot_max_item_share", "hot_bot_max_item_share", "<=", 2/float64(16))
	add("projected_max_key_wcu", "projected_max_key_wcu", "<=", 500)
	add("projected_max_key_rcu", "projected_max_key_rcu", "<=", 1500)
	add("repair_vs_stream", "repair_vs_stream", ">=", 0.5)
	add("isolation_p99_ratio", "isolation_p99_ratio", "<=", 2.0)
	add("wcu_per_delivered_intent", "wcu_per_delivered_intent", "<=", 8)
	add("wcu_per_retried_intent", "wcu_per_retried_intent", "<=", 14)
	// Issue 26: inline delivery (Prefer: wait).
	add("inline_writes_per_delivered_intent", "inline_writes_per_delivered_intent", "<=", 2)
	add("inline_wcu_per_delivered_intent", "inline_wcu_per_delivered_intent", "<=", 6)
	add("inline_vs_floor_p99", "inline_vs_floor_p99", "<=", 1.25)
	add("inline_share", "inline_share", ">=", 0.99)
	add("inline_vs_async_usd", "inline_vs_async_usd", "<=", 0.8)
	add("inline_paced_not_exactly_one_effect", "inline_paced_not_exactly_one_effect", "<=", 0)
	if m, ok := r.res["index_max_key_share_goal_met"].(bool); ok {
		g["index_max_key_share"] = map[string]any{"value": r.res["index_max_key_share"], "target": "<= 2/N per family", "met": m}
	}
	if cb, ok := r.res["core_benchmarks"].(map[string]coreBench); ok {
		allocs := map[string]any{}
		met := true
		for name, budget := range allocBudget {
			b, ok := cb[name]
			if !ok {
				continue
			}
			ok = b.AllocsPerOp <= budget
			met = met && ok
			allocs[name] = map[string]any{"allocs_per_op": b.AllocsPerOp, "budget": budget, "met": ok}
		}
		g["core_allocs"] = map[string]any{"met": met, "benchmarks": allocs}
	}
	r.set("goals", g)
}

func (r *runner) write() error {
	if len(r.notes) > 0 {
		r.set("notes", r.notes)
	}
	if err := os.MkdirAll(filepath.Dir(r.f.out), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r.res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(r.f.out, append(b, '\n'), 0o644)
}

func (r *runner) printTable(w io.Writer) {
	v := func(k string) string {
		x, ok := r.res[k]
		if !ok {
			return "-"
		}
		switch t := x.(type) {
		case float64:
			return strconv.FormatFloat(t, 'f', -1, 64)
		}
		return fmt.Sprint(x)
	}
	goal := func(k string) string {
		gs, _ := r.res["goals"].(map[string]any)
		g, ok := gs[k].(map[string]any)
		if !ok {
			return ""
		}
		switch g["met"] {
		case true:
			return fmt.Sprintf("MET (%v)", g["target"])
		case false:
			return fmt.Sprintf("MISSED (%v)", g["target"])
		}
		return ""
	}
	rows := [][3]string{
		{"raw_put_per_s_c1", v("raw_put_per_s_c1"), ""},
		{"intake_per_s_c1", v("intake_per_s_c1"), ""},
		{"intake_vs_raw_c1", v("intake_vs_raw_c1"), ""},
		{"raw_put_per_s_c8", v("raw_put_per_s_c8"), ""},
		{"intake_per_s_c8", v("intake_per_s_c8"), ""},
		{"intake_vs_raw_c8", v("intake_vs_raw_c8"), goal("intake_vs_raw_c8")},
		{"  per round", v("intake_vs_raw_c8_by_round"), ""},
		{"intake_traced_vs_raw_c8 (spans by OTLP)", v("intake_traced_vs_raw_c8") + " (" + v("intake_traced_spans_exported") + " spans)", goal("intake_traced_vs_raw_c8")},
		{"  raw_calls/raw, intake/raw_calls (c8)", v("raw_calls_vs_raw_c8") + " / " + v("intake_vs_raw_calls_c8"), "3 DynamoDB requests vs 1 / Go code"},
		{"  CPU-per-op model raw/intake (c8)", v("cpu_model_intake_vs_raw_c8"), "(runner+emulator CPU per op)"},
		{"  what-if intake_cached/raw (c8)", v("whatif_intake_cached_vs_raw_c8"), "authorizer + grant cached"},
		{"raw_put_p50_ms / p99 (c1)", v("raw_put_p50_ms") + " / " + v("raw_put_p99_ms"), ""},
		{"intake_p50_ms / p99 (c1)", v("intake_p50_ms") + " / " + v("intake_p99_ms"), ""},
		{"raw_put / intake p50 ms (c8)", v("raw_put_c8_p50_ms") + " / " + v("intake_c8_p50_ms"), ""},
		{"e2e_p50_ms / p99 (poll " + v("e2e_poll_interval_ms") + "ms)", v("e2e_p50_ms") + " / " + v("e2e_p99_ms"), goal("e2e_p99_ms")},
		{"  stream lag p50 / p99 ms", v("e2e_stream_lag_p50_ms") + " / " + v("e2e_stream_lag_p99_ms"), "201 -> attempt starts"},
		{"  dispatch p50 / p99 ms", v("e2e_dispatch_p50_ms") + " / " + v("e2e_dispatch_p99_ms"), "attempt start -> effect"},
		{"  poll share of mean e2e", v("e2e_poll_share"), ""},
		{"e2e_p50 / p99 (poll " + v("e2e_alt_poll_interval_ms") + "ms)", v("e2e_alt_p50_ms") + " / " + v("e2e_alt_p99_ms"), ""},
		{"  poll interval effect on p50 / mean ms", v("e2e_poll_effect_p50_ms") + " / " + v("e2e_poll_effect_mean_ms"), ""},
		{"writes_per_delivered_intent", v("writes_per_delivered_intent"), goal("writes_per_delivered_intent")},
		{"  with bot rate / rate + open cap", v("writes_per_delivered_intent_with_bot_rate") + " / " + v("writes_per_delivered_intent_with_bot_limits"), "+1 count at intake, +1 give-back at the end (decisions: Per-bot limits)"},
		{"  wcu with bot rate / rate + open cap", v("wcu_per_delivered_intent_with_bot_rate") + " / " + v("wcu_per_delivered_intent_with_bot_limits"), ""},
		{"inline_writes / wcu per delivered intent", v("inline_writes_per_delivered_intent") + " / " + v("inline_wcu_per_delivered_intent"), goal("inline_writes_per_delivered_intent") + " " + goal("inline_wcu_per_delivered_intent")},
		{"inline_e2e_p50_ms / p99 (floor p99)", v("inline_e2e_p50_ms") + " / " + v("inline_e2e_p99_ms") + " (" + v("inline_floor_p99_ms") + ")", "POST with Prefer: wait -> 201 succeeded"},
		{"inline_vs_floor_p99", v("inline_vs_floor_p99"), goal("inline_vs_floor_p99")},
		{"inline_rules_floor_vs_floor_p99 / p50", v("inline_rules_floor_vs_floor_p99") + " / " + v("inline_rules_floor_vs_floor_p50"), "the floor + one read behind the HTTP API: what the rules alone add"},
		{"inline_share", v("inline_share"), goal("inline_share")},
		{"usd_per_million_delivered async / inline", v("usd_per_million_delivered_async") + " / " + v("usd_per_million_delivered_inline"), goal("inline_vs_async_usd")},
		{"wcu_per_delivered_intent (gsi part)", v("wcu_per_delivered_intent") + " (" + v("wcu_gsi_per_delivered_intent") + ")", ""},
		{"writes_per_retried_intent", v("writes_per_retried_intent"), "one 503, then success"},
		{"reads_per_attempt (retry path)", v("reads_per_attempt") + " (" + v("reads_per_attempt_retry_path") + ")", ""},
		{"intent_item_bytes", v("intent_item_bytes"), ""},
		{"lambda_zip_bytes_max", v("lambda_zip_bytes_max") + " (" + v("lambda_zip_max_function") + ")", goal("lambda_zip_bytes_max")},
		{"handler_init_ms (to /next)", v("handler_init_ms") + " (" + v("handler_init_to_next_ms") + ")", "authorizer, first response"},
		{"localhost_rss_mb_under_load", v("localhost_rss_mb_under_load"), ""},
		{"pace_max_rate_ratio (max in 1 s)", v("pace_max_rate_ratio") + " (" + v("pace_max_commits_in_1s") + ")", goal("pace_max_rate_ratio")},
		{"pace_throughput_ratio (per s)", v("pace_throughput_ratio") + " (" + v("pace_achieved_rate_per_s") + ")", goal("pace_throughput_ratio")},
		{"pace_429s / not exactly one effect", v("pace_429s") + " / " + v("pace_intents_not_exactly_one_effect"), goal("pace_429s")},
		{"pace_writes_per_delivered_intent", v("pace_writes_per_delivered_intent"), "intake + claim + outcome + gate"},
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-44s %-22s %s\n", "metric", "value", "goal / note")
	fmt.Fprintln(w, strings.Repeat("-", 96))
	for _, row := range rows {
		fmt.Fprintf(w, "%-44s %-22s %s\n", row[0], row[1], row[2])
	}
	if d, ok := r.res["throughput_detail"].(map[string]any); ok {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "%-16s %9s %8s %8s %12s %12s\n", "variant", "per_s", "p50_ms", "p99_ms", "go_cpu_us/op", "emu_cpu_us/op")
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m := d[k].(map[string]any)
			fmt.Fprintf(w, "%-16s %9v %8v %8v %12v %12v\n", k, m["per_s"], m["p50_ms"], m["p99_ms"], m["runner_cpu_us_per_op"], m["emulator_cpu_us_per_op"])
		}
	}
	if cb, ok := r.res["core_benchmarks"].(map[string]coreBench); ok {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "%-24s %12s %10s %10s %s\n", "core benchmark", "ns/op", "B/op", "allocs/op", "budget")
		names := make([]string, 0, len(cb))
		for k := range cb {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			b := cb[k]
			budget := "-"
			if x, ok := allocBudget[k]; ok {
				budget = strconv.FormatFloat(x, 'f', -1, 64)
				if b.AllocsPerOp > x {
					budget += " MISSED"
				}
			}
			fmt.Fprintf(w, "%-24s %12.1f %10.0f %10.0f %s\n", k, b.NsPerOp, b.BytesPerOp, b.AllocsPerOp, budget)
		}
	}
	if gs, ok := r.res["goals"].(map[string]any); ok {
		if ca, ok := gs["core_allocs"].(map[string]any); ok {
			fmt.Fprintf(w, "\ncore allocation budgets met: %v\n", ca["met"])
		}
	}
	fmt.Fprintf(w, "\nresults: %s   runner: %vs\n", r.f.out, v("runner_seconds"))
}
