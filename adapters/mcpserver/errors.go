package mcpserver

import (
	"context"
	"errors"
	"net/http"

	"github.com/botharness/outbox/client"
)

// CodeUnavailable is the tool error code when the API could not be reached
// (connection errors, timeouts, retries exhausted); every other code is the
// API's (the ErrorCode enum of api/openapi.json).
const CodeUnavailable = "unavailable"

// hints say, per API code, what a model should do about it.
var hints = map[string]string{
	"idempotency_key_reused": "this run_id and step already hold a different intent. If you are retrying the same step, send exactly the same arguments as the first time; if this is a new message or action, give it a new step",
	"invalid_field":          "fix the named argument and call again",
	"malformed_json":         "send the arguments the input schema names, with their types",
	"payload_too_large":      "send a smaller payload",
	"unknown_provider":       "use a provider this outbox is configured for",
	"unknown_action":         "use an action the provider has",
	"deadline_passed":        "the deadline is in the past: nothing was sent; use a later deadline or drop the step",
	"grant_does_not_cover":   "your grant does not cover this provider, account, action or target: nothing was sent; ask an operator for a grant that does",
	"forbidden":              "this token may not do this",
	"unauthorized":           "the server's token was not accepted; ask an operator for a valid token",
	"not_found":              "no such intent for this token (another bot's intents are not visible)",
	"not_needs_human":        "the intent is not waiting for a human decision any more; read it again",
	"internal":               "nothing was half-done; call again with the same arguments",
	"unavailable":            "the outbox could not be reached; call again with the same arguments (the same run_id and step are safe to repeat)",
}

// toolError turns a client or validation error into a ToolError carrying
// the API's code.
func toolError(err error) *ToolError {
	var te *ToolError
	if errors.As(err, &te) {
		return te
	}
	var re *client.RetryError
	if errors.As(err, &re) {
		// Gave up on failures worth retrying: every attempt carried the
		// same key, so calling again is safe. (The one code of this server
		// that is not the API's: the API did not answer.)
		return &ToolError{Code: CodeUnavailable, Message: err.Error(), Hint: hints[CodeUnavailable]}
	}
	var api *client.APIError
	if errors.As(err, &api) {
		code := api.Code
		if code == "" { // the gateway's own {"message"} answers
			switch api.Status {
			case http.StatusUnauthorized:
				code = "unauthorized"
			case http.StatusForbidden:
				code = "forbidden"
			case http.StatusNotFound:
				code = "not_found"
			default:
				code = "internal"
			}
		}
		return &ToolError{Code: code, Status: api.Status, Message: api.Message, Field: api.Field, Hint: hints[code]}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &ToolError{Code: CodeUnavailable, Message: err.Error(), Hint: hints[CodeUnavailable]}
	}
	return &ToolError{Code: "internal", Message: err.Error(), Hint: hints["internal"]}
}

func invalid(field, msg string) *ToolError {
	return &ToolError{Code: "invalid_field", Field: field, Message: msg, Hint: hints["invalid_field"]}
}
