package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/client"
	"github.com/botharness/outbox/core"
)

func (e *env) overview() client.Overview {
	e.t.Helper()
	r := e.do("GET", "/v1/admin/overview", opToken, nil, "")
	if r.status != http.StatusOK {
		e.t.Fatalf("GET /v1/admin/overview: %d %s", r.status, r.body)
	}
	var ov client.Overview
	if err := json.Unmarshal(r.body, &ov); err != nil {
		e.t.Fatalf("overview: %v", err)
	}
	return ov
}

// TestOverviewInBrowser: the operator signs in and lands on the overview;
// its counts are the API's; a sandbox 429 shows the account paused; the
// needs-human episode the ledger recorded is in the chart and in the latest
// episodes, and following it opens the intent. Screenshots in build/console.
func TestOverviewInBrowser(t *testing.T) {
	t.Parallel()
	rcv := newOpReceiver(t)
	e := newEnv(t, options{Config: wire.Config{OperatorWebhookURL: rcv.srv.URL, OperatorWebhookSecret: operatorSecret}})
	ctx, problems := browser(t)

	// Two intents a human must decide (no keys, no lookup, response dropped).
	e.faults(`{"account":"acct-ov","capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"},{"kind":"drop_after_commit"}]}`)
	nh1 := e.mustSubmit("ov-1", intentBody("acct-ov", "chan-ov1", "one"))
	nh2 := e.mustSubmit("ov-2", intentBody("acct-ov", "chan-ov2", "two"))
	// A 429 with a long Retry-After pauses another account.
	e.faults(`{"account":"acct-ov429","faults":[{"kind":"rate_limit","retryAfterSeconds":120}]}`)
	paced := e.mustSubmit("ov-3", intentBody("acct-ov429", "chan-ov3", "three"))
	e.waitStatus(nh1, 20*time.Second, core.StatusNeedsHuman)
	e.waitStatus(nh2, 20*time.Second, core.StatusNeedsHuman)
	e.waitStatus(paced, 20*time.Second, core.StatusRetryableFailure)
	waitFor(t, 15*time.Second, "the ledger records both episodes", func() bool {
		return rcv.count(nh1+".needs-human.1") == 1 && rcv.count(nh2+".needs-human.1") == 1
	})

	ov := e.overview()
	if ov.NeedsHuman.Total != 2 || len(ov.NeedsHuman.ByAccount) != 1 || ov.NeedsHuman.ByAccount[0].Account != "acct-ov" || ov.NeedsHuman.ByAccount[0].Count != 2 {
		t.Fatalf("overview needs-human: %+v", ov.NeedsHuman)
	}
	if !ov.Episodes.Recorded || ov.Episodes.Totals.NeedsHuman != 2 || ov.Episodes.Hours[len(ov.Episodes.Hours)-1].NeedsHuman != 2 {
		t.Fatalf("overview episodes: totals %+v, current hour %+v", ov.Episodes.Totals, ov.Episodes.Hours[len(ov.Episodes.Hours)-1])
	}
	var pausedRow *client.AccountState
	for i, a := range ov.Accounts {
		if a.Provider == "sandbox" && a.Account == "acct-ov429" {
			pausedRow = &ov.Accounts[i]
		}
	}
	if pausedRow == nil || !pausedRow.Paused || pausedRow.PausedUntil == nil || pausedRow.PausedUntil.Before(time.Now().Add(60*time.Second)) {
		t.Fatalf("the 429'd account is not shown paused: %+v in %+v", pausedRow, ov.Accounts)
	}

	console := e.api.URL + "/console"
	step(t, ctx, "sign in and land on the overview", 30*time.Second,
		chromedp.Navigate(console),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), opToken),
		chromedp.Click(chromedp.CSS(`#signin`)),
		chromedp.WaitVisible(chromedp.CSS(`#overview #ov-total`)))
	if hash := eval[string](t, ctx, `location.hash`); hash != "#/overview" {
		t.Fatalf("after sign-in the console is at %q, want the overview", hash)
	}
	if got := textOf(t, ctx, "#ov-total"); got != fmt.Sprint(ov.NeedsHuman.Total) {
		t.Fatalf("the page counts %q needs-human, the API %d", got, ov.NeedsHuman.Total)
	}
	if got := eval[string](t, ctx, `document.querySelector('#ov-needs-human tr[data-account="sandbox/acct-ov"]').dataset.count`); got != "2" {
		t.Fatalf("the page's acct-ov row counts %q, want 2", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('#ov-episode-totals').dataset.needsHuman`); got != fmt.Sprint(ov.Episodes.Totals.NeedsHuman) {
		t.Fatalf("the page's 7-day needs-human total is %q, the API's %d", got, ov.Episodes.Totals.NeedsHuman)
	}
	// The chart has the current hour's bar, drawn as inline SVG, with its
	// number beside it in the table.
	bar := eval[string](t, ctx, `(() => { const b = [...document.querySelectorAll('#ov-chart g.bar')]; return b.length ? b[b.length-1].dataset.count : ''; })()`)
	if bar != "2" {
		t.Fatalf("the chart's last bar counts %q, want 2", bar)
	}
	if row := textOf(t, ctx, "#ov-episodes-table tbody tr"); !strings.Contains(row, "2") {
		t.Fatalf("the episode table's newest row: %q", row)
	}
	// The 429'd account is shown paused.
	step(t, ctx, "the paused account", 10*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#ov-accounts tr[data-account="sandbox/acct-ov429"][data-paused="yes"]`)))
	if row := textOf(t, ctx, `#ov-accounts tr[data-account="sandbox/acct-ov429"]`); !strings.Contains(row, "PAUSED until") {
		t.Fatalf("paused account row: %q", row)
	}
	screenshot(t, ctx, "overview.png")

	// Follow the episode to its intent.
	step(t, ctx, "follow the episode to the intent", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#ov-recent tr[data-intent="`+nh1+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#intent-id`)),
		chromedp.WaitVisible(chromedp.CSS(`#decide-form`)))
	if got := textOf(t, ctx, "#intent-id"); got != nh1 {
		t.Fatalf("followed to %q, want %s", got, nh1)
	}
	// Its page shows the intent's trace id (one trace per intent; the
	// intake started one, as the request carried no traceparent).
	if tp := e.intent(nh1).TraceParent; len(tp) != 55 || textOf(t, ctx, "#trace-id") != strings.Split(tp, "-")[1] {
		t.Fatalf("trace id on the page %q, intent traceparent %q", textOf(t, ctx, "#trace-id"), tp)
	}
	screenshot(t, ctx, "overview-intent.png")

	// The queue's footer says where the list ends, and nothing else.
	step(t, ctx, "open the queue", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#nav-queue`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-intent="`+nh1+`"]`)))
	if pager := textOf(t, ctx, ".pager"); strings.Contains(pager, "null") || !strings.Contains(pager, "End of list") {
		t.Fatalf("queue footer: %q", pager)
	}
	if p := problems(); len(p) > 0 {
		t.Fatalf("the page reported errors (CSP violations or script errors): %v", p)
	}
}
