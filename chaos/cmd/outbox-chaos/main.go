// Command outbox-chaos runs the fault-injection suite (`make chaos`).
//
// Settings (environment): SEED (base seed; schedule i uses SEED+i, so
// `SEED=<a failing schedule's seed> N=1` replays it; default: random), N
// (schedules, default 500), PARALLEL (schedules at once, default 3), WORKERS
// (per schedule, default 3), INTENTS, STEPS, FAULTS (comma-separated name
// prefixes from chaos.Faults to focus on), VERBOSE=1 (product logs).
//
// It needs the emulators (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS).
// The last line of output is always
// `schedules=N effects_over_limit=0 lost=0 stuck=0 violations=0 seed=S`;
// the exit status is 1 when any count is not zero.
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/chaos"
)

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "outbox-chaos: %s=%q is not a number\n", name, v)
		os.Exit(2)
	}
	return def
}

func main() {
	if !awsconfig.Emulated("DYNAMODB") {
		fmt.Fprintln(os.Stderr, "outbox-chaos: no emulator endpoint; run it through `make chaos`")
		os.Exit(2)
	}
	var seed uint64
	if v := os.Getenv("SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "outbox-chaos: SEED=%q is not a number\n", v)
			os.Exit(2)
		}
		seed = s
	} else {
		var b [4]byte
		_, _ = rand.Read(b[:])
		seed = uint64(binary.BigEndian.Uint32(b[:]))
	}
	n := 500
	if os.Getenv("SEED") != "" {
		n = 1
	}
	cfg := chaos.Config{
		Seed: seed, N: envInt("N", n), Parallel: envInt("PARALLEL", 3), Workers: envInt("WORKERS", 3),
		Intents: envInt("INTENTS", 5), Steps: envInt("STEPS", 40), Verbose: os.Getenv("VERBOSE") == "1", Out: os.Stdout,
	}
	if f := os.Getenv("FAULTS"); f != "" {
		cfg.Only = strings.Split(f, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("outbox-chaos: seed=%d schedules=%d parallel=%d workers=%d (replay one: SEED=<its seed> N=1 make chaos)\n", cfg.Seed, cfg.N, cfg.Parallel, cfg.Workers)
	sum, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Println("outbox-chaos:", err)
	}
	var names []string
	for k := range sum.StepsRun {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", k, sum.StepsRun[k]))
	}
	fmt.Printf("steps run: %s\n", strings.Join(parts, " "))
	fmt.Printf("outcomes: %v\n", sum.Outcomes)
	if len(sum.ByKind) > 0 {
		fmt.Printf("problems by kind: %v; failing seeds: %v\n", sum.ByKind, sum.Failed)
	}
	if sum.HarnessErrors > 0 {
		fmt.Printf("harness errors: %d (the suite itself could not check something)\n", sum.HarnessErrors)
	}
	fmt.Printf("elapsed %s\n", sum.Elapsed.Round(time.Second))
	fmt.Println(sum.Line())
	if err != nil || !sum.OK() {
		os.Exit(1)
	}
}
