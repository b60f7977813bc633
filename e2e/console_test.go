package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
)

// browser starts headless Chromium (Debian's `chromium`, installed by
// localstack/install.sh --test, make deps-test) with a fresh profile and returns a chromedp context.
// Page errors (exceptions, console errors, CSP violations) are collected.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (make test installs Debian's chromium package): %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1366, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	var mu sync.Mutex
	var problems []string
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			// The text alone is "Uncaught (in promise)"; the description
			// carries the error and its stack.
			d := ev.ExceptionDetails
			msg := "exception: " + d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg += " " + d.Exception.Description
			}
			problems = append(problems, msg)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				problems = append(problems, "console.error")
			}
		case *cdplog.EventEntryAdded:
			// The console's own refused requests (a bot token's 403) are
			// expected network errors; CSP violations and script errors are not.
			if ev.Entry != nil && ev.Entry.Level == cdplog.EntryLevelError && ev.Entry.Source != cdplog.EntrySourceNetwork {
				problems = append(problems, string(ev.Entry.Source)+": "+ev.Entry.Text)
			}
		}
	}
	err = chromedp.Do(ctx) // open the tab first, so the listener misses nothing
	if err == nil {
		err = chromedp.Listen(ctx, listen)
	}
	if err == nil {
		err = chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, cdplog.Enable, cdp.Empty{})
			return err
		}))
	}
	if err != nil {
		cancelB()
		cancelA()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() { cancelB(); cancelA() })
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

// step runs chromedp actions with a deadline, failing the test with what.
func step(t *testing.T, ctx context.Context, what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := filepath.Join("..", "build", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png := run(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs one action that returns a value, with a deadline.
func run[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return run(t, ctx, "read "+sel, chromedp.Text(chromedp.CSS(sel)))
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	return run(t, ctx, "evaluate "+expr, chromedp.Evaluate[T](expr))
}

// TestConsoleInBrowser drives the operators' console in headless Chromium:
// a bot token is refused; the operator signs in, finds the intent a sandbox
// fault put in needs-human, reads its evidence, retries it after confirming
// the duplicate risk, sees it succeed while the sandbox counts two effects,
// bulk-abandons 20 intents by filter, and withdraws and restores an account.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	rcv := newOpReceiver(t)
	e := newEnv(t, options{Config: wire.Config{OperatorWebhookURL: rcv.srv.URL, OperatorWebhookSecret: operatorSecret, WebhookSecrets: fmt.Sprintf(`{"sandbox/*": %q}`, whSecret)}})
	ctx, problems := browser(t)

	// Issue 48: an intent settled by the provider's status callback while it
	// waited for a person, after an "undelivered" report (the sandbox's
	// status callback capability).
	e.faults(fmt.Sprintf(`{"account":"acct-cbc","capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"}],
	  "webhook":{"url":%q,"secret":%q,"delayMs":1500,"statuses":["undelivered","delivered"],"noAck":true}}`, e.api.URL+"/v1/webhooks/sandbox/acct-cbc", whSecret))
	cbID := e.mustSubmit("console-cb", intentBody("acct-cbc", "chan-cbc", "settled by the provider"))
	// One only reported undelivered (it stays waiting), one settled later
	// while the queue is on screen. The report comes a second after the
	// send, once the attempt's own outcome is written: the queue shows a
	// report that is the waiting intent's latest evidence (at 0 ms it could
	// land before the outcome and no longer be the latest).
	for account, hook := range map[string]string{"acct-cbn": `"delayMs":1000,"statuses":["undelivered"]`, "acct-cbq": `"delayMs":3000,"statuses":["delivered"]`} {
		e.faults(fmt.Sprintf(`{"account":%q,"capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"}],
		  "webhook":{"url":%q,"secret":%q,%s,"noAck":true}}`, account, e.api.URL+"/v1/webhooks/sandbox/"+account, whSecret, hook))
	}
	cbnID := e.mustSubmit("console-cbn", intentBody("acct-cbn", "chan-cbn", "reported undelivered"))

	// The sandbox drops the response after committing, at a provider with
	// neither idempotency keys nor lookup: a human must decide.
	e.faults(`{"account":"acct-con","capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"}]}`)
	id := e.mustSubmit("console-1", intentBody("acct-con", "chan-con", "hello from the console test"))
	e.waitStatus(id, 15*time.Second, core.StatusNeedsHuman)
	// Twenty more for the bulk decision, on their own account.
	drops := strings.TrimSuffix(strings.Repeat(`{"kind":"drop_after_commit"},`, 20), ",")
	e.faults(`{"account":"acct-bulk","capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[` + drops + `]}`)
	var bulkIDs []string
	for i := 0; i < 20; i++ {
		bulkIDs = append(bulkIDs, e.mustSubmit(fmt.Sprintf("console-bulk-%d", i), intentBody("acct-bulk", fmt.Sprintf("chan-b%d", i), "bulk")))
	}

	// One intent under reconciliation (unknown-outcome), for the status filter:
	// it reaches needs-human, then is put back to unknown-outcome by hand with
	// its next check an hour away, so it stays there during the test.
	e.faults(`{"account":"acct-uo","capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"}]}`)
	uoID := e.mustSubmit("console-uo", intentBody("acct-uo", "chan-uo", "under reconciliation"))
	e.waitStatus(uoID, 15*time.Second, core.StatusNeedsHuman)
	if _, err := e.st.App.Store.Update(context.Background(), uoID, func(in *core.Intent) error {
		in.Status, in.RepairAt = core.StatusUnknownOutcome, time.Now().UTC().Add(time.Hour)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	console := e.api.URL + "/console"
	// Before sign-in there is no navigation; a token the API does not know
	// is "not recognised".
	step(t, ctx, "open the console", 20*time.Second,
		chromedp.Navigate(console+"/"), // as most people type it: redirected
		chromedp.WaitVisible(chromedp.CSS(`#token`)))
	if p := eval[string](t, ctx, `location.pathname`); p != "/console" {
		t.Fatalf("/console/ landed on %q, want /console", p)
	}
	step(t, ctx, "sign in with an unknown token", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), "no-such-token"),
		chromedp.Click(chromedp.CSS(`#signin`)),
		chromedp.WaitVisible(chromedp.CSS(`#signin-error`)))
	if !eval[bool](t, ctx, `document.getElementById('nav').hidden`) {
		t.Fatal("the navigation is shown before sign-in")
	}
	if msg := textOf(t, ctx, "#signin-error"); !strings.Contains(msg, "not recognised") {
		t.Fatalf("unknown token: %q, want it called not recognised", msg)
	}
	// A bot's token is refused exactly as the API refuses it.
	step(t, ctx, "a bot's token", 20*time.Second,
		chromedp.SendKeys(chromedp.CSS(`#token`), botToken),
		chromedp.Click(chromedp.CSS(`#signin`)),
		chromedp.WaitVisible(chromedp.CSS(`#signin-error`)))
	e.eventually(10*time.Second, "the bot sign-in answer replaces the previous one", func() bool {
		// Read by script: the notice is replaced while it is read, and a
		// node query would fail on the one that just went.
		return strings.Contains(eval[string](t, ctx, `(document.getElementById('signin-error') || {}).textContent || ''`), "recognised but")
	})
	if msg := textOf(t, ctx, "#signin-error"); !strings.Contains(msg, "403") || !strings.Contains(msg, "forbidden") {
		t.Fatalf("bot sign-in: %q, want the API's 403 forbidden", msg)
	}
	stored := eval[string](t, ctx, `sessionStorage.getItem('outbox.operatorToken') || ''`)
	if stored != "" {
		t.Fatal("a refused token stayed in sessionStorage")
	}
	screenshot(t, ctx, "signin-refused.png")

	// The operator signs in and finds the intent in the queue.
	step(t, ctx, "operator sign-in", 20*time.Second,
		chromedp.SendKeys(chromedp.CSS(`#token`), opToken),
		chromedp.Click(chromedp.CSS(`#signin`)),
		chromedp.WaitVisible(chromedp.CSS(`#overview`)), // the landing page
		chromedp.Click(chromedp.CSS(`#nav-queue`)),
		chromedp.WaitVisible(chromedp.CSS(`#queue`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-intent="`+id+`"]`)))
	if eval[bool](t, ctx, `document.getElementById('nav').hidden`) {
		t.Fatal("the navigation is hidden after sign-in")
	}
	inURL := eval[string](t, ctx, `location.href`)
	cookie := eval[string](t, ctx, `document.cookie`)
	stored = eval[string](t, ctx, `sessionStorage.getItem('outbox.operatorToken') || ''`)
	if stored != opToken || strings.Contains(inURL, opToken) || strings.Contains(cookie, opToken) {
		t.Fatalf("token must be in sessionStorage only: url=%q cookie=%q session=%v", inURL, cookie, stored == opToken)
	}
	step(t, ctx, "filter by account", 20*time.Second,
		chromedp.SendKeys(chromedp.CSS(`#f-account`), "acct-con"),
		chromedp.Click(chromedp.CSS(`#apply-filters`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-intent="`+id+`"]`)))
	// The row was already visible before the filter: wait for the filtered
	// reload to leave only it.
	e.eventually(20*time.Second, "the filtered queue shows only the acct-con intent", func() bool {
		return eval[int](t, ctx, `document.querySelectorAll('#queue-rows tr[data-intent]').length`) == 1 &&
			eval[int](t, ctx, `document.querySelectorAll('#queue-rows tr[data-intent="`+id+`"]').length`) == 1
	})
	screenshot(t, ctx, "queue.png")

	// The unknown-outcome filter lists the intent under reconciliation (with
	// its target) and none of the needs-human ones.
	step(t, ctx, "filter unknown-outcome", 20*time.Second,
		chromedp.Navigate(console+"#/queue?status=unknown-outcome"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-intent="`+uoID+`"]`)))
	if row := textOf(t, ctx, `tr[data-intent="`+uoID+`"]`); !strings.Contains(row, "chan-uo") || !strings.Contains(row, "unknown-outcome") {
		t.Fatalf("unknown-outcome row lacks its target or status: %q", row)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#queue-rows tr[data-status="needs-human"]').length`); n != 0 {
		t.Fatalf("the unknown-outcome filter shows %d needs-human rows", n)
	}
	if pager := textOf(t, ctx, "#view .pager"); strings.Contains(pager, "null") {
		t.Fatalf("the queue's pager shows %q", pager)
	}
	screenshot(t, ctx, "queue-unknown-outcome.png")
	// Open an intent by its id, from the queue page.
	step(t, ctx, "open by id", 20*time.Second,
		chromedp.SendKeys(chromedp.CSS(`#open-id`), uoID),
		chromedp.Click(chromedp.CSS(`#open-intent`)),
		chromedp.WaitVisible(chromedp.CSS(`#intent-id`)),
		chromedp.WaitVisible(chromedp.CSS(`#not-waiting`)))
	if got := textOf(t, ctx, "#intent-id"); got != uoID {
		t.Fatalf("open by id showed %q, want %s", got, uoID)
	}
	step(t, ctx, "back to the queue", 20*time.Second,
		chromedp.Navigate(console+"#/queue?account=acct-con"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-intent="`+id+`"]`)))

	// Its page shows identity, the payload hash (not the body) and the
	// attempt evidence.
	step(t, ctx, "open the intent", 20*time.Second,
		chromedp.Click(chromedp.CSS(`tr[data-intent="`+id+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#attempts`)),
		chromedp.WaitVisible(chromedp.CSS(`#decide-form`)))
	page := textOf(t, ctx, "#intent")
	in := e.intent(id)
	for _, want := range []string{in.ID, in.IdempotencyKey, in.PayloadHash, testBot, "acct-con", "needs-human", string(in.Attempts[0].Result)} {
		if !strings.Contains(page, want) {
			t.Fatalf("intent page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "hello from the console test") {
		t.Fatal("the intent page shows the payload body")
	}
	screenshot(t, ctx, "intent.png")

	// Retry: the page states the duplicate risk and refuses to send without
	// the explicit confirmation.
	step(t, ctx, "choose retry", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#decision-retry`)),
		chromedp.WaitVisible(chromedp.CSS(`#duplicate-risk`)),
		chromedp.SendKeys(chromedp.CSS(`#reason`), "customer says nothing arrived"),
		chromedp.Click(chromedp.CSS(`#decide`)),
		chromedp.WaitVisible(chromedp.CSS(`#decision-error`)))
	if msg := textOf(t, ctx, "#decision-error"); !strings.Contains(msg, "Confirm the duplicate risk") {
		t.Fatalf("unconfirmed retry: %q", msg)
	}
	if st := e.intent(id).Status; st != core.StatusNeedsHuman {
		t.Fatalf("an unconfirmed retry changed the intent to %s", st)
	}
	screenshot(t, ctx, "retry-risk.png")
	step(t, ctx, "confirm", 10*time.Second, chromedp.Click(chromedp.CSS(`#confirm-duplicate`)))
	if eval[bool](t, ctx, `document.querySelector('#decision-error') !== null`) {
		t.Fatal("the stale decision error stays after the form changed")
	}
	step(t, ctx, "retry", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#decide`)),
		chromedp.WaitVisible(chromedp.CSS(`#decision-ok`)))
	// The page watches the intent until the retry's outcome is in.
	step(t, ctx, "watch it succeed", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#intent-status [data-status="succeeded"]`)))
	if got := e.effectsFor(id); got != 2 {
		t.Fatalf("sandbox effects for %s = %d, want 2 (the dropped first send and the confirmed retry)", id, got)
	}
	done := e.intent(id)
	last := done.Resolutions[len(done.Resolutions)-1]
	if last.Decision != "retry" || last.By != "op-ann" || !last.DuplicateRiskAccepted || last.Reason != "customer says nothing arrived" {
		t.Fatalf("recorded decision: %+v", last)
	}
	screenshot(t, ctx, "intent-succeeded.png")
	// The subscriber was told once about the needs-human episode.
	waitFor(t, 10*time.Second, "the operator event", func() bool { return rcv.count(id+".needs-human.1") == 1 })

	// Bulk: abandon every needs-human intent of acct-bulk.
	for _, b := range bulkIDs {
		e.waitStatus(b, 20*time.Second, core.StatusNeedsHuman)
	}
	step(t, ctx, "bulk preview", 20*time.Second,
		chromedp.Navigate(console+"#/bulk"),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-form`)),
		chromedp.SendKeys(chromedp.CSS(`#b-account`), "acct-bulk"),
		chromedp.SendKeys(chromedp.CSS(`#bulk-reason`), "campaign cancelled"),
		chromedp.Click(chromedp.CSS(`#bulk-preview`)),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-count`)))
	if msg := textOf(t, ctx, "#bulk-count"); !strings.HasPrefix(msg, "20 intents match") {
		t.Fatalf("bulk preview: %q", msg)
	}
	// No default decision: running without choosing one is refused.
	if v := eval[string](t, ctx, `document.getElementById('bulk-decision').value`); v != "" {
		t.Fatalf("the bulk form starts with decision %q selected, want none", v)
	}
	step(t, ctx, "bulk run without a decision", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#bulk-run`)),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-error`)))
	if msg := textOf(t, ctx, "#bulk-error"); !strings.Contains(msg, "Choose a decision") {
		t.Fatalf("bulk run without a decision: %q", msg)
	}
	if st := e.intent(bulkIDs[0]).Status; st != core.StatusNeedsHuman {
		t.Fatalf("a bulk run without a decision changed an intent to %s", st)
	}
	// A bulk retry at a provider that cannot deduplicate it, without the
	// confirmation: every intent is refused (409 duplicate_risk_not_accepted)
	// and nothing is sent (issue 50).
	step(t, ctx, "bulk retry unconfirmed", 60*time.Second,
		chromedp.SetValue(chromedp.CSS(`#bulk-decision`), "retry"),
		chromedp.Click(chromedp.CSS(`#bulk-run`)),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-status[data-running="no"][data-done="20"]`)))
	if refused := eval[int](t, ctx, `document.querySelectorAll('#bulk-results tr[data-ok="no"]').length`); refused != 20 ||
		!strings.Contains(textOf(t, ctx, "#bulk-results"), "duplicate_risk_not_accepted") {
		t.Fatalf("unconfirmed bulk retry: %d refused rows, want 20: %s", refused, textOf(t, ctx, "#bulk-results"))
	}
	for _, b := range bulkIDs {
		if in := e.intent(b); in.Status != core.StatusNeedsHuman || e.effectsFor(b) != 1 {
			t.Fatalf("an unconfirmed bulk retry changed %s: %s, %d effects", b, in.Status, e.effectsFor(b))
		}
	}
	step(t, ctx, "bulk run", 60*time.Second,
		chromedp.Click(chromedp.CSS(`#bulk-preview`)),
		chromedp.WaitEnabled(chromedp.CSS(`#bulk-run`)),
		chromedp.SetValue(chromedp.CSS(`#bulk-decision`), "abandon"),
		chromedp.Click(chromedp.CSS(`#bulk-run`)),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-status[data-running="no"][data-done="20"]`)))
	okRows := eval[int](t, ctx, `document.querySelectorAll('#bulk-results tr[data-ok="yes"]').length`)
	if okRows != 20 {
		t.Fatalf("bulk results: %d ok rows, want 20", okRows)
	}
	for _, b := range bulkIDs {
		in := e.intent(b)
		if in.Status != core.StatusAbandoned || in.Resolutions[len(in.Resolutions)-1].Reason != "campaign cancelled" {
			t.Fatalf("bulk intent %s is %s", b, in.Status)
		}
		if n := e.effectsFor(b); n != 1 {
			t.Fatalf("bulk intent %s: %d effects, want 1 (abandon sends nothing)", b, n)
		}
	}
	screenshot(t, ctx, "bulk.png")

	// The intent page tells what the provider reported, and that the callback
	// settled it without a decision.
	e.waitStatus(cbID, 15*time.Second, core.StatusSucceeded)
	step(t, ctx, "provider status callbacks on the intent page", 20*time.Second,
		chromedp.Navigate(console+"#/intents/"+cbID),
		chromedp.WaitVisible(chromedp.CSS(`#settled-by-provider`)),
		chromedp.WaitVisible(chromedp.CSS(`#provider-statuses li[data-callback="failure"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#provider-statuses li[data-callback="status"]`)))
	if s := eval[string](t, ctx, `document.getElementById('provider-statuses').textContent + ' | ' + document.getElementById('settled-by-provider').textContent`); !strings.Contains(s, "delivery status from the provider: delivered at") ||
		!strings.Contains(s, "failure reported by the provider: undelivered at") || !strings.Contains(s, "no decision was needed") {
		t.Fatalf("provider status lines: %s", s)
	}

	// The queue shows a provider's failure report beside a waiting intent,
	// and says so when a callback settles an intent on screen.
	e.waitStatus(cbnID, 15*time.Second, core.StatusNeedsHuman)
	e.eventually(10*time.Second, "the undelivered report is recorded", func() bool { return len(webhookEntries(e.intent(cbnID))) == 1 })
	step(t, ctx, "a provider's failure report in the queue", 20*time.Second,
		chromedp.Navigate(console+"#/queue?account=acct-cbn"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-intent="`+cbnID+`"] [data-callback="failure"]`)))
	cbqID := e.mustSubmit("console-cbq", intentBody("acct-cbq", "chan-cbq", "settled while on screen"))
	e.waitStatus(cbqID, 15*time.Second, core.StatusNeedsHuman)
	step(t, ctx, "the queue says a callback settled an intent", 30*time.Second,
		chromedp.Navigate(console+"#/queue?account=acct-cbq"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-intent="`+cbqID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#settled-by-callback li[data-settled="`+cbqID+`"]`)))
	if s := eval[string](t, ctx, `document.getElementById('settled-by-callback').textContent`); !strings.Contains(s, "left the queue: Settled by a provider status callback (delivered at") {
		t.Fatalf("settled notice: %q", s)
	}

	// Grants and capability withdrawals: withdraw an account, then restore it.
	step(t, ctx, "withdraw an account", 20*time.Second,
		chromedp.Navigate(console+"#/grants"),
		chromedp.WaitVisible(chromedp.CSS(`#cap-lookup`)),
		chromedp.SendKeys(chromedp.CSS(`#cap-provider`), "sandbox"),
		chromedp.SendKeys(chromedp.CSS(`#cap-account`), "acct-wd"),
		chromedp.Click(chromedp.CSS(`#cap-show`)),
		chromedp.WaitVisible(chromedp.CSS(`#cap-reason-sandbox_acct-wd`)),
		chromedp.SendKeys(chromedp.CSS(`#cap-reason-sandbox_acct-wd`), "provider maintenance"),
		chromedp.Click(chromedp.CSS(`fieldset[data-account="sandbox/acct-wd"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`fieldset[data-account="sandbox/acct-wd"] [data-withdrawn="yes"]`)))
	r := e.do("GET", "/v1/admin/capabilities/sandbox/acct-wd", opToken, nil, "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "provider maintenance") {
		t.Fatalf("capability after withdraw: %d %s", r.status, r.body)
	}
	screenshot(t, ctx, "grants.png")
	step(t, ctx, "restore the account", 20*time.Second,
		chromedp.SendKeys(chromedp.CSS(`#cap-reason-sandbox_acct-wd`), "maintenance over"),
		chromedp.Click(chromedp.CSS(`fieldset[data-account="sandbox/acct-wd"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`fieldset[data-account="sandbox/acct-wd"] [data-withdrawn="no"]`)))
	// An account never (or no longer) withdrawn shows no reason, and no "null".
	if s := eval[string](t, ctx, `document.querySelector('fieldset[data-account="sandbox/acct-wd"]').textContent`); strings.Contains(s, "null") {
		t.Fatalf("the grants page shows %q", s)
	}

	// An orchestrator sees the evidence and recommendations, but no decision controls.
	r = e.do("POST", "/v1/admin/intents/"+bulkIDs[0]+"/recommendation", orchToken, nil, `{"decision":"abandon","summary":"looks like spam"}`)
	if r.status != http.StatusConflict { // abandoned already: recommendations are for waiting intents
		t.Fatalf("recommendation on an abandoned intent: %d %s", r.status, r.body)
	}
	step(t, ctx, "orchestrator view", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#signout`)),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), orchToken),
		chromedp.Click(chromedp.CSS(`#signin`)),
		chromedp.WaitVisible(chromedp.CSS(`#overview`)),
		chromedp.Navigate(console+"#/intents/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#no-controls`)))
	if n := eval[int](t, ctx, `document.querySelectorAll('#decide-form, #decide').length`); n != 0 {
		t.Fatalf("an orchestrator sees %d decision controls", n)
	}
	screenshot(t, ctx, "orchestrator.png")

	if p := problems(); len(p) > 0 {
		t.Fatalf("the page reported errors (CSP violations or script errors): %v", p)
	}
}

// TestConsoleHeaders: the console is served with a strict CSP and no data.
func TestConsoleHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	for _, path := range []string{"/console", "/console/index.html", "/console/console.js", "/console/console.css"} {
		r := e.do("GET", path, "", nil, "")
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d", path, r.status)
		}
		csp := r.headers.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Fatalf("%s: CSP %q", path, csp)
		}
		if r.headers.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s: no nosniff", path)
		}
	}
	if r := e.do("GET", "/console/../v1/admin/intents", "", nil, ""); r.status == http.StatusOK {
		t.Fatalf("path traversal answered 200")
	}
	if r := e.do("GET", "/console/nope.html", "", nil, ""); r.status != http.StatusNotFound {
		t.Fatalf("unknown file: %d", r.status)
	}
	// "/console/", the address most people type, redirects to the console
	// (the catch-all route; "/console/{proxy+}" needs a segment).
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(e.api.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != "/console" {
		t.Fatalf("GET /console/: %d Location %q, want 308 to /console", resp.StatusCode, resp.Header.Get("Location"))
	}
	if r := e.do("GET", "/console/", "", nil, ""); r.status != http.StatusOK || !strings.Contains(string(r.body), "<title>") {
		t.Fatalf("GET /console/ followed: %d %.80q", r.status, r.body)
	}
	// Every other unmatched request is answered as before the catch-all.
	for _, c := range []struct{ method, path string }{{"GET", "/nope"}, {"POST", "/console/"}, {"DELETE", "/console"}} {
		if r := e.do(c.method, c.path, "", nil, ""); r.status != http.StatusNotFound || string(r.body) != `{"message":"Not Found"}` {
			t.Fatalf("%s %s: %d %s, want 404 {\"message\":\"Not Found\"}", c.method, c.path, r.status, r.body)
		}
	}
}

// TestNeedsHumanInQueueAfterOneSweep: an intent whose worker died mid-attempt
// is in the operators' queue (the list the console shows) right after one
// sweeper tick, at a provider that can neither deduplicate nor look up.
func TestNeedsHumanInQueueAfterOneSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{DisableStream: true})
	e.faults(`{"account":"acct-tick","capabilities":{"idempotencyKeys":false,"lookup":false}}`)
	id := e.mustSubmit("tick-1", intentBody("acct-tick", "chan-1", "hi"))
	until := time.Now().UTC().Add(300 * time.Millisecond)
	if _, err := e.st.App.Store.Update(context.Background(), id, func(in *core.Intent) error {
		now := time.Now().UTC()
		in.Status, in.AttemptCount, in.FirstAttemptAt = core.StatusInFlight, 1, &now
		in.Lease = &core.Lease{Owner: "crashed-worker", Until: until}
		// A real claim's lease always ends before the repair entry is due
		// (lease + grace after intake); this hand-made short one moves it.
		in.RepairAt = until
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the lease to run out", func() bool { return time.Now().After(until.Add(50 * time.Millisecond)) })
	e.sweep() // one tick
	r := e.do("GET", "/v1/admin/intents?status=needs-human&account=acct-tick", opToken, nil, "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), id) {
		t.Fatalf("after one sweeper tick the queue does not show %s: %d %s", id, r.status, r.body)
	}
}
