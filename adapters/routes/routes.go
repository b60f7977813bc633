// Package routes is the one list of HTTP API route keys, per function. The
// local host registers these and the CDK stack deploys these, so the two
// can never disagree.
package routes

// Intake is the bot API.
var Intake = []string{
	"POST /v1/intents",
	"GET /v1/intents/{id}",
	"GET /v1/intents/{id}/history",
	"PUT /v1/sources/{sourceId}",
}

// Admin is the operators' API.
var Admin = []string{
	"GET /v1/admin/intents",
	"GET /v1/admin/intents/{id}",
	"POST /v1/admin/intents/{id}/resolution",
	"POST /v1/admin/intents/{id}/recommendation",
	"GET /v1/admin/grants",
	"GET /v1/admin/grants/{grantId}",
	"PUT /v1/admin/grants/{grantId}",
	"POST /v1/admin/grants/{grantId}/revoke",
	"PUT /v1/admin/capabilities/{provider}/{account}",
	"GET /v1/admin/capabilities/{provider}/{account}",
	"PUT /v1/admin/capabilities/{provider}/{account}/pace",
	"GET /v1/admin/capabilities/{provider}/{account}/pace",
	"POST /v1/admin/backups",
	"GET /v1/admin/backups/{backupId}",
	"POST /v1/admin/restores",
	"GET /v1/admin/webhooks/unresolved",
	"GET /v1/admin/whoami",
	"GET /v1/admin/intents/{id}/retry-risk",
	"GET /v1/admin/intents/{id}/history",
	"GET /v1/admin/bots/{bot}/limits",
	"GET /v1/admin/tokens",
	"POST /v1/admin/tokens/{tokenId}/revoke",
	"GET /v1/admin/webhooks/unresolved/{provider}/{account}/{eventId}",
	"GET /v1/admin/overview",
}

// Console is the operators' web console: static files the admin function
// serves without the authorizer (the page itself holds no data; every API
// call it makes carries the operator's bearer token).
var Console = []string{
	"GET /console",
	"GET /console/{proxy+}",
	Default,
}

// Default is API Gateway's catch-all route, served by the console handler:
// "/console/" (with the slash most people type, which "/console/{proxy+}"
// does not match: a greedy variable needs one segment) redirects to
// "/console"; every other unmatched request gets API Gateway's own
// unmatched-route answer (404 {"message":"Not Found"}).
const Default = "$default"

// Webhook is the providers' callback route; it has no authorizer because
// providers sign their requests.
const Webhook = "POST /v1/webhooks/{provider}/{account}"

// WebhookHandshake is the same endpoint's GET, for providers that verify a
// webhook URL with a handshake (WhatsApp's hub.challenge); served by the
// webhook function, no authorizer.
const WebhookHandshake = "GET /v1/webhooks/{provider}/{account}"

// Webhooks are the webhook function's routes.
var Webhooks = []string{Webhook, WebhookHandshake}

// OpenAPI serves the API's OpenAPI document (api/openapi.json). It is public
// (no authorizer) and served by the intake function.
const OpenAPI = "GET /v1/openapi.json"

// MCP is the agents' Model Context Protocol endpoint (Streamable HTTP,
// stateless), behind the same authorizer as the API. Its function calls the
// public API with the caller's token (adapters/mcpserver); it is not under
// /v1/, so it is not an OpenAPI route.
var MCP = []string{"ANY /mcp"}
