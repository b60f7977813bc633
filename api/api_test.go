package api_test

import (
	"context"
	"encoding/json"
	"net/url"
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
	served := append(append(append(append([]string(nil), routes.Intake...), routes.Admin...), routes.Webhooks...), routes.OpenAPI)
	rs, err := api.Routes()
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, r := range rs {
		documented = append(documented, r.Key())
		if r.Public != (r.Key() == routes.Webhook || r.Key() == routes.WebhookHandshake || r.Key() == routes.OpenAPI) {
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

// Issue 50: the document is served at GET /v1/openapi.json by every
// deployment (make run on any port, AWS behind its ApiUrl), byte for byte
// as committed, so its servers must be relative: a tool that reads it from
// an address sends its requests to that address, never to a fixed one.
func TestServersFollowTheServingAddress(t *testing.T) {
	var doc struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Servers) == 0 {
		t.Fatal("no servers: a client would not know the API's base")
	}
	for _, s := range doc.Servers {
		rel, err := url.Parse(s.URL)
		if err != nil {
			t.Fatalf("server %q: %v", s.URL, err)
		}
		if rel.IsAbs() || rel.Host != "" {
			t.Errorf("server %q names an address; want one relative to where the document is served", s.URL)
			continue
		}
		for _, servedAt := range []string{"http://127.0.0.1:24000/v1/openapi.json", "https://abc123.execute-api.eu-west-1.amazonaws.com/v1/openapi.json"} {
			at, _ := url.Parse(servedAt)
			base := at.ResolveReference(rel)
			if want := at.Scheme + "://" + at.Host + "/"; base.String() != want {
				t.Errorf("server %q served at %s resolves to %s, want %s", s.URL, servedAt, base, want)
			}
		}
	}
}
