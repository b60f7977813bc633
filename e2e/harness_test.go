// Package e2e runs the real handlers, behind the local host, against the
// emulators and the sandbox provider over real HTTP. Reliability assertions
// count side effects at the sandbox, never local calls.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/api/apitest"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/localstack/emulatortest"
	"github.com/botharness/outbox/localstack/system"
	"github.com/botharness/outbox/sandbox"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "outbox-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binDir = dir
	code := emulatortest.Run(m, "e2e")
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	botToken   = "tok-bot-1"
	bot2Token  = "tok-bot-2"
	opToken    = "tok-operator"
	orchToken  = "tok-orchestrator"
	testBot    = "bot-1"
	testBot2   = "bot-2"
	testAction = "send_message"
)

// writeCounter counts DynamoDB write requests made through the stack's client.
type writeCounter struct{ n atomic.Int64 }

func (w *writeCounter) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("countWrites",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			switch in.Parameters.(type) {
			case *dynamodb.PutItemInput, *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput,
				*dynamodb.TransactWriteItemsInput, *dynamodb.BatchWriteItemInput:
				w.n.Add(1)
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

type options = system.Options

type env struct {
	t       *testing.T
	st      *system.Stack
	sb      *sandbox.Server
	sbURL   string
	api     *httptest.Server
	clients awsconfig.Clients
	writes  *writeCounter
	table   string
	prefix  string
	// contract validates every exchange against api/openapi.json.
	contract *apitest.Validator
}

func randName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// e2eRepairShards is the repair index's shard count in e2e tables (several,
// so the sweeper's per-shard checkpoints and merged listings are exercised).
const e2eRepairShards = 4

func fastBackoff() core.BackoffPolicy {
	return core.BackoffPolicy{Base: time.Second, Cap: 2 * time.Second, MaxAttempts: 3, MaxAge: time.Hour}
}

// serveChecked serves the stack's API; every exchange is validated against
// api/openapi.json, reported after the server and the stack stopped (at
// cleanup), so late deliveries count too.
func serveChecked(t *testing.T, st *system.Stack) (*httptest.Server, *apitest.Validator) {
	t.Helper()
	contract, err := apitest.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { contract.Report(t) })
	api := httptest.NewServer(contract.Middleware(st.Gateway))
	t.Cleanup(func() {
		api.Close()
		st.Stop()
	})
	return api, contract
}

// newEnv starts a full local stack on a fresh table and queues, and a fresh sandbox.
func newEnv(t *testing.T, o options) *env {
	t.Helper()
	sb, sbURL := sandbox.StartTest(t, time.Now)
	return startEnv(t, o, sb, sbURL)
}

// joinEnv starts a second worker (another "process") on e's table, queues and sandbox.
func (e *env) join(o options) *env {
	o.Table, o.QueuePrefix = e.table, e.prefix
	return startEnv(e.t, o, e.sb, e.sbURL)
}

func startEnv(t *testing.T, o options, sb *sandbox.Server, sbURL string) *env {
	t.Helper()
	ctx := context.Background()
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wc := &writeCounter{}
	cfg.APIOptions = append(cfg.APIOptions, wc.middleware)
	clients := awsconfig.New(cfg)
	if o.Table == "" {
		o.Table = randName("t_")
		o.QueuePrefix = o.Table
	}
	// A test's ProviderConfig holds extra top-level members (e.g. "pacing");
	// a "sandbox" member among them is merged into the harness's own (the
	// sandbox's address, a 1.5 s timeout unless the test sets one).
	doc := map[string]json.RawMessage{}
	if o.ProviderConfig != "" {
		if err := json.Unmarshal([]byte("{"+o.ProviderConfig+"}"), &doc); err != nil {
			t.Fatalf("options.ProviderConfig: %v", err)
		}
	}
	sbCfg := map[string]any{"timeoutMs": 1500}
	if raw, ok := doc["sandbox"]; ok {
		if err := json.Unmarshal(raw, &sbCfg); err != nil {
			t.Fatalf("options.ProviderConfig sandbox: %v", err)
		}
	}
	sbCfg["baseUrl"] = sbURL
	doc["sandbox"], _ = json.Marshal(sbCfg)
	pc, _ := json.Marshal(doc)
	o.ProviderConfig = string(pc)
	// The attempt policy's fields a test leaves zero: e2e's short ones
	// here, the product's for the rest (core.AttemptPolicy.Resolve).
	if p := &o.Policy; p.Backoff.Base == 0 {
		p.Backoff = fastBackoff()
	}
	if o.Policy.Reconcile == (core.ReconcilePolicy{}) {
		o.Policy.Reconcile = core.ReconcilePolicy{Delay: time.Second, Window: 5 * time.Second, Settle: 2 * time.Second}
	}
	if o.Policy.Lease == 0 {
		o.Policy.Lease = 10 * time.Second
	}
	if o.PollInterval == 0 {
		// 100 ms, as make run: each stream poller reads its shard this often
		// (an idle one cost DynamoDB Local about 5% of a core at 50 ms).
		o.PollInterval = 100 * time.Millisecond
	}
	if o.Policy.SweepGrace == 0 {
		o.Policy.SweepGrace = time.Second
	}
	if o.IntentRetention == 0 {
		// Nothing expires within a test under the 7-day default window.
		o.DisablePruner = true
	}
	if o.Sharding.Repair == 0 {
		// A sweep reads every repair shard (checkpoint, due page, needs-human
		// count and oldest: 256 requests at the default 64, about 170 ms of
		// DynamoDB Local's CPU); a test's table holds a few dozen intents.
		o.Sharding.Repair = e2eRepairShards
	}
	if o.Log == nil {
		level := slog.LevelWarn
		if os.Getenv("E2E_DEBUG") != "" {
			level = slog.LevelDebug
		}
		o.Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	o.Tokens = map[string]core.Principal{
		botToken:  {Kind: core.PrincipalBot, Name: testBot},
		bot2Token: {Kind: core.PrincipalBot, Name: testBot2},
		opToken:   {Kind: core.PrincipalOperator, Name: "op-ann"},
		orchToken: {Kind: core.PrincipalOrchestrator, Name: "orc-1"},
	}
	// --- issue 4 (revalidation): intake refuses an intent its grant does not
	// cover. intentBody names grant g-1 for bot-1 and bot-2: seed it,
	// permissive. Seeding never overwrites an existing grant, so a joined
	// worker (same table) or a test that changed g-1 is unaffected.
	o.Grants = append(o.Grants, core.Grant{ID: "g-1", Version: 1, Bot: "bot-*", Provider: "sandbox",
		Account: "*", Actions: []string{"*"}, Targets: []string{"*"}})
	// --- end issue 4
	o.Owner = randName("worker-")
	if o.MetricsOut == nil {
		o.MetricsOut = io.Discard
	}
	st, err := system.Start(ctx, clients, o)
	if err != nil {
		t.Fatal(err)
	}
	api, contract := serveChecked(t, st)
	e := &env{t: t, st: st, sb: sb, sbURL: sbURL, api: api, clients: clients, writes: wc, table: o.Table, prefix: o.QueuePrefix, contract: contract}
	wc.n.Store(0)
	return e
}

// stop simulates the worker process going away.
func (e *env) stop() {
	e.api.Close()
	e.st.Stop()
}

type response struct {
	status  int
	body    []byte
	headers http.Header
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r response) errorCode() string {
	var b struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &b)
	return b.Error.Code
}

func (e *env) do(method, path, token string, headers map[string]string, body string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.api.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: b, headers: resp.Header}
}

func (e *env) submit(token, key, body string) response {
	e.t.Helper()
	return e.do("POST", "/v1/intents", token, map[string]string{"Idempotency-Key": key}, body)
}

func intentBody(account, target, text string) string {
	return fmt.Sprintf(`{"kind":"reply","provider":"sandbox","account":%q,"action":%q,"target":%q,"payload":{"text":%q},"grant":{"id":"g-1","version":1}}`,
		account, testAction, target, text)
}

// mustSubmit posts an intent and returns its id.
func (e *env) mustSubmit(key, body string) string {
	e.t.Helper()
	r := e.submit(botToken, key, body)
	if r.status != http.StatusCreated {
		e.t.Fatalf("submit: %d %s", r.status, r.body)
	}
	var in core.Intent
	r.json(e.t, &in)
	return in.ID
}

func (e *env) intent(id string) *core.Intent {
	e.t.Helper()
	in, err := e.st.App.Store.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return in
}

// waitStatus waits until the intent reaches one of the statuses.
func (e *env) waitStatus(id string, timeout time.Duration, want ...core.Status) *core.Intent {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	var in *core.Intent
	for time.Now().Before(deadline) {
		in = e.intent(id)
		for _, w := range want {
			if in.Status == w {
				return in
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("intent %s is %s (%s), want %v after %v", id, in.Status, in.StatusReason, want, timeout)
	return nil
}

// faults configures the sandbox over its real HTTP control API.
func (e *env) faults(cfg string) {
	e.t.Helper()
	resp, err := http.Post(e.sbURL+"/_sandbox/faults", "application/json", bytes.NewBufferString(cfg))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("faults: %d %s", resp.StatusCode, b)
	}
}

// sandboxGet reads one of the sandbox's control routes over HTTP into v.
func (e *env) sandboxGet(path string, v any) {
	e.t.Helper()
	resp, err := http.Get(e.sbURL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// An error body would decode to zero counts and make "no effect" checks vacuous.
		e.t.Fatalf("sandbox %s: status %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		e.t.Fatal(err)
	}
}

// effects reads the side effects the sandbox really performed, over HTTP.
func (e *env) effects(query string) int {
	e.t.Helper()
	var er sandbox.EffectsResponse
	e.sandboxGet("/_sandbox/effects"+query, &er)
	if er.Count != len(er.Effects) {
		e.t.Fatalf("sandbox effects%s: count %d but %d effects listed", query, er.Count, len(er.Effects))
	}
	return er.Count
}

// effectsFor counts the sandbox's effects for an intent, by the intent id it
// carries and by the idempotency key it was sent under; the two must agree,
// so a change of key scheme cannot turn "no effect" checks vacuous.
//
// The two counts are two requests, and an effect can land between them (a
// released request completing): counts only grow, so a pair that differs is
// read again, and only a pair that differs while neither count moved fails.
func (e *env) effectsFor(id string) int {
	e.t.Helper()
	byIntent := e.effects("?intentId=" + id)
	byKey := e.effects("?idempotencyKey=" + id)
	for byKey != byIntent {
		again, againKey := e.effects("?intentId="+id), e.effects("?idempotencyKey="+id)
		if again == byIntent && againKey == byKey {
			e.t.Fatalf("intent %s: %d effects by intent id, %d by idempotency key", id, byIntent, byKey)
		}
		byIntent, byKey = again, againKey
	}
	return byIntent
}

// itemCount counts the table's intent items.
func (e *env) itemCount() int {
	e.t.Helper()
	out, err := e.clients.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{
		TableName:        aws.String(e.table),
		FilterExpression: aws.String("sk = :s"),
		ExpressionAttributeValues: map[string]typesAV{
			":s": strAV("INTENT"),
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return int(out.Count)
}

// sweep runs the real sweeper handler once.
func (e *env) sweep() {
	e.t.Helper()
	if err := e.st.Sweeper.Handle(context.Background(), eventBridgeTick()); err != nil {
		e.t.Fatal(err)
	}
}

// assertEffectsStay checks, for the whole window, that the sandbox count
// for id stays n: asynchronous work (pollers, sweeps) must not add a late
// duplicate. It fails as soon as the count moves.
func (e *env) assertEffectsStay(id string, n int, window time.Duration) {
	e.t.Helper()
	e.consistently(window, fmt.Sprintf("side effects for %s stay %d", id, n), func() bool { return e.effectsFor(id) == n })
}

// eventually polls cond until it holds; it fails the test at the deadline.
func (e *env) eventually(within time.Duration, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// consistently polls cond for the whole window and fails as soon as it does
// not hold.
func (e *env) consistently(window time.Duration, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(window)
	for {
		if !cond() {
			e.t.Fatalf("%s: no longer holds", what)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// waitUntil waits for the wall clock to pass t (a grant's expiry, a lease's
// end): the condition is the time itself.
func (e *env) waitUntil(t time.Time) {
	e.t.Helper()
	e.eventually(time.Until(t)+5*time.Second, "the clock passes "+t.Format(time.RFC3339Nano), func() bool { return time.Now().After(t) })
}

// httpPoster posts to the sandbox control API.
type httpPoster struct{ e *env }

func (p *httpPoster) post(path, body string) (int, error) {
	resp, err := http.Post(p.e.sbURL+path, "application/json", bytes.NewBufferString(body))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
