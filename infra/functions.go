package infra

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/botharness/outbox/adapters/handlers/notifier"
	"github.com/botharness/outbox/adapters/handlers/pruner"
	"github.com/botharness/outbox/adapters/routes"
)

// Need is one thing a function is allowed to touch. Each Need maps to the
// exact IAM actions on the exact resources below, and to the environment
// variables the function gets; a function receives nothing it does not list.
type Need uint

const (
	// NeedTableGet: dynamodb:GetItem on the table. Env OUTBOX_TABLE.
	NeedTableGet Need = 1 << iota
	// NeedTableRead: dynamodb:GetItem, BatchGetItem, Query on the table (not
	// its indexes). Env OUTBOX_TABLE.
	NeedTableRead
	// NeedTableWrite: dynamodb:PutItem, UpdateItem, ConditionCheckItem on the
	// table (TransactWriteItems is authorised by these). Env OUTBOX_TABLE.
	NeedTableWrite
	// NeedTableBatchWrite: dynamodb:BatchWriteItem on the table (restore).
	NeedTableBatchWrite
	// NeedIndexQuery: dynamodb:Query on the gsi1 index only. Env OUTBOX_TABLE.
	NeedIndexQuery
	// NeedRetryQueueSend: sqs:SendMessage on the retry queue.
	// Env OUTBOX_RETRY_QUEUE_URL.
	NeedRetryQueueSend
	// NeedInboxQueueSend: sqs:SendMessage on the inbox queue.
	// Env OUTBOX_INBOX_QUEUE_URL.
	NeedInboxQueueSend
	// NeedBackupBucket: s3:GetObject, PutObject on the backup bucket's
	// objects, s3:ListBucket on the bucket. Env OUTBOX_BACKUP_BUCKET.
	NeedBackupBucket
	// NeedProviderConfig: env OUTBOX_PROVIDER_CONFIG, and OUTBOX_ATTEMPT_POLICY
	// when OutboxStackProps.AttemptPolicy is set (no IAM).
	NeedProviderConfig
	// NeedProviderSecrets: secretsmanager:GetSecretValue, DescribeSecret on
	// the webhook-secret documents named by OutboxStackProps.ProviderSecretNames
	// and on the secrets the provider configuration references for verifying
	// webhooks (SecretForVerifying fields) only. Env OUTBOX_PROVIDER_SECRETS
	// (comma separated names); "verify" in OUTBOX_SECRET_USES.
	NeedProviderSecrets
	// NeedBackupProfile: dynamodb:Query on the gsi2 (profile) index.
	NeedBackupProfile
	// NeedOperatorEvents: sns:Publish on the operator-events topic only.
	// Env OUTBOX_OPERATOR_TOPIC_ARN, and OUTBOX_CONSOLE_URL (links in the
	// events) when the stack has the HTTP API.
	NeedOperatorEvents
	// NeedPayloadWrite: s3:PutObject on the payload bucket's payloads/*
	// objects (intake stores large payloads; restore puts them back).
	// Env OUTBOX_PAYLOAD_BUCKET.
	NeedPayloadWrite
	// NeedPayloadRead: s3:GetObject on the payload bucket's payloads/*
	// objects (every function that can make an attempt; backups).
	// Env OUTBOX_PAYLOAD_BUCKET.
	NeedPayloadRead
	// NeedArchiveWrite: s3:GetObject, PutObject on the archive bucket's
	// intents/* objects (the pruner). Env OUTBOX_ARCHIVE_BUCKET,
	// OUTBOX_TOMBSTONE_RETENTION (see retention.go).
	NeedArchiveWrite
	// NeedSendSecrets: secretsmanager:GetSecretValue, DescribeSecret on the
	// secrets the provider configuration references for sending (bot tokens,
	// outbound signing secrets, bearer tokens: SecretForSending fields) only.
	// "send" in OUTBOX_SECRET_USES. For the functions that attempt intents or
	// look up their outcome.
	NeedSendSecrets
	// NeedAPIURL: env OUTBOX_API_URL, this stack's HTTP API endpoint (no
	// IAM): a function that calls the public API like any client (mcp).
	NeedAPIURL
	// NeedBotLimits: env OUTBOX_BOT_RATE, OUTBOX_BOT_MAX_OPEN,
	// OUTBOX_BOT_LIMITS from OutboxStackProps.BotRate, BotMaxOpen and
	// BotLimits, each only when set (no IAM: the counters are table items,
	// written with NeedTableWrite, read with NeedTableGet).
	NeedBotLimits
	// NeedTableBatchGet: dynamodb:BatchGetItem on the table (an attempt's
	// revalidation reads its facts in one BatchGetItem) and nothing else
	// NeedTableRead grants. Env OUTBOX_TABLE.
	NeedTableBatchGet
	// NeedProviderEvents: subscribed to the SNS topics the stack creates for
	// providers that publish events (SES event publishing through a
	// configuration set's event destination); no IAM on the role (the
	// subscription grants sns.amazonaws.com lambda:InvokeFunction from those
	// topics only). The webhook function.
	NeedProviderEvents
)

// Has reports whether n includes all of want.
func (n Need) Has(want Need) bool { return n&want == want }

// Trigger is what invokes a function besides its HTTP routes.
type Trigger int

const (
	// TriggerNone: invoked only through its HTTP routes.
	TriggerNone Trigger = iota
	// TriggerAuthorizer: the HTTP API's Lambda authorizer (simple responses).
	TriggerAuthorizer
	// TriggerStream: the table's stream, filtered by
	// dispatcher.StreamFilterPattern, failures to the dispatch-failures queue.
	TriggerStream
	// TriggerRetryQueue: the retry queue, with ReportBatchItemFailures.
	TriggerRetryQueue
	// TriggerSchedule: an EventBridge rule, rate(1 minute).
	TriggerSchedule
)

// Route is one HTTP API route, e.g. {"POST", "/v1/intents"}.
type Route struct {
	Method string
	Path   string
}

// DefaultRoute is API Gateway's catch-all route ("$default"), as a Route.
var DefaultRoute = Route{Path: routes.Default}

// Key is the route's API Gateway route key: "METHOD /path" or "$default".
func (r Route) Key() string {
	if r == DefaultRoute {
		return routes.Default
	}
	return r.Method + " " + r.Path
}

// routesOf turns route keys ("METHOD /path") from adapters/routes, the list
// the local host serves too, into Routes.
func routesOf(keys ...string) []Route {
	out := make([]Route, 0, len(keys))
	for _, k := range keys {
		if k == routes.Default {
			out = append(out, DefaultRoute)
			continue
		}
		method, path, _ := strings.Cut(k, " ")
		out = append(out, Route{Method: method, Path: path})
	}
	return out
}

// FunctionSpec is one Lambda function. Adding a function is one entry in
// DefaultFunctions plus functions/<name>/main.go.
type FunctionSpec struct {
	// Name is the functions/<name> directory and dist/<name>/bootstrap.
	Name        string
	Description string
	Timeout     time.Duration
	MemoryMB    float64
	Trigger     Trigger
	// Routes served by this function. All use the Lambda authorizer unless
	// Public is set.
	Routes []Route
	// Public routes have no authorizer: the function authenticates callers
	// itself (provider webhook signatures).
	Public bool
	// PublicRoutes are served without the authorizer even though the
	// function's other routes use it (the OpenAPI document).
	PublicRoutes []Route
	// RouteGroup is the throttle group of Routes (RouteGroupBots,
	// RouteGroupOperators, RouteGroupWebhooks); PublicRoutes are always in
	// RouteGroupPublic. Empty: the stage's default throttle only.
	RouteGroup string
	// StreamFilter is the event filter of a TriggerStream function's mapping
	// (default dispatcher.StreamFilterPattern).
	StreamFilter string
	// StreamBatchSize and StreamBatchingWindowSeconds override the stream
	// mapping's DispatcherBatchSize and DispatcherMaxBatchingWindowSeconds
	// (0: those). The pruner batches: one archive object per batch.
	StreamBatchSize             float64
	StreamBatchingWindowSeconds float64
	Needs                       Need
}

const (
	tableRW = NeedTableRead | NeedTableWrite
)

// DefaultFunctions is the outbox's function list.
func DefaultFunctions() []FunctionSpec {
	return []FunctionSpec{
		{
			Name:        "authorizer",
			Description: "HTTP API Lambda authorizer: bearer token -> principal (simple response)",
			Timeout:     5 * time.Second,
			MemoryMB:    256,
			Trigger:     TriggerAuthorizer,
			Needs:       NeedTableGet,
		},
		{
			Name:        "intake",
			Description: "Accepts intents under an idempotency identity (inline first attempt on Prefer: wait); source revisions",
			// Above the longest Prefer: wait (core.DefaultInlineMaxWait, 10 s)
			// plus an attempt, below API Gateway's 30 s; the lease (60 s)
			// outlives it, so a timeout mid-send is a crashed attempt the
			// sweeper takes down the unknown-outcome path.
			Timeout:    20 * time.Second,
			MemoryMB:   256,
			Routes:     routesOf(routes.Intake...),
			RouteGroup: RouteGroupBots,
			// GET /v1/openapi.json: the contract, served without a token.
			PublicRoutes: routesOf(routes.OpenAPI),
			// Provider config: intake checks the intent names a configured
			// provider before accepting it, and sends inline attempts.
			// Inline delivery (issue 26) makes the attempt the dispatcher
			// makes, so it needs exactly the attempt's extra reach: the
			// revalidation's BatchGetItem (TableBatchGet; the gate, barrier
			// and outcome writes are GetItem/PutItem/UpdateItem it already
			// has), the payload read before the send, the secrets of
			// sending (as the retrier; not the webhooks' verifying ones),
			// and the retry queue for the follow-up (retry, reconcile,
			// paced hand-on).
			Needs: NeedTableGet | NeedTableBatchGet | NeedTableWrite | NeedProviderConfig | NeedPayloadWrite |
				NeedPayloadRead | NeedRetryQueueSend | NeedSendSecrets | NeedBotLimits,
		},
		{
			Name:        "dispatcher",
			Description: "Fans pending intents out from the table stream to the work (retry) queue",
			Timeout:     60 * time.Second,
			MemoryMB:    256,
			Trigger:     TriggerStream,
			// It only sends one dispatch message per pending intent (the
			// retrier attempts): no table, payload or provider access. The
			// stream itself is read by the event source mapping's grant.
			Needs: NeedRetryQueueSend,
		},
		{
			Name:        "retrier",
			Description: "Claims and re-attempts intents whose retry is due (SQS retry queue)",
			Timeout:     60 * time.Second,
			MemoryMB:    256,
			Trigger:     TriggerRetryQueue,
			Needs:       tableRW | NeedRetryQueueSend | NeedProviderConfig | NeedSendSecrets | NeedPayloadRead,
		},
		{
			Name:        "sweeper",
			Description: "Repairs expired leases, lost retries and passed deadlines; emits IntentsNeedingHuman",
			// Shorter than the one-minute schedule so runs do not overlap.
			Timeout:  50 * time.Second,
			MemoryMB: 256,
			Trigger:  TriggerSchedule,
			// Operator events: it publishes claims a crash left unpublished.
			// Payload read: it attempts pending intents the stream missed.
			// Profile index: it recounts a bot's open intents when a lost
			// give-back left its limit counter too high (dynamo.OpenRecount).
			Needs: tableRW | NeedIndexQuery | NeedBackupProfile | NeedRetryQueueSend | NeedProviderConfig | NeedSendSecrets | NeedOperatorEvents | NeedPayloadRead,
		},
		{
			Name:        "admin",
			Description: "Operator API: needs-human resolution, grants, backup and restore",
			// Longer than API Gateway's 30 s so a large backup still completes
			// after the HTTP client gave up; the manifest reports progress.
			Timeout:    120 * time.Second,
			MemoryMB:   512,
			Routes:     routesOf(routes.Admin...),
			RouteGroup: RouteGroupOperators,
			// The operators' web console (static files; see adapters/handlers/console).
			PublicRoutes: routesOf(routes.Console...),
			// Send secrets: the "reconcile" decision looks the outcome up at
			// the provider inline (core.Resolver -> Dispatcher.Reconcile).
			Needs: tableRW | NeedIndexQuery | NeedTableBatchWrite | NeedBackupBucket | NeedBackupProfile |
				NeedRetryQueueSend | NeedProviderConfig | NeedSendSecrets | NeedPayloadRead | NeedPayloadWrite |
				// GET /v1/admin/bots/{bot}/limits shows the configured limits.
				NeedBotLimits,
		},
		{
			Name:        "notifier",
			Description: "Operator events: one per needs-human episode and per failed/expired end, published once per id to the SNS topic (table stream)",
			Timeout:     30 * time.Second,
			MemoryMB:    256,
			Trigger:     TriggerStream,
			// Byte-for-byte the pattern the local host applies.
			StreamFilter: notifier.StreamFilterPattern,
			Needs:        tableRW | NeedOperatorEvents,
		},
		{
			Name:        "pruner",
			Description: "Retention: turns TTL deletes of ended intents into tombstones and archived records (table stream)",
			Timeout:     60 * time.Second,
			MemoryMB:    256,
			Trigger:     TriggerStream,
			// Only TTL deletes of terminal intent items invoke it.
			StreamFilter: pruner.StreamFilterPattern,
			// Pruning is not latency-sensitive: fill batches (one archive
			// object each) for up to PrunerBatchingWindowSeconds.
			StreamBatchSize:             PrunerBatchSize,
			StreamBatchingWindowSeconds: PrunerBatchingWindowSeconds,
			Needs:                       tableRW | NeedArchiveWrite,
		},
		{
			Name:        "webhook",
			Description: "Provider webhooks: verify signature, dedupe by event id, bind evidence, forward inbound to the inbox",
			Timeout:     10 * time.Second,
			MemoryMB:    256,
			Routes:      routesOf(routes.Webhooks...),
			RouteGroup:  RouteGroupWebhooks,
			Public:      true,
			Needs:       tableRW | NeedInboxQueueSend | NeedProviderConfig | NeedProviderSecrets | NeedProviderEvents,
		},
		mcpFunction(),
	}
}

var (
	nameRE   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
	methodRE = regexp.MustCompile(`^(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS|ANY)$`)
)

func (f FunctionSpec) validate() error {
	if !nameRE.MatchString(f.Name) {
		return fmt.Errorf("function name %q: want %s", f.Name, nameRE)
	}
	if f.Timeout < time.Second || f.Timeout > 15*time.Minute {
		return fmt.Errorf("function %s: timeout %v out of range", f.Name, f.Timeout)
	}
	if f.Trigger == TriggerAuthorizer && len(f.Routes) > 0 {
		return fmt.Errorf("function %s: the authorizer serves no routes", f.Name)
	}
	for _, r := range append(append([]Route(nil), f.Routes...), f.PublicRoutes...) {
		if r != DefaultRoute && (!methodRE.MatchString(r.Method) || len(r.Path) == 0 || r.Path[0] != '/') {
			return fmt.Errorf("function %s: bad route %s %s", f.Name, r.Method, r.Path)
		}
	}
	if (f.Needs.Has(NeedSendSecrets) || f.Needs.Has(NeedProviderSecrets)) && !f.Needs.Has(NeedProviderConfig) {
		return fmt.Errorf("function %s: provider secrets without the provider configuration", f.Name)
	}
	return nil
}

// pascal turns "dead-letter" into "DeadLetter" for construct ids.
func pascal(s string) string {
	out := make([]byte, 0, len(s))
	up := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' {
			up = true
			continue
		}
		if up && c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		up = false
		out = append(out, c)
	}
	return string(out)
}
