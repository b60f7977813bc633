package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/botharness/outbox/client"
)

// HTTPConfig configures the Streamable HTTP endpoint.
type HTTPConfig struct {
	// APIURL returns the base URL of the outbox API the tools call (the
	// same deployment's public API: OUTBOX_API_URL in Lambda).
	APIURL func() string
	// HTTPClient is shared by every request's API client (default: a
	// clone of http.DefaultTransport).
	HTTPClient *http.Client
	Version    string
	Log        *slog.Logger
}

// PrincipalFromAuthorizer reads the principal the API's Lambda authorizer
// put in the request context ({kind, name}).
func PrincipalFromAuthorizer(rc events.APIGatewayV2HTTPRequestContext) (Principal, bool) {
	if rc.Authorizer == nil || rc.Authorizer.Lambda == nil {
		return Principal{}, false
	}
	kind, _ := rc.Authorizer.Lambda["kind"].(string)
	name, _ := rc.Authorizer.Lambda["name"].(string)
	switch kind {
	case KindBot, KindOperator, KindOrchestrator:
		return Principal{Kind: kind, Name: name}, name != ""
	}
	return Principal{}, false
}

// HTTPHandler is the Streamable HTTP endpoint in stateless mode with JSON
// responses (so it runs behind API Gateway and Lambda, which buffer a whole
// answer). It must run behind the API's authorizer, through LambdaHandler:
// the principal comes from the authorizer's context, and the caller's own
// bearer token is what the tools send to the API.
func HTTPHandler(cfg HTTPConfig) http.Handler {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cfg.Log = quiet(cfg.Log)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		p, _ := principalOf(r)
		c := client.New(cfg.APIURL(), bearer(r), client.WithHTTPClient(cfg.HTTPClient))
		return NewServer(c, p, Options{Version: cfg.Version, Log: cfg.Log})
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: cfg.Log})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := principalOf(r); !ok || bearer(r) == "" {
			// Not behind the authorizer: refuse rather than guess.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"message":"Unauthorized"}`))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func principalOf(r *http.Request) (Principal, bool) {
	rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
	if !ok {
		return Principal{}, false
	}
	return PrincipalFromAuthorizer(rc)
}

func bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "Bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// LambdaHandler serves HTTPHandler as an API Gateway HTTP API (payload
// format 2.0) Lambda handler: functions/mcp in AWS, and the local host's
// /mcp route.
func LambdaHandler(cfg HTTPConfig) func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	a := httpadapter.NewV2(HTTPHandler(cfg))
	return a.ProxyWithContext
}

// DiscoverPrincipal learns which principal c's token is, for the stdio
// binary (no authorizer context there): the admin API's whoami answers
// operators and orchestrators and refuses a bot's token with 403.
func DiscoverPrincipal(ctx context.Context, c *client.Client) (Principal, error) {
	w, err := c.Admin().WhoAmI(ctx)
	var api *client.APIError
	switch {
	case err == nil:
		return Principal{Kind: w.Kind, Name: w.Name}, nil
	case errors.As(err, &api) && api.Status == http.StatusForbidden && api.Code == "forbidden":
		// The admin handler's refusal (the gateway's own 403 for an
		// unknown token has no code): a bot.
		return Principal{Kind: KindBot}, nil
	case errors.Is(err, client.ErrUnauthorized), errors.Is(err, client.ErrForbidden):
		return Principal{}, fmt.Errorf("the API refused the token: set OUTBOX_TOKEN to a valid token: %w", err)
	}
	return Principal{}, fmt.Errorf("learn the token's principal from GET /v1/admin/whoami: %w", err)
}
