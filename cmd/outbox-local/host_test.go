package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// requireEmulators skips a test that needs the emulators when none is set,
// unless make test requires them (OUTBOX_REQUIRE_EMULATORS=1): then it fails.
func requireEmulators(t *testing.T) {
	t.Helper()
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" {
		if os.Getenv("OUTBOX_REQUIRE_EMULATORS") == "1" {
			t.Fatal("OUTBOX_REQUIRE_EMULATORS=1 but AWS_ENDPOINT_URL_DYNAMODB is unset")
		}
		t.Skip("no emulators (AWS_ENDPOINT_URL_DYNAMODB unset)")
	}
}

// host is the outbox-local binary the crash and restart tests run as a
// process of its own, built once per test run.
var host struct {
	once sync.Once
	dir  string
	bin  string
	out  []byte
	err  error
}

// hostBinary builds outbox-local once and returns its path.
func hostBinary(t *testing.T) string {
	t.Helper()
	host.once.Do(func() {
		if host.dir, host.err = os.MkdirTemp("", "outbox-local-test-"); host.err != nil {
			return
		}
		host.bin = filepath.Join(host.dir, "outbox-local")
		host.out, host.err = exec.Command("go", "build", "-o", host.bin, ".").CombinedOutput()
	})
	if host.err != nil {
		t.Fatalf("build outbox-local: %v\n%s", host.err, host.out)
	}
	return host.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if host.dir != "" {
		os.RemoveAll(host.dir)
	}
	os.Exit(code)
}
