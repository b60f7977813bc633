package api_test

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/botharness/outbox/api"
	"github.com/botharness/outbox/client"
)

// The Go client's wire types carry exactly the fields the spec documents, so
// a field added to the contract reaches Go users (and a client field the
// server never sends is caught).
func TestClientTypesMatchSpec(t *testing.T) {
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
	pairs := map[string]any{
		"SubmitRequest": client.IntentRequest{}, "GrantRef": client.GrantRef{}, "SourceRef": client.SourceRef{},
		"Intent": client.Intent{}, "Attempt": client.Attempt{}, "Evidence": client.Evidence{}, "Checks": client.Checks{},
		"Resolution": client.Resolution{}, "Lease": client.Lease{}, "IntentSummary": client.IntentSummary{},
		"IntentPage": client.IntentPage{}, "SourceResult": client.SourceState{}, "SourceUpdate": client.SourceUpdate{},
		"ResolutionRequest": client.ResolutionRequest{}, "Manifest": client.Manifest{}, "RestoreReport": client.RestoreReport{},
		"HistorySummary": client.HistorySummary{}, "HistorySlice": client.HistorySlice{}, "WhoAmI": client.WhoAmI{},
	}
	for schema, v := range pairs {
		s, ok := doc.Components.Schemas[schema]
		if !ok {
			t.Errorf("no schema %s in api/openapi.json", schema)
			continue
		}
		var inSpec, inGo []string
		for name := range s.Properties {
			inSpec = append(inSpec, name)
		}
		typ := reflect.TypeOf(v)
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				inGo = append(inGo, name)
			}
		}
		sort.Strings(inSpec)
		sort.Strings(inGo)
		if strings.Join(inSpec, " ") != strings.Join(inGo, " ") {
			t.Errorf("%s: the spec has [%s], client.%s has [%s]", schema, strings.Join(inSpec, " "), typ.Name(), strings.Join(inGo, " "))
		}
	}
}
