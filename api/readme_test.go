package api_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/botharness/outbox/api"
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

// TestInfraREADMEDeploySectionNamesOnlyWhatExists (issue 50): the "Deploy"
// section of infra/README.md is a walk from a fresh clone to a working
// stack, so it must hold every step (the CDK CLI, bootstrap, deploy, the
// first operator token, a grant, the provider secrets, both topic
// subscriptions, a first intent), and everything it names must exist: each
// make target is a Makefile rule with a "## " help line (make help lists
// it), each repository path exists, each stack output it reads is one the
// stack defines, and each API call is a route of the spec with its method.
func TestInfraREADMEDeploySectionNamesOnlyWhatExists(t *testing.T) {
	root := ".."
	b, err := os.ReadFile(filepath.Join(root, "infra", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Deploy\n")
	if !ok {
		t.Fatal(`infra/README.md has no "## Deploy" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var code []string // the commands, one line each (continuations joined)
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		code = append(code, strings.Split(strings.ReplaceAll(m[1], "\\\n", " "), "\n")...)
	}
	commands := strings.Join(code, "\n")
	for _, step := range []struct{ what, re string }{
		{"install the CDK CLI", `(?m)^make infra-cli$`},
		{"bootstrap", `(?m)^make bootstrap\b`},
		{"deploy with providerConfig", `(?m)^make deploy CDK_ARGS=.*providerConfig=`},
		{"the provider secrets", `aws secretsmanager create-secret --name `},
		{"the first operator token from the stack's table", `OUTBOX_TABLE="\$\(output TableName\)"(?s:.*)outboxctl token issue --kind operator`},
		{"a grant", `curl .*-X PUT "\$OUTBOX_API_URL/v1/admin/grants/`},
		{"the alarm topic", `aws sns subscribe --topic-arn "\$\(output AlarmTopicArn\)"`},
		{"the operator-events topic", `aws sns subscribe --topic-arn "\$\(output OperatorEventsTopicArn\)"`},
		{"a first intent", `curl .*-X POST "\$OUTBOX_API_URL/v1/intents"`},
	} {
		if !regexp.MustCompile(step.re).MatchString(commands) {
			t.Errorf("the Deploy section lacks the step %q (/%s/)", step.what, step.re)
		}
	}

	// Make targets (in commands and code spans): rules listed by make help.
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	helped := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):.*## `).FindAllStringSubmatch(string(makefile), -1) {
		helped[m[1]] = true
	}
	spans := append([]string{}, code...)
	for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(regexp.MustCompile("(?s)```.*?```").ReplaceAllString(section, ""), -1) {
		spans = append(spans, m[1])
	}
	var targets [][]string
	for _, s := range spans {
		targets = append(targets, regexp.MustCompile(`(?:^|\s)make ([a-z][a-z0-9-]*)`).FindAllStringSubmatch(s, -1)...)
	}
	if len(targets) < 4 {
		t.Fatalf("only %d make targets found in the Deploy section; the extraction is broken", len(targets))
	}
	for _, m := range targets {
		if !helped[m[1]] {
			t.Errorf("the Deploy section names make target %q, which the Makefile does not define with a ## help line", m[1])
		}
	}

	// Paths: relative to the repository's root (as the commands run there)
	// or to infra/.
	pathLike := regexp.MustCompile(`^[A-Za-z0-9_.<>*/-]+$`)
	checked := 0
	for _, s := range spans {
		for _, tok := range strings.Fields(s) {
			tok = strings.TrimRight(strings.TrimPrefix(tok, "./"), ".,;:)")
			if !pathLike.MatchString(tok) || !strings.Contains(tok, "/") || strings.HasPrefix(tok, "/") || generated(tok) {
				continue
			}
			first, _, _ := strings.Cut(tok, "/")
			var base string
			for _, dir := range []string{root, filepath.Join(root, "infra")} {
				if _, err := os.Stat(filepath.Join(dir, first)); err == nil {
					base = dir
					break
				}
			}
			if base == "" || strings.Contains(tok, "node_modules") {
				continue // a secret name (outbox/slack), a URL part, an install output
			}
			checked++
			pattern := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(strings.TrimSuffix(tok, "/"), "*")
			if matches, _ := filepath.Glob(filepath.Join(base, pattern)); len(matches) == 0 {
				t.Errorf("the Deploy section names %s, which does not exist", tok)
			}
		}
	}
	if checked < 2 {
		t.Errorf("only %d paths checked in the Deploy section; the extraction is broken", checked)
	}

	// Stack outputs: those the section reads are ones the stack defines.
	stack, err := os.ReadFile(filepath.Join(root, "infra", "stack.go"))
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]bool{}
	for _, m := range regexp.MustCompile(`out\("([A-Za-z]+)"`).FindAllStringSubmatch(string(stack), -1) {
		outputs[m[1]] = true
	}
	used := regexp.MustCompile(`\$\(output ([A-Za-z]+)\)`).FindAllStringSubmatch(section, -1)
	if len(used) < 4 {
		t.Fatalf("only %d stack outputs read in the Deploy section; the extraction is broken", len(used))
	}
	for _, m := range used {
		if !outputs[m[1]] {
			t.Errorf("the Deploy section reads the stack output %q, which infra/stack.go does not define", m[1])
		}
	}

	// API calls: each curl's method and path is a route of the spec.
	routes, err := api.Routes()
	if err != nil {
		t.Fatal(err)
	}
	curls := 0
	for _, line := range code {
		if !strings.HasPrefix(strings.TrimSpace(line), "curl ") {
			continue
		}
		m := regexp.MustCompile(`"\$OUTBOX_API_URL(/[^"?]*)"`).FindStringSubmatch(line)
		if m == nil {
			t.Errorf("a curl without $OUTBOX_API_URL: %s", line)
			continue
		}
		method := "GET"
		if x := regexp.MustCompile(`-X ([A-Z]+)`).FindStringSubmatch(line); x != nil {
			method = x[1]
		} else if strings.Contains(line, " -d ") {
			method = "POST"
		}
		curls++
		found := false
		for _, r := range routes {
			re := "^" + regexp.MustCompile(`\\\{[^}]*\\\}`).ReplaceAllString(regexp.QuoteMeta(r.Path), "[^/]+") + "$"
			if r.Method == method && regexp.MustCompile(re).MatchString(m[1]) {
				found = true
			}
		}
		if !found {
			t.Errorf("the Deploy section calls %s %s, which is not a route of api/openapi.json", method, m[1])
		}
	}
	if curls < 2 {
		t.Errorf("only %d API calls found in the Deploy section; the extraction is broken", curls)
	}
}
