// Package idlecost prices what the outbox stack costs a month when nothing
// happens (issue 50): the synthesized CloudFormation template says what
// exists (alarms, dashboard, secrets, keys, the table's PITR, the schedule
// and the functions it runs, the queue mappings that poll), the price table
// (bench/prices.json) what each costs, and the bench's idle phase what one
// scheduled sweep of an empty table uses. Each item is quantity x unit
// price; the total is their sum. Prices are list prices without free tier.
package idlecost

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Prices is bench/prices.json (the part this package reads).
type Prices struct {
	Date           string             `json:"date"`
	Region         string             `json:"region"`
	USD            map[string]float64 `json:"usd"`
	LambdaMemoryMB float64            `json:"lambda_memory_mb"`
	Idle           Assumptions        `json:"idle"`
}

// Assumptions are what the template cannot say; each has its reason in
// prices.json.
type Assumptions struct {
	HoursPerMonth float64 `json:"hours_per_month"`
	// SQSIdleReceivesPerMinute: ReceiveMessage calls per minute one Lambda
	// SQS event source mapping makes on an empty queue (its pollers'
	// 20-second long polls).
	SQSIdleReceivesPerMinute float64 `json:"sqs_idle_receives_per_minute_per_mapping"`
	// LambdaPlatformLogBytes: the START/END/REPORT lines Lambda writes to
	// CloudWatch Logs per invocation.
	LambdaPlatformLogBytes float64 `json:"lambda_platform_log_bytes_per_invocation"`
	// TableGB: the table's size, for PITR and storage (0: an empty table).
	TableGB float64 `json:"table_gb"`
	// Sweep is one scheduled sweep of an empty table, used unless the
	// bench measured it (Measured).
	Sweep Sweep `json:"sweep"`
}

// Sweep is what one scheduled run of the sweeper uses on an empty table
// (the bench's idle phase: results.json idle_sweep_*).
type Sweep struct {
	RRU         float64  `json:"rru"`
	WRU         float64  `json:"wru"`
	SQSRequests float64  `json:"sqs_requests"`
	BilledMS    float64  `json:"billed_ms"`
	MetricBytes float64  `json:"metric_bytes"`
	MetricNames []string `json:"metric_names"`
	// From says where the figures come from.
	From string `json:"from"`
}

// Item is one line of the bill.
type Item struct {
	Item        string  `json:"item"`
	Quantity    float64 `json:"quantity"`
	Unit        string  `json:"unit"`
	USDPerUnit  float64 `json:"usd_per_unit"`
	USDPerMonth float64 `json:"usd_per_month"`
	Basis       string  `json:"basis"`
}

// Report is the idle bill.
type Report struct {
	USDPerMonth float64 `json:"usd_per_month"`
	Items       []Item  `json:"items"`
}

// ParsePrices reads prices.json and checks every price and assumption the
// computation uses.
func ParsePrices(b []byte) (Prices, error) {
	var p Prices
	if err := json.Unmarshal(b, &p); err != nil {
		return p, err
	}
	for _, k := range priceKeys {
		if _, ok := p.USD[k]; !ok {
			return p, fmt.Errorf("no price %q", k)
		}
	}
	if p.LambdaMemoryMB <= 0 || p.Idle.HoursPerMonth <= 0 || p.Idle.SQSIdleReceivesPerMinute < 0 {
		return p, fmt.Errorf("lambda_memory_mb and idle.hours_per_month must be set")
	}
	return p, nil
}

var priceKeys = []string{
	"cloudwatch_alarm_metric_month", "cloudwatch_alarm_metric_month_high_resolution", "cloudwatch_composite_alarm_month",
	"cloudwatch_dashboard_month", "cloudwatch_custom_metric_month", "cloudwatch_logs_ingested_gb",
	"secretsmanager_secret_month", "kms_key_month", "dynamodb_pitr_gb_month", "dynamodb_storage_gb_month",
	"xray_trace_recorded", "lambda_request", "lambda_gb_second_arm64", "sqs_request",
	"dynamodb_read_request_unit", "dynamodb_write_request_unit",
}

type resource struct {
	Type       string          `json:"Type"`
	Properties json.RawMessage `json:"Properties"`
}

// Compute prices the template's fixed monthly cost at zero traffic.
func Compute(template []byte, p Prices) (Report, error) {
	var t struct {
		Resources map[string]resource `json:"Resources"`
	}
	if err := json.Unmarshal(template, &t); err != nil {
		return Report{}, fmt.Errorf("template: %w", err)
	}
	if len(t.Resources) == 0 {
		return Report{}, fmt.Errorf("template: no resources")
	}
	names := make([]string, 0, len(t.Resources))
	for n := range t.Resources {
		names = append(names, n)
	}
	sort.Strings(names)
	byType := map[string][]string{}
	for _, n := range names {
		byType[t.Resources[n].Type] = append(byType[t.Resources[n].Type], n)
	}
	props := func(n string, v any) error {
		if len(t.Resources[n].Properties) == 0 {
			return nil
		}
		if err := json.Unmarshal(t.Resources[n].Properties, v); err != nil {
			return fmt.Errorf("template: %s: %w", n, err)
		}
		return nil
	}
	var items []Item
	add := func(item string, qty float64, unit, priceKey, basis string) {
		price := p.USD[priceKey]
		items = append(items, Item{Item: item, Quantity: round(qty, 3), Unit: unit, USDPerUnit: price,
			USDPerMonth: round(qty*price, 4), Basis: basis})
	}
	perMonth := p.Idle.HoursPerMonth * 60 // minutes

	// Alarms: billed per metric the alarm evaluates (a metric math alarm
	// pays for each metric of its expression, not for the expression).
	var std, high float64
	for _, n := range byType["AWS::CloudWatch::Alarm"] {
		var a struct {
			Period  float64
			Metrics []struct {
				MetricStat *struct{ Period float64 }
			}
		}
		if err := props(n, &a); err != nil {
			return Report{}, err
		}
		if len(a.Metrics) == 0 {
			if a.Period > 0 && a.Period < 60 {
				high++
			} else {
				std++
			}
			continue
		}
		for _, m := range a.Metrics {
			if m.MetricStat == nil {
				continue
			}
			if m.MetricStat.Period > 0 && m.MetricStat.Period < 60 {
				high++
			} else {
				std++
			}
		}
	}
	alarms := len(byType["AWS::CloudWatch::Alarm"])
	add("CloudWatch alarms", std, "alarm metric", "cloudwatch_alarm_metric_month",
		fmt.Sprintf("%d alarms (AWS::CloudWatch::Alarm); a metric math alarm counts each metric it reads", alarms))
	if high > 0 {
		add("CloudWatch alarms, high resolution", high, "alarm metric", "cloudwatch_alarm_metric_month_high_resolution", "period under 60 s")
	}
	if n := len(byType["AWS::CloudWatch::CompositeAlarm"]); n > 0 {
		add("CloudWatch composite alarms", float64(n), "alarm", "cloudwatch_composite_alarm_month", "AWS::CloudWatch::CompositeAlarm")
	}
	add("CloudWatch dashboards", float64(len(byType["AWS::CloudWatch::Dashboard"])), "dashboard", "cloudwatch_dashboard_month", "AWS::CloudWatch::Dashboard")

	// Secrets: those the stack creates, and those its functions read that
	// the operator creates (webhook signing secrets, provider secrets).
	created := map[string]bool{}
	for _, n := range byType["AWS::SecretsManager::Secret"] {
		var s struct{ Name any }
		if err := props(n, &s); err != nil {
			return Report{}, err
		}
		if name, ok := s.Name.(string); ok {
			created[name] = true
		} else {
			created[n] = true
		}
	}
	add("Secrets Manager secrets the stack creates", float64(len(created)), "secret", "secretsmanager_secret_month", "AWS::SecretsManager::Secret")
	referenced := map[string]bool{}
	var scheduled []string
	funcs := map[string]lambdaFn{}
	for _, n := range byType["AWS::Lambda::Function"] {
		var f lambdaFn
		if err := props(n, &f); err != nil {
			return Report{}, err
		}
		funcs[n] = f
		if v, ok := f.Environment.Variables["OUTBOX_PROVIDER_SECRETS"].(string); ok {
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" && !created[s] {
					referenced[s] = true
				}
			}
		}
		if v, ok := f.Environment.Variables["OUTBOX_PROVIDER_CONFIG"].(string); ok {
			for _, m := range secretRefRE.FindAllStringSubmatch(v, -1) {
				if !created[m[1]] {
					referenced[m[1]] = true
				}
			}
		}
	}
	add("Secrets Manager secrets the stack reads (the operator creates them)", float64(len(referenced)), "secret", "secretsmanager_secret_month",
		"OUTBOX_PROVIDER_SECRETS and the secretsmanager: references of OUTBOX_PROVIDER_CONFIG")
	add("KMS customer managed keys", float64(len(byType["AWS::KMS::Key"])), "key", "kms_key_month",
		"AWS::KMS::Key (queues SSE-SQS, buckets SSE-S3, secrets aws/secretsmanager: no customer key)")

	// The table: PITR and storage are per GB, so an empty table costs nothing.
	pitr := 0
	for _, n := range byType["AWS::DynamoDB::Table"] {
		var tb struct {
			PointInTimeRecoverySpecification struct{ PointInTimeRecoveryEnabled bool }
		}
		if err := props(n, &tb); err != nil {
			return Report{}, err
		}
		if tb.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled {
			pitr++
		}
	}
	if pitr > 0 {
		add("DynamoDB point-in-time recovery", float64(pitr)*p.Idle.TableGB, "GB-month", "dynamodb_pitr_gb_month",
			fmt.Sprintf("%d table(s) with PITR, %g GB each (idle.table_gb)", pitr, p.Idle.TableGB))
	}
	add("DynamoDB storage", float64(len(byType["AWS::DynamoDB::Table"]))*p.Idle.TableGB, "GB-month", "dynamodb_storage_gb_month",
		fmt.Sprintf("%g GB (idle.table_gb)", p.Idle.TableGB))

	// Schedules: each scheduled function runs whether or not there is work.
	for _, n := range byType["AWS::Events::Rule"] {
		var r struct {
			ScheduleExpression string
			State              string
			Targets            []struct{ Arn any }
		}
		if err := props(n, &r); err != nil {
			return Report{}, err
		}
		if r.ScheduleExpression == "" || r.State == "DISABLED" {
			continue
		}
		every, err := rateMinutes(r.ScheduleExpression)
		if err != nil {
			return Report{}, fmt.Errorf("template: %s: %w", n, err)
		}
		for _, tg := range r.Targets {
			fn := getAttTarget(tg.Arn)
			if _, ok := funcs[fn]; ok {
				scheduled = append(scheduled, fn)
				f := funcs[fn]
				runs := perMonth / every
				name := f.FunctionName
				if name == "" {
					name = fn
				}
				sw := p.Idle.Sweep
				sched := fmt.Sprintf("%s, %s", name, r.ScheduleExpression)
				add("Lambda requests: "+sched, runs, "invocation", "lambda_request", fmt.Sprintf("%.0f runs a month (%g h)", runs, p.Idle.HoursPerMonth))
				mem := f.MemorySize
				if mem == 0 {
					mem = 128
				}
				add("Lambda compute: "+sched, runs*math.Ceil(sw.BilledMS)/1000*mem/1024, "GB-second", "lambda_gb_second_arm64",
					fmt.Sprintf("%g MB x %g ms billed per run (%s)", mem, math.Ceil(sw.BilledMS), sw.From))
				if f.TracingConfig.Mode == "Active" {
					add("X-Ray traces: "+sched, runs, "trace", "xray_trace_recorded", "active tracing records one trace per invocation")
				}
				add("DynamoDB reads: "+sched, runs*sw.RRU, "read request unit", "dynamodb_read_request_unit",
					fmt.Sprintf("%g RRU per run on an empty table (%s)", sw.RRU, sw.From))
				if sw.WRU > 0 {
					add("DynamoDB writes: "+sched, runs*sw.WRU, "write request unit", "dynamodb_write_request_unit",
						fmt.Sprintf("%g WRU per run (%s)", sw.WRU, sw.From))
				}
				if sw.SQSRequests > 0 {
					add("SQS requests: "+sched, runs*sw.SQSRequests, "request", "sqs_request", fmt.Sprintf("%g per run (%s)", sw.SQSRequests, sw.From))
				}
				add("CloudWatch custom metrics: "+sched, float64(len(sw.MetricNames)), "metric", "cloudwatch_custom_metric_month",
					fmt.Sprintf("published every run, no dimensions: %s (%s)", strings.Join(sw.MetricNames, ", "), sw.From))
				add("CloudWatch Logs ingestion: "+sched, runs*(sw.MetricBytes+p.Idle.LambdaPlatformLogBytes)/1e9, "GB", "cloudwatch_logs_ingested_gb",
					fmt.Sprintf("%g B of metric lines + %g B of START/END/REPORT per run", sw.MetricBytes, p.Idle.LambdaPlatformLogBytes))
			}
		}
	}

	// Queue mappings poll an empty queue all the time; stream mappings'
	// reads are free.
	queues := map[string]bool{}
	for _, n := range byType["AWS::SQS::Queue"] {
		queues[n] = true
	}
	sqsMappings, streamMappings := 0, 0
	for _, n := range byType["AWS::Lambda::EventSourceMapping"] {
		var m struct{ EventSourceArn any }
		if err := props(n, &m); err != nil {
			return Report{}, err
		}
		src := getAttTarget(m.EventSourceArn)
		switch {
		case queues[src]:
			sqsMappings++
		case t.Resources[src].Type == "AWS::DynamoDB::Table":
			streamMappings++
		}
	}
	add("SQS: idle polls of the queue mappings", float64(sqsMappings)*perMonth*p.Idle.SQSIdleReceivesPerMinute, "request", "sqs_request",
		fmt.Sprintf("%d SQS event source mapping(s) x %g empty receives a minute", sqsMappings, p.Idle.SQSIdleReceivesPerMinute))
	if streamMappings > 0 {
		items = append(items, Item{Item: "DynamoDB Streams: polls of the stream mappings", Quantity: float64(streamMappings), Unit: "mapping",
			Basis: "GetRecords by Lambda triggers is free"})
	}
	if len(scheduled) == 0 {
		return Report{}, fmt.Errorf("template: no scheduled function (the sweeper's rule is missing)")
	}
	total := 0.0
	for _, it := range items {
		total += it.Quantity * it.USDPerUnit
	}
	return Report{USDPerMonth: round(total, 2), Items: items}, nil
}

type lambdaFn struct {
	FunctionName string
	MemorySize   float64
	Environment  struct {
		Variables map[string]any
	}
	TracingConfig struct{ Mode string }
}

var (
	secretRefRE = regexp.MustCompile(`secretsmanager:([^"#\s]+)`)
	rateRE      = regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`)
)

// rateMinutes is the period of an EventBridge rate expression in minutes.
func rateMinutes(expr string) (float64, error) {
	m := rateRE.FindStringSubmatch(expr)
	if m == nil {
		return 0, fmt.Errorf("schedule %q: only rate(...) expressions are priced", expr)
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	switch m[2] {
	case "hour", "hours":
		n *= 60
	case "day", "days":
		n *= 1440
	}
	if n <= 0 {
		return 0, fmt.Errorf("schedule %q: period must be positive", expr)
	}
	return n, nil
}

// getAttTarget is the logical id of {"Fn::GetAtt": [id, attr]} or {"Ref": id}.
func getAttTarget(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) > 0 {
		s, _ := ga[0].(string)
		return s
	}
	s, _ := m["Ref"].(string)
	return s
}

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

// Table renders the report as a Markdown table (the README shows it).
func (r Report) Table() string {
	var b strings.Builder
	b.WriteString("| item | quantity | unit | USD per unit | USD per month |\n|---|---:|---|---:|---:|\n")
	for _, it := range r.Items {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.2f |\n", it.Item, num(it.Quantity), it.Unit, num(it.USDPerUnit), it.USDPerMonth)
	}
	fmt.Fprintf(&b, "| **total** | | | | **%.2f** |\n", r.USDPerMonth)
	return b.String()
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
