// Package mcpserver is the agents' front door: a Model Context Protocol
// server whose tools are thin adapters over the outbox's public HTTP API,
// called through the Go client (client/) with the caller's own bearer token.
// It holds no table access: the API authorises every call again, so the
// API's 403 stays the second line behind the tool list offered here.
//
// A bot gets submit_intent, get_intent and wait_for_intent; an orchestrator
// (and an operator) gets list_needs_human, get_evidence and recommend. No
// tool decides, accepts success, retries or abandons: a call naming such a
// tool is refused for every principal (RefusedToolName), a human decides in
// the console.
//
// submit_intent derives the idempotency key from what the agent declares
// stable — its run and its logical step — and the action
// (client.KeyFor(run_id, step, action)), never from the per-turn tool-call
// id, so a turn retried by the agent's framework replays the same intent.
//
// Served over Streamable HTTP at /mcp in stateless mode (HTTPHandler,
// LambdaHandler) behind the API's authorizer, and over stdio
// (cmd/outbox-mcp).
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/botharness/outbox/client"
)

// Principal kinds, as the authorizer names them (core.Principal*).
const (
	KindBot          = "bot"
	KindOperator     = "operator"
	KindOrchestrator = "orchestrator"
)

// Principal is the caller: the kind decides which tools are offered.
type Principal struct {
	Kind string
	Name string
}

// ServerName is the MCP implementation name the server reports.
const ServerName = "outbox"

// Tool describes one MCP tool: who is offered it and which documented API
// operations (operationId in api/openapi.json) it calls. The catalogue
// (Catalogue) is the one list; a test checks every entry against the spec.
type Tool struct {
	Name string
	// Kinds are the principal kinds offered the tool.
	Kinds []string
	// Operations are the API operationIds the tool calls.
	Operations []string
	def        *mcp.Tool
	handler    func(d *deps) mcp.ToolHandler
}

// Offered reports whether kind is offered the tool.
func (t Tool) Offered(kind string) bool { return slices.Contains(t.Kinds, kind) }

// Def is the tool's MCP definition (name, description, schemas, annotations).
func (t Tool) Def() *mcp.Tool { return t.def }

type deps struct {
	c   *client.Client
	p   Principal
	log *slog.Logger
}

// refusedTool matches the names of tools that would decide on an intent.
// No such tool exists; a call naming one is answered with a tool error
// (forbidden) for every principal, so a model reads why and what to do.
var refusedTool = regexp.MustCompile(`(?i)(decide|decision|resolve|resolution|accept|retry|abandon|reconcile|approve|override|mark_?succe)`)

// RefusedToolName reports whether name is a decision tool the server refuses.
func RefusedToolName(name string) bool {
	if _, ok := catalogueByName()[name]; ok {
		return false
	}
	return refusedTool.MatchString(name)
}

// Catalogue is every tool the server has, in listing order.
func Catalogue() []Tool { return catalogue }

func catalogueByName() map[string]Tool {
	m := make(map[string]Tool, len(catalogue))
	for _, t := range catalogue {
		m[t.Name] = t
	}
	return m
}

// Options configure a server.
type Options struct {
	Version string // reported in initialize (default "dev")
	Log     *slog.Logger
}

// NewServer returns an MCP server offering p's tools, each calling the API
// through c (which carries p's token).
func NewServer(c *client.Client, p Principal, o Options) *mcp.Server {
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	o.Log = quiet(o.Log)
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Title: "Outbox", Version: o.Version}, &mcp.ServerOptions{
		Instructions: instructions(p.Kind),
		Logger:       o.Log,
		// The tool list depends on the caller's token: no shared cache may
		// serve one principal's list to another.
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = "private" },
	})
	d := &deps{c: c, p: p, log: o.Log}
	for _, t := range catalogue {
		if t.Offered(p.Kind) {
			s.AddTool(t.def, t.handler(d))
		}
	}
	s.AddReceivingMiddleware(guard(p))
	return s
}

// quiet keeps the SDK's per-session Info lines (three per stateless
// request) out of the logs: warnings and errors only.
func quiet(l *slog.Logger) *slog.Logger {
	if _, ok := l.Handler().(warnOnly); ok {
		return l
	}
	return slog.New(warnOnly{l.Handler()})
}

type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}
func (w warnOnly) WithAttrs(a []slog.Attr) slog.Handler { return warnOnly{w.Handler.WithAttrs(a)} }
func (w warnOnly) WithGroup(n string) slog.Handler      { return warnOnly{w.Handler.WithGroup(n)} }

func instructions(kind string) string {
	switch kind {
	case KindBot:
		return "Outbox: every message or action you send to the outside world goes through submit_intent. " +
			"Give each logical step of your run a stable step name and reuse the same run_id and step when you retry it: " +
			"it is then sent at most once, whatever your tool-call ids. An unknown outcome goes to a human; never re-send it."
	default:
		return "Outbox, for orchestrators: list_needs_human shows what waits for a human, get_evidence reads an intent's attempts, " +
			"reconciliation results and webhook bindings, recommend records your recommendation. Only a human decides; no tool decides."
	}
}

// guard answers tools/call for a decision tool, or for a tool of another
// principal, with a tool error a model can read, before the SDK's "unknown
// tool" protocol error.
func guard(p Principal) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			ctr, ok := req.(*mcp.CallToolRequest)
			if !ok || ctr.Params == nil {
				return next(ctx, method, req)
			}
			name := ctr.Params.Name
			if RefusedToolName(name) {
				return errorResult(&ToolError{Code: "forbidden", Status: 403,
					Message: fmt.Sprintf("refused: %q would decide on an intent, and no MCP tool decides, accepts success, retries or abandons — "+
						"only a human does, in the operators' console. Use recommend to record what you would do.", name)}), nil
			}
			if t, ok := catalogueByName()[name]; ok && !t.Offered(p.Kind) {
				return errorResult(&ToolError{Code: "forbidden", Status: 403,
					Message: fmt.Sprintf("refused: %s is for %s principals; this token is a %s's", name, strings.Join(t.Kinds, " and "), p.Kind)}), nil
			}
			return next(ctx, method, req)
		}
	}
}

// ToolError is a tool's failure, carried as an MCP tool error (isError)
// with the API's machine-readable code (the ErrorCode enum of
// api/openapi.json) in its structured content.
type ToolError struct {
	Code    string `json:"code"`
	Status  int    `json:"status,omitempty"` // the API's HTTP status, when it answered
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Hint says what the model should do next.
	Hint string `json:"hint,omitempty"`
}

func (e *ToolError) Error() string {
	s := "error " + e.Code + ": " + e.Message
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	if e.Hint != "" {
		s += " — " + e.Hint
	}
	return s
}

// errorSchema is the structured content of every tool error, {"error": ToolError}.
var errorSchema = func() *jsonschema.Schema {
	s, err := jsonschema.For[struct {
		Error ToolError `json:"error"`
	}](nil)
	if err != nil {
		panic(err)
	}
	return s
}()

// admitErrors makes a tool's output schema admit its error results too:
// {"type":"object","anyOf":[<the tool's result>, {"error": ToolError}]}.
// MCP clients that validate structured content against the output schema
// whenever it is present, isError or not (the official TypeScript SDK's
// Client.callTool), would otherwise answer every refusal with a protocol
// error ("Structured content does not match the tool's output schema")
// instead of the tool error with its code (issue 49).
func admitErrors(out *jsonschema.Schema) *jsonschema.Schema {
	if len(out.Defs) > 0 || len(out.Definitions) > 0 {
		panic("mcpserver: an output schema with $defs cannot be nested under anyOf") // its "#/$defs/..." refs are root-relative
	}
	return &jsonschema.Schema{Type: "object", AnyOf: []*jsonschema.Schema{out, errorSchema}}
}

func errorResult(e *ToolError) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: e.Error()}},
		StructuredContent: map[string]any{"error": e},
	}
}

// define builds a tool whose handler decodes In, runs f and encodes Out as
// structured content (with a text rendering first). Input validation is the
// handler's own (validate), so a model gets messages it can act on.
func define[In, Out any](name, title, desc string, ann mcp.ToolAnnotations, kinds, ops []string,
	tweak func(in *jsonschema.Schema), f func(ctx context.Context, d *deps, in In) (Out, string, error)) Tool {
	inSchema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(err)
	}
	if tweak != nil {
		tweak(inSchema)
	}
	outSchema, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(err)
	}
	outSchema = admitErrors(outSchema)
	ann.Title = title
	def := &mcp.Tool{Name: name, Title: title, Description: desc, InputSchema: inSchema, OutputSchema: outSchema, Annotations: &ann}
	return Tool{Name: name, Kinds: kinds, Operations: ops, def: def, handler: func(d *deps) mcp.ToolHandler {
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in In
			args := req.Params.Arguments
			if len(args) == 0 || string(args) == "null" {
				args = json.RawMessage("{}")
			}
			dec := json.NewDecoder(strings.NewReader(string(args)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return errorResult(&ToolError{Code: "invalid_field", Message: "the arguments do not match the tool's input schema: " + err.Error(),
					Hint: "send the arguments the input schema names, with their types"}), nil
			}
			out, text, err := f(ctx, d, in)
			if err != nil {
				return errorResult(toolError(err)), nil
			}
			b, err := json.Marshal(out)
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: text}, &mcp.TextContent{Text: string(b)}},
				StructuredContent: json.RawMessage(b),
			}, nil
		}
	}}
}

func ptr[T any](v T) *T { return &v }

// Annotation sets, truthfully per tool.
var (
	readOnly = mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
)
