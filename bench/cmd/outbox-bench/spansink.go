package main

import (
	"io"
	"net/http"
	"sync/atomic"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// spanSink is an in-process OTLP/HTTP (protobuf) trace receiver that counts
// what it is sent: the intake_traced variant exports every span to it, so
// "tracing on" costs the real SDK, batcher, encoding and HTTP export.
type spanSink struct {
	spans, exports, bytes atomic.Int64
}

func (s *spanSink) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var ex coltracepb.ExportTraceServiceRequest
	if err != nil || req.URL.Path != "/v1/traces" || proto.Unmarshal(body, &ex) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	n := 0
	for _, rs := range ex.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	s.spans.Add(int64(n))
	s.exports.Add(1)
	s.bytes.Add(int64(len(body)))
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}
