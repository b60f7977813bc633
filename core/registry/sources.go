// Source revisions: bots record the current revision of what they answer, so
// revalidation (revalidate.go) can tell a superseded intent.
package registry

import (
	"context"
	"fmt"

	"github.com/botharness/outbox/core"
)

// Bots record the current revision of the sources they answer.

// SourceUpdate is a bot's report of a source's revision (PUT /v1/sources/{sourceId}).
type SourceUpdate struct {
	Revision *int64
	Deleted  bool
}

// SourceResult is the answer to a source update: the current state and
// whether this update changed it (false for an older revision: not an error).
type SourceResult struct {
	core.SourceState
	Applied bool
}

// Sources records the revisions of the sources bots answer.
type Sources struct {
	Store core.SourceStore
	Clock core.Clock
}

// Put records a source revision for the calling bot.
func (s *Sources) Put(ctx context.Context, p core.Principal, sourceID string, u SourceUpdate) (*SourceResult, error) {
	if p.Kind != core.PrincipalBot {
		return nil, fmt.Errorf("%w: only bots record source revisions (a source belongs to the bot that answers it)", core.ErrForbidden)
	}
	if err := core.CheckID("sourceId", sourceID); err != nil {
		return nil, err
	}
	if u.Revision == nil && !u.Deleted {
		return nil, invalid("revision", "revision is required (it may be omitted only with \"deleted\": true)")
	}
	if u.Revision != nil && *u.Revision < 0 {
		return nil, invalid("revision", "revision must not be negative")
	}
	st, applied, err := s.Store.AdvanceSource(ctx, p.Name, sourceID, u.Revision, u.Deleted, s.Clock.Now())
	if err != nil {
		return nil, err
	}
	return &SourceResult{SourceState: *st, Applied: applied}, nil
}
