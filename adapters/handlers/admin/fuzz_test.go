package admin

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// FuzzDecodeBody: the admin API's strict decoder never panics, answers a
// well-formed error when it refuses, and accepts only one JSON object of the
// documented shape — nothing before or after it.
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
		if b64 {
			t.Fatalf("a base64 body was accepted")
		}
		if !json.Valid([]byte(body)) {
			t.Fatalf("accepted a body that is not one JSON document: %q -> %+v", body, req)
		}
	})
}
