package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/client"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
	"github.com/botharness/outbox/sandbox"
)

// DynamoDB's item size limit.
const maxItemBytes = 400 * 1024

func (e *env) intentItemBytes(id string) int {
	e.t.Helper()
	out, err := e.clients.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(e.table), Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: dynamo.IntentPK(id)}, "sk": &types.AttributeValueMemberS{Value: "INTENT"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil || len(out.Item) == 0 {
		e.t.Fatalf("read item %s: %v", id, err)
	}
	// Numbers counted generously: the bound this checks is an overestimate.
	return dynamo.ItemSize(out.Item, dynamo.NumberBytesGenerous)
}

// largeBody is an intent request of exactly core.MaxBodyBytes bytes.
func largeBody(account, target string) string {
	b := intentBody(account, target, "")
	return intentBody(account, target, strings.Repeat("L", core.MaxBodyBytes-len(b)))
}

func (e *env) payloadObject(ref string) []byte {
	e.t.Helper()
	out, err := e.clients.S3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("outbox-payloads"), Key: aws.String(ref)})
	if err != nil {
		e.t.Fatalf("payload object %s: %v", ref, err)
	}
	defer out.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(out.Body)
	return buf.Bytes()
}

// A payload of the maximum size goes to S3 under its content hash; the
// item keeps the reference, stays small, and the provider receives exactly
// the accepted bytes.
func TestLargePayloadGoesThroughTheClaimCheck(t *testing.T) {
	t.Parallel()
	sbox := sandbox.New(time.Now)
	rec := &bodyRecorder{h: sbox, bodies: map[string][]byte{}}
	ts := httptest.NewServer(rec)
	t.Cleanup(func() { sbox.Close(); ts.Close() })
	e := startEnv(t, options{}, sbox, ts.URL)
	const acct = "acct-large"
	e.faults(fmt.Sprintf(`{"account":%q,"capabilities":{"lookup":true}}`, acct))
	body := largeBody(acct, "chan-1")
	if len(body) != core.MaxBodyBytes {
		t.Fatalf("body is %d bytes", len(body))
	}
	id := e.mustSubmit("large-1", body)
	in := e.waitStatus(id, 15*time.Second, core.StatusSucceeded)
	if in.PayloadRef == "" || len(in.Payload) != 0 {
		t.Fatalf("payload stayed inline (ref %q, %d inline bytes)", in.PayloadRef, len(in.Payload))
	}
	obj := e.payloadObject(in.PayloadRef)
	if err := core.VerifyPayload(in.PayloadHash, obj); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(obj)
	if !strings.HasSuffix(in.PayloadRef, hex.EncodeToString(sum[:])) {
		t.Fatalf("ref %s is not the content address", in.PayloadRef)
	}
	if n := e.intentItemBytes(id); n > 8<<10 {
		t.Fatalf("delivered intent item is %d bytes with its payload in S3", n)
	}
	if n := e.effectsFor(id); n != 1 {
		t.Fatalf("%d effects", n)
	}
	// What the provider received is the accepted payload, byte for byte.
	rec.mu.Lock()
	sent := rec.bodies[id]
	rec.mu.Unlock()
	var sb struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(sent, &sb); err != nil {
		t.Fatalf("the provider's request body: %v", err)
	}
	canon, err := core.Canonicalize(sb.Payload)
	if err != nil || core.HashBytes(canon) != in.PayloadHash {
		t.Fatalf("the provider received a payload hashing to %s, want %s", core.HashBytes(canon), in.PayloadHash)
	}
}

// bodyRecorder keeps the body of every send the sandbox receives, by the
// intent id it carries (what the provider really got over HTTP).
type bodyRecorder struct {
	h      http.Handler
	mu     sync.Mutex
	bodies map[string][]byte
}

func (b *bodyRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages") {
		body, _ := io.ReadAll(r.Body)
		var v struct {
			IntentID string `json:"intentId"`
		}
		_ = json.Unmarshal(body, &v)
		b.mu.Lock()
		b.bodies[v.IntentID] = body
		b.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	b.h.ServeHTTP(w, r)
}

// A payload object changed after intake is never sent: the intent goes to
// a human with the mismatch as evidence.
func TestTamperedPayloadIsNeverSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{DisableStream: true})
	id := e.mustSubmit("tamper-1", largeBody("acct-tamper", "chan-1"))
	in := e.intent(id)
	if in.PayloadRef == "" {
		t.Fatal("payload stayed inline")
	}
	obj := e.payloadObject(in.PayloadRef)
	evil := bytes.Replace(obj, []byte("LLLL"), []byte("EVIL"), 1)
	if _, err := e.clients.S3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("outbox-payloads"),
		Key: aws.String(in.PayloadRef), Body: bytes.NewReader(evil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.App.Dispatcher.Attempt(context.Background(), core.AttemptRequest{ID: id, Trigger: "test"}); err != nil {
		t.Fatal(err)
	}
	got := e.waitStatus(id, 5*time.Second, core.StatusNeedsHuman)
	e.assertEffectsStay(id, 0, 300*time.Millisecond)
	last := got.Attempts[len(got.Attempts)-1]
	if !strings.Contains(last.Evidence.Detail, in.PayloadHash) || !strings.Contains(last.Evidence.Detail, "does not match") {
		t.Fatalf("evidence does not show the mismatch: %q", last.Evidence.Detail)
	}
}

// The maximum payload plus as many recommendations and decisions as the API
// takes, then provider webhook entries: every write succeeds, the item stays
// under DynamoDB's limit, and the whole history reads back in order.
func TestItemStaysBoundedUnderMaximalHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	const acct = "acct-bounded"
	e.faults(fmt.Sprintf(`{"account":%q,"capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"}]}`, acct))
	id := e.mustSubmit("bounded-1", largeBody(acct, "chan-1"))
	e.waitStatus(id, 10*time.Second, core.StatusNeedsHuman)
	summary := strings.Repeat("s", core.FieldLimits["summary"])
	reason := strings.Repeat("r", core.FieldLimits["reason"])
	maxSeen := 0
	check := func(what string, r response) {
		t.Helper()
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", what, r.status, r.body)
		}
		if n := e.intentItemBytes(id); n > maxSeen {
			maxSeen = n
		}
		if maxSeen >= maxItemBytes {
			t.Fatalf("%s: item is %d bytes", what, maxSeen)
		}
	}
	const rounds = core.MaxInlineResolutions + 1 // one past both inline caps (24 each), so history pages are written
	for i := 0; i < rounds; i++ {
		for j := 0; j < 2; j++ {
			check(fmt.Sprintf("recommendation %d.%d", i, j), e.do("POST", "/v1/admin/intents/"+id+"/recommendation", orchToken, nil,
				fmt.Sprintf(`{"decision":"abandon","summary":%q}`, summary)))
		}
		// Reconcile with a provider that cannot tell: back to needs-human,
		// one more attempt entry and one more decision.
		check(fmt.Sprintf("decision %d", i), e.resolve(opToken, id, fmt.Sprintf("dec-%d", i), fmt.Sprintf(`{"decision":"reconcile","reason":%q}`, reason)))
		e.waitStatus(id, 5*time.Second, core.StatusNeedsHuman)
	}
	// The first decision's resolution has moved to a history page; a replay
	// of its request is still recognised (200, nothing decided again).
	moved := e.intent(id)
	if moved.History == nil || moved.History.SpilledResolutions == 0 || moved.Resolutions[0].Key == "dec-0" {
		t.Fatalf("the first decision is still inline (history %+v)", moved.History)
	}
	check("replay of a moved decision", e.resolve(opToken, id, "dec-0", fmt.Sprintf(`{"decision":"reconcile","reason":%q}`, reason)))
	if again := e.intent(id); again.Version != moved.Version || len(again.Resolutions) != len(moved.Resolutions) || again.AttemptCount != moved.AttemptCount {
		t.Fatalf("the replay of a moved decision decided again: v%d -> v%d, %d -> %d attempts", moved.Version, again.Version, moved.AttemptCount, again.AttemptCount)
	}
	// Provider webhook entries: an acknowledgement, then statuses about other
	// message ids (each one is recorded as a mismatch).
	whs := dynamo.NewWebhooks(e.clients.DynamoDB, e.table)
	whs.Shards = e.st.App.Config.Sharding
	wh := &webhook.Webhooks{Store: whs, Intents: e.st.App.Store, Clock: core.SystemClock, Log: slog.New(slog.DiscardHandler)}
	for i := 0; i < 30; i++ {
		ev := webhook.ProviderEvent{Provider: "sandbox", Account: acct, EventID: fmt.Sprintf("ev-%d", i), Kind: webhook.EventStatus,
			Status: core.DeliveryDelivered, MessageID: fmt.Sprintf("m-%d", i), IntentID: id, Type: "message.status"}
		if i == 0 {
			ev.Kind = webhook.EventAck
		}
		if _, err := wh.Handle(context.Background(), ev); err != nil {
			t.Fatalf("webhook %d: %v", i, err)
		}
		check(fmt.Sprintf("webhook %d", i), response{status: http.StatusOK})
	}
	in, attempts, resolutions, err := e.st.App.Store.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if in.History == nil || in.History.Pages == 0 {
		t.Fatal("no history page was written: the caps were never reached")
	}
	if len(resolutions) != rounds*3 {
		t.Fatalf("%d resolutions in the whole history, want %d", len(resolutions), rounds*3)
	}
	for i := 1; i < len(resolutions); i++ {
		if resolutions[i].At.Before(resolutions[i-1].At) {
			t.Fatalf("resolution %d out of order", i)
		}
	}
	for i := 1; i < len(attempts); i++ {
		if attempts[i].EndedAt.Before(attempts[i-1].EndedAt) {
			t.Fatalf("attempt entry %d out of order", i)
		}
	}
	if in.Status != core.StatusSucceeded {
		t.Fatalf("the acknowledgement did not resolve it: %s", in.Status)
	}
	// The API serves the same whole history, in order, slice by slice (read
	// with the Go client): to the intent's bot and to operators; another bot
	// sees no such intent.
	reads := map[string]func(cursor string) (*client.HistorySlice, error){
		"bot": func(c string) (*client.HistorySlice, error) {
			return client.New(e.api.URL, botToken).History(context.Background(), id, c)
		},
		"operator": func(c string) (*client.HistorySlice, error) {
			return client.New(e.api.URL, opToken).Admin().History(context.Background(), id, c)
		},
	}
	for who, read := range reads {
		var as []client.Attempt
		var rs []client.Resolution
		cursor, slices := "", 0
		for {
			s, err := read(cursor)
			if err != nil || s.IntentID != id {
				t.Fatalf("%s: history slice %d: %+v %v", who, slices+1, s, err)
			}
			as, rs, slices = append(as, s.Attempts...), append(rs, s.Resolutions...), slices+1
			if cursor = s.NextCursor; cursor == "" {
				break
			}
		}
		if slices != in.History.Pages+1 || len(as) != len(attempts) || len(rs) != len(resolutions) {
			t.Fatalf("%s: %d slices, %d attempts, %d resolutions; want %d, %d, %d", who, slices, len(as), len(rs), in.History.Pages+1, len(attempts), len(resolutions))
		}
		for i := range rs {
			if !rs[i].At.Equal(resolutions[i].At) || rs[i].Decision != resolutions[i].Decision || rs[i].Reason != resolutions[i].Reason {
				t.Fatalf("%s: resolution %d differs from the stored history", who, i)
			}
		}
		for i := range as {
			if as[i].N != attempts[i].N || as[i].Result != string(attempts[i].Result) || !as[i].EndedAt.Equal(attempts[i].EndedAt) {
				t.Fatalf("%s: attempt entry %d differs from the stored history", who, i)
			}
		}
	}
	if r := e.do("GET", "/v1/intents/"+id+"/history", bot2Token, nil, ""); r.status != http.StatusNotFound {
		t.Fatalf("another bot reads the history: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/intents/"+id+"/history?cursor=99", botToken, nil, ""); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"cursor"`) {
		t.Fatalf("a cursor never handed out: %d %s", r.status, r.body)
	}
	t.Logf("largest item seen: %d bytes; %d attempt entries, %d resolutions, %d pages", maxSeen, len(attempts), len(resolutions), in.History.Pages)
}

// An over-long reason is refused with 400 naming the field; nothing changes.
func TestOverLongReasonIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id := needsHuman(t, e, "acct-long", "long-1")
	before := e.intent(id)
	r := e.resolve(opToken, id, "long-dec", fmt.Sprintf(`{"decision":"abandon","reason":%q}`, strings.Repeat("x", core.FieldLimits["reason"]+1)))
	var b struct {
		Error struct {
			Code  string `json:"code"`
			Field string `json:"field"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &b)
	if r.status != http.StatusBadRequest || b.Error.Code != core.CodeInvalidField || b.Error.Field != "reason" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	after := e.intent(id)
	if after.Version != before.Version || after.Status != core.StatusNeedsHuman || len(after.Resolutions) != len(before.Resolutions) {
		t.Fatalf("a refused decision changed the intent: v%d -> v%d", before.Version, after.Version)
	}
}
