package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/sandbox"
)

var timing = os.Getenv("CHAOS_TIMING") == "1"

// Config is a run.
type Config struct {
	Seed     uint64 // schedule i uses seed Seed+i; SEED=<a schedule's seed> N=1 replays it
	N        int    // schedules
	Parallel int    // schedules at once (one table each)
	Workers  int    // workers per schedule
	Intents  int    // intents per schedule (max; each schedule draws 2..Intents)
	Steps    int    // steps per schedule (max; each draws Steps/2..Steps)
	Only     []string
	Verbose  bool
	Out      io.Writer // progress and failure reports

	// Sabotage, for the suite's own tests (proof that it catches bugs):
	// BreakConfig changes a worker's AWS configuration before it starts;
	// BreakProvider wraps each of its providers (through the assembly's
	// option, wire.Config.WrapProvider).
	BreakConfig   func(*aws.Config)
	BreakProvider func(core.Provider) core.Provider
	// StopWhen, when set, is asked after every schedule with the summary so
	// far; once it says true no further schedule starts (those running
	// finish). A sabotage test stops at the first catch.
	StopWhen func(Summary) bool
}

func (c *Config) defaults() {
	if c.N <= 0 {
		c.N = 500
	}
	if c.Parallel <= 0 {
		c.Parallel = 3
	}
	if c.Workers <= 0 {
		c.Workers = 3
	}
	if c.Intents <= 1 {
		c.Intents = 5
	}
	if c.Steps <= 0 {
		c.Steps = 40
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
}

// Summary is the result of a run.
type Summary struct {
	Schedules        int
	EffectsOverLimit int
	Lost             int
	Stuck            int
	Violations       int // every other invariant: evidence, history, send after stop, failed with effect, intake
	HarnessErrors    int
	Failed           []uint64 // seeds of failing schedules
	ByKind           map[string]int
	StepsRun         map[string]int
	Outcomes         map[string]int // final statuses, effects, attempts over all schedules
	Elapsed          time.Duration
	Seed             uint64
}

// Line is the one-line verdict `make chaos` ends with. violations counts
// every other invariant and anything the suite could not check.
func (s Summary) Line() string {
	return fmt.Sprintf("schedules=%d effects_over_limit=%d lost=%d stuck=%d violations=%d seed=%d",
		s.Schedules, s.EffectsOverLimit, s.Lost, s.Stuck, s.Violations+s.HarnessErrors, s.Seed)
}

// OK reports whether every invariant held.
func (s Summary) OK() bool {
	return s.EffectsOverLimit == 0 && s.Lost == 0 && s.Stuck == 0 && s.Violations == 0 && s.HarnessErrors == 0
}

// Plan draws a schedule's intents and steps from its seed.
func Plan(seed uint64, cfg Config) ([]*IntentSpec, []Step, []string) {
	cfg.defaults()
	specs, plan, names := basePlan(seed, cfg)
	plan, names = pruneSteps(seed, cfg, specs, plan, names)
	return specs, plan, names
}

// basePlan is Plan without the retention steps (prune.go).
func basePlan(seed uint64, cfg Config) ([]*IntentSpec, []Step, []string) {
	r := rand.New(rand.NewPCG(seed, 0xc4a05))
	n := 2 + r.IntN(cfg.Intents-1)
	var specs []*IntentSpec
	for i := 0; i < n; i++ {
		s := &IntentSpec{
			N: i, Key: fmt.Sprintf("k%d", i),
			Account: fmt.Sprintf("acct-%d-%d", seed, i), Target: fmt.Sprintf("chan-%d", i),
			Grant: fmt.Sprintf("g-%d-%d", seed, i),
		}
		switch r.IntN(4) {
		case 0:
			s.Keys = true
		case 1:
			s.Lookup = true
		case 2:
			s.Keys, s.Lookup = true, true
		}
		s.Retain = []int{1, 3, 10, 86400}[r.IntN(4)]
		s.Conflict = r.IntN(4) == 0
		if r.IntN(5) == 0 {
			s.Deadline = time.Duration(1+r.IntN(8)) * time.Second
		}
		if r.IntN(3) == 0 {
			s.Source = fmt.Sprintf("src-%d", i)
		}
		s.Late = i > 0 && r.IntN(4) == 0
		if r.IntN(2) == 0 {
			s.Webhook = &sandbox.WebhookConfig{Duplicates: r.IntN(3), DelayMs: r.IntN(150), Early: r.IntN(3) == 0,
				Reorder: r.IntN(2) == 0, Statuses: [][]string{{"delivered"}, {"delivered", "read"}}[r.IntN(2)]}
		}
		// Large payloads (S3 claim check) for about a third of the intents,
		// drawn from a stream of their own so every other draw of the seed
		// (and so every recorded regression seed) is unchanged.
		lr := rand.New(rand.NewPCG(seed, 0x1a26e+uint64(i)))
		if lr.IntN(3) == 0 {
			s.Large = []int{5 << 10, 64 << 10, 200 << 10}[lr.IntN(3)]
		}
		// Half the lookup-only accounts name the message with a
		// client-chosen id (Google Calendar's shape: a repeat is 409
		// duplicate, the lookup decides), drawn from a stream of its own
		// too. The short key windows (Discord's shape) are the 1 s, 3 s and
		// 10 s retentions above.
		if cr := rand.New(rand.NewPCG(seed, 0xc405e+uint64(i))); s.Lookup && !s.Keys && cr.IntN(2) == 0 {
			s.ChosenID = true
		}
		// "Neither + callback" accounts (issue 48: Twilio, WhatsApp, SES):
		// half the accounts with neither keys nor lookup that call back send
		// only statuses (no acknowledgement), sometimes a failure report
		// first or alone, before (early), during or after the needs-human
		// hand-off (up to 600 ms later), duplicated and reordered as drawn
		// above. A stream of its own keeps every other draw of the seed.
		if cb := rand.New(rand.NewPCG(seed, 0xcb48+uint64(i))); s.Webhook != nil && !s.Keys && !s.Lookup && cb.IntN(2) == 0 {
			s.Webhook.NoAck = true
			s.Webhook.Statuses = [][]string{{"delivered"}, {"undelivered", "delivered"}, {"failed"}, {"undelivered"}}[cb.IntN(4)]
			if !s.Webhook.Early {
				s.Webhook.DelayMs = []int{0, 60, 300, 600}[cb.IntN(4)]
			}
		}
		specs = append(specs, s)
	}
	drawPacing(seed, specs)
	faults := selectFaults(cfg.Only)
	total := 0
	for _, f := range faults {
		total += f.Weight
	}
	g := &Gen{R: r, Intents: specs, Workers: cfg.Workers}
	steps := cfg.Steps/2 + r.IntN(cfg.Steps/2+1)
	var plan []Step
	var names []string
	for i := 0; i < steps && total > 0; i++ {
		x := r.IntN(total)
		for _, f := range faults {
			if x < f.Weight {
				plan = append(plan, f.Gen(g))
				names = append(names, f.Name)
				break
			}
			x -= f.Weight
		}
	}
	return specs, plan, names
}

func selectFaults(only []string) []Fault {
	if len(only) == 0 {
		return Faults
	}
	// Deliveries, sweeps and time are always in: without them nothing moves.
	keep := []string{"stream/", "queue/deliver", "sweep", "clock/", "intake/submit"}
	var out []Fault
	for _, f := range Faults {
		in := false
		for _, p := range append(keep, only...) {
			in = in || strings.HasPrefix(f.Name, p)
		}
		if in {
			out = append(out, f)
		}
	}
	return out
}

// RunSchedule plans and runs one schedule in a slot and returns its problems.
// The report (non-empty only when something failed) is the schedule's story.
func (e *Env) RunSchedule(ctx context.Context, sl *slot, seed uint64, cfg Config) (string, []Problem, map[string]int, error) {
	rep, probs, ran, outcomes, err := e.runSchedule(ctx, sl, seed, cfg)
	for k, v := range outcomes {
		ran["outcome:"+k] += v
	}
	return rep, probs, ran, err
}

func (e *Env) runSchedule(ctx context.Context, sl *slot, seed uint64, cfg Config) (string, []Problem, map[string]int, map[string]int, error) {
	specs, plan, names := Plan(seed, cfg)
	t0 := time.Now()
	w, err := e.newWorld(ctx, sl, seed, specs, cfg)
	if err != nil {
		return "", nil, nil, nil, err
	}
	defer w.close(ctx)
	for _, s := range specs {
		w.note("intent %d [%s] key=%s", s.N, s.caps(), s.Key)
	}
	for _, s := range specs {
		if !s.Late {
			st := w.submit(ctx, w.Workers[s.N%len(w.Workers)], s, w.body(s, ""))
			w.note("submit intent %d -> %d", s.N, st)
		}
	}
	ran := map[string]int{}
	for i, st := range plan {
		w.note("step %d %s: %s", i, names[i], st.Desc)
		st.Run(ctx, w)
		ran[names[i]]++
	}
	t1 := time.Now()
	rounds := w.drain(ctx)
	t2 := time.Now()
	w.note("drained in %d rounds", rounds)
	if rounds >= 20 {
		// Quiet only after minutes of fake time (a long timer such as a
		// leftover backup barrier's TTL held work back): not a violation,
		// but worth a look.
		w.mu.Lock()
		w.outcomes["drain-needed-minutes"]++
		w.mu.Unlock()
	}
	w.check(ctx)
	if timing {
		fmt.Fprintf(os.Stderr, "timing seed=%d setup=%s steps=%s (%d) drain=%s (%d rounds) check=%s\n", seed,
			w.setupTook.Round(time.Millisecond), t1.Sub(t0.Add(w.setupTook)).Round(time.Millisecond), len(plan),
			t2.Sub(t1).Round(time.Millisecond), rounds, time.Since(t2).Round(time.Millisecond))
	}
	w.mu.Lock()
	probs := append([]Problem(nil), w.problems...)
	w.mu.Unlock()
	report := ""
	if len(probs) > 0 || os.Getenv("CHAOS_TRACE") == "1" {
		report = w.report(ctx, plan)
	}
	return report, probs, ran, w.outcomes, nil
}

// Run runs cfg.N schedules and returns the summary.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	cfg.defaults()
	start := time.Now()
	sum := Summary{Seed: cfg.Seed, ByKind: map[string]int{}, StepsRun: map[string]int{}, Outcomes: map[string]int{}}
	env, err := NewEnv(ctx, cfg.Parallel)
	if err != nil {
		return sum, err
	}
	defer env.Close()
	var mu sync.Mutex
	var wg sync.WaitGroup
	reports := 0
	for i := 0; i < cfg.N; i++ {
		if ctx.Err() != nil {
			break
		}
		sl := <-env.slots
		mu.Lock()
		stop := cfg.StopWhen != nil && cfg.StopWhen(sum)
		mu.Unlock()
		if stop {
			env.slots <- sl
			break
		}
		seed := cfg.Seed + uint64(i)
		wg.Add(1)
		go func(sl *slot, seed uint64) {
			defer wg.Done()
			defer func() { env.slots <- sl }()
			report, probs, ran, err := env.RunSchedule(ctx, sl, seed, cfg)
			mu.Lock()
			defer mu.Unlock()
			sum.Schedules++
			for k, v := range ran {
				if o, ok := strings.CutPrefix(k, "outcome:"); ok {
					sum.Outcomes[o] += v
				} else {
					sum.StepsRun[k] += v
				}
			}
			if err != nil {
				sum.HarnessErrors++
				fmt.Fprintf(cfg.Out, "schedule seed=%d: harness error: %v\n", seed, err)
				return
			}
			for _, p := range probs {
				sum.ByKind[p.Kind]++
				switch p.Kind {
				case "effects_over_limit":
					sum.EffectsOverLimit++
				case "lost":
					sum.Lost++
				case "stuck":
					sum.Stuck++
				case "harness":
					sum.HarnessErrors++
				default:
					sum.Violations++
				}
			}
			if len(probs) == 0 && report != "" {
				fmt.Fprint(cfg.Out, report)
			}
			if len(probs) > 0 {
				sum.Failed = append(sum.Failed, seed)
				if reports < 5 {
					reports++
					fmt.Fprint(cfg.Out, report)
				} else {
					fmt.Fprintf(cfg.Out, "schedule seed=%d FAILED (%d problems; replay: SEED=%d N=1 make chaos)\n", seed, len(probs), seed)
				}
			}
			if sum.Schedules%50 == 0 {
				fmt.Fprintf(cfg.Out, "... %d/%d schedules, %s\n", sum.Schedules, cfg.N, time.Since(start).Round(time.Second))
			}
		}(sl, seed)
	}
	wg.Wait()
	sum.Elapsed = time.Since(start)
	return sum, nil
}
