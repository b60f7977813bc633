package dynamo

import (
	"context"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/storetest"
	"github.com/botharness/outbox/core/webhook"
)

// The DynamoDB stores run the same contract suites as core's in-memory stores
// (core/store_contract_test.go), on DynamoDB Local.

func TestIntentStoreContract(t *testing.T) {
	t.Parallel()
	storetest.RunIntentStore(t, storetest.IntentFixture{
		New: func(t *testing.T) core.IntentStore {
			db, table := testTable(t, "ct")
			return New(db, table)
		},
		HumanShard: func(id string) int { return shardOf(id, DefaultSharding.Repair) },
		Barrier: func(t *testing.T, s core.IntentStore, bot string, up bool) {
			st := s.(*Store)
			var err error
			if up {
				err = st.RaiseBarrier(context.Background(), bot, "backup-1", storetest.T0, time.Hour)
			} else {
				err = st.LiftBarrier(context.Background(), bot, "backup-1")
			}
			if err != nil {
				t.Fatal(err)
			}
		},
	})
}

func TestRegistryContract(t *testing.T) {
	t.Parallel()
	storetest.RunRegistry(t, func(t *testing.T) storetest.Registry {
		db, table := testTable(t, "cr")
		return NewRegistry(db, table)
	})
}

func TestWebhookStoreContract(t *testing.T) {
	t.Parallel()
	storetest.RunWebhookStore(t, func(t *testing.T) (webhook.WebhookStore, core.IntentStore) {
		db, table := testTable(t, "cw")
		return NewWebhooks(db, table), New(db, table)
	})
}

func TestValueMarksContract(t *testing.T) {
	t.Parallel()
	storetest.RunValueMarks(t, func(t *testing.T) core.ValueMarks {
		db, table := testTable(t, "cv")
		return NewValueMarks(db, table)
	})
}
