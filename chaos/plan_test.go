package chaos

import (
	"testing"

	"github.com/botharness/outbox/core"
)

// Large payloads are in the mix: across seeds about a third of the intents
// carry a payload over the inline limit (so it goes through the S3 claim
// check), and drawing them leaves every other draw of a seed unchanged.
func TestPlanMixesLargePayloads(t *testing.T) {
	large, total := 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		specs, _, _ := Plan(seed, Config{})
		for _, s := range specs {
			total++
			if s.Large > core.PayloadInlineMax {
				large++
			}
		}
	}
	if frac := float64(large) / float64(total); frac < 0.2 || frac > 0.45 {
		t.Fatalf("%d of %d intents carry a large payload (%.2f), want about a third", large, total, frac)
	}
}
