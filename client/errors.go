package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Conditions the API reports, matched with errors.Is on any error a call
// returns.
var (
	// ErrValidation: the request is invalid (400, 413, and 422 other than a
	// reused key). Nothing was written; fix the request.
	ErrValidation = errors.New("outbox: invalid request")
	// ErrIdempotencyKeyReused: the key was already used with a different
	// body (422 idempotency_key_reused). Not a validation error: the body may
	// be fine, but this key belongs to another logical attempt. Use a new key
	// for a new attempt; never re-send a changed body under an old key.
	ErrIdempotencyKeyReused = errors.New("outbox: idempotency key reused with a different request")
	// ErrPayloadTooLarge: 413 (also matches ErrValidation).
	ErrPayloadTooLarge = errors.New("outbox: payload too large")
	ErrUnauthorized    = errors.New("outbox: unauthorized") // 401
	ErrForbidden       = errors.New("outbox: forbidden")    // 403
	ErrNotFound        = errors.New("outbox: not found")    // 404
	ErrConflict        = errors.New("outbox: conflict")     // 409
	ErrServer          = errors.New("outbox: server error") // 5xx
	ErrRateLimited     = errors.New("outbox: rate limited") // 429
	ErrUnexpected      = errors.New("outbox: unexpected answer")
	// ErrPruned (410 pruned): the intent ended and its retention window
	// passed; only its outcome is kept (Intent.Pruned), not its history.
	ErrPruned = errors.New("outbox: intent pruned after its retention window")
	// ErrDuplicateRiskNotAccepted (409 duplicate_risk_not_accepted): a retry
	// decision the provider cannot deduplicate, sent without
	// AcceptDuplicateRisk true. Nothing changed; also matches ErrConflict.
	ErrDuplicateRiskNotAccepted = errors.New("outbox: retry refused: the provider cannot deduplicate it and the duplicate risk was not accepted")
)

// APIError is an error answer of the API: {"error":{"code","message","field"}}
// (or the API gateway's own {"message"}, with an empty Code).
type APIError struct {
	Status  int
	Code    string // machine-readable, see the ErrorCode enum in api/openapi.json
	Message string
	Field   string
	// RetryAfter is the server's Retry-After, if it sent one.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	if e.Field != "" {
		return fmt.Sprintf("outbox: %d %s: %s (%s)", e.Status, code, e.Message, e.Field)
	}
	return fmt.Sprintf("outbox: %d %s: %s", e.Status, code, e.Message)
}

// Is matches the condition sentinels.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrIdempotencyKeyReused:
		return e.Code == "idempotency_key_reused"
	case ErrValidation:
		return e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge ||
			(e.Status == http.StatusUnprocessableEntity && e.Code != "idempotency_key_reused")
	case ErrPayloadTooLarge:
		return e.Status == http.StatusRequestEntityTooLarge
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrServer:
		return e.Status >= 500
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests
	case ErrPruned:
		return e.Code == "pruned"
	case ErrDuplicateRiskNotAccepted:
		return e.Code == "duplicate_risk_not_accepted"
	}
	return false
}

// RetryError is returned when a call gave up on failures that were worth
// retrying: attempts ran out, or ctx ended (then errors.Is(err,
// context.DeadlineExceeded / context.Canceled) holds). Every attempt of one
// call carried the same Idempotency-Key and the same body, so the outcome is
// at most one intent: submit again later with the same key to find out.
type RetryError struct {
	Attempts int
	Last     error // the last attempt's failure
	Stop     error // why retrying stopped: ctx.Err(), or nil when attempts ran out
}

func (e *RetryError) Error() string {
	if e.Stop != nil {
		return fmt.Sprintf("outbox: gave up after %d attempts (%v); last failure: %v", e.Attempts, e.Stop, e.Last)
	}
	return fmt.Sprintf("outbox: gave up after %d attempts; last failure: %v", e.Attempts, e.Last)
}

// Unwrap exposes both the stop reason and the last failure to errors.Is/As.
func (e *RetryError) Unwrap() []error {
	if e.Stop != nil {
		return []error{e.Stop, e.Last}
	}
	return []error{e.Last}
}

// SubmitError wraps every error of Submit with the idempotency key it used,
// so a caller that let Submit generate the key can still retry the same
// logical attempt later (Submit again with SubmitOptions{Key: err.Key}).
type SubmitError struct {
	Key string
	Err error
}

func (e *SubmitError) Error() string { return fmt.Sprintf("%v (Idempotency-Key %q)", e.Err, e.Key) }
func (e *SubmitError) Unwrap() error { return e.Err }
