package api_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// generatedPaths are outputs the README names that a fresh clone does not
// have yet (make run, make build, make test create them).
var generatedPaths = []string{"localstack/.run/", "build/", "dist/", "bin/", "infra/cdk.out"}

// TestREADMENamesOnlyWhatExists: every repository path the README names in
// backticks exists (placeholders like <name> match anything; "dir/TestName"
// names a test function that exists in that directory), and every make
// target it names (`make X`, and the names in "Make targets") is a rule of
// the Makefile.
func TestREADMENamesOnlyWhatExists(t *testing.T) {
	root := ".."
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	top := map[string]bool{}
	for _, e := range entries {
		top[e.Name()] = true
	}
	text := string(readme)
	var spans []string
	for _, m := range regexp.MustCompile("(?s)```[a-z]*\n(.*?)```").FindAllStringSubmatch(text, -1) {
		spans = append(spans, strings.Split(m[1], "\n")...)
	}
	inline := regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(regexp.MustCompile("(?s)```.*?```").ReplaceAllString(text, ""), -1)
	for _, m := range inline {
		spans = append(spans, m[1])
	}

	pathLike := regexp.MustCompile(`^[A-Za-z0-9_.<>*/-]+$`)
	testName := regexp.MustCompile(`^(.*)/(Test[A-Za-z0-9_]+|Fuzz[A-Za-z0-9_]+)$`)
	checked := 0
	for _, s := range spans {
		for _, tok := range strings.Fields(s) {
			tok = strings.TrimRight(strings.TrimPrefix(tok, "./"), ".,;:)")
			if !pathLike.MatchString(tok) || !strings.Contains(tok, "/") || strings.HasPrefix(tok, "/") {
				continue
			}
			first, _, _ := strings.Cut(tok, "/")
			if !top[first] || generated(tok) {
				continue
			}
			checked++
			if m := testName.FindStringSubmatch(tok); m != nil {
				if !hasFunc(t, filepath.Join(root, m[1]), m[2]) {
					t.Errorf("README names %s, but %s has no func %s", tok, m[1], m[2])
				}
				continue
			}
			pattern := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(strings.TrimSuffix(tok, "/"), "*")
			if matches, _ := filepath.Glob(filepath.Join(root, pattern)); len(matches) == 0 {
				t.Errorf("README names %s, which does not exist", tok)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d paths checked; the extraction is broken", checked)
	}

	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*(?:[ \t]+[a-z][a-z0-9-]*)*)[ \t]*:`).FindAllStringSubmatch(string(makefile), -1) {
		for _, r := range strings.Fields(m[1]) {
			rules[r] = true
		}
	}
	targets := map[string]bool{}
	for _, s := range spans {
		for _, m := range regexp.MustCompile(`(?:^|\s)make ([a-z][a-z0-9-]*)`).FindAllStringSubmatch(s, -1) {
			targets[m[1]] = true
		}
	}
	_, section, ok := strings.Cut(text, "## Make targets\n")
	if !ok {
		t.Fatal(`README has no "## Make targets" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, m := range regexp.MustCompile("`([a-z][a-z0-9-]*)`").FindAllStringSubmatch(section, -1) {
		targets[m[1]] = true
	}
	if len(targets) < 15 {
		t.Fatalf("only %d make targets found in the README; the extraction is broken", len(targets))
	}
	for tgt := range targets {
		if !rules[tgt] {
			t.Errorf("README names make target %q, which the Makefile does not define", tgt)
		}
	}
}

func generated(p string) bool {
	for _, g := range generatedPaths {
		if strings.HasPrefix(p, g) || p+"/" == g {
			return true
		}
	}
	return false
}

func hasFunc(t *testing.T, dir, name string) bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "func "+name+"(") {
			return true
		}
	}
	return false
}
