package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/botharness/outbox/client"
)

// TestREADMEQuickStartAgainstMakeRun is the newcomer's first hour: `make run`
// on non-default ports (its own emulators and data directory), then the
// README's quick-start blocks run in bash with nothing but the variables
// the banner printed: the curl lines, the example bot, outboxctl list, then
// the needs-human walk-through (fault, submit, outboxctl list/show/resolve),
// then the TypeScript and Python clients' examples and snippets.
// The banner's "try" commands must be the README's.
func TestREADMEQuickStartAgainstMakeRun(t *testing.T) {
	t.Parallel()
	requireEmulators(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The banner's commands are the README's.
	quick := between(t, string(readme), "<!-- quickstart:begin -->", "<!-- quickstart:end -->")
	for _, line := range strings.Split(strings.TrimSpace(tryCommands), "\n") {
		if !strings.Contains(quick, strings.TrimSpace(line)) {
			t.Errorf("the banner's command %q is not in the README's quick start", strings.TrimSpace(line))
		}
	}

	ddb, sqs, addr, sb := lowFreeAddr(t), lowFreeAddr(t), lowFreeAddr(t), lowFreeAddr(t)
	port := func(a string) string { return a[strings.LastIndex(a, ":")+1:] }
	tmp := t.TempDir()
	runEnv := []string{
		"OUTBOX_DDB_PORT=" + port(ddb), "OUTBOX_SQS_PORT=" + port(sqs), "OUTBOX_HTTP_ADDR=" + addr, "OUTBOX_SANDBOX_ADDR=" + sb,
		"OUTBOX_DATA_DIR=" + filepath.Join(tmp, "data"), "OUTBOX_EMULATOR_RUN_DIR=" + filepath.Join(tmp, "run"),
	}
	cmd := exec.Command("make", "--no-print-directory", "run")
	cmd.Dir = root
	cmd.Env = append(cleanEnv(), runEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	var stderr syncBuf
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out syncBuf
	exports := map[string]string{}
	bannerDone := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		closed := false
		for sc.Scan() {
			line := sc.Text()
			out.Write([]byte(line + "\n"))
			if m := regexp.MustCompile(`^\s+export ((?:OUTBOX|AWS)_[A-Z_]+)=(\S+)$`).FindStringSubmatch(line); m != nil {
				out.mu.Lock()
				exports[m[1]] = m[2]
				out.mu.Unlock()
			}
			if strings.HasPrefix(line, "Ctrl-C stops everything") && !closed {
				close(bannerDone)
				closed = true
			}
		}
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // as Ctrl-C: run.sh stops the host, then its emulators
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		pw.Close()
		stop := exec.Command("bash", "localstack/emulators.sh", "stop")
		stop.Dir, stop.Env = root, append(cleanEnv(), runEnv...)
		_ = stop.Run()
		if t.Failed() {
			t.Logf("make run stdout:\n%s\nstderr:\n%s", out.String(), stderr.String())
		}
	})
	select {
	case <-bannerDone:
	case <-time.After(8 * time.Minute): // make run may first install (deps), on a loaded machine
		t.Fatal("make run printed no banner within 8 minutes")
	}
	out.mu.Lock()
	vars := map[string]string{}
	for k, v := range exports {
		vars[k] = v
	}
	out.mu.Unlock()
	if vars[client.EnvAPIURL] != "http://"+addr || vars["OUTBOX_SANDBOX_API_URL"] != "http://"+sb || vars[client.EnvBotToken] == "" || vars[client.EnvOperatorToken] == "" {
		t.Fatalf("the banner's exports %v do not name the ports make run was given (%s, %s)", vars, addr, sb)
	}
	env := []string{}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	sh := func(script string) string {
		t.Helper()
		c := exec.Command("bash", "-euo", "pipefail", "-c", script)
		c.Dir = root
		c.Env = append(cleanEnv(), env...)
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n--- script:\n%s\n--- output:\n%s", err, script, b)
		}
		return string(b)
	}

	// The quick start's second block: the curls, the example bot, outboxctl.
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(quick, -1)
	if len(blocks) != 2 {
		t.Fatalf("the quick start should hold the exports block and the commands block, found %d", len(blocks))
	}
	got := sh(blocks[1][1])
	// ... and outboxctl token issue, which reaches the table through the
	// banner's AWS exports (issue 50: without them, "no EC2 IMDS role found").
	for _, want := range []string{`"status":"pending"`, `"count":`, "demo-msg-3: succeeded", "ID  ", "(operator alice)"} {
		if !strings.Contains(got, want) {
			t.Fatalf("the quick start's output lacks %q:\n%s", want, got)
		}
	}
	// Run again: the bot's second run replays, nothing is sent twice.
	if again := sh("go run ./examples/bot"); !strings.Contains(again, "already held (replayed)") {
		t.Fatalf("the example bot's second run did not replay:\n%s", again)
	}

	// The TypeScript and Python part (quickstart_clients_test.go) runs
	// beside the needs-human walk-through; its intents are acct-1's.
	clientsDone := clientQuickStart(t, root, vars)

	// The needs-human walk-through, with <id> the intent it submits.
	human := between(t, string(readme), "<!-- quickstart-human:begin -->", "<!-- quickstart-human:end -->")
	hb := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(human)
	if hb == nil {
		t.Fatal("no sh block in the needs-human walk-through")
	}
	var before, after []string
	for _, line := range strings.Split(strings.TrimRight(hb[1], "\n"), "\n") {
		if strings.Contains(line, "<id>") {
			after = append(after, line)
		} else {
			before = append(before, line)
		}
	}
	submitted := sh(strings.Join(before, "\n"))
	id := regexp.MustCompile(`"id":"(it_[a-z0-9]+)"`).FindStringSubmatch(submitted)
	if id == nil {
		t.Fatalf("the walk-through submitted no intent:\n%s", submitted)
	}
	admin := client.New(vars[client.EnvAPIURL], vars[client.EnvOperatorToken]).Admin()
	waitFor(t, 60*time.Second, "the acct-2 intent waits for a human", func() bool {
		in, err := admin.Show(context.Background(), id[1])
		return err == nil && in.Status == "needs-human"
	})
	final := sh(strings.ReplaceAll(strings.Join(after, "\n"), "<id>", id[1]))
	if !strings.Contains(final, id[1]+" is now succeeded") || !strings.Contains(final, "attempts:") {
		t.Fatalf("outboxctl show/resolve:\n%s", final)
	}
	clientsDone()
	t.Logf("make run on %s (sandbox %s): the README's quick start ran from the banner's variables; %s resolved", addr, sb, id[1])
}

func between(t *testing.T, s, a, b string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, a)
	if !ok {
		t.Fatalf("README has no %s", a)
	}
	in, _, ok := strings.Cut(rest, b)
	if !ok {
		t.Fatalf("README has no %s", b)
	}
	return in
}

// cleanEnv is this process's environment without the outbox's and the AWS
// SDK's variables (endpoints, region, credentials), so only what a test
// passes explicitly is seen.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OUTBOX_") || strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "LOG_LEVEL=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
