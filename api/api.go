// Package api holds the outbox's HTTP contract: one OpenAPI 3.1 document
// (openapi.json, next to this file) for the bot, admin and webhook APIs,
// embedded so the intake function can serve it at GET /v1/openapi.json.
//
// The document is the contract the handlers are checked against: the e2e
// suite validates every request and response it makes with it (see
// api/apitest), a test here keeps its routes equal to adapters/routes, and
// the README's route table is generated from it (RoutesTable).
package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// OpenAPI is the document, byte for byte as committed.
//
//go:embed openapi.json
var OpenAPI []byte

// Route is an operation of the document.
type Route struct {
	Method   string // GET, POST, ...
	Path     string // /v1/intents/{id}
	Tag      string // bot, admin, webhook, meta
	Summary  string
	Statuses []string // documented response statuses, sorted
	Public   bool     // no bearer token (security: [])
}

// Key is the API Gateway route key, "METHOD /path".
func (r Route) Key() string { return r.Method + " " + r.Path }

// Routes lists the document's operations, sorted by path then method. It
// uses encoding/json only, so serving the document costs the intake
// function no dependency.
func Routes() ([]Route, error) {
	var doc struct {
		Paths map[string]map[string]struct {
			Tags      []string                   `json:"tags"`
			Summary   string                     `json:"summary"`
			Security  *[]map[string][]string     `json:"security"`
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		return nil, fmt.Errorf("api: openapi.json: %w", err)
	}
	var out []Route
	for p, ops := range doc.Paths {
		for m, op := range ops {
			switch m {
			case "get", "put", "post", "delete", "patch", "head", "options":
			default:
				continue
			}
			r := Route{Method: strings.ToUpper(m), Path: p, Summary: op.Summary,
				Public: op.Security != nil && len(*op.Security) == 0}
			if len(op.Tags) > 0 {
				r.Tag = op.Tags[0]
			}
			for st := range op.Responses {
				r.Statuses = append(r.Statuses, st)
			}
			sort.Strings(r.Statuses)
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out, nil
}

// RoutesTable renders the README's route table from the document.
func RoutesTable() (string, error) {
	rs, err := Routes()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("| API | route | auth | what | statuses |\n|---|---|---|---|---|\n")
	order := map[string]int{"bot": 0, "admin": 1, "webhook": 2, "meta": 3}
	sort.SliceStable(rs, func(i, j int) bool { return order[rs[i].Tag] < order[rs[j].Tag] })
	for _, r := range rs {
		auth := "bearer"
		if r.Public {
			auth = "none"
			if r.Tag == "webhook" {
				auth = "provider signature"
			}
		}
		fmt.Fprintf(&b, "| %s | `%s %s` | %s | %s | %s |\n", r.Tag, r.Method, r.Path, auth, r.Summary, strings.Join(r.Statuses, " "))
	}
	return b.String(), nil
}
