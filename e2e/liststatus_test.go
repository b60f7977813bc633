package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

// TestListsEveryNonFinalStatus: GET /v1/admin/intents lists every status the
// console and outboxctl offer (needs-human from its own index; pending,
// in-flight, retryable-failure and unknown-outcome from the repair index,
// filtered by status, paged with an exact cursor), and refuses a final
// status with 400 invalid_field naming status.
func TestListsEveryNonFinalStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{DisableStream: true})
	ctx := context.Background()
	statuses := []core.Status{core.StatusPending, core.StatusInFlight, core.StatusRetryableFailure, core.StatusUnknownOutcome, core.StatusNeedsHuman}
	want := map[core.Status]map[string]bool{}
	for i, st := range statuses {
		want[st] = map[string]bool{}
		for j := 0; j < 3; j++ {
			id := e.mustSubmit(fmt.Sprintf("ls-%d-%d", i, j), intentBody("acct-ls", fmt.Sprintf("chan-%d", j), "list me"))
			if st != core.StatusPending {
				if _, err := e.st.App.Store.Update(ctx, id, func(in *core.Intent) error {
					in.Status, in.RepairAt = st, time.Now().UTC().Add(time.Hour)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			want[st][id] = true
		}
	}
	for _, st := range statuses {
		got := map[string]bool{}
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatalf("%s: no end of the listing after 20 pages", st)
			}
			path := "/v1/admin/intents?account=acct-ls&limit=2&status=" + string(st)
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			r := e.do("GET", path, opToken, nil, "")
			if r.status != http.StatusOK {
				t.Fatalf("list %s: %d %s", st, r.status, r.body)
			}
			var page struct {
				Items []struct {
					ID     string      `json:"id"`
					Status core.Status `json:"status"`
				} `json:"items"`
				NextCursor string `json:"nextCursor"`
			}
			if err := json.Unmarshal(r.body, &page); err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				if it.Status != st || got[it.ID] {
					t.Fatalf("list %s: item %s is %s (or repeated)", st, it.ID, it.Status)
				}
				got[it.ID] = true
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if len(got) != len(want[st]) {
			t.Fatalf("list %s: %v, want %v", st, got, want[st])
		}
		for id := range want[st] {
			if !got[id] {
				t.Fatalf("list %s misses %s", st, id)
			}
		}
	}
	if r := e.do("GET", "/v1/admin/intents?status=succeeded", opToken, nil, ""); r.status != 400 || r.errorCode() != "invalid_field" {
		t.Fatalf("list succeeded: %d %s, want 400 invalid_field", r.status, r.body)
	}
}
