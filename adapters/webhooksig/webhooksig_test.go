package webhooksig

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/sandbox"
)

const (
	secretOld = "whsec_b2xkLXNlY3JldC1rZXktMDEyMzQ1Njc4OWFiY2RlZg=="
	secretNew = "whsec_bmV3LXNlY3JldC1rZXktMDEyMzQ1Njc4OWFiY2RlZg=="
	secretBad = "whsec_Zm9yZ2VyLWtleS0wMTIzNDU2Nzg5YWJjZGVmZ2hpams="
)

var now = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func headers(id string, at time.Time, sig string) map[string]string {
	return map[string]string{"Webhook-Id": id, "webhook-timestamp": strconv.FormatInt(at.Unix(), 10), "WEBHOOK-SIGNATURE": sig}
}

func verifier(secrets ...string) *Verifier {
	return &Verifier{Secrets: StaticSecrets{"sandbox/a1": secrets}, Now: func() time.Time { return now }}
}

func TestWebhookVerify(t *testing.T) {
	body := []byte(`{"type":"message.acknowledged","data":{"eventId":"evt_1"}}`)
	sig := func(at time.Time, secrets ...string) string {
		s, err := Sign("evt_1", at, body, secrets...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The sandbox signs with its own HMAC code, not the library: cross-check.
	sbSig, err := sandbox.SignWebhook(secretNew, "evt_1", now, body)
	if err != nil || sbSig != sig(now, secretNew) {
		t.Fatalf("sandbox signature %q differs from the library's %q (%v)", sbSig, sig(now, secretNew), err)
	}
	cases := []struct {
		name    string
		v       *Verifier
		account string
		h       map[string]string
		body    []byte
		want    error
	}{
		{"good", verifier(secretNew), "a1", headers("evt_1", now, sig(now, secretNew)), body, nil},
		{"sender rotating: signs with old and new", verifier(secretNew), "a1", headers("evt_1", now, sig(now, secretOld, secretNew)), body, nil},
		{"receiver rotating: accepts old and new", verifier(secretNew, secretOld), "a1", headers("evt_1", now, sig(now, secretOld)), body, nil},
		{"rotated-out secret", verifier(secretNew), "a1", headers("evt_1", now, sig(now, secretOld)), body, ErrBadSignature},
		{"forged", verifier(secretNew), "a1", headers("evt_1", now, sig(now, secretBad)), body, ErrBadSignature},
		{"garbage signature", verifier(secretNew), "a1", headers("evt_1", now, "v1,AAAA v2,BBBB nonsense"), body, ErrBadSignature},
		{"body changed", verifier(secretNew), "a1", headers("evt_1", now, sig(now, secretNew)), append([]byte(" "), body...), ErrBadSignature},
		{"id changed", verifier(secretNew), "a1", headers("evt_2", now, sig(now, secretNew)), body, ErrBadSignature},
		{"six minutes old", verifier(secretNew), "a1", headers("evt_1", now.Add(-6*time.Minute), sig(now.Add(-6*time.Minute), secretNew)), body, ErrStale},
		{"six minutes ahead", verifier(secretNew), "a1", headers("evt_1", now.Add(6*time.Minute), sig(now.Add(6*time.Minute), secretNew)), body, ErrStale},
		{"four minutes old is fine", verifier(secretNew), "a1", headers("evt_1", now.Add(-4*time.Minute), sig(now.Add(-4*time.Minute), secretNew)), body, nil},
		{"timestamp re-stamped", verifier(secretNew), "a1", headers("evt_1", now, sig(now.Add(-time.Minute), secretNew)), body, ErrBadSignature},
		{"missing signature", verifier(secretNew), "a1", map[string]string{"webhook-id": "evt_1", "webhook-timestamp": strconv.FormatInt(now.Unix(), 10)}, body, ErrMissingHeaders},
		{"bad timestamp", verifier(secretNew), "a1", map[string]string{"webhook-id": "evt_1", "webhook-timestamp": "yesterday", "webhook-signature": sig(now, secretNew)}, body, ErrBadTimestamp},
		{"unknown account", verifier(secretNew), "a2", headers("evt_1", now, sig(now, secretNew)), body, ErrNoSecret},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.v.Verify(context.Background(), "sandbox", c.account, c.h, c.body)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
		})
	}
}

func TestWebhookParseSecrets(t *testing.T) {
	s, err := ParseSecrets(`{"sandbox/a1": "` + secretNew + `", "sandbox/a2": ["` + secretNew + `","` + secretOld + `"], "sandbox/*": "` + secretOld + `"}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if got, _ := s.Secrets(ctx, "sandbox", "a2"); len(got) != 2 {
		t.Fatalf("a2 %v", got)
	}
	if got, _ := s.Secrets(ctx, "sandbox", "other"); len(got) != 1 || got[0] != secretOld {
		t.Fatalf("wildcard %v", got)
	}
	if got, _ := s.Secrets(ctx, "slack", "a1"); len(got) != 0 {
		t.Fatalf("other provider %v", got)
	}
	for _, bad := range []string{`[]`, `{"a1":"` + secretNew + `"}`, `{"sandbox/a1":"plain"}`, `{"sandbox/a1":"whsec_!!"}`, `{"sandbox/a1":"whsec_"}`, `{"sandbox/a1":3}`} {
		if _, err := ParseSecrets(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if s, err := ParseSecrets("  "); err != nil || len(s) != 0 {
		t.Fatal("empty document")
	}
	if !strings.HasPrefix(secretNew, "whsec_") || CheckSecret(secretNew) != nil {
		t.Fatal("fixture")
	}
}
