package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Persistence: a sandbox opened with Open keeps its state in one JSON file
// (`make run`: $OUTBOX_DATA_DIR/sandbox/state.json, beside DynamoDB Local's
// data) and reads it back on the next start, so a restart keeps:
//
//   - every effect (GET /_sandbox/effects, and lookups by idempotency key),
//     and each key's idempotency record (replays within retention);
//   - every account's capabilities, token, fault queue, webhook sender
//     (URL, secret, duplicates, delay, statuses), rate-limit and outage modes;
//   - the id counters: message ids (sbx_N), event ids (evt_N) and user
//     message ids (usr_N) continue where they stopped, so no id is issued
//     twice, not across restarts and not after a crash.
//
// It does not keep: requests held by a hang fault (they end with the
// process, without committing), webhook deliveries scheduled but not yet
// sent (send one by hand with POST /_sandbox/emit), and the delivery and
// request logs (GET /_sandbox/webhooks, /_sandbox/requests). POST
// /_sandbox/reset forgets the state as always, counters excepted.
//
// The file is rewritten (to a temporary file, then renamed over the old one)
// after every commit, before the provider's answer is sent, and before any
// event or message id is used, so a crash loses nothing that was answered.

// stateFileVersion is the persisted format's version; a file of another
// version is refused rather than misread (Open fails).
const stateFileVersion = 1

type persistedState struct {
	Version   int                    `json:"version"`
	NextID    int64                  `json:"nextMessageId"`
	NextEvent int64                  `json:"nextEventId"`
	NextUser  int64                  `json:"nextUserMessageId"`
	Effects   []Effect               `json:"effects"`
	Texts     map[string]MessageText `json:"texts,omitempty"`
	Accounts  []persistedAccount     `json:"accounts"`
}

type persistedAccount struct {
	Name        string                  `json:"name"`
	Caps        Capabilities            `json:"capabilities"`
	Token       string                  `json:"token,omitempty"`
	Faults      []Fault                 `json:"faults,omitempty"`
	Hook        *WebhookConfig          `json:"webhook,omitempty"`
	Rate        RateLimitMode           `json:"rateLimit"`
	OutageUntil time.Time               `json:"outageUntil"`
	Keys        map[string]persistedKey `json:"keys,omitempty"`
}

type persistedKey struct {
	FirstBody   []byte    `json:"firstBody,omitempty"`
	Effects     int       `json:"effects"`
	HasRecord   bool      `json:"hasRecord,omitempty"`
	RecordBody  []byte    `json:"recordBody,omitempty"`
	FirstCommit time.Time `json:"firstCommit"`
}

type stateFile struct {
	path string
	mu   sync.Mutex // one writer at a time
	err  error      // the last write's error (reported by Close)
}

// Open is New with persistence: it loads the state saved at path (if the file
// exists) and saves it there from then on. A file that cannot be read is an
// error, never a silent fresh start (that would reissue ids).
func Open(path string, now func() time.Time, opts ...Option) (*Server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sandbox state: %w", err)
	}
	s := New(now, opts...)
	s.state = &stateFile{path: path}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("sandbox state: %w", err)
	default:
		var ps persistedState
		if err := json.Unmarshal(b, &ps); err != nil {
			return nil, fmt.Errorf("sandbox state %s: %w (delete it to start clean)", path, err)
		}
		if ps.Version != stateFileVersion {
			return nil, fmt.Errorf("sandbox state %s: version %d, want %d (delete it to start clean)", path, ps.Version, stateFileVersion)
		}
		s.restore(ps)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.saveLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// StatePath is the file a persistent sandbox saves to ("" when not persistent).
func (s *Server) StatePath() string {
	if s.state == nil {
		return ""
	}
	return s.state.path
}

func (s *Server) restore(ps persistedState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID = ps.NextID
	s.wh.mu.Lock()
	s.wh.nextEvent, s.wh.nextUser = ps.NextEvent, ps.NextUser
	s.wh.mu.Unlock()
	s.effects = ps.Effects
	s.texts = ps.Texts
	for _, pa := range ps.Accounts {
		a := newAccount(pa.Name)
		a.caps, a.token, a.faults, a.hook = pa.Caps, pa.Token, pa.Faults, pa.Hook
		a.modes.rate, a.modes.outageUntil = pa.Rate, pa.OutageUntil
		for k, pk := range pa.Keys {
			a.keys[k] = &keyState{firstBody: pk.FirstBody, effects: pk.Effects, hasRecord: pk.HasRecord,
				recordBody: pk.RecordBody, firstCommit: pk.FirstCommit}
		}
		s.accounts[pa.Name] = a
	}
}

// saveLocked writes the state file (s.mu held); a no-op without persistence.
func (s *Server) saveLocked() error {
	if s.state == nil {
		return nil
	}
	ps := persistedState{Version: stateFileVersion, NextID: s.nextID, Effects: s.effects, Texts: s.texts}
	s.wh.mu.Lock()
	ps.NextEvent, ps.NextUser = s.wh.nextEvent, s.wh.nextUser
	s.wh.mu.Unlock()
	for _, a := range s.accounts {
		pa := persistedAccount{Name: a.name, Caps: a.caps, Token: a.token, Faults: a.faults, Hook: a.hook,
			Rate: a.modes.rate, OutageUntil: a.modes.outageUntil}
		for k, ks := range a.keys {
			if ks.effects == 0 && !ks.hasRecord {
				continue // only in-flight bookkeeping
			}
			if pa.Keys == nil {
				pa.Keys = map[string]persistedKey{}
			}
			pa.Keys[k] = persistedKey{FirstBody: ks.firstBody, Effects: ks.effects, HasRecord: ks.hasRecord,
				RecordBody: ks.recordBody, FirstCommit: ks.firstCommit}
		}
		ps.Accounts = append(ps.Accounts, pa)
	}
	sort.Slice(ps.Accounts, func(i, j int) bool { return ps.Accounts[i].Name < ps.Accounts[j].Name })
	b, err := json.Marshal(ps)
	if err != nil {
		return fmt.Errorf("sandbox state: %w", err)
	}
	st := s.state
	st.mu.Lock()
	defer st.mu.Unlock()
	tmp := st.path + ".tmp"
	err = os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, st.path)
	}
	if err != nil {
		st.err = fmt.Errorf("sandbox state: %w", err)
		s.log.Error("sandbox state not saved", "path", st.path, "err", err.Error())
		return st.err
	}
	return nil
}

// save is saveLocked for callers not holding s.mu.
func (s *Server) save() {
	if s.state == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.saveLocked()
}

// newEventID issues the next event id and, when persistent, saves the
// counter before the id is used.
func (s *Server) newEventID() string {
	id := s.wh.newEventID()
	s.save()
	return id
}
