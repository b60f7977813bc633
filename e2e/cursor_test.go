package e2e

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Issue 24 finding 9: a crafted cursor of the right listing (right partition,
// misshapen keys) reached DynamoDB and answered 500. On every list route it
// is now 400 invalid_cursor.
func TestCraftedCursorIsInvalidCursorOnEveryListRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id := e.mustSubmit("cur-1", intentBody("acct-cur", "chan-1", "one"))
	enc := func(s string) string { return url.QueryEscape(base64.RawURLEncoding.EncodeToString([]byte(s))) }
	long := strings.Repeat("x", 1100)
	routes := []struct {
		path, token string
		cursors     []string
	}{
		{"/v1/admin/intents", opToken, []string{enc(`{"l":"needs-human","p":{"0":{"s":"","p":"","k":""}}}`), enc(`{"l":"needs-human","p":{"0":{"s":"` + long + `","p":"INTENT#x","k":"INTENT"}}}`), "garbage"}},
		{"/v1/admin/webhooks/unresolved", opToken, []string{enc(`{"l":"unresolved-webhooks","p":{"3":{"s":"a","p":"","k":""}}}`), enc(`{"l":"unresolved-webhooks","d":[99999]}`)}},
		{"/v1/admin/grants", opToken, []string{enc(`{"gsi1pk":"GRANTS","gsi1sk":"a"}`), enc(`{"gsi1pk":"GRANTS","gsi1sk":"","pk":"GRANT#x","sk":"GRANT"}`)}},
		{"/v1/admin/tokens", opToken, []string{enc(`{"gsi1pk":"TOKENS","gsi1sk":"a"}`), enc(`{"gsi1pk":"TOKENS","gsi1sk":"a","pk":"TOKEN#x","sk":""}`)}},
		{"/v1/intents/" + id + "/history", botToken, []string{"0", "99", "1e3"}},
		{"/v1/admin/intents/" + id + "/history", opToken, []string{"0", "-1"}},
	}
	for _, rt := range routes {
		for _, c := range rt.cursors {
			r := e.do("GET", rt.path+"?cursor="+c, rt.token, nil, "")
			if r.status != http.StatusBadRequest || r.errorCode() != "invalid_cursor" {
				t.Errorf("%s?cursor=%.40s: %d %s, want 400 invalid_cursor", rt.path, c, r.status, r.body)
			}
		}
	}
}
