// Package infra is the outbox CDK stack: one DynamoDB table, the retry, inbox
// and failure queues, the backup bucket, one Lambda per function in
// DefaultFunctions, the HTTP API with its Lambda authorizer, and the alarms.
//
// The CDK app that synthesizes it lives in infra/app (a Go package cannot be
// both importable and `main`), run by `cdk` through infra/cdk.json or directly
// with `go run ./app` from infra/. See infra/README.md.
package infra

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core/botlimit"
)

// OutboxStackProps configures NewOutboxStack. The zero value (plus AssetDir)
// is a production-shaped stack: retained data, deletion protection on.
type OutboxStackProps struct {
	awscdk.StackProps

	// Dev relaxes what protects data in production: the table, buckets and
	// log groups are destroyed with the stack and the table has no deletion
	// protection. Use it for personal stacks and LocalStack.
	Dev bool

	// NamePrefix prefixes every physical name the stack sets (table, queues,
	// functions, alarms, API). Default "outbox". Two stacks in one account
	// and region need different prefixes.
	NamePrefix string

	// AssetDir holds one directory per function, each with the linux/arm64
	// `bootstrap` executable built by `make build` (dist/<name>/bootstrap).
	// Required.
	AssetDir string

	// Functions is the list of Lambda functions to deploy. Nil means
	// DefaultFunctions().
	Functions []FunctionSpec

	// Architecture of the functions: "arm64" (default, what `make build`
	// produces) or "x86_64" (LocalStack on an x86 host without arm64
	// emulation; build with GOARCH=amd64).
	Architecture string

	// NoHTTPAPI leaves out the HTTP API, its authorizer and routes. For
	// LocalStack's free tier, which has no API Gateway v2; the local host in
	// localstack/ plays the API there.
	NoHTTPAPI bool

	// LogRetention for every function's log group and the API access log
	// group. Default one month (one week when Dev).
	LogRetention awslogs.RetentionDays

	// LogLevel is passed to every function as LOG_LEVEL. Default "info".
	LogLevel string

	// ProviderConfig is passed verbatim as OUTBOX_PROVIDER_CONFIG to the
	// functions that talk to providers (for example the sandbox provider's
	// base URL). It must be valid JSON. Default "{}".
	//
	// It holds no secret: every secret-bearing field (bot tokens, signing
	// secrets, bearer tokens; see wire.SecretFields) must be a Secrets
	// Manager reference, "secretsmanager:<name or complete ARN>[#<json key>]",
	// read by the functions at cold start. A literal or "env:" value panics,
	// naming the field. Each function may read only the referenced secrets
	// of the uses it holds: sending ones (retrier, sweeper, admin) or
	// verifying ones (webhook); intake and the dispatcher none.
	ProviderConfig string

	// AttemptPolicy is passed as OUTBOX_ATTEMPT_POLICY (wire.EnvAttemptPolicy)
	// to every function that attempts, reconciles or sweeps (those given
	// the provider configuration): a JSON document whose members replace
	// core.DefaultAttemptPolicy's, e.g. {"lease":"90s","backoff":{"maxAttempts":5}}.
	// It is checked here as the functions will check it
	// (wire.CheckAttemptPolicy: its bounds, and a lease that outlives every
	// configured provider's timeoutMs). Empty: the
	// defaults (the variable is not set). The lease must outlive the
	// longest attempt (see core.AttemptPolicy.Lease).
	AttemptPolicy string

	// BotRate, BotMaxOpen and BotLimits are every bot's limits and the
	// per-bot overrides (issue 24), passed to intake as OUTBOX_BOT_RATE
	// ("50/1s"), OUTBOX_BOT_MAX_OPEN and OUTBOX_BOT_LIMITS (JSON, e.g.
	// {"bot-a":{"rate":"10/1s","maxOpen":100}}). Empty: no limit (the
	// variable is not set).
	BotRate    string
	BotMaxOpen float64
	BotLimits  string

	// ProviderSecretNames are the Secrets Manager secret names holding the
	// providers' webhook signing secrets. Only functions with NeedProviderSecrets
	// (the webhook) may read them, and only them. They are passed comma
	// separated as OUTBOX_PROVIDER_SECRETS. Default ["<prefix>/provider-secrets"].
	// The stack does not create the secrets (their values must never be in
	// a template).
	ProviderSecretNames []string

	// RouteThrottles are the HTTP API throttles per route group
	// (RouteGroupBots, RouteGroupOperators, RouteGroupWebhooks,
	// RouteGroupPublic), set as stage route settings on every route of the
	// group, so junk on the unauthenticated webhook route is answered 429
	// from the webhook route's own bucket and never uses up the bots' or
	// operators'. A group left out gets its DefaultRouteThrottles entry.
	RouteThrottles map[string]Throttle

	// AlarmTopicArn is an existing SNS topic for alarm actions. Empty means
	// the stack creates one (output AlarmTopicArn; subscribe to it).
	AlarmTopicArn string

	// APIRateLimit and APIBurstLimit are the HTTP API default-stage throttles.
	// Defaults 50 requests/s and 100.
	APIRateLimit  float64
	APIBurstLimit float64

	// DispatcherRetryAttempts and DispatcherMaxRecordAgeSeconds bound the
	// stream event source mapping (defaults 5 and 3600). A record that
	// exhausts them goes to the dispatch-failures queue; the intent itself
	// stays pending in the table, where the sweeper finds it.
	DispatcherRetryAttempts       float64
	DispatcherMaxRecordAgeSeconds float64

	// RetryMaxReceiveCount is the retry and inbox queues' redrive threshold
	// before a message goes to its DLQ. Default 5.
	RetryMaxReceiveCount float64

	// PayloadRetentionDays is how long a claim-checked payload object (an
	// intent payload over 4 KiB, kept in the payload bucket under its
	// content hash) lives after its last intake put: the intent's
	// retention for delivery. It must cover the longest an intent can still
	// be attempted, including a human decision; an attempt after it finds
	// the object gone, sends nothing and goes to a human. Default 90.
	PayloadRetentionDays float64

	// Event source mappings (issue 13). The dispatcher only fans stream
	// records out to the work (retry) queue, so its batches are short:
	// DispatcherBatchSize (default 100), DispatcherParallelizationFactor
	// (concurrent batches per stream shard, 1..10, default 2),
	// DispatcherMaxBatchingWindowSeconds (default 0: no added latency).
	// The retrier makes every attempt; RetrierMaxConcurrency (2..1000,
	// default 200) is how many instances may work the queue at once, so a
	// provider that hangs to its timeout holds only its own intents' workers;
	// RetrierBatchSize (default 10, messages handled concurrently).
	DispatcherBatchSize                float64
	DispatcherParallelizationFactor    float64
	DispatcherMaxBatchingWindowSeconds float64
	RetrierBatchSize                   float64
	RetrierMaxConcurrency              float64

	// Retention (issue 27): IntentRetention, TombstoneRetention, ArchiveOff,
	// ArchiveRetentionDays; see retention.go.
	RetentionProps
}

// resolved is OutboxStackProps with defaults applied and checked.
type resolved struct {
	OutboxStackProps
	functions []FunctionSpec
	// secretRefs are the Secrets Manager secrets ProviderConfig references,
	// by use (wire.SecretForSending, wire.SecretForVerifying), sorted.
	secretRefs map[wire.SecretUse][]string
	// awsGrants and eventTopics are what the configured AWS-service
	// providers need (plugin.AWSResources: SES's ses:SendEmail, its event
	// topics).
	awsGrants   []plugin.AWSGrant
	eventTopics []plugin.AWSEventTopic
}

// Validate checks the props as NewOutboxStack will, without building
// anything: the CDK app calls it first so that a bad setting (a literal
// secret in the provider configuration, say) ends the synth with one line
// naming the field instead of a panic.
func (p *OutboxStackProps) Validate() error {
	_, err := p.check()
	return err
}

// resolve is check for NewOutboxStack, which panics on invalid props (the
// CDK's convention for a construct given bad props).
func (p *OutboxStackProps) resolve() *resolved {
	r, err := p.check()
	if err != nil {
		panic("infra: " + err.Error())
	}
	return r
}

// check applies the defaults and checks the props; errors name the prop.
func (p *OutboxStackProps) check() (*resolved, error) {
	r := &resolved{OutboxStackProps: *p}
	if r.NamePrefix == "" {
		r.NamePrefix = "outbox"
	}
	if r.AssetDir == "" {
		return nil, errors.New("OutboxStackProps.AssetDir is required (the directory holding <function>/bootstrap; run `make build`)")
	}
	if abs, err := filepath.Abs(r.AssetDir); err == nil {
		r.AssetDir = abs
	}
	r.functions = r.Functions
	if r.functions == nil {
		r.functions = DefaultFunctions()
	}
	seen := map[string]bool{}
	for _, f := range r.functions {
		if err := f.validate(); err != nil {
			return nil, err
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("function %q listed twice", f.Name)
		}
		seen[f.Name] = true
	}
	switch r.Architecture {
	case "":
		r.Architecture = "arm64"
	case "arm64", "x86_64":
	default:
		return nil, fmt.Errorf("OutboxStackProps.Architecture %q: want arm64 or x86_64", r.Architecture)
	}
	if r.LogRetention == "" {
		r.LogRetention = awslogs.RetentionDays_ONE_MONTH
		if r.Dev {
			r.LogRetention = awslogs.RetentionDays_ONE_WEEK
		}
	}
	if r.PayloadRetentionDays == 0 {
		r.PayloadRetentionDays = 90
	}
	if r.PayloadRetentionDays < 1 {
		return nil, fmt.Errorf("OutboxStackProps.PayloadRetentionDays %v: want at least 1", r.PayloadRetentionDays)
	}
	if r.LogLevel == "" {
		r.LogLevel = "info"
	}
	if strings.TrimSpace(r.ProviderConfig) == "" {
		r.ProviderConfig = "{}"
	}
	if _, err := botlimit.ParseBotRate(r.BotRate); err != nil {
		return nil, fmt.Errorf("OutboxStackProps.BotRate: %w", err)
	}
	if r.BotMaxOpen < 0 || r.BotMaxOpen != float64(int(r.BotMaxOpen)) {
		return nil, errors.New("OutboxStackProps.BotMaxOpen must be a whole number >= 0")
	}
	if strings.TrimSpace(r.BotLimits) != "" && !json.Valid([]byte(r.BotLimits)) {
		return nil, errors.New("OutboxStackProps.BotLimits is not valid JSON")
	}
	var err error
	if r.secretRefs, err = providerSecretRefs(r.ProviderConfig); err != nil {
		return nil, fmt.Errorf("OutboxStackProps.ProviderConfig: %w", err)
	}
	if r.awsGrants, r.eventTopics, err = wire.AWSResources(r.ProviderConfig); err != nil {
		return nil, fmt.Errorf("OutboxStackProps.ProviderConfig: %w", err)
	}
	// The attempt policy against the providers it times (the default
	// policy too: a provider's timeoutMs may outlast the default lease).
	if err := wire.CheckAttemptPolicy(r.AttemptPolicy, r.ProviderConfig); err != nil {
		return nil, fmt.Errorf("OutboxStackProps.AttemptPolicy: %w", err)
	}
	if r.RouteThrottles, err = routeThrottles(r.RouteThrottles); err != nil {
		return nil, err
	}
	if len(r.ProviderSecretNames) == 0 {
		r.ProviderSecretNames = []string{r.NamePrefix + "/provider-secrets"}
	}
	// Numeric settings left unset (0) take their defaults.
	for _, d := range []struct {
		v   *float64
		def float64
	}{
		{&r.APIRateLimit, 50}, {&r.APIBurstLimit, 100},
		{&r.DispatcherRetryAttempts, 5}, {&r.DispatcherMaxRecordAgeSeconds, 3600}, {&r.RetryMaxReceiveCount, 5},
		{&r.DispatcherBatchSize, 100}, {&r.DispatcherParallelizationFactor, 2},
		{&r.RetrierBatchSize, 10}, {&r.RetrierMaxConcurrency, 200},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if r.DispatcherParallelizationFactor < 1 || r.DispatcherParallelizationFactor > 10 {
		return nil, errors.New("OutboxStackProps.DispatcherParallelizationFactor must be 1..10")
	}
	if r.RetrierMaxConcurrency < 2 || r.RetrierMaxConcurrency > 1000 {
		return nil, errors.New("OutboxStackProps.RetrierMaxConcurrency must be 2..1000")
	}
	if err := r.resolveRetention(); err != nil {
		return nil, err
	}
	return r, nil
}

// name is a physical name: "<prefix>-<suffix>".
func (r *resolved) name(suffix string) *string {
	s := r.NamePrefix + "-" + suffix
	return &s
}

// ValidateProviderConfig checks a provider configuration (the stack's
// ProviderConfig, the app's providerConfig context) as the stack will: valid
// JSON, and every secret-bearing field a Secrets Manager reference. The
// error names the field, never its value.
func ValidateProviderConfig(cfg string) error {
	if strings.TrimSpace(cfg) == "" {
		return nil
	}
	_, err := providerSecretRefs(cfg)
	return err
}

// secretNameRE is a Secrets Manager secret name (the characters AWS allows)
// and completeArnRE a secret's complete ARN (with its random suffix).
var (
	secretNameRE  = regexp.MustCompile(`^[A-Za-z0-9/_+=.@-]{1,512}$`)
	completeArnRE = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$`)
)

// providerSecretRefs checks that every secret-bearing field of the provider
// configuration is a Secrets Manager reference and returns the referenced
// secrets by use. It panics naming the field (never the value) otherwise:
// a secret value must never reach the template or an environment.
func providerSecretRefs(cfg string) (map[wire.SecretUse][]string, error) {
	if !json.Valid([]byte(cfg)) {
		return nil, errors.New("not valid JSON")
	}
	fields, err := wire.SecretFields(cfg)
	if err != nil {
		return nil, err
	}
	seen := map[wire.SecretUse]map[string]bool{}
	out := map[wire.SecretUse][]string{}
	for _, f := range fields {
		name, _, ok := wire.SecretsManagerRef(f.Value)
		if !ok {
			return nil, fmt.Errorf("%s holds a secret value (or an env: reference); "+
				"put the secret in Secrets Manager and give %s<name>[#<json key>] instead", f.Field, wire.SecretsManagerPrefix)
		}
		if strings.HasPrefix(name, "arn:") && !completeArnRE.MatchString(name) || !strings.HasPrefix(name, "arn:") && !secretNameRE.MatchString(name) {
			return nil, fmt.Errorf("%s: %q is neither a secret name nor a complete secret ARN (with its six-character suffix)", f.Field, name)
		}
		if seen[f.Use] == nil {
			seen[f.Use] = map[string]bool{}
		}
		if !seen[f.Use][name] {
			seen[f.Use][name] = true
			out[f.Use] = append(out[f.Use], name)
		}
	}
	for _, names := range out {
		sort.Strings(names)
	}
	return out, nil
}
