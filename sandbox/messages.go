package sandbox

import (
	"encoding/json"
	"net/http"
	"time"
)

// ActionUpdateMessage sets the text of a message an earlier send created:
// target is its "sbx_…" id, payload {"text": …}. Repeating it changes
// nothing (a set-to-value action); each commit still counts as an effect.
const ActionUpdateMessage = "update_message"

// MessageText is a message's current text (GET /_sandbox/messages/{id}).
type MessageText struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	// Updates counts the update_message commits applied to it.
	Updates int `json:"updates"`
	// SetBy is the intent whose commit set the text last.
	SetBy     string    `json:"setBy,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// setTextLocked records the text a committed send sets: a new message's
// payload text under its new id, or an update's text on its target.
func (s *Server) setTextLocked(req MessageRequest, newID string, now time.Time) {
	var p struct {
		Text *string `json:"text"`
	}
	_ = json.Unmarshal(req.Payload, &p)
	if s.texts == nil {
		s.texts = map[string]MessageText{}
	}
	if req.Action == ActionUpdateMessage {
		cur := s.texts[req.Target]
		if p.Text != nil {
			cur.Text = *p.Text
		}
		cur.Updates++
		cur.SetBy, cur.UpdatedAt = req.IntentID, now
		s.texts[req.Target] = cur
		return
	}
	if p.Text != nil {
		s.texts[newID] = MessageText{ID: newID, Text: *p.Text, SetBy: req.IntentID, UpdatedAt: now}
	}
}

// handleMessageText is GET /_sandbox/messages/{id}: a message's current text.
func (s *Server) handleMessageText(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	m, ok := s.texts[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no message with that id", nil)
		return
	}
	writeJSON(w, http.StatusOK, m)
}
