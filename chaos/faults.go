package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/faultdb"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/sandbox"
)

// Fault is one kind of step a schedule can contain. Adding a fault kind is
// one entry in Faults: a name, a weight and a generator that draws the step's
// parameters from the schedule's random source (never from the world, so a
// seed always yields the same plan) and returns the step. A step reads the
// world only when it runs (e.g. "the k-th intent that needs a human now").
type Fault struct {
	Name   string
	Weight int
	Gen    func(g *Gen) Step
}

// Step is one planned action of a schedule.
type Step struct {
	Desc string
	Run  func(ctx context.Context, w *World)
}

// Gen is what a generator draws from.
type Gen struct {
	R       *rand.Rand
	Intents []*IntentSpec
	Workers int
}

func (g *Gen) worker() int         { return g.R.IntN(g.Workers) }
func (g *Gen) intent() *IntentSpec { return g.Intents[g.R.IntN(len(g.Intents))] }
func (g *Gen) between(lo, hi int) int {
	return lo + g.R.IntN(hi-lo+1)
}
func (g *Gen) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(g.R.Int64N(int64(hi-lo)+1))
}

// Faults is the registry the schedule generator draws from, by weight. A new
// fault kind (a new provider, a new admin operation, a new failure mode) is
// one entry here; extra invariants it needs go into check.go (for example a
// new kind of provider evidence into providerEvidence).
var Faults = []Fault{
	// --- provider faults (sandbox fault queue, matched to one intent's target)
	providerFault(sandbox.FaultDropAfterCommit, 4, 0, 0),
	providerFault(sandbox.FaultHang, 3, 300, 600), // past the client timeout: commits late
	{Name: "provider/hang-short", Weight: 1, Gen: func(g *Gen) Step {
		return providerStep(g, sandbox.Fault{Kind: sandbox.FaultHang, DelayMs: g.between(20, 120)})
	}},
	providerFault(sandbox.FaultHangNoCommit, 1, 300, 500),
	{Name: "provider/rate_limit", Weight: 2, Gen: func(g *Gen) Step {
		return providerStep(g, sandbox.Fault{Kind: sandbox.FaultRateLimit, RetryAfterSeconds: g.between(0, 2)})
	}},
	providerFault(sandbox.FaultUnavailable, 2, 0, 0),      // 5xx before commit
	providerFault(sandbox.FaultErrorAfterCommit, 3, 0, 0), // 5xx after commit
	providerFault(sandbox.FaultReject, 1, 0, 0),
	providerFault(sandbox.FaultUnauthorized, 1, 0, 0),
	{Name: "provider/gain-lookup", Weight: 1, Gen: genGainLookup},
	// --- provider modes and pacing (pacing.go)
	{Name: "provider/outage", Weight: 1, Gen: genOutage},
	{Name: "provider/rate-limit-mode", Weight: 1, Gen: genRateLimitMode},
	{Name: "pace/override", Weight: 1, Gen: genPaceOverride},

	// --- DynamoDB at the SDK (armed on one worker, next matching call)
	ddbFault(faultdb.ThroughputExceeded, 1),
	ddbFault(faultdb.Throttling, 1),
	ddbFault(faultdb.InternalError, 1),
	ddbFault(faultdb.ResponseLost, 2),
	ddbFault(faultdb.ResponseLostSurfaced, 2),

	// --- crashes between each pair of steps, and a stall (the late path)
	crash("crash/dispatch-after-claim", 2, "stream", crashAfterWrites, 1),
	crash("crash/dispatch-after-send", 2, "stream", crashAfterSend, 0),
	crash("crash/dispatch-after-outcome", 2, "stream", crashAfterWrites, 2),
	crash("crash/retry-after-claim", 1, "queue", crashAfterWrites, 1),
	crash("crash/retry-after-send", 1, "queue", crashAfterSend, 0),
	crash("crash/retry-after-outcome", 1, "queue", crashAfterWrites, 2),
	crash("crash/sweep-after-write", 1, "sweep", crashAfterWrites, 1),
	// Inline delivery (issue 26): the intake dies after its put (already
	// claimed), after the provider answered, or after the outcome.
	crash("crash/inline-after-put", 1, "inline", crashAfterWrites, 1),
	crash("crash/inline-after-send", 1, "inline", crashAfterSend, 0),
	crash("crash/inline-after-outcome", 1, "inline", crashAfterWrites, 2),
	{Name: "stall/after-send", Weight: 2, Gen: genStall},

	// --- deliveries: stream, queue, sweeper, concurrency
	{Name: "stream/deliver", Weight: 8, Gen: genStream(false, false)},
	{Name: "stream/concurrent-duplicate", Weight: 3, Gen: genStream(true, false)},
	{Name: "stream/reordered", Weight: 1, Gen: genStream(false, true)},
	{Name: "stream/stale", Weight: 2, Gen: genStaleStream},
	{Name: "queue/deliver", Weight: 8, Gen: genQueue(false)},
	{Name: "queue/concurrent-duplicate", Weight: 2, Gen: genQueue(true)},
	{Name: "queue/stale", Weight: 2, Gen: genStaleQueue},
	{Name: "queue/send-fails", Weight: 1, Gen: genSendFails},
	{Name: "sweep", Weight: 3, Gen: genSweep(false)},
	{Name: "sweep/concurrent", Weight: 2, Gen: genSweep(true)},
	{Name: "storm", Weight: 2, Gen: genStorm},

	// --- time
	{Name: "clock/small", Weight: 3, Gen: genClock(10*time.Millisecond, 500*time.Millisecond)},
	{Name: "clock/lease", Weight: 3, Gen: genClock(leaseDuration+sweepGrace, 3*leaseDuration)},
	{Name: "clock/big", Weight: 1, Gen: genClock(3*time.Second, 20*time.Second)},

	// --- people and bots
	{Name: "human/decide", Weight: 3, Gen: genHuman(1, false)},
	{Name: "human/concurrent", Weight: 1, Gen: genHuman(2, false)},
	{Name: "human/replay", Weight: 1, Gen: genHuman(1, true)},
	{Name: "intake/submit", Weight: 2, Gen: genSubmit},
	{Name: "intake/submit-inline", Weight: 2, Gen: genSubmitInline},
	{Name: "intake/replay-inline", Weight: 1, Gen: genReplayInline},
	{Name: "intake/duplicate", Weight: 1, Gen: genDuplicateSubmit},
	{Name: "intake/conflicting-reuse", Weight: 1, Gen: genConflictSubmit},

	// --- provider webhooks (accounts configured with webhooks also get the
	// automatic ones: acknowledgement and statuses after every commit,
	// duplicated, delayed, early or reordered per account)
	{Name: "webhook/duplicate-ack", Weight: 2, Gen: genEmit("ack", true)},
	{Name: "webhook/late-status", Weight: 1, Gen: genEmit("status", false)},
	{Name: "webhook/echo-unmatched", Weight: 1, Gen: genEmit("echo", false)},
	{Name: "webhook/user-message", Weight: 1, Gen: genEmit("user_message", false)},

	// --- backup and restore (a profile backup mid-flight, with claims
	// racing its barrier; then a loss of intents restored from it)
	{Name: "backup/mid-flight", Weight: 1, Gen: genBackup},
	{Name: "backup/lose-and-restore", Weight: 1, Gen: genRestore},

	// --- revalidation (source revised, grant revoked)
	{Name: "revalidation/revise-source", Weight: 1, Gen: genReviseSource},
	{Name: "revalidation/revoke-grant", Weight: 1, Gen: genRevokeGrant},
}

// --- provider faults ---------------------------------------------------------

func providerFault(kind sandbox.FaultKind, weight, delayLo, delayHi int) Fault {
	return Fault{Name: "provider/" + string(kind), Weight: weight, Gen: func(g *Gen) Step {
		f := sandbox.Fault{Kind: kind}
		if delayHi > 0 {
			f.DelayMs = g.between(delayLo, delayHi)
		}
		return providerStep(g, f)
	}}
}

func providerStep(g *Gen, f sandbox.Fault) Step {
	s := g.intent()
	f.Match = &sandbox.FaultMatch{Target: s.Target}
	return Step{
		Desc: fmt.Sprintf("provider fault %s (delay %dms, retry-after %ds) for intent %d", f.Kind, f.DelayMs, f.RetryAfterSeconds, s.N),
		Run: func(ctx context.Context, w *World) {
			w.configureSandbox(s, sandbox.Config{Faults: []sandbox.Fault{f}, Append: true}, "configure fault")
		},
	}
}

func genGainLookup(g *Gen) Step {
	s := g.intent()
	return Step{Desc: fmt.Sprintf("provider account of intent %d gains outcome lookup", s.N), Run: func(ctx context.Context, w *World) {
		on := true
		w.configureSandbox(s, sandbox.Config{Capabilities: &sandbox.CapabilitiesPatch{Lookup: &on}}, "configure capabilities")
	}}
}

// --- DynamoDB faults ---------------------------------------------------------

func ddbFault(kind faultdb.Kind, weight int) Fault {
	return Fault{Name: "ddb/" + string(kind), Weight: weight, Gen: func(g *Gen) Step {
		wk := g.worker()
		ops := [][]string{{"PutItem"}, {"PutItem"}, {"GetItem"}, {"Query"}, nil}[g.R.IntN(5)]
		attempts := []int{1, 3}[g.R.IntN(2)]
		skip := g.R.IntN(4) // let this many matching calls through first
		return Step{
			Desc: fmt.Sprintf("DynamoDB %s on worker %d, ops %v, %d SDK attempt(s), after %d matching call(s)", kind, wk, ops, attempts, skip),
			Run: func(ctx context.Context, w *World) {
				n := 0
				var mu sync.Mutex
				w.worker(wk).Inj.Add(faultdb.Fault{Kind: kind, Ops: ops, Attempts: attempts, Match: func(faultdb.Call) bool {
					mu.Lock()
					defer mu.Unlock()
					n++
					return n > skip
				}})
			},
		}
	}}
}

// --- crashes -----------------------------------------------------------------

func crash(name string, weight int, via string, at crashAt, k int) Fault {
	return Fault{Name: name, Weight: weight, Gen: func(g *Gen) Step {
		wk := g.worker()
		return Step{Desc: fmt.Sprintf("%s on worker %d", name, wk), Run: func(ctx context.Context, w *World) {
			p := newPlan(at, k)
			cctx, cancel := p.attach(ctx)
			defer cancel()
			switch via {
			case "stream":
				w.dispatch(cctx, w.worker(wk), w.takeStream(), true)
			case "queue":
				w.retry(cctx, w.worker(wk), w.mail.take(false), true)
			case "sweep":
				w.sweep(cctx, w.worker(wk))
			case "inline":
				if s := w.nextUnsubmitted(); s != nil {
					w.note("  inline submit of intent %d -> %d", s.N, w.submitPrefer(cctx, w.worker(wk), s, w.body(s, ""), inlinePrefer))
				}
			}
			if f := p.firedAt(); f != "" {
				w.note("  worker %d crashed %s", wk, f)
			}
		}}
	}}
}

// genStall: a worker pauses after the provider answered, its lease expires,
// another worker's sweeper declares the outcome unknown (and maybe
// reconciles), then the paused worker wakes up and records its late result.
func genStall(g *Gen) Step {
	a := g.worker()
	b := (a + 1 + g.R.IntN(max(g.Workers-1, 1))) % g.Workers
	reconcile := g.R.IntN(2) == 0
	return Step{Desc: fmt.Sprintf("worker %d stalls after the send; worker %d sweeps (reconcile=%v)", a, b, reconcile), Run: func(ctx context.Context, w *World) {
		recs := w.takeStream()
		var qs []queued
		if len(recs) == 0 {
			qs = w.mail.take(false)
		}
		if len(recs) == 0 && len(qs) == 0 {
			return
		}
		p := newPlan(stallAfterSend, 0)
		sctx, cancel := p.attach(ctx)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if len(recs) > 0 {
				w.dispatch(sctx, w.worker(a), recs, true)
			} else {
				w.retry(sctx, w.worker(a), qs, true)
			}
		}()
		select {
		case <-p.stalled:
		case <-done:
			return
		}
		w.clock.Advance(leaseDuration + sweepGrace + time.Millisecond)
		w.sweep(ctx, w.worker(b))
		if reconcile {
			w.clock.Advance(time.Second)
			w.retry(ctx, w.worker(b), w.mail.take(false), true)
		}
		close(p.release)
		<-done
	}}
}

// --- deliveries --------------------------------------------------------------

func genStream(concurrent, reordered bool) func(g *Gen) Step {
	return func(g *Gen) Step {
		wk := g.worker()
		desc := fmt.Sprintf("stream records to worker %d", wk)
		if concurrent {
			desc = "the same stream records to every worker at once"
		}
		if reordered {
			desc += ", newest first"
		}
		return Step{Desc: desc, Run: func(ctx context.Context, w *World) {
			// Whatever the stream has delivered so far (like an event source
			// mapping, it lags the writes; the sweeper covers the rest). A
			// concurrent duplicate first lets it catch up: the point is that
			// several workers get the same records at once.
			if concurrent {
				w.syncStream(ctx)
			}
			recs := w.takeStream()
			if reordered {
				for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
					recs[i], recs[j] = recs[j], recs[i]
				}
			}
			w.toWorkers(concurrent, wk, func(x *Worker, first bool) { w.dispatch(ctx, x, recs, first) })
		}}
	}
}

// toWorkers hands a delivery to worker wk, or (concurrent) to every worker
// at once, the first of them marked first.
func (w *World) toWorkers(concurrent bool, wk int, deliver func(x *Worker, first bool)) {
	if !concurrent {
		deliver(w.worker(wk), true)
		return
	}
	var wg sync.WaitGroup
	for i, x := range w.Workers {
		wg.Add(1)
		go func(first bool, x *Worker) {
			defer wg.Done()
			deliver(x, first)
		}(i == 0, x)
	}
	wg.Wait()
}

func genStaleStream(g *Gen) Step {
	wk, n, pick := g.worker(), g.between(1, 4), g.R.Uint64()
	return Step{Desc: fmt.Sprintf("%d stale (old, already delivered) stream records to worker %d", n, wk), Run: func(ctx context.Context, w *World) {
		w.mu.Lock()
		var recs []events.DynamoDBEventRecord
		r := rand.New(rand.NewPCG(pick, 1))
		for i := 0; i < n && len(w.streamSeen) > 0; i++ {
			recs = append(recs, w.streamSeen[r.IntN(len(w.streamSeen))])
		}
		w.mu.Unlock()
		w.dispatch(ctx, w.worker(wk), recs, false)
	}}
}

func genQueue(concurrent bool) func(g *Gen) Step {
	return func(g *Gen) Step {
		wk, shuffle := g.worker(), g.R.Uint64()
		desc := fmt.Sprintf("due retry-queue messages to worker %d, in random order", wk)
		if concurrent {
			desc = "the same due retry-queue messages to every worker at once"
		}
		return Step{Desc: desc, Run: func(ctx context.Context, w *World) {
			qs := w.mail.take(false)
			r := rand.New(rand.NewPCG(shuffle, 2))
			r.Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })
			w.toWorkers(concurrent, wk, func(x *Worker, first bool) { w.retry(ctx, x, qs, first) })
		}}
	}
}

func genStaleQueue(g *Gen) Step {
	wk, n, pick := g.worker(), g.between(1, 3), g.R.Uint64()
	return Step{Desc: fmt.Sprintf("%d stale (already handled) retry-queue messages redelivered to worker %d", n, wk), Run: func(ctx context.Context, w *World) {
		r := rand.New(rand.NewPCG(pick, 3))
		w.retry(ctx, w.worker(wk), w.mail.stale(n, r.IntN), false)
	}}
}

func genSendFails(g *Gen) Step {
	wk, n := g.worker(), g.between(1, 2)
	return Step{Desc: fmt.Sprintf("the next %d retry-queue sends of worker %d fail", n, wk), Run: func(ctx context.Context, w *World) {
		w.mail.failNext(wk%len(w.Workers), n)
	}}
}

func genSweep(concurrent bool) func(g *Gen) Step {
	return func(g *Gen) Step {
		wk := g.worker()
		if !concurrent {
			return Step{Desc: fmt.Sprintf("sweeper on worker %d", wk), Run: func(ctx context.Context, w *World) { w.sweep(ctx, w.worker(wk)) }}
		}
		return Step{Desc: "sweepers on every worker at once", Run: func(ctx context.Context, w *World) {
			var wg sync.WaitGroup
			for _, x := range w.Workers {
				wg.Add(1)
				go func(x *Worker) { defer wg.Done(); w.sweep(ctx, x) }(x)
			}
			wg.Wait()
		}}
	}
}

// genStorm runs a dispatcher, a retrier and a sweeper on different workers at once.
func genStorm(g *Gen) Step {
	a := g.worker()
	return Step{Desc: fmt.Sprintf("at once: stream on worker %d, queue on worker %d, sweeper on worker %d", a, a+1, a+2), Run: func(ctx context.Context, w *World) {
		recs, qs := w.takeStream(), w.mail.take(false)
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { defer wg.Done(); w.dispatch(ctx, w.worker(a), recs, true) }()
		go func() { defer wg.Done(); w.retry(ctx, w.worker(a+1), qs, true) }()
		go func() { defer wg.Done(); w.sweep(ctx, w.worker(a+2)) }()
		wg.Wait()
	}}
}

func genClock(lo, hi time.Duration) func(g *Gen) Step {
	return func(g *Gen) Step {
		d := g.dur(lo, hi)
		return Step{Desc: "clock +" + d.String(), Run: func(ctx context.Context, w *World) {
			w.waitSandboxIdle()
			if w.sb.Held("") > 0 && d > maxHold {
				// The sandbox decides commit-or-replay when it releases a held
				// request; letting a key's (short, compressed) retention pass
				// during a hold would count the provider's own late commit as
				// ours. Real holds are seconds against hours of retention.
				d = maxHold
			}
			w.clock.Advance(d)
		}}
	}
}

// maxHold bounds how much fake time passes while the provider holds a request.
const maxHold = 500 * time.Millisecond

// --- people and bots ---------------------------------------------------------

var decisions = []core.Decision{core.DecisionRetry, core.DecisionAcceptSuccess, core.DecisionAbandon, core.DecisionReconcile}

func genHuman(operators int, replay bool) func(g *Gen) Step {
	return func(g *Gen) Step {
		k, wk := g.R.IntN(8), g.worker()
		ds := make([]core.Decision, operators)
		for i := range ds {
			ds[i] = decisions[g.R.IntN(len(decisions))]
		}
		key := fmt.Sprintf("dec-%d", g.R.Uint32())
		return Step{Desc: fmt.Sprintf("human decision(s) %v on needs-human intent #%d (replayed=%v)", ds, k, replay), Run: func(ctx context.Context, w *World) {
			ids := w.withStatus(ctx, core.StatusNeedsHuman)
			if len(ids) == 0 {
				return
			}
			id := ids[k%len(ids)]
			var wg sync.WaitGroup
			for i, d := range ds {
				wg.Add(1)
				go func(i int, d core.Decision) {
					defer wg.Done()
					st := w.resolve(ctx, w.worker(wk+i), fmt.Sprintf("op-%d", i), id, fmt.Sprintf("%s-%d", key, i), d)
					w.note("  operator op-%d %s on intent %d -> %d", i, d, w.spec(id).N, st)
					if replay && st == http.StatusOK {
						// The operator's client sends it again with the same key
						// (and retries a 5xx: injected DynamoDB faults).
						again := 0
						for try := 0; try < 4 && (try == 0 || again >= 500); try++ {
							again = w.resolve(ctx, w.worker(wk+1), fmt.Sprintf("op-%d", i), id, fmt.Sprintf("%s-%d", key, i), d)
						}
						if again != http.StatusOK {
							w.problem("intake", id, "replaying a decision with the same Idempotency-Key answered %d, want 200", again)
						}
					}
				}(i, d)
			}
			wg.Wait()
		}}
	}
}

func genSubmit(g *Gen) Step {
	wk := g.worker()
	return Step{Desc: fmt.Sprintf("bot submits its next late intent via worker %d", wk), Run: func(ctx context.Context, w *World) {
		for _, s := range w.Intents {
			w.mu.Lock()
			done := w.submitted[s.ID]
			w.mu.Unlock()
			if !done {
				st := w.submit(ctx, w.worker(wk), s, w.body(s, ""))
				w.note("  submit intent %d -> %d", s.N, st)
				return
			}
		}
	}}
}

// inlinePrefer is the Prefer header of the schedules' inline submissions.
const inlinePrefer = "wait=2"

// nextUnsubmitted is the next intent the bot has not submitted yet (nil: none).
func (w *World) nextUnsubmitted() *IntentSpec {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.Intents {
		if !w.submitted[s.ID] {
			return s
		}
	}
	return nil
}

// genSubmitInline: the bot submits its next late intent asking to wait
// (Prefer: wait): the intake attempts it inline when it can.
func genSubmitInline(g *Gen) Step {
	wk := g.worker()
	return Step{Desc: fmt.Sprintf("bot submits its next late intent inline (Prefer: %s) via worker %d", inlinePrefer, wk), Run: func(ctx context.Context, w *World) {
		if s := w.nextUnsubmitted(); s != nil {
			st := w.submitPrefer(ctx, w.worker(wk), s, w.body(s, ""), inlinePrefer)
			w.note("  inline submit intent %d -> %d", s.N, st)
		}
	}}
}

// genReplayInline: the bot resubmits an accepted intent asking to wait: a
// replay (200), waiting only while an attempt is in flight.
func genReplayInline(g *Gen) Step {
	s, wk := g.intent(), g.worker()
	return Step{Desc: fmt.Sprintf("bot resubmits intent %d inline (Prefer: %s) via worker %d", s.N, inlinePrefer, wk), Run: func(ctx context.Context, w *World) {
		if !w.wasAccepted(s.ID) || s.Deadline > 0 {
			return
		}
		if st := w.submitPrefer(ctx, w.worker(wk), s, w.body(s, ""), inlinePrefer); st != http.StatusOK {
			w.problem("intake", s.ID, "an identical inline resubmission answered %d, want 200 (replay)", st)
		}
	}}
}

func genDuplicateSubmit(g *Gen) Step {
	s, wk := g.intent(), g.worker()
	return Step{Desc: fmt.Sprintf("bot resubmits intent %d (same key, same body) via worker %d", s.N, wk), Run: func(ctx context.Context, w *World) {
		if !w.wasAccepted(s.ID) || s.Deadline > 0 { // a deadline is relative to "now", so the body would differ
			return
		}
		st, changed := w.resubmit(ctx, w.worker(wk), s, "")
		if st != http.StatusOK {
			w.problem("intake", s.ID, "an identical resubmission answered %d, want 200 (replay)", st)
		}
		if changed {
			w.problem("intake", s.ID, "an identical resubmission changed the stored request")
		}
	}}
}

func genConflictSubmit(g *Gen) Step {
	s, wk := g.intent(), g.worker()
	return Step{Desc: fmt.Sprintf("bot reuses intent %d's key with a different payload via worker %d", s.N, wk), Run: func(ctx context.Context, w *World) {
		if !w.wasAccepted(s.ID) {
			return
		}
		st, changed := w.resubmit(ctx, w.worker(wk), s, " (changed)")
		// 422 idempotency_key_reused; 403 when the grant no longer covers it
		// (authorisation is checked first). Either way: refused, unchanged.
		if st != http.StatusUnprocessableEntity && st != http.StatusForbidden {
			w.problem("intake", s.ID, "a conflicting reuse of the key answered %d, want 422 (or 403)", st)
		}
		if changed {
			w.problem("intake", s.ID, "a conflicting reuse changed the stored request")
		}
	}}
}

// --- webhooks -----------------------------------------------------------------

// genEmit makes the provider send one webhook now (POST /_sandbox/emit):
// an acknowledgement or status of the intent's effect (if it has one),
// duplicated and concurrent; an echo of a message the sandbox never
// committed (must match nothing, prove nothing, wake nobody); or a user's
// message (forwarded to the bot's inbox).
func genEmit(kind string, dup bool) func(g *Gen) Step {
	return func(g *Gen) Step {
		s := g.intent()
		n := 0
		if dup {
			n = g.between(1, 3)
		}
		return Step{Desc: fmt.Sprintf("provider emits a %s webhook for intent %d (%d extra copies, concurrent)", kind, s.N, n), Run: func(ctx context.Context, w *World) {
			if w.hooks == nil || s.Webhook == nil {
				return
			}
			req := sandbox.EmitRequest{Account: s.Account, Type: kind, Duplicates: &n, Concurrent: dup}
			switch kind {
			case "ack":
				req.IdempotencyKey = s.ID
			case "status":
				req.IdempotencyKey, req.Status = s.ID, "read"
			case "user_message":
				req.From, req.Target, req.Text = "user-1", s.Target, "hello bot"
			}
			// 404 when there is no effect to acknowledge yet: fine.
			_ = w.sandboxControl("/_sandbox/emit", req)
		}}
	}
}

// --- backup and restore ---------------------------------------------------------

const (
	backupRoute  = "POST /v1/admin/backups"
	restoreRoute = "POST /v1/admin/restores"
)

// genBackup takes a profile backup through the admin API while a dispatcher
// and a retrier work on other workers (their claims meet the barrier).
func genBackup(g *Gen) Step {
	a := g.worker()
	return Step{Desc: fmt.Sprintf("operator backs the profile up via worker %d while workers %d and %d dispatch and retry", a, a+1, a+2), Run: func(ctx context.Context, w *World) {
		if _, ok := w.worker(a).St.App.AdminExtra[backupRoute]; !ok {
			return
		}
		// Tombstones are not backed up (docs/decisions.md, retention): a
		// loss step loses only what the backup holds.
		var present []string
		for id, in := range w.states(ctx) {
			if in.Pruned == nil {
				present = append(present, id)
			}
		}
		recs, qs := w.takeStream(), w.mail.take(false)
		var wg sync.WaitGroup
		var st int
		var body string
		wg.Add(3)
		go func() {
			defer wg.Done()
			st, body = w.admin(ctx, w.worker(a), backupRoute, nil, fmt.Sprintf(`{"profile":%q}`, w.bot))
		}()
		go func() { defer wg.Done(); w.dispatch(ctx, w.worker(a+1), recs, true) }()
		go func() { defer wg.Done(); w.retry(ctx, w.worker(a+2), qs, true) }()
		wg.Wait()
		var m struct {
			BackupID string `json:"backupId"`
		}
		_ = json.Unmarshal([]byte(body), &m)
		w.note("  backup -> %d %s", st, m.BackupID)
		if st == http.StatusCreated && m.BackupID != "" {
			w.mu.Lock()
			w.backups = append(w.backups, backupTaken{id: m.BackupID, intents: present})
			w.mu.Unlock()
		}
	}}
}

// genRestore loses some intents (their items are deleted, as in a disaster)
// and restores them from the latest backup through the admin API.
func genRestore(g *Gen) Step {
	a, pick := g.worker(), g.R.Uint64()
	return Step{Desc: fmt.Sprintf("intents are lost and restored from the latest backup via worker %d", a), Run: func(ctx context.Context, w *World) {
		w.mu.Lock()
		if len(w.backups) == 0 {
			w.mu.Unlock()
			return
		}
		b := w.backups[len(w.backups)-1]
		w.mu.Unlock()
		if len(b.intents) == 0 {
			return
		}
		r := rand.New(rand.NewPCG(pick, 4))
		lost := map[string]bool{}
		for i, n := 0, 1+r.IntN(len(b.intents)); i < n; i++ {
			lost[b.intents[r.IntN(len(b.intents))]] = true
		}
		w.waitSandboxIdle()
		// Lose first, then cut: a write that lands between a cut and the
		// loss (a delayed webhook) belongs before the cut, and nothing can
		// write a lost intent until the restore brings it back.
		lostAt := map[string]int64{}
		for id := range lost {
			lostAt[id] = w.env.deleteIntent(ctx, w.slot.table, id)
		}
		w.syncStream(ctx)
		// Wait until the last version each lost intent had is in the history,
		// then cut there.
		deadline := time.Now().Add(5 * time.Second)
		for id := range lost {
			for {
				w.mu.Lock()
				h := w.history[id]
				seen := lostAt[id] == 0 || (len(h) > 0 && h[len(h)-1].Version >= lostAt[id])
				if seen || time.Now().After(deadline) {
					w.cuts[id] = append(w.cuts[id], len(h))
				}
				w.mu.Unlock()
				if seen || time.Now().After(deadline) {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
		// The operator retries a failed restore (injected DynamoDB faults).
		st, body := 0, ""
		for try := 0; try < 5 && st != http.StatusOK; try++ {
			st, body = w.admin(ctx, w.worker(a+try), restoreRoute, nil, fmt.Sprintf(`{"backupId":%q}`, b.id))
		}
		w.note("  lost %d intent(s); restore %s -> %d %s", len(lost), b.id, st, body)
		// Wait for the restored versions to reach the history, so that a later
		// cut falls after them (the old version number says nothing here).
		deadline = time.Now().Add(5 * time.Second)
		for id := range lost {
			if _, err := w.env.get(ctx, w.slot.table, id); err != nil {
				continue // not restored
			}
			for time.Now().Before(deadline) {
				w.mu.Lock()
				cuts := w.cuts[id]
				seen := len(w.history[id]) > cuts[len(cuts)-1]
				w.mu.Unlock()
				if seen {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
		if st != http.StatusOK {
			for id := range lost {
				w.problem("harness", id, "restore of %s kept failing: %d %s", b.id, st, body)
			}
		}
	}}
}

// --- revalidation ------------------------------------------------------------

func genReviseSource(g *Gen) Step {
	s, wk := g.intent(), g.worker()
	return Step{Desc: fmt.Sprintf("bot revises the source intent %d answers", s.N), Run: func(ctx context.Context, w *World) {
		if s.Source == "" || w.worker(wk).St.Intake.Sources == nil {
			return
		}
		st := w.reviseSource(ctx, w.worker(wk), s.Source, 2)
		w.note("  revise source of intent %d -> %d", s.N, st)
	}}
}

func genRevokeGrant(g *Gen) Step {
	s, wk := g.intent(), g.worker()
	return Step{Desc: fmt.Sprintf("operator revokes the grant of intent %d", s.N), Run: func(ctx context.Context, w *World) {
		const route = "POST /v1/admin/grants/{grantId}/revoke"
		if _, ok := w.worker(wk).St.App.AdminExtra[route]; !ok {
			return
		}
		st, body := w.admin(ctx, w.worker(wk), route, map[string]string{"grantId": s.Grant}, `{"reason":"chaos revokes it"}`)
		w.note("  revoke grant of intent %d -> %d %s", s.N, st, body)
	}}
}
