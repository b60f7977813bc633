package httpjson

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/botlimit"
	"github.com/botharness/outbox/core/resolve"
	"github.com/botharness/outbox/core/webhook"
)

// The one table mapping domain errors to HTTP answers; every handler answers
// errors through Fail. Order matters: the first row that matches wins.
var errorTable = []struct {
	is      error
	status  int
	code    string
	message string // "" shows the error's own text
	field   string
}{
	{core.ErrIdempotencyKeyReused, http.StatusUnprocessableEntity, "idempotency_key_reused",
		"this Idempotency-Key already holds another effect (kind, provider, account, action, target, payload or source differ). If this is a retry of the same operation, send it again with its original body under the same key; only a new operation takes a new key", "Idempotency-Key"},
	{core.ErrGrantDoesNotCover, http.StatusForbidden, "grant_does_not_cover", "", "grant"},
	{core.ErrGrantRevoked, http.StatusConflict, "grant_revoked", "", ""},
	{webhook.ErrEventInProgress, http.StatusConflict, "event_in_progress", "another delivery of this event is being processed; deliver it again later", ""},
	{core.ErrDuplicateRiskNotAccepted, http.StatusConflict, "duplicate_risk_not_accepted", "", "acceptDuplicateRisk"},
	{resolve.ErrNotNeedsHuman, http.StatusConflict, "not_needs_human", "", ""},
	{core.ErrConflict, http.StatusConflict, "version_conflict", "the item changed concurrently; read it again and retry", ""},
	{core.ErrPruned, http.StatusGone, "pruned",
		"this intent ended and its retention window has passed: only its outcome is kept (pruned.archive locates the archived record)", ""},
	{core.ErrNotFound, http.StatusNotFound, "not_found", "", ""},
	{core.ErrForbidden, http.StatusForbidden, "forbidden", "", ""},
}

// validationStatus is the status of a ValidationError by code (400 otherwise).
var validationStatus = map[string]int{
	core.CodePayloadTooLarge: http.StatusRequestEntityTooLarge,
	CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	core.CodeUnknownProvider: http.StatusUnprocessableEntity,
	core.CodeUnknownAction:   http.StatusUnprocessableEntity,
	core.CodeDeadlinePassed:  http.StatusUnprocessableEntity,
}

// UnknownProviderHint ends every unknown_provider message: which
// configuration makes a provider known.
const UnknownProviderHint = `: this deployment loads only the providers named in OUTBOX_PROVIDER_CONFIG ` +
	`(make run prints them); add its block, e.g. {"slack":{"accounts":{...}}}, as README "Connecting a real provider" shows`

// retryAfter is the Retry-After (seconds) of answers that invite a retry.
var retryAfter = map[string]string{"event_in_progress": "5"}

// Answer maps a domain error to its HTTP answer; ok is false for an error the
// table does not know (a failure of ours: Fail answers it 500).
func Answer(err error) (resp events.APIGatewayV2HTTPResponse, ok bool) {
	var ve *core.ValidationError
	var re *resolve.RefusedError
	var le *botlimit.LimitError
	switch {
	case err == nil:
		return events.APIGatewayV2HTTPResponse{}, false
	case errors.As(err, &le):
		// A bot limit (rate_limited, too_many_open_intents): 429, and when
		// to try again (whole seconds, at least 1).
		r := Error(http.StatusTooManyRequests, le.Code, le.Message, "")
		r.Headers["Retry-After"] = strconv.Itoa(max(1, int(math.Ceil(le.RetryAfter.Seconds()))))
		return r, true
	case errors.As(err, &ve):
		status, found := validationStatus[ve.Code]
		if !found {
			status = http.StatusBadRequest
		}
		msg := ve.Message
		if ve.Code == core.CodeUnknownProvider {
			msg += UnknownProviderHint
		}
		return Error(status, ve.Code, msg, ve.Field), true
	case errors.As(err, &re):
		return Error(http.StatusConflict, "refused_by_revalidation", re.Reason, ""), true
	}
	for _, row := range errorTable {
		if errors.Is(err, row.is) {
			msg := row.message
			if msg == "" {
				msg = err.Error()
			}
			r := Error(row.status, row.code, msg, row.field)
			if v, ok := retryAfter[row.code]; ok {
				r.Headers["Retry-After"] = v
			}
			return r, true
		}
	}
	return events.APIGatewayV2HTTPResponse{}, false
}

// Fail answers err from the error table. Anything else is our failure: it is
// logged (without bodies) and answered 500 internal with internalMessage,
// which tells the caller whether a retry is safe.
func Fail(ctx context.Context, log *slog.Logger, err error, internalMessage string) events.APIGatewayV2HTTPResponse {
	if r, ok := Answer(err); ok {
		return r
	}
	if log == nil {
		log = slog.Default()
	}
	log.ErrorContext(ctx, "request failed", "err", err.Error())
	return Error(http.StatusInternalServerError, "internal", internalMessage, "")
}

// CheckPathIDs applies the identifier rule (core.CheckID) to every path
// parameter, so a malformed id is refused with a 400 naming it before
// anything is read or written.
func CheckPathIDs(req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, bool) {
	names := make([]string, 0, len(req.PathParameters))
	for k := range req.PathParameters {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := core.CheckID(k, req.PathParameters[k]); err != nil {
			r, _ := Answer(err)
			return r, false
		}
	}
	return events.APIGatewayV2HTTPResponse{}, true
}

// Page reads the parameters every list route shares: limit (1 to 100,
// default 50) and the opaque cursor of the previous page.
func Page(req events.APIGatewayV2HTTPRequest) (limit int, cursor string, err error) {
	limit = 50
	if v, ok := req.QueryStringParameters["limit"]; ok {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 || n > 100 {
			return 0, "", &core.ValidationError{Code: core.CodeInvalidField, Field: "limit", Message: "limit must be a whole number from 1 to 100"}
		}
		limit = n
	}
	cursor = req.QueryStringParameters["cursor"]
	if len(cursor) > 4096 {
		return 0, "", &core.ValidationError{Code: core.CodeInvalidField, Field: "cursor", Message: "cursor is not one this API issued"}
	}
	return limit, cursor, nil
}
