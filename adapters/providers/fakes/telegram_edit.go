package fakes

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// editMessageText (https://core.telegram.org/bots/api#editmessagetext):
// chat_id and message_id name a message the bot sent; text is the new text.
// On success "the edited Message is returned". The Bot API refuses an edit
// that changes nothing with 400 "Bad Request: message is not modified: …",
// and an unknown message with 400 "Bad Request: message to edit not found".
// Each accepted edit is one side effect, counted by Edits.
func (t *Telegram) editMessageText(w http.ResponseWriter, r *http.Request, botID int64) {
	var a struct {
		ChatID    json.RawMessage `json:"chat_id"`
		MessageID int64           `json:"message_id"`
		Text      string          `json:"text"`
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if mt != "application/json" || err != nil || json.Unmarshal(body, &a) != nil {
		writeTelegramError(w, http.StatusBadRequest, "Bad Request: can't parse JSON object", nil)
		return
	}
	chatKey := strings.Trim(string(a.ChatID), `"`)
	t.mu.Lock()
	c := t.chats[chatKey]
	idx := -1
	for i, m := range t.messages {
		if c != nil && m.ChatID == c.id && m.MessageID == a.MessageID {
			idx = i
		}
	}
	var same bool
	if idx >= 0 {
		same = t.messages[idx].Text == a.Text
	}
	t.mu.Unlock()
	switch {
	case c == nil:
		writeTelegramError(w, http.StatusBadRequest, "Bad Request: chat not found", nil)
		return
	case strings.TrimSpace(a.Text) == "":
		writeTelegramError(w, http.StatusBadRequest, "Bad Request: message text is empty", nil)
		return
	case utf8.RuneCountInString(a.Text) > 4096:
		writeTelegramError(w, http.StatusBadRequest, "Bad Request: MESSAGE_TOO_LONG", nil)
		return
	case idx < 0:
		writeTelegramError(w, http.StatusBadRequest, "Bad Request: message to edit not found", nil)
		return
	case same:
		writeTelegramError(w, http.StatusBadRequest, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message", nil)
		return
	}
	f, hasFault := t.faults.pop()
	if hasFault {
		switch f.Kind {
		case RateLimit:
			secs := int(f.RetryAfter / time.Second)
			writeTelegramError(w, http.StatusTooManyRequests, "Too Many Requests: retry after "+itoa(secs), map[string]any{"retry_after": secs})
			return
		case Unavailable, HangNoCommit:
			writeTelegramError(w, http.StatusBadGateway, "Bad Gateway", nil)
			return
		}
	}
	t.mu.Lock()
	t.messages[idx].Text = a.Text
	t.messages[idx].EditDate = t.now().Unix()
	m := t.messages[idx]
	t.edits++
	kind := c.kind
	t.mu.Unlock()
	if t.faults.afterCommit(w, r, f, hasFault, func() {
		writeTelegramError(w, http.StatusInternalServerError, "Internal Server Error", nil)
	}) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": map[string]any{
		"message_id": m.MessageID, "from": map[string]any{"id": botID, "is_bot": true, "first_name": "Outbox"},
		"chat": map[string]any{"id": m.ChatID, "type": kind}, "date": m.Date, "edit_date": m.EditDate, "text": m.Text,
	}})
}

// Edits is the number of editMessageText calls that changed a message.
func (t *Telegram) Edits() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.edits
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
