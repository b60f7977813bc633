package fakes

import (
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

// Telegram is a fake of the Telegram Bot API's sendMessage.
//
// Shapes follow https://core.telegram.org/bots/api#making-requests: requests go
// to /bot<token>/<method>; every answer is a JSON object with "ok"; success
// carries "result" (for sendMessage the sent Message:
// https://core.telegram.org/bots/api#sendmessage, https://core.telegram.org/bots/api#message);
// failure carries "error_code", "description" and optionally "parameters"
// (https://core.telegram.org/bots/api#responseparameters: "retry_after",
// "migrate_to_chat_id"). The error texts are the ones the Bot API returns
// ("Unauthorized", "Bad Request: chat not found", "Forbidden: bot was blocked
// by the user", "Too Many Requests: retry after N", ...).
type Telegram struct {
	now    func() time.Time
	faults *faultQueue
	base   string

	mu       sync.Mutex
	tokens   map[string]int64 // token -> bot user id
	chats    map[string]*tgChat
	messages []TelegramMessage
	edits    int
}

type tgChat struct {
	id       int64
	kind     string
	blocked  bool // the user blocked the bot
	kicked   bool // the bot was removed from the group
	migrated int64
	nextID   int64
}

// TelegramMessage is a message the fake really sent.
type TelegramMessage struct {
	ChatID    int64  `json:"chat_id"`
	MessageID int64  `json:"message_id"`
	Text      string `json:"text"`
	Date      int64  `json:"date"`
	EditDate  int64  `json:"edit_date,omitempty"`
}

// NewTelegram starts a Telegram fake.
func NewTelegram(tb TB, now func() time.Time) *Telegram {
	tb.Helper()
	if now == nil {
		now = time.Now
	}
	t := &Telegram{now: now, faults: newFaultQueue(), tokens: map[string]int64{}, chats: map[string]*tgChat{}}
	srv := start(tb, http.HandlerFunc(t.serve), t.faults)
	t.base = srv.URL
	return t
}

// URL is the Bot API base URL (the equivalent of https://api.telegram.org).
func (t *Telegram) URL() string { return t.base }

// AddBot makes a token valid.
func (t *Telegram) AddBot(token string, botUserID int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens[token] = botUserID
}

// RevokeBot makes the token answer 401 Unauthorized (a token revoked in @BotFather).
func (t *Telegram) RevokeBot(token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.tokens, token)
}

// AddChat creates a chat; kind is "private", "group", "supergroup" or "channel".
func (t *Telegram) AddChat(id int64, kind string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.chats[strconv.FormatInt(id, 10)] = &tgChat{id: id, kind: kind}
}

// BlockBot makes the private chat answer 403 "Forbidden: bot was blocked by the user".
func (t *Telegram) BlockBot(chatID int64) { t.with(chatID, func(c *tgChat) { c.blocked = true }) }

// KickBot makes the group answer 403 "Forbidden: bot was kicked from the group chat".
func (t *Telegram) KickBot(chatID int64) { t.with(chatID, func(c *tgChat) { c.kicked = true }) }

// MigrateChat makes the group answer 400 with parameters.migrate_to_chat_id.
func (t *Telegram) MigrateChat(chatID, to int64) { t.with(chatID, func(c *tgChat) { c.migrated = to }) }

func (t *Telegram) with(id int64, f func(*tgChat)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.chats[strconv.FormatInt(id, 10)]; c != nil {
		f(c)
	}
}

// Inject queues faults for the next sendMessage calls.
func (t *Telegram) Inject(fs ...Fault) { t.faults.push(fs...) }

// Release lets held responses go.
func (t *Telegram) Release() { t.faults.Release() }

// Sends is the number of messages really sent (side effects).
func (t *Telegram) Sends() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.messages)
}

// SendsWith counts messages sent to chatID whose text contains substr.
func (t *Telegram) SendsWith(chatID int64, substr string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, m := range t.messages {
		if m.ChatID == chatID && strings.Contains(m.Text, substr) {
			n++
		}
	}
	return n
}

// Messages returns a copy of the messages sent.
func (t *Telegram) Messages() []TelegramMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TelegramMessage(nil), t.messages...)
}

// TelegramError writes a Bot API error object.
func writeTelegramError(w http.ResponseWriter, code int, desc string, params map[string]any) {
	body := map[string]any{"ok": false, "error_code": code, "description": desc}
	if params != nil {
		body["parameters"] = params
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

type sendMessageArgs struct {
	ChatID json.RawMessage `json:"chat_id"`
	Text   string          `json:"text"`
}

func (t *Telegram) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		writeTelegramError(w, http.StatusNotFound, "Not Found", nil)
		return
	}
	t.mu.Lock()
	botID, known := t.tokens[token]
	t.mu.Unlock()
	if !known {
		writeTelegramError(w, http.StatusUnauthorized, "Unauthorized", nil)
		return
	}
	// "All methods in the Bot API are case-insensitive."
	if strings.EqualFold(method, "editMessageText") {
		t.editMessageText(w, r, botID)
		return
	}
	if !strings.EqualFold(method, "sendMessage") {
		writeTelegramError(w, http.StatusNotFound, "Not Found", nil)
		return
	}
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		writeTelegramError(w, http.StatusMethodNotAllowed, "Method Not Allowed", nil)
		return
	}
	var a sendMessageArgs
	var chatKey string
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || json.Unmarshal(body, &a) != nil {
			writeTelegramError(w, http.StatusBadRequest, "Bad Request: can't parse JSON object", nil)
			return
		}
		var n json.Number
		var s string
		switch {
		case json.Unmarshal(a.ChatID, &s) == nil:
			chatKey = s
		case json.Unmarshal(a.ChatID, &n) == nil:
			chatKey = n.String()
		}
	} else {
		_ = r.ParseForm()
		chatKey, a.Text = r.Form.Get("chat_id"), r.Form.Get("text")
	}
	t.mu.Lock()
	c := t.chats[chatKey]
	var blocked, kicked bool
	var migrated int64
	if c != nil {
		blocked, kicked, migrated = c.blocked, c.kicked, c.migrated
	}
	t.mu.Unlock()
	switch {
	case chatKey == "":
		writeTelegramError(w, http.StatusBadRequest, "Bad Request: chat_id is empty", nil)
		return
	case c == nil:
		writeTelegramError(w, http.StatusBadRequest, "Bad Request: chat not found", nil)
		return
	case migrated != 0:
		writeTelegramError(w, http.StatusBadRequest, "Bad Request: group chat was upgraded to a supergroup chat",
			map[string]any{"migrate_to_chat_id": migrated})
		return
	case blocked:
		writeTelegramError(w, http.StatusForbidden, "Forbidden: bot was blocked by the user", nil)
		return
	case kicked:
		writeTelegramError(w, http.StatusForbidden, "Forbidden: bot was kicked from the group chat", nil)
		return
	case strings.TrimSpace(a.Text) == "":
		writeTelegramError(w, http.StatusBadRequest, "Bad Request: message text is empty", nil)
		return
	case utf8.RuneCountInString(a.Text) > 4096:
		writeTelegramError(w, http.StatusBadRequest, "Bad Request: message is too long", nil)
		return
	}

	f, hasFault := t.faults.pop()
	if hasFault {
		switch f.Kind {
		case Reject:
			writeTelegramError(w, http.StatusBadRequest, "Bad Request: can't parse entities: Unsupported start tag \"b\" at byte offset 0", nil)
			return
		case Unauthorized:
			writeTelegramError(w, http.StatusForbidden, "Forbidden: bot was blocked by the user", nil)
			return
		case RateLimit:
			secs := int(f.RetryAfter / time.Second)
			writeTelegramError(w, http.StatusTooManyRequests, fmt.Sprintf("Too Many Requests: retry after %d", secs),
				map[string]any{"retry_after": secs})
			return
		case Unavailable:
			writeTelegramError(w, http.StatusBadGateway, "Bad Gateway", nil)
			return
		case ProviderError:
			st := f.Status
			if st == 0 {
				st = http.StatusBadRequest
			}
			var params map[string]any
			if f.RetryAfter > 0 {
				params = map[string]any{"retry_after": int(f.RetryAfter / time.Second)}
			}
			writeTelegramError(w, st, f.Description, params)
			return
		case HangNoCommit:
			t.faults.hold(r)
			writeTelegramError(w, http.StatusBadGateway, "Bad Gateway", nil)
			return
		}
	}

	t.mu.Lock()
	c.nextID++
	m := TelegramMessage{ChatID: c.id, MessageID: c.nextID, Text: a.Text, Date: t.now().Unix()}
	t.messages = append(t.messages, m)
	kind := c.kind
	t.mu.Unlock()

	if t.faults.afterCommit(w, r, f, hasFault, func() {
		writeTelegramError(w, http.StatusInternalServerError, "Internal Server Error", nil)
	}) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": map[string]any{
		"message_id": m.MessageID,
		"from":       map[string]any{"id": botID, "is_bot": true, "first_name": "Outbox"},
		"chat":       map[string]any{"id": m.ChatID, "type": kind},
		"date":       m.Date,
		"text":       m.Text,
	}})
}
