package tracing

import (
	"context"
	"strings"
	"testing"
)

// Without an OTLP endpoint the tracer exports nothing but still continues
// the request's trace, or starts one: the intent always gets a traceparent.
func TestNoopTracerStillPropagatesTheTrace(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tr, err := New(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	const in = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, sp, tp := tr.StartServer(context.Background(), "outbox.intake", in, nil)
	sp.End()
	if TraceID(tp) != "4bf92f3577b34da6a3ce929d0e0e4736" || tp == in {
		t.Fatalf("continued traceparent %q: want the same trace with the intake's own span id", tp)
	}
	actx, asp := tr.Start(context.Background(), "outbox.attempt", tp, map[string]string{"outbox.intent_id": "i1"})
	asp.SetOutcome("succeeded")
	asp.End()
	if got := TraceParent(actx); TraceID(got) != TraceID(tp) {
		t.Fatalf("attempt traceparent %q, want trace of %q", got, tp)
	}
	_ = ctx
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		_, _, root := tr.StartServer(context.Background(), "outbox.intake", bad, nil)
		if len(root) != 55 || !strings.HasPrefix(root, "00-") || TraceID(root) == "" || TraceID(root) == "00000000000000000000000000000000" {
			t.Fatalf("incoming %q: new root %q", bad, root)
		}
	}
}

// The no-op path's cost on the intake (a figure for docs/decisions.md).
func BenchmarkNoopStartServer(b *testing.B) {
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	tr, err := New(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, sp, _ := tr.StartServer(context.Background(), "outbox.intake", "", nil)
		sp.End()
	}
}
