// Package restore decides what each intent of a restored backup becomes
// (PlanRestore): a restore never resumes or retries uncertain work. The
// backup adapter (adapters/backup) applies the plan; it consumes core.
package restore

import (
	"fmt"
	"time"

	"github.com/botharness/outbox/core"
)

// Restore outcomes for one snapshotted intent.
const (
	RestoreUnchanged   = "unchanged"
	RestoreReconcile   = "reconcile"   // unknown outcome; the provider will be asked
	RestoreNeedsHuman  = "needs-human" // unknown outcome; no provider mechanism can tell
	RestoreKeptPending = "kept"        // safe to deliver: the provider's key covers any send after the cutoff
)

// PlanRestore decides what a snapshotted intent becomes when restored. It is
// pure and never resumes or retries uncertain work:
//
//   - in flight at the cutoff: the attempt may have reached the provider.
//     Unknown outcome; reconcile if the provider offers lookup, else a human.
//   - pending or retryable-failure: the original system kept running after the
//     cutoff and may have sent it since. It is delivered automatically only if
//     the provider's idempotency key still covers every send that can have
//     happened (retention counted from the earliest possible first attempt);
//     otherwise it is treated as a possible attempt at the cutoff: reconcile if
//     the provider offers lookup, else a human decides.
//   - anything else (unknown-outcome, needs-human, terminal) is restored as is.
func PlanRestore(in *core.Intent, cutoff, now time.Time, caps core.Capabilities) (string, error) {
	switch in.Status {
	case core.StatusInFlight:
		ev := core.Evidence{Detail: fmt.Sprintf("attempt %d was in flight at the backup barrier (%s); its outcome is unknown", in.AttemptCount, cutoff.UTC().Format(time.RFC3339))}
		in.AppendAttempt(core.Attempt{N: in.AttemptCount, Trigger: core.TriggerRestore, StartedAt: now, EndedAt: now, Result: core.ResultInFlightAtCutoff, Evidence: ev})
		return uncertain(in, caps, now, "in flight at the backup cutoff")
	case core.StatusPending, core.StatusRetryableFailure:
		first := cutoff
		if in.FirstAttemptAt != nil && in.FirstAttemptAt.Before(first) {
			first = *in.FirstAttemptAt
		}
		possible := core.Attempt{N: in.AttemptCount, Trigger: core.TriggerRestore, StartedAt: now, EndedAt: now, Result: core.ResultPossiblySentAfterCutoff,
			Evidence: core.Evidence{Detail: fmt.Sprintf("restored from a snapshot taken at %s while waiting for an attempt; the original system may have sent it after the cutoff", cutoff.UTC().Format(time.RFC3339))}}
		// Sends after uncertainty (docs/decisions.md): a send after the
		// cutoff is the uncertain attempt; the key must cover it from the
		// earliest moment it can have been used until now.
		if core.DecideResend(core.ResendCase{Uncertain: true, Caps: caps, First: &first, SendBy: now}) == core.ResendCovered {
			// Any send the original system made used the same key, within
			// retention. The possible send is still recorded: every later
			// send is then checked against the key's retention (chaos seed
			// 2766320928: a retry after the key expired duplicated it).
			if in.FirstAttemptAt == nil {
				in.FirstAttemptAt = &first
			}
			in.AppendAttempt(possible)
			return RestoreKeptPending, nil
		}
		// Model the original system's possible send as an attempt at the cutoff.
		if err := in.MoveTo(core.StatusInFlight, "", now); err != nil {
			return "", err
		}
		in.AttemptCount++
		if in.FirstAttemptAt == nil {
			in.FirstAttemptAt = &first
		}
		possible.N = in.AttemptCount
		in.AppendAttempt(possible)
		return uncertain(in, caps, now, "restored while waiting; may have been sent after the backup cutoff")
	}
	return RestoreUnchanged, nil
}

func uncertain(in *core.Intent, caps core.Capabilities, now time.Time, why string) (string, error) {
	if caps.Lookup {
		if err := in.MoveTo(core.StatusUnknownOutcome, why+"; reconciling with the provider's lookup", now); err != nil {
			return "", err
		}
		return RestoreReconcile, nil
	}
	if err := in.MoveTo(core.StatusNeedsHuman, why+"; the provider cannot tell whether it happened", now); err != nil {
		return "", err
	}
	return RestoreNeedsHuman, nil
}
