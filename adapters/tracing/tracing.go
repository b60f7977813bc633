// Package tracing implements core.Tracer with the OpenTelemetry Go SDK (one
// trace per intent, issue 30). Spans are exported by OTLP/HTTP only where
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set;
// otherwise the tracer provider is OpenTelemetry's no-op, which still
// propagates the W3C trace context (the intake's traceparent reaches every
// attempt and the provider) at the cost of a few small allocations.
package tracing

import (
	"context"
	"crypto/rand"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/botharness/outbox/core"
)

// Scope is the instrumentation scope of every outbox span.
const Scope = "github.com/botharness/outbox"

var propagator = propagation.TraceContext{}

// Tracer is the core.Tracer over an OpenTelemetry tracer provider.
type Tracer struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
	// Flush exports what is buffered (end of a Lambda invocation); a no-op
	// without an exporter.
	Flush func(ctx context.Context) error
}

var _ core.Tracer = (*Tracer)(nil)

// Enabled reports whether spans are exported (an OTLP endpoint is set).
func Enabled() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// New returns the tracer: exporting by OTLP/HTTP when Enabled, else no-op.
// It installs the W3C trace-context propagator and the provider globally, so
// HTTP provider adapters (adapters/providers/httpx) inject traceparent and
// start their client spans under the attempt's span.
func New(ctx context.Context, service string) (*Tracer, error) {
	otel.SetTextMapPropagator(propagator)
	if !Enabled() {
		tp := noop.NewTracerProvider()
		otel.SetTracerProvider(tp) // replaces an exporting provider an earlier New installed
		return &Tracer{provider: tp, tracer: tp.Tracer(Scope), Flush: func(context.Context) error { return nil }}, nil
	}
	exp, err := otlptracehttp.New(ctx) // endpoint, headers, protocol from OTEL_EXPORTER_OTLP_*
	if err != nil {
		return nil, err
	}
	res := sdkResource(service)
	// In Lambda the process freezes between invocations, so a span must
	// leave before its invocation ends: export each one as it ends (to the
	// collector next to the function). Elsewhere batch in the background.
	proc := sdktrace.WithBatcher(exp)
	if os.Getenv("AWS_LAMBDA_FUNCTION_NAME") != "" {
		proc = sdktrace.WithSyncer(exp)
	}
	tp := sdktrace.NewTracerProvider(proc, sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return &Tracer{provider: tp, tracer: tp.Tracer(Scope), Flush: tp.ForceFlush}, nil
}

// Start starts a span under parent (a W3C traceparent), or under the
// context's span when parent is empty or unreadable.
func (t *Tracer) Start(ctx context.Context, name, parent string, attrs map[string]string) (context.Context, core.Span) {
	if parent != "" {
		if sc := spanContextOf(parent); sc.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	kv := make([]attribute.KeyValue, 0, len(attrs))
	for k, v := range attrs {
		kv = append(kv, attribute.String(k, v))
	}
	ctx, sp := t.tracer.Start(ctx, name, trace.WithAttributes(kv...))
	return ctx, span{sp}
}

// StartServer starts the intake's server span: under the request's
// traceparent when it carries a valid one, else as the root of a new trace
// (with the no-op provider too, so the intent always gets a trace id). It
// returns the span's own traceparent, which the intent stores.
func (t *Tracer) StartServer(ctx context.Context, name, incoming string, attrs map[string]string) (context.Context, core.Span, string) {
	sc := spanContextOf(incoming)
	if !sc.IsValid() {
		sc = newRoot()
	}
	if _, ok := t.provider.(noop.TracerProvider); ok {
		// The no-op provider's span carries its parent's context: give it
		// a span id of its own so attempts hang under the intake.
		sc = sc.WithSpanID(newSpanID())
		ctx = trace.ContextWithSpanContext(ctx, sc)
		return ctx, span{trace.SpanFromContext(ctx)}, TraceParent(ctx)
	}
	ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	kv := make([]attribute.KeyValue, 0, len(attrs))
	for k, v := range attrs {
		kv = append(kv, attribute.String(k, v))
	}
	ctx, sp := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(kv...))
	return ctx, span{sp}, TraceParent(ctx)
}

// TraceParent renders the context's span as a W3C traceparent ("" none).
func TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// TraceID is the trace id of a traceparent ("" when unreadable).
func TraceID(traceParent string) string {
	if sc := spanContextOf(traceParent); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

func spanContextOf(traceParent string) trace.SpanContext {
	if traceParent == "" {
		return trace.SpanContext{}
	}
	ctx := propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceParent})
	return trace.SpanContextFromContext(ctx)
}

func newRoot() trace.SpanContext {
	var tid trace.TraceID
	_, _ = rand.Read(tid[:])
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: newSpanID(), TraceFlags: trace.FlagsSampled})
}

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	_, _ = rand.Read(sid[:])
	return sid
}

type span struct{ s trace.Span }

func (s span) SetOutcome(outcome string) {
	s.s.SetAttributes(attribute.String("outbox.outcome", outcome))
	if outcome != string(core.ResultSucceeded) && outcome != "" {
		s.s.SetStatus(codes.Unset, outcome)
	}
}

func (s span) End() { s.s.End() }
