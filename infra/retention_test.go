package infra

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/botharness/outbox/adapters/handlers/pruner"
)

// TestRetention (issue 27): the archive bucket has its own lifecycle, the
// pruner consumes only TTL deletes of ended intents (the filter the local
// host applies), and the window reaches every function that ends intents.
func TestRetention(t *testing.T) {
	must(t, "archive bucket lifecycle", func() {
		prodTmpl.HasResourceProperties(jsii.String("AWS::S3::Bucket"), assertions.Match_ObjectLike(obj(
			"LoggingConfiguration", assertions.Match_ObjectLike(obj("LogFilePrefix", "archive-bucket/")),
			"LifecycleConfiguration", obj("Rules", []any{assertions.Match_ObjectLike(obj(
				"Id", "expire-archive", "Prefix", "intents/", "ExpirationInDays", 400, "Status", "Enabled"))}),
		)))
	})
	fn := prodT.function(t, prodPrefix, "pruner")
	esm := prodT.one(t, "AWS::Lambda::EventSourceMapping", "FunctionName", map[string]any{"Ref": fn.ID})
	// The settings the local host's poller and the bench use (pruner.Mapping*).
	if esm.Props["BatchSize"] != float64(pruner.MappingBatchSize) || esm.Props["MaximumBatchingWindowInSeconds"] != pruner.MappingBatchingWindow.Seconds() {
		t.Errorf("pruner batching %v / %v", esm.Props["BatchSize"], esm.Props["MaximumBatchingWindowInSeconds"])
	}
	filters := list(esm.Props["FilterCriteria"].(map[string]any)["Filters"])
	if len(filters) != 1 || filters[0].(map[string]any)["Pattern"] != pruner.StreamFilterPattern {
		t.Errorf("pruner filter %v, want %s", filters, pruner.StreamFilterPattern)
	}
	for _, name := range []string{"retrier", "admin", "webhook", "pruner"} {
		env := prodT.function(t, prodPrefix, name).Props["Environment"].(map[string]any)["Variables"].(map[string]any)
		if env[EnvIntentRetention] != "168h0m0s" {
			t.Errorf("%s %s = %v, want the 7-day default", name, EnvIntentRetention, env[EnvIntentRetention])
		}
	}
	env := fn.Props["Environment"].(map[string]any)["Variables"].(map[string]any)
	if env[EnvTombstoneRetention] != "2160h0m0s" || env[EnvArchiveBucket] == nil {
		t.Errorf("pruner env %v", env)
	}
}
