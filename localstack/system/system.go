// Package system assembles the whole outbox locally: it creates the table and
// queues, seeds dev principals, and runs the real Lambda handlers behind the
// local host (API Gateway, the stream and SQS event source mappings, and the
// sweeper's schedule). `make run` and the integration tests both use it.
package system

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/admin"
	"github.com/botharness/outbox/adapters/handlers/authorizer"
	"github.com/botharness/outbox/adapters/handlers/console"
	"github.com/botharness/outbox/adapters/handlers/dispatcher"
	"github.com/botharness/outbox/adapters/handlers/intake"
	"github.com/botharness/outbox/adapters/handlers/notifier"
	"github.com/botharness/outbox/adapters/handlers/pruner"
	"github.com/botharness/outbox/adapters/handlers/retrier"
	"github.com/botharness/outbox/adapters/handlers/sweeper"
	"github.com/botharness/outbox/adapters/mcpserver"
	"github.com/botharness/outbox/adapters/routes"
	"github.com/botharness/outbox/adapters/sqsqueue"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
	"github.com/botharness/outbox/localstack/lambdahost"
)

// Options configures a local stack: the app's one configuration, wire.Config,
// embedded (o.Table, o.Lease, o.ProviderConfig, ... are wire's own fields),
// and what only a local host has: the pollers, the sweeper's schedule, the
// TTL reaper, dev tokens and grants.
//
// Start fills what is unset with the local defaults (withDefaults): table
// and queue prefix "outbox"; buckets "outbox-backups", "outbox-payloads"
// and "outbox-archive" (created if missing); lease 60 s, sweep grace 30 s;
// poll interval 100 ms; the backup key from OUTBOX_BACKUP_KEY, else a
// random key for this process (a snapshot restores only under the key that
// signed it); slog.Default. Other zero wire fields keep wire's meaning
// (RequestCacheTTL 0: no cache).
//
// Buckets follow the local convention, not wire's (where "" turns a bucket's
// use off): "" in BackupBucket, PayloadBucket or ArchiveBucket is the
// default bucket and "-" turns it off ("-" PayloadBucket keeps every payload
// inline, "-" ArchiveBucket keeps tombstones only). RetryQueueURL and
// InboxQueueURL are always the queues Start creates under QueuePrefix.
// OperatorWebhookURL (with OperatorWebhookSecret) also starts the notifier's
// stream poller.
type Options struct {
	wire.Config

	QueuePrefix string // default "outbox"
	// PollInterval for the stream and queue pollers (default 100ms).
	PollInterval time.Duration
	// SweepInterval runs the sweeper on a schedule; 0 disables the ticker.
	SweepInterval time.Duration
	// WorkerConcurrency is the retrier mapping's receive loops (default 8).
	WorkerConcurrency int
	// RetrierMaxConcurrency is the retrier mapping's maximum concurrency
	// (the CDK's RetrierMaxConcurrency, 200 in AWS): the invocations in
	// flight across the receive loops. 0 keeps one invocation per loop (a
	// loop waits for its batch), the conservative default for tests on a
	// shared machine; a value above WorkerConcurrency lets a batch that
	// waits on a slow provider hold an invocation, not a receive loop, as
	// Lambda's pollers scale with the backlog.
	RetrierMaxConcurrency int
	// DisableStream / DisableQueue leave a mapping off (tests drive it by hand).
	DisableStream bool
	DisableQueue  bool
	// QueueConcurrency is how many retrier batches run at once (default 2;
	// in AWS the SQS event source scales with the queue).
	QueueConcurrency int
	// Tokens maps dev bearer tokens to principals, seeded at start.
	Tokens map[string]core.Principal
	// Grants are dev service grants created at start if their id does not
	// exist yet (an existing grant is never changed).
	Grants []core.Grant
	// DisableNotifier leaves the notifier's stream poller off even with a
	// webhook URL (tests deliver its records by hand).
	DisableNotifier bool
	// TTLReaperInterval runs the local TTL reaper on that cadence (DynamoDB
	// Local's own TTL deletes, but not dependably; the reaper is prompt and
	// follows an injected clock; see lambdahost.TTLReaper); 0
	// leaves it off.
	TTLReaperInterval time.Duration
	// DisablePruner leaves the pruner's stream poller off: for hosts in
	// whose life nothing expires (tests and bench phases with the default
	// 7-day window), one stream reader less.
	DisablePruner bool
	// PruneBatchingWindow is the pruner poller's batching window (0: none),
	// as the deployed mapping's: it gathers the TTL deletes into few
	// batches (archive objects).
	PruneBatchingWindow time.Duration
	// APIURL is the base URL the MCP endpoint's tools call (the gateway's
	// own address, e.g. http://127.0.0.1:4000); Stack.SetAPIURL sets it
	// once a test server's address is known.
	APIURL string
}

// Stack is a running local system.
type Stack struct {
	App     *wire.App
	Queues  sqsqueue.QueueURLs
	Gateway *lambdahost.Gateway
	Stream  *lambdahost.StreamPoller
	SQS     *lambdahost.SQSPoller
	Ticker  *lambdahost.Ticker

	Intake     *intake.Handler
	Admin      *admin.Handler
	Authorizer *authorizer.Handler
	Dispatcher *dispatcher.Handler
	Retrier    *retrier.Handler
	Sweeper    *sweeper.Handler
	// Notifier and its stream poller run when operator events are on.
	Notifier     *notifier.Handler
	NotifyStream *lambdahost.StreamPoller
	// Pruner and its stream poller turn TTL deletes into tombstones and
	// archived records; Reaper plays DynamoDB's TTL service.
	Pruner      *pruner.Handler
	PruneStream *lambdahost.StreamPoller
	Reaper      *lambdahost.TTLReaper

	apiURL atomic.Pointer[string]
	cancel context.CancelFunc
}

// LocalSNSRoute (make run and the tests only, not in AWS) feeds a provider
// event to the webhook function's SNS handler, as the SNS subscription does
// in AWS. The body is a Lambda SNS event ({"Records": [...]}), an SNS
// notification ({"Type": "Notification", "Message": "..."}) or the bare
// message (e.g. an SES event): answered 200 {"records": n}, or 500.
const LocalSNSRoute = "POST /_local/sns/webhook"

func snsFeed(h func(context.Context, events.SNSEvent) error) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		body := []byte(req.Body)
		if req.IsBase64Encoded {
			b, err := base64.StdEncoding.DecodeString(req.Body)
			if err != nil {
				return events.APIGatewayV2HTTPResponse{StatusCode: 400, Body: `{"error":"body is not base64"}`}, nil
			}
			body = b
		}
		var ev events.SNSEvent
		var note struct{ Type, Message, MessageId, TopicArn string }
		switch {
		case json.Unmarshal(body, &ev) == nil && len(ev.Records) > 0:
		case json.Unmarshal(body, &note) == nil && note.Type == "Notification" && note.Message != "":
			ev.Records = []events.SNSEventRecord{{EventSource: "aws:sns", SNS: events.SNSEntity{Type: note.Type, MessageID: note.MessageId, TopicArn: note.TopicArn, Message: note.Message}}}
		case json.Valid(body):
			ev.Records = []events.SNSEventRecord{{EventSource: "aws:sns", SNS: events.SNSEntity{Type: "Notification", MessageID: "local", TopicArn: "arn:aws:sns:local:000000000000:local", Message: string(body)}}}
		default:
			return events.APIGatewayV2HTTPResponse{StatusCode: 400, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"error":"the body is not JSON"}`}, nil
		}
		if err := h(ctx, ev); err != nil {
			return events.APIGatewayV2HTTPResponse{StatusCode: 500, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"error":"the event could not be applied; feed it again"}`}, nil
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: fmt.Sprintf(`{"records":%d}`, len(ev.Records))}, nil
	}
}

// SetAPIURL sets the base URL of the API the MCP endpoint's tools call.
func (s *Stack) SetAPIURL(u string) { s.apiURL.Store(&u) }

// APIURL is the base URL the MCP endpoint's tools call.
func (s *Stack) APIURL() string {
	if p := s.apiURL.Load(); p != nil {
		return *p
	}
	return ""
}

// withDefaults fills what a local stack leaves unset (see Options); it
// leaves "-" buckets as they are, so it can run twice.
func (o Options) withDefaults() Options {
	if o.Table == "" {
		o.Table = "outbox"
	}
	if o.QueuePrefix == "" {
		o.QueuePrefix = "outbox"
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 100 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.BackupBucket == "" {
		o.BackupBucket = "outbox-backups"
	}
	if o.PayloadBucket == "" {
		o.PayloadBucket = "outbox-payloads"
	}
	if o.ArchiveBucket == "" {
		o.ArchiveBucket = "outbox-archive"
	}
	if o.BackupKey == "" {
		o.BackupKey = os.Getenv(wire.EnvBackupKey)
	}
	if o.BackupKey == "" {
		o.BackupKey = processBackupKey()
	}
	return o
}

// bucketName is a bucket option's name ("-": none).
func bucketName(b string) string {
	if b == "-" {
		return ""
	}
	return b
}

// wireConfig is the one configuration the app is built from: the options'
// own (defaults filled), on the queues Start created, with "-" buckets off
// (wire's convention).
func (o Options) wireConfig(queues sqsqueue.QueueURLs) wire.Config {
	c := o.Config
	c.RetryQueueURL, c.InboxQueueURL = queues.Retry, queues.Inbox
	for _, b := range []*string{&c.BackupBucket, &c.PayloadBucket, &c.ArchiveBucket} {
		*b = bucketName(*b)
	}
	return c
}

// Start creates resources and starts every component.
func Start(ctx context.Context, clients awsconfig.Clients, o Options) (*Stack, error) {
	o = o.withDefaults()
	if err := dynamo.EnsureTable(ctx, clients.DynamoDB, o.Table); err != nil {
		return nil, err
	}
	cfg := o.wireConfig(sqsqueue.QueueURLs{})
	for _, b := range []string{cfg.BackupBucket, cfg.PayloadBucket, cfg.ArchiveBucket} {
		if b == "" {
			continue
		}
		if _, err := clients.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil && !bucketExists(err) {
			return nil, fmt.Errorf("create bucket %s: %w", b, err)
		}
	}
	queues, err := sqsqueue.EnsureQueues(ctx, clients.SQS, o.QueuePrefix, 360, 5)
	if err != nil {
		return nil, err
	}
	s, err := Assemble(clients, o, queues)
	if err != nil {
		return nil, err
	}
	app := s.App
	for tok, p := range o.Tokens {
		if err := auth.SeedToken(ctx, app.Tokens, tok, p, time.Now()); err != nil {
			return nil, fmt.Errorf("seed %s token: %w", p.Kind, err)
		}
	}
	if err := app.SeedGrants(ctx, o.Grants); err != nil {
		return nil, err
	}
	return s.start(ctx, clients, o)
}

// Assemble builds the app from the options and routes its handlers behind
// the local gateway, as the functions are deployed, on resources that exist
// (queues: their URLs). It creates, seeds and starts nothing: Start does,
// and the chaos harness runs the handlers itself.
func Assemble(clients awsconfig.Clients, o Options, queues sqsqueue.QueueURLs) (*Stack, error) {
	o = o.withDefaults()
	app, err := wire.New(clients, o.wireConfig(queues))
	if err != nil {
		return nil, err
	}
	s := &Stack{
		App:        app,
		Queues:     queues,
		Intake:     app.IntakeHandler(),
		Admin:      app.AdminHandler(),
		Authorizer: app.AuthorizerHandler(),
		Dispatcher: app.DispatcherHandler(),
		Retrier:    app.RetrierHandler(),
		Sweeper:    app.SweeperHandler(),
		Notifier:   app.NotifierHandler(),
		Pruner:     app.PrunerHandler(),
	}
	s.Gateway = lambdahost.NewGateway(lambdahost.GatewayOptions{Logger: app.Log, Health: func() error {
		_, err := app.Store.Get(context.Background(), "healthz")
		if err != nil && !isNotFound(err) {
			return err
		}
		return nil
	}})
	auth := lambdahost.RouteOptions{Authorizer: s.Authorizer.Handle, AuthorizerFunctionName: "authorizer"}
	for _, rk := range routes.Intake {
		a := auth
		a.FunctionName = "intake"
		s.Gateway.Route(rk, s.Intake.Handle, a)
	}
	s.Gateway.Route(routes.OpenAPI, s.Intake.Handle, lambdahost.RouteOptions{FunctionName: "intake"})
	for _, rk := range routes.Admin {
		a := auth
		a.FunctionName = "admin"
		s.Gateway.Route(rk, s.Admin.Handle, a)
	}
	for _, rk := range routes.Console {
		// The console's static files: no authorizer (the page holds no data;
		// its API calls carry the operator's token). Served by the admin function.
		s.Gateway.Route(rk, lambdahost.HTTPHandler(console.Wrap(s.Admin.Handle)), lambdahost.RouteOptions{FunctionName: "admin"})
	}
	if app.Webhook != nil {
		for _, rk := range routes.Webhooks {
			s.Gateway.Route(rk, app.Webhook, lambdahost.RouteOptions{FunctionName: "webhook"})
		}
		// In AWS the webhook function is also subscribed to SNS topics
		// (SES event publishing); locally this route stands in for the
		// subscription and feeds an event to the same handler.
		s.Gateway.Route(LocalSNSRoute, snsFeed(app.WebhookSNS), lambdahost.RouteOptions{FunctionName: "webhook"})
	}
	// The agents' MCP endpoint: its own function behind the same authorizer,
	// calling the API above over HTTP with the caller's token.
	s.SetAPIURL(o.APIURL)
	mcpHandler := mcpserver.LambdaHandler(mcpserver.HTTPConfig{APIURL: s.APIURL, Log: app.Log})
	for _, rk := range routes.MCP {
		a := auth
		a.FunctionName = "mcp"
		s.Gateway.Route(rk, mcpHandler, a)
	}
	return s, nil
}

// start runs the pollers, the reaper and the sweeper's schedule.
func (s *Stack) start(ctx context.Context, clients awsconfig.Clients, o Options) (*Stack, error) {
	app := s.App
	queues := s.Queues
	var err error
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	if o.TTLReaperInterval > 0 {
		s.Reaper, err = lambdahost.NewTTLReaper(lambdahost.TTLReaperConfig{
			DynamoDB: clients.DynamoDB, TableName: o.Table, Attribute: dynamo.TTLAttribute, Interval: o.TTLReaperInterval, Logger: app.Log,
		})
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.Reaper.Start(runCtx)
	}
	var ttlDeletes func(events.DynamoDBEventRecord) bool
	if s.Reaper != nil {
		ttlDeletes = s.Reaper.IsTTLDelete
	}
	if !o.DisableQueue {
		// As deployed: the stream fans out to the work queue. With the queue
		// mapping off (tests that keep retries out), it attempts directly.
		s.Dispatcher.Fanout = app.Queue
	}
	// stream starts a stream mapping's poller on the table (trim horizon,
	// the stack's poll interval and logger); c holds what differs.
	stream := func(what string, c lambdahost.StreamPollerConfig) (*lambdahost.StreamPoller, error) {
		c.DynamoDB, c.Streams, c.TableName = clients.DynamoDB, clients.Streams, o.Table
		c.StartingPosition, c.PollInterval, c.Logger = lambdahost.StartTrimHorizon, o.PollInterval, app.Log
		p, err := lambdahost.NewStreamPoller(c)
		if err == nil {
			err = p.Start(runCtx)
		}
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return p, nil
	}
	if !o.DisableStream {
		if s.Stream, err = stream("stream poller", lambdahost.StreamPollerConfig{
			FilterPattern: dispatcher.StreamFilterPattern, BatchSize: 10, MaxRetryAttempts: 5,
			Handler: s.Dispatcher.Handle, FunctionName: "dispatcher",
		}); err != nil {
			return nil, err
		}
	}
	if !o.DisableStream && !o.DisableNotifier && o.OperatorWebhookURL != "" {
		if s.NotifyStream, err = stream("notifier stream poller", lambdahost.StreamPollerConfig{
			FilterPattern: notifier.StreamFilterPattern, BatchSize: 10, MaxRetryAttempts: 20,
			Handler: s.Notifier.Handle, FunctionName: "notifier",
		}); err != nil {
			return nil, err
		}
	}
	// DynamoDB Local deletes expired items itself (though not dependably,
	// docs/decisions.md "Retention"), reaper or not: the pruner runs
	// unless a host that expires nothing in its life turns it off.
	if !o.DisableStream && !o.DisablePruner {
		if s.PruneStream, err = stream("pruner stream poller", lambdahost.StreamPollerConfig{
			FilterPattern: pruner.StreamFilterPattern, BatchSize: pruner.MappingBatchSize, MaxRetryAttempts: 20,
			BatchingWindow: o.PruneBatchingWindow, TTLDeletes: ttlDeletes,
			Handler: s.Pruner.Handle, FunctionName: "pruner", FunctionTimeout: 60 * time.Second,
		}); err != nil {
			return nil, err
		}
	}
	if !o.DisableQueue {
		s.SQS, err = lambdahost.NewSQSPoller(lambdahost.SQSPollerConfig{
			Client: clients.SQS, QueueURL: queues.Retry, BatchSize: 10, WaitTime: time.Second,
			PollInterval: o.PollInterval, VisibilityTimeout: 60 * time.Second, Concurrency: core.OrDefault(max(o.QueueConcurrency, o.WorkerConcurrency), 8),
			MaxConcurrency: o.RetrierMaxConcurrency,
			Handler:        s.Retrier.Handle, FunctionName: "retrier", Logger: app.Log,
		})
		if err == nil {
			err = s.SQS.Start(runCtx)
		}
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("sqs poller: %w", err)
		}
	}
	if o.SweepInterval > 0 {
		s.Ticker, err = lambdahost.NewTicker(lambdahost.TickerConfig{Interval: o.SweepInterval, Handler: s.Sweeper.Handle, FunctionName: "sweeper", Logger: app.Log})
		if err == nil {
			err = s.Ticker.Start(runCtx)
		}
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("sweeper ticker: %w", err)
		}
	}
	return s, nil
}

// Stop stops every component and waits for them.
func (s *Stack) Stop() {
	if s.Ticker != nil {
		s.Ticker.Stop()
	}
	if s.SQS != nil {
		s.SQS.Stop()
	}
	if s.Stream != nil {
		s.Stream.Stop()
	}
	if s.NotifyStream != nil {
		s.NotifyStream.Stop()
	}
	if s.PruneStream != nil {
		s.PruneStream.Stop()
	}
	if s.Reaper != nil {
		s.Reaper.Stop()
	}
	if s.cancel != nil {
		s.cancel()
	}
}

// processBackupKey is a random backup key shared by every stack of this
// process (tests restore one stack's snapshot into another), never written
// anywhere.
var processBackupKey = sync.OnceValue(func() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
})
