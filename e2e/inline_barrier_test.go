package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/backup"
	"github.com/botharness/outbox/core"
)

// An inline put stands on the barrier read it made before the put
// (core.InlineBarrierFresh) because a backup waits core.BarrierSettle after
// its raise before it reads any intent. So an intent written in flight
// after the raise — by an inline intake whose barrier read came just
// before it, and whose put then took a while, within InlineBarrierFresh —
// is in the snapshot, in flight at the cutoff. Without the settle the
// backup lists the profile at once and misses it: an attempt sent during
// the backup that no snapshot records.
func TestBackupSettleCatchesAnInlinePutThatReadTheBarrierBeforeTheRaise(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	ctx := context.Background()
	tmplID := e.mustSubmit("settle-tmpl", intentBody("acct-settle", "chan-1", "template"))
	tmpl := e.waitStatus(tmplID, 10*time.Second, core.StatusSucceeded)

	type result struct {
		r response
		m backup.Manifest
	}
	done := make(chan result, 1)
	go func() {
		r := e.do("POST", "/v1/admin/backups", opToken, nil, `{"profile":"`+testBot+`"}`)
		var m backup.Manifest
		if r.status == 201 {
			_ = json.Unmarshal(r.body, &m)
		}
		done <- result{r, m}
	}()
	id := core.IntentID(testBot, "settle-1")
	probe := &core.Intent{ID: id, Bot: testBot, UpdatedAt: time.Now()}
	e.eventually(10*time.Second, "the backup raised the barrier", func() bool {
		_, up, err := e.st.App.Store.BarrierUp(ctx, probe)
		return err == nil && up
	})
	// The put's own latency after a barrier read that saw no barrier (it
	// was read just before the raise): half the freshness bound.
	time.Sleep(core.InlineBarrierFresh / 2)
	now := time.Now().UTC()
	in := *tmpl
	in.ID, in.IdempotencyKey, in.Status, in.StatusReason = id, "settle-1", core.StatusInFlight, ""
	in.Attempts, in.Resolutions, in.ExternalID, in.Version, in.AttemptCount = nil, nil, "", 0, 1
	in.EndedAt, in.ExpiresAt, in.CreatedAt, in.UpdatedAt, in.FirstAttemptAt = nil, time.Time{}, now, now, &now
	in.Lease = &core.Lease{Owner: "inline-test", Since: now, Until: now.Add(time.Minute)}
	if _, created, err := e.st.App.Store.Create(ctx, &in); err != nil || !created {
		t.Fatalf("the in-flight put: created %v, %v", created, err)
	}
	res := <-done
	if res.r.status != 201 {
		t.Fatalf("backup: %d %s", res.r.status, res.r.body)
	}
	found := false
	for _, x := range res.m.InFlightAtCutoff {
		found = found || x == id
	}
	if !found {
		t.Fatalf("the intent put in flight %v after the raise is not in the snapshot (in flight at cutoff %v)", core.InlineBarrierFresh/2, res.m.InFlightAtCutoff)
	}
}
