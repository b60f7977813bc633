package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/faultdb"
	"github.com/botharness/outbox/adapters/handlers/admin"
	"github.com/botharness/outbox/adapters/providers/sandboxprovider"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
	"github.com/botharness/outbox/localstack/system"
	"github.com/botharness/outbox/sandbox"
)

// Timing of a schedule. Fake-clock durations unless noted.
const (
	providerTimeout = 250 * time.Millisecond // real time
	leaseDuration   = time.Second
	sweepGrace      = 200 * time.Millisecond
)

func backoffPolicy(r func() float64) core.BackoffPolicy {
	return core.BackoffPolicy{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 5, MaxAge: time.Minute, Rand: r}
}

// chaosSharding is the workers' (and the harness's own reads') sharding:
// four repair shards, as e2e's tables, so a sweep costs 16 requests, not
// 256 (the default 64 shards are sized for 10,000 intents/s; a schedule
// has a handful), and the sweeper's per-shard checkpoints still race.
var chaosSharding = dynamo.Sharding{Repair: 4}

var reconcilePolicy = core.ReconcilePolicy{Delay: 100 * time.Millisecond, Window: 3 * time.Second, Settle: time.Second}

// IntentSpec is one intent of a schedule and its provider account.
type IntentSpec struct {
	N        int
	Key      string
	ID       string
	Account  string
	Target   string
	Grant    string
	Source   string
	Keys     bool
	Retain   int // key retention, seconds (fake time)
	Lookup   bool
	Conflict bool // concurrentKeyPolicy "conflict"
	// ChosenID: the account names the message with the key, a client-chosen
	// id (sandbox clientChosenIds: a repeat is 409 duplicate); lookup-only
	// accounts.
	ChosenID bool
	Deadline time.Duration
	Late     bool                   // submitted by a step, not at the start
	Webhook  *sandbox.WebhookConfig // the provider sends webhooks for this account (URL filled in at start)
	PaceRate int                    // sends per second declared for the account (0: not paced; pacing.go)
	// Large: the payload is over core.PayloadInlineMax bytes, so it goes
	// through the S3 claim check (0: a small inline payload).
	Large int
}

func (s *IntentSpec) caps() string {
	var c []string
	if s.Keys {
		c = append(c, fmt.Sprintf("keys(%ds)", s.Retain))
	}
	if s.ChosenID {
		c = append(c, "chosen-id")
	}
	if s.Lookup {
		c = append(c, "lookup")
	}
	if len(c) == 0 {
		c = append(c, "neither")
	}
	if s.Deadline > 0 {
		c = append(c, "deadline+"+s.Deadline.String())
	}
	if s.PaceRate > 0 {
		c = append(c, fmt.Sprintf("paced(%d/s)", s.PaceRate))
	}
	if h := s.Webhook; h != nil {
		c = append(c, fmt.Sprintf("webhooks(dup=%d,delay=%dms,early=%v,reorder=%v,noAck=%v,statuses=%v)", h.Duplicates, h.DelayMs, h.Early, h.Reorder, h.NoAck, h.Statuses))
	}
	return strings.Join(c, "+")
}

// Worker is one "process": the real local assembly of the outbox.
type Worker struct {
	N   int
	St  *system.Stack
	Inj *faultdb.Injector
	tr  *http.Transport
}

// World is one running schedule.
type World struct {
	env   *Env
	slot  *slot
	Seed  uint64
	rng   *rand.Rand
	clock *Clock
	bot   string

	sb    *sandbox.Server
	front *sandboxFront
	sbSrv *httptest.Server
	sbURL string

	Workers []*Worker
	mail    *mailbox
	hooks   *webhookFront // nil when the product has no webhook handler
	Intents []*IntentSpec

	mu         sync.Mutex
	submitted  map[string]bool // id -> a submit was attempted
	accepted   map[string]bool // id -> intake answered 201/200
	history    map[string][]*core.Intent
	streamQ    []events.DynamoDBEventRecord
	streamSeen []events.DynamoDBEventRecord
	trace      []string
	problems   []Problem
	decodeErrs int
	outcomes   map[string]int // final statuses, effects, attempts
	setupTook  time.Duration
	backups    []backupTaken
	cuts       map[string][]int             // intent id -> history indexes where it was lost and restored
	removes    []events.DynamoDBEventRecord // deletes the observer saw, for the pruner (prune.go)
	pruned     map[string]*core.Intent      // intent id -> the whole intent its prune removed
}

// backupTaken is a profile backup a step took, and the intents it can hold.
type backupTaken struct {
	id      string
	intents []string
}

// Problem is one invariant violation.
type Problem struct {
	Kind   string // effects_over_limit | lost | stuck | evidence | history | send_after_stop | failed_with_effect | intake | prune | harness
	Intent string
	Detail string
}

func (w *World) problem(kind, intent, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.problems = append(w.problems, Problem{Kind: kind, Intent: intent, Detail: fmt.Sprintf(format, args...)})
}

func (w *World) note(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trace = append(w.trace, fmt.Sprintf(format, args...))
}

// newWorld prepares a schedule: sandbox, accounts, grants, workers.
// BotOf is the bot a schedule's intents belong to: their ids (and so their
// barrier and repair shards) follow from the seed.
func BotOf(seed uint64) string { return fmt.Sprintf("chaos-bot-%d", seed) }

func (e *Env) newWorld(ctx context.Context, sl *slot, seed uint64, specs []*IntentSpec, rc Config) (*World, error) {
	workers, verbose := rc.Workers, rc.Verbose
	// The previous schedule on this table ran its clock ahead (its drain
	// alone up to an hour); this one starts at real time again, so the
	// sweeper's checkpoints it left would hide this schedule's entries.
	if err := e.dropCheckpoints(ctx, sl.table); err != nil {
		return nil, err
	}
	w := &World{
		env: e, slot: sl, Seed: seed,
		rng:       rand.New(rand.NewPCG(seed, 0x5eed)),
		clock:     NewClock(time.Now().UTC().Truncate(time.Second)),
		bot:       BotOf(seed),
		Intents:   specs,
		submitted: map[string]bool{}, accepted: map[string]bool{},
		history: map[string][]*core.Intent{}, outcomes: map[string]int{}, cuts: map[string][]int{}, pruned: map[string]*core.Intent{},
	}
	w.mail = newMailbox(w.clock)
	start := time.Now()
	defer func() { w.setupTook = time.Since(start) }()
	w.sb = sandbox.New(w.clock.Now, sandbox.WithDefaultHangDelay(500*time.Millisecond))
	w.front = &sandboxFront{next: w.sb, clock: w.clock}
	w.sbSrv = httptest.NewServer(w.front)
	w.sbURL = w.sbSrv.URL
	var ids []string
	for _, s := range specs {
		s.ID = core.IntentID(w.bot, s.Key)
		ids = append(ids, s.ID)
	}
	e.register(w, ids...)
	for _, s := range specs {
		policy := sandbox.PolicyWait
		if s.Conflict {
			policy = sandbox.PolicyConflict
		}
		retain := s.Retain
		cfg := sandbox.Config{Account: s.Account, Capabilities: &sandbox.CapabilitiesPatch{
			IdempotencyKeys: &s.Keys, KeyRetentionSeconds: &retain, Lookup: &s.Lookup, ConcurrentKeyPolicy: &policy,
			ClientChosenIDs: &s.ChosenID,
		}}
		if err := w.sandboxControl("/_sandbox/faults", cfg); err != nil {
			w.close(ctx)
			return nil, err
		}
	}
	var grants []core.Grant
	for _, s := range specs {
		grants = append(grants, core.Grant{ID: s.Grant, Version: 1, Bot: w.bot, Provider: sandboxprovider.Name,
			Account: s.Account, Actions: []string{"*"}, Targets: []string{"*"}})
	}
	var rmu sync.Mutex
	rnd := func() float64 { rmu.Lock(); defer rmu.Unlock(); return w.rng.Float64() }
	bp := backoffPolicy(rnd)
	rp := reconcilePolicy
	logger := slog.New(slog.DiscardHandler)
	if verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	for i := 0; i < workers; i++ {
		inj := faultdb.New(seed*31 + uint64(i))
		cfg := e.cfg.Copy()
		inj.Register(&cfg)
		if rc.BreakConfig != nil {
			rc.BreakConfig(&cfg)
		}
		clients := awsconfig.New(cfg)
		// The assembly of localstack/system.Start, on the resources the run's
		// Env made once; the faults come in through its options: the
		// providers' transport (crashes around a send), the retry queue (the
		// schedule's mailbox) and, for the suite's own tests, a broken adapter.
		tr := &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
		st, err := system.Assemble(clients, system.Options{
			Config: wire.Config{
				Table: sl.table, BackupBucket: e.bucket, PayloadBucket: e.bucket,
				ProviderConfig: fmt.Sprintf(`{"sandbox":{"baseUrl":%q,"timeoutMs":%d},"pacing":%s}`, w.sbURL, providerTimeout.Milliseconds(), pacingConfig(specs)),
				Policy: core.AttemptPolicy{Lease: leaseDuration, SweepGrace: sweepGrace, Backoff: bp, Reconcile: rp,
					Breaker: gate.BreakerPolicy{Failures: 2, Cooldown: time.Second, MaxCooldown: 4 * time.Second, ProbeLease: time.Second}},
				Clock: w.clock,
				Owner: fmt.Sprintf("s%d-w%d", seed, i), Log: logger.With("worker", i), MetricsOut: io.Discard,
				BackupKey:       chaosBackupKey,
				IntentRetention: chaosRetention, TombstoneRetention: chaosTombstoneRetention, ArchiveBucket: e.bucket,
				WebhookSecrets: fmt.Sprintf(`{"sandbox/*":%q}`, webhookSecret),
				HTTPClient:     &http.Client{Transport: &transport{base: tr}},
				Sharding:       chaosSharding,
				RetryQueue:     workerQueue{m: w.mail, w: i},
				WrapProvider: func(name string, p core.Provider) core.Provider {
					if rc.BreakProvider != nil {
						return rc.BreakProvider(p)
					}
					return p
				},
			},
		}, e.queues)
		if err == nil && i == 0 {
			err = st.App.SeedGrants(ctx, grants)
		}
		if err != nil {
			w.close(ctx)
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
		wk := &Worker{N: i, St: st, Inj: inj, tr: tr}
		w.Workers = append(w.Workers, wk)
	}
	if err := w.startWebhooks(); err != nil {
		w.close(ctx)
		return nil, err
	}
	return w, nil
}

// webhookFront receives the sandbox's webhooks and hands each to one
// worker's local API gateway (round robin), which routes them to its real
// webhook handler.
type webhookFront struct {
	srv    *httptest.Server
	gws    []http.Handler
	next   atomic.Int64
	active atomic.Int64
	last   atomic.Int64 // unix nanos of the last activity
}

func (f *webhookFront) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	f.active.Add(1)
	defer func() {
		f.last.Store(time.Now().UnixNano())
		f.active.Add(-1)
	}()
	f.gws[int(f.next.Add(1))%len(f.gws)].ServeHTTP(rw, r)
}

func (w *World) startWebhooks() error {
	if w.Workers[0].St.App.Webhook == nil {
		return nil
	}
	f := &webhookFront{}
	for _, wk := range w.Workers {
		f.gws = append(f.gws, wk.St.Gateway) // the assembly's own gateway and webhook route
	}
	f.srv = httptest.NewServer(f)
	w.hooks = f
	for _, s := range w.Intents {
		if s.Webhook == nil {
			continue
		}
		cfg := *s.Webhook
		cfg.URL = f.srv.URL + "/v1/webhooks/sandbox/" + s.Account
		cfg.Secret = webhookSecret
		if err := w.sandboxControl("/_sandbox/faults", sandbox.Config{Account: s.Account, Webhook: &cfg}); err != nil {
			return err
		}
	}
	return nil
}

// waitWebhooksQuiet waits until no webhook has been in flight for a while
// (the sandbox sends them in the background, with delays and retries).
func (w *World) waitWebhooksQuiet() {
	if w.hooks == nil {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		idle := time.Since(time.Unix(0, w.hooks.last.Load()))
		if w.hooks.active.Load() == 0 && idle > 300*time.Millisecond {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *World) close(ctx context.Context) {
	for _, wk := range w.Workers {
		wk.St.Stop()
		wk.tr.CloseIdleConnections()
	}
	w.sb.Close()
	w.sbSrv.Close()
	if w.hooks != nil {
		w.hooks.srv.Close()
	}
	var ids []string
	for _, s := range w.Intents {
		ids = append(ids, s.ID)
		w.env.deleteIntent(ctx, w.slot.table, s.ID)
	}
	w.env.unregister(ids...)
}

// --- the sandbox over its HTTP control API ---------------------------------

func (w *World) sandboxControl(path string, body any) error {
	b, _ := json.Marshal(body)
	resp, err := http.Post(w.sbURL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("sandbox %s: %d %s", path, resp.StatusCode, msg)
	}
	return nil
}

// configureSandbox posts cfg for the account of s to the sandbox's faults
// route; a refusal is the harness's problem, reported under s.
func (w *World) configureSandbox(s *IntentSpec, cfg sandbox.Config, what string) {
	cfg.Account = s.Account
	if err := w.sandboxControl("/_sandbox/faults", cfg); err != nil {
		w.problem("harness", s.ID, "%s: %v", what, err)
	}
}

// effects reads the provider-side effects of an intent over HTTP.
func (w *World) effects(id string) ([]sandbox.Effect, error) {
	resp, err := http.Get(w.sbURL + "/_sandbox/effects?idempotencyKey=" + id)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var er sandbox.EffectsResponse
	if err := json.NewDecoder(resp.Body).Decode(&er); err != nil {
		return nil, err
	}
	return er.Effects, nil
}

// waitSandboxIdle waits until every request at the sandbox is either done or
// held by a fault (held ones are the provider's business, not in transit).
func (w *World) waitSandboxIdle() {
	start := time.Now()
	deadline := start.Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if w.front.active.Load() <= int64(w.sb.Held("")) {
			if timing && time.Since(start) > 100*time.Millisecond {
				fmt.Fprintf(os.Stderr, "seed=%d waitSandboxIdle %s\n", w.Seed, time.Since(start))
			}
			return
		}
		time.Sleep(time.Millisecond)
	}
	if timing {
		fmt.Fprintf(os.Stderr, "seed=%d waitSandboxIdle timed out: active=%d held=%d\n", w.Seed, w.front.active.Load(), w.sb.Held(""))
	}
}

// --- the stream -----------------------------------------------------------

func (w *World) onRecord(r events.DynamoDBEventRecord, matches bool) {
	in, err := imageIntent(r)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.decodeErrs++
		raw, _ := json.Marshal(r.Change.NewImage["attempts"])
		w.problems = append(w.problems, Problem{Kind: "harness", Detail: fmt.Sprintf("cannot decode a stream image (%s %s): %v: attempts=%s", r.EventName, r.Change.SequenceNumber, err, raw)})
		return
	}
	if in != nil && in.Pruned == nil { // a tombstone is not a version of the intent (prune.go)
		w.history[in.ID] = append(w.history[in.ID], in)
	}
	if r.EventName == "REMOVE" {
		w.removes = append(w.removes, r)
	}
	if matches {
		w.streamQ = append(w.streamQ, r)
		w.streamSeen = append(w.streamSeen, r)
	}
}

// syncStream waits until the observer has seen every intent's current version.
func (w *World) syncStream(ctx context.Context) {
	start := time.Now()
	if timing {
		defer func() {
			if d := time.Since(start); d > 100*time.Millisecond {
				fmt.Fprintf(os.Stderr, "seed=%d syncStream %s\n", w.Seed, d)
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, s := range w.Intents {
		in, err := w.env.get(ctx, w.slot.table, s.ID)
		if err != nil {
			continue // not created (yet)
		}
		for {
			w.mu.Lock()
			h := w.history[s.ID]
			seen := len(h) > 0 && h[len(h)-1].Version >= in.Version
			w.mu.Unlock()
			if seen {
				break
			}
			if time.Now().After(deadline) {
				w.problem("harness", s.ID, "the stream observer did not see version %d within 5s", in.Version)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

func (w *World) takeStream() []events.DynamoDBEventRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.streamQ
	w.streamQ = nil
	return out
}

func (w *World) putBackStream(rs []events.DynamoDBEventRecord) {
	w.mu.Lock()
	w.streamQ = append(w.streamQ, rs...)
	w.mu.Unlock()
}

// --- invoking the real handlers --------------------------------------------

// dispatch invokes a worker's dispatcher with a batch; failed records come
// back to the stream queue (the event source mapping retries them).
func (w *World) dispatch(ctx context.Context, wk *Worker, recs []events.DynamoDBEventRecord, redeliver bool) {
	if len(recs) == 0 {
		return
	}
	resp, err := wk.St.Dispatcher.Handle(ctx, events.DynamoDBEvent{Records: recs})
	if !redeliver {
		return
	}
	if err != nil {
		w.putBackStream(recs)
		return
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for i, r := range recs {
		if failed[r.Change.SequenceNumber] {
			w.putBackStream(recs[i:])
			return
		}
	}
}

// retry invokes a worker's retrier; failed messages go back to the queue.
func (w *World) retry(ctx context.Context, wk *Worker, qs []queued, redeliver bool) {
	if len(qs) == 0 {
		return
	}
	resp, err := wk.St.Retrier.Handle(ctx, sqsEvent(qs))
	if !redeliver {
		return
	}
	if err != nil {
		w.mail.putBack(qs...)
		return
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	var ok []queued
	for _, q := range qs {
		if failed[fmt.Sprintf("m-%d", q.ID)] {
			w.mail.putBack(q)
		} else {
			ok = append(ok, q)
		}
	}
	w.mail.deleted(ok...)
}

func (w *World) sweep(ctx context.Context, wk *Worker) {
	_ = wk.St.Sweeper.Handle(ctx, events.EventBridgeEvent{Source: "aws.events", DetailType: "Scheduled Event"})
}

func principalReq(kind, name, routeKey string, params map[string]string, headers map[string]string, body string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		RouteKey: routeKey, PathParameters: params, Headers: headers, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:   routeKey,
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"kind": kind, "name": name}},
		},
	}
}

func (w *World) body(s *IntentSpec, variant string) string {
	m := map[string]any{
		"kind": "reply", "provider": sandboxprovider.Name, "account": s.Account, "action": "send_message",
		"target": s.Target, "payload": map[string]any{"text": "chaos " + s.Key + variant + strings.Repeat("~", s.Large)},
		"grant": map[string]any{"id": s.Grant, "version": 1},
	}
	if s.Source != "" {
		m["source"] = map[string]any{"id": s.Source, "revision": 1}
	}
	if s.Deadline > 0 {
		m["deadline"] = w.clock.Now().Add(s.Deadline).Format(time.RFC3339Nano)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// submit posts an intent through the real intake handler, as a bot that
// retries 5xx answers with the same key. It returns the last status.
func (w *World) submit(ctx context.Context, wk *Worker, s *IntentSpec, body string) int {
	return w.submitPrefer(ctx, wk, s, body, "")
}

// submitPrefer is submit with a Prefer header (inline delivery, issue 26:
// "wait=N" makes the first attempt inside the intake request).
func (w *World) submitPrefer(ctx context.Context, wk *Worker, s *IntentSpec, body, prefer string) int {
	w.mu.Lock()
	w.submitted[s.ID] = true
	w.mu.Unlock()
	status := 0
	headers := map[string]string{"idempotency-key": s.Key, "content-type": "application/json"}
	if prefer != "" {
		headers["prefer"] = prefer
	}
	for try := 0; try < 6; try++ {
		req := principalReq(core.PrincipalBot, w.bot, "POST /v1/intents", nil, headers, body)
		resp, err := wk.St.Intake.Handle(ctx, req)
		if err != nil {
			status = 500
		} else {
			status = resp.StatusCode
		}
		if status < 500 {
			break
		}
	}
	if status == http.StatusCreated || status == http.StatusOK {
		w.mu.Lock()
		w.accepted[s.ID] = true
		w.mu.Unlock()
	}
	return status
}

// wasAccepted reports whether the intake has answered the intent 200 or 201.
func (w *World) wasAccepted(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.accepted[id]
}

// resubmit submits an intent again under its key (variant "" for the same
// body) and reports whether that changed the stored request.
func (w *World) resubmit(ctx context.Context, wk *Worker, s *IntentSpec, variant string) (status int, changed bool) {
	before, _ := w.env.get(ctx, w.slot.table, s.ID)
	status = w.submit(ctx, wk, s, w.body(s, variant))
	after, _ := w.env.get(ctx, w.slot.table, s.ID)
	return status, before != nil && after != nil && after.RequestHash != before.RequestHash
}

// resolve posts an operator's decision through the real admin handler.
func (w *World) resolve(ctx context.Context, wk *Worker, operator, id, key string, decision core.Decision) int {
	rb := admin.ResolutionBody{Decision: decision, Reason: "chaos: operator " + operator + " decided " + string(decision)}
	if decision == core.DecisionRetry {
		// Chaos operators retry deliberately: the only allowed source of a
		// second effect (authorisedRetries).
		accept := true
		rb.AcceptDuplicateRisk = &accept
	}
	body, _ := json.Marshal(rb)
	h := map[string]string{"content-type": "application/json"}
	if key != "" {
		h["idempotency-key"] = key
	}
	req := principalReq(core.PrincipalOperator, operator, "POST /v1/admin/intents/{id}/resolution", map[string]string{"id": id}, h, string(body))
	resp, err := wk.St.Admin.Handle(ctx, req)
	if err != nil {
		return 500
	}
	return resp.StatusCode
}

// admin calls an extra admin route (grants, backups, ...) as an operator.
func (w *World) admin(ctx context.Context, wk *Worker, routeKey string, params map[string]string, body string) (int, string) {
	req := principalReq(core.PrincipalOperator, "op-chaos", routeKey, params, map[string]string{"content-type": "application/json"}, body)
	resp, err := wk.St.Admin.Handle(ctx, req)
	if err != nil {
		return 500, err.Error()
	}
	return resp.StatusCode, resp.Body
}

// reviseSource reports a newer source revision through the bot API.
func (w *World) reviseSource(ctx context.Context, wk *Worker, source string, rev int) int {
	req := principalReq(core.PrincipalBot, w.bot, "PUT /v1/sources/{sourceId}", map[string]string{"sourceId": source},
		map[string]string{"content-type": "application/json"}, fmt.Sprintf(`{"revision":%d}`, rev))
	resp, err := wk.St.Intake.Handle(ctx, req)
	if err != nil {
		return 500
	}
	return resp.StatusCode
}

// states reads every created intent of the schedule (fault-free client).
func (w *World) states(ctx context.Context) map[string]*core.Intent {
	out := map[string]*core.Intent{}
	for _, s := range w.Intents {
		if in, err := w.env.get(ctx, w.slot.table, s.ID); err == nil {
			out[s.ID] = in
		}
	}
	return out
}

func (w *World) spec(id string) *IntentSpec {
	for _, s := range w.Intents {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// withStatus returns the ids of intents currently in one of the statuses, sorted.
func (w *World) withStatus(ctx context.Context, st ...core.Status) []string {
	var out []string
	for id, in := range w.states(ctx) {
		for _, s := range st {
			if in.Status == s {
				out = append(out, id)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (w *World) worker(n int) *Worker { return w.Workers[n%len(w.Workers)] }
