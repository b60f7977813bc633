package httpjson

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/core"
)

type inner struct {
	ID      int `json:"id"`
	Version int `json:"version"`
}

type shape struct {
	Kind    string          `json:"kind"`
	Grant   *inner          `json:"grant"`
	List    []inner         `json:"list,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Labels  map[string]int  `json:"labels,omitempty"`
}

// TestDecodeStrictFieldNamesAreExact: a differently-cased field is an unknown
// field (400 invalid_field naming it), at any depth; payloads and maps are
// free-form; wrong types name the field; non-JSON is malformed_json.
func TestDecodeStrictFieldNamesAreExact(t *testing.T) {
	for _, c := range []struct {
		body, code, field string
	}{
		{`{"kind":"reply","grant":{"id":1,"version":1}}`, "", ""},
		{`{"Kind":"reply"}`, core.CodeInvalidField, "Kind"},
		{`{"kind":"reply","grant":{"ID":1}}`, core.CodeInvalidField, "grant.ID"},
		{`{"kind":"reply","list":[{"id":1},{"Version":2}]}`, core.CodeInvalidField, "list.Version"},
		{`{"kind":"reply","payload":{"Kind":1,"x":2},"labels":{"Kind":1}}`, "", ""},
		{`{"kind":"reply","extra":1}`, core.CodeInvalidField, "extra"},
		{`{"kind":1}`, core.CodeInvalidField, "kind"},
		{`{"kind":"reply"} {}`, core.CodeMalformedJSON, ""},
		{`[1]`, core.CodeMalformedJSON, ""},
		{`{"kind":`, core.CodeMalformedJSON, ""},
	} {
		var v shape
		err := DecodeStrict([]byte(c.body), &v)
		var ve *core.ValidationError
		switch {
		case c.code == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.body, err)
		case c.code != "" && (!errors.As(err, &ve) || ve.Code != c.code || ve.Field != c.field):
			t.Errorf("%s: %v, want %s field %q", c.body, err, c.code, c.field)
		}
	}
}

// TestRequestBodyContentType: a missing Content-Type is accepted, JSON types
// (with parameters, +json) are accepted, anything else is 415.
func TestRequestBodyContentType(t *testing.T) {
	for _, c := range []struct {
		ct     string
		status int
	}{
		{"", 0}, {"application/json", 0}, {"application/json; charset=utf-8", 0}, {"Application/JSON", 0},
		{"application/merge-patch+json", 0}, {"text/plain", 415}, {"application/x-www-form-urlencoded", 415}, {"garbage;;", 415},
	} {
		req := events.APIGatewayV2HTTPRequest{Body: `{}`, Headers: map[string]string{}}
		if c.ct != "" {
			req.Headers["content-type"] = c.ct
		}
		body, resp, ok := RequestBody(req)
		if c.status == 0 && (!ok || string(body) != `{}`) {
			t.Errorf("%q: refused %d %s", c.ct, resp.StatusCode, resp.Body)
		}
		if c.status != 0 && (ok || resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(resp.Body, CodeUnsupportedMediaType)) {
			t.Errorf("%q: ok=%v %d %s, want 415 %s", c.ct, ok, resp.StatusCode, resp.Body, CodeUnsupportedMediaType)
		}
	}
	// A base64 body (what API Gateway sends without a text content type) is decoded.
	body, _, ok := RequestBody(events.APIGatewayV2HTTPRequest{Body: "e30=", IsBase64Encoded: true})
	if !ok || string(body) != `{}` {
		t.Fatalf("base64 body: %q %v", body, ok)
	}
}

// TestUnknownProviderNamesTheConfiguration: the answer says what to configure.
func TestUnknownProviderNamesTheConfiguration(t *testing.T) {
	r, _ := Answer(&core.ValidationError{Code: core.CodeUnknownProvider, Field: "provider", Message: `no provider named "slack"`})
	if r.StatusCode != 422 || !strings.Contains(r.Body, "OUTBOX_PROVIDER_CONFIG") || !strings.Contains(r.Body, "Connecting a real provider") {
		t.Fatalf("unknown_provider answer %d %s does not name the configuration", r.StatusCode, r.Body)
	}
}
