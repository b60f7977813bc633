package dynamo

import (
	"errors"
	"testing"
)

// Only the repair shard count may be configured: the others are also read
// where no store's sharding reaches, so a table whose writers disagreed on
// them would key items where its readers never look.
func TestOnlyTheRepairShardCountIsConfigurable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		s    Sharding
		ok   bool
	}{
		{"zero: the defaults", Sharding{}, true},
		{"repair lowered", Sharding{Repair: 4}, true},
		{"negative repair", Sharding{Repair: -1}, false},
		{"profile", Sharding{Profile: 4}, false},
		{"barrier", Sharding{Repair: 4, Barrier: 4}, false},
		{"webhook", Sharding{Webhook: 4}, false},
		{"registry", Sharding{Registry: 4}, false},
	} {
		err := CheckSharding(c.s)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrShardingFixed)) {
			t.Errorf("%s: CheckSharding(%+v) = %v", c.name, c.s, err)
		}
		if c.ok {
			got := c.s.orDefault()
			want := DefaultSharding
			if c.s.Repair > 0 {
				want.Repair = c.s.Repair
			}
			if got != want {
				t.Errorf("%s: orDefault = %+v, want %+v", c.name, got, want)
			}
		}
	}
}
