package slack

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Events API envelopes (https://docs.slack.dev/apis/events-api/#callback-field,
// schema: https://api.slack.com/types/event):
//
//   - url_verification (https://api.slack.com/events/url_verification):
//     {"token":"…","challenge":"…","type":"url_verification"}; the endpoint
//     answers 200 with the challenge after verifying the signature.
//   - event_callback: {"team_id","api_app_id","event":{…},"type":"event_callback",
//     "event_id":"Ev…","event_time":…}; event_id is the deduplication key
//     (Slack retries deliveries).
//   - app_rate_limited: Slack stopped delivering for a while; informational.

// Envelope types.
const (
	TypeURLVerification = "url_verification"
	TypeEventCallback   = "event_callback"
	TypeAppRateLimited  = "app_rate_limited"
)

// Event is a parsed Events API request.
type Event struct {
	Type      string
	Challenge string // url_verification only
	TeamID    string
	APIAppID  string
	EventID   string
	EventTime time.Time
	Inner     InnerEvent
}

// InnerEvent is the part of the inner event the outbox uses. It covers
// "message" events (https://docs.slack.dev/reference/events/message) and
// "message_metadata_posted" (https://docs.slack.dev/reference/events/message_metadata_posted),
// whose channel and ts fields are named channel_id and message_ts.
type InnerEvent struct {
	Type     string    `json:"type"`
	Subtype  string    `json:"subtype,omitempty"`
	Channel  string    `json:"channel,omitempty"`
	User     string    `json:"user,omitempty"`
	BotID    string    `json:"bot_id,omitempty"`
	AppID    string    `json:"app_id,omitempty"`
	Text     string    `json:"text,omitempty"`
	TS       string    `json:"ts,omitempty"`
	ThreadTS string    `json:"thread_ts,omitempty"`
	EventTS  string    `json:"event_ts,omitempty"`
	Metadata *Metadata `json:"metadata,omitempty"`
	// message_metadata_posted names them differently.
	ChannelID string `json:"channel_id,omitempty"`
	MessageTS string `json:"message_ts,omitempty"`
}

type envelope struct {
	Type      string          `json:"type"`
	Challenge string          `json:"challenge"`
	TeamID    string          `json:"team_id"`
	APIAppID  string          `json:"api_app_id"`
	EventID   string          `json:"event_id"`
	EventTime int64           `json:"event_time"`
	Event     json.RawMessage `json:"event"`
}

// ErrMalformedEvent is returned for bodies that are not an Events API envelope.
var ErrMalformedEvent = errors.New("slack event: malformed")

// ParseEvent parses a verified Events API body.
func ParseEvent(body []byte) (Event, error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrMalformedEvent, err)
	}
	e := Event{Type: env.Type, TeamID: env.TeamID, APIAppID: env.APIAppID, EventID: env.EventID}
	if env.EventTime > 0 {
		e.EventTime = time.Unix(env.EventTime, 0).UTC()
	}
	switch env.Type {
	case TypeURLVerification:
		if env.Challenge == "" {
			return Event{}, fmt.Errorf("%w: url_verification without challenge", ErrMalformedEvent)
		}
		e.Challenge = env.Challenge
		return e, nil
	case TypeEventCallback:
		if env.EventID == "" || len(env.Event) == 0 {
			return Event{}, fmt.Errorf("%w: event_callback without event_id or event", ErrMalformedEvent)
		}
		if err := json.Unmarshal(env.Event, &e.Inner); err != nil || e.Inner.Type == "" {
			return Event{}, fmt.Errorf("%w: inner event", ErrMalformedEvent)
		}
		if e.Inner.Channel == "" {
			e.Inner.Channel = e.Inner.ChannelID
		}
		if e.Inner.TS == "" {
			e.Inner.TS = e.Inner.MessageTS
		}
		return e, nil
	case TypeAppRateLimited:
		return e, nil
	case "":
		return Event{}, fmt.Errorf("%w: no type", ErrMalformedEvent)
	}
	return e, nil
}

// ChallengeResponse is the body answering a url_verification request
// (Content-Type: application/json).
func ChallengeResponse(challenge string) []byte {
	b, _ := json.Marshal(map[string]string{"challenge": challenge})
	return b
}

// IntentID is the outbox intent named by the message's metadata, or "".
func (e Event) IntentID() string { return e.Inner.Metadata.IntentID() }

// IsMessage reports whether the inner event is a message posted (not an
// edit or deletion, whose subtypes describe another message).
func (e Event) IsMessage() bool {
	if e.Type != TypeEventCallback {
		return false
	}
	switch e.Inner.Type {
	case "message":
		return e.Inner.Subtype == "" || e.Inner.Subtype == "bot_message" || e.Inner.Subtype == "thread_broadcast"
	case "message_metadata_posted":
		return true
	}
	return false
}

// IsOwnEcho reports whether the event is a message our own bot posted: the
// echo of an outbox send. Echoes are evidence about an intent (matched by
// IntentID), never a new inbound event.
func (e Event) IsOwnEcho(botID string) bool {
	return botID != "" && e.IsMessage() && e.Inner.BotID == botID
}

// ExternalID is the message ts, the external id the adapter reports on send.
func (e Event) ExternalID() string { return e.Inner.TS }
