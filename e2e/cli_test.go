package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
)

// buildBinary builds the program in dir (a path from the module root, as
// "cmd/outboxctl") once per test run, into the package's binaries directory,
// and returns its path. Tests that run the same program share the build (a
// link of the AWS SDK is seconds of CPU the suite shares).
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	b, _ := builds.LoadOrStore(dir, &build{})
	bb := b.(*build)
	bb.once.Do(func() {
		bb.path = filepath.Join(binDir, strings.ReplaceAll(dir, "/", "_"))
		cmd := exec.Command("go", "build", "-o", bb.path, "./"+dir)
		cmd.Dir = ".." // go test runs in e2e/
		if out, err := cmd.CombinedOutput(); err != nil {
			bb.err = fmt.Errorf("build %s: %v\n%s", dir, err, out)
		}
	})
	if bb.err != nil {
		t.Fatal(bb.err)
	}
	return bb.path
}

type build struct {
	once sync.Once
	path string
	err  error
}

// builds memoises buildBinary by program; binDir (made by TestMain, removed
// after the run) holds the binaries.
var (
	builds sync.Map
	binDir string
)

// runExample runs an example program built by buildBinary as the test bot
// against e's API, on account, and returns what it printed.
func runExample(t *testing.T, e *env, bin, account string) string {
	t.Helper()
	out, err := exec.Command(bin, "-api", e.api.URL, "-token", botToken, "-grant", "g-1", "-account", account).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(bin), err, out)
	}
	return string(out)
}

// The operator CLI, built and run as an operator would, against the local API.
func TestOperatorCLI(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t, "cmd/outboxctl")
	e := newEnv(t, options{})
	id := needsHuman(t, e, "acct-cli", "cli-1")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "OUTBOX_API_URL="+e.api.URL, "OUTBOX_OPERATOR_TOKEN="+opToken)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("outboxctl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("intents", "list"); !strings.Contains(out, id) || !strings.Contains(out, "unknown-outcome") {
		t.Fatalf("list does not show the intent and its last result:\n%s", out)
	}
	if out := run("intents", "show", id); !strings.Contains(out, "needs-human") || !strings.Contains(out, "stream") {
		t.Fatalf("show:\n%s", out)
	}
	run("recommend", id, "--decision", "abandon", "--summary", "duplicate of a manual send")
	if out := run("resolve", id, "--decision", "abandon", "--reason", "sent by hand"); !strings.Contains(out, "abandoned") {
		t.Fatalf("resolve:\n%s", out)
	}
	// The same command again (a retried shell) is the same decision, not an error.
	run("resolve", id, "--decision", "abandon", "--reason", "sent by hand")
	if in := e.intent(id); in.Status != core.StatusAbandoned || len(in.Resolutions) != 2 {
		t.Fatalf("after the CLI: %s with %d resolutions", in.Status, len(in.Resolutions))
	}
	if out := run("backup", "create", "--profile", testBot); !strings.Contains(out, "bk_") || !strings.Contains(out, "items     1") {
		t.Fatalf("backup:\n%s", out)
	}
	if out := run("pace", "set", "sandbox", "acct-cli", "--rate", "3", "--per", "1s", "--reason", "provider asked"); !strings.Contains(out, "3 per 1s") || !strings.Contains(out, "provider asked") {
		t.Fatalf("pace set:\n%s", out)
	}
	if out := run("pace", "show", "sandbox", "acct-cli"); !strings.Contains(out, "effective  3 per 1s (burst 1)") || !strings.Contains(out, "breaker    closed") {
		t.Fatalf("pace show:\n%s", out)
	}
	e.assertEffectsStay(id, 1, 0)

	// A retry the provider cannot deduplicate is deliberate: without
	// --accept-duplicate-risk outboxctl exits non-zero, says why, and nothing
	// changes; with it the retry goes out and the history names who accepted.
	risky := needsHuman(t, e, "acct-cli-risk", "cli-2")
	refuse := exec.Command(bin, "resolve", risky, "--decision", "retry", "--reason", "customer says nothing came")
	refuse.Env = append(os.Environ(), "OUTBOX_API_URL="+e.api.URL, "OUTBOX_OPERATOR_TOKEN="+opToken)
	if out, err := refuse.CombinedOutput(); err == nil || !strings.Contains(string(out), "duplicate") || !strings.Contains(string(out), "--accept-duplicate-risk") {
		t.Fatalf("outboxctl retry without --accept-duplicate-risk: %v\n%s", err, out)
	}
	e.assertEffectsStay(risky, 1, 300*time.Millisecond)
	if in := e.intent(risky); in.Status != core.StatusNeedsHuman || len(in.Resolutions) != 0 {
		t.Fatalf("a refused retry changed the intent: %s with %d resolutions", in.Status, len(in.Resolutions))
	}
	run("resolve", risky, "--decision", "retry", "--reason", "customer says nothing came", "--accept-duplicate-risk")
	in := e.waitStatus(risky, 10*time.Second, core.StatusSucceeded)
	if res := in.Resolutions[len(in.Resolutions)-1]; !res.DuplicateRiskAccepted || res.By != "op-ann" {
		t.Fatalf("the accepted risk is not in the history: %+v", res)
	}
	e.assertEffectsStay(risky, 2, 0)

	// Every status the help offers lists (the intent is abandoned now: no row).
	for _, st := range []string{"unknown-outcome", "retryable-failure", "pending", "in-flight"} {
		if out := run("intents", "list", "--status", st); !strings.Contains(out, "TARGET") || strings.Contains(out, id) {
			t.Fatalf("intents list --status %s:\n%s", st, out)
		}
	}
	// A token the API does not know is called that, and a dead address is named at once.
	bad := exec.Command(bin, "intents", "list")
	bad.Env = append(os.Environ(), "OUTBOX_API_URL="+e.api.URL, "OUTBOX_OPERATOR_TOKEN=no-such-token")
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "not recognised") {
		t.Fatalf("outboxctl with an unknown token: %v\n%s", err, out)
	}
	dead := exec.Command(bin, "intents", "list")
	dead.Env = append(os.Environ(), "OUTBOX_API_URL=", "OUTBOX_HTTP_ADDR=127.0.0.1:1", "OUTBOX_OPERATOR_TOKEN="+opToken)
	began := time.Now()
	if out, err := dead.CombinedOutput(); err == nil || !strings.Contains(string(out), "http://127.0.0.1:1") || !strings.Contains(string(out), "OUTBOX_HTTP_ADDR") || time.Since(began) > 3*time.Second {
		t.Fatalf("outboxctl against a dead address: %v after %s\n%s", err, time.Since(began), out)
	}
}

// The token lifecycle through outboxctl, on the table directly: issue (never
// over an existing token), list (no secrets), rotate with an overlap, revoke.
func TestTokenCLI(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t, "cmd/outboxctl")
	e := newEnv(t, options{})
	run := func(wantOK bool, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--table", e.table}, args...)...)
		cmd.Env = os.Environ()
		out, err := cmd.CombinedOutput()
		if (err == nil) != wantOK {
			t.Fatalf("outboxctl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	var issued struct {
		Token  string     `json:"token"`
		Record auth.Token `json:"record"`
	}
	if err := json.Unmarshal([]byte(run(true, "token", "issue", "--kind", "bot", "--name", testBot, "--json")), &issued); err != nil || issued.Token == "" {
		t.Fatalf("issue: %v %+v", err, issued)
	}
	if !e.tokenUsable(issued.Token) {
		t.Fatal("the issued token is refused")
	}
	// The same secret again, as an operator: refused, and the token stays a bot's.
	if out := run(false, "token", "issue", "--kind", "operator", "--name", "mallory", "--token", issued.Token); !strings.Contains(out, "already issued") {
		t.Fatalf("re-issue:\n%s", out)
	}
	if r := e.do("GET", "/v1/admin/tokens", issued.Token, nil, ""); r.status != http.StatusForbidden {
		t.Fatalf("the bot token reached the admin API: %d", r.status)
	}
	list := run(true, "token", "list")
	if !strings.Contains(list, issued.Record.ID) || strings.Contains(list, issued.Token) || strings.Contains(list, auth.TokenHash(issued.Token)) {
		t.Fatalf("list:\n%s", list)
	}
	var rotated struct {
		Token  string     `json:"token"`
		Record auth.Token `json:"record"`
		Old    auth.Token `json:"old"`
	}
	if err := json.Unmarshal([]byte(run(true, "token", "rotate", issued.Record.ID, "--overlap", "1h", "--json")), &rotated); err != nil ||
		rotated.Old.ExpiresAt == nil || rotated.Old.RotatedTo != rotated.Record.ID || rotated.Record.Owner != testBot {
		t.Fatalf("rotate: %v %+v", err, rotated)
	}
	if !e.tokenUsable(issued.Token) || !e.tokenUsable(rotated.Token) {
		t.Fatal("within the overlap both tokens work")
	}
	if out := run(true, "token", "revoke", issued.Record.ID, "--reason", "rotated out early"); !strings.Contains(out, "revoked "+issued.Record.ID) {
		t.Fatalf("revoke:\n%s", out)
	}
	if e.tokenUsable(issued.Token) || !e.tokenUsable(rotated.Token) {
		t.Fatal("after revoking the old token (the test env has no token cache)")
	}
}
