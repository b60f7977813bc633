package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
	"github.com/botharness/outbox/localstack/system"
)

// intakeBody is a typical intent request of about 1 KiB.
func intakeBody(acct, target string) string {
	text := strings.Repeat("Your table for four is confirmed for Friday at 19:30. ", 13)
	return fmt.Sprintf(`{"kind":"reply","provider":"sandbox","account":%q,"action":"send_message","target":%q,`+
		`"payload":{"text":%q,"format":"markdown","thread":"th-8812","buttons":[{"id":"ok","label":"OK"},{"id":"cancel","label":"Cancel"}]},`+
		`"grant":{"id":"g-1","version":1},"metadata":{"conversation":"conv-1234","turn":7}}`, acct, target, text)
}

func httpClient(conc int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: conc * 2, MaxIdleConnsPerHost: conc * 2, IdleConnTimeout: time.Minute,
		DisableCompression: true,
	}, Timeout: 30 * time.Second}
}

// post submits one intent over HTTP and returns the status, body and the
// time the response headers arrived.
func post(ctx context.Context, c *http.Client, url, key, body string) (int, []byte, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/intents", strings.NewReader(body))
	if err != nil {
		return 0, nil, time.Time{}, err
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, time.Time{}, err
	}
	at := time.Now()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, b, at, err
}

// variant is one measured way of committing an intent-sized item.
type variant struct {
	name string
	desc string
	op   func(ctx context.Context, n int64) error
}

// throughput measures, interleaved, at concurrency 1 and 8:
//
//	raw          conditional PutItem of an intent-sized item (the floor)
//	raw_calls    the DynamoDB calls one intake makes (token, grant, put), nothing else
//	handler      the intake handler called directly (authorizer context given): no HTTP, no authorizer
//	intake       POST /v1/intents over HTTP through the local gateway and the authorizer
func (r *runner) throughput() error {
	st, api, stop, err := r.startStack(system.Options{Config: wire.Config{RequestCacheTTL: 5 * time.Second}, DisableStream: true, DisableQueue: true}) // as deployed (OUTBOX_REQUEST_CACHE_TTL default)
	if err != nil {
		return err
	}
	defer stop()
	table := st.App.Store.Table()
	db := r.clients.DynamoDB
	body := intakeBody(account, "chat-1")
	client := httpClient(8)

	// The raw item is the item intake really stores, under fresh keys.
	status, b, _, err := post(r.ctx, client, api, "template", body)
	if err != nil || status != http.StatusCreated {
		return fmt.Errorf("template intent: %d %s %v", status, b, err)
	}
	tmplOut, err := db.GetItem(uncounted(r.ctx), &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: dynamo.IntentPK(core.IntentID(benchBot, "template"))},
			"sk": &types.AttributeValueMemberS{Value: "INTENT"},
		},
	})
	if err != nil || len(tmplOut.Item) == 0 {
		return fmt.Errorf("read template item: %v", err)
	}
	tmpl := tmplOut.Item
	gsiPrefix := ""
	if s, ok := tmpl["gsi1sk"].(*types.AttributeValueMemberS); ok {
		gsiPrefix, _, _ = strings.Cut(s.Value, "#")
	}
	r.set("intent_item_bytes", dynamo.ItemSize(tmpl, dynamo.NumberBytesDynamoDB))
	rawItem := func(n int64) map[string]types.AttributeValue {
		id := "it_raw" + strconv.FormatInt(n, 36) + randName("")
		it := maps.Clone(tmpl)
		it["pk"] = &types.AttributeValueMemberS{Value: dynamo.IntentPK(id)}
		it["id"] = &types.AttributeValueMemberS{Value: id}
		if gsiPrefix != "" {
			it["gsi1sk"] = &types.AttributeValueMemberS{Value: gsiPrefix + "#" + id}
		}
		return it
	}
	put := func(ctx context.Context, n int64) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(table), Item: rawItem(n),
			ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	}
	tokenKey := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "TOKEN#" + auth.TokenHash(benchToken)},
		"sk": &types.AttributeValueMemberS{Value: "TOKEN"},
	}
	grantKey := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: dynamo.GrantPK(benchGrant)},
		"sk": &types.AttributeValueMemberS{Value: "GRANT"},
	}
	runID := randName("")
	// The same intake with tracing on (issue 30): a second stack whose
	// tracer exports every span by OTLP/HTTP to an in-process receiver. The
	// exporter is chosen from the environment at assembly, as deployed.
	sink := &spanSink{}
	sinkURL, closeSink, err := serve(sink)
	if err != nil {
		return err
	}
	defer closeSink()
	os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sinkURL)
	tst, tracedAPI, stopTraced, err := r.startStack(system.Options{Config: wire.Config{RequestCacheTTL: 5 * time.Second}, DisableStream: true, DisableQueue: true})
	os.Unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	if err != nil {
		return err
	}
	defer stopTraced()
	cachedAPI, closeCached, err := serve(labelled(r.cachedIntakeGateway(st), "intake_cached-server"))
	if err != nil {
		return err
	}
	defer closeCached()
	// viaHTTP posts intent n to an intake's URL (keys prefix-runID-n).
	viaHTTP := func(name, url, prefix string) func(context.Context, int64) error {
		return func(ctx context.Context, n int64) error {
			status, b, _, err := post(ctx, client, url, prefix+runID+"-"+strconv.FormatInt(n, 10), body)
			if err != nil {
				return err
			}
			if status != http.StatusCreated {
				return fmt.Errorf("%s: %d %s", name, status, bytes.TrimSpace(b))
			}
			return nil
		}
	}
	variants := []variant{
		{"raw", "conditional PutItem of the same item", put},
		{"raw_calls", "the DynamoDB calls of one intake: GetItem(token) + GetItem(grant, consistent) + conditional PutItem", func(ctx context.Context, n int64) error {
			if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: tokenKey}); err != nil {
				return err
			}
			if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: grantKey, ConsistentRead: aws.Bool(true)}); err != nil {
				return err
			}
			return put(ctx, n)
		}},
		{"handler", "intake handler called directly (no HTTP, no authorizer)", func(ctx context.Context, n int64) error {
			req := events.APIGatewayV2HTTPRequest{
				Version: "2.0", RouteKey: "POST /v1/intents", RawPath: "/v1/intents",
				Headers: map[string]string{"content-type": "application/json", "idempotency-key": "h-" + runID + "-" + strconv.FormatInt(n, 10)},
				Body:    body,
				RequestContext: events.APIGatewayV2HTTPRequestContext{
					Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
						Lambda: map[string]any{"kind": core.PrincipalBot, "name": benchBot},
					},
				},
			}
			resp, err := st.Intake.Handle(ctx, req)
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusCreated {
				return fmt.Errorf("handler: %d %s", resp.StatusCode, resp.Body)
			}
			return nil
		}},
		{"intake", "POST /v1/intents over HTTP, gateway + authorizer + handler", viaHTTP("intake", api, "i-")},
		{"intake_traced", "POST /v1/intents as intake, with every span exported by OTLP/HTTP", viaHTTP("intake_traced", tracedAPI, "t-")},
		{"intake_cached", "what-if: intake with the authorizer answer and the grant cached (see whatif.go)", viaHTTP("intake_cached", cachedAPI, "c-")},
	}

	// Warm up every variant (JIT of the emulator, connection pools), then
	// measure in rounds, alternating the order so drift hits both sides.
	for _, v := range variants {
		runLoad(r.ctx, "warmup", 8, r.f.warmup/2, 0, false, v.op)
		runLoad(r.ctx, "warmup", 1, r.f.warmup/4, 0, false, v.op)
	}
	// How many DynamoDB requests one call of each variant makes.
	calls := map[string]map[string]int64{}
	for _, v := range variants {
		r.meter.reset()
		const k = 20
		for i := 0; i < k; i++ {
			if err := v.op(r.ctx, seq.Add(1)); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
		}
		c := r.meter.snapshot()
		perCall := map[string]int64{}
		for op, n := range c.byOp() {
			perCall[op] = n / k
		}
		calls[v.name] = perCall
		if v.name == "raw" {
			r.set("raw_put_wcu", round(c.WCU/k, 2))
		}
		if v.name == "intake" {
			r.set("intake_wcu", round(c.WCU/k, 2))
		}
	}
	r.set("ddb_requests_per_call", calls)
	if !maps.Equal(calls["intake_traced"], calls["intake"]) {
		r.note("tracing changed intake's DynamoDB calls: traced %v, intake %v", calls["intake_traced"], calls["intake"])
	}
	if !maps.Equal(calls["raw_calls"], calls["intake"]) {
		r.note("raw_calls no longer mirrors intake's DynamoDB calls: raw_calls %v, intake %v", calls["raw_calls"], calls["intake"])
	}

	results := map[string]*agg{}
	for _, v := range variants {
		for _, c := range []int{1, 8} {
			results[fmt.Sprintf("%s_c%d", v.name, c)] = &agg{}
		}
	}
	// One CPU profile of the measured slices; samples carry variant=<name>_c<N>
	// (the gateways' goroutines too): go tool pprof -tagfocus variant=intake_c8 ...
	stopProf := r.startProfile("cpu-throughput.pprof")
	defer stopProf()
	perRound := map[string][]float64{}
	for round := 0; round < r.f.rounds; round++ {
		for _, c := range []int{1, 8} {
			order := variants
			if round%2 == 1 {
				order = reversed(variants)
			}
			for _, v := range order {
				dur := r.f.c1Dur
				if c == 8 {
					dur = r.f.c8Dur
				}
				key := fmt.Sprintf("%s_c%d", v.name, c)
				res := runLoad(r.ctx, key, c, dur, r.f.emuPID, v.name == "intake" && c == 8, v.op)
				results[key].add(res)
				perRound[key] = append(perRound[key], float64(res.Ops)/res.Elapsed.Seconds())
				if r.f.verbose {
					fmt.Fprintf(os.Stderr, "bench:   round %d %-16s %7.0f/s  p50 %.2fms  p99 %.2fms  errors %d\n",
						round+1, key, float64(res.Ops)/res.Elapsed.Seconds(), pct(res.Lat, 50), pct(res.Lat, 99), res.Errors)
				}
			}
		}
	}
	for k, a := range results {
		if a.Errors > 0 {
			return fmt.Errorf("%s: %d errors, first: %v", k, a.Errors, a.FirstErr)
		}
	}
	rawC1, rawC8 := results["raw_c1"], results["raw_c8"]
	inC1, inC8 := results["intake_c1"], results["intake_c8"]
	r.set("raw_put_per_s_c1", round(rawC1.perSec(), 1))
	r.set("raw_put_per_s_c8", round(rawC8.perSec(), 1))
	r.set("intake_per_s_c1", round(inC1.perSec(), 1))
	r.set("intake_per_s_c8", round(inC8.perSec(), 1))
	// Ratios are the median over rounds of the ratio of two adjacent slices:
	// other work on the machine comes in bursts, and a burst that hits one
	// slice spoils one round, not the figure. The pooled ratios are kept too.
	ratio := func(a, b, c string) float64 {
		var rs []float64
		for i := range perRound[a+"_"+c] {
			rs = append(rs, perRound[a+"_"+c][i]/perRound[b+"_"+c][i])
		}
		return round(median(rs), 3)
	}
	for _, c := range []string{"c1", "c8"} {
		r.set("intake_vs_raw_"+c, ratio("intake", "raw", c))
		r.set("intake_vs_raw_"+c+"_pooled", round(results["intake_"+c].perSec()/results["raw_"+c].perSec(), 3))
		var rs []float64
		for i := range perRound["intake_"+c] {
			rs = append(rs, round(perRound["intake_"+c][i]/perRound["raw_"+c][i], 3))
		}
		r.set("intake_vs_raw_"+c+"_by_round", rs)
		// Attribution of the gap: the DynamoDB calls alone, the handler
		// without HTTP and authorizer, and the what-if with caches.
		r.set("raw_calls_vs_raw_"+c, ratio("raw_calls", "raw", c))
		r.set("intake_vs_raw_calls_"+c, ratio("intake", "raw_calls", c))
		r.set("handler_vs_raw_"+c, ratio("handler", "raw", c))
		r.set("whatif_intake_cached_vs_raw_"+c, ratio("intake_cached", "raw", c))
		r.set("intake_traced_vs_raw_"+c, ratio("intake_traced", "raw", c))
		r.set("intake_traced_vs_intake_"+c, ratio("intake_traced", "intake", c))
	}
	// Tracing on means spans really left: flush the batcher and count what
	// the receiver decoded (at least one span per traced request).
	if err := tst.App.Tracer.Flush(r.ctx); err != nil {
		return fmt.Errorf("flush traced intake spans: %w", err)
	}
	tracedOps := results["intake_traced_c1"].Ops + results["intake_traced_c8"].Ops
	r.set("intake_traced_spans_exported", sink.spans.Load())
	r.set("intake_traced_otlp_exports", sink.exports.Load())
	if sink.spans.Load() < int64(tracedOps) {
		return fmt.Errorf("intake_traced: %d spans exported for %d measured requests: tracing was not on", sink.spans.Load(), tracedOps)
	}
	// Headline latencies are at concurrency 1 (what a caller waits); the c8
	// figures are mostly queueing for the two cores.
	r.set("intake_p50_ms", pct(inC1.Lat, 50))
	r.set("intake_p99_ms", pct(inC1.Lat, 99))
	r.set("raw_put_p50_ms", pct(rawC1.Lat, 50))
	r.set("raw_put_p99_ms", pct(rawC1.Lat, 99))
	r.set("intake_c8_p50_ms", pct(inC8.Lat, 50))
	r.set("intake_c8_p99_ms", pct(inC8.Lat, 99))
	r.set("raw_put_c8_p50_ms", pct(rawC8.Lat, 50))
	r.set("raw_put_c8_p99_ms", pct(rawC8.Lat, 99))
	r.set("localhost_rss_mb_under_load", round(float64(inC8.MaxRSSKB)/1024, 1))
	r.set("localhost_vmhwm_mb", round(float64(procStatusKB("VmHWM"))/1024, 1))

	detail := map[string]any{}
	for k, a := range results {
		detail[k] = map[string]any{
			"per_s": round(a.perSec(), 1), "ops": a.Ops, "p50_ms": pct(a.Lat, 50), "p99_ms": pct(a.Lat, 99),
			"mean_ms":                round(meanMS(a.Lat), 3),
			"runner_cpu_us_per_op":   round(cpuPerOp(a.SelfCPU, a.Ops), 1),
			"emulator_cpu_us_per_op": round(cpuPerOp(a.EmuCPU, a.Ops), 1),
		}
	}
	r.set("throughput_detail", detail)
	// On a machine this small the c8 slices are CPU-bound (runner + emulator
	// share the cores), so the throughput ratio should follow the ratio of
	// total CPU per op; a mismatch means something else (locks, I/O) limits.
	if r.f.emuPID > 0 {
		cpu := func(a *agg) float64 { return cpuPerOp(a.SelfCPU+a.EmuCPU, a.Ops) }
		r.set("cpu_model_intake_vs_raw_c8", round(cpu(rawC8)/cpu(inC8), 3))
	}
	if r.f.emuPID == 0 {
		r.note("emulator PID unknown: no emulator CPU per op (set OUTBOX_EMULATOR_RUN_DIR and OUTBOX_DDB_PORT, or -emulator-pid)")
	}
	return nil
}

func reversed[T any](s []T) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
