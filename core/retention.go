package core

import (
	"errors"
	"time"
)

// ErrPruned: the intent ended, its window passed and only its tombstone is
// left (its history is in the archive, not the table).
var ErrPruned = errors.New("intent pruned after its retention window")

// Pruned is what a tombstone keeps of an intent after its window: enough to
// answer a replay with the first outcome and to find the archived record.
type Pruned struct {
	// EndedAt is when the intent reached its final status.
	EndedAt time.Time `json:"endedAt"`
	// Archive locates the full archived record ("s3://bucket/key#line"), ""
	// when the archive is off.
	Archive string `json:"archive,omitempty"`
}
