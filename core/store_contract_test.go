package core_test

import (
	"testing"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/storetest"
	"github.com/botharness/outbox/core/webhook"
)

// The in-memory stores run the same contract suites as the DynamoDB adapter
// (adapters/dynamo/contract_test.go): core's tests assume what they check.

func TestMemIntentStoreContract(t *testing.T) {
	storetest.RunIntentStore(t, storetest.IntentFixture{New: func(*testing.T) core.IntentStore { return core.NewMemStoreForContract() }})
}

func TestMemRegistryContract(t *testing.T) {
	storetest.RunRegistry(t, func(*testing.T) storetest.Registry { return core.NewMemRegistryForContract() })
}

func TestMemWebhookStoreContract(t *testing.T) {
	storetest.RunWebhookStore(t, func(*testing.T) (webhook.WebhookStore, core.IntentStore) {
		s := core.NewRig(core.Capabilities{}).Store
		return newMemWebhooks(s), s
	})
}
