package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// SubmitOptions.PreferWait sends `Prefer: wait=N` (whole seconds) and
// Submission.WaitApplied reports the server's Preference-Applied; without
// it no Prefer header is sent.
func TestSubmitPreferWait(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Prefer"))
		if r.Header.Get("Prefer") == "wait=7" {
			w.Header().Set("Preference-Applied", "wait=7")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"it_1","status":"succeeded"}`))
	}))
	defer srv.Close()
	c := New(srv.URL, "t")
	req := IntentRequest{Kind: "reply", Payload: []byte(`{}`)}
	sub, err := c.Submit(context.Background(), req, SubmitOptions{Key: "k1", PreferWait: 7500 * time.Millisecond})
	if err != nil || !sub.WaitApplied {
		t.Fatalf("with PreferWait: %v %+v", err, sub)
	}
	sub, err = c.Submit(context.Background(), req, SubmitOptions{Key: "k2"})
	if err != nil || sub.WaitApplied {
		t.Fatalf("without PreferWait: %v %+v", err, sub)
	}
	if len(got) != 2 || got[0] != "wait=7" || got[1] != "" {
		t.Fatalf("Prefer headers sent: %q", got)
	}
}
