package lambdahost

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// quietLogger discards logs unless HOST_TEST_LOG is set (then: debug to stderr).
func quietLogger() *slog.Logger {
	if os.Getenv("HOST_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// recorder is an HTTPHandler that keeps the requests it saw.
type recorder struct {
	mu   sync.Mutex
	reqs []events.APIGatewayV2HTTPRequest
	ctxs []context.Context
	resp events.APIGatewayV2HTTPResponse
	err  error
}

func (r *recorder) handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	r.ctxs = append(r.ctxs, ctx)
	if r.resp.StatusCode == 0 && r.err == nil {
		return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{"ok":true}`}, nil
	}
	return r.resp, r.err
}

func (r *recorder) last(t *testing.T) events.APIGatewayV2HTTPRequest {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("handler was not called")
	}
	return r.reqs[len(r.reqs)-1]
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

func newTestGateway(opts GatewayOptions) (*Gateway, *httptest.Server) {
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	g := NewGateway(opts)
	srv := httptest.NewServer(g)
	return g, srv
}

func do(t *testing.T, method, url string, body io.Reader, headers map[string][]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestGatewayBuildsV2Request(t *testing.T) {
	g, srv := newTestGateway(GatewayOptions{APIID: "api123", StageVariables: map[string]string{"env": "local"}})
	defer srv.Close()
	rec := &recorder{}
	g.Route("POST /v1/intents/{id}/attempts", rec.handle)

	before := time.Now()
	resp, _ := do(t, "POST", srv.URL+"/v1/intents/ab%20c/attempts?x=1&x=2&y=hello%20world", strings.NewReader(`{"a":1}`), map[string][]string{
		"Content-Type": {"application/json; charset=utf-8"},
		"X-Multi":      {"one", "two"},
		"Cookie":       {"c1=v1; c2=v2"},
		"User-Agent":   {"outbox-test/1"},
	})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	req := rec.last(t)
	check := func(name string, got, want any) {
		t.Helper()
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Errorf("%s = %s, want %s", name, gb, wb)
		}
	}
	check("Version", req.Version, "2.0")
	check("RouteKey", req.RouteKey, "POST /v1/intents/{id}/attempts")
	check("RawPath", req.RawPath, "/v1/intents/ab%20c/attempts")
	check("RawQueryString", req.RawQueryString, "x=1&x=2&y=hello%20world")
	check("Cookies", req.Cookies, []string{"c1=v1", "c2=v2"})
	check("QueryStringParameters", req.QueryStringParameters, map[string]string{"x": "1,2", "y": "hello world"})
	check("PathParameters", req.PathParameters, map[string]string{"id": "ab c"})
	check("StageVariables", req.StageVariables, map[string]string{"env": "local"})
	check("Body", req.Body, `{"a":1}`)
	check("IsBase64Encoded", req.IsBase64Encoded, false)
	check("x-multi", req.Headers["x-multi"], "one,two")
	check("content-type", req.Headers["content-type"], "application/json; charset=utf-8")
	check("content-length", req.Headers["content-length"], "7")
	check("user-agent", req.Headers["user-agent"], "outbox-test/1")
	check("x-forwarded-for", req.Headers["x-forwarded-for"], "127.0.0.1")
	check("x-forwarded-proto", req.Headers["x-forwarded-proto"], "http")
	if _, ok := req.Headers["cookie"]; ok {
		t.Errorf("cookie header must move to Cookies")
	}
	if req.Headers["host"] == "" || !strings.HasPrefix(req.Headers["x-amzn-trace-id"], "Root=1-") || req.Headers["x-forwarded-port"] == "" {
		t.Errorf("host/trace/port headers missing: %v", req.Headers)
	}
	for k := range req.Headers {
		if k != strings.ToLower(k) {
			t.Errorf("header %q not lower-cased", k)
		}
	}
	rc := req.RequestContext
	check("rc.RouteKey", rc.RouteKey, req.RouteKey)
	check("rc.Stage", rc.Stage, "$default")
	check("rc.APIID", rc.APIID, "api123")
	check("rc.AccountID", rc.AccountID, DefaultAccountID)
	check("rc.HTTP", rc.HTTP, events.APIGatewayV2HTTPRequestContextHTTPDescription{
		Method: "POST", Path: "/v1/intents/ab%20c/attempts", Protocol: "HTTP/1.1", SourceIP: "127.0.0.1", UserAgent: "outbox-test/1",
	})
	if rc.RequestID == "" || rc.RequestID != resp.Header.Get("Apigw-Requestid") {
		t.Errorf("request id %q vs response header %q", rc.RequestID, resp.Header.Get("Apigw-Requestid"))
	}
	if rc.TimeEpoch < before.UnixMilli() || rc.TimeEpoch > time.Now().UnixMilli() {
		t.Errorf("TimeEpoch %d out of range", rc.TimeEpoch)
	}
	if _, err := time.Parse("02/Jan/2006:15:04:05 -0700", rc.Time); err != nil {
		t.Errorf("Time %q: %v", rc.Time, err)
	}
	if rc.Authorizer != nil {
		t.Errorf("no authorizer configured, got %+v", rc.Authorizer)
	}

	// The handler runs like a Lambda invocation.
	ctx := rec.ctxs[0]
	if lc, ok := lambdacontext.FromContext(ctx); !ok || lc.AwsRequestID == "" {
		t.Errorf("no lambda context in handler ctx")
	}
	if _, ok := ctx.Deadline(); !ok {
		t.Errorf("handler ctx has no deadline")
	}
}

func TestGatewayBase64Bodies(t *testing.T) {
	g, srv := newTestGateway(GatewayOptions{})
	defer srv.Close()
	rec := &recorder{}
	g.Route("ANY /echo", rec.handle)
	payload := []byte{0, 1, 2, 0xff}
	cases := []struct {
		ct     string
		body   []byte
		base64 bool
	}{
		{"application/octet-stream", payload, true},
		{"", []byte("no content type"), true},
		{"application/x-www-form-urlencoded", []byte("a=b"), true},
		{"text/plain", []byte("hi"), false},
		{"application/vnd.api+json", []byte(`{}`), false},
		{"application/xml", []byte(`<a/>`), false},
	}
	for _, tc := range cases {
		h := map[string][]string{}
		if tc.ct != "" {
			h["Content-Type"] = []string{tc.ct}
		}
		do(t, "PUT", srv.URL+"/echo", bytes.NewReader(tc.body), h)
		req := rec.last(t)
		if req.IsBase64Encoded != tc.base64 {
			t.Errorf("%q: IsBase64Encoded = %v", tc.ct, req.IsBase64Encoded)
			continue
		}
		got := []byte(req.Body)
		if tc.base64 {
			var err error
			if got, err = base64.StdEncoding.DecodeString(req.Body); err != nil {
				t.Errorf("%q: bad base64: %v", tc.ct, err)
			}
		}
		if !bytes.Equal(got, tc.body) {
			t.Errorf("%q: body %q", tc.ct, got)
		}
	}
	// Empty body: no body, not base64.
	do(t, "GET", srv.URL+"/echo", nil, nil)
	if req := rec.last(t); req.Body != "" || req.IsBase64Encoded || req.Headers["content-length"] != "" {
		t.Errorf("empty body: %+v", req)
	}
}

func TestGatewayRouting(t *testing.T) {
	g, srv := newTestGateway(GatewayOptions{})
	defer srv.Close()
	tag := func(name string) HTTPHandler {
		return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			b, _ := json.Marshal(map[string]any{"route": name, "params": req.PathParameters, "key": req.RouteKey})
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: string(b)}, nil
		}
	}
	g.Route("GET /v1/intents/{id}", tag("byid"))
	g.Route("GET /v1/intents/needs-human", tag("literal"))
	g.Route("ANY /v1/intents/{id}", tag("any"))
	g.Route("POST /v1/intents", tag("create"))
	g.Route("GET /static/{proxy+}", tag("greedy"))
	g.Route("GET /", tag("root"))
	g.Route("GET /v1/a/{x}/{y}", tag("two"))

	cases := []struct {
		method, path string
		status       int
		route        string
		params       map[string]string
	}{
		{"GET", "/v1/intents/abc", 200, "byid", map[string]string{"id": "abc"}},
		{"GET", "/v1/intents/needs-human", 200, "literal", nil},
		{"DELETE", "/v1/intents/abc", 200, "any", map[string]string{"id": "abc"}},
		{"POST", "/v1/intents", 200, "create", nil},
		{"GET", "/v1/intents", 404, "", nil},
		{"PUT", "/v1/intents", 404, "", nil},
		{"GET", "/v1/intents/", 404, "", nil},
		{"GET", "/v1/intents/a/b", 404, "", nil},
		{"GET", "/static/a/b/c.txt", 200, "greedy", map[string]string{"proxy": "a/b/c.txt"}},
		{"GET", "/static/one", 200, "greedy", map[string]string{"proxy": "one"}},
		{"GET", "/static", 404, "", nil},
		{"GET", "/static/", 404, "", nil},
		{"GET", "/", 200, "root", nil},
		{"GET", "/v1/a/1/2", 200, "two", map[string]string{"x": "1", "y": "2"}},
		{"GET", "/v1/intents/a%2Fb", 200, "byid", map[string]string{"id": "a/b"}},
		{"GET", "/nowhere", 404, "", nil},
	}
	for _, tc := range cases {
		resp, body := do(t, tc.method, srv.URL+tc.path, nil, nil)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
			continue
		}
		if tc.status == 404 {
			if body != `{"message":"Not Found"}` || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s %s: 404 body %q", tc.method, tc.path, body)
			}
			continue
		}
		var got struct {
			Route  string            `json:"route"`
			Params map[string]string `json:"params"`
		}
		_ = json.Unmarshal([]byte(body), &got)
		if got.Route != tc.route {
			t.Errorf("%s %s: route %q, want %q", tc.method, tc.path, got.Route, tc.route)
		}
		gp, _ := json.Marshal(got.Params)
		wp, _ := json.Marshal(tc.params)
		if string(gp) != string(wp) {
			t.Errorf("%s %s: params %s, want %s", tc.method, tc.path, gp, wp)
		}
	}

	// $default catches what nothing else matches.
	g.Route("$default", tag("default"))
	_, body := do(t, "PATCH", srv.URL+"/nowhere", nil, nil)
	if !strings.Contains(body, `"route":"default"`) || !strings.Contains(body, `"key":"$default"`) {
		t.Errorf("$default: %s", body)
	}
}

func TestGatewayRouteKeyValidation(t *testing.T) {
	g := NewGateway(GatewayOptions{Logger: quietLogger()})
	h := (&recorder{}).handle
	g.Route("GET /x/{id}", h)
	for _, key := range []string{"GET", "FETCH /x", "GET x", "GET /x//y", "GET /{proxy+}/x", "GET /a{b}", "GET /{}", "GET /x/{other}", "GET /{a}/{a}"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Route(%q) did not panic", key)
				}
			}()
			g.Route(key, h)
		}()
	}
}

func TestGatewayResponses(t *testing.T) {
	g, srv := newTestGateway(GatewayOptions{})
	defer srv.Close()
	reply := func(resp events.APIGatewayV2HTTPResponse, err error) HTTPHandler {
		return func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return resp, err
		}
	}
	g.Route("GET /created", reply(events.APIGatewayV2HTTPResponse{
		StatusCode: 201,
		Headers:    map[string]string{"Content-Type": "application/json", "X-Custom": "a, b", "location": "/v1/intents/1"},
		Cookies:    []string{"s=1; Path=/", "t=2"},
		Body:       `{"id":"1"}`,
	}, nil))
	g.Route("GET /binary", reply(events.APIGatewayV2HTTPResponse{
		StatusCode: 200, Headers: map[string]string{"content-type": "image/png"},
		Body: base64.StdEncoding.EncodeToString([]byte{0x89, 'P', 'N', 'G'}), IsBase64Encoded: true,
	}, nil))
	g.Route("GET /nocontenttype", reply(events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{"x":1}`}, nil))
	g.Route("GET /nocontent", reply(events.APIGatewayV2HTTPResponse{StatusCode: 204}, nil))
	g.Route("GET /err", reply(events.APIGatewayV2HTTPResponse{}, errors.New("boom")))
	g.Route("GET /zero", reply(events.APIGatewayV2HTTPResponse{Body: "no status"}, nil))
	g.Route("GET /badb64", reply(events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: "!!", IsBase64Encoded: true}, nil))
	g.Route("GET /panic", func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		panic("kaboom")
	})

	resp, body := do(t, "GET", srv.URL+"/created", nil, nil)
	if resp.StatusCode != 201 || body != `{"id":"1"}` || resp.Header.Get("X-Custom") != "a, b" || resp.Header.Get("Location") != "/v1/intents/1" {
		t.Errorf("created: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if got := resp.Header.Values("Set-Cookie"); len(got) != 2 || got[0] != "s=1; Path=/" || got[1] != "t=2" {
		t.Errorf("cookies: %v", got)
	}
	if resp.Header.Get("Apigw-Requestid") == "" {
		t.Errorf("no apigw-requestid header")
	}

	resp, body = do(t, "GET", srv.URL+"/binary", nil, nil)
	if body != "\x89PNG" || resp.Header.Get("Content-Type") != "image/png" {
		t.Errorf("binary: %q %v", body, resp.Header)
	}
	resp, _ = do(t, "GET", srv.URL+"/nocontenttype", nil, nil)
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("default content type: %q", resp.Header.Get("Content-Type"))
	}
	resp, body = do(t, "GET", srv.URL+"/nocontent", nil, nil)
	if resp.StatusCode != 204 || body != "" {
		t.Errorf("nocontent: %d %q", resp.StatusCode, body)
	}
	for _, p := range []string{"/err", "/zero", "/badb64", "/panic"} {
		resp, body = do(t, "GET", srv.URL+p, nil, nil)
		if resp.StatusCode != 500 || body != `{"message":"Internal Server Error"}` {
			t.Errorf("%s: %d %q", p, resp.StatusCode, body)
		}
	}
}

func TestGatewayBodyLimit(t *testing.T) {
	g, srv := newTestGateway(GatewayOptions{})
	defer srv.Close()
	rec := &recorder{}
	g.Route("POST /v1/intents", rec.handle)

	// API Gateway's 10 MB cap, declared by Content-Length.
	big := bytes.Repeat([]byte("a"), DefaultMaxBodyBytes+1)
	resp, body := do(t, "POST", srv.URL+"/v1/intents", bytes.NewReader(big), map[string][]string{"Content-Type": {"application/json"}})
	if resp.StatusCode != 413 || body != `{"message":"Request Entity Too Large"}` {
		t.Errorf("10MB+1: %d %q", resp.StatusCode, body)
	}
	// Without Content-Length (chunked), with a smaller configured cap.
	g2, srv2 := newTestGateway(GatewayOptions{MaxBodyBytes: 16})
	defer srv2.Close()
	g2.Route("POST /v1/intents", rec.handle)
	resp, _ = do(t, "POST", srv2.URL+"/v1/intents", io.MultiReader(strings.NewReader(strings.Repeat("b", 17))), map[string][]string{"Content-Type": {"text/plain"}})
	if resp.StatusCode != 413 {
		t.Errorf("chunked over cap: %d", resp.StatusCode)
	}
	resp, _ = do(t, "POST", srv2.URL+"/v1/intents", io.MultiReader(strings.NewReader(strings.Repeat("b", 16))), map[string][]string{"Content-Type": {"text/plain"}})
	if resp.StatusCode != 200 {
		t.Errorf("chunked at cap: %d", resp.StatusCode)
	}
	if rec.calls() != 1 {
		t.Errorf("handler calls = %d, want 1", rec.calls())
	}
	// Under the gateway cap but over Lambda's 6 MB invocation payload.
	g3, srv3 := newTestGateway(GatewayOptions{LambdaPayloadLimit: 1000})
	defer srv3.Close()
	g3.Route("POST /v1/intents", rec.handle)
	resp, _ = do(t, "POST", srv3.URL+"/v1/intents", strings.NewReader(strings.Repeat("c", 2000)), map[string][]string{"Content-Type": {"text/plain"}})
	if resp.StatusCode != 500 || rec.calls() != 1 {
		t.Errorf("over lambda payload: %d, calls %d", resp.StatusCode, rec.calls())
	}
}

func TestGatewayAuthorizer(t *testing.T) {
	g, srv := newTestGateway(GatewayOptions{Region: "eu-west-1", AccountID: "123456789012", APIID: "abc123"})
	defer srv.Close()
	rec := &recorder{}
	var authCalls atomic.Int32
	var mu sync.Mutex
	var seen events.APIGatewayV2CustomAuthorizerV2Request
	auth := func(ctx context.Context, req events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
		authCalls.Add(1)
		mu.Lock()
		seen = req
		mu.Unlock()
		switch req.IdentitySource[0] {
		case "Bearer good":
			return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: true, Context: map[string]any{"botId": "b1", "tenant": "t1", "level": 3}}, nil
		case "Bearer error":
			return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, errors.New("authorizer broke")
		}
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: false}, nil
	}
	g.Route("POST /v1/intents", rec.handle, RouteOptions{Authorizer: auth})
	g.Route("GET /v1/q", rec.handle, RouteOptions{Authorizer: auth, IdentitySource: []string{"$request.querystring.token"}})
	g.Route("GET /open", rec.handle)

	// Missing identity source: 401 without calling the authorizer.
	resp, body := do(t, "POST", srv.URL+"/v1/intents", strings.NewReader("{}"), nil)
	if resp.StatusCode != 401 || body != `{"message":"Unauthorized"}` || authCalls.Load() != 0 {
		t.Fatalf("missing header: %d %q calls=%d", resp.StatusCode, body, authCalls.Load())
	}
	resp, _ = do(t, "POST", srv.URL+"/v1/intents", strings.NewReader("{}"), map[string][]string{"Authorization": {""}})
	if resp.StatusCode != 401 || authCalls.Load() != 0 {
		t.Fatalf("empty header: %d calls=%d", resp.StatusCode, authCalls.Load())
	}
	// Denied: 403.
	resp, body = do(t, "POST", srv.URL+"/v1/intents", strings.NewReader("{}"), map[string][]string{"Authorization": {"Bearer bad"}})
	if resp.StatusCode != 403 || body != `{"message":"Forbidden"}` || authCalls.Load() != 1 {
		t.Fatalf("denied: %d %q calls=%d", resp.StatusCode, body, authCalls.Load())
	}
	// Authorizer failure: 500.
	resp, body = do(t, "POST", srv.URL+"/v1/intents", strings.NewReader("{}"), map[string][]string{"Authorization": {"Bearer error"}})
	if resp.StatusCode != 500 || body != `{"message":"Internal Server Error"}` {
		t.Fatalf("authorizer error: %d %q", resp.StatusCode, body)
	}
	if rec.calls() != 0 {
		t.Fatalf("handler called %d times before any authorized request", rec.calls())
	}
	// Authorized: the handler sees the authorizer context (after JSON, so
	// numbers are float64 as in Lambda).
	resp, _ = do(t, "POST", srv.URL+"/v1/intents?dry=1", strings.NewReader("{}"), map[string][]string{"Authorization": {"Bearer good"}, "Content-Type": {"application/json"}})
	if resp.StatusCode != 200 {
		t.Fatalf("authorized: %d", resp.StatusCode)
	}
	req := rec.last(t)
	if req.RequestContext.Authorizer == nil {
		t.Fatal("no authorizer in request context")
	}
	lam := req.RequestContext.Authorizer.Lambda
	if lam["botId"] != "b1" || lam["tenant"] != "t1" || lam["level"] != float64(3) {
		t.Errorf("authorizer context: %#v", lam)
	}
	mu.Lock()
	a := seen
	mu.Unlock()
	if a.Version != "2.0" || a.Type != "REQUEST" || a.RouteKey != "POST /v1/intents" || a.RawPath != "/v1/intents" || a.RawQueryString != "dry=1" {
		t.Errorf("authorizer request: %+v", a)
	}
	if a.RouteArn != "arn:aws:execute-api:eu-west-1:123456789012:abc123/$default/POST/v1/intents" {
		t.Errorf("RouteArn %q", a.RouteArn)
	}
	if len(a.IdentitySource) != 1 || a.IdentitySource[0] != "Bearer good" || a.Headers["authorization"] != "Bearer good" {
		t.Errorf("identity %v headers %v", a.IdentitySource, a.Headers)
	}
	if a.RequestContext.RequestID != req.RequestContext.RequestID || a.RequestContext.HTTP.Method != "POST" {
		t.Errorf("authorizer request context %+v", a.RequestContext)
	}

	// Query-string identity source.
	resp, _ = do(t, "GET", srv.URL+"/v1/q", nil, nil)
	if resp.StatusCode != 401 {
		t.Errorf("query identity missing: %d", resp.StatusCode)
	}
	resp, _ = do(t, "GET", srv.URL+"/v1/q?token=Bearer%20good", nil, nil)
	if resp.StatusCode != 200 {
		t.Errorf("query identity: %d", resp.StatusCode)
	}
	// Routes without an authorizer stay open.
	resp, _ = do(t, "GET", srv.URL+"/open", nil, nil)
	if resp.StatusCode != 200 || rec.last(t).RequestContext.Authorizer != nil {
		t.Errorf("open route: %d", resp.StatusCode)
	}
}

func TestGatewayIntegrationTimeout(t *testing.T) {
	g, srv := newTestGateway(GatewayOptions{IntegrationTimeout: 50 * time.Millisecond, FunctionTimeout: time.Second})
	defer srv.Close()
	release := make(chan struct{})
	finished := make(chan struct{})
	g.Route("GET /slow", func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		defer close(finished)
		<-release
		return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
	})
	resp, body := do(t, "GET", srv.URL+"/slow", nil, nil)
	if resp.StatusCode != 503 || body != `{"message":"Service Unavailable"}` {
		t.Errorf("timeout: %d %q", resp.StatusCode, body)
	}
	close(release)
	<-finished
}

func TestGatewayHealth(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	_, srv := newTestGateway(GatewayOptions{Health: func() error {
		if healthy.Load() {
			return nil
		}
		return errors.New("dynamodb unreachable")
	}})
	defer srv.Close()
	resp, body := do(t, "GET", srv.URL+"/healthz", nil, nil)
	if resp.StatusCode != 200 || body != `{"status":"ok"}` {
		t.Errorf("healthy: %d %q", resp.StatusCode, body)
	}
	healthy.Store(false)
	resp, body = do(t, "GET", srv.URL+"/healthz", nil, nil)
	if resp.StatusCode != 503 || strings.Contains(body, "dynamodb") {
		t.Errorf("unhealthy: %d %q", resp.StatusCode, body)
	}

	_, srv2 := newTestGateway(GatewayOptions{})
	defer srv2.Close()
	if resp, _ := do(t, "GET", srv2.URL+"/healthz", nil, nil); resp.StatusCode != 404 {
		t.Errorf("no Health option: %d", resp.StatusCode)
	}
}

func TestGatewayListenAndServeLoopbackOnly(t *testing.T) {
	g := NewGateway(GatewayOptions{Logger: quietLogger()})
	if err := g.ListenAndServe(context.Background(), "0.0.0.0:0"); err == nil {
		t.Fatal("listening on 0.0.0.0 must be refused")
	}
	if err := g.ListenAndServe(context.Background(), ":0"); err == nil {
		t.Fatal("listening on all interfaces must be refused")
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- g.ListenAndServe(ctx, "127.0.0.1:0") }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("ListenAndServe: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ListenAndServe did not return after cancel")
	}
}
