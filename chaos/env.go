package chaos

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/dispatcher"
	"github.com/botharness/outbox/adapters/sqsqueue"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/localstack/lambdahost"
	"github.com/botharness/outbox/localstack/lambdahost/streamfilter"
)

// Env is what a run shares between schedules: the AWS configuration, a
// fault-free client for the checks, and a few tables ("slots"), each with a
// stream observer. Schedules in one slot run one after another; slots run in
// parallel. A slot per parallel schedule keeps each schedule's sweepers (on
// its own fake clock) to its own intents.
type Env struct {
	cfg     aws.Config
	ddb     *dynamodb.Client
	prefix  string
	queues  sqsqueue.QueueURLs
	bucket  string
	filter  *streamfilter.Pattern
	slots   chan *slot
	all     []*slot
	logOut  io.Writer
	routeMu sync.Mutex
	route   map[string]*World // intent id -> its schedule
}

var debugObserver = os.Getenv("CHAOS_DEBUG_OBSERVER") == "1"

type slot struct {
	table  string
	stream *lambdahost.StreamPoller
}

// webhookSecret signs every sandbox account's webhooks; the workers read it
// from the product's own setting (wire.Config.WebhookSecrets).
var webhookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("outbox-chaos-webhook-signing-key"))

// chaosBackupKey signs and verifies the workers' backup manifests.
const chaosBackupKey = "outbox-chaos-backup-signing-key"

// NewEnv creates `parallel` tables with their stream observers.
func NewEnv(ctx context.Context, parallel int) (*Env, error) {
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return nil, err
	}
	// The SDK's standard retryer, as in production, with a short backoff so
	// injected throttling does not slow the suite down.
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 10 * time.Millisecond })
	}
	// Injected faults make the SDK log warnings about bodies it could not drain.
	cfg.Logger = logging.Nop{}
	var b [4]byte
	_, _ = rand.Read(b[:])
	e := &Env{
		cfg:    cfg,
		prefix: "chaos_" + hex.EncodeToString(b[:]),
		slots:  make(chan *slot, parallel),
		route:  map[string]*World{},
		logOut: io.Discard,
	}
	clients := awsconfig.New(cfg)
	e.ddb = clients.DynamoDB
	if e.filter, err = streamfilter.Compile(dispatcher.StreamFilterPattern); err != nil {
		return nil, err
	}
	if e.queues, err = sqsqueue.EnsureQueues(ctx, clients.SQS, e.prefix, 360, 5); err != nil {
		return nil, err
	}
	e.bucket = strings.ReplaceAll(e.prefix, "_", "-") + "-backups"
	if _, err := clients.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(e.bucket)}); err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", e.bucket, err)
	}
	streams := lambdahost.NewStreamsClient(cfg)
	for i := 0; i < parallel; i++ {
		s := &slot{table: fmt.Sprintf("%s_%d", e.prefix, i)}
		if err := dynamo.EnsureTable(ctx, clients.DynamoDB, s.table); err != nil {
			e.Close()
			return nil, err
		}
		s.stream, err = lambdahost.NewStreamPoller(lambdahost.StreamPollerConfig{
			DynamoDB: clients.DynamoDB, Streams: streams, TableName: s.table,
			BatchSize: 100, StartingPosition: lambdahost.StartTrimHorizon, PollInterval: 40 * time.Millisecond,
			MaxRetryAttempts: -1, Handler: e.observe, FunctionName: "chaos-observer",
			Logger: slog.New(slog.DiscardHandler),
		})
		if err == nil {
			err = s.stream.Start(context.WithoutCancel(ctx))
		}
		e.all = append(e.all, s)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("stream observer: %w", err)
		}
		e.slots <- s
	}
	return e, nil
}

// Close stops the observers and deletes the tables.
func (e *Env) Close() {
	for _, s := range e.all {
		if s.stream != nil {
			s.stream.Stop()
		}
		_, _ = e.ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(s.table)})
	}
}

// observe receives every record of every slot's stream and hands it to the
// schedule that owns the intent.
func (e *Env) observe(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	for _, r := range ev.Records {
		if debugObserver {
			fmt.Fprintf(os.Stderr, "observe %s %s keys=%v\n", r.EventName, r.Change.SequenceNumber, r.Change.Keys["pk"].String())
		}
		id := ""
		img := r.Change.NewImage
		if img == nil {
			img = r.Change.OldImage // a delete (the TTL reaper's, prune.go)
		}
		if img != nil {
			if v, ok := img["id"]; ok && v.DataType() == events.DataTypeString {
				id = v.String()
			}
		}
		if id == "" {
			continue
		}
		e.routeMu.Lock()
		w := e.route[id]
		e.routeMu.Unlock()
		if w != nil {
			w.onRecord(r, e.filter.Match(streamfilter.RecordForFilter(r)))
		}
	}
	return events.DynamoDBEventResponse{}, nil
}

func (e *Env) register(w *World, ids ...string) {
	e.routeMu.Lock()
	defer e.routeMu.Unlock()
	for _, id := range ids {
		e.route[id] = w
	}
}

func (e *Env) unregister(ids ...string) {
	e.routeMu.Lock()
	defer e.routeMu.Unlock()
	for _, id := range ids {
		delete(e.route, id)
	}
}

// deleteIntent removes a checked schedule's item so the slot's status index
// stays small.
// deleteIntent simulates losing an intent and returns the version it had
// when it was lost (0 if it did not exist).
func (e *Env) deleteIntent(ctx context.Context, table, id string) int64 {
	out, err := e.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(table),
		Key: map[string]dynamoAV{
			"pk": strAV(dynamo.IntentPK(id)),
			"sk": strAV("INTENT"),
		},
		ReturnValues: ddbtypes.ReturnValueAllOld,
	})
	if err != nil || len(out.Attributes) == 0 {
		return 0
	}
	in, err := dynamo.UnmarshalIntent(out.Attributes)
	if err != nil {
		return 0
	}
	return in.Version
}

// dropCheckpoints clears the sweeper's checkpoints of a slot's table.
func (e *Env) dropCheckpoints(ctx context.Context, table string) error {
	return e.store(table).DropRepairCheckpoints(ctx)
}

// checkpoint reads the sweeper's checkpoint on an intent's repair shard.
func (e *Env) checkpoint(ctx context.Context, table, id string) (string, error) {
	return e.store(table).RepairCheckpoint(ctx, id)
}

// get reads an intent without faults.
func (e *Env) get(ctx context.Context, table, id string) (*core.Intent, error) {
	return e.store(table).Get(ctx, id)
}

// store is a slot table's store, sharded as the workers' (chaosSharding).
func (e *Env) store(table string) *dynamo.Store {
	st := dynamo.New(e.ddb, table)
	st.Shards = chaosSharding
	return st
}
