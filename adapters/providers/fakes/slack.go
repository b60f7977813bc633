package fakes

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Slack is a fake of the two Slack Web API methods the outbox uses.
//
//   - chat.postMessage: https://docs.slack.dev/reference/methods/chat.postMessage
//     (POST, JSON body, "Authorization: Bearer xoxb-…"; answers HTTP 200 with
//     {"ok":true,"channel":"C…","ts":"1503435956.000247","message":{…}} or
//     {"ok":false,"error":"<code>"}; rate limits are HTTP 429 with a
//     Retry-After header: https://docs.slack.dev/apis/web-api/rate-limits).
//   - conversations.history: https://docs.slack.dev/reference/methods/conversations.history
//     (channel, oldest, latest, inclusive, limit, cursor, include_all_metadata;
//     answers messages newest first, has_more, response_metadata.next_cursor).
//     Message metadata (https://docs.slack.dev/messaging/message-metadata) is
//     returned only when include_all_metadata is true.
//
// Every message it accepts is one real side effect, counted by Posts.
type Slack struct {
	srv    *slackServer
	faults *faultQueue
	base   string
}

type slackServer struct {
	now func() time.Time

	mu           sync.Mutex
	tokens       map[string]*slackToken
	channels     map[string]*slackChannel
	seq          int64
	posts        int
	edits        int
	reactions    int
	historyCalls int
	lastHistory  map[string]string
	pageSize     int
	history      *faultQueue
}

type slackToken struct {
	team, botID, appID, userID string
	revoked                    bool
	inactive                   bool
}

type slackChannel struct {
	archived bool
	messages []SlackMessage // oldest first
}

// SlackMetadata is a message's metadata.
type SlackMetadata struct {
	EventType    string          `json:"event_type"`
	EventPayload json.RawMessage `json:"event_payload"`
}

// SlackMessage is a message as the fake stores it.
type SlackMessage struct {
	Type     string         `json:"type"`
	Subtype  string         `json:"subtype,omitempty"`
	Text     string         `json:"text,omitempty"`
	User     string         `json:"user,omitempty"`
	BotID    string         `json:"bot_id,omitempty"`
	AppID    string         `json:"app_id,omitempty"`
	Team     string         `json:"team,omitempty"`
	TS       string         `json:"ts"`
	ThreadTS string         `json:"thread_ts,omitempty"`
	Blocks   any            `json:"blocks,omitempty"`
	Metadata *SlackMetadata `json:"metadata,omitempty"`
	// Edited is set by chat.update; Reactions by reactions.add.
	Edited    *SlackEdited    `json:"edited,omitempty"`
	Reactions []SlackReaction `json:"reactions,omitempty"`
}

// NewSlack starts a Slack fake. now drives message timestamps.
func NewSlack(tb TB, now func() time.Time) *Slack {
	tb.Helper()
	if now == nil {
		now = time.Now
	}
	s := &slackServer{now: now, tokens: map[string]*slackToken{}, channels: map[string]*slackChannel{}, pageSize: 100, history: newFaultQueue()}
	fq := newFaultQueue()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/chat.postMessage", func(w http.ResponseWriter, r *http.Request) { s.postMessage(w, r, fq) })
	mux.HandleFunc("POST /api/chat.update", func(w http.ResponseWriter, r *http.Request) { s.chatUpdate(w, r, fq) })
	mux.HandleFunc("POST /api/reactions.add", func(w http.ResponseWriter, r *http.Request) { s.reactionsAdd(w, r, fq) })
	mux.HandleFunc("GET /api/conversations.history", s.conversationsHistory)
	mux.HandleFunc("POST /api/conversations.history", s.conversationsHistory)
	mux.HandleFunc("GET /api/conversations.replies", s.conversationsHistory)
	mux.HandleFunc("POST /api/conversations.replies", s.conversationsHistory)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeSlack(w, http.StatusNotFound, map[string]any{"ok": false, "error": "unknown_method"})
	})
	srv := start(tb, mux, fq)
	tb.Cleanup(s.history.close)
	return &Slack{srv: s, faults: fq, base: srv.URL + "/api"}
}

// URL is the Web API base URL (the equivalent of https://slack.com/api).
func (s *Slack) URL() string { return s.base }

// AddToken makes a bot token valid for a workspace (team) and bot id.
func (s *Slack) AddToken(token, team, botID string) {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	s.srv.tokens[token] = &slackToken{team: team, botID: botID, appID: "A" + botID, userID: "U" + botID}
}

// RevokeToken makes the token answer token_revoked.
func (s *Slack) RevokeToken(token string) {
	s.withToken(token, func(t *slackToken) { t.revoked = true })
}

// DeactivateToken makes the token answer account_inactive.
func (s *Slack) DeactivateToken(token string) {
	s.withToken(token, func(t *slackToken) { t.inactive = true })
}

// withToken changes a known token under the server's lock.
func (s *Slack) withToken(token string, f func(*slackToken)) {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	if t := s.srv.tokens[token]; t != nil {
		f(t)
	}
}

// AddChannel creates a conversation.
func (s *Slack) AddChannel(id string) {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	if s.srv.channels[id] == nil {
		s.srv.channels[id] = &slackChannel{}
	}
}

// ArchiveChannel makes posts to the channel answer is_archived.
func (s *Slack) ArchiveChannel(id string) {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	if c := s.srv.channels[id]; c != nil {
		c.archived = true
	}
}

// SetHistoryPageSize caps how many messages one history page returns.
func (s *Slack) SetHistoryPageSize(n int) {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	s.srv.pageSize = n
}

// Inject queues faults for the next chat.postMessage, chat.update and
// reactions.add calls.
func (s *Slack) Inject(fs ...Fault) { s.faults.push(fs...) }

// InjectHistory queues faults for the next conversations.history calls
// (RateLimit, Unavailable, ProviderError).
func (s *Slack) InjectHistory(fs ...Fault) { s.srv.history.push(fs...) }

// Release lets held responses go.
func (s *Slack) Release() { s.faults.Release() }

// Posts is the number of messages really posted (side effects).
func (s *Slack) Posts() int {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	return s.srv.posts
}

// PostsWithMetadata counts posted messages whose metadata event_payload has
// field == value (for example intent_id == "it_…").
func (s *Slack) PostsWithMetadata(field, value string) int {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	n := 0
	for _, c := range s.srv.channels {
		for _, m := range c.messages {
			if m.Metadata == nil {
				continue
			}
			var p map[string]any
			if json.Unmarshal(m.Metadata.EventPayload, &p) == nil && fmt.Sprint(p[field]) == value {
				n++
			}
		}
	}
	return n
}

// Messages returns a copy of a channel's messages, oldest first.
func (s *Slack) Messages(channel string) []SlackMessage {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	c := s.srv.channels[channel]
	if c == nil {
		return nil
	}
	return append([]SlackMessage(nil), c.messages...)
}

// AddMessage puts a message into a channel's history without counting it as
// one of ours (other users, other bots). ts is assigned.
func (s *Slack) AddMessage(channel string, m SlackMessage) string {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	c := s.srv.channels[channel]
	if c == nil {
		c = &slackChannel{}
		s.srv.channels[channel] = c
	}
	m.Type = "message"
	m.TS = s.srv.nextTSLocked()
	c.messages = append(c.messages, m)
	return m.TS
}

// HistoryCalls is how many conversations.history calls were served.
func (s *Slack) HistoryCalls() int {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	return s.srv.historyCalls
}

// LastHistoryQuery is the arguments of the last conversations.history call.
func (s *Slack) LastHistoryQuery() map[string]string {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.srv.lastHistory {
		out[k] = v
	}
	return out
}

// nextTSLocked returns a unique, increasing message ts: unix seconds and a
// six-digit sequence, the shape Slack uses ("1503435956.000247").
func (s *slackServer) nextTSLocked() string {
	s.seq++
	return fmt.Sprintf("%d.%06d", s.now().Unix(), s.seq%1000000)
}

func writeSlack(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// slackBusy answers a RateLimit fault (429 ratelimited with Retry-After) or
// an Unavailable one (503 service_unavailable).
func slackBusy(w http.ResponseWriter, f Fault) {
	if f.Kind == RateLimit {
		w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
		writeSlack(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
		return
	}
	writeSlack(w, http.StatusServiceUnavailable, map[string]any{"ok": false, "error": "service_unavailable"})
}

func slackErr(w http.ResponseWriter, code string) {
	// Slack answers method errors with HTTP 200 and ok:false.
	writeSlack(w, http.StatusOK, map[string]any{"ok": false, "error": code})
}

// authLocked checks the bearer token; "" means authorised.
func (s *slackServer) authLocked(r *http.Request) (*slackToken, string) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, "not_authed"
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, "invalid_auth"
	}
	t := s.tokens[tok]
	switch {
	case t == nil:
		return nil, "invalid_auth"
	case t.revoked:
		return nil, "token_revoked"
	case t.inactive:
		return nil, "account_inactive"
	}
	return t, ""
}

type postArgs struct {
	Channel  string          `json:"channel"`
	Text     string          `json:"text"`
	Blocks   json.RawMessage `json:"blocks"`
	ThreadTS string          `json:"thread_ts"`
	Metadata json.RawMessage `json:"metadata"`
}

func (s *slackServer) postMessage(w http.ResponseWriter, r *http.Request, fq *faultQueue) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		slackErr(w, "request_timeout")
		return
	}
	s.mu.Lock()
	tok, code := s.authLocked(r)
	s.mu.Unlock()
	if code != "" {
		slackErr(w, code)
		return
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" {
		slackErr(w, "invalid_post_type")
		return
	}
	var a postArgs
	if err := json.Unmarshal(body, &a); err != nil {
		slackErr(w, "invalid_json")
		return
	}
	var blocks any
	if len(a.Blocks) > 0 {
		if json.Unmarshal(a.Blocks, &blocks) != nil {
			slackErr(w, "invalid_blocks")
			return
		}
		if _, ok := blocks.([]any); !ok {
			slackErr(w, "invalid_blocks")
			return
		}
	}
	var md *SlackMetadata
	if len(a.Metadata) > 0 {
		md = &SlackMetadata{}
		var obj map[string]any
		if json.Unmarshal(a.Metadata, md) != nil || md.EventType == "" || json.Unmarshal(md.EventPayload, &obj) != nil || obj == nil {
			slackErr(w, "invalid_metadata_format")
			return
		}
	}
	s.mu.Lock()
	ch := s.channels[a.Channel]
	archived := ch != nil && ch.archived
	s.mu.Unlock()
	switch {
	case a.Channel == "" || ch == nil:
		slackErr(w, "channel_not_found")
		return
	case archived:
		slackErr(w, "is_archived")
		return
	case strings.TrimSpace(a.Text) == "" && blocks == nil:
		slackErr(w, "no_text")
		return
	case utf8.RuneCountInString(a.Text) > 40000:
		slackErr(w, "msg_too_long")
		return
	}

	f, hasFault := fq.pop()
	if hasFault {
		switch f.Kind {
		case Reject:
			slackErr(w, "invalid_blocks")
			return
		case Unauthorized:
			slackErr(w, "token_revoked")
			return
		case RateLimit, Unavailable:
			slackBusy(w, f)
			return
		case ProviderError:
			writeSlack(w, errorStatus(w, f, http.StatusOK), map[string]any{"ok": false, "error": f.Code})
			return
		case HangNoCommit:
			fq.hold(r)
			writeSlack(w, http.StatusServiceUnavailable, map[string]any{"ok": false, "error": "service_unavailable"})
			return
		}
	}

	// Commit: the message is now in the channel.
	s.mu.Lock()
	m := SlackMessage{Type: "message", Text: a.Text, Blocks: blocks, BotID: tok.botID, AppID: tok.appID, User: tok.userID,
		Team: tok.team, ThreadTS: a.ThreadTS, Metadata: md}
	m.TS = s.nextTSLocked()
	ch.messages = append(ch.messages, m)
	s.posts++
	s.mu.Unlock()

	// ErrorAfterCommit: "internal_error: … It's possible some aspect of the
	// operation succeeded before the error was raised."
	if fq.afterCommit(w, r, f, hasFault, func() { slackErr(w, "internal_error") }) {
		return
	}
	out := m
	out.Metadata = nil // chat.postMessage echoes the message without metadata
	writeSlack(w, http.StatusOK, map[string]any{"ok": true, "channel": a.Channel, "ts": m.TS, "message": out})
}

// tsMicros parses a Slack ts ("1503435956.000247") or a Unix timestamp with
// an optional fraction into microseconds.
func tsMicros(ts string) (int64, bool) {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return 0, false
	}
	frac = (frac + "000000")[:6]
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, false
	}
	return s*1_000_000 + f, true
}

func (s *slackServer) conversationsHistory(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	arg := func(k string) string { return r.Form.Get(k) }
	s.mu.Lock()
	s.historyCalls++
	s.lastHistory = map[string]string{}
	for k := range r.Form {
		s.lastHistory[k] = r.Form.Get(k)
	}
	_, code := s.authLocked(r)
	s.mu.Unlock()
	if code != "" {
		slackErr(w, code)
		return
	}
	if f, ok := s.history.pop(); ok {
		switch f.Kind {
		case RateLimit, Unavailable:
			slackBusy(w, f)
			return
		case ProviderError:
			slackErr(w, f.Code)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[arg("channel")]
	if ch == nil {
		slackErr(w, "channel_not_found")
		return
	}
	inclusive := arg("inclusive") == "true" || arg("inclusive") == "1"
	withMeta := arg("include_all_metadata") == "true" || arg("include_all_metadata") == "1"
	var oldest, latest int64 = 0, 1 << 62
	for _, b := range []struct {
		name  string
		bound *int64
	}{{"oldest", &oldest}, {"latest", &latest}} {
		if v := arg(b.name); v != "" {
			ts, ok := tsMicros(v)
			if !ok {
				slackErr(w, "invalid_ts_"+b.name)
				return
			}
			*b.bound = ts
		}
	}
	limit := 100
	if v := arg("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			slackErr(w, "invalid_limit")
			return
		}
		limit = min(n, 999)
	}
	limit = min(limit, s.pageSize)
	offset := 0
	if c := arg("cursor"); c != "" {
		b, err := base64.StdEncoding.DecodeString(c)
		if err != nil {
			slackErr(w, "invalid_cursor")
			return
		}
		if offset, err = strconv.Atoi(strings.TrimPrefix(string(b), "next_ts:")); err != nil {
			slackErr(w, "invalid_cursor")
			return
		}
	}
	// conversations.history: parent messages, newest first (thread replies
	// are not part of it). conversations.replies (the
	// thread's parent and its replies, oldest first:
	// https://api.slack.com/methods/conversations.replies).
	replies := strings.HasSuffix(r.URL.Path, "conversations.replies")
	thread := arg("ts")
	if replies && thread == "" {
		slackErr(w, "thread_not_found")
		return
	}
	var window []SlackMessage
	for j := range ch.messages {
		i := len(ch.messages) - 1 - j
		if replies {
			i = j
		}
		m := ch.messages[i]
		if replies && m.TS != thread && m.ThreadTS != thread {
			continue
		}
		if !replies && m.ThreadTS != "" && m.ThreadTS != m.TS {
			continue
		}
		t, _ := tsMicros(m.TS)
		if (t > oldest || (inclusive && t == oldest)) && (t < latest || (inclusive && t == latest)) {
			if !withMeta {
				m.Metadata = nil
			}
			window = append(window, m)
		}
	}
	if offset > len(window) {
		offset = len(window)
	}
	page := window[offset:min(offset+limit, len(window))]
	hasMore := offset+limit < len(window)
	resp := map[string]any{"ok": true, "messages": page, "has_more": hasMore, "pin_count": 0}
	if hasMore {
		resp["response_metadata"] = map[string]any{"next_cursor": base64.StdEncoding.EncodeToString([]byte("next_ts:" + strconv.Itoa(offset+limit)))}
	} else {
		resp["response_metadata"] = map[string]any{"next_cursor": ""}
	}
	if page == nil {
		resp["messages"] = []SlackMessage{}
	}
	writeSlack(w, http.StatusOK, resp)
}
