package wire

import (
	"testing"
	"time"

	"github.com/botharness/outbox/core/botlimit"
)

func TestParseBotLimits(t *testing.T) {
	c, err := ParseBotLimits("50/1s", "1000", `{"slow-bot":{"rate":"5/1m"},"free-bot":{"rate":"","maxOpen":0},"small-bot":{"maxOpen":10}}`)
	if err != nil {
		t.Fatal(err)
	}
	for bot, want := range map[string]botlimit.BotLimits{
		"any-bot":   {Rate: botlimit.BotRate{N: 50, Per: time.Second}, MaxOpen: 1000},
		"slow-bot":  {Rate: botlimit.BotRate{N: 5, Per: time.Minute}, MaxOpen: 1000},
		"free-bot":  {},
		"small-bot": {Rate: botlimit.BotRate{N: 50, Per: time.Second}, MaxOpen: 10},
	} {
		if got := c.For(bot); got != want {
			t.Errorf("%s: %+v, want %+v", bot, got, want)
		}
	}
	if c, err := ParseBotLimits("", "", ""); err != nil || c.Enabled() {
		t.Fatalf("unset: %+v %v, want no limits", c, err)
	}
	for _, bad := range [][3]string{{"50", "", ""}, {"", "-1", ""}, {"", "many", ""}, {"", "", `{"b":{"rate":"x"}}`}, {"", "", `{"b":{"burst":3}}`}, {"", "", `[`}} {
		if _, err := ParseBotLimits(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
