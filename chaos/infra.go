package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/faultdb"
	"github.com/botharness/outbox/adapters/sqsqueue"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/clocktest"
)

// Clock is a schedule's fake clock. It moves forward only when told, and
// every reading is one nanosecond later than the previous one, so readings
// order events totally (a transition's time against a provider request's).
type Clock = clocktest.Clock

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return clocktest.Ticking(t.UTC(), time.Nanosecond) }

// --- the sandbox, observed -------------------------------------------------

// arrival is one provider request the sandbox received.
type arrival struct {
	Key     string
	Account string
	At      time.Time
}

// sandboxFront wraps the sandbox handler: it records every send request's
// arrival (for invariant (e)) and counts requests being served.
type sandboxFront struct {
	next   http.Handler
	clock  *Clock
	active atomic.Int64

	mu       sync.Mutex
	arrivals []arrival
}

func (f *sandboxFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.active.Add(1)
	defer f.active.Add(-1)
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/accounts/") && strings.HasSuffix(r.URL.Path, "/messages") {
		acct := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/accounts/"), "/messages")
		f.mu.Lock()
		f.arrivals = append(f.arrivals, arrival{Key: r.Header.Get("Idempotency-Key"), Account: acct, At: f.clock.Now()})
		f.mu.Unlock()
	}
	f.next.ServeHTTP(w, r)
}

func (f *sandboxFront) arrivalsFor(key string) []arrival {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []arrival
	for _, a := range f.arrivals {
		if a.Key == key {
			out = append(out, a)
		}
	}
	return out
}

// --- crashes and stalls ----------------------------------------------------

// errCrashed is what every outside call of a crashed "process" returns.
var errCrashed = errors.New("chaos: the process crashed")

// crashAt names where an invocation dies.
type crashAt int

const (
	// crashAfterWrites: after the k-th successful DynamoDB write of the
	// invocation (k=1: after the claim / lease-expiry / reconcile write,
	// before the provider call or the queue send; k=2: after the outcome
	// write, before the queue send).
	crashAfterWrites crashAt = iota + 1
	// crashAfterSend: the provider answered the send, the process died before
	// it could read the answer (so before the outcome write).
	crashAfterSend
	// stallAfterSend: the provider answered; the process pauses (GC, freeze)
	// before the outcome write until released. Not a crash.
	stallAfterSend
)

// plan is a per-invocation crash or stall. It travels in the context: the
// DynamoDB middleware (faultdb hook), the provider HTTP transport and the
// retry queue all consult it.
type plan struct {
	at     crashAt
	k      int
	cancel context.CancelFunc

	mu        sync.Mutex
	writes    int
	dead      bool
	fired     string
	stallOnce sync.Once
	stalled   chan struct{} // closed when the stall begins
	release   chan struct{} // closed to end the stall
}

type planKey struct{}

func newPlan(at crashAt, k int) *plan {
	return &plan{at: at, k: k, stalled: make(chan struct{}), release: make(chan struct{})}
}

func planOf(ctx context.Context) *plan {
	p, _ := ctx.Value(planKey{}).(*plan)
	return p
}

// attach returns a context carrying p, cancelled when the process dies.
func (p *plan) attach(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	ctx = context.WithValue(ctx, planKey{}, p)
	return faultdb.WithHook(ctx, p), cancel
}

func (p *plan) isDead() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

func (p *plan) die(where string) {
	p.mu.Lock()
	if !p.dead {
		p.dead, p.fired = true, where
	}
	p.mu.Unlock()
	if p.cancel != nil {
		p.cancel()
	}
}

func (p *plan) firedAt() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fired
}

// Before implements faultdb.Hook.
func (p *plan) Before(_ context.Context, _ faultdb.Call) error {
	if p.isDead() {
		return errCrashed
	}
	return nil
}

// After implements faultdb.Hook.
func (p *plan) After(_ context.Context, c faultdb.Call, err error) error {
	if err == nil && c.IsWrite() && p.at == crashAfterWrites {
		p.mu.Lock()
		p.writes++
		hit := p.writes == p.k
		p.mu.Unlock()
		if hit {
			p.die(fmt.Sprintf("after write %d (%s)", p.k, writeStatus(c)))
		}
	}
	return err
}

func writeStatus(c faultdb.Call) string {
	if in, ok := c.Input.(*dynamodb.PutItemInput); ok {
		if s, ok := in.Item["status"].(*types.AttributeValueMemberS); ok {
			return s.Value
		}
	}
	return c.Operation
}

// transport is a worker's provider HTTP transport: keep-alive (so net/http's
// hidden replays would show up as extra effects), honouring crash plans.
type transport struct {
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	p := planOf(req.Context())
	if p.isDead() {
		return nil, errCrashed
	}
	resp, err := t.base.RoundTrip(req)
	if p == nil || err != nil || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/messages") {
		return resp, err
	}
	switch p.at {
	case crashAfterSend:
		resp.Body.Close()
		p.die("after the provider answered the send")
		return nil, errCrashed
	case stallAfterSend:
		p.mu.Lock()
		p.fired = "stalled after the provider answered"
		p.mu.Unlock()
		p.stallOnce.Do(func() { close(p.stalled) })
		<-p.release
	}
	return resp, err
}

// --- the retry queue --------------------------------------------------------

// queued is one retry-queue message.
type queued struct {
	ID   int
	Msg  core.RetryMessage
	Due  time.Time
	Body string
}

// mailbox plays the SQS retry queue with SQS's semantics (at-least-once,
// unordered, DelaySeconds rounded up to whole seconds and capped at 900 s,
// failed messages come back), driven by the schedule instead of a poller so
// deliveries can be duplicated, reordered and replayed when stale.
type mailbox struct {
	clock *Clock
	mu    sync.Mutex
	next  int
	q     []queued
	done  []queued // delivered and deleted (for stale replays)
	fail  map[int]int
	sent  int
}

func newMailbox(c *Clock) *mailbox { return &mailbox{clock: c, fail: map[int]int{}} }

// failNext makes the next n enqueues by worker w fail (a lost send).
func (m *mailbox) failNext(w, n int) {
	m.mu.Lock()
	m.fail[w] += n
	m.mu.Unlock()
}

func (m *mailbox) enqueue(ctx context.Context, w int, msg core.RetryMessage, delay time.Duration) error {
	if planOf(ctx).isDead() {
		return errCrashed
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail[w] > 0 {
		m.fail[w]--
		return errors.New("chaos: SendMessage failed (injected)")
	}
	body, _ := json.Marshal(msg)
	m.next++
	m.sent++
	due := m.clock.Now().Add(time.Duration(sqsqueue.DelaySeconds(delay)) * time.Second)
	m.q = append(m.q, queued{ID: m.next, Msg: msg, Due: due, Body: string(body)})
	return nil
}

// take removes and returns the messages due now (all when all is set).
func (m *mailbox) take(all bool) []queued {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out, keep []queued
	for _, q := range m.q {
		if all || !now.Before(q.Due) {
			out = append(out, q)
		} else {
			keep = append(keep, q)
		}
	}
	m.q = keep
	return out
}

// putBack returns messages that failed (visibility timeout expiry).
func (m *mailbox) putBack(qs ...queued) {
	m.mu.Lock()
	m.q = append(m.q, qs...)
	m.mu.Unlock()
}

func (m *mailbox) deleted(qs ...queued) {
	m.mu.Lock()
	m.done = append(m.done, qs...)
	m.mu.Unlock()
}

func (m *mailbox) stale(n int, pick func(int) int) []queued {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []queued
	for i := 0; i < n && len(m.done) > 0; i++ {
		out = append(out, m.done[pick(len(m.done))])
	}
	return out
}

func (m *mailbox) pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.q)
}

func (m *mailbox) earliestDue() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var t time.Time
	for i, q := range m.q {
		if i == 0 || q.Due.Before(t) {
			t = q.Due
		}
	}
	return t, len(m.q) > 0
}

// workerQueue is core.RetryQueue for one worker.
type workerQueue struct {
	m *mailbox
	w int
}

func (q workerQueue) Enqueue(ctx context.Context, msg core.RetryMessage, delay time.Duration) error {
	return q.m.enqueue(ctx, q.w, msg, delay)
}

func sqsEvent(qs []queued) events.SQSEvent {
	ev := events.SQSEvent{}
	for _, q := range qs {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m-%d", q.ID), Body: q.Body, EventSource: "aws:sqs"})
	}
	return ev
}

// --- stream images -> intents ---------------------------------------------

// imageIntent decodes a stream record's new image (nil for a removal or a non-intent item).
func imageIntent(r events.DynamoDBEventRecord) (*core.Intent, error) {
	img := r.Change.NewImage
	if img == nil {
		return nil, nil
	}
	if sk, ok := img["sk"]; !ok || sk.DataType() != events.DataTypeString || sk.String() != "INTENT" {
		return nil, nil
	}
	// History entries are flat (no empty maps, which DynamoDB Local's stream
	// images garble), so the image decodes as stored (as the notifier and
	// pruner read it).
	return dynamo.IntentFromImage(img)
}

type dynamoAV = types.AttributeValue

func strAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
