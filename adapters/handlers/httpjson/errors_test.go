package httpjson

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/botlimit"
	"github.com/botharness/outbox/core/resolve"
	"github.com/botharness/outbox/core/webhook"
)

// TestErrorTable: every domain error gets the same status and code from
// every handler (they all answer through Fail), wrapped or not.
func TestErrorTable(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
		field  string
	}{
		{&core.ValidationError{Code: core.CodeInvalidField, Field: "target", Message: "m"}, 400, core.CodeInvalidField, "target"},
		{&core.ValidationError{Code: core.CodeMalformedJSON, Message: "m"}, 400, core.CodeMalformedJSON, ""},
		{&core.ValidationError{Code: core.CodePayloadTooLarge, Message: "m"}, 413, core.CodePayloadTooLarge, ""},
		{&core.ValidationError{Code: core.CodeUnknownProvider, Field: "provider", Message: "m"}, 422, core.CodeUnknownProvider, "provider"},
		{&core.ValidationError{Code: core.CodeUnknownAction, Field: "action", Message: "m"}, 422, core.CodeUnknownAction, "action"},
		{&core.ValidationError{Code: core.CodeDeadlinePassed, Field: "deadline", Message: "m"}, 422, core.CodeDeadlinePassed, "deadline"},
		{&core.ValidationError{Code: core.CodeInvalidIdempotencyKey, Field: "Idempotency-Key", Message: "m"}, 400, core.CodeInvalidIdempotencyKey, "Idempotency-Key"},
		{&resolve.RefusedError{Status: core.StatusGrantRevoked, Reason: "r"}, 409, "refused_by_revalidation", ""},
		{core.ErrIdempotencyKeyReused, 422, "idempotency_key_reused", "Idempotency-Key"},
		{core.ErrGrantDoesNotCover, 403, "grant_does_not_cover", "grant"},
		{core.ErrGrantRevoked, 409, "grant_revoked", ""},
		{webhook.ErrEventInProgress, 409, "event_in_progress", ""},
		{core.ErrDuplicateRiskNotAccepted, 409, "duplicate_risk_not_accepted", "acceptDuplicateRisk"},
		{resolve.ErrNotNeedsHuman, 409, "not_needs_human", ""},
		{core.ErrConflict, 409, "version_conflict", ""},
		{core.ErrNotFound, 404, "not_found", ""},
		{core.ErrForbidden, 403, "forbidden", ""},
		{&botlimit.LimitError{Code: botlimit.CodeRateLimited, RetryAfter: 1500 * time.Millisecond, Message: "m"}, 429, botlimit.CodeRateLimited, ""},
		{&botlimit.LimitError{Code: botlimit.CodeTooManyOpenIntents, Message: "m"}, 429, botlimit.CodeTooManyOpenIntents, ""},
		{errors.New("dynamodb: connection reset"), 500, "internal", ""},
	} {
		for _, err := range []error{c.err, fmt.Errorf("context: %w", c.err)} {
			r := Fail(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), err, "try again")
			var body ErrorBody
			if jerr := json.Unmarshal([]byte(r.Body), &body); jerr != nil {
				t.Fatalf("%v: body %q: %v", err, r.Body, jerr)
			}
			if r.StatusCode != c.status || body.Error.Code != c.code || body.Error.Field != c.field || body.Error.Message == "" {
				t.Errorf("%v: %d %+v, want %d %s field %q", err, r.StatusCode, body.Error, c.status, c.code, c.field)
			}
			if want := map[string]string{botlimit.CodeRateLimited: "2", botlimit.CodeTooManyOpenIntents: "1"}[c.code]; want != "" && r.Headers["Retry-After"] != want {
				t.Errorf("%v: Retry-After %q, want %s (whole seconds, rounded up, at least 1)", err, r.Headers["Retry-After"], want)
			}
			if c.code == "event_in_progress" && r.Headers["Retry-After"] != "5" {
				t.Errorf("%v: Retry-After %q, want 5", err, r.Headers["Retry-After"])
			}
			if c.status == http.StatusInternalServerError && body.Error.Message != "try again" {
				t.Errorf("internal failure shows %q, not the handler's message", body.Error.Message)
			}
		}
	}
}

func TestPage(t *testing.T) {
	for _, c := range []struct {
		q     map[string]string
		limit int
		ok    bool
	}{
		{nil, 50, true},
		{map[string]string{"limit": "1"}, 1, true},
		{map[string]string{"limit": "100", "cursor": "abc"}, 100, true},
		{map[string]string{"limit": "0"}, 0, false},
		{map[string]string{"limit": "101"}, 0, false},
		{map[string]string{"limit": "-5"}, 0, false},
		{map[string]string{"limit": "ten"}, 0, false},
		{map[string]string{"limit": ""}, 0, false},
	} {
		limit, cursor, err := Page(events.APIGatewayV2HTTPRequest{QueryStringParameters: c.q})
		var ve *core.ValidationError
		switch {
		case c.ok && (err != nil || limit != c.limit || cursor != c.q["cursor"]):
			t.Errorf("%v: %d %q %v, want %d", c.q, limit, cursor, err, c.limit)
		case !c.ok && (!errors.As(err, &ve) || ve.Field != "limit"):
			t.Errorf("%v: %v, want a ValidationError naming limit", c.q, err)
		}
	}
}

func TestCheckPathIDs(t *testing.T) {
	long := make([]byte, 3000)
	for i := range long {
		long[i] = 'a'
	}
	for _, c := range []struct {
		params map[string]string
		field  string
	}{
		{map[string]string{"id": "it_abc"}, ""},
		{map[string]string{"provider": "sandbox", "account": "ab\x00"}, "account"},
		{map[string]string{"id": string(long)}, "id"},
		{map[string]string{"grantId": "g\n1"}, "grantId"},
	} {
		r, ok := CheckPathIDs(events.APIGatewayV2HTTPRequest{PathParameters: c.params})
		if ok != (c.field == "") {
			t.Errorf("%v: ok=%v", c.params, ok)
			continue
		}
		if !ok {
			var body ErrorBody
			_ = json.Unmarshal([]byte(r.Body), &body)
			if r.StatusCode != 400 || body.Error.Field != c.field {
				t.Errorf("%v: %d %+v, want 400 naming %s", c.params, r.StatusCode, body.Error, c.field)
			}
		}
	}
}
