package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestOneDecodingRuleForEveryJSONRoute: the bot and admin APIs decode bodies
// the same way (httpjson.RequestBody + DecodeStrict): a missing Content-Type
// is accepted, a non-JSON one is 415 unsupported_media_type, a
// differently-cased field is an unknown field (400 invalid_field naming it),
// and a refused request writes nothing.
func TestOneDecodingRuleForEveryJSONRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{DisableStream: true})
	grant := `{"bot":"bot-1","provider":"sandbox","account":"acct-dec","actions":["send_message"],"targets":["*"]}`
	intent := intentBody("acct-dec", "chan-1", "hi")
	raw := func(method, path, token, key, contentType, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, e.api.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	routes := []struct {
		name, method, path, token, key, body, recased, field string
	}{
		{"intake", "POST", "/v1/intents", botToken, "dec-1", intent, strings.Replace(intent, `"kind"`, `"Kind"`, 1), "Kind"},
		{"sources", "PUT", "/v1/sources/dec-src", botToken, "", `{"revision":1}`, `{"Revision":1}`, "Revision"},
		{"admin grant", "PUT", "/v1/admin/grants/g-dec", opToken, "", grant, strings.Replace(grant, `"bot"`, `"Bot"`, 1), "Bot"},
	}
	for _, r := range routes {
		before := e.itemCount()
		if st, b := raw(r.method, r.path, r.token, r.key+"-415", "text/plain", r.body); st != 415 || !strings.Contains(b, `"unsupported_media_type"`) {
			t.Errorf("%s with Content-Type text/plain: %d %s, want 415 unsupported_media_type", r.name, st, b)
		}
		if st, b := raw(r.method, r.path, r.token, r.key+"-case", "application/json", r.recased); st != 400 || !strings.Contains(b, `"invalid_field"`) || !strings.Contains(b, `"field":"`+r.field+`"`) {
			t.Errorf("%s with field %q: %d %s, want 400 invalid_field naming it", r.name, r.field, st, b)
		}
		if n := e.itemCount(); n != before {
			t.Errorf("%s: refused requests wrote %d intent items", r.name, n-before)
		}
		if st, b := raw(r.method, r.path, r.token, r.key, "", r.body); st/100 != 2 {
			t.Errorf("%s without Content-Type: %d %s, want accepted", r.name, st, b)
		}
	}
}
