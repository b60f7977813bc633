package infra

import (
	"time"

	"github.com/aws/jsii-runtime-go"

	"github.com/botharness/outbox/adapters/routes"
)

// EnvAPIURL is the base URL of this stack's HTTP API, for a function that
// calls the public API like any client (the MCP endpoint, issue 29).
const EnvAPIURL = "OUTBOX_API_URL"

// mcpFunction is the agents' MCP endpoint (adapters/mcpserver): Streamable
// HTTP at /mcp (every method: the handler answers GET and DELETE 405 in
// stateless mode) behind the bearer authorizer. It has no table, queue or
// bucket access: its tools call the API over HTTPS with the caller's own
// token, so the API authorises every call again.
func mcpFunction() FunctionSpec {
	return FunctionSpec{
		Name:        "mcp",
		Description: "Agents' MCP endpoint (Streamable HTTP, stateless): tools over the public API with the caller's token; no table access",
		// API Gateway answers 503 after 30 s; the tools' waits are capped
		// below that (mcpserver.MaxWaitSeconds).
		Timeout:  30 * time.Second,
		MemoryMB: 256,
		Routes:   routesOf(routes.MCP...),
		// Agents are bots (and orchestrators): their throttle group.
		RouteGroup: RouteGroupBots,
		Needs:      NeedAPIURL,
	}
}

// apiURLEnv gives a NeedAPIURL function the API's endpoint.
func (o *outbox) apiURLEnv(s FunctionSpec) {
	if s.Needs.Has(NeedAPIURL) {
		o.fns[s.Name].AddEnvironment(jsii.String(EnvAPIURL), o.api.ApiEndpoint(), nil)
	}
}
