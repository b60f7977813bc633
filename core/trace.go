package core

import "context"

// Tracing (issue 30): one trace per intent. The intake stores the W3C
// traceparent of its span with the intent (Intent.TraceParent, an attribute
// of the intent item: no extra write); every attempt, reconciliation and
// webhook binding continues that trace, and HTTP provider adapters send it
// on. core names only this port; adapters/tracing implements it with the
// OpenTelemetry SDK (a no-op unless OTEL_EXPORTER_OTLP_ENDPOINT is set).

// Tracer starts spans. parent is a W3C traceparent ("" continues the
// context's span, or starts a new trace); attrs are span attributes.
type Tracer interface {
	Start(ctx context.Context, name, parent string, attrs map[string]string) (context.Context, Span)
}

// Span is a started span.
type Span interface {
	// SetOutcome records the span's outcome (an attempt result, a status).
	SetOutcome(outcome string)
	End()
}

type traceParentKey struct{}

// WithTraceParent carries a W3C traceparent to the intake, which stores it
// with a new intent.
func WithTraceParent(ctx context.Context, tp string) context.Context {
	return context.WithValue(ctx, traceParentKey{}, tp)
}

// traceParentOf is the traceparent WithTraceParent carried ("" none).
func traceParentOf(ctx context.Context) string {
	tp, _ := ctx.Value(traceParentKey{}).(string)
	return tp
}

type spanKey struct{}

type noSpan struct{}

func (noSpan) SetOutcome(string) {}
func (noSpan) End()              {}

// startSpan starts a span with t (nil: none) and keeps it in the context,
// so the code that learns the outcome can record it (spanOf).
func startSpan(ctx context.Context, t Tracer, name, parent string, attrs map[string]string) (context.Context, Span) {
	if t == nil {
		return ctx, noSpan{}
	}
	ctx, sp := t.Start(ctx, name, parent, attrs)
	return context.WithValue(ctx, spanKey{}, sp), sp
}

func spanOf(ctx context.Context) Span {
	if sp, ok := ctx.Value(spanKey{}).(Span); ok {
		return sp
	}
	return noSpan{}
}

// IntentSpanAttrs are the attributes every span of an intent carries.
func IntentSpanAttrs(in *Intent) map[string]string {
	return map[string]string{"outbox.intent_id": in.ID, "outbox.bot": in.Bot, "outbox.provider": in.Provider,
		"outbox.account": in.Account, "outbox.action": in.Action}
}
