package core

import "fmt"

// Status is an intent's external-delivery fact. The values are the strings
// stored in DynamoDB and matched by the dispatcher's stream filter, so they
// never change once released.
type Status string

const (
	StatusPending          Status = "pending"
	StatusInFlight         Status = "in-flight"
	StatusRetryableFailure Status = "retryable-failure"
	StatusSucceeded        Status = "succeeded"
	StatusFailed           Status = "failed"
	StatusUnknownOutcome   Status = "unknown-outcome"
	StatusNeedsHuman       Status = "needs-human"
	StatusSourceRevised    Status = "source-revised"
	StatusGrantRevoked     Status = "grant-revoked"
	StatusAbandoned        Status = "abandoned"
	StatusExpired          Status = "expired"
)

// AllStatuses lists every status, in lifecycle order.
var AllStatuses = []Status{
	StatusPending, StatusInFlight, StatusRetryableFailure, StatusUnknownOutcome, StatusNeedsHuman,
	StatusSucceeded, StatusFailed, StatusSourceRevised, StatusGrantRevoked, StatusAbandoned, StatusExpired,
}

// allowed is the whole state machine. Anything not listed is forbidden.
var allowed = map[Status][]Status{
	// Revalidation and deadline checks happen before a claim too (sweeper, intake races).
	StatusPending: {StatusInFlight, StatusExpired, StatusSourceRevised, StatusGrantRevoked},
	// The claim holder records exactly one outcome; revalidation runs after the claim.
	StatusInFlight: {
		StatusSucceeded, StatusFailed, StatusRetryableFailure, StatusUnknownOutcome, StatusNeedsHuman,
		StatusSourceRevised, StatusGrantRevoked, StatusExpired,
	},
	// A due retry is claimed again; the sweeper may close it past its deadline or cap.
	StatusRetryableFailure: {StatusInFlight, StatusFailed, StatusExpired},
	// Reconciliation: found -> succeeded; authoritatively absent (same key valid) -> retry;
	// no safe path -> needs-human.
	StatusUnknownOutcome: {StatusSucceeded, StatusRetryableFailure, StatusNeedsHuman},
	// Human decisions: retry deliberately (back to pending), accept success, abandon,
	// reconcile again. Provider evidence (a webhook) may also prove success.
	StatusNeedsHuman: {StatusPending, StatusSucceeded, StatusAbandoned, StatusUnknownOutcome},
}

// Terminal reports whether no transition leaves s.
func (s Status) Terminal() bool {
	_, ok := allowed[s]
	return !ok && s.Valid()
}

// Valid reports whether s is one of the defined statuses.
func (s Status) Valid() bool {
	for _, v := range AllStatuses {
		if v == s {
			return true
		}
	}
	return false
}

// Transition decides whether an intent may move from one status to another.
// It is pure: the adapters enforce it atomically with a conditional write.
func Transition(from, to Status) error {
	if !from.Valid() || !to.Valid() {
		return fmt.Errorf("%w: unknown status %q -> %q", ErrForbiddenTransition, from, to)
	}
	for _, s := range allowed[from] {
		if s == to {
			return nil
		}
	}
	return fmt.Errorf("%w: %s -> %s", ErrForbiddenTransition, from, to)
}
