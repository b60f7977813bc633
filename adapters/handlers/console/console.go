// Package console serves the operators' web console: plain HTML, CSS and a
// little JavaScript embedded in the admin function (no build step, no CDN).
// The page holds no data and no secret; it calls the admin API with the
// operator's bearer token, which it keeps in sessionStorage only (never in a
// URL, a cookie or a log). A strict Content-Security-Policy allows scripts,
// styles and requests from this origin only.
package console

import (
	"context"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

//go:embed assets
var assets embed.FS

// CSP is the Content-Security-Policy of every console response.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Routes are the console's route keys (see adapters/routes.Console).
const (
	RouteRoot  = "GET /console"
	RouteFiles = "GET /console/{proxy+}"
	// RouteDefault is the catch-all (adapters/routes.Default).
	RouteDefault = "$default"
)

// HandlerFunc is an HTTP API Lambda handler.
type HandlerFunc func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Wrap serves the console's routes itself and passes every other request to
// next (the admin API), so one function serves both.
func Wrap(next HandlerFunc) HandlerFunc {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		switch req.RouteKey {
		case RouteRoot, RouteFiles:
			return Serve(req), nil
		case RouteDefault:
			return Unmatched(req), nil
		}
		return next(ctx, req)
	}
}

var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

func headers(contentType string) map[string]string {
	return map[string]string{
		"Content-Type":               contentType,
		"Content-Security-Policy":    CSP,
		"X-Content-Type-Options":     "nosniff",
		"Referrer-Policy":            "no-referrer",
		"X-Frame-Options":            "DENY",
		"Cache-Control":              "no-cache",
		"Cross-Origin-Opener-Policy": "same-origin",
	}
}

// Unmatched answers a request no other route matched: GET or HEAD
// "/console/" is redirected to the console's page; anything else gets what
// API Gateway answers for an unmatched route, so adding the catch-all
// changes no other path's answer.
func Unmatched(req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	m := req.RequestContext.HTTP.Method
	if req.RawPath == "/console/" && (m == http.MethodGet || m == http.MethodHead) {
		h := headers("text/plain; charset=utf-8")
		h["Location"] = "/console"
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusPermanentRedirect, Headers: h, Body: "see /console\n"}
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNotFound,
		Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"message":"Not Found"}`}
}

// Serve answers one console request.
func Serve(req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	name := strings.TrimPrefix(req.PathParameters["proxy"], "/")
	if req.RouteKey == RouteRoot || name == "" {
		name = "index.html" // /console is the page; its assets use absolute paths
	}
	clean := path.Clean("/" + name)[1:]
	b, err := fs.ReadFile(assets, "assets/"+clean)
	ct, known := types[path.Ext(clean)]
	if err != nil || !known || clean != name {
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNotFound, Headers: headers("text/plain; charset=utf-8"), Body: "not found\n"}
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: headers(ct), Body: string(b)}
}
