package admin

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/overview"
)

// pagedList plays the store's ListPage: ordered items, cursor = next index.
type pagedList struct {
	items []*core.Intent
	calls int
}

func (p *pagedList) ListPage(_ context.Context, _ core.Status, cursor string, limit int) ([]*core.Intent, string, error) {
	p.calls++
	start := 0
	if cursor != "" {
		start, _ = strconv.Atoi(cursor)
	}
	end := min(start+limit, len(p.items))
	next := ""
	if end < len(p.items) {
		next = strconv.Itoa(end)
	}
	return p.items[start:end], next, nil
}

func TestListMatchingPagesWithoutSkipping(t *testing.T) {
	l := &pagedList{}
	for i := 0; i < 37; i++ {
		acct := "a2"
		if i%3 == 0 {
			acct = "a1"
		}
		l.items = append(l.items, &core.Intent{ID: fmt.Sprintf("it_%02d", i), Account: acct, Status: core.StatusNeedsHuman})
	}
	want := []string{}
	for _, in := range l.items {
		if in.Account == "a1" {
			want = append(want, in.ID)
		}
	}
	for _, limit := range []int{1, 2, 4, 5, 50} {
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatal("no end")
			}
			items, next, err := listMatching(context.Background(), l, core.StatusNeedsHuman, cursor, limit, overview.IntentFilter{Account: "a1"}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(items) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(items))
			}
			for _, in := range items {
				got = append(got, in.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("limit %d:\n got %v\nwant %v", limit, got, want)
		}
	}
}
