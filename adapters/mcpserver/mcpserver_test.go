package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/botharness/outbox/api"
	"github.com/botharness/outbox/client"
)

type specOp struct {
	method string
	tags   []string
}

func specOperations(t *testing.T) (map[string]specOp, []string) {
	t.Helper()
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas struct {
				ErrorCode struct {
					Enum []string `json:"enum"`
				} `json:"ErrorCode"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	ops := map[string]specOp{}
	for _, methods := range doc.Paths {
		for m, raw := range methods {
			var op struct {
				OperationID string   `json:"operationId"`
				Tags        []string `json:"tags"`
			}
			if json.Unmarshal(raw, &op) == nil && op.OperationID != "" {
				ops[op.OperationID] = specOp{method: strings.ToUpper(m), tags: op.Tags}
			}
		}
	}
	return ops, doc.Components.Schemas.ErrorCode.Enum
}

// Every MCP tool maps to documented API operations (operationId in
// api/openapi.json) of its principals' API (bot tools: the bot API;
// orchestrator tools: the admin API), and its annotations tell the truth
// about them: read-only exactly when every operation is a GET.
func TestEveryToolMapsToADocumentedOperationAndPrincipal(t *testing.T) {
	ops, _ := specOperations(t)
	if len(Catalogue()) != 6 {
		t.Fatalf("catalogue has %d tools", len(Catalogue()))
	}
	for _, tool := range Catalogue() {
		if len(tool.Operations) == 0 || len(tool.Kinds) == 0 {
			t.Errorf("%s: no operations or principals", tool.Name)
		}
		allGet := true
		for _, id := range tool.Operations {
			op, ok := ops[id]
			if !ok {
				t.Errorf("%s: operation %q is not in api/openapi.json", tool.Name, id)
				continue
			}
			allGet = allGet && op.method == http.MethodGet
			for _, k := range tool.Kinds {
				want := map[string]string{KindBot: "bot", KindOrchestrator: "admin", KindOperator: "admin"}[k]
				if !slices.Contains(op.tags, want) {
					t.Errorf("%s is offered to %s principals but calls %s, tagged %v (want %s)", tool.Name, k, id, op.tags, want)
				}
			}
		}
		d := tool.Def()
		if d.Description == "" || d.InputSchema == nil || d.OutputSchema == nil || d.Annotations == nil {
			t.Fatalf("%s: incomplete definition", tool.Name)
		}
		a := d.Annotations
		if a.ReadOnlyHint != allGet {
			t.Errorf("%s: readOnlyHint %v, but its operations are all GETs: %v", tool.Name, a.ReadOnlyHint, allGet)
		}
		if a.DestructiveHint == nil || *a.DestructiveHint {
			t.Errorf("%s: destructiveHint must be set false (no tool deletes or overwrites)", tool.Name)
		}
		if RefusedToolName(tool.Name) || refusedTool.MatchString(tool.Name) {
			t.Errorf("%s looks like a decision tool", tool.Name)
		}
	}
	// submit_intent is idempotent by construction (same run, step, action:
	// same intent); recommend appends one recommendation per call.
	for _, tool := range Catalogue() {
		switch tool.Name {
		case "submit_intent":
			if !tool.Def().Annotations.IdempotentHint || !*tool.Def().Annotations.OpenWorldHint {
				t.Errorf("submit_intent: idempotent and open-world")
			}
		case "recommend":
			if tool.Def().Annotations.IdempotentHint {
				t.Errorf("recommend appends: not idempotent")
			}
		}
	}
	// No principal is offered a tool to decide.
	for _, k := range []string{KindBot, KindOrchestrator, KindOperator} {
		for _, tool := range Catalogue() {
			if tool.Offered(k) && slices.Contains(tool.Operations, "resolveIntent") {
				t.Errorf("%s offers %s the resolution route", tool.Name, k)
			}
		}
	}
}

// Every code a tool error carries is the API's (the ErrorCode enum), but
// the one for an API that did not answer.
func TestToolErrorCodesAreTheAPIs(t *testing.T) {
	_, codes := specOperations(t)
	for code := range hints {
		if code != CodeUnavailable && !slices.Contains(codes, code) {
			t.Errorf("hint for %q, which is not in the ErrorCode enum", code)
		}
	}
	for _, c := range []struct {
		err  error
		code string
	}{
		{&client.SubmitError{Err: &client.APIError{Status: 422, Code: "idempotency_key_reused"}}, "idempotency_key_reused"},
		{&client.APIError{Status: 403, Message: "Forbidden"}, "forbidden"},
		{&client.APIError{Status: 401}, "unauthorized"},
		{&client.RetryError{Attempts: 6, Last: &client.APIError{Status: 503, Code: "internal"}}, CodeUnavailable},
		{invalid("step", "x"), "invalid_field"},
	} {
		if got := toolError(c.err).Code; got != c.code {
			t.Errorf("%v -> %s, want %s", c.err, got, c.code)
		}
	}
}

// wait_seconds stays below API Gateway's 30 s integration timeout, in the
// schema a model reads as in the handler.
func TestWaitSecondsCapped(t *testing.T) {
	if MaxWaitSeconds >= 30 {
		t.Fatalf("MaxWaitSeconds %d must stay below API Gateway's 30 s", MaxWaitSeconds)
	}
	for _, tool := range Catalogue() {
		in := tool.Def().InputSchema.(*jsonschema.Schema)
		if p := in.Properties["wait_seconds"]; p != nil && (p.Maximum == nil || *p.Maximum != MaxWaitSeconds) {
			t.Errorf("%s: wait_seconds maximum %v, want %d", tool.Name, p.Maximum, MaxWaitSeconds)
		}
	}
	if err := (SubmitInput{RunID: "r", Step: "s", Kind: "reply", Payload: map[string]any{}, WaitSeconds: MaxWaitSeconds + 1}).validate(); err == nil {
		t.Fatal("wait_seconds above the cap accepted")
	}
}

// The key is the run, the step and the action: nothing else (no tool-call
// id, no payload) goes into it.
func TestKeyIsRunStepAction(t *testing.T) {
	if KeyFor("run", "step", "send") != client.KeyFor("run", "step", "send") {
		t.Fatal("not client.KeyFor(run, step, action)")
	}
	if KeyFor("run", "step", "send") == KeyFor("run", "step2", "send") || KeyFor("run", "step", "send") == KeyFor("run2", "step", "send") ||
		KeyFor("run", "step", "send") == KeyFor("run", "step", "edit") {
		t.Fatal("different steps share a key")
	}
}

// Decision tool names are refused for every principal, over a real
// Streamable HTTP round trip (without the API: the refusal happens first).
func TestDecisionToolsRefusedForEveryPrincipal(t *testing.T) {
	for _, kind := range []string{KindBot, KindOrchestrator, KindOperator} {
		srv := NewServer(client.New("http://127.0.0.1:1", "t"), Principal{Kind: kind, Name: "p"}, Options{})
		ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
		s, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"resolve_intent", "decide", "accept_success", "retry_intent", "abandon", "reconcile", "mark_succeeded"} {
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
			if err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			b, _ := json.Marshal(res.StructuredContent)
			if !res.IsError || !strings.Contains(string(b), `"code":"forbidden"`) {
				t.Errorf("%s %s: %v %s", kind, name, res.IsError, b)
			}
		}
		list, err := s.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range list.Tools {
			if RefusedToolName(tl.Name) {
				t.Errorf("%s offered %s", kind, tl.Name)
			}
		}
		s.Close()
		ts.Close()
	}
}

// A request that did not come through the authorizer is refused.
func TestHTTPHandlerNeedsTheAuthorizer(t *testing.T) {
	h := HTTPHandler(HTTPConfig{APIURL: func() string { return "http://127.0.0.1:1" }})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer x")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("without an authorizer context: %d", rec.Code)
	}
}

// Every tool's output schema admits its error results ({"error": ToolError}),
// as clients that validate structured content on isError results too (the
// official TypeScript SDK) require, and still refuses what is neither.
func TestOutputSchemasAdmitToolErrors(t *testing.T) {
	errContent := map[string]any{}
	b, _ := json.Marshal(errorResult(&ToolError{Code: "invalid_field", Status: 400, Message: "blank", Field: "step", Hint: "fix it"}).StructuredContent)
	if err := json.Unmarshal(b, &errContent); err != nil {
		t.Fatal(err)
	}
	for _, tool := range Catalogue() {
		raw, err := json.Marshal(tool.Def().OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		if s.Type != "object" {
			t.Errorf("%s: output schema type %q, MCP requires object", tool.Name, s.Type)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		if err := rs.Validate(errContent); err != nil {
			t.Errorf("%s: the output schema refuses a tool error: %v", tool.Name, err)
		}
		if err := rs.Validate(map[string]any{"error": map[string]any{"message": "no code"}}); err == nil {
			t.Errorf("%s: the output schema admits an error without a code", tool.Name)
		}
	}
}
