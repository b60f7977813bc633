package stack

import (
	"errors"

	"github.com/botharness/outbox/core"
)

func isNotFound(err error) bool { return errors.Is(err, core.ErrNotFound) }
