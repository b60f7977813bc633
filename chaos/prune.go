package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/pruner"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/localstack/lambdahost"
	"github.com/botharness/outbox/localstack/lambdahost/streamfilter"
)

// Retention in the schedules (issue 27): the window is shortened to
// chaosRetention of fake time, so an ended intent can be pruned inside a
// schedule. A "retention/prune" step lets the window pass, runs the real
// TTL reaper (the local host's stand-in for DynamoDB's TTL service) on the
// fake clock, and hands the AWS-shaped REMOVE records the stream observer
// saw, through the pruner mapping's filter, to a worker's real pruner
// (archive and tombstones). A "retention/replay-pruned" step replays a
// pruned intent's key: the same body answers the original outcome (200,
// the tombstone stays, no new intent, no new provider effect), a different
// body 422. The final check reads a tombstone as the whole intent the
// prune removed (World.pruned) and counts provider effects against it as
// for every other intent.
const (
	// An hour, not seconds: the TTL is stamped from the schedule's fake
	// clock, which runs behind real time while a schedule runs (steps move
	// it less than the wall clock moves), and DynamoDB Local's own TTL does
	// delete expired items by real time — a 30 s window let it delete ended
	// intents mid-schedule, outside any step (a key freed with no tombstone:
	// the known delete-to-tombstone gap, found by this suite). An hour is
	// more than any schedule's lag, so only the reaper of a prune step
	// (fake clock advanced past the window) removes an intent.
	chaosRetention = time.Hour
	// Longer than any schedule's steps advance the clock (two prunes and
	// the clock steps): a tombstone is never reaped inside a schedule.
	chaosTombstoneRetention = 24 * time.Hour
)

// pruneSteps draws the schedule's retention steps from a stream of their
// own (so every other draw of the seed, and so every recorded regression
// seed, is unchanged) and inserts them into plan: up to two prunes, each
// often followed by a replay of a pruned key.
func pruneSteps(seed uint64, cfg Config, specs []*IntentSpec, plan []Step, names []string) ([]Step, []string) {
	if len(cfg.Only) > 0 {
		on := false
		for _, p := range cfg.Only {
			on = on || strings.HasPrefix("retention/", p) || strings.HasPrefix(p, "retention/")
		}
		if !on {
			return plan, names
		}
	}
	r := rand.New(rand.NewPCG(seed, 0x9f0e27))
	g := &Gen{R: r, Intents: specs, Workers: cfg.Workers}
	insert := func(at int, st Step, name string) {
		plan = append(plan[:at], append([]Step{st}, plan[at:]...)...)
		names = append(names[:at], append([]string{name}, names[at:]...)...)
	}
	// Late in the plan, where intents have ended; a replay soon after.
	for k := r.IntN(3); k > 0; k-- {
		at := len(plan)/2 + r.IntN(len(plan)-len(plan)/2+1)
		insert(at, genPrune(g), "retention/prune")
		if r.IntN(4) > 0 {
			insert(at+1+r.IntN(min(3, len(plan)-at)), genReplayPruned(g, r.IntN(2) == 0), "retention/replay-pruned")
		}
	}
	return plan, names
}

func genPrune(g *Gen) Step {
	wk := g.worker()
	return Step{Desc: fmt.Sprintf("the retention window passes (clock +%s); the TTL reaper deletes what expired and worker %d's pruner archives and tombstones it", chaosRetention+time.Second, wk),
		Run: func(ctx context.Context, w *World) { w.prune(ctx, w.worker(wk)) }}
}

func (w *World) prune(ctx context.Context, wk *Worker) {
	w.waitSandboxIdle()
	d := chaosRetention + time.Second
	if w.sb.Held("") > 0 {
		d = maxHold // see genClock: no key retention passes during a hold
	}
	w.clock.Advance(d)
	w.syncStream(ctx)
	reaper, err := lambdahost.NewTTLReaper(lambdahost.TTLReaperConfig{
		DynamoDB: w.env.ddb, TableName: w.slot.table, Attribute: dynamo.TTLAttribute, Now: w.clock.Now,
	})
	if err != nil {
		w.problem("harness", "", "ttl reaper: %v", err)
		return
	}
	// The whole intents, before the reaper removes the expired ones.
	whole := w.states(ctx)
	// Deletes seen before this reap are the harness's own (a loss step's),
	// never the TTL service's: on AWS they carry no TTL identity and the
	// pruner's filter drops them. Left in, one whose expiry matched a reaped
	// item's (a lost ended intent, restored and ended again in the same
	// fake second) was shaped as a TTL delete and tombstoned the old state.
	w.mu.Lock()
	w.removes = nil
	w.mu.Unlock()
	n, err := reaper.ReapOnce(ctx)
	if err != nil {
		w.problem("harness", "", "ttl reap: %v", err)
		return
	}
	// Every intent the reaper deleted: its REMOVE must reach the observer.
	gone := map[string]bool{}
	for id, in := range whole {
		if in.Pruned != nil {
			continue
		}
		if _, err := w.env.get(ctx, w.slot.table, id); errors.Is(err, core.ErrNotFound) {
			gone[id] = true
		}
	}
	var recs []events.DynamoDBEventRecord
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		seen := map[string]bool{}
		for _, r := range w.removes {
			if pk, ok := r.Change.Keys["pk"]; ok && gone[strings.TrimPrefix(pk.String(), "INTENT#")] {
				seen[strings.TrimPrefix(pk.String(), "INTENT#")] = true
			}
		}
		if len(seen) == len(gone) {
			recs, w.removes = w.removes, nil
		}
		w.mu.Unlock()
		if len(seen) == len(gone) {
			break
		}
		if time.Now().After(deadline) {
			w.problem("harness", "", "the stream observer saw the deletes of %d of the %d intents the reaper deleted within 5s", len(seen), len(gone))
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	filter, err := streamfilter.Compile(pruner.StreamFilterPattern)
	if err != nil {
		w.problem("harness", "", "pruner filter: %v", err)
		return
	}
	var batch []events.DynamoDBEventRecord
	var ids []string
	for _, r := range recs {
		r = lambdahost.AWSShape(r, reaper.IsTTLDelete)
		if !filter.Match(streamfilter.RecordForFilter(r)) {
			continue
		}
		batch = append(batch, r)
		if pk, ok := r.Change.Keys["pk"]; ok {
			ids = append(ids, strings.TrimPrefix(pk.String(), "INTENT#"))
		}
	}
	w.note("  reaper deleted %d expired items; %d ended intents go to the pruner", n, len(batch))
	if len(batch) == 0 {
		return
	}
	for _, id := range ids {
		if in := whole[id]; in != nil {
			w.mu.Lock()
			w.pruned[id] = in
			w.mu.Unlock()
		}
	}
	// The mapping retries a failed batch (every step of the pruner is
	// idempotent); the pruner's own requests are fault-injected.
	var herr error
	for try := 0; try < 6; try++ {
		if _, herr = wk.St.App.PrunerHandler().Handle(ctx, events.DynamoDBEvent{Records: batch}); herr == nil {
			break
		}
	}
	if herr != nil {
		w.problem("harness", "", "the pruner failed a batch 6 times: %v", herr)
		return
	}
	for _, id := range ids {
		got, err := w.env.get(ctx, w.slot.table, id)
		was := whole[id]
		switch {
		case err != nil:
			w.problem("lost", id, "pruned, but its key holds neither the intent nor a tombstone: %v", err)
		case got.Pruned == nil:
			// A key resubmitted between the delete and the tombstone makes a
			// new intent (docs/decisions.md); no step submits in that moment.
			w.problem("prune", id, "pruned, but its key holds a live intent (%s)", got.Status)
		case was != nil && (got.Status != was.Status || got.ExternalID != was.ExternalID):
			w.problem("prune", id, "the tombstone says %s %q, the pruned intent was %s %q", got.Status, got.ExternalID, was.Status, was.ExternalID)
		}
		w.note("  pruned %s -> tombstone", id)
	}
	w.mu.Lock()
	w.outcomes["pruned"] += len(ids)
	w.mu.Unlock()
}

// submitRead submits like World.submit (same retries of a 5xx) and returns
// the status, whether it was answered as a replay, and the intent answered.
func (w *World) submitRead(ctx context.Context, wk *Worker, s *IntentSpec, body string) (int, bool, core.Intent) {
	headers := map[string]string{"idempotency-key": s.Key, "content-type": "application/json"}
	var got core.Intent
	for try := 0; try < 6; try++ {
		resp, err := wk.St.Intake.Handle(ctx, principalReq(core.PrincipalBot, w.bot, "POST /v1/intents", nil, headers, body))
		if err != nil || resp.StatusCode >= 500 {
			continue
		}
		if resp.StatusCode == http.StatusOK {
			_ = json.Unmarshal([]byte(resp.Body), &got)
		}
		return resp.StatusCode, strings.EqualFold(resp.Headers["Idempotent-Replayed"], "true"), got
	}
	return http.StatusInternalServerError, false, got
}

// genReplayPruned replays a pruned intent's key (the first pruned one in
// the schedule's order): with the same body, the first answer and nothing
// new at the provider; with a different one (changed), 422.
func genReplayPruned(g *Gen, changed bool) Step {
	wk := g.worker()
	what := "the same body"
	if changed {
		what = "a different body"
	}
	return Step{Desc: fmt.Sprintf("bot replays a pruned intent's key with %s via worker %d", what, wk), Run: func(ctx context.Context, w *World) {
		var s *IntentSpec
		for _, c := range w.Intents {
			w.mu.Lock()
			_, ok := w.pruned[c.ID]
			w.mu.Unlock()
			if ok && c.Deadline == 0 { // a deadline is relative to "now", so the body would differ
				s = c
				break
			}
		}
		if s == nil {
			return
		}
		before, err := w.env.get(ctx, w.slot.table, s.ID)
		if err != nil || before.Pruned == nil {
			return // restored whole by a later step: the ordinary replay rules
		}
		effects, err := w.effects(s.ID)
		if err != nil {
			w.problem("harness", s.ID, "read effects: %v", err)
			return
		}
		variant := ""
		if changed {
			variant = " (changed)"
		}
		st, replayed, answered := w.submitRead(ctx, w.worker(wk), s, w.body(s, variant))
		w.note("  replay pruned intent %d%s -> %d %s", s.N, variant, st, answered.Status)
		w.mu.Lock()
		w.outcomes["pruned-replays"]++
		w.mu.Unlock()
		switch {
		case changed && st != http.StatusUnprocessableEntity && st != http.StatusForbidden:
			w.problem("intake", s.ID, "a pruned key reused with a different body answered %d, want 422 (or 403)", st)
		case !changed && st != http.StatusOK && st != http.StatusForbidden:
			w.problem("intake", s.ID, "a pruned key replayed with the same body answered %d, want 200 (the original outcome)", st)
		case !changed && st == http.StatusOK && (!replayed || answered.Pruned == nil || answered.Status != before.Status || answered.ExternalID != before.ExternalID):
			w.problem("intake", s.ID, "a pruned key replayed with the same body answered replayed=%v pruned=%v %s %q, want the original outcome %s %q",
				replayed, answered.Pruned != nil, answered.Status, answered.ExternalID, before.Status, before.ExternalID)
		}
		after, err := w.env.get(ctx, w.slot.table, s.ID)
		if err != nil || after.Pruned == nil {
			w.problem("intake", s.ID, "replaying a pruned key replaced its tombstone (%v)", err)
			return
		}
		w.waitSandboxIdle()
		if now, err := w.effects(s.ID); err == nil && len(now) != len(effects) {
			w.problem("effects_over_limit", s.ID, "replaying a pruned key made %d new provider effect(s)", len(now)-len(effects))
		}
	}}
}
