package slack_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/slack"
)

// The worked example of https://api.slack.com/authentication/verifying-requests-from-slack
// (signing secret, X-Slack-Request-Timestamp, raw body, X-Slack-Signature).
const (
	docSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	docTS     = "1531420618"
	docBody   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	docSig    = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

func TestVerifySlackSignature(t *testing.T) {
	sec, _ := strconv.ParseInt(docTS, 10, 64)
	at := time.Unix(sec, 0)
	if got := slack.SignSlack(docSecret, docTS, []byte(docBody)); got != docSig {
		t.Fatalf("SignSlack = %s, want the documented %s", got, docSig)
	}
	cases := []struct {
		name   string
		secret string
		ts     string
		body   string
		sig    string
		now    time.Time
		want   error
	}{
		{"documented example", docSecret, docTS, docBody, docSig, at.Add(time.Minute), nil},
		{"4m59s late still fresh", docSecret, docTS, docBody, docSig, at.Add(5*time.Minute - time.Second), nil},
		{"6 minutes old", docSecret, docTS, docBody, docSig, at.Add(6 * time.Minute), slack.ErrStaleTimestamp},
		{"6 minutes in the future", docSecret, docTS, docBody, docSig, at.Add(-6 * time.Minute), slack.ErrStaleTimestamp},
		{"tampered body", docSecret, docTS, docBody + "&x=1", docSig, at, slack.ErrBadSignature},
		{"other secret", "rotated-out-secret", docTS, docBody, docSig, at, slack.ErrBadSignature},
		{"timestamp swapped", docSecret, "1531420619", docBody, docSig, at, slack.ErrBadSignature},
		{"no v0 prefix", docSecret, docTS, docBody, docSig[3:], at, slack.ErrBadSignature},
		{"missing signature", docSecret, docTS, docBody, "", at, slack.ErrMissingSignature},
		{"missing timestamp", docSecret, "", docBody, docSig, at, slack.ErrMissingSignature},
		{"garbage timestamp", docSecret, "soon", docBody, docSig, at, slack.ErrMissingSignature},
		{"no secret configured", "", docTS, docBody, docSig, at, slack.ErrMissingSignature},
	}
	for _, c := range cases {
		if err := slack.VerifySlackSignature(c.secret, c.ts, []byte(c.body), c.sig, c.now); !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// https://api.slack.com/events/url_verification
func TestParseURLVerification(t *testing.T) {
	body := `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	e, err := slack.ParseEvent([]byte(body))
	if err != nil || e.Type != slack.TypeURLVerification || e.Challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("%+v %v", e, err)
	}
	var resp map[string]string
	if err := json.Unmarshal(slack.ChallengeResponse(e.Challenge), &resp); err != nil || resp["challenge"] != e.Challenge {
		t.Fatalf("challenge response %v %v", resp, err)
	}
	if _, err := slack.ParseEvent([]byte(`{"type":"url_verification"}`)); !errors.Is(err, slack.ErrMalformedEvent) {
		t.Fatalf("no challenge: %v", err)
	}
}

// Event envelopes: https://docs.slack.dev/apis/events-api/#callback-field and
// https://api.slack.com/types/event; metadata on message events:
// https://docs.slack.dev/messaging/message-metadata;
// message_metadata_posted: https://docs.slack.dev/reference/events/message_metadata_posted/.
func TestParseEvents(t *testing.T) {
	echo := `{"token":"XXYYZZ","team_id":"T1","api_app_id":"AB1","type":"event_callback","event_id":"Ev08MFMKH6","event_time":1700000000,
	  "event":{"type":"message","channel":"C1","bot_id":"B1","app_id":"AB1","text":"hello","ts":"1700000000.000100","event_ts":"1700000000.000100",
	           "metadata":{"event_type":"outbox_intent","event_payload":{"intent_id":"it_abc"}}}}`
	e, err := slack.ParseEvent([]byte(echo))
	if err != nil {
		t.Fatal(err)
	}
	if !e.IsOwnEcho("B1") || e.IsOwnEcho("B2") || e.IsOwnEcho("") || e.IntentID() != "it_abc" || e.ExternalID() != "1700000000.000100" ||
		e.EventID != "Ev08MFMKH6" || e.TeamID != "T1" || e.Inner.Channel != "C1" || !e.EventTime.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("echo parsed as %+v", e)
	}

	user := `{"team_id":"T1","api_app_id":"AB1","type":"event_callback","event_id":"Ev2","event_time":1700000001,
	  "event":{"type":"message","channel":"C1","user":"U2147483697","text":"Hello world","ts":"1355517523.000005"}}`
	e, err = slack.ParseEvent([]byte(user))
	if err != nil || e.IsOwnEcho("B1") || e.IntentID() != "" || !e.IsMessage() {
		t.Fatalf("user message parsed as %+v, %v", e, err)
	}

	foreign := `{"team_id":"T1","type":"event_callback","event_id":"Ev3","event":{"type":"message","channel":"C1","bot_id":"B9","ts":"1.1",
	  "metadata":{"event_type":"task_created","event_payload":{"intent_id":"it_abc"}}}}`
	e, err = slack.ParseEvent([]byte(foreign))
	if err != nil || e.IntentID() != "" || e.IsOwnEcho("B1") {
		t.Fatalf("foreign metadata parsed as %+v, %v", e, err)
	}

	edited := `{"team_id":"T1","type":"event_callback","event_id":"Ev4","event":{"type":"message","subtype":"message_changed","channel":"C1","ts":"2.2"}}`
	if e, err = slack.ParseEvent([]byte(edited)); err != nil || e.IsMessage() {
		t.Fatalf("message_changed parsed as %+v, %v", e, err)
	}

	// The documented message_metadata_posted example, with our event type.
	posted := `{"token":"XXYYZZ","team_id":"T123ABC456","api_app_id":"A123ABC456","event":{"type":"message_metadata_posted","app_id":"AQF4F123M",
	  "bot_id":"B8241P2B34D","user_id":"U123ABC456","team_id":"T12F3JCAP","channel_id":"CJN879K8A",
	  "metadata":{"event_type":"outbox_intent","event_payload":{"intent_id":"it_meta"}},"message_ts":"1658903885.673769","event_ts":"1658903885.673769"},
	  "type":"event_callback","authorizations":[{"team_id":"T123ABC456","user_id":"U123ABC456","is_bot":false,"is_enterprise_install":false}],
	  "event_id":"Ev123ABC456","event_time":123456789}`
	e, err = slack.ParseEvent([]byte(posted))
	if err != nil || !e.IsOwnEcho("B8241P2B34D") || e.IntentID() != "it_meta" || e.Inner.Channel != "CJN879K8A" || e.ExternalID() != "1658903885.673769" {
		t.Fatalf("message_metadata_posted parsed as %+v, %v", e, err)
	}

	for name, bad := range map[string]string{
		"not json":            `{"type":`,
		"no type":             `{"event_id":"Ev1"}`,
		"callback no id":      `{"type":"event_callback","event":{"type":"message"}}`,
		"callback no event":   `{"type":"event_callback","event_id":"Ev1"}`,
		"inner event no type": `{"type":"event_callback","event_id":"Ev1","event":{"channel":"C1"}}`,
	} {
		if _, err := slack.ParseEvent([]byte(bad)); !errors.Is(err, slack.ErrMalformedEvent) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if e, err := slack.ParseEvent([]byte(`{"token":"x","type":"app_rate_limited","team_id":"T1","minute_rate_limited":1518467820,"api_app_id":"A1"}`)); err != nil || e.Type != slack.TypeAppRateLimited {
		t.Fatalf("app_rate_limited: %+v %v", e, err)
	}
}
