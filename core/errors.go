package core

import (
	"errors"
	"fmt"
	"time"
)

// Business conditions, matched with errors.Is.
var (
	ErrNotFound             = errors.New("not found")
	ErrConflict             = errors.New("concurrent modification")
	ErrForbiddenTransition  = errors.New("forbidden status transition")
	ErrIdempotencyKeyReused = errors.New("idempotency key reused with a different request")
	ErrNotClaimable         = errors.New("intent is not claimable")
	ErrUnknownProvider      = errors.New("unknown provider")
	ErrForbidden            = errors.New("forbidden")
	ErrLeaseLost            = errors.New("lease lost")
	ErrGrantDoesNotCover    = errors.New("grant does not cover the intent")
)

// ErrorClass is the structured class of a provider failure. Retry policy is
// decided from the class, never from message text.
type ErrorClass string

const (
	// ClassRejectedInput: the provider refused the request as invalid; nothing happened.
	ClassRejectedInput ErrorClass = "rejected-input"
	// ClassUnauthorized: expired or revoked authorisation; nothing happened.
	ClassUnauthorized ErrorClass = "unauthorized"
	// ClassRateLimited: the provider refused for now (429); nothing happened.
	ClassRateLimited ErrorClass = "rate-limited"
	// ClassTransient: failed before the request could take effect (refused
	// connection, a 503 the provider documents as not committed).
	ClassTransient ErrorClass = "transient"
	// ClassUnknownOutcome: the request may have reached the provider and no
	// result is provable (timeout after sending, reset, ambiguous 5xx).
	ClassUnknownOutcome ErrorClass = "unknown-outcome"
)

// Evidence is what an attempt observed, kept verbatim in attempt history.
// Bodies are excerpts the adapter chose to keep; secrets never go here.
type Evidence struct {
	HTTPStatus   int               `json:"httpStatus,omitempty"`
	ProviderCode string            `json:"providerCode,omitempty"`
	Detail       string            `json:"detail,omitempty"`
	RetryAfter   string            `json:"retryAfter,omitempty"`
	Extra        map[string]string `json:"extra,omitempty"`
}

// PermanentError: the provider proved nothing happened and trying again will
// not help (rejected input, revoked authorisation).
type PermanentError struct {
	Class    ErrorClass
	Evidence Evidence
	Err      error
}

func (e *PermanentError) Error() string {
	return fmt.Sprintf("permanent provider failure (%s): %v", e.Class, e.Err)
}
func (e *PermanentError) Unwrap() error { return e.Err }

// RetryableError: proof of no effect; safe to try again after RetryAfter
// (zero means "use the backoff policy").
type RetryableError struct {
	Class      ErrorClass
	RetryAfter time.Duration
	Evidence   Evidence
	Err        error
}

func (e *RetryableError) Error() string {
	return fmt.Sprintf("retryable provider failure (%s): %v", e.Class, e.Err)
}
func (e *RetryableError) Unwrap() error { return e.Err }

// UnknownOutcomeError: the request may have taken effect. Never retried
// blindly; reconciliation or a human decides.
type UnknownOutcomeError struct {
	Evidence Evidence
	Err      error
}

func (e *UnknownOutcomeError) Error() string {
	return fmt.Sprintf("unknown outcome: %v", e.Err)
}
func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

// ClassOf returns the structured class of a provider error. An error that is
// none of the typed errors is treated as an unknown outcome: when we cannot
// tell, we must assume the request may have gone out.
func ClassOf(err error) ErrorClass {
	var p *PermanentError
	var r *RetryableError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &p):
		return p.Class
	case errors.As(err, &r):
		return r.Class
	default:
		return ClassUnknownOutcome
	}
}

// EvidenceOf extracts the evidence carried by a typed provider error.
func EvidenceOf(err error) Evidence {
	var p *PermanentError
	var r *RetryableError
	var u *UnknownOutcomeError
	switch {
	case errors.As(err, &p):
		return p.Evidence
	case errors.As(err, &r):
		return r.Evidence
	case errors.As(err, &u):
		return u.Evidence
	case err != nil:
		return Evidence{Detail: truncate(err.Error(), 512)}
	}
	return Evidence{}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
