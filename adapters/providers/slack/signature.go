package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Events API request signing
// (https://api.slack.com/authentication/verifying-requests-from-slack):
// Slack sends X-Slack-Request-Timestamp (Unix seconds) and
// X-Slack-Signature "v0=" + hex(HMAC-SHA256(signing secret,
// "v0:" + timestamp + ":" + raw body)). Requests whose timestamp is more than
// five minutes from the local clock are to be refused (replay protection).
const (
	HeaderSignature = "X-Slack-Signature"
	HeaderTimestamp = "X-Slack-Request-Timestamp"
	// SignatureTolerance is Slack's documented replay window.
	SignatureTolerance = 5 * time.Minute
)

// Verification errors. Callers answer 401 for all of them and store nothing.
var (
	ErrMissingSignature = errors.New("slack signature: missing secret, timestamp or signature")
	ErrStaleTimestamp   = errors.New("slack signature: timestamp outside the five-minute window")
	ErrBadSignature     = errors.New("slack signature: does not match")
)

// SignSlack computes the X-Slack-Signature value for a body.
func SignSlack(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// VerifySlackSignature checks an Events API request: ts and sig are the
// X-Slack-Request-Timestamp and X-Slack-Signature headers, body is the raw,
// unparsed request body, now is the local clock. The comparison is constant
// time. A nil error means the request is Slack's and fresh.
func VerifySlackSignature(secret, ts string, body []byte, sig string, now time.Time) error {
	if secret == "" || ts == "" || sig == "" {
		return ErrMissingSignature
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
	if err != nil {
		return ErrMissingSignature
	}
	d := now.Sub(time.Unix(sec, 0))
	if d > SignatureTolerance || d < -SignatureTolerance {
		return ErrStaleTimestamp
	}
	if !strings.HasPrefix(sig, "v0=") {
		return ErrBadSignature
	}
	want := SignSlack(secret, ts, body)
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return ErrBadSignature
	}
	return nil
}
