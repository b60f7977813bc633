package wire

import (
	"errors"
	"testing"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/dynamo"
)

// The app refuses a sharding its writers would not all follow, before it
// builds anything.
func TestNewRefusesAFixedShardCount(t *testing.T) {
	t.Parallel()
	_, err := New(awsconfig.Clients{}, Config{Table: "t", Sharding: dynamo.Sharding{Repair: 4, Profile: 4}})
	if !errors.Is(err, dynamo.ErrShardingFixed) {
		t.Fatalf("New with a profile shard count: %v, want ErrShardingFixed", err)
	}
}
