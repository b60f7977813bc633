package e2e

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botharness/outbox/adapters/routes"
)

// TestEveryRouteRefusesMalformedIDs: over every public route, an over-long
// or control-character identifier in the path or the body is answered with a
// 4xx naming it, never a 5xx, and nothing is stored (the table holds the same
// items before and after).
func TestEveryRouteRefusesMalformedIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	// One real intent, so routes that would find it get past "not found".
	good := e.mustSubmit("ids-1", intentBody("acct-1", "chan-1", "hi"))
	before := e.allItems()

	bad := map[string]string{
		"over-long":     strings.Repeat("a", 3000),
		"NUL":           "ab\x00",
		"newline":       "a\nb",
		"C1 control":    "a\u0085b",
		"one over 512B": strings.Repeat("x", 513),
	}
	// Good values for the other parameters of a route.
	goodParam := map[string]string{"id": good, "grantId": "g-1", "provider": "sandbox", "account": "acct-1", "sourceId": "src-1", "backupId": "bk-1",
		"eventId": "evt_1", "tokenId": "tok_1"}
	// A well-formed body per route, so only the identifier is wrong.
	bodies := map[string]string{
		"POST /v1/admin/intents/{id}/resolution":          `{"decision":"abandon","reason":"x"}`,
		"POST /v1/admin/intents/{id}/recommendation":      `{"decision":"abandon","summary":"x"}`,
		"PUT /v1/admin/grants/{grantId}":                  `{"bot":"bot-1","provider":"sandbox","account":"a","actions":["send_message"],"targets":["*"]}`,
		"POST /v1/admin/grants/{grantId}/revoke":          `{"reason":"x"}`,
		"POST /v1/admin/tokens/{tokenId}/revoke":          `{"reason":"x"}`,
		"PUT /v1/admin/capabilities/{provider}/{account}": `{"withdrawn":true,"reason":"x"}`,
		"PUT /v1/sources/{sourceId}":                      `{"revision":1}`,
		routes.Webhook:                                    `{"id":"evt_1","type":"message.sent"}`,
	}
	token := func(route string) string {
		switch {
		case strings.Contains(route, "/v1/admin/"):
			return opToken
		case strings.Contains(route, "/v1/webhooks/"):
			return ""
		}
		return botToken
	}
	param := regexp.MustCompile(`\{([A-Za-z]+)\}`)
	all := append(append(append([]string{}, routes.Intake...), routes.Admin...), routes.Webhook)
	tested := 0
	check := func(route, what, method, path, body string, headers map[string]string) {
		t.Helper()
		r := e.do(method, path, token(route), headers, body)
		if r.status < 400 || r.status >= 500 {
			t.Errorf("%s with %s: %d %s, want a 4xx", route, what, r.status, r.body)
		}
		tested++
	}
	for _, route := range all {
		method, pattern, _ := strings.Cut(route, " ")
		names := param.FindAllStringSubmatch(pattern, -1)
		for _, n := range names {
			for label, v := range bad {
				path := param.ReplaceAllStringFunc(pattern, func(m string) string {
					name := m[1 : len(m)-1]
					if name == n[1] {
						return url.PathEscape(v)
					}
					return url.PathEscape(goodParam[name])
				})
				check(route, fmt.Sprintf("%s %s", n[1], label), method, path, bodies[route], nil)
			}
		}
	}
	// Identifiers in bodies.
	for label, v := range bad {
		for _, field := range []string{"account", "target", "grant", "source"} {
			body := intentBody("acct-1", "chan-1", "hi")
			switch field {
			case "account":
				body = intentBody(v, "chan-1", "hi")
			case "target":
				body = intentBody("acct-1", v, "hi")
			case "grant":
				body = strings.Replace(body, `"id":"g-1"`, fmt.Sprintf(`"id":%q`, v), 1)
			case "source":
				body = strings.Replace(body, `"grant"`, fmt.Sprintf(`"source":{"id":%q,"revision":1},"grant"`, v), 1)
			}
			check("POST /v1/intents", field+" "+label, "POST", "/v1/intents", body, map[string]string{"Idempotency-Key": "ids-" + field + "-" + label})
		}
		check("PUT /v1/admin/grants/{grantId}", "targets "+label, "PUT", "/v1/admin/grants/g-ids",
			fmt.Sprintf(`{"bot":"bot-1","provider":"sandbox","account":"a","actions":["send_message"],"targets":[%q]}`, v), nil)
		check("POST /v1/admin/backups", "profile "+label, "POST", "/v1/admin/backups", fmt.Sprintf(`{"profile":%q}`, v), nil)
		check("POST /v1/admin/restores", "backupId "+label, "POST", "/v1/admin/restores", fmt.Sprintf(`{"backupId":%q}`, v), nil)
	}
	if tested < 80 {
		t.Fatalf("only %d requests made; the route table lost routes", tested)
	}
	if after := e.allItems(); after != before {
		t.Fatalf("the table held %d items before and %d after: a malformed request stored something", before, after)
	}
}

// allItems counts every item of the table.
func (e *env) allItems() int {
	e.t.Helper()
	n := 0
	var start map[string]typesAV
	for {
		out, err := e.clients.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(e.table), Select: "COUNT", ExclusiveStartKey: start})
		if err != nil {
			e.t.Fatal(err)
		}
		n += int(out.Count)
		if len(out.LastEvaluatedKey) == 0 {
			return n
		}
		start = out.LastEvaluatedKey
	}
}
