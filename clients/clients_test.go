// Package clients runs the TypeScript and Python clients' own unit tests
// (node --test, python3 -m unittest) from `go test`, so `make test` runs
// them; both read clients/keyvectors.json, the key vectors the Go client's
// TestKeyVectors checks too.
package clients

import (
	"os"
	"os/exec"
	"testing"

	"github.com/botharness/outbox/clients/clientstest"
)

func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	node, err := clientstest.Node()
	if err != nil {
		t.Fatal(err)
	}
	if err := clientstest.BuildTypeScript(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "--test", "--test-reporter=dot", "test/client.test.mjs")
	cmd.Dir = clientstest.TypeScriptDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	t.Logf("node --test:\n%s", out)
}

func TestPythonClient(t *testing.T) {
	t.Parallel()
	py, err := clientstest.Python()
	if err != nil {
		t.Fatal(err)
	}
	// -S: no site-packages, so the client provably needs nothing beyond the interpreter.
	cmd := exec.Command(py, "-S", "-m", "unittest", "discover", "-s", "tests", "-t", ".")
	cmd.Dir = clientstest.PythonDir()
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	t.Logf("python3 -m unittest:\n%s", out)
}
