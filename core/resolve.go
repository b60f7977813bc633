package core

import (
	"errors"
)

// Decision is a human's resolution of an intent that needed one.
type Decision string

const (
	DecisionReconcile     Decision = "reconcile"
	DecisionRetry         Decision = "retry"
	DecisionAcceptSuccess Decision = "accept-success"
	DecisionAbandon       Decision = "abandon"
)

// Ruling is an operator's decision about an intent
// (POST /v1/admin/intents/{id}/resolution).
type Ruling struct {
	Decision   Decision
	Reason     string
	ExternalID string
	// AcceptDuplicateRisk is the operator's explicit answer to "this provider
	// cannot deduplicate: a retry may cause a second effect". Such a retry
	// goes ahead only with true; false or nil (left out) refuses it
	// (ErrDuplicateRiskNotAccepted): a field left out is not a deliberate
	// choice. Where the provider can deduplicate, it is not needed.
	AcceptDuplicateRisk *bool
}

// Recommendation is an orchestrator's advice (POST .../recommendation).
type Recommendation struct {
	Decision Decision
	Summary  string
}

// ErrDuplicateRiskNotAccepted: a retry the provider cannot deduplicate, sent
// without acceptDuplicateRisk=true. Nothing was changed.
var ErrDuplicateRiskNotAccepted = errors.New("the provider cannot deduplicate this retry, so it may cause a second effect; send acceptDuplicateRisk: true to retry anyway")

// RetryRiskAccepted decides whether an operator's retry may go ahead: a
// retry the provider deduplicates (or one that cannot duplicate anything)
// needs no answer; one only an operator can authorise (ResendAuthorised)
// needs an explicit true. Left out is not a deliberate choice.
func RetryRiskAccepted(v Resend, accept *bool) bool {
	return v != ResendAuthorised || (accept != nil && *accept)
}
