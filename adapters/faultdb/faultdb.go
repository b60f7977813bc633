// Package faultdb injects DynamoDB errors at the AWS SDK, for fault-injection
// tests: the emulators never throttle, never fail and never lose a response,
// but AWS does all three.
//
// An Injector is a pair of smithy middlewares registered on a client with
// Register (or APIOption in aws.Config.APIOptions):
//
//   - an Initialize middleware, outside the SDK's retry loop, that decides per
//     operation call whether a fault applies (a seeded random schedule, a FIFO
//     script, or per-invocation hooks carried in the context), and that
//     implements the "surfaced" kinds the SDK cannot see or retry;
//   - a Deserialize middleware, innermost, right next to the HTTP transport,
//     that replaces the service's answer with a real-looking error response
//     (HTTP status, JSON `__type`), so the SDK's own deserializer builds the
//     typed error (*types.ProvisionedThroughputExceededException, ...) and its
//     standard retryer treats it exactly as it would an AWS answer.
//
// Kinds (see Kind): throttling before the call (ProvisionedThroughputExceeded,
// Throttling), an internal error before the call (InternalServerError), and
// the uncertain write window of our own store — the request is applied, then
// the response is lost: either as a 500 the SDK sees and retries
// (ResponseLost), or as a dropped connection surfaced to the caller without a
// retry (ResponseLostSurfaced).
package faultdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Kind is an injected fault.
type Kind string

// The fault kinds.
const (
	// ThroughputExceeded answers 400 ProvisionedThroughputExceededException
	// without applying the request.
	ThroughputExceeded Kind = "ProvisionedThroughputExceededException"
	// Throttling answers 400 ThrottlingException without applying the request.
	Throttling Kind = "ThrottlingException"
	// InternalError answers 500 InternalServerError without applying the request.
	InternalError Kind = "InternalServerError"
	// ResponseLost applies the request, then answers 500 InternalServerError
	// instead of the real response: the write happened, the caller (and the
	// SDK's retryer, which may resend it) cannot know.
	ResponseLost Kind = "ResponseLost"
	// ResponseLostSurfaced applies the request, then returns a transport
	// error to the caller without letting the SDK retry (a connection that
	// died after the server committed, on a client whose retries are spent).
	ResponseLostSurfaced Kind = "ResponseLostSurfaced"
)

// AllKinds lists every kind.
var AllKinds = []Kind{ThroughputExceeded, Throttling, InternalError, ResponseLost, ResponseLostSurfaced}

// ErrConnectionLost is what ResponseLostSurfaced returns (wrapped).
var ErrConnectionLost = errors.New("faultdb: connection lost after the request was sent")

// Call describes one operation call (one SDK method call, all its retries).
type Call struct {
	Operation string // "PutItem", "GetItem", ...
	Input     any    // *dynamodb.PutItemInput, ...
}

// IsWrite reports whether the call writes.
func (c Call) IsWrite() bool {
	switch c.Operation {
	case "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem":
		return true
	}
	return false
}

// Fault is one scripted fault.
type Fault struct {
	Kind Kind
	// Ops restricts the fault to these operations (empty: any).
	Ops []string
	// Match further restricts it (nil: any call of Ops).
	Match func(Call) bool
	// Attempts is how many consecutive HTTP attempts of the call the fault
	// hits (default 1). The SDK's standard retryer makes 3 attempts, so 1
	// models a blip the SDK absorbs and >= 3 an error the caller sees.
	// Surfaced kinds ignore it.
	Attempts int
}

func (f *Fault) matches(c Call) bool {
	if len(f.Ops) > 0 && !slices.Contains(f.Ops, c.Operation) {
		return false
	}
	return f.Match == nil || f.Match(c)
}

// Hook observes and may fail calls made under a context (see WithHook). It
// models per-invocation events such as a process crash at a chosen step.
type Hook interface {
	// Before runs before the call; a non-nil error fails the call without
	// sending it.
	Before(ctx context.Context, c Call) error
	// After runs after the call with its result; the returned error replaces
	// the result's error (return err to keep it).
	After(ctx context.Context, c Call, err error) error
}

type hookKey struct{}

// WithHook returns a context whose calls (through any Injector) run h.
func WithHook(ctx context.Context, h Hook) context.Context {
	return context.WithValue(ctx, hookKey{}, h)
}

// Injected is one fault that was applied.
type Injected struct {
	Kind      Kind
	Operation string
}

// Injector decides and applies faults. The zero value is not usable; use New.
type Injector struct {
	mu      sync.Mutex
	rng     *rand.Rand
	enabled bool
	rate    float64
	kinds   []Kind
	ops     []string
	retries int // Attempts for random faults
	script  []*Fault
	counts  map[Kind]int
	log     []Injected
}

// New returns an enabled injector with no faults; seed drives its random schedule.
func New(seed uint64) *Injector {
	return &Injector{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), enabled: true, counts: map[Kind]int{}}
}

// Register adds the middlewares to every client built from cfg.
func (i *Injector) Register(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, i.APIOption)
}

// SetEnabled turns all injection (random, scripted, hooks) on or off.
func (i *Injector) SetEnabled(on bool) {
	i.mu.Lock()
	i.enabled = on
	i.mu.Unlock()
}

// SetRandom makes each call matching ops (empty: any) fail with probability
// rate, with a kind drawn uniformly from kinds, hitting `attempts` HTTP
// attempts (see Fault.Attempts). rate 0 turns random faults off.
func (i *Injector) SetRandom(rate float64, attempts int, ops []string, kinds ...Kind) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.rate, i.kinds, i.ops, i.retries = rate, slices.Clone(kinds), slices.Clone(ops), attempts
}

// Add queues scripted faults; each applies once, to the first call it matches.
func (i *Injector) Add(faults ...Fault) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, f := range faults {
		f := f
		i.script = append(i.script, &f)
	}
}

// Pending returns how many scripted faults have not applied yet.
func (i *Injector) Pending() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.script)
}

// Clear drops scripted faults and turns random faults off.
func (i *Injector) Clear() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.script, i.rate = nil, 0
}

// Counts returns how many faults of each kind were applied.
func (i *Injector) Counts() map[Kind]int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return maps.Clone(i.counts)
}

// Log returns the applied faults in order.
func (i *Injector) Log() []Injected {
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.log)
}

// decide picks the fault for a call, if any.
func (i *Injector) decide(c Call) *Fault {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.enabled {
		return nil
	}
	for n, f := range i.script {
		if f.matches(c) {
			i.script = slices.Delete(i.script, n, n+1)
			return f
		}
	}
	if i.rate > 0 && len(i.kinds) > 0 && (len(i.ops) == 0 || slices.Contains(i.ops, c.Operation)) && i.rng.Float64() < i.rate {
		return &Fault{Kind: i.kinds[i.rng.IntN(len(i.kinds))], Attempts: i.retries}
	}
	return nil
}

func (i *Injector) hooksOn() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.enabled
}

func (i *Injector) record(k Kind, op string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.counts[k]++
	i.log = append(i.log, Injected{Kind: k, Operation: op})
}

// pendingFault travels in the context from the Initialize middleware to the
// Deserialize one; it counts the HTTP attempts it still applies to.
type pendingFault struct {
	kind Kind
	left int
}

type pendingKey struct{ i *Injector } // per injector: two may share a client

// APIOption installs the injector on a client's middleware stack.
func (i *Injector) APIOption(stack *middleware.Stack) error {
	// IDs are per injector, so two injectors can share a client.
	if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc(fmt.Sprintf("faultdb.decide.%p", i), i.handleInitialize), middleware.Before); err != nil {
		return err
	}
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc(fmt.Sprintf("faultdb.apply.%p", i), i.handleDeserialize), middleware.After)
}

func (i *Injector) handleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	c := Call{Operation: middleware.GetOperationName(ctx), Input: in.Parameters}
	h, _ := ctx.Value(hookKey{}).(Hook)
	if h != nil && i.hooksOn() {
		if err := h.Before(ctx, c); err != nil {
			return middleware.InitializeOutput{}, middleware.Metadata{}, err
		}
	}
	f := i.decide(c)
	if f != nil && f.Kind != ResponseLostSurfaced {
		ctx = context.WithValue(ctx, pendingKey{i}, &pendingFault{kind: f.Kind, left: max(f.Attempts, 1)})
	}
	out, md, err := next.HandleInitialize(ctx, in)
	if f != nil && f.Kind == ResponseLostSurfaced && err == nil {
		i.record(f.Kind, c.Operation)
		out = middleware.InitializeOutput{}
		err = fmt.Errorf("%s: %w", c.Operation, ErrConnectionLost)
	}
	if h != nil && i.hooksOn() {
		err = h.After(ctx, c, err)
	}
	return out, md, err
}

func (i *Injector) handleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	pf, _ := ctx.Value(pendingKey{i}).(*pendingFault)
	if pf == nil || pf.left <= 0 {
		return next.HandleDeserialize(ctx, in)
	}
	pf.left--
	op := middleware.GetOperationName(ctx)
	i.record(pf.kind, op)
	switch pf.kind {
	case ResponseLost:
		out, md, err := next.HandleDeserialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		if r, ok := out.RawResponse.(*smithyhttp.Response); ok && r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
			_ = r.Body.Close()
		}
		out.RawResponse = errorResponse(http.StatusInternalServerError, "InternalServerError", "faultdb: response lost after the request was applied")
		return out, md, nil
	case InternalError:
		return middleware.DeserializeOutput{RawResponse: errorResponse(http.StatusInternalServerError, "InternalServerError", "faultdb: injected internal error")}, middleware.Metadata{}, nil
	default:
		return middleware.DeserializeOutput{RawResponse: errorResponse(http.StatusBadRequest, string(pf.kind), "faultdb: injected "+string(pf.kind))}, middleware.Metadata{}, nil
	}
}

// errorResponse is an AWS JSON 1.0 error answer as DynamoDB sends it.
func errorResponse(status int, code, msg string) *smithyhttp.Response {
	body := fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, code, msg)
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amzn-Requestid", "faultdb")
	return &smithyhttp.Response{Response: &http.Response{
		StatusCode:    status,
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader([]byte(body))),
		ContentLength: int64(len(body)),
		Proto:         "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}}
}
