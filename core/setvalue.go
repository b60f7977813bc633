// Set-to-value actions (natural idempotence, issue 50): "set this message's
// text to X" is harmless to repeat but not to reorder. A retried older
// update must never overwrite a newer update of the same target that
// already went out. The rule: per target (provider, account, action,
// target), the dispatcher records the newest intent whose send went out
// (ValueMarks, one conditional write after such a send); an attempt of an
// older intent for that target is not sent and ends superseded
// (source-revised), never in needs-human: whatever it may have set before,
// the newer value was set after it.
//
// What it does not cover: an older attempt that starts while the newer one
// is still in flight (neither has gone out yet) may land after it; the
// provider orders those two requests, as it orders any two first sends.
package core

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// ValueSetter is a Provider whose actions may set a value that a later
// intent can overwrite (Capabilities.NaturallyIdempotent declares the same
// actions harmless to repeat). Told without I/O.
type ValueSetter interface {
	// ValueSubject names the thing an intent of action sets (a message, by
	// its channel and timestamp, say), or "" when the action sets nothing
	// a later intent overwrites (adding a reaction commutes with adding
	// another: there is nothing to order).
	ValueSubject(action, target string, payload []byte) string
}

// ValueSubject is what prov says an intent of action sets ("" for nothing).
func ValueSubject(prov Provider, action, target string, payload []byte) string {
	if vs, ok := prov.(ValueSetter); ok {
		return vs.ValueSubject(action, target, payload)
	}
	return ""
}

// ValueMarks records, per set-to-value target, the newest intent whose send
// went out. The transaction (a conditional "keep the greater" write) lives
// in the adapter.
type ValueMarks interface {
	// MarkSent records seq for key unless a greater one is recorded, and
	// returns the newest seq recorded (seq itself, or the greater one).
	MarkSent(ctx context.Context, key, seq string, now time.Time) (newest string, err error)
	// Newest is the newest seq recorded for key ("" for none).
	Newest(ctx context.Context, key string) (string, error)
}

// ValueMarkTTL is how long a target's mark is kept after its last send: far
// longer than any retry of an intent can wait (BackoffPolicy.MaxAge, the
// reconcile window), so a retry never outlives the mark it is judged by.
const ValueMarkTTL = 30 * 24 * time.Hour

// ValueKey names what a set-to-value intent sets: its provider, account and
// action, and the subject the provider names (ValueSubject).
func ValueKey(in *Intent, subject string) string {
	return fmt.Sprintf("%d:%s|%d:%s|%d:%s|%s", len(in.Provider), in.Provider, len(in.Account), in.Account, len(in.Action), in.Action, subject)
}

// ValueSeq orders the intents of one target: by acceptance time, then id.
// Fixed width, so strings compare as the times do.
func ValueSeq(in *Intent) string {
	return in.CreatedAt.UTC().Format("2006-01-02T15:04:05.000000000Z") + "/" + in.ID
}

// Superseded reports whether newest (a target's mark) is of an intent newer
// than seq. Pure.
func Superseded(newest, seq string) bool { return newest > seq }

// WentOut reports whether a send may have reached the provider: it
// succeeded, or its outcome is unknown. A failure with proof of no effect
// did not go out.
func WentOut(sendErr error) bool {
	return sendErr == nil || AttemptResult(ClassOf(sendErr)).MayHaveTakenEffect()
}

// supersededBy returns the mark of a newer intent of in's target that went
// out, or "" when none did.
func (d *Dispatcher) supersededBy(ctx context.Context, in *Intent, subject string) (string, error) {
	if d.Marks == nil {
		return "", nil
	}
	newest, err := d.Marks.Newest(ctx, ValueKey(in, subject))
	if err != nil {
		return "", fmt.Errorf("read the newest update of %s's target: %w", in.ID, err)
	}
	if Superseded(newest, ValueSeq(in)) {
		return newest, nil
	}
	return "", nil
}

// markSent records that in's send went out. A failed write is logged: the
// mark only ever stops older retries, so missing it costs ordering, never an
// accepted intent or a duplicate.
func (d *Dispatcher) markSent(ctx context.Context, in *Intent, subject string, log *slog.Logger) {
	if d.Marks == nil {
		return
	}
	if _, err := d.Marks.MarkSent(ctx, ValueKey(in, subject), ValueSeq(in), d.Clock.Now()); err != nil {
		log.WarnContext(ctx, "could not record the set-to-value send; older retries of this target are not stopped by it", "err", err.Error())
	}
}
