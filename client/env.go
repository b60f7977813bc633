package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// The environment variables every program of the project reads, and the ones
// `make run` prints as export lines (cmd/outbox-local's banner).
const (
	// EnvAPIURL is the outbox API's base URL, e.g. http://127.0.0.1:4000.
	EnvAPIURL = "OUTBOX_API_URL"
	// EnvHTTPAddr is the local host's listen address (host:port); programs
	// fall back to http://$OUTBOX_HTTP_ADDR when EnvAPIURL is unset, so
	// moving `make run`'s port moves every tool with it.
	EnvHTTPAddr = "OUTBOX_HTTP_ADDR"
	// EnvBotToken is a bot's bearer token (examples/bot, the MCP binary).
	EnvBotToken = "OUTBOX_BOT_TOKEN"
	// EnvOperatorToken is an operator's (or orchestrator's) bearer token (outboxctl).
	EnvOperatorToken = "OUTBOX_OPERATOR_TOKEN"
	// DefaultBaseURL is `make run`'s address when neither variable is set.
	DefaultBaseURL = "http://127.0.0.1:4000"
)

// BaseURLFromEnv is the API base URL every program uses by default:
// $OUTBOX_API_URL, else http://$OUTBOX_HTTP_ADDR, else DefaultBaseURL.
func BaseURLFromEnv() string {
	u, _ := BaseURLSourceFromEnv()
	return u
}

// BaseURLSourceFromEnv is BaseURLFromEnv and where the value came from (the
// variable's name, or "default"), for error messages.
func BaseURLSourceFromEnv() (baseURL, source string) {
	if v := strings.TrimSpace(os.Getenv(EnvAPIURL)); v != "" {
		return strings.TrimRight(v, "/"), EnvAPIURL
	}
	if v := strings.TrimSpace(os.Getenv(EnvHTTPAddr)); v != "" {
		if !strings.Contains(v, "://") {
			v = "http://" + v
		}
		return strings.TrimRight(v, "/"), EnvHTTPAddr
	}
	return DefaultBaseURL, "default"
}

// TokenFromEnv returns the named variable (EnvBotToken, EnvOperatorToken), or def.
func TokenFromEnv(variable, def string) string {
	if v := strings.TrimSpace(os.Getenv(variable)); v != "" {
		return v
	}
	return def
}

// ErrUnreachable is wrapped by CheckReachable when nothing listens at the address.
var ErrUnreachable = errors.New("outbox API unreachable")

// CheckReachable dials baseURL's host once (bounded by timeout) and answers
// an error naming the address and how to change it when nothing listens there.
// Programs call it before their first request, so a wrong address fails at
// once instead of after the client's connection retries.
func CheckReachable(ctx context.Context, baseURL string, timeout time.Duration) error {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: %q is not a URL like %s (set %s)", ErrUnreachable, baseURL, DefaultBaseURL, EnvAPIURL)
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("%w: nothing answers at %s (%v); start it with `make run`, or point %s (or %s) at the address `make run` printed",
			ErrUnreachable, baseURL, err, EnvAPIURL, EnvHTTPAddr)
	}
	return conn.Close()
}
