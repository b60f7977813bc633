package e2e

// --- issue 29: the agents' front door. A real MCP client (the official Go
// SDK's) talks Streamable HTTP to /mcp behind the local gateway and its
// authorizer, and stdio to the cmd/outbox-mcp binary; effects are counted at
// the sandbox.

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/botharness/outbox/adapters/mcpserver"
	"github.com/botharness/outbox/core"
)

// bearerTransport adds a bearer token to every request, as an MCP client
// configured with an Authorization header does.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpSession connects a new MCP client session to the stack's /mcp with token.
func (e *env) mcpSession(token string) *mcp.ClientSession {
	e.t.Helper()
	e.st.SetAPIURL(e.api.URL)
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   e.api.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: token, next: http.DefaultTransport}},
	}, nil)
	if err != nil {
		e.t.Fatalf("mcp connect: %v", err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

// toolCall is one tool call of a model's turn: toolCallID is the per-turn id
// agent frameworks assign (it travels in _meta and the server ignores it).
func callTool(t *testing.T, s *mcp.ClientSession, toolCallID, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if toolCallID != "" {
		p.Meta = mcp.Meta{"toolCallId": toolCallID}
	}
	res, err := s.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// structured decodes a result's structured content.
func structured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

func resultText(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

// toolErr asserts res is a tool error and returns its code and field.
func toolErr(t *testing.T, res *mcp.CallToolResult) (code, field, text string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a tool error, got %s", resultText(res))
	}
	var body struct {
		Error mcpserver.ToolError `json:"error"`
	}
	structured(t, res, &body)
	if body.Error.Code == "" {
		t.Fatalf("tool error without a code: %s", resultText(res))
	}
	return body.Error.Code, body.Error.Field, resultText(res)
}

func submitArgs(acct, run, step, text string, wait int) map[string]any {
	return map[string]any{
		"run_id": run, "step": step, "kind": "reply", "provider": "sandbox", "account": acct,
		"action": testAction, "target": "chan-1", "payload": map[string]any{"text": text},
		"grant": map[string]any{"id": "g-1", "version": 1}, "wait_seconds": wait,
	}
}

func toolNames(t *testing.T, s *mcp.ClientSession) []string {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func TestMCPRetriedTurnIsOneIntentOneEffect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	args := submitArgs("acct-mcp", "run-7", "reply-to-msg-42", "your table is booked", 5)

	// The agent's turn is retried 3 times (a timeout, a restart, a
	// framework re-running the node), each with a new tool-call id and a
	// new MCP session, and the same run and step.
	var first mcpserver.IntentOutcome
	for i, callID := range []string{"call_a1", "call_b2", "call_c3"} {
		res := callTool(t, e.mcpSession(botToken), callID, "submit_intent", args)
		if res.IsError {
			t.Fatalf("try %d: %s", i+1, resultText(res))
		}
		var o mcpserver.IntentOutcome
		structured(t, res, &o)
		if i == 0 {
			first = o
			if o.Replayed {
				t.Fatalf("the first call says replayed")
			}
		} else {
			if o.IntentID != first.IntentID || !o.Replayed {
				t.Fatalf("try %d: intent %s replayed=%v, want the first call's %s replayed", i+1, o.IntentID, o.Replayed, first.IntentID)
			}
		}
		if o.IdempotencyKey != mcpserver.KeyFor("run-7", "reply-to-msg-42", testAction) {
			t.Fatalf("key %q is not derived from run, step and action", o.IdempotencyKey)
		}
	}
	in := e.waitStatus(first.IntentID, 10*time.Second, core.StatusSucceeded)
	if n := e.itemCount(); n != 1 {
		t.Fatalf("%d intents in the table, want 1", n)
	}
	e.assertEffectsStay(in.ID, 1, 500*time.Millisecond)

	// A model that changes the payload under the same step is refused with
	// the reused-key code, and nothing more is sent.
	changed := submitArgs("acct-mcp", "run-7", "reply-to-msg-42", "your table is booked for 8", 0)
	code, _, text := toolErr(t, callTool(t, e.mcpSession(botToken), "call_d4", "submit_intent", changed))
	if code != "idempotency_key_reused" || !strings.Contains(text, "new step") {
		t.Fatalf("changed payload: code %s, %q", code, text)
	}
	// A blank or missing step is refused with a message a model can act on.
	for _, step := range []any{"  ", nil} {
		a := submitArgs("acct-mcp", "run-7", "", "hi", 0)
		if step == nil {
			delete(a, "step")
		} else {
			a["step"] = step
		}
		code, field, text := toolErr(t, callTool(t, e.mcpSession(botToken), "call_e5", "submit_intent", a))
		if step == nil {
			// The schema requires step; the handler's own check still names it.
			if !strings.Contains(text, "step") {
				t.Fatalf("missing step: %s", text)
			}
			continue
		}
		if code != "invalid_field" || field != "step" || !strings.Contains(text, "same run_id and step") {
			t.Fatalf("blank step: code %s field %s: %s", code, field, text)
		}
	}
	e.assertEffectsStay(in.ID, 1, 300*time.Millisecond)
	if n := e.itemCount(); n != 1 {
		t.Fatalf("%d intents after refused calls, want 1", n)
	}
}

// decisionToolNames are names a model might try in order to decide.
var decisionToolNames = []string{"resolve_intent", "decide", "accept_success", "retry_intent", "abandon_intent", "reconcile_intent", "resolve"}

func TestMCPUncertainOutcomeGoesToAHumanAndNoToolDecides(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	e.faults(`{"account":"acct-mcp-u","capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"}]}`)
	res := callTool(t, e.mcpSession(botToken), "call_1", "submit_intent", submitArgs("acct-mcp-u", "run-u", "pay-invoice-9", "pay invoice 9", 15))
	if res.IsError {
		t.Fatal(resultText(res))
	}
	var o mcpserver.IntentOutcome
	structured(t, res, &o)
	if o.Status != string(core.StatusNeedsHuman) || o.Outcome != mcpserver.OutcomeUnknown {
		t.Fatalf("uncertain outcome answered %s / %s: %s", o.Status, o.Outcome, o.Message)
	}
	for _, s := range []string{o.Message, resultText(res)} {
		if !strings.Contains(s, mcpserver.UnknownOutcomeWords) {
			t.Fatalf("the answer does not say %q: %s", mcpserver.UnknownOutcomeWords, s)
		}
	}
	if !strings.HasPrefix(resultText(res), "UNKNOWN OUTCOME") {
		t.Fatalf("the text does not lead with the unknown outcome: %s", resultText(res))
	}
	id := o.IntentID
	// wait_for_intent says the same.
	res = callTool(t, e.mcpSession(botToken), "call_2", "wait_for_intent", map[string]any{"intent_id": id, "wait_seconds": 1})
	structured(t, res, &o)
	if o.Outcome != mcpserver.OutcomeUnknown || !strings.Contains(o.Message, "do not retry") {
		t.Fatalf("wait_for_intent: %s %s", o.Outcome, o.Message)
	}

	orch := e.mcpSession(orchToken)
	names := toolNames(t, orch)
	if want := []string{"get_evidence", "list_needs_human", "recommend"}; !slices.Equal(names, want) {
		t.Fatalf("orchestrator tools %v, want %v", names, want)
	}
	// List: it is there.
	var list mcpserver.ListOutput
	structured(t, callTool(t, orch, "", "list_needs_human", map[string]any{}), &list)
	if !slices.ContainsFunc(list.Items, func(it mcpserver.NeedsHumanItem) bool { return it.IntentID == id && it.Bot == testBot }) {
		t.Fatalf("list_needs_human %+v lacks %s", list.Items, id)
	}
	// Evidence: the attempt timeline, without the payload body.
	res = callTool(t, orch, "", "get_evidence", map[string]any{"intent_id": id})
	var ev mcpserver.Evidence
	structured(t, res, &ev)
	if ev.Status != string(core.StatusNeedsHuman) || len(ev.Attempts) == 0 || ev.PayloadHash == "" {
		t.Fatalf("evidence: %+v", ev)
	}
	if raw, _ := json.Marshal(res.StructuredContent); strings.Contains(string(raw), "pay invoice 9") || strings.Contains(resultText(res), "pay invoice 9") {
		t.Fatalf("get_evidence shows the payload body: %s", raw)
	}
	// Recommend: recorded, nothing changed.
	var rec mcpserver.RecommendOutput
	res = callTool(t, orch, "", "recommend", map[string]any{"intent_id": id, "decision": "accept-success",
		"summary": "the provider's dashboard lists the payment", "reason": "one effect at the provider"})
	structured(t, res, &rec)
	if !rec.Recorded || rec.Status != string(core.StatusNeedsHuman) {
		t.Fatalf("recommend: %+v %s", rec, resultText(res))
	}
	in := e.intent(id)
	if in.Status != core.StatusNeedsHuman || !slices.ContainsFunc(in.Resolutions, func(r core.Resolution) bool {
		return r.Recommend && r.By == "orc-1" && r.Reason == mcpserver.RecommendationText("the provider's dashboard lists the payment", "one effect at the provider")
	}) {
		t.Fatalf("after recommend: %s %+v", in.Status, in.Resolutions)
	}

	// Every attempt to decide through MCP is refused, for every principal...
	for _, tok := range []string{orchToken, opToken, botToken} {
		s := e.mcpSession(tok)
		for _, n := range toolNames(t, s) {
			if mcpserver.RefusedToolName(n) {
				t.Fatalf("token %s is offered decision tool %s", tok, n)
			}
		}
		for _, name := range decisionToolNames {
			code, _, text := toolErr(t, callTool(t, s, "", name, map[string]any{"intent_id": id, "decision": "accept-success", "reason": "x"}))
			if code != "forbidden" || !strings.Contains(text, "only a human") {
				t.Fatalf("%s via MCP with %s: %s %s", name, tok, code, text)
			}
		}
	}
	// ...and through the API (the second line).
	r := e.do("POST", "/v1/admin/intents/"+id+"/resolution", orchToken, map[string]string{"Idempotency-Key": "orc-decides"},
		`{"decision":"accept-success","reason":"I am sure"}`)
	if r.status != http.StatusForbidden || r.errorCode() != "forbidden" {
		t.Fatalf("orchestrator resolution via the API: %d %s", r.status, r.body)
	}
	if got := e.intent(id); got.Status != core.StatusNeedsHuman {
		t.Fatalf("status moved to %s", got.Status)
	}
	e.assertEffectsStay(id, 1, 300*time.Millisecond)
}

func TestMCPToolsPerPrincipalAndOwnIntentsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	bot1, bot2 := e.mcpSession(botToken), e.mcpSession(bot2Token)
	if want := []string{"get_intent", "submit_intent", "wait_for_intent"}; !slices.Equal(toolNames(t, bot1), want) {
		t.Fatalf("bot tools %v, want %v", toolNames(t, bot1), want)
	}
	var o mcpserver.IntentOutcome
	structured(t, callTool(t, bot1, "c1", "submit_intent", submitArgs("acct-own", "run-o", "s1", "mine", 0)), &o)
	// Without wait_seconds the answer is the accepted intent, with how to check it.
	if o.Outcome != mcpserver.OutcomePending || !strings.Contains(o.Check, "wait_for_intent") || !strings.Contains(o.Message, "To check") {
		t.Fatalf("submit without waiting: %+v", o)
	}
	// bot-2 cannot read bot-1's intent (the API's 404), nor use orchestrator tools.
	if code, _, _ := toolErr(t, callTool(t, bot2, "c2", "get_intent", map[string]any{"intent_id": o.IntentID})); code != "not_found" {
		t.Fatalf("another bot's intent: %s", code)
	}
	if code, _, _ := toolErr(t, callTool(t, bot2, "c3", "list_needs_human", map[string]any{})); code != "forbidden" {
		t.Fatalf("a bot listing needs-human: %s", code)
	}
	// bot-1 reads its own.
	res := callTool(t, bot1, "c4", "get_intent", map[string]any{"intent_id": o.IntentID})
	if res.IsError {
		t.Fatal(resultText(res))
	}
	// An orchestrator is not offered submit_intent and is refused it.
	if code, _, _ := toolErr(t, callTool(t, e.mcpSession(orchToken), "c5", "submit_intent", submitArgs("acct-own", "run-o", "s2", "x", 0))); code != "forbidden" {
		t.Fatalf("orchestrator submit: %s", code)
	}
	// No token, or a bad one: the gateway's authorizer answers, as for the API.
	for tok, want := range map[string]int{"": http.StatusUnauthorized, "not-a-token": http.StatusForbidden} {
		r := e.do("POST", "/mcp", tok, map[string]string{"Accept": "application/json, text/event-stream"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if r.status != want {
			t.Fatalf("token %q: %d %s", tok, r.status, r.body)
		}
	}
}

func TestMCPStdioBinary(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	bin := buildBinary(t, "cmd/outbox-mcp")
	connect := func(token string) *mcp.ClientSession {
		cmd := exec.Command(bin)
		cmd.Env = append(cmd.Environ(), "OUTBOX_API_URL="+e.api.URL, "OUTBOX_TOKEN="+token)
		s, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-stdio", Version: "1"}, nil).
			Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("stdio connect: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	bot := connect(botToken)
	if err := bot.Ping(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := bot.InitializeResult().ServerInfo.Name; got != mcpserver.ServerName {
		t.Fatalf("server name %q", got)
	}
	if want := []string{"get_intent", "submit_intent", "wait_for_intent"}; !slices.Equal(toolNames(t, bot), want) {
		t.Fatalf("stdio bot tools %v", toolNames(t, bot))
	}
	var o mcpserver.IntentOutcome
	for _, callID := range []string{"call_x", "call_y"} {
		structured(t, callTool(t, bot, callID, "submit_intent", submitArgs("acct-stdio", "run-s", "s1", "over stdio", 10)), &o)
	}
	if !o.Replayed || o.Outcome != mcpserver.OutcomeSucceeded {
		t.Fatalf("stdio submit: %+v", o)
	}
	e.assertEffectsStay(o.IntentID, 1, 300*time.Millisecond)
	if want := []string{"get_evidence", "list_needs_human", "recommend"}; !slices.Equal(toolNames(t, connect(orchToken)), want) {
		t.Fatalf("stdio orchestrator tools")
	}
	// A refused token ends the binary with a clear message, before serving.
	cmd := exec.Command(bin)
	cmd.Env = append(cmd.Environ(), "OUTBOX_API_URL="+e.api.URL, "OUTBOX_TOKEN=not-a-token")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refused the token") {
		t.Fatalf("bad token: %v %s", err, out)
	}
}

// The example agent, built and run as a user would against /mcp: three
// steps, four tool calls (one turn retried with a new tool-call id), three
// intents and three effects; run again, every step replays.
func TestExampleAgent(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t, "examples/agent")
	e := newEnv(t, options{})
	e.st.SetAPIURL(e.api.URL)
	run := func() string {
		t.Helper()
		return runExample(t, e, bin, "acct-agent")
	}
	out := run()
	if !strings.Contains(out, "3 steps, 4 tool calls, 3 intents") || strings.Count(out, "succeeded") != 3 || strings.Count(out, "replayed") != 1 {
		t.Fatalf("first run:\n%s", out)
	}
	if out := run(); strings.Count(out, "replayed") != 3 {
		t.Fatalf("second run must replay the three steps:\n%s", out)
	}
	if n := e.effects("?account=acct-agent"); n != 3 {
		t.Fatalf("the sandbox performed %d effects, want 3", n)
	}
}
