package e2e

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/botharness/outbox/core"
)

// otlpReceiver is an in-process OTLP/HTTP (protobuf) trace receiver.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	traceID, name string
	attrs         map[string]string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var ex coltracepb.ExportTraceServiceRequest
		if err != nil || req.URL.Path != "/v1/traces" || proto.Unmarshal(body, &ex) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					at := map[string]string{}
					for _, kv := range sp.Attributes {
						at[kv.Key] = kv.Value.GetStringValue()
					}
					r.spans = append(r.spans, receivedSpan{traceID: hex.EncodeToString(sp.TraceId), name: sp.Name, attrs: at})
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) named(traceID, name string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if s.traceID == traceID && s.name == name {
			out = append(out, s)
		}
	}
	return out
}

func (r *otlpReceiver) traces() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := map[string]bool{}
	for _, s := range r.spans {
		ids[s.traceID] = true
	}
	return ids
}

// TestOneTracePerIntent: a bot request carrying a traceparent, retried once
// (503 before commit) and then delivered, yields one trace whose spans cover
// the intake, both attempts and both provider requests; the sandbox saw the
// same trace id in each request's traceparent, and the intent stores it.
func TestOneTracePerIntent(t *testing.T) {
	rcv := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.srv.URL)
	e := newEnv(t, options{})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	e.faults(`{"account":"acct-trace","faults":[{"kind":"unavailable"}]}`)
	r := e.do("POST", "/v1/intents", botToken, map[string]string{"Idempotency-Key": "trace-1",
		"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}, intentBody("acct-trace", "chan-1", "traced"))
	if r.status != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	id := core.IntentID(testBot, "trace-1")
	in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
	if len(in.Attempts) != 2 || in.Attempts[0].Result != core.AttemptResult(core.ClassTransient) {
		t.Fatalf("attempts: %+v", in.Attempts)
	}
	if !strings.Contains(in.TraceParent, traceID) {
		t.Fatalf("the intent stores traceparent %q, want trace %s", in.TraceParent, traceID)
	}
	if err := e.st.App.Tracer.Flush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
	waitFor(t, 10*time.Second, "the spans of both attempts", func() bool {
		return len(rcv.named(traceID, "outbox.intake")) == 1 && len(rcv.named(traceID, "outbox.attempt")) == 2 &&
			len(rcv.named(traceID, "outbox.provider_request")) >= 2
	})
	seen := map[string]bool{}
	for _, s := range rcv.named(traceID, "outbox.attempt") {
		if s.attrs["outbox.intent_id"] != id || s.attrs["outbox.bot"] != testBot || s.attrs["outbox.provider"] != "sandbox" || s.attrs["outbox.account"] != "acct-trace" {
			t.Fatalf("attempt span attributes: %v", s.attrs)
		}
		seen[s.attrs["outbox.attempt"]+"/"+s.attrs["outbox.outcome"]] = true
	}
	if !seen["1/"+string(core.ClassTransient)] || !seen["2/"+string(core.ResultSucceeded)] {
		t.Fatalf("attempt spans (attempt/outcome): %v", seen)
	}
	for tid := range rcv.traces() {
		if tid != traceID {
			t.Fatalf("a span of another trace %s: the intent's spans are one trace", tid)
		}
	}
	reqs := e.requests("acct-trace")
	if len(reqs) != 2 {
		t.Fatalf("sandbox requests: %+v", reqs)
	}
	for _, q := range reqs {
		if !strings.HasPrefix(q.TraceParent, "00-"+traceID+"-") {
			t.Fatalf("the sandbox saw traceparent %q, want trace %s", q.TraceParent, traceID)
		}
	}
}
