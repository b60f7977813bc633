package retention

import (
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

func TestApplyRetention(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	earlier := t0.Add(-time.Hour)
	day := 24 * time.Hour
	type retentionCase struct {
		name    string
		status  core.Status
		ended   *time.Time
		updated time.Time
		window  time.Duration
		wantEnd *time.Time
		wantExp time.Time
	}
	cases := []retentionCase{
		{"succeeded ends now, expires a window later", core.StatusSucceeded, nil, t0, 7 * day, &t0, t0.Add(7 * day)},
		{"a later write keeps the first end", core.StatusSucceeded, &earlier, t0, 7 * day, &earlier, earlier.Add(7 * day)},
		{"failed", core.StatusFailed, nil, t0, day, &t0, t0.Add(day)},
		{"abandoned (human decision)", core.StatusAbandoned, nil, t0, day, &t0, t0.Add(day)},
		{"expired", core.StatusExpired, nil, t0, day, &t0, t0.Add(day)},
		{"grant-revoked (revalidation refusal)", core.StatusGrantRevoked, nil, t0, day, &t0, t0.Add(day)},
		{"source-revised (revalidation refusal)", core.StatusSourceRevised, nil, t0, day, &t0, t0.Add(day)},
		{"zero window: ended, never expires", core.StatusSucceeded, nil, t0, 0, &t0, time.Time{}},
		{"sub-second end rounds the expiry up", core.StatusSucceeded, nil, t0.Add(300 * time.Millisecond), time.Second, ptrTime(t0.Add(300 * time.Millisecond)), t0.Add(2 * time.Second)},
	}
	for _, s := range []core.Status{core.StatusPending, core.StatusInFlight, core.StatusRetryableFailure, core.StatusUnknownOutcome, core.StatusNeedsHuman} {
		cases = append(cases, retentionCase{"non-terminal " + string(s) + " never expires, however old", s, nil, t0.Add(-365 * day), day, nil, time.Time{}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := &core.Intent{Status: c.status, UpdatedAt: c.updated, EndedAt: c.ended, ExpiresAt: t0.Add(99 * day)}
			if !c.status.Terminal() {
				in.EndedAt = &t0 // stale stamps are cleared
			}
			ApplyRetention(in, c.window)
			if (in.EndedAt == nil) != (c.wantEnd == nil) || (in.EndedAt != nil && !in.EndedAt.Equal(*c.wantEnd)) {
				t.Fatalf("EndedAt = %v, want %v", in.EndedAt, c.wantEnd)
			}
			if !in.ExpiresAt.Equal(c.wantExp) {
				t.Fatalf("ExpiresAt = %v, want %v", in.ExpiresAt, c.wantExp)
			}
		})
	}
}

func ptrTime(t time.Time) *time.Time { return &t }
