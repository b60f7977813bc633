// Command outbox-bench measures what the outbox costs and how fast it is,
// side by side with the raw emulator in one run: it starts the whole local
// stack in-process (localstack/system) against the emulators the environment
// points at (AWS_ENDPOINT_URL_DYNAMODB, ...), drives it over real HTTP, counts
// DynamoDB requests and consumed capacity with an SDK middleware, builds the
// Lambda artifacts, and writes build/bench/results.json plus a table.
//
// `make bench` (bench/run.sh) starts its own emulators and runs this; by hand:
//
//	eval "$(localstack/emulators.sh env)"; go run ./bench/cmd/outbox-bench
//
// Every figure that matters is a ratio of two measurements taken interleaved
// in the same run, because the machines are shared and noisy.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/localstack/system"
	"github.com/botharness/outbox/sandbox"
)

type flags struct {
	out            string
	merge          bool
	profileDir     string
	c1Dur          time.Duration
	c8Dur          time.Duration
	warmup         time.Duration
	rounds         int
	e2eN           int
	e2ePoll        time.Duration
	e2ePollAlt     time.Duration
	retryN         int
	emuPID         int
	coreBench      string
	goarch         string
	initRuns       int
	skipArt        bool
	logLevel       string
	only           string
	verbose        bool
	e2eMax         time.Duration
	e2eWarm        int
	inlineN        int
	paceN          int
	paceRate       int
	paceWorkers    int
	paceLimit      int
	paceHold       time.Duration
	paceQueueConc  int
	paceAllStreams bool
	paceWarm       int
	scaleN         int
	orphans        int
	scaleParts     string
	isoN           int
	// retention phase (issue 27)
	retentionN      int
	retentionWindow time.Duration
	prices          string
}

func main() {
	var f flags
	flag.StringVar(&f.out, "out", "build/bench/results.json", "results file")
	flag.BoolVar(&f.merge, "merge", false, "add this run's keys to the results file's (bench/run.sh runs the scale parts on fresh emulators, one runner each)")
	flag.StringVar(&f.profileDir, "profile-dir", "build/bench", "where the CPU profile of the throughput slices goes (empty: none)")
	flag.DurationVar(&f.c1Dur, "c1", 600*time.Millisecond, "duration of each concurrency-1 slice")
	flag.DurationVar(&f.c8Dur, "c8", 800*time.Millisecond, "duration of each concurrency-8 slice")
	flag.DurationVar(&f.warmup, "warmup", 1500*time.Millisecond, "warm-up per variant before measuring (JIT, connection pools)")
	flag.IntVar(&f.rounds, "rounds", 8, "interleaved rounds of raw/intake slices (order alternates); ratios are medians over rounds")
	flag.IntVar(&f.e2eN, "e2e-n", 150, "intents per end-to-end latency run")
	flag.DurationVar(&f.e2ePoll, "poll", 50*time.Millisecond, "stream/queue poll interval of the headline end-to-end run")
	flag.DurationVar(&f.e2ePollAlt, "poll-alt", 10*time.Millisecond, "second poll interval, to isolate the polling share (0: skip)")
	flag.IntVar(&f.retryN, "retry-n", 4, "intents for the one-retry cost run")
	flag.IntVar(&f.emuPID, "emulator-pid", envInt("OUTBOX_BENCH_DDB_PID"), "PID of DynamoDB Local, for its CPU per op (default: from the emulators' run dir)")
	flag.StringVar(&f.coreBench, "core-bench", "build/bench/core-bench.txt", "go test -bench output of the core benchmarks to fold in (optional)")
	flag.StringVar(&f.goarch, "goarch", "arm64", "GOARCH of the Lambda artifacts (as make build)")
	flag.IntVar(&f.initRuns, "init-runs", 5, "cold starts of the authorizer binary to time")
	flag.BoolVar(&f.skipArt, "skip-artifacts", false, "skip building the Lambda artifacts and the cold-start proxy")
	flag.StringVar(&f.logLevel, "log-level", "warn", "log level of the stack (info adds the per-request log lines the functions write in AWS)")
	flag.StringVar(&f.only, "only", "", "comma-separated phases to run (throughput,e2e,inline,retry,reconcile,e2e256k,artifacts,pace,scale,retention,idle); default all")
	flag.IntVar(&f.scaleN, "scale-n", 2048, "intents of the key-spread run (64 bots, one sending 25%)")
	flag.StringVar(&f.scaleParts, "scale-parts", "spread,repair,isolation", "which runs of the scale phase (comma-separated)")
	flag.IntVar(&f.orphans, "orphans", 5000, "orphaned pending intents the sweeper alone recovers (repair_vs_stream)")
	flag.IntVar(&f.isoN, "iso-n", 90, "healthy intents per isolation slice")
	flag.StringVar(&f.prices, "prices", "bench/prices.json", "the price table of the cost figures (usd_per_million_delivered_*)")
	flag.BoolVar(&f.verbose, "v", false, "print every measured slice")
	flag.IntVar(&f.inlineN, "inline-n", 600, "inline POSTs of the inline run, each interleaved with a floor sample and a rules-floor sample (a p99 over 600 is the 6th-worst sample, over 150 the 2nd)")
	flag.IntVar(&f.e2eWarm, "e2e-warmup", 25, "unmeasured intents before each end-to-end run")
	flag.DurationVar(&f.e2eMax, "e2e-max", 25*time.Second, "cap on each end-to-end run (fewer than -e2e-n intents on a slow machine)")
	flag.IntVar(&f.paceN, "pace-n", 500, "intents of the paced run (issue 15)")
	flag.IntVar(&f.paceRate, "pace-rate", 20, "declared pace (per second) of the paced run's account")
	flag.IntVar(&f.paceWorkers, "pace-workers", 4, "concurrent workers (whole stacks on one table) of the paced run")
	flag.DurationVar(&f.paceHold, "pace-hold", 2*time.Second, "longest in-process wait for a fresh slot (pacing.maxHoldMs)")
	flag.IntVar(&f.paceQueueConc, "pace-queue-concurrency", 16, "retrier batches at once per worker in the paced run (AWS: the retrier mapping scales to RetrierMaxConcurrency, default 200, batches; 4 workers x 16 = 64 here)")
	flag.BoolVar(&f.paceAllStreams, "pace-all-streams", false, "every worker of the paced run reads the stream (each record then reaches every worker: 4 copies, which AWS does not make; default: one stream consumer as in AWS, every worker on the work queue)")
	flag.IntVar(&f.paceWarm, "pace-warmup", 200, "unmeasured intents of the paced run's warm-up burst (an account paced at 200/s), before the measured one")
	flag.IntVar(&f.paceLimit, "pace-limit", 22, "the sandbox's rate limit (per second) on the paced account: the declared rate plus the 10% the goal allows")
	flag.IntVar(&f.retentionN, "retention-n", 1000, "delivered intents of the retention phase (issue 27)")
	flag.DurationVar(&f.retentionWindow, "retention-window", 30*time.Second, "the intent retention window of the retention phase (shortened)")
	flag.Parse()

	if !awsconfig.Emulated("DYNAMODB") {
		fmt.Fprintln(os.Stderr, "outbox-bench: no emulator endpoint (AWS_ENDPOINT_URL_DYNAMODB); run `make bench` or eval \"$(localstack/emulators.sh env)\"")
		os.Exit(2)
	}
	if f.emuPID == 0 {
		f.emuPID = emulatorPID()
	}
	start := time.Now()
	r, err := newRunner(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "outbox-bench:", err)
		os.Exit(1)
	}
	if f.merge {
		if err := r.loadPrevious(); err != nil {
			fmt.Fprintln(os.Stderr, "outbox-bench:", err)
			os.Exit(1)
		}
	}
	runErr := r.run()
	r.cleanup()
	r.set("runner_seconds", round(time.Since(start).Seconds(), 1))
	if m, ok := r.res["meta"].(map[string]any); ok {
		m["loadavg_end"] = loadavg()
	}
	if err := r.write(); err != nil {
		fmt.Fprintln(os.Stderr, "outbox-bench:", err)
		os.Exit(1)
	}
	r.printTable(os.Stdout)
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "outbox-bench:", runErr)
		os.Exit(1)
	}
}

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// emulatorPID finds DynamoDB Local's PID from the pid file emulators.sh wrote.
func emulatorPID() int {
	dir := os.Getenv("OUTBOX_EMULATOR_RUN_DIR")
	port := os.Getenv("OUTBOX_DDB_PORT")
	if dir == "" || port == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(dir, "dynamodb-"+port+".pid"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

type runner struct {
	f       flags
	ctx     context.Context
	meter   *meter
	clients awsconfig.Clients
	log     *slog.Logger
	sb      *sandbox.Server
	sbURL   string
	sbTime  *routeTimer
	closers []func()
	res     map[string]any
	notes   []string
	errs    []string
}

const (
	benchToken = "tok-bench-bot"
	benchBot   = "bench-bot"
	account    = "bench"
	benchGrant = "g-1"
)

func newRunner(f flags) (*runner, error) {
	ctx := context.Background()
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return nil, err
	}
	m := &meter{}
	m.reset()
	cfg.APIOptions = append(cfg.APIOptions, m.middleware)
	level := slog.LevelWarn
	_ = level.UnmarshalText([]byte(f.logLevel))
	r := &runner{
		f: f, ctx: ctx, meter: m, clients: awsconfig.New(cfg),
		log: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		res: map[string]any{},
	}
	if level <= slog.LevelInfo {
		// Info lines are what the functions write in AWS; keep their cost, not their noise.
		r.log = slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: level}))
	}
	r.sb = sandbox.New(time.Now)
	r.sbTime = &routeTimer{h: r.sb}
	url, closeSB, err := serve(r.sbTime)
	if err != nil {
		return nil, err
	}
	r.sbURL = url
	r.closers = append(r.closers, func() { r.sb.Close(); closeSB() })
	return r, nil
}

// serve runs h on an HTTP server on 127.0.0.1; the DynamoDB requests made
// while serving it are counted as caller "api".
func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return withCaller(context.Background(), "api") }}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// labelled runs h with the pprof label variant=<label> (goroutines it
// starts inherit it).
func labelled(h http.Handler, label string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		pprof.Do(req.Context(), pprof.Labels("variant", label), func(ctx context.Context) {
			h.ServeHTTP(w, req.WithContext(ctx))
		})
	})
}

func randName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// startStack starts the local stack on a fresh table and queues and serves
// its gateway on 127.0.0.1. stop ends its pollers (a forgotten poller would
// keep loading the emulator during later phases) and drops the table and queues.
func (r *runner) startStack(o system.Options) (st *system.Stack, api string, stop func(), err error) {
	if o.Table == "" {
		o.Table = randName("bench_")
		o.QueuePrefix = o.Table
	}
	extra := "" // a phase's ProviderConfig holds extra top-level members (e.g. "pacing")
	if o.ProviderConfig != "" {
		extra = "," + o.ProviderConfig
	}
	o.ProviderConfig = fmt.Sprintf(`{"sandbox":{"baseUrl":%q,"timeoutMs":2000}%s}`, r.sbURL, extra)
	if o.Tokens == nil {
		o.Tokens = map[string]core.Principal{}
	}
	o.Tokens[benchToken] = core.Principal{Kind: core.PrincipalBot, Name: benchBot}
	o.Grants = append(o.Grants, core.Grant{ID: benchGrant, Version: 1, Bot: benchBot, Provider: "sandbox",
		Account: "*", Actions: []string{"*"}, Targets: []string{"*"}})
	o.Owner = randName("bench-worker-")
	if o.IntentRetention == 0 {
		o.DisablePruner = true // nothing expires within a phase under the 7-day default
	}
	o.Log = r.log
	if o.MetricsOut == nil {
		o.MetricsOut = io.Discard
	}
	if o.Policy.Lease == 0 {
		o.Policy.Lease = 30 * time.Second
	}
	dropTable := func() {
		ctx, cancel := context.WithTimeout(uncounted(context.Background()), 30*time.Second)
		defer cancel()
		_, _ = r.clients.DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(o.Table)})
	}
	// Not uncounted(ctx): the pollers inherit the context's values.
	st, err = system.Start(r.ctx, r.clients, o)
	if err != nil {
		dropTable()
		return nil, "", nil, err
	}
	url, closeAPI, err := serve(labelled(st.Gateway, "intake-server"))
	if err != nil {
		st.Stop()
		dropTable()
		return nil, "", nil, err
	}
	var once sync.Once
	dropQueues := func() {
		ctx, cancel := context.WithTimeout(uncounted(context.Background()), 30*time.Second)
		defer cancel()
		for _, q := range []string{st.Queues.Retry, st.Queues.RetryDLQ, st.Queues.Inbox} {
			_, _ = r.clients.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(q)})
		}
	}
	stop = func() { once.Do(func() { closeAPI(); st.Stop(); dropTable(); dropQueues() }) }
	r.closers = append(r.closers, stop)
	return st, url, stop, nil
}

func (r *runner) cleanup() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

func (r *runner) set(k string, v any) { r.res[k] = v }

func asFloat(v any) float64 { f, _ := v.(float64); return f }

// loadPrevious starts from the results file's keys (-merge): this run's
// keys replace theirs, its notes and errors are added to theirs, and the
// goals are judged over all of them.
func (r *runner) loadPrevious() error {
	b, err := os.ReadFile(r.f.out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	prev := map[string]any{}
	if err := json.Unmarshal(b, &prev); err != nil {
		return fmt.Errorf("merge %s: %w", r.f.out, err)
	}
	for k, v := range prev {
		switch k {
		case "notes", "errors":
			if l, ok := v.([]any); ok {
				for _, e := range l {
					if k == "notes" {
						r.notes = append(r.notes, fmt.Sprint(e))
					} else {
						r.errs = append(r.errs, fmt.Sprint(e))
					}
				}
			}
		case "meta":
			runs, _ := prev["earlier_runs"].([]any)
			r.res["earlier_runs"] = append(runs, v)
		case "earlier_runs", "goals":
			// earlier_runs is extended above; goals are judged again
		case "runner_seconds":
			r.res["earlier_runner_seconds"] = asFloat(v) + asFloat(prev["earlier_runner_seconds"])
		default:
			r.res[k] = v
		}
	}
	return nil
}

func (r *runner) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	r.notes = append(r.notes, s)
	fmt.Fprintln(os.Stderr, "bench:", s)
}

func (r *runner) phase(name string) func() {
	t0 := time.Now()
	fmt.Fprintf(os.Stderr, "bench: %s ...\n", name)
	return func() { fmt.Fprintf(os.Stderr, "bench: %s done in %.1fs\n", name, time.Since(t0).Seconds()) }
}

func (r *runner) run() error {
	r.set("meta", map[string]any{
		"started":          time.Now().UTC().Format(time.RFC3339),
		"go":               runtime.Version(),
		"goos_goarch":      runtime.GOOS + "/" + runtime.GOARCH,
		"cpus":             runtime.NumCPU(),
		"dynamodb":         os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"),
		"emulator_pid":     r.f.emuPID,
		"c1_slice_s":       r.f.c1Dur.Seconds(),
		"c8_slice_s":       r.f.c8Dur.Seconds(),
		"rounds":           r.f.rounds,
		"intake_body_size": len(intakeBody(account, "chat-1")),
		"loadavg_start":    loadavg(),
	})
	// A failed phase is reported (results.json "errors", exit status 1) but
	// does not stop the others: the tree moves while others work in it.
	phases := []struct {
		name, title string
		run         func() error
	}{
		// Order matters: DynamoDB Local gets slower as it accumulates data
		// (stream records outlive deleted tables: after the throughput phase
		// every request costs it several times the CPU), so the latency runs
		// go first and the throughput phase, which writes the most, goes last.
		{"e2e", "end-to-end latency and write cost", r.delivery},
		{"inline", "inline delivery (Prefer: wait) vs the floor and the async road; cost per million", r.inline},
		{"retry", "one-retry cost", r.retried},
		{"reconcile", "unchanged reconcile poll cost", r.reconcilePolls},
		{"e2e256k", "end-to-end with 256 KiB payloads (S3 claim check)", r.delivery256k},
		{"artifacts", "lambda artifacts and cold-start proxy", r.artifacts},
		{"pace", "paced drain across workers", r.paced},
		{"scale", "scale: key spread over 64 bots, hot bot, repair vs stream, tenant isolation", r.scale},
		{"retention", "retention: bytes at rest before and after the window, archive puts", r.retention},
		{"idle", "idle: one scheduled sweep on an empty table (make cost prices it)", r.idle},
		{"throughput", "intake vs raw throughput", r.throughput},
	}
	for _, p := range phases {
		if !r.want(p.name) || (p.name == "artifacts" && r.f.skipArt) {
			continue
		}
		done := r.phase(p.title)
		if err := p.run(); err != nil {
			r.errs = append(r.errs, fmt.Sprintf("%s: %v", p.name, err))
			fmt.Fprintf(os.Stderr, "bench: %s FAILED: %v\n", p.name, err)
			continue
		}
		done()
	}
	if err := r.coreBenchmarks(); err != nil {
		r.note("core benchmarks not included: %v", err)
	}
	r.goals()
	if len(r.errs) > 0 {
		r.set("errors", r.errs)
		return fmt.Errorf("%d phase(s) failed: %s", len(r.errs), strings.Join(r.errs, "; "))
	}
	return nil
}

func (r *runner) want(phase string) bool {
	if r.f.only == "" {
		return true
	}
	for _, p := range strings.Split(r.f.only, ",") {
		if strings.TrimSpace(p) == phase {
			return true
		}
	}
	return false
}

// startProfile starts a CPU profile into the profile dir (a no-op without one).
func (r *runner) startProfile(name string) func() {
	if r.f.profileDir == "" {
		return func() {}
	}
	if err := os.MkdirAll(r.f.profileDir, 0o755); err != nil {
		return func() {}
	}
	fh, err := os.Create(filepath.Join(r.f.profileDir, name))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(fh); err != nil {
		fh.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); fh.Close() }
}

func round(v float64, places int) float64 {
	p := 1.0
	for range places {
		p *= 10
	}
	if v >= 0 {
		return float64(int64(v*p+0.5)) / p
	}
	return -float64(int64(-v*p+0.5)) / p
}

var errTimeout = errors.New("timed out")

// loadavg is /proc/loadavg's 1, 5 and 15 minute averages: other work on the
// machine shows up here, and the absolute figures move with it.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
