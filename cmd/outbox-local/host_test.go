package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/botharness/outbox/localstack/emulatortest"
)

// requireEmulators: the crash and restart tests need the emulators.
func requireEmulators(t *testing.T) {
	t.Helper()
	emulatortest.Require(t, "DYNAMODB")
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
