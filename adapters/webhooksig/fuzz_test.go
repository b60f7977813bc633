package webhooksig

import (
	"bytes"
	"context"
	"encoding/base64"
	"strconv"
	"testing"
	"time"
)

var fuzzSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("chaos-fuzz-secret-0123456789"))

// FuzzVerify: arbitrary headers never panic the verifier nor pass it; a
// correct signature verifies, and any change to the body, id or timestamp
// makes it fail.
func FuzzVerify(f *testing.F) {
	f.Add("msg_1", int64(0), "", []byte(`{"type":"message.acknowledged"}`), []byte("x"))
	f.Add("msg_2", int64(-10), "v1,AAAA v2,BBBB", []byte(``), []byte(``))
	f.Add("", int64(1), "v1,", []byte(`{}`), []byte(`{} `))
	f.Add("id with spaces", int64(299), "v1a,Zm9v v1,", []byte{0xff, 0x00}, []byte{0x01})
	now := time.Unix(1_900_000_000, 0).UTC()
	v := &Verifier{Secrets: StaticSecrets{"sandbox/*": {fuzzSecret}}, Now: func() time.Time { return now }}
	f.Fuzz(func(t *testing.T, id string, skew int64, sig string, body, other []byte) {
		ctx := context.Background()
		ts := strconv.FormatInt(now.Unix()+skew%600, 10)
		// Arbitrary signature headers: never accepted unless it happens to be right.
		h := map[string]string{HeaderID: id, HeaderTimestamp: ts, HeaderSignature: sig}
		if _, err := v.Verify(ctx, "sandbox", "a1", h, body); err == nil {
			good, _ := Sign(id, time.Unix(now.Unix()+skew%600, 0), body, fuzzSecret)
			if good != sig && !bytes.Contains([]byte(sig), []byte(good[3:])) {
				t.Fatalf("accepted a signature it did not make: %q", sig)
			}
		}
		if id == "" {
			return
		}
		at := time.Unix(now.Unix()+skew%60, 0)
		good, err := Sign(id, at, body, fuzzSecret)
		if err != nil {
			t.Fatal(err)
		}
		h = map[string]string{"Webhook-Id": id, "WEBHOOK-TIMESTAMP": strconv.FormatInt(at.Unix(), 10), HeaderSignature: good}
		vf, err := v.Verify(ctx, "sandbox", "a1", h, body)
		if err != nil || vf.ID != id {
			t.Fatalf("a correct signature failed: %v", err)
		}
		if !bytes.Equal(other, body) {
			if _, err := v.Verify(ctx, "sandbox", "a1", h, other); err == nil {
				t.Fatalf("a signature for %q verified %q", body, other)
			}
		}
		h[HeaderTimestamp] = strconv.FormatInt(at.Unix()+1, 10)
		delete(h, "WEBHOOK-TIMESTAMP")
		if _, err := v.Verify(ctx, "sandbox", "a1", h, body); err == nil {
			t.Fatalf("a signature verified with another timestamp")
		}
	})
}
