package core

import (
	"context"
	"fmt"
	"strconv"
)

// History bounds. Attempt and resolution history is append-only, but only the
// newest entries stay inside the intent item: when a list passes its inline
// cap, its oldest entries move, in the same conditional write, to a history
// page item of their own (see IntentStore.Update). Pages are numbered from 1
// and never change once written; reading pages in order and then the inline
// entries gives the whole history in order. The rules that need a fact about
// moved entries read it from HistorySummary, which the move keeps current.
const (
	MaxInlineAttempts    = 24
	MaxInlineResolutions = 24
	// spillKeep is how many of the newest entries stay inline after a move
	// (so a move happens once every cap-spillKeep appends, not on each).
	spillKeep = 12
)

// HistorySummary is what the intent keeps about history moved to pages.
type HistorySummary struct {
	Pages              int `json:"pages"`
	SpilledAttempts    int `json:"spilledAttempts"`
	SpilledResolutions int `json:"spilledResolutions"`
	// Uncertain is MayHaveTakenEffect over the moved attempts alone.
	Uncertain bool `json:"uncertain,omitempty"`
	// Ack is the first webhook entry that proves the effect, if it was moved.
	Ack *Attempt `json:"ack,omitempty"`
	// Delivery is the furthest delivery status among the moved entries.
	Delivery string `json:"delivery,omitempty"`
	// Echo: an echo entry was moved.
	Echo bool `json:"echo,omitempty"`
	// LastDecision is the newest human decision (not a recommendation) among
	// the moved resolutions.
	LastDecision *Resolution `json:"lastDecision,omitempty"`
}

// HistoryPage is one item of moved history. Seq starts at 1.
type HistoryPage struct {
	Seq         int          `json:"seq"`
	Attempts    []Attempt    `json:"attempts,omitempty"`
	Resolutions []Resolution `json:"resolutions,omitempty"`
}

// AppendAttempt appends one bounded entry to attempt history.
func (in *Intent) AppendAttempt(a Attempt) {
	in.Attempts = append(in.Attempts, boundEntry(a))
	SpillHistory(in)
}

// AppendResolution appends one decision or recommendation.
func (in *Intent) AppendResolution(r Resolution) {
	r.Reason = truncateUTF8(r.Reason, max(FieldLimits["reason"], FieldLimits["summary"]))
	in.Resolutions = append(in.Resolutions, r)
	SpillHistory(in)
}

// SpillHistory is the rule that keeps inline history bounded: when attempts
// or resolutions pass their inline cap, the oldest entries (all but the
// newest spillKeep) move to a new page in in.Spill, and the summary takes
// over the facts the rules need from them. Pure; the store writes the pages
// with the intent, atomically.
func SpillHistory(in *Intent) {
	moveA := len(in.Attempts) > MaxInlineAttempts
	moveR := len(in.Resolutions) > MaxInlineResolutions
	if !moveA && !moveR {
		return
	}
	if in.History == nil {
		in.History = &HistorySummary{}
	}
	h := in.History
	h.Pages++
	page := HistoryPage{Seq: h.Pages}
	if moveA {
		n := len(in.Attempts) - spillKeep
		page.Attempts = append([]Attempt(nil), in.Attempts[:n]...)
		in.Attempts = append([]Attempt(nil), in.Attempts[n:]...)
		h.SpilledAttempts += n
		h.Uncertain = foldUncertain(h.Uncertain, page.Attempts)
		for _, a := range page.Attempts {
			if a.Trigger != TriggerWebhook {
				continue
			}
			if provesEffect(a) {
				if h.Ack == nil {
					ack := a
					h.Ack = &ack
				}
				if DeliveryRank(a.Evidence.ProviderCode) > DeliveryRank(h.Delivery) {
					h.Delivery = a.Evidence.ProviderCode
				}
			}
			if a.Result == ResultEcho {
				h.Echo = true
			}
		}
	}
	if moveR {
		n := len(in.Resolutions) - spillKeep
		page.Resolutions = append([]Resolution(nil), in.Resolutions[:n]...)
		in.Resolutions = append([]Resolution(nil), in.Resolutions[n:]...)
		h.SpilledResolutions += n
		for i := len(page.Resolutions) - 1; i >= 0; i-- {
			if r := page.Resolutions[i]; !r.Recommend {
				r.Reason = ""
				h.LastDecision = &r
				break
			}
		}
	}
	in.Spill = append(in.Spill, page)
}

// TakeSpill returns the pages the last mutation moved out and forgets them
// (the store calls it once per write).
func (in *Intent) TakeSpill() []HistoryPage {
	p := in.Spill
	in.Spill = nil
	return p
}

// FullHistory joins pages (in any order; they are sorted by Seq) and the
// inline entries into the whole history, oldest first.
func FullHistory(in *Intent, pages []HistoryPage) ([]Attempt, []Resolution) {
	byseq := make([]*HistoryPage, len(pages)+1)
	for i := range pages {
		if s := pages[i].Seq; s > 0 && s < len(byseq) {
			byseq[s] = &pages[i]
		}
	}
	var as []Attempt
	var rs []Resolution
	for _, p := range byseq {
		if p != nil {
			as = append(as, p.Attempts...)
			rs = append(rs, p.Resolutions...)
		}
	}
	return append(as, in.Attempts...), append(rs, in.Resolutions...)
}

// spilledPages is how many history pages an intent has.
func spilledPages(in *Intent) int {
	if in.History == nil {
		return 0
	}
	return in.History.Pages
}

// KeyRecorded decides whether a decision under the Idempotency-Key key is
// already part of an intent's history: among its inline resolutions, or
// among those moved to pages (pass every page: a moved decision replayed
// must be recognised as a replay, not decided again).
func KeyRecorded(in *Intent, pages []HistoryPage, key string) bool {
	if key == "" {
		return false
	}
	for _, r := range in.Resolutions {
		if r.Key == key {
			return true
		}
	}
	for _, p := range pages {
		for _, r := range p.Resolutions {
			if r.Key == key {
				return true
			}
		}
	}
	return false
}

// HistorySlice is one page of an intent's whole history, oldest first:
// each moved page in turn, then the entries inside the intent. Next is the
// cursor of the following slice ("" after the last).
type HistorySlice struct {
	Attempts    []Attempt
	Resolutions []Resolution
	Next        string
}

// historyCursor decides which slice a cursor names: page seq (1-based) of
// the moved history, or inline (the entries inside the intent) once seq is
// past the last page. "" is the first slice. A cursor is the decimal page
// number, opaque to clients; pages never change and only ever get added
// after the last one, so following Next never repeats or skips an entry,
// whatever moves meanwhile.
func historyCursor(cursor string, pages int) (seq int, inline bool, err error) {
	seq = 1
	if cursor != "" {
		n, convErr := strconv.Atoi(cursor)
		if convErr != nil || n < 1 || n > pages+1 || strconv.Itoa(n) != cursor {
			return 0, false, InvalidCursor("not a page of this intent's history")
		}
		seq = n
	}
	return seq, seq > pages, nil
}

// ReadHistory returns the slice of in's history that cursor names.
func ReadHistory(ctx context.Context, pages HistoryPages, in *Intent, cursor string) (HistorySlice, error) {
	n := spilledPages(in)
	seq, inline, err := historyCursor(cursor, n)
	if err != nil {
		return HistorySlice{}, err
	}
	if inline {
		return HistorySlice{Attempts: in.Attempts, Resolutions: in.Resolutions}, nil
	}
	if pages == nil {
		return HistorySlice{}, fmt.Errorf("history of %s: %d pages and no page reader", in.ID, n)
	}
	got, err := pages.HistoryPages(ctx, in.ID, seq, seq)
	if err != nil {
		return HistorySlice{}, err
	}
	if len(got) != 1 || got[0].Seq != seq {
		return HistorySlice{}, fmt.Errorf("history page %d of %s is missing", seq, in.ID)
	}
	return HistorySlice{Attempts: got[0].Attempts, Resolutions: got[0].Resolutions, Next: strconv.Itoa(seq + 1)}, nil
}
