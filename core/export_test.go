package core

// The in-memory stores core's unit tests use, for the contract suites in
// store_contract_test.go (package core_test).

func NewMemStoreForContract() IntentStore { return newMemStore() }

func NewMemRegistryForContract() *memRegistry { return newMemRegistry() }

func NewMemWebhooksForContract() (WebhookStore, IntentStore) {
	s := newMemStore()
	return newMemWebhooks(s), s
}
