package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/localstack/system"
	"github.com/botharness/outbox/sandbox"
)

// reconcilePolls measures what a reconcile poll that learns nothing costs.
// An account with lookup but no idempotency keys holds the intent's request
// (hang_no_commit) past the client's timeout, so the attempt ends in an
// unknown outcome; every lookup after that answers pending (while held) or
// absent-but-not-settled, so each poll learns nothing. The DynamoDB writes
// made while those polls run, divided by the lookups the sandbox served, is
// writes_per_unchanged_reconcile_poll.
func (r *runner) reconcilePolls() error {
	rp := core.ReconcilePolicy{Delay: 100 * time.Millisecond, Window: time.Minute, Settle: time.Minute}
	st, api, stop, err := r.startStack(system.Options{Config: wire.Config{Policy: core.AttemptPolicy{Reconcile: rp}}, PollInterval: r.f.e2ePoll})
	if err != nil {
		return err
	}
	defer stop()
	const acct = "bench-reconcile"
	lookup, keys := true, false
	if _, err := r.sb.Configure(sandbox.Config{Account: acct,
		Capabilities: &sandbox.CapabilitiesPatch{Lookup: &lookup, IdempotencyKeys: &keys},
		Faults:       []sandbox.Fault{{Kind: sandbox.FaultHangNoCommit, DelayMs: 4000}}}); err != nil {
		return err
	}
	c := httpClient(1)
	id, _, err := r.submitAndWait(r.ctx, c, st, api, randName("reconcile-"), acct, "chat-0", 0)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		in, err := st.App.Store.Get(uncounted(r.ctx), id)
		if err == nil && in.Status == core.StatusUnknownOutcome {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("intent %s never reached unknown-outcome: %w", id, errTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.meter.reset()
	r.sbTime.reset()
	time.Sleep(6 * time.Second)
	cn := r.meter.snapshot()
	lookups := int64(0)
	for k, v := range r.sbTime.summary() {
		if strings.HasPrefix(k, "GET ") && strings.HasSuffix(k, "messages") {
			lookups += v.(map[string]any)["n"].(int64)
		}
	}
	in, err := st.App.Store.Get(uncounted(r.ctx), id)
	if err != nil {
		return err
	}
	if in.Status != core.StatusUnknownOutcome {
		return fmt.Errorf("intent %s left unknown-outcome (%s) during the measurement", id, in.Status)
	}
	if lookups == 0 {
		return fmt.Errorf("no reconcile lookups in 6s")
	}
	r.set("reconcile_polls_measured", lookups)
	r.set("writes_per_unchanged_reconcile_poll", round(float64(cn.writes())/float64(lookups), 3))
	r.set("wcu_per_unchanged_reconcile_poll", round(cn.WCU/float64(lookups), 3))
	r.set("ddb_requests_per_unchanged_reconcile_poll", perN(cn.Ops, float64(lookups)))
	return nil
}
