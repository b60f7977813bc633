package lambdahost

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// DefaultMaxBodyBytes is API Gateway's 10 MB request payload cap.
const DefaultMaxBodyBytes = 10 << 20

// Connection limits of the gateway's HTTP server (issue 24, finding 7): a
// client that sends its headers or body slowly, or holds an idle
// connection, is cut off, and at most DefaultMaxConns connections are
// served at once (more wait in the accept queue).
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxConns          = 256
)

// DefaultIdentitySource is the identity source API Gateway uses for Lambda
// authorizers unless told otherwise.
const DefaultIdentitySource = "$request.header.Authorization"

// GatewayOptions configures a Gateway. The zero value is usable.
type GatewayOptions struct {
	Region    string // default DefaultRegion
	AccountID string // default DefaultAccountID
	APIID     string // default "local"
	Stage     string // default "$default"
	// DomainName is reported in requestContext.domainName; default: the
	// request's Host header.
	DomainName     string
	StageVariables map[string]string

	// MaxBodyBytes caps the request body (default DefaultMaxBodyBytes); a
	// larger body is answered 413 without invoking anything. A route may
	// set a lower cap (RouteOptions.MaxBodyBytes). The body is read only
	// after the route's authorizer accepted the request.
	MaxBodyBytes int64

	// ReadHeaderTimeout bounds reading a request's headers, ReadTimeout the
	// whole request with its body, IdleTimeout a keep-alive connection
	// between requests; WriteTimeout (default ReadTimeout +
	// IntegrationTimeout + 5s) the time from the end of the headers to the
	// end of the response. MaxConns caps the connections served at once.
	// Defaults: DefaultReadHeaderTimeout, DefaultReadTimeout,
	// DefaultIdleTimeout, DefaultMaxConns.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	WriteTimeout      time.Duration
	MaxConns          int
	// LambdaPayloadLimit caps the JSON-encoded event and response (default
	// LambdaSyncPayloadLimit; negative disables). Exceeding it is a function
	// invocation failure, answered 500 like API Gateway does.
	LambdaPayloadLimit int
	// IntegrationTimeout is how long the gateway waits for a handler
	// (default 30s, API Gateway's maximum); after that it answers 503 while
	// the handler keeps running until its own deadline, as in AWS.
	IntegrationTimeout time.Duration
	// FunctionTimeout is the deadline on the handler's context (default:
	// IntegrationTimeout).
	FunctionTimeout time.Duration

	// Health, when set, serves GET /healthz: 200 {"status":"ok"} when it
	// returns nil, 503 {"status":"unavailable"} otherwise.
	Health func() error

	Logger *slog.Logger
}

// RouteOptions configures one route.
type RouteOptions struct {
	// Authorizer, when set, is called before the handler, like an HTTP API
	// Lambda REQUEST authorizer with simple responses and no caching.
	Authorizer Authorizer
	// IdentitySource lists the identity sources of the authorizer, e.g.
	// "$request.header.Authorization" (the default) or
	// "$request.querystring.token". When any is missing or empty the request
	// is answered 401 without calling the authorizer.
	IdentitySource []string
	// MaxBodyBytes caps this route's request body (default, and at most,
	// GatewayOptions.MaxBodyBytes).
	MaxBodyBytes int64
	// FunctionName and AuthorizerFunctionName only shape the
	// InvokedFunctionArn in the lambdacontext of the invocations.
	FunctionName           string
	AuthorizerFunctionName string
}

// Gateway is an http.Handler that plays an API Gateway HTTP API with Lambda
// proxy integrations (payload format 2.0).
type Gateway struct {
	opts GatewayOptions
	log  *slog.Logger

	mu     sync.RWMutex
	routes []*route
}

type segKind int

const (
	segLiteral segKind = iota
	segParam
	segGreedy
)

type segment struct {
	kind segKind
	text string // literal text or parameter name
}

type route struct {
	key    string // as registered, e.g. "GET /v1/intents/{id}" or "$default"
	method string // upper case; "ANY" matches every method
	segs   []segment
	def    bool // the $default route
	h      HTTPHandler
	opts   RouteOptions
}

// NewGateway returns a Gateway with no routes.
func NewGateway(opts GatewayOptions) *Gateway {
	opts.Region = orDefault(opts.Region, DefaultRegion)
	opts.AccountID = orDefault(opts.AccountID, DefaultAccountID)
	opts.APIID = orDefault(opts.APIID, "local")
	opts.Stage = orDefault(opts.Stage, "$default")
	opts.MaxBodyBytes = orDefault(opts.MaxBodyBytes, DefaultMaxBodyBytes)
	opts.LambdaPayloadLimit = orDefault(opts.LambdaPayloadLimit, LambdaSyncPayloadLimit)
	opts.IntegrationTimeout = orDefault(opts.IntegrationTimeout, 30*time.Second)
	opts.FunctionTimeout = orDefault(opts.FunctionTimeout, opts.IntegrationTimeout)
	opts.ReadHeaderTimeout = orDefault(opts.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	opts.ReadTimeout = orDefault(opts.ReadTimeout, DefaultReadTimeout)
	opts.IdleTimeout = orDefault(opts.IdleTimeout, DefaultIdleTimeout)
	opts.WriteTimeout = orDefault(opts.WriteTimeout, opts.ReadTimeout+opts.IntegrationTimeout+5*time.Second)
	opts.MaxConns = orDefault(opts.MaxConns, DefaultMaxConns)
	return &Gateway{opts: opts, log: loggerOr(opts.Logger).With("component", "gateway")}
}

// Route registers a handler under an API Gateway route key: "METHOD /path"
// with METHOD one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS or ANY, path
// segments either literal, "{name}" (one segment) or, last, "{name+}"
// (greedy, one or more segments); or "$default" (catch-all). It panics on a
// malformed or duplicate route key, like http.ServeMux.
func (g *Gateway) Route(routeKey string, h HTTPHandler, opts ...RouteOptions) {
	if h == nil {
		panic("host: nil handler for route " + routeKey)
	}
	rt, err := parseRouteKey(routeKey)
	if err != nil {
		panic(err)
	}
	rt.h = h
	if len(opts) > 0 {
		rt.opts = opts[0]
	}
	if rt.opts.MaxBodyBytes <= 0 || rt.opts.MaxBodyBytes > g.opts.MaxBodyBytes {
		rt.opts.MaxBodyBytes = g.opts.MaxBodyBytes
	}
	if rt.opts.Authorizer != nil && len(rt.opts.IdentitySource) == 0 {
		rt.opts.IdentitySource = []string{DefaultIdentitySource}
	}
	for _, src := range rt.opts.IdentitySource {
		if _, _, err := parseIdentitySource(src); err != nil {
			panic(err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, other := range g.routes {
		if other.canonical() == rt.canonical() {
			panic("host: duplicate route " + routeKey)
		}
	}
	g.routes = append(g.routes, rt)
}

func (rt *route) canonical() string {
	if rt.def {
		return "$default"
	}
	var b strings.Builder
	b.WriteString(rt.method)
	b.WriteString(" ")
	for _, s := range rt.segs {
		b.WriteString("/")
		switch s.kind {
		case segLiteral:
			b.WriteString(s.text)
		case segParam:
			b.WriteString("{}")
		case segGreedy:
			b.WriteString("{+}")
		}
	}
	return b.String()
}

var routeMethods = map[string]bool{
	"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true,
	"HEAD": true, "OPTIONS": true, "ANY": true,
}

func parseRouteKey(key string) (*route, error) {
	if key == "$default" {
		return &route{key: key, def: true}, nil
	}
	method, path, ok := strings.Cut(key, " ")
	if !ok || !routeMethods[method] {
		return nil, fmt.Errorf("host: route key %q: want \"METHOD /path\" or \"$default\"", key)
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("host: route key %q: path must start with /", key)
	}
	rt := &route{key: key, method: method}
	if path == "/" {
		return rt, nil
	}
	parts := strings.Split(path[1:], "/")
	seen := map[string]bool{}
	for i, p := range parts {
		switch {
		case p == "":
			return nil, fmt.Errorf("host: route key %q: empty path segment", key)
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "+}"):
			if i != len(parts)-1 {
				return nil, fmt.Errorf("host: route key %q: greedy parameter must be last", key)
			}
			name := p[1 : len(p)-2]
			if name == "" || seen[name] {
				return nil, fmt.Errorf("host: route key %q: bad parameter %q", key, p)
			}
			rt.segs = append(rt.segs, segment{kind: segGreedy, text: name})
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}"):
			name := p[1 : len(p)-1]
			if name == "" || seen[name] || strings.ContainsAny(name, "{}") {
				return nil, fmt.Errorf("host: route key %q: bad parameter %q", key, p)
			}
			seen[name] = true
			rt.segs = append(rt.segs, segment{kind: segParam, text: name})
		case strings.ContainsAny(p, "{}"):
			return nil, fmt.Errorf("host: route key %q: parameters must span a whole segment", key)
		default:
			rt.segs = append(rt.segs, segment{kind: segLiteral, text: p})
		}
	}
	return rt, nil
}

// match reports whether the route matches the (escaped-path) segments and
// returns the decoded path parameters.
func (rt *route) match(method string, segs []string) (map[string]string, bool) {
	if rt.def {
		return nil, true
	}
	if rt.method != "ANY" && rt.method != method {
		return nil, false
	}
	var params map[string]string
	set := func(k, v string) {
		if params == nil {
			params = map[string]string{}
		}
		params[k] = v
	}
	for i, s := range rt.segs {
		if s.kind == segGreedy {
			rest := segs[i:]
			if len(rest) == 0 || (len(rest) == 1 && rest[0] == "") {
				return nil, false
			}
			dec := make([]string, len(rest))
			for j, r := range rest {
				dec[j] = unescapeSegment(r)
			}
			set(s.text, strings.Join(dec, "/"))
			return params, true
		}
		if i >= len(segs) {
			return nil, false
		}
		v := unescapeSegment(segs[i])
		switch s.kind {
		case segLiteral:
			if v != s.text {
				return nil, false
			}
		case segParam:
			if v == "" {
				return nil, false
			}
			set(s.text, v)
		}
	}
	if len(segs) != len(rt.segs) {
		return nil, false
	}
	return params, true
}

func unescapeSegment(s string) string {
	if v, err := url.PathUnescape(s); err == nil {
		return v
	}
	return s
}

// better reports whether route a is more specific than b, following API
// Gateway's "most specific match wins": compare segment by segment (literal
// beats parameter beats greedy), then method-specific beats ANY, and
// $default always loses.
func better(a, b *route) bool {
	if a.def != b.def {
		return !a.def
	}
	for i := 0; i < len(a.segs) && i < len(b.segs); i++ {
		if a.segs[i].kind != b.segs[i].kind {
			return a.segs[i].kind < b.segs[i].kind
		}
	}
	if len(a.segs) != len(b.segs) {
		return len(a.segs) > len(b.segs)
	}
	return a.method != "ANY" && b.method == "ANY"
}

func pathSegments(escapedPath string) []string {
	if escapedPath == "" || escapedPath == "/" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(escapedPath, "/"), "/")
}

func (g *Gateway) find(method, escapedPath string) (*route, map[string]string) {
	segs := pathSegments(escapedPath)
	g.mu.RLock()
	defer g.mu.RUnlock()
	var best *route
	var bestParams map[string]string
	for _, rt := range g.routes {
		params, ok := rt.match(method, segs)
		if !ok {
			continue
		}
		if best == nil || better(rt, best) {
			best, bestParams = rt, params
		}
	}
	return best, bestParams
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	reqID := newAPIGWRequestID()
	status := 0
	routeKey := ""
	defer func() {
		g.log.Info("http request", "request_id", reqID, "method", r.Method, "path", r.URL.Path,
			"route", routeKey, "status", status, "duration", time.Since(start))
	}()

	if g.opts.Health != nil && r.Method == http.MethodGet && r.URL.Path == "/healthz" {
		routeKey = "healthz"
		if err := g.opts.Health(); err != nil {
			g.log.Warn("health check failed", "error", err)
			status = http.StatusServiceUnavailable
			writeJSON(w, reqID, status, `{"status":"unavailable"}`)
			return
		}
		status = http.StatusOK
		writeJSON(w, reqID, status, `{"status":"ok"}`)
		return
	}

	rt, params := g.find(r.Method, r.URL.EscapedPath())
	if rt == nil {
		status = http.StatusNotFound
		writeMessage(w, reqID, status, "Not Found")
		return
	}
	routeKey = rt.key

	// Authorise on the headers alone: an unauthorised request is answered
	// without reading a byte of its body (the server then closes the
	// connection rather than drain a large one).
	req := g.buildRequest(r, rt, params, nil, reqID, start)
	if rt.opts.Authorizer != nil {
		var ok bool
		status, ok = g.authorize(r, rt, &req)
		if !ok {
			writeMessage(w, reqID, status, http.StatusText(status))
			return
		}
	}

	limit := rt.opts.MaxBodyBytes
	if r.ContentLength > limit {
		status = http.StatusRequestEntityTooLarge
		writeMessage(w, reqID, status, "Request Entity Too Large")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		status = http.StatusBadRequest
		writeMessage(w, reqID, status, "Bad Request")
		return
	}
	if int64(len(body)) > limit {
		status = http.StatusRequestEntityTooLarge
		writeMessage(w, reqID, status, "Request Entity Too Large")
		return
	}
	setBody(&req, r.Header.Get("Content-Type"), body)

	status = g.invoke(w, r, rt, req, reqID)
}

// authorize runs the route's authorizer. It returns (0, true) when the
// request may proceed, or the status to answer with.
func (g *Gateway) authorize(r *http.Request, rt *route, req *events.APIGatewayV2HTTPRequest) (int, bool) {
	identity := make([]string, 0, len(rt.opts.IdentitySource))
	for _, src := range rt.opts.IdentitySource {
		v := identityValue(src, req)
		if v == "" {
			return http.StatusUnauthorized, false
		}
		identity = append(identity, v)
	}
	areq := events.APIGatewayV2CustomAuthorizerV2Request{
		Version:               "2.0",
		Type:                  "REQUEST",
		RouteArn:              fmt.Sprintf("arn:aws:execute-api:%s:%s:%s/%s/%s%s", g.opts.Region, g.opts.AccountID, g.opts.APIID, g.opts.Stage, r.Method, req.RawPath),
		IdentitySource:        identity,
		RouteKey:              req.RouteKey,
		RawPath:               req.RawPath,
		RawQueryString:        req.RawQueryString,
		Cookies:               req.Cookies,
		Headers:               req.Headers,
		QueryStringParameters: req.QueryStringParameters,
		RequestContext:        req.RequestContext,
		PathParameters:        req.PathParameters,
		StageVariables:        req.StageVariables,
	}
	areq, _, err := roundTrip(areq)
	if err != nil {
		g.log.Error("authorizer event encoding failed", "route", rt.key, "error", err)
		return http.StatusInternalServerError, false
	}
	aresp, invID, timedOut, err := invokeWithin(r.Context(), g.opts.FunctionTimeout,
		functionArn(g.opts.Region, g.opts.AccountID, rt.opts.AuthorizerFunctionName), g.opts.IntegrationTimeout, areq, rt.opts.Authorizer)
	if timedOut {
		g.log.Error("authorizer timed out", "route", rt.key, "invocation_id", invID)
		return http.StatusInternalServerError, false
	}
	if err != nil {
		g.log.Error("authorizer failed", "route", rt.key, "invocation_id", invID, "error", err)
		return http.StatusInternalServerError, false
	}
	resp, _, err := roundTrip(aresp)
	if err != nil {
		g.log.Error("authorizer response encoding failed", "route", rt.key, "error", err)
		return http.StatusInternalServerError, false
	}
	if !resp.IsAuthorized {
		return http.StatusForbidden, false
	}
	req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: resp.Context}
	return 0, true
}

func parseIdentitySource(src string) (kind, name string, err error) {
	switch {
	case strings.HasPrefix(src, "$request.header."):
		return "header", strings.ToLower(strings.TrimPrefix(src, "$request.header.")), nil
	case strings.HasPrefix(src, "$request.querystring."):
		return "query", strings.TrimPrefix(src, "$request.querystring."), nil
	case strings.HasPrefix(src, "$stageVariables."):
		return "stage", strings.TrimPrefix(src, "$stageVariables."), nil
	case strings.HasPrefix(src, "$context."):
		return "context", strings.TrimPrefix(src, "$context."), nil
	}
	return "", "", fmt.Errorf("host: unsupported identity source %q", src)
}

func identityValue(src string, req *events.APIGatewayV2HTTPRequest) string {
	kind, name, _ := parseIdentitySource(src)
	switch kind {
	case "header":
		return req.Headers[name]
	case "query":
		return req.QueryStringParameters[name]
	case "stage":
		return req.StageVariables[name]
	case "context":
		switch name {
		case "requestId":
			return req.RequestContext.RequestID
		case "routeKey":
			return req.RouteKey
		case "stage":
			return req.RequestContext.Stage
		}
	}
	return ""
}

func (g *Gateway) invoke(w http.ResponseWriter, r *http.Request, rt *route, req events.APIGatewayV2HTTPRequest, reqID string) int {
	req, size, err := roundTrip(req)
	if err != nil {
		g.log.Error("request event encoding failed", "route", rt.key, "error", err)
		writeMessage(w, reqID, http.StatusInternalServerError, "Internal Server Error")
		return http.StatusInternalServerError
	}
	if g.opts.LambdaPayloadLimit > 0 && size > g.opts.LambdaPayloadLimit {
		g.log.Error("request event exceeds the Lambda payload limit", "route", rt.key, "bytes", size)
		writeMessage(w, reqID, http.StatusInternalServerError, "Internal Server Error")
		return http.StatusInternalServerError
	}

	hresp, invID, timedOut, err := invokeWithin(r.Context(), g.opts.FunctionTimeout,
		functionArn(g.opts.Region, g.opts.AccountID, rt.opts.FunctionName), g.opts.IntegrationTimeout, req, rt.h)
	if timedOut {
		g.log.Error("integration timed out", "route", rt.key, "invocation_id", invID)
		writeMessage(w, reqID, http.StatusServiceUnavailable, "Service Unavailable")
		return http.StatusServiceUnavailable
	}
	if err != nil {
		g.log.Error("handler failed", "route", rt.key, "invocation_id", invID, "error", err)
		writeMessage(w, reqID, http.StatusInternalServerError, "Internal Server Error")
		return http.StatusInternalServerError
	}
	resp, size, err := roundTrip(hresp)
	if err != nil || (g.opts.LambdaPayloadLimit > 0 && size > g.opts.LambdaPayloadLimit) {
		g.log.Error("handler response unusable", "route", rt.key, "invocation_id", invID, "bytes", size, "error", err)
		writeMessage(w, reqID, http.StatusInternalServerError, "Internal Server Error")
		return http.StatusInternalServerError
	}
	return g.writeResponse(w, rt, reqID, resp)
}

func (g *Gateway) writeResponse(w http.ResponseWriter, rt *route, reqID string, resp events.APIGatewayV2HTTPResponse) int {
	status := resp.StatusCode
	if status < 100 || status > 599 {
		g.log.Error("handler returned an invalid status code", "route", rt.key, "status", status)
		writeMessage(w, reqID, http.StatusInternalServerError, "Internal Server Error")
		return http.StatusInternalServerError
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		dec, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			g.log.Error("handler returned invalid base64 body", "route", rt.key, "error", err)
			writeMessage(w, reqID, http.StatusInternalServerError, "Internal Server Error")
			return http.StatusInternalServerError
		}
		body = dec
	}
	if len(resp.MultiValueHeaders) > 0 {
		g.log.Warn("multiValueHeaders is not part of payload format 2.0 and is ignored; use headers and cookies", "route", rt.key)
	}
	h := w.Header()
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	if h.Get("Content-Type") == "" && len(body) > 0 {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Apigw-Requestid", reqID)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if status != http.StatusNoContent && status != http.StatusNotModified {
		_, _ = w.Write(body)
	}
	return status
}

func writeMessage(w http.ResponseWriter, reqID string, status int, msg string) {
	writeJSON(w, reqID, status, `{"message":`+strconv.Quote(msg)+`}`)
}

func writeJSON(w http.ResponseWriter, reqID string, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Apigw-Requestid", reqID)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// buildRequest renders r as API Gateway's payload format 2.0.
func (g *Gateway) buildRequest(r *http.Request, rt *route, params map[string]string, body []byte, reqID string, now time.Time) events.APIGatewayV2HTTPRequest {
	headers := map[string]string{}
	var cookies []string
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lk := strings.ToLower(k)
		vals := r.Header[k]
		if lk == "cookie" {
			for _, line := range vals {
				for _, c := range strings.Split(line, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		if prev, ok := headers[lk]; ok {
			headers[lk] = prev + "," + strings.Join(vals, ",")
		} else {
			headers[lk] = strings.Join(vals, ",")
		}
	}
	sourceIP := r.RemoteAddr
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		sourceIP = host
	}
	headers["host"] = r.Host
	if xff := headers["x-forwarded-for"]; xff != "" {
		headers["x-forwarded-for"] = xff + ", " + sourceIP
	} else {
		headers["x-forwarded-for"] = sourceIP
	}
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	headers["x-forwarded-proto"] = proto
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, port, err := net.SplitHostPort(la.String()); err == nil {
			headers["x-forwarded-port"] = port
		}
	}
	if _, ok := headers["x-amzn-trace-id"]; !ok {
		headers["x-amzn-trace-id"] = newTraceID(now)
	}
	delete(headers, "content-length") // setBody sets it from the body read

	var query map[string]string
	if r.URL.RawQuery != "" {
		vals, _ := url.ParseQuery(r.URL.RawQuery)
		if len(vals) > 0 {
			query = make(map[string]string, len(vals))
			for k, v := range vals {
				query[k] = strings.Join(v, ",")
			}
		}
	}

	routeKey := rt.key
	domain := orDefault(g.opts.DomainName, r.Host)
	domainPrefix, _, _ := strings.Cut(domain, ".")
	rawPath := r.URL.EscapedPath()

	req := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              routeKey,
		RawPath:               rawPath,
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		PathParameters:        params,
		StageVariables:        g.opts.StageVariables,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     routeKey,
			AccountID:    g.opts.AccountID,
			Stage:        g.opts.Stage,
			RequestID:    reqID,
			APIID:        g.opts.APIID,
			DomainName:   domain,
			DomainPrefix: domainPrefix,
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      rawPath,
				Protocol:  r.Proto,
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
	setBody(&req, r.Header.Get("Content-Type"), body)
	return req
}

// setBody puts the body read into the event (text or base64, as API
// Gateway does) with its content-length header.
func setBody(req *events.APIGatewayV2HTTPRequest, contentType string, body []byte) {
	if len(body) == 0 {
		return
	}
	req.Headers["content-length"] = strconv.Itoa(len(body))
	if isTextContentType(contentType) {
		req.Body = string(body)
	} else {
		req.Body = base64.StdEncoding.EncodeToString(body)
		req.IsBase64Encoded = true
	}
}

// isTextContentType reports whether API Gateway HTTP APIs pass a body with
// this content type through as text. Everything else (including form posts
// and a missing content type) arrives base64-encoded with
// isBase64Encoded=true, so handlers must honour that flag.
func isTextContentType(ct string) bool {
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch {
	case strings.HasPrefix(mt, "text/"):
		return true
	case mt == "application/json", mt == "application/xml", mt == "application/javascript",
		mt == "application/ecmascript", mt == "application/graphql", mt == "application/yaml":
		return true
	case strings.HasPrefix(mt, "application/") && (strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml")):
		return true
	}
	return false
}

func newTraceID(now time.Time) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("Root=1-%08x-%s", now.Unix(), hex.EncodeToString(b[:]))
}

// ListenAndServe serves the gateway on addr until ctx is done, then shuts
// down gracefully. addr must be a loopback address (for example
// "127.0.0.1:8080"); the local host never listens on other interfaces.
func (g *Gateway) ListenAndServe(ctx context.Context, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("host: refusing to listen on non-loopback address %q", addr)
	}
	if host == "localhost" {
		addr = net.JoinHostPort("127.0.0.1", strings.TrimPrefix(addr, "localhost:"))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return g.Serve(ctx, ln)
}

// Serve serves the gateway on ln until ctx is done, then shuts down
// gracefully, with the options' timeouts and connection cap.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	ln = limitListener(ln, g.opts.MaxConns)
	srv := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: g.opts.ReadHeaderTimeout,
		ReadTimeout:       g.opts.ReadTimeout,
		WriteTimeout:      g.opts.WriteTimeout,
		IdleTimeout:       g.opts.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	g.log.Info("gateway listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
			err = e
		}
		return err
	}
}

// limitListener accepts at most n connections at once: Accept waits for a
// served connection to close (the others wait in the kernel's accept
// queue). golang.org/x/net/netutil.LimitListener in a few lines, as x/net
// is not a dependency.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limitedListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	sem       chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitedListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
