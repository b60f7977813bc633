package core

import (
	"time"
)

// SourceState is the current revision of a source a bot answers.
type SourceState struct {
	Bot       string
	ID        string
	Revision  int64
	Deleted   bool
	UpdatedAt time.Time
}
