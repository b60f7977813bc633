package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/botharness/outbox/adapters/handlers/admin"
	"github.com/botharness/outbox/adapters/webhooksig"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
	"github.com/botharness/outbox/sandbox"
)

// Webhook signing secrets: the current one, the one rotated out (no longer
// accepted), and one nobody configured.
const (
	whSecret        = "whsec_ZTJlLXdlYmhvb2stc2VjcmV0LWN1cnJlbnQtMDEyMzQ1"
	whSecretRetired = "whsec_ZTJlLXdlYmhvb2stc2VjcmV0LXJldGlyZWQtMDEyMzQ1"
	whSecretForger  = "whsec_Zm9yZ2VkLWJ5LXNvbWVvbmUtZWxzZS0wMTIzNDU2Nzg="
)

// whEnv starts a stack whose webhook endpoint accepts whSecret for every
// sandbox account (the OUTBOX_WEBHOOK_SECRETS document, as an option, so
// webhook tests run in parallel).
func whEnv(t *testing.T, o options) *env {
	t.Helper()
	o.WebhookSecrets = fmt.Sprintf(`{"sandbox/*": %q}`, whSecret)
	return newEnv(t, o)
}

// whConfigure points the account's sandbox webhooks at our endpoint; extra
// is merged into the webhook object (e.g. `"early":true`).
func (e *env) whConfigure(account, secret, extra string) {
	e.t.Helper()
	if extra != "" {
		extra = "," + extra
	}
	e.faults(fmt.Sprintf(`{"account":%q,"webhook":{"url":%q,"secret":%q%s}}`, account, e.api.URL+"/v1/webhooks/sandbox/"+account, secret, extra))
}

// whEmit asks the sandbox to send an event now (synchronous) over its HTTP control API.
func (e *env) whEmit(body string) sandbox.EmitResponse {
	e.t.Helper()
	resp, err := http.Post(e.sbURL+"/_sandbox/emit", "application/json", bytes.NewBufferString(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("emit %s: %d %s", body, resp.StatusCode, b)
	}
	var er sandbox.EmitResponse
	if err := json.Unmarshal(b, &er); err != nil {
		e.t.Fatal(err)
	}
	return er
}

func allOK(ds []sandbox.WebhookDelivery) bool {
	for _, d := range ds {
		if d.Status != http.StatusOK {
			return false
		}
	}
	return len(ds) > 0
}

// whDelivered waits until the sandbox made n delivery attempts for the account.
func (e *env) whDelivered(account string, n int, timeout time.Duration) []sandbox.WebhookDelivery {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ds := e.sb.WebhookDeliveries(account)
		if len(ds) >= n {
			return ds
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %d webhook deliveries, want %d: %+v", account, len(ds), n, ds)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// whPost sends a hand-signed webhook straight to our endpoint.
func (e *env) whPost(account, id string, at time.Time, body string, secrets ...string) response {
	e.t.Helper()
	h := map[string]string{"webhook-id": id, "webhook-timestamp": strconv.FormatInt(at.Unix(), 10)}
	if len(secrets) > 0 {
		sig, err := webhooksig.Sign(id, at, []byte(body), secrets...)
		if err != nil {
			e.t.Fatal(err)
		}
		h["webhook-signature"] = sig
	}
	return e.do("POST", "/v1/webhooks/sandbox/"+account, "", h, body)
}

// tableItems counts every item in the table (intents, tokens, webhook items).
func (e *env) tableItems() int {
	e.t.Helper()
	out, err := e.clients.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(e.table), Select: "COUNT", ConsistentRead: aws.Bool(true)})
	if err != nil {
		e.t.Fatal(err)
	}
	return int(out.Count)
}

// inbox drains the inbox queue and returns what it held.
func (e *env) inbox() []webhook.InboxMessage {
	e.t.Helper()
	var msgs []webhook.InboxMessage
	for {
		out, err := e.clients.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(e.st.Queues.Inbox), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return msgs
		}
		for _, m := range out.Messages {
			var im webhook.InboxMessage
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &im); err != nil {
				e.t.Fatalf("inbox body %s: %v", aws.ToString(m.Body), err)
			}
			msgs = append(msgs, im)
			_, _ = e.clients.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(e.st.Queues.Inbox), ReceiptHandle: m.ReceiptHandle})
		}
	}
}

// unresolved lists unresolved webhook events through the admin API (rows
// without raw bodies).
func (e *env) unresolved() []admin.UnresolvedRow {
	e.t.Helper()
	r := e.do("GET", "/v1/admin/webhooks/unresolved", opToken, nil, "")
	if r.status != http.StatusOK {
		e.t.Fatalf("list unresolved: %d %s", r.status, r.body)
	}
	var out struct {
		Events []admin.UnresolvedRow `json:"events"`
	}
	r.json(e.t, &out)
	return out.Events
}

// unresolvedEvent reads one unresolved event, raw body included.
func (e *env) unresolvedEvent(provider, account, eventID string) webhook.EventRecord {
	e.t.Helper()
	r := e.do("GET", "/v1/admin/webhooks/unresolved/"+url.PathEscape(provider)+"/"+url.PathEscape(account)+"/"+url.PathEscape(eventID), opToken, nil, "")
	if r.status != http.StatusOK {
		e.t.Fatalf("unresolved event %s: %d %s", eventID, r.status, r.body)
	}
	var rec webhook.EventRecord
	r.json(e.t, &rec)
	return rec
}

func webhookEntries(in *core.Intent) []core.Attempt {
	var out []core.Attempt
	for _, a := range in.Attempts {
		if a.Trigger == core.TriggerWebhook {
			out = append(out, a)
		}
	}
	return out
}

// finalState is what must not depend on whether the ack came before or
// after the dispatcher's outcome write: status, external id, delivery
// status, and the evidence entries (as a set; history keeps arrival order).
func finalState(in *core.Intent) string {
	var parts []string
	for _, a := range in.Attempts {
		ext := a.ExternalID
		if ext != "" && ext == in.ExternalID {
			ext = "<ext>"
		}
		parts = append(parts, fmt.Sprintf("#%d %s/%s/%s", a.N, a.Trigger, a.Result, ext))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%s delivery=%s [%s]", in.Status, core.DeliveryStatus(in), strings.Join(parts, ", "))
}

func TestWebhookDuplicateAckFiveTimesOneEvidence(t *testing.T) {
	t.Parallel()
	e := whEnv(t, options{})
	e.whConfigure("acct-dup", whSecret, `"duplicates":4`)
	id := e.mustSubmit("wh-dup", intentBody("acct-dup", "chan-1", "hi"))
	e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
	ds := e.whDelivered("acct-dup", 5, 10*time.Second)
	if !allOK(ds) || ds[0].EventID != ds[4].EventID {
		t.Fatalf("deliveries %+v", ds)
	}
	e.eventually(5*time.Second, "the acknowledgement is bound", func() bool { return len(webhookEntries(e.intent(id))) == 1 })
	first := e.intent(id)
	if got := webhookEntries(first); len(got) != 1 || got[0].Result != core.ResultAck || got[0].ExternalID != first.ExternalID {
		t.Fatalf("want one evidence record for five deliveries: %s", trail(first))
	}
	// The same event five more times: nothing written, nothing changed.
	before, items := e.writes.n.Load(), e.tableItems()
	er := e.whEmit(fmt.Sprintf(`{"account":"acct-dup","type":"ack","intentId":%q,"eventId":%q,"duplicates":4}`, id, ds[0].EventID))
	if len(er.Deliveries) != 5 || !allOK(er.Deliveries) {
		t.Fatalf("replays: %+v", er.Deliveries)
	}
	after := e.intent(id)
	if after.Version != first.Version || len(after.Attempts) != len(first.Attempts) {
		t.Fatalf("intent changed by replays: v%d -> v%d", first.Version, after.Version)
	}
	if w := e.writes.n.Load() - before; w != 0 {
		t.Fatalf("replays made %d DynamoDB writes, want 0", w)
	}
	if n := e.tableItems(); n != items {
		t.Fatalf("replays added %d items", n-items)
	}
	e.assertEffectsStay(id, 1, 100*time.Millisecond)
}

func TestWebhookAckBeforeAndAfterOutcomeWriteSameFinalState(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, caps, faults string
		outcome            core.Status // the dispatcher's own outcome when the ack comes after it
	}{
		{"response arrives", `{}`, `[]`, core.StatusSucceeded},
		{"response lost", `{"idempotencyKeys":false,"lookup":false}`, `[{"kind":"drop_after_commit"}]`, core.StatusNeedsHuman},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case has its own deployment and sandbox
			e := whEnv(t, options{})
			slug := strings.ReplaceAll(c.name, " ", "-")
			run := func(early bool) *core.Intent {
				acct := "acct-late-" + slug
				hook := `"delayMs":1000`
				if early {
					acct, hook = "acct-early-"+slug, `"early":true`
				}
				e.faults(fmt.Sprintf(`{"account":%q,"capabilities":%s,"faults":%s}`, acct, c.caps, c.faults))
				e.whConfigure(acct, whSecret, hook)
				id := e.mustSubmit("k-"+acct, intentBody(acct, "chan-1", "book seat S12"))
				if early {
					in := e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
					wh := webhookEntries(in)
					if len(wh) != 1 || !wh[0].EndedAt.Before(in.Attempts[len(in.Attempts)-1].EndedAt) {
						t.Fatalf("early: the ack must be recorded before the outcome: %s", trail(in))
					}
				} else {
					in := e.waitStatus(id, 10*time.Second, c.outcome)
					if len(webhookEntries(in)) != 0 {
						t.Fatalf("late: the ack arrived before the outcome write: %s", trail(in))
					}
					e.whDelivered(acct, 1, 10*time.Second)
				}
				e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
				e.assertEffectsStay(id, 1, 200*time.Millisecond)
				return e.intent(id)
			}
			before, after := run(true), run(false)
			if finalState(before) != finalState(after) {
				t.Fatalf("ack before the outcome write: %s\nack after it:               %s", finalState(before), finalState(after))
			}
			t.Logf("%s: %s", c.name, finalState(after))
		})
	}
}

func TestWebhookBadSignaturesAreRefusedAndStoreNothing(t *testing.T) {
	t.Parallel()
	e := whEnv(t, options{DisableStream: true})
	now := time.Now()
	body := func(id string) string {
		return fmt.Sprintf(`{"type":"message.received","timestamp":%q,"data":{"eventId":%q,"account":"acct-sig","from":"u1","text":"hi"}}`,
			now.UTC().Format(time.RFC3339Nano), id)
	}
	items := e.tableItems()
	cases := []struct {
		name   string
		r      func() response
		status int
		code   string
	}{
		{"forged", func() response { return e.whPost("acct-sig", "evt_f", now, body("evt_f"), whSecretForger) }, 401, "invalid_signature"},
		{"rotated-out secret", func() response { return e.whPost("acct-sig", "evt_r", now, body("evt_r"), whSecretRetired) }, 401, "invalid_signature"},
		{"six minutes old", func() response {
			return e.whPost("acct-sig", "evt_o", now.Add(-6*time.Minute), body("evt_o"), whSecret)
		}, 401, "invalid_signature"},
		{"unsigned", func() response { return e.whPost("acct-sig", "evt_u", now, body("evt_u")) }, 401, "invalid_signature"},
		{"too large", func() response {
			return e.whPost("acct-sig", "evt_l", now, strings.Replace(body("evt_l"), `"hi"`, `"`+strings.Repeat("a", 300<<10)+`"`, 1), whSecret)
		}, 413, "payload_too_large"},
		{"malformed", func() response { return e.whPost("acct-sig", "evt_m", now, `{"type":`, whSecret) }, 400, "malformed_json"},
		{"event id differs from webhook-id", func() response { return e.whPost("acct-sig", "evt_x", now, body("evt_y"), whSecret) }, 400, "invalid_field"},
		{"account differs from the URL", func() response {
			return e.whPost("acct-sig", "evt_a", now, strings.Replace(body("evt_a"), `"acct-sig"`, `"acct-other"`, 1), whSecret)
		}, 400, "invalid_field"},
		{"unknown provider", func() response { return e.do("POST", "/v1/webhooks/carrier-pigeon/acct-sig", "", nil, body("evt_p")) }, 404, "unknown_provider"},
	}
	for _, c := range cases {
		w := e.writes.n.Load()
		r := c.r()
		if r.status != c.status || r.errorCode() != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.status, c.code)
		}
		if n := e.writes.n.Load() - w; n != 0 {
			t.Errorf("%s: %d DynamoDB writes", c.name, n)
		}
	}
	if n := e.tableItems(); n != items {
		t.Fatalf("refused webhooks stored %d items", n-items)
	}
	if msgs := e.inbox(); len(msgs) != 0 {
		t.Fatalf("refused webhooks reached the inbox: %+v", msgs)
	}
	// The sender still signing with the retired secret: every ack refused, no evidence.
	e2 := whEnv(t, options{})
	e2.whConfigure("acct-rot", whSecretRetired, "")
	id := e2.mustSubmit("wh-rot", intentBody("acct-rot", "chan-1", "hi"))
	e2.waitStatus(id, 10*time.Second, core.StatusSucceeded)
	if ds := e2.whDelivered("acct-rot", 1, 10*time.Second); ds[0].Status != http.StatusUnauthorized {
		t.Fatalf("retired secret: %+v", ds)
	}
	if in := e2.intent(id); len(webhookEntries(in)) != 0 {
		t.Fatalf("evidence from a refused webhook: %s", trail(in))
	}
	// And the current secret works.
	if r := e.whPost("acct-sig", "evt_ok", now, body("evt_ok"), whSecretRetired, whSecret); r.status != 200 {
		t.Fatalf("good signature (sender mid-rotation): %d %s", r.status, r.body)
	}
}

func TestWebhookUnmatchedEchoIsUnresolvedAndWakesNobody(t *testing.T) {
	t.Parallel()
	e := whEnv(t, options{})
	e.whConfigure("acct-echo", whSecret, "")
	id := e.mustSubmit("wh-echo", intentBody("acct-echo", "chan-1", "hi"))
	e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
	e.whDelivered("acct-echo", 1, 10*time.Second)
	e.eventually(5*time.Second, "the acknowledgement is bound", func() bool { return len(webhookEntries(e.intent(id))) == 1 })
	before, effects := e.intent(id), e.effects("?account=acct-echo")

	w := e.writes.n.Load()
	er := e.whEmit(`{"account":"acct-echo","type":"echo","target":"chan-1","text":"posted by the bot from elsewhere","duplicates":2}`)
	if !allOK(er.Deliveries) {
		t.Fatalf("deliveries %+v", er.Deliveries)
	}
	if n := e.writes.n.Load() - w; n != 1 {
		t.Fatalf("an unresolved echo (delivered 3x) cost %d DynamoDB writes, want 1", n)
	}
	un := e.unresolved()
	if len(un) != 1 || un[0].EventID != er.Event.Data.EventID || un[0].MessageID != er.Event.Data.MessageID ||
		un[0].State != webhook.EventUnresolved || un[0].RawBytes == 0 || un[0].Reason == "" {
		t.Fatalf("unresolved records %+v", un)
	}
	if rec := e.unresolvedEvent(un[0].Provider, un[0].Account, un[0].EventID); !strings.Contains(rec.Raw, "posted by the bot from elsewhere") || len(rec.Raw) != un[0].RawBytes {
		t.Fatalf("unresolved event %+v", rec)
	}
	if msgs := e.inbox(); len(msgs) != 0 {
		t.Fatalf("an echo woke the bot: %+v", msgs)
	}
	if after := e.intent(id); after.Version != before.Version {
		t.Fatalf("an unmatched echo changed an intent: %s", trail(after))
	}
	if n := e.effects("?account=acct-echo"); n != effects {
		t.Fatalf("sandbox effects %d -> %d", effects, n)
	}
	// An echo of the message we did send binds to its intent as evidence
	// (through the message id mapping the ack created), and wakes nobody either.
	er = e.whEmit(fmt.Sprintf(`{"account":"acct-echo","type":"echo","messageId":%q}`, before.ExternalID))
	if !allOK(er.Deliveries) {
		t.Fatalf("deliveries %+v", er.Deliveries)
	}
	after := e.intent(id)
	wh := webhookEntries(after)
	if after.Status != core.StatusSucceeded || len(wh) != 2 || wh[1].Result != core.ResultEcho || wh[1].Evidence.Extra["matchedBy"] != "external-id" {
		t.Fatalf("matched echo: %s", trail(after))
	}
	if msgs := e.inbox(); len(msgs) != 0 || len(e.unresolved()) != 1 {
		t.Fatalf("matched echo reached the inbox or the unresolved list")
	}
}

func TestWebhookAckResolvesUncertainIntentsWithoutASecondSend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		caps string
		want core.Status
	}{
		{`{"lookup":true}`, core.StatusUnknownOutcome},
		{`{"idempotencyKeys":false,"lookup":false}`, core.StatusNeedsHuman},
	} {
		t.Run(string(c.want), func(t *testing.T) {
			t.Parallel() // each case has its own deployment and sandbox
			// The retry queue is off: no reconciliation or retry can get in first.
			e := whEnv(t, options{DisableQueue: true})
			acct := "acct-" + string(c.want)
			e.faults(fmt.Sprintf(`{"account":%q,"capabilities":%s,"faults":[{"kind":"drop_after_commit"}]}`, acct, c.caps))
			id := e.mustSubmit("k-"+acct, intentBody(acct, "chan-1", "charge 10 EUR"))
			uncertain := e.waitStatus(id, 10*time.Second, c.want)
			// Now the provider's acknowledgement arrives.
			e.whConfigure(acct, whSecret, "")
			w := e.writes.n.Load()
			er := e.whEmit(fmt.Sprintf(`{"account":%q,"type":"ack","intentId":%q}`, acct, id))
			if !allOK(er.Deliveries) {
				t.Fatalf("deliveries %+v", er.Deliveries)
			}
			if n := e.writes.n.Load() - w; n != 1 {
				t.Fatalf("binding the ack cost %d DynamoDB write requests, want 1 (one transaction)", n)
			}
			in := e.intent(id)
			if in.Status != core.StatusSucceeded || in.ExternalID != er.Event.Data.MessageID || in.AttemptCount != 1 {
				t.Fatalf("after the ack: %s (%s)", trail(in), in.StatusReason)
			}
			// The episode stays in history: the uncertain attempt, then the evidence.
			if len(in.Attempts) != len(uncertain.Attempts)+1 || in.Attempts[0].Result != core.ResultUnknownOutcome ||
				in.Attempts[len(in.Attempts)-1].Trigger != core.TriggerWebhook {
				t.Fatalf("history: %s", trail(in))
			}
			e.sweep()
			e.assertEffectsStay(id, 1, 500*time.Millisecond)
			if got := e.intent(id); got.Status != core.StatusSucceeded {
				t.Fatalf("moved on to %s", got.Status)
			}
		})
	}
}

func TestWebhookUserMessageReachesTheInboxExactlyOnce(t *testing.T) {
	t.Parallel()
	e := whEnv(t, options{DisableStream: true})
	e.whConfigure("acct-in", whSecret, "")
	w := e.writes.n.Load()
	er := e.whEmit(`{"account":"acct-in","type":"user_message","from":"u-7","target":"chan-1","text":"hello bot","duplicates":2}`)
	if len(er.Deliveries) != 3 || !allOK(er.Deliveries) {
		t.Fatalf("deliveries %+v", er.Deliveries)
	}
	if n := e.writes.n.Load() - w; n != 2 {
		t.Fatalf("forwarding cost %d DynamoDB writes, want 2 (claim, mark)", n)
	}
	// Three deliveries at the same moment: still one.
	er2 := e.whEmit(`{"account":"acct-in","type":"user_message","from":"u-8","text":"again","duplicates":2,"concurrent":true}`)
	if !allOK(lastPerCopy(er2.Deliveries)) {
		t.Fatalf("concurrent deliveries %+v", er2.Deliveries)
	}
	msgs := e.inbox()
	if len(msgs) != 2 {
		t.Fatalf("inbox holds %d messages, want 2: %+v", len(msgs), msgs)
	}
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].EventID == er.Event.Data.EventID })
	if msgs[0].EventID != er.Event.Data.EventID || msgs[0].Provider != "sandbox" || msgs[0].Account != "acct-in" ||
		msgs[0].Type != sandbox.EventReceived || !strings.Contains(string(msgs[0].Event), "hello bot") || msgs[1].EventID != er2.Event.Data.EventID {
		t.Fatalf("inbox %+v", msgs)
	}
}

// lastPerCopy keeps the final attempt of every copy (a copy answered 409
// while another delivery held the claim is retried by the sender).
func lastPerCopy(ds []sandbox.WebhookDelivery) []sandbox.WebhookDelivery {
	last := map[int]sandbox.WebhookDelivery{}
	for _, d := range ds {
		if d.Attempt >= last[d.Copy].Attempt {
			last[d.Copy] = d
		}
	}
	out := []sandbox.WebhookDelivery{}
	for _, d := range last {
		out = append(out, d)
	}
	return out
}

func TestWebhookStatusesOnlyMoveForward(t *testing.T) {
	t.Parallel()
	e := whEnv(t, options{})
	// Statuses come reordered: read, then delivered, then the acknowledgement.
	e.whConfigure("acct-st", whSecret, `"statuses":["delivered","read"],"reorder":true`)
	id := e.mustSubmit("wh-st", intentBody("acct-st", "chan-1", "hi"))
	e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
	if ds := e.whDelivered("acct-st", 3, 10*time.Second); !allOK(ds) {
		t.Fatalf("deliveries %+v", ds)
	}
	e.eventually(5*time.Second, "the read status is bound", func() bool { return core.DeliveryStatus(e.intent(id)) == core.DeliveryRead })
	in := e.intent(id)
	if core.DeliveryStatus(in) != core.DeliveryRead || len(webhookEntries(in)) != 1 {
		t.Fatalf("delivery status %q, entries: %s", core.DeliveryStatus(in), trail(in))
	}
}
