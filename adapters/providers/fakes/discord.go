package fakes

import (
	"encoding/json"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Discord is a fake of Discord's Create Message.
//
// Written from Discord's documentation:
//   - POST /channels/{channel.id}/messages under the API root
//     (https://discord.com/developers/docs/resources/message#create-message),
//     JSON, "Authorization: Bot <token>"
//     (https://discord.com/developers/docs/reference#authentication) and a
//     "DiscordBot ($url, $versionNumber)" User-Agent
//     (https://discord.com/developers/docs/reference#user-agent; Discord
//     does not document its answer to a client without one: the fake
//     refuses it with 400).
//   - content up to 2000 characters, or embeds; nonce up to 25 characters;
//     with enforce_nonce true, a message by the same author with the same
//     nonce "in the past few minutes" is returned and no new message is
//     created (the fake's window: NonceWindow, default five minutes).
//   - Errors (https://discord.com/developers/docs/topics/opcodes-and-status-codes):
//     {"code", "message", "errors"}: 401 {"message": "401: Unauthorized",
//     "code": 0}, 400 50035 Invalid Form Body, 400 50006 Cannot send an
//     empty message, 403 50013 Missing Permissions, 404 10003 Unknown
//     Channel; 429 (https://discord.com/developers/docs/topics/rate-limits)
//     {"message": "You are being rate limited.", "retry_after": <seconds,
//     fractional>, "global": false} with Retry-After and X-RateLimit-Scope.
type Discord struct {
	now    func() time.Time
	faults *faultQueue
	base   string

	mu       sync.Mutex
	window   time.Duration
	bots     map[string]string // token -> bot user id
	channels map[string]bool
	messages []DiscordMessage
	requests []DiscordRequest
	nextID   int64
}

// DiscordMessage is a message the fake really created (a side effect).
type DiscordMessage struct {
	ID, ChannelID, AuthorID, Content, Nonce string
	Created                                 time.Time
}

// DiscordRequest is one Create Message the fake received (authenticated).
type DiscordRequest struct {
	ChannelID, Nonce, UserAgent string
	EnforceNonce                bool
	Status                      int
}

// NewDiscord starts a Discord fake (its URL is the API root, like
// https://discord.com/api/v10).
func NewDiscord(tb TB, now func() time.Time) *Discord {
	tb.Helper()
	if now == nil {
		now = time.Now
	}
	d := &Discord{now: now, faults: newFaultQueue(), window: 5 * time.Minute, bots: map[string]string{}, channels: map[string]bool{}, nextID: 1200000000000000000}
	srv := start(tb, http.HandlerFunc(d.serve), d.faults)
	d.base = srv.URL + "/api/v10"
	return d
}

// URL is the API root.
func (d *Discord) URL() string { return d.base }

// AddBot makes a bot token valid.
func (d *Discord) AddBot(token, userID string) { d.mu.Lock(); d.bots[token] = userID; d.mu.Unlock() }

// AddChannel creates a text channel the bots may post in.
func (d *Discord) AddChannel(id string) { d.mu.Lock(); d.channels[id] = true; d.mu.Unlock() }

// NonceWindow sets how long a nonce is checked for uniqueness.
func (d *Discord) NonceWindow(w time.Duration) { d.mu.Lock(); d.window = w; d.mu.Unlock() }

// Inject queues faults for the next messages that pass authentication and validation.
func (d *Discord) Inject(fs ...Fault) { d.faults.push(fs...) }

// Release lets held responses go.
func (d *Discord) Release() { d.faults.Release() }

// Messages is the number of messages really created.
func (d *Discord) Messages() int { d.mu.Lock(); defer d.mu.Unlock(); return len(d.messages) }

// MessagesWithNonce counts the messages created with nonce.
func (d *Discord) MessagesWithNonce(nonce string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, m := range d.messages {
		if m.Nonce == nonce {
			n++
		}
	}
	return n
}

// Requests lists the Create Message requests received, in order.
func (d *Discord) Requests() []DiscordRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]DiscordRequest(nil), d.requests...)
}

func writeDiscord(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func discordError(w http.ResponseWriter, status, code int, msg string, errs any) {
	body := map[string]any{"code": code, "message": msg}
	if errs != nil {
		body["errors"] = errs
	}
	writeDiscord(w, status, body)
}

func fieldError(field, code, msg string) map[string]any {
	return map[string]any{field: map[string]any{"_errors": []map[string]string{{"code": code, "message": msg}}}}
}

func (d *Discord) serve(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bot ")
	d.mu.Lock()
	author, ok := d.bots[token]
	d.mu.Unlock()
	if !ok {
		discordError(w, http.StatusUnauthorized, 0, "401: Unauthorized", nil)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v10/channels/")
	channel, tail, _ := strings.Cut(rest, "/")
	if !ok || tail != "messages" || r.Method != http.MethodPost {
		discordError(w, http.StatusNotFound, 0, "404: Not Found", nil)
		return
	}
	ua := r.Header.Get("User-Agent")
	req := DiscordRequest{ChannelID: channel, UserAgent: ua}
	record := func(st int) {
		req.Status = st
		d.mu.Lock()
		d.requests = append(d.requests, req)
		d.mu.Unlock()
	}
	if !strings.HasPrefix(ua, "DiscordBot (") || !strings.HasSuffix(ua, ")") {
		record(400)
		discordError(w, http.StatusBadRequest, 0, "400: Bad Request (User-Agent)", nil)
		return
	}
	var body struct {
		Content      *string           `json:"content"`
		Embeds       []json.RawMessage `json:"embeds"`
		Nonce        json.RawMessage   `json:"nonce"`
		EnforceNonce bool              `json:"enforce_nonce"`
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" || json.Unmarshal(raw, &body) != nil {
		record(400)
		discordError(w, http.StatusBadRequest, 50109, "The request body contains invalid JSON.", nil)
		return
	}
	var nonce string
	if len(body.Nonce) > 0 && json.Unmarshal(body.Nonce, &nonce) != nil {
		var n json.Number
		if json.Unmarshal(body.Nonce, &n) == nil {
			nonce = n.String()
		}
	}
	req.Nonce, req.EnforceNonce = nonce, body.EnforceNonce
	d.mu.Lock()
	known := d.channels[channel]
	d.mu.Unlock()
	content := ""
	if body.Content != nil {
		content = *body.Content
	}
	switch {
	case !known:
		record(404)
		discordError(w, http.StatusNotFound, 10003, "Unknown Channel", nil)
		return
	case content == "" && len(body.Embeds) == 0:
		record(400)
		discordError(w, http.StatusBadRequest, 50006, "Cannot send an empty message", nil)
		return
	case utf8.RuneCountInString(content) > 2000:
		record(400)
		discordError(w, http.StatusBadRequest, 50035, "Invalid Form Body", fieldError("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length."))
		return
	case len(nonce) > 25:
		record(400)
		discordError(w, http.StatusBadRequest, 50035, "Invalid Form Body", fieldError("nonce", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length."))
		return
	}
	// A repeated nonce within the window returns the existing message.
	if body.EnforceNonce && nonce != "" {
		d.mu.Lock()
		var found *DiscordMessage
		for i := range d.messages {
			m := &d.messages[i]
			if m.AuthorID == author && m.Nonce == nonce && d.now().Sub(m.Created) < d.window {
				found = m
			}
		}
		var msg map[string]any
		if found != nil {
			msg = d.messageJSON(*found)
		}
		d.mu.Unlock()
		if found != nil {
			record(200)
			writeDiscord(w, http.StatusOK, msg)
			return
		}
	}
	f, hasFault := d.faults.pop()
	if hasFault {
		switch f.Kind {
		case Reject:
			record(400)
			discordError(w, http.StatusBadRequest, 50035, "Invalid Form Body", fieldError("embeds", "BASE_TYPE_BAD_LENGTH", "Must be between 0 and 10 in length."))
			return
		case Unauthorized:
			record(403)
			discordError(w, http.StatusForbidden, 50013, "Missing Permissions", nil)
			return
		case RateLimit:
			secs := f.RetryAfter.Seconds()
			if secs == 0 {
				secs = 0.25
			}
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(secs))))
			w.Header().Set("X-RateLimit-Scope", "user")
			record(429)
			writeDiscord(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": secs, "global": false})
			return
		case Unavailable:
			record(502)
			discordError(w, http.StatusBadGateway, 0, "502: Bad Gateway", nil)
			return
		case ProviderError:
			st := f.Status
			if st == 0 {
				st = http.StatusBadRequest
			}
			code, _ := strconv.Atoi(f.Code)
			record(st)
			discordError(w, st, code, f.Description, nil)
			return
		case HangNoCommit:
			d.faults.hold(r)
			record(502)
			discordError(w, http.StatusBadGateway, 0, "502: Bad Gateway", nil)
			return
		}
	}
	d.mu.Lock()
	d.nextID++
	m := DiscordMessage{ID: strconv.FormatInt(d.nextID, 10), ChannelID: channel, AuthorID: author, Content: content, Nonce: nonce, Created: d.now()}
	d.messages = append(d.messages, m)
	msg := d.messageJSON(m)
	d.mu.Unlock()
	record(200)
	if d.faults.afterCommit(w, r, f, hasFault, func() {
		discordError(w, http.StatusInternalServerError, 0, "500: Internal Server Error", nil)
	}) {
		return
	}
	writeDiscord(w, http.StatusOK, msg)
}

// messageJSON is the Message object (https://discord.com/developers/docs/resources/message#message-object).
func (d *Discord) messageJSON(m DiscordMessage) map[string]any {
	out := map[string]any{
		"id": m.ID, "type": 0, "channel_id": m.ChannelID, "content": m.Content, "tts": false,
		"timestamp": m.Created.UTC().Format(time.RFC3339Nano), "edited_timestamp": nil,
		"author":   map[string]any{"id": m.AuthorID, "username": "outbox", "bot": true},
		"mentions": []any{}, "attachments": []any{}, "embeds": []any{}, "pinned": false,
	}
	if m.Nonce != "" {
		out["nonce"] = m.Nonce
	}
	return out
}
