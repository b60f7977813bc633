package fakes

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// The two Slack Web API methods that change an existing message, as Slack
// documents them:
//
//   - chat.update: https://docs.slack.dev/reference/methods/chat.update
//     (channel and ts required; text or blocks; only the message's author
//     may update it: cant_update_message; an unknown ts is
//     message_not_found; answers {"ok":true,"channel","ts","text","message"}).
//   - reactions.add: https://docs.slack.dev/reference/methods/reactions.add
//     (channel, timestamp and name required; answers {"ok":true}; the same
//     user adding the same reaction again is already_reacted; an unknown
//     message is message_not_found; a missing item no_item_specified).
//
// Each accepted call is one side effect, counted by Edits and Reactions.

// SlackEdited marks an updated message.
type SlackEdited struct {
	User string `json:"user"`
	TS   string `json:"ts"`
}

// SlackReaction is one emoji on a message and who added it.
type SlackReaction struct {
	Name  string   `json:"name"`
	Users []string `json:"users"`
	Count int      `json:"count"`
}

// Edits counts the chat.update calls that changed a message.
func (s *Slack) Edits() int {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	return s.srv.edits
}

// Reactions counts the reactions.add calls that added a reaction.
func (s *Slack) Reactions() int {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	return s.srv.reactions
}

// readWrite reads a JSON Web API call and authenticates it; "" means go on.
func (s *slackServer) readWrite(w http.ResponseWriter, r *http.Request, v any) (*slackToken, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		slackErr(w, "request_timeout")
		return nil, false
	}
	s.mu.Lock()
	tok, code := s.authLocked(r)
	s.mu.Unlock()
	if code != "" {
		slackErr(w, code)
		return nil, false
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		slackErr(w, "invalid_post_type")
		return nil, false
	}
	if json.Unmarshal(body, v) != nil {
		slackErr(w, "invalid_json")
		return nil, false
	}
	return tok, true
}

// messageLocked finds a message by channel and ts.
func (s *slackServer) messageLocked(channel, ts string) (*SlackMessage, string) {
	ch := s.channels[channel]
	if ch == nil {
		return nil, "channel_not_found"
	}
	for i := range ch.messages {
		if ch.messages[i].TS == ts {
			return &ch.messages[i], ""
		}
	}
	return nil, "message_not_found"
}

// preFault answers the faults that strike before anything changes; true
// means answered.
func preFault(w http.ResponseWriter, r *http.Request, fq *faultQueue, f Fault, has bool) bool {
	if !has {
		return false
	}
	switch f.Kind {
	case Reject:
		slackErr(w, "invalid_arguments")
	case Unauthorized:
		slackErr(w, "token_revoked")
	case RateLimit, Unavailable:
		slackBusy(w, f)
	case ProviderError:
		writeSlack(w, errorStatus(w, f, http.StatusOK), map[string]any{"ok": false, "error": f.Code})
	case HangNoCommit:
		fq.hold(r)
		writeSlack(w, http.StatusServiceUnavailable, map[string]any{"ok": false, "error": "service_unavailable"})
	default:
		return false
	}
	return true
}

func (s *slackServer) chatUpdate(w http.ResponseWriter, r *http.Request, fq *faultQueue) {
	var a struct {
		Channel string          `json:"channel"`
		TS      string          `json:"ts"`
		Text    *string         `json:"text"`
		Blocks  json.RawMessage `json:"blocks"`
	}
	tok, ok := s.readWrite(w, r, &a)
	if !ok {
		return
	}
	switch {
	case a.Channel == "" || a.TS == "":
		slackErr(w, "invalid_arguments")
		return
	case (a.Text == nil || strings.TrimSpace(*a.Text) == "") && len(a.Blocks) == 0:
		slackErr(w, "no_text")
		return
	case a.Text != nil && utf8.RuneCountInString(*a.Text) > 40000:
		slackErr(w, "msg_too_long")
		return
	}
	s.mu.Lock()
	m, code := s.messageLocked(a.Channel, a.TS)
	if code == "" && m.BotID != tok.botID {
		code = "cant_update_message"
	}
	s.mu.Unlock()
	if code != "" {
		slackErr(w, code)
		return
	}
	f, has := fq.pop()
	if preFault(w, r, fq, f, has) {
		return
	}
	s.mu.Lock()
	m, _ = s.messageLocked(a.Channel, a.TS)
	if a.Text != nil {
		m.Text = *a.Text
	}
	if len(a.Blocks) > 0 {
		var b any
		_ = json.Unmarshal(a.Blocks, &b)
		m.Blocks = b
	}
	m.Edited = &SlackEdited{User: tok.userID, TS: s.nextTSLocked()}
	out := *m
	s.edits++
	s.mu.Unlock()
	if fq.afterCommit(w, r, f, has, func() { slackErr(w, "internal_error") }) {
		return
	}
	out.Metadata = nil
	writeSlack(w, http.StatusOK, map[string]any{"ok": true, "channel": a.Channel, "ts": a.TS, "text": out.Text, "message": out})
}

func (s *slackServer) reactionsAdd(w http.ResponseWriter, r *http.Request, fq *faultQueue) {
	var a struct {
		Channel   string `json:"channel"`
		Timestamp string `json:"timestamp"`
		Name      string `json:"name"`
	}
	tok, ok := s.readWrite(w, r, &a)
	if !ok {
		return
	}
	switch {
	case a.Channel == "" || a.Timestamp == "":
		slackErr(w, "no_item_specified")
		return
	case a.Name == "" || strings.ContainsAny(a.Name, ": "):
		slackErr(w, "invalid_name")
		return
	}
	s.mu.Lock()
	m, code := s.messageLocked(a.Channel, a.Timestamp)
	if code == "" {
		for _, re := range m.Reactions {
			if re.Name == a.Name && slices.Contains(re.Users, tok.userID) {
				code = "already_reacted"
			}
		}
	}
	s.mu.Unlock()
	if code != "" {
		slackErr(w, code)
		return
	}
	f, has := fq.pop()
	if preFault(w, r, fq, f, has) {
		return
	}
	s.mu.Lock()
	m, _ = s.messageLocked(a.Channel, a.Timestamp)
	added := false
	for i := range m.Reactions {
		if m.Reactions[i].Name == a.Name && !slices.Contains(m.Reactions[i].Users, tok.userID) {
			m.Reactions[i].Users = append(m.Reactions[i].Users, tok.userID)
			m.Reactions[i].Count++
			added = true
		}
	}
	if !added && !slices.ContainsFunc(m.Reactions, func(re SlackReaction) bool { return re.Name == a.Name }) {
		m.Reactions = append(m.Reactions, SlackReaction{Name: a.Name, Users: []string{tok.userID}, Count: 1})
		added = true
	}
	if added {
		s.reactions++
	}
	s.mu.Unlock()
	if fq.afterCommit(w, r, f, has, func() { slackErr(w, "internal_error") }) {
		return
	}
	writeSlack(w, http.StatusOK, map[string]any{"ok": true})
}
