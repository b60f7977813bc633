package api_test

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/botharness/outbox/api"
)

// The TypeScript and Python clients' wire types (an interface / a TypedDict
// named as each schema) carry exactly the properties the spec documents, as
// TestClientTypesMatchSpec checks for the Go client.
var clientSchemas = []string{
	"SubmitRequest", "GrantRef", "SourceRef", "Intent", "Attempt", "Evidence", "Checks", "Resolution", "Lease",
	"HistorySummary", "Pruned", "HistorySlice", "SourceUpdate", "SourceResult", "IntentSummary", "IntentPage",
	"ResolutionRequest", "WhoAmI",
}

func specProperties(t *testing.T) map[string][]string {
	t.Helper()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for name, s := range doc.Components.Schemas {
		for p := range s.Properties {
			out[name] = append(out[name], p)
		}
		sort.Strings(out[name])
	}
	return out
}

// typeFields reads each `<open>Name<...>` block of src up to its end and the
// field names declared in it (one per line, `name` or `name?` then `:`).
func typeFields(src string, open, end *regexp.Regexp, field *regexp.Regexp) map[string][]string {
	out := map[string][]string{}
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		m := open.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		var fields []string
		for i++; i < len(lines) && !end.MatchString(lines[i]); i++ {
			if f := field.FindStringSubmatch(lines[i]); f != nil {
				fields = append(fields, f[1])
			}
		}
		sort.Strings(fields)
		out[m[1]] = fields
		i-- // the end line may open the next type
	}
	return out
}

func checkClientTypes(t *testing.T, lang string, got map[string][]string) {
	t.Helper()
	spec := specProperties(t)
	for _, schema := range clientSchemas {
		want, ok := spec[schema]
		if !ok {
			t.Errorf("no schema %s in api/openapi.json", schema)
			continue
		}
		have, ok := got[schema]
		if !ok {
			t.Errorf("%s: no type %s", lang, schema)
			continue
		}
		if strings.Join(want, " ") != strings.Join(have, " ") {
			t.Errorf("%s: the spec's %s has [%s], the client's has [%s]", lang, schema, strings.Join(want, " "), strings.Join(have, " "))
		}
	}
}

func TestTypeScriptClientTypesMatchSpec(t *testing.T) {
	b, err := os.ReadFile("../clients/typescript/src/types.ts")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	// One-line interfaces ("export interface GrantRef { id: string; version: number }") are split first.
	src = regexp.MustCompile(`(?m)^(export interface \w+ \{)(.+)\}\s*$`).ReplaceAllStringFunc(src, func(s string) string {
		m := regexp.MustCompile(`^(export interface \w+ \{)(.+)\}\s*$`).FindStringSubmatch(s)
		return m[1] + "\n" + strings.ReplaceAll(m[2], ";", ";\n") + "\n}"
	})
	got := typeFields(src, regexp.MustCompile(`^export interface (\w+) \{`), regexp.MustCompile(`^\}`),
		regexp.MustCompile(`^\s*(\w+)\??:`))
	checkClientTypes(t, "clients/typescript/src/types.ts", got)
}

func TestPythonClientTypesMatchSpec(t *testing.T) {
	b, err := os.ReadFile("../clients/python/outbox_client/types.py")
	if err != nil {
		t.Fatal(err)
	}
	got := typeFields(string(b), regexp.MustCompile(`^class (\w+)\(TypedDict`), regexp.MustCompile(`^\S`),
		regexp.MustCompile(`^    (\w+): `))
	checkClientTypes(t, "clients/python/outbox_client/types.py", got)
}
