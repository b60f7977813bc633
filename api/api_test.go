package api_test

import (
	"context"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/botharness/outbox/adapters/routes"
	"github.com/botharness/outbox/api"
)

// The document is valid OpenAPI 3.1 (kin-openapi's validator, JSON Schema
// 2020-12 for 3.1 documents).
func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPIMajorMinor() != "3.1" {
		t.Fatalf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Every route the gateway and the CDK stack serve is documented, and nothing
// else is: adding a route to adapters/routes without the spec fails here.
func TestOpenAPIRoutesAreTheServedRoutes(t *testing.T) {
	served := append(append(append([]string(nil), routes.Intake...), routes.Admin...), routes.Webhook, routes.OpenAPI)
	rs, err := api.Routes()
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, r := range rs {
		documented = append(documented, r.Key())
		if r.Public != (r.Key() == routes.Webhook || r.Key() == routes.OpenAPI) {
			t.Errorf("%s: public=%v in the spec, but the gateway's authorizer says otherwise", r.Key(), r.Public)
		}
		if len(r.Statuses) == 0 || r.Summary == "" {
			t.Errorf("%s: needs a summary and its responses", r.Key())
		}
	}
	sort.Strings(served)
	sort.Strings(documented)
	if strings.Join(served, "\n") != strings.Join(documented, "\n") {
		t.Fatalf("served routes and api/openapi.json differ\nserved:\n%s\n\ndocumented:\n%s", strings.Join(served, "\n"), strings.Join(documented, "\n"))
	}
}

// The README's route table is generated from the document.
func TestREADMERouteTableMatchesSpec(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- openapi-routes:begin -->\n", "<!-- openapi-routes:end -->"
	_, rest, ok := strings.Cut(string(readme), begin)
	got, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("README.md has no %q ... %q section", strings.TrimSpace(begin), end)
	}
	want, err := api.RoutesTable()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("README.md's route table is out of date with api/openapi.json; replace the section with:\n\n%s", want)
	}
}
