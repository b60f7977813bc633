// Package retention decides how long an ended intent is kept (issue 27): a
// key is honoured for a stated window after its intent ends. The write that ends an intent stamps its end and its expiry
// (the table's TTL attribute) in the same conditional write; when the table
// deletes the expired item, the pruner leaves a small tombstone under the
// same key (first answer, request hash, where the full record was archived),
// itself expiring after TombstoneRetention. Non-terminal intents never expire.
// Core keeps the tombstone (core.Pruned) and core.ErrPruned.
package retention

import (
	"time"

	"github.com/botharness/outbox/core"
)

// DefaultIntentRetention is how long a terminal intent stays whole after it
// ends (every field, attempt and decision readable; a replay answers it).
const DefaultIntentRetention = 7 * 24 * time.Hour

// DefaultTombstoneRetention is how long a pruned intent's tombstone keeps its
// key: a replay within it gets the first answer, a different body 422.
const DefaultTombstoneRetention = 90 * 24 * time.Hour

// Retention is the configured window.
type Retention struct {
	// Intent is how long an ended intent is kept whole (0: for ever).
	Intent time.Duration
	// Tombstone is how long its tombstone then keeps the key (0: for ever).
	Tombstone time.Duration
}

// DefaultRetention is the stated window.
var DefaultRetention = Retention{Intent: DefaultIntentRetention, Tombstone: DefaultTombstoneRetention}

// ApplyRetention stamps an intent's end and expiry before a write: a
// terminal intent ends when it first became terminal (its UpdatedAt then;
// later writes, such as a delivery status bound to a succeeded intent, keep
// that end) and expires window after it; a non-terminal one has neither, so
// it never expires however old it is. A zero window means no expiry.
func ApplyRetention(in *core.Intent, window time.Duration) {
	if !in.Status.Terminal() {
		in.EndedAt, in.ExpiresAt = nil, time.Time{}
		return
	}
	if in.EndedAt == nil {
		end := in.UpdatedAt
		in.EndedAt = &end
	}
	in.ExpiresAt = ExpiryAt(*in.EndedAt, window)
}

// ExpiryAt is when something that ended at end expires under window (zero:
// never). TTL is whole seconds; rounding up keeps "at least window".
func ExpiryAt(end time.Time, window time.Duration) time.Time {
	if window <= 0 || end.IsZero() {
		return time.Time{}
	}
	t := end.Add(window)
	if r := t.Truncate(time.Second); !r.Equal(t) {
		t = r.Add(time.Second)
	}
	return t.UTC()
}
