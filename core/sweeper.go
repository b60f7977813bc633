package core

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// RepairIndex is the sweeper's view of the repair index (see repair.go). It
// is sharded so that no key carries every intent; each shard is read in due
// order from a checkpoint, so every entry is read about once.
type RepairIndex interface {
	RepairShards() int
	// DueRepairs returns, in due order, up to limit intents whose entry in
	// shard is due at or before upTo and after the shard's checkpoint, and
	// for each the checkpoint position just past it.
	DueRepairs(ctx context.Context, shard int, upTo time.Time, limit int) ([]*Intent, []string, error)
	// AdvanceRepairs moves the shard's checkpoint to pos (never backwards).
	AdvanceRepairs(ctx context.Context, shard int, pos string) error
	// CountNeedsHuman counts intents waiting for a human, reading at most
	// about bound index entries; exact is false when it stopped at the bound
	// (n is then a lower bound).
	CountNeedsHuman(ctx context.Context, bound int) (n int, exact bool, err error)
}

// OldestNeedsHumanIndex is a RepairIndex that can also tell when the
// longest-waiting needs-human intent entered needs-human (ok false: none).
// The sweeper then gauges NeedsHumanOldestAgeSeconds, which the stack alarms on.
type OldestNeedsHumanIndex interface {
	OldestNeedsHuman(ctx context.Context) (since time.Time, ok bool, err error)
}

// QueuedMessage is one message of a batch, with its delivery delay.
type QueuedMessage struct {
	Msg   RetryMessage
	Delay time.Duration
}

// BatchQueue sends many messages in few requests (SQS SendMessageBatch).
// failed lists the indexes of messages that were not sent.
type BatchQueue interface {
	EnqueueBatch(ctx context.Context, msgs []QueuedMessage) (failed []int, err error)
}

// Sweeper repairs what crashes leave behind. It reads the repair index
// shard by shard from a checkpoint, re-files everything still waiting at a
// later due time, and hands the work itself (attempts, reconciliations) to
// the retry queue in batches, so a tick moves at the queue's speed, not at
// the speed of one attempt after another. Every repair is a conditional
// transition or a duplicate-safe message, so sweepers may run concurrently.
type Sweeper struct {
	D     *Dispatcher
	Index RepairIndex
	// Batch sends the queue messages; nil sends them one by one via D.Queue.
	Batch BatchQueue
	// PageSize is entries read per shard per round (default 100).
	PageSize int
	// Budget bounds one run (default 20 s); unread entries wait for the next.
	Budget time.Duration
	// Skew is how far the checkpoint stays behind now (default 5 s): the
	// clock difference and write delay tolerated between writers and sweeper.
	Skew time.Duration
	// Parallel shards read at once (default 8).
	Parallel int
	// PerBotRate is how many repairs per second one bot's backlog is handed
	// out at (default 50): a bot's n-th repair of a run is delayed by
	// n/PerBotRate, so one bot's backlog never queues ahead of another
	// bot's first repair.
	PerBotRate float64
	// HumanGaugeBound caps the entries the needs-human gauge reads (default 10,000).
	HumanGaugeBound int
	Gauges          func(name string, value int)
	// OperatorEvents, when set, is asked to publish operator events a crash
	// left claimed but unpublished.
	OperatorEvents Redriver
	// OpenCounts, when set, recounts bot-limit open counters that a lost
	// give-back left too high (botlimits.go, "The open-count recount").
	OpenCounts OpenRecounter
}

// SweepReport counts what one run did.
type SweepReport struct {
	Read          int  `json:"read"`
	LeasesExpired int  `json:"leasesExpired"`
	RetriesQueued int  `json:"retriesQueued"`
	Reconciles    int  `json:"reconcilesQueued"`
	PendingKicked int  `json:"pendingKicked"`
	Refiled       int  `json:"refiled"`
	NeedingHuman  int  `json:"needingHuman"`
	HumanExact    bool `json:"needingHumanExact"`
	EventsRedrive int  `json:"operatorEventsRedriven"`
	OpenRecounted int  `json:"openCountsCorrected"`
	Errors        int  `json:"errors"`
	Raced         int  `json:"raced"`      // entries whose write lost a race: read again next run
	Incomplete    bool `json:"incomplete"` // the budget ran out before every shard was read
}

// repairWork is one message the run hands to the queue.
type repairWork struct {
	bot   string
	msg   RetryMessage
	delay time.Duration
}

// Run makes one pass over every shard.
func (s *Sweeper) Run(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	now := s.D.Clock.Now()
	// Entries are read up to now; the checkpoint stays Skew behind, so an
	// entry written a little late (a writer's clock behind ours, a slow
	// write) is read on the next run instead of being passed for good.
	upTo := now
	settled := now.Add(-OrDefault(s.Skew, 5*time.Second))
	deadline := time.Now().Add(OrDefault(s.Budget, 20*time.Second))
	page := s.PageSize
	if page <= 0 {
		page = 100
	}
	par := s.Parallel
	if par <= 0 {
		par = 8
	}
	var (
		mu   sync.Mutex
		errs []error
		open = make([]bool, s.Index.RepairShards())
	)
	for i := range open {
		open[i] = true
	}
	pace := &pacer{rate: s.PerBotRate, ranks: map[string]int{}}
	if pace.rate <= 0 {
		pace.rate = 50
	}
	for round := 0; ; round++ {
		var shards []int
		for i, o := range open {
			if o {
				shards = append(shards, i)
			}
		}
		if len(shards) == 0 {
			break
		}
		if round > 0 && time.Now().After(deadline) {
			rep.Incomplete = true
			break
		}
		var work []repairWork
		sem := make(chan struct{}, par)
		var wg sync.WaitGroup
		for _, shard := range shards {
			wg.Add(1)
			sem <- struct{}{}
			go func(shard int) {
				defer wg.Done()
				defer func() { <-sem }()
				w, sr, more, err := s.sweepPage(ctx, shard, upTo, settled, now, page, pace)
				mu.Lock()
				defer mu.Unlock()
				work = append(work, w...)
				rep.add(sr)
				if err != nil {
					errs = append(errs, err)
				}
				open[shard] = more && err == nil
			}(shard)
		}
		wg.Wait()
		rep.Errors += s.hand(ctx, work)
	}
	if s.Index != nil {
		n, exact, err := s.Index.CountNeedsHuman(ctx, OrDefault(s.HumanGaugeBound, 10000))
		errs = append(errs, err)
		rep.NeedingHuman, rep.HumanExact = n, exact
		if s.Gauges != nil && err == nil {
			s.Gauges("IntentsNeedingHuman", n)
		}
		if o, ok := s.Index.(OldestNeedsHumanIndex); ok && s.Gauges != nil {
			since, found, err := o.OldestNeedsHuman(ctx)
			errs = append(errs, err)
			if err == nil {
				age := 0
				if found {
					age = max(int(s.D.Clock.Now().Sub(since)/time.Second), 0)
				}
				s.Gauges("NeedsHumanOldestAgeSeconds", age)
			}
		}
	}
	if s.OperatorEvents != nil {
		var err error
		rep.EventsRedrive, err = s.OperatorEvents.Redrive(ctx, OrDefault(s.PageSize, 100))
		errs = append(errs, err)
	}
	if s.OpenCounts != nil {
		var err error
		rep.OpenRecounted, err = s.OpenCounts.RecountOpen(ctx, now)
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

func (r *SweepReport) add(o SweepReport) {
	r.Read += o.Read
	r.LeasesExpired += o.LeasesExpired
	r.Refiled += o.Refiled
	r.PendingKicked += o.PendingKicked
	r.RetriesQueued += o.RetriesQueued
	r.Reconciles += o.Reconciles
	r.Errors += o.Errors
	r.Raced += o.Raced
}

// sweepPage reads one page of a shard, re-files or expires what it must and
// returns the queue work. The checkpoint advances over every entry handled;
// it stops before the first entry whose write failed.
func (s *Sweeper) sweepPage(ctx context.Context, shard int, upTo, settled, now time.Time, limit int, pace *pacer) ([]repairWork, SweepReport, bool, error) {
	var rep SweepReport
	due, pos, err := s.Index.DueRepairs(ctx, shard, upTo, limit)
	if err != nil {
		return nil, rep, false, fmt.Errorf("read repair shard %d: %w", shard, err)
	}
	rep.Read = len(due)
	var work []repairWork
	done, recent, raced := "", false, false
	var firstErr error
	for i, listed := range due {
		w, expired, refiled, err := s.repair(ctx, listed, now, pace)
		if errors.Is(err, errRepairRaced) {
			// Another writer changed the intent between the read and the
			// write, and most writes leave the entry where it is: the
			// checkpoint must not pass it, or nothing would read it again.
			rep.Raced++
			raced = true
			continue
		}
		if err != nil {
			rep.Errors++
			firstErr = err
			break
		}
		if expired {
			rep.LeasesExpired++
		}
		if refiled {
			rep.Refiled++
		}
		if w != nil {
			work = append(work, *w)
			switch w.msg.Op {
			case OpDispatch:
				rep.PendingKicked++
			case OpAttempt:
				rep.RetriesQueued++
			case OpReconcile:
				rep.Reconciles++
			}
		}
		if raced {
			continue // the checkpoint stops before the raced entry
		}
		if !listed.RepairAt.After(settled) {
			done = pos[i]
		} else {
			recent = true
		}
	}
	if done != "" {
		if err := s.Index.AdvanceRepairs(ctx, shard, done); err != nil {
			return work, rep, false, fmt.Errorf("advance repair shard %d: %w", shard, err)
		}
	}
	// A page that reached the recent entries ends the shard's run (they
	// are read again next run, once settled); so does a raced entry (the
	// next page would start before it again).
	return work, rep, firstErr == nil && len(due) == limit && !recent && !raced, firstErr
}

var (
	errNothingToRepair = errors.New("nothing to repair")
	// errRepairRaced: the sweeper's write of an entry lost a race with
	// another writer (the intent moved on, or its lease was renewed or ran
	// out meanwhile); its entry must be read again.
	errRepairRaced = errors.New("repair raced another writer")
)

// repair handles one due intent: it re-files it (or expires its lease) in
// one conditional write, deciding on the stored state, and returns the
// queue message to send, if any.
func (s *Sweeper) repair(ctx context.Context, listed *Intent, now time.Time, pace *pacer) (*repairWork, bool, bool, error) {
	d := s.D
	if listed.RepairAt.After(now) {
		return nil, false, false, nil // a stale index entry: the intent was re-filed ahead
	}
	delay := d.Policy.Lease + d.Policy.SweepGrace
	plan := PlanRepair(listed, now, d.Policy.SweepGrace, delay)
	if plan.RecheckAt.IsZero() {
		return nil, false, false, nil // terminal or with a human: a dead entry
	}
	if plan.ExpireLease {
		expired, err := s.expireLease(ctx, listed, now, delay)
		if err == nil && !expired {
			err = errRepairRaced
		}
		return nil, expired, false, err
	}
	var msgDelay time.Duration
	if plan.Op != "" {
		msgDelay = pace.next(listed.Bot)
	}
	stored, err := d.Store.Update(ctx, listed.ID, func(in *Intent) error {
		// Decided on the clock at the write, not at the start of the run:
		// every entry the sweeper files must be due after the clock of its
		// write, or a sweeper that started since (and moved the checkpoint
		// up to its own clock less Skew) has already passed it, and no
		// sweep would read it again. It also keeps a long run over a large
		// backlog from re-filing entries already due again.
		plan = PlanRepair(in, later(now, d.Clock.Now()), d.Policy.SweepGrace, delay)
		if plan.RecheckAt.IsZero() {
			return errNothingToRepair // finished or handed to a human meanwhile: a dead entry
		}
		if plan.ExpireLease {
			return errRepairRaced // claimed meanwhile and its lease ran out: the next run expires it
		}
		// A message handed out later (per-bot pacing) must not be chased by
		// the sweeper before it can have been delivered.
		in.RepairAt = plan.RecheckAt.Add(msgDelay)
		return nil
	})
	if errors.Is(err, errNothingToRepair) {
		return nil, false, false, nil
	}
	if errors.Is(err, ErrConflict) {
		return nil, false, false, errRepairRaced
	}
	if err != nil {
		return nil, false, false, fmt.Errorf("re-file %s: %w", listed.ID, err)
	}
	if plan.Op == "" {
		return nil, false, true, nil
	}
	return &repairWork{bot: stored.Bot, delay: msgDelay, msg: RetryMessage{IntentID: stored.ID, Attempt: stored.AttemptCount, Op: plan.Op, Trigger: TriggerSweeper}}, false, true, nil
}

// pacer spreads one bot's repairs of a run over time: its n-th message is
// delayed by n/rate (capped by the queue's maximum delay).
type pacer struct {
	mu    sync.Mutex
	rate  float64
	ranks map[string]int
}

func (p *pacer) next(bot string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.ranks[bot]
	p.ranks[bot] = n + 1
	return min(time.Duration(float64(n)/p.rate*float64(time.Second)), MaxQueueDelay)
}

// hand sends the run's work to the queue, round-robin by bot (each bot's
// messages already carry their pacing delay). It returns the number of
// messages that could not be sent (their entries were re-filed, so a later
// pass sends them).
func (s *Sweeper) hand(ctx context.Context, work []repairWork) int {
	if len(work) == 0 {
		return 0
	}
	byBot := map[string][]repairWork{}
	var bots []string
	for _, w := range work {
		if _, ok := byBot[w.bot]; !ok {
			bots = append(bots, w.bot)
		}
		byBot[w.bot] = append(byBot[w.bot], w)
	}
	sort.Strings(bots)
	msgs := make([]QueuedMessage, 0, len(work))
	for i := 0; len(msgs) < len(work); i++ {
		for _, b := range bots {
			if i < len(byBot[b]) {
				msgs = append(msgs, QueuedMessage{Msg: byBot[b][i].msg, Delay: byBot[b][i].delay})
			}
		}
	}
	return s.send(ctx, msgs)
}

func (s *Sweeper) send(ctx context.Context, msgs []QueuedMessage) int {
	failed := 0
	if s.Batch != nil {
		bad, err := s.Batch.EnqueueBatch(ctx, msgs)
		if err != nil {
			s.D.log().WarnContext(ctx, "sweeper batch enqueue failed; the entries are re-filed and a later pass sends them", "messages", len(msgs), "failed", len(bad), "err", err.Error())
		}
		return len(bad)
	}
	for _, m := range msgs {
		if err := s.D.Queue.Enqueue(ctx, m.Msg, m.Delay); err != nil {
			failed++
		}
	}
	return failed
}

// expireLease turns an in-flight intent whose lease ran out into an Unknown
// Outcome and routes it exactly as if the provider call had timed out.
func (s *Sweeper) expireLease(ctx context.Context, listed *Intent, now time.Time, delay time.Duration) (bool, error) {
	d := s.D
	// Provider I/O stays outside the conditional write (which may re-run).
	caps := d.Capabilities(ctx, listed)
	var o outcome
	stored, err := d.Store.Update(ctx, listed.ID, func(in *Intent) error {
		now := later(now, d.Clock.Now()) // the entry moves ahead of the write's clock (see repair)
		if in.Status != StatusInFlight || (in.Lease != nil && now.Before(in.Lease.Until)) {
			return ErrNotClaimable
		}
		owner, until := "nobody", time.Time{}
		if in.Lease != nil {
			owner, until = in.Lease.Owner, in.Lease.Until
		}
		lost := &UnknownOutcomeError{
			Evidence: Evidence{Detail: fmt.Sprintf("lease held by %s expired at %s before an outcome was recorded; the request may have gone out", owner, until.Format(time.RFC3339))},
			Err:      ErrLeaseLost,
		}
		o = decide(in, caps, nil, lost, now, d.Policy.Backoff, d.Policy.Reconcile)
		// The attempt started at its claim: evidence must say when it really
		// began (a retry's claim, not the sweep). Leases written before the
		// claim time was recorded fall back to the first attempt's time.
		started := in.Lease.Since
		if started.IsZero() {
			started = now
			if in.FirstAttemptAt != nil && len(in.Attempts) == 0 {
				started = *in.FirstAttemptAt
			}
		}
		in.RepairAt = now.Add(delay)
		return o.apply(in, Attempt{N: in.AttemptCount, Trigger: TriggerSweeper, StartedAt: started, EndedAt: now, Result: ResultLeaseExpired, Evidence: lost.Evidence}, now)
	})
	if errors.Is(err, ErrNotClaimable) || errors.Is(err, ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("expire lease of %s: %w", listed.ID, err)
	}
	log := d.log().With("intent", listed.ID, "bot", stored.Bot, "attempt", stored.AttemptCount)
	log.InfoContext(ctx, "lease expired; unknown outcome", "status", string(stored.Status))
	if stored.Status == StatusNeedsHuman {
		d.metrics().Count("NeedsHuman", 1)
	}
	// The outcome's own follow-up goes out now, with its own delay.
	d.enqueue(ctx, stored, o.enqueueOp, o.delay, log)
	return true, nil
}

// OrDefault is v when it is positive, else def: an option left unset (or
// set to nonsense) takes its default.
func OrDefault[T ~int | ~int64](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
