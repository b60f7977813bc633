package storetest

import (
	"testing"

	"github.com/botharness/outbox/core"
)

func TestMemValueMarksContract(t *testing.T) {
	RunValueMarks(t, func(*testing.T) core.ValueMarks { return &MemValueMarks{} })
}
