package apitest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The validator catches a handler that drifts from the document: an
// undocumented status, a body off its schema, an undocumented route, an
// out-of-contract request accepted; and passes one that does not drift.
func TestValidatorCatchesDrift(t *testing.T) {
	intent := `{"id":"it_abc","bot":"b","idempotencyKey":"k","kind":"reply","provider":"sandbox","account":"a","action":"send_message",` +
		`"target":"t","payload":{},"payloadHash":"h","grant":{"id":"g","version":1},"status":"pending","version":1,` +
		`"createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z","attemptCount":0,"attempts":[]}`
	submit := `{"kind":"reply","provider":"sandbox","account":"a","action":"send_message","target":"t","payload":{},"grant":{"id":"g","version":1}}`
	cases := []struct {
		name, method, path, token, key, body string
		status                               int
		headers                              map[string]string
		answer                               string
		wantViolation                        string
	}{
		{"conforming submit", "POST", "/v1/intents", "tok", "k1", submit, 201, map[string]string{"Location": "/v1/intents/it_abc"}, intent, ""},
		{"undocumented status", "POST", "/v1/intents", "tok", "k1", submit, 202, map[string]string{"Location": "/x"}, intent, "status"},
		{"missing Location header", "POST", "/v1/intents", "tok", "k1", submit, 201, nil, intent, "Location"},
		{"unknown field in the answer", "GET", "/v1/intents/it_abc", "tok", "", "", 200, nil, strings.Replace(intent, `"bot"`, `"secret":"x","bot"`, 1), "secret"},
		{"error code not enumerated", "GET", "/v1/intents/it_x", "tok", "", "", 404, nil, `{"error":{"code":"nope","message":"m"}}`, "code"},
		{"undocumented route", "GET", "/v1/nothing", "tok", "", "", 200, nil, `{}`, "route"},
		{"bad request accepted", "POST", "/v1/intents", "tok", "k1", `{"kind":"reply"}`, 201, map[string]string{"Location": "/x"}, intent, "breaks the contract"},
		{"bad request refused", "POST", "/v1/intents", "tok", "k1", `{"kind":"reply"}`, 400, nil, `{"error":{"code":"invalid_field","message":"m","field":"provider"}}`, ""},
		{"no token refused by the gateway", "GET", "/v1/intents/it_x", "", "", "", 401, nil, `{"message":"Unauthorized"}`, ""},
		{"public document", "GET", "/v1/openapi.json", "", "", "", 200, nil, `{"openapi":"3.1.0"}`, ""},
		{"outside the API is not checked", "GET", "/console/app.js", "", "", "", 200, nil, `{}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := New()
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				for k, val := range c.headers {
					w.Header().Set(k, val)
				}
				w.WriteHeader(c.status)
				io.WriteString(w, c.answer)
			})))
			defer srv.Close()
			req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			if c.key != "" {
				req.Header.Set("Idempotency-Key", c.key)
			}
			if c.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || string(got) != c.answer {
				t.Fatalf("the middleware changed the answer: %d %s", resp.StatusCode, got)
			}
			vs := v.Violations()
			want := 1
			if !strings.HasPrefix(c.path, APIPrefix) {
				want = 0
			}
			if v.Checked() != want {
				t.Fatalf("checked %d exchanges, want %d", v.Checked(), want)
			}
			if c.wantViolation == "" && len(vs) > 0 {
				t.Fatalf("unexpected violations: %v", vs)
			}
			if c.wantViolation != "" && (len(vs) == 0 || !strings.Contains(strings.Join(vs, "\n"), c.wantViolation)) {
				t.Fatalf("want a violation mentioning %q, got %v", c.wantViolation, vs)
			}
		})
	}
}
