// Package emulatortest gates the tests that need the local emulators
// (localstack/emulators.sh): without an emulator endpoint they are skipped,
// unless make test requires the emulators (OUTBOX_REQUIRE_EMULATORS=1):
// then they fail, so a run that was meant to reach them cannot pass without.
package emulatortest

import (
	"fmt"
	"os"
	"testing"

	"github.com/botharness/outbox/adapters/awsconfig"
)

func required() bool { return os.Getenv("OUTBOX_REQUIRE_EMULATORS") == "1" }

// Require skips (or, when required, fails) t unless an emulator endpoint is
// set for service ("DYNAMODB", "S3": awsconfig.Emulated).
func Require(t testing.TB, service string) {
	t.Helper()
	if awsconfig.Emulated(service) {
		return
	}
	if required() {
		t.Fatalf("OUTBOX_REQUIRE_EMULATORS=1 but no emulator endpoint is set (AWS_ENDPOINT_URL_%s, AWS_ENDPOINT_URL)", service)
	}
	t.Skipf("no emulator endpoint (AWS_ENDPOINT_URL_%s unset; run `make test`)", service)
}

// Main is the TestMain of a package whose every test needs DynamoDB: it runs
// the tests only when an endpoint is set, and says so once instead.
func Main(m *testing.M, pkg string) { os.Exit(Run(m, pkg)) }

// Run is Main without the exit: it returns the exit code, so a TestMain can
// clean up after the run.
func Run(m *testing.M, pkg string) int {
	if !awsconfig.Emulated("DYNAMODB") {
		if required() {
			fmt.Fprintf(os.Stderr, "%s: OUTBOX_REQUIRE_EMULATORS=1 but no emulator endpoint is set\n", pkg)
			return 1
		}
		fmt.Printf("%s: skipped: no emulator endpoints (run `make test`)\n", pkg)
		return 0
	}
	return m.Run()
}
