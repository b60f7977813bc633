package admin

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// FuzzDecodeBody: the admin API's strict decoder never panics, answers a
// well-formed error when it refuses, and accepts only one JSON object of the
// documented shape — nothing before or after it (a base64 body, as API
// Gateway sends one without a text content type, once decoded).
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"decision":"retry","reason":"provider confirmed nothing was sent"}`,
		`{"decision":"accept-success","reason":"seen","externalId":"sbx_1"}`,
		`{"decision":"abandon","reason":"x","extra":1}`,
		`{"decision":1}`, `[]`, `null`, ``, `{`, `{"reason":"\ud800"}`,
		`{"decision":"abandon","reason":"x"} {"decision":"retry","reason":"y"}`,
		`{"decision":"abandon","reason":"x"}garbage`,
	} {
		f.Add(s, false)
	}
	f.Add(`eyJkZWNpc2lvbiI6InJldHJ5In0=`, true)
	f.Fuzz(func(t *testing.T, body string, b64 bool) {
		var req ResolutionBody
		resp, ok := DecodeBody(events.APIGatewayV2HTTPRequest{Body: body, IsBase64Encoded: b64}, &req)
		if !ok {
			if resp.StatusCode < 400 || resp.StatusCode >= 500 {
				t.Fatalf("refusal with status %d", resp.StatusCode)
			}
			var eb struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(resp.Body), &eb); err != nil || eb.Error.Code == "" {
				t.Fatalf("refusal body is not the error shape: %q", resp.Body)
			}
			return
		}
		if b64 { // API Gateway's encoding of a body without a text content type: decoded first
			raw, err := base64.StdEncoding.DecodeString(body)
			if err != nil {
				t.Fatalf("accepted a body that is not base64: %q", body)
			}
			body = string(raw)
		}
		if !json.Valid([]byte(body)) {
			t.Fatalf("accepted a body that is not one JSON document: %q -> %+v", body, req)
		}
	})
}
