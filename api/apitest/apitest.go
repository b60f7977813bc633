// Package apitest checks live HTTP traffic against api/openapi.json with
// kin-openapi. The e2e harness puts Middleware in front of the API gateway,
// so every request any test makes (the test client, the Go client package,
// outboxctl, the sandbox's webhook deliveries) and every answer is validated:
// an undocumented route, status, header or field fails the test. The
// document covers every path under /v1/ (APIPrefix); other paths (static
// files) are not checked.
package apitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/botharness/outbox/api"
)

// Validator validates requests and responses against the document and
// collects what does not match.
type Validator struct {
	router routers.Router

	mu         sync.Mutex
	violations []string
	checked    int
}

// New loads api/openapi.json. The document is parsed, validated and routed
// once per process (about 50 ms of CPU each time, 100 envs in e2e); each
// Validator shares that read-only router and keeps its own findings.
func New() (*Validator, error) {
	r, err := loadRouter()
	if err != nil {
		return nil, err
	}
	return &Validator{router: r}, nil
}

var loadRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	// Match paths on any host: tests listen on random ports.
	doc.Servers = nil
	return gorillamux.NewRouter(doc)
})

// APIPrefix is the part of the URL space the document covers, all of it:
// any request under it must match a documented route.
const APIPrefix = "/v1/"

// errorStatuses are the answers an out-of-contract request may get.
var errorStatuses = map[int]bool{400: true, 401: true, 403: true, 404: true, 409: true, 413: true, 415: true, 422: true}

// bearerPresent is the security check: the spec's only scheme is a bearer
// token, so a request without one does not satisfy it.
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	h := in.RequestValidationInput.Request.Header.Get("Authorization")
	if !strings.HasPrefix(h, "Bearer ") || len(h) == len("Bearer ") {
		return errors.New("no bearer token")
	}
	return nil
}

// Middleware validates each exchange with next. A request the document does
// not allow must be refused with a documented 4xx; every response must be
// documented for its route, with its headers and body schema.
func (v *Validator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))

		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		res := rec.Result()
		respBody := rec.Body.Bytes()
		for k, vs := range res.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(res.StatusCode)
		_, _ = w.Write(respBody)

		v.check(r, body, res, respBody)
	})
}

func (v *Validator) check(r *http.Request, body []byte, res *http.Response, respBody []byte) {
	if !strings.HasPrefix(r.URL.Path, APIPrefix) {
		return // not the API (e.g. the console's static files)
	}
	what := fmt.Sprintf("%s %s -> %d", r.Method, r.URL.RequestURI(), res.StatusCode)
	v.mu.Lock()
	v.checked++
	v.mu.Unlock()
	vr := r.Clone(context.Background())
	vr.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) > 0 && vr.Header.Get("Content-Type") == "" {
		// The decoding rule (adapters/handlers/httpjson/decode.go): a body
		// without a Content-Type is read as JSON, which OpenAPI cannot say.
		vr.Header.Set("Content-Type", "application/json")
	}
	route, params, err := v.router.FindRoute(vr)
	if err != nil {
		v.fail("%s: route not in api/openapi.json: %v", what, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: bearerPresent, MultiError: true}}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	if reqErr != nil && !errorStatuses[res.StatusCode] {
		v.fail("%s: the request breaks the contract (%v) but the answer is not a documented refusal", what, reqErr)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
		Body:    io.NopCloser(bytes.NewReader(respBody)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		excerpt := string(respBody)
		if len(excerpt) > 400 {
			excerpt = excerpt[:400] + "..."
		}
		v.fail("%s: the response breaks api/openapi.json: %v\nbody: %s", what, err, excerpt)
	}
}

func (v *Validator) fail(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.violations = append(v.violations, fmt.Sprintf(format, args...))
}

// Violations returns what failed so far.
func (v *Validator) Violations() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.violations...)
}

// Checked is the number of exchanges validated.
func (v *Validator) Checked() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.checked
}

// Report fails t for every violation (call it after the server stopped).
func (v *Validator) Report(t testing.TB) {
	t.Helper()
	for _, msg := range v.Violations() {
		t.Errorf("openapi: %s", msg)
	}
}
