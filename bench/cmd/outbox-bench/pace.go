package main

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core/gate"
	"github.com/botharness/outbox/localstack/system"
	"github.com/botharness/outbox/sandbox"
)

// paced (issue 15) sends -pace-n intents to one sandbox account paced at
// -pace-rate/s through -pace-workers concurrent workers (whole local stacks
// on one table and queue: one stream consumer, every worker an intake and a
// retrier), with the sandbox enforcing -pace-limit/s (beyond it: 429). It reports the highest commit
// count in any sliding 1 s window over the rate (pace_max_rate_ratio, goal
// <= 1.1), the achieved rate over the declared one (pace_throughput_ratio,
// goal >= 0.8), the 429s (goal 0), the effects per intent (goal exactly 1)
// and what the gate costs in DynamoDB requests per delivered intent.
func (r *runner) paced() error {
	n, rate, workers := r.f.paceN, r.f.paceRate, r.f.paceWorkers
	acct, warmAcct := randName("bench-pace-"), randName("bench-pace-warm-")
	// The warm-up account is paced too, fast enough not to hold anything
	// long: the gate's reservation path runs before the measured burst.
	const burst = 1
	extra := fmt.Sprintf(`"pacing":{"accounts":{"sandbox/%s":{"rate":%d,"per":"1s","burst":%d},"sandbox/%s":{"rate":200,"per":"1s","burst":1}},"maxHoldMs":%d}`,
		acct, rate, burst, warmAcct, r.f.paceHold.Milliseconds())
	// Paced attempts wait for their slots inside retrier invocations, so the
	// retriers run 16 batches at once per worker (AWS scales the SQS event
	// source with the queue; the local host's default is 2).
	queueConc := r.f.paceQueueConc
	first, api, stop, err := r.startStack(system.Options{Config: wire.Config{ProviderConfig: extra}, PollInterval: r.f.e2ePoll, QueueConcurrency: queueConc})
	if err != nil {
		return err
	}
	defer stop()
	apis := []string{api}
	var joined []*system.Stack
	defer func() {
		for _, st := range joined { // pollers first; the first stack's stop drops the table and queues
			st.Stop()
		}
	}()
	for i := 1; i < workers; i++ {
		table := first.App.Config.Table
		// One stream consumer, as in AWS (one event source mapping: a record
		// is delivered once, not once per worker); every worker runs intake
		// and the retrier, which SQS shares out among them.
		st, a, _, err := r.startStack(system.Options{Config: wire.Config{ProviderConfig: extra, Table: table}, PollInterval: r.f.e2ePoll, QueuePrefix: table, DisableStream: !r.f.paceAllStreams, QueueConcurrency: queueConc})
		if err != nil {
			return err
		}
		joined = append(joined, st)
		apis = append(apis, a)
	}
	// The provider's own limit: the declared rate plus the 10% the goal
	// allows (a sliding-window limiter at exactly the declared rate sees 21 in
	// some 1 s windows from network jitter alone).
	if _, err := r.sb.Configure(sandbox.Config{Account: acct, RateLimit: &sandbox.RateLimitMode{RequestsPerSecond: r.f.paceLimit}}); err != nil {
		return err
	}
	c := httpClient(16)
	prefix := randName("pace-")
	// Warm-up, uncounted, as every other phase has: the same submit burst
	// shape through every worker, to an account whose pace holds nothing
	// long, so that the measured burst meets a DynamoDB Local whose JIT has
	// compiled the paced road (a fresh emulator spent the measured burst's
	// first seconds compiling: 31 of 35 held sends late in the first second).
	if _, err := r.paceBurst(c, apis, prefix+"-warm", warmAcct, r.f.paceWarm); err != nil {
		return fmt.Errorf("pace warm-up: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for r.sb.EffectCount(sandbox.EffectFilter{Account: warmAcct}) < r.f.paceWarm {
		if time.Now().After(deadline) {
			return fmt.Errorf("pace warm-up: %d of %d delivered: %w", r.sb.EffectCount(sandbox.EffectFilter{Account: warmAcct}), r.f.paceWarm, errTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(2 * r.f.e2ePoll)
	r.meter.reset()
	t0 := time.Now()
	ids, err := r.paceBurst(c, apis, prefix, acct, n)
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	submitted := time.Since(t0)
	limit := time.Duration(float64(n)/float64(rate)*float64(time.Second)) * 3
	deadline = time.Now().Add(limit + 30*time.Second)
	for r.sb.EffectCount(sandbox.EffectFilter{Account: acct}) < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d intents delivered after %v: %w", r.sb.EffectCount(sandbox.EffectFilter{Account: acct}), n, time.Since(t0), errTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range ids {
		if _, _, err := r.waitDelivered(first, id, 30*time.Second); err != nil {
			return err
		}
	}
	time.Sleep(2 * r.f.e2ePoll)
	cn := r.meter.snapshot()
	effects := r.sb.Effects(sandbox.EffectFilter{Account: acct})
	perIntent := map[string]int{}
	times := make([]time.Time, 0, len(effects))
	for _, e := range effects {
		perIntent[e.IntentID]++
		times = append(times, e.At)
	}
	dups := 0
	for _, id := range ids {
		if perIntent[id] != 1 {
			dups++
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	maxWin := gate.MostInWindow(times, time.Second)
	perSecond := make([]int, int(times[len(times)-1].Sub(times[0])/time.Second)+1)
	for _, at := range times {
		perSecond[int(at.Sub(times[0])/time.Second)]++
	}
	fmt.Fprintf(os.Stderr, "bench:   pace: sends in each second after the first: %v\n", perSecond)
	span := times[len(times)-1].Sub(times[0])
	achieved := float64(len(times)-1) / span.Seconds()
	var limited, reqs int
	var arrivals []time.Time // every request's arrival at the sandbox (its rate limiter's clock)
	for _, q := range r.sb.Requests(acct) {
		reqs++
		arrivals = append(arrivals, q.At)
		if q.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	sort.Slice(arrivals, func(i, j int) bool { return arrivals[i].Before(arrivals[j]) })
	fn := float64(n)
	r.set("pace_max_rate_ratio", round(float64(maxWin)/float64(rate), 3))
	r.set("pace_throughput_ratio", round(achieved/float64(rate), 3))
	r.set("pace_max_commits_in_1s", maxWin)
	// The slots' bound (gate.Pace): Rate + Burst - 1 in any window of Per
	// (burst 1 here), and how far over it the busiest window at the provider
	// went (a send up to half an interval late, or the trip's jitter, adds one).
	r.set("pace_bound_in_any_1s", rate)
	r.set("pace_sends_over_bound", max(0, maxWin-rate))
	// The promise (gate.Pace, docs/decisions.md "Pacing"): Rate + Burst
	// sends start in any window of Per. Counted at the sandbox's receipt,
	// so the trip's jitter is in it.
	r.set("pace_promised_in_any_1s", rate+burst)
	r.set("pace_sends_over_promise", max(0, maxWin-(rate+burst)))
	// The same promise counted at the requests' arrival (before the
	// sandbox's own lock and commit), where a provider's limiter counts.
	r.set("pace_max_arrivals_in_1s", gate.MostInWindow(arrivals, time.Second))
	r.set("pace_achieved_rate_per_s", round(achieved, 2))
	r.set("pace_declared_rate_per_s", rate)
	r.set("pace_intents", n)
	r.set("pace_workers", workers)
	r.set("pace_429s", limited)
	r.set("pace_sandbox_limit_per_s", r.f.paceLimit)
	r.set("pace_provider_requests_per_intent", round(float64(reqs)/fn, 3))
	r.set("pace_intents_not_exactly_one_effect", dups)
	r.set("pace_submit_seconds", round(submitted.Seconds(), 2))
	r.set("pace_writes_per_delivered_intent", round(float64(cn.writes())/fn, 3))
	r.set("pace_ddb_requests_per_delivered_intent", perN(cn.Ops, fn))
	fmt.Fprintf(os.Stderr, "bench:   pace: %d intents at %d/s by %d workers: max %d commits in 1 s (ratio %.3f), achieved %.2f/s (ratio %.3f), %d 429s, %d not exactly one effect\n",
		n, rate, workers, maxWin, float64(maxWin)/float64(rate), achieved, achieved/float64(rate), limited, dups)
	if dups > 0 {
		return fmt.Errorf("%d intents without exactly one effect", dups)
	}
	return nil
}

// paceBurst submits n intents to acct, 16 at a time, round robin over the
// workers' APIs, keys prefix-0 .. prefix-(n-1), targets over seven chats,
// and returns the intent ids the intake answered with.
func (r *runner) paceBurst(c *http.Client, apis []string, prefix, acct string, n int) ([]string, error) {
	ids := make([]string, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			id, _, err := r.submitAndWait(r.ctx, c, nil, apis[i%len(apis)], fmt.Sprintf("%s-%d", prefix, i), acct, fmt.Sprintf("chat-%d", i%7), 0)
			if err != nil {
				errs <- err
			}
			ids[i] = id
		}(i)
	}
	wg.Wait()
	close(errs)
	return ids, <-errs
}
