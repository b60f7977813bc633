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
