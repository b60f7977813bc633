package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/botlimit"
	"github.com/botharness/outbox/localstack/system"
	"github.com/botharness/outbox/sandbox"
)

// e2eSample is one intent's way from the 201 to the side effect.
type e2eSample struct {
	e2e      time.Duration // 201 received -> effect committed at the sandbox
	lag      time.Duration // 201 received -> dispatcher starts the attempt (stream poll + GetRecords)
	dispatch time.Duration // attempt start -> effect (claim, capabilities, send)
}

type e2eRun struct {
	poll     time.Duration
	samples  []e2eSample
	counts   counts
	attempts int
	n        int
	sandbox  map[string]any
}

func (r *runner) submitAndWait(ctx context.Context, c *http.Client, st *system.Stack, api, key, acct, target string, timeout time.Duration) (string, time.Time, error) {
	return r.submitBody(ctx, c, api, key, intakeBody(acct, target))
}

// submitBody posts one intent body and returns the intent id and when the 201 arrived.
func (r *runner) submitBody(ctx context.Context, c *http.Client, api, key, body string) (string, time.Time, error) {
	status, b, at, err := post(ctx, c, api, key, body)
	if err != nil {
		return "", at, err
	}
	if status != http.StatusCreated {
		return "", at, fmt.Errorf("submit: %d %s", status, b)
	}
	return core.IntentID(benchBot, key), at, nil
}

// waitEffect waits until the sandbox has committed the intent's effect and
// the intent's outcome is recorded; it returns the effect's commit time.
func (r *runner) waitDelivered(st *system.Stack, id string, timeout time.Duration) (time.Time, *core.Intent, error) {
	deadline := time.Now().Add(timeout)
	var at time.Time
	for {
		if effs := r.sb.Effects(sandbox.EffectFilter{IntentID: id}); len(effs) > 0 {
			at = effs[0].At
			break
		}
		if time.Now().After(deadline) {
			return at, nil, fmt.Errorf("no effect for %s after %v: %w", id, timeout, errTimeout)
		}
		time.Sleep(500 * time.Microsecond)
	}
	for {
		in, err := st.App.Store.Get(uncounted(r.ctx), id)
		if err == nil && in.Status == core.StatusSucceeded {
			return at, in, nil
		}
		if time.Now().After(deadline) {
			st := "?"
			if in != nil {
				st = string(in.Status)
			}
			return at, in, fmt.Errorf("intent %s is %s after %v (err %v): %w", id, st, timeout, err, errTimeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// e2e delivers n intents one at a time (after a random pause, so the arrival
// is at a random phase of the stream poll) and times each from the 201 to
// the effect at the sandbox. It counts every DynamoDB request the n intents
// cost, intake included.
func (r *runner) e2e(poll time.Duration, n int) (*e2eRun, error) {
	return r.e2eWith(poll, n, func(acct, target string, _ int) string { return intakeBody(acct, target) })
}

// e2eWith is e2e with the intent bodies body(account, target, i) builds.
func (r *runner) e2eWith(poll time.Duration, n int, body func(acct, target string, i int) string) (*e2eRun, error) {
	return r.e2eOpts(system.Options{PollInterval: poll}, n, body)
}

// e2eOpts is e2eWith on a stack started with o (o.PollInterval is the poll).
func (r *runner) e2eOpts(o system.Options, n int, body func(acct, target string, i int) string) (*e2eRun, error) {
	poll := o.PollInterval
	st, api, stop, err := r.startStack(o)
	if err != nil {
		return nil, err
	}
	defer stop()
	c := httpClient(1)
	prefix := randName("e2e-")
	for i := 0; i < r.f.e2eWarm; i++ { // warm-up: the emulator's JIT, connections, first stream read
		id, _, err := r.submitBody(r.ctx, c, api, fmt.Sprintf("%s-warm-%d", prefix, i), body(account, "chat-1", -1-i))
		if err != nil {
			return nil, err
		}
		if _, _, err := r.waitDelivered(st, id, 15*time.Second); err != nil {
			return nil, err
		}
	}
	time.Sleep(2 * poll)
	r.meter.reset()
	r.sbTime.reset()
	run := &e2eRun{poll: poll}
	end := time.Now().Add(r.f.e2eMax)
	for i := 0; i < n && (i < 20 || time.Now().Before(end)); i++ {
		run.n++
		time.Sleep(time.Duration(rand.Int64N(int64(poll) + 1)))
		id, t201, err := r.submitBody(r.ctx, c, api, fmt.Sprintf("%s-%d", prefix, i), body(account, fmt.Sprintf("chat-%d", i%7), i))
		if err != nil {
			return nil, err
		}
		at, in, err := r.waitDelivered(st, id, 15*time.Second)
		if err != nil {
			return nil, err
		}
		s := e2eSample{e2e: at.Sub(t201)}
		if len(in.Attempts) > 0 {
			s.lag = in.Attempts[0].StartedAt.Sub(t201)
			s.dispatch = at.Sub(in.Attempts[0].StartedAt)
		}
		run.samples = append(run.samples, s)
		run.attempts += in.AttemptCount
	}
	time.Sleep(2 * poll) // nothing more should be written; let a straggler show
	run.counts = r.meter.snapshot()
	run.sandbox = r.sbTime.summary()
	return run, nil
}

func (e *e2eRun) lat(f func(e2eSample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(e.samples))
	for i, s := range e.samples {
		out[i] = f(s)
	}
	return out
}

func (e *e2eRun) summary() map[string]any {
	all := e.lat(func(s e2eSample) time.Duration { return s.e2e })
	lag := e.lat(func(s e2eSample) time.Duration { return s.lag })
	dis := e.lat(func(s e2eSample) time.Duration { return s.dispatch })
	return map[string]any{
		"poll_interval_ms": e.poll.Milliseconds(),
		"n":                e.n,
		"p50_ms":           pct(all, 50), "p99_ms": pct(all, 99), "mean_ms": round(meanMS(all), 2), "max_ms": pct(all, 100),
		"stream_lag_p50_ms": pct(lag, 50), "stream_lag_p99_ms": pct(lag, 99), "stream_lag_mean_ms": round(meanMS(lag), 2),
		"dispatch_p50_ms": pct(dis, 50), "dispatch_p99_ms": pct(dis, 99), "dispatch_mean_ms": round(meanMS(dis), 2),
		"poll_share_of_mean": round(meanMS(lag)/meanMS(all), 3),
		"goal_p99_ms":        float64(e.poll.Milliseconds() + 50),
		// Where dispatch time goes: mean client-side latency of each
		// DynamoDB request kind, and the sandbox's own time per route.
		"ddb_mean_ms":             e.counts.meanMS(),
		"ddb_requests_per_intent": perN(e.counts.Ops, float64(e.n)),
		"sandbox_server_mean_ms":  e.sandbox,
	}
}

// delivery runs the end-to-end latency at the headline poll interval (and
// the write/read cost of a delivered intent from the same run), then again at
// a shorter interval to isolate what polling contributes.
func (r *runner) delivery() error {
	// at runs the e2e at one poll interval and prints its summary.
	at := func(poll time.Duration) (*e2eRun, map[string]any, error) {
		res, err := r.e2e(poll, r.f.e2eN)
		if err != nil {
			return nil, nil, fmt.Errorf("e2e at %v: %w", poll, err)
		}
		sm := res.summary()
		fmt.Fprintf(os.Stderr, "bench:   e2e poll %v: p50 %.1fms p99 %.1fms (stream lag p50 %.1fms, dispatch p50 %.1fms)\n",
			poll, sm["p50_ms"], sm["p99_ms"], sm["stream_lag_p50_ms"], sm["dispatch_p50_ms"])
		return res, sm, nil
	}
	main, sm, err := at(r.f.e2ePoll)
	if err != nil {
		return err
	}
	r.set("e2e_poll_interval_ms", r.f.e2ePoll.Milliseconds())
	r.set("e2e_p50_ms", sm["p50_ms"])
	r.set("e2e_p99_ms", sm["p99_ms"])
	r.set("e2e_stream_lag_p50_ms", sm["stream_lag_p50_ms"])
	r.set("e2e_stream_lag_p99_ms", sm["stream_lag_p99_ms"])
	r.set("e2e_dispatch_p50_ms", sm["dispatch_p50_ms"])
	r.set("e2e_dispatch_p99_ms", sm["dispatch_p99_ms"])
	r.set("e2e_poll_share", sm["poll_share_of_mean"])
	runs := map[string]any{fmt.Sprintf("poll_%dms", r.f.e2ePoll.Milliseconds()): sm}

	c := main.counts
	n := float64(main.n)
	r.set("writes_per_delivered_intent", round(float64(c.writes())/n, 3))
	r.set("wcu_per_delivered_intent", round(c.WCU/n, 3))
	r.set("wcu_gsi_per_delivered_intent", round(c.GSIWCU/n, 3))
	r.set("reads_per_attempt", round(float64(c.workerReads())/float64(max(main.attempts, 1)), 3))
	r.set("rcu_per_delivered_intent", round(c.RCU/n, 3))
	r.set("intake_requests_per_intent", round(float64(c.sum(append(slices.Clone(readOps), writeOps...), "api"))/n, 3))
	r.set("ddb_requests_per_delivered_intent", perN(c.Ops, n))
	r.set("capacity_units_per_delivered_intent", perNf(c.CU, n))
	r.set("gsi_capacity_units_per_delivered_intent", perNf(c.GSI, n))

	if main.n < r.f.e2eN {
		r.note("e2e at %v: %d of %d intents within -e2e-max %v (slow machine)", r.f.e2ePoll, main.n, r.f.e2eN, r.f.e2eMax)
	}
	if r.f.e2ePollAlt > 0 {
		_, sa, err := at(r.f.e2ePollAlt)
		if err != nil {
			return err
		}
		runs[fmt.Sprintf("poll_%dms", r.f.e2ePollAlt.Milliseconds())] = sa
		r.set("e2e_alt_poll_interval_ms", r.f.e2ePollAlt.Milliseconds())
		r.set("e2e_alt_p50_ms", sa["p50_ms"])
		r.set("e2e_alt_p99_ms", sa["p99_ms"])
		r.set("e2e_poll_effect_p50_ms", round(sm["p50_ms"].(float64)-sa["p50_ms"].(float64), 2))
		r.set("e2e_poll_effect_mean_ms", round(sm["mean_ms"].(float64)-sa["mean_ms"].(float64), 2))
	}
	r.set("e2e_runs", runs)
	return r.deliveryWithBotLimits()
}

// deliveryWithBotLimits is the write cost of a delivered intent when its bot
// has limits (issue 24; docs/decisions.md "Per-bot limits"): a rate only
// (the count at intake: one more write), and a rate plus an open cap (the
// same count, and the give-back when the intent ends: two more). The limits
// are far above what the run sends, so nothing is refused.
func (r *runner) deliveryWithBotLimits() error {
	n := min(r.f.e2eN, 40)
	for _, v := range []struct {
		key    string
		limits botlimit.BotLimits
	}{
		{"writes_per_delivered_intent_with_bot_rate", botlimit.BotLimits{Rate: botlimit.BotRate{N: 100000, Per: time.Hour}}},
		{"writes_per_delivered_intent_with_bot_limits", botlimit.BotLimits{Rate: botlimit.BotRate{N: 100000, Per: time.Hour}, MaxOpen: 1000}},
	} {
		run, err := r.e2eOpts(system.Options{Config: wire.Config{BotLimits: botlimit.BotLimitConfig{Default: v.limits}}, PollInterval: r.f.e2ePoll}, n,
			func(acct, target string, _ int) string { return intakeBody(acct, target) })
		if err != nil {
			return fmt.Errorf("e2e with bot limits (%s): %w", v.key, err)
		}
		nf := float64(run.n)
		r.set(v.key, round(float64(run.counts.writes())/nf, 3))
		r.set(strings.Replace(v.key, "writes_", "wcu_", 1), round(run.counts.WCU/nf, 3))
		fmt.Fprintf(os.Stderr, "bench:   %s: %.3f (%d intents)\n", v.key, float64(run.counts.writes())/nf, run.n)
	}
	return nil
}

// retried measures the cost of an intent whose first attempt gets a 503
// "unavailable" (proof of no effect) and whose second attempt (retry queue)
// succeeds.
func (r *runner) retried() error {
	st, api, stop, err := r.startStack(system.Options{
		Config:       wire.Config{Policy: core.AttemptPolicy{Backoff: core.BackoffPolicy{Base: time.Second, Cap: time.Second, MaxAttempts: 3, MaxAge: time.Hour}}},
		PollInterval: r.f.e2ePoll,
	})
	if err != nil {
		return err
	}
	defer stop()
	const acct = "bench-retry"
	c := httpClient(1)
	prefix := randName("retry-")
	// Warm-up (uncounted): one intent straight through.
	id, _, err := r.submitAndWait(r.ctx, c, st, api, prefix+"-warm", acct, "chat-0", 0)
	if err != nil {
		return err
	}
	if _, _, err := r.waitDelivered(st, id, 15*time.Second); err != nil {
		return err
	}
	faults := make([]sandbox.Fault, r.f.retryN)
	for i := range faults {
		faults[i] = sandbox.Fault{Kind: sandbox.FaultUnavailable}
	}
	if _, err := r.sb.Configure(sandbox.Config{Account: acct, Faults: faults}); err != nil {
		return err
	}
	time.Sleep(2 * r.f.e2ePoll)
	r.meter.reset()
	var ids []string
	var t201s []time.Time
	for i := 0; i < r.f.retryN; i++ {
		id, at, err := r.submitAndWait(r.ctx, c, st, api, fmt.Sprintf("%s-%d", prefix, i), acct, fmt.Sprintf("chat-%d", i), 0)
		if err != nil {
			return err
		}
		ids, t201s = append(ids, id), append(t201s, at)
	}
	attempts := 0
	var lat []time.Duration
	for i, id := range ids {
		at, in, err := r.waitDelivered(st, id, 30*time.Second)
		if err != nil {
			return err
		}
		if in.AttemptCount != 2 {
			return fmt.Errorf("intent %s took %d attempts, want 2 (one 503, one success)", id, in.AttemptCount)
		}
		attempts += in.AttemptCount
		lat = append(lat, at.Sub(t201s[i]))
	}
	time.Sleep(2 * r.f.e2ePoll)
	cn := r.meter.snapshot()
	if left := len(r.sb.State(acct).Faults); left != 0 {
		return fmt.Errorf("%d injected faults were not consumed", left)
	}
	n := float64(r.f.retryN)
	r.set("writes_per_retried_intent", round(float64(cn.writes())/n, 3))
	r.set("wcu_per_retried_intent", round(cn.WCU/n, 3))
	r.set("reads_per_attempt_retry_path", round(float64(cn.workerReads())/float64(attempts), 3))
	r.set("ddb_requests_per_retried_intent", perN(cn.Ops, n))
	r.set("capacity_units_per_retried_intent", perNf(cn.CU, n))
	r.set("gsi_capacity_units_per_retried_intent", perNf(cn.GSI, n))
	r.set("retried_e2e_p50_ms", pct(lat, 50))
	// The stored size of a delivered intent after its two attempts (one
	// 503, one success): past 2 KB its last write costs 3 WCU, not 2.
	item, err := r.clients.DynamoDB.GetItem(uncounted(r.ctx), &dynamodb.GetItemInput{
		TableName: aws.String(st.App.Store.Table()), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: dynamo.IntentPK(ids[0])},
			"sk": &types.AttributeValueMemberS{Value: "INTENT"},
		},
	})
	if err != nil || len(item.Item) == 0 {
		return fmt.Errorf("read retried intent %s: %v", ids[0], err)
	}
	r.set("retried_intent_item_bytes", dynamo.ItemSize(item.Item, dynamo.NumberBytesDynamoDB))
	return nil
}

func perN(ops map[string]int64, n float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range ops {
		out[k] = round(float64(v)/n, 3)
	}
	return out
}

func perNf(m map[string]float64, n float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = round(v/n, 3)
	}
	return out
}

// largeBody is an intent request of the largest size intake accepts
// (core.MaxBodyBytes, a ~256 KiB payload), different for every i so no two
// intents share a payload object (and no read is served from the cache).
func largeBody(acct, target string, i int) string {
	head := fmt.Sprintf(`{"kind":"reply","provider":"sandbox","account":%q,"action":"send_message","target":%q,`+
		`"payload":{"n":%d,"text":"`, acct, target, i)
	tail := `"},"grant":{"id":"g-1","version":1}}`
	return head + strings.Repeat("x", core.MaxBodyBytes-len(head)-len(tail)) + tail
}

// delivery256k is the end-to-end run with maximum-size payloads: the cost of
// a delivered intent whose payload goes through the S3 claim check (DynamoDB
// write units, S3 requests) and its latency.
func (r *runner) delivery256k() error {
	n := max(r.f.e2eN/5, 20)
	run, err := r.e2eWith(r.f.e2ePoll, n, largeBody)
	if err != nil {
		return fmt.Errorf("e2e 256k: %w", err)
	}
	sm := run.summary()
	c := run.counts
	nf := float64(run.n)
	fmt.Fprintf(os.Stderr, "bench:   e2e 256 KiB: p50 %.1fms p99 %.1fms, %.2f WCU/intent\n", sm["p50_ms"], sm["p99_ms"], c.WCU/nf)
	r.set("e2e_p50_ms_256k", sm["p50_ms"])
	r.set("e2e_p99_ms_256k", sm["p99_ms"])
	r.set("writes_per_delivered_intent_256k", round(float64(c.writes())/nf, 3))
	r.set("wcu_per_delivered_intent_256k", round(c.WCU/nf, 3))
	r.set("rcu_per_delivered_intent_256k", round(c.RCU/nf, 3))
	r.set("s3_requests_per_delivered_intent_256k", round(float64(c.s3Requests())/nf, 3))
	r.set("s3_requests_per_attempt_256k", map[string]float64{
		"put": round(float64(c.sum([]string{"S3.PutObject"}, ""))/float64(max(run.attempts, 1)), 3),
		"get": round(float64(c.sum([]string{"S3.GetObject"}, ""))/float64(max(run.attempts, 1)), 3),
	})
	r.set("ddb_requests_per_delivered_intent_256k", perN(c.Ops, nf))
	return nil
}
