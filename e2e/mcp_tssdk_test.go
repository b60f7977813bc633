package e2e

// Issue 49: the MCP scenarios through the official TypeScript SDK's client
// (npm @modelcontextprotocol/sdk, pinned in adapters/mcpserver/_conformance),
// which validates every result's structured content against the tool's
// output schema, tool errors included: every refusal must still arrive as a
// tool error with its code, never as the SDK's -32602 protocol error.

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/mcpserver"
	"github.com/botharness/outbox/clients/clientstest"
	"github.com/botharness/outbox/core"
)

type tsCall struct {
	Token   string         `json:"token"`
	Session string         `json:"session,omitempty"`
	Name    string         `json:"name,omitempty"`
	Args    map[string]any `json:"args,omitempty"`
	CallID  string         `json:"callId,omitempty"`
	List    bool           `json:"list,omitempty"`
}

type tsResult struct {
	IsError           bool            `json:"isError"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	Text              string          `json:"text"`
	Tools             []string        `json:"tools"`
	ProtocolError     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"protocolError"`
}

// tsMCP runs the calls through the TypeScript SDK's client against the stack's /mcp.
func (e *env) tsMCP(calls ...tsCall) []tsResult {
	e.t.Helper()
	e.st.SetAPIURL(e.api.URL)
	node, _ := conformanceCLI(e.t)
	script := filepath.Join(clientstest.Root(), "adapters", "mcpserver", "_conformance", "tssdk.mjs")
	arg, _ := json.Marshal(map[string]any{"url": e.api.URL + "/mcp", "calls": calls})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, string(arg))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("tssdk.mjs: %v\n%s\n%s", err, out, stderr.String())
	}
	var res []tsResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil || len(res) != len(calls) {
		e.t.Fatalf("tssdk.mjs answered %s (%v)", out, err)
	}
	return res
}

// ok decodes a successful result's structured content.
func (r tsResult) ok(t *testing.T, v any) {
	t.Helper()
	if r.ProtocolError != nil || r.IsError {
		t.Fatalf("want a result, got %+v %s", r.ProtocolError, r.Text)
	}
	if err := json.Unmarshal(r.StructuredContent, v); err != nil {
		t.Fatalf("structured content %s: %v", r.StructuredContent, err)
	}
}

// toolErr asserts a tool error (isError, not a protocol error) and returns its code and field.
func (r tsResult) toolErr(t *testing.T) (code, field, text string) {
	t.Helper()
	if r.ProtocolError != nil {
		t.Fatalf("the TypeScript SDK's client answered a protocol error instead of the tool error: %+v", *r.ProtocolError)
	}
	if !r.IsError {
		t.Fatalf("want a tool error, got %s", r.Text)
	}
	var body struct {
		Error mcpserver.ToolError `json:"error"`
	}
	if err := json.Unmarshal(r.StructuredContent, &body); err != nil || body.Error.Code == "" {
		t.Fatalf("tool error without a code: %s %s", r.StructuredContent, r.Text)
	}
	return body.Error.Code, body.Error.Field, r.Text
}

func TestMCPThroughTypeScriptSDK(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	e.faults(`{"account":"acct-ts-u","capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"}]}`)

	// The retried turn: three sessions, three tool-call ids, one run and step.
	args := submitArgs("acct-ts", "run-ts", "reply-to-msg-7", "your table is booked", 5)
	changed := submitArgs("acct-ts", "run-ts", "reply-to-msg-7", "your table is booked for 8", 0)
	blank := submitArgs("acct-ts", "run-ts", "  ", "hi", 0)
	missing := submitArgs("acct-ts", "run-ts", "", "hi", 0)
	delete(missing, "step")
	res := e.tsMCP(
		tsCall{Token: botToken, Session: "a", List: true},
		tsCall{Token: botToken, Session: "a", Name: "submit_intent", Args: args, CallID: "call_a1"},
		tsCall{Token: botToken, Session: "b", Name: "submit_intent", Args: args, CallID: "call_b2"},
		tsCall{Token: botToken, Session: "c", Name: "submit_intent", Args: args, CallID: "call_c3"},
		tsCall{Token: botToken, Session: "c", Name: "submit_intent", Args: changed, CallID: "call_d4"},
		tsCall{Token: botToken, Session: "c", Name: "submit_intent", Args: blank, CallID: "call_e5"},
		tsCall{Token: botToken, Session: "c", Name: "submit_intent", Args: missing, CallID: "call_e6"},
		tsCall{Token: botToken, Session: "c", Name: "submit_intent", Args: submitArgs("acct-ts-u", "run-u", "pay-invoice-9", "pay invoice 9", 15)},
		tsCall{Token: bot2Token, Session: "d", List: true},
		tsCall{Token: orchToken, Session: "o", List: true},
		tsCall{Token: orchToken, Session: "o", Name: "submit_intent", Args: submitArgs("acct-ts", "run-o", "s2", "x", 0)},
	)
	if want := []string{"get_intent", "submit_intent", "wait_for_intent"}; !slices.Equal(res[0].Tools, want) || !slices.Equal(res[8].Tools, want) {
		t.Fatalf("bot tools %v / %v, want %v", res[0].Tools, res[8].Tools, want)
	}
	if want := []string{"get_evidence", "list_needs_human", "recommend"}; !slices.Equal(res[9].Tools, want) {
		t.Fatalf("orchestrator tools %v, want %v", res[9].Tools, want)
	}
	var first mcpserver.IntentOutcome
	for i, r := range res[1:4] {
		var o mcpserver.IntentOutcome
		r.ok(t, &o)
		if i == 0 {
			first = o
		}
		if o.IntentID != first.IntentID || o.Replayed != (i > 0) {
			t.Fatalf("try %d: intent %s replayed=%v, first %s", i+1, o.IntentID, o.Replayed, first.IntentID)
		}
	}
	if code, _, text := res[4].toolErr(t); code != "idempotency_key_reused" || !strings.Contains(text, "new step") {
		t.Fatalf("changed payload under a used step: %s %q", code, text)
	}
	if code, field, text := res[5].toolErr(t); code != "invalid_field" || field != "step" || !strings.Contains(text, "same run_id and step") {
		t.Fatalf("blank step: %s %s %q", code, field, text)
	}
	if code, _, text := res[6].toolErr(t); code != "invalid_field" || !strings.Contains(text, "step") {
		t.Fatalf("missing step: %s %q", code, text)
	}
	var u mcpserver.IntentOutcome
	res[7].ok(t, &u)
	if u.Status != string(core.StatusNeedsHuman) || u.Outcome != mcpserver.OutcomeUnknown || !strings.HasPrefix(res[7].Text, "UNKNOWN OUTCOME") {
		t.Fatalf("uncertain outcome: %s / %s: %s", u.Status, u.Outcome, res[7].Text)
	}
	if code, _, _ := res[10].toolErr(t); code != "forbidden" {
		t.Fatalf("orchestrator submit_intent: %s", code)
	}

	// Reading, the orchestrator's tools, and every refusal of a decision.
	calls := []tsCall{
		{Token: bot2Token, Session: "d", Name: "get_intent", Args: map[string]any{"intent_id": first.IntentID}},
		{Token: bot2Token, Session: "d", Name: "list_needs_human", Args: map[string]any{}},
		{Token: botToken, Session: "a", Name: "get_intent", Args: map[string]any{"intent_id": first.IntentID}},
		{Token: botToken, Session: "a", Name: "wait_for_intent", Args: map[string]any{"intent_id": u.IntentID, "wait_seconds": 1}},
		{Token: orchToken, Session: "o", Name: "list_needs_human", Args: map[string]any{}},
		{Token: orchToken, Session: "o", Name: "get_evidence", Args: map[string]any{"intent_id": u.IntentID}},
		{Token: orchToken, Session: "o", Name: "get_evidence", Args: map[string]any{"intent_id": "it_nope"}},
		{Token: orchToken, Session: "o", Name: "recommend", Args: map[string]any{"intent_id": u.IntentID, "decision": "accept-success",
			"summary": "the provider's dashboard lists the payment", "reason": "one effect at the provider"}},
		{Token: orchToken, Session: "o", Name: "recommend", Args: map[string]any{"intent_id": u.IntentID}},
	}
	const refusalsFrom = 9
	for _, tok := range []string{orchToken, opToken, botToken} {
		for _, name := range decisionToolNames {
			calls = append(calls, tsCall{Token: tok, Session: "r", Name: name, Args: map[string]any{"intent_id": u.IntentID, "decision": "accept-success", "reason": "x"}})
		}
	}
	res = e.tsMCP(calls...)
	if code, _, _ := res[0].toolErr(t); code != "not_found" {
		t.Fatalf("another bot's intent: %s", code)
	}
	if code, _, _ := res[1].toolErr(t); code != "forbidden" {
		t.Fatalf("a bot listing needs-human: %s", code)
	}
	var own mcpserver.IntentOutcome
	res[2].ok(t, &own)
	if own.IntentID != first.IntentID {
		t.Fatalf("get_intent: %+v", own)
	}
	var w mcpserver.IntentOutcome
	res[3].ok(t, &w)
	if w.Outcome != mcpserver.OutcomeUnknown || !strings.Contains(w.Message, "do not retry") {
		t.Fatalf("wait_for_intent: %s %s", w.Outcome, w.Message)
	}
	var list mcpserver.ListOutput
	res[4].ok(t, &list)
	if !slices.ContainsFunc(list.Items, func(it mcpserver.NeedsHumanItem) bool { return it.IntentID == u.IntentID }) {
		t.Fatalf("list_needs_human %+v lacks %s", list.Items, u.IntentID)
	}
	var ev mcpserver.Evidence
	res[5].ok(t, &ev)
	if ev.Status != string(core.StatusNeedsHuman) || len(ev.Attempts) == 0 || strings.Contains(string(res[5].StructuredContent), "pay invoice 9") {
		t.Fatalf("get_evidence: %+v", ev)
	}
	if code, _, _ := res[6].toolErr(t); code != "not_found" {
		t.Fatalf("get_evidence of no intent: %s", code)
	}
	var rec mcpserver.RecommendOutput
	res[7].ok(t, &rec)
	if !rec.Recorded {
		t.Fatalf("recommend: %+v", rec)
	}
	if code, _, _ := res[8].toolErr(t); code != "invalid_field" {
		t.Fatalf("recommend without a decision: %s", code)
	}
	for i, r := range res[refusalsFrom:] {
		if code, _, text := r.toolErr(t); code != "forbidden" || !strings.Contains(text, "only a human") {
			t.Fatalf("%s: %s %q", calls[refusalsFrom+i].Name, code, text)
		}
	}
	if got := e.intent(u.IntentID); got.Status != core.StatusNeedsHuman {
		t.Fatalf("the uncertain intent moved to %s", got.Status)
	}
	e.waitStatus(first.IntentID, 20*time.Second, core.StatusSucceeded)
	e.assertEffectsStay(first.IntentID, 1, 300*time.Millisecond)
	e.assertEffectsStay(u.IntentID, 1, 100*time.Millisecond)
}
