package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/sandbox"
)

// drain runs the system to quiescence without new faults: provider holds are
// released, stream records and due retry messages are delivered, the clock
// moves past leases and backoffs, and the sweeper runs, until every intent is
// terminal or needs a human and no work is queued (bounded).
func (w *World) drain(ctx context.Context) int {
	for _, wk := range w.Workers {
		wk.Inj.SetEnabled(false)
	}
	w.mail.mu.Lock()
	w.mail.fail = map[int]int{}
	w.mail.mu.Unlock()
	// The schedule's provider faults end with it too (those never reached).
	for _, s := range w.Intents {
		rl, out := modesOff()
		w.configureSandbox(s, sandbox.Config{Faults: []sandbox.Fault{}, RateLimit: rl, Outage: out}, "clear faults")
	}
	for _, s := range w.Intents { // every intent the bot meant to send is sent
		w.mu.Lock()
		done := w.submitted[s.ID]
		w.mu.Unlock()
		if !done {
			w.submit(ctx, w.Workers[0], s, w.body(s, ""))
		}
	}
	const rounds = 80
	allSettled := func() bool {
		for _, in := range w.states(ctx) {
			if !in.Status.Terminal() && in.Status != core.StatusNeedsHuman {
				return false
			}
		}
		return true
	}
	for round := 0; round < rounds; round++ {
		wk := w.Workers[round%len(w.Workers)]
		w.sb.Release("")
		w.waitSandboxIdle()
		w.dispatch(ctx, wk, w.takeStream(), true)
		settled := allSettled()
		// Deliver what is due; once settled, deliver everything left (stale
		// messages must be harmless no-ops).
		for i := 0; i < 10; i++ {
			qs := w.mail.take(settled)
			if len(qs) == 0 {
				break
			}
			w.retry(ctx, wk, qs, true)
		}
		if settled && w.mail.pending() == 0 && w.sb.Held("") == 0 {
			// Quiet? Wait for late webhooks and for the stream to catch up: a
			// record it still carries (a human retry's pending image) means
			// more work.
			w.waitWebhooksQuiet()
			w.syncStream(ctx)
			w.mu.Lock()
			queued := len(w.streamQ)
			w.mu.Unlock()
			if queued == 0 && allSettled() {
				return round
			}
			continue
		}
		w.waitSandboxIdle()
		step := leaseDuration + sweepGrace + time.Millisecond
		if round >= 20 {
			// Still not quiet: something waits on a long timer (a backup
			// barrier's TTL is minutes). Let whole minutes pass.
			step = time.Minute
		}
		if due, ok := w.mail.earliestDue(); ok && round < 20 {
			if d := due.Sub(w.clock.Now()); d > 0 && d < step {
				step = d
			}
		}
		w.clock.Advance(step)
		w.sweep(ctx, wk)
	}
	return rounds
}

// providerEvidence says what backs an intent's success, or "" when nothing does.
func providerEvidence(in *core.Intent) string {
	for _, a := range in.Attempts {
		switch {
		case a.Result == core.ResultSucceeded && a.ExternalID != "":
			return "attempt " + a.ExternalID
		case a.Result == core.ResultLookupFound && a.ExternalID != "":
			return "lookup " + a.ExternalID
		case a.Trigger == core.TriggerWebhook && (a.Result == core.ResultAck || a.Result == core.ResultStatus) && a.ExternalID != "":
			return "webhook " + a.ExternalID
		}
	}
	for _, r := range in.Resolutions {
		if !r.Recommend && r.ByKind == core.PrincipalOperator && r.Decision == string(core.DecisionAcceptSuccess) {
			return "operator " + r.By
		}
	}
	return ""
}

// authorisedRetries counts human-authorised retries: the only allowed
// source of a second effect.
func authorisedRetries(in *core.Intent) int {
	n := 0
	for _, r := range in.Resolutions {
		if !r.Recommend && r.ByKind == core.PrincipalOperator && r.Decision == string(core.DecisionRetry) {
			n++
		}
	}
	return n
}

// retriesEver counts distinct authorised retries over every observed version.
func retriesEver(final *core.Intent, hist []*core.Intent) int {
	seen := map[string]bool{}
	for _, v := range append(append([]*core.Intent(nil), hist...), final) {
		for _, r := range v.Resolutions {
			if !r.Recommend && r.ByKind == core.PrincipalOperator && r.Decision == string(core.DecisionRetry) {
				seen[r.At.String()+r.By] = true
			}
		}
	}
	return len(seen)
}

// segments splits an intent's history where it was lost and restored: each
// segment must only grow; a restore may go back to an older snapshot.
func (w *World) segments(id string, hist []*core.Intent) [][]*core.Intent {
	w.mu.Lock()
	cuts := append([]int(nil), w.cuts[id]...)
	w.mu.Unlock()
	var out [][]*core.Intent
	from := 0
	for _, c := range cuts {
		if c > from && c <= len(hist) {
			out = append(out, hist[from:c])
			from = c
		}
	}
	return append(out, hist[from:])
}

// noSend are the statuses after which nothing may be sent.
var noSend = map[core.Status]bool{core.StatusSourceRevised: true, core.StatusGrantRevoked: true, core.StatusExpired: true, core.StatusAbandoned: true}

// check verifies the invariants after drain.
func (w *World) check(ctx context.Context) {
	w.waitWebhooksQuiet()
	w.syncStream(ctx)
	states := w.states(ctx)
	for _, s := range w.Intents {
		in, ok := states[s.ID]
		w.mu.Lock()
		accepted := w.accepted[s.ID]
		hist := append([]*core.Intent(nil), w.history[s.ID]...)
		w.mu.Unlock()
		// (b) none lost.
		if !ok && accepted {
			// Read again, telling a missing item from a failed read (a read
			// that failed under load is the harness's problem, not a loss).
			got, err := w.env.get(ctx, w.slot.table, s.ID)
			switch {
			case err == nil:
				in, ok = got, true
			case errors.Is(err, core.ErrNotFound):
				w.problem("lost", s.ID, "intake accepted intent %d but the store does not have it", s.N)
			default:
				w.problem("harness", s.ID, "read intent %d: %v", s.N, err)
			}
		}
		if !ok {
			continue
		}
		if in.Pruned != nil {
			// A tombstone answers for the whole intent its prune removed
			// (prune.go checked that they agree): check that one.
			w.mu.Lock()
			was := w.pruned[s.ID]
			w.mu.Unlock()
			if was == nil {
				w.problem("prune", s.ID, "intent %d is a tombstone, but no step pruned it", s.N)
				continue
			}
			in = was
		}
		// (b) none stuck.
		if !in.Status.Terminal() && in.Status != core.StatusNeedsHuman {
			w.problem("stuck", s.ID, "intent %d is still %s after drain (%s) %s", s.N, in.Status, in.StatusReason, w.repairState(ctx, in))
		}
		effects, err := w.effects(s.ID)
		if err != nil {
			w.problem("harness", s.ID, "read effects: %v", err)
			continue
		}
		w.mu.Lock()
		w.outcomes[string(in.Status)]++
		w.outcomes["effects"] += len(effects)
		w.outcomes["attempts"] += in.AttemptCount
		if authorisedRetries(in) > 0 {
			w.outcomes["human-retries"] += authorisedRetries(in)
		}
		w.mu.Unlock()
		// (a) effects <= 1 + authorised human retries (every one ever
		// recorded: a restore from an older backup may have lost some).
		if limit := 1 + retriesEver(in, hist); len(effects) > limit {
			w.problem("effects_over_limit", s.ID, "intent %d (%s): %d provider effects, limit %d", s.N, s.caps(), len(effects), limit)
		}
		// (c) success has provider evidence or an operator's acceptance, and
		// an external id the provider really issued.
		if in.Status == core.StatusSucceeded {
			ev := providerEvidence(in)
			switch {
			case ev == "":
				w.problem("evidence", s.ID, "intent %d succeeded without provider evidence or an operator's acceptance", s.N)
			case !strings.HasPrefix(ev, "operator"):
				found := false
				for _, e := range effects {
					found = found || e.MessageID == in.ExternalID
				}
				if !found {
					w.problem("evidence", s.ID, "intent %d succeeded with external id %q, which no provider effect has (%d effects)", s.N, in.ExternalID, len(effects))
				}
			}
		}
		// (g) every provider callback bound to the intent names one of its
		// own effects: no intent is resolved (or given evidence) by a
		// callback about another intent's message.
		for _, a := range in.Attempts {
			if a.Trigger != core.TriggerWebhook || a.Result == core.ResultEcho || a.ExternalID == "" {
				continue
			}
			found := false
			for _, e := range effects {
				found = found || e.MessageID == a.ExternalID
			}
			if !found {
				w.problem("foreign_callback", s.ID, "intent %d holds a provider %s for message %q, which none of its %d effects is", s.N, a.Result, a.ExternalID, len(effects))
			}
		}
		// (f) failed means nothing happened at the provider.
		if in.Status == core.StatusFailed && len(effects) > 0 {
			w.problem("failed_with_effect", s.ID, "intent %d is failed (%s) but the provider performed %d effect(s)", s.N, in.StatusReason, len(effects))
		}
		// (d) history only grew; every single-step change is an allowed transition.
		w.checkHistory(s, hist, in)
		// (e) no send after source-revised, grant-revoked, expired, abandoned
		// (in the history since the last restore: a decision lost with the
		// data is not in force).
		segs := w.segments(s.ID, hist)
		for _, v := range segs[len(segs)-1] {
			if noSend[v.Status] {
				for _, a := range w.front.arrivalsFor(s.ID) {
					if a.At.After(v.UpdatedAt) {
						w.problem("send_after_stop", s.ID, "intent %d: a provider request arrived at %s, after it became %s at %s",
							s.N, a.At.Format(time.RFC3339Nano), v.Status, v.UpdatedAt.Format(time.RFC3339Nano))
					}
				}
				break
			}
		}
	}
}

func (w *World) checkHistory(s *IntentSpec, hist []*core.Intent, final *core.Intent) {
	if len(hist) == 0 {
		w.problem("history", s.ID, "intent %d: the stream showed no version", s.N)
		return
	}
	if last := hist[len(hist)-1]; last.Version < final.Version {
		// A write after the sync (a webhook retried late): wait for it.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			w.mu.Lock()
			hist = append([]*core.Intent(nil), w.history[s.ID]...)
			w.mu.Unlock()
			if hist[len(hist)-1].Version >= final.Version {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if last := hist[len(hist)-1]; last.Version < final.Version {
		w.problem("harness", s.ID, "intent %d: stream's last version %d, store has %d", s.N, last.Version, final.Version)
	}
	for _, seg := range w.segments(s.ID, hist) {
		w.checkSegment(s, seg)
	}
}

func (w *World) checkSegment(s *IntentSpec, hist []*core.Intent) {
	for i := 1; i < len(hist); i++ {
		a, b := hist[i-1], hist[i]
		switch {
		case b.Version <= a.Version:
			w.problem("history", s.ID, "intent %d: version went from %d to %d", s.N, a.Version, b.Version)
		case !prefix(a.Attempts, b.Attempts):
			w.problem("history", s.ID, "intent %d: attempt history rewritten between versions %d and %d:\n    before %s\n    after  %s", s.N, a.Version, b.Version, js(a.Attempts), js(b.Attempts))
		case !prefix(a.Resolutions, b.Resolutions):
			w.problem("history", s.ID, "intent %d: resolutions rewritten between versions %d and %d", s.N, a.Version, b.Version)
		case b.AttemptCount < a.AttemptCount:
			w.problem("history", s.ID, "intent %d: attempt count went down %d -> %d", s.N, a.AttemptCount, b.AttemptCount)
		case a.Status.Terminal() && b.Status != a.Status:
			w.problem("history", s.ID, "intent %d: left terminal status %s for %s", s.N, a.Status, b.Status)
		case b.Version == a.Version+1 && a.Status != b.Status && core.Transition(a.Status, b.Status) != nil:
			w.problem("history", s.ID, "intent %d: forbidden transition %s -> %s", s.N, a.Status, b.Status)
		}
	}
}

func prefix[T any](a, b []T) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if !reflect.DeepEqual(normal(a[i]), normal(b[i])) {
			return false
		}
	}
	return true
}

// normal compares entries by their JSON form (time zones, nil vs empty maps).
func normal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// trail is one line per intent for reports.
func trail(in *core.Intent) string {
	var parts []string
	for _, a := range in.Attempts {
		p := fmt.Sprintf("#%d %s/%s", a.N, a.Trigger, a.Result)
		if a.ExternalID != "" {
			p += "(" + a.ExternalID + ")"
		}
		parts = append(parts, p)
	}
	for _, r := range in.Resolutions {
		if !r.Recommend {
			parts = append(parts, "human:"+r.Decision)
		}
	}
	return strings.Join(parts, ", ") + " -> " + string(in.Status)
}

// report renders a failing schedule for a human.
func (w *World) report(ctx context.Context, plan []Step) string {
	var b strings.Builder
	verdict := "FAILED"
	if len(w.problems) == 0 {
		verdict = "ok"
	}
	fmt.Fprintf(&b, "schedule seed=%d %s (replay: SEED=%d N=1 make chaos)\n", w.Seed, verdict, w.Seed)
	w.mu.Lock()
	probs := append([]Problem(nil), w.problems...)
	trace := append([]string(nil), w.trace...)
	w.mu.Unlock()
	sort.SliceStable(probs, func(i, j int) bool { return probs[i].Kind < probs[j].Kind })
	for _, p := range probs {
		fmt.Fprintf(&b, "  VIOLATION %s: %s\n", p.Kind, p.Detail)
	}
	states := w.states(ctx)
	for _, s := range w.Intents {
		line := "not created"
		if in, ok := states[s.ID]; ok {
			line = trail(in)
		}
		effects, _ := w.effects(s.ID)
		fmt.Fprintf(&b, "  intent %d %s [%s] effects=%d: %s\n", s.N, s.ID, s.caps(), len(effects), line)
	}
	b.WriteString("  plan:\n")
	for _, t := range trace {
		fmt.Fprintf(&b, "    %s\n", t)
	}
	_ = plan
	return b.String()
}

// repairState says where a stuck intent's repair entry stands against the
// sweeper's checkpoint on its shard (an entry behind it is never read
// again) and its lease, on the schedule's clock.
func (w *World) repairState(ctx context.Context, in *core.Intent) string {
	cp, err := w.env.checkpoint(ctx, w.slot.table, in.ID)
	if err != nil {
		cp = "error: " + err.Error()
	}
	lease := "none"
	if in.Lease != nil {
		lease = in.Lease.Owner + " until " + in.Lease.Until.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("[repairAt=%s checkpoint=%q lease=%s clock=%s version=%d]", in.RepairAt.Format(time.RFC3339Nano), cp, lease, w.clock.Now().Format(time.RFC3339Nano), in.Version)
}
