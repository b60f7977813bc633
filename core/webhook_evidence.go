package core

// What webhook entries on an intent's history prove. The webhook package
// (core/webhook) writes them; the dispatcher and the history readers
// consult them here.

// Webhook history entries (Attempt.Trigger / Attempt.Result).
const (
	TriggerWebhook Trigger       = "webhook"
	ResultAck      AttemptResult = "provider-ack"
	ResultStatus   AttemptResult = "provider-status"
	ResultEcho     AttemptResult = "provider-echo"
	// ResultFailure records a provider's failure status (EventFailure):
	// evidence for a person, no status change.
	ResultFailure AttemptResult = "provider-failure"
)

// Delivery statuses, in the only order they may move.
const (
	DeliverySent      = "sent"
	DeliveryDelivered = "delivered"
	DeliveryRead      = "read"
)

// DeliveryRank orders delivery statuses; 0 for anything unknown.
func DeliveryRank(s string) int {
	switch s {
	case DeliverySent:
		return 1
	case DeliveryDelivered:
		return 2
	case DeliveryRead:
		return 3
	}
	return 0
}

// ProviderAcknowledged returns the first webhook entry that proves the
// intent's effect (a matched acknowledgement or status), if any.
func ProviderAcknowledged(in *Intent) (Attempt, bool) {
	if in.History != nil && in.History.Ack != nil {
		return *in.History.Ack, true
	}
	for _, a := range in.Attempts {
		if provesEffect(a) {
			return a, true
		}
	}
	return Attempt{}, false
}

// DeliveryStatus is the furthest delivery status the provider reported for
// the intent ("" if none). It only ever moves forward.
func DeliveryStatus(in *Intent) string {
	best := ""
	if in.History != nil {
		best = in.History.Delivery
	}
	for _, a := range in.Attempts {
		if provesEffect(a) &&
			DeliveryRank(a.Evidence.ProviderCode) > DeliveryRank(best) {
			best = a.Evidence.ProviderCode
		}
	}
	return best
}

func provesEffect(a Attempt) bool {
	return a.Trigger == TriggerWebhook && (a.Result == ResultAck || a.Result == ResultStatus)
}
