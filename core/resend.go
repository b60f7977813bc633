package core

// The decision "may a send go out after an attempt that may have taken
// effect" (docs/decisions.md, "Sends after uncertainty"). It is made in one
// place, DecideResend, and every site that needs it calls it:
//
//   - Dispatcher.Attempt, right before a send (the window ends at now + lease);
//   - decide, when an unknown outcome would be retried under the key (the
//     window ends when the retry is due);
//   - Reconcile, when an "absent" lookup would be retried (the window ends now);
//   - Resolver.Resolve, to record whether an operator's retry accepted the
//     duplicate risk (the window ends now);
//   - restore.PlanRestore, when a restored waiting intent may be delivered (the key's
//     first possible use is the earlier of the cutoff and the first attempt).

import (
	"fmt"
	"time"
)

// AttemptResult is what one attempt-history entry records: "succeeded", an
// ErrorClass, a revalidation status, or one of the results below.
type AttemptResult string

// Attempt results besides "succeeded", error classes and revalidation statuses.
const (
	ResultSucceeded AttemptResult = AttemptResult(StatusSucceeded)
	// ResultUnknownOutcome: the provider call may have taken effect.
	ResultUnknownOutcome AttemptResult = AttemptResult(ClassUnknownOutcome)
	// ResultLeaseExpired: the worker's lease ran out before it recorded an
	// outcome (a crash or a stall); the request may have gone out.
	ResultLeaseExpired AttemptResult = "lease-expired"
	// ResultInFlightAtCutoff: restored from a backup taken while the attempt
	// was in flight.
	ResultInFlightAtCutoff AttemptResult = "in-flight-at-cutoff"
	// ResultPossiblySentAfterCutoff: restored from a backup taken while the
	// intent waited; the original system may have sent it since.
	ResultPossiblySentAfterCutoff AttemptResult = "possibly-sent-after-cutoff"
	// ResultLookupFound / ResultLookupAbsent: reconciliation's authoritative answers.
	ResultLookupFound  AttemptResult = "lookup-found"
	ResultLookupAbsent AttemptResult = "lookup-absent"
	// ResultReconcileExhausted: reconciliation could not tell within its window.
	ResultReconcileExhausted AttemptResult = "reconcile-exhausted"
)

// MayHaveTakenEffect reports whether the attempt this entry records may have
// reached the provider without proof either way.
func (r AttemptResult) MayHaveTakenEffect() bool {
	switch r {
	case ResultUnknownOutcome, ResultLeaseExpired, ResultInFlightAtCutoff, ResultPossiblySentAfterCutoff:
		return true
	}
	return false
}

// MayHaveTakenEffect reports whether an earlier attempt's outcome is still
// uncertain: it ended in an unknown outcome (or a lost lease, or was in
// flight at a backup cutoff) and nothing since proved it absent.
func MayHaveTakenEffect(in *Intent) bool {
	uncertain := false
	if in.History != nil {
		uncertain = in.History.Uncertain // over the entries moved to history pages
	}
	return foldUncertain(uncertain, in.Attempts)
}

// foldUncertain continues MayHaveTakenEffect's scan over more entries.
func foldUncertain(uncertain bool, entries []Attempt) bool {
	for _, a := range entries {
		switch {
		case a.Result.MayHaveTakenEffect():
			uncertain = true
		case a.Result == ResultLookupAbsent:
			uncertain = false
		}
	}
	return uncertain
}

// humanAuthorisedRetry: the newest decision is an operator's retry, made after
// the last attempt.
func humanAuthorisedRetry(in *Intent) bool {
	var last time.Time
	if n := len(in.Attempts); n > 0 {
		last = in.Attempts[n-1].EndedAt
	}
	for i := len(in.Resolutions) - 1; i >= 0; i-- {
		r := in.Resolutions[i]
		if r.Recommend {
			continue
		}
		return r.Decision == string(DecisionRetry) && !r.At.Before(last)
	}
	if r := in.History; r != nil && r.LastDecision != nil {
		return r.LastDecision.Decision == string(DecisionRetry) && !r.LastDecision.At.Before(last)
	}
	return false
}

// KeyCovers reports whether the provider's idempotency key deduplicates
// every request under it from first (the key's first possible use; nil: never
// used, so nothing to cover from) until until.
func (c Capabilities) KeyCovers(first *time.Time, until time.Time) bool {
	return c.IdempotencyKeys && first != nil && until.Before(first.Add(c.KeyRetention))
}

// ResendCase is everything DecideResend looks at.
type ResendCase struct {
	// Uncertain: an earlier attempt (or the one being decided on) may have
	// taken effect.
	Uncertain bool
	// HumanAuthorised: an operator's retry decision, newer than the last
	// attempt, accepts the duplicate risk for this send.
	HumanAuthorised bool
	Caps            Capabilities
	// First is the key's first possible use; SendBy the latest moment the
	// send can reach the provider.
	First  *time.Time
	SendBy time.Time
}

// Resend is the verdict of DecideResend.
type Resend int

const (
	// ResendSafe: nothing uncertain; a send cannot duplicate anything.
	ResendSafe Resend = iota
	// ResendCovered: uncertain, but the provider's key deduplicates the send.
	ResendCovered
	// ResendHarmless: uncertain, but the action sets a value: repeating it
	// changes nothing (Capabilities.NaturallyIdempotent).
	ResendHarmless
	// ResendAuthorised: uncertain and not covered; an operator accepted the risk.
	ResendAuthorised
	// ResendKeyExpired: uncertain, and the key's retention ends before the send could.
	ResendKeyExpired
	// ResendNoKey: uncertain, and the provider cannot deduplicate at all.
	ResendNoKey
)

// Allowed reports whether the send may go out.
func (r Resend) Allowed() bool { return r <= ResendAuthorised }

// Reason says why a refused send may not go out ("" when allowed).
func (r Resend) Reason() string {
	switch r {
	case ResendKeyExpired:
		return "an earlier attempt may have taken effect and the provider's key retention has passed; a retry could duplicate it"
	case ResendNoKey:
		return "an earlier attempt may have taken effect and the provider cannot deduplicate a retry"
	}
	return ""
}

func (r Resend) String() string {
	switch r {
	case ResendSafe:
		return "safe"
	case ResendCovered:
		return "covered"
	case ResendHarmless:
		return "harmless"
	case ResendAuthorised:
		return "authorised"
	case ResendKeyExpired:
		return "key-expired"
	case ResendNoKey:
		return "no-key"
	}
	return fmt.Sprintf("Resend(%d)", int(r))
}

// DecideResend decides whether a send may go out (docs/decisions.md, "Sends
// after uncertainty"). With nothing uncertain it may. Otherwise only under
// the provider's idempotency key, retained from the key's first use until
// the send can no longer arrive, or on an operator's retry decision made
// after the uncertain attempt. Pure; every site that sends, schedules or
// authorises a send after uncertainty calls it.
func DecideResend(c ResendCase) Resend {
	switch {
	case !c.Uncertain:
		return ResendSafe
	case c.Caps.KeyCovers(c.First, c.SendBy):
		return ResendCovered
	case c.Caps.NaturallyIdempotent:
		return ResendHarmless
	case c.HumanAuthorised:
		return ResendAuthorised
	case c.Caps.IdempotencyKeys:
		return ResendKeyExpired
	}
	return ResendNoKey
}

// resendCase is the case for sending the next attempt of in by sendBy.
func resendCase(in *Intent, caps Capabilities, sendBy time.Time) ResendCase {
	return ResendCase{Uncertain: MayHaveTakenEffect(in), HumanAuthorised: humanAuthorisedRetry(in), Caps: caps, First: in.FirstAttemptAt, SendBy: sendBy}
}
