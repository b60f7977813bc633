// Command testtimes turns the `go test -json` streams that `make test`
// keeps (gotestsum --jsonfile) into build/test-times.json: every package's
// and every test's elapsed time, slowest first, so the tests that make the
// suite slow are visible without reading logs.
//
//	go run ./localstack/testtimes -o build/test-times.json build/test-*.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// event is the subset of test2json's TestEvent this command reads.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

type timing struct {
	Package string  `json:"package"`
	Test    string  `json:"test,omitempty"`
	Result  string  `json:"result"`
	Seconds float64 `json:"seconds"`
}

type report struct {
	Packages []timing `json:"packages"`
	Tests    []timing `json:"tests"`
}

func main() {
	out := flag.String("o", "build/test-times.json", "where to write the report")
	flag.Parse()
	var r report
	for _, path := range flag.Args() {
		if err := read(path, &r); err != nil {
			fmt.Fprintln(os.Stderr, "testtimes:", err)
			os.Exit(1)
		}
	}
	coverSubtests(r.Tests)
	slowest := func(ts []timing) {
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].Seconds > ts[j].Seconds })
	}
	slowest(r.Packages)
	slowest(r.Tests)
	b, err := json.MarshalIndent(r, "", "  ")
	if err == nil {
		err = os.WriteFile(*out, append(b, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(1)
	}
}

// read appends the final pass/fail/skip events of one stream.
func read(path string, r *report) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // a line go test printed outside the JSON stream (a build error)
		}
		switch e.Action {
		case "pass", "fail", "skip":
		default:
			continue
		}
		t := timing{Package: e.Package, Test: e.Test, Result: e.Action, Seconds: e.Elapsed}
		if e.Test == "" {
			r.Packages = append(r.Packages, t)
		} else {
			r.Tests = append(r.Tests, t)
		}
	}
	return sc.Err()
}

// coverSubtests makes each test's time at least its slowest subtest's: a
// test whose subtests run in parallel (t.Parallel inside t.Run) reports only
// its own body, 0.00 s, since they start once it returns.
func coverSubtests(ts []timing) {
	at := make(map[[2]string]int, len(ts))
	for i, t := range ts {
		at[[2]string{t.Package, t.Test}] = i
	}
	for _, t := range ts {
		for name := t.Test; strings.Contains(name, "/"); {
			name = name[:strings.LastIndex(name, "/")]
			if i, ok := at[[2]string{t.Package, name}]; ok && ts[i].Seconds < t.Seconds {
				ts[i].Seconds = t.Seconds
			}
		}
	}
}
