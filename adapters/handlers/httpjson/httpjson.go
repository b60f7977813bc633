// Package httpjson holds the HTTP API's response conventions: JSON bodies,
// and errors as {"error":{"code","message","field"}} with a stable code.
package httpjson

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/core"
)

// ErrorBody is the one error shape of every endpoint.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail carries a machine-readable code and a human message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// JSON renders v with status and extra headers.
func JSON(status int, v any, headers map[string]string) events.APIGatewayV2HTTPResponse {
	body, err := json.Marshal(v)
	if err != nil {
		return Error(http.StatusInternalServerError, "internal", "could not encode the response", "")
	}
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range headers {
		h[k] = v
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: h, Body: string(body)}
}

// Error renders an error response.
func Error(status int, code, message, field string) events.APIGatewayV2HTTPResponse {
	body, _ := json.Marshal(ErrorBody{Error: ErrorDetail{Code: code, Message: message, Field: field}})
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(body),
	}
}

// Principal returns the caller the authorizer established, if any.
func Principal(req events.APIGatewayV2HTTPRequest) (core.Principal, bool) {
	if req.RequestContext.Authorizer == nil || req.RequestContext.Authorizer.Lambda == nil {
		return core.Principal{}, false
	}
	kind, _ := req.RequestContext.Authorizer.Lambda["kind"].(string)
	name, _ := req.RequestContext.Authorizer.Lambda["name"].(string)
	if kind == "" || name == "" {
		return core.Principal{}, false
	}
	return core.Principal{Kind: kind, Name: name}, true
}

// Header returns a request header, case-insensitively (API Gateway lower-cases them).
func Header(req events.APIGatewayV2HTTPRequest, name string) (string, bool) {
	if v, ok := req.Headers[strings.ToLower(name)]; ok {
		return v, true
	}
	for k, v := range req.Headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// Body returns the request body, decoding the base64 that API Gateway uses
// for content types it does not treat as text.
func Body(req events.APIGatewayV2HTTPRequest) ([]byte, error) {
	if req.IsBase64Encoded {
		return base64.StdEncoding.DecodeString(req.Body)
	}
	return []byte(req.Body), nil
}

// Unauthorized is the answer when no principal reached the handler.
func Unauthorized() events.APIGatewayV2HTTPResponse {
	return Error(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required", "")
}
