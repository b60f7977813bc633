package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/clients/clientstest"
)

// clientQuickStart runs the README quick start's TypeScript and Python part
// (issue 49) against the `make run` of TestREADMEQuickStartAgainstMakeRun,
// with nothing but the banner's variables: the examples' commands
// (examples/bot-ts, examples/agent-py), then the TypeScript snippet as a
// module of a project that installed clients/typescript, and the Python
// snippet with clients/python on PYTHONPATH, each twice (the second run
// replays). It prepares on the test's goroutine and runs in the background
// (beside the needs-human walk-through, which mostly waits); the returned
// function waits for it and reports.
func clientQuickStart(t *testing.T, root string, vars map[string]string) (wait func()) {
	t.Helper()
	start := time.Now()
	if err := clientstest.BuildTypeScript(); err != nil {
		t.Fatal(err)
	}
	node, err := clientstest.Node()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	part := between(t, string(readme), "<!-- quickstart-clients:begin -->", "<!-- quickstart-clients:end -->")
	block := func(lang string) string {
		m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(part)
		if m == nil {
			t.Fatalf("the README's client quick start has no %s block", lang)
		}
		return m[1]
	}
	env := cleanEnv()
	for i, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			env[i] = "PATH=" + filepath.Dir(node) + ":" + strings.TrimPrefix(kv, "PATH=") // Node 22, as make deps installs it
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	run := func(dir string, extra []string, name string, args ...string) (string, error) {
		c := exec.Command(name, args...)
		c.Dir, c.Env = dir, append(append([]string{}, env...), extra...)
		b, err := c.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s %v: %v\n%s", name, args, err, b)
		}
		return string(b), nil
	}

	// The TypeScript snippet runs in a project that installed the client.
	proj := t.TempDir()
	mods := filepath.Join(proj, "node_modules", "@botharness")
	if err := os.MkdirAll(mods, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(clientstest.TypeScriptDir(), filepath.Join(mods, "outbox-client")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "quickstart.mts"), []byte(block("ts")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "quickstart.py"), []byte(block("python")), 0o644); err != nil {
		t.Fatal(err)
	}
	// Three independent chains, side by side: the examples as the README
	// runs them, and each snippet twice (the second run replays).
	snippet := func(name string, extra []string, args ...string) func() (string, error) {
		return func() (string, error) {
			var out string
			for i, want := range []string{"succeeded sbx_", "replayed"} {
				o, err := run(proj, extra, args[0], args[1:]...)
				if err != nil {
					return "", err
				}
				if !strings.Contains(o, want) {
					return "", fmt.Errorf("run %d of the README's %s snippet lacks %q:\n%s", i+1, name, want, o)
				}
				out = strings.TrimSpace(o)
			}
			return out, nil
		}
	}
	chains := []func() (string, error){
		func() (string, error) {
			out, err := run(root, nil, "bash", "-euo", "pipefail", "-c", block("sh"))
			if err != nil {
				return "", err
			}
			for _, w := range []string{"demo-ts-msg-3: intent", "demo-ts-msg-3: succeeded", "demo/greet", "demo/summary", "demo/bye"} {
				if !strings.Contains(out, w) {
					return "", fmt.Errorf("the examples' output lacks %q:\n%s", w, out)
				}
			}
			if strings.Count(out, "succeeded") != 6 {
				return "", fmt.Errorf("the examples' output does not hold six succeeded sends:\n%s", out)
			}
			return "ok", nil
		},
		snippet("TypeScript", nil, node, "quickstart.mts"),
		snippet("Python", []string{"PYTHONPATH=" + clientstest.PythonDir()}, "python3", "quickstart.py"),
	}
	outs := make([]string, len(chains))
	errs := make([]error, len(chains))
	var wg sync.WaitGroup
	for i, c := range chains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = c()
		}()
	}
	return func() {
		t.Helper()
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		t.Logf("the README's client quick start ran in %v; second runs: TypeScript %q, Python %q",
			time.Since(start).Round(time.Millisecond), outs[1], outs[2])
	}
}
