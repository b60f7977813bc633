package core

import "time"

// The repair index. Every non-terminal intent has one entry, due at its
// RepairAt: the moment the sweeper must look at it if nothing else has moved
// it on. The entry is written at intake and then left alone by the claim and
// by outcomes, because moving an index key costs a delete plus a put in the
// index on every transition. An intent that finishes leaves its entry where
// it is; the sweeper reads it once, finds the intent terminal and passes it
// (a read is cheaper than the write that would remove it). Only two things
// move an entry: the sweeper, when it finds the intent still waiting
// (repairPlan.RecheckAt), and a human hand-off, which lists the intent for
// operators instead (see NextRepairCheck).

// NextRepairCheck decides the repair-index due time of an intent after a
// write that moved it from status before ("" for a new or restored intent).
// now is the writer's clock; p.Delay is lease + grace (how long normal work
// may take before the sweeper steps in), p.Grace how late work must be.
//
//   - new / restored and still open: due after delay, or at its deadline if
//     that comes first (so an intent nobody attempts is closed in time).
//   - handed to a human: listed for operators, ordered by when it arrived.
//   - leaving a human for more work: due after delay again.
//   - leaving a human for a terminal state: no entry (off the human list).
//   - a retryable outcome leaves the entry where it is when it already
//     bounds the recovery of a lost retry message: due no later than the
//     retry's due time + delay (RetryEntryBounds). It always does when the
//     entry was written by intake or the sweeper (both file it at most delay
//     ahead of their clock, which is before this outcome). If the entry
//     comes due before the retry, the sweeper finds the retry still waiting
//     and re-files it at the retry's due time + grace (PlanRepair); if the
//     retry happened meanwhile, the entry is dead and passed. Only an entry
//     further out than that moves, to the retry's due time + grace.
//     Bound: a lost retry message is re-sent by the sweeper by
//     max(retry due + grace, entry due) <= retry due + delay (was retry due
//   - grace, at 2 index WCU on every retried intent).
//   - any other write: unchanged (the claim and outcomes write no index).
func NextRepairCheck(before Status, in *Intent, now time.Time, p RepairPolicy) time.Time {
	delay := p.Delay
	switch {
	case in.Status == StatusNeedsHuman && before != StatusNeedsHuman:
		return now
	case before == StatusNeedsHuman && in.Status.Terminal():
		return time.Time{}
	case before == StatusNeedsHuman && in.Status != StatusNeedsHuman:
		return now.Add(delay)
	case before == "" && !in.Status.Terminal():
		if in.Deadline != nil && in.Deadline.Before(now.Add(delay)) && in.Deadline.After(now) {
			return *in.Deadline
		}
		return now.Add(delay)
	case in.RepairAt.IsZero() && !in.Status.Terminal():
		return now.Add(delay)
	case in.Status == StatusRetryableFailure && in.NextAttemptAt != nil && !RetryEntryBounds(in.RepairAt, *in.NextAttemptAt, p):
		return in.NextAttemptAt.Add(p.Grace)
	}
	return in.RepairAt
}

// RetryEntryBounds decides whether an intent's repair entry, due at
// repairAt, already bounds the recovery of a lost message for a retry due at
// retryAt: the sweeper reaches the entry no later than delay after the retry
// was due. Then a retryable outcome writes no index (see NextRepairCheck).
func RetryEntryBounds(repairAt, retryAt time.Time, p RepairPolicy) bool {
	return !repairAt.After(retryAt.Add(p.Delay))
}

// RepairPolicy is what NextRepairCheck needs of the deployment's timing.
type RepairPolicy struct {
	Delay time.Duration // lease + grace
	Grace time.Duration
}

// repairPlan is what the sweeper does about one due repair entry.
type repairPlan struct {
	// Op is the queue message to send ("" for none).
	Op string
	// ExpireLease: the lease ran out before an outcome was recorded.
	ExpireLease bool
	// RecheckAt is when the sweeper looks again (the entry moves there);
	// zero when the intent no longer needs the sweeper.
	RecheckAt time.Time
}

// MaxRepairBackoff caps how far RepairBackoff moves a re-sent intent's next
// check out.
const MaxRepairBackoff = 15 * time.Minute

// RepairBackoff is how long the sweeper waits before it looks again at an
// intent it has just handed to the queue because its work (a dispatch, a
// retry, a reconciliation) was due since `since` and did not happen: delay
// (lease + grace), or as long as the intent has already waited if that is
// longer, capped at MaxRepairBackoff. A lost message is re-sent within
// about twice the time already waited; a backlog that takes longer than
// lease + grace to drain through the queue (a stream outage's orphans) is
// not handed out again on every pass, which would duplicate every message
// still queued each time and slow the drain it waits for.
func RepairBackoff(since, now time.Time, delay time.Duration) time.Duration {
	return max(delay, min(now.Sub(since), MaxRepairBackoff))
}

// PlanRepair decides, purely, what the sweeper does with a due intent.
// Everything it leaves waiting is re-filed at a later due time, so the
// sweeper's checkpoint can move past the entry it read.
func PlanRepair(in *Intent, now time.Time, grace, delay time.Duration) repairPlan {
	again := now.Add(delay)
	waitUntil := func(t time.Time) repairPlan { return repairPlan{RecheckAt: t.Add(grace)} }
	switch in.Status {
	case StatusInFlight:
		if in.Lease == nil || !now.Before(in.Lease.Until) {
			return repairPlan{ExpireLease: true, RecheckAt: again}
		}
		return waitUntil(in.Lease.Until)
	case StatusPending:
		// The stream trigger (or a dispatch message) never led to a claim.
		if now.Before(in.UpdatedAt.Add(grace)) {
			return waitUntil(in.UpdatedAt)
		}
		return repairPlan{Op: OpDispatch, RecheckAt: now.Add(RepairBackoff(in.UpdatedAt, now, delay))}
	case StatusRetryableFailure:
		due := in.UpdatedAt
		if in.NextAttemptAt != nil {
			due = *in.NextAttemptAt
		}
		if now.Before(due.Add(grace)) {
			return waitUntil(due)
		}
		return repairPlan{Op: OpAttempt, RecheckAt: now.Add(RepairBackoff(due, now, delay))}
	case StatusUnknownOutcome:
		if now.Before(in.UpdatedAt.Add(grace)) {
			return waitUntil(in.UpdatedAt)
		}
		return repairPlan{Op: OpReconcile, RecheckAt: now.Add(RepairBackoff(in.UpdatedAt, now, delay))}
	}
	// Terminal, or waiting for a human (listed elsewhere): nothing to do.
	return repairPlan{}
}
