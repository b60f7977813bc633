package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/core/webhook"
)

// Issue 24 finding 8: the unresolved list carried every event's raw body, so
// at its default page size (50) with large bodies the answer passed Lambda's
// 6 MB response limit (6.8 MB measured: 500). The list now leaves bodies out
// (each row says how large its body is) and serves one body per event.
func TestUnresolvedListStaysSmallWithLargeRawBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	ctx := context.Background()
	wh := dynamo.NewWebhooks(e.clients.DynamoDB, e.table)
	const n, size = 50, 150 << 10 // 7.5 MB of bodies: over Lambda's limit as one page
	at := time.Now().UTC().Add(-time.Hour)
	for i := 0; i < n; i++ {
		raw := fmt.Sprintf(`{"n":%d,"text":%q}`, i, strings.Repeat("x", size))
		if err := wh.RecordEvent(ctx, webhook.EventRecord{Provider: "sandbox", Account: "acct-big", EventID: fmt.Sprintf("evt_big_%02d", i),
			Kind: webhook.EventEcho, State: webhook.EventUnresolved, Reason: "no match", Raw: raw, ReceivedAt: at.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	r := e.do("GET", "/v1/admin/webhooks/unresolved", opToken, nil, "")
	if r.status != http.StatusOK {
		t.Fatalf("list: %d %.300s", r.status, r.body)
	}
	t.Logf("default page of %d events with %d KiB bodies: %d bytes", n, size>>10, len(r.body))
	if len(r.body) > 64<<10 {
		t.Fatalf("the list answer is %d bytes: bodies are in it (Lambda's limit is 6 MB)", len(r.body))
	}
	var page struct {
		Events []struct {
			EventID  string `json:"eventId"`
			RawBytes int    `json:"rawBytes"`
		} `json:"events"`
	}
	r.json(t, &page)
	if len(page.Events) != n {
		t.Fatalf("listed %d events, want %d", len(page.Events), n)
	}
	for _, ev := range page.Events[:3] {
		rec := e.unresolvedEvent("sandbox", "acct-big", ev.EventID)
		if len(rec.Raw) != ev.RawBytes || ev.RawBytes < size || !strings.HasPrefix(rec.Raw, `{"n":`) {
			t.Fatalf("event %s: %d raw bytes, row says %d", ev.EventID, len(rec.Raw), ev.RawBytes)
		}
	}
	if r := e.do("GET", "/v1/admin/webhooks/unresolved/sandbox/acct-big/evt_nosuch", opToken, nil, ""); r.status != http.StatusNotFound {
		t.Fatalf("a missing event: %d", r.status)
	}
	if r := e.do("GET", "/v1/admin/webhooks/unresolved/sandbox/acct-big/evt_big_00", botToken, nil, ""); r.status != http.StatusForbidden {
		t.Fatalf("a bot read an event: %d", r.status)
	}
}
