// Package overview decides what operators see at a glance (issue 30): what
// an on-call person asks first — how many intents wait for a person and for
// how long, by provider account; how many episodes entered needs-human (or
// ended failed/expired) per hour over the last week; which accounts are
// paused or have their breaker open; and which intents the operators' queue
// shows (IntentFilter). Everything is read from what the system already
// writes: the needs-human listing, the operator-event ledger's timeline, and
// the account gates. It consumes core; core never imports it.
package overview

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
)

// Overview bounds. Each read is capped so the page stays cheap however
// large the backlog; a capped figure says so (Truncated).
const (
	// OverviewWindow is how far back the episode chart goes.
	OverviewWindow = 7 * 24 * time.Hour
	// OverviewNeedsHumanCap bounds the needs-human intents read (10 pages).
	OverviewNeedsHumanCap = 1000
	// OverviewEpisodeCap bounds the ledger timeline entries read.
	OverviewEpisodeCap = 20000
	// OverviewAccountCap bounds the accounts whose gate is read.
	OverviewAccountCap = 100
)

// EpisodeMark is one operator-event episode as the ledger's timeline lists
// it: when it began, its type (OperatorEventNeedsHuman, ...) and its id.
type EpisodeMark struct {
	At   time.Time
	Type string
	ID   string
}

// EpisodeTimeline reads the operator-event ledger's timeline (adapters/dynamo).
type EpisodeTimeline interface {
	// EpisodesSince lists episodes that began at or after since, up to
	// limit; truncated reports that more exist.
	EpisodesSince(ctx context.Context, since time.Time, limit int) (marks []EpisodeMark, truncated bool, err error)
}

// GateLister lists the account gates that were ever unclean (paused,
// opened, given an operator's pace), by GateKey.
type GateLister interface {
	ListGates(ctx context.Context, limit int) (keys []string, truncated bool, err error)
}

// NeedsHumanLister pages through intents by status, oldest first.
type NeedsHumanLister interface {
	ListPage(ctx context.Context, status core.Status, cursor string, limit int) ([]*core.Intent, string, error)
}

// Overview is the operators' landing page.
type Overview struct {
	GeneratedAt       time.Time         `json:"generatedAt"`
	NeedsHuman        NeedsHumanSummary `json:"needsHuman"`
	Episodes          EpisodeSummary    `json:"episodes"`
	Accounts          []AccountState    `json:"accounts"`
	AccountsTruncated bool              `json:"accountsTruncated"`
	// Pacing is false when the account gate is off (no pauses, no breaker).
	Pacing bool `json:"pacing"`
}

// NeedsHumanSummary counts the intents waiting for a person.
type NeedsHumanSummary struct {
	Total int `json:"total"`
	// Truncated: more than OverviewNeedsHumanCap wait; the figures cover
	// the oldest OverviewNeedsHumanCap.
	Truncated    bool              `json:"truncated"`
	OldestSince  *time.Time        `json:"oldestSince,omitempty"`
	OldestIntent string            `json:"oldestIntent,omitempty"`
	ByAccount    []NeedsHumanGroup `json:"byAccount"`
}

// NeedsHumanGroup is the needs-human backlog of one provider account.
type NeedsHumanGroup struct {
	Provider     string    `json:"provider"`
	Account      string    `json:"account"`
	Count        int       `json:"count"`
	OldestSince  time.Time `json:"oldestSince"`
	OldestIntent string    `json:"oldestIntent"`
}

// EpisodeCounts counts episodes by type.
type EpisodeCounts struct {
	NeedsHuman    int `json:"needsHuman"`
	Failed        int `json:"failed"`
	Expired       int `json:"expired"`
	BreakerOpened int `json:"breakerOpened"`
}

// EpisodeHour is one hour of the chart (Start is the hour's start, UTC).
type EpisodeHour struct {
	Start time.Time `json:"start"`
	EpisodeCounts
}

// EpisodeSummary is the episode chart: one entry per hour of the window,
// oldest first.
type EpisodeSummary struct {
	// Recorded is false when operator events are off: the ledger then
	// records nothing and the chart is empty for that reason.
	Recorded  bool          `json:"recorded"`
	Since     time.Time     `json:"since"`
	Hours     []EpisodeHour `json:"hours"`
	Totals    EpisodeCounts `json:"totals"`
	Truncated bool          `json:"truncated"`
	// Recent are the newest episodes (at most OverviewRecentEpisodes),
	// newest first, so a person can follow the chart to an intent.
	Recent []EpisodeRef `json:"recent"`
}

// EpisodeRef is one recent episode; IntentID is empty for an account's
// (breaker) event.
type EpisodeRef struct {
	At       time.Time `json:"at"`
	Type     string    `json:"type"`
	IntentID string    `json:"intentId,omitempty"`
}

// OverviewRecentEpisodes is how many recent episodes the overview lists.
const OverviewRecentEpisodes = 20

// IntentOfEpisode is the intent an episode id names (OperatorEventFor's
// ids: <intent>.needs-human.<n>, <intent>.failed, <intent>.expired), or ""
// for another kind of event. Pure.
func IntentOfEpisode(typ, id string) string {
	switch typ {
	case core.OperatorEventNeedsHuman:
		if i := strings.LastIndex(id, ".needs-human."); i > 0 {
			return id[:i]
		}
	case core.OperatorEventFailed:
		if v, ok := strings.CutSuffix(id, ".failed"); ok {
			return v
		}
	case core.OperatorEventExpired:
		if v, ok := strings.CutSuffix(id, ".expired"); ok {
			return v
		}
	}
	return ""
}

// RecentEpisodes is the newest n episodes, newest first. Pure.
func RecentEpisodes(marks []EpisodeMark, n int) []EpisodeRef {
	sorted := append([]EpisodeMark(nil), marks...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].At.After(sorted[j].At) })
	out := make([]EpisodeRef, 0, min(n, len(sorted)))
	for _, m := range sorted {
		if len(out) == n {
			break
		}
		out = append(out, EpisodeRef{At: m.At, Type: m.Type, IntentID: IntentOfEpisode(m.Type, m.ID)})
	}
	return out
}

// AccountState is one provider account's gate as operators see it.
type AccountState struct {
	Provider string `json:"provider"`
	Account  string `json:"account"`
	// Pace is the pace that applies (the operator's, else the declared
	// one); absent for an unpaced account.
	Pace        *gate.Pace `json:"pace,omitempty"`
	Paused      bool       `json:"paused"`
	PausedUntil *time.Time `json:"pausedUntil,omitempty"`
	// BreakerState is closed, open (cooling down) or half-open (a probe
	// may go or is out).
	BreakerState string       `json:"breakerState"`
	Breaker      gate.Breaker `json:"breaker"`
	LastChange   *GateMove    `json:"lastChange,omitempty"`
	NeedsHuman   int          `json:"needsHuman"`
	OldestSince  *time.Time   `json:"oldestSince,omitempty"`
}

// GateMove is the last recorded change of an account's gate.
type GateMove struct {
	Kind   string    `json:"kind"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail,omitempty"`
}

// Breaker states (AccountState.BreakerState).
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half-open"
)

// GateMovePaceOverride is the kind of GateMove for an operator's pace.
const GateMovePaceOverride = "pace.override"

// BreakerPhase names a breaker's state at now. Pure.
func BreakerPhase(b gate.Breaker, now time.Time) string {
	switch {
	case !b.Open:
		return BreakerClosed
	case b.ProbeUntil != nil && b.ProbeUntil.After(now), b.OpenUntil == nil || !b.OpenUntil.After(now):
		return BreakerHalfOpen
	}
	return BreakerOpen
}

// LastGateMove is the latest of the gate's recorded changes: its newest
// operator event (breaker opened/closed) and the operator's pace. Pure.
func LastGateMove(st gate.GateState, newest *gate.Event) *GateMove {
	var m *GateMove
	if newest != nil {
		m = &GateMove{Kind: newest.Kind, At: newest.At, Detail: newest.Detail}
	}
	if o := st.Override; o != nil && (m == nil || o.At.After(m.At)) {
		m = &GateMove{Kind: GateMovePaceOverride, At: o.At, Detail: o.Reason + " (by " + o.By + ")"}
	}
	return m
}

// SummarizeNeedsHuman groups needs-human intents by provider account,
// oldest wait first (ties by provider, account). Pure.
func SummarizeNeedsHuman(ins []*core.Intent, truncated bool) NeedsHumanSummary {
	s := NeedsHumanSummary{Truncated: truncated, ByAccount: []NeedsHumanGroup{}}
	idx := map[string]int{}
	for _, in := range ins {
		if in.Status != core.StatusNeedsHuman {
			continue
		}
		since := core.NeedsHumanSince(in)
		s.Total++
		if s.OldestSince == nil || since.Before(*s.OldestSince) {
			t := since
			s.OldestSince, s.OldestIntent = &t, in.ID
		}
		k := gate.GateKey(in.Provider, in.Account)
		i, ok := idx[k]
		if !ok {
			i = len(s.ByAccount)
			idx[k] = i
			s.ByAccount = append(s.ByAccount, NeedsHumanGroup{Provider: in.Provider, Account: in.Account, OldestSince: since, OldestIntent: in.ID})
		}
		g := &s.ByAccount[i]
		g.Count++
		if since.Before(g.OldestSince) {
			g.OldestSince, g.OldestIntent = since, in.ID
		}
	}
	sort.SliceStable(s.ByAccount, func(i, j int) bool {
		a, b := s.ByAccount[i], s.ByAccount[j]
		if !a.OldestSince.Equal(b.OldestSince) {
			return a.OldestSince.Before(b.OldestSince)
		}
		if a.Provider != b.Provider {
			return a.Provider < b.Provider
		}
		return a.Account < b.Account
	})
	return s
}

// EpisodeHours buckets episodes into the hours of [now-window, now]: the
// first bucket starts at the hour holding now-window, the last holds now;
// episodes outside are dropped. Pure.
func EpisodeHours(marks []EpisodeMark, now time.Time, window time.Duration) ([]EpisodeHour, EpisodeCounts) {
	now = now.UTC()
	first := now.Add(-window).Truncate(time.Hour)
	n := int(now.Truncate(time.Hour).Sub(first)/time.Hour) + 1
	hours := make([]EpisodeHour, n)
	for i := range hours {
		hours[i].Start = first.Add(time.Duration(i) * time.Hour)
	}
	var tot EpisodeCounts
	for _, m := range marks {
		if m.At.Before(now.Add(-window)) || m.At.After(now) {
			continue
		}
		i := int(m.At.UTC().Sub(first) / time.Hour)
		if i < 0 || i >= n {
			continue
		}
		c := &hours[i].EpisodeCounts
		switch m.Type {
		case core.OperatorEventNeedsHuman:
			c.NeedsHuman++
			tot.NeedsHuman++
		case core.OperatorEventFailed:
			c.Failed++
			tot.Failed++
		case core.OperatorEventExpired:
			c.Expired++
			tot.Expired++
		case core.EventBreakerOpened:
			c.BreakerOpened++
			tot.BreakerOpened++
		}
	}
	return hours, tot
}

// Overviewer assembles the overview from the stores.
type Overviewer struct {
	Intents NeedsHumanLister
	// Timeline is the operator-event ledger; nil when operator events are
	// off (nothing is recorded then).
	Timeline EpisodeTimeline
	// Gate and Gates are nil when the account gate is off.
	Gate  *gate.Gate
	Gates GateLister
	// Declared lists the accounts the configuration paces by name
	// (GateKey), so a paced account shows before anything happened to it.
	Declared []string
	Clock    core.Clock
}

// Overview reads the overview. Operators and orchestrators may read it.
func (o *Overviewer) Overview(ctx context.Context, pr core.Principal) (*Overview, error) {
	if pr.Kind != core.PrincipalOperator && pr.Kind != core.PrincipalOrchestrator {
		return nil, core.ErrForbidden
	}
	now := o.Clock.Now().UTC()
	out := &Overview{GeneratedAt: now, Accounts: []AccountState{}, Pacing: o.Gate != nil}

	var ins []*core.Intent
	cursor, truncated := "", false
	for {
		page, next, err := o.Intents.ListPage(ctx, core.StatusNeedsHuman, cursor, 100)
		if err != nil {
			return nil, err
		}
		ins = append(ins, page...)
		if next == "" {
			break
		}
		if len(ins) >= OverviewNeedsHumanCap {
			truncated = true
			break
		}
		cursor = next
	}
	out.NeedsHuman = SummarizeNeedsHuman(ins, truncated)

	since := now.Add(-OverviewWindow)
	out.Episodes = EpisodeSummary{Recorded: o.Timeline != nil, Since: since}
	var marks []EpisodeMark
	if o.Timeline != nil {
		var err error
		if marks, out.Episodes.Truncated, err = o.Timeline.EpisodesSince(ctx, since, OverviewEpisodeCap); err != nil {
			return nil, err
		}
	}
	out.Episodes.Hours, out.Episodes.Totals = EpisodeHours(marks, now, OverviewWindow)
	out.Episodes.Recent = RecentEpisodes(marks, OverviewRecentEpisodes)

	accts, more, err := o.accountKeys(ctx, out.NeedsHuman)
	if err != nil {
		return nil, err
	}
	out.AccountsTruncated = more
	states, err := o.accountStates(ctx, accts, out.NeedsHuman, now)
	if err != nil {
		return nil, err
	}
	out.Accounts = states
	return out, nil
}

// accountKeys is every account worth a row: listed gates, declared paced
// accounts, and accounts with needs-human intents; sorted, capped.
func (o *Overviewer) accountKeys(ctx context.Context, nh NeedsHumanSummary) ([]string, bool, error) {
	seen := map[string]bool{}
	var keys []string
	add := func(k string) {
		if k != "" && !seen[k] && !strings.Contains(k, "*") {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	more := false
	if o.Gates != nil {
		listed, m, err := o.Gates.ListGates(ctx, OverviewAccountCap)
		if err != nil {
			return nil, false, err
		}
		more = m
		for _, k := range listed {
			add(k)
		}
	}
	for _, k := range o.Declared {
		add(k)
	}
	for _, g := range nh.ByAccount {
		add(gate.GateKey(g.Provider, g.Account))
	}
	sort.Strings(keys)
	if len(keys) > OverviewAccountCap {
		keys, more = keys[:OverviewAccountCap], true
	}
	return keys, more, nil
}

func (o *Overviewer) accountStates(ctx context.Context, keys []string, nh NeedsHumanSummary, now time.Time) ([]AccountState, error) {
	out := make([]AccountState, len(keys))
	errs := make([]error, len(keys))
	byKey := map[string]NeedsHumanGroup{}
	for _, g := range nh.ByAccount {
		byKey[gate.GateKey(g.Provider, g.Account)] = g
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, k := range keys {
		prov, acct, _ := strings.Cut(k, "#")
		st := AccountState{Provider: prov, Account: acct, BreakerState: BreakerClosed}
		if g, ok := byKey[k]; ok {
			since := g.OldestSince
			st.NeedsHuman, st.OldestSince = g.Count, &since
		}
		out[i] = st
		if o.Gate == nil {
			continue
		}
		wg.Add(1)
		go func(i int, k string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			gs, err := o.Gate.Store.State(ctx, k)
			if err != nil {
				errs[i] = err
				return
			}
			evs, err := o.Gate.Store.Events(ctx, k, 1)
			if err != nil {
				errs[i] = err
				return
			}
			a := &out[i]
			if p, ok := o.Gate.PaceFor(a.Provider, a.Account, &gs); ok {
				a.Pace = &p
			}
			a.PausedUntil = gs.PausedUntil
			a.Paused = gs.PausedUntil != nil && gs.PausedUntil.After(now)
			a.Breaker = gs.Breaker
			a.BreakerState = BreakerPhase(gs.Breaker, now)
			var newest *gate.Event
			if len(evs) > 0 {
				newest = &evs[0]
			}
			a.LastChange = LastGateMove(gs, newest)
		}(i, k)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
