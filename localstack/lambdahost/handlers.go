package lambdahost

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// HTTPHandler is the signature of an API Gateway HTTP API Lambda handler
// (payload format version 2.0).
type HTTPHandler func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Authorizer is the signature of an HTTP API Lambda REQUEST authorizer with
// simple responses enabled.
type Authorizer func(ctx context.Context, req events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error)

// StreamHandler is the signature of a DynamoDB Streams Lambda handler that
// reports batch item failures.
type StreamHandler func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// SQSHandler is the signature of an SQS Lambda handler that reports batch item
// failures.
type SQSHandler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// ScheduledHandler is the signature of an EventBridge-scheduled Lambda handler.
type ScheduledHandler func(ctx context.Context, ev events.EventBridgeEvent) error

// Defaults shared by the emulated services.
const (
	DefaultRegion    = "us-east-1"
	DefaultAccountID = "000000000000"
	// DefaultFunctionTimeout is the deadline put on the context of every
	// handler invocation unless configured otherwise.
	DefaultFunctionTimeout = 30 * time.Second
	// LambdaSyncPayloadLimit is Lambda's synchronous invocation payload limit
	// in bytes (6 MB; requests and responses).
	LambdaSyncPayloadLimit = 6 * 1024 * 1024
)

// PanicError is returned (and logged) when a handler panics; Lambda reports a
// panic as a function error, and so do we.
type PanicError struct {
	Value any
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panic: %v", e.Value) }

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func loggerOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

// newID returns a random identifier formatted like a UUID.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// newAPIGWRequestID returns an ID shaped like API Gateway's (e.g. "JwWt3j8xoAMEMuA=").
func newAPIGWRequestID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}

func functionArn(region, account, name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", region, account, name)
}

// invocationContext derives the context a handler runs with: it carries a
// lambdacontext.LambdaContext (AwsRequestID, InvokedFunctionArn) and the
// function timeout as its deadline. Like Lambda, it is not cancelled when the
// caller goes away (an HTTP client disconnecting does not stop a function).
func invocationContext(parent context.Context, timeout time.Duration, fnArn string) (context.Context, context.CancelFunc, string) {
	reqID := newID()
	ctx := context.WithoutCancel(parent)
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: reqID, InvokedFunctionArn: fnArn})
	ctx, cancel := context.WithTimeout(ctx, orDefault(timeout, DefaultFunctionTimeout))
	return ctx, cancel, reqID
}

// roundTrip sends v through JSON, as the Lambda service does between the
// event source and the function. It also reports the encoded size.
func roundTrip[T any](v T) (T, int, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, 0, fmt.Errorf("encode: %w", err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, len(b), fmt.Errorf("decode: %w", err)
	}
	return out, len(b), nil
}

// callSafely runs f, converting a panic into a *PanicError.
func callSafely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r}
		}
	}()
	return f()
}

// sleepCtx waits for d or until ctx is done; it reports whether the full
// duration elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// invokeWithin runs handler in the background under the function's deadline
// (a panic becomes the error) and waits at most wait for it: timedOut when
// wait passed first. The handler then keeps running until its own deadline,
// as in AWS. invID names the invocation.
func invokeWithin[E, R any](parent context.Context, timeout time.Duration, fnArn string, wait time.Duration, ev E, handler func(context.Context, E) (R, error)) (resp R, invID string, timedOut bool, err error) {
	type result struct {
		resp R
		err  error
	}
	done := make(chan result, 1)
	ctx, cancel, invID := invocationContext(parent, timeout, fnArn)
	go func() {
		defer cancel()
		var res result
		res.err = callSafely(func() error {
			var err error
			res.resp, err = handler(ctx, ev)
			return err
		})
		done <- res
	}()
	select {
	case res := <-done:
		return res.resp, invID, false, res.err
	case <-time.After(wait):
		return resp, invID, true, nil
	}
}

// invokeBatch invokes a batch handler as the Lambda service does: the event
// and the answer pass through JSON, and the handler runs under the
// function's deadline with a panic turned into an error.
func invokeBatch[E, R any](ctx context.Context, timeout time.Duration, fnArn string, in E, handler func(context.Context, E) (R, error)) (R, error) {
	ev, _, err := roundTrip(in)
	if err != nil {
		var zero R
		return zero, err
	}
	ictx, cancel, _ := invocationContext(ctx, timeout, fnArn)
	defer cancel()
	var resp R
	err = callSafely(func() error {
		var err error
		resp, err = handler(ictx, ev)
		return err
	})
	if err != nil {
		return resp, err
	}
	resp, _, err = roundTrip(resp)
	return resp, err
}
