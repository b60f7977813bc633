// Command agent is a runnable example of an LLM agent using the outbox
// through its MCP server — without a model: a scripted "model" decides
// which tool to call, the way a model would, and the loop plays the agent
// framework (new tool-call ids every turn, a turn retried after a lost
// answer). Start the outbox with `make run`, then, in another terminal:
//
//	go run ./examples/agent              # three user messages, one reply each
//	go run ./examples/agent              # again: every step replays, nothing is sent twice
//	go run ./examples/agent -run other   # a new run sends new replies
//
// It talks Streamable HTTP to /mcp with the bot token. The framework
// retries the second turn with a new tool-call id after "losing" the first
// answer; the tool's key is the run, the step and the action, so the retry
// is the same intent: one effect per logical step.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// scriptedModel answers a user message with one tool call, as a model
// would: it names its run and the logical step ("reply-to-<message id>").
func scriptedModel(run, account, grant string, msg userMessage) (string, map[string]any) {
	return "submit_intent", map[string]any{
		"run_id": run, "step": "reply-to-" + msg.id, "kind": "reply",
		"provider": "sandbox", "account": account, "action": "send_message", "target": "chan-1",
		"payload":      map[string]any{"text": "Re: " + msg.text},
		"grant":        map[string]any{"id": grant, "version": 1},
		"wait_seconds": 10,
	}
}

type userMessage struct{ id, text string }

type outcome struct {
	IntentID string `json:"intent_id"`
	Status   string `json:"status"`
	Outcome  string `json:"outcome"`
	Message  string `json:"message"`
	Replayed bool   `json:"replayed"`
}

func main() {
	addr := strings.TrimSpace(os.Getenv("OUTBOX_HTTP_ADDR"))
	if addr == "" {
		addr = "127.0.0.1:4000"
	}
	api := flag.String("api", env("OUTBOX_API_URL", "http://"+addr), "outbox API base URL (the MCP endpoint is <api>/mcp)")
	token := flag.String("token", env("OUTBOX_BOT_TOKEN", "dev-bot-token"), "bot bearer token")
	run := flag.String("run", "agent-demo", "the agent's run (thread) id: a new one sends new replies")
	account := flag.String("account", "acct-1", "sandbox account")
	grant := flag.String("grant", "dev-grant", "grant id (version 1)")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	connect := func() *mcp.ClientSession {
		s, err := mcp.NewClient(&mcp.Implementation{Name: "example-agent", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: strings.TrimRight(*api, "/") + "/mcp", HTTPClient: &http.Client{Transport: bearer{*token}}}, nil)
		if err != nil {
			fail("connect to %s/mcp: %v", *api, err)
		}
		return s
	}
	session := connect()
	defer session.Close()

	inbox := []userMessage{{"m1", "is my table booked?"}, {"m2", "can I bring a dog?"}, {"m3", "thanks!"}}
	calls, intents := 0, map[string]bool{}
	for turn, msg := range inbox {
		name, args := scriptedModel(*run, *account, *grant, msg)
		tries := 1
		if turn == 1 {
			tries = 2 // the framework loses the first answer and re-runs the turn
		}
		for try := 1; try <= tries; try++ {
			calls++
			callID := fmt.Sprintf("call_%d_%d_%d", time.Now().UnixNano()%1e6, turn, try) // new every turn, like a framework's
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{"toolCallId": callID}})
			if err != nil {
				fail("%s: %v", callID, err)
			}
			if try < tries {
				fmt.Printf("%s  %s(step %s): answer lost; the framework retries the turn with a new tool-call id\n", callID, name, args["step"])
				session.Close()
				session = connect() // a restarted agent process, a new MCP session
				continue
			}
			var o outcome
			b, _ := json.Marshal(res.StructuredContent)
			_ = json.Unmarshal(b, &o)
			if res.IsError {
				fail("%s: tool error: %s", callID, text(res))
			}
			intents[o.IntentID] = true
			replayed := ""
			if o.Replayed {
				replayed = ", replayed (already held: nothing sent again)"
			}
			fmt.Printf("%s  %s(step %s): intent %s %s%s\n", callID, name, args["step"], o.IntentID, o.Outcome, replayed)
			if o.Outcome == "unknown" {
				fmt.Printf("    %s\n", o.Message) // a model must not retry: a human decides
			}
		}
	}
	fmt.Printf("%d steps, %d tool calls, %d intents: one effect per logical step\n", len(inbox), calls, len(intents))
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "agent: "+format+"\n", a...)
	os.Exit(1)
}
