// Package httpx is the transport and classification code every provider
// adapter shares. Its one job is to turn "what the wire did" into core's
// structured error classes without ever guessing in the unsafe direction:
//
//   - A failure before any byte of the request was written (refused
//     connection, DNS failure, dial timeout) is proof of no effect:
//     *core.RetryableError{Class: ClassTransient}.
//   - A failure after the first byte may have left (reset, EOF, timeout while
//     waiting for the response) is *core.UnknownOutcomeError: the provider may
//     have committed.
//   - The request is never replayed by net/http behind our back (GetBody is
//     cleared, see Do) and redirects are never followed (see Client).
//
// It also keeps secrets out of errors: a *url.Error carries the request URL,
// and some providers (Telegram) put the bot token in the path. Errors leaving
// this package name only scheme and host.
package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/botharness/outbox/core"
)

// DefaultBodyLimit bounds how much of a response body an adapter reads.
const DefaultBodyLimit = 256 << 10

// Client returns a copy of base (or of a zero client when base is nil) that
// never follows redirects: a redirect would be a second request nobody decided
// to make. It does not set a global timeout; adapters bound each call with a
// context deadline so that the deadline is visible to the trace in Do.
func Client(base *http.Client) *http.Client {
	var c http.Client
	if base != nil {
		c = *base
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// Response is what came back for one request.
type Response struct {
	Status int
	Header http.Header
	// Body is at most the limit given to Do.
	Body []byte
	// ReadErr is set when the body could not be read completely (the status
	// line and headers did arrive). Whether that matters is the adapter's call.
	ReadErr error
}

// traceScope names the provider request spans (adapters/tracing.Scope).
const traceScope = "github.com/botharness/outbox"

// Do performs one request and classifies a transport failure. ctx should carry
// the attempt's deadline. A nil error means a status line arrived; the
// adapter classifies the status and body. A non-nil error is always
// *core.RetryableError (ClassTransient, nothing left) or
// *core.UnknownOutcomeError (something may have left).
func Do(ctx context.Context, c *http.Client, method, rawURL string, header http.Header, body []byte, limit int64) (*Response, error) {
	if limit <= 0 {
		limit = DefaultBodyLimit
	}
	// wrote turns true once any byte of the request may have been handed to
	// the connection. Header writes are buffered, so this can be early; it is
	// never late, which is the direction that matters.
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteHeaderField: func(string, []string) { wrote.Store(true) },
		WroteHeaders:     func() { wrote.Store(true) },
		WroteRequest:     func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, rawURL, rd)
	if err != nil {
		// Nothing left: the request could not even be built (bad URL).
		err = Redact(err)
		return nil, &core.PermanentError{Class: core.ClassRejectedInput, Evidence: core.Evidence{Detail: err.Error()}, Err: err}
	}
	// net/http silently re-sends a request on a new connection when a reused
	// keep-alive connection dies, if it thinks the request is replayable (an
	// idempotent method, or any method carrying an Idempotency-Key header).
	// Only the outbox may decide to send again, so make the body
	// non-rewindable: then the transport cannot replay it.
	req.GetBody = nil
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	// One trace per intent: the provider request is a client span under
	// the attempt's, and the provider receives its W3C traceparent.
	ctx, span := otel.Tracer(traceScope).Start(ctx, "outbox.provider_request", oteltrace.WithSpanKind(oteltrace.SpanKindClient),
		oteltrace.WithAttributes(attribute.String("http.request.method", method), attribute.String("server.address", req.URL.Host)))
	defer span.End()
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := c.Do(req)
	if resp != nil {
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	}
	if err != nil {
		span.SetStatus(codes.Error, "no response")
		err = Redact(err)
		ev := core.Evidence{Detail: err.Error()}
		if !wrote.Load() {
			return nil, &core.RetryableError{Class: core.ClassTransient, Evidence: ev, Err: fmt.Errorf("request never left: %w", err)}
		}
		return nil, &core.UnknownOutcomeError{Evidence: ev, Err: fmt.Errorf("no response after sending: %w", err)}
	}
	defer resp.Body.Close()
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, limit))
	if readErr != nil {
		readErr = Redact(readErr)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: raw, ReadErr: readErr}, nil
}

// Redact removes the path and query of any URL carried by err (a *url.Error
// anywhere in its chain), keeping scheme and host. Tokens in paths or query
// strings therefore never reach evidence or logs.
func Redact(err error) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	return &redacted{op: ue.Op, where: RedactURL(ue.URL), err: ue.Err}
}

type redacted struct {
	op, where string
	err       error
}

func (r *redacted) Error() string {
	return fmt.Sprintf("%s %s: %v", r.op, r.where, r.err)
}
func (r *redacted) Unwrap() error { return r.err }

// Timeout reports whether the underlying error is a timeout.
func (r *redacted) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(r.err, &t) && t.Timeout()
}

// RedactURL keeps only scheme and host of a URL.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "<url>"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// RetryAfter parses a Retry-After header: delta-seconds or an HTTP date
// (RFC 9110 §10.2.3). Zero when absent or unparseable.
func RetryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if s, err := strconv.ParseInt(h, 10, 64); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// Excerpt returns at most n bytes of b as text, for evidence. Callers must
// only pass provider error texts, never request bodies or secrets.
func Excerpt(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "?")
}

// Typed constructors, so adapters read as a mapping table.

// Rejected is a permanent rejected-input failure.
func Rejected(ev core.Evidence, format string, a ...any) error {
	return &core.PermanentError{Class: core.ClassRejectedInput, Evidence: ev, Err: fmt.Errorf(format, a...)}
}

// Unauthorized is a permanent authorisation failure.
func Unauthorized(ev core.Evidence, format string, a ...any) error {
	return &core.PermanentError{Class: core.ClassUnauthorized, Evidence: ev, Err: fmt.Errorf(format, a...)}
}

// RateLimited is a retryable rate-limit failure; retryAfter may be zero.
func RateLimited(ev core.Evidence, retryAfter time.Duration, format string, a ...any) error {
	if retryAfter > 0 && ev.RetryAfter == "" {
		ev.RetryAfter = strconv.FormatInt(int64((retryAfter+time.Second-1)/time.Second), 10)
	}
	return &core.RetryableError{Class: core.ClassRateLimited, RetryAfter: retryAfter, Evidence: ev, Err: fmt.Errorf(format, a...)}
}

// Transient is a retryable failure with proof that nothing took effect.
func Transient(ev core.Evidence, format string, a ...any) error {
	return &core.RetryableError{Class: core.ClassTransient, Evidence: ev, Err: fmt.Errorf(format, a...)}
}

// Unknown is an unknown outcome: the request may have taken effect.
func Unknown(ev core.Evidence, format string, a ...any) error {
	return &core.UnknownOutcomeError{Evidence: ev, Err: fmt.Errorf(format, a...)}
}

// MarshalVerbatim is json.Marshal without HTML escaping: an intent's payload
// (a json.RawMessage) goes on the wire byte for byte as intake hashed it.
// json.Marshal would rewrite '<', '>', '&', U+2028 and U+2029 inside it as
// \u escapes, so the provider would receive other bytes than the payload
// hash covers (issue 24: what is stored and sent is exactly what was hashed).
func MarshalVerbatim(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Settings defaults and checks what the adapters calling one fixed API
// (Slack, Telegram) configure alike: the base URL (defaultBase when empty;
// it must be absolute), the bound of each request (10s when unset) and the
// clock (time.Now when nil). provider prefixes the error.
func Settings(provider string, baseURL *string, defaultBase string, timeout *time.Duration, now *func() time.Time) error {
	if *baseURL == "" {
		*baseURL = defaultBase
	}
	if u, err := url.Parse(*baseURL); err != nil || u.Host == "" {
		return fmt.Errorf("%s: baseUrl must be an absolute URL", provider)
	}
	if *timeout <= 0 {
		*timeout = DefaultTimeout
	}
	if *now == nil {
		*now = time.Now
	}
	return nil
}

// RequireTokens fails when a configured account has no token.
func RequireTokens[A any](provider string, accounts map[string]A, token func(A) string) error {
	for name, a := range accounts {
		if token(a) == "" {
			return fmt.Errorf("%s: account %q has no token", provider, name)
		}
	}
	return nil
}

// KnownAccount fails when account is not configured (for Capabilities).
func KnownAccount[A any](provider string, accounts map[string]A, account string) error {
	if _, ok := accounts[account]; !ok {
		return fmt.Errorf("%s: unknown account %q", provider, account)
	}
	return nil
}

// SendAccount returns the configured account of a request, or a rejection
// (evidence code unknown_account) when there is none.
func SendAccount[A any](provider string, accounts map[string]A, name string) (A, error) {
	a, ok := accounts[name]
	if !ok {
		return a, Rejected(core.Evidence{ProviderCode: "unknown_account"}, "%s: account %q is not configured", provider, name)
	}
	return a, nil
}

// CheckAction rejects (evidence code unknown_action) an action the adapter
// does not perform.
func CheckAction(provider string, actions map[string]bool, action string) error {
	if !actions[action] {
		return Rejected(core.Evidence{ProviderCode: "unknown_action"}, "%s: unknown action %q", provider, action)
	}
	return nil
}

// InvalidPayload rejects (evidence code invalid_payload) a payload the
// adapter cannot turn into a request.
func InvalidPayload(provider string, err error) error {
	return Rejected(core.Evidence{ProviderCode: "invalid_payload", Detail: err.Error()}, "%s: %v", provider, err)
}

// ObjectArgs decodes a payload that is a JSON object of an API method's
// arguments (an empty payload is no arguments); what names them in the error.
func ObjectArgs(payload []byte, what string) (map[string]json.RawMessage, error) {
	args := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(payload)) > 0 {
		if err := json.Unmarshal(payload, &args); err != nil || args == nil {
			return nil, fmt.Errorf("payload must be a JSON object of %s", what)
		}
	}
	return args, nil
}

// DefaultTimeout bounds a provider request whose configuration names no
// timeoutMs. The attempt policy's lease, settle window and breaker probe
// lease outlive it (TestDefaultAttemptPolicyOutlivesAProviderCall).
const DefaultTimeout = 10 * time.Second

// Call is Do bounded by timeout: the body is read before it returns.
func Call(ctx context.Context, c *http.Client, timeout time.Duration, method, rawURL string, header http.Header, body []byte, limit int64) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return Do(ctx, c, method, rawURL, header, body, limit)
}
