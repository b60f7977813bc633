package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/botharness/outbox/adapters/wire"
)

// TestBannerNamesProvidersAndExports: the banner lists every loaded provider
// with its accounts, prints the export lines with the address it was given,
// and ends with its last line (nothing after it but what the user types).
func TestBannerNamesProvidersAndExports(t *testing.T) {
	t.Parallel()
	cfg, err := wire.WithSandbox(`{"slack":{"accounts":{"T1":{"token":"x"},"T2":{"token":"y"}}}}`, "http://127.0.0.1:24100", 3000)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := wire.DescribeProviders(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := banner(bannerInfo{API: "http://127.0.0.1:24000", Sandbox: "http://127.0.0.1:24100", BotToken: "bt", OperatorToken: "ot",
		OrchestratorToken: "rt", Providers: ps, Level: slog.LevelWarn})
	for _, want := range []string{
		"providers  sandbox   any account at http://127.0.0.1:24100",
		"slack     accounts T1, T2",
		"export OUTBOX_API_URL=http://127.0.0.1:24000\n",
		"export OUTBOX_BOT_TOKEN=bt\n",
		"export OUTBOX_OPERATOR_TOKEN=ot\n",
		"export OUTBOX_SANDBOX_API_URL=http://127.0.0.1:24100\n",
		"LOG_LEVEL=info shows every request",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("banner lacks %q:\n%s", want, b)
		}
	}
	if !strings.HasSuffix(b, "Ctrl-C stops everything this started.\n") {
		t.Errorf("banner does not end with its last line:\n%s", b)
	}
}

// Issue 50: outboxctl's table commands work with only the banner's exports.
// Under make run the banner carries the table and the emulators' endpoint
// variables with placeholder credentials; the operator's real credentials
// are never printed; against real AWS no endpoint line appears.
func TestBannerExportsTheEmulatorsForOutboxctl(t *testing.T) {
	const realSecret = "real-secret-key-never-printed"
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAREALKEY")
	t.Setenv("AWS_SECRET_ACCESS_KEY", realSecret)
	t.Setenv("AWS_REGION", "eu-west-1")
	for _, k := range emulatorEndpointVars {
		t.Setenv(k, "")
	}
	if got := emulatorExports(); got != nil {
		t.Errorf("without emulator endpoints: %v, want nothing", got)
	}
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:18000")
	t.Setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:19324")
	b := banner(bannerInfo{API: "http://127.0.0.1:24000", Sandbox: "http://127.0.0.1:24100", Table: "tbl",
		AWSExports: emulatorExports(), Level: slog.LevelWarn})
	for _, want := range []string{
		"export OUTBOX_TABLE=tbl\n",
		"export AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:18000\n",
		"export AWS_ENDPOINT_URL_SQS=http://127.0.0.1:19324\n",
		"export AWS_REGION=eu-west-1\n",
		"export AWS_ACCESS_KEY_ID=local\n",
		"export AWS_SECRET_ACCESS_KEY=local\n",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("banner lacks %q:\n%s", want, b)
		}
	}
	for _, bad := range []string{realSecret, "AKIAREALKEY", "AWS_ENDPOINT_URL_S3"} {
		if strings.Contains(b, bad) {
			t.Errorf("banner holds %q:\n%s", bad, b)
		}
	}
}
