package webhook

import (
	"testing"

	"github.com/botharness/outbox/adapters/providers/sandboxprovider"
	"github.com/botharness/outbox/adapters/webhooksig"
)

// FuzzSandboxDecode: event decoding never panics, and what it accepts is
// bound to the signed request (event id = webhook-id header, account = the
// URL's) and passes core's validation or is refused by it cleanly.
func FuzzSandboxDecode(f *testing.F) {
	f.Add("a1", "evt_1", []byte(`{"type":"message.acknowledged","timestamp":"2030-01-01T00:00:00Z","data":{"eventId":"evt_1","account":"a1","messageId":"sbx_1","idempotencyKey":"it_x"}}`))
	f.Add("a1", "evt_2", []byte(`{"type":"message.status","data":{"eventId":"evt_2","account":"a1","messageId":"sbx_1","status":"read"}}`))
	f.Add("a1", "evt_3", []byte(`{"type":"message.received","data":{"eventId":"evt_3","account":"a1","text":"hi"}}`))
	f.Add("a1", "evt_4", []byte(`{"type":"message.echo","data":{"eventId":"evt_4","account":"a2","messageId":"m"}}`))
	f.Add("a1", "evt_5", []byte(`{"type":"x","data":[]} {}`))
	f.Add("", "", []byte(`{"type":"message.acknowledged","data":{"eventId":"","account":""}}`))
	s := &sandboxprovider.Webhook{}
	f.Fuzz(func(t *testing.T, account, eventID string, body []byte) {
		ev, err := s.Decode(account, map[string]string{webhooksig.HeaderID: eventID}, body)
		if err != nil {
			return
		}
		if ev.EventID == "" || ev.EventID != eventID {
			t.Fatalf("event id %q not bound to the signed webhook-id %q", ev.EventID, eventID)
		}
		if ev.Account != account {
			t.Fatalf("account %q not bound to the URL's %q", ev.Account, account)
		}
		_ = ev.Validate() // must not panic; core refuses what it cannot use
	})
}
