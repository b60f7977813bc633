package intake

import (
	"context"
	"time"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/registry"
)

// Sources serves PUT /v1/sources/{sourceId}: a bot reports the current
// revision of a source it answers, {"revision": n, "deleted": bool}. The
// source is scoped to the calling bot. Revisions only move forward; an older
// revision answers 200 with the current state and "applied": false.
type Sources struct {
	Sources *registry.Sources
}

var _ SourceUpdater = (*Sources)(nil)

// PutSourceRevision decodes the body strictly and records the revision.
func (s *Sources) PutSourceRevision(ctx context.Context, p core.Principal, sourceID string, body []byte) (any, error) {
	if len(body) > 16<<10 {
		return nil, &core.ValidationError{Code: core.CodePayloadTooLarge, Message: "the body is over 16 KiB"}
	}
	var u SourceBody
	if err := httpjson.DecodeStrict(body, &u); err != nil {
		return nil, err
	}
	res, err := s.Sources.Put(ctx, p, sourceID, registry.SourceUpdate{Revision: u.Revision, Deleted: u.Deleted})
	if err != nil {
		return nil, err
	}
	return SourceResultBody{SourceID: res.ID, Revision: res.Revision, Deleted: res.Deleted, UpdatedAt: res.UpdatedAt, Applied: res.Applied}, nil
}

// SourceBody is the body of PUT /v1/sources/{sourceId}.
type SourceBody struct {
	Revision *int64 `json:"revision"`
	Deleted  bool   `json:"deleted,omitempty"`
}

// SourceResultBody answers PUT /v1/sources/{sourceId}: the source's current
// state and whether this update changed it.
type SourceResultBody struct {
	SourceID  string    `json:"sourceId"`
	Revision  int64     `json:"revision"`
	Deleted   bool      `json:"deleted"`
	UpdatedAt time.Time `json:"updatedAt"`
	Applied   bool      `json:"applied"`
}
