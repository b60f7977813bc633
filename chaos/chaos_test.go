package chaos_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/chaos"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/localstack/emulatortest"
)

func TestMain(m *testing.M) { emulatortest.Main(m, "chaos") }

func run(t *testing.T, cfg chaos.Config) chaos.Summary {
	t.Helper()
	var out bytes.Buffer
	cfg.Out = &out
	sum, err := chaos.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%s)\noutcomes: %v", sum.Line(), sum.Elapsed.Round(1e6), sum.Outcomes)
	if testing.Verbose() || !sum.OK() {
		t.Log(out.String())
	}
	return sum
}

// The fixed-seed slice of `make chaos` that `make test` runs.
func TestChaosFixedSeeds(t *testing.T) {
	// The slice is a function of the seed and the fault registry; the seed
	// moved when issue 15 added the pacing faults, to one whose schedules
	// reach needs-human reliably (20260301's new slice does so only sometimes).
	sum := run(t, chaos.Config{Seed: 20260501, N: 12, Parallel: 3})
	if !sum.OK() {
		t.Fatalf("invariants violated: %s (failing seeds %v; replay with SEED=<seed> N=1 make chaos)", sum.Line(), sum.Failed)
	}
	if sum.Outcomes["effects"] == 0 || sum.Outcomes[string(core.StatusSucceeded)] == 0 || sum.Outcomes[string(core.StatusNeedsHuman)] == 0 {
		t.Fatalf("the slice exercised too little: %v", sum.Outcomes)
	}
}

// blindRetry is a deliberately broken provider adapter: it reports an
// unknown outcome as a transient failure, so the dispatcher retries it
// blindly (the bug "retry on unknown outcome").
type blindRetry struct{ core.Provider }

func (b blindRetry) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	res, err := b.Provider.Send(ctx, r)
	var u *core.UnknownOutcomeError
	if errors.As(err, &u) {
		return res, &core.RetryableError{Class: core.ClassTransient, Err: err}
	}
	return res, err
}

// The suite must notice a blind retry after an unknown outcome: a second
// provider effect nobody authorised. The seed is one whose six schedules
// put an ambiguous failure on an account that cannot deduplicate (the
// inline steps of issue 26 changed every seed's plan, and so did issue 46's
// capability shapes: 7100-7110 no longer do; 7123 caught it 3 of 3 times,
// with two effects over the limit each time).
func TestChaosCatchesRetryOnUnknownOutcome(t *testing.T) {
	sum := run(t, chaos.Config{
		Seed: 7123, N: 6, Parallel: 3,
		Only:          []string{"provider/drop_after_commit", "provider/error_after_commit", "provider/hang"},
		BreakProvider: func(p core.Provider) core.Provider { return blindRetry{p} },
		StopWhen:      func(s chaos.Summary) bool { return s.EffectsOverLimit > 0 },
	})
	if sum.EffectsOverLimit == 0 {
		t.Fatalf("a blind retry after unknown outcomes went unnoticed: %s", sum.Line())
	}
}

// stripVersionCondition removes the optimistic-concurrency condition from the
// store's conditional writes (the bug "drop the claim's condition"), and
// slows writes a little so that concurrent workers really interleave.
func stripVersionCondition(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("chaos.stripCondition",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				switch p := in.Parameters.(type) {
				case *dynamodb.PutItemInput: // outcome writes
					if aws.ToString(p.ConditionExpression) == "#v = :v" {
						q := *p
						q.ConditionExpression, q.ExpressionAttributeNames, q.ExpressionAttributeValues = nil, nil, nil
						in.Parameters = &q
					}
				case *dynamodb.TransactWriteItemsInput: // claims (with the backup barrier check)
					q := *p
					q.TransactItems = append([]types.TransactWriteItem(nil), p.TransactItems...)
					for i, it := range q.TransactItems {
						if it.Put != nil && aws.ToString(it.Put.ConditionExpression) == "#v = :v" {
							put := *it.Put
							put.ConditionExpression, put.ExpressionAttributeNames, put.ExpressionAttributeValues = nil, nil, nil
							q.TransactItems[i].Put = &put
						}
					}
					in.Parameters = &q
				}
				if _, ok := in.Parameters.(*dynamodb.GetItemInput); !ok {
					// Widen the read-modify-write window so concurrent workers overlap.
					time.Sleep(10 * time.Millisecond)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

// The suite must notice two workers both winning a claim.
//
// Catching it needs two workers to really interleave, which depends on the
// machine's load: a batch of 6 schedules missed it about one run in four on
// a loaded 2-core machine (on main as well). Up to four batches with other
// seeds run until one catches it; only a bug the suite cannot see in any of
// them fails the test.
func TestChaosCatchesUnconditionalClaim(t *testing.T) {
	var lines []string
	for seed := uint64(7200); seed < 7600; seed += 100 {
		sum := run(t, chaos.Config{
			Seed: seed, N: 6, Parallel: 3,
			Only:        []string{"stream/concurrent-duplicate", "queue/concurrent-duplicate", "storm", "provider/hang-short"},
			BreakConfig: stripVersionCondition,
			StopWhen:    func(s chaos.Summary) bool { return !s.OK() },
		})
		if !sum.OK() {
			return
		}
		lines = append(lines, sum.Line())
	}
	t.Fatalf("unconditional claims went unnoticed in every batch:\n%s", strings.Join(lines, "\n"))
}

// dropTombstones is a broken pruner's store: its tombstone puts never
// reach the table (the bug "prune without keeping the key").
func dropTombstones(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("chaos.dropTombstones",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if p, ok := in.Parameters.(*dynamodb.PutItemInput); ok && dynamo.IsTombstone(p.Item) {
					return middleware.InitializeOutput{Result: &dynamodb.PutItemOutput{}}, middleware.Metadata{}, nil
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

// The suite must notice a prune that loses the key: the pruned intent's key
// holds nothing, and a replay of it starts a new intent.
func TestChaosCatchesPruneWithoutTombstone(t *testing.T) {
	sum := run(t, chaos.Config{Seed: 7700, N: 6, Parallel: 3, Only: []string{"retention/"}, BreakConfig: dropTombstones,
		StopWhen: func(s chaos.Summary) bool { return !s.OK() && s.Outcomes["pruned"] > 0 }})
	if sum.OK() || sum.Outcomes["pruned"] == 0 {
		t.Fatalf("prunes without tombstones went unnoticed: %s, outcomes %v", sum.Line(), sum.Outcomes)
	}
}
