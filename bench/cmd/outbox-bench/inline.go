package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/localstack/system"
	"github.com/botharness/outbox/sandbox"
)

// Inline delivery (issue 26): POST /v1/intents with Prefer: wait, measured
// in one stack against three things taken in the same run:
//
//   - the asynchronous road (the same intents without Prefer): its writes,
//     capacity, SQS requests and latencies, for the cost comparison;
//   - the floor, interleaved sample by sample with the inline POSTs: a raw
//     conditional PutItem of the in-flight item, the same sandbox request
//     through the same provider adapter, a raw PutItem of the outcome item,
//     one after the other (no HTTP API, no authorizer, no checks);
//   - a paced account without free slots: inline where a slot is within
//     the hold bound, the pending road otherwise, every intent exactly once.
//
// Both roads use RequestCacheTTL 5 s, as deployed.

const inlineWait = 10 // Prefer: wait=10

type inlinePost struct {
	status  int
	applied string
	intent  core.Intent
	took    time.Duration
}

func postPrefer(ctx context.Context, c *http.Client, url, key, body string, wait int) (inlinePost, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/intents", strings.NewReader(body))
	if err != nil {
		return inlinePost{}, err
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	if wait > 0 {
		req.Header.Set("Prefer", fmt.Sprintf("wait=%d", wait))
	}
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return inlinePost{}, err
	}
	defer resp.Body.Close()
	var p inlinePost
	p.status, p.applied = resp.StatusCode, resp.Header.Get("Preference-Applied")
	err = json.NewDecoder(resp.Body).Decode(&p.intent)
	p.took = time.Since(t0)
	return p, err
}

// prices is bench/prices.json.
type prices struct {
	Date           string             `json:"date"`
	Region         string             `json:"region"`
	USD            map[string]float64 `json:"usd"`
	LambdaMemoryMB float64            `json:"lambda_memory_mb"`
}

func loadPrices(path string) (*prices, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p prices
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range []string{"dynamodb_write_request_unit", "dynamodb_read_request_unit", "sqs_request", "lambda_request", "lambda_gb_second_arm64", "http_api_request"} {
		if p.USD[k] <= 0 {
			return nil, fmt.Errorf("%s: no price %q", path, k)
		}
	}
	if p.LambdaMemoryMB <= 0 {
		return nil, fmt.Errorf("%s: no lambda_memory_mb", path)
	}
	return &p, nil
}

// roadCost is one road's measured use per delivered intent.
type roadCost struct {
	WRU, RRU, SQS, HTTP float64
	// Invocations and billed milliseconds per delivered intent, by function.
	Invocations map[string]float64
	BilledMS    map[string]float64
}

// usdPerMillion prices a road per million delivered intents.
func (c roadCost) usdPerMillion(p *prices) (float64, map[string]float64) {
	gbs := 0.0
	inv := 0.0
	for fn, n := range c.Invocations {
		inv += n
		gbs += n * math.Ceil(c.BilledMS[fn]) / 1000 * p.LambdaMemoryMB / 1024
	}
	parts := map[string]float64{
		"dynamodb_wru":   c.WRU * p.USD["dynamodb_write_request_unit"],
		"dynamodb_rru":   c.RRU * p.USD["dynamodb_read_request_unit"],
		"sqs":            c.SQS * p.USD["sqs_request"],
		"lambda_request": inv * p.USD["lambda_request"],
		"lambda_gb_s":    gbs * p.USD["lambda_gb_second_arm64"],
		"http_api":       c.HTTP * p.USD["http_api_request"],
	}
	total := 0.0
	for k, v := range parts {
		parts[k] = round(v*1e6, 3)
		total += v
	}
	return round(total*1e6, 3), parts
}

func meanDur(d []time.Duration) float64 { return meanMS(d) }

func (r *runner) inline() error {
	pr, err := loadPrices(r.f.prices)
	if err != nil {
		return fmt.Errorf("price table: %w", err)
	}
	const pacedAcct = "bench-paced"
	st, api, stop, err := r.startStack(system.Options{
		Config: wire.Config{
			RequestCacheTTL: 5 * time.Second,
			ProviderConfig:  fmt.Sprintf(`"pacing":{"accounts":{"sandbox/%s":{"rate":5,"per":"1s","burst":1}}}`, pacedAcct),
		},
		PollInterval: r.f.e2ePoll,
	})
	if err != nil {
		return err
	}
	defer stop()
	c := httpClient(1)
	prefix := randName("inl-")
	n, ni := r.f.e2eN, r.f.inlineN
	body := func(i int) string { return intakeBody(account, fmt.Sprintf("chat-%d", i%7)) }

	// Warm-up of both roads (JIT, connections, caches), uncounted.
	for i := 0; i < r.f.e2eWarm; i++ {
		p, err := postPrefer(r.ctx, c, api, fmt.Sprintf("%s-warm-%d", prefix, i), body(i), inlineWait)
		if err != nil || p.status != http.StatusCreated {
			return fmt.Errorf("inline warm-up: %d %v", p.status, err)
		}
		id, _, err := r.submitBody(r.ctx, c, api, fmt.Sprintf("%s-awarm-%d", prefix, i), body(i))
		if err != nil {
			return err
		}
		if _, _, err := r.waitDelivered(st, id, 15*time.Second); err != nil {
			return err
		}
	}
	time.Sleep(2 * r.f.e2ePoll)

	// 1. The asynchronous road, counted.
	r.meter.reset()
	var asyncPost, asyncE2E, asyncDispatch []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		id, t201, err := r.submitBody(r.ctx, c, api, fmt.Sprintf("%s-a-%d", prefix, i), body(i))
		if err != nil {
			return err
		}
		at, in, err := r.waitDelivered(st, id, 15*time.Second)
		if err != nil {
			return err
		}
		asyncPost = append(asyncPost, t201.Sub(t0))
		asyncE2E = append(asyncE2E, at.Sub(t0))
		if len(in.Attempts) > 0 {
			asyncDispatch = append(asyncDispatch, in.UpdatedAt.Sub(in.Attempts[0].StartedAt))
		}
	}
	time.Sleep(2 * r.f.e2ePoll)
	ac := r.meter.snapshot()

	// Templates of the floor: the items an inline delivery writes (the put,
	// already claimed; the outcome), read from a delivered one.
	tmplKey := prefix + "-warm-0"
	tmplID := core.IntentID(benchBot, tmplKey)
	done, err := st.App.Store.Get(uncounted(r.ctx), tmplID)
	if err != nil {
		return fmt.Errorf("floor template: %w", err)
	}
	claimed := *done
	claimed.Status, claimed.Attempts, claimed.ExternalID, claimed.Version = core.StatusInFlight, nil, "", 1
	claimed.Lease = &core.Lease{Owner: "floor", Since: done.CreatedAt, Until: done.CreatedAt.Add(30 * time.Second)}
	putTmpl, err := st.App.Store.MarshalIntent(&claimed)
	if err != nil {
		return err
	}
	outTmpl, err := st.App.Store.MarshalIntent(done)
	if err != nil {
		return err
	}
	fresh := func(tmpl map[string]types.AttributeValue, id string) map[string]types.AttributeValue {
		it := maps.Clone(tmpl)
		it["pk"] = &types.AttributeValueMemberS{Value: dynamo.IntentPK(id)}
		it["id"] = &types.AttributeValueMemberS{Value: id}
		for _, k := range []string{"gsi1sk", "gsi2sk"} {
			if s, ok := it[k].(*types.AttributeValueMemberS); ok {
				pfx, _, _ := strings.Cut(s.Value, "#")
				it[k] = &types.AttributeValueMemberS{Value: pfx + "#" + id}
			}
		}
		return it
	}
	prov, ok := st.App.Providers.Provider("sandbox")
	if !ok {
		return fmt.Errorf("no sandbox provider")
	}
	table := st.App.Store.Table()
	db := r.clients.DynamoDB
	floor := func(i int) (time.Duration, error) {
		ctx := uncounted(r.ctx) // the floor's requests are not the outbox's
		id := fmt.Sprintf("it_floor_%s_%d", prefix, i)
		t0 := time.Now()
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: fresh(putTmpl, id),
			ConditionExpression: aws.String("attribute_not_exists(pk)")}); err != nil {
			return 0, err
		}
		if _, err := prov.Send(ctx, core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: benchBot, Account: account,
			Action: "send_message", Target: claimed.Target, Payload: claimed.Payload, PayloadHash: claimed.PayloadHash,
			Attempt: 1, AttemptStartedAt: time.Now()}); err != nil {
			return 0, err
		}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: fresh(outTmpl, id),
			ConditionExpression: aws.String("#v = :v"), ExpressionAttributeNames: map[string]string{"#v": "version"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: "1"}}}); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}

	// The floor plus what the issue's own rules add to any inline road: the
	// HTTP API and its authorizer (a POST to the same intake function that
	// it refuses before any read: a body that is not JSON) and one read
	// before the put (revalidation, barrier and gate are decided first; one
	// raw GetItem is the least those reads can cost), then the floor. None
	// of it is the outbox's work: uncounted (the refused POST reads
	// nothing). inline_rules_floor_vs_floor_p99 is what the rules alone
	// cost over the floor: the bound below which no design that keeps them
	// can bring inline_vs_floor_p99.
	readKey := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dynamo.IntentPK(tmplID)}, "sk": &types.AttributeValueMemberS{Value: "INTENT"}}
	rulesFloor := func(i int) (time.Duration, error) {
		t0 := time.Now()
		p, err := postPrefer(uncounted(r.ctx), c, api, fmt.Sprintf("%s-r-%d", prefix, i), "{", inlineWait)
		if err != nil || p.status != http.StatusBadRequest {
			return 0, fmt.Errorf("rules floor: a body that is not JSON answered %d (%v), want 400", p.status, err)
		}
		if _, err := db.GetItem(uncounted(r.ctx), &dynamodb.GetItemInput{TableName: aws.String(table), Key: readKey, ConsistentRead: aws.Bool(true)}); err != nil {
			return 0, err
		}
		_, err = floor(ni + i) // its own ids, apart from the floor's
		return time.Since(t0), err
	}

	// 2. Inline, counted, interleaved with the floor and the rules' floor
	// (the order rotating).
	r.meter.reset()
	stopProfile := r.startProfile("inline-cpu.pprof") // where the inline road's CPU goes (go tool pprof -tagfocus variant=intake-server)
	var inl, flo, rfl []time.Duration
	succeeded := 0
	var inlineIDs []string
	for i := 0; i < ni; i++ {
		doInline := func() error {
			p, err := postPrefer(r.ctx, c, api, fmt.Sprintf("%s-i-%d", prefix, i), body(i), inlineWait)
			if err != nil {
				return err
			}
			if p.status != http.StatusCreated {
				return fmt.Errorf("inline submit: %d", p.status)
			}
			if p.intent.Status == core.StatusSucceeded && p.applied == fmt.Sprintf("wait=%d", inlineWait) {
				succeeded++
			}
			inl = append(inl, p.took)
			inlineIDs = append(inlineIDs, p.intent.ID)
			return nil
		}
		doFloor := func() error {
			d, err := floor(i)
			flo = append(flo, d)
			return err
		}
		doRules := func() error {
			d, err := rulesFloor(i)
			rfl = append(rfl, d)
			return err
		}
		order := []func() error{doInline, doFloor, doRules}
		for k := range order {
			if err := order[(k+i)%len(order)](); err != nil {
				return err
			}
		}
	}
	stopProfile()
	time.Sleep(2 * r.f.e2ePoll) // nothing more should be written; let a straggler show
	ic := r.meter.snapshot()
	for _, id := range inlineIDs {
		if k := len(r.sb.Effects(sandbox.EffectFilter{IntentID: id})); k != 1 {
			return fmt.Errorf("inline intent %s: %d effects, want 1", id, k)
		}
	}

	nf, af := float64(ni), float64(n)
	r.set("inline_n", ni)
	r.set("inline_share", round(float64(succeeded)/nf, 4))
	r.set("inline_writes_per_delivered_intent", round(float64(ic.writes())/nf, 3))
	r.set("inline_wcu_per_delivered_intent", round(ic.WCU/nf, 3))
	r.set("inline_rcu_per_delivered_intent", round(ic.RCU/nf, 3))
	r.set("inline_ddb_requests_per_delivered_intent", perN(ic.Ops, nf))
	r.set("inline_ddb_request_mean_ms", ic.meanMS())
	r.set("inline_e2e_p50_ms", pct(inl, 50))
	r.set("inline_e2e_p99_ms", pct(inl, 99))
	r.set("inline_floor_p50_ms", pct(flo, 50))
	r.set("inline_floor_p99_ms", pct(flo, 99))
	r.set("inline_rules_floor_p50_ms", pct(rfl, 50))
	r.set("inline_rules_floor_p99_ms", pct(rfl, 99))
	for _, q := range []float64{50, 99} { // each road's percentile over the floor's
		if fp := pct(flo, q); fp > 0 {
			r.set(fmt.Sprintf("inline_vs_floor_p%.0f", q), round(pct(inl, q)/fp, 3))
			r.set(fmt.Sprintf("inline_rules_floor_vs_floor_p%.0f", q), round(pct(rfl, q)/fp, 3))
		}
	}
	r.set("inline_async_writes_per_delivered_intent", round(float64(ac.writes())/af, 3))
	r.set("inline_async_wcu_per_delivered_intent", round(ac.WCU/af, 3))
	r.set("inline_async_e2e_p50_ms", pct(asyncE2E, 50))
	r.set("inline_async_e2e_p99_ms", pct(asyncE2E, 99))

	// 3. Cost per million delivered intents, both roads, from the counts.
	// Lambda: the authorizer (no result cache) and the intake on every
	// request; the async road adds the stream dispatcher (which fans out to
	// the work queue) and the retrier (which attempts). Sequential traffic:
	// one record per stream batch and one message per retrier batch, the
	// most invocations per intent. Billed time: the intake's from the POST
	// (the authorizer's and the gateway's share included: an upper bound),
	// the authorizer 1 ms (its token read is cached), the dispatcher one
	// SendMessageBatch, the retrier its attempt (claim to outcome) plus its
	// read of the intent.
	sqsMean := func(cn counts) float64 {
		m := cn.meanMS()
		for k, v := range m {
			if strings.HasSuffix(k, "SQS.SendMessageBatch") {
				return v
			}
		}
		return 1
	}
	getMean := func(cn counts) float64 {
		for k, v := range cn.meanMS() {
			if strings.HasSuffix(k, "GetItem:INTENT") {
				return v
			}
		}
		return 1
	}
	async := roadCost{WRU: ac.WCU / af, RRU: ac.RCU / af, SQS: float64(ac.sqsRequests()) / af, HTTP: 1,
		Invocations: map[string]float64{"authorizer": 1, "intake": 1, "dispatcher": 1, "retrier": 1},
		BilledMS: map[string]float64{"authorizer": 1, "intake": meanDur(asyncPost), "dispatcher": sqsMean(ac) + 1,
			"retrier": meanDur(asyncDispatch) + getMean(ac) + 1}}
	inlineCost := roadCost{WRU: ic.WCU / nf, RRU: ic.RCU / nf, SQS: float64(ic.sqsRequests()) / nf, HTTP: 1,
		Invocations: map[string]float64{"authorizer": 1, "intake": 1},
		BilledMS:    map[string]float64{"authorizer": 1, "intake": meanDur(inl)}}
	au, aparts := async.usdPerMillion(pr)
	iu, iparts := inlineCost.usdPerMillion(pr)
	r.set("usd_per_million_delivered_async", au)
	r.set("usd_per_million_delivered_inline", iu)
	if au > 0 {
		r.set("inline_vs_async_usd", round(iu/au, 3))
	}
	r.set("cost_model", map[string]any{
		"prices": map[string]any{"date": pr.Date, "region": pr.Region, "usd": pr.USD, "lambda_memory_mb": pr.LambdaMemoryMB, "file": r.f.prices},
		"async":  map[string]any{"per_intent": async, "usd_per_million_by_part": aparts},
		"inline": map[string]any{"per_intent": inlineCost, "usd_per_million_by_part": iparts},
	})

	// 4. A paced account (5/s) and a burst of 15 inline submissions: those
	// whose slot is within the hold bound go inline, the rest fall back to
	// the pending road with their slot handed on; each is sent once.
	const burst = 15
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied, pending := 0, 0
	var pacedIDs []string
	var perr error
	pc := httpClient(burst)
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := postPrefer(r.ctx, pc, api, fmt.Sprintf("%s-p-%d", prefix, i), intakeBody(pacedAcct, "chat-1"), inlineWait)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || p.status != http.StatusCreated {
				perr = fmt.Errorf("paced submit: %d %v", p.status, err)
				return
			}
			pacedIDs = append(pacedIDs, p.intent.ID)
			if p.applied != "" {
				applied++
			} else if p.intent.Status == core.StatusPending {
				pending++
			}
		}()
	}
	wg.Wait()
	if perr != nil {
		return perr
	}
	notOnce := 0
	for _, id := range pacedIDs {
		if _, _, err := r.waitDelivered(st, id, 30*time.Second); err != nil {
			return fmt.Errorf("paced fallback: %w", err)
		}
	}
	time.Sleep(time.Second)
	for _, id := range pacedIDs {
		if len(r.sb.Effects(sandbox.EffectFilter{IntentID: id})) != 1 {
			notOnce++
		}
	}
	r.set("inline_paced_burst", burst)
	r.set("inline_paced_answered_inline", applied)
	r.set("inline_paced_fell_back", pending)
	r.set("inline_paced_not_exactly_one_effect", notOnce)
	fmt.Fprintf(os.Stderr, "bench:   inline: share %.3f, %.2f writes %.2f WCU/intent, p50 %.1fms p99 %.1fms (floor p99 %.1fms, ratio %.2f); async %.2f writes; USD/M async %.2f inline %.2f; paced burst %d inline / %d fell back\n",
		float64(succeeded)/nf, float64(ic.writes())/nf, ic.WCU/nf, pct(inl, 50), pct(inl, 99), pct(flo, 99), pct(inl, 99)/math.Max(pct(flo, 99), 0.001),
		float64(ac.writes())/af, au, iu, applied, pending)
	return nil
}
